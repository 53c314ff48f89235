// The per-arch tuning table: launch geometry of every kernel family, one row per arch family, each
// value with its reason. Launchers read the row of the device they launch on (DeviceDesc::family,
// a run-time value); kernels read the row of the target being compiled (kTargetFamily, a
// compile-time value) for what sizes their register arrays. Both come from the same constexpr
// functions, so the two sides always agree: the device's family is the family its code object
// was compiled for (the torch layer checks arch and wave size before the first launch).
//
// Numbers behind the rows (bytes in flight a memory-bound kernel needs = bandwidth x latency):
//  - NVIDIA H100/H200 (sm90): 3.3-4.8 TB/s, ~600-800 ns DRAM latency, 132 SMs: ~30 KB per SM.
//    Registers: 64K per SM; <= 64 per thread keeps 1024 threads (32 warps) resident.
//  - RDNA4 gfx1201: ~640 GB/s, 64 CUs, 64 MB Infinity Cache: ~10 KB per CU. Wave32, 1536 VGPRs
//    per SIMD lane: <= 96 VGPRs keep 16 waves/SIMD, <= 128 keep 12 (the compile report checks).
//  - RDNA3 gfx1100: ~960 GB/s, 96 CUs: ~10 KB per CU; same VGPR budget as RDNA4.
//  - CDNA3 gfx942: ~5.3 TB/s, 304 CUs: ~30-40 KB per CU. Wave64, 512 VGPRs per SIMD lane:
//    <= 64 VGPRs keep 8 waves/SIMD, <= 80 keep 6.
// No row depends on LDS: the forward and update kernels stage nothing in it; the channel-last
// backward adds its warps' dweight/dbias sums there once per block (at most 3.8 KB).
#pragma once

#include "causal_conv1d/device_desc.h"
#include "causal_conv1d/gpu_runtime.h"

namespace causal_conv1d::gpu {

// A kernel's launch bounds from its tuning row: the block size, and the occupancy the compiler
// must keep (registers are capped to fit it). NVIDIA: resident blocks per SM; AMD: waves per
// SIMD (EU), what the compile report prints.
#if CAUSAL_CONV1D_BACKEND_HIP
#define CC_LAUNCH_BOUNDS(row) __launch_bounds__((row).threads) __attribute__((amdgpu_waves_per_eu((row).occupancy)))
#else
#define CC_LAUNCH_BOUNDS(row) __launch_bounds__((row).threads, (row).occupancy)
#endif

// The family of the target being compiled. In a host compilation pass no target is known; host
// code must use DeviceDesc::family instead (kernels only read this in device code).
#if defined(__GFX12__)
constexpr ArchFamily kTargetFamily = ArchFamily::kRdna4;
#elif defined(__GFX11__) || defined(__GFX10__)
constexpr ArchFamily kTargetFamily = ArchFamily::kRdna3;
#elif defined(__GFX9__) || defined(__GFX8__)
constexpr ArchFamily kTargetFamily = ArchFamily::kCdna;
#else
constexpr ArchFamily kTargetFamily = ArchFamily::kNvidia;
#endif

// Forward, channel-first (fwd_channel_first.hip): each warp streams a strip of one row, one
// 16-byte vector per lane per iteration, with `ring` loads issued ahead of the one computed.
struct FwdCfTuning {
  int threads;               // block size: whole warps, each an independent strip
  int occupancy;             // CC_LAUNCH_BOUNDS: NVIDIA blocks per SM, AMD waves per SIMD
  int occupancy_seq;         // the same for the seq_idx kernels
  int max_iters;             // iterations (warp-wide 16-byte rows) per strip: more = fewer halo reloads
  int max_iters_seq;         // the same for the seq_idx kernels
  int ring;                  // vectors loaded ahead per lane (16 bytes, 4 registers each)
  int ring_seq;              // the same with seq_idx (a mask byte a position beside the data)
  int l2_ahead;              // NVIDIA: iterations past the ring whose lines are prefetched to L2 (no
                             // registers held)
  int l2_ahead_seq;          // the same with seq_idx
  int l2_ahead_short;        // the same for interleaved strips at the interleaving floor (each warp
                             // keeps interleave_min_iters iterations or fewer)
  bool nt_store;             // AMD: nontemporal stores for out (written once, never read back)
  bool seq_mask_pair;        // seq_idx: a misaligned row's vectors load the two mask vectors their bytes
                             // straddle in the ring (2 more registers a slot); else they read them byte
                             // by byte when computed
  bool realign_seq;          // seq_idx, out in another vector phase than x: out's vectors realigned by a
                             // shuffle (as the kernels without seq_idx do); else stored element by element
  int interleave;            // up to this many warps of a block (a power of 2) walk one strip
                             // interleaved, so the block's loads at a time are one contiguous run; 1:
                             // each warp its own strip
  int interleave_min_iters;  // ... while each of them keeps at least this many iterations of the row
  int short_iters_fp32;      // fp32 rows too short to interleave (in the kernels that interleave):
                             // strips of at most this many iterations; 0: max_iters
};

// Whether a forward kernel interleaves its strips (interleave > 1): those without seq_idx whose
// out shares x's vector phase (the others carry a warp's previous iteration, which interleaving
// would hand to another warp).
__host__ __device__ constexpr bool interleaves(const FwdCfTuning& t, bool out_vec, bool seq_idx) {
  return t.interleave > 1 && out_vec && !seq_idx;
}

__host__ __device__ constexpr FwdCfTuning fwd_cf_tuning(ArchFamily f) {
  switch (f) {
    // 8 blocks of 128 threads per SM (registers capped at 64) with 2 vectors ahead: measured on
    // the H200 at 88.5% of copy for bf16 (8, 4096, 4096), against 80% with 6 blocks and 4 ahead
    // (80 registers), and 24 vs 37 us at (2, 8192, 1024): resident warps matter more than depth.
    // 2 x 16 B x 1024 threads = 32 KB per SM in flight, the ~30 KB sm90 needs.
    // Strips of 32 iterations (8192 bf16 elements), not 16: a strip costs more than its one halo
    // reload (ring fill, weights); in one H200 run (2, 8192, 1024) 26.0 -> 24.1 us and seq_idx
    // (8, 4096, 4096) 228 -> 212 us, the large shapes unchanged (64 iterations: the same).
    // Since then 1 vector ahead in registers and 2 more prefetched to L2 (57 registers, no
    // spills): the ring's loads wait on L2, not DRAM, and nothing more is held. H200, in a CUDA
    // graph, two runs: (8, 4096, 4096) 138.2 -> 135.3 us, (16, 2048, 2048) 69.7 -> 68.0, (2, 8192,
    // 1024) 20.6 -> 20.1, (1, 4096, 256) 4.5-4.8 -> 3.8-4.1; eager (4, 5376, 8192) 184.6 -> 180.8.
    // Not kept (same runs): 2 ahead + prefetch 2 (spills 16 B at width 4), 9 blocks (56
    // registers) with prefetch 1 or 2 (the long rows 3% slower). With the prefetch, strips of 24
    // iterations: (1, 8192, 16384) / (4, 5376, 8192) 141.9 / 180.7 -> 137.0 / 177.2 us (16: 137.6
    // / 177.8; 64: 143.7 / 181.3): a row of 64 or 32 iterations in 3 or 2 strips leaves more,
    // shorter strips for the last wave of blocks. The seq_idx kernels (16-byte vectors, a mask
    // byte a position beside them; 64 registers, no spills) take the same row: (8, 4096, 4096) in
    // a CUDA graph with 1 / 8 / 64 sequences a row 139.8 / 140.1 / 154.2 us (135.6 without
    // seq_idx; strips of 32: the same; without the prefetch 152.7 / 153.6 / 157.0). With 8-byte
    // vectors and the ids themselves they had been issue-bound at 6 blocks: 199.0 / 202.2 / 219.9.
    // Rows misaligned (x 3 elements into wider rows, 8 sequences a row): 152 us without seq_idx,
    // 284 with the masks of their vectors read byte by byte, 186 with both mask vectors loaded in
    // the ring (seq_mask_pair; 64 registers, no spills).
    // out in another vector phase than x (x a slice of longer rows, out dense): realigned by a
    // shuffle and a funnel shift (fwd_channel_first.hip), 64 registers, no spills: bf16 (8, 4096,
    // 4096), x 1 element into wider rows, 157.7 us (225.0 in the seq_idx kernels' form; 151.1 with
    // out in x's phase) against 405.9 with an element a thread before; each lane storing its
    // vector's elements (realign_seq false) 562-587.
    // Long rows: up to 4 warps a strip, interleaved, while each keeps 8 iterations at least
    // (fwd_channel_first.hip: the block's accesses one contiguous run): in a CUDA graph, bf16
    // (1, 8192, 16384) / (4, 5376, 8192) / (8, 4096, 4096) 138.2 / 177.9 / 136.8 -> 136.1 / 173.4 /
    // 134.6 us (4 / 4 / 2 warps a strip); (8, 4096, 4096) with 4 warps of 4 iterations 138.1-139.1
    // against 135.1 with warp strips, with 2 of 8 135.0 against 136.3 (a run-time factor, 64
    // registers; the compiled-in factors keep 56-62).
    // Interleaved strips whose warps keep 8 iterations or fewer prefetch 4 past the ring, the
    // others 2. A run-time distance for every interleaved kernel, 4 against 2, eager, upstream
    // alternated, two rounds on each of two machines: fp32 (8, 4096, 4096) (4 warps of 8)
    // 266.9-268.3 -> 262.5-263.2 us (upstream 266.0-266.7), (16, 2048, 2048) (2 warps of 8)
    // 136.4-137.3 -> 134.9-135.3 (upstream 135.3-135.7), bf16 (8, 4096, 4096) (2 of 8) 135.6-136.0 ->
    // 134.9-135.2 (upstream 137.6), bf16 (4, 5376, 8192) (4 of 8) 175.3 -> 175.6; strips of 16
    // lost: bf16 (1, 8192, 16384) 136.8 -> 139.0, fp32 (1, 8192, 16384) / (4, 5376, 8192) 0.1-0.2%
    // (6 ahead: 2.7% at the first). Warp strips keep 2 ((2, 8192, 1024) fp32, 8 iterations a warp: 3
    // or 4 cost 0.5%). A compiled-in 4 for the 2-warp kernels alone: within noise. A ring of 2 for
    // fp32 (64 registers; the interleaved kernels spilled 40 B) lost 3-7% but at (2, 8192, 1024).
    // As landed (results run of 2026-11-28, two rounds of the timing script and bench.py): fp32
    // (8, 4096, 4096) 262.5-263.1 us against upstream 265.6-266.2, (16, 2048, 2048) 134.6-135.8
    // against 135.0-135.6, bf16 (8, 4096, 4096) 134.4-135.0 against 136.7-137.2.
    // fp32 rows too short to interleave (at most 14 iterations: L <= 1792 when aligned) in strips of 4
    // iterations at most, not one strip a row: twice the warps of half the walk each. H200, kernel
    // timer, in a CUDA graph, alternated in two or three rounds on each of two machines: fp32 (2,
    // 8192, 1024) 36.12-36.20 -> 35.29-35.37 us (second machine 36.30-36.31 -> 35.55), (4, 4096,
    // 1024) 36.18-36.21 -> 35.19-35.26 (36.34 -> 35.39-35.46), (8, 2048, 1536) 52.61-52.63 ->
    // 50.99-51.01 (3 strips of 4), (1, 8192, 512) (4 iterations) unchanged; strips of 3 36.82 us
    // and of 2 38.91 at the first, 2 warps of 4 interleaved 38.84. 16-bit rows of 8 iterations
    // lose that way (bf16 (16, 2048, 2048) 67.9 -> 69.9 us, fp16 (8, 2048, 2048) 36.4 -> 36.8),
    // as 4-iteration ones do in strips of 2 (bf16 (2, 8192, 1024) 20.1 -> 23.5). Not kept (same
    // runs): these kernels (56 registers) at 9 blocks (unchanged) or 10 (48 registers, 36 B of
    // spills: 38.3 us at (2, 8192, 1024)); with the split, a ring of 2 or an L2 prefetch of 3
    // (within 0.5%; benchmarks/NOTES.md, forty-fourth session).
    case ArchFamily::kNvidia: return {128, 8, 8, 24, 24, 1, 1, 2, 2, 4, false, true, true, 4, 8, 4};
    // RDNA needs ~10 KB per CU: 2 loads ahead x 16 B x 32 lanes x >= 12 waves/SIMD x 2 SIMDs =
    // 24 KB. 12 waves/SIMD caps VGPRs at 128 (the floor the compile report checks; the kernels
    // need ~82; the seq_idx kernels, with a mask byte a position beside the data, up to 91 with
    // both mask vectors of a misaligned row's vectors in the ring: seq_mask_pair).
    // Nontemporal stores keep the output stream from evicting x's halo lines from the Infinity
    // Cache / L2. Warp strips only (interleave 1): interleaving is measured on NVIDIA alone, and
    // its lane-0 halo loads would change the VGPR counts the floors were set from.
    // The realigning kernels (out in another phase than x) take up to 91 VGPRs, as the others.
    case ArchFamily::kRdna4: return {128, 12, 12, 16, 16, 2, 2, 0, 0, 0, true, true, true, 1, 0, 0};
    case ArchFamily::kRdna3: return {128, 12, 12, 16, 16, 2, 2, 0, 0, 0, true, true, true, 1, 0, 0};
    // gfx942: 6 waves/SIMD (the floor) allow 80 VGPRs, and a ring of 2 spilled in the fp16
    // kernels: 1 ahead (plus the one being computed) x 16 B x 64 lanes x 6 waves x 4 SIMDs =
    // 24-48 KB per CU against the ~30-40 KB needed. 128 threads are 2 waves, each its own strip.
    // The seq_idx kernels fit the same 80 (no spills) because their edge and misaligned vectors
    // read their mask bytes in a loop when computed: unrolled in the ring, the byte loads'
    // addresses spilled 3-13 VGPRs, and both mask vectors of a misaligned row's vectors in the
    // ring (seq_mask_pair) 12. With out in another phase than x, the seq_idx kernels store it
    // element by element: realigning it spilled 1-7 VGPRs in the fp16 kernels (those without
    // seq_idx realign it, no spills).
    case ArchFamily::kCdna: return {128, 6, 6, 16, 16, 1, 1, 0, 0, 0, true, false, false, 1, 0, 0};
  }
  return {128, 8, 8, 24, 24, 1, 1, 2, 2, 4, false, true, true, 4, 8, 4};
}

// The row a forward kernel is compiled with: the seq_idx kernels take their own occupancy.
template <typename Row>
__host__ __device__ constexpr Row with_seq_occupancy(Row r, bool seq_idx) {
  if (seq_idx) r.occupancy = r.occupancy_seq;
  return r;
}

// Forward, channel-last (fwd_channel_last.hip): each thread owns a group of channels (one 8-byte
// vector: 4 of 16-bit values, 2 of fp32) and walks up to `max_steps` time steps, loading row
// t + ring while computing row t, the previous width - 1 rows held in registers.
struct FwdClTuning {
  int threads;            // block size: consecutive channel groups, so each row access coalesces
  int occupancy;          // CC_LAUNCH_BOUNDS: NVIDIA blocks per SM, AMD waves per SIMD
  int occupancy_seq;      // the same for the seq_idx kernels
  int max_steps;          // time steps per thread (the width - 1 halo rows are re-read per chunk)
  int min_blocks_per_cu;  // shorter chunks when the grid would leave CUs idle (short rows)
  int min_steps;          // ... but no shorter than this (each chunk re-reads width - 1 halo rows)
  int ring_bytes;         // bytes of rows in flight per thread (8 bytes a row)
  int ring_bytes_seq;     // the same for the seq_idx kernels
  int l2_ahead;           // NVIDIA: rows past the ring prefetched to L2 (no registers held)
  int l2_ahead_seq;       // the same for the seq_idx kernels
  bool nt_store;
};

__host__ __device__ constexpr FwdClTuning fwd_cl_tuning(ArchFamily f) {
  switch (f) {
    // 8 blocks per SM (64 registers) with 2 rows of 8 B ahead: measured 77.6% vs 75.9% with 6
    // blocks and 3 rows ahead, and 26 vs 38 us at (2, 8192, 1024). The seq_idx kernels keep 6
    // blocks (at 64 registers they spill). 32 steps re-read 3 halo rows per 32 (L2 hits); at
    // least 4 blocks per SM, or chunks get shorter, down to 4 rows: (1, 4096, 256) / (4, 2048,
    // 128) in a CUDA graph 6.0 / 5.5-6.0 us at 8 rows, 4.9 / 4.85 at 4, 5.9 / 5.8 at 2 (a chunk's
    // 3 halo rows then outnumber its own); 8 blocks per SM instead of 4: (16, 2048, 256) 14.4 ->
    // 15.8 (shorter chunks than it needs). Since then 1 row ahead in registers and 3 more
    // prefetched to L2 (no registers held; 61 registers at width 4, no spills): (1, 8192, 16384) /
    // (4, 5376, 8192) / (8, 4096, 4096) 159.6 / 208.6 / 159.9 -> 147.2 / 190.0 / 146.7 us (85.3-86.7%
    // of copy; 2 ahead: 78.6-79.0%), (16, 2048, 2048) 82.1 -> 76.7, (2, 8192, 1024) 26.1 -> 24.3 in a
    // CUDA graph; prefetch 2: 1-2% less; 4: 0.3-0.6% more than 3 (146.5 / 188.9 / 145.8; in a graph
    // 144.8 against 145.4); 2 rows ahead + prefetch 2: spills, 73%. The seq_idx kernels take the
    // same row (64 registers, no spills): their blocks compute a chunk inside one sequence without
    // the ids, so the plain kernel's latency hiding applies. (8, 4096, 4096) in a CUDA graph with 1
    // / 8 / 64 sequences a row 147.0 / 147.6 / 163.9 us (144.9 without seq_idx; without the
    // prefetch 181.6 / 181.9 / 186.9). Comparing ids on every row, at 6 blocks with 2 rows ahead
    // and no prefetch, they had taken 195.3 / 195.2 / 195.3.
    case ArchFamily::kNvidia: return {128, 8, 8, 32, 4, 4, 8, 8, 4, 4, false};
    // ~10 KB per CU: 2 rows of 8 B x 32 lanes x 24+ waves per CU; 12 waves/SIMD. Chunks down to
    // 4 rows as on NVIDIA (not measured on AMD: a small grid's threads then wait on one or two
    // rounds of loads instead of four; the halo rows they re-read are cache hits).
    case ArchFamily::kRdna4: return {128, 12, 12, 32, 4, 4, 16, 16, 0, 0, true};
    case ArchFamily::kRdna3: return {128, 12, 12, 32, 4, 4, 16, 16, 0, 0, true};
    // 6 waves/SIMD (80 VGPRs): 2 rows of 8 B fit (3 spilled in the fp16 kernels): 16 B x 64 lanes
    // x 6 waves x 4 SIMDs = 24 KB per CU in flight, short of the ~30-40 KB gfx942 needs. The
    // seq_idx kernels 1 row (a chunk's walk with ids and one without: at 2 rows they spilled 2-20
    // VGPRs; at 1, up to 72 VGPRs).
    case ArchFamily::kCdna: return {128, 6, 6, 32, 4, 4, 16, 8, 0, 0, true};
  }
  return {128, 8, 8, 32, 4, 4, 8, 8, 4, 4, false};
}

// Backward, channel-first (bwd_channel_first.hip): each warp walks a strip of one row backwards,
// one vector of x and of dout per lane per iteration (16 bytes), `ring`
// iterations loaded ahead of the one computed; dweight/dbias stay in registers over the strip.
struct BwdCfTuning {
  int threads;         // block size: whole warps, each an independent strip
  int occupancy;       // CC_LAUNCH_BOUNDS: NVIDIA blocks per SM, AMD waves per SIMD
  int occupancy_seq;   // the same for the seq_idx kernels
  int max_iters;       // iterations per strip: a strip recomputes width - 1 dy past its end and emits
                       // one dweight/dbias partial, so longer strips cost less of both
  int max_iters_fp32;  // the same for 4-byte x (fp32: 4 elements a vector, not 8)
  int ring;            // iterations loaded ahead (x and dout: 2 x 16 B a lane)
  int l2_ahead;        // NVIDIA: iterations past the ring whose x and dout lines are prefetched to
                       // L2 (no registers held; the ring's loads then wait on L2, not DRAM)
  bool nt_store;       // AMD: nontemporal stores for dx (written once, never read back)
  int states_threads;  // block size of the states pass (a thread a row's head or tail;
                       // neighbouring threads take neighbouring channels, so the states' loads
                       // and stores coalesce when they are channel-contiguous, as upstream's
                       // callers allocate them)
  int states_run;      // bytes of dx the states pass stores at each end of a row where the rows
                       // allow it (aligned to it, L a multiple of it, L at least two of it): the
                       // W - 1 positions it must rewrite and their neighbours, so that no store
                       // covers part of a run
};

__host__ __device__ constexpr BwdCfTuning bwd_cf_tuning(ArchFamily f) {
  switch (f) {
    // Latency-bound at the occupancy its registers allow. Measured on the H200, bf16, SiLU
    // (upstream in the same runs: 92.5 / 94.4 / 88.5 / 54%): no ring, the L2 prefetch 2
    // iterations ahead, 8 blocks (64 registers, no spills): (1, 8192, 16384) 89.2% of copy,
    // (4, 5376, 8192) 91.1%, (8, 4096, 4096) 89.8%, (2, 8192, 1024) 64.7%, against 83.3 / 86.4 /
    // 82.1 / 57.7% for a ring of 1 at 7 blocks (72 registers, 64 bytes of spills). The loads
    // wait on L2, not DRAM, and 32 warps an SM hide that; without the registers of a ring slot
    // the 8th block fits. Same runs: prefetch 1 or 3 ahead -2 to -6 points, 4 or 5 ahead worse;
    // 9 blocks (56 registers, 12 bytes of spills) -2 to -4; a ring of 1 at 8 blocks (spills) -5.
    // 9 blocks again on today's loop (56 registers, 28 bytes of spills outside it, 231 -> 235
    // instructions), alternated with 8 in one run: 5-6% slower on every large shape, bf16, fp16
    // and fp32 (benchmarks/NOTES.md, thirty-sixth session).
    // 24 iterations a strip: within 0.5% of 16 and 32 (a strip pays one weight load, one
    // prefetch run-up and one partial, and recomputes width - 1 dy past its end); 16 against 32
    // was +3.5 points with a ring, whose fill a strip also paid. The seq_idx kernels (16-byte
    // vectors, a mask byte a position beside them, and a second computation without the masks
    // that most iterations take) run 8 blocks too (64 registers, 36 bytes of spills): at (8, 4096,
    // 4096) with 8 sequences a row, 277.6 us against 292.0 at 7 blocks, 294.7 at 6 and 305.0 at 5
    // (96 registers) in one run; with a ring of 1, 5 blocks had been best (303 us against 327 at
    // 6 and 361 at 7). States in their own pass (128 threads, a row
    // each; vector loads of a row's head and tail): (8, 4096, 4096) 223.8 us with them against
    // 211 without (227.2 with scalar loads); the pass alone 11.2 us, latency-bound (one wave of
    // 1024 warps, each load spread over 32 rows).
    // fp32 x takes strips of 12 iterations (1536 positions against 16-bit x's 6144). Swept on the
    // H200, each setting in its own process, eager, (1, 8192, 16384) / (4, 5376, 8192) / (8,
    // 4096, 4096): 394.0 / 508.0 / 389.6 us at 12 against 411.4 / 547.5 / 393-405 at 24, 407.5 /
    // 517.0 / 392.7 at 8, 394.5 / 515-528 / 393-405 at 16, 424.7 / 560.5 / 426.0 at 32 (upstream
    // 402.2 / 506.2 / 384.0); bf16 in the same runs is best at 24 (208.3 / 268.5 / 208.0 against
    // 210.0 / 268.8 / 209.0 at 16 and 210.8 / 269.5 / 209.7 at 12). (2, 8192, 1024) is one strip
    // a row either way. A second run: 394.0 / 508.5 / 388.3 at 12, 393.0 / 508.0 / 387.5 at 14,
    // 398.0 / 510.7 / 391.3 at 10, 397-400 / 536-546 / 389.6 at 24 (upstream 400.7 / 503.1 /
    // 381.7); at (8, 4096, 4096) / (4, 5376, 8192) states 399.7 / 516.0 against 400.8 / 543,
    // deterministic 392.0 / 508.8 against 395.5 / 543, seq_idx (8 sequences a row) 408.5 / 531.9
    // against 403.3 / 525.3 (+1.3%, kept for the others) (benchmarks/NOTES.md, thirty-first session).
    // fp32's L2 prefetch distance on its own (the same 16-byte vectors, half the arithmetic an
    // iteration), each in its own build, two rounds of alternated processes, (1, 8192, 16384) / (4,
    // 5376, 8192) / (8, 4096, 4096) / (2, 8192, 1024): 2 ahead 393.5 / 508.2 / 387.1 / 55.0 us, 0
    // 414.8 / 538.3 / 411.2 / 56.7, 1 400.1 / 516.0 / 393.7 / 55.3, 3 411.7 / 540.2 / 411.6 / 55.3
    // (against 392.0 / 507.8 / 388.1 / 55.0 with 2 in that run), 4 439.3 / 566.3 / 432.3 / 56.1
    // (upstream 402.3 / 505.9 / 383.3 / 54.9), so both dtypes keep 2 (benchmarks/NOTES.md,
    // forty-second session).
    // The states pass stores whole 32-byte sectors of dx at a row's ends (the W - 1 positions it
    // corrects and the rest of their sector, recomputed). Its W - 1-element stores were most of
    // what it added to the call: bf16 (8, 4096, 4096), one process, the plain walk 207 us, +11
    // with the pass, +4.5 with its dx stores left out, +7.5 with them as whole sectors (timing
    // variants); landed, 217.7-218.3 -> 214.5-215.0 us, fp32 400.0-401.0 -> 397.3-397.7
    // (benchmarks/NOTES.md, thirty-seventh session). Partial writes to sectors that have left the
    // L2 most likely cost a read of the sector from DRAM (not profiled).
    case ArchFamily::kNvidia: return {128, 8, 8, 24, 12, 0, 2, false, 128, 32};
    // RDNA: ~10 KB per CU in flight is enough; the kernel is latency-bound (as on NVIDIA, where
    // resident warps mattered more than depth), so as many waves as the registers allow: 16
    // waves/SIMD (<= 96 VGPRs; the kernels need up to 73 with the strip's indices in scalar
    // registers, warp_uniform; 93 before) x 2 SIMDs x 32 lanes x 2 x 16 B = 32 KB. The seq_idx
    // kernels need up to 83 (143 before; 115 while their masked taps were selects, not predicated
    // FMAs; 90 before a vector's masks came from one aligned load of a shifted copy), so they run
    // at 16 too; their row's 12 (<= 120) is the floor the compile report
    // holds. Nontemporal dx stores keep x's halo lines (re-read by the next strip) in the Infinity
    // Cache. 32 iterations a strip for the per-strip costs measured on NVIDIA, fp32 too (why NVIDIA's fp32 is faster
    // with 12 was not profiled, so nothing says it carries over); no L2 prefetch instruction is used on AMD. (Chosen
    // from the compile report, not timed: no AMD GPU.) The states pass's 32-byte runs as on
    // NVIDIA: whole write requests where a row's ends have left the caches (not timed).
    case ArchFamily::kRdna4: return {128, 16, 12, 32, 32, 1, 0, true, 128, 32};
    case ArchFamily::kRdna3: return {128, 16, 12, 32, 32, 1, 0, true, 128, 32};
    // gfx942 / gfx90a: 5 waves/SIMD (<= 96 VGPRs: the kernels need up to 90 with warp_uniform and
    // lane 0's whole vector before its own, 84 with its halo's elements; 6 waves, 80, would spill
    // the 16-bit width-4 ones): 5 x 4 SIMDs x 64 lanes x 2 x 16 B = 40 KB per CU, the ~30-40 KB
    // needed. The seq_idx kernels (up to 108 VGPRs; 152 before warp_uniform) run 4. The states
    // pass's 32-byte runs as RDNA's (not timed).
    case ArchFamily::kCdna: return {128, 5, 4, 32, 32, 1, 0, true, 128, 32};
  }
  return {128, 8, 8, 24, 12, 0, 2, false, 128, 32};
}

// Backward, channel-last (bwd_channel_last.hip): a thread owns 4 bytes of channels and walks
// a time range backwards with the x and dy windows in registers; the warps of a block take
// consecutive time ranges of the same channels and meet in LDS for one dweight/dbias partial.
struct BwdClTuning {
  int threads;            // block size: threads / wave time ranges of one warp's channels
  int occupancy;          // CC_LAUNCH_BOUNDS: NVIDIA blocks per SM, AMD waves per SIMD
  int occupancy_seq;      // the same for the seq_idx kernels
  int max_steps;          // time steps per warp (each range re-reads 2 (width - 1) x rows and
                          // width - 1 dout rows of halo, and recomputes width - 1 dy)
  int max_steps_fp32;     // the same for fp32 x (at most max_steps: the seq_idx kernels size
                          // their masks by max_steps)
  int min_blocks_per_cu;  // shorter ranges when the grid would leave CUs idle (short rows)
  int min_steps;          // ... but no shorter than this (the halo rows a range re-reads and its
                          // recomputed dy grow in proportion)
  int ring;               // time steps loaded ahead (a row of x and of dout each)
  bool seq_rename;        // the seq_idx kernels rename their windows too (see the kernel)
  bool nt_store;
  int async_ring;          // NVIDIA (sm_80 on): stages of a step's x and dout rows copied ahead
                           // into shared memory by cp.async instead of the register ring (4-byte
                           // vectors; 256 B a warp a step); 0: the register ring
  int wide_threads;        // NVIDIA: the block size of the kernels without seq_idx when the ranges are
                           // shortened (small grids): more warps a block sum their dweight/dbias in
                           // LDS before the atomics; 0: `threads` always
  int wide_blocks_per_cu;  // ranges shortened to min_steps in wide blocks: re-balanced over at most
                           // this many blocks a CU (0: kept at min_steps), by kernels compiled for
                           // that many (rebalanced_bwd_cl_row) ...
  int wide_min_steps;      // ... and at least this many steps a range
};

// The row of the wide kernels (bwd_cl_tuning's wide_threads): as many threads an SM.
__host__ __device__ constexpr BwdClTuning wide_bwd_cl_row(BwdClTuning r) {
  if (r.wide_threads > 0) {
    r.occupancy = r.occupancy * r.threads / r.wide_threads;
    r.threads = r.wide_threads;
  }
  return r;
}

// The row of the re-balanced wide grids (wide_blocks_per_cu): their kernels are compiled for that
// many blocks an SM, since no more of them run there (more registers than the wide kernels).
__host__ __device__ constexpr BwdClTuning rebalanced_bwd_cl_row(BwdClTuning r) {
  r = wide_bwd_cl_row(r);
  if (r.wide_blocks_per_cu > 0) r.occupancy = r.wide_blocks_per_cu;
  return r;
}

__host__ __device__ constexpr BwdClTuning bwd_cl_tuning(ArchFamily f) {
  switch (f) {
    // 2 channels a thread (4 bytes of 16-bit): weights, 5 sums and the dy window of each channel
    // stay in registers. Measured on the H200, bf16 (8, 4096, 4096), with the edge-free step loop:
    // 8 blocks (64 registers) with 2 rows ahead: 56.8% of copy (58.3% since dsilu's ex2 lost its
    // denormal fix-up; 47.8% at (2, 8192, 1024)); 8
    // blocks with 3 ahead: 46.2%; 7 blocks with 3 ahead: 51.9%; 7 with 4: 49.9%. Ranges down to
    // 4 steps when the grid is small: (1, 4096, 256) in a CUDA graph 9.4 us against 11.0 at 16
    // and 11.5 at 8 (the re-read halo rows hit L2). 8 x 128 threads x
    // 2 x 8 B = 16 KB per SM in flight plus the rows being computed. The seq_idx kernels keep 7
    // blocks (33.6% there against 30.1% at 8; with the mask bytes, 353.7 us against 370.3 at 6 and
    // 392.0 at 8). 64 steps a warp, 4 warps a block: one partial per
    // 256 steps x 2 channels. Renaming the windows instead of moving them (75 instructions a step
    // against 92) left the plain kernels where they were (59.4-60.2% both ways: not issue-bound)
    // and took the seq_idx kernels from 39.5% to 46.3%, hence seq_rename. Not kept: 7 blocks with
    // 2 or 3 rows ahead (+1-3 points on the large shapes, 51 -> 41-43% at (2, 8192, 1024) where
    // 1024 blocks no longer fit in one wave), an L2 prefetch 2 or 4 rows past the ring (spills at
    // 64 registers: 39%; at 7 blocks +1 point, and the seq_idx kernels spill: 34%).
    // Since then the plain kernels stage their rows in shared memory by cp.async, 6 steps a warp
    // (5 ahead of the one computed while it is computed: 8 blocks x 4 warps x 5 x 256 B = 40 KB
    // per SM in flight, no registers held): bf16 (1, 8192, 16384) / (4, 5376, 8192) / (8, 4096,
    // 4096) / (2, 8192, 1024) 73.4 / 74.2 / 72.9 / 55.5% against 60.2 / 60.2 / 59.7 / 50.4% with
    // the register ring, in one run. 3 / 4 / 5 / 7 / 8 stages: 68.4 / 70.0 / 68.4 / 67.1 / 63.6% at
    // (1, 8192, 16384) (the loop unrolls lcm(stages, width - 1) steps: 15-24 of them outgrow the
    // instruction cache); a stage index in a register instead (6 steps unrolled for any depth):
    // 66.2% at 6, 68.0% at 4, 65.7% at 8, 61.7% at 12 (its address math spills). 128 steps a warp
    // (half the halo rows re-read and partials written): 75.4 / 77.0 / 75.3% against 73.4 / 74.3 /
    // 73.0 at 64 in one run, deterministic 259.5 us against 270.4 (the reduction reads half the
    // partials); 32 steps: 68%. The seq_idx kernels stage their rows too and read a row's mask
    // byte when they take the row (L1 hits: 4 rows' masks a word): 302.4 us at (8, 4096, 4096)
    // with 8 sequences a row against 358.1 with the register ring; with the mask word copied into
    // the stages beside the rows, 482.7; since then the masks of 6 steps a word in shared memory,
    // runs of clean steps unmasked (the kernel's comment): 247.4 against 244.5 without seq_idx,
    // at 7 blocks (72 registers). Not kept: nontemporal dx stores (no change), an L2 prefetch 2
    // rows past the stages (spills: 68%).
    // Staged, short ranges cost more than they save: a warp's fixed work (index math, weights,
    // window, stage prologue, partial) is ~860 instructions against ~90 a step, so 8 steps at
    // least: (1, 4096, 256) in a CUDA graph 9.4 us against 11.8 at 4 and 9.7 at 16 (ncu: 3.1M
    // against 5.1M instructions); larger shapes take 32-step ranges or longer either way.
    // Shortened ranges (small grids) take blocks of 256 threads (8 warps, 4 blocks an SM): half
    // the atomics and partials, which cost much there (each warp adding its own sums: 8.2 -> 14.9
    // us at (1, 4096, 256) in a graph); A / B / A, in a graph, (1, 4096, 256) / (4, 2048, 128) /
    // (1, 8192, 256) / (2, 8192, 1024) 7.68 / 8.42 / 10.58 / 36.2 us against 8.18 / 8.61 / 12.16 /
    // 36.8 at 128; the large shapes, whose ranges are whole, keep 128 (0.6-1.3% slower at 256).
    // Where the ranges reach the floor (8 steps) the wide grid is re-balanced to at most 3 blocks an
    // SM (a wave and room to spare: the ranges' fixed work, not the SM's warps, bounds these
    // grids), 4 steps a range at least. Steps swept in a graph, (1, 4096, 256) / (4, 2048, 128) /
    // (1, 8192, 256): 8.83 / 8.86 / 13.81 us at 4 steps, 7.93 / 8.42 / 12.24 at 6, 8.01 / 8.86 /
    // 10.86 at 8, 8.41 / 9.19 / 9.94 at 12, 8.61 / 8.84 / 10.15 at 16: each shape's best is its
    // grid of ~384 blocks. The rule against the 8-step floor, alternated in one process (peers/
    // gtcl2.py, benchmarks/NOTES.md twenty-ninth session), bf16: (1, 4096, 256) 7.69 -> 7.65 us,
    // (4, 2048, 128) 8.87 -> 8.45, (1, 8192, 256) 10.89 -> 9.83, (1, 2048, 512) 7.99 -> 7.68,
    // (2, 4096, 256) 10.81 -> 10.12, (1, 4096, 512) 10.81 -> 9.76, (8, 1024, 256) 11.05 -> 10.74,
    // (1, 16384, 128) 10.92 -> 10.47, (4, 4096, 128) 11.29 -> 10.59, (1, 4096, 64) 6.85 -> 6.16;
    // (2, 8192, 1024), whose ranges are 64 steps, unchanged (35.5); this code alone, 7.68 / 8.10 /
    // 9.44 / 35.45 us at the first three and (2, 8192, 1024). Re-swept once a row's last ranges
    // loaded their window inline and all of a block's warps summed its partial (7.27-7.39 us at
    // (1, 4096, 256)): (blocks an SM, steps) (3, 4) 7.23-7.26 / 8.30-8.32 / 9.71-9.75, (4, 6)
    // 7.24-7.26 / 8.32-8.39 / 9.42-9.46, (2, 4), (4, 4) and (6, 4) slower at one shape or more
    // (benchmarks/NOTES.md, thirtieth session). Those re-balanced grids' kernels are compiled for 3
    // blocks an SM, as many as run there: 80 registers and no spills (ptxas, bf16 width 4) against
    // 64 registers, 40 bytes of stack and 60 / 72 bytes of spill stores / loads at 4 blocks. In a
    // graph, alternated in one process (the 4-block kernels in the same build), (1, 4096, 256) /
    // (4, 2048, 128) / (1, 8192, 256) 6.93-6.96 / 7.96-8.08 / 9.34-9.38 us against 7.22-7.25 /
    // 8.32-8.39 / 9.73-9.76; (2, 8192, 1024), not re-balanced, 35.4 both ways. Re-swept with them,
    // (3, 4) stays: (3, 3) and (3, 6) within 1% of it, (3, 8) 1-2% slower, (2, 4 / 6 / 8) 2% faster
    // at (4, 2048, 128) but 2% slower at (1, 4096, 256) and 1% at (1, 8192, 256)
    // (benchmarks/NOTES.md, thirty-eighth session).
    // fp32 x takes ranges of 64 steps: in one H200 run, each setting in its own process, eager,
    // (1, 8192, 16384) / (4, 5376, 8192) / (8, 4096, 4096) / (2, 8192, 1024) 431.2-431.7 /
    // 566.3-567.1 / 429.5-429.7 / 60.9-61.1 us against 439.5-440.1 / 573.7-574.0 / 440.1-440.5 /
    // 62.4-62.9 at 128 (192: 442.9-443.9 / 585.3-586.0 / 451.0-451.6; 256: 444.2-444.7 / 581.6-582.2
    // / 449.3-450.4); bf16 is best at 128 (238.4-239.2 / 308.0-308.5 / 237.4-238.0 against
    // 240.5-241.0 / 313.6-314.2 / 241.3-241.8 at 64, 245-251 at 192 and 256; benchmarks/NOTES.md,
    // thirty-first session).
    case ArchFamily::kNvidia: return {128, 8, 7, 128, 64, 4, 8, 2, true, false, 6, 256, 3, 4};
    // RDNA: ~10 KB per CU; at least 12 waves/SIMD (the kernel needs 85 VGPRs, so 16 run) x 2 SIMDs
    // x 32 lanes x 2 rows ahead x 8 B = 12 KB. Ranges down to 4 steps as on NVIDIA: filling the
    // CUs matters more than the re-read halo rows, which hit the cache. The seq_idx kernels
    // slide their windows: renamed, the width-4 ones spill at 12 waves (and at 5 on gfx942).
    case ArchFamily::kRdna4: return {128, 12, 12, 64, 64, 4, 4, 2, false, true, 0, 0, 0, 0};
    case ArchFamily::kRdna3: return {128, 12, 12, 64, 64, 4, 4, 2, false, true, 0, 0, 0, 0};
    // gfx942: wave64, so 128 threads are 2 time ranges of 64 channel groups. 5 waves/SIMD (<= 96
    // VGPRs, no spills) x 4 SIMDs x 64 lanes x 2 x 8 B = 20 KB per CU, short of the ~30-40 KB
    // gfx942 needs.
    case ArchFamily::kCdna: return {128, 5, 5, 64, 64, 4, 4, 2, false, true, 0, 0, 0, 0};
  }
  return {128, 8, 7, 128, 64, 4, 8, 2, true, false, 6, 256, 3, 4};
}

// The seq_idx kernels size their shared mask words by max_steps, so no dtype's ranges may be longer.
constexpr bool bwd_cl_fp32_steps_fit(ArchFamily f) {
  return bwd_cl_tuning(f).max_steps_fp32 <= bwd_cl_tuning(f).max_steps;
}
static_assert(bwd_cl_fp32_steps_fit(ArchFamily::kNvidia) && bwd_cl_fp32_steps_fit(ArchFamily::kRdna4) &&
                  bwd_cl_fp32_steps_fit(ArchFamily::kRdna3) && bwd_cl_fp32_steps_fit(ArchFamily::kCdna),
              "max_steps_fp32 above max_steps");

// Deterministic backward: the ordered sum of the dweight/dbias partials (bwd.hip). A slot's
// partials are dim x (width + 1) consecutive floats; a block covers `columns` consecutive ones of
// them (32 floats: one 128-byte line a load instruction) with `lanes` threads each, and each lane
// sums every lanes-th slot in order. Off the hot path (the partials are 1/150 or less of the
// backward's bytes; most come from DRAM, the walk's later blocks having evicted the earlier
// ones' from L2): fixed geometry, 256 threads, so that a lane's loads are few (slots / 8) and
// independent, and (8, 4096, 4096) is 640 blocks (H200 ncu: 4.9 us, against 6.6 for 32 channels'
// (width + 1)-float groups a block).
struct BwdReduceTuning {
  int columns;
  int lanes;
};

__host__ __device__ constexpr BwdReduceTuning bwd_reduce_tuning(ArchFamily) { return {32, 8}; }

// seq_idx masks (seq_masks.hip): the kernel that turns each batch row's ids into a byte a
// position before the channel-first forward and both backwards. A thread writes one 4-byte word of
// masks; its ids (7 a word, re-read by neighbours) are batch x seqlen x 4 bytes, 1/(2 dim) or less
// of the main kernel's bytes, and mostly L2 hits: fixed geometry, 256 threads (8 wave32 / 4 wave64
// waves) so that a batch row of 4096 positions is 4 blocks.
struct SeqMaskTuning {
  int threads;
};

__host__ __device__ constexpr SeqMaskTuning seq_mask_tuning(ArchFamily) { return {256}; }

// Decode update (update.hip, the single-token kernel): one batch row per block row, `threads`
// threads each owning 4 bytes of channels (2 of 16-bit, 1 of fp32), or 8 (wide_min_batch,
// wide_loop_16bit).
struct UpdateTuning {
  int threads;           // small blocks: at batch 1 the grid must still cover every CU
  int occupancy;         // CC_LAUNCH_BOUNDS: NVIDIA blocks per SM, AMD waves per SIMD
  int max_grid_y;        // batch rows in the grid: up to it a thread computes one row (update.hip's
                         // kOneRow kernel); past it each thread loops over ceil(batch / max_grid_y) rows
                         // with its weights in registers and the next row's loads in flight
  int wide_min_batch;    // from this batch up to max_grid_y a thread owns 8 bytes of channels, not 4
                         // (0: never); where the layout allows (update_routing.h's decode_vector_bytes)
  int wide_occupancy;    // CC_LAUNCH_BOUNDS' occupancy of those kernels
  bool wide_loop_16bit;  // past max_grid_y (the batch loop) 16-bit x takes 8 bytes of channels a
                         // thread too, where the layout allows; fp32 keeps 4
};

__host__ __device__ constexpr UpdateTuning update_tuning(ArchFamily f) {
  switch (f) {
    // dim 8192 at batch 1: 64-thread blocks give 64 blocks (bf16) for 132 SMs; 128-thread blocks
    // would leave most SMs idle in this latency-bound case (32-thread blocks, 128 of them: 2.05 us
    // against 1.99, in one process). 128 grid rows: one row a thread up to batch 128, as fast as
    // the loop or faster wherever both run (H200, bf16, CUDA graph, rotating buffers, one process,
    // max_grid_y 64 / 128 / batch: batch 96 5.58 / - / 5.50 us, 128 7.03 / 6.79, 256 11.96 /
    // 11.86 / 11.95, 512 21.68 / 21.33 / 21.96: one row a thread past 128 loses). 8 bytes of
    // channels per thread (half the blocks, 12 of them an SM: 80 registers, no spills) pay where
    // the device is full and every thread has one row: bf16 batch 1 / 16 / 64 / 128 / 256 1.92 /
    // 2.41 / 4.29 / 6.83 / 11.97 us with 4 bytes, 2.10 / 2.59 / 4.09 / 6.47 / 11.85 with 8 (256:
    // two rows a thread), fp32 batch 64 / 256 6.87 / 19.60 against 6.29 / 21.07 (one process,
    // CUDA graph, rotating buffers, three rounds alike; 16 bytes at 8 blocks 2.19 / 2.70 / 4.65 /
    // 7.31 / 12.13, fp32 6.69 / 21.60). More resident blocks do not help (bench.py --quick --only
    // update, two runs alike): 20 blocks (46 registers) 1.92 / 2.45 / 4.54 / 12.16 us, 24 (40
    // registers, 8 bytes of spills) 1.90 / 2.45 / 4.81 / 13.15, against 1.88 / 2.43 / 4.51 /
    // 12.02 at 16. In the batch loop (past 128 rows) 8 bytes pay for 16-bit x but not for fp32
    // (two rounds of alternated processes, each form its own build, CUDA graph, rotating buffers):
    // bf16 batch 129 / 256 / 512 6.80 / 11.50-11.51 / 20.93-20.96 -> 6.63-6.64 / 11.36-11.37 /
    // 19.85-19.91 us, fp16 256 12.07-12.08 -> 11.57-11.61 (64-74 registers at 12 blocks, no
    // spills; benchmarks/NOTES.md, forty-second session); fp32 256 19.60 with 4 bytes against 21.07
    // with 8 (forty-first session), hence wide_loop_16bit.
    case ArchFamily::kNvidia: return {64, 16, 128, 64, 12, true};
    // wave32: 64 threads = 2 waves per block, 64 blocks for 64 CUs at dim 8192, batch 1. 64 grid
    // rows (not measured on AMD): a gfx1201 has half the H200's compute units, so the loop takes
    // over at half the batch. 4 bytes of channels at every batch: the 8-byte forms' gains were
    // measured on the H200 only (their kernels compile as a trap where the table never takes them).
    case ArchFamily::kRdna4: return {64, 12, 64, 0, 12, false};
    case ArchFamily::kRdna3: return {64, 12, 64, 0, 12, false};
    // wave64: one wave per block, 304 CUs: more grid rows before a thread loops.
    case ArchFamily::kCdna: return {64, 8, 128, 0, 8, false};
  }
  return {64, 16, 64, 0, 16, false};
}
static_assert(update_tuning(ArchFamily::kNvidia).wide_min_batch <= update_tuning(ArchFamily::kNvidia).max_grid_y &&
                  update_tuning(ArchFamily::kRdna4).wide_min_batch <= update_tuning(ArchFamily::kRdna4).max_grid_y &&
                  update_tuning(ArchFamily::kRdna3).wide_min_batch <= update_tuning(ArchFamily::kRdna3).max_grid_y &&
                  update_tuning(ArchFamily::kCdna).wide_min_batch <= update_tuning(ArchFamily::kCdna).max_grid_y,
              "the 8-byte decode kernels are one-row kernels: wide_min_batch within max_grid_y");

// The general update kernel (update.hip: any layout, several tokens, circular states): off the
// decode hot path, so one geometry for every family.
struct UpdateGeneralTuning {
  int threads;     // one channel per thread
  int occupancy;   // CC_LAUNCH_BOUNDS: NVIDIA blocks per SM, AMD waves per SIMD
  int rows;        // batch rows per thread in the single-token case: their loads are in flight together
  int max_grid_y;  // grid rows (the y dimension's limit); threads loop over the rest
};

__host__ __device__ constexpr UpdateGeneralTuning update_general_tuning(ArchFamily) { return {128, 1, 4, 65535}; }

// causal_conv1d_varlen_states (varlen_states.hip): a gather, one channel per thread; the grid's y
// and z (state columns, sequences) are strided loops beyond max_grid_yz.
struct VarlenTuning {
  int threads;
  int occupancy;  // CC_LAUNCH_BOUNDS: NVIDIA blocks per SM, AMD waves per SIMD
  int max_grid_yz;
};

__host__ __device__ constexpr VarlenTuning varlen_tuning(ArchFamily) { return {256, 1, 65535}; }

// The serving API (serving.hip), first version: one channel per thread (consecutive threads,
// consecutive channels: vLLM's x and cache keep dim contiguous, so a warp reads whole token rows),
// a rolling window in registers. Prefill blocks take chunks of `chunk` tokens of one sequence.
struct ServingFwdTuning {
  int threads;     // channels (scalar kernel) or channel groups (vector kernel) per block
  int occupancy;   // CC_LAUNCH_BOUNDS: NVIDIA blocks per SM, AMD waves per SIMD
  int chunk;       // tokens per block: a chunk re-reads width - 1 tokens of halo (at most 3 / 64 = 5%)
  int max_grid_y;  // work rows in the grid (the y limit); blocks loop over the rest
  int ring;        // vector kernel: token rows loaded ahead of the one computed (kServingVecBytes each)
  int l2_ahead;    // NVIDIA, vector kernel: token rows past the ring prefetched to L2 (no registers held)
  bool nt_store;   // AMD: nontemporal stores for out (written once, never read back)
};

// Bytes of channels a thread owns on the serving kernels' vector paths (prefill and decode): 8, as
// the channel-last forward (fwd_cl_tuning: 16 bytes needed more than its 64-register budget for
// the window and weights; the decode kernel at 8 bytes takes 56-64 registers on sm_90, the budget
// of serving_update_tuning's 16 blocks of 64 threads).
constexpr int kServingVecBytes = 8;
// ... except the decode on small grids (fewer blocks than CUs at kServingVecBytes a thread: batch
// 1-4 at dim 8192, 16-bit), which takes 4 bytes of channels a thread (as update_tuning's plain
// update; at least 2 channels, so float32 keeps its 8 bytes) and twice the blocks. H200, bf16, dim
// 8192, batch 1, CUDA graph, two runs: 2.74 / 3.01 us (dim / state-contiguous cache) against 2.91 /
// 3.20 with 8 bytes; batch 64 and 256 take 8 bytes as before (launch_serving_update): 4 bytes there
// too measured 5.40 / 14.02 us against 4.80 / 12.19 (dim cache, the plain-step kernel, same run).
constexpr int kServingNarrowVecBytes = 4;

__host__ __device__ constexpr ServingFwdTuning serving_fwd_tuning(ArchFamily f) {
  switch (f) {
    // 8 blocks of 128 threads per SM (registers capped at 64), the geometry of the channel-last
    // forward, which the vector kernel follows (2 rows of 8 B ahead there: 77.6% of copy). The
    // scalar kernel (x without dim contiguous) needs ~30 registers with its token loop unrolled by
    // 2 (by 4 it spills scalar registers on gfx1201). The vector kernel keeps 1 row ahead and
    // prefetches 4 more to L2, as the channel-last forward measured best: H200, bf16 width 4,
    // serving_bench's prefill (64 sequences, 62386 tokens, dim 8192) in a CUDA graph 580.0 -> 533.0
    // us, two runs (the fixed-length channel-last forward on the same tokens: 527.7).
    case ArchFamily::kNvidia: return {128, 8, 64, 65535, 1, 4, false};
    // RDNA: 12 waves/SIMD (the compile report's floor; <= 128 VGPRs) x 2 SIMDs x 32 lanes x 2 rows
    // x 8 B = 12 KB per CU in flight against the ~10 KB gfx1201 needs (not measured: no AMD GPU).
    case ArchFamily::kRdna4: return {128, 12, 64, 65535, 2, 0, true};
    case ArchFamily::kRdna3: return {128, 12, 64, 65535, 2, 0, true};
    // wave64: 2 waves per block; 6 waves/SIMD is the compile report's floor (24 KB per CU in
    // flight, as the channel-last forward).
    case ArchFamily::kCdna: return {128, 6, 64, 65535, 2, 0, true};
  }
  return {128, 8, 64, 65535, 1, 4, false};
}

// The serving decode update (serving.hip): a thread owns one channel of one row, or kServingVecBytes
// of channels on the vector path (x and cache with dim contiguous); its few tokens are walked with
// the window in registers. Small blocks for the same reason as update_tuning: at
// batch 1 the grid must still reach every CU (dim 8192 / 64 = 128 blocks).
struct ServingUpdateTuning {
  int threads;
  int occupancy;   // CC_LAUNCH_BOUNDS: NVIDIA blocks per SM, AMD waves per SIMD
  int max_grid_y;  // rows in the grid's y dimension: the scalar kernel's threads loop over the
                   // rest, the vector kernel's rows continue in z
};

__host__ __device__ constexpr ServingUpdateTuning serving_update_tuning(ArchFamily f) {
  switch (f) {
    // The same residency as update_tuning (16 blocks of 64 threads, <= 64 registers; sm_90: the
    // scalar kernel takes 48-56, the vector one 56-64, no spills): a decode step is latency-bound,
    // resident warps hide it. One row a block row: the vector kernel looping a thread over 64 grid rows with the next
    // row's loads in flight (update_tuning's design) took 9.5-10.0 / 30.9-31.4 us at batch 64 / 256
    // (H200, bf16, dim 8192) against 7.05 / 17.9 (each row's index lookup is a dependent load
    // that the loop serialises); at 8 blocks (no spills) 8.7 / 18.3. Also measured (same run,
    // vector kernel with weight runs, B = 1 / 64 / 256): 16 bytes of channels a thread at 10
    // blocks (no spills) 3.08 / 5.84 / 13.77 us against 8 bytes' 2.97 / 5.80 / 14.30 (kept 8:
    // no better at small batches); 2 rows a thread with their loads issued together, 4 or 8 bytes,
    // 7.6-7.7 / 19.0-21.9 at B = 64 / 256 against 7.03 / 17.92 before the weight runs.
    case ArchFamily::kNvidia: return {64, 16, 65535};
    // 12 waves/SIMD, the compile report's floor (gfx1201: the scalar kernel needs 28 VGPRs, the
    // vector one 49).
    case ArchFamily::kRdna4: return {64, 12, 65535};
    case ArchFamily::kRdna3: return {64, 12, 65535};
    // gfx942 spills VGPRs at 8 waves/SIMD (64 VGPRs: its scalar-register spills go to VGPR lanes);
    // 6, the floor, allows 80.
    case ArchFamily::kCdna: return {64, 6, 65535};
  }
  return {64, 16, 65535};
}

// The serving prefill's plan (serving.hip): one block scans the sequences' chunk counts.
constexpr int kServingPlanThreads = 256;

}  // namespace causal_conv1d::gpu
