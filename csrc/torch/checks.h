// Argument checks and params construction for the torch ops. Every check names the op, the
// argument, what was expected and what came. Shared by the CPU and GPU registrations so both
// backends accept exactly the same inputs.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include <functional>
#include <string>

#include "causal_conv1d/params.h"

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

}  // namespace causal_conv1d::torch_ops
