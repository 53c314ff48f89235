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

// Functions taken only by rare edge cases (a row's partial first and last vectors): kept out of
// line on NVIDIA, where inlined their addresses would hold registers across a kernel's main loop.
// On AMD a call costs more (ABI register saves, SGPR pressure) than the inlined code.
#if defined(CAUSAL_CONV1D_USE_CUDA)
#define CC_EDGE_FN __device__ __noinline__
#else
#define CC_EDGE_FN __device__ __forceinline__
#endif

// kV elements of T kept packed in 32-bit words (two 16-bit values a word, low half first), the
// form data stays in from its load until it is computed: a struct of 16-bit members would take a
// register per element. kV = 1 of a 16-bit type uses the low half of one word.
template <typename T, int kV>
struct Packed {
  static constexpr int kPerWord = 4 / int(sizeof(T));
  static constexpr int kWords = (kV + kPerWord - 1) / kPerWord;
  uint32_t w[kWords];
};

// Loads kV consecutive elements (16, 8, 4 or 2 bytes, aligned to their size) as one access.
template <typename T, int kV>
__device__ __forceinline__ Packed<T, kV> load_packed(const T* src) {
  constexpr int kBytes = int(sizeof(T)) * kV;
  Packed<T, kV> r;
  if constexpr (kBytes == 16) {
    const uint4 u = *reinterpret_cast<const uint4*>(src);
    r.w[0] = u.x, r.w[1] = u.y, r.w[2] = u.z, r.w[3] = u.w;
  } else if constexpr (kBytes == 8) {
    const uint2 u = *reinterpret_cast<const uint2*>(src);
    r.w[0] = u.x, r.w[1] = u.y;
  } else if constexpr (kBytes == 4) {
    r.w[0] = *reinterpret_cast<const uint32_t*>(src);
  } else {
    static_assert(kBytes == 2, "one 16-bit element");
    r.w[0] = *reinterpret_cast<const uint16_t*>(src);
  }
  return r;
}

// The raw bits of element kE, as T.
template <typename T, int kE, int kV>
__device__ __forceinline__ T packed_raw(const Packed<T, kV>& p) {
  constexpr int kPer = Packed<T, kV>::kPerWord;
  const uint32_t word = p.w[kE / kPer];
  if constexpr (sizeof(T) == 4) {
    return bits_float(word);
  } else {
    return T{static_cast<uint16_t>(word >> (16 * (kE % kPer)))};
  }
}

// Stores 4 or 2 32-bit words as one 16- or 8-byte global access. Outputs are written once and
// never read back by the kernel: on NVIDIA the store is streaming (evict-first), on AMD it is
// nontemporal when kNt (a tuning-table choice) and a plain store otherwise.
template <bool kNt, int kWords>
__device__ __forceinline__ void store_words(void* dst, const uint32_t (&w)[kWords]) {
  static_assert(kWords == 4 || kWords == 2, "a 16- or 8-byte access");
#if defined(CAUSAL_CONV1D_USE_CUDA)
  if constexpr (kWords == 4) {
    __stcs(reinterpret_cast<uint4*>(dst), make_uint4(w[0], w[1], w[2], w[3]));
  } else {
    __stcs(reinterpret_cast<uint2*>(dst), make_uint2(w[0], w[1]));
  }
#else
  typedef unsigned int U32x4 __attribute__((ext_vector_type(4)));
  typedef unsigned int U32x2 __attribute__((ext_vector_type(2)));
  if constexpr (kWords == 4) {
    const U32x4 v = {w[0], w[1], w[2], w[3]};
    if constexpr (kNt) {
      __builtin_nontemporal_store(v, reinterpret_cast<U32x4*>(dst));
    } else {
      *reinterpret_cast<U32x4*>(dst) = v;
    }
  } else {
    const U32x2 v = {w[0], w[1]};
    if constexpr (kNt) {
      __builtin_nontemporal_store(v, reinterpret_cast<U32x2*>(dst));
    } else {
      *reinterpret_cast<U32x2*>(dst) = v;
    }
  }
#endif
}

// The widest access (16, 8 or 4 bytes) that divides a run of `bytes` bytes: a run starting at a
// multiple of it moves in accesses of that size (load_run / store_run). Host and device.
__host__ __device__ constexpr int run_access(int bytes) { return bytes % 16 == 0 ? 16 : bytes % 8 == 0 ? 8 : 4; }

// Loads kBytes (a multiple of 4, aligned to run_access(kBytes)) into 32-bit words.
template <int kBytes>
__device__ __forceinline__ void load_run(const void* src, uint32_t (&w)[kBytes / 4]) {
  static_assert(kBytes % 4 == 0, "whole 32-bit words");
  constexpr int kA = run_access(kBytes);
  static_for<kBytes / kA>([&](auto i) {
    constexpr int kI = decltype(i)::value;
    if constexpr (kA == 16) {
      const uint4 u = reinterpret_cast<const uint4*>(src)[kI];
      w[4 * kI] = u.x, w[4 * kI + 1] = u.y, w[4 * kI + 2] = u.z, w[4 * kI + 3] = u.w;
    } else if constexpr (kA == 8) {
      const uint2 u = reinterpret_cast<const uint2*>(src)[kI];
      w[2 * kI] = u.x, w[2 * kI + 1] = u.y;
    } else {
      w[kI] = reinterpret_cast<const uint32_t*>(src)[kI];
    }
  });
}

// Stores 32-bit words as kBytes (aligned to run_access(kBytes)), plain stores (data read back
// later, e.g. a conv state).
template <int kBytes>
__device__ __forceinline__ void store_run(void* dst, const uint32_t (&w)[kBytes / 4]) {
  static_assert(kBytes % 4 == 0, "whole 32-bit words");
  constexpr int kA = run_access(kBytes);
  static_for<kBytes / kA>([&](auto i) {
    constexpr int kI = decltype(i)::value;
    if constexpr (kA == 16) {
      reinterpret_cast<uint4*>(dst)[kI] = make_uint4(w[4 * kI], w[4 * kI + 1], w[4 * kI + 2], w[4 * kI + 3]);
    } else if constexpr (kA == 8) {
      reinterpret_cast<uint2*>(dst)[kI] = make_uint2(w[2 * kI], w[2 * kI + 1]);
    } else {
      reinterpret_cast<uint32_t*>(dst)[kI] = w[kI];
    }
  });
}

// Rounds kV floats to T and stores them as one 16- or 8-byte access (see store_words).
template <typename T, int kV, bool kNt = false>
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
  store_words<kNt>(dst, w);
}

// Element kHalf (0: low, 1: high 16 bits) of a 32-bit word holding one fp32 or two 16-bit values,
// as float.
template <typename T, int kHalf>
__device__ __forceinline__ float word_elem(uint32_t w) {
  if constexpr (sizeof(T) == 4) {
    return bits_float(w);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return bits_float(kHalf ? (w & 0xffff0000u) : (w << 16));
  } else {
    return to_float(T{static_cast<uint16_t>(kHalf ? w >> 16 : w & 0xffffu)});
  }
}

// A 32-bit word holding value v where word_elem<T, kHalf> reads it.
template <typename T, int kHalf>
__device__ __forceinline__ uint32_t elem_word(T v) {
  if constexpr (sizeof(T) == 4) {
    return float_bits(v);
  } else {
    return uint32_t(v.bits) << (16 * kHalf);
  }
}

// Element kE of packed data, as float.
template <typename T, int kE, int kV>
__device__ __forceinline__ float packed_elem(const Packed<T, kV>& p) {
  constexpr int kPer = Packed<T, kV>::kPerWord;
  return word_elem<T, kE % kPer>(p.w[kE / kPer]);
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
