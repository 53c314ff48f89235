// Forward launcher: picks the kernel for x's layout (fwd_channel_first.hip, fwd_channel_last.hip).
#include "causal_conv1d/gpu.h"
#include "kernel_utils.h"

namespace causal_conv1d::gpu {

int launch_fwd_channel_first(const FwdParams& p, const DeviceDesc& dev, Stream stream);
int launch_fwd_channel_last(const FwdParams& p, const DeviceDesc& dev, Stream stream);

int launch_fwd(const FwdParams& p, const DeviceDesc& dev, void* stream) {
  if (const int status = check_width_and_dtypes(p.width, p.x_dtype, p.w_dtype); status != kSuccess) return status;
  if (p.batch == 0 || p.dim == 0) return kSuccess;
  const auto s = static_cast<Stream>(stream);
  return p.channel_last ? launch_fwd_channel_last(p, dev, s) : launch_fwd_channel_first(p, dev, s);
}

}  // namespace causal_conv1d::gpu
