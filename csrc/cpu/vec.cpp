// See vec.h. Every loop here is a `#pragma omp simd` loop over contiguous floats (compiled with
// -fopenmp-simd -fno-math-errno -fno-trapping-math); the width is a template parameter so the tap
// loops unroll. SiLU and its derivative come from vmath.h, inlined into the loops.
#include "vec.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "causal_conv1d/numeric.h"
#include "vmath.h"

// Clones are picked at load time through an ifunc (GCC, glibc).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__)
#define CC_CPU_CLONES __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
// The bf16 output pass's AVX512-BF16 variant (finish_bf16_cvt below), picked at run time.
#define CC_HAVE_BF16_CVT 1
#include <immintrin.h>
#else
#define CC_CPU_CLONES
#endif
// The kernels below must be inlined into each clone: a call from a clone to an out-of-line
// template runs the baseline (SSE2) code.
#if defined(__GNUC__)
#define CC_VEC_INLINE __attribute__((always_inline)) inline
#else
#define CC_VEC_INLINE inline
#endif

namespace causal_conv1d::cpu::vec {

namespace {

using vmath::as_bits;
using vmath::as_float;

// Element types of the rows a kernel reads or writes in place: S is the storage, load widens to
// float, store rounds to nearest even (as PyTorch); kVecStore: store vectorises.
struct F32 {
  using S = float;
  static constexpr bool kVecStore = true;
  static CC_VEC_INLINE float load(float v) { return v; }
  static CC_VEC_INLINE float store(float v) { return v; }
};
struct Bf16 {
  using S = uint16_t;
  static constexpr bool kVecStore = true;
  static CC_VEC_INLINE float load(uint16_t b) { return as_float(uint32_t(b) << 16); }
  static CC_VEC_INLINE uint16_t store(float f) {
    // NaN becomes the quiet NaN 0x7fc0, as PyTorch's c10::BFloat16; chosen on the float before
    // the rounding (whose carry a NaN's payload could push into the sign) so the rest is plain
    // integer work: measured 13% cheaper than selecting after it, which GCC moves past the
    // truncation into 16-bit blends.
    const uint32_t u = as_bits(f != f ? as_float(0x7fc00000u) : f);
    return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);  // to nearest even
  }
};
// fp16 through _Float16 (F16C in the v3 / v4 clones), where the compiler has it. GCC does not
// vectorise these conversions (not even with F16C), so loops storing fp16 stage through float
// blocks and convert in a loop of their own (kVecStore false); an integer version that does
// vectorise measured slower than the scalar F16C instructions on AMD EPYC.
#if defined(__FLT16_MAX__)
struct F16 {
  using S = _Float16;
  static constexpr bool kVecStore = false;
  static CC_VEC_INLINE float load(_Float16 h) { return float(h); }
  static CC_VEC_INLINE _Float16 store(float f) { return _Float16(f); }
};
#else
struct F16 {
  using S = uint16_t;
  static constexpr bool kVecStore = false;
  static CC_VEC_INLINE float load(uint16_t h) { return half_to_float(h); }
  static CC_VEC_INLINE uint16_t store(float f) { return float_to_half(f); }
};
#endif

// act(a): a, or silu(a) with the degree-6 exp (update_step: float rows in place).
template <bool kSilu>
CC_VEC_INLINE float act(float a) {
  if constexpr (kSilu) {
    return vmath::silu<6>(a);
  } else {
    return a;
  }
}

// The degree of SiLU's exp for outputs of element type E: 6 for fp32 (1.5 ulp), 4 for 16-bit
// outputs (relative error 8e-6, far below their rounding: bf16 / fp16 half ulp 2^-9 / 2^-11).
template <typename E>
constexpr int kSiluDegree = std::is_same_v<E, F32> ? 6 : 4;

#if defined(CC_HAVE_BF16_CVT)
// The bf16 output pass on CPUs with AVX512-BF16 (Intel Sapphire Rapids and later, AMD Zen 4 and
// later): SiLU in place over y (vectorised by the compiler, as finish_t), then the rounding by
// vcvtneps2bf16, one instruction for 16 lanes where the integer form (Bf16::store) takes five
// plus the NaN select. The instruction rounds to nearest even as PyTorch does but treats denormal
// inputs as zero and keeps a NaN's sign and payload, so a vector holding a NaN or a denormal
// (vfpclassps, one test a vector) is rounded by Bf16::store instead: the same bits as the integer
// form for every float (tests/cpp/test_cpu_vmath.cpp). The two loops take turns every kSub
// outputs: one SiLU pass over a whole 512-output block and then its stores made the channel-last
// bf16 forward 5-8% slower on rotated (DRAM-cold) buffers, its output stores coming in a burst;
// at 128 a turn it is as fast as the integer form there. Intel Xeon VM (AVX512-BF16), 2 threads,
// bf16 (2, 1024, 4096) SiLU + bias into out, alternated processes, three rounds (ms): L2/L3-hot
// buffers cf 1.83-2.02 -> 1.73-1.83, cl 1.75-1.82 -> 1.59-1.66; rotated buffers the same within
// the VM's spread (cf 2.36-2.55 / 2.33-2.62, cl 2.39-2.45 / 2.36-2.47). 512 L1-resident outputs:
// 0.340-0.347 -> 0.293-0.296 ns an element (benchmarks/NOTES.md, forty-first session).
__attribute__((target("arch=x86-64-v4,avx512bf16"), noinline)) void finish_bf16_cvt(float* __restrict y,
                                                                                    uint16_t* __restrict out, int64_t n,
                                                                                    bool silu) {
  constexpr int64_t kSub = 128;
  int64_t i = 0;
  for (int64_t i0 = 0; i0 + 16 <= n; i0 += kSub) {
    const int64_t i1 = i0 + kSub <= n ? i0 + kSub : n / 16 * 16;
    if (silu) {
#pragma omp simd
      for (int64_t k = i0; k < i1; ++k) y[k] = vmath::silu<4>(y[k]);
    }
    for (i = i0; i < i1; i += 16) {
      const __m512 v = _mm512_loadu_ps(y + i);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v)));
      if (__builtin_expect(_mm512_fpclass_ps_mask(v, 0xa1) != 0, 0))  // QNaN 0x01, denormal 0x20, SNaN 0x80
        for (int j = 0; j < 16; ++j) out[i + j] = Bf16::store(y[i + j]);
    }
  }
  if (silu) {
    for (int64_t k = i; k < n; ++k) y[k] = vmath::silu<4>(y[k]);
  }
  for (; i < n; ++i) out[i] = Bf16::store(y[i]);
}

bool bf16_cvt_supported() {
  static const bool kHave = __builtin_cpu_supports("avx512bf16");
  return kHave;
}
#endif

// The output pass: out[i] = store(silu(y[i])) (or store(y[i])); y may be out itself for fp32,
// and is scratch (overwritten) for 16-bit outputs. For fp16 (no vector conversion) SiLU goes in
// place over y, then the conversion on its own; bf16 takes finish_bf16_cvt where the CPU can.
template <typename E, bool kSilu>
CC_VEC_INLINE void finish_t(float* y, void* ov, int64_t n) {
  typename E::S* out = static_cast<typename E::S*>(ov);
#if defined(CC_HAVE_BF16_CVT)
  if constexpr (std::is_same_v<E, Bf16>) {
    if (n >= 16 && bf16_cvt_supported()) {
      finish_bf16_cvt(y, out, n, kSilu);
      return;
    }
  }
#endif
  if constexpr (!E::kVecStore) {
    if constexpr (kSilu) finish_t<F32, true>(y, y, n);
    for (int64_t i = 0; i < n; ++i) out[i] = E::store(y[i]);
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (kSilu) {
        out[i] = E::store(vmath::silu<kSiluDegree<E>>(y[i]));
      } else {
        out[i] = E::store(y[i]);
      }
    }
  }
}

// Outputs [i0, i1) of a channel-first row (i0 >= width - 1: every tap inside x) into y.
template <int kW>
CC_VEC_INLINE void taps_t(const float* __restrict x, float* __restrict y, int64_t i0, int64_t i1, const float* wk,
                          float bias) {
  constexpr int kH = kW - 1;
  const float* __restrict xb = x - kH;  // xb[i + k] = x[i - kH + k]
#pragma omp simd
  for (int64_t i = i0; i < i1; ++i) {
    float a = bias;
    for (int k = 0; k < kW; ++k) a += wk[k] * xb[i + k];
    y[i - i0] = a;
  }
}

// Outputs in blocks of kFinishBlock: the taps into a float block (out itself for fp32), then
// SiLU and the conversion as a second pass over it while it is in L1. One loop for both measured
// 6-9% slower on the dev machine (AMD EPYC, AVX2; L1-resident rows; probably because each lane's
// exp then waits on its four dependent tap FMAs). Without SiLU, one pass (taps and conversion).
constexpr int64_t kFinishBlock = 512;

// Outputs [i_begin, n) of a channel-first row whose inputs x[i - (width - 1)] are all readable
// for i >= i_begin, in blocks of kFinishBlock. Before each block a slice of [ahead, ahead +
// ahead_bytes) (input the caller reads later, or null) is prefetched: spread, so the prefetches
// do not queue ahead of the block's own loads (all at once before the first block: 13-20% slower
// on an Intel Xeon VM; see conv_row_padded).
template <int kW, typename E, bool kSilu>
CC_VEC_INLINE void row_blocks_t(const float* __restrict x, typename E::S* __restrict out, int64_t i_begin, int64_t n,
                                const float* wk, float bias, const char* ahead, int64_t ahead_bytes) {
  constexpr int kH = kW - 1;
  const int64_t blocks = (n - i_begin + kFinishBlock - 1) / kFinishBlock;
  const int64_t lines = ahead == nullptr ? 0 : (ahead_bytes + 63) / 64;
  int64_t line = 0, block = 0;
  for (int64_t i0 = i_begin; i0 < n; i0 += kFinishBlock) {
    const int64_t i1 = i0 + kFinishBlock < n ? i0 + kFinishBlock : n;
    for (const int64_t upto = lines * ++block / blocks; line < upto; ++line) __builtin_prefetch(ahead + line * 64);
    if constexpr (!kSilu && E::kVecStore) {
      const float* __restrict xb = x - kH;
#pragma omp simd
      for (int64_t i = i0; i < i1; ++i) {
        float a = bias;
        for (int k = 0; k < kW; ++k) a += wk[k] * xb[i + k];
        out[i] = E::store(a);
      }
    } else {
      float block_y[std::is_same_v<E, F32> ? 1 : kFinishBlock];
      float* y = std::is_same_v<E, F32> ? reinterpret_cast<float*>(out + i0) : block_y;
      taps_t<kW>(x, y, i0, i1, wk, bias);
      finish_t<E, kSilu>(y, out + i0, i1 - i0);
    }
  }
}

template <int kW, typename E, bool kSilu>
CC_VEC_INLINE void conv_row_t(const float* halo, const float* __restrict x, void* ov, int64_t n, const float* w,
                              float bias) {
  using S = typename E::S;
  S* __restrict out = static_cast<S*>(ov);
  constexpr int kH = kW - 1;
  float wk[kW];
  for (int k = 0; k < kW; ++k) wk[k] = w[k];
  // Outputs whose taps reach into the halo, element by element.
  const int64_t head = n < kH ? n : kH;
  for (int64_t i = 0; i < head; ++i) {
    float a = bias;
    for (int k = 0; k < kW; ++k) {
      const int64_t j = i - kH + k;
      a += wk[k] * (j < 0 ? halo[kH + j] : x[j]);
    }
    finish_t<E, kSilu>(&a, out + i, 1);
  }
  row_blocks_t<kW, E, kSilu>(x, out, kH, n, wk, bias, nullptr, 0);
}

template <int kW, typename E, bool kSilu>
CC_VEC_INLINE void conv_row_padded_t(const float* xp, void* ov, int64_t n, const float* w, float bias,
                                     const void* ahead, int64_t ahead_bytes) {
  float wk[kW];
  for (int k = 0; k < kW; ++k) wk[k] = w[k];
  row_blocks_t<kW, E, kSilu>(xp + (kW - 1), static_cast<typename E::S*>(ov), 0, n, wk, bias,
                             static_cast<const char*>(ahead), ahead_bytes);
}

// Channel-last, kS steps over channels [c0, c0 + n), results stored as E into o[s][0 .. n): per
// channel the weights and the window stay in registers (named scalars: arrays inside a simd loop
// become memory) over the kS steps, each step one row load and one row store. The window is x0
// (oldest) .. x2 and the tap weights of a width-kW filter are the last kW of w0..w3.
// The input rows are of element type In (F32, or Bf16: x's own rows, widened in the loop).
template <int kW, int kS, typename In, typename E>
CC_VEC_INLINE void col_taps_t(const typename In::S* const* r, typename E::S* const* o, int64_t c0, int64_t n,
                              const float* __restrict wt, int64_t ld, const float* __restrict bias) {
  static_assert(kW >= 2 && kW <= 4, "the window below is written out for widths 2 to 4");
  constexpr int kH = kW - 1;
  const typename In::S* __restrict rr[kH + kS];
  typename E::S* __restrict oo[kS];
  for (int k = 0; k < kH + kS; ++k) rr[k] = r[k] + c0;
  for (int s = 0; s < kS; ++s) oo[s] = o[s];
  const float* __restrict w0 = wt + c0;
  const float* __restrict w1 = wt + ld + c0;
  const float* __restrict w2 = wt + 2 * ld + c0;
  const float* __restrict w3 = wt + 3 * ld + c0;
  const float* __restrict bc0 = bias + c0;
#pragma omp simd
  for (int64_t c = 0; c < n; ++c) {
    const float bc = bc0[c];
    const float k0 = kW == 4 ? w0[c] : 0.0f;
    const float k1 = kW >= 3 ? (kW == 4 ? w1[c] : w0[c]) : 0.0f;
    const float k2 = kW == 4 ? w2[c] : kW == 3 ? w1[c] : w0[c];
    const float k3 = kW == 4 ? w3[c] : kW == 3 ? w2[c] : w1[c];
    float x0 = kW == 4 ? In::load(rr[0][c]) : 0.0f;
    float x1 = kW >= 3 ? In::load(rr[kH - 2][c]) : 0.0f;
    float x2 = In::load(rr[kH - 1][c]);
#pragma GCC unroll 8  // kMaxColSteps
    for (int s = 0; s < kS; ++s) {
      const float x3 = In::load(rr[kH + s][c]);
      float a = bc + k2 * x2 + k3 * x3;
      if constexpr (kW >= 3) a += k1 * x1;
      if constexpr (kW == 4) a += k0 * x0;
      oo[s][c] = E::store(a);
      x0 = x1;
      x1 = x2;
      x2 = x3;
    }
  }
}

// Prefetches the cache lines of p[0, n).
template <typename S>
CC_VEC_INLINE void prefetch_span(const S* p, int64_t n) {
  const char* c = reinterpret_cast<const char*>(p);
  for (int64_t q = 0; q < n * int64_t(sizeof(S)); q += 64) __builtin_prefetch(c + q);
}

// kS steps of a channel-last task. Without SiLU the taps store in the output's dtype directly;
// with SiLU they go, kFinishBlock channels at a time, into float rows (out's own for fp32) that
// the output pass then finishes (see conv_row_t). next: null, or kS rows (null entries skipped)
// whose channels [0, n) are prefetched, each block of channels its slice of them, one row per
// step's output pass.
template <int kW, int kS, typename In, typename E, bool kSilu>
CC_VEC_INLINE void conv_cols_t(const typename In::S* const* rows, void* const* outs, int64_t n,
                               const float* __restrict wt, int64_t ld, const float* __restrict bias,
                               const void* const* next) {
  using S = typename E::S;
  S* o[kS];
  for (int s = 0; s < kS; ++s) o[s] = static_cast<S*>(outs[s]);
  const auto prefetch = [&](int s, int64_t c0, int64_t m) {
    if (next != nullptr && next[s] != nullptr) prefetch_span(static_cast<const typename In::S*>(next[s]) + c0, m);
  };
  if constexpr (!kSilu && E::kVecStore) {
    if (next == nullptr) {
      col_taps_t<kW, kS, In, E>(rows, o, 0, n, wt, ld, bias);
      return;
    }
    for (int64_t c0 = 0; c0 < n; c0 += kFinishBlock) {
      const int64_t m = c0 + kFinishBlock < n ? kFinishBlock : n - c0;
      S* ob[kS];
      for (int s = 0; s < kS; ++s) ob[s] = o[s] + c0, prefetch(s, c0, m);
      col_taps_t<kW, kS, In, E>(rows, ob, c0, m, wt, ld, bias);
    }
  } else {
    float block[kS][std::is_same_v<E, F32> ? 1 : kFinishBlock];
    for (int64_t c0 = 0; c0 < n; c0 += kFinishBlock) {
      const int64_t m = c0 + kFinishBlock < n ? kFinishBlock : n - c0;
      float* y[kS];
      for (int s = 0; s < kS; ++s) y[s] = std::is_same_v<E, F32> ? reinterpret_cast<float*>(o[s] + c0) : block[s];
      col_taps_t<kW, kS, In, F32>(rows, y, c0, m, wt, ld, bias);
      for (int s = 0; s < kS; ++s) {
        prefetch(s, c0, m);
        finish_t<E, kSilu>(y[s], o[s] + c0, m);
      }
    }
  }
}

template <int kW>
CC_VEC_INLINE void conv_row_bwd_t(const float* __restrict xs, const float* __restrict g, float* __restrict dy,
                                  float* __restrict dx, int64_t n, const float* w, float bias, bool silu, double* dw,
                                  double* db) {
  static_assert(kW >= 2 && kW <= 4, "the fused reduction below has four tap accumulators");
  constexpr int kH = kW - 1;
  float wk[kW];
  for (int k = 0; k < kW; ++k) wk[k] = w[k];
  const int64_t m = n + kH;  // dy of the n own outputs and the kH after them (needed by dx)
  if (silu) {
#pragma omp simd
    for (int64_t i = 0; i < m; ++i) {
      float y = bias;
      for (int k = 0; k < kW; ++k) y += wk[k] * xs[i + k];
      dy[i] = vmath::dsilu_times(y, g[i]);
    }
  } else {
#pragma omp simd
    for (int64_t i = 0; i < m; ++i) dy[i] = g[i];
  }
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    float a = 0.0f;
    for (int k = 0; k < kW; ++k) a += wk[k] * dy[j + kH - k];
    dx[j] = a;
  }
  // db and the kW dw taps in one pass over dy (one accumulator each; taps past kW stay zero).
  float sb = 0.0f, s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
#pragma omp simd reduction(+ : sb, s0, s1, s2, s3)
  for (int64_t i = 0; i < n; ++i) {
    const float d = dy[i];
    sb += d;
    s0 += d * xs[i];
    s1 += d * xs[i + 1];
    if constexpr (kW > 2) s2 += d * xs[i + 2];
    if constexpr (kW > 3) s3 += d * xs[i + 3];
  }
  *db += sb;
  const float s[4] = {s0, s1, s2, s3};
  for (int k = 0; k < kW; ++k) dw[k] += s[k];
}

template <int kW>
CC_VEC_INLINE void conv_cols_bwd_t(const float* const* x_rows, const float* __restrict g, float* __restrict dy_out,
                                   const float* const* dy_rows, float* __restrict dx_out, int64_t n,
                                   const float* __restrict wt, int64_t ld, const float* __restrict bias, bool silu,
                                   bool accumulate, float* __restrict dw, float* __restrict db) {
  const float* __restrict xr[kW];
  const float* __restrict wr[kW];
  for (int k = 0; k < kW; ++k) xr[k] = x_rows[k], wr[k] = wt + k * ld;
  if (silu) {
#pragma omp simd
    for (int64_t c = 0; c < n; ++c) {
      float y = bias[c];
      for (int k = 0; k < kW; ++k) y += wr[k][c] * xr[k][c];
      dy_out[c] = vmath::dsilu_times(y, g[c]);
    }
  } else {
#pragma omp simd
    for (int64_t c = 0; c < n; ++c) dy_out[c] = g[c];
  }
  if (accumulate) {  // one pass for the kW taps and the bias
    float* __restrict d0 = dw;
    float* __restrict d1 = dw + ld;
    float* __restrict d2 = dw + (kW > 2 ? 2 : 1) * ld;
    float* __restrict d3 = dw + (kW > 3 ? 3 : 1) * ld;
#pragma omp simd
    for (int64_t c = 0; c < n; ++c) {
      const float d = dy_out[c];
      db[c] += d;
      d0[c] += d * xr[0][c];
      d1[c] += d * xr[1][c];
      if constexpr (kW > 2) d2[c] += d * xr[2][c];
      if constexpr (kW > 3) d3[c] += d * xr[3][c];
    }
  }
  if (dy_rows != nullptr) {
    const float* __restrict dr[kW];
    for (int k = 0; k < kW; ++k) dr[k] = dy_rows[k];
#pragma omp simd
    for (int64_t c = 0; c < n; ++c) {
      float a = 0.0f;
      for (int k = 0; k < kW; ++k) a += wr[k][c] * dr[k][c];
      dx_out[c] = a;
    }
  }
}

#if defined(__has_builtin)
#if __has_builtin(__builtin_shufflevector)
#define CC_HAVE_SHUFFLEVECTOR 1
#endif
#endif
#if defined(CC_HAVE_SHUFFLEVECTOR)
// 8 values as one vector (GCC / Clang vector extension): each clone lowers the constant shuffles
// below to its own instructions (SSE registers in the baseline, AVX registers in v3 / v4). The
// helpers taking and returning vectors are always inlined, so the compilers' note that a 32-byte
// vector argument has no fixed ABI without AVX (-Wpsabi) concerns no call that exists. Off for the rest of
// the file: GCC reports it where the templates are instantiated, at the end of the file.
#if defined(__GNUC__)  // GCC and Clang
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
typedef float V8 __attribute__((vector_size(32)));
typedef uint16_t U16x8 __attribute__((vector_size(16)));
typedef uint32_t U32x8 __attribute__((vector_size(32)));
template <typename V, typename S>
CC_VEC_INLINE V load8(const S* p) {
  V v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
template <typename V, typename S>
CC_VEC_INLINE void store8(S* p, const V& v) {
  std::memcpy(p, &v, sizeof(v));
}
// 8 lanes of the storage type as floats: bf16 bits move to the top of each float.
CC_VEC_INLINE V8 as_floats(const V8& v) { return v; }
CC_VEC_INLINE V8 as_floats(const U16x8& v) { return reinterpret_cast<V8>(__builtin_convertvector(v, U32x8) << 16); }
#define CC_SHUF(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)

// The decode step for state_len == width - 1 on 8 channels at c, for float (E = F32) or bf16
// (E = Bf16: the state is shifted as raw 16-bit values, only the taps are widened): the state of
// those channels is 8 * kH consecutive values (channel-major). The compiler vectorises that
// stride-kH loop with lane permutes per element; here, for width 4, each tap is taken apart with
// two blends and one permute and the shifted state is the old one loaded one value further on with
// x blended into every third lane; width 3 takes the even and odd lanes of two vectors and
// interleaves the odd ones with x; width 2 needs no shuffle. out[c..c+8): the convolution before
// the activation, as floats.
template <int kH, typename E>
CC_VEC_INLINE void window_step8(typename E::S* st, const typename E::S* x, float* out, const float* wt, int64_t ld,
                                const float* bias, int64_t c) {
  using V = std::conditional_t<std::is_same_v<E, F32>, V8, U16x8>;
  typename E::S* f = st + c * kH;
  const V xv = load8<V>(x + c);
  V8 a = load8<V8>(bias + c) + load8<V8>(wt + kH * ld + c) * as_floats(xv);
  if constexpr (kH == 3) {
    const V p = load8<V>(f), q = load8<V>(f + 8), r = load8<V>(f + 16);  // f[0..24): 8 windows of 3
    // s_k = f[3j + k], j < 8: blend the lanes that hold it in p, q, r, then put them in order.
    const V b0 = CC_SHUF(CC_SHUF(p, q, 0, 9, 2, 3, 12, 5, 6, 15), r, 0, 1, 10, 3, 4, 13, 6, 7);
    const V b1 = CC_SHUF(CC_SHUF(p, q, 0, 1, 10, 3, 4, 13, 6, 7), r, 8, 1, 2, 11, 4, 5, 14, 7);
    const V b2 = CC_SHUF(CC_SHUF(p, q, 8, 1, 2, 11, 4, 5, 14, 7), r, 0, 9, 2, 3, 12, 5, 6, 15);
    a += load8<V8>(wt + c) * as_floats(CC_SHUF(b0, b0, 0, 3, 6, 1, 4, 7, 2, 5));
    a += load8<V8>(wt + ld + c) * as_floats(CC_SHUF(b1, b1, 1, 4, 7, 2, 5, 0, 3, 6));
    a += load8<V8>(wt + 2 * ld + c) * as_floats(CC_SHUF(b2, b2, 2, 5, 0, 3, 6, 1, 4, 7));
    // The new state: f[i + 1] for i % 3 != 2, x[i / 3] for i % 3 == 2. xs holds x[j] in the lane
    // where the three result vectors need it; f[1..9) and f[9..17) are loads, f[17..24) comes
    // from r (f[24] is the next block's).
    const V xs = CC_SHUF(xv, xv, 2, 5, 0, 3, 6, 1, 4, 7);
    const V n0 = CC_SHUF(load8<V>(f + 1), xs, 0, 1, 10, 3, 4, 13, 6, 7);
    const V n1 = CC_SHUF(load8<V>(f + 9), xs, 8, 1, 2, 11, 4, 5, 14, 7);
    const V n2 = CC_SHUF(r, xs, 1, 9, 3, 4, 12, 6, 7, 15);
    store8(f, n0);
    store8(f + 8, n1);
    store8(f + 16, n2);
  } else if constexpr (kH == 2) {
    const V p = load8<V>(f), q = load8<V>(f + 8);  // f[0..16): 8 windows of 2
    const V s1 = CC_SHUF(p, q, 1, 3, 5, 7, 9, 11, 13, 15);
    a += load8<V8>(wt + c) * as_floats(CC_SHUF(p, q, 0, 2, 4, 6, 8, 10, 12, 14));
    a += load8<V8>(wt + ld + c) * as_floats(s1);
    store8(f, CC_SHUF(s1, xv, 0, 8, 1, 9, 2, 10, 3, 11));
    store8(f + 8, CC_SHUF(s1, xv, 4, 12, 5, 13, 6, 14, 7, 15));
  } else {
    static_assert(kH == 1, "widths 2 to 4");
    a += load8<V8>(wt + c) * as_floats(load8<V>(f));  // one value a channel: no shuffles
    store8(f, xv);
  }
  store8(out + c, a);
}
#undef CC_SHUF
#endif

template <int kW, bool kSilu>
CC_VEC_INLINE void update_step_t(float* st, int64_t S, const float* __restrict x, float* __restrict out, int64_t n,
                                 const float* __restrict wt, int64_t ld, const float* __restrict bias) {
  constexpr int kH = kW - 1;
  if (S == kH) {
    // The usual cache (state_len == width - 1): each channel's kH entries are the whole window.
    int64_t c0 = 0;
#if defined(CC_HAVE_SHUFFLEVECTOR)
    if constexpr (kH > 1) {
      for (; c0 + 8 <= n; c0 += 8) window_step8<kH, F32>(st, x, out, wt, ld, bias, c0);
    }
#endif
    // The rest (all of it without the vector extension): one pass with a constant stride.
    float* __restrict sv = st;
#pragma omp simd
    for (int64_t c = c0; c < n; ++c) {
      const float s0 = sv[c * kH];
      const float s1 = kH > 1 ? sv[c * kH + (kH > 1 ? 1 : 0)] : 0.0f;
      const float s2 = kH > 2 ? sv[c * kH + (kH > 2 ? 2 : 0)] : 0.0f;
      const float xc = x[c];
      float a = bias[c] + wt[kH * ld + c] * xc + wt[c] * s0;
      if constexpr (kH > 1) a += wt[ld + c] * s1;
      if constexpr (kH > 2) a += wt[2 * ld + c] * s2;
      out[c] = a;
      if constexpr (kH == 1) sv[c] = xc;
      if constexpr (kH == 2) sv[c * 2] = s1, sv[c * 2 + 1] = xc;
      if constexpr (kH == 3) sv[c * 3] = s1, sv[c * 3 + 1] = s2, sv[c * 3 + 2] = xc;
    }
    // SiLU as a second pass: in the loop above it slows the lane permutes (measured 25% slower).
    if constexpr (kSilu) finish_t<F32, true>(out, out, n);
    return;
  }
  const int64_t first = S - kH;  // the window: the last kH entries of each channel
  const float* win = st;
#pragma omp simd
  for (int64_t c = 0; c < n; ++c) {
    float a = bias[c] + wt[kH * ld + c] * x[c];
    for (int k = 0; k < kH; ++k) a += wt[k * ld + c] * win[c * S + first + k];
    out[c] = act<kSilu>(a);
  }
  // Shift every channel's entries left by one (in place: each element is read before the one
  // before it is written), then the new token at the end of each channel.
  const int64_t shifted = n * S - 1;
  for (int64_t i = 0; i < shifted; ++i) st[i] = st[i + 1];
  for (int64_t c = 0; c < n; ++c) st[c * S + S - 1] = x[c];
}

// update_step_t for bf16 rows with state_len == width - 1 (the decode layout): st and x hold bf16
// bits, out receives bf16, y is n floats of scratch. The state moves as raw 16-bit values (what
// widening, shifting and rounding back would write, without the two conversion passes, except that
// a NaN keeps its payload as a copy does), the taps are widened in registers, and SiLU and the
// rounding are one pass over y.
template <int kW, bool kSilu>
CC_VEC_INLINE void update_step_bf16_t(uint16_t* st, const uint16_t* __restrict x, uint16_t* __restrict out,
                                      float* __restrict y, int64_t n, const float* __restrict wt, int64_t ld,
                                      const float* __restrict bias) {
  constexpr int kH = kW - 1;
  int64_t c0 = 0;
#if defined(CC_HAVE_SHUFFLEVECTOR)
  for (; c0 + 8 <= n; c0 += 8) window_step8<kH, Bf16>(st, x, y, wt, ld, bias, c0);
#endif
  // The rest (all of it without the vector extension, e.g. GCC before 12): each iteration touches
  // its own channel only.
#pragma omp simd
  for (int64_t c = c0; c < n; ++c) {
    uint16_t* f = st + c * kH;
    float a = bias[c] + wt[kH * ld + c] * Bf16::load(x[c]);
    for (int k = 0; k < kH; ++k) a += wt[k * ld + c] * Bf16::load(f[k]);
    y[c] = a;
    for (int k = 0; k + 1 < kH; ++k) f[k] = f[k + 1];
    f[kH - 1] = x[c];
  }
  finish_t<Bf16, kSilu>(y, out, n);
}

// Width 2..4 and the element type as template instantiations behind one cloned entry point per
// operation (macros rather than generic lambdas: a lambda's body is a function of its own, which
// would not be cloned). Any other width returns kErrUnsupportedWidth, as dispatch_width does.
#define CC_WIDTH_SWITCH(width, call)      \
  switch (width) {                        \
    case 2: call(2); break;               \
    case 3: call(3); break;               \
    case 4: call(4); break;               \
    default: return kErrUnsupportedWidth; \
  }                                       \
  return kSuccess;
// The element type, for the three dtypes; `unknown` runs for any other value. The launchers
// reject those at their entry (check_width_and_dtypes, params.h), so it runs only for a caller
// that skipped that check: the entry points with a status return kErrUnsupportedDType, widen and
// narrow (which have none) stop the process rather than read or write memory as a wrong type.
#define CC_ELEM_SWITCH(t, call, unknown)      \
  switch (t) {                                \
    case DType::kFloat32: call(F32); break;   \
    case DType::kFloat16: call(F16); break;   \
    case DType::kBFloat16: call(Bf16); break; \
    default: unknown;                         \
  }

}  // namespace

// The element type's switch inside the width's, around CC_CALL_E(E) (defined per entry point).
#define CC_CALL(Wv)                                           \
  {                                                           \
    constexpr int W = Wv;                                     \
    CC_ELEM_SWITCH(t, CC_CALL_E, return kErrUnsupportedDType) \
  }

CC_CPU_CLONES int conv_row(const float* halo, const float* x, void* out, DType t, int64_t n, const float* w, int width,
                           float bias, bool silu){
#define CC_CALL_E(E) \
  silu ? conv_row_t<W, E, true>(halo, x, out, n, w, bias) : conv_row_t<W, E, false>(halo, x, out, n, w, bias)
    CC_WIDTH_SWITCH(width, CC_CALL)
#undef CC_CALL_E
}

CC_CPU_CLONES int conv_row_padded(const float* xp, void* out, DType t, int64_t n, const float* w, int width, float bias,
                                  bool silu, const void* ahead, int64_t ahead_bytes){
#define CC_CALL_E(E)                                                            \
  silu ? conv_row_padded_t<W, E, true>(xp, out, n, w, bias, ahead, ahead_bytes) \
       : conv_row_padded_t<W, E, false>(xp, out, n, w, bias, ahead, ahead_bytes)
    CC_WIDTH_SWITCH(width, CC_CALL)
#undef CC_CALL_E
}

// kMaxColSteps steps with the window in registers, or a tail of fewer one step at a time; input
// rows of element type In (conv_cols: float rows; conv_cols_bf16: bf16 rows read in place).
#define CC_CALL_S(E, S, s, nx)                                                       \
  silu ? conv_cols_t<W, S, In, E, true>(rows + (s), outs + (s), n, wt, ld, bias, nx) \
       : conv_cols_t<W, S, In, E, false>(rows + (s), outs + (s), n, wt, ld, bias, nx)
#define CC_CALL_E(E)                                             \
  if (steps == kMaxColSteps) {                                   \
    CC_CALL_S(E, kMaxColSteps, 0, next);                         \
  } else {                                                       \
    for (int s = 0; s < steps; ++s) CC_CALL_S(E, 1, s, nullptr); \
  }
CC_CPU_CLONES int conv_cols(const float* const* rows, void* const* outs, DType t, int steps, int64_t n, const float* wt,
                            int64_t ld, int width, const float* bias, bool silu, const void* const* next) {
  using In = F32;
  CC_WIDTH_SWITCH(width, CC_CALL)
}

CC_CPU_CLONES int conv_cols_bf16(const uint16_t* const* rows, void* const* outs, DType t, int steps, int64_t n,
                                 const float* wt, int64_t ld, int width, const float* bias, bool silu,
                                 const void* const* next) {
  using In = Bf16;
  CC_WIDTH_SWITCH(width, CC_CALL)
}
#undef CC_CALL
#undef CC_CALL_E
#undef CC_CALL_S

CC_CPU_CLONES int conv_row_bwd(const float* xs, const float* g, float* dy, float* dx, int64_t n, const float* w,
                               int width, float bias, bool silu, double* dw, double* db){
#define CC_CALL(W) conv_row_bwd_t<W>(xs, g, dy, dx, n, w, bias, silu, dw, db)
    CC_WIDTH_SWITCH(width, CC_CALL)
#undef CC_CALL
}

CC_CPU_CLONES int conv_cols_bwd(const float* const* x_rows, const float* g, float* dy_out, const float* const* dy_rows,
                                float* dx_out, int64_t n, const float* wt, int64_t ld, int width, const float* bias,
                                bool silu, bool accumulate, float* dw, float* db){
#define CC_CALL(W) conv_cols_bwd_t<W>(x_rows, g, dy_out, dy_rows, dx_out, n, wt, ld, bias, silu, accumulate, dw, db)
    CC_WIDTH_SWITCH(width, CC_CALL)
#undef CC_CALL
}

CC_CPU_CLONES int update_step(float* st, int64_t S, const float* x, float* out, int64_t n, const float* wt, int64_t ld,
                              int width, const float* bias, bool silu){
#define CC_CALL(W)                                              \
  silu ? update_step_t<W, true>(st, S, x, out, n, wt, ld, bias) \
       : update_step_t<W, false>(st, S, x, out, n, wt, ld, bias)
    CC_WIDTH_SWITCH(width, CC_CALL)
#undef CC_CALL
}

CC_CPU_CLONES int update_step_bf16(uint16_t* st, const uint16_t* x, uint16_t* out, float* y, int64_t n, const float* wt,
                                   int64_t ld, int width, const float* bias, bool silu){
#define CC_CALL(W)                                                   \
  silu ? update_step_bf16_t<W, true>(st, x, out, y, n, wt, ld, bias) \
       : update_step_bf16_t<W, false>(st, x, out, y, n, wt, ld, bias)
    CC_WIDTH_SWITCH(width, CC_CALL)
#undef CC_CALL
}

CC_CPU_CLONES void exp_neg_abs_row(const float* __restrict x, float* __restrict y, int64_t n, int degree) {
  if (degree == 4) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = vmath::exp_neg_abs<4>(x[i]);
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = vmath::exp_neg_abs<6>(x[i]);
  }
}

CC_CPU_CLONES void silu_row(const float* __restrict x, float* __restrict y, int64_t n, int degree) {
  if (degree == 4) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = vmath::silu<4>(x[i]);
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = vmath::silu<6>(x[i]);
  }
}

CC_CPU_CLONES void dsilu_row(const float* __restrict y, const float* __restrict g, float* __restrict out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = vmath::dsilu_times(y[i], g[i]);
}

// SIMD loops, not memcpy for fp32: glibc's memcpy of a few KB takes `rep movsb`, measured 3x
// slower than this on AMD EPYC (the dev machine). Built with -fno-tree-loop-distribute-patterns
// so the compiler does not turn the loops back into memcpy calls.
template <typename E>
CC_VEC_INLINE void widen_t(const void* src, float* __restrict dst, int64_t n) {
  const typename E::S* __restrict s = static_cast<const typename E::S*>(src);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dst[i] = E::load(s[i]);
}

template <typename E>
CC_VEC_INLINE void narrow_t(const float* __restrict src, void* dst, int64_t n) {
  typename E::S* __restrict d = static_cast<typename E::S*>(dst);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) d[i] = E::store(src[i]);
}

CC_CPU_CLONES void widen(const void* src, DType t, float* dst, int64_t n){
#define CC_CALL(E) widen_t<E>(src, dst, n)
    CC_ELEM_SWITCH(t, CC_CALL, std::abort())
#undef CC_CALL
}

CC_CPU_CLONES void narrow(const float* src, DType t, void* dst, int64_t n){
#define CC_CALL(E) narrow_t<E>(src, dst, n)
    CC_ELEM_SWITCH(t, CC_CALL, std::abort())
#undef CC_CALL
}

CC_CPU_CLONES void finish_row(float* y, DType t, void* out, int64_t n, bool silu) {
#define CC_CALL(E) silu ? finish_t<E, true>(y, out, n) : finish_t<E, false>(y, out, n)
  CC_ELEM_SWITCH(t, CC_CALL, std::abort())
#undef CC_CALL
}

bool bf16_cvt_active() {
#if defined(CC_HAVE_BF16_CVT)
  return bf16_cvt_supported();
#else
  return false;
#endif
}

}  // namespace causal_conv1d::cpu::vec
