// seq_idx as one byte a position, for the kernels that read it per position (the channel-first
// forward, both backwards): seq_mask_kernel (seq_masks.hip) writes them into the caller's
// workspace before the kernel runs, once per batch row instead of once per channel.
//
// Bit j (j < kMaxWidth - 1) of mask(q) is set when position q - 1 - j is in the row and has q's
// id; bit kSeqReachShift + i when q + 1 + i is in the row and has q's id; bit 7 when q is a padding
// token (id < 0: its output is constant, its dy 0). So x[q - 1 - j] is a tap of y[q] iff bit j of
// mask(q), and dy[q] reaches dx[q - 1 - j] iff the same bit; dy[q + 1 + i] reaches dx[q] iff bit
// kSeqReachShift + i of mask(q) (the same fact, held by the dx position: the channel-last backward
// tests row t's byte only). No ids (4 bytes each, and a halo of them) are held in registers.
#pragma once

#include <cstdint>

#include "causal_conv1d/gpu.h"
#include "kernel_utils.h"

namespace causal_conv1d::gpu {

constexpr int kSeqReachShift = kMaxWidth - 1;
constexpr uint32_t kSeqPadBit = 0x80u;
static_assert(kSeqReachShift + kMaxWidth - 1 < 7, "the same-sequence bits must stay below the padding bit");

// Mask bytes per batch row: seqlen with room for a channel-first kernel's last aligned mask vector
// (up to 8 bytes past seqlen in a shifted copy, below), in whole 16-byte lines (0 past seqlen).
inline int64_t seq_mask_row(int64_t seqlen) { return (seqlen + 8 + 15) / 16 * 16; }

// Shifted copies: with `phases` = kV > 1 the masks of every batch row are written kV times, copy
// ph (0 < ph < kV) shifted kV - ph bytes later (byte t of it is the mask of position t - kV + ph;
// 0 before the row). A channel-first kernel whose vectors start at positions q = ph modulo kV (its
// data row starts kV - ph elements into an aligned vector) then finds a vector's kV masks in one
// aligned load, at byte q + kV - ph of copy ph, instead of two loads and a realignment. Copy ph of
// batch row b is at (ph * batch + b) * mask_row; copy 0 is the plain row.

// The kV mask bytes of a vector whose first position lies mo bytes into the kV-aligned mask vector
// lo (hi: the one after it, read only when mo != 0): a misaligned data row's vectors straddle two.
template <int kV>
__device__ __forceinline__ void straddled_masks(const uint32_t (&lo)[kV / 4], const uint32_t (&hi)[kV / 4], int mo,
                                                uint32_t (&out)[kV / 4]) {
  if constexpr (kV == 4) {
    out[0] = mo == 0 ? lo[0] : (lo[0] >> (8 * mo)) | (hi[0] << (32 - 8 * mo));
  } else {
    static_assert(kV == 8, "mask vectors of 4 or 8 bytes");
    const uint64_t l = lo[0] | uint64_t(lo[1]) << 32, h = hi[0] | uint64_t(hi[1]) << 32;
    const uint64_t v = mo == 0 ? l : (l >> (8 * mo)) | (h << (64 - 8 * mo));
    out[0] = uint32_t(v), out[1] = uint32_t(v >> 32);
  }
}

// Writes the masks of every batch row of f.seq_idx: row b at masks + b * mask_row (mask_row from
// seq_mask_row, masks 16-byte aligned), and with phases > 1 its shifted copies (above); nothing
// without seq_idx.
int launch_seq_masks(const FwdParams& f, uint8_t* masks, int64_t mask_row, const DeviceDesc& dev, Stream stream,
                     int phases = 1);

}  // namespace causal_conv1d::gpu
