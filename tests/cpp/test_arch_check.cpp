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

TEST(ArchCheck, FamilyPerArch) {
  using causal_conv1d::arch_family;
  using causal_conv1d::ArchFamily;
  EXPECT_EQ(arch_family("gfx1201", true), ArchFamily::kRdna4);
  EXPECT_EQ(arch_family("gfx1200", true), ArchFamily::kRdna4);
  EXPECT_EQ(arch_family("gfx1100", true), ArchFamily::kRdna3);
  EXPECT_EQ(arch_family("gfx1151", true), ArchFamily::kRdna3);
  EXPECT_EQ(arch_family("gfx1030", true), ArchFamily::kRdna3);
  EXPECT_EQ(arch_family("gfx942", true), ArchFamily::kCdna);
  EXPECT_EQ(arch_family("gfx90a", true), ArchFamily::kCdna);
  EXPECT_EQ(arch_family("90", false), ArchFamily::kNvidia);
  // The family's wave size is the arch's compiled one.
  for (const char* a : {"gfx1201", "gfx1100", "gfx942", "gfx90a"})
    EXPECT_EQ(expected_warp_size(a, true), arch_family(a, true) == ArchFamily::kCdna ? 64 : 32) << a;
}

}  // namespace
