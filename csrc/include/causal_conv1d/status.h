// Error codes returned by every launcher (GPU and CPU). Torch-free.
//
// 0 is success, positive values are the GPU runtime's own error codes (hipError_t / cudaError_t),
// negative values are ours. The torch layer turns a non-zero code into a RuntimeError naming the
// kernel family; status_string() gives the text.
#pragma once

namespace causal_conv1d {

enum StatusCode : int {
  kSuccess = 0,
  kErrUnsupportedWidth = -1,  // width outside [kMinWidth, kMaxWidth]
  kErrUnsupportedDType = -2,  // DType value not in the enum
  kErrInvalidParams = -3,     // params violate an invariant the torch layer should have checked
};

// Text for our negative codes; for positive codes the GPU library provides gpu_status_string().
inline const char* status_string(int code) {
  switch (code) {
    case kSuccess: return "success";
    case kErrUnsupportedWidth: return "unsupported kernel width (supported: 2, 3, 4)";
    case kErrUnsupportedDType: return "unsupported dtype (supported: float32, float16, bfloat16)";
    case kErrInvalidParams: return "invalid parameters";
    default: return code > 0 ? "GPU runtime error" : "unknown error";
  }
}

}  // namespace causal_conv1d
