// Forward launcher: picks the kernel for x's layout (fwd_channel_first.hip, fwd_channel_last.hip).
// With seq_idx the channel-first kernel reads a byte of masks a position (seq_masks.h), written
// into the workspace first; the channel-last kernel reads the ids themselves.
#include "causal_conv1d/gpu.h"
#include "kernel_utils.h"
#include "seq_masks.h"

namespace causal_conv1d::gpu {

int launch_fwd_channel_first(const FwdParams& p, const uint8_t* masks, int64_t mask_row, const DeviceDesc& dev,
                             Stream stream);
int launch_fwd_channel_last(const FwdParams& p, const DeviceDesc& dev, Stream stream);

namespace {

int64_t fwd_mask_row(const FwdParams& p) {
  return p.seq_idx != nullptr && !p.channel_last ? seq_mask_row(p.seqlen) : 0;
}

}  // namespace

int fwd_workspace_bytes(const FwdParams& p, const DeviceDesc&, int64_t* bytes) {
  *bytes = 0;
  if (const int status = check_width_and_dtypes(p.width, p.x_dtype, p.w_dtype); status != kSuccess) return status;
  *bytes = p.batch * fwd_mask_row(p);
  return kSuccess;
}

int launch_fwd(const FwdParams& p, void* workspace, const DeviceDesc& dev, void* stream) {
  if (const int status = check_width_and_dtypes(p.width, p.x_dtype, p.w_dtype); status != kSuccess) return status;
  if (p.batch == 0 || p.dim == 0) return kSuccess;
  const auto s = static_cast<Stream>(stream);
  if (p.channel_last) return launch_fwd_channel_last(p, dev, s);
  const int64_t mask_row = fwd_mask_row(p);
  auto* masks = static_cast<uint8_t*>(workspace);
  if (mask_row > 0) {
    if (masks == nullptr || reinterpret_cast<uintptr_t>(masks) % 16 != 0) return kErrInvalidParams;
    if (const int status = launch_seq_masks(p, masks, mask_row, dev, s); status != kSuccess) return status;
  }
  return launch_fwd_channel_first(p, masks, mask_row, dev, s);
}

}  // namespace causal_conv1d::gpu
