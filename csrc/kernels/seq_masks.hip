// seq_idx masks (seq_masks.h): a byte a position, computed once per batch row.
#include "seq_masks.h"
#include "tuning.h"

namespace causal_conv1d::gpu {

namespace {

// masks[(ph * batch + b) * mask_row + t] for t < mask_row: the mask of position q = t - shift
// (shift 0 for copy 0, phases - ph for copy ph; 0 outside [0, L)). One thread writes 4 bytes (one
// word); i runs over the words of every copy.
__global__ void __launch_bounds__(seq_mask_tuning(kTargetFamily).threads)
    seq_mask_kernel(const int32_t* seq, int64_t seq_batch_stride, int64_t seq_l_stride, int64_t L, int64_t mask_row,
                    int64_t batch, int phases, uint32_t* masks, int64_t words) {
  // Launched overlapping the kernel before it (launch_overlapping): nothing is read before the wait.
  // The kernel after this one may start then (the walk of the channel-first backward reads its data
  // before it waits for this grid, then reads the masks).
  wait_prior_kernel();
  allow_next_kernel();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= words) return;
  const int64_t row_words = mask_row / 4, copy = i / row_words;  // copy = ph * batch + b
  const int64_t ph = copy / batch, b = copy - ph * batch;
  const int64_t q0 = (i - copy * row_words) * 4 - (ph == 0 ? 0 : phases - ph);
  const int32_t* row = seq + b * seq_batch_stride;
  auto id_at = [&](int64_t q) { return row[q * seq_l_stride]; };
  uint32_t w = 0;
  for (int e = 0; e < 4; ++e) {
    const int64_t q = q0 + e;
    if (q < 0) continue;
    if (q >= L) break;
    const int32_t id = id_at(q);
    uint32_t m = id < 0 ? kSeqPadBit : 0u;
    for (int j = 0; j < kMaxWidth - 1; ++j) {
      if (q - 1 - j >= 0 && id_at(q - 1 - j) == id) m |= 1u << j;
      if (q + 1 + j < L && id_at(q + 1 + j) == id) m |= 1u << (kSeqReachShift + j);
    }
    w |= m << (8 * e);
  }
  masks[i] = w;
}

}  // namespace

int launch_seq_masks(const FwdParams& f, uint8_t* masks, int64_t mask_row, const DeviceDesc& dev, Stream stream,
                     int phases) {
  if (f.seq_idx == nullptr) return kSuccess;
  const int threads = seq_mask_tuning(dev.family).threads;
  const int64_t words = phases * f.batch * mask_row / 4;
  return launch_overlapping(seq_mask_kernel, dim3(static_cast<unsigned>((words + threads - 1) / threads)),
                            dim3(threads), stream, f.seq_idx, f.seq_idx_batch_stride, f.seq_idx_l_stride, f.seqlen,
                            mask_row, f.batch, phases, reinterpret_cast<uint32_t*>(masks), words);
}

}  // namespace causal_conv1d::gpu
