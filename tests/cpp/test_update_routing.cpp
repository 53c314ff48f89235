// fits_decode_kernel (causal_conv1d/update_routing.h): which single-token updates the decode
// kernel takes. Its DecodeArgs hold dim, batch, the cache lines and the x / state batch strides in
// 32-bit fields, so each of them above INT32_MAX must send the call to the general kernel (a real
// case needs tensors of tens of GB; the predicate is checked on parameters alone).
#include <gtest/gtest.h>

#include <cstdint>

#include "causal_conv1d/update_routing.h"

namespace {

using causal_conv1d::DType;
using causal_conv1d::fits_decode_kernel;
using causal_conv1d::UpdateParams;

// A bf16 width-4 decode step with a (lines, dim, 3) state, every pointer 1 MB-aligned (never
// dereferenced).
UpdateParams decode_params() {
  UpdateParams p;
  p.batch = 2, p.dim = 64, p.seqlen = 1, p.width = 4, p.state_len = 3, p.num_cache_lines = 2;
  p.x_dtype = p.w_dtype = DType::kBFloat16;
  void* base = reinterpret_cast<void*>(uintptr_t(1) << 20);
  p.x = base, p.out = base, p.conv_state = base;
  p.x_batch_stride = p.out_batch_stride = p.dim, p.x_c_stride = p.out_c_stride = 1;
  p.state_batch_stride = p.dim * p.state_len, p.state_c_stride = p.state_len, p.state_l_stride = 1;
  return p;
}

// fits_decode_kernel of decode_params() changed by `set`.
template <typename Set>
bool fits_with(Set set) {
  UpdateParams p = decode_params();
  set(p);
  return fits_decode_kernel(p);
}

constexpr int64_t kAbove = int64_t(INT32_MAX) + 1;  // 2^31: even, so the alignment tests still hold

TEST(UpdateRouting, DecodeLayoutTakesTheDecodeKernel) { EXPECT_TRUE(fits_decode_kernel(decode_params())); }

TEST(UpdateRouting, ThirtyTwoBitFieldsAtTheLimitStay) {
  UpdateParams p = decode_params();
  p.dim = INT32_MAX - 1;  // (a multiple of the 2 channels a thread)
  p.batch = INT32_MAX;
  p.num_cache_lines = INT32_MAX;
  p.x_batch_stride = p.out_batch_stride = INT32_MAX - 1;
  p.state_batch_stride = INT32_MAX - 1;
  EXPECT_TRUE(fits_decode_kernel(p));
}

TEST(UpdateRouting, ThirtyTwoBitFieldsAboveTheLimitTakeTheGeneralKernel) {
  EXPECT_FALSE(fits_with([](UpdateParams& p) { p.dim = kAbove; }));
  EXPECT_FALSE(fits_with([](UpdateParams& p) { p.batch = kAbove; }));
  EXPECT_FALSE(fits_with([](UpdateParams& p) { p.num_cache_lines = kAbove; }));
  EXPECT_FALSE(fits_with([](UpdateParams& p) { p.x_batch_stride = kAbove; }));
  EXPECT_FALSE(fits_with([](UpdateParams& p) { p.state_batch_stride = kAbove; }));
  // out's batch stride is a 64-bit field of DecodeArgs: no limit.
  EXPECT_TRUE(fits_with([](UpdateParams& p) { p.out_batch_stride = kAbove; }));
}

TEST(UpdateRouting, OtherLayoutsTakeTheGeneralKernel) {
  EXPECT_FALSE(fits_with([](UpdateParams& p) { p.seqlen = 2; }));
  EXPECT_FALSE(fits_with([](UpdateParams& p) { p.state_len = 5; }));  // neither width - 1 nor width
  EXPECT_FALSE(fits_with([](UpdateParams& p) { p.dim = 63; }));       // half a thread's channels
  EXPECT_FALSE(fits_with([](UpdateParams& p) { p.state_c_stride = 1, p.state_l_stride = p.dim; }));
  EXPECT_FALSE(fits_with([](UpdateParams& p) { p.x = static_cast<const char*>(p.x) + 2; }));
  static const int32_t lens[2] = {0, 0};
  EXPECT_FALSE(fits_with([](UpdateParams& p) { p.cache_seqlens = lens; }));
}

}  // namespace
