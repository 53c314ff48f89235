// Argument checks several ops share: dtype, device, shape, weight and bias, memory overlap, a
// caller-given out, and a launcher's status. Each names the op, the argument, what was expected
// and what came. Every op's own checks, and its params struct, are in make_params.cpp and
// make_serving_params.cpp.
#include "checks.h"

#include <ATen/MemoryOverlap.h>
#include <c10/util/Exception.h>

#include <sstream>

#include "causal_conv1d/build_config.h"
#include "causal_conv1d/status.h"
#if CAUSAL_CONV1D_HAS_GPU
#include "causal_conv1d/gpu.h"
#endif

namespace causal_conv1d::torch_ops {

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
    default: TORCH_CHECK(false, op, ": ", name, " must be float32, float16 or bfloat16, got ", t.scalar_type());
  }
}

void check_same_device(const char* op, const char* name, const at::Tensor& t, const at::Tensor& x) {
  TORCH_CHECK(t.device() == x.device(), op, ": ", name, " must be on the same device as x (", x.device(), "), got ",
              t.device());
}

void check_shape(const char* op, const char* name, const at::Tensor& t, std::initializer_list<int64_t> expected,
                 const char* expected_desc) {
  TORCH_CHECK(t.sizes() == at::IntArrayRef(expected), op, ": ", name, " must have shape ", expected_desc, " = ",
              shape_str(at::IntArrayRef(expected)), ", got ", shape_str(t.sizes()));
}

void check_launch(const char* op, const char* kernel, int code) {
#if CAUSAL_CONV1D_HAS_GPU
  const char* text = gpu::gpu_status_string(code);
#else
  const char* text = status_string(code);
#endif
  TORCH_CHECK(code == kSuccess, op, ": ", kernel, " failed: ", text, " (code ", code, ")");
}

// weight (dim, width) with a supported width; returns the width.
int check_weight(const char* op, const at::Tensor& weight, const at::Tensor& x, int64_t dim) {
  TORCH_CHECK(weight.dim() == 2, op, ": weight must be (dim, width), got shape ", shape_str(weight.sizes()));
  float_dtype(op, "weight", weight);
  const int64_t width = weight.size(1);
  TORCH_CHECK(width >= kMinWidth && width <= kMaxWidth, op, ": kernel width (weight.size(1)) must be 2, 3 or 4, got ",
              width);
  check_shape(op, "weight", weight, {dim, width}, "(dim, width)");
  check_same_device(op, "weight", weight, x);
  return static_cast<int>(width);
}

void check_bias(const char* op, const OptTensor& bias, const at::Tensor& weight, const at::Tensor& x, int64_t dim) {
  if (!bias) return;
  check_same_device(op, "bias", *bias, x);
  TORCH_CHECK(bias->scalar_type() == weight.scalar_type(), op, ": bias must have weight's dtype (",
              weight.scalar_type(), "), got ", bias->scalar_type());
  check_shape(op, "bias", *bias, {dim}, "(dim,)");
}

void check_no_overlap(const char* op, const char* name, const at::Tensor& a, const char* other, const at::Tensor& b) {
  const auto overlap = at::get_overlap_status(a, b);
  TORCH_CHECK(overlap != at::MemOverlapStatus::Full && overlap != at::MemOverlapStatus::Partial, op, ": ", name,
              " must not share memory with ", other);
}

void check_out_like(const char* op, const at::Tensor& out, const at::Tensor& x, const char* state_name,
                    const at::Tensor& state) {
  check_same_device(op, "out", out, x);
  TORCH_CHECK(out.scalar_type() == x.scalar_type(), op, ": out must have x's dtype (", x.scalar_type(), "), got ",
              out.scalar_type());
  TORCH_CHECK(out.sizes() == x.sizes(), op, ": out must have x's shape ", shape_str(x.sizes()), ", got ",
              shape_str(out.sizes()));
  check_no_overlap(op, "out", out, "x", x);
  check_no_overlap(op, "out", out, state_name, state);
}

}  // namespace causal_conv1d::torch_ops
