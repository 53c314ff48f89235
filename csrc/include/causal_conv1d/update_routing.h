// Which kernel a causal_conv1d_update call takes (update.hip). Host-only, kept out of the GPU
// sources so that tests/cpp checks it without a GPU.
#pragma once

#include <cstdint>

#include "causal_conv1d/access.h"
#include "causal_conv1d/params.h"

namespace causal_conv1d {

// Whether every row of a decode-layout call moves in runs of vb bytes of x / out and vb * state_len
// bytes of state a thread: dim a whole number of vb-byte channel groups, pointers and batch strides
// aligned to those runs' accesses.
inline bool decode_runs_fit(const UpdateParams& p, int vb) {
  const int es = dtype_size(p.x_dtype), sa = run_access(int(vb * p.state_len));
  return p.dim % (vb / es) == 0 && aligned_to(p.x, vb) && aligned_to(p.out, vb) && aligned_to(p.conv_state, sa) &&
         multiple_of(p.x_batch_stride * es, vb) && multiple_of(p.out_batch_stride * es, vb) &&
         multiple_of(p.state_batch_stride * es, sa);
}

// Whether a single-token update has the layout update_decode_kernel needs (update.hip's comments
// say why each part): 32 bits of x a thread over whole rows, the state channel-major and
// contiguous, aligned runs, and the counts and batch strides the kernel keeps in 32-bit fields
// (larger ones take the general kernel).
inline bool fits_decode_kernel(const UpdateParams& p) {
  const int64_t S = p.state_len;
  // (DecodeArgs' 32-bit fields.)
  const auto i32 = [](int64_t v) { return v >= 0 && v <= INT32_MAX; };
  return i32(p.dim) && i32(p.batch) && i32(p.num_cache_lines) && i32(p.x_batch_stride) && i32(p.state_batch_stride) &&
         p.seqlen == 1 && p.cache_seqlens == nullptr && (S == p.width - 1 || S == p.width) && p.x_c_stride == 1 &&
         p.out_c_stride == 1 && p.state_l_stride == 1 && p.state_c_stride == S && decode_runs_fit(p, 4);
}

// Bytes of channels a thread owns in update_decode_kernel, for a call fits_decode_kernel accepts
// (which guarantees 4): 8 where dim and every row's alignment allow 8-byte runs of x and out and
// 8 * state_len-byte runs of the state, and the batch is one update_tuning names for them: from
// wide_min_batch up to max_grid_y (one row a thread; wide_min_batch 0 turns it off), or past
// max_grid_y (the batch loop) for 16-bit x when wide_loop_16bit; else 4.
inline int decode_vector_bytes(const UpdateParams& p, int64_t wide_min_batch, int64_t max_grid_y,
                               bool wide_loop_16bit) {
  const bool wide = p.batch > max_grid_y ? wide_loop_16bit && dtype_size(p.x_dtype) == 2
                                         : wide_min_batch != 0 && p.batch >= wide_min_batch;
  return wide && decode_runs_fit(p, 8) ? 8 : 4;
}

}  // namespace causal_conv1d
