// The portability layer: the few runtime calls, types and device intrinsics our kernels use, for
// HIP (AMD, the primary target) and CUDA (NVIDIA, where the same source is tested and measured).
// Only what we use is wrapped; nothing else of either API is renamed.
//
// The backend comes from the generated build_config.h (cmake/build_config.h.in).
#pragma once

#include <atomic>
#include <cstdint>

#include "causal_conv1d/build_config.h"

#if CAUSAL_CONV1D_BACKEND_HIP
#include <hip/hip_runtime.h>
#elif CAUSAL_CONV1D_BACKEND_CUDA
#include <cuda_runtime.h>
#else
#error "gpu_runtime.h is for GPU builds: build_config.h sets neither CAUSAL_CONV1D_BACKEND_HIP nor _CUDA"
#endif

namespace causal_conv1d::gpu {

#if CAUSAL_CONV1D_BACKEND_HIP
using Stream = hipStream_t;
using Error = hipError_t;
constexpr Error kGpuSuccess = hipSuccess;
inline Error last_error() { return hipGetLastError(); }
inline const char* error_string(Error e) { return hipGetErrorString(e); }
inline Error get_device_count(int* n) { return hipGetDeviceCount(n); }
inline Error gpu_malloc(void** p, size_t n) { return hipMalloc(p, n); }
inline Error gpu_free(void* p) { return hipFree(p); }
inline Error gpu_memcpy_h2d(void* d, const void* s, size_t n) { return hipMemcpy(d, s, n, hipMemcpyHostToDevice); }
inline Error gpu_memcpy_d2h(void* d, const void* s, size_t n) { return hipMemcpy(d, s, n, hipMemcpyDeviceToHost); }
inline Error gpu_synchronize() { return hipDeviceSynchronize(); }
inline Error gpu_stream_create(Stream* s) { return hipStreamCreate(s); }
inline Error gpu_stream_destroy(Stream s) { return hipStreamDestroy(s); }
#else
using Stream = cudaStream_t;
using Error = cudaError_t;
constexpr Error kGpuSuccess = cudaSuccess;
inline Error last_error() { return cudaGetLastError(); }
inline const char* error_string(Error e) { return cudaGetErrorString(e); }
inline Error get_device_count(int* n) { return cudaGetDeviceCount(n); }
inline Error gpu_malloc(void** p, size_t n) { return cudaMalloc(p, n); }
inline Error gpu_free(void* p) { return cudaFree(p); }
inline Error gpu_memcpy_h2d(void* d, const void* s, size_t n) { return cudaMemcpy(d, s, n, cudaMemcpyHostToDevice); }
inline Error gpu_memcpy_d2h(void* d, const void* s, size_t n) { return cudaMemcpy(d, s, n, cudaMemcpyDeviceToHost); }
inline Error gpu_synchronize() { return cudaDeviceSynchronize(); }
inline Error gpu_stream_create(Stream* s) { return cudaStreamCreate(s); }
inline Error gpu_stream_destroy(Stream s) { return cudaStreamDestroy(s); }
#endif

// Wave (warp) size of the target being compiled. RDNA (gfx10-12) and NVIDIA run 32 lanes; GCN and
// CDNA (gfx8, gfx9: gfx90a, gfx942, ...) run 64. warpSize is a run-time value since ROCm 7 and
// __AMDGCN_WAVEFRONT_SIZE is deprecated, so the choice is made from the target macros. In the
// host pass no target is known: host code must not size anything by kWarpSize (block sizes are
// multiples of 64, valid for both), and checks the device's warp size at run time instead.
#if defined(__GFX8__) || defined(__GFX9__)
constexpr int kWarpSize = 64;
#else
constexpr int kWarpSize = 32;
#endif

// Shuffles always name their width; on CUDA every lane of the warp takes part.
template <typename T>
__device__ __forceinline__ T shfl_xor(T v, int lane_mask, int width) {
#if CAUSAL_CONV1D_BACKEND_HIP
  return __shfl_xor(v, lane_mask, width);
#else
  return __shfl_xor_sync(0xffffffffu, v, lane_mask, width);
#endif
}

template <typename T>
__device__ __forceinline__ T shfl(T v, int src_lane, int width) {
#if CAUSAL_CONV1D_BACKEND_HIP
  return __shfl(v, src_lane, width);
#else
  return __shfl_sync(0xffffffffu, v, src_lane, width);
#endif
}

template <typename T>
__device__ __forceinline__ T shfl_up(T v, unsigned delta, int width) {
#if CAUSAL_CONV1D_BACKEND_HIP
  return __shfl_up(v, delta, width);
#else
  return __shfl_up_sync(0xffffffffu, v, delta, width);
#endif
}

// A value the same on every lane of the warp (a warp's strip or range index), said so to the
// compiler: on AMD it then lives in a scalar register, and so does what is computed from it, which
// leaves the vector registers to per-lane data. NVIDIA has no such distinction (the identity).
__device__ __forceinline__ uint32_t warp_uniform(uint32_t v) {
#if CAUSAL_CONV1D_BACKEND_HIP
  return __builtin_amdgcn_readfirstlane(v);
#else
  return v;
#endif
}

// True on every lane when `pred` holds on every lane of the warp (all lanes take part).
__device__ __forceinline__ bool warp_all(bool pred) {
#if CAUSAL_CONV1D_BACKEND_HIP
  return __all(pred);
#else
  return __all_sync(0xffffffffu, pred);
#endif
}

// True on every thread when `pred` holds on every thread of the block; a barrier, so every
// thread of the block must call it (none may have returned before). The same name on both vendors.
__device__ __forceinline__ bool block_all(bool pred) { return __syncthreads_and(pred) != 0; }

template <typename T>
__device__ __forceinline__ T shfl_down(T v, unsigned delta, int width) {
#if CAUSAL_CONV1D_BACKEND_HIP
  return __shfl_down(v, delta, width);
#else
  return __shfl_down_sync(0xffffffffu, v, delta, width);
#endif
}

// a / b to about 1 ulp, without IEEE division's fix-up sequence (used where the result is a
// SiLU feeding a 16-bit or fp32 output, far inside the tests' tolerances). HIP's __fdividef is
// still an IEEE division, hence the AMD reciprocal builtin.
__device__ __forceinline__ float fast_div(float a, float b) {
#if CAUSAL_CONV1D_BACKEND_HIP
  return a * __builtin_amdgcn_rcpf(b);
#else
  return __fdividef(a, b);
#endif
}

// exp(-v) to about 2 ulp from the hardware base-2 exponential, with results below 2^-126 flushed
// to 0 (every caller adds it to 1, where they vanish anyway). NVIDIA's __expf carries a
// denormal-range fix-up (a compare and two predicated multiplies) that this skips.
__device__ __forceinline__ float fast_exp_neg(float v) {
  const float e = v * -1.4426950408889634f;  // -v log2(e)
#if CAUSAL_CONV1D_BACKEND_HIP
  return __builtin_amdgcn_exp2f(e);
#else
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(e));
  return r;
#endif
}

// Asks L2 for the line holding p; no register is written, so nothing waits for it. NVIDIA only:
// elsewhere it does nothing, and checked_l2_ahead (kernel_utils.h) keeps the AMD tuning rows from
// asking for it.
__device__ __forceinline__ void prefetch_l2([[maybe_unused]] const void* p) {
#if CAUSAL_CONV1D_BACKEND_CUDA
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
#endif
}

#if CAUSAL_CONV1D_BACKEND_CUDA

// Asynchronous 4-byte copies from global to shared memory (cp.async, sm_80 on; the tuning rows
// that use them are NVIDIA's): the data travels without holding registers. Both addresses are
// 4-byte aligned. Copies are grouped by cp_async_commit; cp_async_wait<N> returns once at most N
// of the thread's newest groups are still in flight, and the issuing thread may then read what
// those before them copied (no barrier: other threads' copies are not covered). The shared
// address is a shared-window one (shared_addr): computed once, a stage's is a constant offset.
__device__ __forceinline__ uint32_t shared_addr(const void* smem) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(smem));
}
__device__ __forceinline__ void cp_async4(uint32_t smem, const void* gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(smem), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int kInFlight>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kInFlight) : "memory");
}
#endif

// SiLU for results stored as 16-bit values. On NVIDIA: x/2 * (1 + tanh(x/2)) with the hardware
// tanh.approx (one special-function op instead of exp plus reciprocal; relative error about 2^-11,
// far below a 16-bit result's rounding). Elsewhere, and for float32 results, x / (1 + exp(-x)).
__device__ __forceinline__ float silu_for_16bit(float v) {
#if CAUSAL_CONV1D_BACKEND_CUDA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
  const float h = 0.5f * v;
  float t;
  asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(h));
  return fmaf(h, t, h);
#else
  return fast_div(v, 1.0f + __expf(-v));
#endif
}

// Float atomic add to global memory (compiled with -munsafe-fp-atomics on AMD: hardware atomics).
__device__ __forceinline__ void atomic_add(float* addr, float v) { atomicAdd(addr, v); }

// Whether atomic_add4 is one vector reduction (sm_90 on: red.global.add.v4.f32, one L2 atomic
// operation for 4 floats) rather than an atomic a float. AMD has no packed f32 add.
#if CAUSAL_CONV1D_BACKEND_CUDA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
constexpr bool kVectorAtomics = true;
#else
constexpr bool kVectorAtomics = false;
#endif

// addr[i] += v[i] for the 4 floats at addr (16-byte aligned); each element's add is atomic (not
// the 4 together).
__device__ __forceinline__ void atomic_add4(float* addr, const float (&v)[4]) {
#if CAUSAL_CONV1D_BACKEND_CUDA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(__cvta_generic_to_global(addr)), "f"(v[0]),
               "f"(v[1]), "f"(v[2]), "f"(v[3])
               : "memory");
#else
  for (int i = 0; i < 4; ++i) atomic_add(addr + i, v[i]);
#endif
}

// Converts the runtime's error of the last launch into our status code.
inline int launch_status() {
  const Error e = last_error();
  return e == kGpuSuccess ? 0 : static_cast<int>(e);
}

// Programmatic dependent launch (NVIDIA, kernels compiled for sm_90 or later): a kernel started by
// launch_overlapping may begin while the kernel before it on the stream still runs, once each block
// of that kernel has called allow_next_kernel (or exited), and must call wait_prior_kernel before it
// touches memory that kernel writes (after the wait, all of that kernel's writes are visible).
// Elsewhere (AMD, older NVIDIA, code compiled for an older virtual arch) the two calls do nothing
// and the launch is an ordinary stream-ordered one.
// Every kernel of ours is launched this way, so its launch and setup overlap the end of whatever
// ran before it on the stream (ours or not; not on the legacy default stream, where the driver
// runs them one after the other: an H200 probe, benchmarks/NOTES.md, forty-fourth session), and
// obeys two rules: no memory access before its
// wait_prior_kernel (the kernel before may be anyone's, writing or reading anything), and
// allow_next_kernel only after it (a kernel of ours started by it may read its inputs before its
// own wait, as the channel-first backward's states pass and the seq_idx walk do: those inputs'
// writers have finished only once this kernel's wait returned).
__device__ __forceinline__ void allow_next_kernel() {
#if CAUSAL_CONV1D_BACKEND_CUDA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}
__device__ __forceinline__ void wait_prior_kernel() {
#if CAUSAL_CONV1D_BACKEND_CUDA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
// Launches kernel(args...) with no dynamic shared memory, overlapping the kernel before it on the
// stream where the code that runs was compiled for sm_90 or later (its PTX version, which is what
// decides whether wait_prior_kernel waits; a JIT from older PTX does not). Returns a status as
// launch_status.
#if CAUSAL_CONV1D_BACKEND_CUDA
// Whether the code of `kernel` that runs on the current device was compiled for sm_90 or later
// (then its wait_prior_kernel waits). cudaFuncGetAttributes costs ~0.5 us a call on the host (H200),
// a tenth of an eager call of ours, so the answer is kept per device: every kernel of the library is
// built for the same architectures (one CUDA architecture list for all its files), so one kernel's
// answer is every kernel's. A failed query is not kept (the launch after it reports the error).
inline bool overlap_capable(const void* kernel) {
  constexpr int kKnownDevices = 64;
  static std::atomic<int8_t> known[kKnownDevices];  // 0: not asked yet, 1: yes, 2: no
  int device = 0;
  if (cudaGetDevice(&device) != kGpuSuccess) {
    (void)last_error();
    return false;
  }
  if (device >= 0 && device < kKnownDevices) {
    const int8_t k = known[device].load(std::memory_order_relaxed);
    if (k != 0) return k == 1;
  }
  cudaFuncAttributes attr;
  if (cudaFuncGetAttributes(&attr, kernel) != kGpuSuccess) {
    (void)last_error();  // (the launch reports what is wrong)
    return false;
  }
  const bool yes = attr.ptxVersion >= 90;
  if (device >= 0 && device < kKnownDevices) known[device].store(yes ? 1 : 2, std::memory_order_relaxed);
  return yes;
}
#endif

template <typename... Params, typename... Args>
int launch_overlapping(void (*kernel)(Params...), dim3 grid, dim3 block, Stream stream, const Args&... args) {
#if CAUSAL_CONV1D_BACKEND_CUDA
  if (overlap_capable(reinterpret_cast<const void*>(kernel))) {
    cudaLaunchAttribute overlap[1];
    overlap[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    overlap[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config = {};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = 0;
    config.stream = stream;
    config.attrs = overlap;
    config.numAttrs = 1;
    const Error e = cudaLaunchKernelEx(&config, kernel, args...);
    if (e != kGpuSuccess) (void)last_error();  // (returned, not left for the next launch check to find)
    return e == kGpuSuccess ? 0 : static_cast<int>(e);
  }
#endif
  kernel<<<grid, block, 0, stream>>>(args...);
  return launch_status();
}

}  // namespace causal_conv1d::gpu
