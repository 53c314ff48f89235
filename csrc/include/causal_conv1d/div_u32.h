// Division by a divisor fixed at launch, for the kernels' index math: made on the host, passed in
// the kernel's parameters. Host and device; no GPU header needed on the host (tests/cpp checks it).
#pragma once

#include <cstdint>

#include "causal_conv1d/numeric.h"  // CAUSAL_CONV1D_HOST_DEVICE

namespace causal_conv1d {

// n / d for 1 <= d <= 2^31 and n < 2^31: a multiply-high, an add and a shift, where an integer
// division is 20-40 instructions on either vendor's GPU. Round-up method: s = ceil(log2 d), mul =
// floor(2^32 (2^s - d) / d) + 1 (below 2^32), n / d = (umulhi(n, mul) + n) >> s (the sum stays
// below 2^32 for n < 2^31; d = 1 gives mul 1, s 0).
struct DivU32 {
  uint32_t mul = 1, shift = 0;
  static DivU32 make(uint32_t d) {
    DivU32 r;
    if (d == 0) return r;  // (an empty grid's: nothing is divided)
    while ((uint64_t(1) << r.shift) < d) ++r.shift;
    r.mul = static_cast<uint32_t>(((uint64_t(1) << 32) * ((uint64_t(1) << r.shift) - d)) / d + 1);
    return r;
  }
  // (The high word of a 64-bit product: nvcc and clang make it one multiply-high instruction.)
  CAUSAL_CONV1D_HOST_DEVICE uint32_t div(uint32_t n) const {
    const uint32_t hi = static_cast<uint32_t>((uint64_t(n) * mul) >> 32);
    return (hi + n) >> shift;
  }
};

}  // namespace causal_conv1d
