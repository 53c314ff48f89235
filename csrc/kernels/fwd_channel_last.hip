// Forward for channel-last x (stride 1 along dim), what (batch, seqlen, dim).transpose(1, 2) gives.
//
// Data ownership: a block owns a tile of kChunkC channels by kChunkL time steps of one batch row,
// staged in LDS / shared memory with the width - 1 time steps before it (the halo).
//  1. Load: the tile's rows (kChunkC contiguous channels each) are read cooperatively as 16-byte
//     vectors, all issued before any is stored to LDS, so every thread has several loads in flight
//     and each warp instruction reads whole contiguous rows (coalesced). Halo rows before t = 0
//     come from initial_states (or zeros); rows past seqlen are zeros.
//  2. Compute: thread (c, part) owns channel c and kChunkL / kParts consecutive time steps. It reads
//     its width - 1 window entries first; after a barrier (every thread has read the rows it
//     needs of other threads' time ranges) it walks its steps reading x[t] from LDS and writing
//     out[t] over it, in place. LDS reads of a warp are consecutive channels: no bank conflicts.
//  3. Store: after a barrier the tile goes back to global memory as 16-byte vectors.
// The thread that processes t = seqlen - 1 holds the final states in its window and writes them.
// No halo is exchanged between blocks: each block reads its own halo rows (cache hits, the
// previous tile's rows).
//
// The vector path needs x and out to share their alignment and the batch/time strides to be
// multiples of the vector (one peel then fits every row); otherwise rows move element by element.
#include <algorithm>

#include "causal_conv1d/dispatch.h"
#include "causal_conv1d/gpu.h"
#include "kernel_utils.h"

namespace causal_conv1d::gpu {

namespace {

template <typename T>
struct FwdClTraits {
  static constexpr int kNThreads = 128;
  static constexpr int kChunkC = 64;  // channels per tile: 128 (16-bit) or 256 (fp32) bytes a row
  // Time steps per tile: the tile stays near 8 KB of LDS for any dtype, which keeps 8 waves per
  // SIMD on RDNA4 (LDS is shared by the two CUs of a WGP) and many blocks per SM on NVIDIA.
  static constexpr int kChunkL = 128 / int(sizeof(T));
  static constexpr int kParts = kNThreads / kChunkC;  // threads per channel, each a time range
  static constexpr int kStepsPerThread = kChunkL / kParts;
  static constexpr int kV = kVec16<T>;
  // Row stride in LDS: one vector of padding keeps rows 16-byte aligned (vector LDS accesses) and
  // shifts consecutive rows across banks.
  static constexpr int kRowStride = kChunkC + kV;
  static_assert(kNThreads % kChunkC == 0 && kChunkL % kParts == 0, "tile shape");
};

template <typename T, int kWidth, int kV, bool kSilu, bool kSeqIdx>
__global__ void __launch_bounds__(FwdClTraits<T>::kNThreads)
    fwd_channel_last_kernel(FwdParams p, uint32_t ctiles, uint32_t ltiles) {
  using Tr = FwdClTraits<T>;
  constexpr int kHalo = kWidth - 1;
  constexpr int kRows = Tr::kChunkL + kHalo;  // tile rows, halo first
  constexpr int kVecsPerRow = Tr::kChunkC / kV;
  constexpr int kLoads = (kRows * kVecsPerRow + Tr::kNThreads - 1) / Tr::kNThreads;
  static_assert(Tr::kNThreads % kWarpSize == 0, "a block must consist of whole warps");
  __shared__ T tile[kRows][Tr::kRowStride];
  __shared__ int32_t seq_tile[kSeqIdx ? kRows : 1];

  // 32-bit index math (the launcher keeps the grid below 2^31 blocks).
  const uint32_t rest = blockIdx.x / ctiles;
  const uint32_t ctile = blockIdx.x - rest * ctiles;
  const uint32_t b = rest / ltiles, ltile = rest - b * ltiles;
  const int64_t L = p.seqlen, D = p.dim;
  const T* xb = static_cast<const T*>(p.x) + b * p.x_batch_stride;
  T* ob = static_cast<T*>(p.out) + b * p.out_batch_stride;
  const int64_t c_base = int64_t(ctile) * Tr::kChunkC - misalignment<T, kV>(xb);  // tile's channel 0
  const int64_t t_base = int64_t(ltile) * Tr::kChunkL;                            // tile's row kHalo

  // 1. Load the tile (rows t_base - kHalo .. t_base + kChunkL - 1).
  auto row_vec = [&](int idx, int& r, int& cv) {
    r = idx / kVecsPerRow;
    cv = idx - r * kVecsPerRow;
  };
  Vec<T, kV> staged[kLoads];
  static_for<kLoads>([&](auto i) {
    const int idx = i * Tr::kNThreads + threadIdx.x;
    if (idx >= kRows * kVecsPerRow) return;
    int r, cv;
    row_vec(idx, r, cv);
    const int64_t t = t_base - kHalo + r;
    const int64_t c0 = c_base + int64_t(cv) * kV;
    if (t >= 0 && t < L && c0 >= 0 && c0 + kV <= D) {
      staged[i] = load_vec<T, kV>(xb + t * p.x_l_stride + c0);
      return;
    }
    static_for<kV>([&](auto e) {
      const int64_t c = c0 + e;
      T v = from_float<T>(0.0f);
      if (c >= 0 && c < D) {
        if (t >= 0 && t < L) {
          v = xb[t * p.x_l_stride + c];
        } else if (t < 0 && p.initial_states != nullptr) {
          v = static_cast<const T*>(
              p.initial_states)[b * p.init_batch_stride + c * p.init_c_stride + (t + kHalo) * p.init_l_stride];
        }
      }
      staged[i].v[e] = v;
    });
  });
  if constexpr (kSeqIdx) {
    for (int r = threadIdx.x; r < kRows; r += Tr::kNThreads) {
      const int64_t t = t_base - kHalo + r;
      seq_tile[r] = t >= 0 && t < L ? p.seq_idx[b * p.seq_idx_batch_stride + t * p.seq_idx_l_stride] : -1;
    }
  }
  static_for<kLoads>([&](auto i) {
    const int idx = i * Tr::kNThreads + threadIdx.x;
    if (idx >= kRows * kVecsPerRow) return;
    int r, cv;
    row_vec(idx, r, cv);
    store_vec_lds(&tile[r][cv * kV], staged[i]);
  });
  __syncthreads();

  // 2. Compute in place: channel c of the tile, time steps [s0, s0 + kStepsPerThread).
  const int c = threadIdx.x % Tr::kChunkC;
  const int s0 = (threadIdx.x / Tr::kChunkC) * Tr::kStepsPerThread;  // tile row s0 + kHalo is t
  const int64_t ch = c_base + c;
  const bool live = ch >= 0 && ch < D;
  float w[kWidth] = {}, bias = 0.0f;
  if (live) {
    with_dtype(p.w_dtype, [&](auto tag) {
      using WT = typename decltype(tag)::type;
      const WT* wp = static_cast<const WT*>(p.weight);
      static_for<kWidth>([&](auto k) { w[k] = to_float(wp[ch * p.weight_c_stride + k * p.weight_w_stride]); });
      if (p.bias != nullptr) bias = to_float(static_cast<const WT*>(p.bias)[ch * p.bias_stride]);
    });
  }
  float win[kHalo];
  int32_t swin[kSeqIdx ? kHalo : 1];
  static_for<kHalo>([&](auto i) {
    win[i] = to_float(tile[s0 + i][c]);
    if constexpr (kSeqIdx) swin[i] = seq_tile[s0 + i];
  });
  __syncthreads();                   // every window is read before any output overwrites x
  const int64_t t_end = L - t_base;  // rows at or past this are beyond seqlen
#pragma unroll 4
  for (int s = 0; s < Tr::kStepsPerThread; ++s) {
    const int r = s0 + s + kHalo;
    const float cur = to_float(tile[r][c]);
    float acc = bias + w[kHalo] * cur;
    int32_t scur = 0;
    if constexpr (kSeqIdx) scur = seq_tile[r];
    static_for<kHalo>([&](auto k) {
      if constexpr (kSeqIdx) {
        if (swin[k] != scur) return;
      }
      acc += w[k] * win[k];
    });
    float o = kSilu ? silu_to<T>(acc) : acc;
    if constexpr (kSeqIdx) {
      if (scur < 0) o = 0.0f;  // padding token
    }
    tile[r][c] = from_float<T>(o);
    static_for<kHalo>([&](auto k) {
      if constexpr (decltype(k)::value + 1 < kHalo) {
        win[k] = win[k + 1];
        if constexpr (kSeqIdx) swin[k] = swin[k + 1];
      } else {
        win[k] = cur;
        if constexpr (kSeqIdx) swin[k] = scur;
      }
    });
    // Final states: after t = L - 1 the window holds positions L - kHalo .. L - 1.
    if (s0 + s == t_end - 1 && live && p.final_states != nullptr) {
      T* fin = static_cast<T*>(p.final_states) + b * p.final_batch_stride + ch * p.final_c_stride;
      static_for<kHalo>([&](auto k) { fin[k * p.final_l_stride] = from_float<T>(win[k]); });
    }
  }
  // seqlen == 0: the one tile's window (initial_states or zeros) is the final state.
  if (L == 0 && s0 == 0 && live && p.final_states != nullptr) {
    T* fin = static_cast<T*>(p.final_states) + b * p.final_batch_stride + ch * p.final_c_stride;
    static_for<kHalo>([&](auto k) { fin[k * p.final_l_stride] = from_float<T>(win[k]); });
  }
  __syncthreads();

  // 3. Store the outputs (tile rows kHalo ..).
  constexpr int kOutVecs = Tr::kChunkL * kVecsPerRow;
  for (int idx = threadIdx.x; idx < kOutVecs; idx += Tr::kNThreads) {
    const int r = idx / kVecsPerRow, cv = idx - (idx / kVecsPerRow) * kVecsPerRow;
    const int64_t t = t_base + r;
    if (t >= L) continue;
    const int64_t c0 = c_base + int64_t(cv) * kV;
    const T* src = &tile[r + kHalo][cv * kV];
    T* dst = ob + t * p.out_l_stride + c0;
    if constexpr (kV > 1) {
      if (c0 >= 0 && c0 + kV <= D) {
        store_vec(dst, load_vec<T, kV>(src));
        continue;
      }
    }
    static_for<kV>([&](auto e) {
      if (c0 + e >= 0 && c0 + e < D) dst[e] = src[e];
    });
  }
}

}  // namespace

int launch_fwd_channel_last(const FwdParams& p, Stream stream) {
  return dispatch_dtype(p.x_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Tr = FwdClTraits<T>;
    constexpr int kVFull = Tr::kV;
    // Vectors need one channel peel valid for every (batch, time) row of x and out: same
    // misalignment, and batch/time strides that are multiples of the vector.
    const bool vec = same_vector_phase(p.x, p.out, sizeof(T), kVFull, {p.x_batch_stride, p.x_l_stride},
                                       {p.out_batch_stride, p.out_l_stride}) &&
                     multiple_of(p.x_batch_stride, kVFull) && multiple_of(p.x_l_stride, kVFull);
    const bool aligned = vec && reinterpret_cast<uintptr_t>(p.x) % 16 == 0;
    return dispatch_width(p.width, [&](auto W) {
      constexpr int kWidth = decltype(W)::value;
      return dispatch_bool(vec, [&](auto V) {
        constexpr int kV = decltype(V)::value ? kVFull : 1;
        const int64_t span = p.dim + (kV > 1 && !aligned ? kV - 1 : 0);
        const int64_t ctiles = (span + Tr::kChunkC - 1) / Tr::kChunkC;
        const int64_t ltiles = std::max<int64_t>(1, (p.seqlen + Tr::kChunkL - 1) / Tr::kChunkL);
        const int64_t blocks = p.batch * ltiles * ctiles;
        if (blocks > 0x7fffffff) return int(kErrInvalidParams);
        return dispatch_bool(p.silu, [&](auto S) {
          return dispatch_bool(p.seq_idx != nullptr, [&](auto Q) {
            fwd_channel_last_kernel<T, kWidth, kV, decltype(S)::value, decltype(Q)::value>
                <<<static_cast<unsigned>(blocks), Tr::kNThreads, 0, stream>>>(p, static_cast<uint32_t>(ctiles),
                                                                              static_cast<uint32_t>(ltiles));
            return launch_status();
          });
        });
      });
    });
  });
}

}  // namespace causal_conv1d::gpu
