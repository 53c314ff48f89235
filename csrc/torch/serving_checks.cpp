// Checks of the serving API's metadata values (causal_conv1d/serving.py): offsets, cache lines,
// block indices and accepted-token counts, read on the host (the CPU backend always, the GPU only
// when asked to, since it costs a synchronisation). Shapes, dtypes and devices are checked when the
// params are built (make_serving_params.cpp).
#include <c10/util/Exception.h>

#include <string>
#include <vector>

#include "checks.h"
#include "op_names.h"

namespace causal_conv1d::torch_ops {

namespace {

constexpr const char* kFn = kServingFwdOp.error;
constexpr const char* kUpd = kServingUpdateOp.error;

// Column `col` of row i of an index table must exist and name a line of the cache (or padding).
void check_table_entry(const char* op, const char* table, const int32_t* data, int64_t seq_stride, int64_t block_stride,
                       int64_t blocks, int64_t num_lines, int64_t i, int64_t col, const char* col_name) {
  TORCH_CHECK(col >= 0 && col < blocks, op, ": ", col_name, "[", i, "] = ", col, " is not a column of ", table, " (",
              blocks, " columns)");
  const int64_t line = data[i * seq_stride + col * block_stride];
  TORCH_CHECK(line < num_lines, op, ": ", table, "[", i, blocks > 1 ? ", " : "", blocks > 1 ? std::to_string(col) : "",
              "] = ", line, " is not a cache line (the cache has ", num_lines,
              "; negative values, pad_slot_id and null_block_id mark padding)");
}

}  // namespace

void validate_serving_fwd_metadata(const ServingFwdParams& p) {
  const IndexVec& q = p.query_start_loc;
  TORCH_CHECK(q.at(0) == 0, kFn, ": query_start_loc[0] must be 0, got ", q.at(0));
  for (int64_t i = 0; i < p.batch; ++i)
    TORCH_CHECK(q.at(i + 1) >= q.at(i), kFn, ": query_start_loc must be non-decreasing, got query_start_loc[", i,
                "] = ", q.at(i), " > query_start_loc[", i + 1, "] = ", q.at(i + 1));
  TORCH_CHECK(q.at(p.batch) == p.total_tokens, kFn, ": query_start_loc[-1] must be x.size(1) = ", p.total_tokens,
              " (every token belongs to a sequence), got ", q.at(p.batch));
  if (!p.cache_indices) return;
  for (int64_t i = 0; i < p.batch; ++i) {
    auto entry = [&](int64_t col, const char* col_name) {
      check_table_entry(kFn, "cache_indices", p.cache_indices, p.ci_seq_stride, p.ci_block_stride, p.ci_blocks,
                        p.num_cache_lines, i, col, col_name);
    };
    if (!p.prefix_caching) {
      entry(0, "column");
      continue;
    }
    const int64_t first = p.block_idx_first.at(i), last = p.block_idx_last.at(i);
    const int64_t computed = p.num_computed_tokens.at(i), len = q.at(i + 1) - q.at(i);
    TORCH_CHECK(computed >= 0, kFn, ": num_computed_tokens[", i, "] must be >= 0, got ", computed);
    entry(p.initial_state_idx.at(i), "initial_state_idx");
    if (len == 0) continue;
    // The blocks the chunk's tokens computed .. computed + len - 1 fall in.
    const int64_t crossed = (computed + len - 1) / p.block_size - computed / p.block_size;
    TORCH_CHECK(last - first == crossed, kFn, ": sequence ", i, " (", len, " tokens after ", computed,
                " computed, blocks of ", p.block_size, ") crosses ", crossed,
                " block boundaries, but block_idx_last_scheduled_token - block_idx_first_scheduled_token = ", last,
                " - ", first);
    for (int64_t col = first; col <= last; ++col) entry(col, "block_idx_first/last_scheduled_token");
  }
}

void validate_serving_update_metadata(const ServingUpdateParams& p) {
  const IndexVec& q = p.query_start_loc;
  if (q.data) {
    TORCH_CHECK(q.at(0) >= 0, kUpd, ": query_start_loc[0] must be >= 0, got ", q.at(0));
    for (int64_t i = 0; i < p.batch; ++i)
      TORCH_CHECK(q.at(i + 1) >= q.at(i), kUpd, ": query_start_loc must be non-decreasing, got query_start_loc[", i,
                  "] = ", q.at(i), " > query_start_loc[", i + 1, "] = ", q.at(i + 1));
    TORCH_CHECK(q.at(p.batch) <= p.total_tokens, kUpd, ": query_start_loc[-1] = ", q.at(p.batch),
                " exceeds x.size(0) = ", p.total_tokens);
  }
  for (int64_t i = 0; i < p.batch; ++i) {
    int64_t offset = 0, new_len = 0;
    const ServingRow r = serving_update_row(p, i, &offset, &new_len);
    if (p.conv_state_indices) {
      const int64_t col_in = p.prefix_caching ? p.initial_state_idx.at(i) : 0;
      check_table_entry(kUpd, "conv_state_indices", p.conv_state_indices, p.csi_seq_stride, p.csi_block_stride,
                        p.csi_blocks, p.num_cache_lines, i, col_in, p.prefix_caching ? "initial_state_idx" : "column");
      if (p.prefix_caching)
        check_table_entry(kUpd, "conv_state_indices", p.conv_state_indices, p.csi_seq_stride, p.csi_block_stride,
                          p.csi_blocks, p.num_cache_lines, i, p.block_idx_last.at(i), "block_idx_last_scheduled_token");
    }
    if (r.in_line < 0 || r.len == 0) continue;  // padding: nothing is read or written
    if (p.num_accepted_tokens.data) {
      const int64_t accepted = p.num_accepted_tokens.at(i);
      TORCH_CHECK(accepted >= 1 && accepted - 1 + p.width - 1 <= p.state_len, kUpd, ": num_accepted_tokens[", i,
                  "] = ", accepted, " must be in [1, state_len - width + 2] = [1, ", p.state_len - p.width + 2,
                  "]: the window starts at position num_accepted_tokens - 1 of the state");
      TORCH_CHECK(new_len <= p.state_len, kUpd, ": speculative decoding keeps width - 2 + the row's ", r.len,
                  " tokens = ", new_len, " state positions, but conv_state's state_len is ", p.state_len, " (row ", i,
                  ")");
    }
  }
}

namespace {

// Host copies of index tensors, kept alive for one validation.
struct HostCopies {
  std::vector<at::Tensor> keep;
  IndexVec vec(const OptTensor& t) {
    if (!t) return {};
    keep.push_back(t->to(at::kCPU).contiguous());
    return {keep.back().data_ptr<int32_t>(), 1};
  }
  // A (batch,) or (batch, blocks) table: data, seq stride, block stride.
  const int32_t* table(const OptTensor& t, int64_t* seq_stride, int64_t* block_stride) {
    if (!t) return nullptr;
    keep.push_back(t->to(at::kCPU).contiguous());
    const at::Tensor& h = keep.back();
    *seq_stride = h.dim() == 2 ? h.size(1) : 1;
    *block_stride = h.dim() == 2 ? 1 : 0;
    return h.data_ptr<int32_t>();
  }
};

}  // namespace

void validate_serving_fwd_metadata_on_host(const ServingFwdParams& p, const at::Tensor& query_start_loc,
                                           const OptTensor& cache_indices, const OptTensor& block_idx_first,
                                           const OptTensor& block_idx_last, const OptTensor& initial_state_idx,
                                           const OptTensor& num_computed_tokens) {
  HostCopies h;
  ServingFwdParams hp = p;
  hp.query_start_loc = h.vec(query_start_loc);
  hp.cache_indices = h.table(cache_indices, &hp.ci_seq_stride, &hp.ci_block_stride);
  if (hp.prefix_caching) {
    hp.block_idx_first = h.vec(block_idx_first);
    hp.block_idx_last = h.vec(block_idx_last);
    hp.initial_state_idx = h.vec(initial_state_idx);
    hp.num_computed_tokens = h.vec(num_computed_tokens);
  }
  validate_serving_fwd_metadata(hp);
}

void validate_serving_update_metadata_on_host(const ServingUpdateParams& p, const OptTensor& conv_state_indices,
                                              const OptTensor& num_accepted_tokens, const OptTensor& query_start_loc,
                                              const OptTensor& block_idx_last, const OptTensor& initial_state_idx) {
  HostCopies h;
  ServingUpdateParams hp = p;
  hp.conv_state_indices = h.table(conv_state_indices, &hp.csi_seq_stride, &hp.csi_block_stride);
  hp.num_accepted_tokens = h.vec(num_accepted_tokens);
  hp.query_start_loc = h.vec(query_start_loc);
  if (hp.prefix_caching) {
    hp.block_idx_last = h.vec(block_idx_last);
    hp.initial_state_idx = h.vec(initial_state_idx);
  }
  validate_serving_update_metadata(hp);
}

}  // namespace causal_conv1d::torch_ops
