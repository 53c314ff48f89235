// See vec.h. Every loop here is a `#pragma omp simd` loop over contiguous floats (compiled with
// -fopenmp-simd -fno-math-errno -fno-trapping-math); the width is a template parameter so the tap
// loops unroll. SiLU and its derivative come from vmath.h, inlined into the loops.
#include "vec.h"

#include <cmath>
#include <cstring>

#include "causal_conv1d/numeric.h"
#include "vmath.h"

// Clones are picked at load time through an ifunc (GCC, glibc).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__)
#define CC_CPU_CLONES __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
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

CC_VEC_INLINE float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
CC_VEC_INLINE uint32_t float_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

template <int kW>
CC_VEC_INLINE void conv_row_t(const float* halo, const float* __restrict x, float* __restrict out, int64_t n,
                              const float* w, float bias, bool silu) {
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
    out[i] = silu ? vmath::silu<6>(a) : a;
  }
  const float* __restrict xb = x - kH;  // xb[i + k] = x[i - kH + k], inside x for i >= kH
#pragma omp simd
  for (int64_t i = kH; i < n; ++i) {
    float a = bias;
    for (int k = 0; k < kW; ++k) a += wk[k] * xb[i + k];
    out[i] = a;
  }
  if (silu) {  // a second pass over the chunk just written (in L1)
#pragma omp simd
    for (int64_t i = kH; i < n; ++i) out[i] = vmath::silu<6>(out[i]);
  }
}

template <int kW, int kS, bool kSilu>
CC_VEC_INLINE void conv_cols_t(const float* const* rows, float* const* outs, int64_t n, const float* __restrict wt,
                               int64_t ld, const float* __restrict bias) {
  static_assert(kW >= 2 && kW <= 4, "the window below is written out for widths 2 to 4");
  constexpr int kH = kW - 1;
  const float* __restrict r[kH + kS];
  float* __restrict o[kS];
  for (int k = 0; k < kH + kS; ++k) r[k] = rows[k];
  for (int s = 0; s < kS; ++s) o[s] = outs[s];
  const float* __restrict w0 = wt;
  const float* __restrict w1 = wt + ld;
  const float* __restrict w2 = wt + 2 * ld;
  const float* __restrict w3 = wt + 3 * ld;
  // Per channel the weights and the window stay in registers (named scalars: arrays inside a simd
  // loop become memory) over the kS steps: each step costs one row load and one row store. The
  // window is x0 (oldest) .. x2 and the tap weights of a width-kW filter are the last kW of w0..w3.
#pragma omp simd
  for (int64_t c = 0; c < n; ++c) {
    const float bc = bias[c];
    const float k0 = kW == 4 ? w0[c] : 0.0f;
    const float k1 = kW >= 3 ? (kW == 4 ? w1[c] : w0[c]) : 0.0f;
    const float k2 = kW == 4 ? w2[c] : kW == 3 ? w1[c] : w0[c];
    const float k3 = kW == 4 ? w3[c] : kW == 3 ? w2[c] : w1[c];
    float x0 = kW == 4 ? r[0][c] : 0.0f;
    float x1 = kW >= 3 ? r[kH - 2][c] : 0.0f;
    float x2 = r[kH - 1][c];
    for (int s = 0; s < kS; ++s) {
      const float x3 = r[kH + s][c];
      float a = bc + k2 * x2 + k3 * x3;
      if constexpr (kW >= 3) a += k1 * x1;
      if constexpr (kW == 4) a += k0 * x0;
      o[s][c] = a;
      x0 = x1;
      x1 = x2;
      x2 = x3;
    }
  }
  // SiLU as a second pass over the rows just written (still in cache): a vector expf call inside
  // the loop above would spill its register window at every call (measured 20% slower).
  if constexpr (kSilu) {
    for (int s = 0; s < kS; ++s) {
      float* __restrict os = o[s];
#pragma omp simd
      for (int64_t c = 0; c < n; ++c) os[c] = vmath::silu<6>(os[c]);
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

template <int kW>
CC_VEC_INLINE void update_step_t(float* st, int64_t S, const float* __restrict x, float* __restrict out, int64_t n,
                                 const float* __restrict wt, int64_t ld, const float* __restrict bias, bool silu) {
  constexpr int kH = kW - 1;
  if (S == kH) {
    // The usual cache (state_len == width - 1): each channel's kH entries are the whole window.
    // One pass with a constant stride, which the compiler vectorises with lane permutes.
    float* __restrict sv = st;
#pragma omp simd
    for (int64_t c = 0; c < n; ++c) {
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
    if (silu) {  // a second pass: an expf call in the loop above spills its permuted lanes
#pragma omp simd
      for (int64_t c = 0; c < n; ++c) out[c] = vmath::silu<6>(out[c]);
    }
    return;
  }
  const int64_t first = S - kH;  // the window: the last kH entries of each channel
  const float* win = st;
#pragma omp simd
  for (int64_t c = 0; c < n; ++c) {
    float a = bias[c] + wt[kH * ld + c] * x[c];
    for (int k = 0; k < kH; ++k) a += wt[k * ld + c] * win[c * S + first + k];
    out[c] = silu ? vmath::silu<6>(a) : a;
  }
  // Shift every channel's entries left by one (in place: each element is read before the one
  // before it is written), then the new token at the end of each channel.
  const int64_t shifted = n * S - 1;
  for (int64_t i = 0; i < shifted; ++i) st[i] = st[i + 1];
  for (int64_t c = 0; c < n; ++c) st[c * S + S - 1] = x[c];
}

// Width 2..4 as template instantiations behind one cloned entry point per operation.
#define CC_WIDTH_SWITCH(width, call) \
  switch (width) {                   \
    case 2: call(2); break;          \
    case 3: call(3); break;          \
    default: call(4); break;         \
  }

}  // namespace

CC_CPU_CLONES void conv_row(const float* halo, const float* x, float* out, int64_t n, const float* w, int width,
                            float bias, bool silu){
#define CC_CALL(W) conv_row_t<W>(halo, x, out, n, w, bias, silu)
    CC_WIDTH_SWITCH(width, CC_CALL)
#undef CC_CALL
}

CC_CPU_CLONES void conv_cols(const float* const* rows, float* const* outs, int steps, int64_t n, const float* wt,
                             int64_t ld, int width, const float* bias, bool silu) {
#define CC_CALL_S(W, S) \
  silu ? conv_cols_t<W, S, true>(rows, outs, n, wt, ld, bias) : conv_cols_t<W, S, false>(rows, outs, n, wt, ld, bias)
#define CC_CALL(W)                              \
  switch (steps) {                              \
    case 1: CC_CALL_S(W, 1); break;             \
    case 2: CC_CALL_S(W, 2); break;             \
    case 3: CC_CALL_S(W, 3); break;             \
    default: CC_CALL_S(W, kMaxColSteps); break; \
  }
  CC_WIDTH_SWITCH(width, CC_CALL)
#undef CC_CALL
#undef CC_CALL_S
}

CC_CPU_CLONES void conv_row_bwd(const float* xs, const float* g, float* dy, float* dx, int64_t n, const float* w,
                                int width, float bias, bool silu, double* dw, double* db){
#define CC_CALL(W) conv_row_bwd_t<W>(xs, g, dy, dx, n, w, bias, silu, dw, db)
    CC_WIDTH_SWITCH(width, CC_CALL)
#undef CC_CALL
}

CC_CPU_CLONES void conv_cols_bwd(const float* const* x_rows, const float* g, float* dy_out, const float* const* dy_rows,
                                 float* dx_out, int64_t n, const float* wt, int64_t ld, int width, const float* bias,
                                 bool silu, bool accumulate, float* dw, float* db){
#define CC_CALL(W) conv_cols_bwd_t<W>(x_rows, g, dy_out, dy_rows, dx_out, n, wt, ld, bias, silu, accumulate, dw, db)
    CC_WIDTH_SWITCH(width, CC_CALL)
#undef CC_CALL
}

CC_CPU_CLONES void update_step(float* st, int64_t S, const float* x, float* out, int64_t n, const float* wt, int64_t ld,
                               int width, const float* bias, bool silu){
#define CC_CALL(W) update_step_t<W>(st, S, x, out, n, wt, ld, bias, silu)
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

CC_CPU_CLONES void widen(const void* src, DType t, float* __restrict dst, int64_t n) {
  if (t == DType::kFloat32) {
    // A SIMD loop, not memcpy: glibc's memcpy of a few KB takes `rep movsb`, measured 3x slower
    // than this on AMD EPYC (the dev machine). Built with -fno-tree-loop-distribute-patterns so
    // the compiler does not turn the loop back into a memcpy call.
    const float* __restrict s = static_cast<const float*>(src);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) dst[i] = s[i];
  } else if (t == DType::kBFloat16) {
    const uint16_t* __restrict s = static_cast<const uint16_t*>(src);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) dst[i] = bits_to_float(uint32_t(s[i]) << 16);
  } else {
#if defined(__FLT16_MAX__)
    const _Float16* __restrict s = static_cast<const _Float16*>(src);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) dst[i] = float(s[i]);
#else
    const uint16_t* s = static_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = half_to_float(s[i]);
#endif
  }
}

CC_CPU_CLONES void narrow(const float* __restrict src, DType t, void* dst, int64_t n) {
  if (t == DType::kFloat32) {
    float* __restrict d = static_cast<float*>(dst);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) d[i] = src[i];
  } else if (t == DType::kBFloat16) {
    uint16_t* __restrict d = static_cast<uint16_t*>(dst);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t u = float_to_bits(src[i]);
      const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;                 // to nearest even
      d[i] = uint16_t((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : rounded);  // NaN stays NaN
    }
  } else {
#if defined(__FLT16_MAX__)
    _Float16* __restrict d = static_cast<_Float16*>(dst);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) d[i] = _Float16(src[i]);
#else
    uint16_t* d = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = float_to_half(src[i]);
#endif
  }
}

}  // namespace causal_conv1d::cpu::vec
