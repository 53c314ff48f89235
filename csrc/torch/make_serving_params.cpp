// The serving API's params structs (causal_conv1d/serving.h), built from the torch arguments of
// causal_conv1d/serving.py's functions after checking their shapes, dtypes and devices, for every
// backend. The metadata's values are checked apart (serving_checks.cpp), since reading them costs
// the GPU a synchronisation.
#include <c10/util/Exception.h>

#include "checks.h"
#include "make_params.h"
#include "op_names.h"

namespace causal_conv1d::torch_ops {

namespace {

constexpr const char* kFn = kServingFwdOp.error;
constexpr const char* kUpd = kServingUpdateOp.error;

void check_int32(const char* op, const char* name, const at::Tensor& t, const at::Tensor& x) {
  check_same_device(op, name, t, x);
  TORCH_CHECK(t.scalar_type() == at::kInt, op, ": ", name, " must be int32, got ", t.scalar_type());
}

// An int32 (n,) vector.
IndexVec index_vec(const char* op, const char* name, const OptTensor& t, const at::Tensor& x, int64_t n) {
  IndexVec v;
  if (!t) return v;
  check_int32(op, name, *t, x);
  check_shape(op, name, *t, {n}, "(batch,)");
  v.data = t->data_ptr<int32_t>();
  v.stride = t->stride(0);
  return v;
}

// cache_indices / conv_state_indices: int32 (batch,) or (batch, blocks), any strides.
void index_table(const char* op, const char* name, const at::Tensor& t, const at::Tensor& x, int64_t batch,
                 const int32_t** data, int64_t* seq_stride, int64_t* block_stride, int64_t* blocks) {
  check_int32(op, name, t, x);
  TORCH_CHECK((t.dim() == 1 || t.dim() == 2) && t.size(0) == batch, op, ": ", name,
              " must be (batch,) or, with prefix caching, (batch, blocks) with batch = ", batch, ", got shape ",
              shape_str(t.sizes()));
  *data = t.data_ptr<int32_t>();
  *seq_stride = t.stride(0);
  *blocks = t.dim() == 2 ? t.size(1) : 1;
  *block_stride = t.dim() == 2 ? t.stride(1) : 0;
}

// (num_cache_lines, dim, state_len >= width - 1) in x's dtype; returns its sizes and strides.
template <typename Params>
void take_cache(const char* op, const char* name, const at::Tensor& s, const at::Tensor& x, Params& p) {
  check_same_device(op, name, s, x);
  TORCH_CHECK(s.dim() == 3, op, ": ", name, " must be (cache_lines, dim, state_len), got shape ", shape_str(s.sizes()));
  TORCH_CHECK(s.scalar_type() == x.scalar_type(), op, ": ", name, " must have x's dtype (", x.scalar_type(), "), got ",
              s.scalar_type());
  TORCH_CHECK(s.size(1) == p.dim, op, ": ", name, ".size(1) must be dim = ", p.dim, ", got ", s.size(1));
  TORCH_CHECK(s.size(2) >= p.width - 1, op, ": ", name, "'s state_len (size(2)) must be >= width - 1 = ", p.width - 1,
              ", got ", s.size(2));
  TORCH_CHECK(s.size(0) < (int64_t(1) << 31), op, ": ", name, " must have fewer than 2^31 cache lines, got ",
              s.size(0));
  p.num_cache_lines = s.size(0);
  p.state_len = s.size(2);
  p.state_line_stride = s.stride(0);
  p.state_c_stride = s.stride(1);
  p.state_l_stride = s.stride(2);
}

PaddingRule padding_rule(std::optional<int64_t> pad_slot_id, std::optional<int64_t> null_block_id) {
  PaddingRule r;
  r.has_pad_slot = pad_slot_id.has_value();
  r.pad_slot_id = pad_slot_id.value_or(-1);
  r.has_null_block = null_block_id.has_value();
  r.null_block_id = null_block_id.value_or(0);
  return r;
}

}  // namespace

ServingFwdParams make_serving_fwd_params(const at::Tensor& x, const at::Tensor& weight, const OptTensor& bias,
                                         const at::Tensor& conv_states, const at::Tensor& query_start_loc,
                                         const OptTensor& cache_indices, const OptTensor& has_initial_state,
                                         const OptTensor& block_idx_first_scheduled_token,
                                         const OptTensor& block_idx_last_scheduled_token,
                                         const OptTensor& initial_state_idx, const OptTensor& num_computed_tokens,
                                         int64_t block_size_to_align, std::optional<int64_t> pad_slot_id,
                                         std::optional<int64_t> null_block_id, bool silu, const at::Tensor& out) {
  TORCH_CHECK(x.dim() == 2, kFn, ": x must be (dim, total_tokens), got shape ", shape_str(x.sizes()));
  ServingFwdParams p;
  p.dim = x.size(0);
  p.total_tokens = x.size(1);
  p.x_dtype = float_dtype(kFn, "x", x);
  TORCH_CHECK(unit_stride(x, 0) || unit_stride(x, 1), kFn,
              ": x must have stride 1 along dim or along tokens, got strides ", shape_str(x.strides()));
  p.width = check_weight(kFn, weight, x, p.dim);
  check_bias(kFn, bias, weight, x, p.dim);
  p.w_dtype = float_dtype(kFn, "weight", weight);
  take_weight_bias(weight, bias, p);
  p.silu = silu;
  p.x = x.data_ptr();
  p.x_c_stride = x.stride(0);
  p.x_l_stride = x.stride(1);

  take_cache(kFn, "conv_states", conv_states, x, p);
  p.conv_states = conv_states.data_ptr();

  check_out_like(kFn, out, x, "conv_states", conv_states);
  p.out = out.data_ptr();
  p.out_c_stride = out.stride(0);
  p.out_l_stride = out.stride(1);

  check_int32(kFn, "query_start_loc", query_start_loc, x);
  TORCH_CHECK(query_start_loc.dim() == 1 && query_start_loc.size(0) >= 1, kFn,
              ": query_start_loc must be (batch + 1,), got shape ", shape_str(query_start_loc.sizes()));
  p.batch = query_start_loc.size(0) - 1;
  p.query_start_loc = {query_start_loc.data_ptr<int32_t>(), query_start_loc.stride(0)};

  if (cache_indices) {
    index_table(kFn, "cache_indices", *cache_indices, x, p.batch, &p.cache_indices, &p.ci_seq_stride,
                &p.ci_block_stride, &p.ci_blocks);
  } else {
    TORCH_CHECK(p.num_cache_lines >= p.batch, kFn, ": without cache_indices sequence i uses cache line i, so ",
                "conv_states needs at least batch = ", p.batch, " lines, got ", p.num_cache_lines);
  }
  if (has_initial_state) {
    check_same_device(kFn, "has_initial_state", *has_initial_state, x);
    TORCH_CHECK(has_initial_state->scalar_type() == at::kBool, kFn, ": has_initial_state must be bool, got ",
                has_initial_state->scalar_type());
    check_shape(kFn, "has_initial_state", *has_initial_state, {p.batch}, "(batch,)");
    p.has_initial_state = has_initial_state->data_ptr<bool>();
    p.his_stride = has_initial_state->stride(0);
  }

  // Prefix caching is on when block_idx_last_scheduled_token is given (as in vLLM, which then
  // reads the other three as well); without it they are not read.
  if (block_idx_last_scheduled_token) {
    TORCH_CHECK(cache_indices && block_idx_first_scheduled_token && initial_state_idx && num_computed_tokens, kFn,
                ": prefix caching (block_idx_last_scheduled_token given) also needs cache_indices, "
                "block_idx_first_scheduled_token, initial_state_idx and num_computed_tokens");
    TORCH_CHECK(block_size_to_align > 0, kFn,
                ": prefix caching needs block_size_to_align > 0 (the block size the states are aligned to), got ",
                block_size_to_align);
    p.prefix_caching = true;
    p.block_size = block_size_to_align;
    p.block_idx_first = index_vec(kFn, "block_idx_first_scheduled_token", block_idx_first_scheduled_token, x, p.batch);
    p.block_idx_last = index_vec(kFn, "block_idx_last_scheduled_token", block_idx_last_scheduled_token, x, p.batch);
    p.initial_state_idx = index_vec(kFn, "initial_state_idx", initial_state_idx, x, p.batch);
    p.num_computed_tokens = index_vec(kFn, "num_computed_tokens", num_computed_tokens, x, p.batch);
  }
  p.padding = padding_rule(pad_slot_id, null_block_id);
  return p;
}

ServingUpdateParams make_serving_update_params(const at::Tensor& x, const at::Tensor& conv_state,
                                               const at::Tensor& weight, const OptTensor& bias,
                                               const OptTensor& conv_state_indices,
                                               const OptTensor& num_accepted_tokens, const OptTensor& query_start_loc,
                                               const OptTensor& block_idx_last_scheduled_token,
                                               const OptTensor& initial_state_idx, std::optional<int64_t> pad_slot_id,
                                               std::optional<int64_t> null_block_id, bool silu) {
  ServingUpdateParams p;
  p.x_dtype = float_dtype(kUpd, "x", x);
  const bool varlen = query_start_loc.has_value();
  if (varlen) {
    TORCH_CHECK(x.dim() == 2, kUpd, ": with query_start_loc, x must be (total_tokens, dim), got shape ",
                shape_str(x.sizes()));
    p.total_tokens = x.size(0);
    p.dim = x.size(1);
    p.x_l_stride = x.stride(0);
    p.x_c_stride = x.stride(1);
    check_int32(kUpd, "query_start_loc", *query_start_loc, x);
    TORCH_CHECK(query_start_loc->dim() == 1 && query_start_loc->size(0) >= 1, kUpd,
                ": query_start_loc must be (batch + 1,), got shape ", shape_str(query_start_loc->sizes()));
    // vLLM takes the batch from conv_state_indices; both must agree.
    p.batch = conv_state_indices ? conv_state_indices->size(0) : query_start_loc->size(0) - 1;
    TORCH_CHECK(query_start_loc->size(0) == p.batch + 1, kUpd, ": query_start_loc must be (batch + 1,) = (",
                p.batch + 1, ",) for the ", p.batch, " rows of conv_state_indices, got shape ",
                shape_str(query_start_loc->sizes()));
    p.query_start_loc = {query_start_loc->data_ptr<int32_t>(), query_start_loc->stride(0)};
  } else {
    TORCH_CHECK(x.dim() == 2 || x.dim() == 3, kUpd,
                ": x must be (batch, dim), (batch, dim, seqlen), or (total_tokens, dim) with query_start_loc, got "
                "shape ",
                shape_str(x.sizes()));
    p.batch = x.size(0);
    p.dim = x.size(1);
    p.seqlen = x.dim() == 3 ? x.size(2) : 1;
    p.x_batch_stride = x.stride(0);
    p.x_c_stride = x.stride(1);
    p.x_l_stride = x.dim() == 3 ? x.stride(2) : 0;
  }
  p.x = x.data_ptr();
  p.width = check_weight(kUpd, weight, x, p.dim);
  check_bias(kUpd, bias, weight, x, p.dim);
  p.w_dtype = float_dtype(kUpd, "weight", weight);
  take_weight_bias(weight, bias, p);
  p.silu = silu;

  take_cache(kUpd, "conv_state", conv_state, x, p);
  p.conv_state = conv_state.data_ptr();
  check_no_overlap(kUpd, "x", x, "conv_state", conv_state);

  if (conv_state_indices) {
    index_table(kUpd, "conv_state_indices", *conv_state_indices, x, p.batch, &p.conv_state_indices, &p.csi_seq_stride,
                &p.csi_block_stride, &p.csi_blocks);
  } else {
    TORCH_CHECK(p.num_cache_lines >= p.batch, kUpd, ": without conv_state_indices row i uses cache line i, so ",
                "conv_state needs at least batch = ", p.batch, " lines, got ", p.num_cache_lines);
  }
  p.num_accepted_tokens = index_vec(kUpd, "num_accepted_tokens", num_accepted_tokens, x, p.batch);
  if (block_idx_last_scheduled_token) {
    TORCH_CHECK(conv_state_indices && initial_state_idx, kUpd,
                ": prefix caching (block_idx_last_scheduled_token given) also needs conv_state_indices and "
                "initial_state_idx");
    p.prefix_caching = true;
    p.block_idx_last = index_vec(kUpd, "block_idx_last_scheduled_token", block_idx_last_scheduled_token, x, p.batch);
    p.initial_state_idx = index_vec(kUpd, "initial_state_idx", initial_state_idx, x, p.batch);
  }
  p.padding = padding_rule(pad_slot_id, null_block_id);
  return p;
}

}  // namespace causal_conv1d::torch_ops
