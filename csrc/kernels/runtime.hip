// Device queries, memory helpers and error text for the GPU library, and the tests' late copy (the
// one kernel here).
#include <cstdio>

#include "causal_conv1d/arch_check.h"
#include "causal_conv1d/gpu.h"
#include "causal_conv1d/gpu_runtime.h"

namespace causal_conv1d::gpu {

const char* gpu_status_string(int code) {
  return code > 0 ? error_string(static_cast<Error>(code)) : status_string(code);
}

int device_count() {
  int n = 0;
  if (get_device_count(&n) != kGpuSuccess) {
    (void)last_error();  // clear the sticky "no device" error so later calls start clean
    return 0;
  }
  return n;
}

int device_info(int device, char* arch, int arch_len, int* warp_size) {
#if CAUSAL_CONV1D_BACKEND_HIP
  hipDeviceProp_t prop;
  const Error e = hipGetDeviceProperties(&prop, device);
  if (e != kGpuSuccess) return static_cast<int>(e);
  int i = 0;
  for (; i + 1 < arch_len && prop.gcnArchName[i] != '\0' && prop.gcnArchName[i] != ':'; ++i)
    arch[i] = prop.gcnArchName[i];
  arch[i] = '\0';
#else
  cudaDeviceProp prop;
  const Error e = cudaGetDeviceProperties(&prop, device);
  if (e != kGpuSuccess) return static_cast<int>(e);
  snprintf(arch, arch_len, "%d%d", prop.major, prop.minor);
#endif
  *warp_size = prop.warpSize;
  return 0;
}

int device_desc(int device, DeviceDesc* desc) {
  char arch[64] = {};
  int warp = 0;
  const int status = device_info(device, arch, sizeof(arch), &warp);
  if (status != 0) return status;
  int cus = 0;
#if CAUSAL_CONV1D_BACKEND_HIP
  const Error e = hipDeviceGetAttribute(&cus, hipDeviceAttributeMultiprocessorCount, device);
#else
  const Error e = cudaDeviceGetAttribute(&cus, cudaDevAttrMultiProcessorCount, device);
#endif
  if (e != kGpuSuccess) return static_cast<int>(e);
  desc->family = arch_family(arch, /*hip=*/CAUSAL_CONV1D_BACKEND_HIP);
  desc->cu_count = cus > 0 ? cus : 1;
  desc->wave_size = warp;
  return 0;
}

int device_malloc(void** ptr, size_t bytes) { return static_cast<int>(gpu_malloc(ptr, bytes)); }
int device_free(void* ptr) { return static_cast<int>(gpu_free(ptr)); }
int copy_to_device(void* dst, const void* src, size_t bytes) {
  return static_cast<int>(gpu_memcpy_h2d(dst, src, bytes));
}
int copy_to_host(void* dst, const void* src, size_t bytes) { return static_cast<int>(gpu_memcpy_d2h(dst, src, bytes)); }
int device_synchronize() { return static_cast<int>(gpu_synchronize()); }
int stream_create(void** stream) {
  Stream s{};
  const Error e = gpu_stream_create(&s);
  *stream = e == kGpuSuccess ? static_cast<void*>(s) : nullptr;
  return static_cast<int>(e);
}
int stream_destroy(void* stream) { return static_cast<int>(gpu_stream_destroy(static_cast<Stream>(stream))); }

namespace {

struct LateCopyArgs {
  void* dst[kLateCopyBuffers];
  const void* src[kLateCopyBuffers];
  size_t bytes[kLateCopyBuffers];
  int n;
  int64_t spin_ns;
};

// Lets the kernel after it start at once, then copies after spin_ns (launch_late_copy).
__global__ void late_copy_kernel(LateCopyArgs a) {
  allow_next_kernel();
#if CAUSAL_CONV1D_BACKEND_CUDA && defined(__CUDA_ARCH__)
  auto now = [] {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  };
  const uint64_t t0 = now();
  while (now() - t0 < uint64_t(a.spin_ns)) {
  }
#endif
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (int i = 0; i < a.n; ++i) {
    auto* d = static_cast<unsigned char*>(a.dst[i]);
    const auto* s = static_cast<const unsigned char*>(a.src[i]);
    for (size_t j = size_t(blockIdx.x) * blockDim.x + threadIdx.x; j < a.bytes[i]; j += stride) d[j] = s[j];
  }
}

}  // namespace

int launch_late_copy(void* const* dst, const void* const* src, const size_t* bytes, int n, int64_t spin_ns,
                     void* stream) {
  if (n < 0 || n > kLateCopyBuffers || spin_ns < 0) return kErrInvalidParams;
  LateCopyArgs a{};
  for (int i = 0; i < n; ++i) a.dst[i] = dst[i], a.src[i] = src[i], a.bytes[i] = bytes[i];
  a.n = n, a.spin_ns = spin_ns;
  late_copy_kernel<<<128, 256, 0, static_cast<Stream>(stream)>>>(a);
  return launch_status();
}

}  // namespace causal_conv1d::gpu
