// Host-side helpers for the GoogleTest suite: typed buffers, random data, a threaded ParallelFor,
// and device buffers that free themselves.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "causal_conv1d/build_config.h"
#include "causal_conv1d/cpu.h"
#include "causal_conv1d/numeric.h"
#if CAUSAL_CONV1D_HAS_GPU
#include "causal_conv1d/gpu.h"
#endif

namespace cc_test {

using causal_conv1d::DType;

// A buffer holding n elements of dtype t, with float views for filling and checking.
struct Buffer {
  DType dtype = DType::kFloat32;
  std::vector<uint8_t> bytes;

  Buffer() = default;
  Buffer(DType t, size_t n) : dtype(t), bytes(n * causal_conv1d::dtype_size(t)) {}
  size_t size() const { return bytes.size() / causal_conv1d::dtype_size(dtype); }
  void* data() { return bytes.data(); }
  const void* data() const { return bytes.data(); }
  float get(int64_t i) const { return causal_conv1d::load_as_float(bytes.data(), dtype, i); }
  void set(int64_t i, float v) { causal_conv1d::store_from_float(bytes.data(), dtype, i, v); }
};

inline Buffer random_buffer(DType t, size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  Buffer b(t, n);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (size_t i = 0; i < n; ++i) b.set(i, dist(gen));
  return b;
}

// Relative tolerance of one rounding to dtype t (plus fp32 accumulation slack).
inline float tolerance(DType t) {
  switch (t) {
    case DType::kFloat16: return 2e-3f;
    case DType::kBFloat16: return 1.6e-2f;
    default: return 1e-5f;
  }
}

// A ParallelFor on std::threads, splitting [0, n) into `threads` ranges: results must not
// depend on how the work is split.
inline causal_conv1d::cpu::ParallelFor threaded_for(int threads) {
  return [threads](int64_t n, int64_t, const std::function<void(int64_t, int64_t)>& body) {
    std::vector<std::thread> pool;
    const int64_t step = (n + threads - 1) / threads;
    for (int64_t b = 0; b < n; b += step) pool.emplace_back(body, b, std::min(n, b + step));
    for (auto& th : pool) th.join();
  };
}

#if CAUSAL_CONV1D_HAS_GPU
inline bool have_gpu() { return causal_conv1d::gpu::device_count() > 0; }

// Descriptor of device 0, what the torch layer hands the launchers.
inline causal_conv1d::DeviceDesc device0() {
  causal_conv1d::DeviceDesc d;
  const int code = causal_conv1d::gpu::device_desc(0, &d);
  if (code != 0) ADD_FAILURE() << "device_desc: " << causal_conv1d::gpu::gpu_status_string(code);
  return d;
}

#define CC_GPU_OK(expr)                                                                   \
  do {                                                                                    \
    const int _code = (expr);                                                             \
    ASSERT_EQ(_code, 0) << #expr << ": " << causal_conv1d::gpu::gpu_status_string(_code); \
  } while (0)

// Device copy of a host buffer; freed on destruction.
struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  explicit DeviceBuffer(size_t n) : bytes(n) {
    if (causal_conv1d::gpu::device_malloc(&ptr, n ? n : 1) != 0) ptr = nullptr;
  }
  template <typename V>
  explicit DeviceBuffer(const std::vector<V>& host) : DeviceBuffer(host.size() * sizeof(V)) {
    if (ptr && bytes) causal_conv1d::gpu::copy_to_device(ptr, host.data(), bytes);
  }
  ~DeviceBuffer() {
    if (ptr) causal_conv1d::gpu::device_free(ptr);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <typename V>
  std::vector<V> to_host() const {
    std::vector<V> h(bytes / sizeof(V));
    if (bytes) causal_conv1d::gpu::copy_to_host(h.data(), ptr, bytes);
    return h;
  }
};
#endif

}  // namespace cc_test
