#include "checks.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <sstream>

#include "causal_conv1d/status.h"
#if defined(CAUSAL_CONV1D_WITH_GPU)
#include "causal_conv1d/gpu.h"
#endif

namespace causal_conv1d::torch_ops {

namespace {

constexpr const char* kFwd = "causal_conv1d_fwd";
constexpr const char* kVarlen = "causal_conv1d_varlen_states";

// A dimension of size <= 1 places no constraint on its stride.
bool unit_stride(const at::Tensor& t, int d) { return t.size(d) <= 1 || t.stride(d) == 1; }

}  // namespace

std::string shape_str(at::IntArrayRef sizes) {
  std::ostringstream s;
  s << "(";
  for (size_t i = 0; i < sizes.size(); ++i) s << (i ? ", " : "") << sizes[i];
  s << (sizes.size() == 1 ? ",)" : ")");
  return s.str();
}

DType float_dtype(const char* op, const char* name, const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return DType::kFloat32;
    case at::kHalf: return DType::kFloat16;
    case at::kBFloat16: return DType::kBFloat16;
    default:
      TORCH_CHECK(false, op, ": ", name, " must be float32, float16 or bfloat16, got ", t.scalar_type());
  }
}

void check_same_device(const char* op, const char* name, const at::Tensor& t, const at::Tensor& x) {
  TORCH_CHECK(t.device() == x.device(), op, ": ", name, " must be on the same device as x (", x.device(),
              "), got ", t.device());
}

void check_shape(const char* op, const char* name, const at::Tensor& t,
                 std::initializer_list<int64_t> expected, const char* expected_desc) {
  TORCH_CHECK(t.sizes() == at::IntArrayRef(expected), op, ": ", name, " must have shape ", expected_desc, " = ",
              shape_str(at::IntArrayRef(expected)), ", got ", shape_str(t.sizes()));
}

void check_launch(const char* op, const char* kernel, int code) {
#if defined(CAUSAL_CONV1D_WITH_GPU)
  const char* text = gpu::gpu_status_string(code);
#else
  const char* text = status_string(code);
#endif
  TORCH_CHECK(code == kSuccess, op, ": ", kernel, " failed: ", text, " (code ", code, ")");
}

FwdParams make_fwd_params(const at::Tensor& x, const at::Tensor& weight, const OptTensor& bias,
                          const OptTensor& seq_idx, const OptTensor& initial_states,
                          const at::Tensor& out, const OptTensor& final_states_out, bool silu) {
  TORCH_CHECK(x.dim() == 3, kFwd, ": x must be (batch, dim, seqlen), got shape ", shape_str(x.sizes()));
  TORCH_CHECK(weight.dim() == 2, kFwd, ": weight must be (dim, width), got shape ", shape_str(weight.sizes()));
  FwdParams p;
  p.batch = x.size(0);
  p.dim = x.size(1);
  p.seqlen = x.size(2);
  const int64_t width = weight.size(1);
  p.x_dtype = float_dtype(kFwd, "x", x);
  p.w_dtype = float_dtype(kFwd, "weight", weight);
  TORCH_CHECK(width >= kMinWidth && width <= kMaxWidth, kFwd,
              ": kernel width (weight.size(1)) must be 2, 3 or 4, got ", width);
  p.width = static_cast<int>(width);
  check_shape(kFwd, "weight", weight, {p.dim, width}, "(dim, width)");
  check_same_device(kFwd, "weight", weight, x);

  const bool cf = unit_stride(x, 2), cl = unit_stride(x, 1);
  TORCH_CHECK(cf || cl, kFwd,
              ": x must be contiguous along seqlen (stride(2) == 1, channel-first) or along dim "
              "(stride(1) == 1, channel-last), got strides ",
              shape_str(x.strides()));
  p.channel_last = !cf;
  p.silu = silu;
  p.x = x.data_ptr();
  p.x_batch_stride = x.stride(0);
  p.x_c_stride = x.stride(1);
  p.x_l_stride = x.stride(2);
  p.weight = weight.data_ptr();
  p.weight_c_stride = weight.stride(0);
  p.weight_w_stride = weight.stride(1);

  check_same_device(kFwd, "out", out, x);
  TORCH_CHECK(out.scalar_type() == x.scalar_type(), kFwd, ": out must have x's dtype (", x.scalar_type(),
              "), got ", out.scalar_type());
  check_shape(kFwd, "out", out, {p.batch, p.dim, p.seqlen}, "x's shape (batch, dim, seqlen)");
  TORCH_CHECK(unit_stride(out, p.channel_last ? 1 : 2), kFwd, ": out must have stride 1 along ",
              p.channel_last ? "dim (x is channel-last)" : "seqlen (x is channel-first)", ", got strides ",
              shape_str(out.strides()));
  const auto overlap = at::get_overlap_status(out, x);
  TORCH_CHECK(overlap != at::MemOverlapStatus::Full && overlap != at::MemOverlapStatus::Partial, kFwd,
              ": out must not share memory with x");
  p.out = out.data_ptr();
  p.out_batch_stride = out.stride(0);
  p.out_c_stride = out.stride(1);
  p.out_l_stride = out.stride(2);

  if (bias) {
    check_same_device(kFwd, "bias", *bias, x);
    TORCH_CHECK(bias->scalar_type() == weight.scalar_type(), kFwd, ": bias must have weight's dtype (",
                weight.scalar_type(), "), got ", bias->scalar_type());
    check_shape(kFwd, "bias", *bias, {p.dim}, "(dim,)");
    p.bias = bias->data_ptr();
    p.bias_stride = bias->stride(0);
  }

  TORCH_CHECK(!(seq_idx && (initial_states || final_states_out)), kFwd,
              ": seq_idx cannot be combined with initial_states or final_states_out (which packed "
              "sequence they would belong to is ambiguous)");
  if (seq_idx) {
    check_same_device(kFwd, "seq_idx", *seq_idx, x);
    TORCH_CHECK(seq_idx->scalar_type() == at::kInt, kFwd, ": seq_idx must be int32, got ",
                seq_idx->scalar_type());
    check_shape(kFwd, "seq_idx", *seq_idx, {p.batch, p.seqlen}, "(batch, seqlen)");
    p.seq_idx = seq_idx->data_ptr<int32_t>();
    p.seq_idx_batch_stride = seq_idx->stride(0);
    p.seq_idx_l_stride = seq_idx->stride(1);
  }
  if (initial_states) {
    const at::Tensor& s = *initial_states;
    check_same_device(kFwd, "initial_states", s, x);
    TORCH_CHECK(s.scalar_type() == x.scalar_type(), kFwd, ": initial_states must have x's dtype (",
                x.scalar_type(), "), got ", s.scalar_type());
    check_shape(kFwd, "initial_states", s, {p.batch, p.dim, width - 1}, "(batch, dim, width - 1)");
    p.initial_states = s.data_ptr();
    p.init_batch_stride = s.stride(0);
    p.init_c_stride = s.stride(1);
    p.init_l_stride = s.stride(2);
  }
  if (final_states_out) {
    const at::Tensor& s = *final_states_out;
    check_same_device(kFwd, "final_states_out", s, x);
    TORCH_CHECK(s.scalar_type() == x.scalar_type(), kFwd, ": final_states_out must have x's dtype (",
                x.scalar_type(), "), got ", s.scalar_type());
    check_shape(kFwd, "final_states_out", s, {p.batch, p.dim, width - 1}, "(batch, dim, width - 1)");
    p.final_states = s.data_ptr();
    p.final_batch_stride = s.stride(0);
    p.final_c_stride = s.stride(1);
    p.final_l_stride = s.stride(2);
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
  p.states = states.data_ptr();
  p.states_batch_stride = states.stride(0);
  p.states_c_stride = states.stride(1);
  p.states_l_stride = states.stride(2);
  return p;
}

}  // namespace causal_conv1d::torch_ops
