// Each op's params struct, built from its torch arguments after checking them all (with the
// shared checks of checks.h, and the op's own below). Shared by the CPU and GPU registrations so
// both backends accept exactly the same inputs.
#include "make_params.h"

#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include "checks.h"
#include "op_names.h"

namespace causal_conv1d::torch_ops {

namespace {

constexpr const char* kFwd = kFwdOp.error;
constexpr const char* kBwd = kBwdOp.error;
constexpr const char* kUpdate = kUpdateOp.error;
constexpr const char* kVarlen = kVarlenStatesOp.error;

// Data pointer and (batch, channel, position) element strides of a 3-d tensor.
template <typename Ptr>
void take_3d(const at::Tensor& t, Ptr& ptr, int64_t& batch_stride, int64_t& c_stride, int64_t& l_stride) {
  ptr = static_cast<Ptr>(t.data_ptr());
  batch_stride = t.stride(0);
  c_stride = t.stride(1);
  l_stride = t.stride(2);
}

// A tensor with x's device, dtype and shape, and stride 1 along the dim x has it (its layout).
void check_like_x(const char* op, const char* name, const at::Tensor& t, const at::Tensor& x, bool channel_last) {
  check_same_device(op, name, t, x);
  TORCH_CHECK(t.scalar_type() == x.scalar_type(), op, ": ", name, " must have x's dtype (", x.scalar_type(), "), got ",
              t.scalar_type());
  check_shape(op, name, t, {x.size(0), x.size(1), x.size(2)}, "x's shape (batch, dim, seqlen)");
  TORCH_CHECK(unit_stride(t, channel_last ? 1 : 2), op, ": ", name, " must have stride 1 along ",
              channel_last ? "dim (x is channel-last)" : "seqlen (x is channel-first)", ", got strides ",
              shape_str(t.strides()));
}

// (batch, dim, width - 1) states in x's dtype, any strides.
void check_states(const char* op, const char* name, const at::Tensor& s, const at::Tensor& x, int width) {
  check_same_device(op, name, s, x);
  TORCH_CHECK(s.scalar_type() == x.scalar_type(), op, ": ", name, " must have x's dtype (", x.scalar_type(), "), got ",
              s.scalar_type());
  check_shape(op, name, s, {x.size(0), x.size(1), width - 1}, "(batch, dim, width - 1)");
}

// int32 vector of `n` entries (cache_seqlens, conv_state_indices), contiguous.
void check_index_vector(const char* op, const char* name, const at::Tensor& t, const at::Tensor& x, int64_t n) {
  check_same_device(op, name, t, x);
  TORCH_CHECK(t.scalar_type() == at::kInt, op, ": ", name, " must be int32, got ", t.scalar_type());
  check_shape(op, name, t, {n}, "(batch,)");
  TORCH_CHECK(t.is_contiguous(), op, ": ", name, " must be contiguous, got strides ", shape_str(t.strides()));
}

// What the forward and backward share: x, weight, bias, seq_idx, initial_states.
FwdParams conv_inputs(const char* op, const at::Tensor& x, const at::Tensor& weight, const OptTensor& bias,
                      const OptTensor& seq_idx, const OptTensor& initial_states) {
  TORCH_CHECK(x.dim() == 3, op, ": x must be (batch, dim, seqlen), got shape ", shape_str(x.sizes()));
  FwdParams p;
  p.batch = x.size(0);
  p.dim = x.size(1);
  p.seqlen = x.size(2);
  p.x_dtype = float_dtype(op, "x", x);
  p.width = check_weight(op, weight, x, p.dim);
  p.w_dtype = float_dtype(op, "weight", weight);
  check_bias(op, bias, weight, x, p.dim);

  const bool cf = unit_stride(x, 2), cl = unit_stride(x, 1);
  TORCH_CHECK(cf || cl, op,
              ": x must be contiguous along seqlen (stride(2) == 1, channel-first) or along dim "
              "(stride(1) == 1, channel-last), got strides ",
              shape_str(x.strides()));
  p.channel_last = !cf;
  take_3d(x, p.x, p.x_batch_stride, p.x_c_stride, p.x_l_stride);
  take_weight_bias(weight, bias, p);
  if (seq_idx) {
    check_same_device(op, "seq_idx", *seq_idx, x);
    TORCH_CHECK(seq_idx->scalar_type() == at::kInt, op, ": seq_idx must be int32, got ", seq_idx->scalar_type());
    check_shape(op, "seq_idx", *seq_idx, {p.batch, p.seqlen}, "(batch, seqlen)");
    p.seq_idx = seq_idx->data_ptr<int32_t>();
    p.seq_idx_batch_stride = seq_idx->stride(0);
    p.seq_idx_l_stride = seq_idx->stride(1);
  }
  if (initial_states) {
    check_states(op, "initial_states", *initial_states, x, p.width);
    take_3d(*initial_states, p.initial_states, p.init_batch_stride, p.init_c_stride, p.init_l_stride);
  }
  return p;
}

}  // namespace

FwdParams make_fwd_params(const at::Tensor& x, const at::Tensor& weight, const OptTensor& bias,
                          const OptTensor& seq_idx, const OptTensor& initial_states, const at::Tensor& out,
                          const OptTensor& final_states_out, bool silu) {
  TORCH_CHECK(!(seq_idx && (initial_states || final_states_out)), kFwd,
              ": seq_idx cannot be combined with initial_states or final states (final_states_out, "
              "return_final_states=True): which packed sequence they would belong to is ambiguous");
  FwdParams p = conv_inputs(kFwd, x, weight, bias, seq_idx, initial_states);
  p.silu = silu;
  check_like_x(kFwd, "out", out, x, p.channel_last);
  check_no_overlap(kFwd, "out", out, "x", x);
  take_3d(out, p.out, p.out_batch_stride, p.out_c_stride, p.out_l_stride);
  if (final_states_out) {
    const at::Tensor& s = *final_states_out;
    check_states(kFwd, "final_states_out", s, x, p.width);
    take_3d(s, p.final_states, p.final_batch_stride, p.final_c_stride, p.final_l_stride);
  }
  return p;
}

BwdParams make_bwd_params(const at::Tensor& x, const at::Tensor& weight, const OptTensor& bias, const at::Tensor& dout,
                          const OptTensor& seq_idx, const OptTensor& initial_states, const OptTensor& dfinal_states,
                          const at::Tensor& dx, const at::Tensor& dweight, const OptTensor& dbias,
                          const OptTensor& dinitial_states, bool silu, bool deterministic) {
  TORCH_CHECK(!(seq_idx && (initial_states || dfinal_states || dinitial_states)), kBwd,
              ": seq_idx cannot be combined with initial_states, dfinal_states or dinitial_states");
  BwdParams p;
  p.f = conv_inputs(kBwd, x, weight, bias, seq_idx, initial_states);
  p.f.silu = silu;
  p.deterministic = deterministic;
  const bool cl = p.f.channel_last;
  check_like_x(kBwd, "dout", dout, x, cl);
  take_3d(dout, p.dout, p.dout_batch_stride, p.dout_c_stride, p.dout_l_stride);
  check_like_x(kBwd, "dx", dx, x, cl);
  check_no_overlap(kBwd, "dx", dx, "x", x);
  check_no_overlap(kBwd, "dx", dx, "dout", dout);
  take_3d(dx, p.dx, p.dx_batch_stride, p.dx_c_stride, p.dx_l_stride);

  check_same_device(kBwd, "dweight", dweight, x);
  TORCH_CHECK(dweight.scalar_type() == at::kFloat, kBwd, ": dweight must be float32 (it accumulates), got ",
              dweight.scalar_type());
  check_shape(kBwd, "dweight", dweight, {p.f.dim, p.f.width}, "(dim, width)");
  p.dweight = dweight.data_ptr<float>();
  p.dweight_c_stride = dweight.stride(0);
  p.dweight_w_stride = dweight.stride(1);
  TORCH_CHECK(!dbias || bias, kBwd, ": dbias was given but bias is None");
  if (dbias) {
    check_same_device(kBwd, "dbias", *dbias, x);
    TORCH_CHECK(dbias->scalar_type() == at::kFloat, kBwd, ": dbias must be float32 (it accumulates), got ",
                dbias->scalar_type());
    check_shape(kBwd, "dbias", *dbias, {p.f.dim}, "(dim,)");
    p.dbias = dbias->data_ptr<float>();
    p.dbias_stride = dbias->stride(0);
  }
  if (dinitial_states) {
    check_states(kBwd, "dinitial_states", *dinitial_states, x, p.f.width);
    take_3d(*dinitial_states, p.dinitial_states, p.dinit_batch_stride, p.dinit_c_stride, p.dinit_l_stride);
  }
  if (dfinal_states) {
    check_states(kBwd, "dfinal_states", *dfinal_states, x, p.f.width);
    take_3d(*dfinal_states, p.dfinal_states, p.dfinal_batch_stride, p.dfinal_c_stride, p.dfinal_l_stride);
  }
  return p;
}

UpdateParams make_update_params(const at::Tensor& x, const at::Tensor& conv_state, const at::Tensor& weight,
                                const OptTensor& bias, const at::Tensor& out, bool silu, const OptTensor& cache_seqlens,
                                const OptTensor& conv_state_indices) {
  TORCH_CHECK(x.dim() == 2 || x.dim() == 3, kUpdate, ": x must be (batch, dim) or (batch, dim, seqlen), got shape ",
              shape_str(x.sizes()));
  UpdateParams p;
  p.batch = x.size(0);
  p.dim = x.size(1);
  p.seqlen = x.dim() == 3 ? x.size(2) : 1;
  p.x_dtype = float_dtype(kUpdate, "x", x);
  p.width = check_weight(kUpdate, weight, x, p.dim);
  p.w_dtype = float_dtype(kUpdate, "weight", weight);
  check_bias(kUpdate, bias, weight, x, p.dim);
  p.silu = silu;

  check_same_device(kUpdate, "conv_state", conv_state, x);
  TORCH_CHECK(conv_state.dim() == 3, kUpdate, ": conv_state must be (batch_or_cache_lines, dim, state_len), got shape ",
              shape_str(conv_state.sizes()));
  TORCH_CHECK(conv_state.scalar_type() == x.scalar_type(), kUpdate, ": conv_state must have x's dtype (",
              x.scalar_type(), "), got ", conv_state.scalar_type());
  TORCH_CHECK(conv_state.size(1) == p.dim, kUpdate, ": conv_state.size(1) must be dim = ", p.dim, ", got ",
              conv_state.size(1));
  TORCH_CHECK(conv_state.size(2) >= p.width - 1, kUpdate,
              ": conv_state's state_len (size(2)) must be >= width - 1 = ", p.width - 1, ", got ", conv_state.size(2));
  TORCH_CHECK(conv_state_indices || conv_state.size(0) == p.batch, kUpdate, ": conv_state must have batch = ", p.batch,
              " rows when conv_state_indices is None, got ", conv_state.size(0));
  TORCH_CHECK(conv_state.size(0) < (int64_t(1) << 31) && conv_state.size(2) < (int64_t(1) << 31), kUpdate,
              ": conv_state's cache lines and state_len must each be < 2^31, got shape ",
              shape_str(conv_state.sizes()));
  p.num_cache_lines = conv_state.size(0);
  p.state_len = conv_state.size(2);

  check_out_like(kUpdate, out, x, "conv_state", conv_state);

  p.x = x.data_ptr();
  p.x_batch_stride = x.stride(0);
  p.x_c_stride = x.stride(1);
  p.x_l_stride = x.dim() == 3 ? x.stride(2) : 0;
  take_weight_bias(weight, bias, p);
  p.out = out.data_ptr();
  p.out_batch_stride = out.stride(0);
  p.out_c_stride = out.stride(1);
  p.out_l_stride = out.dim() == 3 ? out.stride(2) : 0;
  take_3d(conv_state, p.conv_state, p.state_batch_stride, p.state_c_stride, p.state_l_stride);
  if (cache_seqlens) {
    check_index_vector(kUpdate, "cache_seqlens", *cache_seqlens, x, p.batch);
    p.cache_seqlens = cache_seqlens->data_ptr<int32_t>();
  }
  if (conv_state_indices) {
    check_index_vector(kUpdate, "conv_state_indices", *conv_state_indices, x, p.batch);
    p.conv_state_indices = conv_state_indices->data_ptr<int32_t>();
  }
  return p;
}

at::Tensor new_varlen_states(const at::Tensor& x, const at::Tensor& cu_seqlens, int64_t state_len) {
  TORCH_CHECK(x.dim() == 2, kVarlen, ": x must be (total_tokens, dim), got shape ", shape_str(x.sizes()));
  TORCH_CHECK(cu_seqlens.dim() == 1 && cu_seqlens.size(0) >= 1, kVarlen,
              ": cu_seqlens must be (batch + 1,), got shape ", shape_str(cu_seqlens.sizes()));
  TORCH_CHECK(state_len >= 0, kVarlen, ": state_len must be >= 0, got ", state_len);
  const int64_t batch = cu_seqlens.size(0) - 1;
  // Channel-last, as upstream returns it: (batch, state_len, dim) memory seen as (batch, dim, state_len).
  return at::empty({batch, state_len, x.size(1)}, x.options()).transpose(1, 2);
}

VarlenStatesParams make_varlen_states_params(const at::Tensor& x, const at::Tensor& cu_seqlens,
                                             const at::Tensor& states) {
  TORCH_CHECK(x.dim() == 2, kVarlen, ": x must be (total_tokens, dim), got shape ", shape_str(x.sizes()));
  VarlenStatesParams p;
  p.dtype = float_dtype(kVarlen, "x", x);
  check_same_device(kVarlen, "cu_seqlens", cu_seqlens, x);
  TORCH_CHECK(cu_seqlens.scalar_type() == at::kInt || cu_seqlens.scalar_type() == at::kLong, kVarlen,
              ": cu_seqlens must be int32 or int64, got ", cu_seqlens.scalar_type());
  TORCH_CHECK(cu_seqlens.dim() == 1 && cu_seqlens.size(0) >= 1, kVarlen,
              ": cu_seqlens must be (batch + 1,), got shape ", shape_str(cu_seqlens.sizes()));
  TORCH_CHECK(cu_seqlens.is_contiguous(), kVarlen, ": cu_seqlens must be contiguous");
  p.total_tokens = x.size(0);
  p.dim = x.size(1);
  p.batch = cu_seqlens.size(0) - 1;
  p.state_len = states.size(2);
  p.x = x.data_ptr();
  p.x_l_stride = x.stride(0);
  p.x_c_stride = x.stride(1);
  p.cu_seqlens = cu_seqlens.data_ptr();
  p.cu_seqlens_int64 = cu_seqlens.scalar_type() == at::kLong;
  take_3d(states, p.states, p.states_batch_stride, p.states_c_stride, p.states_l_stride);
  return p;
}

}  // namespace causal_conv1d::torch_ops
