// Decode update: conv over [window from conv_state, x], then x written into conv_state in place.
//
// Data ownership: thread c of block (cx, by) owns channel c of batch rows by * kRows + r
// (r < kRows), then the same rows one grid further, and so on. Consecutive threads own
// consecutive channels, so x, out and the state entries are accessed by whole warps over
// contiguous memory (channel-major states: a warp's accesses to one state position span
// 32 * state_len elements, all used by the warp's accesses to the other positions). No data is
// shared between threads.
//
// Single-token decode (seqlen 1), the latency-critical case, issues every load of its kRows rows
// (window and x) before any arithmetic, and writes the new state from registers: with state_len
// of width - 1 or width no state entry is read twice. Longer x (several tokens) walk their rows
// one at a time with a rolling window.
//
// The common decode layout gets its own kernel, update_decode_kernel: one token, a shifted (not
// circular) state, x and out with channels contiguous, a (lines, dim, state_len) contiguous state
// with state_len = width - 1 or width. A thread owns 4 bytes of channels (kC = 2 of 16-bit, 1 of
// fp32; 8 bytes at the batches update_tuning's wide_min_batch and wide_loop_16bit name): its x and out are one access
// each and its kC * state_len state entries are
// contiguous 32-bit words, moved in the widest aligned accesses (load_run / store_run); its
// weights and bias, when contiguous, are one such run each instead of kC * (width + 1) element
// loads. Blocks are small (tuning.h: at batch 1 the grid must still reach every
// CU). Up to update_tuning's max_grid_y rows a thread computes row blockIdx.y alone; past it each
// thread walks batch rows blockIdx.y, + gridDim.y, ... with its weights in registers, the next
// row's loads issued before the current row is computed.
//
// Rows whose cache line is negative (padding), >= num_cache_lines, or whose cache_seqlens is
// negative produce zeros and leave the state alone: the GPU never writes outside conv_state,
// and cannot raise on such values without a host synchronisation.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "causal_conv1d/dispatch.h"
#include "causal_conv1d/gpu.h"
#include "causal_conv1d/update_routing.h"
#include "kernel_utils.h"
#include "tuning.h"

namespace causal_conv1d::gpu {

namespace {

// kSingle: seqlen == 1 (chosen by the launcher); the general loop is compiled out of that path.
template <typename T, int kWidth, bool kSilu, bool kSingle>
__global__ void CC_LAUNCH_BOUNDS(update_general_tuning(kTargetFamily)) update_kernel(UpdateParams p) {
  constexpr UpdateGeneralTuning kTune = update_general_tuning(kTargetFamily);
  constexpr int kHalo = kWidth - 1;
  constexpr int kRows = kSingle ? kTune.rows : 1;
  const int64_t c = int64_t(blockIdx.x) * kTune.threads + threadIdx.x;
  if (c >= p.dim) return;
  wait_prior_kernel();  // launched overlapping the kernel before it: no memory access above
  const int64_t L = kSingle ? 1 : p.seqlen, S = p.state_len, ls = p.state_l_stride;

  float w[kWidth], bias = 0.0f;
  with_dtype(p.w_dtype, [&](auto tag) {
    using WT = typename decltype(tag)::type;
    const WT* wp = static_cast<const WT*>(p.weight);
    static_for<kWidth>([&](auto k) { w[k] = to_float(wp[c * p.weight_c_stride + k * p.weight_w_stride]); });
    if (p.bias != nullptr) bias = to_float(static_cast<const WT*>(p.bias)[c * p.bias_stride]);
  });
  // The window goes by value: taking an array's address would force it out of registers.
  struct Window {
    float v[kWidth];
  };
  auto conv = [&](Window win) {
    float acc = bias;
    static_for<kWidth>([&](auto k) { acc += w[k] * win.v[k]; });
    return from_float<T>(kSilu ? silu_to<T>(acc) : acc);
  };

  for (int64_t b0 = int64_t(blockIdx.y) * kRows; b0 < p.batch; b0 += int64_t(gridDim.y) * kRows) {
    // Per-row values are 32-bit where the launcher guarantees it (cache lines, state_len): on
    // wave64 targets they live in scalar registers, kRows times over.
    T* state[kRows];
    int32_t head[kRows];
    Window win[kRows];
    static_for<kRows>([&](auto r) {
      const int64_t b = b0 + r;
      state[r] = nullptr;
      if (b >= p.batch) return;
      const int32_t line = p.conv_state_indices ? p.conv_state_indices[b] : int32_t(b);
      const int32_t seqlen_b = p.cache_seqlens ? p.cache_seqlens[b] : 0;
      if (line < 0 || line >= p.num_cache_lines || seqlen_b < 0) {
        T* out = static_cast<T*>(p.out) + b * p.out_batch_stride + c * p.out_c_stride;
        for (int64_t t = 0; t < L; ++t) out[t * p.out_l_stride] = from_float<T>(0.0f);
        return;
      }
      state[r] = static_cast<T*>(p.conv_state) + line * p.state_batch_stride + c * p.state_c_stride;
      // Circular: the window ends just before the write position; shifted: it is the tail.
      head[r] = p.cache_seqlens ? seqlen_b % int32_t(S) : int32_t(S);
      static_for<kHalo>([&](auto i) {
        int32_t s = head[r] - kHalo + i;
        s += s < 0 ? int32_t(S) : 0;
        win[r].v[i] = to_float(state[r][s * ls]);
      });
      if constexpr (kSingle)
        win[r].v[kHalo] = to_float(static_cast<const T*>(p.x)[b * p.x_batch_stride + c * p.x_c_stride]);
    });

    static_for<kRows>([&](auto r) {
      if (state[r] == nullptr) return;
      const int64_t b = b0 + r;
      const T* x = static_cast<const T*>(p.x) + b * p.x_batch_stride + c * p.x_c_stride;
      T* out = static_cast<T*>(p.out) + b * p.out_batch_stride + c * p.out_c_stride;
      T* st = state[r];
      if constexpr (kSingle) {
        out[0] = conv(win[r]);
        if (p.cache_seqlens) {
          st[head[r] * ls] = from_float<T>(win[r].v[kHalo]);
        } else {
          // New state = old[1:] + [x]; its last kHalo entries are win[1..kHalo], the entry
          // before them is win[0], deeper ones are read (only when state_len > width).
          for (int64_t s = 0; s + kHalo + 1 < S; ++s) st[s * ls] = st[(s + 1) * ls];
          if (S > kHalo) st[(S - kHalo - 1) * ls] = from_float<T>(win[r].v[0]);
          static_for<kHalo>([&](auto i) { st[(S - kHalo + i) * ls] = from_float<T>(win[r].v[i + 1]); });
        }
      } else {
        float roll[kWidth];
        static_for<kHalo>([&](auto i) { roll[i] = win[r].v[i]; });
        for (int64_t t = 0; t < L; ++t) {
          roll[kHalo] = to_float(x[t * p.x_l_stride]);
          float acc = bias;
          static_for<kWidth>([&](auto k) { acc += w[k] * roll[k]; });
          out[t * p.out_l_stride] = from_float<T>(kSilu ? silu_to<T>(acc) : acc);
          static_for<kHalo>([&](auto k) { roll[k] = roll[k + 1]; });
        }
        if (p.cache_seqlens) {
          // x[t] goes to (head + t) % state_len; when seqlen > state_len only the last state_len land.
          const int64_t first = L > S ? L - S : 0;
          int64_t s = (head[r] + first) % S;
          for (int64_t t = first; t < L; ++t) {
            st[s * ls] = x[t * p.x_l_stride];
            s = s + 1 == S ? 0 : s + 1;
          }
        } else {
          // state = last state_len entries of [state, x]; reading ahead of writing keeps it in place.
          const int64_t keep = S > L ? S - L : 0;
          for (int64_t s = 0; s < keep; ++s) st[s * ls] = st[(s + L) * ls];
          for (int64_t s = keep; s < S; ++s) st[s * ls] = x[(L - S + s) * p.x_l_stride];
        }
      }
    });
  }
}

// update_decode_kernel's parameters: the fields of UpdateParams it reads (copies), the ones a thread
// reads before its first loads in front. Each 64-byte line of kernel parameters a thread touches
// first is a constant-cache miss it waits out before going on: spread over UpdateParams they were
// four lines in front of a row's first load. H200, bf16, dim 8192, in a CUDA graph, batch 1 / 16 /
// 64 / 256 (bench.py --quick, one machine, A / B / A): 1.91 / 2.47 / 4.56 / 12.17 us then, 1.73 /
// 2.19 / 4.28 / 12.26 with the row's fields in the first two lines and the weights loaded after the
// first row's loads (their fields still in UpdateParams; with them here too, the same); two results
// runs of that form 2.02 / 2.52 / 4.62 / 12.25-12.28 against 2.21 / 2.78 / 4.86 / 12.04 in the one
// before (full bench: DRAM-cold buffers). Now the row's fields are the first 48 bytes, which share
// the first line with what every kernel reads first (on NVIDIA the global memory descriptor, at
// 0x208): 32-bit counts and batch strides (fits_decode_kernel keeps larger ones off this kernel),
// and the weights' dtype, whose test nvcc places before the row's loads (bench.py --quick, A / B /
// A: 1.64 / 2.10 / 4.19 / 12.06 us against 1.67 / 2.14 / 4.21 / 12.10 with those in two lines).
struct DecodeArgs {
  int32_t dim, batch, num_cache_lines, x_batch_stride, state_batch_stride;
  DType w_dtype;  // (wa.w_dtype's copy)
  const int32_t* conv_state_indices;
  void* conv_state;
  const void* x;
  // (Read once the row's loads are requested.)
  void* out;
  int64_t out_batch_stride;
  WeightArgs wa;
};
static_assert(offsetof(DecodeArgs, out) == 48, "the row's fields fill the first 48 bytes");

// The launch bounds of the kernels with kVB bytes of channels a thread.
constexpr UpdateTuning decode_launch(ArchFamily f, int vb) {
  UpdateTuning t = update_tuning(f);
  if (vb == 8) t.occupancy = t.wide_occupancy;
  return t;
}

// kS = state_len (width - 1 or width), fixed at compile time so the state stays in registers.
// kVB: bytes of x a thread owns (4, or 8: update_tuning's wide_min_batch with kOneRow, its
// wide_loop_16bit without).
// kOneRow: the grid's rows cover the batch (batch <= max_grid_y), so a thread computes the one row
// blockIdx.y and the batch loop, the next row's prefetch and their index math are compiled out.
// H200, bf16, dim 8192, in a CUDA graph, buffers rotating over > 256 MB, the loop's form and this
// one alternated in one process (peers/updab.py, three rounds alike): batch 1 / 2 / 4 / 16 / 64
// 1.99 / 2.10 / 2.18 / 2.50 / 4.63 us -> 1.93 / 1.99 / 2.10 / 2.43 / 4.27 (the kernel 352 SASS
// instructions against 536, the row's first load the 46th against the 65th).
template <typename T, int kWidth, bool kSilu, int kS, bool kOneRow, int kVB>
__global__ void CC_LAUNCH_BOUNDS(decode_launch(kTargetFamily, kVB)) update_decode_kernel(DecodeArgs a) {
  constexpr UpdateTuning kTune = update_tuning(kTargetFamily);
  constexpr int kHalo = kWidth - 1;
  constexpr int kPerWord = 4 / int(sizeof(T));
  constexpr int kXBytes = kVB;              // x and out of one row
  constexpr int kC = kVB / int(sizeof(T));  // channels per thread
  constexpr int kStBytes = kXBytes * kS;    // the thread's state entries of one row
  static_assert(kS == kHalo || kS == kHalo + 1, "state_len must be width - 1 or width");
  static_assert(kVB == 4 || kVB == 8, "4 or 8 bytes of channels a thread");
  // Kernels the table never takes (8 bytes on families without them, fp32 in the loop) compile as a
  // trap (gfx1201's fp32 ones had put an array in LDS): launching one would be a launcher bug, not
  // a silent no-op.
  constexpr bool kTaken = kVB == 4 || (kOneRow ? kTune.wide_min_batch != 0 : kTune.wide_loop_16bit && sizeof(T) == 2);
  if constexpr (!kTaken) {
#if CAUSAL_CONV1D_BACKEND_CUDA
    __trap();
#else
    __builtin_trap();
#endif
    return;
  }
  const int64_t c0 = (int64_t(blockIdx.x) * kTune.threads + threadIdx.x) * kC;
  if (c0 >= a.dim) return;  // the launcher guarantees dim % kC == 0

  // One batch row: its x words and its kC * kS state entries (element (channel e, position s) is
  // element e * kS + s of the run).
  struct Row {
    uint32_t x[kXBytes / 4];
    uint32_t st[kStBytes / 4];
    T* state;  // nullptr: padding row
  };
  // Row b's loads. DecodeArgs' counts and batch strides are 32-bit, so each offset is one widening
  // multiply-add.
  auto fetch = [&](int32_t b, Row& r) {
    const int32_t line = a.conv_state_indices ? a.conv_state_indices[b] : b;
    r.state = nullptr;
    if (line < 0 || line >= a.num_cache_lines) return;
    r.state = static_cast<T*>(a.conv_state) + (int64_t(line) * a.state_batch_stride + c0 * kS);
    load_run<kStBytes>(r.state, r.st);
    load_run<kXBytes>(static_cast<const T*>(a.x) + (int64_t(b) * a.x_batch_stride + c0), r.x);
  };
  // Element j of a run of 32-bit words, as float.
  auto elem = [](const uint32_t* words, auto j) {
    constexpr int kJ = decltype(j)::value;
    return word_elem<T, kJ % kPerWord>(words[kJ / kPerWord]);
  };
  float w[kWidth][kC], bias[kC];
  // Row b's output and new state, from its loads.
  auto finish = [&](int32_t b, const Row& r) {
    T* out = static_cast<T*>(a.out) + (int64_t(b) * a.out_batch_stride + c0);
    uint32_t res[kXBytes / 4];
    if (r.state == nullptr) {
      static_for<kXBytes / 4>([&](auto i) { res[i] = 0; });  // padding row: zeros, state untouched
    } else {
      float o[kC];
      static_for<kC>([&](auto e) {
        float acc = fmaf(w[kHalo][e], elem(r.x, e), bias[e]);
        static_for<kHalo>([&](auto i) {
          acc = fmaf(w[i][e], elem(r.st, Idx<decltype(e)::value * kS + kS - kHalo + decltype(i)::value>{}), acc);
        });
        o[e] = kSilu ? silu_to<T>(acc) : acc;
      });
      static_for<kXBytes / 4>([&](auto i) {
        if constexpr (sizeof(T) == 4) {
          res[i] = float_bits(o[i]);
        } else {
          res[i] = pack2<T>(o[2 * i], o[2 * i + 1]);
        }
      });
      // New state: each channel's entries shift left by one and x enters last. Element bits are
      // moved with static indices, so nothing leaves registers.
      uint32_t ns[kStBytes / 4];
      static_for<kStBytes / 4>([&](auto i) {
        uint32_t word = 0;
        static_for<kPerWord>([&](auto h) {
          constexpr int kJ = decltype(i)::value * kPerWord + decltype(h)::value;  // new element
          constexpr int kE = kJ / kS, kPos = kJ % kS;
          uint32_t v;
          if constexpr (kPos + 1 < kS) {
            v = elem_bits<T, kJ + 1>(r.st);  // the same channel's next entry
          } else {
            v = elem_bits<T, kE>(r.x);
          }
          word |= v << (16 * decltype(h)::value);
        });
        ns[i] = word;
      });
      store_run<kStBytes>(r.state, ns);
    }
    store_run<kXBytes>(out, res);
  };

  // The first row's loads, then the weights' (their parameters' lines are fetched while those
  // loads are in flight).
  Row cur;
  const int32_t b0 = int32_t(blockIdx.y);
  wait_prior_kernel();  // launched overlapping the kernel before it: no memory access above
  if (kOneRow || b0 < a.batch) fetch(b0, cur);
  WeightArgs wa = a.wa;
  wa.w_dtype = a.w_dtype;  // (from the first line)
  load_group_weights<kWidth, kC>(wa, wa.runs, c0, w, bias);
  if constexpr (kOneRow) {
    finish(b0, cur);
  } else {
    // (64-bit: b + gridDim.y may pass INT32_MAX.)
    for (int64_t b = b0; b < a.batch; b += gridDim.y) {
      Row next;
      next.state = nullptr;
      if (b + gridDim.y < a.batch) fetch(int32_t(b + gridDim.y), next);
      finish(int32_t(b), cur);
      cur = next;
    }
  }
}

}  // namespace

int launch_update(const UpdateParams& p, const DeviceDesc& dev, void* stream) {
  if (const int status = check_width_and_dtypes(p.width, p.x_dtype, p.w_dtype); status != kSuccess) return status;
  if (p.batch == 0 || p.dim == 0) return kSuccess;
  const bool single = p.seqlen == 1;
  if (fits_decode_kernel(p)) {
    const UpdateTuning tune = update_tuning(dev.family);
    const int vb = decode_vector_bytes(p, tune.wide_min_batch, tune.max_grid_y, tune.wide_loop_16bit);
    const int kc = vb / dtype_size(p.x_dtype);
    const DecodeArgs args{static_cast<int32_t>(p.dim),
                          static_cast<int32_t>(p.batch),
                          static_cast<int32_t>(p.num_cache_lines),
                          static_cast<int32_t>(p.x_batch_stride),
                          static_cast<int32_t>(p.state_batch_stride),
                          p.w_dtype,
                          p.conv_state_indices,
                          p.conv_state,
                          p.x,
                          p.out,
                          p.out_batch_stride,
                          weight_args(p, weight_runs(p, kc))};
    return dispatch_dtype(p.x_dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const bool one_row = p.batch <= tune.max_grid_y;
      const dim3 grid(ceil_div_u(p.dim / kc, tune.threads),
                      static_cast<unsigned>(std::min<int64_t>(p.batch, tune.max_grid_y)));
      const auto s = static_cast<Stream>(stream);
      return dispatch_width(p.width, [&](auto W) {
        constexpr int kWidth = decltype(W)::value;
        return dispatch_bool(p.silu, [&](auto Silu) {
          return dispatch_bool(p.state_len == kWidth, [&](auto Full) {
            constexpr int kS = decltype(Full)::value ? kWidth : kWidth - 1;
            auto launch = [&](auto one, auto vbytes) {
              return launch_overlapping(update_decode_kernel<T, kWidth, decltype(Silu)::value, kS, decltype(one)::value,
                                                             decltype(vbytes)::value>,
                                        grid, dim3(tune.threads), s, args);
            };
            if (!one_row) return vb == 8 ? launch(std::false_type{}, Idx<8>{}) : launch(std::false_type{}, Idx<4>{});
            return vb == 8 ? launch(std::true_type{}, Idx<8>{}) : launch(std::true_type{}, Idx<4>{});
          });
        });
      });
    });
  }
  const UpdateGeneralTuning tune = update_general_tuning(dev.family);
  const int64_t rows = single ? tune.rows : 1;
  const int64_t row_groups = (p.batch + rows - 1) / rows;
  const dim3 grid(ceil_div_u(p.dim, tune.threads),
                  static_cast<unsigned>(std::min<int64_t>(row_groups, tune.max_grid_y)));
  const auto s = static_cast<Stream>(stream);
  return dispatch_dtype(p.x_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return dispatch_width(p.width, [&](auto W) {
      return dispatch_bool(p.silu, [&](auto S) {
        return dispatch_bool(single, [&](auto One) {
          return launch_overlapping(update_kernel<T, decltype(W)::value, decltype(S)::value, decltype(One)::value>,
                                    grid, dim3(tune.threads), s, p);
        });
      });
    });
  });
}

}  // namespace causal_conv1d::gpu
