// Forward for channel-first x (stride 1 along seqlen): warp strips with a load ring.
//
// Data ownership: every (batch, channel) row is cut into vectors of kV elements (16 bytes). The
// row's vector grid starts m elements before the row, m being the row's misalignment, so every
// vector is one aligned access and only a row's first and last vectors are partial. A warp owns a
// strip of `iters` consecutive warp-rows of that grid (iters * kWarpSize vectors): in iteration
// i lane l holds vector (strip start + i * kWarpSize + l), so each load and store instruction of
// the warp covers consecutive 16-byte chunks. Warps are independent (no shared memory, no
// barriers); a block is just tuning-table `threads` / kWarpSize strips.
//
// Interleaved strips (kIl > 0; the tuning table's interleave, NVIDIA, long rows): 2^kIl warps of a
// block share a strip, warp w taking its warp-rows w, w + 2^kIl, ..., so the block's loads and
// stores at a time are one contiguous run of 2^kIl * 512 bytes instead of as many runs of 512 apart.
// The launcher takes the most warps a strip that leave each at least interleave_min_iters
// iterations of the row. Lane 0's halo then is the previous warp's, so it loads the vector before
// its own with its own (an L1 / L2 hit: the other warp loads it at the same time) instead of
// carrying it. H200, in a CUDA graph, warp strips -> interleaved (one run, upstream's in it): bf16
// (1, 8192, 16384) / (4, 5376, 8192) / (8, 4096, 4096) 138.2 / 177.9 / 136.8 -> 136.1 / 173.4 /
// 134.6 us (upstream 136.6 / 176.8 / 135.6), fp16 (4, 5376, 8192) 178.5 -> 173.8, width 2 (8,
// 4096, 4096) 138.0 -> 134.1. ncu had shown the same instructions and DRAM bytes as upstream's
// (whose blocks walk a row 2 KB at a time) at 78.5% DRAM activity against its 79.4%. The shorter
// rows keep warp strips: 4 warps of 4 iterations each were 2.5% slower at (8, 4096, 4096), and
// (2, 8192, 1024) (4 iterations a row) 21.5 -> 28.8 / 37.6 us with 2 / 4 warps a strip. fp32 rows
// that short take strips of at most 4 iterations instead of one a row (tuning.h, short_iters_fp32).
//
// out in another vector phase than x (kOutVec false: x a slice of longer rows, out allocated
// dense): the vectors follow x, and out's vector that starts s positions before a lane's (s from
// the two rows' phases, the same for the whole strip) is the previous lane's last s outputs and
// the lane's first kV - s: one rotated shuffle and a funnel shift (realign_packed), then one
// aligned store. Lane 0's previous lane is the last lane of the previous iteration:
//  - kCarry (the kernels without seq_idx): its outputs are carried, as the halo is; a strip's
//    first vector stores its own positions only, its last s outputs are stored after the walk;
//  - otherwise (the seq_idx kernels, where a carry's 4 registers spilled on sm_90), lane 0 stores
//    element by element what the shuffle gave it: its own first kV - s outputs and the last
//    lane's last s (the end of the iteration);
//  - where the tuning table says so (realign_seq; CDNA, whose fp16 seq_idx kernels spilled
//    realigning), the seq_idx kernels store each lane's outputs element by element.
// H200, bf16 (8, 4096, 4096), x 1 element into wider rows, out dense: 157.7 us with the carry,
// 225.0 lane 0 by elements, 562-587 every lane by elements, 405.9 the element-wise kernel (a thread
// an element) this replaced; 151.1 with out in x's phase (fp32: 288 / 304 / - / 411 / 277).
//
// Bytes in flight: a ring of `ring` vectors per lane (tuning.h) in statically indexed registers;
// the load of iteration i + ring is issued before iteration i is computed, so every lane always
// has `ring` 16-byte loads outstanding; on NVIDIA the `l2_ahead` iterations past those are
// prefetched to L2, so the ring's loads wait on L2 rather than DRAM without holding more
// registers (interleaved kernels: a run-time distance from the launcher, `l2_ahead_short` for
// strips of few iterations). Data stays packed (16-bit pairs in 32-bit words) until it is computed.
//
// Halo exchange: output q needs inputs q - (width - 1) .. q. The width - 1 inputs before a lane's
// vector are the last ones of the previous lane's vector: one rotated shuffle per halo element
// (lane l reads lane l - 1, lane 0 reads the last lane). Lane 0 uses what it received in the
// previous iteration (the last lane's vector then was the one just before its own) and keeps the
// current value for the next iteration (interleaved strips: it loads that vector instead). Only
// lane 0 of a strip's first iteration reads its halo from memory: x (a cache hit, the previous
// strip loads it), initial_states before t = 0, or 0. The lane holding position seqlen - 1 writes
// the final states.
//
// seq_idx: a byte of masks a position (seq_masks.h, written by the launcher's mask kernel once per
// batch row) beside each vector, one aligned load a vector: each byte already says which of its
// position's taps share its sequence, so no ids and no halo of them are held. An iteration whose
// positions all lie inside one sequence (most of them) is computed as without seq_idx, after one
// warp vote.
#include <algorithm>
#include <climits>

#include "causal_conv1d/dispatch.h"
#include "causal_conv1d/gpu.h"
#include "kernel_utils.h"
#include "seq_masks.h"
#include "tuning.h"

namespace causal_conv1d::gpu {

namespace {

// Launch geometry computed by the launcher (launch_fwd_channel_first), read by the kernel.
struct CfGrid {
  uint32_t dim;             // rows are (batch, channel): row = b * dim + c
  uint32_t strips_per_row;  // strips of one row
  uint32_t total_strips;    // batch * dim * strips_per_row (< 2^31)
  int32_t iters;            // warp iterations per strip (a row's last strip may need fewer)
  const uint8_t* masks;     // seq_idx: batch row b's mask bytes at masks + b * mask_row
  int64_t mask_row;
  int32_t l2_ahead;  // interleaved kernels: iterations past the ring prefetched to L2
};

template <typename T, int kWidth, int kV, bool kOutVec, bool kSilu, bool kSeqIdx, bool kMaskPair, int kIl>
__global__ void CC_LAUNCH_BOUNDS(with_seq_occupancy(fwd_cf_tuning(kTargetFamily), kSeqIdx))
    fwd_channel_first_kernel(FwdParams p, CfGrid g) {
  constexpr FwdCfTuning kTune = fwd_cf_tuning(kTargetFamily);
  constexpr int kRing = kSeqIdx ? kTune.ring_seq : kTune.ring;
  constexpr int kHalo = kWidth - 1;
  constexpr int kStep = kWarpSize * kV;  // elements per warp iteration
  constexpr int kPerWord = 4 / int(sizeof(T));
  // seq_idx masks: kV bytes in words (byte e of a vector: word e / 4, bits 8 (e % 4) ..). A whole
  // vector loads the kV-aligned mask vector holding its first position in the ring; in the
  // kMaskPair kernels (some rows misaligned, and the table's seq_mask_pair allows the registers)
  // also the next one when its row is misaligned (its bytes straddle the two). Other vectors read
  // theirs byte by byte when computed (in the ring, the byte loads' addresses made the gfx942
  // kernels spill).
  constexpr int kMWords = kSeqIdx ? kV / 4 : 1;
  constexpr int kMPair = kSeqIdx && kMaskPair && kTune.seq_mask_pair ? 2 : 1;
  // out in another vector phase than x (the top of the file): realigned, with lane 0's outputs of
  // the previous iteration carried (kCarry) or its elements stored; or stored element by element.
  constexpr bool kRealign = !kSeqIdx || kTune.realign_seq;
  constexpr bool kCarry = !kSeqIdx;
  static_assert(kTune.threads % kWarpSize == 0, "a block must consist of whole warps");
  static_assert(kV * int(sizeof(T)) == 16, "16-byte vectors (kV a multiple of 4: whole words of mask bytes)");
  // Interleaved strips (the top of the file): 2^kIl warps a strip, lane 0 loading the vector
  // before its own (its halo) instead of carrying the last lane's of the previous iteration.
  constexpr bool kInter = kIl > 0;
  // Iterations past the ring prefetched to L2: the table's, or for interleaved strips the
  // launcher's choice (short strips prefetch further; tuning.h).
  constexpr int kL2Table = checked_l2_ahead<kSeqIdx ? kTune.l2_ahead_seq : kTune.l2_ahead>();
  static_assert(checked_l2_ahead<kTune.l2_ahead_short>() >= 0, "the launcher's distance for short interleaved strips");
  const int l2_ahead = kInter ? g.l2_ahead : kL2Table;
  static_assert(!kInter || (interleaves(kTune, kOutVec, kSeqIdx) && (1 << kIl) <= kTune.interleave),
                "only the kernels the table interleaves");
  static_assert(!kInter || kHalo <= kV, "lane 0's halo lies in the vector before its own");
  constexpr uint32_t kWarps = kTune.threads / kWarpSize;
  constexpr uint32_t kMembers = 1u << kIl;  // warps a strip
  static_assert(kWarps % kMembers == 0, "a block holds whole strips");

  const int lane = threadIdx.x % kWarpSize;
  const uint32_t warp = threadIdx.x / kWarpSize;
  const uint32_t member = warp % kMembers;  // the warp's place among its strip's
  const uint32_t strip_id = blockIdx.x * (kWarps / kMembers) + warp / kMembers;
  if (strip_id >= g.total_strips) return;  // whole warps leave together
  const uint32_t row = strip_id / g.strips_per_row;
  const uint32_t strip = strip_id - row * g.strips_per_row;
  const uint32_t b = row / g.dim, c = row - b * g.dim;
  const int64_t L = p.seqlen;
  const T* x = static_cast<const T*>(p.x) + int64_t(b) * p.x_batch_stride + int64_t(c) * p.x_c_stride;
  T* out = static_cast<T*>(p.out) + int64_t(b) * p.out_batch_stride + int64_t(c) * p.out_c_stride;
  const uint8_t* masks = kSeqIdx ? g.masks + int64_t(b) * g.mask_row : nullptr;

  const T* init = p.initial_states == nullptr ? nullptr
                                              : static_cast<const T*>(p.initial_states) +
                                                    int64_t(b) * p.init_batch_stride + int64_t(c) * p.init_c_stride;
  auto input = [&](int64_t q) { return row_input<T, kHalo>(x, L, init, p.init_l_stride, q); };
  auto mask_at = [&](int64_t q) -> uint32_t { return q >= 0 && q < L ? masks[q] : 0u; };
  T* fin = p.final_states == nullptr
               ? nullptr
               : static_cast<T*>(p.final_states) + int64_t(b) * p.final_batch_stride + int64_t(c) * p.final_c_stride;

  // Launched overlapping the kernel before it (launch_overlapping): no memory access above.
  wait_prior_kernel();
  if (L == 0) {  // no outputs; the final states are the initial states (or zeros)
    if (fin != nullptr && strip == 0 && member == 0 && lane < kHalo) fin[lane * p.final_l_stride] = input(lane - kHalo);
    return;
  }

  const int m = misalignment<T, kV>(x);
  // kOutVec false: out's vectors start s_out positions before x's (0 <= s_out < kV); the same in
  // every lane (on AMD a scalar register: the realignment's selects then take scalar conditions).
  const int s_out = kOutVec ? 0 : int(warp_uniform(uint32_t(misalignment<T, kV>(out) - m + kV) % kV));
  // Where a whole vector's masks start in the kV-aligned mask vector holding its first position
  // (a batch row's masks start aligned; its data rows may not).
  const int mo = (kV - m) % kV;
  const int64_t row_vecs = (L + m + kV - 1) / kV;
  // A warp's iteration it holds vectors vec0 + it * it_vecs + lane (it_vecs: the strip's warps'
  // warp-rows, interleaved), positions qbase + it * stride.
  constexpr int64_t it_vecs = int64_t(kWarpSize) * kMembers;
  constexpr int32_t stride = kStep * kMembers;
  const int64_t vec0 = int64_t(strip) * g.iters * it_vecs + member * kWarpSize;  // this warp's first vector
  const int64_t left = (row_vecs - vec0 + it_vecs - 1) / it_vecs;                // its iterations left in the row
  const int n_it = left <= 0 ? 0 : left < g.iters ? int(left) : g.iters;
  const int64_t qbase = (vec0 + lane) * kV - m;  // this lane's first position
  // Room left in the row after qbase, saturated to 32 bits (a strip spans at most a few thousand
  // elements): the vector of iteration `it` is whole when it lies inside [0, L).
  const int64_t room64 = L - qbase;
  const int32_t room = room64 > INT_MAX ? INT_MAX : int32_t(room64);
  auto whole = [&](int it) { return (it > 0 || qbase >= 0) && it * stride + kV <= room; };

  float w[kWidth], bias = 0.0f;  // loaded after the strip's first loads are issued (below)

  using Data = Packed<T, kV>;
  using Masks = uint32_t[kMPair][kMWords];
  Data out_carry;  // kCarry: the last lane's outputs of the previous iteration
  static_for<Data::kWords>([&](auto j) { out_carry.w[j] = 0; });
  auto load = [&](int it, Data& v, Masks& mk, Data& before) {
    const int64_t q0 = qbase + it * stride;
    const bool full = whole(it);
    if (full) {
      v = load_packed<T, kV>(x + q0);
    } else {
      v = load_edge<T, kV, kHalo>(x, L, init, p.init_l_stride, q0);
    }
    if constexpr (kInter) {  // lane 0: the vector before its own, for its halo
      if (lane == 0) {
        if (q0 >= kV && q0 <= L) {
          before = load_packed<T, kV>(x + q0 - kV);
        } else {
          // Its last kHalo elements (the halo) element by element, inline: the out-of-line
          // load_edge returns only once its loads have landed, which held up the strip's first
          // loads behind the initial_states' (H200, bf16 (8, 4096, 4096) with states in a CUDA
          // graph 142.0 us against 139.0 with warp strips).
          static_for<Data::kWords>([&](auto j) { before.w[j] = 0; });
          static_for<kHalo>([&](auto i) {
            constexpr int kE = kV - kHalo + decltype(i)::value;
            before.w[kE / kPerWord] |= elem_word<T, kE % kPerWord>(input(q0 - kHalo + decltype(i)::value));
          });
        }
      }
    }
    if constexpr (kSeqIdx) {
      if (full && (kMPair == 2 || mo == 0)) {  // (seq_mask_row leaves room past seqlen)
        load_run<kV>(masks + q0 - mo, mk[0]);
        if (kMPair == 2 && mo != 0) load_run<kV>(masks + q0 - mo + kV, mk[kMPair - 1]);
      }
    }
  };

  // Halo element i sits kD lanes back at element kSrc of that lane's vector; carry[i] is what lane
  // l < kD received in the previous iteration (for the first iteration: read from memory).
  uint32_t carry[kHalo];

  auto process = [&](int it, const Data& cur, const Masks& ring_masks, const Data& before) {
    // The masks of the own positions: from the ring (load) or, for the other vectors, read now.
    uint32_t mk[kMWords];
    if constexpr (kSeqIdx) {
      if (whole(it) && (kMPair == 2 || mo == 0)) {
        straddled_masks<kV>(ring_masks[0], ring_masks[kMPair - 1], kMPair == 1 ? 0 : mo, mk);
      } else {
        const int64_t q0 = qbase + it * stride;
        uint64_t v = 0;
#pragma unroll 1
        for (int e = 0; e < kV; ++e) v |= uint64_t(mask_at(q0 + e)) << (8 * e);
        static_for<kMWords>([&](auto j) { mk[j] = uint32_t(v >> (32 * j)); });
      }
    }
    float hal[kHalo];
    static_for<kHalo>([&](auto i) {
      constexpr int kBack = kHalo - decltype(i)::value;
      constexpr int kD = (kBack + kV - 1) / kV;
      constexpr int kSrc = kD * kV - kBack;
      const int src_lane = (lane + kWarpSize - kD) % kWarpSize;
      const uint32_t got = shfl(cur.w[kSrc / kPerWord], src_lane, kWarpSize);
      if constexpr (kInter) {  // (kD is 1: the halo lies in the vector before lane 0's)
        hal[i] = word_elem<T, kSrc % kPerWord>(lane < kD ? before.w[kSrc / kPerWord] : got);
      } else {
        hal[i] = word_elem<T, kSrc % kPerWord>(lane < kD ? carry[i] : got);
        carry[i] = got;
      }
    });
    // Outputs, packed as they are computed (inputs converted where used): fewer live registers
    // than float arrays of inputs and outputs, which matters for the AMD occupancy floors. Masked:
    // a tap whose position lies in another sequence reads 0, a padding token's output is 0.
    auto compute = [&](auto masked) {
      constexpr bool kMasked = decltype(masked)::value;
      PackedBuilder<T, kV> res;
      static_for<kV>([&](auto e) {
        constexpr int kE = decltype(e)::value;
        float acc = bias;
        static_for<kWidth>([&](auto k) {
          constexpr int kR = kE - kHalo + decltype(k)::value;  // < 0: halo
          float xv;
          if constexpr (kR >= 0) {
            xv = packed_elem<T, kR>(cur);
          } else {
            xv = hal[kR + kHalo];
          }
          if constexpr (kMasked && kR < kE) {  // a tap kE - kR positions back: bit kE - kR - 1
            if (!((mk[kE / 4] >> (8 * (kE % 4) + kE - kR - 1)) & 1u)) xv = 0.0f;
          }
          acc = fmaf(w[k], xv, acc);
        });
        float o = kSilu ? silu_to<T>(acc) : acc;
        if constexpr (kMasked) {
          if ((mk[kE / 4] >> (8 * (kE % 4))) & kSeqPadBit) o = 0.0f;  // padding token
        }
        res.template set<kE>(o);
      });
      return res;
    };
    PackedBuilder<T, kV> res;
    if constexpr (kSeqIdx) {
      // When every lane's vector and halo lie in one sequence (no padding token), the masks change
      // nothing: the warp computes without them (the common case; a sequence boundary or padding
      // makes its warp's iteration take the masks). (The id kernels before the mask bytes gained
      // 209 -> 196-200 us from it at (8, 4096, 4096) with 1 or 8 sequences a row on the H200.) A
      // clean byte: every tap bit of the width set, not padding (the bytes of positions outside the
      // row are 0: not clean).
      constexpr uint32_t kTest = kSeqPadBit | ((1u << kHalo) - 1), kWant = (1u << kHalo) - 1;
      bool clean = true;
      static_for<kMWords>([&](auto j) { clean &= (mk[j] & kTest * 0x01010101u) == kWant * 0x01010101u; });
      if (warp_all(clean)) {
        res = compute(BoolC<false>{});
      } else {
        res = compute(BoolC<true>{});
      }
    } else {
      res = compute(BoolC<false>{});
    }

    const int64_t q0 = qbase + it * stride;
    if constexpr (kOutVec) {
      if (whole(it)) {
        store_packed<output_hint(kTune.nt_store)>(out + q0, res.out);
      } else {
        static_for<kV>([&](auto e) {
          if (q0 + e >= 0 && q0 + e < L) out[q0 + e] = packed_raw<T, decltype(e)::value>(res.out);
        });
      }
    } else if constexpr (!kRealign) {
      static_for<kV>([&](auto e) {
        constexpr int kE = decltype(e)::value;
        if (whole(it) || (q0 + kE >= 0 && q0 + kE < L)) out[q0 + kE] = packed_raw<T, kE>(res.out);
      });
    } else {
      // out's vector from s_out positions before the lane's: the previous lane's last s_out
      // outputs (lane 0: the last lane's of the previous iteration, when carried), then the
      // lane's first ones.
      Data prev;
      static_for<Data::kWords>([&](auto j) {
        const uint32_t got = shfl(res.out.w[j], (lane + kWarpSize - 1) % kWarpSize, kWarpSize);
        prev.w[j] = kCarry && lane == 0 ? out_carry.w[j] : got;
        if constexpr (kCarry) out_carry.w[j] = got;
      });
      const Data v = realign_packed<T, kV>(prev, res.out, s_out);
      const int64_t qo = q0 - s_out;
      // Lane 0 with nothing carried (or at a strip's start: the carry would be the previous
      // strip's, which stores it) stores by elements; its first s_out are then this iteration's
      // last lane's, which end the iteration (kStep on), or (with a carry) not its own.
      const bool by_elems = lane == 0 && (!kCarry || it == 0);
      if (!by_elems && (it > 0 || qbase >= s_out) && it * kStep + kV - s_out <= room) {
        store_packed<output_hint(kTune.nt_store)>(out + qo, v);
      } else {
        static_for<kV>([&](auto e) {
          constexpr int kE = decltype(e)::value;
          const bool lanes_tail = by_elems && kE < s_out;
          const int64_t q = qo + kE + (lanes_tail ? kStep : 0);
          if (!(kCarry && lanes_tail) && q >= 0 && q < L) out[q] = packed_raw<T, kE>(v);
        });
      }
    }
  };

  // The lines of iteration `it`, when it is whole, asked of L2 (no registers held until its load).
  auto prefetch = [&](int it) {
    if (whole(it)) prefetch_l2(x + qbase + it * stride);
  };

  // The ring: ring[j] holds iteration it0 + j; its next load (it0 + j + kRing) is issued before
  // it is computed, and l2_ahead iterations past that are prefetched to L2. Static indices keep
  // the ring in registers.
  Data ring[kRing];
  Masks ring_mk[kRing];
  Data ring_before[kInter ? kRing : 1];  // kInter: lane 0's vector before its own
  auto before_of = [&](auto j) -> Data& { return ring_before[kInter ? decltype(j)::value : 0]; };
  static_for<kRing>([&](auto j) {
    if (j < n_it) load(j, ring[j], ring_mk[j], before_of(j));
  });
  if constexpr (kInter || kL2Table > 0) {
    for (int j = kRing; j < kRing + l2_ahead && j < n_it; ++j) prefetch(j);
  }
  // Then the halo of lanes < kD (as loaded: packing it into a word would wait for it here), then
  // the weights: their conversion waits for them, and loaded first they put one more memory
  // latency in front of the strip's first data request (as ncu showed for the channel-last kernels).
  T carry_raw[kHalo];
  static_for<kHalo>([&](auto i) {
    constexpr int kBack = kHalo - decltype(i)::value;
    constexpr int kD = (kBack + kV - 1) / kV;
    carry_raw[i] = T{};
    if (!kInter && lane < kD) carry_raw[i] = input(qbase - kBack);
  });
  with_dtype(p.w_dtype, [&](auto tag) {
    using WT = typename decltype(tag)::type;
    const WT* wp = static_cast<const WT*>(p.weight) + int64_t(c) * p.weight_c_stride;
    static_for<kWidth>([&](auto k) { w[k] = to_float(wp[k * p.weight_w_stride]); });
    if (p.bias != nullptr) bias = to_float(static_cast<const WT*>(p.bias)[int64_t(c) * p.bias_stride]);
  });
  static_for<kHalo>([&](auto i) {
    constexpr int kBack = kHalo - decltype(i)::value;
    constexpr int kD = (kBack + kV - 1) / kV;
    constexpr int kSrc = kD * kV - kBack;
    carry[i] = elem_word<T, kSrc % kPerWord>(carry_raw[i]);
  });
  for (int it0 = 0; it0 < n_it; it0 += kRing) {
    static_for<kRing>([&](auto j) {
      const int it = it0 + j;
      if (it >= n_it) return;  // warp-uniform
      const Data cur = ring[j], cur_before = before_of(j);
      Masks cur_mk;
      static_for<kMPair>([&](auto h) { static_for<kMWords>([&](auto w) { cur_mk[h][w] = ring_mk[j][h][w]; }); });
      if (it + kRing < n_it) load(it + kRing, ring[j], ring_mk[j], before_of(j));
      if constexpr (kInter || kL2Table > 0) {
        if (l2_ahead > 0 && it + kRing + l2_ahead < n_it) prefetch(it + kRing + l2_ahead);
      }
      process(it, cur, cur_mk, cur_before);
    });
  }
  // kCarry: the strip's last s_out outputs (its last vector's, carried to lane 0), which no vector
  // of this strip or the next one stores.
  if constexpr (!kOutVec && kCarry) {
    const int64_t q_last = qbase + int64_t(kWarpSize - 1) * kV + int64_t(n_it - 1) * kStep;
    static_for<kV>([&](auto e) {
      constexpr int kE = decltype(e)::value;
      if (lane == 0 && kE >= kV - s_out && q_last + kE >= 0 && q_last + kE < L)
        out[q_last + kE] = packed_raw<T, kE>(out_carry);
    });
  }
  // Final states: copies of positions L - kHalo .. L - 1, written by the strip holding L - 1 (they
  // are cache hits: it has just read them). Kept out of the loop, where the test would hold
  // registers across every iteration.
  if (fin != nullptr && lane < kHalo) {
    const int64_t v_last = (L - 1 + m) / kV;
    if (v_last / (g.iters * it_vecs) == strip && v_last / kWarpSize % kMembers == member)
      fin[lane * p.final_l_stride] = input(L - kHalo + lane);
  }
}

// The interleaved kernels the launcher instantiates: 2^1 and 2^2 warps a strip.
constexpr int kMaxInterLog2 = 2;

// A launch's strips (launch_fwd_channel_first; fwd_channel_first_strips for tests), from the
// row's vectors (aligned rows or not), the tuning row and the kernel family (seq_idx, out in x's
// phase).
struct CfStrips {
  int il;                  // 2^il warps walk a strip, interleaved
  int64_t iters;           // warp iterations a strip (a row's last strip may need fewer)
  int64_t strips_per_row;  // strips of one row
  int32_t l2_ahead;        // iterations past the ring prefetched to L2 (interleaved kernels read it
                           // from CfGrid; the others compile in the same table value)
};
CfStrips cf_strips(const FwdParams& p, const FwdCfTuning& tune, int wave, int kv, bool seq_idx, bool out_vec,
                   bool aligned) {
  // Strips: as few as cover a row with at most max_iters iterations each, balanced.
  int64_t max_iters = seq_idx ? tune.max_iters_seq : tune.max_iters;
  const int64_t span = p.seqlen + (aligned ? 0 : kv - 1);
  const int64_t row_vecs = (span + kv - 1) / kv;
  // Interleaved strips: as many warps a strip (2^il) as the table allows while each keeps at least
  // interleave_min_iters iterations of the row (CUDA builds: the only ones that compile
  // interleaved kernels, launch_fwd_channel_first).
  CfStrips st{};
  if (CAUSAL_CONV1D_BACKEND_CUDA && interleaves(tune, out_vec, seq_idx)) {
    auto iters_at = [&](int l) { return (row_vecs + (int64_t(wave) << l) - 1) / (int64_t(wave) << l); };
    while (st.il < kMaxInterLog2 && (2 << st.il) <= tune.interleave && iters_at(st.il + 1) >= tune.interleave_min_iters)
      ++st.il;
    // fp32 rows too short to interleave: shorter strips (tuning.h, short_iters_fp32).
    if (st.il == 0 && kv == 4 && tune.short_iters_fp32 > 0)
      max_iters = std::min<int64_t>(max_iters, tune.short_iters_fp32);
  }
  const int64_t it_vecs = int64_t(wave) << st.il;  // vectors a strip's iteration covers
  const int64_t iters_needed = std::max<int64_t>(1, (row_vecs + it_vecs - 1) / it_vecs);
  st.strips_per_row = (iters_needed + max_iters - 1) / max_iters;
  st.iters = (iters_needed + st.strips_per_row - 1) / st.strips_per_row;
  // Interleaved strips at the interleaving floor prefetch further (tuning.h, l2_ahead_short).
  st.l2_ahead = seq_idx                                              ? tune.l2_ahead_seq
                : st.il > 0 && st.iters <= tune.interleave_min_iters ? tune.l2_ahead_short
                                                                     : tune.l2_ahead;
  return st;
}

// out stored as vectors when its rows share x's alignment (then one peel fits both); otherwise
// realigned from x's (the top of the file).
bool out_in_x_phase(const FwdParams& p, int esize, int kv) {
  return same_vector_phase(p.x, p.out, esize, kv, {p.x_batch_stride, p.x_c_stride},
                           {p.out_batch_stride, p.out_c_stride});
}

// Every x row starts aligned: no row needs the extra peeled vector.
bool rows_aligned(const FwdParams& p, int esize, int kv) {
  return reinterpret_cast<uintptr_t>(p.x) % (kv * esize) == 0 && multiple_of(p.x_batch_stride, kv) &&
         multiple_of(p.x_c_stride, kv);
}

}  // namespace

int fwd_channel_first_strips(const FwdParams& p, const DeviceDesc& dev, FwdCfStrips* strips) {
  if (const int status = check_width_and_dtypes(p.width, p.x_dtype, p.w_dtype); status != kSuccess) return status;
  const int esize = dtype_size(p.x_dtype), kv = 16 / esize;
  const CfStrips st = cf_strips(p, fwd_cf_tuning(dev.family), dev.wave_size, kv, p.seq_idx != nullptr,
                                out_in_x_phase(p, esize, kv), rows_aligned(p, esize, kv));
  *strips = {1 << st.il, st.iters, st.strips_per_row, st.l2_ahead};
  return kSuccess;
}

int launch_fwd_channel_first(const FwdParams& p, const uint8_t* masks, int64_t mask_row, const DeviceDesc& dev,
                             Stream stream) {
  const FwdCfTuning tune = fwd_cf_tuning(dev.family);
  const int wave = dev.wave_size;
  return dispatch_dtype(p.x_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return dispatch_bool(p.seq_idx != nullptr, [&](auto Q) {
      constexpr bool kSeqIdx = decltype(Q)::value;
      constexpr int kV = kVec16<T>;  // 16-byte vectors
      const bool out_vec = out_in_x_phase(p, sizeof(T), kV);
      const bool aligned = rows_aligned(p, sizeof(T), kV);
      return dispatch_width(p.width, [&](auto W) {
        constexpr int kWidth = decltype(W)::value;
        return dispatch_bool(out_vec, [&](auto OutVec) {
          const CfStrips st = cf_strips(p, tune, wave, kV, kSeqIdx, decltype(OutVec)::value, aligned);
          const int il = st.il;
          const int warps_per_block = tune.threads / wave;
          const int64_t total = p.batch * p.dim * st.strips_per_row;
          if (total > INT_MAX) return int(kErrInvalidParams);
          CfGrid g;
          g.dim = static_cast<uint32_t>(p.dim);
          g.strips_per_row = static_cast<uint32_t>(st.strips_per_row);
          g.total_strips = static_cast<uint32_t>(total);
          g.iters = static_cast<int32_t>(st.iters);
          g.masks = masks;
          g.mask_row = mask_row;
          g.l2_ahead = st.l2_ahead;
          const int strips_per_block = warps_per_block >> il;
          const auto blocks = static_cast<unsigned>((total + strips_per_block - 1) / strips_per_block);
          // seq_idx with misaligned rows: the kernels that load both mask vectors a vector's bytes
          // straddle (aligned rows need one; the other kernels take the same code path).
          const bool pair = kSeqIdx && !aligned && tune.seq_mask_pair;
          return dispatch_bool(p.silu, [&](auto S) {
            return dispatch_bool(pair, [&](auto P) {
              constexpr bool kOutVec = decltype(OutVec)::value, kSilu = decltype(S)::value;
              constexpr bool kPair = decltype(P)::value && kSeqIdx;
              auto launch = [&](auto Il) {
                return launch_overlapping(
                    fwd_channel_first_kernel<T, kWidth, kV, kOutVec, kSilu, kSeqIdx, kPair, decltype(Il)::value>,
                    dim3(blocks), dim3(tune.threads), stream, p, g);
              };
#if CAUSAL_CONV1D_BACKEND_CUDA  // (only NVIDIA's row interleaves: AMD builds compile no such kernel)
              if constexpr (kOutVec && !kSeqIdx) {
                if (il == 1) return launch(IntC<1>{});
                if (il == 2) return launch(IntC<2>{});
              }
#endif
              return launch(IntC<0>{});
            });
          });
        });
      });
    });
  });
}

}  // namespace causal_conv1d::gpu
