// Helpers shared by the CPU kernels (internal to csrc/cpu).
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>

#include "causal_conv1d/numeric.h"
#include "causal_conv1d/params.h"
#include "causal_conv1d/status.h"
#include "vec.h"

namespace causal_conv1d::cpu {

inline float silu(float v) { return v / (1.0f + std::exp(-v)); }

// The first error status the tasks of a parallel loop report (kSuccess when none does): each
// task returns its status, the launcher returns code().
class FirstError {
 public:
  void note(int status) {
    int none = kSuccess;
    if (status != kSuccess) code_.compare_exchange_strong(none, status);
  }
  int code() const { return code_.load(); }

 private:
  std::atomic<int> code_{kSuccess};
};

// Typed element access with int64 element offsets.
template <typename T>
inline float ld(const void* base, int64_t off) {
  return to_float(static_cast<const T*>(base)[off]);
}
template <typename T>
inline void st(void* base, int64_t off, float v) {
  static_cast<T*>(base)[off] = from_float<T>(v);
}

// Channels processed together in the channel-last element loops (seq_idx): enough contiguous
// floats for the compiler to vectorise, few enough that the rolling window stays in L1.
constexpr int64_t kChannelBlock = 64;
// Time steps per chunk in the channel-first loops (a float buffer of this size stays in L1).
constexpr int64_t kTimeChunk = 2048;

// Strided runs of a tensor's elements <-> float rows. (Named apart from the GPU kernels' load_run /
// store_run in csrc/kernels/kernel_utils.h, which move raw 32-bit words.)

// Gathers n elements of a strided run into floats (one vectorised widen when contiguous).
inline void load_floats(const void* base, DType t, int64_t off, int64_t stride, float* dst, int64_t n) {
  if (stride == 1 || n == 1) {
    vec::widen(static_cast<const char*>(base) + off * dtype_size(t), t, dst, n);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = load_as_float(base, t, off + i * stride);
  }
}

// The same for positions [start, start + n) of a row of `len` elements, zeros outside it.
inline void load_floats_clipped(const void* base, DType t, int64_t off, int64_t stride, int64_t start, int64_t n,
                                int64_t len, float* dst) {
  // [lo, hi): the positions inside the row; zeros before and after.
  const int64_t lo = std::min(std::max<int64_t>(start, 0), start + n);
  const int64_t hi = std::max(lo, std::min(start + n, len));
  std::fill(dst, dst + (lo - start), 0.0f);
  if (hi > lo) load_floats(base, t, off + lo * stride, stride, dst + (lo - start), hi - lo);
  std::fill(dst + (hi - start), dst + n, 0.0f);
}

// Writes n floats into a strided run of dtype t (one vectorised narrow when contiguous).
inline void store_floats(const float* src, DType t, void* base, int64_t off, int64_t stride, int64_t n) {
  if (stride == 1 || n == 1) {
    vec::narrow(src, t, static_cast<char*>(base) + off * dtype_size(t), n);
  } else {
    for (int64_t i = 0; i < n; ++i) store_from_float(base, t, off + i * stride, src[i]);
  }
}

// Channel-last work split: tasks of kChannelBlockVec channels by tlen steps of one batch row,
// numbered (batch, channel block, time block) with the time block fastest. Blocks are whole rows
// up to 4096 channels so that a task walks one contiguous stretch of memory, which the hardware
// prefetchers follow; 256-channel blocks (rows strided by dim) measured 1.4-2x slower on the dev
// machine (AMD EPYC, 2 threads), with or without software prefetch.
constexpr int64_t kChannelBlockVec = 4096;
// Row stride of the float row buffers of a channel-last task: 64 bytes past the block, so rows
// used in the same loop do not sit a multiple of 4 KB apart, where loads falsely wait on stores
// to another row (4K aliasing; the backward's fused dweight update measured 25% slower).
constexpr int64_t kRowStride = kChannelBlockVec + 16;

struct ClTasks {
  int64_t batch, cblocks, tblocks, tlen;
  ClTasks(int64_t batch_, int64_t dim, int64_t seqlen, int64_t tlen_)
      : batch(batch_),
        cblocks((dim + kChannelBlockVec - 1) / kChannelBlockVec),
        tblocks(std::max<int64_t>(1, (seqlen + tlen_ - 1) / tlen_)),
        tlen(tlen_) {}
  int64_t count() const { return batch * cblocks * tblocks; }
};

}  // namespace causal_conv1d::cpu
