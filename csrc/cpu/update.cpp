// CPU decode update. One task per (batch row, channel): read the width - 1 window entries from the
// cache line, produce seqlen outputs with a rolling window, then write x into the state (shifted
// or circular). Padding rows (negative conv_state_indices) get zero outputs and no state write.
#include <algorithm>

#include "causal_conv1d/cpu.h"
#include "causal_conv1d/dispatch.h"
#include "common.h"

namespace causal_conv1d::cpu {

namespace {

// Non-negative remainder: cache_seqlens - (width - 1) may be negative.
inline int64_t wrap(int64_t i, int64_t n) {
  const int64_t r = i % n;
  return r < 0 ? r + n : r;
}

template <typename T, int kWidth>
void update_rows(const UpdateParams& p, int64_t row_begin, int64_t row_end) {
  constexpr int kHalo = kWidth - 1;
  const int64_t L = p.seqlen, S = p.state_len;
  for (int64_t row = row_begin; row < row_end; ++row) {
    const int64_t b = row / p.dim, c = row % p.dim;
    const int64_t out_off = b * p.out_batch_stride + c * p.out_c_stride;
    const int64_t line = p.conv_state_indices ? p.conv_state_indices[b] : b;
    if (line < 0 || line >= p.num_cache_lines) {  // padding row (>= is rejected earlier on the CPU)
      for (int64_t t = 0; t < L; ++t) st<T>(p.out, out_off + t * p.out_l_stride, 0.0f);
      continue;
    }
    float w[kWidth];
    for (int k = 0; k < kWidth; ++k)
      w[k] = load_as_float(p.weight, p.w_dtype, c * p.weight_c_stride + k * p.weight_w_stride);
    const float bias = p.bias ? load_as_float(p.bias, p.w_dtype, c * p.bias_stride) : 0.0f;
    const int64_t state_off = line * p.state_batch_stride + c * p.state_c_stride;
    const int64_t x_off = b * p.x_batch_stride + c * p.x_c_stride;
    auto state_at = [&](int64_t s) { return state_off + s * p.state_l_stride; };

    // Circular: window ends just before the write position; shifted: window is the tail.
    const int64_t head = p.cache_seqlens ? wrap(p.cache_seqlens[b], S) : S;
    float win[kWidth];
    for (int i = 0; i < kHalo; ++i) win[i] = ld<T>(p.conv_state, state_at(wrap(head - kHalo + i, S)));
    for (int64_t t = 0; t < L; ++t) {
      win[kHalo] = ld<T>(p.x, x_off + t * p.x_l_stride);
      float acc = bias;
      for (int k = 0; k < kWidth; ++k) acc += w[k] * win[k];
      st<T>(p.out, out_off + t * p.out_l_stride, p.silu ? silu(acc) : acc);
      for (int k = 0; k < kHalo; ++k) win[k] = win[k + 1];
    }

    if (p.cache_seqlens) {
      // x[t] goes to (cache_seqlens + t) % state_len; with seqlen > state_len the last write wins.
      for (int64_t t = std::max<int64_t>(0, L - S); t < L; ++t)
        static_cast<T*>(p.conv_state)[state_at(wrap(head + t, S))] =
            static_cast<const T*>(p.x)[x_off + t * p.x_l_stride];
    } else {
      // state = last state_len entries of [state, x]
      const int64_t keep = std::max<int64_t>(0, S - L);
      T* st_ptr = static_cast<T*>(p.conv_state);
      for (int64_t s = 0; s < keep; ++s) st_ptr[state_at(s)] = st_ptr[state_at(s + L)];
      for (int64_t s = keep; s < S; ++s)
        st_ptr[state_at(s)] = static_cast<const T*>(p.x)[x_off + (L - S + s) * p.x_l_stride];
    }
  }
}

}  // namespace

int launch_update(const UpdateParams& p, const ParallelFor& pfor) {
  if (p.batch == 0 || p.dim == 0) return kSuccess;
  return dispatch_dtype(p.x_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return dispatch_width(p.width, [&](auto W) {
      constexpr int kWidth = decltype(W)::value;
      pfor(p.batch * p.dim, 256, [&](int64_t r0, int64_t r1) { update_rows<T, kWidth>(p, r0, r1); });
      return int(kSuccess);
    });
  });
}

}  // namespace causal_conv1d::cpu
