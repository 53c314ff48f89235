// The serving API (continuous batching, the call shape vLLM and SGLang use): params structs and
// the rules every backend shares. Torch-free, usable on the host and on the device.
//
// Sequences are addressed through int32 metadata that lives wherever the tensors live; a backend
// reads it where it runs (the GPU never copies it to the host). A state line is (dim, state_len)
// in a (num_cache_lines, dim, state_len) cache with any strides; windows are LEFT-aligned in it:
// a prefill reads and writes positions 0 .. width - 2, a decode step reads positions
// o .. o + width - 2 (o = num_accepted_tokens - 1 in speculative decoding, else 0) and writes
// positions 0 .. S - 1 (S = width - 1, or width - 2 + the row's token count when speculating).
// Positions past those are never touched. This is what vLLM's Triton kernels read and write.
#pragma once

#include <cstdint>

#include "causal_conv1d/numeric.h"
#include "causal_conv1d/params.h"

namespace causal_conv1d {

// An optional int32 (or, for has_initial_state, bool) vector with its element stride; data is
// null when the argument was not given.
struct IndexVec {
  const int32_t* data = nullptr;
  int64_t stride = 0;
  CAUSAL_CONV1D_HOST_DEVICE int64_t at(int64_t i) const { return data[i * stride]; }
};

// Which explicit cache-line values mark a padded entry: negative values, pad_slot_id and, when
// set, null_block_id (newer vLLM pads its block tables with block 0, its null block). Lines that
// come from no index tensor (line i of sequence i) are never padding. Lines >= the number of cache
// lines are invalid metadata: the CPU and validate_data reject them; an unvalidated GPU call
// treats them as padding, so nothing is ever accessed out of bounds.
struct PaddingRule {
  bool has_pad_slot = true;
  int64_t pad_slot_id = -1;
  bool has_null_block = false;
  int64_t null_block_id = 0;
  CAUSAL_CONV1D_HOST_DEVICE bool is_padding(int64_t line) const {
    return line < 0 || (has_pad_slot && line == pad_slot_id) || (has_null_block && line == null_block_id);
  }
};

// Prefix caching (vLLM's "align" mode): the cache lines of sequence i are a row of a block table
// cache_indices (batch, blocks). The initial state is read from column initial_state_idx[i]; the
// state after each block boundary the chunk crosses is written to its block's column, starting at
// block_idx_first_scheduled_token[i]; the state at the chunk's end goes to column
// block_idx_last_scheduled_token[i]. A boundary is a position where num_computed_tokens[i] + t is
// a multiple of block_size; the boundaries inside the chunk (0 < t < len) are
//   t_k = first_boundary + k * block_size, k = 0 .. n - 1, n = last - first,
//   first_boundary = block_size - num_computed_tokens[i] % block_size.
CAUSAL_CONV1D_HOST_DEVICE inline int64_t first_block_boundary(int64_t num_computed_tokens, int64_t block_size) {
  return block_size - num_computed_tokens % block_size;
}

// causal_conv1d_fn of the serving API. x and out are (dim, total_tokens) with any strides, the
// batch's sequences concatenated along tokens: sequence i is tokens query_start_loc[i] ..
// query_start_loc[i + 1] - 1. Its conv runs over [initial window, x], where the initial window is
// positions 0 .. width - 2 of its input line when has_initial_state[i], else zeros. Afterwards
// positions 0 .. width - 2 of its output line hold the last width - 1 entries of that sequence
// (and, with prefix caching, every crossed block boundary's line the window before it). A padded
// sequence reads and writes no state and gets zero outputs.
struct ServingFwdParams {
  int64_t dim = 0, total_tokens = 0, batch = 0;
  int64_t num_cache_lines = 0, state_len = 0;
  int width = 0;
  DType x_dtype = DType::kFloat32;  // also out and conv_states
  DType w_dtype = DType::kFloat32;  // also bias
  bool silu = false;

  const void* x = nullptr;
  int64_t x_c_stride = 0, x_l_stride = 0;
  const void* weight = nullptr;
  int64_t weight_c_stride = 0, weight_w_stride = 0;
  const void* bias = nullptr;  // optional
  int64_t bias_stride = 0;
  void* out = nullptr;
  int64_t out_c_stride = 0, out_l_stride = 0;
  void* conv_states = nullptr;
  int64_t state_line_stride = 0, state_c_stride = 0, state_l_stride = 0;

  IndexVec query_start_loc;  // batch + 1 entries
  // cache_indices: (batch,) or (batch, blocks); absent: sequence i uses line i.
  const int32_t* cache_indices = nullptr;
  int64_t ci_seq_stride = 0, ci_block_stride = 0, ci_blocks = 1;
  const bool* has_initial_state = nullptr;  // optional; absent: no sequence has one
  int64_t his_stride = 0;

  // Prefix caching: all four vectors given (and block_size > 0), or none.
  bool prefix_caching = false;
  IndexVec block_idx_first, block_idx_last, initial_state_idx, num_computed_tokens;
  int64_t block_size = 0;

  PaddingRule padding;
};

// causal_conv1d_update of the serving API: decode steps, written in place into x.
//  - plain: x (batch, dim, seqlen) (seqlen 1 for (batch, dim)), row i is x[i];
//  - varlen: x (total_tokens, dim) with query_start_loc (batch + 1): row i is tokens
//    query_start_loc[i] .. query_start_loc[i + 1] - 1; tokens of no row are left alone.
// Row i reads the window at positions o .. o + width - 2 of its input line (o =
// num_accepted_tokens[i] - 1, or 0), computes outputs over [window, row's tokens] into x, then
// writes positions 0 .. S - 1 of its output line with the last S entries of [window, tokens],
// S = width - 2 + len with num_accepted_tokens, else width - 1. Lines: conv_state_indices[i]
// (or i); with prefix caching the input line is column initial_state_idx[i] and the output line
// column block_idx_last_scheduled_token[i] of a (batch, blocks) conv_state_indices. Padded rows
// get zero outputs and touch no state.
struct ServingUpdateParams {
  int64_t batch = 0, dim = 0;
  int64_t seqlen = 0;        // plain: tokens per row; varlen: unused
  int64_t total_tokens = 0;  // varlen: x.size(0)
  int64_t num_cache_lines = 0, state_len = 0;
  int width = 0;
  DType x_dtype = DType::kFloat32;  // also conv_state
  DType w_dtype = DType::kFloat32;  // also bias
  bool silu = false;

  void* x = nullptr;  // read, then overwritten with the outputs
  int64_t x_batch_stride = 0, x_c_stride = 0, x_l_stride = 0;
  const void* weight = nullptr;
  int64_t weight_c_stride = 0, weight_w_stride = 0;
  const void* bias = nullptr;  // optional
  int64_t bias_stride = 0;
  void* conv_state = nullptr;
  int64_t state_line_stride = 0, state_c_stride = 0, state_l_stride = 0;

  const int32_t* conv_state_indices = nullptr;  // optional: (batch,) or (batch, blocks)
  int64_t csi_seq_stride = 0, csi_block_stride = 0, csi_blocks = 1;
  IndexVec num_accepted_tokens;  // optional: speculative decoding
  IndexVec query_start_loc;      // optional: varlen
  // Prefix caching: both given, or neither.
  bool prefix_caching = false;
  IndexVec block_idx_last, initial_state_idx;

  PaddingRule padding;
};

// Where one sequence (or decode row) reads and writes: its token range and cache lines. A padded
// or invalid entry has skip set: zero outputs, no state read or written. out_line < 0: the final
// state is not written (its line is padding or invalid) though the outputs are computed.
struct ServingRow {
  int64_t start = 0, len = 0;  // tokens [start, start + len) (plain update: start unused)
  int64_t in_line = -1, out_line = -1;
  bool skip = true;
};

// Cache line at (row, column) of an index table, or -1 when the column or the line is invalid or
// the line is padding (never a line outside the cache).
CAUSAL_CONV1D_HOST_DEVICE inline int64_t serving_line(const int32_t* table, int64_t seq_stride, int64_t block_stride,
                                                      int64_t blocks, int64_t row, int64_t col, int64_t num_lines,
                                                      const PaddingRule& padding) {
  if (col < 0 || col >= blocks) return -1;
  const int64_t line = table[row * seq_stride + col * block_stride];
  if (padding.is_padding(line) || line >= num_lines) return -1;
  return line;
}

// Token range [start, end) of entry i of query_start_loc, clamped into [0, total) so that bad
// offsets can never address memory outside x (the CPU rejects them before any launch).
CAUSAL_CONV1D_HOST_DEVICE inline void serving_token_range(const IndexVec& qsl, int64_t i, int64_t total, int64_t* start,
                                                          int64_t* len) {
  int64_t a = qsl.at(i), b = qsl.at(i + 1);
  a = a < 0 ? 0 : (a > total ? total : a);
  b = b < a ? a : (b > total ? total : b);
  *start = a;
  *len = b - a;
}

CAUSAL_CONV1D_HOST_DEVICE inline ServingRow serving_fwd_row(const ServingFwdParams& p, int64_t i) {
  ServingRow r;
  serving_token_range(p.query_start_loc, i, p.total_tokens, &r.start, &r.len);
  if (p.cache_indices == nullptr) {
    r.in_line = r.out_line = i < p.num_cache_lines ? i : -1;
  } else {
    const int64_t col_in = p.prefix_caching ? p.initial_state_idx.at(i) : 0;
    const int64_t col_out = p.prefix_caching ? p.block_idx_last.at(i) : 0;
    r.in_line = serving_line(p.cache_indices, p.ci_seq_stride, p.ci_block_stride, p.ci_blocks, i, col_in,
                             p.num_cache_lines, p.padding);
    r.out_line = serving_line(p.cache_indices, p.ci_seq_stride, p.ci_block_stride, p.ci_blocks, i, col_out,
                              p.num_cache_lines, p.padding);
  }
  r.skip = r.in_line < 0;
  return r;
}

// Row i of a decode call; *offset receives the window's first position (num_accepted_tokens - 1
// or 0) and *new_len the number of state positions the row writes.
CAUSAL_CONV1D_HOST_DEVICE inline ServingRow serving_update_row(const ServingUpdateParams& p, int64_t i, int64_t* offset,
                                                               int64_t* new_len) {
  ServingRow r;
  if (p.query_start_loc.data) {
    serving_token_range(p.query_start_loc, i, p.total_tokens, &r.start, &r.len);
  } else {
    r.start = 0;
    r.len = p.seqlen;
  }
  if (p.conv_state_indices == nullptr) {
    r.in_line = r.out_line = i < p.num_cache_lines ? i : -1;
  } else {
    const int64_t col_in = p.prefix_caching ? p.initial_state_idx.at(i) : 0;
    const int64_t col_out = p.prefix_caching ? p.block_idx_last.at(i) : 0;
    r.in_line = serving_line(p.conv_state_indices, p.csi_seq_stride, p.csi_block_stride, p.csi_blocks, i, col_in,
                             p.num_cache_lines, p.padding);
    r.out_line = serving_line(p.conv_state_indices, p.csi_seq_stride, p.csi_block_stride, p.csi_blocks, i, col_out,
                              p.num_cache_lines, p.padding);
  }
  const bool spec = p.num_accepted_tokens.data != nullptr;
  *offset = spec ? p.num_accepted_tokens.at(i) - 1 : 0;
  *new_len = spec ? p.width - 2 + r.len : p.width - 1;
  // A window or a new state that does not fit the line is invalid metadata (rejected on the CPU).
  const bool fits = *offset >= 0 && *offset + p.width - 1 <= p.state_len && *new_len <= p.state_len;
  r.skip = r.in_line < 0 || !fits;
  return r;
}

}  // namespace causal_conv1d
