// Backward for channel-last x (stride 1 along dim): a register window walking backwards in time.
// The formulas are in bwd_common.h.
//
// Data ownership: a thread owns kC consecutive channels (4 bytes: 2 of 16-bit, 1 of fp32) of one
// batch row; lane l of a warp owns channel group (the block's first
// group + l), so every load and store of a warp is one contiguous run of a time row. Warp w of a
// block owns time range w of the block's threads / wave consecutive ranges of `steps` steps. The
// grid covers (batch, time block, channel block).
//
// Each thread walks its range from the last step to the first. At step t it holds the x window
// x[t-(W-1) .. t] and the dy window dy[t+1 .. t+W-1] in registers; it takes x row t-(W-1) and dout
// row t from a ring loaded `ring` steps ahead (on NVIDIA: from shared memory stages that cp.async
// fills `async_ring` steps ahead, holding no registers), computes dy[t], its dweight/dbias terms
// and dx[t], and slides both windows by one. Before the walk it loads the W-1 x rows of its first
// window and computes the dy past its range from W-1 more x rows and W-1 dout rows (cache hits: the
// neighbouring range loads them too). No data moves between threads until the end, where the warps
// of a block add their dweight/dbias sums in LDS in a fixed order: one partial per block.
//
// dinitial_states: the range starting at t = 0 walks W-1 more steps (t < 0, where dout is 0 and
// x is initial_states), whose dx is dinitial_states.
//
// Sliding the windows costs a register move per entry and step; the ring's loop instead unrolls
// a common multiple of the ring depth and W - 1 steps and renames the window registers (tuning
// field seq_rename: also in the seq_idx kernels, whose mask tests make the renamed loop longer).
//
// seq_idx: the same mask byte a position as the channel-first kernel (bwd_common.h), written into
// the workspace before the walk. A step needs only the byte of its row t, loaded with its rows
// (NVIDIA's staged loop: copied into shared memory a group of steps a word before the loop, and
// runs of steps whose bytes are all clean run without the masks):
// which x rows are taps of y[t], whether t is padding, and which dy of rows t + 1 .. t + W - 1
// reach dx[t] (the reach bits). No mask or id rides with the windows. (Masks of rows t + 1 ..
// that rode with the dy window, renamed with it, gave wrong dx at the renamed loop's last step
// in nvcc 13.0's -O3 build for sm_90 and right dx at -Xptxas -O0 or without renaming;
// benchmarks/NOTES.md, seventh to ninth sessions.)
//
// The steps whose rows and store are all whole run with the ring and no edge code; the rest (rows
// that dfinal_states adds to, x rows before t = 0, the dinitial_states steps, channels past dim)
// run one at a time through the element-wise paths.
//
// The vector path needs x, dout and dx to share their alignment and batch / time strides that are
// multiples of kC (one peel of m channels then fits every row); otherwise kC = 1.
#include <algorithm>
#include <climits>
#include <type_traits>

#include "bwd_common.h"
#include "causal_conv1d/dispatch.h"

namespace causal_conv1d::gpu {

namespace {

// Channels per thread on the vector path: 4 bytes (2 of 16-bit, 1 of fp32), so a warp's access to
// a row is 128 contiguous bytes (256 on wave64). The weights, dweight/dbias sums and dy window of
// every channel stay in registers (10 + 3 per channel at width 4): 4 channels needed 168 registers
// under nvcc uncapped, 2 leave room for a deep ring of 2-register rows. It names the kernel
// instantiation the host launches, so it cannot differ between arch families (the host pass knows
// no target).
constexpr int kBwdClBytes = 4;
template <typename T>
constexpr int kBwdClVec = kBwdClBytes / int(sizeof(T));

// dx of row t for channels c0 .. c0 + kC - 1 when it is not one whole store: channels outside
// [0, D) and rows outside [-(W-1), L) are dropped, rows before 0 are dinitial_states (when asked
// for), dfinal_states adds to the last W-1 rows of [initial_states, x]. Out of line on NVIDIA
// (CC_EDGE_FN); scalars only.
template <typename T, int kC, int kHalo>
CC_EDGE_FN void store_row_edge(T* dx, int64_t dx_ls, T* dinit, int64_t dinit_cs, int64_t dinit_ls, const T* dfin,
                               int64_t dfin_cs, int64_t dfin_ls, int64_t L, int64_t D, int64_t c0, int64_t t,
                               Floats<kC> o) {
  if (t < -kHalo || t >= L) return;
  static_for<kC>([&](auto e) {
    const int64_t ch = c0 + e;
    if (ch < 0 || ch >= D) return;
    float v = o.v[e];
    if (dfin != nullptr && t >= L - kHalo) v += to_float(dfin[ch * dfin_cs + (t - (L - kHalo)) * dfin_ls]);
    if (t >= 0) {
      dx[t * dx_ls + ch] = from_float<T>(v);
    } else if (dinit != nullptr) {
      dinit[ch * dinit_cs + (t + kHalo) * dinit_ls] = from_float<T>(v);
    }
  });
}

// Default mode's block partial with one vector atomic for a channel's 4 dweight taps (atomic_add4),
// for the 16-bit width-4 kernels on targets that have it, where dweight's rows are 4 floats aligned
// to 16 bytes (as the torch layer allocates them): warp e < 2 sums channel c0 + e's taps over the
// block's warps (red: the kernel's [warp][k][e][lane] sums) and adds them with one, warps 2 and 3
// the dbias terms. H200, bf16 in a CUDA graph, two rounds against the 10 terms spread over the
// block's warps (benchmarks/NOTES.md, fortieth session): (1, 4096, 256) / (4, 2048, 128) / (1,
// 8192, 256) / (1, 4096, 64) / (8, 1024, 256) / (2, 8192, 1024) 6.94-6.97 / 7.96-8.02 / 9.24-9.30 /
// 5.82-5.88 / 10.36-10.44 / 35.36-35.47 us -> 6.67-6.69 / 7.76-7.79 / 9.03-9.06 / 5.70-5.72 /
// 10.11-10.16 / 35.10-35.18; eager (8, 4096, 4096) 238.8-239.3 -> 237.9-238.1. Not for fp32 (one
// channel a thread: warp 0 then sums 32 of the block's terms) nor width 2 (2-float vectors):
// (1, 4096, 256) 7.74-7.78 -> 7.90-7.94 and 5.16-5.18 -> 5.24-5.26 us that way. Out of line:
// inlined, it moved the register allocation of the plain kernels (sm_90: 60 -> 84 bytes of spill
// stores in their edge paths). The warp count is a template parameter: with a run-time count the
// sums' loads were not unrolled, and (1, 4096, 256) took 7.42 us against 7.03 with the terms spread.
template <int kWarps>
__device__ __noinline__ void add_block_partial4(const float (*red)[5][2][kWarpSize], float* dweight,
                                                int64_t dweight_c_stride, float* dbias, int64_t dbias_stride,
                                                int64_t c0, int64_t D, int warp, int lane) {
  static_assert(kWarps >= 4, "a warp for each channel's taps and for each one's bias");
  const int e = warp % 2;
  const int64_t ch = c0 + e;
  if (warp >= 4 || ch < 0 || ch >= D) return;
  auto total = [&](int k) {
    float t = red[0][k][e][lane];
    for (int v = 1; v < kWarps; ++v) t += red[v][k][e][lane];  // (unrolled: the loads in flight together)
    return t;
  };
  if (warp < 2) {
    const float taps[4] = {total(0), total(1), total(2), total(3)};
    atomic_add4(dweight + ch * dweight_c_stride, taps);
  } else if (dbias != nullptr) {
    atomic_add(dbias + ch * dbias_stride, total(4));
  }
}

// The tuning row a kernel is compiled with (kRow): the table's, the wide blocks' (wide_bwd_cl_row),
// or the re-balanced wide grids' (rebalanced_bwd_cl_row: at most wide_blocks_per_cu blocks an SM).
constexpr int kClRowPlain = 0, kClRowWide = 1, kClRowRebalanced = 2;
template <int kRow>
__host__ __device__ constexpr BwdClTuning bwd_cl_row(ArchFamily f) {
  return kRow == kClRowRebalanced ? rebalanced_bwd_cl_row(bwd_cl_tuning(f))
         : kRow == kClRowWide     ? wide_bwd_cl_row(bwd_cl_tuning(f))
                                  : bwd_cl_tuning(f);
}

// The kernels' first parameter: the re-balanced ones take BwdClArgs32 (bwd_common.h).
template <int kRow>
using BwdClKernelArgs = std::conditional_t<kRow == kClRowRebalanced, BwdClArgs32, BwdClGrid>;

template <typename T, int kWidth, int kC, bool kSilu, bool kSeqIdx, int kRow>
__global__ void CC_LAUNCH_BOUNDS(with_seq_occupancy(bwd_cl_row<kRow>(kTargetFamily), kSeqIdx))
    bwd_channel_last_kernel(BwdClKernelArgs<kRow> g, BwdParams p) {
  constexpr BwdClTuning kTune = bwd_cl_row<kRow>(kTargetFamily);
  constexpr int kRing = kTune.ring;
#if defined(__HIP_DEVICE_COMPILE__)  // (a HIP host pass sees NVIDIA's row: no target is known there)
  static_assert(kTune.async_ring == 0, "cp.async is an NVIDIA instruction");
#endif
  // The fast range's rows staged in shared memory by cp.async (sm_80 on; 4-byte vectors).
#if CAUSAL_CONV1D_BACKEND_CUDA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int kAsync = kC * int(sizeof(T)) == 4 ? kTune.async_ring : 0;
#else
  constexpr int kAsync = 0;
#endif
  // Steps in flight ahead of the one computed: in shared memory, or in registers.
  constexpr int kAhead = kAsync > 0 ? kAsync : kRing;
  constexpr int kHalo = kWidth - 1;
  constexpr bool kRename = !kSeqIdx || kTune.seq_rename;
  constexpr int kWarps = kTune.threads / kWarpSize;
  static_assert(kTune.threads % kWarpSize == 0, "a block must consist of whole warps");
  // The warps' sums, [warp][k][e][lane]: a warp's accesses are consecutive words.
  __shared__ float red[kWarps][kWidth + 1][kC][kWarpSize];

  const FwdParams& f = p.f;
  // Time and channel indices and every offset: 32-bit in the re-balanced kernels (the smallest
  // grids, whose warps' fixed work outweighs their few steps), which bwd_cl_grid picks only where
  // they fit (offsets_fit_int32). H200, bf16 in a CUDA graph, the
  // 64-bit form alternated in one run: (1, 4096, 256) / (4, 2048, 128) / (1, 8192, 256) / (1,
  // 4096, 64) / (1, 16384, 128) 6.74-6.75 / 7.46-7.48 / 8.77-8.79 / 5.76 / 9.74-9.76 -> 6.67-6.71 /
  // 7.35-7.36 / 8.66-8.68 / 5.58 / 9.58-9.59 us, fp16 (1, 4096, 256) 7.42-7.44 -> 7.30-7.35; the
  // first load request moved from the 179th instruction to the 116th (sm_90; benchmarks/NOTES.md,
  // forty-second session). Their arguments are then BwdClArgs32 (one parameter line before the first
  // load request instead of two, a (channel, time, batch) grid without index divisions, the weights'
  // fields in the second line instead of a third), with the bias loaded beside the weights: the
  // first load request the 83rd instruction, and (ncu) 20 constant-cache stall samples of 568
  // against 43 of 605. Same GPU and form, alternated (peers/kb, forty-third session): bf16 (1, 4096,
  // 256) / (4, 2048, 128) / (1, 8192, 256) / (1, 4096, 64) / (8, 1024, 256) / (1, 16384, 128)
  // 6.76-6.80 / 7.27-7.31 / 8.54-8.61 / 5.13-5.15 / 9.54-9.55 / 9.05-9.08 -> 6.68-6.71 / 7.25-7.27 /
  // 8.46-8.52 / 5.02-5.06 / 9.42-9.49 / 8.93-8.98 us, fp16 (1, 4096, 256) 6.96-7.01 -> 6.53-6.59
  // (its bias had been loaded only after the weights were converted: two latencies in a row), fp32
  // unchanged (7.34-7.40).
  constexpr bool kIdx32 = kRow == kClRowRebalanced;
  static_assert(!kIdx32 || !kSeqIdx, "re-balanced grids are the wide blocks', which seq_idx does not take");
  using I = std::conditional_t<kIdx32, int32_t, int64_t>;
  // Until the first loads are requested, only g's leading fields are read (BwdClGrid, BwdClArgs32).
  uint32_t cb, tb, b;
  if constexpr (kIdx32) {
    cb = blockIdx.x, tb = blockIdx.y, b = blockIdx.z;
  } else {
    // (Divisions by the launch's counts as a multiply-high each: an integer division is ~20 issued
    // instructions, a short range's warp ~1200 in all.)
    const uint32_t rest = g.cblocks_div.div(blockIdx.x);
    cb = blockIdx.x - rest * g.cblocks;
    b = g.tblocks_div.div(rest), tb = rest - b * g.tblocks;
  }
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const I L = I(g.seqlen), D = I(g.dim);
  const T* xb = static_cast<const T*>(g.x) + I(b) * I(g.x_batch_stride);
  const T* gb = static_cast<const T*>(g.dout) + I(b) * I(g.dout_batch_stride);
  T* dxb = static_cast<T*>(g.dx) + I(b) * I(g.dx_batch_stride);
  // The states' batch rows, used only on the edge paths (computed there from the params, so no
  // register holds them across the walk). seq_idx never comes with states (the torch layer rejects
  // it).
  auto init_b = [&]() -> const T* {
    if (kSeqIdx || f.initial_states == nullptr) return nullptr;
    return static_cast<const T*>(f.initial_states) + int64_t(b) * f.init_batch_stride;
  };
  const bool want_dinit = !kSeqIdx && g.want_dinit;
  const bool want_dfin = !kSeqIdx && g.want_dfin;
  const I c0 = (I(cb) * kWarpSize + lane) * kC - misalignment<T, kC>(xb);
  const bool whole_c = c0 >= 0 && c0 + kC <= D;
  // Row t of a tensor at channel c0 (ls: its time stride): one 32-bit offset in the re-balanced
  // kernels; the others keep the 64-bit form.
  auto row_at = [&](auto* base, I t, int64_t ls) {
    if constexpr (kIdx32) {
      return base + (t * I(ls) + c0);
    } else {
      return base + t * ls + c0;
    }
  };
  // This warp's range [t_begin, t_end), walked from t_end - 1 down to t_lo.
  const I t_begin = (I(tb) * kWarps + warp) * g.steps;
  const I t_end = min(I(t_begin + g.steps), L);
  const I t_lo = t_begin == 0 && want_dinit ? I(-kHalo) : t_begin;
  const int n = t_end > t_lo ? int(t_end - t_lo) : 0;
  // Step s (t = t_end - 1 - s) loads x row t - kHalo (inside the tensor while s < n_x) and dout row
  // t (while s < n_g); its dx is one store when s < n_g, whole_c and, with dfinal_states, s >= s_fin.
  auto clamp_n = [&](I v) { return int(min(max(v, I(0)), I(n))); };
  const int n_x = clamp_n(t_end - kHalo);
  const int n_g = clamp_n(t_end);
  const int s_fin = want_dfin ? clamp_n(t_end - (L - kHalo)) : 0;
  // Launched overlapping the kernel before it (launch_overlapping): no memory access above.
  wait_prior_kernel();

  // The weights and bias, loaded once the window's rows (and on NVIDIA the first stages) are
  // requested: their conversion waits for them, and loaded first they put one more memory latency
  // in front of every warp's first data request (ncu, H200, (1, 4096, 256): the warps' first stall).
  float w[kWidth][kC], bias[kC];
  auto load_weights = [&] {
    if constexpr (kIdx32) {
      // Runs from g's second line, the bias's load issued with the weights' (kTogether: one memory
      // latency, not two in a row, in front of the window's dy); otherwise element by element from
      // p (what runs mean fills the strides: weight (dim, width) rows, a contiguous bias).
      if (whole_c && g.runs.w_run && (g.runs.b_run || g.bias == nullptr)) {
        const WeightArgs wa{g.weight, g.bias, DType(g.w_dtype), g.runs, kWidth, 1, 1};
        load_group_weights<kWidth, kC, true>(wa, g.runs, c0, w, bias);
      } else {
        load_edge_weights<kWidth, kC>(f, c0, D, w, bias);
      }
    } else if (whole_c) {
      load_group_weights<kWidth, kC>(g.wa, g.wa.runs, c0, w, bias);
    } else {
      load_edge_weights<kWidth, kC>(g.wa, c0, D, w, bias);
    }
  };

  using Row = Packed<T, kC>;
  auto x_row = [&](I t) {
    if (t >= 0 && t < L && whole_c) return load_packed<T, kC>(row_at(xb, t, g.x_l_stride));
    return load_row_edge<T, kC, kHalo>(xb, init_b(), L, D, g.x_l_stride, f.init_c_stride, f.init_l_stride, c0, t);
  };
  auto g_row = [&](I t) {
    if (t >= 0 && t < L && whole_c) return load_packed<T, kC>(row_at(gb, t, g.dout_l_stride));
    return load_row_edge<T, kC, kHalo>(gb, nullptr, L, D, g.dout_l_stride, 0, 0, c0, t);
  };
  // seq_idx: the mask byte of row t (bwd_common.h), 0 outside [0, L).
  const uint8_t* masks = nullptr;
  if constexpr (kSeqIdx) masks = seq_masks_of(p, g.ws, b);
  auto mask_at = [&](I t) -> uint32_t {
    if constexpr (kSeqIdx) {
      return t >= 0 && t < L ? masks[t] : 0u;
    } else {
      return 0u;
    }
  };
  // Bit k of a mask.
  auto bit = [](uint32_t m, int k) { return (m >> k) & 1u; };
  // dy of channel e from its dout and its kWidth inputs (already masked by seq_idx).
  auto dy_from = [&](auto e, float gq, const float (&xs)[kWidth]) {
    float y = bias[e];
    static_for<kWidth>([&](auto k) { y = fmaf(w[k][e], xs[k], y); });
    return kSilu ? dsilu_times(y, gq) : gq;
  };

  // What a step reads: x row t - kHalo and dout row t (and row t's seq_idx mask).
  struct Slot {
    Row x, g;
    uint32_t mk;
  };
  // The walk: steps [0, s_a) (dfinal_states rows) and [s_b, n) (x rows before 0, dinitial_states)
  // are generic; [s_a, s_b) loads and stores whole rows only, with `ring` steps loaded ahead.
  const int s_a = s_fin;
  const int s_b = whole_c ? max(n_x, s_a) : s_a;
  const int m = s_b - s_a;                                              // fast-range steps
  const T* x_next = row_at(xb, t_end - 1 - kHalo - s_a, g.x_l_stride);  // x row of the next load
  const T* g_next = row_at(gb, t_end - 1 - s_a, g.dout_l_stride);
  I t_next = t_end - 1 - s_a;  // dout row of the next load (for its mask)
  auto load = [&](Slot& sl) {
    sl.x = load_packed<T, kC>(x_next);
    sl.g = load_packed<T, kC>(g_next);
    sl.mk = kSeqIdx ? masks[t_next] : 0u;  // (t_next is inside [0, L) on the fast range)
    x_next -= I(g.x_l_stride);
    g_next -= I(g.dout_l_stride);
    --t_next;
  };
  Slot ring[kAsync > 0 ? 1 : kRing];
#if CAUSAL_CONV1D_BACKEND_CUDA
  // kAsync stages a warp, used in turn (the loop unrolled to a multiple of kAsync steps, so each
  // stage's address is a constant offset): each lane copies its own 4 bytes of an x and a dout
  // row and reads back only what it copied, so no barrier is needed. A stage is refilled after
  // the step read from it is computed (its values consumed); one commit group a step, empty past
  // the range, so cp_async_wait<kAsync - 1> always means "this step's rows have landed".
  __shared__ uint32_t stages[kAsync > 0 ? kWarps : 1][kAsync > 0 ? kAsync : 1][2][kWarpSize];
  // This lane's word of stage 0's x row (a shared-window address: stage j's rows at constant
  // offsets from it; sm_90, the prologue's 6 stages took ~150 instructions when each recomputed it).
  const uint32_t stage0 = shared_addr(&stages[warp][0][0][lane]);
  auto issue = [&](int j) {
    constexpr uint32_t kRowBytes = kWarpSize * sizeof(uint32_t);
    cp_async4(stage0 + j * 2 * kRowBytes, x_next);
    cp_async4(stage0 + (j * 2 + 1) * kRowBytes, g_next);
    x_next -= I(g.x_l_stride);
    g_next -= I(g.dout_l_stride);
  };
#endif
  // The first kAhead steps' rows. On NVIDIA the stages are filled before the window's rows are
  // loaded, so the two round trips overlap (a short range has few steps to hide them behind: H200,
  // (1, 4096, 256) in a CUDA graph at 4-step ranges 11.8 us against 12.4); the register ring is
  // filled after the window (its registers are not held while the window is built).
  // A range of at least kAhead steps (all but the shortest) fills every stage without a test.
  auto prologue = [&]() CC_INLINE_LAMBDA {
    if constexpr (kAsync > 0) {
#if CAUSAL_CONV1D_BACKEND_CUDA
      if (m >= kAhead) {
        static_for<kAhead>([&](auto j) {
          issue(decltype(j)::value);
          cp_async_commit();
        });
      } else {
        static_for<kAhead>([&](auto j) {
          if (j < m) issue(decltype(j)::value);
          cp_async_commit();
        });
      }
#endif
    } else {
      static_for<kAhead>([&](auto j) {
        if (j < m) load(ring[j]);
      });
    }
  };
  if constexpr (kAsync > 0) prologue();

  // The window: xw[j] = x row t - kHalo + 1 + j (packed, converted when used), dyw[i] = dy at
  // t + 1 + i. First for t = t_end - 1. Not for an empty range (n = 0: the grid's ranges past L,
  // which take no step below and add zeros to their block's partial).
  Row xw[kHalo];
  float dyw[kHalo][kC];
  if (n > 0) {
    Row ahead[kHalo], gah[kHalo];  // x and dout rows t_end .. t_end + kHalo - 1 (zeros past L)
    uint32_t mah[kHalo];           // their seq_idx masks
    if (whole_c && t_end >= kHalo) {
      // Inside the tensors, or running past L (a row's last range: zeros there, no load): running
      // row pointers, no index products, and every load issued before any is waited for. (The
      // last ranges took the element paths, 3 (width - 1) out-of-line calls in a row, each
      // waiting for its loads: ncu, H200, (1, 4096, 256), those warps held up their blocks'
      // partial at the barrier.)
      const T* xr = row_at(xb, t_end - kHalo, g.x_l_stride);
      const T* gr = row_at(gb, t_end, g.dout_l_stride);
      static_for<kHalo>([&](auto j) {
        xw[j] = load_packed<T, kC>(xr);
        xr += I(g.x_l_stride);
      });
      static_for<kHalo>([&](auto j) {
        static_for<Row::kWords>([&](auto i) { ahead[j].w[i] = gah[j].w[i] = 0; });
        if (t_end + j < L) {
          ahead[j] = load_packed<T, kC>(xr);
          gah[j] = load_packed<T, kC>(gr);
        }
        mah[j] = mask_at(t_end + j);
        xr += I(g.x_l_stride);
        gr += I(g.dout_l_stride);
      });
    } else {
      static_for<kHalo>([&](auto j) {
        xw[j] = x_row(t_end - kHalo + j);
        ahead[j] = x_row(t_end + j);
        gah[j] = g_row(t_end + j);
        mah[j] = mask_at(t_end + j);
      });
    }
    load_weights();
    // Rows t_end - kHalo .. t_end + kHalo - 1 as one window: r < kHalo from xw, the rest ahead.
    auto rx = [&](auto r, auto e) -> float {
      constexpr int kR = decltype(r)::value;
      if constexpr (kR < kHalo) {
        return packed_elem<T, decltype(e)::value>(xw[kR]);
      } else {
        return packed_elem<T, decltype(e)::value>(ahead[kR - kHalo]);
      }
    };
    static_for<kHalo>([&](auto i) {  // dy at t_end + i: rows t_end + i - kHalo .. t_end + i
      constexpr int kI = decltype(i)::value;
      static_for<kC>([&](auto e) {
        float xs[kWidth];
        static_for<kWidth>([&](auto k) {
          constexpr int kR = kI + decltype(k)::value;
          constexpr int kBack = kHalo - decltype(k)::value;  // rows before t_end + i
          xs[k] = rx(Idx<kR>{}, e);
          if constexpr (kSeqIdx && kBack > 0) {
            if (!bit(mah[kI], kBack - 1)) xs[k] = 0.0f;
          }
        });
        float d = dy_from(e, packed_elem<T, decltype(e)::value>(gah[i]), xs);
        if constexpr (kSeqIdx) {
          if (mah[kI] & kSeqPadBit) d = 0.0f;  // padding token (past L dout is 0 anyway)
        }
        dyw[i][e] = d;
      });
    });
  }

  constexpr int kSlide = -1;
  float acc[kWidth + 1][kC] = {};
  // Step s (t = t_end - 1 - s) from its rows. kEdge: its dx may not be one whole store (channels
  // past dim, dinitial_states rows, dfinal_states rows): a separate instantiation, so the fast loop
  // below holds no edge state and makes no calls.
  //
  // rot: kSlide moves the windows by one register each step; a phase 0 .. kHalo - 1 keeps them in
  // place and renames instead: logical entry j lives in register (phase + j) % kHalo, and the step
  // overwrites the oldest entry, so kHalo steps of phases 0, kHalo - 1, .., 1 end where they began.
  //
  // masked: the seq_idx masks apply (false also for a group of steps whose masks are all clean).
  auto step = [&](auto edge, auto masked, auto rot, int s, const Slot& cur, T* dx_row) CC_INLINE_LAMBDA {
    constexpr bool kEdge = decltype(edge)::value;
    constexpr bool kMasked = decltype(masked)::value;
    constexpr int kRot = decltype(rot)::value;
    constexpr int kPh = kRot == kSlide ? 0 : kRot;
    auto at = [](auto j) { return (kPh + decltype(j)::value) % kHalo; };
    const uint32_t m_t = cur.mk;  // seq_idx mask of row t
    float dy[kC], o[kC];
    PackedBuilder<T, kC> res;
    static_for<kC>([&](auto e) {
      constexpr int kE = decltype(e)::value;
      // Inputs x[t - kHalo + k]: k = 0 is the new row, the others the window.
      float xs[kWidth];
      static_for<kWidth>([&](auto k) {
        constexpr int kK = decltype(k)::value;
        if constexpr (kK == 0) {
          xs[k] = packed_elem<T, kE>(cur.x);
          if constexpr (kMasked) {
            if (!bit(m_t, kHalo - 1)) xs[k] = 0.0f;
          }
        } else {
          xs[k] = packed_elem<T, kE>(xw[at(Idx<kK - 1>{})]);
          if constexpr (kMasked && kK < kHalo) {  // row t - (kHalo - kK)
            if (!bit(m_t, kHalo - kK - 1)) xs[k] = 0.0f;
          }
        }
      });
      float d = dy_from(e, packed_elem<T, kE>(cur.g), xs);
      if constexpr (kMasked) {
        if (m_t & kSeqPadBit) d = 0.0f;  // padding token: constant output
      }
      dy[kE] = d;
      acc[kWidth][kE] += d;
      static_for<kWidth>([&](auto k) { acc[k][kE] = fmaf(d, xs[k], acc[k][kE]); });
      // dx[t]: outputs t + kHalo - k; k = kHalo is t itself, the others the dy window.
      float sum = w[kHalo][kE] * d;
      static_for<kHalo>([&](auto k) {
        constexpr int kI = kHalo - 1 - decltype(k)::value;  // dy at t + 1 + kI
        float dv = dyw[at(Idx<kI>{})][kE];
        if constexpr (kMasked) {
          if (!bit(m_t, kSeqReachShift + kI)) dv = 0.0f;  // row t + 1 + kI in t's sequence
        }
        sum = fmaf(w[k][kE], dv, sum);
      });
      if constexpr (kEdge) {
        o[kE] = sum;
      } else {
        res.template set<kE>(sum);
      }
    });
    if constexpr (!kEdge) {
      if constexpr (kC > 1) {
        store_packed<output_hint(kTune.nt_store)>(dx_row, res.out);
      } else {
        *dx_row = packed_raw<T, 0>(res.out);
      }
    } else if (s < n_g && whole_c && s >= s_fin) {
      if constexpr (kC > 1) {
        static_for<kC>([&](auto e) { res.template set<decltype(e)::value>(o[e]); });
        store_packed<output_hint(kTune.nt_store)>(dx_row, res.out);
      } else {
        *dx_row = from_float<T>(o[0]);
      }
    } else {
      Floats<kC> ov;
      static_for<kC>([&](auto e) { ov.v[e] = o[e]; });
      T* dinit = want_dinit ? static_cast<T*>(p.dinitial_states) + int64_t(b) * p.dinit_batch_stride : nullptr;
      const T* dfin = want_dfin ? static_cast<const T*>(p.dfinal_states) + int64_t(b) * p.dfinal_batch_stride : nullptr;
      store_row_edge<T, kC, kHalo>(dxb, g.dx_l_stride, dinit, p.dinit_c_stride, p.dinit_l_stride, dfin,
                                   p.dfinal_c_stride, p.dfinal_l_stride, L, D, c0, t_end - 1 - s, ov);
    }
    // The windows to t - 1.
    if constexpr (kRot != kSlide) {
      constexpr int kOld = (kPh + kHalo - 1) % kHalo;  // the oldest entry's register: the new entry 0
      xw[kOld] = cur.x;
      static_for<kC>([&](auto e) { dyw[kOld][e] = dy[e]; });
      return;
    }
    static_for<kHalo>([&](auto i) {
      constexpr int kI = kHalo - 1 - decltype(i)::value;  // from the top down
      if constexpr (kI > 0) {
        xw[kI] = xw[kI - 1];
        static_for<kC>([&](auto e) { dyw[kI][e] = dyw[kI - 1][e]; });
      } else {
        xw[0] = cur.x;
        static_for<kC>([&](auto e) { dyw[0][e] = dy[e]; });
      }
    });
  };
  auto dx_at = [&](int s) { return row_at(dxb, t_end - 1 - s, g.dx_l_stride); };
  // Steps with an edge (any row or store that is not whole), one at a time.
  auto generic = [&](int s_begin, int s_stop) CC_INLINE_LAMBDA {
    for (int s = s_begin; s < s_stop; ++s) {
      const I t = t_end - 1 - s;
      const Slot cur{x_row(t - kHalo), g_row(t), mask_at(t)};
      step(BoolC<true>{}, BoolC<kSeqIdx>{}, IntC<kSlide>{}, s, cur, dx_at(s));
    }
  };
  generic(0, s_a);
  {
    if constexpr (kAsync == 0) prologue();
    T* dx_row = dx_at(s_a);
    // The fast loop takes its steps in groups of kG: kU (below) when it renames, kAhead otherwise.
    constexpr int kU = kHalo % kAhead == 0 ? kHalo : kAhead % kHalo == 0 ? kAhead : kAhead * kHalo;
    constexpr int kG = kRename ? kU : kAhead;
    [[maybe_unused]] uint32_t clean_groups = 0;  // bit i: group i is clean (below)
#if CAUSAL_CONV1D_BACKEND_CUDA
    // The staged loop's seq_idx masks: group i's kG bytes (steps i kG .. i kG + kG - 1) in one
    // 8-byte word of shared memory, copied from the workspace by the whole warp before the loop (no
    // lane has left it yet: lanes whose channels end mid-warp skip the loop), so a group takes its
    // masks with one load off the steps' path. A group is clean when each of its rows has every tap
    // and reach bit of this width and is no padding: its steps compute what unmasked steps do. The
    // masks are a row's, so a group is clean for every lane of the warp or for none, and runs of
    // clean groups take a loop without the masks (below).
    // H200, bf16 (8, 4096, 4096) with 8 sequences a row, against 244.5 us without seq_idx: a byte a
    // step from the workspace (an L1 hit on the step's path) 281.2 us; the group words, every step
    // masked 270.0 (+10%: 538 instructions for 6 steps against 393); clean groups unmasked, by a
    // branch in each iteration 271.6 (the loop holding both copies reloaded 7 spilled registers
    // an iteration), in their own loop 247.4 (444 instructions, no spills in the loops). With 64
    // sequences a row (a boundary every 64 rows) 257.4 against 244.5.
    constexpr bool kGroupMasks = kSeqIdx && kAsync > 0;
    constexpr int kGroups = kGroupMasks ? (kTune.max_steps + kG - 1) / kG : 1;
    static_assert(!kGroupMasks || kG <= 8, "a group's masks are one 8-byte word");
    static_assert(kGroups <= kWarpSize, "a lane a group");
    __shared__ uint64_t group_masks[kGroupMasks ? kWarps : 1][kGroups];
    if constexpr (kGroupMasks) {
      constexpr uint64_t kCleanBits = (1u << kHalo) - 1u | ((1u << kHalo) - 1u) << kSeqReachShift;
      auto bytes = [](uint64_t v) {  // v in each of a group's bytes
        uint64_t r = 0;
        for (int k = 0; k < kG; ++k) r |= v << (8 * k);
        return r;
      };
      const int i = lane;
      uint64_t v = 0;
      if (i < kGroups) {
        for (int k = 0; k < kG; ++k) {
          const int64_t t = t_end - 1 - s_a - (i * kG + k);
          if (t >= t_begin) v |= uint64_t(masks[t]) << (8 * k);
        }
        group_masks[warp][i] = v;
      }
      const bool clean = i < kGroups && (v & bytes(kCleanBits | kSeqPadBit)) == bytes(kCleanBits);
      clean_groups = __ballot_sync(0xffffffffu, clean);
      __syncwarp();
    }
    // The masks of the group starting at step r0 (a multiple of kG).
    auto group_at = [&](int r0) -> uint64_t {
      if constexpr (kGroupMasks) {
        return group_masks[warp][r0 / kG];
      } else {
        return 0;
      }
    };
#else
    constexpr bool kGroupMasks = false;
    auto group_at = [](int) -> uint64_t { return 0; };
#endif
    // kWhole: the row this step refills its slot with is known to be inside the range (no check).
    // gm: the masks of the group of step r, whose index in it is j % kG (staged loop only).
    // masked: as step's (kSeqIdx unless the group is clean).
    auto fast = [&](auto whole, auto masked, auto j, auto rot, int r, uint64_t gm) CC_INLINE_LAMBDA {
      constexpr bool kWhole = decltype(whole)::value;
      constexpr int kJ = decltype(j)::value % kAhead;
      if constexpr (kAsync > 0) {
#if CAUSAL_CONV1D_BACKEND_CUDA
        cp_async_wait<kAsync - 1>();
        Slot cur;
        cur.x.w[0] = stages[warp][kJ][0][lane];  // (one word: kAsync needs 4-byte rows)
        cur.g.w[0] = stages[warp][kJ][1][lane];
        cur.mk = decltype(masked)::value ? uint32_t(gm >> (8 * (decltype(j)::value % kG))) & 0xffu : 0u;
        step(BoolC<false>{}, masked, rot, s_a + r, cur, dx_row);
        if (kWhole || r + kAsync < m) issue(kJ);
        cp_async_commit();
#endif
      } else {
        const Slot cur = ring[kJ];
        if (kWhole || r + kRing < m) load(ring[kJ]);
        step(BoolC<false>{}, masked, rot, s_a + r, cur, dx_row);
      }
      dx_row -= I(g.dx_l_stride);
    };
    if constexpr (kRename) {
      // kU steps an iteration bring the ring and the renamed windows back to their first
      // registers (the least common multiple of kAhead and kHalo); the last m % kU steps slide.
      // On NVIDIA, iterations whose refills all lie inside the range run without the bound check,
      // then the last ones with it (sm_90: 393 instructions for 6 steps against 450 with the
      // check, which also kept pointer pairs and strides reloaded in the loop; H200 bf16 (1, 8192,
      // 16384) / (4, 5376, 8192) / (8, 4096, 4096) 77.0 / 78.4 / 77.0% of copy against 75.1 / 76.5 /
      // 74.9). Not with the register ring (AMD): the second copy of the loop spills 2 VGPRs on
      // gfx942 at its 5 waves, and it is unmeasured on AMD hardware.
      // With the group masks (seq_idx), those iterations run in runs of clean groups (no masks)
      // and runs of the others, each run in its own loop.
      auto iteration = [&](auto whole, auto masked, int r0) CC_INLINE_LAMBDA {
        const uint64_t gm = decltype(masked)::value ? group_at(r0) : 0;
        static_for<kU>([&](auto j) {
          constexpr int kJ = decltype(j)::value;
          fast(whole, masked, j, IntC<(kHalo - kJ % kHalo) % kHalo>{}, r0 + kJ, gm);
        });
      };
      int r0 = 0;
      if constexpr (kGroupMasks) {
        auto is_clean = [&](int r) { return (clean_groups >> (r / kG)) & 1u; };
        while (r0 + kU + kAhead <= m) {
          if (is_clean(r0)) {
            do {
              iteration(BoolC<true>{}, BoolC<false>{}, r0);
              r0 += kU;
            } while (r0 + kU + kAhead <= m && is_clean(r0));
          } else {
            do {
              iteration(BoolC<true>{}, BoolC<true>{}, r0);
              r0 += kU;
            } while (r0 + kU + kAhead <= m && !is_clean(r0));
          }
        }
      } else if constexpr (kAsync > 0) {
        for (; r0 + kU + kAhead <= m; r0 += kU) iteration(BoolC<true>{}, BoolC<kSeqIdx>{}, r0);
      }
      for (; r0 + kU <= m; r0 += kU) iteration(BoolC<false>{}, BoolC<kSeqIdx>{}, r0);
      if (r0 < m) {
        const uint64_t gm = group_at(r0);
        static_for<kU - 1>([&](auto j) {
          if (r0 + j < m) fast(BoolC<false>{}, BoolC<kSeqIdx>{}, j, IntC<kSlide>{}, r0 + j, gm);
        });
      }
    } else {
      for (int r0 = 0; r0 < m; r0 += kAhead) {
        const uint64_t gm = group_at(r0);
        static_for<kAhead>([&](auto j) {
          if (r0 + j < m) fast(BoolC<false>{}, BoolC<kSeqIdx>{}, j, IntC<kSlide>{}, r0 + j, gm);
        });
      }
    }
  }
  generic(s_b, n);

  // One partial per block and channel: the warps' sums meet in LDS, each (tap, channel) sum added
  // in warp order (deterministic) by one warp, the warps taking them in turn. (Warp 0 adding all of
  // them, 70 LDS loads and adds at width 4 for 16-bit, held up each block's end: the wide blocks'
  // 8 warps.)
  static_for<kWidth + 1>([&](auto k) { static_for<kC>([&](auto e) { red[warp][k][e][lane] = acc[k][e]; }); });
  __syncthreads();
  // One vector atomic for a channel's dweight taps where that is measured to pay (above).
  if constexpr (kVectorAtomics && kWidth == 4 && kC == 2) {
    if (!p.deterministic && p.dweight_w_stride == 1 && p.dweight_c_stride % 4 == 0 &&
        reinterpret_cast<uintptr_t>(p.dweight) % 16 == 0) {
      add_block_partial4<kWarps>(red, p.dweight, p.dweight_c_stride, p.dbias, p.dbias_stride, c0, D, warp, lane);
      return;
    }
  }
  auto time_blocks = [&]() -> int64_t {
    if constexpr (kIdx32) {
      return gridDim.y;
    } else {
      return g.tblocks;
    }
  };
  for (int q = warp; q < (kWidth + 1) * kC; q += kWarps) {
    const int k = q / kC, e = q - k * kC;
    const int64_t ch = c0 + e;
    if (ch < 0 || ch >= D) continue;
    float total = red[0][k][e][lane];
    for (int v = 1; v < kWarps; ++v) total += red[v][k][e][lane];
    emit_partial_term<kWidth>(p, int64_t(b) * time_blocks() + tb, ch, k, total);
  }
}

}  // namespace

namespace {

constexpr int64_t kMaxGridYZ = 65535;  // a launch's grid y and z (CUDA and HIP)

// Whether the re-balanced kernels' 32-bit indices (BwdClArgs32) hold every time and channel index
// and every offset into x, dout and dx: a batch row's offset (b * batch stride, to batch - 1) and,
// added to the pointer separately, a row's (t * time stride + channel, time rows from 2 (width - 1)
// before 0, a range's first load with dfinal_states at seqlen 1, to seqlen; channels to dim plus the
// span of a warp's lanes past it, whose row pointers are formed too); bounded here by their sum.
// And whether their grid's z holds the batch.
bool offsets_fit_int32(const BwdParams& p) {
  const FwdParams& f = p.f;
  if (f.seqlen > INT32_MAX / 2 || f.dim > INT32_MAX / 2 || f.batch > kMaxGridYZ) return false;
  constexpr int64_t kPastDim = 256;                   // > a warp's channels (at most 64 lanes x 2)
  const int64_t room = INT32_MAX - f.dim - kPastDim;  // for the batch and time offsets
  const int64_t strides[3][2] = {
      {f.x_batch_stride, f.x_l_stride}, {p.dout_batch_stride, p.dout_l_stride}, {p.dx_batch_stride, p.dx_l_stride}};
  for (const auto& st : strides) {
    const int64_t bs = st[0], ls = st[1];
    if (bs < 0 || ls < 0 || ls > room / (f.seqlen + 2 * kMaxWidth)) return false;
    const int64_t rows = ls * (f.seqlen + 2 * kMaxWidth);
    if (f.batch > 1 && bs > (room - rows) / (f.batch - 1)) return false;
  }
  return true;
}

}  // namespace

BwdClGrid bwd_cl_grid(const BwdParams& p, const DeviceDesc& dev) {
  const FwdParams& f = p.f;
  const BwdClTuning tune = bwd_cl_tuning(dev.family);
  const int es = dtype_size(f.x_dtype);
  const int kc_full = kBwdClBytes / es;
  // Vectors need one channel peel valid for every (batch, time) row of x, dout and dx: the same
  // misalignment, and batch / time strides that are multiples of the vector.
  const bool vec =
      same_vector_phase(f.x, p.dout, es, kc_full, {f.x_batch_stride, f.x_l_stride},
                        {p.dout_batch_stride, p.dout_l_stride}) &&
      same_vector_phase(f.x, p.dx, es, kc_full, {f.x_batch_stride, f.x_l_stride}, {p.dx_batch_stride, p.dx_l_stride}) &&
      multiple_of(f.x_batch_stride, kc_full) && multiple_of(f.x_l_stride, kc_full);
  const bool aligned = vec && reinterpret_cast<uintptr_t>(f.x) % (es * kc_full) == 0;
  BwdClGrid g{};
  g.x = f.x;
  g.dout = p.dout;
  g.dx = p.dx;
  g.x_batch_stride = f.x_batch_stride;
  g.x_l_stride = f.x_l_stride;
  g.dout_batch_stride = p.dout_batch_stride;
  g.dout_l_stride = p.dout_l_stride;
  g.dx_batch_stride = p.dx_batch_stride;
  g.dx_l_stride = p.dx_l_stride;
  g.seqlen = f.seqlen;
  g.dim = f.dim;
  g.want_dinit = p.dinitial_states != nullptr;
  g.want_dfin = p.dfinal_states != nullptr;
  g.kc = vec ? kc_full : 1;
  const int wave = dev.wave_size;
  int warps = tune.threads / wave;
  const int64_t span = f.dim + (g.kc > 1 && !aligned ? g.kc - 1 : 0);
  const int64_t groups = (span + g.kc - 1) / g.kc;
  const int64_t cblocks = (groups + wave - 1) / wave;
  // The longest ranges that still give every CU min_blocks_per_cu blocks (short rows and small
  // batches otherwise leave most of the device idle); at least min_steps a range.
  const int64_t max_steps = es == 4 ? tune.max_steps_fp32 : tune.max_steps;
  int64_t steps = max_steps;
  auto tblocks = [&](int64_t st) { return std::max<int64_t>(1, (f.seqlen + st * warps - 1) / (st * warps)); };
  while (steps > tune.min_steps && f.batch * cblocks * tblocks(steps) < int64_t(tune.min_blocks_per_cu) * dev.cu_count)
    steps /= 2;
  // Shortened ranges: the wide blocks where the table has them (not the seq_idx kernels), the
  // same ranges in fewer, larger blocks.
  g.wide = steps < max_steps && tune.wide_threads > 0 && f.seq_idx == nullptr;
  g.threads = g.wide ? tune.wide_threads : tune.threads;
  warps = g.threads / wave;
  // Ranges shortened to the floor (the smallest grids): re-balanced over as many wide blocks as
  // keep the grid within wide_blocks_per_cu a CU, at least wide_min_steps a range (tuning.h),
  // by kernels with 32-bit indices where those hold them (small grids are small rows).
  if (g.wide && steps <= tune.min_steps && tune.wide_blocks_per_cu > 0 && offsets_fit_int32(p)) {
    const int64_t cap = std::max<int64_t>(1, int64_t(tune.wide_blocks_per_cu) * dev.cu_count / (f.batch * cblocks));
    const int64_t most =
        std::max<int64_t>(1, (f.seqlen + tune.wide_min_steps * warps - 1) / (tune.wide_min_steps * warps));
    const int64_t tb = std::min(cap, most);
    const int64_t st = std::min<int64_t>(max_steps, (f.seqlen + tb * warps - 1) / (tb * warps));
    if (tblocks(st) <= kMaxGridYZ && cblocks <= INT32_MAX) {  // (the grid's y and x)
      steps = st;
      g.rebalanced = true;
    }
  }
  g.cblocks = static_cast<uint32_t>(std::min<int64_t>(cblocks, UINT32_MAX));
  g.tblocks = static_cast<uint32_t>(std::min<int64_t>(tblocks(steps), UINT32_MAX));
  // (Exact for the block indices below 2^31 the launcher allows; past that it refuses the grid.)
  g.cblocks_div = DivU32::make(static_cast<uint32_t>(std::min<int64_t>(cblocks, int64_t(1) << 31)));
  g.tblocks_div = DivU32::make(static_cast<uint32_t>(std::min<int64_t>(tblocks(steps), int64_t(1) << 31)));
  g.steps = static_cast<int32_t>(steps);
  g.blocks = f.batch * tblocks(steps) * cblocks;
  g.slots = f.batch * tblocks(steps);
  g.ws = bwd_workspace_layout(p, g.slots);
  // Weight and bias runs: every thread's first channel a multiple of kc (aligned rows or the
  // element path).
  g.wa = weight_args(f, (aligned || g.kc == 1) ? weight_runs(f, g.kc) : WeightRuns{false, false});
  return g;
}

namespace {

// The re-balanced kernels' parameter from their grid (g.rebalanced: offsets_fit_int32 held).
static_assert(bwd_cl_tuning(ArchFamily::kNvidia).max_steps <= UINT16_MAX &&
                  bwd_cl_tuning(ArchFamily::kRdna4).max_steps <= UINT16_MAX &&
                  bwd_cl_tuning(ArchFamily::kRdna3).max_steps <= UINT16_MAX &&
                  bwd_cl_tuning(ArchFamily::kCdna).max_steps <= UINT16_MAX,
              "a range's steps fit BwdClArgs32");
BwdClArgs32 rebalanced_args(const BwdClGrid& g, const BwdParams& p) {
  const FwdParams& f = p.f;
  BwdClArgs32 a{};
  a.steps = static_cast<uint16_t>(g.steps);
  a.want_dinit = g.want_dinit, a.want_dfin = g.want_dfin;
  a.runs = g.wa.runs;
  a.w_dtype = static_cast<uint8_t>(f.w_dtype);
  a.seqlen = static_cast<int32_t>(f.seqlen), a.dim = static_cast<int32_t>(f.dim);
  a.x_batch_stride = static_cast<int32_t>(f.x_batch_stride), a.x_l_stride = static_cast<int32_t>(f.x_l_stride);
  a.dout_batch_stride = static_cast<int32_t>(p.dout_batch_stride);
  a.dout_l_stride = static_cast<int32_t>(p.dout_l_stride);
  a.x = f.x, a.dout = p.dout;
  a.weight = f.weight, a.bias = f.bias;
  a.dx = p.dx;
  a.dx_batch_stride = static_cast<int32_t>(p.dx_batch_stride), a.dx_l_stride = static_cast<int32_t>(p.dx_l_stride);
  return a;
}

}  // namespace

int launch_bwd_channel_last(const BwdParams& p, const DeviceDesc& dev, Stream stream) {
  const FwdParams& f = p.f;
  const BwdClGrid g = bwd_cl_grid(p, dev);
  if (g.blocks > INT_MAX) return kErrInvalidParams;
  if (const int status = launch_bwd_seq_masks(p, g.ws, dev, stream); status != kSuccess) return status;
  return dispatch_dtype(f.x_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return dispatch_width(f.width, [&](auto W) {
      return dispatch_bool(g.kc > 1, [&](auto V) {
        constexpr int kC = decltype(V)::value ? kBwdClVec<T> : 1;
        return dispatch_bool(f.silu, [&](auto S) {
          auto launch = [&](auto Q, auto Wide) {
            constexpr int kRow = decltype(Wide)::value;
            auto* kernel =
                bwd_channel_last_kernel<T, decltype(W)::value, kC, decltype(S)::value, decltype(Q)::value, kRow>;
            const dim3 block(static_cast<unsigned>(g.threads));
            if constexpr (kRow == kClRowRebalanced) {
              const dim3 grid(g.cblocks, g.tblocks, static_cast<unsigned>(f.batch));
              return launch_overlapping(kernel, grid, block, stream, rebalanced_args(g, p), p);
            } else {
              return launch_overlapping(kernel, dim3(static_cast<unsigned>(g.blocks)), block, stream, g, p);
            }
          };
          if (f.seq_idx != nullptr) return launch(BoolC<true>{}, IntC<kClRowPlain>{});
#if CAUSAL_CONV1D_BACKEND_CUDA  // (only NVIDIA's row has wide blocks: AMD builds compile none)
          if (g.rebalanced) return launch(BoolC<false>{}, IntC<kClRowRebalanced>{});
          if (g.wide) return launch(BoolC<false>{}, IntC<kClRowWide>{});
#endif
          return launch(BoolC<false>{}, IntC<kClRowPlain>{});
        });
      });
    });
  });
}

}  // namespace causal_conv1d::gpu
