// The first-GPU-call decision: which device archs a build's code objects (AMD) or PTX (NVIDIA)
// run on, and which wave size an arch's kernels assume.
#include <gtest/gtest.h>

#include "causal_conv1d/arch_check.h"

namespace {

using causal_conv1d::arch_supported;
using causal_conv1d::expected_warp_size;

TEST(ArchCheck, AmdNeedsTheExactArch) {
  EXPECT_TRUE(arch_supported("gfx1201", "gfx1201", true));
  EXPECT_TRUE(arch_supported("gfx1100,gfx1201,gfx942", "gfx942", true));
  EXPECT_TRUE(arch_supported("gfx90a:xnack-", "gfx90a", true));  // feature suffix ignored
  EXPECT_FALSE(arch_supported("gfx1201", "gfx1200", true));
  EXPECT_FALSE(arch_supported("gfx1201,gfx942", "gfx1100", true));
  EXPECT_FALSE(arch_supported("", "gfx1201", true));
}

TEST(ArchCheck, NvidiaRunsAnyArchUpToTheDevice) {
  EXPECT_TRUE(arch_supported("90", "90", false));
  EXPECT_TRUE(arch_supported("80", "90", false));  // PTX of an older arch
  EXPECT_TRUE(arch_supported("80,90", "100", false));
  EXPECT_FALSE(arch_supported("90", "80", false));
  EXPECT_FALSE(arch_supported("", "90", false));
}

TEST(ArchCheck, WaveSizePerArch) {
  EXPECT_EQ(expected_warp_size("gfx1201", true), 32);
  EXPECT_EQ(expected_warp_size("gfx1100", true), 32);
  EXPECT_EQ(expected_warp_size("gfx942", true), 64);
  EXPECT_EQ(expected_warp_size("gfx90a", true), 64);
  EXPECT_EQ(expected_warp_size("gfx803", true), 64);
  EXPECT_EQ(expected_warp_size("90", false), 32);
}

}  // namespace
