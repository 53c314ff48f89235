// Parameter structs shared by every backend. Torch-free: pointers, sizes and int64 element strides
// only, so launchers can be driven from GoogleTest with nothing but the GPU runtime.
//
// Tensor shapes follow the Python API: x and out are (batch, dim, seqlen) in either layout,
// weight is (dim, width), states are (batch, dim, width - 1). Strides are in elements, never
// bytes, and always 64-bit: 32-bit strides overflow once a tensor passes 2^31 elements.
#pragma once

#include <cstdint>

#include "causal_conv1d/status.h"

namespace causal_conv1d {

// Element types of x/out/states and, independently, of weight/bias. Values are stable: they are
// part of the params structs that tests fill by hand.
enum class DType : int32_t { kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2 };

// Whether t is one of the values above: a params struct can hold any int32 (tests fill them by
// hand), so every launcher checks both dtypes at its entry (check_width_and_dtypes below).
inline bool dtype_supported(DType t) { return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16; }

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

// What every launcher (CPU and GPU) checks at its entry, before any work: the width, and both
// dtypes (a hand-filled params struct can hold any value). The code behind the launchers (the CPU
// dtype switches, load_as_float / store_from_float, dtype_size; on the GPU with_dtype, which reads
// the weights) then sees only supported values.
inline int check_width_and_dtypes(int width, DType x_dtype, DType w_dtype) {
  if (width < kMinWidth || width > kMaxWidth) return kErrUnsupportedWidth;
  if (!dtype_supported(x_dtype) || !dtype_supported(w_dtype)) return kErrUnsupportedDType;
  return kSuccess;
}

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

// Backward of the forward above. dy = dout (times silu'(pre-activation) when silu, recomputed from
// x). Writes dx (x's dtype and layout) and, when given, dinitial_states; ADDS the batch-and-time
// sums into dweight (float32, (dim, width)) and dbias (float32, (dim,)), as upstream does (callers
// pass zeros). dfinal_states, when given, is the gradient of the final states and flows into dx
// (or dinitial_states for positions before t = 0). `f` holds the forward's inputs; f.out and
// f.final_states are unused.
struct BwdParams {
  FwdParams f;
  const void* dout = nullptr;  // x's dtype, x's layout
  int64_t dout_batch_stride = 0, dout_c_stride = 0, dout_l_stride = 0;
  void* dx = nullptr;  // x's dtype, x's layout
  int64_t dx_batch_stride = 0, dx_c_stride = 0, dx_l_stride = 0;
  float* dweight = nullptr;
  int64_t dweight_c_stride = 0, dweight_w_stride = 0;
  float* dbias = nullptr;  // optional (only with a bias)
  int64_t dbias_stride = 0;
  void* dinitial_states = nullptr;  // optional, x's dtype
  int64_t dinit_batch_stride = 0, dinit_c_stride = 0, dinit_l_stride = 0;
  const void* dfinal_states = nullptr;  // optional, x's dtype
  int64_t dfinal_batch_stride = 0, dfinal_c_stride = 0, dfinal_l_stride = 0;
  // Bitwise-repeatable dweight/dbias (no atomics on the GPU). The CPU is always deterministic.
  bool deterministic = false;
  // GPU: float scratch of gpu::bwd_workspace_elems() elements when that is > 0 (deterministic
  // mode's per-block partial sums, reduced in a fixed order; seq_idx's masks).
  float* workspace = nullptr;
};

// Decode step(s): x is (batch, dim, seqlen) (seqlen 1 for the (batch, dim) form), conv_state is
// (num_cache_lines, dim, state_len) with state_len >= width - 1, updated in place.
//  - cache_seqlens (int32, (batch,)), optional: conv_state is a circular buffer whose next write
//    goes to cache_seqlens[b] % state_len; the window is the width - 1 entries before it.
//    Without it, the window is the last width - 1 entries and the state shifts left by seqlen.
//  - conv_state_indices (int32, (batch,)), optional: row b uses cache line indices[b]; a negative
//    index marks a padding row: its state is untouched and its output is zero. Indices >= the
//    number of cache lines are never dereferenced (the torch layer rejects them on the CPU).
// out[b, c, t] = act(bias + sum_k w[k] * window_t[k]) with window_t the width inputs ending at t.
struct UpdateParams {
  int64_t batch = 0, dim = 0, seqlen = 0, state_len = 0, num_cache_lines = 0;
  int width = 0;
  DType x_dtype = DType::kFloat32;  // also out and conv_state
  DType w_dtype = DType::kFloat32;  // also bias
  bool silu = false;

  const void* x = nullptr;
  int64_t x_batch_stride = 0, x_c_stride = 0, x_l_stride = 0;
  const void* weight = nullptr;
  int64_t weight_c_stride = 0, weight_w_stride = 0;
  const void* bias = nullptr;  // optional
  int64_t bias_stride = 0;
  void* out = nullptr;
  int64_t out_batch_stride = 0, out_c_stride = 0, out_l_stride = 0;
  void* conv_state = nullptr;
  int64_t state_batch_stride = 0, state_c_stride = 0, state_l_stride = 0;
  const int32_t* cache_seqlens = nullptr;       // optional, contiguous
  const int32_t* conv_state_indices = nullptr;  // optional, contiguous
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
