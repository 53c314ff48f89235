// Aligned accesses: the widths the kernels move runs of data in, and the host's alignment tests.
// Host and device; no GPU header needed on the host.
#pragma once

#include <cstdint>

#include "causal_conv1d/numeric.h"  // CAUSAL_CONV1D_HOST_DEVICE

namespace causal_conv1d {

// The widest access (16, 8 or 4 bytes) that divides a run of `bytes` bytes: a run starting at a
// multiple of it moves in accesses of that size.
CAUSAL_CONV1D_HOST_DEVICE constexpr int run_access(int bytes) { return bytes % 16 == 0 ? 16 : bytes % 8 == 0 ? 8 : 4; }

inline bool multiple_of(int64_t v, int64_t k) { return v % k == 0; }

inline bool aligned_to(const void* ptr, int64_t bytes) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; }

}  // namespace causal_conv1d
