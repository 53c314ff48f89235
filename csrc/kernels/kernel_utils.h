// Device helpers shared by the kernel files (internal to csrc/kernels).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "causal_conv1d/access.h"
#include "causal_conv1d/dispatch.h"
#include "causal_conv1d/div_u32.h"
#include "causal_conv1d/gpu_runtime.h"
#include "causal_conv1d/numeric.h"
#include "causal_conv1d/params.h"

namespace causal_conv1d::gpu {

// Elements of T in one 16-byte access: the widest per-lane global load on both vendors.
template <typename T>
constexpr int kVec16 = 16 / static_cast<int>(sizeof(T));

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
// load, which costs registers and scalar registers on AMD. Every launcher has checked the dtype at
// its entry (check_width_and_dtypes), so the last case is fp32.
template <typename F>
__device__ __forceinline__ void with_dtype(DType t, F&& f) {
  switch (t) {
    case DType::kFloat16: f(TypeTag<Half>{}); break;
    case DType::kBFloat16: f(TypeTag<BFloat16>{}); break;
    default: f(TypeTag<float>{}); break;  // kFloat32 (see above)
  }
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
#if CAUSAL_CONV1D_BACKEND_CUDA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
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
#if CAUSAL_CONV1D_BACKEND_CUDA
#define CC_EDGE_FN __device__ __noinline__
#else
#define CC_EDGE_FN __device__ __forceinline__
#endif

// Marks a lambda that must be inlined where it is called from more than one place: clang for AMD
// may otherwise outline it, and every local the lambda references then moves to scratch memory
// (seen on gfx1201: 896 bytes a lane in the backward). nvcc inlines such lambdas anyway.
#if CAUSAL_CONV1D_BACKEND_HIP
#define CC_INLINE_LAMBDA __attribute__((always_inline))
#else
#define CC_INLINE_LAMBDA
#endif

// One vocabulary for moving data between registers and global memory: runs of 32-bit words.
//  - load_run / store_run move kBytes (a multiple of 4) in the widest aligned accesses (16, 8 or
//    4 bytes); a StoreHint says how a store treats the caches.
//  - Packed<T, kV> is kV elements of T kept in such words (two 16-bit values a word, low half
//    first), the form data stays in from its load until it is computed: a struct of 16-bit
//    members would take a register per element. load_packed / store_packed move one Packed as a
//    single access; packed_elem / packed_raw read one element of it.

// run_access (the widest access dividing a run) and multiple_of: causal_conv1d/access.h.

// How a store treats the caches. kPlain: data read back soon (a conv state). kOutput: written once
// and never read back by the kernel (out, dx): streaming (evict-first) on NVIDIA, a plain store on
// AMD. kOutputNt: the same, and nontemporal on AMD (a tuning-table choice, tuning.h).
enum class StoreHint { kPlain, kOutput, kOutputNt };

// A tuning row's l2_ahead (iterations or rows whose lines a kernel prefetches to L2), checked: the
// prefetch is an NVIDIA instruction (prefetch_l2), so an AMD row must ask for none. (A HIP host
// pass sees NVIDIA's row: no target is known there.)
template <int kAhead>
__host__ __device__ constexpr int checked_l2_ahead() {
#if defined(__HIP_DEVICE_COMPILE__)
  static_assert(kAhead == 0, "L2 prefetch is an NVIDIA instruction");
#endif
  return kAhead;
}

// The hint for a kernel's outputs from its tuning row's nt_store.
__host__ __device__ constexpr StoreHint output_hint(bool nt_store) {
  return nt_store ? StoreHint::kOutputNt : StoreHint::kOutput;
}

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

// One aligned access of 16, 8 or 4 bytes with a store hint. NVIDIA keeps the 128-bit width only
// through the intrinsic (a struct of 16-bit members is otherwise written element by element).
template <int kA, StoreHint kHint>
__device__ __forceinline__ void store_access(void* dst, const uint32_t* w) {
#if CAUSAL_CONV1D_BACKEND_CUDA
  if constexpr (kHint == StoreHint::kPlain) {
    if constexpr (kA == 16) {
      *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
    } else if constexpr (kA == 8) {
      *reinterpret_cast<uint2*>(dst) = make_uint2(w[0], w[1]);
    } else {
      *reinterpret_cast<uint32_t*>(dst) = w[0];
    }
  } else {
    if constexpr (kA == 16) {
      __stcs(reinterpret_cast<uint4*>(dst), make_uint4(w[0], w[1], w[2], w[3]));
    } else if constexpr (kA == 8) {
      __stcs(reinterpret_cast<uint2*>(dst), make_uint2(w[0], w[1]));
    } else {
      __stcs(reinterpret_cast<unsigned int*>(dst), w[0]);
    }
  }
#else
  typedef unsigned int U32x4 __attribute__((ext_vector_type(4)));
  typedef unsigned int U32x2 __attribute__((ext_vector_type(2)));
  constexpr bool kNt = kHint == StoreHint::kOutputNt;
  if constexpr (kA == 16) {
    const U32x4 v = {w[0], w[1], w[2], w[3]};
    if constexpr (kNt) {
      __builtin_nontemporal_store(v, reinterpret_cast<U32x4*>(dst));
    } else {
      *reinterpret_cast<U32x4*>(dst) = v;
    }
  } else if constexpr (kA == 8) {
    const U32x2 v = {w[0], w[1]};
    if constexpr (kNt) {
      __builtin_nontemporal_store(v, reinterpret_cast<U32x2*>(dst));
    } else {
      *reinterpret_cast<U32x2*>(dst) = v;
    }
  } else {
    if constexpr (kNt) {
      __builtin_nontemporal_store(w[0], reinterpret_cast<uint32_t*>(dst));
    } else {
      *reinterpret_cast<uint32_t*>(dst) = w[0];
    }
  }
#endif
}

// Stores 32-bit words as kBytes (aligned to run_access(kBytes)).
template <int kBytes, StoreHint kHint = StoreHint::kPlain>
__device__ __forceinline__ void store_run(void* dst, const uint32_t (&w)[kBytes / 4]) {
  static_assert(kBytes % 4 == 0, "whole 32-bit words");
  constexpr int kA = run_access(kBytes);
  static_for<kBytes / kA>([&](auto i) {
    constexpr int kI = decltype(i)::value;
    store_access<kA, kHint>(static_cast<char*>(dst) + kI * kA, &w[kI * (kA / 4)]);
  });
}

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
  if constexpr (kBytes >= 4) {
    static_assert(run_access(kBytes) == kBytes, "one access: 16, 8 or 4 bytes");
    load_run<kBytes>(src, r.w);
  } else {
    static_assert(kBytes == 2, "one 16-bit element");
    r.w[0] = *reinterpret_cast<const uint16_t*>(src);
  }
  return r;
}

// Stores kV elements (16, 8 or 4 bytes, aligned to their size) as one access.
template <StoreHint kHint, typename T, int kV>
__device__ __forceinline__ void store_packed(T* dst, const Packed<T, kV>& v) {
  constexpr int kBytes = int(sizeof(T)) * kV;
  static_assert(kBytes >= 4 && run_access(kBytes) == kBytes, "one access: 16, 8 or 4 bytes");
  store_run<kBytes, kHint>(dst, v.w);
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

// Raw bits of element kJ of 32-bit words holding elements of T (two 16-bit values a word, low half
// first), in the low bits of the result.
template <typename T, int kJ, int kN>
__device__ __forceinline__ uint32_t elem_bits(const uint32_t (&w)[kN]) {
  if constexpr (sizeof(T) == 4) {
    return w[kJ];
  } else {
    return (w[kJ / 2] >> (16 * (kJ % 2))) & 0xffffu;
  }
}

// Channel-major runs and position-major rows: a run of kC channels x kS positions (element
// e * kS + s: channel e, position s; a (dim, state_len) state-contiguous cache line's slice) and
// kS packed rows of kC channels (rows[s], element e), one from the other by moving element bits
// with static indices (nothing leaves registers).
template <typename T, int kC, int kS>
constexpr int kRunWords = kC * kS * int(sizeof(T)) / 4;

template <typename T, int kC, int kS>
__device__ __forceinline__ void run_to_rows(const uint32_t (&run)[kRunWords<T, kC, kS>], Packed<T, kC> (&rows)[kS]) {
  static_assert(kC * int(sizeof(T)) % 4 == 0, "rows of whole 32-bit words");
  constexpr int kPer = 4 / int(sizeof(T));
  static_for<kS>([&](auto s) {
    static_for<Packed<T, kC>::kWords>([&](auto i) {
      uint32_t word = 0;
      static_for<kPer>([&](auto h) {
        constexpr int kE = decltype(i)::value * kPer + decltype(h)::value;
        word |= elem_bits<T, kE * kS + decltype(s)::value>(run) << (16 * decltype(h)::value);
      });
      rows[s].w[i] = word;
    });
  });
}

template <typename T, int kC, int kS>
__device__ __forceinline__ void rows_to_run(const Packed<T, kC> (&rows)[kS], uint32_t (&run)[kRunWords<T, kC, kS>]) {
  static_assert(kC * kS * int(sizeof(T)) % 4 == 0, "a run of whole 32-bit words");
  constexpr int kPer = 4 / int(sizeof(T));
  static_for<kRunWords<T, kC, kS>>([&](auto i) {
    uint32_t word = 0;
    static_for<kPer>([&](auto h) {
      constexpr int kJ = decltype(i)::value * kPer + decltype(h)::value;
      word |= elem_bits<T, kJ / kS>(rows[kJ % kS].w) << (16 * decltype(h)::value);
    });
    run[i] = word;
  });
}

// Builds a Packed from floats as they are computed: set<kE>(v) rounds v to T; 16-bit pairs are
// packed when their second element arrives (NVIDIA converts both with one instruction).
template <typename T, int kV>
struct PackedBuilder {
  Packed<T, kV> out;
  float lo = 0.0f;
  template <int kE>
  __device__ __forceinline__ void set(float v) {
    if constexpr (sizeof(T) == 4) {
      out.w[kE] = float_bits(v);
    } else if constexpr (kV == 1) {
      out.w[0] = from_float<T>(v).bits;
    } else if constexpr (kE % 2 == 0) {
      lo = v;
    } else {
      out.w[kE / 2] = pack2<T>(lo, v);
    }
  }
};

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

// Channel-first rows (fwd_channel_first.hip, bwd_channel_first.hip). The input at row position q:
// x inside [0, L), the row's initial_states (init, or 0 when null) for the kHalo positions before
// it, 0 elsewhere (a peeled first vector reaches further back).
template <typename T, int kHalo>
__device__ __forceinline__ T row_input(const T* x, int64_t L, const T* init, int64_t init_ls, int64_t q) {
  if (q >= 0) return q < L ? x[q] : from_float<T>(0.0f);
  if (init == nullptr || q < -kHalo) return from_float<T>(0.0f);
  return init[(q + kHalo) * init_ls];
}

// Where a run of n row positions q0 .. q0 + n - 1 meets the row, as 32-bit element indices e
// (position q0 + e): inside [0, L) iff lo <= e < hi; the kHalo positions before the row (initial
// states) are lo - kHalo <= e < lo, the last kHalo of the row hi - kHalo <= e < hi. Both bounds
// are clamped to [0, n + kHalo], which keeps those tests exact for e in [0, n). The edge paths
// below test elements against these and address them from one base (q0), so an element costs a
// compare with a constant and an immediate offset, not a 64-bit position, compare and address
// (on gfx1201 the 64-bit forms held ~50 VGPRs more than the backward's main loop needs).
struct RowSpan {
  int32_t lo, hi;
};
template <int kN, int kHalo>
__device__ __forceinline__ RowSpan row_span(int64_t L, int64_t q0) {
  constexpr int64_t kMax = kN + kHalo;
  const int64_t lo = -q0, hi = L - q0;
  return {int32_t(lo < 0 ? 0 : lo > kMax ? kMax : lo), int32_t(hi < 0 ? 0 : hi > kMax ? kMax : hi)};
}

// row_input at positions q0 + e, e < kN, handed to put(Idx<e>, value).
template <typename T, int kN, int kHalo, typename Put>
__device__ __forceinline__ void row_inputs(const T* x, int64_t L, const T* init, int64_t init_ls, int64_t q0,
                                           Put&& put) {
  const RowSpan s = row_span<kN, kHalo>(L, q0);
  const T* px = x + q0;
  static_for<kN>([&](auto e) {
    constexpr int kE = decltype(e)::value;
    T v = from_float<T>(0.0f);
    if (kE >= s.lo && kE < s.hi) {
      v = px[kE];
    } else if (init != nullptr && kE < s.lo && kE >= s.lo - kHalo) {
      v = init[int64_t(kE - s.lo + kHalo) * init_ls];
    }
    put(e, v);
  });
}

// A vector that is not wholly inside the row (a row's first and last), element by element (dout
// and other rows without states: init = nullptr). Out of line on NVIDIA (CC_EDGE_FN). Takes scalars only: a reference
// to the params would put them on the stack.
template <typename T, int kV, int kHalo>
CC_EDGE_FN Packed<T, kV> load_edge(const T* x, int64_t L, const T* init, int64_t init_ls, int64_t q0) {
  constexpr int kPer = Packed<T, kV>::kPerWord;
  Packed<T, kV> v;
  static_for<Packed<T, kV>::kWords>([&](auto i) { v.w[i] = 0; });
  row_inputs<T, kV, kHalo>(x, L, init, init_ls, q0,
                           [&](auto e, T val) { v.w[e / kPer] |= elem_word<T, decltype(e)::value % kPer>(val); });
  return v;
}

// Channel-last rows (fwd_channel_last.hip, bwd_channel_last.hip). Row t of channels c0 .. c0 + kC
// - 1 when they are not one whole vector (channels past the edges of dim, the halo rows before
// t = 0: initial_states, or 0 when init is null), element by element. Out of line on NVIDIA
// (CC_EDGE_FN); scalars only: passing the params struct to a call copies it to the stack.
template <typename T, int kC, int kHalo>
CC_EDGE_FN Packed<T, kC> load_row_edge(const T* x, const T* init, int64_t L, int64_t D, int64_t x_ls, int64_t init_cs,
                                       int64_t init_ls, int64_t c0, int64_t t) {
  constexpr int kPer = Packed<T, kC>::kPerWord;
  Packed<T, kC> v;
  static_for<Packed<T, kC>::kWords>([&](auto i) { v.w[i] = 0; });
  static_for<kC>([&](auto e) {
    const int64_t ch = c0 + e;
    T val = from_float<T>(0.0f);
    if (ch >= 0 && ch < D) {
      if (t >= 0 && t < L) {
        val = x[t * x_ls + ch];
      } else if (t < 0 && t >= -kHalo && init != nullptr) {
        val = init[ch * init_cs + (t + kHalo) * init_ls];
      }
    }
    v.w[e / kPer] |= elem_word<T, decltype(e)::value % kPer>(val);
  });
  return v;
}

// The kV elements that start kV - s elements into `prev` and run on into `cur` (16-byte vectors,
// 0 <= s < kV at run time): prev's last s elements, then cur's first kV - s. A vector of another
// vector phase than the two it is cut from. The word shift is two stages of selects between
// named words (an array indexed through selects went to scratch memory on AMD), the bit shift a
// funnel shift of adjacent words.
template <typename T, int kV>
__device__ __forceinline__ Packed<T, kV> realign_packed(const Packed<T, kV>& prev, const Packed<T, kV>& cur, int s) {
  static_assert(Packed<T, kV>::kWords == 4, "16-byte vectors");
  if (s == 0) return cur;
  const int bits = (kV - s) * int(sizeof(T)) * 8;  // 8 .. 120
  const bool by2 = (bits / 32) & 2, by1 = (bits / 32) & 1;
  const int bs = bits % 32;
  const uint32_t a0 = prev.w[0], a1 = prev.w[1], a2 = prev.w[2], a3 = prev.w[3];
  const uint32_t a4 = cur.w[0], a5 = cur.w[1], a6 = cur.w[2], a7 = cur.w[3];
  const uint32_t b0 = by2 ? a2 : a0, b1 = by2 ? a3 : a1, b2 = by2 ? a4 : a2, b3 = by2 ? a5 : a3, b4 = by2 ? a6 : a4,
                 b5 = by2 ? a7 : a5;
  const uint32_t c0 = by1 ? b1 : b0, c1 = by1 ? b2 : b1, c2 = by1 ? b3 : b2, c3 = by1 ? b4 : b3, c4 = by1 ? b5 : b4;
  auto funnel = [bs](uint32_t lo, uint32_t hi) { return uint32_t(((uint64_t(hi) << 32) | lo) >> bs); };
  Packed<T, kV> r;
  r.w[0] = funnel(c0, c1), r.w[1] = funnel(c1, c2), r.w[2] = funnel(c2, c3), r.w[3] = funnel(c3, c4);
  return r;
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

inline unsigned ceil_div_u(int64_t a, int64_t b) { return static_cast<unsigned>((a + b - 1) / b); }

// Whether a thread's weights and biases can move as runs (load_group_weights): its kC channels'
// kC x width weights, and their kC biases, are each one contiguous run of whole 32-bit words,
// aligned to its access size (c0 a multiple of kC keeps every thread's run aligned when the first
// is). Computed on the host, passed to the kernel.
struct WeightRuns {
  bool w_run;  // (dim, width) weights contiguous and aligned
  bool b_run;  // a bias, contiguous and aligned
};

template <typename Params>
inline WeightRuns weight_runs(const Params& p, int kc) {
  const int ws = dtype_size(p.w_dtype);
  const auto aligned = [](const void* ptr, int a) { return reinterpret_cast<uintptr_t>(ptr) % a == 0; };
  WeightRuns r;
  r.w_run = (kc * p.width * ws) % 4 == 0 && p.weight_w_stride == 1 && p.weight_c_stride == p.width &&
            aligned(p.weight, run_access(kc * p.width * ws));
  r.b_run = p.bias != nullptr && (kc * ws) % 4 == 0 && p.bias_stride == 1 && aligned(p.bias, run_access(kc * ws));
  return r;
}

// What the weight loaders below read, copied out of a params struct into a kernel's leading
// parameter (BwdClGrid, the channel-last forward's ClGrid, the decode's DecodeArgs): the fields a
// kernel reads first are then a line or two of kernel parameters, each a constant-cache miss the
// threads wait out in turn, instead of lines spread over the whole params struct.
struct WeightArgs {
  const void* weight;
  const void* bias;  // optional
  DType w_dtype;
  WeightRuns runs;
  int64_t weight_c_stride, weight_w_stride, bias_stride;
};

template <typename Params>
inline WeightArgs weight_args(const Params& p, WeightRuns runs) {
  return {p.weight, p.bias, p.w_dtype, runs, p.weight_c_stride, p.weight_w_stride, p.bias_stride};
}

// Weights and bias of channels c0 .. c0 + kC - 1 element by element, zeros for channels outside
// [0, dim): the threads whose channel vector straddles an edge of dim.
template <int kWidth, int kC, typename Args>
__device__ __forceinline__ void load_edge_weights(const Args& a, int64_t c0, int64_t dim, float (&w)[kWidth][kC],
                                                  float (&bias)[kC]) {
  with_dtype(a.w_dtype, [&](auto tag) {
    using WT = typename decltype(tag)::type;
    const WT* wp = static_cast<const WT*>(a.weight);
    const WT* bp = static_cast<const WT*>(a.bias);
    static_for<kC>([&](auto e) {
      const int64_t ch = c0 + e;
      const bool live = ch >= 0 && ch < dim;
      static_for<kWidth>(
          [&](auto k) { w[k][e] = live ? to_float(wp[ch * a.weight_c_stride + k * a.weight_w_stride]) : 0.0f; });
      bias[e] = live && bp != nullptr ? to_float(bp[ch * a.bias_stride]) : 0.0f;
    });
  });
}

// Weights and bias of channels c0 .. c0 + kC - 1 as floats (w[k][e]: tap k of channel c0 + e; bias
// 0 without one): one run of vector loads each where `runs` allows (cache hits after the first
// row of blocks), element by element otherwise. kTogether: when both are runs, the bias's load is
// issued with the weights' before either is converted (one memory latency, not two in a row: the
// decode, whose chain they are part of; the prefill loads them once before a long walk, and
// holding both runs costs it a spill).
template <int kWidth, int kC, bool kTogether = false, typename Params>
__device__ __forceinline__ void load_group_weights(const Params& p, WeightRuns runs, int64_t c0, float (&w)[kWidth][kC],
                                                   float (&bias)[kC]) {
  with_dtype(p.w_dtype, [&](auto tag) {
    using WT = typename decltype(tag)::type;
    constexpr int kWPer = 4 / int(sizeof(WT));
    const WT* wp = static_cast<const WT*>(p.weight);
    const WT* bp = static_cast<const WT*>(p.bias);
    constexpr int kWBytes = kC * kWidth * int(sizeof(WT)), kBBytes = kC * int(sizeof(WT));
    if constexpr (kTogether && kWBytes % 4 == 0 && kBBytes % 4 == 0) {
      if (runs.w_run && (runs.b_run || bp == nullptr)) {
        uint32_t words[kWBytes / 4], bwords[kBBytes / 4];
        load_run<kWBytes>(wp + c0 * kWidth, words);
        if (bp != nullptr) load_run<kBBytes>(bp + c0, bwords);
        static_for<kC>([&](auto e) {
          static_for<kWidth>([&](auto k) {
            constexpr int kJ = decltype(e)::value * kWidth + decltype(k)::value;
            w[k][e] = word_elem<WT, kJ % kWPer>(words[kJ / kWPer]);
          });
          bias[e] = bp == nullptr ? 0.0f : word_elem<WT, decltype(e)::value % kWPer>(bwords[e / kWPer]);
        });
        return;
      }
    }
    bool done = false;
    if constexpr (kWBytes % 4 == 0) {
      if (runs.w_run) {
        uint32_t words[kWBytes / 4];
        load_run<kWBytes>(wp + c0 * kWidth, words);
        static_for<kC>([&](auto e) {
          static_for<kWidth>([&](auto k) {
            constexpr int kJ = decltype(e)::value * kWidth + decltype(k)::value;
            w[k][e] = word_elem<WT, kJ % kWPer>(words[kJ / kWPer]);
          });
        });
        done = true;
      }
    }
    if (!done) {
      static_for<kC>([&](auto e) {
        static_for<kWidth>(
            [&](auto k) { w[k][e] = to_float(wp[(c0 + e) * p.weight_c_stride + k * p.weight_w_stride]); });
      });
    }
    done = bp == nullptr;
    if (done) static_for<kC>([&](auto e) { bias[e] = 0.0f; });
    if constexpr (kBBytes % 4 == 0) {
      if (!done && runs.b_run) {
        uint32_t words[kBBytes / 4];
        load_run<kBBytes>(bp + c0, words);
        static_for<kC>([&](auto e) { bias[e] = word_elem<WT, decltype(e)::value % kWPer>(words[e / kWPer]); });
        done = true;
      }
    }
    if (!done) static_for<kC>([&](auto e) { bias[e] = to_float(bp[(c0 + e) * p.bias_stride]); });
  });
}

}  // namespace causal_conv1d::gpu
