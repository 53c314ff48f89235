// Forward for channel-first x (stride 1 along seqlen).
//
// Data ownership: every (batch, channel) row is cut into vectors of kV elements (16 bytes). The
// row's first vector starts m elements before the row, m being the row's misalignment, so every
// vector is one aligned access and only a row's first and last vectors are partial (masked).
// Each warp owns a contiguous span of kWarpSize * items vectors of a tile; lane l's vector of
// item i is vector i * kWarpSize + l of that span, so every load and store instruction of a warp
// covers consecutive 16-byte chunks (coalesced) and each thread has `items` loads in flight. The
// block size (64 to 128 threads) and `items` follow seqlen so that short rows leave no thread idle.
//
// Halo exchange: output position q needs inputs q - (width - 1) .. q. The width - 1 inputs before
// a vector come by shuffle from the previous lane's vector of the same item, or, for the first
// lanes, from the last lanes' vector of the previous item. Only the first lanes of a warp's first
// item read them from memory (cache hits: the previous warp or block loads the same bytes).
// Positions before 0 read initial_states (or zero), so shuffles carry the right values there too.
// The thread holding position seqlen - 1 writes the final states from its registers.
#include <algorithm>

#include "causal_conv1d/dispatch.h"
#include "causal_conv1d/gpu.h"
#include "kernel_utils.h"

namespace causal_conv1d::gpu {

namespace {

struct FwdCfTraits {
  // Block sizes are multiples of 64 (whole waves on wave32 and wave64 targets), chosen per launch.
  static constexpr int kMinThreads = 64;
  static constexpr int kMaxThreads = 128;
  // Up to this many 16-byte vectors per thread, all loaded before use and kept packed until used:
  // they are what keeps enough bytes in flight per SM/CU. Fewer with seq_idx, whose ids take as
  // many registers again. The launcher picks the count per launch (short rows need fewer).
  __host__ __device__ static constexpr int max_items(bool seq_idx) { return seq_idx ? 2 : 4; }
};

template <typename T, int kWidth, int kV, bool kSilu, bool kSeqIdx>
__global__ void __launch_bounds__(FwdCfTraits::kMaxThreads)
    fwd_channel_first_kernel(FwdParams p, uint32_t tiles_per_row, uint32_t dim, int items) {
  constexpr int kHalo = kWidth - 1;
  constexpr int kItems = FwdCfTraits::max_items(kSeqIdx);  // registers for this many; `items` used
  static_assert(FwdCfTraits::kMinThreads % kWarpSize == 0, "a block must consist of whole warps");

  // 32-bit index math: the launcher guarantees rows * tiles < 2^31 (64-bit division is slow).
  const uint32_t row = blockIdx.x / tiles_per_row;
  const uint32_t tile = blockIdx.x - row * tiles_per_row;
  const int64_t b = row / dim, c = row - uint32_t(b) * dim;
  const int64_t L = p.seqlen;
  const T* x = static_cast<const T*>(p.x) + b * p.x_batch_stride + c * p.x_c_stride;
  T* out = static_cast<T*>(p.out) + b * p.out_batch_stride + c * p.out_c_stride;
  const int32_t* seq = kSeqIdx ? p.seq_idx + b * p.seq_idx_batch_stride : nullptr;
  const int m = misalignment<T, kV>(x);
  const int lane = threadIdx.x % kWarpSize;

  float w[kWidth], bias = 0.0f;
  with_dtype(p.w_dtype, [&](auto tag) {
    using WT = typename decltype(tag)::type;
    const WT* wp = static_cast<const WT*>(p.weight);
    static_for<kWidth>([&](auto k) { w[k] = to_float(wp[c * p.weight_c_stride + k * p.weight_w_stride]); });
    if (p.bias != nullptr) bias = to_float(static_cast<const WT*>(p.bias)[c * p.bias_stride]);
  });

  // Input at row position q: x inside the row, initial_states (or 0) for the kHalo positions
  // before it, 0 elsewhere (a peeled first vector reaches further back than the states).
  auto input = [&](int64_t q) -> float {
    if (q >= 0) return q < L ? to_float(x[q]) : 0.0f;
    if (p.initial_states == nullptr || q < -kHalo) return 0.0f;
    const T* init = static_cast<const T*>(p.initial_states);
    return to_float(init[b * p.init_batch_stride + c * p.init_c_stride + (q + kHalo) * p.init_l_stride]);
  };
  auto seq_at = [&](int64_t q) -> int32_t { return q >= 0 && q < L ? seq[q * p.seq_idx_l_stride] : -1; };
  // Halo element i (position q0 - (kHalo - i)) sits kLanesBack<i> lanes back, at element kSrc<i>.
  auto lanes_back = [](auto i) { return (kHalo - decltype(i)::value + kV - 1) / kV; };

  // Phase 1: every load of this thread, so they are in flight together: its vectors (kept packed)
  // and, for the first lanes, the halo before the warp's span.
  const int warp = threadIdx.x / kWarpSize;
  const int64_t span0 = (int64_t(tile) * blockDim.x + int64_t(warp) * kWarpSize) * items * kV - m;
  auto q0_of = [&](int item) { return span0 + (int64_t(item) * kWarpSize + lane) * kV; };
  Vec<T, kV> raw[kItems];
  int32_t sv[kItems][kSeqIdx ? kV : 1];
  float hmem[kHalo];
  int32_t hseq[kSeqIdx ? kHalo : 1];
  static_for<kItems>([&](auto item) {
    if (item >= items) return;
    const int64_t q0 = q0_of(item);
    if (q0 >= 0 && q0 + kV <= L) {
      raw[item] = load_vec<T, kV>(x + q0);
    } else {
      static_for<kV>([&](auto e) { raw[item].v[e] = from_float<T>(input(q0 + e)); });
    }
    if constexpr (kSeqIdx) static_for<kV>([&](auto e) { sv[item][e] = seq_at(q0 + e); });
  });
  static_for<kHalo>([&](auto i) {
    if (lane < lanes_back(i)) {
      hmem[i] = input(span0 + lane * kV - (kHalo - i));
      if constexpr (kSeqIdx) hseq[i] = seq_at(span0 + lane * kV - (kHalo - i));
    }
  });

  // Phase 2: halo by shuffle, outputs, stores. `prev` holds the previous item's vector (the
  // first lanes' halo source).
  float prev[kV];
  int32_t sprev[kSeqIdx ? kV : 1];
  static_for<kItems>([&](auto item) {
    if (item >= items) return;
    const int64_t q0 = q0_of(item);
    float v[kV];
    static_for<kV>([&](auto e) { v[e] = to_float(raw[item].v[e]); });
    float halo[kHalo];
    [[maybe_unused]] int32_t shalo[kSeqIdx ? kHalo : 1];
    static_for<kHalo>([&](auto i) {
      constexpr int back = kHalo - decltype(i)::value;  // elements before q0
      constexpr int d = (back + kV - 1) / kV;           // lanes back
      constexpr int src = d * kV - back;                // element of that lane's vector
      const float up = shfl_up(v[src], d, kWarpSize);
      if constexpr (decltype(item)::value == 0) {
        halo[i] = lane < d ? hmem[i] : up;
      } else {
        const float wrap = shfl(prev[src], (lane - d + kWarpSize) % kWarpSize, kWarpSize);
        halo[i] = lane < d ? wrap : up;
      }
      if constexpr (kSeqIdx) {
        const int32_t sup = shfl_up(sv[item][src], d, kWarpSize);
        if constexpr (decltype(item)::value == 0) {
          shalo[i] = lane < d ? hseq[i] : sup;
        } else {
          const int32_t swrap = shfl(sprev[src], (lane - d + kWarpSize) % kWarpSize, kWarpSize);
          shalo[i] = lane < d ? swrap : sup;
        }
      }
    });
    static_for<kV>([&](auto e) { prev[e] = v[e]; });
    if constexpr (kSeqIdx) static_for<kV>([&](auto e) { sprev[e] = sv[item][e]; });

    float o[kV];
    static_for<kV>([&](auto e) {
      float acc = bias;
      static_for<kWidth>([&](auto k) {
        constexpr int r = decltype(e)::value - kHalo + decltype(k)::value;  // < 0: halo
        float xv;
        if constexpr (r >= 0) {
          xv = v[r];
        } else {
          xv = halo[r + kHalo];
        }
        if constexpr (kSeqIdx) {
          int32_t s;
          if constexpr (r >= 0) {
            s = sv[item][r];
          } else {
            s = shalo[r + kHalo];
          }
          if (s != sv[item][e]) xv = 0.0f;
        }
        acc += w[k] * xv;
      });
      o[e] = kSilu ? silu_to<T>(acc) : acc;
      if constexpr (kSeqIdx) {
        if (sv[item][e] < 0) o[e] = 0.0f;  // padding token
      }
    });

    if constexpr (kV > 1) {
      if (q0 >= 0 && q0 + kV <= L) {
        store_floats<T, kV>(out + q0, o);
      } else {
        static_for<kV>([&](auto e) {
          if (q0 + e >= 0 && q0 + e < L) out[q0 + e] = from_float<T>(o[e]);
        });
      }
    } else {
      if (q0 >= 0 && q0 < L) out[q0] = from_float<T>(o[0]);
    }

    // Final states: the last width - 1 positions of [initial_states, x] lie within this thread's
    // halo and vector when it holds position L - 1 (or, for L == 0, the row's first vector).
    if (p.final_states != nullptr && ((q0 <= L - 1 && L - 1 < q0 + kV) || (L == 0 && q0 + m == 0))) {
      T* fin = static_cast<T*>(p.final_states) + b * p.final_batch_stride + c * p.final_c_stride;
      const int64_t first = L - kHalo;
      static_for<kHalo>([&](auto i) {
        const int64_t q = q0 - kHalo + i;
        if (q >= first && q < L) fin[(q - first) * p.final_l_stride] = from_float<T>(halo[i]);
      });
      static_for<kV>([&](auto e) {
        const int64_t q = q0 + e;
        if (q >= first && q < L) fin[(q - first) * p.final_l_stride] = from_float<T>(v[e]);
      });
    }
  });
}

}  // namespace

int launch_fwd_channel_first(const FwdParams& p, Stream stream) {
  using Tr = FwdCfTraits;
  return dispatch_dtype(p.x_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr int kV16 = kVec16<T>;
    // 16-byte vectors when x and out rows share their alignment (then one peel fits both);
    // otherwise single elements.
    const bool vec = same_vector_phase(p.x, p.out, sizeof(T), kV16, {p.x_batch_stride, p.x_c_stride},
                                       {p.out_batch_stride, p.out_c_stride});
    // Rows all start aligned: no row needs the extra peeled vector.
    const bool aligned = vec && reinterpret_cast<uintptr_t>(p.x) % 16 == 0 && multiple_of(p.x_batch_stride, kV16) &&
                         multiple_of(p.x_c_stride, kV16);
    return dispatch_width(p.width, [&](auto W) {
      constexpr int kWidth = decltype(W)::value;
      return dispatch_bool(vec, [&](auto V) {
        constexpr int kV = decltype(V)::value ? kV16 : 1;
        const int64_t span = p.seqlen + (kV > 1 && !aligned ? kV - 1 : 0);
        return dispatch_bool(p.seq_idx != nullptr, [&](auto Q) {
          constexpr bool kSeqIdx = decltype(Q)::value;
          // Vectors per thread first (bytes in flight), then threads: the smallest power-of-two
          // block in [kMinThreads, kMaxThreads] that covers a row with the most vectors per
          // thread, else kMaxThreads.
          const int max_items = Tr::max_items(kSeqIdx);
          int threads = Tr::kMinThreads;
          while (threads < Tr::kMaxThreads && int64_t(threads) * kV * max_items < span) threads *= 2;
          int items = 1;
          while (items < max_items && int64_t(threads) * kV * items < span) items *= 2;
          const int64_t per_tile = int64_t(threads) * kV * items;
          const int64_t tiles = std::max<int64_t>(1, (span + per_tile - 1) / per_tile);
          const int64_t blocks = p.batch * p.dim * tiles;
          if (blocks > 0x7fffffff) return int(kErrInvalidParams);
          return dispatch_bool(p.silu, [&](auto S) {
            fwd_channel_first_kernel<T, kWidth, kV, decltype(S)::value, kSeqIdx>
                <<<static_cast<unsigned>(blocks), threads, 0, stream>>>(p, static_cast<uint32_t>(tiles),
                                                                        static_cast<uint32_t>(p.dim), items);
            return launch_status();
          });
        });
      });
    });
  });
}

}  // namespace causal_conv1d::gpu
