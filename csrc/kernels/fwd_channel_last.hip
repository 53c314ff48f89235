// Forward for channel-last x (stride 1 along dim), what (batch, seqlen, dim).transpose(1, 2)
// gives: a register window, no LDS.
//
// Data ownership: a thread owns kC consecutive channels (one 8-byte vector: 4 of 16-bit values, 2
// of fp32) of one batch row and a chunk of up to `steps` consecutive time steps.
// Consecutive threads own consecutive channel groups, so every load and store of a warp reads or
// writes one contiguous run of a time row (256 bytes). A block is tuning-table `threads`
// channel groups of one time chunk; the grid covers (batch, time chunk, channel block).
//
// Each thread walks its chunk forwards: the width - 1 rows before the chunk (the halo: x, or
// initial_states before t = 0, or zeros) are loaded first, then row t + ring is loaded while row t
// is computed (a ring of `ring` rows per thread in registers, tuning.h; on NVIDIA the `l2_ahead`
// rows past it are prefetched to L2, so the ring's loads wait on L2 rather than DRAM), and the
// window of the previous width - 1 rows slides along in registers as floats. No data moves between threads:
// neighbouring chunks re-read each other's last width - 1 rows (cache hits). The thread whose
// chunk ends at seqlen - 1 writes the final states from its window.
//
// seq_idx: the block first asks whether its chunk (and the halo rows before it) lies inside one
// sequence with no padding token, one id a thread and a block-wide vote; such a chunk (most of
// them) is computed as without seq_idx, and only the others hold and compare ids row by row.
//
// The vector path needs x and out to share their alignment and the batch / time strides to be
// multiples of kC (one peel of m channels then fits every row); otherwise kC = 1.
#include <algorithm>
#include <climits>

#include "causal_conv1d/dispatch.h"
#include "causal_conv1d/gpu.h"
#include "kernel_utils.h"
#include "tuning.h"

namespace causal_conv1d::gpu {

namespace {

// Channels per thread on the vector path: 8 bytes (4 of 16-bit, 2 of fp32); a warp's access to a
// time row is then 256 contiguous bytes. Twice as many (16 bytes of 16-bit values) was measured
// slower on the H200: the window and weights of 8 channels need more than 120 registers.
template <typename T>
constexpr int kClVec = 8 / int(sizeof(T));

// The kernel's first parameter: the grid and the fields of FwdParams a thread reads before its
// first loads (copies), in two 64-byte lines of kernel parameters: each line a thread touches
// first is a constant-cache miss it waits out before going on (as in the channel-last backward:
// BwdClGrid).
struct ClGrid {
  uint32_t cblocks;                 // channel blocks of `threads` groups
  uint32_t tchunks;                 // time chunks of `steps` rows
  DivU32 cblocks_div, tchunks_div;  // division by cblocks and by tchunks (the block indices)
  int32_t steps;
  const void* x;
  int64_t seqlen, dim, x_batch_stride, x_l_stride;
  // initial_states (the edge path's; nvcc reads its strides before the first loads either way).
  const void* initial_states;
  int64_t init_batch_stride, init_c_stride, init_l_stride;
  void* out;  // (first stored after the loads are requested)
  int64_t out_batch_stride, out_l_stride;
  WeightArgs wa;  // (loaded once the first rows are requested)
};

template <typename T, int kWidth, int kC, bool kSilu, bool kSeqIdx>
__global__ void CC_LAUNCH_BOUNDS(with_seq_occupancy(fwd_cl_tuning(kTargetFamily), kSeqIdx))
    fwd_channel_last_kernel(ClGrid g, FwdParams p) {
  constexpr FwdClTuning kTune = fwd_cl_tuning(kTargetFamily);
  // Rows in flight: the table's bytes per thread in whole rows of this thread's vector, 1 to 4 (the
  // element-wise fallback, kC = 1, would otherwise hold 8 to 16 rows of scalar addresses).
  constexpr int kRows = (kSeqIdx ? kTune.ring_bytes_seq : kTune.ring_bytes) / (kC * int(sizeof(T)));
  constexpr int kRing = kRows < 1 ? 1 : kRows > 4 ? 4 : kRows;
  constexpr int kHalo = kWidth - 1;
  constexpr int kL2Ahead = checked_l2_ahead<kSeqIdx ? kTune.l2_ahead_seq : kTune.l2_ahead>();

  // 32-bit block decomposition (the launcher keeps the grid below 2^31 blocks), a multiply-high a
  // division (an integer division is ~20 issued instructions; a thread of a 4-row chunk ~650 in all).
  const uint32_t rest = g.cblocks_div.div(blockIdx.x);
  const uint32_t cb = blockIdx.x - rest * g.cblocks;
  const uint32_t b = g.tchunks_div.div(rest), tc = rest - b * g.tchunks;
  const int64_t L = g.seqlen, D = g.dim;
  const T* xb = static_cast<const T*>(g.x) + int64_t(b) * g.x_batch_stride;
  T* ob = static_cast<T*>(g.out) + int64_t(b) * g.out_batch_stride;
  const int64_t c0 = (int64_t(cb) * kTune.threads + threadIdx.x) * kC - misalignment<T, kC>(xb);
  // No barriers or shuffles below but the seq_idx kernels' vote: threads past the channels may leave
  // alone (with seq_idx after the vote; until then their loads take the edge path: zeros).
  if constexpr (!kSeqIdx) {
    if (c0 >= D) return;
  }
  // Launched overlapping the kernel before it (launch_overlapping): no memory access above.
  wait_prior_kernel();
  const bool whole_c = c0 >= 0 && c0 + kC <= D;
  const int64_t t0 = int64_t(tc) * g.steps;
  const int64_t left = L - t0;
  const int n = left < g.steps ? int(left) : g.steps;  // rows of this chunk (0 only when L == 0)

  // Row t of this thread's channels: x inside [0, L), initial_states for the kHalo rows before 0.
  using Data = Packed<T, kC>;
  // (initial_states' batch row: on the edge path only, computed there. seq_idx never comes with
  // initial states: the torch layer rejects it.)
  auto init_b = [&]() -> const T* {
    if (kSeqIdx || g.initial_states == nullptr) return nullptr;
    return static_cast<const T*>(g.initial_states) + int64_t(b) * g.init_batch_stride;
  };
  auto load_row = [&](int64_t t, Data& v) {
    if (t >= 0 && t < L && whole_c) {
      v = load_packed<T, kC>(xb + t * g.x_l_stride + c0);
    } else {
      v = load_row_edge<T, kC, kHalo>(xb, init_b(), L, D, g.x_l_stride, g.init_c_stride, g.init_l_stride, c0, t);
    }
  };
  auto seq_at = [&](int64_t t) -> int32_t {
    if constexpr (kSeqIdx) {
      return t >= 0 && t < L ? p.seq_idx[int64_t(b) * p.seq_idx_batch_stride + t * p.seq_idx_l_stride] : -1;
    } else {
      return 0;
    }
  };

  // The halo rows and the first kRing rows: all of these loads are in flight together.
  Data halo_raw[kHalo];
  Data ring[kRing];
  if (whole_c && t0 >= kHalo && t0 + kRing <= L) {
    // Inside x (every chunk but the first and the row's last few): one running row pointer, no
    // per-row edge tests or index products.
    const T* r = xb + (t0 - kHalo) * g.x_l_stride + c0;
    static_for<kHalo>([&](auto i) {
      halo_raw[i] = load_packed<T, kC>(r);
      r += g.x_l_stride;
    });
    static_for<kRing>([&](auto j) {
      if (j < n) ring[j] = load_packed<T, kC>(r);
      r += g.x_l_stride;
    });
  } else {
    static_for<kHalo>([&](auto i) { load_row(t0 - kHalo + i, halo_raw[i]); });
    static_for<kRing>([&](auto j) {
      if (j < n) load_row(t0 + j, ring[j]);
    });
  }
  // The weights and bias once those rows are requested: their conversion waits for them, and
  // loaded first they put one more memory latency in front of the thread's first data request
  // (ncu, H200, (1, 4096, 256): the threads' first stall).
  float w[kWidth][kC], bias[kC];
  auto load_weights = [&](const auto& wa) {
    if (whole_c) {
      load_group_weights<kWidth, kC>(wa, g.wa.runs, c0, w, bias);
    } else {
      load_edge_weights<kWidth, kC>(wa, c0, D, w, bias);
    }
  };
  if constexpr (kSeqIdx) {
    load_weights(p);  // (from g, the seq_idx kernels spilled at their 64 registers on sm_90)
  } else {
    load_weights(g.wa);
  }
  // The window: the previous kHalo rows, packed like the loads (converted when used).
  Data win[kHalo];
  static_for<kHalo>([&](auto i) { win[i] = halo_raw[i]; });

  // Running row pointers (one add a row instead of 64-bit index math): the next row the loop
  // loads (always inside [0, L)) and the row it stores. (Block-uniform offsets plus a per-thread
  // base timed 164.6 vs 161.8 us at (8, 4096, 4096) and 37.6 vs 26.5 us at (2, 8192, 1024) on the
  // H200, one quick run each: kept the pointers.)
  const T* x_next = xb + (t0 + kRing) * g.x_l_stride + c0;
  T* o_row = ob + t0 * g.out_l_stride + c0;
  // Rows past the ring asked of L2 (whole vectors only: every such row lies inside [0, L)).
  auto prefetch = [&](const T* row) {
    if (whole_c) prefetch_l2(row);
  };
  if constexpr (kL2Ahead > 0) {
    for (int j = kRing; j < kRing + kL2Ahead && j < n; ++j) prefetch(x_next + (j - kRing) * g.x_l_stride);
  }
  // seq_idx: the chunk is clean when rows max(t0 - kHalo, 0) .. t0 + n - 1 share one id >= 0 (rows
  // before 0 are zeros: seq_idx comes without initial states). Else the ids of the window and the
  // ring ride along (win_id, ring_id) and every tap is compared.
  bool masked = false;
  int32_t win_id[kHalo] = {}, ring_id[kRing] = {};
  if constexpr (kSeqIdx) {
    const int64_t lo = t0 >= kHalo ? t0 - kHalo : 0;
    const int32_t first = seq_at(lo);
    bool same = first >= 0;
    for (int64_t t = lo + threadIdx.x; t < t0 + n; t += kTune.threads) same &= seq_at(t) == first;
    masked = !block_all(same);
    if (c0 >= D) return;
    if (masked) {
      static_for<kHalo>([&](auto i) { win_id[i] = seq_at(t0 - kHalo + i); });
      static_for<kRing>([&](auto j) {
        if (j < n) ring_id[j] = seq_at(t0 + j);
      });
    }
  }

  // The walk; kMasked: the ids compared (a seq_idx chunk that is not clean).
  auto walk = [&](auto masked_c) {
    constexpr bool kMasked = decltype(masked_c)::value;
    for (int s0 = 0; s0 < n; s0 += kRing) {
      static_for<kRing>([&](auto j) {
        const int s = s0 + j;
        if (s >= n) return;
        const Data cur = ring[j];
        const int32_t id = ring_id[j];
        if (s + kRing < n) {
          if (whole_c) {
            ring[j] = load_packed<T, kC>(x_next);
          } else {
            load_row(t0 + s + kRing, ring[j]);
          }
          if constexpr (kL2Ahead > 0) {
            if (s + kRing + kL2Ahead < n) prefetch(x_next + kL2Ahead * g.x_l_stride);
          }
          x_next += g.x_l_stride;
          if constexpr (kMasked) ring_id[j] = seq_at(t0 + s + kRing);
        }
        // Outputs, packed as they are computed (fewer live registers than a float array).
        PackedBuilder<T, kC> res;
        static_for<kC>([&](auto e) {
          constexpr int kE = decltype(e)::value;
          float acc = fmaf(w[kHalo][kE], packed_elem<T, kE>(cur), bias[kE]);
          static_for<kHalo>([&](auto k) {
            const float xk = packed_elem<T, kE>(win[k]);
            if constexpr (kMasked) {
              acc += win_id[k] == id ? w[k][kE] * xk : 0.0f;
            } else {
              acc = fmaf(w[k][kE], xk, acc);
            }
          });
          float o = kSilu ? silu_to<T>(acc) : acc;
          if constexpr (kMasked) {
            if (id < 0) o = 0.0f;  // padding token
          }
          res.template set<kE>(o);
        });
        T* dst = o_row;
        o_row += g.out_l_stride;
        if constexpr (kC > 1) {
          if (whole_c) {
            store_packed<output_hint(kTune.nt_store)>(dst, res.out);
          } else {
            static_for<kC>([&](auto e) {
              if (c0 + e >= 0 && c0 + e < D) dst[e] = packed_raw<T, decltype(e)::value>(res.out);
            });
          }
        } else {
          dst[0] = packed_raw<T, 0>(res.out);
        }
        static_for<kHalo>([&](auto k) {
          if constexpr (decltype(k)::value + 1 < kHalo) {
            win[k] = win[k + 1];
            if constexpr (kMasked) win_id[k] = win_id[k + 1];
          } else {
            win[k] = cur;
            if constexpr (kMasked) win_id[k] = id;
          }
        });
      });
    }
  };
  if (kSeqIdx && masked) {
    walk(BoolC<true>{});
  } else {
    walk(BoolC<false>{});
  }

  // Final states: the window after row L - 1 (or, for L == 0, the initial rows).
  if (p.final_states != nullptr && t0 + n == L) {
    T* fin = static_cast<T*>(p.final_states) + int64_t(b) * p.final_batch_stride;
    static_for<kC>([&](auto e) {
      const int64_t ch = c0 + e;
      if (ch < 0 || ch >= D) return;
      static_for<kHalo>([&](auto k) {
        fin[ch * p.final_c_stride + k * p.final_l_stride] = packed_raw<T, decltype(e)::value>(win[k]);
      });
    });
  }
}

}  // namespace

int launch_fwd_channel_last(const FwdParams& p, const DeviceDesc& dev, Stream stream) {
  const FwdClTuning tune = fwd_cl_tuning(dev.family);
  return dispatch_dtype(p.x_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    // Vectors need one channel peel valid for every (batch, time) row of x and out: same
    // misalignment, and batch/time strides that are multiples of the vector.
    const bool vec = same_vector_phase(p.x, p.out, sizeof(T), kClVec<T>, {p.x_batch_stride, p.x_l_stride},
                                       {p.out_batch_stride, p.out_l_stride}) &&
                     multiple_of(p.x_batch_stride, kClVec<T>) && multiple_of(p.x_l_stride, kClVec<T>);
    const bool aligned = vec && reinterpret_cast<uintptr_t>(p.x) % (sizeof(T) * kClVec<T>) == 0;
    return dispatch_width(p.width, [&](auto W) {
      constexpr int kWidth = decltype(W)::value;
      return dispatch_bool(vec, [&](auto V) {
        constexpr int kC = decltype(V)::value ? kClVec<T> : 1;
        const int64_t span = p.dim + (kC > 1 && !aligned ? kC - 1 : 0);
        const int64_t groups = (span + kC - 1) / kC;
        const int64_t cblocks = (groups + tune.threads - 1) / tune.threads;
        // The longest chunks that still give every CU min_blocks_per_cu blocks (short rows and
        // small batches otherwise leave most of the device idle); at least min_steps rows a chunk.
        int64_t steps = tune.max_steps;
        auto chunks = [&](int64_t st) { return std::max<int64_t>(1, (p.seqlen + st - 1) / st); };
        while (steps > tune.min_steps &&
               p.batch * cblocks * chunks(steps) < int64_t(tune.min_blocks_per_cu) * dev.cu_count)
          steps /= 2;
        const int64_t tchunks = chunks(steps);
        const int64_t blocks = p.batch * tchunks * cblocks;
        if (blocks > INT_MAX) return int(kErrInvalidParams);
        const ClGrid g{static_cast<uint32_t>(cblocks), static_cast<uint32_t>(tchunks),
                       DivU32::make(static_cast<uint32_t>(cblocks)), DivU32::make(static_cast<uint32_t>(tchunks)),
                       static_cast<int32_t>(steps), p.x, p.seqlen, p.dim, p.x_batch_stride, p.x_l_stride,
                       p.initial_states, p.init_batch_stride, p.init_c_stride, p.init_l_stride, p.out,
                       p.out_batch_stride, p.out_l_stride,
                       // Weight and bias runs: every thread's first channel a multiple of kC (aligned rows).
                       weight_args(p, (aligned || kC == 1) ? weight_runs(p, kC) : WeightRuns{false, false})};
        return dispatch_bool(p.silu, [&](auto S) {
          return dispatch_bool(p.seq_idx != nullptr, [&](auto Q) {
            return launch_overlapping(fwd_channel_last_kernel<T, kWidth, kC, decltype(S)::value, decltype(Q)::value>,
                                      dim3(static_cast<unsigned>(blocks)), dim3(tune.threads), stream, g, p);
          });
        });
      });
    });
  });
}

}  // namespace causal_conv1d::gpu
