// Argument checks and params construction for the torch ops. Every check names the op, the
// argument, what was expected and what came. Shared by the CPU and GPU registrations so both
// backends accept exactly the same inputs.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include <functional>
#include <string>

#include "causal_conv1d/params.h"
#include "causal_conv1d/serving.h"

namespace causal_conv1d::torch_ops {

using OptTensor = std::optional<at::Tensor>;

// dtype of a float tensor, or an error naming the argument.
DType float_dtype(const char* op, const char* name, const at::Tensor& t);

void check_same_device(const char* op, const char* name, const at::Tensor& t, const at::Tensor& x);

// "(2, 64, 3)"
std::string shape_str(at::IntArrayRef sizes);

void check_shape(const char* op, const char* name, const at::Tensor& t, std::initializer_list<int64_t> expected,
                 const char* expected_desc);

// Turns a launcher's status code into a RuntimeError naming the kernel family.
void check_launch(const char* op, const char* kernel, int code);

// weight (dim, width) with a supported width on x's device; returns the width.
int check_weight(const char* op, const at::Tensor& weight, const at::Tensor& x, int64_t dim);
// Optional bias (dim,) in weight's dtype on x's device.
void check_bias(const char* op, const OptTensor& bias, const at::Tensor& weight, const at::Tensor& x, int64_t dim);
void check_no_overlap(const char* op, const char* name, const at::Tensor& a, const char* other, const at::Tensor& b);

// A dimension of size <= 1 places no constraint on its stride.
inline bool unit_stride(const at::Tensor& t, int d) { return t.size(d) <= 1 || t.stride(d) == 1; }

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
// A caller-given out for an update-style op: x's device, dtype and shape (any strides), sharing
// memory with neither x nor the state cache (named `state_name`).
void check_out_like(const char* op, const at::Tensor& out, const at::Tensor& x, const char* state_name,
                    const at::Tensor& state);

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

// The serving API (serving.h): shapes, dtypes and devices of every argument, shared by the CPU
// and GPU registrations (serving_checks.cpp). null_block_id / pad_slot_id: nullopt = none.
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

// The metadata's values (offsets, cache lines, block indices, accepted-token counts), read on the
// host: params built from CPU tensors (or host copies of device metadata). Raises naming the entry.
void validate_serving_fwd_metadata(const ServingFwdParams& p);
void validate_serving_update_metadata(const ServingUpdateParams& p);

// The same for params of device tensors: the index tensors are copied to the host first (a
// synchronisation; the GPU ops do it only with validate_data=True).
void validate_serving_fwd_metadata_on_host(const ServingFwdParams& p, const at::Tensor& query_start_loc,
                                           const OptTensor& cache_indices, const OptTensor& block_idx_first,
                                           const OptTensor& block_idx_last, const OptTensor& initial_state_idx,
                                           const OptTensor& num_computed_tokens);
void validate_serving_update_metadata_on_host(const ServingUpdateParams& p, const OptTensor& conv_state_indices,
                                              const OptTensor& num_accepted_tokens, const OptTensor& query_start_loc,
                                              const OptTensor& block_idx_last, const OptTensor& initial_state_idx);

}  // namespace causal_conv1d::torch_ops
