// CPU backward and update through their params structs, against the formulas in double
// (conv_problem.cpp). The backward must also give the same bits on any number of threads.
#include <cmath>

#include "causal_conv1d/cpu.h"
#include "conv_problem.h"

namespace {

using causal_conv1d::DType;
using cc_test::BwdProblem;
using cc_test::Case;
using cc_test::UpdateCase;
using cc_test::UpdateProblem;

// |got - want| within the dtype's relative tolerance, scaled by the largest expected magnitude
// for reductions (dweight, dbias).
void expect_close(double got, double want, double tol, double scale, const char* what, int64_t i) {
  ASSERT_TRUE(std::isfinite(got)) << what << "[" << i << "] not written";
  ASSERT_NEAR(got, want, tol * (std::fabs(want) + scale)) << what << "[" << i << "]";
}

class CpuBwd : public ::testing::TestWithParam<Case> {};

TEST_P(CpuBwd, MatchesFormula) {
  BwdProblem pr(GetParam());
  const Case& c = pr.fwd.c;
  ASSERT_EQ(causal_conv1d::cpu::launch_bwd(pr.p, causal_conv1d::cpu::serial_for), 0);
  const double tx = cc_test::tolerance(c.xt) + cc_test::tolerance(c.wt);
  const int64_t L = c.seqlen, D = c.dim, H = c.width - 1;
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t ch = 0; ch < D; ++ch) {
      for (int64_t t = 0; t < L; ++t) {
        const int64_t i = (b * D + ch) * L + t;
        const double got = pr.dx.get(b * pr.p.dx_batch_stride + ch * pr.p.dx_c_stride + t * pr.p.dx_l_stride);
        expect_close(got, pr.want_dx[i], tx, 1.0, "dx", i);
      }
      if (c.states)
        for (int j = 0; j < H; ++j) {
          const int64_t i = (b * D + ch) * H + j;
          expect_close(pr.dinit.get(i), pr.want_dinit[i], tx, 1.0, "dinitial_states", i);
        }
    }
  double scale = 1.0;
  for (double v : pr.want_dweight) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < pr.dweight.size(); ++i)
    expect_close(pr.dweight[i], pr.want_dweight[i], tx, scale, "dweight", i);
  if (c.bias)
    for (size_t i = 0; i < pr.dbias.size(); ++i) expect_close(pr.dbias[i], pr.want_dbias[i], tx, scale, "dbias", i);
}

TEST_P(CpuBwd, SameBitsOnAnyThreadCount) {
  BwdProblem a(GetParam()), b(GetParam());
  ASSERT_EQ(causal_conv1d::cpu::launch_bwd(a.p, causal_conv1d::cpu::serial_for), 0);
  ASSERT_EQ(causal_conv1d::cpu::launch_bwd(b.p, cc_test::threaded_for(3)), 0);
  EXPECT_EQ(a.dx.bytes, b.dx.bytes);
  EXPECT_EQ(a.dweight, b.dweight);
  EXPECT_EQ(a.dbias, b.dbias);
  EXPECT_EQ(a.dinit.bytes, b.dinit.bytes);
}

INSTANTIATE_TEST_SUITE_P(All, CpuBwd, ::testing::ValuesIn(cc_test::fwd_cases()), cc_test::case_name);

TEST(CpuBwdStatus, AccumulatesIntoDweight) {
  // Upstream semantics: the kernel adds its sums to dweight/dbias (callers pass zeros).
  Case c{DType::kFloat32, DType::kFloat32, 3, false, false, true, false, false, 2, 5, 9};
  BwdProblem pr(c);
  std::fill(pr.dweight.begin(), pr.dweight.end(), 1.0f);
  std::fill(pr.dbias.begin(), pr.dbias.end(), -2.0f);
  ASSERT_EQ(causal_conv1d::cpu::launch_bwd(pr.p, causal_conv1d::cpu::serial_for), 0);
  for (size_t i = 0; i < pr.dweight.size(); ++i) EXPECT_NEAR(pr.dweight[i], pr.want_dweight[i] + 1.0, 1e-4);
  for (size_t i = 0; i < pr.dbias.size(); ++i) EXPECT_NEAR(pr.dbias[i], pr.want_dbias[i] - 2.0, 1e-4);
}

class CpuUpdate : public ::testing::TestWithParam<UpdateCase> {};

TEST_P(CpuUpdate, MatchesFormula) {
  UpdateProblem pr(GetParam());
  const UpdateCase& c = pr.c;
  ASSERT_EQ(causal_conv1d::cpu::launch_update(pr.p, causal_conv1d::cpu::serial_for), 0);
  const double tol = cc_test::tolerance(c.xt) + cc_test::tolerance(c.wt);
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t ch = 0; ch < c.dim; ++ch)
      for (int64_t t = 0; t < c.seqlen; ++t) {
        const int64_t i = (b * c.dim + ch) * c.seqlen + t;
        const double got = pr.out.get(b * pr.p.out_batch_stride + ch * pr.p.out_c_stride + t);
        expect_close(got, pr.want_out[i], tol, 1.0, "out", i);
      }
  EXPECT_EQ(pr.state.bytes, pr.want_state.bytes) << "conv_state after the update";
}

INSTANTIATE_TEST_SUITE_P(All, CpuUpdate, ::testing::ValuesIn(cc_test::update_cases()), cc_test::update_case_name);

}  // namespace
