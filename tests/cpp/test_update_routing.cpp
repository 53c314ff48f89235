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

// decode_vector_bytes: 8 bytes of channels a thread only inside [wide_min_batch, max_grid_y] or, for
// 16-bit x, past max_grid_y (wide_loop_16bit), and only where dim is a whole number of 8-byte groups and every row's x,
// out and state runs are aligned to their accesses (x / out 8 bytes; the state's 8 * state_len-byte runs 8 bytes for
// state_len 3, 16 for 4); else 4, as when the table turns it off (0).
TEST(UpdateRouting, EightByteChannelGroupsOnlyWhereTheyFit) {
  using causal_conv1d::decode_vector_bytes;
  auto vb = [](int64_t batch, auto set) {
    UpdateParams p = decode_params();
    p.batch = p.num_cache_lines = batch;
    set(p);
    EXPECT_TRUE(fits_decode_kernel(p));
    return decode_vector_bytes(p, 64, 128, true);
  };
  auto none = [](UpdateParams&) {};
  EXPECT_EQ(vb(63, none), 4);
  EXPECT_EQ(vb(64, none), 8);
  EXPECT_EQ(vb(128, none), 8);
  EXPECT_EQ(vb(129, none), 8);  // the loop's batches: 16-bit x (wide_loop_16bit)
  UpdateParams p = decode_params();
  p.batch = 64;
  EXPECT_EQ(decode_vector_bytes(p, 0, 128, true), 4);  // turned off
  p.batch = 129;
  EXPECT_EQ(decode_vector_bytes(p, 64, 128, false), 4);  // the loop's turned off
  EXPECT_EQ(vb(64,
               [](UpdateParams& q) {
                 q.dim = 62, q.x_batch_stride = q.out_batch_stride = 62, q.state_batch_stride = 62 * 3;
               }),
            4);  // 62 bf16 channels: not whole groups of 4
  EXPECT_EQ(vb(64, [](UpdateParams& q) { q.x = static_cast<const char*>(q.x) + 4; }), 4);
  EXPECT_EQ(vb(64, [](UpdateParams& q) { q.out = static_cast<char*>(q.out) + 4; }), 4);
  EXPECT_EQ(vb(64, [](UpdateParams& q) { q.x_batch_stride = 66; }), 4);    // 132 bytes a row
  EXPECT_EQ(vb(64, [](UpdateParams& q) { q.out_batch_stride = 66; }), 4);  // (out's own stride)
  EXPECT_EQ(vb(64, [](UpdateParams& q) { q.conv_state = static_cast<char*>(q.conv_state) + 4; }), 4);
  EXPECT_EQ(vb(64, [](UpdateParams& q) { q.state_batch_stride = 64 * 3 + 2; }), 4);  // 388 bytes a line
  // state_len 4 (= width): 32-byte runs a thread, in 16-byte accesses (as fits_decode_kernel's 16).
  EXPECT_EQ(vb(64, [](UpdateParams& q) { q.state_len = q.state_c_stride = 4, q.state_batch_stride = 64 * 4; }), 8);
  // fp32: 2 channels a group, so an odd dim stays at 4 bytes, an even one not a multiple of 4 takes 8.
  auto f32 = [](int64_t dim) {
    return [dim](UpdateParams& q) {
      q.x_dtype = q.w_dtype = DType::kFloat32;
      q.dim = q.x_batch_stride = q.out_batch_stride = dim, q.state_batch_stride = dim * 3;
    };
  };
  EXPECT_EQ(vb(64, f32(62)), 8);
  EXPECT_EQ(vb(64, f32(63)), 4);
  EXPECT_EQ(vb(129, f32(64)), 4);                                                           // fp32 loops with 4 bytes
  EXPECT_EQ(vb(129, [](UpdateParams& q) { q.x = static_cast<const char*>(q.x) + 4; }), 4);  // misaligned, loop
}

}  // namespace
