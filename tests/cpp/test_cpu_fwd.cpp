// CPU forward through FwdParams, against the formula evaluated in double:
//   out[b, c, t] = act(bias[c] + sum_k w[c, k] * x[b, c, t - (W - 1) + k])
// with positions before 0 read from initial_states (or zero) and, under seq_idx, taps from another
// sequence dropped. Also: the result is bitwise the same on 1 or 3 threads.
#include <cmath>
#include <tuple>

#include "causal_conv1d/cpu.h"
#include "conv_problem.h"

namespace {

using causal_conv1d::DType;
using cc_test::Case;
using cc_test::Problem;

class CpuFwd : public ::testing::TestWithParam<Case> {};

TEST_P(CpuFwd, MatchesFormula) {
  Problem pr(GetParam());
  const Case& c = pr.c;
  ASSERT_EQ(causal_conv1d::cpu::launch_fwd(pr.p, causal_conv1d::cpu::serial_for), 0);
  const double tol = cc_test::tolerance(c.xt) + cc_test::tolerance(c.wt);
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t ch = 0; ch < c.dim; ++ch)
      for (int64_t t = 0; t < c.seqlen; ++t) {
        const double want = pr.expected(b, ch, t);
        const double got = pr.out.get(b * pr.p.out_batch_stride + ch * pr.p.out_c_stride + t * pr.p.out_l_stride);
        ASSERT_NEAR(got, want, tol * (1.0 + std::fabs(want))) << "b=" << b << " c=" << ch << " t=" << t;
      }
  if (c.states) {
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t ch = 0; ch < c.dim; ++ch)
        for (int j = 0; j < c.width - 1; ++j) {
          const double want = pr.input(b, ch, c.seqlen - (c.width - 1) + j);
          const double got = pr.final_states.get(b * pr.p.final_batch_stride + ch * pr.p.final_c_stride + j);
          ASSERT_EQ(got, want) << "final_states b=" << b << " c=" << ch << " j=" << j;  // a copy: exact
        }
  }
}

TEST_P(CpuFwd, SameBitsOnAnyThreadCount) {
  Problem a(GetParam()), b(GetParam());
  ASSERT_EQ(causal_conv1d::cpu::launch_fwd(a.p, causal_conv1d::cpu::serial_for), 0);
  ASSERT_EQ(causal_conv1d::cpu::launch_fwd(b.p, cc_test::threaded_for(3)), 0);
  EXPECT_EQ(a.out.bytes, b.out.bytes);
  EXPECT_EQ(a.final_states.bytes, b.final_states.bytes);
}

INSTANTIATE_TEST_SUITE_P(All, CpuFwd, ::testing::ValuesIn(cc_test::fwd_cases()), cc_test::case_name);

TEST(CpuFwdStatus, RejectsUnsupportedWidth) {
  Case c{DType::kFloat32, DType::kFloat32, 4, false, false, false, false, false, 1, 2, 8};
  Problem pr(c);
  pr.p.width = 5;
  EXPECT_EQ(causal_conv1d::cpu::launch_fwd(pr.p, causal_conv1d::cpu::serial_for), causal_conv1d::kErrUnsupportedWidth);
}

}  // namespace
