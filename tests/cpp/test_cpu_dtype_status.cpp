// A DType value outside the enum, in x's dtype or in weight's, is reported by every CPU launcher
// as kErrUnsupportedDType at its entry, on each of its paths, before anything is written (no
// silent fallback to fp16 or fp32 code). vec.h's entry points taking a dtype report it too.
#include <string>
#include <tuple>
#include <vector>

#include "causal_conv1d/cpu.h"
#include "conv_problem.h"
#include "vec.h"

namespace {

using causal_conv1d::DType;
using causal_conv1d::kErrUnsupportedDType;
using cc_test::BwdProblem;
using cc_test::Case;
using cc_test::Problem;
using cc_test::UpdateCase;
using cc_test::UpdateProblem;
namespace cpu = causal_conv1d::cpu;
namespace vec = causal_conv1d::cpu::vec;

const DType kUnknown[] = {static_cast<DType>(3), static_cast<DType>(-1)};

// Which dtype of a params struct gets the unknown value.
enum class Slot { kX, kWeight };

// Runs check(slot, t) for both dtypes of a params struct and every unknown value, traced.
template <typename F>
void for_each_unknown(const std::string& where, F&& check) {
  for (Slot slot : {Slot::kX, Slot::kWeight})
    for (DType t : kUnknown) {
      SCOPED_TRACE(std::string(slot == Slot::kX ? "x" : "weight") + " dtype " + std::to_string(static_cast<int>(t)) +
                   where);
      check(slot, t);
    }
}

// Gives p's slot the dtype t, then expects launch(p) to report it with every output as it was.
template <typename Params, typename Launch, typename... Outputs>
void expect_rejected(Params& p, Slot slot, DType t, Launch launch, const Outputs&... outputs) {
  (slot == Slot::kX ? p.x_dtype : p.w_dtype) = t;
  const auto before = std::make_tuple(outputs...);
  EXPECT_EQ(launch(p), kErrUnsupportedDType);
  EXPECT_TRUE(std::make_tuple(outputs...) == before) << "an output was written";
}

std::string path_name(const Case& c) {
  return std::string(c.channel_last ? ", channel-last" : ", channel-first") + (c.states ? ", states" : "") +
         (c.seq_idx ? ", seq_idx" : "");
}

// Without seq_idx and states the vectorised paths, else the element loops; in each layout.
std::vector<Case> paths() {
  std::vector<Case> v;
  for (bool channel_last : {false, true})
    for (int extra = 0; extra < 3; ++extra)
      v.push_back({DType::kFloat16, DType::kBFloat16, 4, channel_last, true, true, extra == 1, extra == 2, 2, 24, 37});
  return v;
}

TEST(CpuDTypeStatus, FwdRejectsUnknownDTypeAndWritesNothing) {
  for (const Case& c : paths())
    for_each_unknown(path_name(c), [&](Slot slot, DType t) {
      Problem pr(c);
      expect_rejected(
          pr.p, slot, t, [](const auto& p) { return cpu::launch_fwd(p, cpu::serial_for); }, pr.out.bytes,
          pr.final_states.bytes);
    });
}

TEST(CpuDTypeStatus, BwdRejectsUnknownDTypeAndWritesNothing) {
  for (const Case& c : paths())
    for_each_unknown(path_name(c), [&](Slot slot, DType t) {
      BwdProblem pr(c);
      expect_rejected(
          pr.p.f, slot, t, [&](const auto&) { return cpu::launch_bwd(pr.p, cpu::serial_for); }, pr.dx.bytes,
          pr.dinit.bytes, pr.dweight, pr.dbias);
    });
}

TEST(CpuDTypeStatus, UpdateRejectsUnknownDTypeAndWritesNothing) {
  // The decode layout (one token, contiguous rows: vec.h's widen / narrow) and the general path.
  const UpdateCase cases[] = {{DType::kFloat16, DType::kFloat16, 4, 3, 64, 1, 3, false, false, true},
                              {DType::kBFloat16, DType::kFloat32, 3, 3, 41, 3, 4, true, true, true}};
  for (const UpdateCase& c : cases)
    for_each_unknown(", seqlen " + std::to_string(c.seqlen), [&](Slot slot, DType t) {
      UpdateProblem pr(c);
      expect_rejected(
          pr.p, slot, t, [](const auto& p) { return cpu::launch_update(p, cpu::serial_for); }, pr.out.bytes,
          pr.state.bytes);
    });
}

TEST(CpuDTypeStatus, ServingRejectsUnknownDTypeBeforeReadingAnything) {
  // Every pointer is null: the launchers must return before touching one.
  for_each_unknown("", [](Slot slot, DType t) {
    causal_conv1d::ServingFwdParams f;
    f.dim = 8, f.total_tokens = 4, f.batch = 1, f.width = 4;
    expect_rejected(f, slot, t, [](const auto& p) { return cpu::launch_serving_fwd(p, cpu::serial_for); });
    causal_conv1d::ServingUpdateParams u;
    u.batch = 1, u.dim = 8, u.seqlen = 1, u.width = 4;
    expect_rejected(u, slot, t, [](const auto& p) { return cpu::launch_serving_update(p, cpu::serial_for); });
  });
}

TEST(CpuDTypeStatus, VecEntryPointsRejectUnknownDTypeAndWriteNothing) {
  constexpr int64_t n = 8;
  constexpr float kUntouched = 1234.5f;
  const std::vector<float> x(n + 8, 1.0f), wt(4 * n, 0.5f), bias(n, 0.25f);
  std::vector<const float*> rows(vec::kMaxColSteps + 3, x.data());
  for (DType t : kUnknown) {
    SCOPED_TRACE("dtype " + std::to_string(static_cast<int>(t)));
    std::vector<float> out(n, kUntouched);
    EXPECT_EQ(vec::conv_row(x.data(), x.data() + 3, out.data(), t, n, wt.data(), 4, 0.25f, true), kErrUnsupportedDType);
    EXPECT_EQ(out, std::vector<float>(n, kUntouched)) << "conv_row";
    void* outs[1] = {out.data()};
    EXPECT_EQ(vec::conv_cols(rows.data(), outs, t, 1, n, wt.data(), n, 4, bias.data(), false), kErrUnsupportedDType);
    EXPECT_EQ(out, std::vector<float>(n, kUntouched)) << "conv_cols";
  }
}

}  // namespace
