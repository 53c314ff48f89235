// CPU forward through FwdParams, against the formula evaluated in double:
//   out[b, c, t] = act(bias[c] + sum_k w[c, k] * x[b, c, t - (W - 1) + k])
// with positions before 0 read from initial_states (or zero) and, under seq_idx, taps from another
// sequence dropped. Also: the result is bitwise the same on 1 or 3 threads.
#include <cmath>
#include <tuple>

#include "causal_conv1d/cpu.h"
#include "test_util.h"

namespace {

using causal_conv1d::DType;
using causal_conv1d::FwdParams;
using cc_test::Buffer;

struct Case {
  DType xt, wt;
  int width;
  bool channel_last, silu, bias, states, seq_idx;
  int64_t batch, dim, seqlen;
};

struct Problem {
  Case c;
  Buffer x, w, bias, init, out, final_states;
  std::vector<int32_t> seq;
  FwdParams p;

  explicit Problem(const Case& cs) : c(cs) {
    const int64_t B = c.batch, D = c.dim, L = c.seqlen, W = c.width;
    x = cc_test::random_buffer(c.xt, B * D * L, 1);
    w = cc_test::random_buffer(c.wt, D * W, 2, -0.5f, 0.5f);
    bias = cc_test::random_buffer(c.wt, D, 3);
    init = cc_test::random_buffer(c.xt, B * D * (W - 1), 4);
    out = Buffer(c.xt, B * D * L);
    final_states = Buffer(c.xt, B * D * (W - 1));
    for (size_t i = 0; i < out.size(); ++i) out.set(i, NAN);  // every element must be written
    seq.resize(B * L);
    for (int64_t b = 0; b < B; ++b)  // sequences of lengths 1, 2, 3, ... packed along t
      for (int64_t t = 0, id = 0, left = 1, len = 1; t < L; ++t) {
        seq[b * L + t] = static_cast<int32_t>(id + b);
        if (--left == 0) left = ++len, ++id;
      }

    p.batch = B, p.dim = D, p.seqlen = L, p.width = c.width;
    p.x_dtype = c.xt, p.w_dtype = c.wt, p.silu = c.silu, p.channel_last = c.channel_last;
    // x and out share the layout: channel-first (B, D, L) or channel-last (B, L, D) memory.
    const int64_t sb = D * L, sc = c.channel_last ? 1 : L, sl = c.channel_last ? D : 1;
    p.x = x.data(), p.x_batch_stride = sb, p.x_c_stride = sc, p.x_l_stride = sl;
    p.out = out.data(), p.out_batch_stride = sb, p.out_c_stride = sc, p.out_l_stride = sl;
    p.weight = w.data(), p.weight_c_stride = W, p.weight_w_stride = 1;
    if (c.bias) p.bias = bias.data(), p.bias_stride = 1;
    if (c.states) {
      // initial_states channel-last, final_states channel-first: strides are free.
      p.initial_states = init.data();
      p.init_batch_stride = D * (W - 1), p.init_c_stride = 1, p.init_l_stride = D;
      p.final_states = final_states.data();
      p.final_batch_stride = D * (W - 1), p.final_c_stride = W - 1, p.final_l_stride = 1;
    }
    if (c.seq_idx) p.seq_idx = seq.data(), p.seq_idx_batch_stride = L, p.seq_idx_l_stride = 1;
  }

  // Input value at logical position (b, ch, s), s in [-(W-1), L).
  double input(int64_t b, int64_t ch, int64_t s) const {
    if (s >= 0) return x.get(b * p.x_batch_stride + ch * p.x_c_stride + s * p.x_l_stride);
    if (!c.states) return 0.0;
    const int64_t j = s + c.width - 1;
    return init.get(b * p.init_batch_stride + ch * p.init_c_stride + j * p.init_l_stride);
  }

  double expected(int64_t b, int64_t ch, int64_t t) const {
    double acc = c.bias ? bias.get(ch) : 0.0;
    for (int k = 0; k < c.width; ++k) {
      const int64_t s = t - (c.width - 1) + k;
      if (c.seq_idx && (s < 0 || seq[b * c.seqlen + s] != seq[b * c.seqlen + t])) continue;
      acc += double(w.get(ch * c.width + k)) * input(b, ch, s);
    }
    return c.silu ? acc / (1.0 + std::exp(-acc)) : acc;
  }
};

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

std::vector<Case> cases() {
  std::vector<Case> v;
  const DType types[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};
  for (DType xt : types)
    for (DType wt : types)
      for (int width = 2; width <= 4; ++width)
        for (bool cl : {false, true}) {
          // Features rotate with the case index so every combination of layout, width and dtype
          // sees each feature without the product exploding.
          const size_t i = v.size();
          const bool states = i % 3 == 0, seq = !states && i % 3 == 1;
          v.push_back({xt, wt, width, cl, i % 2 == 0, i % 4 != 3, states, seq, 2, 67, 131});
        }
  v.push_back({DType::kFloat32, DType::kFloat32, 4, false, true, true, true, false, 1, 3, 2});  // L < W-1
  v.push_back({DType::kFloat32, DType::kFloat32, 4, true, true, true, true, false, 1, 3, 1});
  v.push_back({DType::kBFloat16, DType::kFloat32, 3, false, false, true, false, false, 1, 1, 5000});  // > chunk
  v.push_back({DType::kFloat16, DType::kFloat32, 4, true, true, false, false, true, 2, 200, 40});  // > channel block
  return v;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  std::string s = std::string(causal_conv1d::dtype_name(c.xt)) + "_" + causal_conv1d::dtype_name(c.wt) + "_w" +
                  std::to_string(c.width) + (c.channel_last ? "_cl" : "_cf");
  s += c.silu ? "_silu" : "";
  s += c.bias ? "_bias" : "";
  s += c.states ? "_states" : "";
  s += c.seq_idx ? "_seqidx" : "";
  return s + "_" + std::to_string(info.index);
}

INSTANTIATE_TEST_SUITE_P(All, CpuFwd, ::testing::ValuesIn(cases()), case_name);

TEST(CpuFwdStatus, RejectsUnsupportedWidth) {
  Case c{DType::kFloat32, DType::kFloat32, 4, false, false, false, false, false, 1, 2, 8};
  Problem pr(c);
  pr.p.width = 5;
  EXPECT_EQ(causal_conv1d::cpu::launch_fwd(pr.p, causal_conv1d::cpu::serial_for),
            causal_conv1d::kErrUnsupportedWidth);
}

}  // namespace
