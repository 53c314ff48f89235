// Backward launcher: picks the kernel for x's layout (bwd_channel_first.hip, bwd_channel_last.hip)
// and, in deterministic mode, sums their dweight/dbias partials in a fixed order.
//
// Each kernel emits one partial (dweight[0..W-1], dbias) per channel per slot: a strip
// (channel-first) or a block's time range (channel-last) of one batch row. Default mode adds the
// partials with float atomics; deterministic mode stores them in a workspace of slots x dim x
// (W + 1) floats that bwd_reduce_kernel sums in a fixed order. The slot count comes from the
// layout's grid function, the one the launcher uses: the workspace always fits the kernel. The
// channel-first seq_idx kernels keep their masks in the same workspace, after the partials.
#include <algorithm>

#include "bwd_common.h"

namespace causal_conv1d::gpu {

namespace {

// dweight[c] += sum over slots i of the partials, in a fixed order: a block covers `channels`
// channels; lane l of a channel sums slots l, l + lanes, ... in order, then the lane sums are
// added in lane order.
__global__ void __launch_bounds__(bwd_reduce_tuning(kTargetFamily).channels* bwd_reduce_tuning(kTargetFamily).lanes)
    bwd_reduce_kernel(BwdParams p, int64_t slots) {
  constexpr BwdReduceTuning kTune = bwd_reduce_tuning(kTargetFamily);
  __shared__ float part[kTune.lanes][kTune.channels][kMaxWidth + 1];
  const int cl = threadIdx.x % kTune.channels, lane = threadIdx.x / kTune.channels;
  const int64_t c = int64_t(blockIdx.x) * kTune.channels + cl;
  const int kw = p.f.width + 1;
  const int64_t D = p.f.dim;
  for (int k = 0; k < kw; ++k) {
    float acc = 0.0f;
    if (c < D)
      for (int64_t i = lane; i < slots; i += kTune.lanes) acc += p.workspace[(i * D + c) * kw + k];
    part[lane][cl][k] = acc;
  }
  __syncthreads();
  if (lane != 0 || c >= D) return;
  for (int k = 0; k < kw; ++k) {
    float acc = 0.0f;
    for (int l = 0; l < kTune.lanes; ++l) acc += part[l][cl][k];
    if (k < p.f.width) {
      p.dweight[c * p.dweight_c_stride + k * p.dweight_w_stride] += acc;
    } else if (p.dbias != nullptr) {
      p.dbias[c * p.dbias_stride] += acc;
    }
  }
}

int64_t bwd_slots(const BwdParams& p, const DeviceDesc& dev) {
  return p.f.channel_last ? bwd_cl_grid(p, dev).slots : bwd_cf_grid(p, dev).slots;
}

// Workspace floats: the channel-first grid says (partials and seq_idx masks); channel-last needs
// the partials only.
int64_t bwd_workspace(const BwdParams& p, const DeviceDesc& dev) {
  if (!p.f.channel_last) return bwd_cf_grid(p, dev).workspace_elems;
  return p.deterministic ? bwd_cl_grid(p, dev).slots * p.f.dim * (p.f.width + 1) : 0;
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
  bwd_reduce_kernel<<<ceil_div_u(f.dim, tune.channels), tune.channels * tune.lanes, 0, s>>>(p, bwd_slots(p, dev));
  return launch_status();
}

}  // namespace causal_conv1d::gpu
