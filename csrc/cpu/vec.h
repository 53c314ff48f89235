// Vectorised building blocks of the CPU backend: contiguous float rows in, float rows out, so the
// compiler turns every loop into SIMD code. With GCC on x86-64 each has clones for the baseline
// (SSE2), x86-64-v3 (AVX2, FMA, F16C) and x86-64-v4 (AVX-512), picked at load time by the CPU
// (target_clones). SiLU's exp is vmath.h's polynomial, inlined into the loops. No torch, no
// run-time dependency beyond libstdc++ and libm.
//
// The callers (fwd.cpp, bwd.cpp) move data between tensors of any dtype and strides and these float
// rows, sized to stay in L1.
//
// The functions taking a width return kSuccess, or kErrUnsupportedWidth (status.h) without touching
// their outputs when the width is not 2, 3 or 4; those taking a dtype as well return
// kErrUnsupportedDType, likewise, for a DType value outside the enum. widen and narrow have no
// status: their dtype must be supported, which every launcher checks at its entry
// (check_width_and_dtypes in params.h); any other value stops the process.
#pragma once

#include <cstdint>

#include "causal_conv1d/params.h"
#include "causal_conv1d/status.h"

namespace causal_conv1d::cpu::vec {

// act is SiLU (vmath.h; its exp of degree 6 for fp32 outputs, 4 for 16-bit ones, which are rounded
// far more coarsely) or the identity.
//
// Channel-first row: out[i] = act(bias + sum_k w[k] * in[i - (width-1) + k]) for i in [0, n),
// where in[j] = x[j] for j >= 0 and halo[width - 1 + j] for the width - 1 positions before x.
// x: n contiguous floats (x itself when fp32 and contiguous, else a widened copy: each input is read
// width times); out: n contiguous elements of dtype t (out itself where contiguous).
[[nodiscard]] int conv_row(const float* halo, const float* x, void* out, DType t, int64_t n, const float* w, int width,
                           float bias, bool silu);

// conv_row over a padded input: xp holds the width - 1 inputs before output 0 and then the n inputs
// (n + width - 1 contiguous floats), so every output takes the vector loop. (conv_row computes the
// first width - 1 one by one and then its blocks start width - 1 in, which leaves the last one a
// remainder loop: bf16 SiLU, 2048 outputs, L1-resident, an Intel Xeon VM: 820-837 ns a call
// against 766 for 2051 outputs, whose blocks come out whole.) Between its blocks of outputs it
// prefetches [ahead, ahead + ahead_bytes) in equal slices (null: none): input the caller reads a
// chunk or two later, whose loads then overlap this chunk's arithmetic.
[[nodiscard]] int conv_row_padded(const float* xp, void* out, DType t, int64_t n, const float* w, int width, float bias,
                                  bool silu, const void* ahead, int64_t ahead_bytes);

// Channel-last: `steps` consecutive time steps (1 .. kMaxColSteps) over n channels. rows: the
// steps + width - 1 input rows (float), oldest first; outs: the steps output rows, n contiguous
// elements of dtype t each. For step s: outs[s][c] = act(bias[c] + sum_k wt[k * ld + c] *
// rows[s + k][c]). A call of 8 steps reads 8 + width - 1 rows and the weights once for 8 output
// rows (4 steps: 4 + width - 1): dev machine (AMD EPYC, AVX-512), 2 threads, into out, bf16 dims
// 1024 / 2048 / 4096 1.53-1.72 / 1.59-1.67 / 1.40-1.53 ms -> 1.47-1.58 / 1.36-1.40 / 1.24-1.33 at
// (2, 1024, 4096) / (1, 2048, 4096) / (1, 4096, 2048); fp32, the same and two more shapes,
// 2.13-2.36 -> 2.05-2.13 ms. next: as conv_cols_bf16's (float rows).
constexpr int kMaxColSteps = 8;
[[nodiscard]] int conv_cols(const float* const* rows, void* const* outs, DType t, int steps, int64_t n, const float* wt,
                            int64_t ld, int width, const float* bias, bool silu, const void* const* next = nullptr);
// The same with bf16 input rows (bits in uint16_t), widened inside the loop: x's own rows where its
// channels are contiguous, with no widened copy of them. next: null, or (for a call of kMaxColSteps
// steps) kMaxColSteps bf16 rows, null entries skipped, whose channels [0, n) are prefetched while
// the call computes, a slice per block of channels and step: the rows the caller's next call
// reads, whose loads then overlap this call's arithmetic.
[[nodiscard]] int conv_cols_bf16(const uint16_t* const* rows, void* const* outs, DType t, int steps, int64_t n,
                                 const float* wt, int64_t ld, int width, const float* bias, bool silu,
                                 const void* const* next = nullptr);

// Backward of a channel-first row of n outputs. xs: the width - 1 inputs before output 0, the n
// inputs, and the width - 1 inputs after them (n + 2 * (width - 1), zeros past the row); g: the n +
// width - 1 upstream gradients of outputs 0 .. n + width - 2 (zeros past the row). Computes, with
// dy[i] = g[i] * silu'(y[i]) (or g[i]) and y recomputed from xs:
//   dx[j] = sum_k w[k] * dy[j + width - 1 - k]                  for j in [0, n)
//   dw[k] += sum_i dy[i] * xs[i + k],  db += sum_i dy[i]         for i in [0, n)
// (the sums over this row in float, in a fixed lane order, then added to the double totals: n is
// at most a chunk of kTimeChunk, so each float lane sums a few hundred terms).
// dy: scratch of n + width - 1 floats.
[[nodiscard]] int conv_row_bwd(const float* xs, const float* g, float* dy, float* dx, int64_t n, const float* w,
                               int width, float bias, bool silu, double* dw, double* db);

// Channel-last backward, one time step t over n channels: x_rows[k] holds x[t - (width - 1) + k],
// g the upstream gradient at t. Writes dy_out = dy[t] (g * silu'(y[t]) or g); when accumulate,
// adds dy[t] * x_rows[k] to dw[k * ld + c] and dy[t] to db[c] (float running sums: the caller
// moves them into double totals every few dozen steps). When dy_rows is not null
// (dy_rows[k] = dy[t - k], dy_rows[0] == dy_out), writes dx_out[c] = sum_k wt[k*ld+c] * dy_rows[k][c],
// the gradient of x[t - (width - 1)].
[[nodiscard]] int conv_cols_bwd(const float* const* x_rows, const float* g, float* dy_out, const float* const* dy_rows,
                                float* dx_out, int64_t n, const float* wt, int64_t ld, int width, const float* bias,
                                bool silu, bool accumulate, float* dw, float* db);

// One decode step over n channels of a state laid out channel by channel (S entries each, st[c * S
// + s]), updated in place: out[c] = act(bias[c] + sum_{k < width-1} wt[k * ld + c] * st[c*S +
// S-(width-1)+k] + wt[(width-1) * ld + c] * x[c]) from the state before the step, then each
// channel's entries shift left by one and x[c] becomes the last. S >= width - 1; wt tap-major.
[[nodiscard]] int update_step(float* st, int64_t S, const float* x, float* out, int64_t n, const float* wt, int64_t ld,
                              int width, const float* bias, bool silu);

// update_step for bf16 rows (bits in uint16_t) with S == width - 1: st and x bf16, out bf16, y n
// floats of scratch; SiLU with the exp of degree 4 (vmath.h), as every 16-bit output.
[[nodiscard]] int update_step_bf16(uint16_t* st, const uint16_t* x, uint16_t* out, float* y, int64_t n, const float* wt,
                                   int64_t ld, int width, const float* bias, bool silu);

// vmath.h's functions over rows, through the same clones as the kernels: what the tests check the
// error bounds on. y[i] = exp(-|x[i]|), y[i] = silu(x[i]) (exp of degree 6 or 4),
// out[i] = g[i] * silu'(y[i]).
void exp_neg_abs_row(const float* x, float* y, int64_t n, int degree);
void silu_row(const float* x, float* y, int64_t n, int degree);
void dsilu_row(const float* y, const float* g, float* out, int64_t n);

// dtype <-> float rows (round to nearest even, as PyTorch). t must be supported (see above).
void widen(const void* src, DType t, float* dst, int64_t n);
void narrow(const float* src, DType t, void* dst, int64_t n);

// The kernels' output pass over a row, what the tests check it on: out[i] = act(y[i]) rounded to
// t (as narrow), act SiLU (its exp of degree 4 for bf16 outputs; fp16 rows are finished as fp32
// ones, degree 6, then converted) or the identity; y is overwritten. On CPUs with AVX512-BF16 (bf16_cvt_active) bf16
// rows take its conversion instruction, with the integer rounding's results.
void finish_row(float* y, DType t, void* out, int64_t n, bool silu);
bool bf16_cvt_active();

}  // namespace causal_conv1d::cpu::vec
