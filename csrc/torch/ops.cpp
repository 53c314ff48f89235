// Op schemas. Outputs that callers pre-allocate are mutable arguments (out-buffer style), so the
// Python layer controls allocation and layout; fake (meta) kernels live in causal_conv1d/_ops.py.
// The autograd keys of the ops that return nothing fall through (below).
#include <torch/library.h>

#include <string>

#include "causal_conv1d/arch_check.h"
#include "causal_conv1d/build_config.h"
#include "op_names.h"

namespace causal_conv1d::torch_ops {
namespace {

// What this binary was built for, as "key=value" lines (read by causal_conv1d.show_config()).
std::string build_config() {
  std::string s = "backend=" CAUSAL_CONV1D_BACKEND_NAME "\n";
  s += "gpu_archs=" CAUSAL_CONV1D_GPU_ARCHS "\n";
  s += "torch_version=" CAUSAL_CONV1D_TORCH_VERSION "\n";
  s += "hip_version=" CAUSAL_CONV1D_HIP_VERSION "\n";  // empty unless a HIP build
  s += "rocm_root=" CAUSAL_CONV1D_ROCM_ROOT "\n";
  // Whether serving_fwd / serving_update have GPU kernels in this build.
#if CAUSAL_CONV1D_HAS_GPU
  s += "serving_gpu=1\n";
#else
  s += "serving_gpu=0\n";
#endif
  return s;
}

// Whether this build's GPU code runs on a device of the given arch ("gfx1201", or "90" for
// compute capability 9.0): the rule of arch_check.h, asked by the Python diagnostics so that it
// lives in one place. Always false in a CPU-only build.
bool arch_supported(const std::string& device_arch) {
#if CAUSAL_CONV1D_HAS_GPU
  return causal_conv1d::arch_supported(CAUSAL_CONV1D_GPU_ARCHS, device_arch, /*hip=*/CAUSAL_CONV1D_BACKEND_HIP);
#else
  return false;
#endif
}

// The schema "<registered name><signature>", signature being "(<arguments>) -> <returns>".
c10::FunctionSchema op_schema(const OpName& op, const char* signature) {
  return torch::schema((std::string(op.registered) + signature).c_str());
}

}  // namespace
}  // namespace causal_conv1d::torch_ops

TORCH_LIBRARY(causal_conv1d, m) {
  using namespace causal_conv1d::torch_ops;
  const std::vector<at::Tag> tags{at::Tag::pt2_compliant_tag};
  m.def(op_schema(kFwdOp,
                  "(Tensor x, Tensor weight, Tensor? bias, Tensor? seq_idx, Tensor? initial_states, "
                  "Tensor(a!) out, Tensor(b!)? final_states_out, bool silu_activation) -> ()"),
        tags);
  m.def(op_schema(kBwdOp,
                  "(Tensor x, Tensor weight, Tensor? bias, Tensor dout, Tensor? seq_idx, Tensor? initial_states, "
                  "Tensor? dfinal_states, Tensor(a!) dx, Tensor(b!) dweight, Tensor(c!)? dbias, "
                  "Tensor(d!)? dinitial_states, bool silu_activation, bool deterministic) -> ()"),
        tags);
  m.def(op_schema(kUpdateOp,
                  "(Tensor x, Tensor(a!) conv_state, Tensor weight, Tensor? bias, Tensor(b!) out, "
                  "bool silu_activation, Tensor? cache_seqlens, Tensor? conv_state_indices) -> ()"),
        tags);
  m.def(op_schema(kUpdateFunctionalOp,
                  "(Tensor x, Tensor(a!) conv_state, Tensor weight, Tensor? bias, bool silu_activation, "
                  "Tensor? cache_seqlens, Tensor? conv_state_indices) -> Tensor"),
        tags);
  m.def(op_schema(kVarlenStatesOp, "(Tensor x, Tensor cu_seqlens, int state_len) -> Tensor"), tags);
  // The serving API (causal_conv1d/serving.py, csrc/include/causal_conv1d/serving.h).
  m.def(op_schema(kServingFwdOp,
                  "(Tensor x, Tensor weight, Tensor? bias, Tensor(a!) conv_states, Tensor query_start_loc, "
                  "Tensor? cache_indices, Tensor? has_initial_state, Tensor? block_idx_first_scheduled_token, "
                  "Tensor? block_idx_last_scheduled_token, Tensor? initial_state_idx, Tensor? num_computed_tokens, "
                  "int block_size_to_align, int? pad_slot_id, int? null_block_id, bool silu_activation, "
                  "bool validate_data, Tensor(b!) out) -> ()"),
        tags);
  m.def(op_schema(kServingUpdateOp,
                  "(Tensor(a!) x, Tensor(b!) conv_state, Tensor weight, Tensor? bias, Tensor? conv_state_indices, "
                  "Tensor? num_accepted_tokens, Tensor? query_start_loc, Tensor? block_idx_last_scheduled_token, "
                  "Tensor? initial_state_idx, int? pad_slot_id, int? null_block_id, bool silu_activation, "
                  "bool validate_data) -> ()"),
        tags);
  m.def("build_config() -> str", &causal_conv1d::torch_ops::build_config);
  m.def("arch_supported(str device_arch) -> bool", &causal_conv1d::torch_ops::arch_supported);
}

// Autograd for the ops that return nothing (every output is a caller-given buffer): there is no
// output to attach a graph node to, so PyTorch's autograd fallback for custom ops only boxes the
// arguments, checks whether any requires grad and redispatches below autograd; a fallthrough
// dispatches straight to the backend kernel instead (same behaviour, ~2 us less per call: H200
// host, an update of batch 1 through the C++ dispatcher 7.4-9.1 us against 5.4-6.8 through
// redispatch; benchmarks/host_cost.py --cpp). Derivatives live in the Python layer (the
// autograd.Function, and the functional ops' registered autograd). update_functional returns a
// tensor but is not differentiable either (a decode step, as upstream's update: its out has no
// grad_fn, as out of the update op), so it falls through too; varlen_states keeps the fallback.
namespace {
void autograd_fallthrough(torch::Library& m) {
  using namespace causal_conv1d::torch_ops;
  for (const OpName* op : {&kFwdOp, &kBwdOp, &kUpdateOp, &kUpdateFunctionalOp, &kServingFwdOp, &kServingUpdateOp})
    m.impl(op->registered, torch::CppFunction::makeFallthrough());
}
}  // namespace

TORCH_LIBRARY_IMPL(causal_conv1d, AutogradCPU, m) { autograd_fallthrough(m); }
TORCH_LIBRARY_IMPL(causal_conv1d, AutogradCUDA, m) { autograd_fallthrough(m); }
