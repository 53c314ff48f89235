// CPU forward. Works for any strides; the loop order follows the layout so the innermost loop
// walks contiguous memory:
//  - channel-first: one task per (batch, channel) row, the row streamed through a float buffer in
//    chunks of kTimeChunk with the previous (width - 1) values carried in front as the halo;
//  - channel-last: one task per (batch, block of kChannelBlock channels), walking time with a
//    rolling window of the last (width - 1) inputs per channel.
// In both, the halo starts as initial_states (or zeros) and ends as the final states. With seq_idx a
// tap counts only if its position has the output's id, and a negative id marks a padding token
// whose output is exactly 0 (upstream >= 1.6).
#include <algorithm>
#include <vector>

#include "causal_conv1d/cpu.h"
#include "causal_conv1d/dispatch.h"
#include "common.h"

namespace causal_conv1d::cpu {

namespace {

template <typename T, int kWidth, bool kSeqIdx>
void fwd_rows_channel_first(const FwdParams& p, int64_t row_begin, int64_t row_end) {
  constexpr int kHalo = kWidth - 1;
  std::vector<float> buf(kTimeChunk + kHalo);
  std::vector<int32_t> seq(kSeqIdx ? kTimeChunk + kHalo : 0);
  for (int64_t row = row_begin; row < row_end; ++row) {
    const int64_t b = row / p.dim, c = row % p.dim;
    float w[kWidth];
    for (int k = 0; k < kWidth; ++k)
      w[k] = load_as_float(p.weight, p.w_dtype, c * p.weight_c_stride + k * p.weight_w_stride);
    const float bias = p.bias ? load_as_float(p.bias, p.w_dtype, c * p.bias_stride) : 0.0f;
    const int64_t x_off = b * p.x_batch_stride + c * p.x_c_stride;
    const int64_t out_off = b * p.out_batch_stride + c * p.out_c_stride;

    for (int j = 0; j < kHalo; ++j) {
      buf[j] = p.initial_states
                   ? ld<T>(p.initial_states, b * p.init_batch_stride + c * p.init_c_stride + j * p.init_l_stride)
                   : 0.0f;
      if constexpr (kSeqIdx) seq[j] = -1;  // never equal to a real position's id
    }
    for (int64_t t0 = 0; t0 < p.seqlen; t0 += kTimeChunk) {
      const int64_t n = std::min(kTimeChunk, p.seqlen - t0);
      for (int64_t i = 0; i < n; ++i) buf[kHalo + i] = ld<T>(p.x, x_off + (t0 + i) * p.x_l_stride);
      if constexpr (kSeqIdx) {
        for (int64_t i = 0; i < n; ++i)
          seq[kHalo + i] = p.seq_idx[b * p.seq_idx_batch_stride + (t0 + i) * p.seq_idx_l_stride];
      }
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (kSeqIdx) {
          if (seq[i + kHalo] < 0) {  // padding token: exactly 0
            st<T>(p.out, out_off + (t0 + i) * p.out_l_stride, 0.0f);
            continue;
          }
        }
        float acc = bias;
        for (int k = 0; k < kWidth; ++k) {
          if constexpr (kSeqIdx) {
            if (seq[i + k] != seq[i + kHalo]) continue;
          }
          acc += w[k] * buf[i + k];
        }
        st<T>(p.out, out_off + (t0 + i) * p.out_l_stride, p.silu ? silu(acc) : acc);
      }
      for (int j = 0; j < kHalo; ++j) {
        buf[j] = buf[n + j];
        if constexpr (kSeqIdx) seq[j] = seq[n + j];
      }
    }
    if (p.final_states) {
      for (int j = 0; j < kHalo; ++j)
        st<T>(p.final_states, b * p.final_batch_stride + c * p.final_c_stride + j * p.final_l_stride, buf[j]);
    }
  }
}

template <typename T, int kWidth, bool kSeqIdx>
void fwd_blocks_channel_last(const FwdParams& p, int64_t blk_begin, int64_t blk_end) {
  constexpr int kHalo = kWidth - 1;
  constexpr int64_t kB = kChannelBlock;
  const int64_t nblk = (p.dim + kB - 1) / kB;
  float w[kWidth][kB], bias[kB], hist[kHalo > 0 ? kHalo : 1][kB], cur[kB];
  for (int64_t blk = blk_begin; blk < blk_end; ++blk) {
    const int64_t b = blk / nblk, c0 = (blk % nblk) * kB;
    const int64_t nc = std::min(kB, p.dim - c0);
    for (int64_t i = 0; i < nc; ++i) {
      const int64_t c = c0 + i;
      for (int k = 0; k < kWidth; ++k)
        w[k][i] = load_as_float(p.weight, p.w_dtype, c * p.weight_c_stride + k * p.weight_w_stride);
      bias[i] = p.bias ? load_as_float(p.bias, p.w_dtype, c * p.bias_stride) : 0.0f;
      for (int j = 0; j < kHalo; ++j)
        hist[j][i] = p.initial_states
                         ? ld<T>(p.initial_states, b * p.init_batch_stride + c * p.init_c_stride + j * p.init_l_stride)
                         : 0.0f;
    }
    int32_t seq_hist[kHalo > 0 ? kHalo : 1];
    for (int j = 0; j < kHalo; ++j) seq_hist[j] = -1;

    const int64_t x_off = b * p.x_batch_stride + c0 * p.x_c_stride;
    const int64_t out_off = b * p.out_batch_stride + c0 * p.out_c_stride;
    for (int64_t t = 0; t < p.seqlen; ++t) {
      for (int64_t i = 0; i < nc; ++i) cur[i] = ld<T>(p.x, x_off + i * p.x_c_stride + t * p.x_l_stride);
      // Which history taps belong to the same sequence as t: one decision for all channels.
      bool use[kHalo > 0 ? kHalo : 1];
      int32_t seq_t = 0;
      if constexpr (kSeqIdx) seq_t = p.seq_idx[b * p.seq_idx_batch_stride + t * p.seq_idx_l_stride];
      for (int j = 0; j < kHalo; ++j) use[j] = !kSeqIdx || seq_hist[j] == seq_t;
      const bool padding = kSeqIdx && seq_t < 0;  // padding token: exactly 0
      for (int64_t i = 0; i < nc; ++i) {
        float acc = bias[i] + w[kHalo][i] * cur[i];
        for (int j = 0; j < kHalo; ++j) acc += use[j] ? w[j][i] * hist[j][i] : 0.0f;
        const float o = padding ? 0.0f : p.silu ? silu(acc) : acc;
        st<T>(p.out, out_off + i * p.out_c_stride + t * p.out_l_stride, o);
      }
      for (int j = 0; j + 1 < kHalo; ++j) {
        for (int64_t i = 0; i < nc; ++i) hist[j][i] = hist[j + 1][i];
        seq_hist[j] = seq_hist[j + 1];
      }
      for (int64_t i = 0; i < nc; ++i) hist[kHalo - 1][i] = cur[i];
      seq_hist[kHalo - 1] = seq_t;
    }
    if (p.final_states) {
      for (int j = 0; j < kHalo; ++j)
        for (int64_t i = 0; i < nc; ++i)
          st<T>(p.final_states, b * p.final_batch_stride + (c0 + i) * p.final_c_stride + j * p.final_l_stride,
                hist[j][i]);
    }
  }
}

}  // namespace

int launch_fwd(const FwdParams& p, const ParallelFor& pfor) {
  if (p.batch == 0 || p.dim == 0) return kSuccess;
  return dispatch_dtype(p.x_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return dispatch_width(p.width, [&](auto W) {
      constexpr int kWidth = decltype(W)::value;
      return dispatch_bool(p.seq_idx != nullptr, [&](auto S) {
        constexpr bool kSeqIdx = decltype(S)::value;
        if (p.channel_last) {
          const int64_t nblk = p.batch * ((p.dim + kChannelBlock - 1) / kChannelBlock);
          pfor(nblk, 1, [&](int64_t b0, int64_t b1) { fwd_blocks_channel_last<T, kWidth, kSeqIdx>(p, b0, b1); });
        } else {
          const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(p.seqlen, 1));
          pfor(p.batch * p.dim, grain,
               [&](int64_t r0, int64_t r1) { fwd_rows_channel_first<T, kWidth, kSeqIdx>(p, r0, r1); });
        }
        return int(kSuccess);
      });
    });
  });
}

void serial_for(int64_t n, int64_t /*grain*/, const std::function<void(int64_t, int64_t)>& body) {
  if (n > 0) body(0, n);
}

}  // namespace causal_conv1d::cpu
