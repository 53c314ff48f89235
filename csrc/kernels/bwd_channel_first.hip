// Backward for channel-first x (stride 1 along seqlen): warp strips walking backwards with a load
// ring. The formulas are in bwd_common.h.
//
// Data ownership: as in the forward (fwd_channel_first.hip), every (batch, channel) row is cut into
// vectors of kV elements (16 bytes) starting m elements before the row (m: the row's misalignment), and
// a warp owns a strip of `iters` warp-rows of that grid: in iteration i lane l holds vector (strip start + i *
// kWarpSize + l) of x, dout and dx. Warps are independent (no shared memory, no barriers); a block is tuning-table
// `threads` / kWarpSize strips.
//
// The walk goes from the strip's last iteration to its first, with `ring` iterations of x and
// dout loaded ahead in statically indexed registers, and on NVIDIA the lines of `l2_ahead` more
// iterations prefetched to L2 (NVIDIA's row has no ring: the loads wait on L2, and the registers
// a ring slot would hold buy an 8th block). In each iteration a lane computes dy at its
// kV positions, their dweight/dbias terms, and dx at its kV positions, for which it needs:
//  - the x halo (the W-1 inputs before its vector, for its dy): by shuffle from the previous lane.
//    Lane 0 loads it with its vector (the warp-row before is the walk's next iteration, not yet
//    in registers): the whole vector before its own in one access where a vector holds the halo
//    (kBefore; lanes < kD when a vector is shorter than the halo load the halo's elements);
//  - the dy halo (the W-1 dy after its vector, for its dx): by a rotated shuffle from the next
//    lane. The last lane uses what it received in the previous iteration (lane 0's dy of the
//    warp-row after, walked just before) and keeps the current value for the next one. Before
//    the walk, the last lane computes the dy just past the strip from memory.
// So no pre-activation is computed twice except those W-1 per strip. dweight/dbias terms stay in
// registers over the strip: one warp reduction and one partial per strip (atomics, or a workspace
// slot in deterministic mode, which is what makes that mode cost nothing extra here).
//
// States (initial_states, dinitial_states, dfinal_states) change the dx of a row's first and last
// W - 1 positions, the dy of its first W - 1 and their dweight/dbias terms, and the dx before the
// row (dinitial_states): a second pass (bwd_cf_states_kernel, a thread a row's head or tail)
// recomputes those from memory after the walk, which runs as without states. (Taken in the walk, as before, they made a
// row's first and last iterations edge ones, unpipelined and element-wise: +25% at (8, 4096, 4096)
// against +7% with the pass. Rewritten after the loop by the walk's own warps: +15-17%, the code
// after the loop ~2 iterations' worth of instructions a strip; the pass with 8 lanes a row: 12.4
// us against 11.0, 7x the instructions. benchmarks/NOTES.md, sixteenth session.) On NVIDIA the pass
// starts while the walk's last blocks run (launch_overlapping, programmatic dependent launch): its
// loads and SiLU evaluations overlap them and only its stores wait for the walk (H200, bf16 (8, 4096,
// 4096) in a CUDA graph, one process: 219.4 -> 216.0 us against 207.0 without states; (4, 5376,
// 8192) 277.0 -> 274.4 against 268.1). Where rows allow, it stores whole 32-byte runs of dx at
// a row's ends rather than its W - 1 elements (same GPU, eager, one process, two builds
// alternated: 217.7-218.3 -> 214.5-215.0 us against 206.6-207.1; benchmarks/NOTES.md,
// thirty-seventh session).
//
// seq_idx: a kernel before the walk (launch_seq_masks) turns each batch row's ids into one
// byte a position (seq_masks.h says what it holds) in the workspace, read beside the data
// vectors; where rows may start inside a vector, also into copies shifted for each phase, so that
// a vector's masks are one aligned load (the clean iteration 273 -> 258 SASS instructions, bf16
// width 4 SiLU; H200, bf16 (8, 4096, 4096), two builds alternated: 8 sequences a row 244.1 ->
// 242.0 us, 8 unaligned 237.1 -> 233.9, one a row 224.4 -> 222.0, fp32 unchanged;
// benchmarks/NOTES.md, thirty-fifth session). The ids themselves (4 bytes a position, plus those of
// the x halo) held next to 16-byte vectors made the kernel spill; a byte a position needs no halo
// of its own (it already says which positions before it share its sequence) and a quarter of the
// registers. An iteration whose vectors each lie inside one sequence (most of them, with
// sequences of more than a few vectors: also those where a sequence starts on a vector's first
// position) is computed as without seq_idx except that the x and dy halo elements from another
// sequence are zeros, after one warp vote; the others with every tap masked. (Before, only
// iterations inside one sequence were spared the masks, so a sequence start cost two masked
// iterations, the one holding it and the one whose last lane's dy halo crosses it: at 8
// sequences a row of 4096, 14 of a row's 16. H200, bf16 (8, 4096, 4096), two builds alternated:
// 8 sequences a row 240.6-241.9 -> 221.5-222.0 us against 206.5-207.6 without seq_idx, 64 a row
// 245.1-245.6 -> 221.6-222.0, one a row 221.8-222.6 -> 221.6-222.2, a sequence every 61 positions
// (starts mid-vector) 245.0-247.4 -> 248.0-248.8, fp16 (4, 5376, 8192) 8 a row 298-313 ->
// 282-291, deterministic 8 a row 244.9-246.8 -> 225.7-225.8; benchmarks/NOTES.md, thirty-sixth
// session.) On NVIDIA the walk overlaps the mask kernel (launch_overlapping): its setup and weight
// loads run during the mask kernel's tail, and it waits for the masks just before its first mask
// read (H200, bf16 (8, 4096, 4096), 8 a row, eager, two builds alternated: 221.5-222.3 -> 219.6-220.6
// us against 206.4-207.4 without; (2, 8192, 1024) 42.0-44.4 -> 40.7-41.2; thirty-eighth session).
//
// The hot loop has no edge code: the iterations whose vectors are all whole (for every lane, so the
// choice is warp-uniform around the shuffles) run with the ring and plain vector accesses; the few
// others (a row's first and last vectors when not whole) run one at a time through the
// element-wise paths. Edge code in the loop cost registers
// and, on NVIDIA, register saves around the out-of-line edge calls.
#include <algorithm>
#include <climits>
#include <type_traits>

#include "bwd_common.h"
#include "causal_conv1d/dispatch.h"

namespace causal_conv1d::gpu {

namespace {

// Elements per vector on the vector path (1 otherwise), from x's element size: 16 bytes. 4
// elements for 16-bit types was measured slower on the H200 than 8 (44% of copy against 55% at the
// same occupancy, bf16 (8, 4096, 4096)). It names the kernel instantiation the host launches, so it
// cannot differ between arch families.
__host__ __device__ constexpr int bwd_cf_vec(int esize) { return 16 / esize; }

// The states pass's vector loads (bwd_cf_states_kernel): vectors covering a row's first (and
// last) 2 (width - 1) positions, or run + width - 1 where it stores runs of run elements.
template <int kWidth>
__host__ __device__ constexpr int states_vectors(int esize, int run = 0) {
  const int span = run > 0 ? run + kWidth - 1 : 2 * (kWidth - 1);
  return (span + bwd_cf_vec(esize) - 1) / bwd_cf_vec(esize);
}

// The states pass's head part (see bwd_cf_states_kernel) has work when there are initial states
// or dinitial_states, or dfinal_states reach the row's first H positions (L < 2H); its tail part
// when there are dfinal_states (on the host: bwd_cf_states_parts).
__host__ __device__ inline bool states_head_needed(const BwdParams& p, int halo) {
  return p.f.initial_states != nullptr || p.dinitial_states != nullptr ||
         (p.dfinal_states != nullptr && p.f.seqlen < 2 * halo);
}

// dx of a vector that is not one whole store: positions outside [0, L) are dropped. Out of line on
// NVIDIA (CC_EDGE_FN); scalars only; positions tested and addressed through row_span.
template <typename T, int kV, int kHalo>
CC_EDGE_FN void store_dx_edge(T* dx, int64_t L, int64_t q0, Floats<kV> o) {
  const RowSpan s = row_span<kV, kHalo>(L, q0);
  T* pdx = dx + q0;
  static_for<kV>([&](auto e) {
    constexpr int kE = decltype(e)::value;
    if (kE >= s.lo && kE < s.hi) pdx[kE] = from_float<T>(o.v[e]);
  });
}

// A Slot member a kernel instantiation does not hold.
struct Nothing {};

// Weights and bias (0 without one) of channel c, as floats: the walk's and the states pass's.
template <int kWidth>
__device__ __forceinline__ void load_channel_weights(const FwdParams& f, int64_t c, float (&w)[kWidth], float& bias) {
  bias = 0.0f;
  with_dtype(f.w_dtype, [&](auto tag) {
    using WT = typename decltype(tag)::type;
    const WT* wp = static_cast<const WT*>(f.weight) + c * f.weight_c_stride;
    static_for<kWidth>([&](auto k) { w[k] = to_float(wp[k * f.weight_w_stride]); });
    if (f.bias != nullptr) bias = to_float(static_cast<const WT*>(f.bias)[c * f.bias_stride]);
  });
}

// dy at a position from its dout and its kWidth inputs xs[0 .. kWidth) (bwd_common.h's formula).
template <int kWidth, bool kSilu>
__device__ __forceinline__ float dy_at(const float (&w)[kWidth], float bias, float gq, const float* xs) {
  float y = bias;
  static_for<kWidth>([&](auto k) { y = fmaf(w[k], xs[k], y); });
  return kSilu ? dsilu_times(y, gq) : gq;
}

template <typename T, int kWidth, int kV, bool kSilu, bool kSeqIdx>
__global__ void CC_LAUNCH_BOUNDS(with_seq_occupancy(bwd_cf_tuning(kTargetFamily), kSeqIdx))
    bwd_channel_first_kernel(BwdParams p, BwdCfGrid g) {
  constexpr BwdCfTuning kTune = bwd_cf_tuning(kTargetFamily);
  constexpr int kRing = kTune.ring;
  constexpr int kL2Ahead = checked_l2_ahead<kTune.l2_ahead>();
  constexpr int kHalo = kWidth - 1;
  constexpr int kStep = kWarpSize * kV;  // elements per warp iteration
  // seq_idx masks: kV bytes in words (byte e of a vector: word e / 4, bits 8 (e % 4) ..); the dy
  // halo's masks come from the next lane: one word when they are all in its first word (kV >= kHalo),
  // else one word a halo element (the element path).
  constexpr int kMWords = (kV + 3) / 4;
  constexpr int kMHalo = kV >= kHalo ? 1 : kHalo;
  constexpr bool kDxReach = kV >= 8;  // (own_dx)
  // Lanes whose x halo reaches past the previous lane's vector: they load it from memory.
  constexpr int kDMax = (kHalo + kV - 1) / kV;
  static_assert(kTune.threads % kWarpSize == 0, "a block must consist of whole warps");

  // Launched overlapping the kernel before it (launch_overlapping): the seq_idx kernels wait for the
  // mask kernel below, before their first mask read (their data's writers finished before it
  // let them start), the others here. Only then may the kernel after this one start (the states
  // pass: it waits for this grid before its first store, and its loads before that read what the
  // kernels before this one wrote).
  if constexpr (!kSeqIdx) {
    wait_prior_kernel();
    allow_next_kernel();
  }
  const FwdParams& f = p.f;
  const int lane = threadIdx.x % kWarpSize;
  // (warp_uniform: on AMD the strip's indices and what is computed from them sit in scalar registers.)
  const uint32_t strip_id = warp_uniform(blockIdx.x * (kTune.threads / kWarpSize) + threadIdx.x / kWarpSize);
  if (strip_id >= g.total_strips) return;  // whole warps leave together
  // (Without seq_idx by a multiply-high, no integer division: H200, (1, 4096, 256) in a CUDA graph
  // 5.2 -> 4.8-4.9 us in two runs, the other shapes within noise; the seq_idx kernels keep the
  // divisions, as their schedule moved with them: +3.9% at (8, 4096, 4096).)
  const uint32_t row = kSeqIdx ? strip_id / g.strips_per_row : g.strips_div.div(strip_id);
  const uint32_t strip = strip_id - row * g.strips_per_row;
  const uint32_t b = kSeqIdx ? row / g.dim : g.dim_div.div(row), c = row - b * g.dim;
  const int64_t L = f.seqlen;
  const T* x = static_cast<const T*>(f.x) + int64_t(b) * f.x_batch_stride + int64_t(c) * f.x_c_stride;
  const T* dout = static_cast<const T*>(p.dout) + int64_t(b) * p.dout_batch_stride + int64_t(c) * p.dout_c_stride;
  T* dx = static_cast<T*>(p.dx) + int64_t(b) * p.dx_batch_stride + int64_t(c) * p.dx_c_stride;
  const uint8_t* masks = kSeqIdx ? seq_masks_of(p, g.ws, b) : nullptr;
  // (The states are the second pass's: here the inputs before the row are zeros.)
  auto input = [&](int64_t q) { return row_input<T, kHalo>(x, L, nullptr, 0, q); };
  auto mask_at = [&](int64_t q) -> uint32_t { return q >= 0 && q < L ? masks[q] : 0u; };
  // The row's edges cost no masked iterations: before the row the inputs are zeros (the states pass
  // adds initial states) and past it the dy halo is, so the halo bits the masks clear there (no
  // position outside the row is in a sequence) zero what is zero anyway.

  const int m = misalignment<T, kV>(x);
  // The fast range's vectors start mo bytes into a kV-aligned mask vector (a batch row's masks start
  // aligned; its data rows may not): for mo > 0 their masks come from copy mo, shifted by kV - mo
  // (seq_masks.h), one aligned load a vector.
  const int mo = (kV - m) % kV;
  const int64_t row_vecs = (L + m + kV - 1) / kV;
  const int64_t vec0 = int64_t(strip) * g.iters * kWarpSize;           // the strip's first vector
  const int64_t left = (row_vecs - vec0 + kWarpSize - 1) / kWarpSize;  // iterations left in the row
  const int n_it = left <= 0 ? 0 : left < g.iters ? int(left) : g.iters;
  const int it_hi = n_it - 1;
  const int64_t qbase = (vec0 + lane) * kV - m;  // this lane's first position
  // Room left in the row after qbase, saturated to 32 bits (a strip spans a few thousand
  // elements): the vector of iteration `it` is whole when it lies inside [0, L).
  const int64_t room64 = L - qbase;
  const int32_t room = room64 > INT_MAX ? INT_MAX : int32_t(room64);
  auto inside = [&](int it) { return it > 0 || (it == 0 && qbase >= 0); };
  auto whole = [&](int it) { return inside(it) && it * kStep + kV <= room; };
  // This lane's vectors of iteration 0: on NVIDIA the fast range of the kernels without seq_idx
  // addresses iteration it as these + it * kStep (sm_90, bf16 width 4 SiLU: its loop 235 -> 231 SASS
  // instructions, ptxas no longer rebuilding each address from the row's offset; H200, two builds
  // alternated: bf16 (1, 8192, 16384) / (4, 5376, 8192) / (8, 4096, 4096) 208.0-208.4 / 266.9-267.3
  // / 207.1-208.9 -> 206.4-206.7 / 265.2-266.0 / 205.3-206.8 us, fp16 (4, 5376, 8192) 267.1-267.7
  // -> 264.9-265.5, fp32 unchanged; the seq_idx kernels, so addressed, spilled into their loop).
  // AMD addresses a vector from the row's scalar base and a 32-bit offset already, and the pointers'
  // registers made gfx942's 16-bit width-4 kernels spill at their 5 waves/SIMD.
  constexpr bool kNvidia = kTargetFamily == ArchFamily::kNvidia;
  constexpr bool kLaneAddr = kNvidia && !kSeqIdx;
  const T* x_lane = x + qbase;
  const T* dout_lane = dout + qbase;
  T* dx_lane = dx + qbase;

  // The fast range [lo_fast, hi_fast]: the iterations where every lane's vector is whole, its dx
  // one store and lane 0's halo inside the row or zeros before it (bounds from lane 0's start and
  // the last lane's room, so the whole warp agrees). On NVIDIA the lines of its first l2_ahead
  // iterations are asked of L2 here, before the weights are loaded and converted: the strip's first
  // data request then does not wait for the weights (a 1024-position row is a strip of 4 iterations,
  // so that wait was one memory latency in 4).
  int lo_fast = 0, hi_fast = -1, n_fast = 0;
  auto set_fast_range = [&] {
    const int64_t qbase0 = vec0 * kV - m;
    const int64_t room_last = L - (qbase0 + int64_t(kWarpSize - 1) * kV);
    hi_fast = room_last < kV ? -1 : int(min((room_last - kV) / kStep, int64_t(it_hi)));
    lo_fast = qbase0 >= kHalo || qbase0 == 0 ? 0 : 1;
    if (lo_fast > hi_fast) lo_fast = 0, hi_fast = -1;  // no fast range
    n_fast = hi_fast - lo_fast + 1;
  };
  // The lines of iteration `it` asked of L2 (the x halo of lane 0 is in the iteration before's
  // last line, which that iteration's prefetch covers).
  auto prefetch = [&](int it) {
    const int64_t q0 = qbase + int64_t(it) * kStep;
    prefetch_l2(x + q0);
    prefetch_l2(dout + q0);
  };
  // (The seq_idx kernels take both after their setup, as before: here they made those kernels
  // 2-3% slower at (8, 4096, 4096) with 8 sequences a row.)
  auto prefetch_run_up = [&] {
    if constexpr (kL2Ahead > 0) {
      for (int j = kRing; j < kRing + kL2Ahead && j < n_fast; ++j) prefetch(hi_fast - j);
    }
  };
  if constexpr (!kSeqIdx) {
    set_fast_range();
    prefetch_run_up();
  }

  float w[kWidth], bias;
  load_channel_weights<kWidth>(f, c, w, bias);
  // dy at a position from its dout and its kWidth inputs (already masked by seq_idx).
  auto dy_from = [&](float gq, const float (&xs)[kWidth]) { return dy_at<kWidth, kSilu>(w, bias, gq, xs); };

  // What one iteration loads: x and dout vectors, the x halo of lanes < kDMax (element i at
  // position q0 - kHalo + i; kept as loaded until the iteration is computed: converting or
  // packing it at load time would make the warp wait for the load there, defeating the ring),
  // and the seq_idx masks of the vector.
  // kBefore (a vector at least as long as the halo): lane 0 loads the whole vector before its own
  // (one access; its last kHalo elements are the halo) instead of the halo element by element,
  // each with its own bounds test. The seq_idx kernels too (nvcc: nothing spilled in the loop; what
  // their 64 registers spill lies before and after it, as without kBefore): H200,
  // bf16 (8, 4096, 4096), the two builds alternated in one run, 8 sequences a row 267.6-267.9 ->
  // 259.4-259.9 us, 8 unaligned 253.1-253.8 -> 244.8-245.3, one a row 223.7-224.5 -> 221.2-221.9;
  // fp32 and no seq_idx unchanged (benchmarks/NOTES.md, thirty-third session).
  // On NVIDIA the backward is bound by issue and latency together (ncu, H200, (4, 5376, 8192): about
  // 2.6 of an SM's 4 issue slots a cycle busy at 32 resident warps and 92% of copy bandwidth;
  // instructions removed give back about half their share of the time): with the word shuffles
  // below, dsilu_times and the prefetch addressed from the load (load_fast), the bf16 width-4
  // loop went from 261 to 235 SASS instructions; H200 in a CUDA graph, bf16 (1, 8192, 16384) /
  // (4, 5376, 8192) / (8, 4096, 4096) 211.2 / 272.9 / 208.0 -> 206.5 / 267.5 / 205.4 us, fp16
  // (4, 5376, 8192) 291.1 -> 272.8 (benchmarks/NOTES.md, twenty-seventh session).
  constexpr bool kBefore = kV >= kHalo;
  struct Slot {
    Packed<T, kV> x, g;
    T hx[kBefore ? 1 : kHalo];
    std::conditional_t<kBefore, Packed<T, kV>, Nothing> before;
    uint32_t mk[kMWords];  // the kV mask bytes from q0
  };
  // The masks of the vector at q0: on the fast range (vector path) one aligned load from the
  // row's copy for its phase, addressed from the row's own pointer (a pointer of its own for the
  // copy was spilled, two local loads an iteration); else element by element.
  auto load_masks = [&](Slot& s, int64_t q0, auto fast) {
    auto bytewise = [&] {
      static_for<kMWords>([&](auto j) { s.mk[j] = 0; });
      static_for<kV>([&](auto e) { s.mk[e / 4] |= mask_at(q0 + e) << (8 * (e % 4)); });
    };
    if constexpr (!kSeqIdx) {
      return;
    } else if constexpr (kV < 4) {
      bytewise();
    } else if constexpr (decltype(fast)::value) {
      load_run<kV>(masks + (q0 + (mo == 0 ? 0 : int64_t(mo) * p.f.batch * g.ws.mask_row + kV - mo)), s.mk);
    } else {
      bytewise();
    }
  };
  // Any iteration, element by element where a vector is not whole.
  auto load = [&](int it, Slot& s) CC_INLINE_LAMBDA {
    const int64_t q0 = qbase + int64_t(it) * kStep;
    const bool full = whole(it);
    if (full) {
      s.x = load_packed<T, kV>(x + q0);
      s.g = load_packed<T, kV>(dout + q0);
    } else {
      s.x = load_edge<T, kV, kHalo>(x, L, nullptr, 0, q0);
      s.g = load_edge<T, kV, kHalo>(dout, L, nullptr, 0, q0);
    }
    if constexpr (kBefore) {
      static_for<Packed<T, kV>::kWords>([&](auto j) { s.before.w[j] = 0; });
      if (lane == 0) {
        row_inputs<T, kHalo, kHalo>(x, L, nullptr, 0, q0 - kHalo, [&](auto i, T v) {
          constexpr int kE = kV - kHalo + decltype(i)::value;
          s.before.w[kE / Packed<T, kV>::kPerWord] |= elem_word<T, kE % Packed<T, kV>::kPerWord>(v);
        });
      }
    } else {
      static_for<kHalo>([&](auto i) { s.hx[i] = T{}; });
      if (lane < kDMax) {
        row_inputs<T, kHalo, kHalo>(x, L, nullptr, 0, q0 - kHalo, [&](auto i, T v) { s.hx[i] = v; });
      }
    }
    load_masks(s, q0, BoolC<false>{});
  };
  // An iteration of the fast range: every vector whole; the halo inside the row, or before an
  // aligned row (zeros).
  // pf: also ask L2 for the lines of iteration it - l2_ahead (addressed from this iteration's).
  auto load_fast = [&](int it, Slot& s, bool pf) CC_INLINE_LAMBDA {
    const int64_t q0 = qbase + int64_t(it) * kStep;
    const T* xq = kLaneAddr ? x_lane + it * kStep : x + q0;
    const T* gq = kLaneAddr ? dout_lane + it * kStep : dout + q0;
    if constexpr (kL2Ahead > 0) {
      if (pf) {
        prefetch_l2(xq - kL2Ahead * kStep);
        prefetch_l2(gq - kL2Ahead * kStep);
      }
    }
    s.x = load_packed<T, kV>(xq);
    s.g = load_packed<T, kV>(gq);
    if constexpr (kBefore) {
      // (Lane 0's vector is the row's first, at 0, or at least kV on: the fast range's vectors
      // are whole.)
      static_for<Packed<T, kV>::kWords>([&](auto j) { s.before.w[j] = 0; });
      // (The test on it and qbase, not q0 > 0: 2 instructions fewer on sm_90, 2 VGPRs more on AMD.)
      if (lane == 0 && (kNvidia ? it != 0 || qbase != 0 : q0 > 0)) s.before = load_packed<T, kV>(xq - kV);
    } else {
      static_for<kHalo>([&](auto i) { s.hx[i] = T{}; });
      if (lane < kDMax) {
        static_for<kHalo>([&](auto i) {
          if (q0 - kHalo + i >= 0) s.hx[i] = x[q0 - kHalo + i];
        });
      }
    }
    load_masks(s, q0, BoolC<true>{});
  };

  // The dy halo after each lane's vector: element i (position q0 + kV + i) is element i % kV of
  // the lane kD = i / kV + 1 ahead; lanes past the warp's end take it from carry[i], what they
  // received in the previous iteration. Before the walk: the dy just past the strip, from memory.
  // The masks of the same positions: carry_mk[0] byte i (kV >= kHalo: the next lane's first
  // word), else carry_mk[i].
  // seq_idx: the mask kernel before this one (launched to overlap it on NVIDIA) has written the
  // masks once this returns; the setup above ran during its tail.
  if constexpr (kSeqIdx) {
    wait_prior_kernel();
    allow_next_kernel();
  }
  float carry[kHalo];
  uint32_t carry_mk[kMHalo] = {};
  static_for<kHalo>([&](auto i) {
    constexpr int kD = decltype(i)::value / kV + 1;
    carry[i] = 0.0f;
    const int64_t q = qbase + int64_t(it_hi) * kStep + kV + i;
    if constexpr (kSeqIdx) carry_mk[kMHalo == 1 ? 0 : i] |= mask_at(q) << (kMHalo == 1 ? 8 * i : 0);
    if (lane + kD >= kWarpSize && q >= 0 && q < L) {
      const uint32_t mq = kSeqIdx ? mask_at(q) : 0u;
      float xs[kWidth];
      static_for<kWidth>([&](auto k) {
        constexpr int kBack = kHalo - decltype(k)::value;  // taps before q: kept iff bit kBack - 1
        xs[k] = to_float(input(q - kBack));
        if constexpr (kSeqIdx && kBack > 0) {
          if (!((mq >> (kBack - 1)) & 1u)) xs[k] = 0.0f;
        }
      });
      carry[i] = kSeqIdx && (mq & kSeqPadBit) ? 0.0f : dy_from(to_float(dout[q]), xs);
    }
  });

  float acc[kWidth + 1] = {};  // dweight[0..W-1], dbias terms of this lane's positions
  // kEdge: the iteration's dx may not be one whole store (store_dx_edge takes floats); a separate
  // instantiation, so the fast path holds only the packed result. The choice is warp-uniform
  // (the shuffles inside need every lane).
  // kMasked: seq_idx masks applied to every tap (a kSeqIdx kernel's iterations whose vectors each
  // lie inside one sequence take kHaloMasked instead, below); mw: the masks of the own positions.
  // (mw is taken as `const auto&`: spelled as an array reference, it crashes nvcc 13's front end.)
  // kHaloMasked (seq_idx, unmasked otherwise): every lane's vector lies inside one sequence and holds
  // no padding token, so only its halos can cross a sequence start: the x halo elements not in the
  // vector's sequence (hm bit kHalo - 1 - i clear for element i, position q0 - kHalo + i) and the
  // dy halo elements not in it (bit 8 + i clear for q0 + kV + i) are taken as zeros.
  auto compute = [&](auto edge, auto masked, auto halo, int it, const Slot& cur, const auto& mw,
                     uint32_t hm) CC_INLINE_LAMBDA {
    constexpr bool kEdge = decltype(edge)::value;
    constexpr bool kMasked = decltype(masked)::value;
    constexpr bool kHaloMasked = decltype(halo)::value;
    // The x halo (positions q0 - kHalo .. q0 - 1): from the lane kD back, or loaded (lanes < kD).
    // kBefore: the last kHalo elements of the previous lane's vector (lane 0: of the one it
    // loaded), each word holding some of them shuffled once.
    float hal[kHalo];
    constexpr int kPer = Packed<T, kV>::kPerWord;
    if constexpr (kBefore) {
      constexpr int kW0 = (kV - kHalo) / kPer;  // the first word holding a halo element
      uint32_t prev[Packed<T, kV>::kWords];
      static_for<Packed<T, kV>::kWords - kW0>([&](auto j) {
        constexpr int kJ = kW0 + decltype(j)::value;
        const uint32_t got = shfl_up(cur.x.w[kJ], 1, kWarpSize);
        prev[kJ] = lane == 0 ? cur.before.w[kJ] : got;
      });
      static_for<kHalo>([&](auto i) {
        constexpr int kSrc = kV - kHalo + decltype(i)::value;
        hal[i] = word_elem<T, kSrc % kPer>(prev[kSrc / kPer]);
      });
    } else {
      static_for<kHalo>([&](auto i) {
        constexpr int kBack = kHalo - decltype(i)::value;
        constexpr int kD = (kBack + kV - 1) / kV;
        constexpr int kSrc = kD * kV - kBack;
        const uint32_t got = shfl_up(cur.x.w[kSrc / kPer], kD, kWarpSize);
        hal[i] = lane < kD ? to_float(cur.hx[i]) : word_elem<T, kSrc % kPer>(got);
      });
    }
    if constexpr (kHaloMasked) {
      static_for<kHalo>([&](auto i) {
        if (((hm >> (kHalo - 1 - decltype(i)::value)) & 1u) == 0u) hal[i] = 0.0f;
      });
    }
    float dy[kV], dya[kHalo];   // dy at the own positions and at the kHalo after them
    uint32_t mka[kMHalo] = {};  // the masks of the kHalo positions after them (as carry_mk)
    // x at position q0 + r, r in [-kHalo, kV).
    auto xat = [&](auto r) -> float {
      constexpr int kR = decltype(r)::value;
      if constexpr (kR < 0) {
        return hal[kR + kHalo];
      } else {
        return packed_elem<T, kR>(cur.x);
      }
    };
    // Bit kBit of the mask of position q0 + r, r in [0, kV + kHalo) (past the vector: after the dy
    // halo is known).
    auto mbit = [&](auto r, auto bit) -> bool {
      constexpr int kR = decltype(r)::value, kBit = decltype(bit)::value;
      if constexpr (kR < kV) {
        return (mw[kR / 4] >> (8 * (kR % 4) + kBit)) & 1u;
      } else if constexpr (kMHalo == 1) {
        return (mka[0] >> (8 * (kR - kV) + kBit)) & 1u;
      } else {
        return (mka[kR - kV] >> kBit) & 1u;
      }
    };
    // dy at own position e, and its dweight/dbias terms. Masked (kMasked), a tap whose bit is clear
    // is left out of y and of its dweight term: FMAs under the (position, tap) pair's predicate
    // instead of a select of the input (own_dx likewise for its dy terms), each sum starting from
    // the term that needs no predicate. The bf16 width-4 masked iteration went from 369 to 345 SASS
    // instructions (sm_90; the clean one 272-273); H200, bf16 (8, 4096, 4096), the two builds
    // alternated in one run: 8 sequences a row 259.2-259.7 -> 250.5-250.8 us, 8 unaligned
    // 244.1-244.8 -> 240.5-240.7, fp32 8 a row 407.5-412.2 -> 398.6-401.0, one a row 221.5-221.7 ->
    // 223.2-224.0 (+1%: the loop's schedule, not its count); gfx1201: the seq_idx kernels 111 -> 90
    // VGPRs, 12 -> 16 waves/SIMD (benchmarks/NOTES.md, thirty-fourth session).
    auto own_dy = [&](auto e) {
      constexpr int kE = decltype(e)::value;
      float xs[kWidth];
      bool keep[kWidth];
      static_for<kWidth>([&](auto k) {
        constexpr int kR = kE - kHalo + decltype(k)::value;
        constexpr int kBack = kE - kR;  // a tap kBack positions before: kept iff bit kBack - 1
        xs[k] = xat(Idx<kR>{});
        if constexpr (kMasked && kBack > 0) {
          keep[k] = mbit(Idx<kE>{}, Idx<kBack - 1>{});
        } else {
          keep[k] = true;
        }
      });
      float d;
      if constexpr (kMasked) {
        float y = fmaf(w[kHalo], xs[kHalo], bias);  // the position's own tap first: no predicate
        static_for<kHalo>([&](auto k) {
          if (keep[k]) y = fmaf(w[k], xs[k], y);
        });
        d = kSilu ? dsilu_times(y, packed_elem<T, kE>(cur.g)) : packed_elem<T, kE>(cur.g);
        if (mbit(Idx<kE>{}, Idx<7>{})) d = 0.0f;  // padding token (kSeqPadBit): constant output
      } else {
        d = dy_from(packed_elem<T, kE>(cur.g), xs);
      }
      dy[kE] = d;
      acc[kWidth] += d;
      static_for<kWidth>([&](auto k) {
        if (keep[k]) acc[k] = fmaf(d, xs[k], acc[k]);
      });
    };
    // dx at own position e: sum over the outputs e + kHalo - k that read it (masked: its own
    // output's term first, which needs no predicate). Masked, whether dy[j] reaches dx[e] is bit
    // j - e - 1 of j's mask and bit kSeqReachShift + j - e - 1 of e's (seq_masks.h). kDxReach
    // tests e's: with j's, ptxas shares the tests with own_dy's and keeps their predicates in
    // register bits in between (two instructions to save one, one to restore it). sm_90, width-4
    // SiLU masked iteration: 16-bit 345 -> 327 SASS instructions with e's (clean 273 either way);
    // fp32 the other way, 189 with j's against 212. H200, bf16 (8, 4096, 4096), the two builds
    // alternated in one run: 8 sequences a row 250.8-251.3 -> 243.2-243.6 us, 8 unaligned
    // 240.5-241.9 -> 236.2-237.8, one a row 223.2-223.9 -> 223.7-224.5 (benchmarks/NOTES.md,
    // thirty-fourth session).
    PackedBuilder<T, kV> res;
    float o[kEdge ? kV : 1];
    auto own_dx = [&](auto e) {
      constexpr int kE = decltype(e)::value;
      auto dy_of = [&](auto j) {
        constexpr int kJ = decltype(j)::value;
        if constexpr (kJ < kV) {
          return dy[kJ];
        } else {
          return dya[kJ - kV];
        }
      };
      float sum = kMasked ? w[kHalo] * dy[kE] : 0.0f;
      static_for<kMasked ? kHalo : kWidth>([&](auto k) {
        constexpr int kJ = kE + kHalo - decltype(k)::value;
        if constexpr (kMasked) {  // dy[kJ] in this position's sequence (kDxReach: above)
          const bool in =
              kDxReach ? mbit(Idx<kE>{}, Idx<kSeqReachShift + kJ - kE - 1>{}) : mbit(Idx<kJ>{}, Idx<kJ - kE - 1>{});
          if (in) {
            sum = fmaf(w[k], dy_of(Idx<kJ>{}), sum);
          }
        } else {
          sum = fmaf(w[k], dy_of(Idx<kJ>{}), sum);
        }
      });
      if constexpr (kEdge) {
        o[kE] = sum;
      } else {
        res.template set<kE>(sum);
      }
    };
    // Streamed so that few dy are live at once: first the dy the previous lane needs (its dy
    // halo), exchanged; then dy[e] with dx[e - kHalo] behind it; then the dx that need the halo.
    constexpr int kFirst = kHalo < kV ? kHalo : kV;
    static_for<kFirst>([&](auto e) { own_dy(e); });
    static_for<kHalo>([&](auto i) {
      // Element i (position q0 + kV + i) is element i % kV of the lane kD = i / kV + 1 ahead;
      // lanes past the warp's end take carry[i], received in the previous iteration.
      constexpr int kD = decltype(i)::value / kV + 1;
      constexpr int kSrc = decltype(i)::value % kV;
      const int src_lane = (lane + kD) % kWarpSize;
      const bool wrap = lane + kD >= kWarpSize;
      const float got = shfl(dy[kSrc], src_lane, kWarpSize);
      dya[i] = wrap ? carry[i] : got;
      carry[i] = got;
      if constexpr (kHaloMasked) {
        if (((hm >> (8 + decltype(i)::value)) & 1u) == 0u) dya[i] = 0.0f;
      }
      // Their masks: the next lane's first word (kV >= kHalo), or byte kSrc of the lane kD ahead.
      if constexpr (kSeqIdx && (kMHalo > 1 || decltype(i)::value == 0)) {
        constexpr int kM = kMHalo == 1 ? 0 : decltype(i)::value;
        const uint32_t got_mk = shfl(mw[kSrc / 4], src_lane, kWarpSize) >> (kMHalo == 1 ? 0 : 8 * (kSrc % 4));
        mka[kM] = wrap ? carry_mk[kM] : got_mk;
        carry_mk[kM] = got_mk;
      }
    });
    static_for<kV - kFirst>([&](auto j) {
      constexpr int kE = kFirst + decltype(j)::value;
      own_dy(Idx<kE>{});
      if constexpr (kE - kHalo >= 0) own_dx(Idx<kE - kHalo>{});
    });
    static_for<kV>([&](auto e) {
      if constexpr (decltype(e)::value + kHalo >= kV) own_dx(e);
    });

    const int64_t q0 = qbase + int64_t(it) * kStep;
    if constexpr (!kEdge) {
      if constexpr (kV > 1) {
        store_packed<output_hint(kTune.nt_store)>(kLaneAddr ? dx_lane + it * kStep : dx + q0, res.out);
      } else {
        dx[q0] = packed_raw<T, 0>(res.out);
      }
    } else {
      Floats<kV> ov;
      static_for<kV>([&](auto e) { ov.v[e] = o[e]; });
      store_dx_edge<T, kV, kHalo>(dx, L, q0, ov);
    }
  };
  // An iteration: its masks taken out of the slot, then computed; with seq_idx, with only the
  // halos masked when every lane's vector lies inside one sequence and holds no padding token (the
  // common case, a sequence start on a vector's first position included: at the bench's 8
  // sequences of 512 a row, every iteration), else with every tap masked. The choice is
  // warp-uniform (the shuffles need every lane).
  auto process = [&](auto edge, int it, const Slot& cur) CC_INLINE_LAMBDA {
    [[maybe_unused]] constexpr bool kEdge = decltype(edge)::value;
    uint32_t mw[kMWords] = {};
    if constexpr (!kSeqIdx) {
      compute(edge, BoolC<false>{}, BoolC<false>{}, it, cur, mw, 0u);
    } else {
      static_for<kMWords>([&](auto j) { mw[j] = cur.mk[j]; });
      if constexpr (!kEdge) {
        // One sequence: no padding bit, and bit 0 (the position before in its sequence) set at
        // every position but the first. The halos' bits: the first position's taps before the
        // vector, the last one's reach after it (seq_masks.h).
        bool simple = true;
        static_for<kMWords>([&](auto j) {
          constexpr int kJ = decltype(j)::value;
          constexpr int kNb = kV - 4 * kJ < 4 ? kV - 4 * kJ : 4;  // mask bytes in this word
          constexpr uint32_t kAll = kNb == 4 ? 0xffffffffu : (1u << (8 * kNb)) - 1u;
          constexpr uint32_t kLink = 0x01010101u & kAll & (kJ == 0 ? ~0xffu : ~0u);
          constexpr uint32_t kTest = (kSeqPadBit * 0x01010101u & kAll) | kLink;
          simple &= (mw[kJ] & kTest) == kLink;
        });
        constexpr uint32_t kHaloBits = (1u << kHalo) - 1u;
        constexpr int kLastShift = 8 * ((kV - 1) % 4) + kSeqReachShift;
        const uint32_t hm = (mw[0] & kHaloBits) | ((mw[(kV - 1) / 4] >> kLastShift) & kHaloBits) << 8;
        if (warp_all(simple)) {
          compute(edge, BoolC<false>{}, BoolC<true>{}, it, cur, mw, hm);
          return;
        }
      }
      compute(edge, BoolC<true>{}, BoolC<false>{}, it, cur, mw, 0u);
    }
  };

  // The walk, from it_hi down to 0, over the fast range (above) with `ring` iterations loaded
  // ahead and no edge code; the iterations above it (a row's last) and below it (a misaligned
  // row's first) run one at a time through the edge paths.
  if constexpr (kSeqIdx) set_fast_range();
  auto generic = [&](int from, int to) CC_INLINE_LAMBDA {
    for (int it = from; it >= to; --it) {
      Slot cur;
      load(it, cur);
      process(BoolC<true>{}, it, cur);
    }
  };
  generic(it_hi, hi_fast + 1);
  {
    // kRing + 1 slots used in turn, the loop unrolled that many times: slot indices stay
    // compile-time constants and no slot is copied (a ring of kRing slots copies the one being
    // computed out of the way of its reload, 10 moves an iteration for 16-bit).
    constexpr int kSlots = kRing + 1;
    Slot ring[kSlots];
    if constexpr (kSeqIdx) prefetch_run_up();
    static_for<kRing>([&](auto j) {
      if (j < n_fast) load_fast(hi_fast - j, ring[j], false);
    });
    for (int r0 = 0; r0 < n_fast; r0 += kSlots) {
      static_for<kSlots>([&](auto j) {
        const int r = r0 + j;
        if (r >= n_fast) return;  // warp-uniform
        if (r + kRing < n_fast) {
          load_fast(hi_fast - r - kRing, ring[(j + kRing) % kSlots], r + kRing + kL2Ahead < n_fast);
        }
        process(BoolC<false>{}, hi_fast - r, ring[j]);
      });
    }
  }
  generic(lo_fast - 1, 0);

  // One partial per strip: the warp's sums (a fixed butterfly order, so deterministic).
  static_for<kWidth + 1>([&](auto k) {
    for (int off = kWarpSize / 2; off > 0; off /= 2) acc[k] += shfl_xor(acc[k], off, kWarpSize);
  });
  if (lane == 0) emit_partial<kWidth>(p, int64_t(b) * g.strips_per_row + strip, c, acc);
}

// The states pass (see the top of the file), after the walk, which took the inputs before a row
// as zeros and added nothing to the row's last dx. With H = W - 1, for a (batch, channel) row:
//  - the head part recomputes dy at positions 0 .. 2H - 1 with the initial states, stores the dx
//    of positions -H .. H - 1 (those before the row are dinitial_states), each summed in the walk's
//    order, and adds the difference the initial states make to the dweight/dbias terms of
//    positions 0 .. H - 1 to the row's strip-0 partial (a stream-ordered add to its slot in
//    deterministic mode, so still the same bits every run);
//  - the tail part recomputes dy at L - H .. L - 1 and stores the dx of max(H, L - H) .. L - 1
//    plus dfinal_states.
// kRun (with kVec, where the rows allow it: bwd_cf_tuning's states_run): each part stores a whole
// run of states_run bytes of dx instead, positions 0 .. R - 1 or L - R .. L - 1, recomputing the
// dy the run's other positions need (the walk's values, which they overwrite): at (8, 4096, 4096)
// bf16 the W - 1-element stores cost the call ~6.5 us, whole runs ~3 (tuning.h).
// A thread takes one part of one row (grid y: the parts a call needs; neighbouring threads take
// neighbouring channels, so the states' loads and stores coalesce when they are channel-contiguous):
// the pass is a latency chain at a fifth of a wave (a thread's loads, then ~20 SiLU evaluations,
// then the stores; ncu, bf16 (8, 4096, 4096): 11.5 us, 10% achieved occupancy, 20% of DRAM
// bandwidth), so two shorter chains in twice the warps. All loads are issued before any use. kVec
// (rows of 16-byte vectors from an aligned start, L a multiple of the vector and at least the
// vectors a part needs): the head or tail of x and dout in whole vectors, 2 loads for 16-bit types
// instead of up to 15 scalar ones, each of which a warp spreads over 32 rows.
template <typename T, int kWidth, bool kSilu, bool kVec, bool kRun>
__global__ void __launch_bounds__(bwd_cf_tuning(kTargetFamily).states_threads)
    bwd_cf_states_kernel(BwdParams p, BwdCfGrid g) {
  constexpr int kH = kWidth - 1;
  static_assert(kVec || !kRun, "runs are stored from vector loads");
  constexpr BwdCfTuning kTune = bwd_cf_tuning(kTargetFamily);
  const FwdParams& f = p.f;
  // (batch * dim < 2^31: launch_bwd_channel_first refuses larger grids.)
  const uint32_t row = blockIdx.x * blockDim.x + threadIdx.x;
  if (int64_t(row) >= int64_t(f.batch) * f.dim) return;
  const uint32_t b = g.dim_div.div(row), c = row - b * g.dim;
  const int64_t L = f.seqlen;
  const T* x = static_cast<const T*>(f.x) + b * f.x_batch_stride + c * f.x_c_stride;
  const T* dout = static_cast<const T*>(p.dout) + b * p.dout_batch_stride + c * p.dout_c_stride;
  T* dx = static_cast<T*>(p.dx) + b * p.dx_batch_stride + c * p.dx_c_stride;
  const T* init = f.initial_states == nullptr
                      ? nullptr
                      : static_cast<const T*>(f.initial_states) + b * f.init_batch_stride + c * f.init_c_stride;
  T* dinit = p.dinitial_states == nullptr
                 ? nullptr
                 : static_cast<T*>(p.dinitial_states) + b * p.dinit_batch_stride + c * p.dinit_c_stride;
  const T* dfin = p.dfinal_states == nullptr
                      ? nullptr
                      : static_cast<const T*>(p.dfinal_states) + b * p.dfinal_batch_stride + c * p.dfinal_c_stride;
  // The parts: bwd_cf_states_parts (the host's grid) decides them the same way.
  const bool tail = gridDim.y == 2 ? blockIdx.y == 1 : !states_head_needed(p, kH);

  float w[kWidth], bias;
  load_channel_weights<kWidth>(f, c, w, bias);
  auto xin = [&](int64_t q) { return to_float(row_input<T, kH>(x, L, init, f.init_l_stride, q)); };
  auto gin = [&](int64_t q) { return q >= 0 && q < L ? to_float(dout[q]) : 0.0f; };
  auto dy_of = [&](float gq, const float* xs) { return dy_at<kWidth, kSilu>(w, bias, gq, xs); };
  // dfinal_states at the last H positions: the tail's, and the head's where they overlap (L < 2H).
  float fin[kH];
  const bool with_fin = dfin != nullptr && (tail || L < 2 * kH);
  static_for<kH>([&](auto i) { fin[i] = with_fin ? to_float(dfin[i * p.dfinal_l_stride]) : 0.0f; });
  // dx at position q from the dy at q .. q + H (0 outside the row), plus dfinal_states at the last H.
  auto dx_at = [&](int64_t q, auto dy_pos) {
    float v = 0.0f;
    static_for<kWidth>([&](auto k) { v = fmaf(w[k], dy_pos(q + kH - int64_t(k)), v); });
    return q >= L - kH ? v + fin[q - (L - kH)] : v;
  };
  constexpr int kV = bwd_cf_vec(int(sizeof(T)));
  constexpr int kR = kRun ? kTune.states_run / int(sizeof(T)) : 0;  // dx elements of a run
  static_assert(kR % kV == 0 && kR >= 0, "a run is whole vectors");
  constexpr int kN = states_vectors<kWidth>(int(sizeof(T)), kR);  // vectors covering kD + H positions
  constexpr int kE = kN * kV;                                     // elements they hold
  constexpr int kD = kRun ? kR : kH;                              // the tail's dy positions, and the head's past its H
  // Stores dx at positions q0 .. q0 + kR - 1 as whole vectors.
  auto store_run = [&](int64_t q0, auto dx_of) {
    static_for<kR / kV>([&](auto j) {
      PackedBuilder<T, kV> v;
      static_for<kV>([&](auto e) { v.template set<decltype(e)::value>(dx_of(q0 + j * kV + e)); });
      store_packed<output_hint(kTune.nt_store)>(dx + q0 + j * kV, v.out);
    });
  };
  // Element i of kN vectors (a generic lambda: an array-reference parameter crashes nvcc 13).
  auto at = [&](const auto& v, auto i) {
    constexpr int kI = decltype(i)::value;
    return packed_elem<T, kI % kV>(v[kI / kV]);
  };

  if (tail) {
    // x at L - kD - H + i, dout at L - kD + i.
    float xt[kD + kH], gt[kD];
    if constexpr (kVec) {
      Packed<T, kV> xe[kN], ge[kN];  // the row's last kE elements
      static_for<kN>([&](auto j) {
        xe[j] = load_packed<T, kV>(x + L - kE + j * kV);
        ge[j] = load_packed<T, kV>(dout + L - kE + j * kV);
      });
      static_for<kD + kH>([&](auto i) { xt[i] = at(xe, Idx<kE - kD - kH + i>{}); });
      static_for<kD>([&](auto i) { gt[i] = at(ge, Idx<kE - kD + i>{}); });
    } else {
      static_for<kD + kH>([&](auto i) { xt[i] = xin(L - kD - kH + i); });
      static_for<kD>([&](auto i) { gt[i] = gin(L - kD + i); });
    }
    float dyt[kD];  // dy at L - kD + i (0 before the row)
    static_for<kD>([&](auto i) { dyt[i] = L - kD + i >= 0 ? dy_of(gt[i], xt + i) : 0.0f; });
    auto dy_tail = [&](int64_t pos) { return pos < L ? dyt[pos - (L - kD)] : 0.0f; };
    wait_prior_kernel();  // the walk's dx stores before these
    if constexpr (kRun) {
      store_run(L - kR, [&](int64_t q) { return dx_at(q, dy_tail); });
    } else {
      static_for<kH>([&](auto i) {
        const int64_t q = L - kH + i;
        if (q >= kH) dx[q] = from_float<T>(dx_at(q, dy_tail));
      });
    }
    return;
  }

  // Head: x at i - H (initial states before the row), dout at i.
  float xh[kD + 2 * kH], gh[kD + kH];
  if constexpr (kVec) {
    Packed<T, kV> xv[kN], gv[kN];  // the row's first kE elements
    static_for<kN>([&](auto j) {
      xv[j] = load_packed<T, kV>(x + j * kV);
      gv[j] = load_packed<T, kV>(dout + j * kV);
    });
    static_for<kH>([&](auto i) { xh[i] = xin(int64_t(i) - kH); });  // the initial states
    static_for<kD + kH>([&](auto i) {
      xh[kH + i] = at(xv, i);
      gh[i] = at(gv, i);
    });
  } else {
    static_for<kD + 2 * kH>([&](auto i) { xh[i] = xin(int64_t(i) - kH); });
    static_for<kD + kH>([&](auto i) { gh[i] = gin(i); });
  }
  float dyh[kD + kH];  // dy at positions i (0 past the row)
  static_for<kD + kH>([&](auto i) { dyh[i] = i < L ? dy_of(gh[i], xh + i) : 0.0f; });
  auto dy_head = [&](int64_t pos) { return pos >= 0 && pos < kD + kH ? dyh[pos] : 0.0f; };
  wait_prior_kernel();  // the walk's dx stores and workspace partials before these
  // Positions -H .. H - 1 (clipped to the row), or -H .. -1 and the run.
  static_for<kRun ? kH : 2 * kH>([&](auto i) {
    const int64_t q = int64_t(i) - kH;
    if (q >= L) return;
    const float v = dx_at(q, dy_head);
    if (q < 0) {
      if (dinit != nullptr) dinit[(q + kH) * p.dinit_l_stride] = from_float<T>(v);
    } else if (init != nullptr || with_fin) {
      dx[q] = from_float<T>(v);
    }
  });
  if constexpr (kRun) {
    if (init != nullptr || with_fin) store_run(0, [&](int64_t q) { return dx_at(q, dy_head); });
  }
  if (init == nullptr) return;
  // The initial states' part of the dweight/dbias terms of positions 0 .. H - 1.
  float acc[kWidth + 1] = {};
  static_for<kH>([&](auto i) {
    if (i >= L) return;
    float xz[kWidth];
    static_for<kWidth>([&](auto k) { xz[k] = i + k < kH ? 0.0f : xh[i + k]; });
    const float dt = dyh[i], dz = dy_of(gh[i], xz);
    acc[kWidth] += dt - dz;
    static_for<kWidth>([&](auto k) { acc[k] = fmaf(-dz, xz[k], fmaf(dt, xh[i + k], acc[k])); });
  });
  const int64_t slot = int64_t(b) * g.strips_per_row;
  if (p.deterministic) {
    float* dst = p.workspace + (slot * f.dim + c) * (kWidth + 1);
    static_for<kWidth + 1>([&](auto k) { dst[k] += acc[k]; });
  } else {
    emit_partial<kWidth>(p, slot, c, acc);
  }
}

}  // namespace

BwdCfGrid bwd_cf_grid(const BwdParams& p, const DeviceDesc& dev) {
  const FwdParams& f = p.f;
  const BwdCfTuning tune = bwd_cf_tuning(dev.family);
  const int es = dtype_size(f.x_dtype);
  // Vectors (bwd_cf_vec) when x, dout and dx rows share their alignment (one peel fits all
  // three).
  const int kv_full = bwd_cf_vec(es);
  const bool vec =
      same_vector_phase(f.x, p.dout, es, kv_full, {f.x_batch_stride, f.x_c_stride},
                        {p.dout_batch_stride, p.dout_c_stride}) &&
      same_vector_phase(f.x, p.dx, es, kv_full, {f.x_batch_stride, f.x_c_stride}, {p.dx_batch_stride, p.dx_c_stride});
  BwdCfGrid g{};
  g.kv = vec ? kv_full : 1;
  // Every row starts aligned: no row needs the extra peeled vector.
  g.aligned = vec && reinterpret_cast<uintptr_t>(f.x) % (kv_full * es) == 0 && multiple_of(f.x_batch_stride, kv_full) &&
              multiple_of(f.x_c_stride, kv_full);
  // Strips: as few as cover a row with at most max_iters (max_iters_fp32) iterations each, balanced.
  const int max_iters = es == 4 ? tune.max_iters_fp32 : tune.max_iters;
  const int wave = dev.wave_size;
  const int64_t span = f.seqlen + (g.kv > 1 && !g.aligned ? g.kv - 1 : 0);
  const int64_t row_vecs = (span + g.kv - 1) / g.kv;
  const int64_t iters_needed = std::max<int64_t>(1, (row_vecs + wave - 1) / wave);
  const int64_t strips_per_row = (iters_needed + max_iters - 1) / max_iters;
  const int64_t total = f.batch * f.dim * strips_per_row;
  const int warps_per_block = tune.threads / wave;
  g.dim = static_cast<uint32_t>(f.dim);
  g.strips_per_row = static_cast<uint32_t>(strips_per_row);
  // (Divisors of up to 2^31, numerators below 2^31: launch_bwd_channel_first refuses larger grids.)
  g.dim_div = DivU32::make(static_cast<uint32_t>(std::min<int64_t>(f.dim, int64_t(1) << 31)));
  g.strips_div = DivU32::make(static_cast<uint32_t>(std::min<int64_t>(strips_per_row, int64_t(1) << 31)));
  g.total_strips = static_cast<uint32_t>(std::min<int64_t>(total, UINT32_MAX));
  g.iters = static_cast<int32_t>((iters_needed + strips_per_row - 1) / strips_per_row);
  g.blocks = (total + warps_per_block - 1) / warps_per_block;
  g.slots = f.batch * strips_per_row;
  // The masks' shifted copies (seq_masks.h) where rows may start inside a vector: the fast range's
  // mask vectors are then one aligned load each.
  g.ws = bwd_workspace_layout(p, g.slots, g.kv >= 4 && !g.aligned ? g.kv : 1);
  return g;
}

int launch_bwd_channel_first(const BwdParams& p, const DeviceDesc& dev, Stream stream) {
  const FwdParams& f = p.f;
  const BwdCfTuning tune = bwd_cf_tuning(dev.family);
  const BwdCfGrid g = bwd_cf_grid(p, dev);
  if (int64_t(f.batch) * f.dim * g.strips_per_row > INT_MAX || f.dim > UINT32_MAX) return kErrInvalidParams;
  if (const int status = launch_bwd_seq_masks(p, g.ws, dev, stream); status != kSuccess) return status;
  const int status = dispatch_dtype(f.x_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return dispatch_bool(f.seq_idx != nullptr, [&](auto Q) {
      constexpr bool kSeqIdx = decltype(Q)::value;
      constexpr int kVFull = bwd_cf_vec(int(sizeof(T)));
      return dispatch_width(f.width, [&](auto W) {
        return dispatch_bool(g.kv > 1, [&](auto V) {
          constexpr int kV = decltype(V)::value ? kVFull : 1;
          return dispatch_bool(f.silu, [&](auto S) {
            auto* kernel = bwd_channel_first_kernel<T, decltype(W)::value, kV, decltype(S)::value, kSeqIdx>;
            // Overlapping the kernel before it (its launch and tail; with seq_idx, the mask kernel).
            return launch_overlapping(kernel, dim3(static_cast<unsigned>(g.blocks)), dim3(tune.threads), stream, p, g);
          });
        });
      });
    });
  });
  // The states pass (seq_idx never comes with states: the torch layer rejects it, and the kernel
  // above ignores them).
  const bool states = f.initial_states != nullptr || p.dinitial_states != nullptr || p.dfinal_states != nullptr;
  if (status != kSuccess || !states || f.seq_idx != nullptr) return status;
  return dispatch_dtype(f.x_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return dispatch_width(f.width, [&](auto W) {
      return dispatch_bool(f.silu, [&](auto S) {
        constexpr int kWidth = decltype(W)::value;
        constexpr int kV = bwd_cf_vec(int(sizeof(T)));
        const bool vec =
            g.kv > 1 && g.aligned && f.seqlen % kV == 0 && f.seqlen >= states_vectors<kWidth>(int(sizeof(T))) * kV;
        // Whole runs of dx (tuning: states_run) where every row's ends are aligned runs and a
        // row holds two of them (the head's and the tail's never overlap) and the loads they need.
        const int run = tune.states_run / int(sizeof(T));
        const bool whole = vec && run % kV == 0 && f.seqlen % run == 0 && f.seqlen >= 2 * run &&
                           f.seqlen >= states_vectors<kWidth>(int(sizeof(T)), run) * kV &&
                           reinterpret_cast<uintptr_t>(p.dx) % tune.states_run == 0 &&
                           multiple_of(p.dx_batch_stride, run) && multiple_of(p.dx_c_stride, run);
        // Grid y: the parts with work (head, tail or both; the kernel tells which it runs the same way).
        const unsigned parts = (states_head_needed(p, kWidth - 1) ? 1u : 0u) + (p.dfinal_states != nullptr ? 1u : 0u);
        // Overlapping the walk where it can (NVIDIA): the pass's loads and SiLU evaluations then
        // run during the walk's last blocks, and only its stores wait for the walk to end.
        auto launch = [&](auto V, auto R) {
          return launch_overlapping(
              bwd_cf_states_kernel<T, kWidth, decltype(S)::value, decltype(V)::value, decltype(R)::value>,
              dim3(ceil_div_u(f.batch * f.dim, tune.states_threads), parts), dim3(tune.states_threads), stream, p, g);
        };
        if (whole) return launch(BoolC<true>{}, BoolC<true>{});
        return dispatch_bool(vec, [&](auto V) { return launch(V, BoolC<false>{}); });
      });
    });
  });
}

}  // namespace causal_conv1d::gpu
