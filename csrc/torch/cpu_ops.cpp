// CPU implementations of the ops: checks (shared with the GPU), then the CPU backend on torch's
// intra-op thread pool.
#include <ATen/Parallel.h>
#include <torch/library.h>

#include "causal_conv1d/cpu.h"
#include "checks.h"

namespace causal_conv1d::torch_ops {
namespace {

void torch_parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
  at::parallel_for(0, n, grain, body);
}

void fwd_cpu(const at::Tensor& x, const at::Tensor& weight, const OptTensor& bias, const OptTensor& seq_idx,
             const OptTensor& initial_states, const at::Tensor& out, const OptTensor& final_states_out,
             bool silu_activation) {
  const FwdParams p =
      make_fwd_params(x, weight, bias, seq_idx, initial_states, out, final_states_out, silu_activation);
  check_launch("causal_conv1d_fwd", "cpu::launch_fwd", cpu::launch_fwd(p, torch_parallel_for));
}

at::Tensor varlen_states_cpu(const at::Tensor& x, const at::Tensor& cu_seqlens, int64_t state_len) {
  at::Tensor states = new_varlen_states(x, cu_seqlens, state_len);
  const VarlenStatesParams p = make_varlen_states_params(x, cu_seqlens, states);
  // On the CPU the offsets are cheap to validate; the GPU kernel clamps them instead.
  const at::Tensor cu = cu_seqlens.to(at::kLong);
  const int64_t* o = cu.data_ptr<int64_t>();
  TORCH_CHECK(o[0] >= 0, "causal_conv1d_varlen_states: cu_seqlens[0] must be >= 0, got ", o[0]);
  for (int64_t i = 0; i < p.batch; ++i)
    TORCH_CHECK(o[i + 1] >= o[i], "causal_conv1d_varlen_states: cu_seqlens must be non-decreasing, got cu_seqlens[",
                i, "] = ", o[i], " > cu_seqlens[", i + 1, "] = ", o[i + 1]);
  TORCH_CHECK(o[p.batch] <= p.total_tokens, "causal_conv1d_varlen_states: cu_seqlens[-1] = ", o[p.batch],
              " exceeds x.size(0) = ", p.total_tokens);
  check_launch("causal_conv1d_varlen_states", "cpu::launch_varlen_states",
               cpu::launch_varlen_states(p, torch_parallel_for));
  return states;
}

}  // namespace

TORCH_LIBRARY_IMPL(causal_conv1d, CPU, m) {
  m.impl("fwd", &fwd_cpu);
  m.impl("varlen_states", &varlen_states_cpu);
}

}  // namespace causal_conv1d::torch_ops
