// SiLU and SiLU's derivative for the CPU backend's `#pragma omp simd` loops, on an exp of its own
// (issue 23; glibc's libmvec expf before): straight-line float code (bit casts through memcpy,
// selects instead of branches) that GCC and Clang inline and vectorise at the loop's width (SSE2,
// AVX2 or AVX-512 in vec.cpp's clones), with no call, no library and no tables. On the dev
// machine (AMD EPYC, AVX2) the degree-6 exp below costs 0.33 ns per element on L1-resident rows
// against 0.45-0.48 for libmvec's AVX2 expf; SiLU itself is bound by its division (2.5 cycles per
// 8 lanes) and the two FMA pipes. Torch-free; internal to csrc/cpu and the tests.
//
// Both need only e = exp(-|a|), in (0, 1]: it cannot overflow, and the sigmoid follows without
// cancellation on either side, s = 1 / (1 + e) for a >= 0 and e / (1 + e) for a < 0 (1 - s is the
// other one).
//
// exp_neg_abs<kDegree>(a) = exp(-|a|) in two versions:
//   - degree 6 (fp32 outputs, the backward): -|a| = k ln2 + r with k = round(-|a| / ln2) and
//     |r| <= ln2 / 2 (ln2 in two parts, the first with 15 significant bits so k * ln2_hi and
//     |a| + k * ln2_hi are exact), exp(r) by a polynomial with constant term 1, minimax for
//     relative error on [-ln2/2, ln2/2] (Remez, coefficients rounded to float; 2.6e-9 for the
//     polynomial, 2.9e-8 with float coefficients), times 2^k by a multiply (exact: the result is a
//     normal float for |a| <= 87);
//   - degree 4 (outputs rounded to bf16 next, whose half ulp is at least 2^-9): 2^f with
//     f = -|a| log2(e) - k in [-1/2, 1/2] (one FMA: the float log2(e) is 1.3e-8 off, so f is off
//     by up to 1.7e-6 at |a| = 86), by the degree-4 polynomial of exp(r) (3.6e-6) with its
//     coefficients times ln2^j, and 2^k added to the result's exponent bits (an integer add, no
//     multiply; exact while k >= -124, which the flush at 86 keeps). Two multiply-pipe operations
//     fewer than degree 6's reduction and scaling: the SiLU loops on AVX2 are bound by the two FMA
//     pipes (silu + bf16 store measured 0.61 against 0.66 ns per element on L1-resident rows, the
//     dev machine, AMD EPYC, AVX2).
//
// Error against the exact exp(-|a|), over every one of the 2^32 floats a (measured by
// tests/cpp/test_cpu_vmath.cpp with CAUSAL_CONV1D_VMATH_STEP=1; its default run sweeps every 127th
// bit pattern and the flush edges densely, holding the bounds below):
//   - degree 6, |a| <= 87: at most kExpMaxUlp = 1.5 ulp (relative error 1.8e-7): 1.19 ulp with
//     FMA (the x86-64-v3 clone; v4 runs the same operations), 1.48 ulp with separate multiply and
//     add (the SSE2 baseline); |a| > 87, also +-inf: +0 (the exact value is below 1.65e-38);
//   - degree 4, |a| <= 86: relative error at most kExp4MaxRel (see there for the measured value);
//     |a| > 86, also +-inf: +0 (the exact value is below 4.5e-38);
//   - NaN: NaN. exp_neg_abs(+-0) = 1 exactly.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__GNUC__)
#define CC_VMATH_INLINE __attribute__((always_inline)) inline
#else
#define CC_VMATH_INLINE inline
#endif

namespace causal_conv1d::cpu::vmath {

// The bounds the tests hold these functions to (see each function).
constexpr double kExpMaxUlp = 1.5;
// Degree 4, measured on every 3rd bit pattern (CAUSAL_CONV1D_VMATH_STEP=3): exp 4.76e-6 with FMA,
// 7.37e-6 without; silu 4.78e-6 / 7.38e-6 (without FMA the product |a| log2(e) is rounded before
// k is taken off). Both 0.4% of bf16's half ulp.
constexpr double kExp4MaxRel = 8e-6;
constexpr double kSiluMaxUlp = 3.5;
constexpr double kSilu4MaxRel = 8e-6;
constexpr double kDsiluMaxErr = 6.0;
// Above this |a|, exp_neg_abs<6> gives +0; exp_neg_abs<4> above kExpNegAbsFlush4.
constexpr float kExpNegAbsFlush = 87.0f;
constexpr float kExpNegAbsFlush4 = 86.0f;

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

namespace detail {
// exp_neg_abs<4> but for NaN inputs, which may give any value here (silu<4> returns its NaN
// numerator then, whatever the denominator).
CC_VMATH_INLINE float exp_neg_abs4_any_nan(float a) {
  const float y = as_float(as_bits(a) & 0x7fffffffu);  // |a|
  // k = round(-y log2(e)) in [-124, 0] for y <= 86 (1.5 * 2^23 leaves it in the low mantissa
  // bits), f = -y log2(e) - k. Larger y (also inf) give garbage and are replaced by 0 at the end.
  constexpr float kShift = 0x1.8p23f;
  const float kf = y * -0x1.715476p+0f + kShift;
  const float k = kf - kShift;
  const float f = y * -0x1.715476p+0f - k;
  float p = 0x1.409104p-7f;
  p = p * f + 0x1.ca9008p-5f;
  p = p * f + 0x1.ebf1b4p-3f;
  p = p * f + 0x1.62dfc8p-1f;
  p = p * f + 1.0f;
  // p in [0.7, 1.42] times 2^k through the exponent bits: bits(kf) << 23 is k << 23 (the shift's
  // own bits wrap to 0), and the exponent stays >= 1 for k >= -124.
  const float e = as_float(as_bits(p) + (as_bits(kf) << 23));
  return y > kExpNegAbsFlush4 ? 0.0f : e;
}
}  // namespace detail

template <int kDegree>
CC_VMATH_INLINE float exp_neg_abs(float a) {
  static_assert(kDegree == 6 || kDegree == 4, "exp_neg_abs: degree 6 (fp32) or 4 (bf16 outputs)");
  if constexpr (kDegree == 4) {
    const float e = detail::exp_neg_abs4_any_nan(a);
    return a != a ? a : e;
  } else {
    const float y = as_float(as_bits(a) & 0x7fffffffu);  // |a|
    // k = round(-y / ln2) in [-126, 0] for y <= 87: adding 1.5 * 2^23 leaves k in the low
    // mantissa bits. Larger y (also inf) give garbage here and are replaced by 0 at the end; NaN
    // stays NaN.
    constexpr float kShift = 0x1.8p23f;
    const float kf = y * -0x1.715476p+0f + kShift;
    const float k = kf - kShift;
    const float t = (y + k * 0x1.62e4p-1f) + k * 0x1.7f7d1cp-20f;  // -r; ln2 = 0x1.62e4p-1 + 0x1.7f7d1cp-20
    // exp(r) = p(-t): the polynomial's odd coefficients negated.
    float p = 0x1.709b64p-10f;
    p = p * t - 0x1.12903ep-7f;
    p = p * t + 0x1.55515ep-5f;
    p = p * t - 0x1.5553c2p-3f;
    p = p * t + 0x1.000002p-1f;
    p = p * t - 1.0f;
    p = p * t + 1.0f;
    // 2^k from k << 23 added to 1.0f's bits: a normal float for k in [-126, 0], and p * 2^k is
    // exact (p is in [0.7, 1.42], and k = -126 only where p > 1). A multiply rather than an add to
    // p's bits: NaN stays NaN.
    const float e = p * as_float((as_bits(kf) << 23) + 0x3f800000u);
    return y > kExpNegAbsFlush ? 0.0f : e;
  }
}

// silu(a) = a / (1 + exp(-a)) = (a >= 0 ? a : a * e) / (1 + e) with e = exp(-|a|), over every
// float a: degree 6 at most kSiluMaxUlp ulp from the exact value (3.34 measured with FMA, 3.46
// without); degree 4 a relative error at most kSilu4MaxRel (absolute, in units of FLT_MIN, for
// results below it). a < -87 (degree 6) or -86 (degree 4) gives -0 (the exact value is below
// 1.5e-36 / 3.9e-36 in magnitude); +inf: +inf; -inf and NaN: NaN, as the formula in any precision
// (-inf / inf).
template <int kDegree>
CC_VMATH_INLINE float silu(float a) {
  const float e = kDegree == 4 ? detail::exp_neg_abs4_any_nan(a) : exp_neg_abs<kDegree>(a);
  return (a < 0.0f ? a * e : a) / (1.0f + e);
}

// g * silu'(y) = g * s * (1 + y * (1 - s)), s = sigmoid(y), as PyTorch's silu_backward, with s
// and 1 - s from e = exp(-|y|) as above. The bracket cancels near y = -1.28 (where silu' is 0), so
// the bound is absolute: |error| <= kDsiluMaxErr * 2^-24 * |g| * (1 + |y|) * max(s, 2^-126), over
// every float y (5.28 measured with FMA, 5.79 without). y < -87: +-0 (the exact value is below
// 1.5e-36 |g|); y = +-inf: NaN (inf * 0), as the formula in any precision.
CC_VMATH_INLINE float dsilu_times(float y, float g) {
  const float e = exp_neg_abs<6>(y);
  const float q = 1.0f / (1.0f + e), eq = e * q;
  const bool neg = y < 0.0f;
  const float s = neg ? eq : q;    // sigmoid(y)
  const float oms = neg ? q : eq;  // 1 - sigmoid(y)
  return g * s * (1.0f + y * oms);
}

}  // namespace causal_conv1d::cpu::vmath
