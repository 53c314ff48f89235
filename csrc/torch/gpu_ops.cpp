// GPU implementations of the ops, registered for the CUDA dispatch key: ROCm builds of PyTorch
// present AMD GPUs as device type "cuda", so this one registration serves both vendors. No GPU
// header is needed here: the stream comes from c10 as an opaque handle.
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>

#include <array>
#include <atomic>
#include <string>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>

#include "causal_conv1d/arch_check.h"
#include "causal_conv1d/build_config.h"
#include "causal_conv1d/gpu.h"
#include "checks.h"
#include "make_params.h"
#include "op_names.h"

namespace causal_conv1d::torch_ops {
namespace {

// Whether this binary has code for the device, checked once per device, and the device's
// descriptor for the launchers (tuning-table family, CU count, wave size); afterwards one relaxed
// atomic load per call. AMD code objects are per arch: the device's arch must be compiled in, and
// its wave size must be the one the arch compiles for (64 on gfx8/gfx9, else 32). NVIDIA builds
// embed PTX, so any compiled arch up to the device's runs.
constexpr int kMaxDevices = 64;

const DeviceDesc& checked_device(const char* op, const at::Device& device) {
  static std::array<std::atomic<int>, kMaxDevices> checked{};
  static std::array<DeviceDesc, kMaxDevices> descs{};
  const int index = device.index() < 0 ? 0 : device.index();
  TORCH_CHECK(index < kMaxDevices, op, ": device index ", index, " is beyond the ", kMaxDevices, " this build handles");
  if (checked[index].load(std::memory_order_acquire)) return descs[index];
  char arch[64] = {};
  int warp = 0;
  check_launch(op, "device_info", gpu::device_info(index, arch, sizeof(arch), &warp));
  const std::string compiled = CAUSAL_CONV1D_GPU_ARCHS;
#if CAUSAL_CONV1D_BACKEND_HIP
  constexpr bool kHip = true;
  TORCH_CHECK(arch_supported(compiled, arch, kHip), op, ": this build of causal_conv1d has GPU code for ", compiled,
              " but ", device, " is ", arch, ". Rebuild for it: CAUSAL_CONV1D_HIP_ARCHS=", arch,
              " pip install --no-build-isolation .");
#else
  constexpr bool kHip = false;
  TORCH_CHECK(arch_supported(compiled, arch, kHip), op, ": this build of causal_conv1d has GPU code for sm_", compiled,
              " but ", device, " is sm_", arch, ". Rebuild for it: CAUSAL_CONV1D_CUDA_ARCHS=", arch,
              " pip install --no-build-isolation .");
#endif
  const int expected_warp = expected_warp_size(arch, kHip);
  TORCH_CHECK(warp == expected_warp, op, ": ", device, " (", arch, ") runs waves of ", warp,
              " lanes, but its kernels were compiled for ", expected_warp);
  DeviceDesc desc;
  check_launch(op, "device_desc", gpu::device_desc(index, &desc));
  // Two threads may get here for the same device at once: both write the same value.
  descs[index] = desc;
  checked[index].store(1, std::memory_order_release);
  return descs[index];
}

// The current stream of x's device, as the runtime's handle (hipStream_t / cudaStream_t).
void* current_stream(const at::Device& device) {
  return reinterpret_cast<void*>(c10::impl::getDeviceGuardImpl(device.type())->getStream(device).native_handle());
}

void fwd_gpu(const at::Tensor& x, const at::Tensor& weight, const OptTensor& bias, const OptTensor& seq_idx,
             const OptTensor& initial_states, const at::Tensor& out, const OptTensor& final_states_out,
             bool silu_activation) {
  const c10::DeviceGuard guard(x.device());
  const DeviceDesc& dev = checked_device(kFwdOp.error, x.device());
  const FwdParams p = make_fwd_params(x, weight, bias, seq_idx, initial_states, out, final_states_out, silu_activation);
  int64_t bytes = 0;
  check_launch(kFwdOp.error, "fwd_workspace_bytes", gpu::fwd_workspace_bytes(p, dev, &bytes));
  at::Tensor workspace;  // the channel-first kernel's seq_idx masks (fwd_workspace_bytes)
  if (bytes > 0) workspace = at::empty({bytes}, x.options().dtype(at::kByte));
  check_launch(kFwdOp.error, p.channel_last ? "fwd_channel_last_kernel" : "fwd_channel_first_kernel",
               gpu::launch_fwd(p, bytes > 0 ? workspace.data_ptr() : nullptr, dev, current_stream(x.device())));
}

void bwd_gpu(const at::Tensor& x, const at::Tensor& weight, const OptTensor& bias, const at::Tensor& dout,
             const OptTensor& seq_idx, const OptTensor& initial_states, const OptTensor& dfinal_states,
             const at::Tensor& dx, const at::Tensor& dweight, const OptTensor& dbias, const OptTensor& dinitial_states,
             bool silu_activation, bool deterministic) {
  const c10::DeviceGuard guard(x.device());
  const DeviceDesc& dev = checked_device(kBwdOp.error, x.device());
  BwdParams p = make_bwd_params(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx, dweight, dbias,
                                dinitial_states, silu_activation, deterministic);
  int64_t elems = 0;
  check_launch(kBwdOp.error, "bwd_workspace_elems", gpu::bwd_workspace_elems(p, dev, &elems));
  at::Tensor workspace;  // deterministic partials, seq_idx masks (bwd_workspace_elems)
  if (elems > 0) {
    workspace = at::empty({elems}, x.options().dtype(at::kFloat));
    p.workspace = workspace.data_ptr<float>();
  }
  check_launch(kBwdOp.error, p.f.channel_last ? "bwd_channel_last_kernel" : "bwd_channel_first_kernel",
               gpu::launch_bwd(p, dev, current_stream(x.device())));
}

void update_gpu(const at::Tensor& x, const at::Tensor& conv_state, const at::Tensor& weight, const OptTensor& bias,
                const at::Tensor& out, bool silu_activation, const OptTensor& cache_seqlens,
                const OptTensor& conv_state_indices) {
  const c10::DeviceGuard guard(x.device());
  const DeviceDesc& dev = checked_device(kUpdateOp.error, x.device());
  const UpdateParams p =
      make_update_params(x, conv_state, weight, bias, out, silu_activation, cache_seqlens, conv_state_indices);
  check_launch(kUpdateOp.error, "update_kernel", gpu::launch_update(p, dev, current_stream(x.device())));
}

at::Tensor update_functional_gpu(const at::Tensor& x, const at::Tensor& conv_state, const at::Tensor& weight,
                                 const OptTensor& bias, bool silu_activation, const OptTensor& cache_seqlens,
                                 const OptTensor& conv_state_indices) {
  at::Tensor out = at::empty_like(x);  // x's strides (any are accepted), as the Python layer's torch.empty_like
  update_gpu(x, conv_state, weight, bias, out, silu_activation, cache_seqlens, conv_state_indices);
  return out;
}

at::Tensor varlen_states_gpu(const at::Tensor& x, const at::Tensor& cu_seqlens, int64_t state_len) {
  const c10::DeviceGuard guard(x.device());
  const DeviceDesc& dev = checked_device(kVarlenStatesOp.error, x.device());
  at::Tensor states = new_varlen_states(x, cu_seqlens, state_len);
  const VarlenStatesParams p = make_varlen_states_params(x, cu_seqlens, states);
  check_launch(kVarlenStatesOp.error, "varlen_states_kernel",
               gpu::launch_varlen_states(p, dev, current_stream(x.device())));
  return states;
}

// The serving API. Nothing reads the metadata on the host unless validate_data asks for it (a
// synchronisation: host copies of the index tensors, checked as on the CPU, before the launch).
void serving_fwd_gpu(const at::Tensor& x, const at::Tensor& weight, const OptTensor& bias,
                     const at::Tensor& conv_states, const at::Tensor& query_start_loc, const OptTensor& cache_indices,
                     const OptTensor& has_initial_state, const OptTensor& block_idx_first_scheduled_token,
                     const OptTensor& block_idx_last_scheduled_token, const OptTensor& initial_state_idx,
                     const OptTensor& num_computed_tokens, int64_t block_size_to_align,
                     std::optional<int64_t> pad_slot_id, std::optional<int64_t> null_block_id, bool silu_activation,
                     bool validate_data, const at::Tensor& out) {
  constexpr const char* kOp = kServingFwdOp.error;
  const c10::DeviceGuard guard(x.device());
  const DeviceDesc& dev = checked_device(kOp, x.device());
  const ServingFwdParams p = make_serving_fwd_params(
      x, weight, bias, conv_states, query_start_loc, cache_indices, has_initial_state, block_idx_first_scheduled_token,
      block_idx_last_scheduled_token, initial_state_idx, num_computed_tokens, block_size_to_align, pad_slot_id,
      null_block_id, silu_activation, out);
  if (validate_data)
    validate_serving_fwd_metadata_on_host(p, query_start_loc, cache_indices, block_idx_first_scheduled_token,
                                          block_idx_last_scheduled_token, initial_state_idx, num_computed_tokens);
  int64_t elems = 0;
  check_launch(kOp, "serving_fwd_workspace_elems", gpu::serving_fwd_workspace_elems(p, dev, &elems));
  // Where each sequence's chunks start, computed on the device (no host copy of query_start_loc).
  const at::Tensor workspace = at::empty({elems}, x.options().dtype(at::kInt));
  check_launch(kOp, "serving_fwd_kernel",
               gpu::launch_serving_fwd(p, workspace.data_ptr<int32_t>(), dev, current_stream(x.device())));
}

void serving_update_gpu(const at::Tensor& x, const at::Tensor& conv_state, const at::Tensor& weight,
                        const OptTensor& bias, const OptTensor& conv_state_indices,
                        const OptTensor& num_accepted_tokens, const OptTensor& query_start_loc,
                        const OptTensor& block_idx_last_scheduled_token, const OptTensor& initial_state_idx,
                        std::optional<int64_t> pad_slot_id, std::optional<int64_t> null_block_id, bool silu_activation,
                        bool validate_data) {
  constexpr const char* kOp = kServingUpdateOp.error;
  const c10::DeviceGuard guard(x.device());
  const DeviceDesc& dev = checked_device(kOp, x.device());
  const ServingUpdateParams p = make_serving_update_params(
      x, conv_state, weight, bias, conv_state_indices, num_accepted_tokens, query_start_loc,
      block_idx_last_scheduled_token, initial_state_idx, pad_slot_id, null_block_id, silu_activation);
  if (validate_data)
    validate_serving_update_metadata_on_host(p, conv_state_indices, num_accepted_tokens, query_start_loc,
                                             block_idx_last_scheduled_token, initial_state_idx);
  check_launch(kOp, "serving_update_kernel", gpu::launch_serving_update(p, dev, current_stream(x.device())));
}

}  // namespace

TORCH_LIBRARY_IMPL(causal_conv1d, CUDA, m) {
  m.impl(kFwdOp.registered, &fwd_gpu);
  m.impl(kBwdOp.registered, &bwd_gpu);
  m.impl(kUpdateOp.registered, &update_gpu);
  m.impl(kUpdateFunctionalOp.registered, &update_functional_gpu);
  m.impl(kVarlenStatesOp.registered, &varlen_states_gpu);
  m.impl(kServingFwdOp.registered, &serving_fwd_gpu);
  m.impl(kServingUpdateOp.registered, &serving_update_gpu);
}

}  // namespace causal_conv1d::torch_ops
