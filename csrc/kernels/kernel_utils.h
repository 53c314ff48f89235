// Device helpers shared by the kernel files (internal to csrc/kernels).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "causal_conv1d/dispatch.h"
#include "causal_conv1d/gpu_runtime.h"
#include "causal_conv1d/numeric.h"
#include "causal_conv1d/params.h"

namespace causal_conv1d::gpu {

// Elements of T in one 16-byte access: the widest per-lane global load on both vendors.
template <typename T>
constexpr int kVec16 = 16 / static_cast<int>(sizeof(T));

// kV elements of T, aligned so that a full vector moves in one access.
template <typename T, int kV>
struct alignas(sizeof(T) * kV) Vec {
  T v[kV];
};

// A compile-time index usable as an int in device code (std::integral_constant's conversion is
// host-only for nvcc without --expt-relaxed-constexpr).
template <int I>
struct Idx {
  static constexpr int value = I;
  __host__ __device__ constexpr operator int() const { return I; }
};

// Calls f(Idx<I>{}) for I = 0 .. N-1: register-array indices derived from I are compile-time
// constants, so arrays stay in registers (a run-time index would move them to scratch memory).
template <int N, typename F, int I = 0>
__device__ __forceinline__ void static_for(F&& f) {
  if constexpr (I < N) {
    f(Idx<I>{});
    static_for<N, F, I + 1>(static_cast<F&&>(f));
  }
}

// Calls f(TypeTag<float | Half | BFloat16>{}) for a dtype known only at run time. Branching once
// around a group of loads (weights, bias) keeps them straight-line code instead of one switch per
// load, which costs registers and scalar registers on AMD.
template <typename F>
__device__ __forceinline__ void with_dtype(DType t, F&& f) {
  switch (t) {
    case DType::kFloat16: f(TypeTag<Half>{}); break;
    case DType::kBFloat16: f(TypeTag<BFloat16>{}); break;
    default: f(TypeTag<float>{}); break;
  }
}

// The 32 bits holding elements e[0..] of a register array (one float, or two 16-bit values).
template <typename T>
__device__ __forceinline__ uint32_t word_of(const T* e) {
  if constexpr (sizeof(T) == 4) {
    return float_bits(e[0]);
  } else {
    return uint32_t(e[0].bits) | (uint32_t(e[1].bits) << 16);
  }
}

// Stores a full 16-byte vector to global memory as one 128-bit access (a struct of 16-bit members
// would otherwise be written element by element). On NVIDIA the store is marked streaming
// (evict-first: outputs are written once), and nvcc keeps the 128-bit width only through the
// intrinsic. Global memory only; LDS / shared memory takes store_vec_lds.
template <typename T, int kV>
__device__ __forceinline__ void store_vec(T* dst, const Vec<T, kV>& v) {
  if constexpr (sizeof(T) * kV == 16) {
    constexpr int kPer = 4 / sizeof(T);
    const uint4 u = make_uint4(word_of(&v.v[0]), word_of(&v.v[kPer]), word_of(&v.v[2 * kPer]), word_of(&v.v[3 * kPer]));
#if defined(CAUSAL_CONV1D_USE_CUDA)
    __stcs(reinterpret_cast<uint4*>(dst), u);
#else
    *reinterpret_cast<uint4*>(dst) = u;
#endif
  } else {
    static_for<kV>([&](auto e) { dst[e] = v.v[e]; });
  }
}

// The same for LDS / shared memory.
template <typename T, int kV>
__device__ __forceinline__ void store_vec_lds(T* dst, const Vec<T, kV>& v) {
  if constexpr (sizeof(T) * kV == 16) {
    constexpr int kPer = 4 / sizeof(T);
    *reinterpret_cast<uint4*>(dst) =
        make_uint4(word_of(&v.v[0]), word_of(&v.v[kPer]), word_of(&v.v[2 * kPer]), word_of(&v.v[3 * kPer]));
  } else {
    static_for<kV>([&](auto e) { dst[e] = v.v[e]; });
  }
}

// Loads a full vector (16 or 8 bytes) as one access.
template <typename T, int kV>
__device__ __forceinline__ Vec<T, kV> load_vec(const T* src) {
  constexpr int kBytes = sizeof(T) * kV;
  Vec<T, kV> v;
  if constexpr (kBytes == 16 || kBytes == 8) {
    uint32_t w[kBytes / 4];
    if constexpr (kBytes == 16) {
      const uint4 u = *reinterpret_cast<const uint4*>(src);
      w[0] = u.x, w[1] = u.y, w[2] = u.z, w[3] = u.w;
    } else {
      const uint2 u = *reinterpret_cast<const uint2*>(src);
      w[0] = u.x, w[1] = u.y;
    }
    static_for<kV>([&](auto e) {
      constexpr int kPer = 4 / sizeof(T);
      const uint32_t word = w[decltype(e)::value / kPer];
      if constexpr (sizeof(T) == 4) {
        v.v[e] = bits_float(word);
      } else {
        v.v[e].bits = static_cast<uint16_t>(decltype(e)::value % 2 ? word >> 16 : word & 0xffffu);
      }
    });
  } else {
    static_for<kV>([&](auto e) { v.v[e] = src[e]; });
  }
  return v;
}

__device__ __forceinline__ float silu(float v) { return fast_div(v, 1.0f + __expf(-v)); }

// The activation for a result stored as T.
template <typename T>
__device__ __forceinline__ float silu_to(float v) {
  if constexpr (sizeof(T) == 2) {
    return silu_for_16bit(v);
  } else {
    return silu(v);
  }
}

// Two floats rounded to T and packed into 32 bits (element `lo` first in memory). NVIDIA converts
// both with one instruction.
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
#if defined(CAUSAL_CONV1D_USE_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, BFloat16>) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  } else if constexpr (std::is_same_v<T, Half>) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
#endif
  return uint32_t(from_float<T>(lo).bits) | (uint32_t(from_float<T>(hi).bits) << 16);
}

// Rounds kV floats to T and stores them as one 16- or 8-byte access.
template <typename T, int kV>
__device__ __forceinline__ void store_floats(T* dst, const float (&o)[kV]) {
  constexpr int kBytes = sizeof(T) * kV;
  static_assert(kBytes == 16 || kBytes == 8, "a full 16- or 8-byte vector");
  uint32_t w[kBytes / 4];
  static_for<kBytes / 4>([&](auto i) {
    if constexpr (sizeof(T) == 4) {
      w[i] = float_bits(o[i]);
    } else {
      w[i] = pack2<T>(o[2 * i], o[2 * i + 1]);
    }
  });
  if constexpr (kBytes == 16) {
#if defined(CAUSAL_CONV1D_USE_CUDA)
    __stcs(reinterpret_cast<uint4*>(dst), make_uint4(w[0], w[1], w[2], w[3]));
#else
    *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
#endif
  } else {
#if defined(CAUSAL_CONV1D_USE_CUDA)
    __stcs(reinterpret_cast<uint2*>(dst), make_uint2(w[0], w[1]));
#else
    *reinterpret_cast<uint2*>(dst) = make_uint2(w[0], w[1]);
#endif
  }
}

// Position (in elements) of ptr within its 16-byte block: the first vector of a row starts that
// many elements before the row, so every vector access is aligned.
template <typename T, int kV>
__device__ __forceinline__ int misalignment(const void* ptr) {
  if constexpr (kV == 1) {
    return 0;
  } else {
    return static_cast<int>((reinterpret_cast<uintptr_t>(ptr) / sizeof(T)) % kV);
  }
}

// Host side: can rows of a tensor (base pointer plus the given strides, all in elements) be read
// with aligned kV-wide vectors after peeling each row's start, with the same peel for a second
// tensor? True when both have the same misalignment everywhere.
inline bool same_vector_phase(const void* a, const void* b, int esize, int kv, std::initializer_list<int64_t> strides_a,
                              std::initializer_list<int64_t> strides_b) {
  const auto ea = reinterpret_cast<uintptr_t>(a), eb = reinterpret_cast<uintptr_t>(b);
  if (ea % esize || eb % esize) return false;
  if (int64_t((ea / esize) % kv) != int64_t((eb / esize) % kv)) return false;
  auto ia = strides_a.begin();
  for (auto ib = strides_b.begin(); ib != strides_b.end(); ++ia, ++ib)
    if (((*ia - *ib) % kv + kv) % kv != 0) return false;
  return true;
}

inline bool multiple_of(int64_t v, int64_t k) { return v % k == 0; }

inline unsigned ceil_div_u(int64_t a, int64_t b) { return static_cast<unsigned>((a + b - 1) / b); }

}  // namespace causal_conv1d::gpu
