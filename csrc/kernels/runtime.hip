// Backend identity and error text for the GPU library (no kernels here).
#include "causal_conv1d/gpu.h"
#include "causal_conv1d/gpu_runtime.h"

namespace causal_conv1d::gpu {

const char* backend_name() {
#if defined(CAUSAL_CONV1D_USE_HIP)
  return "hip";
#else
  return "cuda";
#endif
}

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

int device_malloc(void** ptr, size_t bytes) { return static_cast<int>(gpu_malloc(ptr, bytes)); }
int device_free(void* ptr) { return static_cast<int>(gpu_free(ptr)); }
int copy_to_device(void* dst, const void* src, size_t bytes) { return static_cast<int>(gpu_memcpy_h2d(dst, src, bytes)); }
int copy_to_host(void* dst, const void* src, size_t bytes) { return static_cast<int>(gpu_memcpy_d2h(dst, src, bytes)); }
int device_synchronize() { return static_cast<int>(gpu_synchronize()); }

}  // namespace causal_conv1d::gpu
