// The serving API on the GPU (semantics: csrc/include/causal_conv1d/serving.h), first version.
//
// Nothing here reads metadata on the host: every grid is sized from shapes, and sequences are found
// on the device.
//
// Prefill. Each sequence is cut into chunks of `chunk` tokens (tuning.h); a block row takes one
// chunk of one sequence. serving_plan_kernel (one block) first writes, for every sequence, the
// index of its first chunk among all chunks (an exclusive scan of the chunk counts) into a
// workspace; a block row binary-searches it for its sequence. The grid has batch +
// ceil(total_tokens / chunk) rows, which bounds the chunk count of any split of total_tokens into
// batch sequences; rows past the last chunk exit. Thread c of a block owns channel c: consecutive
// threads read consecutive channels of a token row (vLLM's x keeps dim contiguous), and each thread
// walks its chunk's tokens with the width - 1 previous inputs in registers, reading the halo
// before the chunk from x (or, in the first chunk, from the initial window: the tokens whose window
// reaches before the sequence all lie in the first chunk, chunk >= width - 1). The cache writes
// (final window, prefix-caching block windows) depend on x and the initial window only and come
// from serving_fwd_states_kernel, launched after it: every initial window has been read by then,
// so a line that is both read and written (in_line == out_line) needs no ordering inside a kernel.
//
// Decode. Thread c of block (cx, row) owns channel c of one row (serving_update_kernel), or, when x
// keeps dim contiguous as vLLM lays it out and the cache keeps dim contiguous too (or each channel's
// state, with state_len = width - 1), kServingVecBytes of channels (kServingNarrowVecBytes on grids
// smaller than the device; serving_update_vec_kernel): it
// reads the row's window into registers, writes the new state from them and from x, and computes
// the outputs into x in place (each token is read before its output replaces it).
//
// Padded and invalid entries (serving_fwd_row / serving_update_row) get zero outputs and no state
// access; invalid offsets are clamped into x: an unvalidated call never touches memory outside its
// tensors.
#include <algorithm>

#include "causal_conv1d/block_prims.h"
#include "causal_conv1d/dispatch.h"
#include "causal_conv1d/gpu.h"
#include "kernel_utils.h"
#include "tuning.h"

namespace causal_conv1d::gpu {

namespace {

// first_work[i] = sum over j < i of ceil(len_j / chunk), first_work[batch] = the total.
__global__ void __launch_bounds__(kServingPlanThreads)
    serving_plan_kernel(ServingFwdParams p, int chunk, int32_t* first_work) {
  using Scan = blockprim::BlockScan<int32_t, kServingPlanThreads>;
  __shared__ typename Scan::TempStorage scratch;
  wait_prior_kernel();  // launched overlapping the kernel before it: no memory access above
  int32_t carry = 0;
  for (int64_t base = 0; base < p.batch; base += kServingPlanThreads) {
    const int64_t i = base + threadIdx.x;
    int32_t chunks = 0;
    if (i < p.batch) {
      int64_t start, len;
      serving_token_range(p.query_start_loc, i, p.total_tokens, &start, &len);
      chunks = static_cast<int32_t>((len + chunk - 1) / chunk);
    }
    int32_t before, sum;
    Scan(scratch).ExclusiveSum(chunks, before, sum);
    if (i < p.batch) first_work[i] = carry + before;
    carry += sum;
    __syncthreads();  // scratch is reused by the next tile
  }
  if (threadIdx.x == 0) first_work[p.batch] = carry;
}

// The sequence i with first_work[i] <= work < first_work[i + 1] (empty sequences have no work).
__device__ __forceinline__ int64_t work_sequence(const int32_t* first_work, int64_t batch, int64_t work) {
  int64_t lo = 0, hi = batch;
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    if (first_work[mid] <= work) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// Weights and bias of channel c as floats.
template <int kWidth, typename Params>
__device__ __forceinline__ void channel_weights(const Params& p, int64_t c, float (&w)[kWidth], float& bias) {
  bias = 0.0f;
  with_dtype(p.w_dtype, [&](auto tag) {
    using WT = typename decltype(tag)::type;
    const WT* wp = static_cast<const WT*>(p.weight);
    static_for<kWidth>([&](auto k) { w[k] = to_float(wp[c * p.weight_c_stride + k * p.weight_w_stride]); });
    if (p.bias != nullptr) bias = to_float(static_cast<const WT*>(p.bias)[c * p.bias_stride]);
  });
}

// The vector kernels' pieces. kC zeros (the outputs of a padded sequence or row).
template <typename T, int kC>
__device__ __forceinline__ Packed<T, kC> packed_zeros() {
  PackedBuilder<T, kC> zero;
  static_for<kC>([&](auto e) { zero.template set<decltype(e)::value>(0.0f); });
  return zero.out;
}

// One token's kC outputs from its inputs `cur` and the window of the kWidth - 1 tokens before it.
template <typename T, int kWidth, int kC, bool kSilu>
__device__ __forceinline__ Packed<T, kC> conv_token(const float (&w)[kWidth][kC], const float (&bias)[kC],
                                                    const Packed<T, kC> (&win)[kWidth - 1], const Packed<T, kC>& cur) {
  constexpr int kHalo = kWidth - 1;
  PackedBuilder<T, kC> res;
  static_for<kC>([&](auto e) {
    constexpr int kE = decltype(e)::value;
    float acc = fmaf(w[kHalo][kE], packed_elem<T, kE>(cur), bias[kE]);
    static_for<kHalo>([&](auto k) { acc = fmaf(w[k][kE], packed_elem<T, kE>(win[k]), acc); });
    res.template set<kE>(kSilu ? silu_to<T>(acc) : acc);
  });
  return res.out;
}

// The window moves on by one token: `cur` enters last.
template <typename T, int kHalo, int kC>
__device__ __forceinline__ void shift_window(Packed<T, kC> (&win)[kHalo], const Packed<T, kC>& cur) {
  static_for<kHalo>([&](auto k) {
    if constexpr (decltype(k)::value + 1 < kHalo) {
      win[k] = win[k + 1];
    } else {
      win[k] = cur;
    }
  });
}

template <typename T, int kWidth, bool kSilu>
__global__ void CC_LAUNCH_BOUNDS(serving_fwd_tuning(kTargetFamily))
    serving_fwd_kernel(ServingFwdParams p, const int32_t* first_work) {
  constexpr ServingFwdTuning kTune = serving_fwd_tuning(kTargetFamily);
  constexpr int kHalo = kWidth - 1;
  static_assert(kTune.chunk >= kHalo, "a sequence's first chunk must hold every token that reads its initial window");
  const int64_t c = int64_t(blockIdx.x) * kTune.threads + threadIdx.x;
  if (c >= p.dim) return;
  wait_prior_kernel();  // launched overlapping the kernel before it: no memory access above
  float w[kWidth], bias;
  channel_weights<kWidth>(p, c, w, bias);
  const int64_t sl = p.state_l_stride;
  const int64_t xs = p.x_l_stride;

  const int32_t total_work = first_work[p.batch];
  for (int64_t work = blockIdx.y; work < total_work; work += gridDim.y) {
    const int64_t i = work_sequence(first_work, p.batch, work);
    const int64_t t0 = (work - first_work[i]) * kTune.chunk;
    const ServingRow r = serving_fwd_row(p, i);
    const int64_t t1 = min(t0 + int64_t(kTune.chunk), r.len);
    const T* x = static_cast<const T*>(p.x) + r.start * xs + c * p.x_c_stride;
    T* out = static_cast<T*>(p.out) + r.start * p.out_l_stride + c * p.out_c_stride;
    if (r.skip) {
      for (int64_t t = t0; t < t1; ++t) out[t * p.out_l_stride] = from_float<T>(0.0f);
      continue;
    }

    // The window before t0: the initial window (or zeros) in the first chunk, x's tokens in the
    // others.
    float win[kWidth];
    if (t0 == 0) {
      static_for<kHalo>([&](auto k) { win[k] = 0.0f; });
      if (p.has_initial_state && p.has_initial_state[i * p.his_stride]) {
        const T* in = static_cast<const T*>(p.conv_states) + r.in_line * p.state_line_stride + c * p.state_c_stride;
        static_for<kHalo>([&](auto k) { win[k] = to_float(in[int64_t(k) * sl]); });
      }
    } else {
      static_for<kHalo>([&](auto k) { win[k] = to_float(x[(t0 - kHalo + int64_t(k)) * xs]); });
    }
#pragma unroll 2
    for (int64_t t = t0; t < t1; ++t) {
      win[kHalo] = to_float(x[t * xs]);
      float acc = bias;
      static_for<kWidth>([&](auto k) { acc += w[k] * win[k]; });
      out[t * p.out_l_stride] = from_float<T>(kSilu ? silu_to<T>(acc) : acc);
      static_for<kHalo>([&](auto k) { win[k] = win[k + 1]; });
    }
  }
}

// The prefill's vector path: x and out keep dim contiguous (vLLM's layout) with token pitches
// that are multiples of kC = kServingVecBytes / sizeof(T), and dim is a multiple of kC. A thread
// owns kC consecutive channels, so a warp reads and writes contiguous runs of a token row (the
// scalar kernel above moves 2 bytes a lane for 16-bit data), and loads `ring` rows ahead of the one
// it computes (on NVIDIA `l2_ahead` more prefetched to L2), as the channel-last forward does. Work
// items, windows and padding as above.
template <typename T, int kWidth, int kC, bool kSilu>
__global__ void CC_LAUNCH_BOUNDS(serving_fwd_tuning(kTargetFamily))
    serving_fwd_vec_kernel(ServingFwdParams p, WeightRuns runs, const int32_t* first_work) {
  constexpr ServingFwdTuning kTune = serving_fwd_tuning(kTargetFamily);
  constexpr int kHalo = kWidth - 1;
  constexpr int kRing = kTune.ring;
  constexpr int kL2Ahead = checked_l2_ahead<kTune.l2_ahead>();
  static_assert(kTune.chunk >= kHalo, "a sequence's first chunk must hold every token that reads its initial window");
  using Data = Packed<T, kC>;
  wait_prior_kernel();  // launched overlapping the kernel before it: no memory access above
  const int64_t c0 = (int64_t(blockIdx.x) * kTune.threads + threadIdx.x) * kC;
  if (c0 >= p.dim) return;
  float w[kWidth][kC], bias[kC];
  load_group_weights<kWidth, kC>(p, runs, c0, w, bias);
  const int64_t xs = p.x_l_stride, os = p.out_l_stride;

  const int32_t total_work = first_work[p.batch];
  for (int64_t work = blockIdx.y; work < total_work; work += gridDim.y) {
    const int64_t i = work_sequence(first_work, p.batch, work);
    const int64_t t0 = (work - first_work[i]) * kTune.chunk;
    const ServingRow r = serving_fwd_row(p, i);
    const int n = int(min(t0 + int64_t(kTune.chunk), r.len) - t0);
    const T* x = static_cast<const T*>(p.x) + r.start * xs + c0;
    T* o_row = static_cast<T*>(p.out) + (r.start + t0) * os + c0;
    if (r.skip) {
      const Data zero = packed_zeros<T, kC>();
      for (int s = 0; s < n; ++s) store_packed<output_hint(kTune.nt_store)>(o_row + s * os, zero);
      continue;
    }
    // The window before t0, packed like the loads: the initial window (or zeros) in the first
    // chunk, read channel by channel (any cache layout), x's tokens in the others.
    Data win[kHalo];
    if (t0 == 0) {
      const bool init = p.has_initial_state && p.has_initial_state[i * p.his_stride];
      const T* in = static_cast<const T*>(p.conv_states) + r.in_line * p.state_line_stride + c0 * p.state_c_stride;
      static_for<kHalo>([&](auto k) {
        PackedBuilder<T, kC> b;
        static_for<kC>([&](auto e) {
          b.template set<decltype(e)::value>(
              init ? to_float(in[int64_t(e) * p.state_c_stride + int64_t(k) * p.state_l_stride]) : 0.0f);
        });
        win[k] = b.out;
      });
    } else {
      static_for<kHalo>([&](auto k) { win[k] = load_packed<T, kC>(x + (t0 - kHalo + int64_t(k)) * xs); });
    }
    Data ring[kRing];
    static_for<kRing>([&](auto j) {
      if (j < n) ring[j] = load_packed<T, kC>(x + (t0 + j) * xs);
    });
    const T* x_next = x + (t0 + kRing) * xs;
    // Rows past the ring (inside the chunk) asked of L2: no registers held until they are loaded.
    if constexpr (kL2Ahead > 0) {
      for (int j = kRing; j < kRing + kL2Ahead && j < n; ++j) prefetch_l2(x + (t0 + j) * xs);
    }
    // Not unrolled further: unrolled, nvcc spilled 12 bytes in the bf16 width-4 kernel at 64
    // registers (sm_90).
#pragma unroll 1
    for (int s0 = 0; s0 < n; s0 += kRing) {
      static_for<kRing>([&](auto j) {
        const int s = s0 + j;
        if (s >= n) return;
        const Data cur = ring[j];
        if (s + kRing < n) {
          ring[j] = load_packed<T, kC>(x_next);
          if constexpr (kL2Ahead > 0) {
            if (s + kRing + kL2Ahead < n) prefetch_l2(x_next + kL2Ahead * xs);
          }
          x_next += xs;
        }
        store_packed<output_hint(kTune.nt_store)>(o_row, conv_token<T, kWidth, kC, kSilu>(w, bias, win, cur));
        o_row += os;
        shift_window(win, cur);
      });
    }
  }
}

// The prefill's cache writes, after serving_fwd_kernel (stream order: every initial window has
// been read): thread c of block (cx, i) writes, for channel c of sequence i, the window before each
// block boundary inside the chunk (prefix caching) and the final window. A kernel of its own keeps
// the prefix-caching metadata out of the outputs kernel's scalar registers.
template <typename T, int kWidth>
__global__ void CC_LAUNCH_BOUNDS(serving_fwd_tuning(kTargetFamily)) serving_fwd_states_kernel(ServingFwdParams p) {
  constexpr ServingFwdTuning kTune = serving_fwd_tuning(kTargetFamily);
  constexpr int kHalo = kWidth - 1;
  wait_prior_kernel();  // launched overlapping the kernel before it: no memory access above
  const int64_t c = int64_t(blockIdx.x) * kTune.threads + threadIdx.x;
  if (c >= p.dim) return;
  const int64_t sl = p.state_l_stride;
  for (int64_t i = blockIdx.y; i < p.batch; i += gridDim.y) {
    const ServingRow r = serving_fwd_row(p, i);
    if (r.skip || r.len == 0) continue;
    const T* x = static_cast<const T*>(p.x) + r.start * p.x_l_stride + c * p.x_c_stride;
    T* states = static_cast<T*>(p.conv_states) + c * p.state_c_stride;
    float init[kHalo];
    static_for<kHalo>([&](auto k) { init[k] = 0.0f; });
    if (p.has_initial_state && p.has_initial_state[i * p.his_stride]) {
      const T* in = states + r.in_line * p.state_line_stride;
      static_for<kHalo>([&](auto k) { init[k] = to_float(in[int64_t(k) * sl]); });
    }
    // The last width - 1 entries of [init, x[0 .. end)], shifted in (entries are copied exactly:
    // T -> float -> T is the identity); no run-time index into a register array.
    auto write_window = [&](int64_t line, int64_t end) CC_INLINE_LAMBDA {
      float v[kHalo];
      static_for<kHalo>([&](auto k) { v[k] = init[k]; });
      for (int64_t t = max(end - kHalo, int64_t(0)); t < end; ++t) {
        static_for<kHalo - 1>([&](auto k) { v[k] = v[k + 1]; });
        v[kHalo - 1] = to_float(x[t * p.x_l_stride]);
      }
      T* dst = states + line * p.state_line_stride;
      static_for<kHalo>([&](auto k) { dst[int64_t(k) * sl] = from_float<T>(v[k]); });
    };
    if (p.prefix_caching) {
      const int64_t first = p.block_idx_first.at(i);
      const int64_t count = p.block_idx_last.at(i) - first;
      int64_t boundary = first_block_boundary(p.num_computed_tokens.at(i), p.block_size);
      for (int64_t k = 0; k < count; ++k, boundary += p.block_size) {
        const int64_t line = serving_line(p.cache_indices, p.ci_seq_stride, p.ci_block_stride, p.ci_blocks, i,
                                          first + k, p.num_cache_lines, p.padding);
        if (line >= 0 && boundary > 0 && boundary < r.len) write_window(line, boundary);
      }
    }
    if (r.out_line >= 0) write_window(r.out_line, r.len);
  }
}

template <typename T, int kWidth, bool kSilu>
__global__ void CC_LAUNCH_BOUNDS(serving_update_tuning(kTargetFamily)) serving_update_kernel(ServingUpdateParams p) {
  constexpr ServingUpdateTuning kTune = serving_update_tuning(kTargetFamily);
  constexpr int kHalo = kWidth - 1;
  wait_prior_kernel();  // launched overlapping the kernel before it: no memory access above
  const int64_t c = int64_t(blockIdx.x) * kTune.threads + threadIdx.x;
  if (c >= p.dim) return;
  float w[kWidth], bias;
  channel_weights<kWidth>(p, c, w, bias);
  const int64_t sl = p.state_l_stride;
  const int64_t xs = p.x_l_stride;
  const bool varlen = p.query_start_loc.data != nullptr;

  for (int64_t i = blockIdx.y; i < p.batch; i += gridDim.y) {
    int64_t offset, new_len;
    const ServingRow r = serving_update_row(p, i, &offset, &new_len);
    if (r.len == 0) continue;
    T* x = static_cast<T*>(p.x) + (varlen ? r.start * xs : i * p.x_batch_stride) + c * p.x_c_stride;
    if (r.skip) {
      for (int64_t t = 0; t < r.len; ++t) x[t * xs] = from_float<T>(0.0f);
      continue;
    }
    T* states = static_cast<T*>(p.conv_state) + c * p.state_c_stride;
    const T* in = states + r.in_line * p.state_line_stride;
    T window[kHalo];
    static_for<kHalo>([&](auto k) { window[k] = in[(offset + int64_t(k)) * sl]; });

    // New state: the last new_len entries of [window, x], read before x is overwritten.
    if (r.out_line >= 0) {
      T* dst = states + r.out_line * p.state_line_stride;
      const int64_t drop = kHalo + r.len - new_len;  // entries of [window, x] the state does not keep
      static_for<kHalo>([&](auto k) {
        if (int64_t(k) >= drop) dst[(int64_t(k) - drop) * sl] = window[k];
      });
      for (int64_t t = max(drop - kHalo, int64_t(0)); t < r.len; ++t) dst[(kHalo + t - drop) * sl] = x[t * xs];
    }

    float win[kWidth];
    static_for<kHalo>([&](auto k) { win[k] = to_float(window[k]); });
    for (int64_t t = 0; t < r.len; ++t) {
      win[kHalo] = to_float(x[t * xs]);
      float acc = bias;
      static_for<kWidth>([&](auto k) { acc += w[k] * win[k]; });
      x[t * xs] = from_float<T>(kSilu ? silu_to<T>(acc) : acc);
      static_for<kHalo>([&](auto k) { win[k] = win[k + 1]; });
    }
  }
}

// Whether a decode call is the plain step serving_update_vec_kernel's kOne instantiation takes:
// one token a row, no varlen, speculation or prefix caching, 32-bit rows and lines.
bool serving_update_one(const ServingUpdateParams& p) {
  return p.query_start_loc.data == nullptr && p.num_accepted_tokens.data == nullptr && !p.prefix_caching &&
         p.seqlen == 1 && p.csi_blocks >= 1 && p.batch <= INT32_MAX && p.num_cache_lines <= INT32_MAX;
}

// kOne's cache line of row i: conv_state_indices[i] (column 0 of a block table), or i without
// indices; -1 for padding or a line outside the cache (serving_line's rule, in 32 bits).
__device__ __forceinline__ int32_t serving_one_line(const ServingUpdateParams& p, int32_t i) {
  if (p.conv_state_indices == nullptr) return i < p.num_cache_lines ? i : -1;
  const int32_t line = p.conv_state_indices[i * p.csi_seq_stride];
  return p.padding.is_padding(line) || line >= p.num_cache_lines ? -1 : line;
}

// Decode's vector path: x and the cache keep dim contiguous (vLLM's layouts; serving_update_path
// says exactly when). A thread owns kC = kServingVecBytes / sizeof(T) consecutive channels of a
// row, so a warp moves contiguous runs of each token row and cache position (the scalar kernel
// moves 2 bytes a lane for 16-bit data); its weights come as runs (load_group_weights: 14.3 us against
// 17.9 with kC (kWidth + 1) element loads at B = 256, H200, bf16, dim 8192, width 4). The row's first token is loaded
// before its cache line is known (x's address does not depend on it), so its load overlaps the index lookup; the window
// is kHalo vector loads; a one-token row's new state and output come from registers (a row's later tokens are read from
// x again). One row a thread (rows past the grid's y dimension in its z dimension): looping a thread over rows with
// the next row's loads in flight, as the plain update does, was slower here (the index lookup puts two dependent loads
// in each row's chain; benchmarks/NOTES.md, seventh session); the weights are loaded after the row's loads, so that
// they do not add their latency to that chain. Rows, padding and speculative offsets as in the scalar kernel.
//
// kStateRun: the cache keeps each channel's state contiguous (VLLM_SSM_CONV_STATE_LAYOUT=DS) with
// state_len = width - 1, so a thread's kC channels x kHalo positions are one contiguous run of a
// line: one load_run, turned into the position-major window (run_to_rows), and after the row's
// tokens the window (the last kHalo entries of [window, tokens], which is the new state: with
// state_len = width - 1 every valid row has offset 0 and writes kHalo positions) goes back as one
// store_run.
//
// kOne: the plain decode step (one token a row, no query_start_loc, num_accepted_tokens or prefix
// caching; serving_update_one says when), the call a decode step makes per layer: the row's line
// is one index load and two compares in 32 bits (serving_one_line), its offset 0 and its new state
// the window shifted by the token, all known at compile time; the general row evaluation
// (serving_update_row: token ranges, speculative offsets, block-table columns in 64 bits) doubled
// the kernel's instructions.
template <typename T, int kWidth, int kC, bool kSilu, bool kStateRun, bool kOne>
__global__ void CC_LAUNCH_BOUNDS(serving_update_tuning(kTargetFamily))
    serving_update_vec_kernel(ServingUpdateParams p, WeightRuns runs) {
  constexpr ServingUpdateTuning kTune = serving_update_tuning(kTargetFamily);
  constexpr int kHalo = kWidth - 1;
  constexpr int kRunBytes = kRunWords<T, kC, kHalo> * 4;  // kStateRun: a thread's slice of a line
  using Data = Packed<T, kC>;
  wait_prior_kernel();  // launched overlapping the kernel before it: no memory access above
  const int64_t c0 = (int64_t(blockIdx.x) * kTune.threads + threadIdx.x) * kC;
  if (c0 >= p.dim) return;
  const int64_t sl = p.state_l_stride, xs = p.x_l_stride;
  const bool varlen = p.query_start_loc.data != nullptr;

  // One row a thread: row blockIdx.z * gridDim.y + blockIdx.y (the launcher sizes z for batches
  // past max_grid_y). Its weights are loaded after its own loads are issued: their conversion waits
  // for them, so loaded first they held the index lookup and, behind it, the window's loads back (a
  // chain of four memory latencies: weights, bias, index, window; now the index, then the window
  // and the weights together).
  const int64_t i = int64_t(blockIdx.z) * gridDim.y + blockIdx.y;
  if (i >= p.batch) return;
  int64_t offset = 0, new_len = kHalo;
  ServingRow r;
  if constexpr (kOne) {
    r.in_line = r.out_line = serving_one_line(p, int32_t(i));
    r.len = 1;
    r.skip = r.in_line < 0;
  } else {
    r = serving_update_row(p, i, &offset, &new_len);
  }
  if (r.len == 0) return;
  T* x = static_cast<T*>(p.x) + (varlen ? r.start * xs : i * p.x_batch_stride) + c0;
  const Data x0 = load_packed<T, kC>(x);
  if (r.skip) {
    const Data zero = packed_zeros<T, kC>();
    for (int64_t t = 0; t < r.len; ++t) store_packed<StoreHint::kOutput>(x + t * xs, zero);
    return;
  }
  T* states = static_cast<T*>(p.conv_state) + (kStateRun ? c0 * kHalo : c0);
  const T* in = states + r.in_line * p.state_line_stride;
  Data win[kHalo];
  if constexpr (kStateRun) {
    uint32_t run[kRunWords<T, kC, kHalo>];
    load_run<kRunBytes>(in, run);
    run_to_rows<T, kC, kHalo>(run, win);
  } else {
    static_for<kHalo>([&](auto k) { win[k] = load_packed<T, kC>(in + (offset + int64_t(k)) * sl); });
  }
  float w[kWidth][kC], bias[kC];
  load_group_weights<kWidth, kC, true>(p, runs, c0, w, bias);

  // New state: the last new_len entries of [window, x], read before x is overwritten.
  if (!kStateRun && r.out_line >= 0) {
    T* dst = states + r.out_line * p.state_line_stride;
    const int64_t drop = kHalo + r.len - new_len;  // entries of [window, x] the state does not keep
    static_for<kHalo>([&](auto k) {
      if (int64_t(k) >= drop) store_packed<StoreHint::kPlain>(dst + (int64_t(k) - drop) * sl, win[k]);
    });
    for (int64_t t = max(drop - kHalo, int64_t(0)); t < r.len; ++t) {
      store_packed<StoreHint::kPlain>(dst + (kHalo + t - drop) * sl, t == 0 ? x0 : load_packed<T, kC>(x + t * xs));
    }
  }

  Data cur = x0;
  for (int64_t t = 0; t < r.len; ++t) {
    if (t > 0) cur = load_packed<T, kC>(x + t * xs);
    store_packed<StoreHint::kOutput>(x + t * xs, conv_token<T, kWidth, kC, kSilu>(w, bias, win, cur));
    shift_window(win, cur);
  }
  if constexpr (kStateRun) {
    if (r.out_line >= 0) {
      uint32_t run[kRunWords<T, kC, kHalo>];
      rows_to_run<T, kC, kHalo>(win, run);
      store_run<kRunBytes>(states + r.out_line * p.state_line_stride, run);
    }
  }
}

// Whether the prefill can take serving_fwd_vec_kernel: x and out with dim contiguous, dim and
// both token pitches multiples of kC, and both tensors aligned to kC elements.
bool serving_fwd_vectors(const ServingFwdParams& p, int kC) {
  const int64_t bytes = int64_t(kC) * dtype_size(p.x_dtype);
  return p.x_c_stride == 1 && p.out_c_stride == 1 && p.dim % kC == 0 && p.x_l_stride % kC == 0 &&
         p.out_l_stride % kC == 0 && reinterpret_cast<uintptr_t>(p.x) % bytes == 0 &&
         reinterpret_cast<uintptr_t>(p.out) % bytes == 0;
}

// Which decode kernel fits: serving_update_vec_kernel when x keeps dim contiguous (dim and the x
// pitches the call uses, rows unless varlen and tokens when varlen or seqlen > 1, multiples of kC,
// x aligned to kC elements) and the cache either keeps dim contiguous too (line and position
// pitches multiples of kC, aligned to kC elements) or keeps each channel's state contiguous with
// state_len = width - 1 (kStateRun: line pitch and base aligned to the run's access); the scalar
// kernel otherwise.
enum class DecodePath { kScalar, kVector, kStateRun };
DecodePath serving_update_path(const ServingUpdateParams& p, int kC) {
  const int es = dtype_size(p.x_dtype);
  const int64_t bytes = int64_t(kC) * es;
  const auto aligned = [](const void* ptr, int64_t a) { return reinterpret_cast<uintptr_t>(ptr) % a == 0; };
  const bool varlen = p.query_start_loc.data != nullptr;
  const bool rows_ok = varlen || p.x_batch_stride % kC == 0;
  const bool tokens_ok = (!varlen && p.seqlen <= 1) || p.x_l_stride % kC == 0;
  if (p.x_c_stride != 1 || p.dim % kC != 0 || !rows_ok || !tokens_ok || !aligned(p.x, bytes))
    return DecodePath::kScalar;
  if (p.state_c_stride == 1 && p.state_line_stride % kC == 0 && p.state_l_stride % kC == 0 &&
      aligned(p.conv_state, bytes)) {
    return DecodePath::kVector;
  }
  const int64_t halo = p.width - 1, run = run_access(int(bytes * halo));
  if (p.state_len == halo && p.state_l_stride == 1 && p.state_c_stride == halo &&
      multiple_of(p.state_line_stride * es, run) && aligned(p.conv_state, run)) {
    return DecodePath::kStateRun;
  }
  return DecodePath::kScalar;
}

}  // namespace

int serving_fwd_workspace_elems(const ServingFwdParams& p, const DeviceDesc&, int64_t* elems) {
  *elems = p.batch + 1;
  return kSuccess;
}

int launch_serving_fwd(const ServingFwdParams& p, int32_t* workspace, const DeviceDesc& dev, void* stream) {
  if (const int status = check_width_and_dtypes(p.width, p.x_dtype, p.w_dtype); status != kSuccess) return status;
  if (p.batch == 0 || p.dim == 0 || p.total_tokens == 0) return kSuccess;
  const ServingFwdTuning tune = serving_fwd_tuning(dev.family);
  // Work rows that bound the chunk count of any split; 32-bit indices on the device.
  const int64_t work_rows = p.batch + (p.total_tokens + tune.chunk - 1) / tune.chunk;
  if (work_rows >= (int64_t(1) << 31)) return kErrInvalidParams;
  const auto s = static_cast<Stream>(stream);
  if (const int status =
          launch_overlapping(serving_plan_kernel, dim3(1), dim3(kServingPlanThreads), s, p, tune.chunk, workspace))
    return status;
  const dim3 grid(ceil_div_u(p.dim, tune.threads),
                  static_cast<unsigned>(std::min<int64_t>(work_rows, tune.max_grid_y)));
  return dispatch_dtype(p.x_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return dispatch_width(p.width, [&](auto W) {
      return dispatch_bool(p.silu, [&](auto Silu) {
        constexpr int kC = kServingVecBytes / int(sizeof(T));
        if (serving_fwd_vectors(p, kC)) {
          const dim3 vgrid(ceil_div_u(p.dim / kC, tune.threads), grid.y);
          if (const int status = launch_overlapping(
                  serving_fwd_vec_kernel<T, decltype(W)::value, kC, decltype(Silu)::value>, vgrid, dim3(tune.threads),
                  s, p, weight_runs(p, kC), static_cast<const int32_t*>(workspace)))
            return status;
        } else if (const int status =
                       launch_overlapping(serving_fwd_kernel<T, decltype(W)::value, decltype(Silu)::value>, grid,
                                          dim3(tune.threads), s, p, static_cast<const int32_t*>(workspace))) {
          return status;
        }
        const dim3 states_grid(grid.x, static_cast<unsigned>(std::min<int64_t>(p.batch, tune.max_grid_y)));
        return launch_overlapping(serving_fwd_states_kernel<T, decltype(W)::value>, states_grid, dim3(tune.threads), s,
                                  p);
      });
    });
  });
}

int launch_serving_update(const ServingUpdateParams& p, const DeviceDesc& dev, void* stream) {
  if (const int status = check_width_and_dtypes(p.width, p.x_dtype, p.w_dtype); status != kSuccess) return status;
  if (p.batch == 0 || p.dim == 0) return kSuccess;
  const ServingUpdateTuning tune = serving_update_tuning(dev.family);
  const dim3 grid(ceil_div_u(p.dim, tune.threads), static_cast<unsigned>(std::min<int64_t>(p.batch, tune.max_grid_y)));
  const auto s = static_cast<Stream>(stream);
  return dispatch_dtype(p.x_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return dispatch_width(p.width, [&](auto W) {
      return dispatch_bool(p.silu, [&](auto Silu) {
        // Small grids (fewer blocks than CUs) take kServingNarrowVecBytes a thread (tuning.h).
        constexpr int kCWide = kServingVecBytes / int(sizeof(T));
        constexpr int kCNarrow = std::max(kServingNarrowVecBytes / int(sizeof(T)), 2);
        const bool narrow = int64_t(ceil_div_u(p.dim / kCWide, tune.threads)) * grid.y < dev.cu_count;
        return dispatch_bool(narrow, [&](auto N) {
          constexpr int kC = decltype(N)::value ? kCNarrow : kCWide;
          const DecodePath path = serving_update_path(p, kC);
          if (path == DecodePath::kScalar) {
            return launch_overlapping(serving_update_kernel<T, decltype(W)::value, decltype(Silu)::value>, grid,
                                      dim3(tune.threads), s, p);
          }
          const dim3 vgrid(ceil_div_u(p.dim / kC, tune.threads), grid.y, ceil_div_u(p.batch, grid.y));
          return dispatch_bool(path == DecodePath::kStateRun, [&](auto Run) {
            return dispatch_bool(serving_update_one(p), [&](auto One) {
              return launch_overlapping(serving_update_vec_kernel<T, decltype(W)::value, kC, decltype(Silu)::value,
                                                                  decltype(Run)::value, decltype(One)::value>,
                                        vgrid, dim3(tune.threads), s, p, weight_runs(p, kC));
            });
          });
        });
      });
    });
  });
}

}  // namespace causal_conv1d::gpu
