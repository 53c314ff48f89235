// Backward launcher: picks the kernel for x's layout (bwd_channel_first.hip, bwd_channel_last.hip)
// and, in deterministic mode, sums their dweight/dbias partials in a fixed order.
//
// Each kernel emits one partial (dweight[0..W-1], dbias) per channel per slot: a strip
// (channel-first) or a block's time range (channel-last) of one batch row. Default mode adds the
// partials with float atomics; deterministic mode stores them in a workspace of slots x dim x
// (W + 1) floats that bwd_reduce_kernel sums in a fixed order. The slot count comes from the
// layout's grid function, the one the launcher uses: the workspace always fits the kernel. The
// seq_idx kernels of both layouts keep their masks (seq_masks.h) in the same workspace, after the
// partials.
#include <algorithm>

#include "bwd_common.h"

namespace causal_conv1d::gpu {

namespace {

// dweight[c][k] (dbias[c] for k = width) += the sum over slots i of partial (i, c, k), in a fixed
// order. The partials of a slot are dim x (width + 1) consecutive floats: entry j = c (width + 1) + k.
// A block covers `columns` consecutive entries; lane l of an entry sums slots l, l + lanes, ... in
// order (loads of consecutive entries: whole lines), then the lane sums are added in lane order.
__global__ void __launch_bounds__(bwd_reduce_tuning(kTargetFamily).columns* bwd_reduce_tuning(kTargetFamily).lanes)
    bwd_reduce_kernel(BwdParams p, int64_t slots) {
  constexpr BwdReduceTuning kTune = bwd_reduce_tuning(kTargetFamily);
  __shared__ float part[kTune.lanes][kTune.columns];
  const int col = threadIdx.x % kTune.columns, lane = threadIdx.x / kTune.columns;
  const int kw = p.f.width + 1;
  const int64_t entries = p.f.dim * kw;
  const int64_t j = int64_t(blockIdx.x) * kTune.columns + col;
  wait_prior_kernel();  // the walk's (and the states pass's) partials
  float acc = 0.0f;
  if (j < entries) {
#pragma unroll 8  // the loads of 8 slots issued together (the adds stay in slot order)
    for (int64_t i = lane; i < slots; i += kTune.lanes) acc += p.workspace[i * entries + j];
  }
  part[lane][col] = acc;
  __syncthreads();
  if (lane != 0 || j >= entries) return;
  for (int l = 1; l < kTune.lanes; ++l) acc += part[l][col];
  const int64_t c = j / kw;
  const int k = int(j - c * kw);
  if (k < p.f.width) {
    p.dweight[c * p.dweight_c_stride + k * p.dweight_w_stride] += acc;
  } else if (p.dbias != nullptr) {
    p.dbias[c * p.dbias_stride] += acc;
  }
}

int64_t bwd_slots(const BwdParams& p, const DeviceDesc& dev) {
  return p.f.channel_last ? bwd_cl_grid(p, dev).slots : bwd_cf_grid(p, dev).slots;
}

// Workspace floats (partials and seq_idx masks), as the layout's grid function says.
int64_t bwd_workspace(const BwdParams& p, const DeviceDesc& dev) {
  return p.f.channel_last ? bwd_cl_grid(p, dev).ws.elems : bwd_cf_grid(p, dev).ws.elems;
}

}  // namespace

int bwd_workspace_elems(const BwdParams& p, const DeviceDesc& dev, int64_t* elems) {
  *elems = 0;
  if (const int status = check_width_and_dtypes(p.f.width, p.f.x_dtype, p.f.w_dtype); status != kSuccess) return status;
  if (p.f.batch == 0 || p.f.dim == 0) return kSuccess;
  *elems = bwd_workspace(p, dev);
  return kSuccess;
}

int launch_bwd(const BwdParams& p, const DeviceDesc& dev, void* stream) {
  const FwdParams& f = p.f;
  if (const int status = check_width_and_dtypes(f.width, f.x_dtype, f.w_dtype); status != kSuccess) return status;
  if (f.batch == 0 || f.dim == 0) return kSuccess;
  if (p.workspace == nullptr && bwd_workspace(p, dev) > 0) return kErrInvalidParams;
  const auto s = static_cast<Stream>(stream);
  const int status = f.channel_last ? launch_bwd_channel_last(p, dev, s) : launch_bwd_channel_first(p, dev, s);
  if (status != kSuccess || !p.deterministic) return status;
  const BwdReduceTuning tune = bwd_reduce_tuning(dev.family);
  // Overlapping the kernel before it (its launch and tail; on NVIDIA, programmatic dependent
  // launch); it waits for the partials. H200, bf16 (8, 4096, 4096), eager, two builds alternated:
  // 211.3-211.5 -> 209.2-209.9 us against 206.4-207.4 in default mode (fp32 391.7-392.1 -> 389.3-389.7
  // against 387.7-388.8; benchmarks/NOTES.md, thirty-eighth session).
  return launch_overlapping(bwd_reduce_kernel, dim3(ceil_div_u(f.dim * (f.width + 1), tune.columns)),
                            dim3(tune.columns * tune.lanes), s, p, bwd_slots(p, dev));
}

}  // namespace causal_conv1d::gpu
