// CPU backward. One task per (batch, channel) row, any strides:
//   xs  = [initial_states (or 0), x]                      (length seqlen + width - 1, float)
//   dy  = dout * silu'(pre-activation)  (or dout)          (pre-activation recomputed from xs),
//         0 at padding tokens (seq_idx < 0), whose output is the constant 0
//   dxs[p] = sum_k w[k] * dy[p - k]  (taps masked like the forward), plus dfinal_states on the
//            last width - 1 positions; dx = dxs[width - 1:], dinitial_states = dxs[:width - 1]
//   row partials of dweight[k] = sum_t dy[t] * xs[t + k] and dbias = sum_t dy[t], in double.
// The partials land in a (batch, dim, width + 1) buffer and are summed over batch in a fixed
// order afterwards, so the result is the same bits on any number of threads.
#include <algorithm>
#include <cmath>
#include <vector>

#include "causal_conv1d/cpu.h"
#include "causal_conv1d/dispatch.h"
#include "common.h"

namespace causal_conv1d::cpu {

namespace {

template <typename T, int kWidth, bool kSeqIdx>
void bwd_rows(const BwdParams& p, int64_t row_begin, int64_t row_end, double* partials) {
  const FwdParams& f = p.f;
  constexpr int kHalo = kWidth - 1;
  const int64_t L = f.seqlen;
  std::vector<float> xs(L + kHalo), dy(L), dxs(L + kHalo);
  std::vector<int32_t> seq(kSeqIdx ? L : 0);
  for (int64_t row = row_begin; row < row_end; ++row) {
    const int64_t b = row / f.dim, c = row % f.dim;
    float w[kWidth];
    for (int k = 0; k < kWidth; ++k)
      w[k] = load_as_float(f.weight, f.w_dtype, c * f.weight_c_stride + k * f.weight_w_stride);
    const float bias = f.bias ? load_as_float(f.bias, f.w_dtype, c * f.bias_stride) : 0.0f;

    for (int j = 0; j < kHalo; ++j)
      xs[j] = f.initial_states
                  ? ld<T>(f.initial_states, b * f.init_batch_stride + c * f.init_c_stride + j * f.init_l_stride)
                  : 0.0f;
    const int64_t x_off = b * f.x_batch_stride + c * f.x_c_stride;
    const int64_t dout_off = b * p.dout_batch_stride + c * p.dout_c_stride;
    for (int64_t t = 0; t < L; ++t) {
      xs[kHalo + t] = ld<T>(f.x, x_off + t * f.x_l_stride);
      dy[t] = ld<T>(p.dout, dout_off + t * p.dout_l_stride);
    }
    if constexpr (kSeqIdx) {
      for (int64_t t = 0; t < L; ++t) seq[t] = f.seq_idx[b * f.seq_idx_batch_stride + t * f.seq_idx_l_stride];
    }
    // Does tap k of output t read a position of t's own sequence?
    auto tap = [&](int64_t t, int k) {
      if constexpr (!kSeqIdx) {
        return true;
      } else {
        const int64_t s = t - kHalo + k;
        return s >= 0 && seq[s] == seq[t];
      }
    };

    if (f.silu) {
      for (int64_t t = 0; t < L; ++t) {
        float y = bias;
        for (int k = 0; k < kWidth; ++k)
          if (tap(t, k)) y += w[k] * xs[t + k];
        const float sig = 1.0f / (1.0f + std::exp(-y));
        dy[t] *= sig * (1.0f + y * (1.0f - sig));
      }
    }

    // Padding tokens (negative id) output a constant 0: nothing flows back from them.
    if constexpr (kSeqIdx) {
      for (int64_t t = 0; t < L; ++t)
        if (seq[t] < 0) dy[t] = 0.0f;
    }

    std::fill(dxs.begin(), dxs.end(), 0.0f);
    double dw[kWidth] = {}, db = 0.0;
    for (int64_t t = 0; t < L; ++t) {
      db += dy[t];
      for (int k = 0; k < kWidth; ++k) {
        if (!tap(t, k)) continue;
        dw[k] += double(dy[t]) * xs[t + k];
        dxs[t + k] += w[k] * dy[t];
      }
    }
    if (p.dfinal_states) {
      for (int j = 0; j < kHalo; ++j)
        dxs[L + j] += ld<T>(p.dfinal_states, b * p.dfinal_batch_stride + c * p.dfinal_c_stride + j * p.dfinal_l_stride);
    }

    const int64_t dx_off = b * p.dx_batch_stride + c * p.dx_c_stride;
    for (int64_t t = 0; t < L; ++t) st<T>(p.dx, dx_off + t * p.dx_l_stride, dxs[kHalo + t]);
    if (p.dinitial_states) {
      for (int j = 0; j < kHalo; ++j)
        st<T>(p.dinitial_states, b * p.dinit_batch_stride + c * p.dinit_c_stride + j * p.dinit_l_stride, dxs[j]);
    }
    double* part = partials + row * (kWidth + 1);
    for (int k = 0; k < kWidth; ++k) part[k] = dw[k];
    part[kWidth] = db;
  }
}

}  // namespace

int launch_bwd(const BwdParams& p, const ParallelFor& pfor) {
  const FwdParams& f = p.f;
  if (f.batch == 0 || f.dim == 0) return kSuccess;
  return dispatch_dtype(f.x_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return dispatch_width(f.width, [&](auto W) {
      constexpr int kWidth = decltype(W)::value;
      return dispatch_bool(f.seq_idx != nullptr, [&](auto S) {
        constexpr bool kSeqIdx = decltype(S)::value;
        std::vector<double> partials(f.batch * f.dim * (kWidth + 1));
        const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(f.seqlen, 1));
        pfor(f.batch * f.dim, grain,
             [&](int64_t r0, int64_t r1) { bwd_rows<T, kWidth, kSeqIdx>(p, r0, r1, partials.data()); });
        // Fixed-order reduction over batch: independent of how rows were split among threads.
        pfor(f.dim, 64, [&](int64_t c0, int64_t c1) {
          for (int64_t c = c0; c < c1; ++c) {
            double acc[kWidth + 1] = {};
            for (int64_t b = 0; b < f.batch; ++b)
              for (int k = 0; k <= kWidth; ++k) acc[k] += partials[(b * f.dim + c) * (kWidth + 1) + k];
            for (int k = 0; k < kWidth; ++k)
              p.dweight[c * p.dweight_c_stride + k * p.dweight_w_stride] += static_cast<float>(acc[k]);
            if (p.dbias) p.dbias[c * p.dbias_stride] += static_cast<float>(acc[kWidth]);
          }
        });
        return int(kSuccess);
      });
    });
  });
}

}  // namespace causal_conv1d::cpu
