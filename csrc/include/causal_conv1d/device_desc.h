// What the launchers know of the device they launch on (DeviceDesc) and the arch families the
// per-arch tuning table (csrc/kernels/tuning.h) has rows for. Torch-free, host and device code;
// which family an arch is, and whether a build runs on it, is decided in arch_check.h.
#pragma once

namespace causal_conv1d {

// Families the per-arch tuning table (csrc/kernels/tuning.h) has a row for. Values are stable:
// DeviceDesc carries them from the torch layer to the launchers.
enum class ArchFamily : int {
  kNvidia = 0,  // sm80+ (Ampere, Hopper and newer): 32-lane warps, the CUDA build of the source
  kRdna3 = 1,   // gfx11 (and gfx10): wave32
  kRdna4 = 2,   // gfx12 (gfx1200, gfx1201): wave32, 64 KB LDS per workgroup
  kCdna = 3,    // gfx9 (gfx90a, gfx942, gfx950) and gfx8: wave64
};

// What a launcher needs to know of the device it launches on: the tuning-table row (family), how
// many CUs / SMs to fill, and the wave size (checked against the compiled one before any launch).
struct DeviceDesc {
  ArchFamily family = ArchFamily::kNvidia;
  int cu_count = 1;
  int wave_size = 32;
};

}  // namespace causal_conv1d
