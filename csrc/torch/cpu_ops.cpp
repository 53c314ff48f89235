// CPU implementations of the ops: checks (shared with the GPU), then the CPU backend on torch's
// intra-op thread pool.
#include <ATen/Parallel.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include "causal_conv1d/cpu.h"
#include "checks.h"
#include "make_params.h"
#include "op_names.h"

// With ATen's OpenMP backend, at::parallel_for runs its whole range on the calling thread in code
// compiled without OpenMP. cmake/TorchQuery.cmake compiles this file with PyTorch's OpenMP runtime;
// this stops a build that would silently leave the CPU ops on one thread.
#if !defined(INTRA_OP_PARALLEL)
#error "at::parallel_for is serial in this translation unit: build it with OpenMP (cmake/TorchQuery.cmake)"
#endif

namespace causal_conv1d::torch_ops {
namespace {

void torch_parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
  at::parallel_for(0, n, grain, body);
}

void fwd_cpu(const at::Tensor& x, const at::Tensor& weight, const OptTensor& bias, const OptTensor& seq_idx,
             const OptTensor& initial_states, const at::Tensor& out, const OptTensor& final_states_out,
             bool silu_activation) {
  const FwdParams p = make_fwd_params(x, weight, bias, seq_idx, initial_states, out, final_states_out, silu_activation);
  check_launch(kFwdOp.error, "cpu::launch_fwd", cpu::launch_fwd(p, torch_parallel_for));
}

void bwd_cpu(const at::Tensor& x, const at::Tensor& weight, const OptTensor& bias, const at::Tensor& dout,
             const OptTensor& seq_idx, const OptTensor& initial_states, const OptTensor& dfinal_states,
             const at::Tensor& dx, const at::Tensor& dweight, const OptTensor& dbias, const OptTensor& dinitial_states,
             bool silu_activation, bool deterministic) {
  const BwdParams p = make_bwd_params(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx, dweight, dbias,
                                      dinitial_states, silu_activation, deterministic);
  check_launch(kBwdOp.error, "cpu::launch_bwd", cpu::launch_bwd(p, torch_parallel_for));
}

void update_cpu(const at::Tensor& x, const at::Tensor& conv_state, const at::Tensor& weight, const OptTensor& bias,
                const at::Tensor& out, bool silu_activation, const OptTensor& cache_seqlens,
                const OptTensor& conv_state_indices) {
  const UpdateParams p =
      make_update_params(x, conv_state, weight, bias, out, silu_activation, cache_seqlens, conv_state_indices);
  // On the CPU the index vectors are cheap to validate; the GPU kernel skips bad rows instead.
  for (int64_t b = 0; b < p.batch; ++b) {
    if (p.cache_seqlens)
      TORCH_CHECK(p.cache_seqlens[b] >= 0, kUpdateOp.error, ": cache_seqlens must be >= 0, got cache_seqlens[", b,
                  "] = ", p.cache_seqlens[b]);
    if (p.conv_state_indices)
      TORCH_CHECK(p.conv_state_indices[b] < p.num_cache_lines, kUpdateOp.error,
                  ": conv_state_indices must be < conv_state.size(0) = ", p.num_cache_lines,
                  " (negative marks a padding row), got conv_state_indices[", b, "] = ", p.conv_state_indices[b]);
  }
  check_launch(kUpdateOp.error, "cpu::launch_update", cpu::launch_update(p, torch_parallel_for));
}

at::Tensor update_functional_cpu(const at::Tensor& x, const at::Tensor& conv_state, const at::Tensor& weight,
                                 const OptTensor& bias, bool silu_activation, const OptTensor& cache_seqlens,
                                 const OptTensor& conv_state_indices) {
  at::Tensor out = at::empty_like(x);  // x's strides (any are accepted), as the Python layer's torch.empty_like
  update_cpu(x, conv_state, weight, bias, out, silu_activation, cache_seqlens, conv_state_indices);
  return out;
}

at::Tensor varlen_states_cpu(const at::Tensor& x, const at::Tensor& cu_seqlens, int64_t state_len) {
  at::Tensor states = new_varlen_states(x, cu_seqlens, state_len);
  const VarlenStatesParams p = make_varlen_states_params(x, cu_seqlens, states);
  // On the CPU the offsets are cheap to validate; the GPU kernel clamps them instead.
  const at::Tensor cu = cu_seqlens.to(at::kLong);
  const int64_t* o = cu.data_ptr<int64_t>();
  TORCH_CHECK(o[0] >= 0, kVarlenStatesOp.error, ": cu_seqlens[0] must be >= 0, got ", o[0]);
  for (int64_t i = 0; i < p.batch; ++i)
    TORCH_CHECK(o[i + 1] >= o[i], kVarlenStatesOp.error, ": cu_seqlens must be non-decreasing, got cu_seqlens[", i,
                "] = ", o[i], " > cu_seqlens[", i + 1, "] = ", o[i + 1]);
  TORCH_CHECK(o[p.batch] <= p.total_tokens, kVarlenStatesOp.error, ": cu_seqlens[-1] = ", o[p.batch],
              " exceeds x.size(0) = ", p.total_tokens);
  check_launch(kVarlenStatesOp.error, "cpu::launch_varlen_states", cpu::launch_varlen_states(p, torch_parallel_for));
  return states;
}

// The serving API. The metadata lives on the CPU, so it is always validated (validate_data only
// matters on the GPU, where it costs a synchronisation).
void serving_fwd_cpu(const at::Tensor& x, const at::Tensor& weight, const OptTensor& bias,
                     const at::Tensor& conv_states, const at::Tensor& query_start_loc, const OptTensor& cache_indices,
                     const OptTensor& has_initial_state, const OptTensor& block_idx_first_scheduled_token,
                     const OptTensor& block_idx_last_scheduled_token, const OptTensor& initial_state_idx,
                     const OptTensor& num_computed_tokens, int64_t block_size_to_align,
                     std::optional<int64_t> pad_slot_id, std::optional<int64_t> null_block_id, bool silu_activation,
                     bool validate_data, const at::Tensor& out) {
  const ServingFwdParams p = make_serving_fwd_params(
      x, weight, bias, conv_states, query_start_loc, cache_indices, has_initial_state, block_idx_first_scheduled_token,
      block_idx_last_scheduled_token, initial_state_idx, num_computed_tokens, block_size_to_align, pad_slot_id,
      null_block_id, silu_activation, out);
  validate_serving_fwd_metadata(p);
  check_launch(kServingFwdOp.error, "cpu::launch_serving_fwd", cpu::launch_serving_fwd(p, torch_parallel_for));
}

void serving_update_cpu(const at::Tensor& x, const at::Tensor& conv_state, const at::Tensor& weight,
                        const OptTensor& bias, const OptTensor& conv_state_indices,
                        const OptTensor& num_accepted_tokens, const OptTensor& query_start_loc,
                        const OptTensor& block_idx_last_scheduled_token, const OptTensor& initial_state_idx,
                        std::optional<int64_t> pad_slot_id, std::optional<int64_t> null_block_id, bool silu_activation,
                        bool validate_data) {
  const ServingUpdateParams p = make_serving_update_params(
      x, conv_state, weight, bias, conv_state_indices, num_accepted_tokens, query_start_loc,
      block_idx_last_scheduled_token, initial_state_idx, pad_slot_id, null_block_id, silu_activation);
  validate_serving_update_metadata(p);
  check_launch(kServingUpdateOp.error, "cpu::launch_serving_update", cpu::launch_serving_update(p, torch_parallel_for));
}

}  // namespace

TORCH_LIBRARY_IMPL(causal_conv1d, CPU, m) {
  m.impl(kFwdOp.registered, &fwd_cpu);
  m.impl(kBwdOp.registered, &bwd_cpu);
  m.impl(kUpdateOp.registered, &update_cpu);
  m.impl(kUpdateFunctionalOp.registered, &update_functional_cpu);
  m.impl(kVarlenStatesOp.registered, &varlen_states_cpu);
  m.impl(kServingFwdOp.registered, &serving_fwd_cpu);
  m.impl(kServingUpdateOp.registered, &serving_update_cpu);
}

}  // namespace causal_conv1d::torch_ops
