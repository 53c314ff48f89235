// CPU causal_conv1d_varlen_states: a gather of each packed sequence's last state_len rows.
// One task per sequence; rows of x are read once per channel block in order, so both the
// (total_tokens, dim) input and the channel-last output are walked contiguously.
#include <algorithm>
#include <cstring>

#include "causal_conv1d/cpu.h"
#include "common.h"

namespace causal_conv1d::cpu {

int launch_varlen_states(const VarlenStatesParams& p, const ParallelFor& pfor) {
  if (!dtype_supported(p.dtype)) return kErrUnsupportedDType;
  const int esize = dtype_size(p.dtype);
  auto offset = [&](int64_t i) -> int64_t {
    return p.cu_seqlens_int64 ? static_cast<const int64_t*>(p.cu_seqlens)[i]
                              : static_cast<const int32_t*>(p.cu_seqlens)[i];
  };
  pfor(p.batch, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      // The torch layer validated the offsets; clamping keeps every read inside x regardless.
      const int64_t end = std::clamp<int64_t>(offset(b + 1), 0, p.total_tokens);
      const int64_t start = std::clamp<int64_t>(offset(b), 0, end);
      for (int64_t r = 0; r < p.state_len; ++r) {
        const int64_t src = end - p.state_len + r;  // row of x that lands in state column r
        char* dst = static_cast<char*>(p.states) + (b * p.states_batch_stride + r * p.states_l_stride) * esize;
        if (src < start) {
          for (int64_t c = 0; c < p.dim; ++c) std::memset(dst + c * p.states_c_stride * esize, 0, esize);
          continue;
        }
        const char* row = static_cast<const char*>(p.x) + src * p.x_l_stride * esize;
        for (int64_t c = 0; c < p.dim; ++c)
          std::memcpy(dst + c * p.states_c_stride * esize, row + c * p.x_c_stride * esize, esize);
      }
    }
  });
  return kSuccess;
}

}  // namespace causal_conv1d::cpu
