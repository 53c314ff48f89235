// Helpers shared by the CPU kernels (internal to csrc/cpu).
#pragma once

#include <cmath>
#include <cstdint>

#include "causal_conv1d/numeric.h"
#include "causal_conv1d/params.h"

namespace causal_conv1d::cpu {

inline float silu(float v) { return v / (1.0f + std::exp(-v)); }

// Typed element access with int64 element offsets.
template <typename T>
inline float ld(const void* base, int64_t off) {
  return to_float(static_cast<const T*>(base)[off]);
}
template <typename T>
inline void st(void* base, int64_t off, float v) {
  static_cast<T*>(base)[off] = from_float<T>(v);
}

// Rows of channels processed together in the channel-last loops: enough contiguous floats for
// the compiler to vectorise, few enough that the rolling window stays in L1.
constexpr int64_t kChannelBlock = 64;
// Time steps per chunk in the channel-first loops (a float buffer of this size stays in L1).
constexpr int64_t kTimeChunk = 2048;

}  // namespace causal_conv1d::cpu
