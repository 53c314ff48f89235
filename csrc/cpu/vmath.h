// exp, SiLU and SiLU's derivative as straight-line float code (bit casts through memcpy, selects
// instead of branches) that GCC and Clang inline into the CPU backend's `#pragma omp simd` loops
// and vectorise at the loop's width (SSE2, AVX2 or AVX-512 in vec.cpp's clones). A libm call
// (glibc's libmvec expf, used before issue 23) cannot be fused into a loop: the call spills every
// live register, so SiLU had to be a separate pass, and libmvec's AVX-512 expf alone cost
// 0.35-0.45 ns per element. Torch-free; internal to csrc/cpu and the tests.
//
// exp(x): x = k ln2 + r with k = round(x / ln2) and |r| <= ln2 / 2 (ln2 in two parts, the first
// with 15 significant bits so k * ln2_hi and x - k * ln2_hi are exact), exp(r) by a degree-6
// polynomial with constant term 1 (minimax for relative error on [-ln2/2, ln2/2]: 2.6e-9, 2.9e-8
// with its coefficients rounded to float), then the result times 2^k as two powers of two,
// 2^(k/2) * 2^(k - k/2), each a normal float: results in the subnormal range round once, and x
// above ln(FLT_MAX) = 88.7228 overflows to +inf in the multiply.
//
// Error against the exact exp(x), in ulp of the exact value (2^-149 where it is below FLT_MIN),
// measured over every one of the 2^32 floats x (tests/cpp/test_cpu_vmath.cpp; its default run
// sweeps every 127th bit pattern and the under- and overflow edges densely, holding kExpMaxUlp):
//   - 1.19 ulp with FMA (the x86-64-v3 clone; v4 runs the same operations), 1.48 ulp with
//     separate multiply and add (the SSE2 baseline): relative error <= 1.5 * 2^-23 = 1.8e-7 for
//     normal results (x >= -87.34), and within 1.5 subnormal steps for subnormal ones;
//   - x < -103.97 (exp(x) < 2^-150, also -inf): +0; x > 88.7228 (also +inf): +inf; NaN: NaN;
//     exp(+-0) = 1 exactly.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__GNUC__)
#define CC_VMATH_INLINE __attribute__((always_inline)) inline
#else
#define CC_VMATH_INLINE inline
#endif

namespace causal_conv1d::cpu::vmath {

// The bound the tests hold exp to (ulp of the exact result).
constexpr double kExpMaxUlp = 1.5;

CC_VMATH_INLINE float as_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
CC_VMATH_INLINE uint32_t as_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

CC_VMATH_INLINE float exp(float x) {
  // Clamp (NaN passes: both comparisons are false) so that k fits the two-factor scaling below:
  // exp(-104) < 2^-150 rounds to +0 and exp(89) > FLT_MAX is +inf, like any x beyond them.
  x = x < -104.0f ? -104.0f : x;
  x = x > 89.0f ? 89.0f : x;
  // k = round(x / ln2) in [-150, 128]: adding 1.5 * 2^23 leaves k in the low mantissa bits.
  constexpr float kShift = 0x1.8p23f;
  const float kf = x * 0x1.715476p+0f + kShift;
  const float k = kf - kShift;
  const float r = (x - k * 0x1.62e4p-1f) - k * 0x1.7f7d1cp-20f;  // ln2 = 0x1.62e4p-1 + 0x1.7f7d1cp-20
  float p = 0x1.709b64p-10f;
  p = p * r + 0x1.12903ep-7f;
  p = p * r + 0x1.55515ep-5f;
  p = p * r + 0x1.5553c2p-3f;
  p = p * r + 0x1.000002p-1f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // 2^k = 2^k1 * 2^k2 with k1 = floor(k / 2), k2 = k - k1, both in [-75, 64]: normal floats.
  const int32_t ki = int32_t(as_bits(kf) - as_bits(kShift));
  const int32_t k1 = ki >> 1, k2 = ki - k1;
  return p * as_float(uint32_t(k1 + 127) << 23) * as_float(uint32_t(k2 + 127) << 23);
}

// silu(a) = a / (1 + exp(-a)): exp's error, one rounding of the sum and one of the quotient, at
// most kSiluMaxUlp ulp (2.33 measured: the same in both clones). a < -88.72: -0 (exp(-a) is inf;
// the exact value is below 2.7e-37 in magnitude); a = +inf: +inf; a = -inf or NaN: NaN, as the
// formula gives in any precision.
constexpr double kSiluMaxUlp = 2.5;
CC_VMATH_INLINE float silu(float a) { return a / (1.0f + vmath::exp(-a)); }

// g * silu'(y) = g * s * (1 + y * (1 - s)) with s = sigmoid(y) = 1 / (1 + exp(-y)), as PyTorch's
// silu_backward. The bracket cancels near y = -1.28 (where silu' is 0), so the error bound is
// absolute: |error| <= kDsiluMaxErr * 2^-24 * |g| * (1 + |y|) * max(s, 2^-126) (s is subnormal
// below y = -87.3). y < -88.72: +-0 (the exact value
// is below 2.7e-37 |g|); y = +-inf: NaN (inf * 0), as the formula in any precision.
constexpr double kDsiluMaxErr = 5.0;  // 4.48 measured
CC_VMATH_INLINE float dsilu_times(float y, float g) {
  const float s = 1.0f / (1.0f + vmath::exp(-y));
  return g * s * (1.0f + y * (1.0f - s));
}

}  // namespace causal_conv1d::cpu::vmath
