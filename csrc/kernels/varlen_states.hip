// causal_conv1d_varlen_states on the GPU: a gather, no arithmetic.
//
// Grid: x over channel tiles of the tuning row's `threads`, y over state columns r, z over sequences b (both
// grid-strided, so any batch or state_len fits the grid limits). Thread c of a block copies
// x[end_b - state_len + r, c] into states[b, c, r], or writes zero when that row lies before the
// sequence's start. Consecutive threads touch consecutive channels, so with dim contiguous in x
// and in the (channel-last) states the accesses coalesce.
#include <algorithm>
#include <cstdint>

#include "causal_conv1d/gpu.h"
#include "causal_conv1d/gpu_runtime.h"
#include "tuning.h"

namespace causal_conv1d::gpu {

namespace {

template <typename Bits>
__global__ void CC_LAUNCH_BOUNDS(varlen_tuning(kTargetFamily)) varlen_states_kernel(VarlenStatesParams p) {
  const int64_t c = int64_t(blockIdx.x) * varlen_tuning(kTargetFamily).threads + threadIdx.x;
  if (c >= p.dim) return;
  wait_prior_kernel();  // launched overlapping the kernel before it: no memory access above
  const Bits* x = static_cast<const Bits*>(p.x);
  Bits* states = static_cast<Bits*>(p.states);
  for (int64_t b = blockIdx.z; b < p.batch; b += gridDim.z) {
    int64_t end, start;
    if (p.cu_seqlens_int64) {
      end = static_cast<const int64_t*>(p.cu_seqlens)[b + 1];
      start = static_cast<const int64_t*>(p.cu_seqlens)[b];
    } else {
      end = static_cast<const int32_t*>(p.cu_seqlens)[b + 1];
      start = static_cast<const int32_t*>(p.cu_seqlens)[b];
    }
    // Offsets are documented as sorted and within x; clamping keeps every read in bounds even
    // when they are not (the GPU path cannot raise without a host synchronisation).
    end = min(max(end, int64_t(0)), p.total_tokens);
    start = min(max(start, int64_t(0)), end);
    for (int64_t r = blockIdx.y; r < p.state_len; r += gridDim.y) {
      const int64_t src = end - p.state_len + r;
      Bits v{};
      if (src >= start) v = x[src * p.x_l_stride + c * p.x_c_stride];
      states[b * p.states_batch_stride + c * p.states_c_stride + r * p.states_l_stride] = v;
    }
  }
}

}  // namespace

int launch_varlen_states(const VarlenStatesParams& p, const DeviceDesc& dev, void* stream) {
  if (!dtype_supported(p.dtype)) return kErrUnsupportedDType;
  if (p.batch == 0 || p.dim == 0 || p.state_len == 0) return kSuccess;
  const VarlenTuning tune = varlen_tuning(dev.family);
  const dim3 grid(static_cast<unsigned>((p.dim + tune.threads - 1) / tune.threads),
                  static_cast<unsigned>(std::min<int64_t>(p.state_len, tune.max_grid_yz)),
                  static_cast<unsigned>(std::min<int64_t>(p.batch, tune.max_grid_yz)));
  auto s = static_cast<Stream>(stream);
  if (dtype_size(p.dtype) == 4)
    return launch_overlapping(varlen_states_kernel<uint32_t>, grid, dim3(tune.threads), s, p);
  return launch_overlapping(varlen_states_kernel<uint16_t>, grid, dim3(tune.threads), s, p);
}

}  // namespace causal_conv1d::gpu
