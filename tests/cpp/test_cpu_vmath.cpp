// vmath.h's exp(-|a|), SiLU and SiLU derivative against std::exp in double, on a dense sweep of
// float bit patterns (every 127th of all 2^32, plus every float around the flush edge), two ways: through vec.cpp's row
// functions (the clone this CPU runs, with FMA on x86-64-v3 and v4) and inlined into this file (compiled for the
// baseline: separate multiply and add). CAUSAL_CONV1D_VMATH_STEP=1 sweeps every float (about 10 minutes; the figures in
// vmath.h come from such a run). Also: vec.cpp's 16-bit row conversions against numeric.h's.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "causal_conv1d/numeric.h"
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

// |got - want| / max(|want|, FLT_MIN): relative error, absolute in units of FLT_MIN for results
// below it (subnormal); NaN must give NaN.
double rel_error(float got, double want) {
  if (std::isnan(want)) return std::isnan(got) ? 0.0 : INFINITY;
  return std::fabs(double(got) - want) / std::max(std::fabs(want), double(FLT_MIN));
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

// Degree 6 is held to kExpMaxUlp ulp, degree 4 to a relative error of kExp4MaxRel.
template <int kDegree>
void check_exp_neg_abs() {
  Worst lib, inl;
  std::vector<float> y;
  int64_t count = 0, flushed = 0;
  const float flush = kDegree == 6 ? vmath::kExpNegAbsFlush : vmath::kExpNegAbsFlush4;
  const double flushed_below = kDegree == 6 ? 1.65e-38 : 4.5e-38;  // exp(-flush)
  // Dense: the flush edges and beyond, where exact results turn subnormal.
  for_inputs({{86.0f, 88.0f}, {-88.0f, -86.0f}}, [&](const std::vector<float>& xs) {
    y.resize(xs.size());
    vec::exp_neg_abs_row(xs.data(), y.data(), int64_t(xs.size()), kDegree);
    for (size_t i = 0; i < xs.size(); ++i) {
      const float a = xs[i];
      const double want = std::exp(-std::fabs(double(a)));
      const float got_inl = vmath::exp_neg_abs<kDegree>(a);
      if (std::fabs(a) > flush) {  // also +-inf
        ASSERT_TRUE(y[i] == 0.0f && !std::signbit(y[i])) << "a = " << a << " got " << y[i];
        ASSERT_TRUE(got_inl == 0.0f && !std::signbit(got_inl)) << "a = " << a << " got " << got_inl;
        ASSERT_LT(want, flushed_below) << "a = " << a;
        ++flushed;
        continue;
      }
      if constexpr (kDegree == 6) {
        lib.add(ulp_error(y[i], want), a);
        inl.add(ulp_error(got_inl, want), a);
      } else {
        lib.add(rel_error(y[i], want), a);
        inl.add(rel_error(got_inl, want), a);
      }
    }
    count += int64_t(xs.size());
  });
  std::printf(
      "exp(-|a|), degree %d, over %lld inputs (%lld with |a| > %g: +0): max %.4g %s (row function, at %a), "
      "%.4g (inlined, at %a)\n",
      kDegree, static_cast<long long>(count), static_cast<long long>(flushed), double(flush), lib.err,
      kDegree == 6 ? "ulp" : "relative", lib.at, inl.err, inl.at);
  const double bound = kDegree == 6 ? vmath::kExpMaxUlp : vmath::kExp4MaxRel;
  EXPECT_LE(lib.err, bound) << "at a = " << lib.at;
  EXPECT_LE(inl.err, bound) << "at a = " << inl.at;
}

TEST(CpuVmath, ExpNegAbsDegree6WithinBoundOverTheFloatRange) { check_exp_neg_abs<6>(); }
TEST(CpuVmath, ExpNegAbsDegree4WithinBoundOverTheFloatRange) { check_exp_neg_abs<4>(); }

TEST(CpuVmath, ExpNegAbsSpecialValues) {
  const float inf = INFINITY, nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> xs = {0.0f,     -0.0f, inf,   -inf,    nan,  -nan,  87.0f,  -87.0f,  87.00001f,
                                 88.7228f, 1e30f, -1e30, FLT_MAX, 1.0f, -1.0f, 1e-30f, FLT_MIN, 0x1p-149f};
  std::vector<float> y(xs.size()), y4(xs.size());
  vec::exp_neg_abs_row(xs.data(), y.data(), int64_t(xs.size()), 6);
  vec::exp_neg_abs_row(xs.data(), y4.data(), int64_t(xs.size()), 4);
  for (size_t i = 0; i < xs.size(); ++i) {
    const float a = xs[i];
    EXPECT_EQ(causal_conv1d::float_bits(y[i]), causal_conv1d::float_bits(vmath::exp_neg_abs<6>(a))) << "a = " << a;
    EXPECT_EQ(causal_conv1d::float_bits(y4[i]), causal_conv1d::float_bits(vmath::exp_neg_abs<4>(a))) << "a = " << a;
    const double want = std::exp(-std::fabs(double(a)));
    if (std::fabs(a) <= vmath::kExpNegAbsFlush) {
      EXPECT_LE(ulp_error(y[i], want), vmath::kExpMaxUlp) << "a = " << a;
    } else {  // +-inf, NaN, beyond the flush
      EXPECT_EQ(std::isnan(y[i]), std::isnan(a)) << "a = " << a;
    }
    if (std::fabs(a) <= vmath::kExpNegAbsFlush4) {
      EXPECT_LE(rel_error(y4[i], want), vmath::kExp4MaxRel) << "a = " << a;
    } else {
      EXPECT_EQ(std::isnan(y4[i]), std::isnan(a)) << "a = " << a;
    }
  }
  EXPECT_EQ(y4[0], 1.0f);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], 1.0f);
  EXPECT_EQ(y[2], 0.0f);
  EXPECT_EQ(y[3], 0.0f);
  EXPECT_TRUE(std::isnan(y[4]) && std::isnan(y[5]));
  EXPECT_GT(y[6], 0.0f);   // 87: the last |a| before the flush
  EXPECT_EQ(y[8], 0.0f);   // just above
  EXPECT_EQ(y4[6], 0.0f);  // degree 4 flushes above 86
  EXPECT_TRUE(std::isnan(y4[4]) && std::isnan(y4[5]));
  EXPECT_EQ(y[16], 1.0f);  // exp(-FLT_MIN) rounds to 1
}

// silu(a) = a / (1 + exp(-a)), degree 6 within kSiluMaxUlp ulp, degree 4 within a relative
// error of kSilu4MaxRel; for a below -87 (degree 6) or -86 (degree 4) the result is -0, the exact
// value below 1.5e-36 / 3.9e-36 in magnitude.
template <int kDegree>
void check_silu() {
  Worst lib, inl;
  std::vector<float> y;
  int64_t count = 0, flushed = 0;
  const float flush = kDegree == 6 ? vmath::kExpNegAbsFlush : vmath::kExpNegAbsFlush4;
  const double flushed_below = kDegree == 6 ? 1.5e-36 : 3.9e-36;  // flush * exp(-flush)
  for_inputs({{-88.0f, -85.0f}, {-2.0f, -1.0f}}, [&](const std::vector<float>& xs) {
    y.resize(xs.size());
    vec::silu_row(xs.data(), y.data(), int64_t(xs.size()), kDegree);
    for (size_t i = 0; i < xs.size(); ++i) {
      const float a = xs[i];
      const double want = double(a) / (1.0 + std::exp(-double(a)));
      const float got_inl = vmath::silu<kDegree>(a);
      if (a < -flush) {
        // -inf: -inf * 0 = NaN, as -inf / (1 + inf) in the formula.
        ASSERT_TRUE((y[i] == 0.0f && std::signbit(y[i])) || (std::isnan(y[i]) && std::isinf(a))) << "a = " << a;
        ASSERT_TRUE((got_inl == 0.0f && std::signbit(got_inl)) || (std::isnan(got_inl) && std::isinf(a)))
            << "a = " << a;
        ASSERT_TRUE(std::fabs(want) < flushed_below || std::isinf(a)) << "a = " << a;
        ++flushed;
        continue;
      }
      if constexpr (kDegree == 6) {
        lib.add(ulp_error(y[i], want), a);
        inl.add(ulp_error(got_inl, want), a);
      } else {
        lib.add(rel_error(y[i], want), a);
        inl.add(rel_error(got_inl, want), a);
      }
    }
    count += int64_t(xs.size());
  });
  std::printf(
      "silu, degree %d, over %lld inputs (%lld below -%g: -0): max %.4g %s (row function, at %a), %.4g "
      "(inlined, at %a)\n",
      kDegree, static_cast<long long>(count), static_cast<long long>(flushed), double(flush), lib.err,
      kDegree == 6 ? "ulp" : "relative", lib.at, inl.err, inl.at);
  const double bound = kDegree == 6 ? vmath::kSiluMaxUlp : vmath::kSilu4MaxRel;
  EXPECT_LE(lib.err, bound) << "at a = " << lib.at;
  EXPECT_LE(inl.err, bound) << "at a = " << inl.at;
  const float inf = INFINITY, nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(vmath::silu<kDegree>(inf), inf);
  EXPECT_TRUE(std::isnan(vmath::silu<kDegree>(-inf)));  // -inf / inf, as the formula in any precision
  EXPECT_TRUE(std::isnan(vmath::silu<kDegree>(nan)));
  EXPECT_EQ(vmath::silu<kDegree>(0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(vmath::silu<kDegree>(-0.0f)));
}

TEST(CpuVmath, SiluDegree6WithinBoundOverTheFloatRange) { check_silu<6>(); }
TEST(CpuVmath, SiluDegree4WithinBoundOverTheFloatRange) { check_silu<4>(); }

// g * silu'(y): the bracket 1 + y (1 - s) cancels near y = -1.28 (where silu' is 0), so the bound
// is absolute: |got - want| <= kDsiluMaxErr * 2^-24 * |g| * (1 + |y|) * max(s, 2^-126), with
// s = sigmoid(y); for y < -87 the result is 0 and the exact value below 1.5e-36 |g|.
TEST(CpuVmath, DsiluWithinBoundOverTheFloatRange) {
  Worst lib, inl;
  std::vector<float> g, out;
  int64_t count = 0;
  for_inputs({{-1.5f, -1.0f}, {-88.0f, -86.0f}}, [&](const std::vector<float>& ys) {
    g.assign(ys.size(), 0.75f);
    out.resize(ys.size());
    vec::dsilu_row(ys.data(), g.data(), out.data(), int64_t(ys.size()));
    for (size_t i = 0; i < ys.size(); ++i) {
      const float y = ys[i];
      if (!std::isfinite(y)) {  // inf * 0 in the formula: NaN, as PyTorch's silu_backward
        ASSERT_TRUE(std::isnan(out[i]) && std::isnan(vmath::dsilu_times(y, 0.75f))) << "y = " << y;
        continue;
      }
      const double s = 1.0 / (1.0 + std::exp(-double(y)));
      const double want = 0.75 * s * (1.0 + double(y) * (1.0 - s));
      if (y < -vmath::kExpNegAbsFlush) {
        ASSERT_EQ(out[i], 0.0f) << "y = " << y;
        ASSERT_EQ(vmath::dsilu_times(y, 0.75f), 0.0f) << "y = " << y;
        ASSERT_LT(std::fabs(want), 1.5e-36) << "y = " << y;
        continue;
      }
      const double scale = std::ldexp(1.0, -24) * 0.75 * (1.0 + std::fabs(double(y))) * std::max(s, double(FLT_MIN));
      lib.add(std::fabs(double(out[i]) - want) / scale, y);
      inl.add(std::fabs(double(vmath::dsilu_times(y, 0.75f)) - want) / scale, y);
    }
    count += int64_t(ys.size());
  });
  std::printf(
      "dsilu over %lld inputs: max %.3f (row function, at %a), %.3f (inlined, at %a), in units of "
      "2^-24 |g| (1 + |y|) s\n",
      static_cast<long long>(count), lib.err, lib.at, inl.err, inl.at);
  EXPECT_LE(lib.err, vmath::kDsiluMaxErr) << "at y = " << lib.at;
  EXPECT_LE(inl.err, vmath::kDsiluMaxErr) << "at y = " << inl.at;
  EXPECT_TRUE(std::isnan(vmath::dsilu_times(std::numeric_limits<float>::quiet_NaN(), 1.0f)));
}

// vec.cpp's 16-bit row conversions (bf16 by integer operations that vectorise, fp16 by F16C where
// the compiler has _Float16) against the scalar ones of numeric.h, which PyTorch's match: the same
// bits for every half and bf16 and a sweep of floats (NaN: NaN; F16C quiets signalling NaNs, and
// bf16 rows store PyTorch's 0x7fc0 for every NaN).
TEST(CpuVec, SixteenBitRowsMatchScalarConversions) {
  using causal_conv1d::DType;
  std::vector<uint16_t> h(1 << 16);
  for (uint32_t i = 0; i < h.size(); ++i) h[i] = uint16_t(i);
  std::vector<float> f(h.size());
  vec::widen(h.data(), DType::kFloat16, f.data(), int64_t(h.size()));
  for (uint32_t i = 0; i < h.size(); ++i) {
    const float want = causal_conv1d::half_to_float(h[i]);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(f[i])) << "half 0x" << std::hex << i;
    } else {
      ASSERT_EQ(causal_conv1d::float_bits(f[i]), causal_conv1d::float_bits(want)) << "half 0x" << std::hex << i;
    }
  }
  vec::widen(h.data(), DType::kBFloat16, f.data(), int64_t(h.size()));
  for (uint32_t i = 0; i < h.size(); ++i)
    ASSERT_EQ(causal_conv1d::float_bits(f[i]), uint32_t(i) << 16) << "bf16 0x" << std::hex << i;
  std::vector<uint16_t> got_h, got_b;
  int64_t count = 0;
  // Dense: the half subnormal / normal edge and the overflow edge.
  for_inputs({{0x1p-16f, 0x1p-13f}, {65000.0f, 66000.0f}}, [&](const std::vector<float>& xs) {
    got_h.resize(xs.size());
    got_b.resize(xs.size());
    vec::narrow(xs.data(), DType::kFloat16, got_h.data(), int64_t(xs.size()));
    vec::narrow(xs.data(), DType::kBFloat16, got_b.data(), int64_t(xs.size()));
    for (size_t i = 0; i < xs.size(); ++i) {
      const float x = xs[i];
      const uint16_t want_h = causal_conv1d::float_to_half(x);
      if (std::isnan(x)) {
        ASSERT_TRUE((got_h[i] & 0x7c00u) == 0x7c00u && (got_h[i] & 0x3ffu) != 0)
            << "fp16 of NaN 0x" << std::hex << causal_conv1d::float_bits(x);
      } else {
        ASSERT_EQ(got_h[i], want_h) << "fp16 of " << x << " (0x" << std::hex << causal_conv1d::float_bits(x) << ")";
      }
      if (std::isnan(x)) {
        ASSERT_EQ(got_b[i], 0x7fc0u) << "bf16 of NaN 0x" << std::hex << causal_conv1d::float_bits(x);
      } else {
        ASSERT_EQ(got_b[i], causal_conv1d::float_to_bf16(x))
            << "bf16 of " << x << " (0x" << std::hex << causal_conv1d::float_bits(x) << ")";
      }
    }
    count += int64_t(xs.size());
  });
  std::printf("16-bit narrowing checked on %lld floats\n", static_cast<long long>(count));
}

// The kernels' output pass (vec::finish_row: SiLU or not, then the rounding) gives the bits of
// silu_row and the scalar conversions for every dtype: on CPUs with AVX512-BF16 bf16 rows take
// vcvtneps2bf16 with NaN and denormal vectors sent back to the integer rounding (0x7fc0 for every
// NaN, denormals rounded as PyTorch rounds them), which this pins down. The inputs: the sweep,
// dense runs of denormals, of rounding ties at several binades and of the overflow edge, and NaNs
// of either sign with low payloads (whose integer rounding would carry into the sign), placed
// alone and in vectors of ordinary values.
TEST(CpuVec, OutputPassMatchesScalarRounding) {
  using causal_conv1d::DType;
  std::printf("bf16 rows: %s\n", vec::bf16_cvt_active() ? "AVX512-BF16 conversion" : "integer rounding");
  std::vector<float> specials;
  for (uint32_t b : {0x7fc00000u, 0xffc00000u, 0x7fffffffu, 0xffffffffu, 0x7f800001u, 0xff800001u, 0x7fc0ffffu,
                     0x00000001u, 0x807fffffu, 0x7f7fffffu, 0xff7fffffu, 0x7f800000u, 0xff800000u, 0x3f808000u,
                     0x3f818000u, 0x00008000u, 0x80018000u})
    specials.push_back(causal_conv1d::bits_float(b));
  int64_t count = 0;
  auto check = [&](std::vector<float> xs) {
    const int64_t n = int64_t(xs.size());
    for (bool silu : {false, true}) {
      std::vector<float> act(xs.size()), act4(xs.size());
      if (silu) {
        vec::silu_row(xs.data(), act.data(), n, 6);
        vec::silu_row(xs.data(), act4.data(), n, 4);
      } else {
        act = act4 = xs;
      }
      for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
        std::vector<float> y = xs;
        std::vector<uint32_t> out(xs.size());
        vec::finish_row(y.data(), t, out.data(), n, silu);
        for (int64_t i = 0; i < n; ++i) {
          // want / got: the output's bits; NaN results compare by class (fp32, fp16: any NaN).
          uint32_t want = 0, got = 0;
          bool nan_ok = false;
          if (t == DType::kFloat32) {
            got = out[i];
            want = causal_conv1d::float_bits(act[i]);
            nan_ok = std::isnan(act[i]) && std::isnan(causal_conv1d::bits_float(got));
          } else if (t == DType::kFloat16) {  // (finished as floats, degree 6, then converted)
            got = reinterpret_cast<const uint16_t*>(out.data())[i];
            want = causal_conv1d::float_to_half(act[i]);
            nan_ok = std::isnan(act[i]) && (got & 0x7c00u) == 0x7c00u && (got & 0x3ffu) != 0;
          } else {
            got = reinterpret_cast<const uint16_t*>(out.data())[i];
            want = std::isnan(act4[i]) ? 0x7fc0u : causal_conv1d::float_to_bf16(act4[i]);
          }
          if (got != want && !nan_ok) {
            FAIL() << causal_conv1d::dtype_name(t) << (silu ? " silu" : "") << " of 0x" << std::hex
                   << causal_conv1d::float_bits(xs[i]) << " at " << std::dec << i << ": got 0x" << std::hex << got
                   << ", want 0x" << want;
          }
        }
      }
    }
    count += int64_t(xs.size());
  };
  // Dense: denormals, ties and their neighbours around 1 and 2^-120, the overflow edge.
  for_inputs({{-0x1p-126f, 0x1p-126f}, {0x1p-120f, 0x1.02p-120f}, {1.0f, 1.02f}, {0x1.fep127f, 0x1.fffffep127f}},
             [&](const std::vector<float>& xs) {
               if (!HasFatalFailure()) check(xs);
             });
  // Each special alone in a vector of ordinary values, at every lane of a 16-lane vector and in the tail.
  for (float sp : specials)
    for (int lane = 0; lane < 37; ++lane) {
      std::vector<float> xs(37);
      for (int i = 0; i < 37; ++i) xs[i] = 0.37f * float(i - 18);
      xs[lane] = sp;
      check(xs);
      if (HasFatalFailure()) return;
    }
  std::printf("output pass checked on %lld floats\n", static_cast<long long>(count));
}

// The entry points taking a width run for 2, 3 and 4, and report any other width without writing
// their outputs (no silent fallback to the width-4 code).
TEST(CpuVec, UnsupportedWidthIsReportedAndWritesNothing) {
  using causal_conv1d::DType;
  using causal_conv1d::kErrUnsupportedWidth;
  using causal_conv1d::kSuccess;
  constexpr int64_t n = 8, ld = n;
  constexpr float kUntouched = 1234.5f;
  // Inputs sized for widths up to 8, so that a switch running some width's code reads no further.
  const std::vector<float> x(n + 16, 1.0f), wt(8 * ld, 0.5f), bias(n, 0.25f);
  std::vector<const float*> rows(vec::kMaxColSteps + 8, x.data());
  auto untouched = [&](const std::vector<float>& v) {
    for (float e : v)
      if (e != kUntouched) return false;
    return true;
  };
  for (int width : {0, 1, 5, 8, 2, 3, 4}) {
    SCOPED_TRACE("width " + std::to_string(width));
    const bool ok = width >= 2 && width <= 4;
    const int expected = ok ? kSuccess : kErrUnsupportedWidth;

    std::vector<float> out(n, kUntouched);
    EXPECT_EQ(vec::conv_row(x.data(), x.data() + 8, out.data(), DType::kFloat32, n, wt.data(), width, 0.25f, true),
              expected);
    EXPECT_EQ(untouched(out), !ok) << "conv_row";

    std::vector<float> col(n, kUntouched);
    void* outs[1] = {col.data()};
    EXPECT_EQ(vec::conv_cols(rows.data(), outs, DType::kFloat32, 1, n, wt.data(), ld, width, bias.data(), false),
              expected);
    EXPECT_EQ(untouched(col), !ok) << "conv_cols";

    std::vector<float> dy(n + 16), dx(n, kUntouched);
    double dw[8] = {}, db = 0.0;
    EXPECT_EQ(vec::conv_row_bwd(x.data(), x.data(), dy.data(), dx.data(), n, wt.data(), width, 0.25f, true, dw, &db),
              expected);
    EXPECT_EQ(untouched(dx), !ok) << "conv_row_bwd";

    std::vector<float> dy_out(n, kUntouched), dx_out(n, kUntouched), dwf(8 * ld), dbf(n);
    std::vector<const float*> dy_rows(8, x.data());
    dy_rows[0] = dy_out.data();
    EXPECT_EQ(vec::conv_cols_bwd(rows.data(), x.data(), dy_out.data(), dy_rows.data(), dx_out.data(), n, wt.data(), ld,
                                 width, bias.data(), false, true, dwf.data(), dbf.data()),
              expected);
    EXPECT_EQ(untouched(dy_out), !ok) << "conv_cols_bwd";

    std::vector<float> state(n * 8, 1.0f), step_out(n, kUntouched);
    EXPECT_EQ(vec::update_step(state.data(), 8, x.data(), step_out.data(), n, wt.data(), ld, width, bias.data(), false),
              expected);
    EXPECT_EQ(untouched(step_out), !ok) << "update_step";
  }
}

// The channel-last step functions with the next call's rows to prefetch (conv_cols for fp32 rows on
// AMD CPUs, conv_cols_bf16 everywhere) take a blockwise path for the taps; their outputs must not
// depend on it: every output dtype, with and without SiLU, widths 2-4, channels that end in a
// partial block, bitwise against the same call without prefetching.
TEST(CpuVec, ColumnPrefetchLeavesOutputsUnchanged) {
  using causal_conv1d::DType;
  using causal_conv1d::kSuccess;
  constexpr int kS = vec::kMaxColSteps, kRows = kS + 3;
  constexpr int64_t n = 1100, ld = n + 4;
  std::vector<float> xf(kRows * n), wt(4 * ld), bias(n);
  std::vector<uint16_t> xb(kRows * n);
  uint32_t seed = 12345u;
  auto next_float = [&] {
    seed = seed * 1664525u + 1013904223u;
    return float(int32_t(seed >> 8) - (1 << 23)) * 0x1p-21f;  // [-4, 4)
  };
  for (size_t i = 0; i < xf.size(); ++i) {
    xb[i] = causal_conv1d::float_to_bf16(next_float());
    xf[i] = causal_conv1d::bf16_to_float(xb[i]);
  }
  for (float& v : wt) v = 0.25f * next_float();
  for (float& v : bias) v = next_float();
  const std::vector<float> ahead(kS * n, 1.0f);  // the "next call's" rows
  const void* next[kS];
  for (int s = 0; s < kS; ++s) next[s] = s == 3 ? nullptr : ahead.data() + s * n;  // (null entries skipped)
  for (DType t : {DType::kFloat32, DType::kBFloat16, DType::kFloat16})
    for (int width : {2, 3, 4})
      for (bool silu : {false, true})
        for (bool bf16_rows : {false, true}) {
          SCOPED_TRACE("out dtype " + std::to_string(int(t)) + ", width " + std::to_string(width) +
                       (silu ? ", SiLU" : "") + (bf16_rows ? ", bf16 rows" : ", float rows"));
          const int esize = t == DType::kFloat32 ? 4 : 2;
          std::vector<uint8_t> plain(kS * n * esize), fetched(kS * n * esize, 0xab);
          auto run = [&](std::vector<uint8_t>& out, const void* const* nx) {
            void* outs[kS];
            for (int s = 0; s < kS; ++s) outs[s] = out.data() + s * n * esize;
            const float* rf[kRows];
            const uint16_t* rb[kRows];
            for (int k = 0; k < kRows; ++k) rf[k] = xf.data() + k * n, rb[k] = xb.data() + k * n;
            return bf16_rows
                       ? vec::conv_cols_bf16(rb + 4 - width, outs, t, kS, n, wt.data(), ld, width, bias.data(), silu,
                                             nx)
                       : vec::conv_cols(rf + 4 - width, outs, t, kS, n, wt.data(), ld, width, bias.data(), silu, nx);
          };
          ASSERT_EQ(run(plain, nullptr), kSuccess);
          ASSERT_EQ(run(fetched, next), kSuccess);
          EXPECT_EQ(fetched, plain);
        }
}

}  // namespace
