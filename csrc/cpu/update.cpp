// CPU decode update. The decode layout takes a vectorised path (update_blocks_vec, below); any
// other case (several tokens, circular states, other strides) one task per (batch row, channel):
// read the width - 1 window entries from the cache line, produce seqlen outputs with a rolling
// window, then write x into the state (shifted or circular). Padding rows (negative
// conv_state_indices) get zero outputs and no state write.
#include <algorithm>
#include <cstring>
#include <vector>

#include "causal_conv1d/cpu.h"
#include "causal_conv1d/dispatch.h"
#include "common.h"
#include "vec.h"

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

// The decode layout (one token, shifted state, x / out / state with channels contiguous and each
// channel's state_len entries contiguous): a task is a block of kUpdateBlock channels over every
// batch row, its weights converted once (tap-major, so the step reads them contiguously). fp32
// rows are stepped in place (state, x and out used directly), bf16 rows with state_len == width -
// 1 too (vec::update_step_bf16: raw 16-bit state, taps widened in registers); the others go
// through float copies of the state block, x and out.
constexpr int64_t kUpdateBlock = 512;

bool fits_decode_layout(const UpdateParams& p) {
  return p.seqlen == 1 && p.cache_seqlens == nullptr && p.x_c_stride == 1 && p.out_c_stride == 1 &&
         p.state_l_stride == 1 && p.state_c_stride == p.state_len && p.weight_w_stride == 1 &&
         p.weight_c_stride == p.width && (p.bias == nullptr || p.bias_stride == 1);
}

int update_blocks_vec(const UpdateParams& p, int64_t blk_begin, int64_t blk_end) {
  constexpr int64_t kB = kUpdateBlock;
  const int64_t S = p.state_len;
  const int esize = dtype_size(p.x_dtype);
  const bool f32 = p.x_dtype == DType::kFloat32;
  std::vector<float> wrow(kB * p.width), wt(kB * p.width), bias(kB, 0.0f), st(f32 ? 0 : kB * S), x(f32 ? 0 : kB),
      out(f32 ? 0 : kB);
  for (int64_t blk = blk_begin; blk < blk_end; ++blk) {
    const int64_t c0 = blk * kB, nc = std::min(kB, p.dim - c0);
    vec::widen(static_cast<const char*>(p.weight) + c0 * p.width * dtype_size(p.w_dtype), p.w_dtype, wrow.data(),
               nc * p.width);
    for (int k = 0; k < p.width; ++k) {
      for (int64_t i = 0; i < nc; ++i) wt[k * kB + i] = wrow[i * p.width + k];
    }
    if (p.bias) vec::widen(static_cast<const char*>(p.bias) + c0 * dtype_size(p.w_dtype), p.w_dtype, bias.data(), nc);
    for (int64_t b = 0; b < p.batch; ++b) {
      char* out_row = static_cast<char*>(p.out) + (b * p.out_batch_stride + c0) * esize;
      const int64_t line = p.conv_state_indices ? p.conv_state_indices[b] : b;
      if (line < 0 || line >= p.num_cache_lines) {  // padding row: zero output, state untouched
        std::memset(out_row, 0, nc * esize);
        continue;
      }
      char* state = static_cast<char*>(p.conv_state) + (line * p.state_batch_stride + c0 * S) * esize;
      const char* x_row = static_cast<const char*>(p.x) + (b * p.x_batch_stride + c0) * esize;
      if (f32) {
        const int status =
            vec::update_step(reinterpret_cast<float*>(state), S, reinterpret_cast<const float*>(x_row),
                             reinterpret_cast<float*>(out_row), nc, wt.data(), kB, p.width, bias.data(), p.silu);
        if (status != kSuccess) return status;
        continue;
      }
      if (p.x_dtype == DType::kBFloat16 && S == p.width - 1) {
        const int status = vec::update_step_bf16(
            reinterpret_cast<uint16_t*>(state), reinterpret_cast<const uint16_t*>(x_row),
            reinterpret_cast<uint16_t*>(out_row), out.data(), nc, wt.data(), kB, p.width, bias.data(), p.silu);
        if (status != kSuccess) return status;
        continue;
      }
      vec::widen(state, p.x_dtype, st.data(), nc * S);
      vec::widen(x_row, p.x_dtype, x.data(), nc);
      const int status =
          vec::update_step(st.data(), S, x.data(), out.data(), nc, wt.data(), kB, p.width, bias.data(), p.silu);
      if (status != kSuccess) return status;
      vec::narrow(out.data(), p.x_dtype, out_row, nc);
      vec::narrow(st.data(), p.x_dtype, state, nc * S);
    }
  }
  return kSuccess;
}

}  // namespace

int launch_update(const UpdateParams& p, const ParallelFor& pfor) {
  if (const int status = check_width_and_dtypes(p.width, p.x_dtype, p.w_dtype); status != kSuccess) return status;
  if (p.batch == 0 || p.dim == 0) return kSuccess;
  if (fits_decode_layout(p)) {
    // A second thread pays from ~16K channel-rows (measured on the dev machine: batch 8 x 4096
    // channels 32 -> 19 us with two threads; batch 4 no gain).
    const int64_t blocks = (p.dim + kUpdateBlock - 1) / kUpdateBlock;
    const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(p.batch * kUpdateBlock, 1));
    FirstError error;
    pfor(blocks, grain, [&](int64_t a, int64_t z) { error.note(update_blocks_vec(p, a, z)); });
    return error.code();
  }
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
