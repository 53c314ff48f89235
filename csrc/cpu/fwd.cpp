// CPU forward. Works for any strides; the loop order follows the layout so the innermost loop
// walks contiguous memory. Without seq_idx the work goes through vec.h's SIMD rows ("vectorised
// paths", below):
//  - channel-first: one task per (batch, channel) row, in chunks of kTimeChunk with the previous
//    width - 1 inputs carried in front as the halo;
//  - channel-last: tasks of kChannelBlockVec channels by kTimeBlock steps, each step a SIMD pass
//    over a row of channels.
// With seq_idx, element loops of the same two shapes (kChannelBlock channels in channel-last)
// whose taps test ids: a tap counts only if its position has the output's id, and a negative id
// marks a padding token whose output is exactly 0 (upstream >= 1.6). In all of them the halo
// starts as initial_states (or zeros) and ends as the final states.
#include <algorithm>
#include <vector>

#include "causal_conv1d/cpu.h"
#include "causal_conv1d/dispatch.h"
#include "common.h"
#include "vec.h"

namespace causal_conv1d::cpu {

namespace {

// --- Element loops with seq_idx ------------------------------------------------------------------

template <typename T, int kWidth>
void fwd_rows_channel_first_seq(const FwdParams& p, int64_t row_begin, int64_t row_end) {
  constexpr int kHalo = kWidth - 1;
  std::vector<float> buf(kTimeChunk + kHalo);
  std::vector<int32_t> seq(kTimeChunk + kHalo);
  for (int64_t row = row_begin; row < row_end; ++row) {
    const int64_t b = row / p.dim, c = row % p.dim;
    float w[kWidth];
    for (int k = 0; k < kWidth; ++k)
      w[k] = load_as_float(p.weight, p.w_dtype, c * p.weight_c_stride + k * p.weight_w_stride);
    const float bias = p.bias ? load_as_float(p.bias, p.w_dtype, c * p.bias_stride) : 0.0f;
    const int64_t x_off = b * p.x_batch_stride + c * p.x_c_stride;
    const int64_t out_off = b * p.out_batch_stride + c * p.out_c_stride;

    for (int j = 0; j < kHalo; ++j) {
      buf[j] = p.initial_states
                   ? ld<T>(p.initial_states, b * p.init_batch_stride + c * p.init_c_stride + j * p.init_l_stride)
                   : 0.0f;
      seq[j] = -1;  // never equal to a real position's id
    }
    for (int64_t t0 = 0; t0 < p.seqlen; t0 += kTimeChunk) {
      const int64_t n = std::min(kTimeChunk, p.seqlen - t0);
      for (int64_t i = 0; i < n; ++i) buf[kHalo + i] = ld<T>(p.x, x_off + (t0 + i) * p.x_l_stride);
      for (int64_t i = 0; i < n; ++i)
        seq[kHalo + i] = p.seq_idx[b * p.seq_idx_batch_stride + (t0 + i) * p.seq_idx_l_stride];
      for (int64_t i = 0; i < n; ++i) {
        if (seq[i + kHalo] < 0) {  // padding token: exactly 0
          st<T>(p.out, out_off + (t0 + i) * p.out_l_stride, 0.0f);
          continue;
        }
        float acc = bias;
        for (int k = 0; k < kWidth; ++k) {
          if (seq[i + k] == seq[i + kHalo]) acc += w[k] * buf[i + k];
        }
        st<T>(p.out, out_off + (t0 + i) * p.out_l_stride, p.silu ? silu(acc) : acc);
      }
      for (int j = 0; j < kHalo; ++j) {
        buf[j] = buf[n + j];
        seq[j] = seq[n + j];
      }
    }
    if (p.final_states) {
      for (int j = 0; j < kHalo; ++j)
        st<T>(p.final_states, b * p.final_batch_stride + c * p.final_c_stride + j * p.final_l_stride, buf[j]);
    }
  }
}

template <typename T, int kWidth>
void fwd_blocks_channel_last_seq(const FwdParams& p, int64_t blk_begin, int64_t blk_end) {
  constexpr int kHalo = kWidth - 1;
  constexpr int64_t kB = kChannelBlock;
  const int64_t nblk = (p.dim + kB - 1) / kB;
  float w[kWidth][kB], bias[kB], hist[kHalo > 0 ? kHalo : 1][kB], cur[kB];
  for (int64_t blk = blk_begin; blk < blk_end; ++blk) {
    const int64_t b = blk / nblk, c0 = (blk % nblk) * kB;
    const int64_t nc = std::min(kB, p.dim - c0);
    for (int64_t i = 0; i < nc; ++i) {
      const int64_t c = c0 + i;
      for (int k = 0; k < kWidth; ++k)
        w[k][i] = load_as_float(p.weight, p.w_dtype, c * p.weight_c_stride + k * p.weight_w_stride);
      bias[i] = p.bias ? load_as_float(p.bias, p.w_dtype, c * p.bias_stride) : 0.0f;
      for (int j = 0; j < kHalo; ++j)
        hist[j][i] = p.initial_states
                         ? ld<T>(p.initial_states, b * p.init_batch_stride + c * p.init_c_stride + j * p.init_l_stride)
                         : 0.0f;
    }
    int32_t seq_hist[kHalo > 0 ? kHalo : 1];
    for (int j = 0; j < kHalo; ++j) seq_hist[j] = -1;

    const int64_t x_off = b * p.x_batch_stride + c0 * p.x_c_stride;
    const int64_t out_off = b * p.out_batch_stride + c0 * p.out_c_stride;
    for (int64_t t = 0; t < p.seqlen; ++t) {
      for (int64_t i = 0; i < nc; ++i) cur[i] = ld<T>(p.x, x_off + i * p.x_c_stride + t * p.x_l_stride);
      // Which history taps belong to the same sequence as t: one decision for all channels.
      bool use[kHalo > 0 ? kHalo : 1];
      const int32_t seq_t = p.seq_idx[b * p.seq_idx_batch_stride + t * p.seq_idx_l_stride];
      for (int j = 0; j < kHalo; ++j) use[j] = seq_hist[j] == seq_t;
      const bool padding = seq_t < 0;  // padding token: exactly 0
      for (int64_t i = 0; i < nc; ++i) {
        float acc = bias[i] + w[kHalo][i] * cur[i];
        for (int j = 0; j < kHalo; ++j) acc += use[j] ? w[j][i] * hist[j][i] : 0.0f;
        const float o = padding ? 0.0f : p.silu ? silu(acc) : acc;
        st<T>(p.out, out_off + i * p.out_c_stride + t * p.out_l_stride, o);
      }
      for (int j = 0; j + 1 < kHalo; ++j) {
        for (int64_t i = 0; i < nc; ++i) hist[j][i] = hist[j + 1][i];
        seq_hist[j] = seq_hist[j + 1];
      }
      for (int64_t i = 0; i < nc; ++i) hist[kHalo - 1][i] = cur[i];
      seq_hist[kHalo - 1] = seq_t;
    }
    if (p.final_states) {
      for (int j = 0; j < kHalo; ++j)
        for (int64_t i = 0; i < nc; ++i)
          st<T>(p.final_states, b * p.final_batch_stride + (c0 + i) * p.final_c_stride + j * p.final_l_stride,
                hist[j][i]);
    }
  }
}

// --- Vectorised paths (no seq_idx): float rows through vec.h ----------------------------------

// Channel-first: each (batch, channel) row in chunks of kTimeChunk, the width - 1 previous inputs
// carried as the halo (initial_states, or zeros, at first; the final states at the end). Inputs
// are read in place when fp32 with unit stride (vec::conv_row, the halo apart); else they are
// widened into a float buffer behind the halo (each is read width times), which
// vec::conv_row_padded takes whole, with no scalar head, while it prefetches the inputs of the
// chunk kPrefetchChunks ahead in this thread's walk (the same row's, or a next row's) when their
// stride is 1. Outputs are written in place in their dtype when their stride is 1 (else through a
// float buffer).
//
// Without the prefetch the widening waited on memory with nothing else in flight (its share of
// the time doubled with x cold), and a chunk ahead was too late. An Intel Xeon VM (2 threads, bf16
// (2, 1024, 4096) SiLU into out over rotated buffers, the loop alone in one process, medians of 11
// rounds, benchmarks/NOTES.md, thirty-ninth session): 3.45-3.92 ms before, 3.29-3.46 with the next
// chunk prefetched, 2.81-3.29 with the one after it (the widening 3.5-4.0 -> 1.7-1.9 Mcycles a
// thread, 1.5 with x in the caches), 3.10 with the third.
constexpr int kPrefetchChunks = 2;

int fwd_rows_channel_first_vec(const FwdParams& p, int64_t row_begin, int64_t row_end) {
  const int halo = p.width - 1;
  const bool direct_x = p.x_dtype == DType::kFloat32 && p.x_l_stride == 1;
  const bool direct_out = p.out_l_stride == 1;
  const int esize = dtype_size(p.x_dtype);
  // The widened path: xbuf[0, halo) the halo, xbuf[halo, halo + n) the chunk's inputs.
  std::vector<float> xbuf(direct_x ? 0 : halo + kTimeChunk), obuf(direct_out ? 0 : kTimeChunk);
  // The chunk kPrefetchChunks after (row, t0) in this call's walk (its length in *n), or null past
  // the walk's end.
  const auto chunk_ahead = [&](int64_t row, int64_t t, int64_t* n) -> const char* {
    for (int a = 0; a < kPrefetchChunks; ++a) {
      t += kTimeChunk;
      if (t >= p.seqlen) {
        t = 0;
        if (++row >= row_end) return nullptr;
      }
    }
    *n = std::min(kTimeChunk, p.seqlen - t);
    const int64_t b = row / p.dim, c = row % p.dim;
    return static_cast<const char*>(p.x) + (b * p.x_batch_stride + c * p.x_c_stride + t * p.x_l_stride) * esize;
  };
  for (int64_t row = row_begin; row < row_end; ++row) {
    const int64_t b = row / p.dim, c = row % p.dim;
    float w[kMaxWidth], carry_in[kMaxWidth - 1];
    float* carry = direct_x ? carry_in : xbuf.data();
    for (int k = 0; k < p.width; ++k)
      w[k] = load_as_float(p.weight, p.w_dtype, c * p.weight_c_stride + k * p.weight_w_stride);
    const float bias = p.bias ? load_as_float(p.bias, p.w_dtype, c * p.bias_stride) : 0.0f;
    for (int j = 0; j < halo; ++j)
      carry[j] = p.initial_states ? load_as_float(p.initial_states, p.x_dtype,
                                                  b * p.init_batch_stride + c * p.init_c_stride + j * p.init_l_stride)
                                  : 0.0f;
    const int64_t x_off = b * p.x_batch_stride + c * p.x_c_stride;
    const int64_t out_off = b * p.out_batch_stride + c * p.out_c_stride;
    for (int64_t t0 = 0; t0 < p.seqlen; t0 += kTimeChunk) {
      const int64_t n = std::min(kTimeChunk, p.seqlen - t0);
      void* const out = direct_out ? static_cast<void*>(static_cast<char*>(p.out) + (out_off + t0) * esize)
                                   : static_cast<void*>(obuf.data());
      const DType out_t = direct_out ? p.x_dtype : DType::kFloat32;
      int status;
      if (direct_x) {
        const float* xin = static_cast<const float*>(p.x) + x_off + t0;
        status = vec::conv_row(carry, xin, out, out_t, n, w, p.width, bias, p.silu);
        // The last width - 1 inputs of [carry, this chunk] are the next chunk's halo.
        for (int j = 0; j < halo; ++j) {
          const int64_t q = n - halo + j;  // position in this chunk
          carry[j] = q >= 0 ? xin[q] : carry[j + n];
        }
      } else {
        load_floats(p.x, p.x_dtype, x_off + t0 * p.x_l_stride, p.x_l_stride, xbuf.data() + halo, n);
        int64_t ahead_n = 0;
        const char* ahead = p.x_l_stride == 1 ? chunk_ahead(row, t0, &ahead_n) : nullptr;
        status = vec::conv_row_padded(xbuf.data(), out, out_t, n, w, p.width, bias, p.silu, ahead, ahead_n * esize);
        std::copy(xbuf.begin() + n, xbuf.begin() + n + halo, xbuf.begin());  // the last width - 1 of them
      }
      if (status != kSuccess) return status;
      if (!direct_out) store_floats(obuf.data(), p.x_dtype, p.out, out_off + t0 * p.out_l_stride, p.out_l_stride, n);
    }
    if (p.final_states) {
      for (int j = 0; j < halo; ++j)
        store_from_float(p.final_states, p.x_dtype,
                         b * p.final_batch_stride + c * p.final_c_stride + j * p.final_l_stride, carry[j]);
    }
  }
  return kSuccess;
}

// Channel-last: a task (ClTasks) is kChannelBlockVec channels by kTimeBlock steps of one batch row.
// It walks its steps vec::kMaxColSteps at a time (vec::conv_cols). Rows of x with unit channel
// stride are used in place when fp32, and when bf16 (vec::conv_cols_bf16 widens them in its loop)
// except for steps whose window reaches before t = 0; else they are widened once into a ring of
// float rows (each is read width times: fp16, strided channels). With bf16 (2, 1024, 4096) on the
// dev machine (AMD EPYC, AVX-512, 2 threads) 1.53 ms against 1.94 through the ring, whose
// widening pass took 30% of the time (perf). Rows of out with unit channel stride are written in
// place in their dtype (else through float rows). Rows before t = 0 come from initial_states (or
// are zeros); the task ending at seqlen writes the final states. A call of 8 steps over bf16 rows
// read in place prefetches the next call's 8 rows, a slice of them per block of channels and step
// (vec::conv_cols_bf16), so their loads overlap its arithmetic. (Rows of 2 KB or less prefetched
// whole before a call gained nothing on the dev machine, AMD EPYC, benchmarks/NOTES.md,
// twenty-first session; spread through the call, bf16 (2, 1024, 4096) into out on an Intel Xeon
// VM 3.34-3.57 -> 2.85-3.08 ms, (1, 4096, 2048) unchanged, fp32 rows 0-5% slower there: thirty-ninth
// session.) fp32 rows read in place (vec::conv_cols) are prefetched so on AMD CPUs only
// (prefetch_fp32_cols).
constexpr int64_t kTimeBlock = 512;

// Whether fp32 rows read in place prefetch the next call's rows: on AMD CPUs. Channel-last fp32
// (2, 1024, 4096) / (1, 4096, 2048) into out on the dev machine (AMD EPYC, AVX-512, 2 threads)
// 2.26 / 2.15 -> 2.13 / 1.98 ms with it (medians of 8 alternated processes; bf16 unchanged); on an
// Intel Xeon VM 0-5% slower (benchmarks/NOTES.md, thirty-ninth and forty-second sessions).
bool prefetch_fp32_cols() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static const bool kAmd = __builtin_cpu_is("amd");
  return kAmd;
#else
  return false;
#endif
}

int fwd_tasks_channel_last_vec(const FwdParams& p, const ClTasks& tasks, int64_t task_begin, int64_t task_end) {
  const int halo = p.width - 1;
  constexpr int64_t kB = kChannelBlockVec, kLd = kRowStride;
  constexpr int kS = vec::kMaxColSteps;
  const int64_t ring_rows = halo + kS;  // rows t - halo .. t + kS - 1 have distinct slots
  const bool direct_x = p.x_dtype == DType::kFloat32 && p.x_c_stride == 1;
  // bf16 rows with contiguous channels are read in place too, widened inside the taps' loop
  // (vec::conv_cols_bf16), except where a step's window reaches before t = 0 (float rows there).
  const bool direct_bf16 = p.x_dtype == DType::kBFloat16 && p.x_c_stride == 1;
  const bool direct_out = p.out_c_stride == 1;
  const bool prefetch_fp32 = prefetch_fp32_cols();
  const int esize = dtype_size(p.x_dtype);
  std::vector<float> wt(kMaxWidth * kLd), bias(kB), before((kMaxWidth - 1) * kLd);
  std::vector<float> ring(direct_x ? 0 : (kMaxWidth - 1 + kS) * kLd), obuf(direct_out ? 0 : kS * kLd);
  std::vector<float> last(direct_bf16 ? kLd : 0);  // a final state's row, widened
  for (int64_t task = task_begin; task < task_end; ++task) {
    const int64_t tb = task % tasks.tblocks, rest = task / tasks.tblocks;
    const int64_t cb = rest % tasks.cblocks, b = rest / tasks.cblocks;
    const int64_t c0 = cb * kB, nc = std::min(kB, p.dim - c0);
    const int64_t t0 = tb * tasks.tlen, t1 = std::min(p.seqlen, t0 + tasks.tlen);
    for (int64_t i = 0; i < nc; ++i) {
      const int64_t c = c0 + i;
      for (int k = 0; k < p.width; ++k)
        wt[k * kLd + i] = load_as_float(p.weight, p.w_dtype, c * p.weight_c_stride + k * p.weight_w_stride);
      bias[i] = p.bias ? load_as_float(p.bias, p.w_dtype, c * p.bias_stride) : 0.0f;
    }
    const int64_t x_off = b * p.x_batch_stride + c0 * p.x_c_stride;
    const int64_t out_off = b * p.out_batch_stride + c0 * p.out_c_stride;
    // before[j]: position j - halo (< 0), initial_states or zeros.
    for (int j = 0; j < halo && t0 - halo + j < 0; ++j) {
      float* r = before.data() + j * kLd;
      if (p.initial_states) {
        load_floats(p.initial_states, p.x_dtype, b * p.init_batch_stride + c0 * p.init_c_stride + j * p.init_l_stride,
                    p.init_c_stride, r, nc);
      } else {
        std::fill(r, r + nc, 0.0f);
      }
    }
    auto ring_row = [&](int64_t s) { return ring.data() + (s % ring_rows) * kLd; };  // s >= 0
    auto row_of = [&](int64_t s) -> const float* {
      if (s < 0) return before.data() + (s + halo) * kLd;
      return direct_x ? static_cast<const float*>(p.x) + x_off + s * p.x_l_stride : ring_row(s);
    };
    auto load_rows = [&](int64_t s0, int64_t s1) {
      if (direct_x) return;
      for (int64_t s = std::max<int64_t>(0, s0); s < s1; ++s)
        load_floats(p.x, p.x_dtype, x_off + s * p.x_l_stride, p.x_c_stride, ring_row(s), nc);
    };
    // Steps whose window starts at t - halo >= 0 read bf16 rows in place (direct_bf16).
    auto in_place = [&](int64_t t) { return direct_bf16 && t - halo >= 0; };
    if (!in_place(t0)) load_rows(t0 - halo, t0);
    for (int64_t t = t0; t < t1; t += kS) {
      const int steps = int(std::min<int64_t>(kS, t1 - t));
      void* outs[kS];
      for (int s = 0; s < steps; ++s)
        outs[s] = direct_out ? static_cast<char*>(p.out) + (out_off + (t + s) * p.out_l_stride) * esize
                             : static_cast<void*>(obuf.data() + s * kLd);
      const DType ot = direct_out ? p.x_dtype : DType::kFloat32;
      // The rows of the next call (when read in place): prefetched while this one computes.
      // (bf16 rows for conv_cols_bf16, fp32 rows for conv_cols: each only with its own dtype's.)
      const void* next[kS] = {};
      const bool prefetch = steps == kS && (direct_bf16 || (direct_x && prefetch_fp32));
      for (int s = 0; prefetch && s < kS && t + kS + s < p.seqlen; ++s)
        next[s] = static_cast<const char*>(p.x) + (x_off + (t + kS + s) * p.x_l_stride) * esize;
      int status;
      if (in_place(t)) {
        const uint16_t* win[kMaxWidth - 1 + kS];
        for (int k = 0; k < halo + steps; ++k)
          win[k] = static_cast<const uint16_t*>(p.x) + x_off + (t - halo + k) * p.x_l_stride;
        status = vec::conv_cols_bf16(win, outs, ot, steps, nc, wt.data(), kLd, p.width, bias.data(), p.silu,
                                     prefetch ? next : nullptr);
      } else {
        load_rows(t, t + steps);
        const float* win[kMaxWidth - 1 + kS];
        for (int k = 0; k < halo + steps; ++k) win[k] = row_of(t - halo + k);
        status = vec::conv_cols(win, outs, ot, steps, nc, wt.data(), kLd, p.width, bias.data(), p.silu,
                                prefetch && direct_x ? next : nullptr);
      }
      if (status != kSuccess) return status;
      if (!direct_out) {
        for (int s = 0; s < steps; ++s)
          store_floats(obuf.data() + s * kLd, p.x_dtype, p.out, out_off + (t + s) * p.out_l_stride, p.out_c_stride, nc);
      }
    }
    if (p.final_states && t1 == p.seqlen) {
      for (int j = 0; j < halo; ++j) {
        const int64_t pos = p.seqlen - halo + j;
        const float* r = row_of(pos);
        if (direct_bf16 && pos >= 0) {  // (the ring may not hold it: widened from x)
          load_floats(p.x, p.x_dtype, x_off + pos * p.x_l_stride, 1, last.data(), nc);
          r = last.data();
        }
        store_floats(r, p.x_dtype, p.final_states,
                     b * p.final_batch_stride + c0 * p.final_c_stride + j * p.final_l_stride, p.final_c_stride, nc);
      }
    }
  }
  return kSuccess;
}

}  // namespace

int launch_fwd(const FwdParams& p, const ParallelFor& pfor) {
  if (const int status = check_width_and_dtypes(p.width, p.x_dtype, p.w_dtype); status != kSuccess) return status;
  if (p.batch == 0 || p.dim == 0) return kSuccess;
  if (p.seq_idx == nullptr) {
    FirstError error;
    if (p.channel_last) {
      const ClTasks tasks(p.batch, p.dim, p.seqlen, kTimeBlock);
      pfor(tasks.count(), 1, [&](int64_t a, int64_t z) { error.note(fwd_tasks_channel_last_vec(p, tasks, a, z)); });
    } else {
      const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(p.seqlen, 1));
      pfor(p.batch * p.dim, grain, [&](int64_t r0, int64_t r1) { error.note(fwd_rows_channel_first_vec(p, r0, r1)); });
    }
    return error.code();
  }
  return dispatch_dtype(p.x_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return dispatch_width(p.width, [&](auto W) {
      constexpr int kWidth = decltype(W)::value;
      if (p.channel_last) {
        const int64_t nblk = p.batch * ((p.dim + kChannelBlock - 1) / kChannelBlock);
        pfor(nblk, 1, [&](int64_t b0, int64_t b1) { fwd_blocks_channel_last_seq<T, kWidth>(p, b0, b1); });
      } else {
        const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(p.seqlen, 1));
        pfor(p.batch * p.dim, grain, [&](int64_t r0, int64_t r1) { fwd_rows_channel_first_seq<T, kWidth>(p, r0, r1); });
      }
      return int(kSuccess);
    });
  });
}

void serial_for(int64_t n, int64_t /*grain*/, const std::function<void(int64_t, int64_t)>& body) {
  if (n > 0) body(0, n);
}

}  // namespace causal_conv1d::cpu
