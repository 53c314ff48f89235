// Parameter structs shared by every backend. Torch-free: pointers, sizes and int64 element strides
// only, so launchers can be driven from GoogleTest with nothing but the GPU runtime.
//
// Tensor shapes follow the Python API: x and out are (batch, dim, seqlen) in either layout,
// weight is (dim, width), states are (batch, dim, width - 1). Strides are in elements, never
// bytes, and always 64-bit: 32-bit strides overflow once a tensor passes 2^31 elements.
#pragma once

#include <cstdint>

namespace causal_conv1d {

// Element types of x/out/states and, independently, of weight/bias. Values are stable: they are
// part of the params structs that tests fill by hand.
enum class DType : int32_t { kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2 };

inline int dtype_size(DType t) { return t == DType::kFloat32 ? 4 : 2; }
inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
  }
  return "unknown";
}

// Supported kernel widths; the torch layer checks against these before any launcher runs.
constexpr int kMinWidth = 2;
constexpr int kMaxWidth = 4;

// Forward: out = act(bias + causal depthwise conv(x)), optionally reading initial_states as the
// (width - 1) positions before t = 0 and writing final_states = the last (width - 1) positions of
// [initial_states, x]. seq_idx (int32, (batch, seqlen)) masks taps that cross a sequence boundary;
// it is never combined with initial/final states (the torch layer rejects that).
struct FwdParams {
  int64_t batch = 0, dim = 0, seqlen = 0;
  int width = 0;
  DType x_dtype = DType::kFloat32;  // also out, initial_states, final_states
  DType w_dtype = DType::kFloat32;  // also bias
  bool silu = false;
  // true: x.stride(1) == 1 (what (b, l, d).transpose(1, 2) gives); false: x.stride(2) == 1.
  bool channel_last = false;

  const void* x = nullptr;
  int64_t x_batch_stride = 0, x_c_stride = 0, x_l_stride = 0;
  const void* weight = nullptr;
  int64_t weight_c_stride = 0, weight_w_stride = 0;
  const void* bias = nullptr;  // optional
  int64_t bias_stride = 0;
  void* out = nullptr;
  int64_t out_batch_stride = 0, out_c_stride = 0, out_l_stride = 0;

  const int32_t* seq_idx = nullptr;  // optional
  int64_t seq_idx_batch_stride = 0, seq_idx_l_stride = 0;
  const void* initial_states = nullptr;  // optional
  int64_t init_batch_stride = 0, init_c_stride = 0, init_l_stride = 0;
  void* final_states = nullptr;  // optional
  int64_t final_batch_stride = 0, final_c_stride = 0, final_l_stride = 0;
};

// causal_conv1d_varlen_states: for each sequence b of a packed (total_tokens, dim) x, copy its
// last state_len rows into states[b, :, :], zero where the sequence is shorter than state_len.
// cu_seqlens holds batch + 1 non-decreasing offsets starting at 0 (int32 or int64).
struct VarlenStatesParams {
  int64_t batch = 0, dim = 0, state_len = 0, total_tokens = 0;
  DType dtype = DType::kFloat32;  // x and states
  const void* x = nullptr;
  int64_t x_l_stride = 0, x_c_stride = 0;
  const void* cu_seqlens = nullptr;
  bool cu_seqlens_int64 = false;
  void* states = nullptr;
  int64_t states_batch_stride = 0, states_c_stride = 0, states_l_stride = 0;
};

}  // namespace causal_conv1d
