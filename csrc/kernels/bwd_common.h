// Shared by the backward kernel files (bwd_channel_first.hip, bwd_channel_last.hip, bwd.hip): the
// math, where dweight/dbias partials go, and each layout's launch geometry.
//
//   y[t]   = bias + sum_k w[k] x[t - (W-1) + k]        (recomputed; taps masked by seq_idx)
//   dy[t]  = dout[t] * silu'(y[t])   (or dout[t]); 0 at padding tokens (seq_idx < 0, output 0)
//   dx[s]  = sum_k w[k] dy[s + (W-1) - k]   (+ dfinal for the last W-1 positions of [init, x])
//   dw[k] += sum_t dy[t] x[t - (W-1) + k],   db += sum_t dy[t]
//
// dx at the W-1 positions before t = 0 is dinitial_states: the kernels compute it like any dx
// (dout is 0 there, so dy is too) and store it there instead.
#pragma once

#include <cstddef>
#include <cstdint>

#include "causal_conv1d/gpu.h"
#include "kernel_utils.h"
#include "seq_masks.h"
#include "tuning.h"

namespace causal_conv1d::gpu {

// g silu'(y) = g s (1 + y (1 - s)), s = sigmoid(y), as g s + g s (y - y s): after s a multiply
// and two fmas (the backward kernels are issue-bound; g s (1 + y (1 - s)) took four). The
// exponential and a reciprocal to ~2 ulp: dy feeds fp32 dweight sums, so the tanh form (2^-11
// relative) of the forward is not used here.
__device__ __forceinline__ float dsilu_times(float y, float g) {
  const float s = fast_div(1.0f, 1.0f + fast_exp_neg(y));
  const float gs = g * s;
  return fmaf(gs, fmaf(-y, s, y), gs);
}

// Floats passed by value to an out-of-line edge function (an array's address would force it out of
// registers).
template <int N>
struct Floats {
  float v[N];
};

// Term k of one dweight/dbias partial (sums over a strip or a block's time range) of channel ch
// (k < kWidth: dweight tap k; k = kWidth: dbias): added with float atomics (default mode), or
// stored in slot `slot` of the workspace, which bwd_reduce_kernel sums in a fixed order
// (deterministic mode: the same bits on every run).
template <int kWidth>
__device__ __forceinline__ void emit_partial_term(const BwdParams& p, int64_t slot, int64_t ch, int k, float v) {
  if (p.deterministic) {
    p.workspace[(slot * p.f.dim + ch) * (kWidth + 1) + k] = v;
  } else if (k < kWidth) {
    atomic_add(p.dweight + ch * p.dweight_c_stride + k * p.dweight_w_stride, v);
  } else if (p.dbias != nullptr) {
    atomic_add(p.dbias + ch * p.dbias_stride, v);
  }
}

// All the terms of one partial at once.
template <int kWidth>
__device__ __forceinline__ void emit_partial(const BwdParams& p, int64_t slot, int64_t ch,
                                             const float (&acc)[kWidth + 1]) {
  if (p.deterministic) {
    float* dst = p.workspace + (slot * p.f.dim + ch) * (kWidth + 1);
    static_for<kWidth + 1>([&](auto k) { dst[k] = acc[k]; });
  } else {
    static_for<kWidth>(
        [&](auto k) { atomic_add(p.dweight + ch * p.dweight_c_stride + k * p.dweight_w_stride, acc[k]); });
    if (p.dbias != nullptr) atomic_add(p.dbias + ch * p.dbias_stride, acc[kWidth]);
  }
}

// What the workspace holds where: the dweight/dbias partials (deterministic mode: slots x dim x
// (width + 1) floats), then the seq_idx masks, 16-byte aligned. Both layouts' grid functions take
// it from bwd_workspace_layout with their slot count, so the workspace size, the launcher and the
// kernel read the same offsets.
struct BwdWorkspace {
  int64_t mask_offset;  // floats before the seq_idx masks (the partials, rounded up)
  int64_t mask_row;     // mask bytes per batch row (seq_mask_row; 0 without seq_idx)
  int mask_phases;      // copies of the masks (seq_masks.h: 1, or a vector's elements)
  int64_t elems;        // workspace floats
};
inline BwdWorkspace bwd_workspace_layout(const BwdParams& p, int64_t slots, int mask_phases = 1) {
  const FwdParams& f = p.f;
  const int64_t partials = p.deterministic ? slots * f.dim * (f.width + 1) : 0;
  BwdWorkspace ws;
  ws.mask_offset = (partials + 3) / 4 * 4;
  ws.mask_row = f.seq_idx != nullptr ? seq_mask_row(f.seqlen) : 0;
  ws.mask_phases = mask_phases;
  ws.elems = f.seq_idx != nullptr ? ws.mask_offset + mask_phases * f.batch * ws.mask_row / 4 : partials;
  return ws;
}
// The mask bytes of batch row b (copy 0; copy ph, where written, lies ph * batch * mask_row bytes
// further: seq_masks.h).
__device__ __forceinline__ const uint8_t* seq_masks_of(const BwdParams& p, const BwdWorkspace& ws, uint32_t b) {
  return reinterpret_cast<const uint8_t*>(p.workspace + ws.mask_offset) + int64_t(b) * ws.mask_row;
}
// Writes the masks of every batch row of p.f.seq_idx into the workspace; nothing without seq_idx.
inline int launch_bwd_seq_masks(const BwdParams& p, const BwdWorkspace& ws, const DeviceDesc& dev, Stream stream) {
  return launch_seq_masks(p.f, reinterpret_cast<uint8_t*>(p.workspace + ws.mask_offset), ws.mask_row, dev, stream,
                          ws.mask_phases);
}

// Launch geometry of the channel-first backward (bwd_cf_grid): the launcher and the workspace size
// both take it from that one function.
struct BwdCfGrid {
  int kv;                      // elements per vector (1: the element path)
  bool aligned;                // every row starts on a vector boundary (no peeled first vector)
  uint32_t dim;                // rows are (batch, channel): row = b * dim + c
  uint32_t strips_per_row;     // strips of one row; partial slot of strip s of batch b: b * strips_per_row + s
  DivU32 dim_div, strips_div;  // division by dim and by strips_per_row (the kernel's strip indices)
  uint32_t total_strips;       // batch * dim * strips_per_row
  int32_t iters;               // warp iterations per strip (a row's last strip may have fewer)
  int64_t blocks;              // grid size
  int64_t slots;               // dweight/dbias partials per channel: batch * strips_per_row
  BwdWorkspace ws;
};
BwdCfGrid bwd_cf_grid(const BwdParams& p, const DeviceDesc& dev);
int launch_bwd_channel_first(const BwdParams& p, const DeviceDesc& dev, Stream stream);

// The re-balanced kernels' first parameter (bwd_cl_grid's smallest grids, where their offsets fit
// 32 bits; rebalanced_args): all a thread reads before its first load request in the first 64-byte
// line of kernel parameters (48 bytes from c[0x0][0x210] on sm_90), its weights and dx in the
// second, so a warp waits out one constant-cache miss before its first load request instead of
// two, and its weights' line is missed once those requests are out (BwdClGrid's weight arguments
// are a third line, missed likewise). The grid is (channel blocks, time blocks, batch): no index
// divisions.
struct BwdClArgs32 {
  uint16_t steps;  // time steps per warp
  bool want_dinit, want_dfin;
  WeightRuns runs;  // (dim, width) weights and bias as runs (kernel_utils.h: weight_runs)
  uint8_t w_dtype;  // DType of weight and bias
  int32_t seqlen, dim;
  int32_t x_batch_stride, x_l_stride, dout_batch_stride, dout_l_stride;
  const void* x;
  const void* dout;
  const void* weight;  // (second line)
  const void* bias;
  void* dx;
  int32_t dx_batch_stride, dx_l_stride;
};
static_assert(offsetof(BwdClArgs32, dout) + sizeof(void*) == 48 && offsetof(BwdClArgs32, weight) == 48,
              "what a thread reads before its first loads fills the first line, from 16 bytes into it");

// Launch geometry of the channel-last backward (bwd_cl_grid).
struct BwdClGrid {
  // The kernel's first parameter, its leading fields all a thread reads before its first loads
  // (copies of BwdParams'): each 64-byte line of kernel parameters a thread touches first is a
  // constant-cache miss it waits out before going on (ncu, H200, (1, 4096, 256): 9-11% of the
  // warps' stall samples, on the 7 lines these fields spanned in BwdParams; 2 lines now).
  uint32_t cblocks;                 // channel blocks of one warp's groups
  uint32_t tblocks;                 // time blocks of (threads / wave) ranges of `steps`
  DivU32 cblocks_div, tblocks_div;  // division by cblocks and by tblocks (the kernel's block indices)
  int32_t steps;                    // time steps per warp
  bool want_dinit, want_dfin;       // dinitial_states / dfinal_states given
  const void* x;
  const void* dout;
  int64_t seqlen, dim;
  int64_t x_batch_stride, x_l_stride, dout_batch_stride, dout_l_stride;
  void* dx;  // (first stored after the loads are requested)
  int64_t dx_batch_stride, dx_l_stride;
  WeightArgs wa;    // (loaded once the first rows are requested)
  int kc;           // channels per thread (1: the element path)
  bool wide;        // the wide blocks (BwdClTuning::wide_threads)
  bool rebalanced;  // ... re-balanced to wide_blocks_per_cu (their kernels compiled for that many blocks an SM)
  int threads;      // block size
  int64_t blocks;   // grid size: batch * tblocks * cblocks
  int64_t slots;    // dweight/dbias partials per channel: batch * tblocks
  BwdWorkspace ws;
};
BwdClGrid bwd_cl_grid(const BwdParams& p, const DeviceDesc& dev);
int launch_bwd_channel_last(const BwdParams& p, const DeviceDesc& dev, Stream stream);

}  // namespace causal_conv1d::gpu
