// Block-level primitives from the vendor libraries behind one name: rocPRIM (through hipCUB) on
// AMD, CUB on NVIDIA. Kernel files use causal_conv1d::gpu::blockprim::BlockReduce and friends.
#pragma once

#include "causal_conv1d/gpu_runtime.h"

#if CAUSAL_CONV1D_BACKEND_HIP
// rocPRIM 6.4 marks the storage type behind its own block_reduce TempStorage deprecated, so the
// documented `__shared__ BlockReduce::TempStorage` use warns from inside the library.
#ifndef ROCPRIM_NO_DEPRECATION_WARNINGS
#define ROCPRIM_NO_DEPRECATION_WARNINGS
#endif
#include <hipcub/hipcub.hpp>
namespace causal_conv1d::gpu {
namespace blockprim = ::hipcub;
}
#else
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
namespace causal_conv1d::gpu {
namespace blockprim = ::cub;
}
#endif
