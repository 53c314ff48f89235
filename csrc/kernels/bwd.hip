// Backward: dx, dinitial_states (dfinal_states flows in), and dweight/dbias, for both layouts.
//
//   y[t]   = bias + sum_k w[k] x[t - (W-1) + k]        (recomputed; taps masked by seq_idx)
//   dy[t]  = dout[t] * silu'(y[t])   (or dout[t]); 0 at padding tokens (seq_idx < 0, output 0)
//   dx[s]  = sum_k w[k] dy[s + (W-1) - k]   (+ dfinal for the last W-1 positions of [init, x])
//   dw[k] += sum_t dy[t] x[t - (W-1) + k],   db += sum_t dy[t]
//
//  - channel-first: a block owns 128 * kV consecutive positions of one (batch, channel) row;
//    thread t holds one 16-byte vector of x and of dout in registers and gets the W-1 values on
//    either side by shuffle (see bwd_channel_first_kernel); it computes dy for its kV positions
//    plus the W-1 after them, then dx for its kV positions and its dweight/dbias terms;
//  - channel-last: a tile of x (with W-1 positions of halo on each side) and of dout (with W-1
//    positions after it) is staged in LDS / shared memory, loaded cooperatively as 16-byte
//    vectors; a block owns kChunkL time steps of 64 channels; thread (c, part) walks its time
//    range with a window of W dy values, writing dx over its own dout rows in LDS, which go back
//    to global memory as vectors at the end. The dout rows it needs of the other part's range are
//    read before a barrier, so the in-place writes never race.
//
// dweight/dbias: each block reduces its threads' sums (CUB / rocPRIM block reduction for
// channel-first, LDS for channel-last) to one partial per channel. Default mode adds partials to
// dweight/dbias with float atomics; deterministic mode writes them to a workspace that
// bwd_reduce_kernel sums in a fixed order, so the result is the same bits on every run.
#include <algorithm>

#include "causal_conv1d/block_prims.h"
#include "causal_conv1d/dispatch.h"
#include "causal_conv1d/gpu.h"
#include "kernel_utils.h"

namespace causal_conv1d::gpu {

namespace {

__device__ __forceinline__ float dsilu(float y) {
  const float sig = fast_div(1.0f, 1.0f + __expf(-y));
  return sig * (1.0f + y * (1.0f - sig));
}

// One partial (dw[0..W-1], db) of a block: atomically added, or stored for the ordered reduction.
template <int kWidth>
__device__ __forceinline__ void emit_partial(const BwdParams& p, int64_t slot, int64_t ch,
                                             const float (&acc)[kWidth + 1]) {
  if (p.deterministic) {
    float* dst = p.workspace + (slot * p.f.dim + ch) * (kWidth + 1);
    static_for<kWidth + 1>([&](auto k) { dst[k] = acc[k]; });
  } else {
    static_for<kWidth>(
        [&](auto k) { atomic_add(p.dweight + ch * p.dweight_c_stride + k * p.dweight_w_stride, acc[k]); });
    if (p.dbias != nullptr) atomic_add(p.dbias + ch * p.dbias_stride, acc[kWidth]);
  }
}

template <typename T>
struct BwdCfTraits {
  static constexpr int kNThreads = 128;
  static constexpr int kV = kVec16<T>;
};

// Channel-first: thread t owns positions q0 .. q0 + kV - 1 of one row (one 16-byte vector of x,
// dout and dx), q0 = tile start + t * kV. The W-1 inputs before and after its vector, and the
// W-1 dout values after it, come by shuffle from the neighbouring lanes; the first and last lanes
// of a warp read them from memory (cache hits). dy is computed for the kV positions and the W-1
// after them (needed by dx), so no dy crosses threads.
template <typename T, int kWidth, int kV, bool kSilu, bool kSeqIdx>
__global__ void __launch_bounds__(BwdCfTraits<T>::kNThreads)
    bwd_channel_first_kernel(BwdParams p, uint32_t tiles, uint32_t dim) {
  using Tr = BwdCfTraits<T>;
  constexpr int kNThreads = Tr::kNThreads;
  constexpr int kHalo = kWidth - 1;
  constexpr int kTile = kNThreads * kV;
  static_assert(kNThreads % kWarpSize == 0, "a block must consist of whole warps");
  __shared__ float dy0[kHalo];  // dy at positions 0 .. kHalo-1, for dinitial_states
  using Reduce = blockprim::BlockReduce<float, kNThreads>;
  __shared__ typename Reduce::TempStorage reduce_storage;

  const FwdParams& f = p.f;
  const uint32_t row = blockIdx.x / tiles;
  const uint32_t tile = blockIdx.x - row * tiles;
  const int64_t b = row / dim, c = row - uint32_t(b) * dim;
  const int64_t L = f.seqlen;
  const T* x = static_cast<const T*>(f.x) + b * f.x_batch_stride + c * f.x_c_stride;
  const T* dout = static_cast<const T*>(p.dout) + b * p.dout_batch_stride + c * p.dout_c_stride;
  T* dx = static_cast<T*>(p.dx) + b * p.dx_batch_stride + c * p.dx_c_stride;
  const int32_t* seq = kSeqIdx ? f.seq_idx + b * f.seq_idx_batch_stride : nullptr;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t q0 = int64_t(tile) * kTile - misalignment<T, kV>(x) + int64_t(threadIdx.x) * kV;

  // seq_idx never comes with states (the torch layer rejects it): those paths compile out.
  auto input = [&](int64_t q) -> float {
    if (q >= 0) return q < L ? to_float(x[q]) : 0.0f;
    if (kSeqIdx || f.initial_states == nullptr || q < -kHalo) return 0.0f;  // a peeled vector reaches past the states
    return to_float(static_cast<const T*>(
        f.initial_states)[b * f.init_batch_stride + c * f.init_c_stride + (q + kHalo) * f.init_l_stride]);
  };
  auto grad = [&](int64_t q) -> float { return q >= 0 && q < L ? to_float(dout[q]) : 0.0f; };
  auto seq_at = [&](int64_t q) -> int32_t { return q >= 0 && q < L ? seq[q * f.seq_idx_l_stride] : -1; };

  // Own vectors (loads first, all in flight), then the halos.
  float xv[kV], gv[kV];
  int32_t sv[kSeqIdx ? kV : 1];
  if (q0 >= 0 && q0 + kV <= L) {
    const Vec<T, kV> a = load_vec<T, kV>(x + q0);
    const Vec<T, kV> g = load_vec<T, kV>(dout + q0);
    static_for<kV>([&](auto e) {
      xv[e] = to_float(a.v[e]);
      gv[e] = to_float(g.v[e]);
    });
  } else {
    static_for<kV>([&](auto e) {
      xv[e] = input(q0 + e);
      gv[e] = grad(q0 + e);
    });
  }
  if constexpr (kSeqIdx) static_for<kV>([&](auto e) { sv[e] = seq_at(q0 + e); });
  float xl[kHalo], xr[kHalo], gr[kHalo];
  int32_t sl[kSeqIdx ? kHalo : 1], sr[kSeqIdx ? kHalo : 1];
  static_for<kHalo>([&](auto i) {
    // Before: position q0 - kHalo + i, dl lanes back. After: position q0 + kV + i, dr lanes ahead.
    constexpr int back = kHalo - decltype(i)::value;
    constexpr int dl = (back + kV - 1) / kV, src_l = dl * kV - back;
    constexpr int dr = decltype(i)::value / kV + 1, src_r = decltype(i)::value % kV;
    const float a = shfl_up(xv[src_l], dl, kWarpSize);
    xl[i] = lane < dl ? input(q0 - back) : a;
    const float bx = shfl_down(xv[src_r], dr, kWarpSize);
    const float bg = shfl_down(gv[src_r], dr, kWarpSize);
    const bool edge = lane + dr >= kWarpSize;
    xr[i] = edge ? input(q0 + kV + i) : bx;
    gr[i] = edge ? grad(q0 + kV + i) : bg;
    if constexpr (kSeqIdx) {
      const int32_t s_up = shfl_up(sv[src_l], dl, kWarpSize);
      const int32_t s_dn = shfl_down(sv[src_r], dr, kWarpSize);
      sl[i] = lane < dl ? seq_at(q0 - back) : s_up;
      sr[i] = edge ? seq_at(q0 + kV + i) : s_dn;
    }
  });
  // Input / seq id at position q0 + r, r in [-kHalo, kV + kHalo) (r compile-time).
  auto xat = [&](auto r) -> float {
    constexpr int kR = decltype(r)::value;
    if constexpr (kR < 0) {
      return xl[kR + kHalo];
    } else if constexpr (kR < kV) {
      return xv[kR];
    } else {
      return xr[kR - kV];
    }
  };
  auto sat = [&](auto r) -> int32_t {
    constexpr int kR = decltype(r)::value;
    if constexpr (kR < 0) {
      return sl[kR + kHalo];
    } else if constexpr (kR < kV) {
      return sv[kR];
    } else {
      return sr[kR - kV];
    }
  };

  float w[kWidth], bias = 0.0f;
  with_dtype(f.w_dtype, [&](auto tag) {
    using WT = typename decltype(tag)::type;
    const WT* wp = static_cast<const WT*>(f.weight);
    static_for<kWidth>([&](auto k) { w[k] = to_float(wp[c * f.weight_c_stride + k * f.weight_w_stride]); });
    if (f.bias != nullptr) bias = to_float(static_cast<const WT*>(f.bias)[c * f.bias_stride]);
  });

  // dy at positions q0 + j, j in [0, kV + kHalo); dweight/dbias terms for the own positions.
  float dyv[kV + kHalo];
  float acc[kWidth + 1] = {};
  static_for<kV + kHalo>([&](auto j) {
    constexpr int kJ = decltype(j)::value;
    float y = bias;
    static_for<kWidth>([&](auto k) {
      constexpr int kR = kJ - kHalo + decltype(k)::value;
      float xk = xat(Idx<kR>{});
      if constexpr (kSeqIdx) {
        if (sat(Idx<kR>{}) != sat(Idx<kJ>{})) xk = 0.0f;
      }
      y += w[k] * xk;
    });
    float g;
    if constexpr (kJ < kV) {
      g = gv[kJ];
    } else {
      g = gr[kJ - kV];
    }
    dyv[kJ] = kSilu ? g * dsilu(y) : g;
    if constexpr (kSeqIdx) {
      if (sat(Idx<kJ>{}) < 0) dyv[kJ] = 0.0f;  // padding token: constant output
    }
    if constexpr (kJ < kV) {
      const int64_t q = q0 + kJ;
      if (q >= 0 && q < L) {
        acc[kWidth] += dyv[kJ];
        static_for<kWidth>([&](auto k) {
          constexpr int kR = kJ - kHalo + decltype(k)::value;
          float xk = xat(Idx<kR>{});
          if constexpr (kSeqIdx) {
            if (sat(Idx<kR>{}) != sat(Idx<kJ>{})) xk = 0.0f;
          }
          acc[k] += dyv[kJ] * xk;
        });
        if (!kSeqIdx && q < kHalo) dy0[q] = dyv[kJ];
      }
    }
  });

  // dx for the own positions: outputs at q + kHalo - k.
  float o[kV];
  static_for<kV>([&](auto j) {
    constexpr int kJ = decltype(j)::value;
    float g = 0.0f;
    static_for<kWidth>([&](auto k) {
      constexpr int kOut = kJ + kHalo - decltype(k)::value;
      float d = dyv[kOut];
      if constexpr (kSeqIdx) {
        if (sat(Idx<kJ>{}) != sat(Idx<kOut>{})) d = 0.0f;
      }
      g += w[k] * d;
    });
    const int64_t q = q0 + kJ;
    if (!kSeqIdx && p.dfinal_states != nullptr && q >= L - kHalo && q >= 0 && q < L)
      g += to_float(static_cast<const T*>(
          p.dfinal_states)[b * p.dfinal_batch_stride + c * p.dfinal_c_stride + (q - (L - kHalo)) * p.dfinal_l_stride]);
    o[kJ] = g;
  });
  if constexpr (kV > 1) {
    if (q0 >= 0 && q0 + kV <= L) {
      store_floats<T, kV>(dx + q0, o);
    } else {
      static_for<kV>([&](auto j) {
        if (q0 + j >= 0 && q0 + j < L) dx[q0 + j] = from_float<T>(o[j]);
      });
    }
  } else {
    if (q0 >= 0 && q0 < L) dx[q0] = from_float<T>(o[0]);
  }

  // Block sums of the dweight/dbias terms (CUB / rocPRIM), one partial per block.
  float total[kWidth + 1];
  static_for<kWidth + 1>([&](auto k) {
    total[k] = Reduce(reduce_storage).Sum(acc[k]);
    __syncthreads();  // reduce_storage is reused; also publishes dy0
  });
  if (threadIdx.x == 0) emit_partial<kWidth>(p, int64_t(b) * tiles + tile, c, total);

  // dinitial_states (positions -kHalo..-1), by the row's first tile from dy0.
  if (!kSeqIdx && p.dinitial_states != nullptr && tile == 0 && threadIdx.x < kHalo) {
    const int j = threadIdx.x;  // position j - kHalo
    float g = 0.0f;
    static_for<kWidth>([&](auto k) {  // static k: w stays in registers
      if (k <= j && j - k < L) g += w[k] * dy0[j - k];
    });
    if (p.dfinal_states != nullptr && j - kHalo >= L - kHalo)
      g += to_float(static_cast<const T*>(
          p.dfinal_states)[b * p.dfinal_batch_stride + c * p.dfinal_c_stride + (j - L) * p.dfinal_l_stride]);
    static_cast<T*>(p.dinitial_states)[b * p.dinit_batch_stride + c * p.dinit_c_stride + j * p.dinit_l_stride] =
        from_float<T>(g);
  }
}

template <typename T>
struct BwdClTraits {
  static constexpr int kNThreads = 128;
  static constexpr int kChunkC = 64;
  static constexpr int kChunkL = 128 / int(sizeof(T));  // same LDS budget as the forward
  static constexpr int kParts = kNThreads / kChunkC;
  static constexpr int kSteps = kChunkL / kParts;
  static constexpr int kV = kVec16<T>;
  static constexpr int kRowStride = kChunkC + kV;
};

template <typename T, int kWidth, int kV, bool kSilu, bool kSeqIdx>
__global__ void __launch_bounds__(BwdClTraits<T>::kNThreads)
    bwd_channel_last_kernel(BwdParams p, uint32_t ctiles, uint32_t ltiles) {
  using Tr = BwdClTraits<T>;
  constexpr int kHalo = kWidth - 1;
  constexpr int kXRows = Tr::kChunkL + 2 * kHalo;  // positions t_base - kHalo ..
  constexpr int kGRows = Tr::kChunkL + kHalo;      // positions t_base ..
  constexpr int kVecsPerRow = Tr::kChunkC / kV;
  static_assert(Tr::kNThreads % kWarpSize == 0, "a block must consist of whole warps");
  __shared__ T xt[kXRows][Tr::kRowStride];
  __shared__ T gt[kGRows][Tr::kRowStride];
  __shared__ int32_t st[kSeqIdx ? kXRows : 1];
  __shared__ float red[Tr::kParts][Tr::kChunkC][kWidth + 1];

  const FwdParams& f = p.f;
  const uint32_t rest = blockIdx.x / ctiles;
  const uint32_t ctile = blockIdx.x - rest * ctiles;
  const uint32_t b = rest / ltiles, ltile = rest - b * ltiles;
  const int64_t L = f.seqlen, D = f.dim;
  const T* xb = static_cast<const T*>(f.x) + b * f.x_batch_stride;
  const T* gb = static_cast<const T*>(p.dout) + b * p.dout_batch_stride;
  T* dxb = static_cast<T*>(p.dx) + b * p.dx_batch_stride;
  const int64_t c_base = int64_t(ctile) * Tr::kChunkC - misalignment<T, kV>(xb);
  const int64_t t_base = int64_t(ltile) * Tr::kChunkL;

  // Stage a tile: rows of kChunkC channels at positions first + r, as vectors where whole.
  auto stage = [&](T(*tile)[Tr::kRowStride], int rows, int64_t first, const T* src, int64_t l_stride, bool is_x) {
    for (int idx = threadIdx.x; idx < rows * kVecsPerRow; idx += Tr::kNThreads) {
      const int r = idx / kVecsPerRow, cv = idx - (idx / kVecsPerRow) * kVecsPerRow;
      const int64_t t = first + r;
      const int64_t c0 = c_base + int64_t(cv) * kV;
      if (t >= 0 && t < L && c0 >= 0 && c0 + kV <= D) {
        store_vec_lds(&tile[r][cv * kV], load_vec<T, kV>(src + t * l_stride + c0));
        continue;
      }
      static_for<kV>([&](auto e) {
        const int64_t ch = c0 + e;
        T v = from_float<T>(0.0f);
        if (ch >= 0 && ch < D) {
          if (t >= 0 && t < L) {
            v = src[t * l_stride + ch];
          } else if (is_x && t < 0 && f.initial_states != nullptr) {
            v = static_cast<const T*>(
                f.initial_states)[b * f.init_batch_stride + ch * f.init_c_stride + (t + kHalo) * f.init_l_stride];
          }
        }
        tile[r][cv * kV + e] = v;
      });
    }
  };
  stage(xt, kXRows, t_base - kHalo, xb, f.x_l_stride, true);
  stage(gt, kGRows, t_base, gb, p.dout_l_stride, false);
  if constexpr (kSeqIdx) {
    for (int r = threadIdx.x; r < kXRows; r += Tr::kNThreads) {
      const int64_t t = t_base - kHalo + r;
      st[r] = t >= 0 && t < L ? f.seq_idx[b * f.seq_idx_batch_stride + t * f.seq_idx_l_stride] : -1;
    }
  }
  __syncthreads();

  const int c = threadIdx.x % Tr::kChunkC, part = threadIdx.x / Tr::kChunkC;
  const int s0 = part * Tr::kSteps;
  const int64_t ch = c_base + c;
  const bool live = ch >= 0 && ch < D;
  float w[kWidth] = {}, bias = 0.0f;
  if (live) {
    with_dtype(f.w_dtype, [&](auto tag) {
      using WT = typename decltype(tag)::type;
      const WT* wp = static_cast<const WT*>(f.weight);
      static_for<kWidth>([&](auto k) { w[k] = to_float(wp[ch * f.weight_c_stride + k * f.weight_w_stride]); });
      if (f.bias != nullptr) bias = to_float(static_cast<const WT*>(f.bias)[ch * f.bias_stride]);
    });
  }
  // dout rows after this thread's range belong to the other part, which overwrites them with dx:
  // read them before the barrier.
  float g_after[kHalo];
  static_for<kHalo>([&](auto i) { g_after[i] = to_float(gt[s0 + Tr::kSteps + i][c]); });
  __syncthreads();

  // dy at tile position r (0 <= r < kChunkL + kHalo): x rows r .. r + kHalo of xt.
  auto dy_at = [&](int r, float g) {
    float y = bias;
    static_for<kWidth>([&](auto k) {
      float xv = to_float(xt[r + k][c]);
      if constexpr (kSeqIdx) {
        if (st[r + k] != st[r + kHalo]) xv = 0.0f;
      }
      y += w[k] * xv;
    });
    if constexpr (kSeqIdx) {
      if (st[r + kHalo] < 0) return 0.0f;  // padding token: constant output
    }
    return kSilu ? g * dsilu(y) : g;
  };
  const int64_t t_end = L - t_base;  // tile positions at or past this are beyond seqlen
  // Window dyw[i] = dy at r + i, for the step's position r.
  float dyw[kWidth];
  static_for<kHalo>([&](auto i) {
    const int r = s0 + i;
    dyw[i + 1] = r < t_end ? dy_at(r, to_float(gt[r][c])) : 0.0f;
  });
  const T* dfin = p.dfinal_states != nullptr && live  // channels past dim have no dfinal row
                      ? static_cast<const T*>(p.dfinal_states) + b * p.dfinal_batch_stride + ch * p.dfinal_c_stride
                      : nullptr;
  // dinitial_states (positions -kHalo..-1) from dy at positions 0..kHalo-1, which the first part
  // of the first tile has just computed into its window (before its dout rows turn into dx).
  if (p.dinitial_states != nullptr && ltile == 0 && part == 0 && live) {
    T* dinit = static_cast<T*>(p.dinitial_states) + b * p.dinit_batch_stride + ch * p.dinit_c_stride;
    static_for<kHalo>([&](auto j) {
      float g = 0.0f;
      static_for<decltype(j)::value + 1>([&](auto k) { g += w[k] * dyw[decltype(j)::value - decltype(k)::value + 1]; });
      if (dfin != nullptr && j >= L) g += to_float(dfin[(j - L) * p.dfinal_l_stride]);
      dinit[j * p.dinit_l_stride] = from_float<T>(g);
    });
  }
  float acc[kWidth + 1] = {};
  for (int s = 0; s < Tr::kSteps; ++s) {
    const int r = s0 + s;
    static_for<kHalo>([&](auto i) { dyw[i] = dyw[i + 1]; });
    const int rn = r + kHalo;  // the newest dy of the window
    float g_new = s + kHalo < Tr::kSteps ? to_float(gt[rn][c]) : 0.0f;
    static_for<kHalo>([&](auto i) {
      if (s + kHalo == Tr::kSteps + i) g_new = g_after[i];
    });
    dyw[kHalo] = rn < t_end ? dy_at(rn, g_new) : 0.0f;
    if (r >= t_end) continue;
    // dweight/dbias terms of dy at r.
    acc[kWidth] += dyw[0];
    static_for<kWidth>([&](auto k) {
      float xv = to_float(xt[r + k][c]);
      if constexpr (kSeqIdx) {
        if (st[r + k] != st[r + kHalo]) xv = 0.0f;
      }
      acc[k] += dyw[0] * xv;
    });
    // dx at r (x position; xt row r + kHalo): outputs at r + kHalo - k.
    float g = 0.0f;
    static_for<kWidth>([&](auto k) {
      float d = dyw[kHalo - k];
      if constexpr (kSeqIdx) {
        if (st[r + kHalo] != st[r + 2 * kHalo - k]) d = 0.0f;
      }
      g += w[k] * d;
    });
    const int64_t t = t_base + r;
    if (dfin != nullptr && t >= L - kHalo) g += to_float(dfin[(t - (L - kHalo)) * p.dfinal_l_stride]);
    gt[r][c] = from_float<T>(g);
  }

  // dweight/dbias: the parts of a channel meet in LDS, summed in a fixed order.
  static_for<kWidth + 1>([&](auto k) { red[part][c][k] = acc[k]; });
  __syncthreads();
  if (part == 0 && live) {
    float total[kWidth + 1];
    static_for<kWidth + 1>([&](auto k) {
      total[k] = 0.0f;
      for (int q = 0; q < Tr::kParts; ++q) total[k] += red[q][c][k];
    });
    emit_partial<kWidth>(p, int64_t(b) * ltiles + ltile, ch, total);
  }

  // dx rows back to global memory.
  for (int idx = threadIdx.x; idx < Tr::kChunkL * kVecsPerRow; idx += Tr::kNThreads) {
    const int r = idx / kVecsPerRow, cv = idx - (idx / kVecsPerRow) * kVecsPerRow;
    const int64_t t = t_base + r;
    if (t >= L) continue;
    const int64_t c0 = c_base + int64_t(cv) * kV;
    T* dst = dxb + t * p.dx_l_stride + c0;
    if constexpr (kV > 1) {
      if (c0 >= 0 && c0 + kV <= D) {
        store_vec(dst, load_vec<T, kV>(&gt[r][cv * kV]));
        continue;
      }
    }
    static_for<kV>([&](auto e) {
      if (c0 + e >= 0 && c0 + e < D) dst[e] = gt[r][cv * kV + e];
    });
  }
}

// Deterministic mode: dweight[c] += sum over the partial slots i, in a fixed order. A block
// covers kReduceC channels; its kReduceLanes lanes per channel sum the slots i = lane, lane +
// kReduceLanes, ... in order, then lane sums are added in lane order.
constexpr int kReduceC = 32, kReduceLanes = 8;

__global__ void __launch_bounds__(kReduceC* kReduceLanes) bwd_reduce_kernel(BwdParams p, int64_t slots) {
  __shared__ float part[kReduceLanes][kReduceC][kMaxWidth + 1];
  const int cl = threadIdx.x % kReduceC, lane = threadIdx.x / kReduceC;
  const int64_t c = int64_t(blockIdx.x) * kReduceC + cl;
  const int kw = p.f.width + 1;
  const int64_t D = p.f.dim;
  for (int k = 0; k < kw; ++k) {
    float acc = 0.0f;
    if (c < D)
      for (int64_t i = lane; i < slots; i += kReduceLanes) acc += p.workspace[(i * D + c) * kw + k];
    part[lane][cl][k] = acc;
  }
  __syncthreads();
  if (lane != 0 || c >= D) return;
  for (int k = 0; k < kw; ++k) {
    float acc = 0.0f;
    for (int l = 0; l < kReduceLanes; ++l) acc += part[l][cl][k];
    if (k < p.f.width) {
      p.dweight[c * p.dweight_c_stride + k * p.dweight_w_stride] += acc;
    } else if (p.dbias != nullptr) {
      p.dbias[c * p.dbias_stride] += acc;
    }
  }
}

// Partial slots per channel: channel-first, batch * tiles per row; channel-last, batch * time tiles.
template <typename T>
int64_t bwd_slots(const BwdParams& p, bool vec, bool aligned) {
  const FwdParams& f = p.f;
  if (f.channel_last) {
    using Tr = BwdClTraits<T>;
    return f.batch * std::max<int64_t>(1, (f.seqlen + Tr::kChunkL - 1) / Tr::kChunkL);
  }
  const int kv = vec ? kVec16<T> : 1;
  const int64_t span = f.seqlen + (kv > 1 && !aligned ? kv - 1 : 0);
  const int64_t per_tile = int64_t(BwdCfTraits<T>::kNThreads) * kv;
  return f.batch * std::max<int64_t>(1, (span + per_tile - 1) / per_tile);
}

// Whether the 16-byte path applies (x, dout and dx share their alignment; channel-last also needs
// batch/time strides that are multiples of the vector) and whether every row starts aligned.
template <typename T>
void bwd_vector_path(const BwdParams& p, bool& vec, bool& aligned) {
  const FwdParams& f = p.f;
  constexpr int kv = kVec16<T>;
  if (f.channel_last) {
    vec = same_vector_phase(f.x, p.dout, sizeof(T), kv, {f.x_batch_stride, f.x_l_stride},
                            {p.dout_batch_stride, p.dout_l_stride}) &&
          same_vector_phase(f.x, p.dx, sizeof(T), kv, {f.x_batch_stride, f.x_l_stride},
                            {p.dx_batch_stride, p.dx_l_stride}) &&
          multiple_of(f.x_batch_stride, kv) && multiple_of(f.x_l_stride, kv);
    aligned = vec && reinterpret_cast<uintptr_t>(f.x) % 16 == 0;
  } else {
    vec = same_vector_phase(f.x, p.dout, sizeof(T), kv, {f.x_batch_stride, f.x_c_stride},
                            {p.dout_batch_stride, p.dout_c_stride}) &&
          same_vector_phase(f.x, p.dx, sizeof(T), kv, {f.x_batch_stride, f.x_c_stride},
                            {p.dx_batch_stride, p.dx_c_stride});
    aligned = vec && reinterpret_cast<uintptr_t>(f.x) % 16 == 0 && multiple_of(f.x_batch_stride, kv) &&
              multiple_of(f.x_c_stride, kv);
  }
}

}  // namespace

int bwd_workspace_elems(const BwdParams& p, int64_t* elems) {
  *elems = 0;
  if (!p.deterministic || p.f.batch == 0 || p.f.dim == 0) return kSuccess;
  return dispatch_dtype(p.f.x_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    bool vec, aligned;
    bwd_vector_path<T>(p, vec, aligned);
    *elems = bwd_slots<T>(p, vec, aligned) * p.f.dim * (p.f.width + 1);
    return int(kSuccess);
  });
}

int launch_bwd(const BwdParams& p, void* stream) {
  const FwdParams& f = p.f;
  if (f.batch == 0 || f.dim == 0) return kSuccess;
  if (p.deterministic && p.workspace == nullptr) return kErrInvalidParams;
  const auto s = static_cast<Stream>(stream);
  const int status = dispatch_dtype(f.x_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    bool vec, aligned;
    bwd_vector_path<T>(p, vec, aligned);
    return dispatch_width(f.width, [&](auto W) {
      constexpr int kWidth = decltype(W)::value;
      return dispatch_bool(vec, [&](auto V) {
        constexpr int kV = decltype(V)::value ? kVec16<T> : 1;
        return dispatch_bool(f.silu, [&](auto S) {
          return dispatch_bool(f.seq_idx != nullptr, [&](auto Q) {
            constexpr bool kSilu = decltype(S)::value, kSeqIdx = decltype(Q)::value;
            if (f.channel_last) {
              using Tr = BwdClTraits<T>;
              const int64_t span = f.dim + (kV > 1 && !aligned ? kV - 1 : 0);
              const int64_t ctiles = (span + Tr::kChunkC - 1) / Tr::kChunkC;
              const int64_t ltiles = std::max<int64_t>(1, (f.seqlen + Tr::kChunkL - 1) / Tr::kChunkL);
              const int64_t blocks = f.batch * ltiles * ctiles;
              if (blocks > 0x7fffffff) return int(kErrInvalidParams);
              bwd_channel_last_kernel<T, kWidth, kV, kSilu, kSeqIdx>
                  <<<static_cast<unsigned>(blocks), Tr::kNThreads, 0, s>>>(p, static_cast<uint32_t>(ctiles),
                                                                           static_cast<uint32_t>(ltiles));
            } else {
              using Tr = BwdCfTraits<T>;
              const int64_t span = f.seqlen + (kV > 1 && !aligned ? kV - 1 : 0);
              const int64_t per_tile = int64_t(Tr::kNThreads) * kV;
              const int64_t tiles = std::max<int64_t>(1, (span + per_tile - 1) / per_tile);
              const int64_t blocks = f.batch * f.dim * tiles;
              if (blocks > 0x7fffffff) return int(kErrInvalidParams);
              bwd_channel_first_kernel<T, kWidth, kV, kSilu, kSeqIdx>
                  <<<static_cast<unsigned>(blocks), Tr::kNThreads, 0, s>>>(p, static_cast<uint32_t>(tiles),
                                                                           static_cast<uint32_t>(f.dim));
            }
            return launch_status();
          });
        });
      });
    });
  });
  if (status != kSuccess || !p.deterministic) return status;
  int64_t elems = 0;
  bwd_workspace_elems(p, &elems);
  const int64_t slots = elems / (f.dim * (f.width + 1));
  bwd_reduce_kernel<<<ceil_div_u(f.dim, kReduceC), kReduceC * kReduceLanes, 0, s>>>(p, slots);
  return launch_status();
}

}  // namespace causal_conv1d::gpu
