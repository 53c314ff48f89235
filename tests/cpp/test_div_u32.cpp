// DivU32 (causal_conv1d/div_u32.h), the kernels' division by a launch-time divisor, against the
// division: divisors 1 .. 4096, at and around every power of two up to 2^31, and at random;
// numerators at 0, around multiples of the divisor and at the top of the range (2^31 - 1).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "causal_conv1d/div_u32.h"

namespace {

using causal_conv1d::DivU32;

void check(uint32_t d, std::mt19937& rng) {
  const DivU32 f = DivU32::make(d);
  constexpr uint32_t kTop = 0x7fffffffu;
  std::vector<uint32_t> ns = {0, 1, d - 1, d, kTop, kTop - 1, kTop / d * d, kTop / d * d - 1};
  for (uint32_t k : {1u, 2u, 3u, 1000u}) {
    const uint64_t base = uint64_t(d) * k;
    for (int64_t r = -1; r <= 1; ++r)
      if (int64_t(base) + r >= 0 && uint64_t(int64_t(base) + r) <= kTop) ns.push_back(uint32_t(int64_t(base) + r));
  }
  std::uniform_int_distribution<uint32_t> any(0, kTop);
  for (int i = 0; i < 64; ++i) ns.push_back(any(rng));
  for (uint32_t n : ns) {
    if (n > kTop) continue;
    ASSERT_EQ(f.div(n), n / d) << "n = " << n << ", d = " << d;
  }
}

TEST(DivU32, MatchesDivision) {
  std::mt19937 rng(7);
  for (uint32_t d = 1; d <= 4096; ++d) check(d, rng);
  for (int k = 1; k <= 31; ++k) {
    const uint32_t p = uint32_t(1) << k;
    check(p - 1, rng), check(p, rng);
    if (k < 31) check(p + 1, rng);
  }
  std::uniform_int_distribution<uint32_t> divisor(1, 0x80000000u);
  for (int i = 0; i < 4096; ++i) check(divisor(rng), rng);
}

}  // namespace
