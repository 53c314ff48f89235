// Storage types for the three element dtypes and their conversions to and from float, usable on
// the host (CPU backend, tests) and on the device (HIP for AMD, the same source as CUDA).
// Torch-free. All float -> 16-bit conversions round to nearest even, as PyTorch does.
#pragma once

#include <cstdint>
#include <cstring>

#include "causal_conv1d/params.h"

#if defined(__HIP__) || defined(__CUDACC__)
#define CAUSAL_CONV1D_HOST_DEVICE __host__ __device__
#else
#define CAUSAL_CONV1D_HOST_DEVICE
#endif

#if defined(__CUDACC__) && defined(__CUDA_ARCH__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace causal_conv1d {

// 16-bit storage types. Plain structs so host code needs no GPU or torch headers.
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

CAUSAL_CONV1D_HOST_DEVICE inline uint32_t float_bits(float f) {
#if defined(__HIP_DEVICE_COMPILE__)
  return __builtin_bit_cast(uint32_t, f);
#elif defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

CAUSAL_CONV1D_HOST_DEVICE inline float bits_float(uint32_t u) {
#if defined(__HIP_DEVICE_COMPILE__)
  return __builtin_bit_cast(float, u);
#elif defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

CAUSAL_CONV1D_HOST_DEVICE inline float bf16_to_float(uint16_t b) { return bits_float(uint32_t(b) << 16); }

CAUSAL_CONV1D_HOST_DEVICE inline uint16_t float_to_bf16(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));  // one cvt.rn.bf16.f32
#else
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);                                          // round to nearest even
  return uint16_t(u >> 16);
#endif
}

CAUSAL_CONV1D_HOST_DEVICE inline float half_to_float(uint16_t h) {
#if defined(__HIP_DEVICE_COMPILE__)
  return float(__builtin_bit_cast(_Float16, h));
#elif defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#else
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (mant << 13));  // inf / NaN
  if (exp == 0) {                                                         // zero or subnormal: mant * 2^-24
    const float mag = float(mant) * 5.9604644775390625e-08f;
    return sign ? -mag : mag;
  }
  return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
#endif
}

CAUSAL_CONV1D_HOST_DEVICE inline uint16_t float_to_half(float f) {
#if defined(__HIP_DEVICE_COMPILE__)
  return __builtin_bit_cast(uint16_t, static_cast<_Float16>(f));
#elif defined(__CUDA_ARCH__)
  return __half_as_ushort(__float2half_rn(f));
#else
  const uint32_t u = float_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN stays NaN
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);                        // >= 65520 rounds to inf
  if (a < 0x38800000u) {
    // Below the smallest normal half (2^-14): adding 0.5 puts the value's 2^-24 units in the
    // float mantissa, and the float addition does the round-to-nearest-even for us.
    const uint32_t sub = float_bits(bits_float(a) + 0.5f) - 0x3f000000u;
    return uint16_t(sign | sub);
  }
  a += 0xc8000fffu + ((a >> 13) & 1u);  // rebias exponent by -112 and round to nearest even
  return uint16_t(sign | (a >> 13));
#endif
}

CAUSAL_CONV1D_HOST_DEVICE inline float to_float(float v) { return v; }
CAUSAL_CONV1D_HOST_DEVICE inline float to_float(Half v) { return half_to_float(v.bits); }
CAUSAL_CONV1D_HOST_DEVICE inline float to_float(BFloat16 v) { return bf16_to_float(v.bits); }

template <typename T>
CAUSAL_CONV1D_HOST_DEVICE inline T from_float(float v);
template <>
CAUSAL_CONV1D_HOST_DEVICE inline float from_float<float>(float v) {
  return v;
}
template <>
CAUSAL_CONV1D_HOST_DEVICE inline Half from_float<Half>(float v) {
  return Half{float_to_half(v)};
}
template <>
CAUSAL_CONV1D_HOST_DEVICE inline BFloat16 from_float<BFloat16>(float v) {
  return BFloat16{float_to_bf16(v)};
}

// Reads element i of an array whose dtype is known only at run time (weights, bias, states:
// values loaded a few times per thread, where a template parameter would only multiply the
// number of kernel instantiations).
CAUSAL_CONV1D_HOST_DEVICE inline float load_as_float(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::kFloat16: return half_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::kBFloat16: return bf16_to_float(static_cast<const uint16_t*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

CAUSAL_CONV1D_HOST_DEVICE inline void store_from_float(void* p, DType t, int64_t i, float v) {
  switch (t) {
    case DType::kFloat16: static_cast<uint16_t*>(p)[i] = float_to_half(v); break;
    case DType::kBFloat16: static_cast<uint16_t*>(p)[i] = float_to_bf16(v); break;
    default: static_cast<float*>(p)[i] = v; break;
  }
}

}  // namespace causal_conv1d
