// A bounded cache of the large CPU buffers the Python layer allocates for the ops' outputs (out,
// dx). glibc serves a block above its mmap threshold (128 KB, raised up to 32 MB by the blocks it
// has freed) with fresh pages and unmaps it on free, and it trims the heap's top once more than
// twice that threshold is free there. A training step's two large outputs (the forward's out, the
// backward's dx) are freed together at its end, so every step faults their pages in again: on
// the 2-core VM of benchmarks/NOTES.md, 8180 page faults a step at (2, 1024, 4096) bf16, about
// 10 ms of a 15-16 ms autograd step whose kernels take 5 ms; a fresh 32 MB fp32 forward output
// made the call 11 ms against the kernel's 2 ms.
//
// Here a buffer of at least kMinBytes is kept when its tensor dies, up to a limit in bytes over
// all kept buffers (CAUSAL_CONV1D_CPU_CACHE_MB, default 256; 0 turns the cache off), the
// oldest given back first, and handed out again for a request of the same size, the most
// recently kept first. The memory stays the process's: `causal_conv1d.empty_cpu_cache()` returns
// it, `causal_conv1d.cpu_cache_info()` reports it. The state is one process-wide object, never
// destroyed, so a tensor that outlives static destruction still frees safely.
#include <ATen/EmptyTensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <torch/library.h>

#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace causal_conv1d::torch_ops {
namespace {

// Smaller requests go to PyTorch's CPU allocator: glibc's heap reuses such blocks without page
// faults.
constexpr size_t kMinBytes = size_t(1) << 20;
constexpr int64_t kDefaultLimitMb = 256;

struct Block {
  void* ptr;
  size_t bytes;
};

// The limit from CAUSAL_CONV1D_CPU_CACHE_MB, read once; a value that is not a whole number of
// megabytes >= 0 is an error (reported by the first allocation that reads it).
size_t limit_from_env() {
  const char* env = std::getenv("CAUSAL_CONV1D_CPU_CACHE_MB");
  if (env == nullptr || *env == '\0') return size_t(kDefaultLimitMb) << 20;
  char* end = nullptr;
  errno = 0;
  const long long mb = std::strtoll(env, &end, 10);
  TORCH_CHECK(errno == 0 && *end == '\0' && mb >= 0 && mb < (1LL << 40),
              "causal_conv1d: CAUSAL_CONV1D_CPU_CACHE_MB must be a whole number of megabytes >= 0 (0 turns the "
              "CPU output cache off), got '",
              env, "'");
  return size_t(mb) << 20;
}

class OutputCache final : public c10::Allocator {
 public:
  static OutputCache& instance() {
    static OutputCache* cache = new OutputCache();  // never destroyed (see the file comment)
    return *cache;
  }

  c10::DataPtr allocate(size_t bytes) override {
    if (bytes < kMinBytes) return c10::GetCPUAllocator()->allocate(bytes);
    void* ptr = take(bytes);
    if (ptr == nullptr) ptr = c10::alloc_cpu(bytes);  // throws when the system has no memory left
    return {ptr, new Block{ptr, bytes}, &OutputCache::release, c10::Device(c10::DeviceType::CPU)};
  }

  void copy_data(void* dest, const void* src, size_t count) const override { default_copy_data(dest, src, count); }

  // {bytes kept, buffers kept, requests served from the cache, requests served fresh, limit}.
  std::vector<int64_t> info() {
    std::lock_guard<std::mutex> lock(mutex_);
    return {int64_t(kept_bytes_), int64_t(kept_.size()), hits_, misses_, int64_t(limit())};
  }

  // Returns every kept buffer to the system.
  void clear() {
    std::vector<Block> gone;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      gone.swap(kept_);
      kept_bytes_ = 0;
    }
    for (const Block& b : gone) c10::free_cpu(b.ptr);
  }

 private:
  OutputCache() = default;

  size_t limit() {
    if (!limit_read_) {
      limit_ = limit_from_env();
      limit_read_ = true;
    }
    return limit_;
  }

  // A kept buffer of exactly `bytes`, the most recently kept first; nullptr when there is none.
  void* take(size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    limit();  // an invalid setting fails the first allocation, not a later free
    for (size_t i = kept_.size(); i-- > 0;) {
      if (kept_[i].bytes == bytes) {
        void* ptr = kept_[i].ptr;
        kept_.erase(kept_.begin() + i);
        kept_bytes_ -= bytes;
        ++hits_;
        return ptr;
      }
    }
    ++misses_;
    return nullptr;
  }

  // A tensor's storage died: keep its buffer, giving back the oldest kept ones past the limit.
  static void release(void* context) {
    OutputCache& cache = instance();
    const Block block = *static_cast<Block*>(context);
    delete static_cast<Block*>(context);
    std::vector<Block> gone;
    {
      std::lock_guard<std::mutex> lock(cache.mutex_);
      if (block.bytes > cache.limit()) {
        gone.push_back(block);
      } else {
        cache.kept_.push_back(block);
        cache.kept_bytes_ += block.bytes;
        size_t drop = 0;
        while (cache.kept_bytes_ > cache.limit()) {
          cache.kept_bytes_ -= cache.kept_[drop].bytes;
          gone.push_back(cache.kept_[drop++]);
        }
        cache.kept_.erase(cache.kept_.begin(), cache.kept_.begin() + drop);
      }
    }
    for (const Block& b : gone) c10::free_cpu(b.ptr);  // outside the lock: unmapping takes time
  }

  std::mutex mutex_;
  std::vector<Block> kept_;  // oldest first
  size_t kept_bytes_ = 0;
  int64_t hits_ = 0, misses_ = 0;
  size_t limit_ = 0;
  bool limit_read_ = false;
};

// An uninitialised CPU tensor of like's dtype with the given sizes and strides (element counts),
// its storage from the cache when it is large enough.
at::Tensor cpu_output_buffer(const at::Tensor& like, at::IntArrayRef size, at::IntArrayRef stride) {
  TORCH_CHECK(size.size() == stride.size(), "causal_conv1d.cpu_output_buffer: ", size.size(), " sizes but ",
              stride.size(), " strides");
  return at::detail::empty_strided_generic(size, stride, &OutputCache::instance(),
                                           c10::DispatchKeySet(c10::DispatchKey::CPU), like.scalar_type());
}

std::vector<int64_t> cpu_cache_info() { return OutputCache::instance().info(); }

void cpu_cache_clear() { OutputCache::instance().clear(); }

}  // namespace
}  // namespace causal_conv1d::torch_ops

TORCH_LIBRARY_FRAGMENT(causal_conv1d, m) {
  m.def("cpu_output_buffer(Tensor like, int[] size, int[] stride) -> Tensor", {at::Tag::pt2_compliant_tag});
  m.def("cpu_cache_info() -> int[]", &causal_conv1d::torch_ops::cpu_cache_info);
  m.def("cpu_cache_clear() -> ()", &causal_conv1d::torch_ops::cpu_cache_clear);
}

TORCH_LIBRARY_IMPL(causal_conv1d, CPU, m) { m.impl("cpu_output_buffer", &causal_conv1d::torch_ops::cpu_output_buffer); }

// Its output has no derivative (a buffer to be written); without a fallthrough PyTorch's autograd
// fallback would box the arguments first.
TORCH_LIBRARY_IMPL(causal_conv1d, AutogradCPU, m) {
  m.impl("cpu_output_buffer", torch::CppFunction::makeFallthrough());
}
