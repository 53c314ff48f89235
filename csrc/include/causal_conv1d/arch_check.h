// Whether a build's GPU code runs on a device, and which tuning-table family a device arch is: the
// decisions behind the first-GPU-call check in the torch layer and the launchers' DeviceDesc
// (device_desc.h), kept torch-free so GoogleTest covers them. Host-only.
#pragma once

#include <cstdlib>
#include <sstream>
#include <string>

#include "causal_conv1d/device_desc.h"

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

// The family of a device arch as the build names it ("gfx1201", or "90" on NVIDIA).
inline ArchFamily arch_family(const std::string& device_arch, bool hip) {
  if (!hip) return ArchFamily::kNvidia;
  if (device_arch.rfind("gfx12", 0) == 0) return ArchFamily::kRdna4;
  if (device_arch.rfind("gfx11", 0) == 0 || device_arch.rfind("gfx10", 0) == 0) return ArchFamily::kRdna3;
  return ArchFamily::kCdna;
}

}  // namespace causal_conv1d
