// Argument checks for the torch ops (checks.cpp: those several ops share; serving_checks.cpp: the
// serving metadata's values). Every check names the op, the argument, what was expected and what
// came. Each op's params struct is built, after its checks, by make_params.h.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

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

// A caller-given out for an update-style op: x's device, dtype and shape (any strides), sharing
// memory with neither x nor the state cache (named `state_name`).
void check_out_like(const char* op, const at::Tensor& out, const at::Tensor& x, const char* state_name,
                    const at::Tensor& state);

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
