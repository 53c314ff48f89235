// CPU backend of the serving API (causal_conv1d/serving.py; semantics in serving.h).
//
// One task per (sequence or decode row, block of kServingBlock channels). A task keeps float rows
// of its channels, one row per time step: the width - 1 rows of the initial window followed by a
// chunk of the sequence's tokens, and steps through them with vec::conv_cols, so x in either
// layout (channels or tokens contiguous) is read one row of contiguous or strided elements at a
// time. Window and state entries are copied, never rounded: widening a value of the cache's dtype
// to float and narrowing it back is exact.
#include <algorithm>
#include <cstring>
#include <vector>

#include "causal_conv1d/cpu.h"
#include "causal_conv1d/serving.h"
#include "common.h"
#include "vec.h"

namespace causal_conv1d::cpu {

namespace {

// Channels per task: float rows of this many channels stay in L1/L2 (a 64-token chunk of 256
// fp32 channels is 64 KB), and a decode batch still splits into enough tasks for the threads.
constexpr int64_t kServingBlock = 256;
// Tokens per chunk of a prefill task.
constexpr int64_t kServingChunk = 64;

// Tap-major float weights (wt[k * kServingBlock + c]) and the bias of one channel block.
struct BlockWeights {
  float wt[kMaxWidth * kServingBlock];
  float bias[kServingBlock];
};

template <typename Params>
void load_block_weights(const Params& p, int64_t c0, int64_t n, BlockWeights& bw) {
  for (int k = 0; k < p.width; ++k)
    load_floats(p.weight, p.w_dtype, c0 * p.weight_c_stride + k * p.weight_w_stride, p.weight_c_stride,
                bw.wt + k * kServingBlock, n);
  if (p.bias) {
    load_floats(p.bias, p.w_dtype, c0 * p.bias_stride, p.bias_stride, bw.bias, n);
  } else {
    std::fill(bw.bias, bw.bias + n, 0.0f);
  }
}

// out_row(j) = act(bias + sum_k w[k] * rows[j + k]) for the `steps` outputs j, rows: steps +
// width - 1 consecutive float rows (stride `ld`) starting at `first`; out_row(j) points to n
// contiguous elements of dtype ot (the output tensor's own row where its channels are contiguous,
// so SiLU and the rounding happen in one pass, else a float row).
template <typename OutRow>
int conv_steps(const float* first, int64_t ld, OutRow out_row, DType ot, int64_t steps, int64_t n, int width,
               const BlockWeights& bw, bool silu) {
  for (int64_t s0 = 0; s0 < steps; s0 += vec::kMaxColSteps) {
    const int s = static_cast<int>(std::min<int64_t>(vec::kMaxColSteps, steps - s0));
    const float* rows[vec::kMaxColSteps + kMaxWidth - 1];
    void* outs[vec::kMaxColSteps];
    for (int k = 0; k < s + width - 1; ++k) rows[k] = first + (s0 + k) * ld;
    for (int k = 0; k < s; ++k) outs[k] = out_row(s0 + k);
    const int status = vec::conv_cols(rows, outs, ot, s, n, bw.wt, kServingBlock, width, bw.bias, silu);
    if (status != kSuccess) return status;
  }
  return kSuccess;
}

// State line rows: position `pos` of `line`, channels [c0, c0 + n).
template <typename Params>
int64_t state_offset(const Params& p, int64_t line, int64_t c0, int64_t pos) {
  return line * p.state_line_stride + c0 * p.state_c_stride + pos * p.state_l_stride;
}

int serving_fwd_task(const ServingFwdParams& p, int64_t i, int64_t c0, int64_t n, BlockWeights& bw,
                     std::vector<float>& buf) {
  const ServingRow r = serving_fwd_row(p, i);
  const int H = p.width - 1;
  const DType t = p.x_dtype;
  auto x_off = [&](int64_t tok) { return c0 * p.x_c_stride + tok * p.x_l_stride; };
  auto out_off = [&](int64_t tok) { return c0 * p.out_c_stride + tok * p.out_l_stride; };
  if (r.len == 0) return kSuccess;
  if (r.skip) {
    std::vector<float> zeros(n, 0.0f);
    for (int64_t tok = r.start; tok < r.start + r.len; ++tok)
      store_floats(zeros.data(), t, p.out, out_off(tok), p.out_c_stride, n);
    return kSuccess;
  }
  load_block_weights(p, c0, n, bw);

  // Rows of the concatenation [initial window, the sequence's tokens]: row j < 0 is window
  // position H + j, row j >= 0 is token start + j.
  const int64_t ld = kServingBlock;
  std::vector<float> window(static_cast<size_t>(H * ld), 0.0f);
  const bool init = p.has_initial_state && p.has_initial_state[i * p.his_stride];
  if (init) {
    for (int k = 0; k < H; ++k)
      load_floats(p.conv_states, t, state_offset(p, r.in_line, c0, k), p.state_c_stride, window.data() + k * ld, n);
  }
  auto load_concat_row = [&](int64_t j, float* dst) {
    if (j < 0) {
      std::copy(window.data() + (H + j) * ld, window.data() + (H + j) * ld + n, dst);
    } else {
      load_floats(p.x, t, x_off(r.start + j), p.x_c_stride, dst, n);
    }
  };

  // Outputs, chunk by chunk: buf holds H rows of history then up to kServingChunk token rows (and
  // as many float output rows, used where out's channels are not contiguous).
  const bool direct_out = p.out_c_stride == 1;
  const int esize = dtype_size(t);
  buf.resize(static_cast<size_t>((H + 2 * kServingChunk) * ld));
  float* rows = buf.data();
  float* outs = buf.data() + (H + kServingChunk) * ld;
  std::copy(window.begin(), window.end(), rows);
  for (int64_t t0 = 0; t0 < r.len; t0 += kServingChunk) {
    const int64_t steps = std::min(kServingChunk, r.len - t0);
    for (int64_t s = 0; s < steps; ++s) load_concat_row(t0 + s, rows + (H + s) * ld);
    auto out_row = [&](int64_t s) -> void* {
      return direct_out ? static_cast<char*>(p.out) + out_off(r.start + t0 + s) * esize
                        : static_cast<void*>(outs + s * ld);
    };
    const int status = conv_steps(rows, ld, out_row, direct_out ? t : DType::kFloat32, steps, n, p.width, bw, p.silu);
    if (status != kSuccess) return status;
    if (!direct_out) {
      for (int64_t s = 0; s < steps; ++s)
        store_floats(outs + s * ld, t, p.out, out_off(r.start + t0 + s), p.out_c_stride, n);
    }
    // The last H rows become the next chunk's history.
    std::memmove(rows, rows + steps * ld, static_cast<size_t>(H * ld) * sizeof(float));
  }

  // States: the H rows before a boundary t go to positions 0 .. H - 1 of the boundary's line.
  std::vector<float> row(static_cast<size_t>(ld));
  auto write_state = [&](int64_t line, int64_t boundary) {
    for (int k = 0; k < H; ++k) {
      load_concat_row(boundary - H + k, row.data());
      store_floats(row.data(), t, p.conv_states, state_offset(p, line, c0, k), p.state_c_stride, n);
    }
  };
  if (p.prefix_caching) {
    const int64_t first = p.block_idx_first.at(i);
    const int64_t count = p.block_idx_last.at(i) - first;
    const int64_t b0 = first_block_boundary(p.num_computed_tokens.at(i), p.block_size);
    for (int64_t k = 0; k < count; ++k) {
      const int64_t boundary = b0 + k * p.block_size;
      const int64_t line = serving_line(p.cache_indices, p.ci_seq_stride, p.ci_block_stride, p.ci_blocks, i, first + k,
                                        p.num_cache_lines, p.padding);
      if (line >= 0 && boundary > 0 && boundary < r.len) write_state(line, boundary);
    }
  }
  if (r.out_line >= 0) write_state(r.out_line, r.len);
  return kSuccess;
}

int serving_update_task(const ServingUpdateParams& p, int64_t i, int64_t c0, int64_t n, BlockWeights& bw,
                        std::vector<float>& buf) {
  int64_t offset = 0, new_len = 0;
  const ServingRow r = serving_update_row(p, i, &offset, &new_len);
  const int H = p.width - 1;
  const DType t = p.x_dtype;
  const bool varlen = p.query_start_loc.data != nullptr;
  auto x_off = [&](int64_t tok) {
    return (varlen ? 0 : i * p.x_batch_stride) + c0 * p.x_c_stride + (r.start + tok) * p.x_l_stride;
  };
  if (r.len == 0) return kSuccess;
  const int64_t ld = kServingBlock;
  if (r.skip) {
    std::vector<float> zeros(n, 0.0f);
    for (int64_t tok = 0; tok < r.len; ++tok) store_floats(zeros.data(), t, p.x, x_off(tok), p.x_c_stride, n);
    return kSuccess;
  }
  load_block_weights(p, c0, n, bw);

  // The whole concatenation [window, tokens] as float rows: the outputs overwrite x, and the new
  // state is its last new_len rows.
  const int64_t total = H + r.len;
  buf.resize(static_cast<size_t>((total + r.len) * ld));
  float* rows = buf.data();
  float* outs = buf.data() + total * ld;
  for (int k = 0; k < H; ++k)
    load_floats(p.conv_state, t, state_offset(p, r.in_line, c0, offset + k), p.state_c_stride, rows + k * ld, n);
  for (int64_t tok = 0; tok < r.len; ++tok) load_floats(p.x, t, x_off(tok), p.x_c_stride, rows + (H + tok) * ld, n);
  // Every token is in `rows` by now, so the outputs may go straight into x's rows.
  const bool direct_out = p.x_c_stride == 1;
  const int esize = dtype_size(t);
  auto out_row = [&](int64_t tok) -> void* {
    return direct_out ? static_cast<char*>(p.x) + x_off(tok) * esize : static_cast<void*>(outs + tok * ld);
  };
  const int status = conv_steps(rows, ld, out_row, direct_out ? t : DType::kFloat32, r.len, n, p.width, bw, p.silu);
  if (status != kSuccess) return status;
  if (!direct_out) {
    for (int64_t tok = 0; tok < r.len; ++tok) store_floats(outs + tok * ld, t, p.x, x_off(tok), p.x_c_stride, n);
  }
  if (r.out_line >= 0) {
    for (int64_t s = 0; s < new_len; ++s)
      store_floats(rows + (total - new_len + s) * ld, t, p.conv_state, state_offset(p, r.out_line, c0, s),
                   p.state_c_stride, n);
  }
  return kSuccess;
}

// Tasks are (row, channel block) pairs; tokens_per_row (an average) sizes the grain so that a
// thread gets at least ~64K channel-tokens: a decode step of one row stays on the calling thread
// (a parallel region costs more than its work there, and much more on a busy machine).
template <typename Params, typename Task>
int run_tasks(const Params& p, int64_t rows, int64_t tokens_per_row, const ParallelFor& pfor, Task task) {
  if (const int status = check_width_and_dtypes(p.width, p.x_dtype, p.w_dtype); status != kSuccess) return status;
  if (rows == 0 || p.dim == 0) return kSuccess;
  const int64_t blocks = (p.dim + kServingBlock - 1) / kServingBlock;
  const int64_t grain =
      std::max<int64_t>(1, 65536 / (kServingBlock * (std::max<int64_t>(tokens_per_row, 1) + p.width)));
  FirstError error;
  pfor(rows * blocks, grain, [&](int64_t a, int64_t z) {
    BlockWeights bw;
    std::vector<float> buf;
    for (int64_t task_id = a; task_id < z; ++task_id) {
      const int64_t i = task_id / blocks, c0 = (task_id % blocks) * kServingBlock;
      error.note(task(p, i, c0, std::min(kServingBlock, p.dim - c0), bw, buf));
    }
  });
  return error.code();
}

}  // namespace

int launch_serving_fwd(const ServingFwdParams& p, const ParallelFor& pfor) {
  return run_tasks(p, p.batch, p.batch ? p.total_tokens / p.batch : 0, pfor, serving_fwd_task);
}

int launch_serving_update(const ServingUpdateParams& p, const ParallelFor& pfor) {
  const int64_t tokens = p.query_start_loc.data ? (p.batch ? p.total_tokens / p.batch : 0) : p.seqlen;
  return run_tasks(p, p.batch, tokens, pfor, serving_update_task);
}

}  // namespace causal_conv1d::cpu
