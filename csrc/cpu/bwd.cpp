// CPU backward. Without seq_idx and states the work goes through vec.h's SIMD rows (below,
// "vectorised paths": channel-first rows in chunks, channel-last tasks of channel and time
// blocks); otherwise the element loops here, one task per (batch, channel) row, any strides:
//   xs  = [initial_states (or 0), x]                      (length seqlen + width - 1, float)
//   dy  = dout * silu'(pre-activation)  (or dout)          (pre-activation recomputed from xs),
//         0 at padding tokens (seq_idx < 0), whose output is the constant 0
//   dxs[p] = sum_k w[k] * dy[p - k]  (taps masked like the forward), plus dfinal_states on the
//            last width - 1 positions; dx = dxs[width - 1:], dinitial_states = dxs[:width - 1]
//   row partials of dweight[k] = sum_t dy[t] * xs[t + k] and dbias = sum_t dy[t], in double.
// Either way dweight/dbias partials land in a (slot, dim, width + 1) buffer, one slot per row or
// task, and are summed over slots in a fixed order afterwards: the same bits on any number of
// threads.
#include <algorithm>
#include <cmath>
#include <vector>

#include "causal_conv1d/cpu.h"
#include "causal_conv1d/dispatch.h"
#include "common.h"
#include "vec.h"

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

// --- Vectorised paths (no seq_idx, no states): float rows through vec.h ------------------------

// Channel-first: a (batch, channel) row in chunks of kTimeChunk outputs. A chunk reads the inputs
// from width - 1 before it to width - 1 after it, and the upstream gradients of its outputs and
// the width - 1 after them (dx needs their dy): conv_row_bwd recomputes y and gives dx, dw, db.
int bwd_rows_channel_first_vec(const BwdParams& p, int64_t row_begin, int64_t row_end, double* partials) {
  const FwdParams& f = p.f;
  const int halo = f.width - 1;
  const int64_t L = f.seqlen;
  std::vector<float> xs(kTimeChunk + 2 * halo), g(kTimeChunk + halo), dy(kTimeChunk + halo), dx(kTimeChunk);
  for (int64_t row = row_begin; row < row_end; ++row) {
    const int64_t b = row / f.dim, c = row % f.dim;
    float w[kMaxWidth];
    for (int k = 0; k < f.width; ++k)
      w[k] = load_as_float(f.weight, f.w_dtype, c * f.weight_c_stride + k * f.weight_w_stride);
    const float bias = f.bias ? load_as_float(f.bias, f.w_dtype, c * f.bias_stride) : 0.0f;
    const int64_t x_off = b * f.x_batch_stride + c * f.x_c_stride;
    const int64_t g_off = b * p.dout_batch_stride + c * p.dout_c_stride;
    const int64_t dx_off = b * p.dx_batch_stride + c * p.dx_c_stride;
    double dw[kMaxWidth] = {}, db = 0.0;
    for (int64_t t0 = 0; t0 < L; t0 += kTimeChunk) {
      const int64_t n = std::min(kTimeChunk, L - t0);
      load_floats_clipped(f.x, f.x_dtype, x_off, f.x_l_stride, t0 - halo, n + 2 * halo, L, xs.data());
      load_floats_clipped(p.dout, f.x_dtype, g_off, p.dout_l_stride, t0, n + halo, L, g.data());
      const int status =
          vec::conv_row_bwd(xs.data(), g.data(), dy.data(), dx.data(), n, w, f.width, bias, f.silu, dw, &db);
      if (status != kSuccess) return status;
      store_floats(dx.data(), f.x_dtype, p.dx, dx_off + t0 * p.dx_l_stride, p.dx_l_stride, n);
    }
    double* part = partials + row * (f.width + 1);
    for (int k = 0; k < f.width; ++k) part[k] = dw[k];
    part[f.width] = db;
  }
  return kSuccess;
}

// Channel-last: tasks as the forward's (ClTasks). A task walks its steps t0 .. t1 - 1 and the
// width - 1 after them: at step t it computes dy[t] from the rows t - (width - 1) .. t of x (in
// float buffers), adds dy[t]'s dweight/dbias terms while t < t1, and emits dx of row
// t - (width - 1) from dy[t - (width - 1) .. t]. Its dweight/dbias go to its own partial slot.
int bwd_tasks_channel_last_vec(const BwdParams& p, const ClTasks& tasks, int64_t task_begin, int64_t task_end,
                               double* partials) {
  const FwdParams& f = p.f;
  const int halo = f.width - 1, W = f.width;
  const int64_t L = f.seqlen;
  constexpr int64_t kB = kChannelBlockVec;
  constexpr int64_t kLd = kRowStride;
  std::vector<float> wt(kMaxWidth * kLd), bias(kB), xrows(kMaxWidth * kLd), dyrows(kMaxWidth * kLd), g(kB), dx(kB);
  std::vector<double> dw(kMaxWidth * kLd), db(kB);
  std::vector<float> dwf(kMaxWidth * kLd), dbf(kB);  // running float sums, moved into dw / db
  // Steps summed in float before they go into the double totals.
  constexpr int64_t kFlushSteps = 64;
  auto flush = [&](int64_t nc) {
    for (int k = 0; k < W; ++k) {
      for (int64_t i = 0; i < nc; ++i) dw[k * kLd + i] += dwf[k * kLd + i];
      std::fill(dwf.begin() + k * kLd, dwf.begin() + k * kLd + nc, 0.0f);
    }
    for (int64_t i = 0; i < nc; ++i) db[i] += dbf[i];
    std::fill(dbf.begin(), dbf.begin() + nc, 0.0f);
  };
  for (int64_t task = task_begin; task < task_end; ++task) {
    const int64_t tb = task % tasks.tblocks, rest = task / tasks.tblocks;
    const int64_t cb = rest % tasks.cblocks, b = rest / tasks.cblocks;
    const int64_t c0 = cb * kB, nc = std::min(kB, f.dim - c0);
    const int64_t t0 = tb * tasks.tlen, t1 = std::min(L, t0 + tasks.tlen);
    for (int64_t i = 0; i < nc; ++i) {
      const int64_t c = c0 + i;
      for (int k = 0; k < W; ++k)
        wt[k * kLd + i] = load_as_float(f.weight, f.w_dtype, c * f.weight_c_stride + k * f.weight_w_stride);
      bias[i] = f.bias ? load_as_float(f.bias, f.w_dtype, c * f.bias_stride) : 0.0f;
    }
    std::fill(dw.begin(), dw.end(), 0.0);
    std::fill(db.begin(), db.end(), 0.0);
    std::fill(dwf.begin(), dwf.end(), 0.0f);
    std::fill(dbf.begin(), dbf.end(), 0.0f);
    auto x_row = [&](int64_t t, float* dst) {
      if (t >= 0 && t < L) {
        load_floats(f.x, f.x_dtype, b * f.x_batch_stride + t * f.x_l_stride + c0 * f.x_c_stride, f.x_c_stride, dst, nc);
      } else {
        std::fill(dst, dst + nc, 0.0f);
      }
    };
    // xo[k]: x rows t - halo + k (xo[halo] is filled at step t); dyo[k]: dy[t - k].
    float* xo[kMaxWidth];
    float* dyo[kMaxWidth];
    for (int k = 0; k < W; ++k) xo[k] = xrows.data() + k * kLd, dyo[k] = dyrows.data() + k * kLd;
    for (int j = 0; j < halo; ++j) x_row(t0 - halo + j, xo[j]);
    for (int64_t t = t0; t < t1 + halo; ++t) {
      x_row(t, xo[halo]);
      if (t < L) {
        load_floats(p.dout, f.x_dtype, b * p.dout_batch_stride + t * p.dout_l_stride + c0 * p.dout_c_stride,
                    p.dout_c_stride, g.data(), nc);
      } else {
        std::fill(g.begin(), g.begin() + nc, 0.0f);
      }
      const bool emit = t - halo >= t0;
      const int status = vec::conv_cols_bwd(xo, g.data(), dyo[0], emit ? dyo : nullptr, dx.data(), nc, wt.data(), kLd,
                                            W, bias.data(), f.silu, t < t1, dwf.data(), dbf.data());
      if (status != kSuccess) return status;
      if (t < t1 && ((t - t0 + 1) % kFlushSteps == 0 || t + 1 == t1)) flush(nc);
      if (emit)
        store_floats(dx.data(), f.x_dtype, p.dx,
                     b * p.dx_batch_stride + (t - halo) * p.dx_l_stride + c0 * p.dx_c_stride, p.dx_c_stride, nc);
      float* x_oldest = xo[0];
      for (int k = 0; k < halo; ++k) xo[k] = xo[k + 1];
      xo[halo] = x_oldest;
      float* dy_oldest = dyo[halo];
      for (int k = halo; k > 0; --k) dyo[k] = dyo[k - 1];
      dyo[0] = dy_oldest;
    }
    double* part = partials + ((b * tasks.tblocks + tb) * f.dim + c0) * (W + 1);
    for (int64_t i = 0; i < nc; ++i) {
      for (int k = 0; k < W; ++k) part[i * (W + 1) + k] = dw[k * kLd + i];
      part[i * (W + 1) + W] = db[i];
    }
  }
  return kSuccess;
}

// Sums the partial slots of every channel in slot order (the same bits on any thread count) and
// adds them to dweight / dbias.
void reduce_partials(const BwdParams& p, const double* partials, int64_t slots, const ParallelFor& pfor) {
  const FwdParams& f = p.f;
  const int W = f.width;
  pfor(f.dim, 64, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      double acc[kMaxWidth + 1] = {};
      for (int64_t s = 0; s < slots; ++s)
        for (int k = 0; k <= W; ++k) acc[k] += partials[(s * f.dim + c) * (W + 1) + k];
      for (int k = 0; k < W; ++k)
        p.dweight[c * p.dweight_c_stride + k * p.dweight_w_stride] += static_cast<float>(acc[k]);
      if (p.dbias) p.dbias[c * p.dbias_stride] += static_cast<float>(acc[W]);
    }
  });
}

}  // namespace

int launch_bwd(const BwdParams& p, const ParallelFor& pfor) {
  const FwdParams& f = p.f;
  if (const int status = check_width_and_dtypes(f.width, f.x_dtype, f.w_dtype); status != kSuccess) return status;
  if (f.batch == 0 || f.dim == 0) return kSuccess;
  if (!f.seq_idx && !f.initial_states && !p.dfinal_states && !p.dinitial_states) {
    const int W = f.width;
    if (f.channel_last) {
      // Time blocks of at least 512 steps, fewer when the partial slots would pass 2^24 doubles.
      const int64_t max_slots = std::max<int64_t>(f.batch, (int64_t(1) << 24) / (f.dim * (W + 1)));
      const int64_t tblocks = std::max<int64_t>(1, std::min<int64_t>((f.seqlen + 511) / 512, max_slots / f.batch));
      const ClTasks tasks(f.batch, f.dim, f.seqlen, std::max<int64_t>(1, (f.seqlen + tblocks - 1) / tblocks));
      std::vector<double> partials(f.batch * tasks.tblocks * f.dim * (W + 1));
      FirstError error;
      pfor(tasks.count(), 1,
           [&](int64_t a, int64_t z) { error.note(bwd_tasks_channel_last_vec(p, tasks, a, z, partials.data())); });
      if (error.code() != kSuccess) return error.code();
      reduce_partials(p, partials.data(), f.batch * tasks.tblocks, pfor);
    } else {
      std::vector<double> partials(f.batch * f.dim * (W + 1));
      const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(f.seqlen, 1));
      FirstError error;
      pfor(f.batch * f.dim, grain,
           [&](int64_t r0, int64_t r1) { error.note(bwd_rows_channel_first_vec(p, r0, r1, partials.data())); });
      if (error.code() != kSuccess) return error.code();
      reduce_partials(p, partials.data(), f.batch, pfor);
    }
    return kSuccess;
  }
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
        reduce_partials(p, partials.data(), f.batch, pfor);
        return int(kSuccess);
      });
    });
  });
}

}  // namespace causal_conv1d::cpu
