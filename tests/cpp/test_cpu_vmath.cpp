// vmath.h's exp, SiLU and SiLU derivative against std::exp in double, on a dense sweep of float
// bit patterns (every 127th of all 2^32, plus every float around the underflow and overflow
// edges), two ways: through vec.cpp's row functions (the clone this CPU runs, with FMA on x86-64-v3
// and v4) and inlined into this file (compiled for the baseline: separate multiply and add).
// CAUSAL_CONV1D_VMATH_STEP=1 sweeps every float (about 10 minutes; the figures in vmath.h come
// from such a run).
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "vec.h"
#include "vmath.h"

namespace {

namespace vmath = causal_conv1d::cpu::vmath;
namespace vec = causal_conv1d::cpu::vec;

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// |got - want| in units of the float spacing at the exact value want (2^-149 below FLT_MIN, where
// floats are subnormal). Where want rounds to +-inf in float, got must be that inf (else: inf).
// NaN must give NaN.
double ulp_error(float got, double want) {
  if (std::isnan(want)) return std::isnan(got) ? 0.0 : INFINITY;
  const float want_f = static_cast<float>(want);
  if (std::isinf(want_f)) return got == want_f ? 0.0 : INFINITY;
  if (!std::isfinite(got)) return INFINITY;
  int e = 0;
  std::frexp(want, &e);  // |want| in [2^(e-1), 2^e)
  const double ulp = std::ldexp(1.0, std::max(e - 24, -149));
  return std::fabs(double(got) - want) / ulp;
}

int64_t sweep_step() {
  const char* s = std::getenv("CAUSAL_CONV1D_VMATH_STEP");
  const long long v = s ? std::atoll(s) : 0;
  return v > 0 ? v : 127;  // 34M of the 2^32 patterns
}

// The inputs: every step-th bit pattern, then every float in [lo, hi] of each dense range.
template <typename F>
void for_inputs(std::initializer_list<std::pair<float, float>> dense, F&& visit) {
  constexpr int64_t kChunk = 1 << 16;
  std::vector<float> xs;
  xs.reserve(kChunk);
  auto flush = [&] {
    visit(xs);
    xs.clear();
  };
  const int64_t step = sweep_step();
  for (int64_t b = 0; b < (int64_t(1) << 32); b += step) {
    xs.push_back(from_bits(uint32_t(b)));
    if (int64_t(xs.size()) == kChunk) flush();
  }
  for (const auto& [lo, hi] : dense) {
    for (float x = lo; x <= hi; x = std::nextafter(x, INFINITY)) {
      xs.push_back(x);
      if (int64_t(xs.size()) == kChunk) flush();
    }
  }
  flush();
}

struct Worst {
  double err = 0.0;
  float at = 0.0f;
  void add(double e, float x) {
    if (!(e <= err)) err = e, at = x;  // NaN counts as worst
  }
};

TEST(CpuVmath, ExpWithinBoundOverTheFloatRange) {
  Worst lib, inl;
  std::vector<float> y;
  int64_t count = 0;
  // Dense: the subnormal results and the underflow edge, the overflow edge.
  for_inputs({{-104.5f, -86.5f}, {88.0f, 89.5f}}, [&](const std::vector<float>& xs) {
    y.resize(xs.size());
    vec::exp_row(xs.data(), y.data(), int64_t(xs.size()));
    for (size_t i = 0; i < xs.size(); ++i) {
      const double want = std::exp(double(xs[i]));
      lib.add(ulp_error(y[i], want), xs[i]);
      inl.add(ulp_error(vmath::exp(xs[i]), want), xs[i]);
    }
    count += int64_t(xs.size());
  });
  std::printf("exp over %lld inputs: max %.3f ulp (row function, at %a), %.3f ulp (inlined, at %a)\n",
              static_cast<long long>(count), lib.err, lib.at, inl.err, inl.at);
  EXPECT_LE(lib.err, vmath::kExpMaxUlp) << "at x = " << lib.at;
  EXPECT_LE(inl.err, vmath::kExpMaxUlp) << "at x = " << inl.at;
}

TEST(CpuVmath, ExpSpecialValues) {
  const float inf = INFINITY, nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> xs = {0.0f,   -0.0f, inf,     -inf,     nan,     -nan,    88.7228f, 88.72284f,
                                 89.0f,  1e30f, FLT_MAX, -FLT_MAX, -103.9f, -104.0f, -150.0f,  -87.3365f,
                                 -87.4f, 1.0f,  -1.0f,   1e-30f,   -1e-30f, FLT_MIN, 0x1p-149f};
  std::vector<float> y(xs.size());
  vec::exp_row(xs.data(), y.data(), int64_t(xs.size()));
  for (size_t i = 0; i < xs.size(); ++i) {
    const double want = std::exp(double(xs[i]));
    EXPECT_LE(ulp_error(y[i], want), vmath::kExpMaxUlp) << "x = " << xs[i] << " got " << y[i];
    EXPECT_LE(ulp_error(vmath::exp(xs[i]), want), vmath::kExpMaxUlp) << "x = " << xs[i];
  }
  EXPECT_EQ(vmath::exp(0.0f), 1.0f);
  EXPECT_EQ(vmath::exp(-0.0f), 1.0f);
  EXPECT_EQ(vmath::exp(inf), inf);
  EXPECT_EQ(vmath::exp(89.0f), inf);
  EXPECT_EQ(vmath::exp(-inf), 0.0f);
  EXPECT_FALSE(std::signbit(vmath::exp(-inf)));
  EXPECT_EQ(vmath::exp(-104.0f), 0.0f);
  EXPECT_TRUE(std::isnan(vmath::exp(nan)));
  EXPECT_TRUE(std::isnan(y[4]) && std::isnan(y[5]));
}

// silu(a) = a / (1 + exp(-a)); for a < -88.72 exp(-a) overflows and the result is -0, where the
// exact value is below 2.7e-37 in magnitude.
TEST(CpuVmath, SiluWithinBoundOverTheFloatRange) {
  Worst lib, inl;
  std::vector<float> y;
  int64_t count = 0, flushed = 0;
  for_inputs({{-92.0f, -86.0f}, {-2.0f, -1.0f}}, [&](const std::vector<float>& xs) {
    y.resize(xs.size());
    vec::silu_row(xs.data(), y.data(), int64_t(xs.size()));
    for (size_t i = 0; i < xs.size(); ++i) {
      const float a = xs[i];
      const double want = double(a) / (1.0 + std::exp(-double(a)));
      const float got_inl = vmath::silu(a);
      if (std::isinf(vmath::exp(-a))) {  // a < -88.72
        ASSERT_TRUE(y[i] == 0.0f && std::signbit(y[i])) << "a = " << a << " got " << y[i];
        ASSERT_TRUE(got_inl == 0.0f && std::signbit(got_inl)) << "a = " << a << " got " << got_inl;
        ASSERT_LT(std::fabs(want), 2.7e-37) << "a = " << a;
        ++flushed;
        continue;
      }
      lib.add(ulp_error(y[i], want), a);
      inl.add(ulp_error(got_inl, want), a);
    }
    count += int64_t(xs.size());
  });
  std::printf(
      "silu over %lld inputs (%lld below -88.72: -0): max %.3f ulp (row function, at %a), %.3f ulp "
      "(inlined, at %a)\n",
      static_cast<long long>(count), static_cast<long long>(flushed), lib.err, lib.at, inl.err, inl.at);
  EXPECT_LE(lib.err, vmath::kSiluMaxUlp) << "at a = " << lib.at;
  EXPECT_LE(inl.err, vmath::kSiluMaxUlp) << "at a = " << inl.at;
  const float inf = INFINITY, nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(vmath::silu(inf), inf);
  EXPECT_TRUE(std::isnan(vmath::silu(-inf)));  // -inf / inf, as the formula in any precision
  EXPECT_TRUE(std::isnan(vmath::silu(nan)));
  EXPECT_EQ(vmath::silu(0.0f), 0.0f);
}

// g * silu'(y): the bracket 1 + y (1 - s) cancels near y = -1.28 (where silu' is 0), so the bound
// is absolute: |got - want| <= kDsiluMaxErr * 2^-24 * |g| * (1 + |y|) * max(s, 2^-126), with
// s = sigmoid(y) (subnormal below y = -87.3); for
// y < -88.72, where exp(-y) overflows, the result is 0 and the exact value below 2.7e-37 |g|.
TEST(CpuVmath, DsiluWithinBoundOverTheFloatRange) {
  Worst inl;
  int64_t count = 0;
  for_inputs({{-1.5f, -1.0f}, {-92.0f, -86.0f}}, [&](const std::vector<float>& xs) {
    for (float y : xs) {
      if (!std::isfinite(y)) continue;
      const float g = 0.75f;
      const double s = 1.0 / (1.0 + std::exp(-double(y)));
      const double want = g * s * (1.0 + double(y) * (1.0 - s));
      if (std::isinf(vmath::exp(-y))) {  // y < -88.72
        ASSERT_EQ(vmath::dsilu_times(y, g), 0.0f) << "y = " << y;
        ASSERT_LT(std::fabs(want), 2.7e-37 * g) << "y = " << y;
        continue;
      }
      const double scale = std::ldexp(1.0, -24) * g * (1.0 + std::fabs(double(y))) * std::max(s, double(FLT_MIN));
      const float got = vmath::dsilu_times(y, g);
      inl.add(scale > 0 ? std::fabs(double(got) - want) / scale : (got == 0.0f ? 0.0 : INFINITY), y);
    }
    count += int64_t(xs.size());
  });
  std::printf("dsilu over %lld inputs: max %.3f (units of 2^-24 |g| (1 + |y|) s, at %a)\n",
              static_cast<long long>(count), inl.err, inl.at);
  EXPECT_LE(inl.err, vmath::kDsiluMaxErr) << "at y = " << inl.at;
  EXPECT_TRUE(std::isnan(vmath::dsilu_times(std::numeric_limits<float>::quiet_NaN(), 1.0f)));
  // +-inf: inf * 0 in the formula, NaN as in PyTorch's silu_backward.
  EXPECT_TRUE(std::isnan(vmath::dsilu_times(INFINITY, 2.0f)));
  EXPECT_TRUE(std::isnan(vmath::dsilu_times(-INFINITY, 2.0f)));
}

}  // namespace
