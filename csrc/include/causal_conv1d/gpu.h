// GPU launchers, declared without any GPU header so the torch layer and GoogleTest can include
// this with a plain host compiler. Implemented in csrc/kernels/*.hip, which are compiled by
// hipcc/clang for AMD or, the very same source, by nvcc for NVIDIA.
//
// Every launcher takes a params struct and a stream (hipStream_t / cudaStream_t passed as void*;
// nullptr is the default stream), launches asynchronously, and returns 0 or an error code
// (status.h); gpu_status_string() turns any code into text.
#pragma once

#include <cstddef>

#include "causal_conv1d/device_desc.h"
#include "causal_conv1d/params.h"
#include "causal_conv1d/serving.h"
#include "causal_conv1d/status.h"

namespace causal_conv1d::gpu {

// Text for any status code, including the GPU runtime's own.
const char* gpu_status_string(int code);
// Number of visible devices (0 when there is none or the runtime reports an error).
int device_count();

// The device's architecture as the build names it ("gfx1201" without feature suffixes on AMD,
// "90" for compute capability 9.0 on NVIDIA) and its warp (wave) size.
int device_info(int device, char* arch, int arch_len, int* warp_size);

// Minimal device-memory helpers so GoogleTest can drive launchers without GPU headers. Each
// returns a status code.
int device_malloc(void** ptr, size_t bytes);
int device_free(void* ptr);
int copy_to_device(void* dst, const void* src, size_t bytes);
int copy_to_host(void* dst, const void* src, size_t bytes);
int device_synchronize();
// A stream of its own (not the legacy default stream, on which NVIDIA's driver never overlaps a
// kernel with the one before it: launch_overlapping, gpu_runtime.h), and its release.
int stream_create(void** stream);
int stream_destroy(void* stream);

// For the tests of the launch order (launch_overlapping, gpu_runtime.h): a kernel that lets the
// kernel after it on `stream` start at once, then, spin_ns nanoseconds later (NVIDIA; at once
// elsewhere), copies bytes[i] bytes from src[i] to dst[i] for i < n (n <= kLateCopyBuffers). A
// kernel launched after it that touched one of the dst before its wait would see their old bytes.
constexpr int kLateCopyBuffers = 6;
int launch_late_copy(void* const* dst, const void* const* src, const size_t* bytes, int n, int64_t spin_ns,
                     void* stream);

// What the launchers need to know of the device (tuning-table row, CU count, wave size), for
// device index `device`.
int device_desc(int device, DeviceDesc* desc);

// Bytes of device scratch launch_fwd needs in `workspace` on device `dev` (the seq_idx masks of
// the channel-first kernel; 0 when none), 16-byte aligned.
int fwd_workspace_bytes(const FwdParams& p, const DeviceDesc& dev, int64_t* bytes);
int launch_fwd(const FwdParams& p, void* workspace, const DeviceDesc& dev, void* stream);
// The strips launch_fwd would give a channel-first forward on device `dev` (no launch, no GPU
// needed; for tests and tools): warps walking each strip interleaved, warp iterations a strip,
// strips a row, and iterations past the load ring prefetched to L2 (NVIDIA; tuning.h).
struct FwdCfStrips {
  int warps_per_strip;
  int64_t iters;
  int64_t strips_per_row;
  int l2_ahead;
};
int fwd_channel_first_strips(const FwdParams& p, const DeviceDesc& dev, FwdCfStrips* strips);
int launch_update(const UpdateParams& p, const DeviceDesc& dev, void* stream);
// Float elements of scratch launch_bwd needs in p.workspace on device `dev`: the partials of
// p.deterministic, and the seq_idx masks of either layout (0 when neither).
int bwd_workspace_elems(const BwdParams& p, const DeviceDesc& dev, int64_t* elems);
int launch_bwd(const BwdParams& p, const DeviceDesc& dev, void* stream);
int launch_varlen_states(const VarlenStatesParams& p, const DeviceDesc& dev, void* stream);

// The serving API (serving.h). The prefill needs an int32 device workspace of
// serving_fwd_workspace_elems() elements (where each sequence's chunks start, computed on the
// device); neither launcher reads metadata on the host.
int serving_fwd_workspace_elems(const ServingFwdParams& p, const DeviceDesc& dev, int64_t* elems);
int launch_serving_fwd(const ServingFwdParams& p, int32_t* workspace, const DeviceDesc& dev, void* stream);
int launch_serving_update(const ServingUpdateParams& p, const DeviceDesc& dev, void* stream);

}  // namespace causal_conv1d::gpu
