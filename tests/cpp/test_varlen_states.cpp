// varlen_states through VarlenStatesParams: CPU against the definition, and (when a GPU is
// visible) the GPU launcher against the CPU, bit for bit (it is a copy).
#include "causal_conv1d/build_config.h"
#include "causal_conv1d/cpu.h"
#include "test_util.h"

namespace {

using causal_conv1d::DType;
using causal_conv1d::VarlenStatesParams;

struct VarlenCase {
  DType dtype;
  int64_t dim = 37, state_len = 5;
  std::vector<int32_t> cu{0, 3, 3, 11, 12, 20};  // lengths 3, 0, 8, 1, 8
  int64_t total = 20;
  cc_test::Buffer x, states;
  VarlenStatesParams p;

  explicit VarlenCase(DType t) : dtype(t) {
    x = cc_test::random_buffer(t, total * dim, 7);
    states = cc_test::Buffer(t, (cu.size() - 1) * dim * state_len);
    p.batch = cu.size() - 1, p.dim = dim, p.state_len = state_len, p.total_tokens = total;
    p.dtype = t;
    p.x = x.data(), p.x_l_stride = dim, p.x_c_stride = 1;
    p.cu_seqlens = cu.data();
    p.states = states.data();
    // channel-last states, as the op returns them
    p.states_batch_stride = state_len * dim, p.states_c_stride = 1, p.states_l_stride = dim;
  }

  float expected(int64_t b, int64_t c, int64_t r) const {
    const int64_t src = cu[b + 1] - state_len + r;
    return src >= cu[b] ? x.get(src * dim + c) : 0.0f;
  }
};

class VarlenStates : public ::testing::TestWithParam<DType> {};

TEST_P(VarlenStates, CpuMatchesDefinition) {
  VarlenCase s(GetParam());
  ASSERT_EQ(causal_conv1d::cpu::launch_varlen_states(s.p, causal_conv1d::cpu::serial_for), 0);
  for (int64_t b = 0; b < s.p.batch; ++b)
    for (int64_t c = 0; c < s.dim; ++c)
      for (int64_t r = 0; r < s.state_len; ++r)
        ASSERT_EQ(s.states.get(b * s.p.states_batch_stride + c + r * s.dim), s.expected(b, c, r))
            << "b=" << b << " c=" << c << " r=" << r;
}

#if CAUSAL_CONV1D_HAS_GPU
TEST_P(VarlenStates, GpuMatchesCpu) {
  if (!cc_test::have_gpu()) GTEST_SKIP() << "no GPU visible";
  VarlenCase s(GetParam());
  ASSERT_EQ(causal_conv1d::cpu::launch_varlen_states(s.p, causal_conv1d::cpu::serial_for), 0);
  cc_test::DeviceBuffer dx(s.x.bytes), dcu(s.cu), dst(s.states.bytes.size());
  VarlenStatesParams gp = s.p;
  gp.x = dx.ptr, gp.cu_seqlens = dcu.ptr, gp.states = dst.ptr;
  CC_GPU_OK(causal_conv1d::gpu::launch_varlen_states(gp, cc_test::device0(), nullptr));
  CC_GPU_OK(causal_conv1d::gpu::device_synchronize());
  EXPECT_EQ(dst.to_host<uint8_t>(), s.states.bytes);
}
#endif

INSTANTIATE_TEST_SUITE_P(All, VarlenStates, ::testing::Values(DType::kFloat32, DType::kFloat16, DType::kBFloat16),
                         [](const auto& info) { return std::string(causal_conv1d::dtype_name(info.param)); });

TEST(VarlenStatesStatus, RejectsUnknownDTypeAndWritesNothing) {
  for (int code : {3, -1}) {
    VarlenCase s(DType::kFloat16);
    s.p.dtype = static_cast<DType>(code);
    const auto before = s.states.bytes;
    EXPECT_EQ(causal_conv1d::cpu::launch_varlen_states(s.p, causal_conv1d::cpu::serial_for),
              causal_conv1d::kErrUnsupportedDType)
        << "dtype " << code;
    EXPECT_EQ(s.states.bytes, before) << "dtype " << code;
  }
}

}  // namespace
