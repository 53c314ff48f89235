// Whether a build's GPU code runs on a device: the decision behind the first-GPU-call check in
// the torch layer, kept torch-free so GoogleTest covers it. Host-only.
#pragma once

#include <cstdlib>
#include <sstream>
#include <string>

namespace causal_conv1d {

// compiled: comma-separated archs of the build ("gfx1201,gfx90a:xnack-" or "80,90").
// device_arch: "gfx1201" (AMD, no feature suffix) or "90" (NVIDIA compute capability).
// AMD code objects are per arch: the arch must be compiled in (feature suffixes do not change it).
// NVIDIA builds embed PTX: any compiled arch up to the device's runs.
inline bool arch_supported(const std::string& compiled, const std::string& device_arch, bool hip) {
  std::stringstream list(compiled);
  for (std::string a; std::getline(list, a, ',');) {
    a = a.substr(0, a.find(':'));
    if (hip ? a == device_arch
            : (!a.empty() && std::atoi(a.c_str()) > 0 && std::atoi(a.c_str()) <= std::atoi(device_arch.c_str())))
      return true;
  }
  return false;
}

// The wave size kernels are compiled for on an arch: 64 on GCN/CDNA (gfx8, gfx9), 32 on RDNA and
// on NVIDIA.
inline int expected_warp_size(const std::string& device_arch, bool hip) {
  return hip && (device_arch.rfind("gfx8", 0) == 0 || device_arch.rfind("gfx9", 0) == 0) ? 64 : 32;
}

// Families the per-arch tuning table (csrc/kernels/tuning.h) has a row for. Values are stable:
// DeviceDesc carries them from the torch layer to the launchers.
enum class ArchFamily : int {
  kNvidia = 0,  // sm80+ (Ampere, Hopper and newer): 32-lane warps, the CUDA build of the source
  kRdna3 = 1,   // gfx11 (and gfx10): wave32
  kRdna4 = 2,   // gfx12 (gfx1200, gfx1201): wave32, 64 KB LDS per workgroup
  kCdna = 3,    // gfx9 (gfx90a, gfx942, gfx950) and gfx8: wave64
};

// The family of a device arch as the build names it ("gfx1201", or "90" on NVIDIA).
inline ArchFamily arch_family(const std::string& device_arch, bool hip) {
  if (!hip) return ArchFamily::kNvidia;
  if (device_arch.rfind("gfx12", 0) == 0) return ArchFamily::kRdna4;
  if (device_arch.rfind("gfx11", 0) == 0 || device_arch.rfind("gfx10", 0) == 0) return ArchFamily::kRdna3;
  return ArchFamily::kCdna;
}

// What a launcher needs to know of the device it launches on: the tuning-table row (family), how
// many CUs / SMs to fill, and the wave size (checked against the compiled one before any launch).
struct DeviceDesc {
  ArchFamily family = ArchFamily::kNvidia;
  int cu_count = 1;
  int wave_size = 32;
};

}  // namespace causal_conv1d
