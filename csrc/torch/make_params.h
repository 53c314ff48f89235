// Each op's params struct (causal_conv1d/params.h, serving.h), built from the op's torch arguments
// after checking them all: make_params.cpp, make_serving_params.cpp. Shared by the CPU and GPU
// registrations so both backends accept exactly the same inputs.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include "causal_conv1d/params.h"
#include "causal_conv1d/serving.h"
#include "checks.h"

namespace causal_conv1d::torch_ops {

// weight (dim, width) and optional bias (dim,) pointers and strides into any params struct with
// those fields (FwdParams, UpdateParams, the serving params); w_dtype is the caller's.
template <typename Params>
void take_weight_bias(const at::Tensor& weight, const OptTensor& bias, Params& p) {
  p.weight = weight.data_ptr();
  p.weight_c_stride = weight.stride(0);
  p.weight_w_stride = weight.stride(1);
  if (bias) {
    p.bias = bias->data_ptr();
    p.bias_stride = bias->stride(0);
  }
}

// Builds FwdParams from the op's arguments after checking them all. Layout follows x.
FwdParams make_fwd_params(const at::Tensor& x, const at::Tensor& weight, const OptTensor& bias,
                          const OptTensor& seq_idx, const OptTensor& initial_states, const at::Tensor& out,
                          const OptTensor& final_states_out, bool silu);

BwdParams make_bwd_params(const at::Tensor& x, const at::Tensor& weight, const OptTensor& bias, const at::Tensor& dout,
                          const OptTensor& seq_idx, const OptTensor& initial_states, const OptTensor& dfinal_states,
                          const at::Tensor& dx, const at::Tensor& dweight, const OptTensor& dbias,
                          const OptTensor& dinitial_states, bool silu, bool deterministic);

// x may be (batch, dim) (one step) or (batch, dim, seqlen); out has x's shape.
UpdateParams make_update_params(const at::Tensor& x, const at::Tensor& conv_state, const at::Tensor& weight,
                                const OptTensor& bias, const at::Tensor& out, bool silu, const OptTensor& cache_seqlens,
                                const OptTensor& conv_state_indices);

VarlenStatesParams make_varlen_states_params(const at::Tensor& x, const at::Tensor& cu_seqlens,
                                             const at::Tensor& states);

// Allocates the (batch, dim, state_len) channel-last states tensor varlen_states returns.
at::Tensor new_varlen_states(const at::Tensor& x, const at::Tensor& cu_seqlens, int64_t state_len);

// The serving API (serving.h; make_serving_params.cpp): shapes, dtypes and devices of every
// argument. The metadata's values are checked apart (checks.h: validate_serving_*_metadata).
// null_block_id / pad_slot_id: nullopt = none.
ServingFwdParams make_serving_fwd_params(const at::Tensor& x, const at::Tensor& weight, const OptTensor& bias,
                                         const at::Tensor& conv_states, const at::Tensor& query_start_loc,
                                         const OptTensor& cache_indices, const OptTensor& has_initial_state,
                                         const OptTensor& block_idx_first_scheduled_token,
                                         const OptTensor& block_idx_last_scheduled_token,
                                         const OptTensor& initial_state_idx, const OptTensor& num_computed_tokens,
                                         int64_t block_size_to_align, std::optional<int64_t> pad_slot_id,
                                         std::optional<int64_t> null_block_id, bool silu, const at::Tensor& out);

ServingUpdateParams make_serving_update_params(const at::Tensor& x, const at::Tensor& conv_state,
                                               const at::Tensor& weight, const OptTensor& bias,
                                               const OptTensor& conv_state_indices,
                                               const OptTensor& num_accepted_tokens, const OptTensor& query_start_loc,
                                               const OptTensor& block_idx_last_scheduled_token,
                                               const OptTensor& initial_state_idx, std::optional<int64_t> pad_slot_id,
                                               std::optional<int64_t> null_block_id, bool silu);

}  // namespace causal_conv1d::torch_ops
