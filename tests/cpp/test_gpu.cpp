// GPU launchers against the CPU backend, through the same params structs. Skips without a GPU.
// Device copies of x and out can be shifted by a few elements so that rows start misaligned
// (the kernels' peeled 16-byte path) or x and out disagree in alignment (the element path).
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "causal_conv1d/build_config.h"
#include "causal_conv1d/cpu.h"
#include "causal_conv1d/gpu.h"
#include "conv_problem.h"

namespace {

using causal_conv1d::DType;
using cc_test::Buffer;
using cc_test::Case;
using cc_test::DeviceBuffer;
using cc_test::Problem;
using cc_test::UpdateCase;
using cc_test::UpdateProblem;

// A device copy of a host buffer whose data starts `shift` elements into the allocation.
struct Shifted {
  DeviceBuffer mem;
  int shift;
  size_t esize;
  Shifted(const Buffer& host, int shift_elems)
      : mem(host.bytes.size() + 16), shift(shift_elems), esize(causal_conv1d::dtype_size(host.dtype)) {
    if (mem.ptr) causal_conv1d::gpu::copy_to_device(ptr(), host.data(), host.bytes.size());
  }
  void* ptr() const { return static_cast<char*>(mem.ptr) + shift * esize; }
  void to_host(Buffer& host) const { causal_conv1d::gpu::copy_to_host(host.data(), ptr(), host.bytes.size()); }
};

// Every element within tol (relative, plus tol absolute); on failure, how many are off and the
// first few of them, so that a pattern (one thread, one step, a stride) shows in one run.
void expect_close_buffers(const Buffer& got, const Buffer& want, double tol, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  constexpr int kShown = 12;
  size_t bad = 0;
  std::string shown;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got.get(i), w = want.get(i);
    if (std::isnan(w)) continue;  // element the op does not write (stride gaps): never compared
    if (std::isfinite(g) && std::fabs(g - w) <= tol * (1.0 + std::fabs(w))) continue;
    if (bad++ < kShown) {
      shown += "\n  " + std::string(what) + "[" + std::to_string(i) + "]: got " +
               (std::isfinite(g) ? std::to_string(g) : std::string("not written")) + ", want " + std::to_string(w);
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " elements off (tolerance " << tol
                     << "), the first:" << shown;
}

struct FwdGpuParam {
  Case c;
  int x_shift, out_shift;
};

class GpuFwd : public ::testing::TestWithParam<FwdGpuParam> {};

TEST_P(GpuFwd, MatchesCpu) {
  if (!cc_test::have_gpu()) GTEST_SKIP() << "no GPU visible";
  const FwdGpuParam& gp = GetParam();
  Problem cpu(gp.c), gpu(gp.c);
  ASSERT_EQ(causal_conv1d::cpu::launch_fwd(cpu.p, causal_conv1d::cpu::serial_for), 0);

  Shifted x(gpu.x, gp.x_shift), out(gpu.out, gp.out_shift), fin(gpu.final_states, 0);
  DeviceBuffer w(gpu.w.bytes), bias(gpu.bias.bytes), init(gpu.init.bytes), seq(gpu.seq);
  causal_conv1d::FwdParams p = gpu.p;
  p.x = x.ptr(), p.out = out.ptr(), p.weight = w.ptr;
  if (p.bias) p.bias = bias.ptr;
  if (p.initial_states) p.initial_states = init.ptr, p.final_states = fin.ptr();
  if (p.seq_idx) p.seq_idx = static_cast<const int32_t*>(seq.ptr);
  int64_t bytes = -1;
  CC_GPU_OK(causal_conv1d::gpu::fwd_workspace_bytes(p, cc_test::device0(), &bytes));
  EXPECT_EQ(bytes > 0, p.seq_idx != nullptr && !p.channel_last) << "workspace only for the channel-first seq_idx masks";
  DeviceBuffer workspace(static_cast<size_t>(bytes));
  CC_GPU_OK(causal_conv1d::gpu::launch_fwd(p, workspace.ptr, cc_test::device0(), nullptr));
  CC_GPU_OK(causal_conv1d::gpu::device_synchronize());
  out.to_host(gpu.out);
  fin.to_host(gpu.final_states);
  const double tol = cc_test::tolerance(gp.c.xt);
  expect_close_buffers(gpu.out, cpu.out, tol, "out");
  if (gp.c.states) {
    EXPECT_EQ(gpu.final_states.bytes, cpu.final_states.bytes) << "final states are copies";
  }
}

std::vector<FwdGpuParam> gpu_fwd_cases() {
  std::vector<FwdGpuParam> v;
  for (const Case& c : cc_test::fwd_cases()) {
    v.push_back({c, 0, 0});
    v.push_back({c, 3, 3});  // rows start misaligned, same for x and out: peeled vectors
  }
  Case c = cc_test::fwd_cases()[1];
  v.push_back({c, 1, 2});  // x and out misaligned differently: out stored element by element
  // The kernels' own edges. Channel-first: row lengths with every tail modulo the vector (8 or 4
  // elements), rows of one warp iteration, rows that need several strips (a strip is at most 24
  // warp iterations on NVIDIA, 16 on AMD: 6144 / 4096 bf16 elements; on NVIDIA rows of 4096
  // elements and more take strips of 2 or 4 warps interleaved, 24576 bf16 elements at most)
  // whose boundaries fall mid-row, with states and with seq_idx (ids of lengths 1, 2, 3, ... and
  // padding tokens every 11th position cross every lane, iteration and strip edge).
  for (int64_t L : {1, 2, 3, 5, 7, 9, 255, 257, 4095, 4097, 5000, 9000, 17000, 30001})
    for (DType t : {DType::kBFloat16, DType::kFloat32}) {
      const int64_t dim = L > 4096 ? 2 : 3;
      v.push_back({{t, DType::kFloat32, 4, false, true, true, L % 2 == 0, false, 2, dim, L}, 0, 0});
      v.push_back({{t, DType::kFloat32, 3, false, true, true, false, true, 2, dim, L}, 3, 3});
      // out in another vector phase than x (out's vectors realigned from x's; the phase offset
      // takes most values over the lengths), with states or seq_idx
      v.push_back(
          {{t, DType::kFloat32, 4, false, true, true, L % 2 == 1, L % 2 == 0, 2, dim, L}, int(1 + L % 4), int(L % 3)});
    }
  // Channel-last: dims not divisible by the channel vector (4 of 16-bit, 2 of fp32), rows that
  // span several time chunks (32 steps), misaligned starts.
  for (int64_t dim : {1, 3, 5, 130, 513})
    for (DType t : {DType::kFloat16, DType::kFloat32}) {
      v.push_back({{t, DType::kBFloat16, 4, true, true, true, dim % 2 == 1, false, 2, dim, 100}, 0, 0});
      v.push_back({{t, DType::kBFloat16, 2, true, false, true, false, true, 2, dim, 70}, 1, 1});
    }
  return v;
}

INSTANTIATE_TEST_SUITE_P(All, GpuFwd, ::testing::ValuesIn(gpu_fwd_cases()),
                         [](const ::testing::TestParamInfo<FwdGpuParam>& info) {
                           return cc_test::case_name({info.param.c, info.index}) + "_shift" +
                                  std::to_string(info.param.x_shift) + std::to_string(info.param.out_shift);
                         });

// Backward on the GPU against the CPU backend, in default (atomic) and deterministic mode; two
// deterministic runs must agree bit for bit.
struct BwdGpuParam {
  Case c;
  bool deterministic;
  // dweight's layout: rows of width + dweight_pad floats, starting dweight_shift floats into the
  // buffer (0, 0: the dense rows the torch layer allocates; the 16-bit width-4 channel-last kernels
  // add a row's taps with one vector atomic on sm_90 where the rows are 16-byte aligned, and one
  // atomic a term otherwise).
  int dweight_pad = 0, dweight_shift = 0;
  // weight a transposed view ((width, dim) storage), bias every other element of a buffer: the same
  // values, through the kernels' element-wise weight loads (runs need dense (dim, width) rows and a
  // dense bias).
  bool strided_weight = false, strided_bias = false;
};

struct BwdGpuRun {
  Buffer dx, dinit;
  std::vector<float> dweight, dbias;
};

void run_gpu_bwd(cc_test::BwdProblem& pr, const BwdGpuParam& gp, BwdGpuRun& res) {
  const cc_test::Problem& f = pr.fwd;
  const int64_t D = gp.c.dim, W = gp.c.width, row = W + gp.dweight_pad;
  std::vector<uint8_t> w_bytes = f.w.bytes, bias_bytes = f.bias.bytes;
  const size_t es = size_t(causal_conv1d::dtype_size(f.w.dtype));
  if (gp.strided_weight) {
    for (int64_t c = 0; c < D; ++c)
      for (int64_t k = 0; k < W; ++k)
        std::memcpy(&w_bytes[size_t(k * D + c) * es], &f.w.bytes[size_t(c * W + k) * es], es);
  }
  if (gp.strided_bias) {
    bias_bytes.assign(2 * f.bias.bytes.size(), 0);
    for (int64_t c = 0; c < D; ++c) std::memcpy(&bias_bytes[size_t(2 * c) * es], &f.bias.bytes[size_t(c) * es], es);
  }
  DeviceBuffer x(f.x.bytes), w(w_bytes), bias(bias_bytes), init(f.init.bytes), seq(f.seq), dout(pr.dout.bytes),
      dx(pr.dx.bytes), dinit(pr.dinit.bytes), dfinal(pr.dfinal.bytes),
      dweight(std::vector<float>(size_t(gp.dweight_shift + D * row), 0.0f)), dbias(pr.dbias);
  causal_conv1d::BwdParams p = pr.p;
  p.f.x = x.ptr, p.f.weight = w.ptr;
  if (p.f.bias) p.f.bias = bias.ptr;
  if (gp.strided_weight) p.f.weight_c_stride = 1, p.f.weight_w_stride = D;
  if (gp.strided_bias) p.f.bias_stride = 2;
  if (p.f.initial_states) p.f.initial_states = init.ptr;
  if (p.f.seq_idx) p.f.seq_idx = static_cast<const int32_t*>(seq.ptr);
  p.dout = dout.ptr, p.dx = dx.ptr;
  p.dweight = static_cast<float*>(dweight.ptr) + gp.dweight_shift, p.dweight_c_stride = row, p.dweight_w_stride = 1;
  if (p.dbias) p.dbias = static_cast<float*>(dbias.ptr);
  if (p.dinitial_states) p.dinitial_states = dinit.ptr;
  if (p.dfinal_states) p.dfinal_states = dfinal.ptr;
  p.deterministic = gp.deterministic;
  int64_t elems = 0;
  CC_GPU_OK(causal_conv1d::gpu::bwd_workspace_elems(p, cc_test::device0(), &elems));
  DeviceBuffer workspace(size_t(elems) * sizeof(float));
  p.workspace = static_cast<float*>(workspace.ptr);
  CC_GPU_OK(causal_conv1d::gpu::launch_bwd(p, cc_test::device0(), nullptr));
  CC_GPU_OK(causal_conv1d::gpu::device_synchronize());
  res.dx = pr.dx;
  res.dx.bytes = dx.to_host<uint8_t>();
  res.dinit = pr.dinit;
  res.dinit.bytes = dinit.to_host<uint8_t>();
  const std::vector<float> rows = dweight.to_host<float>();
  res.dweight.assign(size_t(D * W), 0.0f);
  for (int64_t c = 0; c < D; ++c)
    for (int64_t k = 0; k < W; ++k) res.dweight[c * W + k] = rows[gp.dweight_shift + c * row + k];
  res.dbias = dbias.to_host<float>();
}

class GpuBwd : public ::testing::TestWithParam<BwdGpuParam> {};

TEST_P(GpuBwd, MatchesCpu) {
  if (!cc_test::have_gpu()) GTEST_SKIP() << "no GPU visible";
  const BwdGpuParam& gp = GetParam();
  cc_test::BwdProblem cpu(gp.c), gpu(gp.c);
  ASSERT_EQ(causal_conv1d::cpu::launch_bwd(cpu.p, causal_conv1d::cpu::serial_for), 0);
  BwdGpuRun res;
  run_gpu_bwd(gpu, gp, res);
  const double tol = cc_test::tolerance(gp.c.xt) + cc_test::tolerance(gp.c.wt);
  expect_close_buffers(res.dx, cpu.dx, tol, "dx");
  if (gp.c.states) {
    expect_close_buffers(res.dinit, cpu.dinit, tol, "dinitial_states");
  }
  double scale = 1.0;
  for (float v : cpu.dweight) scale = std::max(scale, double(std::fabs(v)));
  for (size_t i = 0; i < cpu.dweight.size(); ++i)
    ASSERT_NEAR(res.dweight[i], cpu.dweight[i], tol * scale) << "dweight[" << i << "]";
  if (gp.c.bias) {
    for (size_t i = 0; i < cpu.dbias.size(); ++i)
      ASSERT_NEAR(res.dbias[i], cpu.dbias[i], tol * scale) << "dbias[" << i << "]";
  }
  if (gp.deterministic) {
    cc_test::BwdProblem again(gp.c);
    BwdGpuRun res2;
    run_gpu_bwd(again, gp, res2);
    EXPECT_EQ(res.dweight, res2.dweight) << "deterministic dweight differs between runs";
    EXPECT_EQ(res.dbias, res2.dbias) << "deterministic dbias differs between runs";
    EXPECT_EQ(res.dx.bytes, res2.dx.bytes);
  }
}

std::vector<BwdGpuParam> gpu_bwd_cases() {
  std::vector<BwdGpuParam> v;
  for (const Case& c : cc_test::fwd_cases()) {
    v.push_back({c, false});
    v.push_back({c, true});
  }
  // The kernels' own edges. Channel-first: row lengths with every tail modulo the vector (8 or 4
  // elements), rows of one warp iteration, rows of several strips (a strip is at most 24 warp
  // iterations on NVIDIA, 12 for fp32, 32 on AMD: 6144 bf16 / 1536 fp32 / 8192 bf16 elements) so
  // that strips end mid-row and recompute the dy past their end, with states (dinitial_states and dfinal_states from
  // the states pass) and with seq_idx at widths 2-4 (ids of lengths 1, 2, 3, ... and padding every 11th position cross
  // every lane, iteration and strip edge; rows of odd lengths start misaligned, so the masks' shifted copies are
  // read at every phase: between them the rows of L = 255, 257, 4095 and 4097 start at every element of a
  // vector), in both modes.
  for (int64_t L : {1, 2, 3, 5, 7, 9, 255, 257, 4095, 4097, 5000, 9000, 17000})
    for (DType t : {DType::kBFloat16, DType::kFloat32}) {
      const int64_t dim = L > 4096 ? 2 : 3;
      v.push_back({{t, DType::kFloat32, 4, false, true, true, L % 2 == 0, false, 2, dim, L}, L % 3 == 0});
      v.push_back({{t, DType::kFloat32, 3, false, true, true, false, true, 2, dim, L}, L % 3 == 1});
      v.push_back({{t, DType::kFloat32, L % 2 == 0 ? 4 : 2, false, true, true, false, true, 2, dim, L}, L % 3 == 2});
    }
  // Channel-first seq_idx without the periodic padding: most warp iterations then lie inside one
  // sequence and take the unmasked computation, the others (sequences of lengths 1, 2, 3, ...:
  // starts dense at a row's beginning, sparse later, across lanes, iterations and strips; row 0's
  // padded tail) the masked one, next to each other; rows misaligned by one element (odd L) too.
  for (int64_t L : {7, 255, 257, 1000, 4095, 4097, 9000, 17000})
    for (DType t : {DType::kBFloat16, DType::kFloat32})
      for (int width = causal_conv1d::kMinWidth; width <= causal_conv1d::kMaxWidth; ++width)
        v.push_back(
            {{t, DType::kFloat32, width, false, width != 2, width != 3, false, true, 2, L > 4096 ? 2 : 3, L, false},
             (L + width) % 2 == 0});
  // Channel-first seq_idx with long sequences, no periodic padding (batch row 0 ends in padding as in
  // every case; row 1 runs to its end): warp iterations at a row's edges take the unmasked
  // computation when their sequence runs into the edge (the walk's inputs before a row and dy after
  // it are zeros either way), and the masked one when a sequence starts 1 or 2 positions into the
  // row or 1 or 2 before its end. Sequences of 1024 positions (width 4) start at whole warp
  // iterations (bf16 256, fp32 128 elements): both neighbours of such a start take the unmasked
  // computation with their halos masked (the x halo of the lane holding the start, the dy halo of
  // the last lane before it, carried across the iterations); rows of one sequence (width 2) mask
  // nothing; rows are of several strips (NVIDIA: bf16 1 and 2, fp32 3 and 6).
  for (int64_t L : {4096, 8448})
    for (DType t : {DType::kBFloat16, DType::kFloat32})
      for (int width : {2, 4})
        for (int64_t phase : {int64_t(0), int64_t(1), int64_t(2), L - 2, L - 1}) {
          cc_test::Case c{t, DType::kFloat32, width, false, true, true, false, true, 2, 3, L, false};
          c.seq_len = phase == 0 ? (width == 2 ? L : 1024) : L, c.seq_phase = phase;
          v.push_back({c, (phase + width) % 2 == 0});
        }
  // Channel-first states on aligned rows, whose first and last warp iterations are fast: the
  // initial_states halo of iteration 0 (its dy, dx and dweight terms corrected after the walk),
  // dinitial_states and dfinal_states recomputed after it; rows of whole warp iterations (256 bf16 /
  // 128 fp32 elements), rows of 2 strips, and rows whose last W - 1 positions straddle the last fast
  // iteration and an edge one (4097, 4098). Short rows (4-32) for the states pass's vector loads: a
  // row's head and tail vectors the same one or overlapping (its scalar path where L is not a
  // multiple of the vector). Its whole 32-byte runs of dx at both ends (tuning.h: states_run) where
  // the rows are multiples of them and hold two: from L = 16 for fp32 and 32 for bf16 (bf16's 16
  // and 24 store element by element). Deterministic mode on odd rows and on 256 and 8448.
  for (int64_t L : {4, 8, 16, 24, 32, 256, 4096, 4097, 4098, 8448})
    for (DType t : {DType::kBFloat16, DType::kFloat32})
      for (int width = causal_conv1d::kMinWidth; width <= causal_conv1d::kMaxWidth; ++width)
        v.push_back(
            {{t, DType::kFloat32, width, false, width != 3, true, true, false, 2, 3, L}, L % 2 == 1 || L % 512 == 256});
  // Channel-last: dims not divisible by the channel vector (2 of 16-bit), time ranges of 64 steps,
  // 4 to a block, so rows of 100 and 1100 steps end mid-range and mid-block; states and seq_idx.
  for (int64_t dim : {1, 3, 5, 130, 513})
    for (DType t : {DType::kFloat16, DType::kFloat32}) {
      v.push_back({{t, DType::kBFloat16, 4, true, true, true, dim % 2 == 1, false, 2, dim, 100}, dim % 3 == 0});
      v.push_back({{t, DType::kBFloat16, 2, true, false, true, false, true, 2, dim, 1100}, dim % 3 != 0});
    }
  // Channel-last, a small grid whose rounding leaves empty ranges and a range whose window runs
  // past L: under NVIDIA's row 5 time blocks of 8 warps x 4 steps for 130 rows, so ranges 33-39
  // take no step, and the range ending at row 128 has 2 of its 3 rows ahead inside the row (the
  // third is a zero, not loaded); 16-bit width 4, with states (dfinal_states on the last rows).
  for (bool states : {false, true})
    v.push_back({{DType::kBFloat16, DType::kFloat32, 4, true, true, true, states, false, 1, 64, 130}, states});
  // Channel-last seq_idx over long rows at every width, without SiLU or bias (upstream's varlen
  // test shape: 64 channels, 4096 steps). The grid is small, so the launcher splits the rows into
  // short ranges (on a 132-SM H200 8 steps, the fewest its tuning row allows: one unrolled 6-step
  // iteration and 2 sliding steps; on AMD down to 4, all sliding).
  for (int64_t batch : {1, 3})
    for (int width = causal_conv1d::kMinWidth; width <= causal_conv1d::kMaxWidth; ++width)
      for (DType t : {DType::kFloat32, DType::kBFloat16})
        v.push_back({{t, DType::kFloat32, width, true, false, false, false, true, batch, 64, 4096}, width == 3});
  // Channel-last ranges at full length: 2 x 4096 channels x 4096 steps is 1024 blocks of 16-bit
  // (2048 of fp32), enough for every GPU up to 256 CUs to keep the longest ranges (128 steps on
  // NVIDIA, 64 on AMD), so the walk runs its unrolled loop (6 steps on NVIDIA: the cp.async stages
  // and the renamed windows back in their first registers) many times over, then its sliding
  // tail; plain, with states, with seq_idx (masks of sequences of every length), every width.
  v.push_back({{DType::kBFloat16, DType::kFloat32, 4, true, true, true, false, false, 2, 4096, 4096}, true});
  v.push_back({{DType::kBFloat16, DType::kBFloat16, 3, true, true, true, true, false, 2, 4096, 4096}, false});
  v.push_back({{DType::kBFloat16, DType::kFloat32, 4, true, true, true, false, true, 2, 4096, 4096}, false});
  v.push_back({{DType::kFloat16, DType::kFloat32, 2, true, false, true, false, true, 2, 4096, 4096}, true});
  v.push_back({{DType::kFloat32, DType::kFloat32, 4, true, true, false, true, false, 2, 4096, 4096}, false});
  // dweight in other layouts than dense rows, both layouts, widths 2 and 4: rows padded to twice the
  // width (bf16 width 4 channel-last: vector atomics at that stride), rows of width + 1 floats and
  // rows starting one float into the buffer (an atomic a term); channel-last bf16 over time ranges
  // of several blocks (2 x 300 channels x 1100 steps), fp32 in a small re-balanced grid.
  for (int width : {2, 4})
    for (auto [pad, shift] : {std::pair{width, 0}, std::pair{1, 0}, std::pair{0, 1}}) {
      const std::vector<Case> cases = {
          {DType::kBFloat16, DType::kFloat32, width, false, true, true, false, false, 2, 3, 1100},
          {DType::kBFloat16, DType::kFloat32, width, false, true, true, false, false, 2, 3, 4097},
          {DType::kBFloat16, DType::kFloat32, width, true, true, true, false, false, 2, 300, 1100},
          {DType::kFloat32, DType::kFloat32, width, true, true, false, false, false, 1, 4096, 256}};
      for (const Case& c : cases) v.push_back({c, false, pad, shift});
    }
  // Strided weight and bias: both layouts, 16-bit and fp32 x with weights of their dtype or float32,
  // in the channel-last kernels of small grids (re-balanced on NVIDIA) and of whole ranges; then a
  // strided bias beside dense weights: in small grids (the re-balanced kernels load both element by
  // element unless both are runs) and in the wide blocks of shortened ranges ((2, 8192, 1024) on
  // NVIDIA: weights as runs, the bias element-wise).
  for (const Case& c :
       std::vector<Case>{{DType::kBFloat16, DType::kBFloat16, 4, true, true, true, false, false, 2, 130, 100},
                         {DType::kFloat16, DType::kFloat32, 3, true, true, true, true, false, 1, 64, 300},
                         {DType::kFloat32, DType::kFloat32, 2, true, false, true, false, false, 2, 33, 70},
                         {DType::kBFloat16, DType::kBFloat16, 4, true, true, true, false, false, 2, 4096, 4096},
                         {DType::kBFloat16, DType::kBFloat16, 4, false, true, true, false, false, 2, 3, 1100}})
    v.push_back({c, c.dim == 64, 0, 0, true, true});
  for (const Case& c :
       std::vector<Case>{{DType::kBFloat16, DType::kBFloat16, 4, true, true, true, false, false, 2, 130, 100},
                         {DType::kFloat16, DType::kFloat32, 3, true, false, true, false, false, 1, 64, 300},
                         {DType::kBFloat16, DType::kBFloat16, 4, true, true, true, false, false, 2, 8192, 1024}})
    v.push_back({c, false, 0, 0, false, true});
  return v;
}

INSTANTIATE_TEST_SUITE_P(
    All, GpuBwd, ::testing::ValuesIn(gpu_bwd_cases()), [](const ::testing::TestParamInfo<BwdGpuParam>& info) {
      return cc_test::case_name({info.param.c, info.index}) + (info.param.deterministic ? "_det" : "_atomic") +
             (info.param.dweight_pad || info.param.dweight_shift
                  ? "_dwrow" + std::to_string(info.param.dweight_pad) + "_" + std::to_string(info.param.dweight_shift)
                  : "") +
             (info.param.strided_weight ? "_wstrided" : "") + (info.param.strided_bias ? "_bstrided" : "");
    });

class GpuUpdate : public ::testing::TestWithParam<UpdateCase> {};

TEST_P(GpuUpdate, MatchesCpu) {
  if (!cc_test::have_gpu()) GTEST_SKIP() << "no GPU visible";
  UpdateProblem cpu(GetParam()), gpu(GetParam());
  ASSERT_EQ(causal_conv1d::cpu::launch_update(cpu.p, causal_conv1d::cpu::serial_for), 0);
  DeviceBuffer x(gpu.x.bytes), w(gpu.w.bytes), bias(gpu.bias.bytes), state(gpu.state.bytes), out(gpu.out.bytes),
      cs(gpu.cache_seqlens), idx(gpu.indices);
  causal_conv1d::UpdateParams p = gpu.p;
  p.x = x.ptr, p.weight = w.ptr, p.bias = bias.ptr, p.conv_state = state.ptr, p.out = out.ptr;
  if (p.cache_seqlens) p.cache_seqlens = static_cast<const int32_t*>(cs.ptr);
  if (p.conv_state_indices) p.conv_state_indices = static_cast<const int32_t*>(idx.ptr);
  CC_GPU_OK(causal_conv1d::gpu::launch_update(p, cc_test::device0(), nullptr));
  CC_GPU_OK(causal_conv1d::gpu::device_synchronize());
  gpu.out.bytes = out.to_host<uint8_t>();
  gpu.state.bytes = state.to_host<uint8_t>();
  expect_close_buffers(gpu.out, cpu.out, cc_test::tolerance(GetParam().xt), "out");
  EXPECT_EQ(gpu.state.bytes, cpu.state.bytes) << "conv_state after the update";
}

INSTANTIATE_TEST_SUITE_P(All, GpuUpdate, ::testing::ValuesIn(cc_test::update_cases()), cc_test::update_case_name);

// The kernels start while the kernel before them on the stream still runs (launch_overlapping) and
// must wait for it before touching memory. Chains of launches on one stream without a
// synchronization between them, each reading what the one before wrote and writing what that one
// read (a decode loop, a training step), against the same chain on the CPU, on a stream of their
// own (on the legacy default stream NVIDIA's driver never overlaps two kernels). Our kernels let the
// next start only once their blocks exit (or early, after their own wait), so these check the
// chains' results, not where the waits are: mutants without them passed these (benchmarks/NOTES.md,
// forty-fourth session); GpuLaunchOrder below catches those. fp32, so that the chain's roundings
// stay far below what a stale row changes (tolerance: one rounding a launch).
constexpr int kChain = 4;

struct ChainStream {
  void* s = nullptr;
  ChainStream() { EXPECT_EQ(causal_conv1d::gpu::stream_create(&s), 0); }
  ~ChainStream() {
    if (s) causal_conv1d::gpu::stream_destroy(s);
  }
  ChainStream(const ChainStream&) = delete;
  ChainStream& operator=(const ChainStream&) = delete;
};

// The backward variants of the launch-order and chained tests, fp32 (1, 4096, 256): the
// channel-first walk with its mask kernel (seq_idx), its states pass and its deterministic
// reduction, and the channel-last kernels.
struct BwdVariant {
  bool cl, seq, states, det;
  std::string name() const {
    return std::string(cl ? "channel-last" : "channel-first") + (seq ? ", seq_idx" : "") + (states ? ", states" : "") +
           (det ? ", deterministic" : "");
  }
  Case fp32_case() const { return {DType::kFloat32, DType::kFloat32, 4, cl, true, true, states, seq, 1, 4096, 256}; }
};
std::vector<BwdVariant> bwd_variants() {
  return {{false, false, false, false}, {false, true, false, false}, {false, false, true, false},
          {false, false, false, true},  {true, false, false, false}, {true, true, false, false},
          {true, false, true, true}};
}

// The launch order itself: a kernel before ours lets ours start at once and writes our inputs
// (poisoned until then: 0xFF bytes, NaN floats and -1 ids) only 200 us later (launch_late_copy), on
// a stream of our own. Ours must wait for it before reading any of them; a kernel that read one
// before its wait would compute from the poison. (Only a launcher's first kernel overlaps the copy;
// the ones after it, a states pass, a reduction, the walk after the mask kernel, overlap ours.)
// The device descriptor is taken before the copy starts, so no host work eats the window.
struct LateInputs {
  std::vector<std::unique_ptr<DeviceBuffer>> staging;
  std::vector<void*> dst;
  std::vector<const void*> src;
  std::vector<size_t> bytes;
  void add(void* d, const std::vector<uint8_t>& real) {
    staging.push_back(std::make_unique<DeviceBuffer>(real));
    const std::vector<uint8_t> poison(real.size(), 0xFF);
    EXPECT_EQ(causal_conv1d::gpu::copy_to_device(d, poison.data(), poison.size()), 0);
    dst.push_back(d), src.push_back(staging.back()->ptr), bytes.push_back(real.size());
  }
  void add(void* d, const std::vector<int32_t>& ids) {
    std::vector<uint8_t> b(ids.size() * sizeof(int32_t));
    std::memcpy(b.data(), ids.data(), b.size());
    add(d, b);
  }
  int launch(void* stream) const {
    return causal_conv1d::gpu::launch_late_copy(dst.data(), src.data(), bytes.data(), int(dst.size()), 200000, stream);
  }
};

TEST(GpuLaunchOrder, ForwardWaitsForTheKernelBefore) {
  if (!cc_test::have_gpu()) GTEST_SKIP() << "no GPU visible";
  for (bool cl : {false, true})
    for (bool seq : {false, true}) {
      SCOPED_TRACE(std::string(cl ? "channel-last" : "channel-first") + (seq ? ", seq_idx" : ", states"));
      const Case c{DType::kFloat32, DType::kFloat32, 4, cl, true, true, !seq, seq, 1, 4096, 256};
      Problem cpu(c), gpu(c);
      ASSERT_EQ(causal_conv1d::cpu::launch_fwd(cpu.p, causal_conv1d::cpu::serial_for), 0);
      DeviceBuffer x(gpu.x.bytes.size()), w(gpu.w.bytes.size()), bias(gpu.bias.bytes.size()),
          init(gpu.init.bytes.size()), ids(gpu.seq.size() * sizeof(int32_t)), out(gpu.out.bytes),
          fin(gpu.final_states.bytes);
      causal_conv1d::FwdParams q = gpu.p;
      q.x = x.ptr, q.weight = w.ptr, q.bias = bias.ptr, q.out = out.ptr;
      LateInputs late;
      late.add(x.ptr, gpu.x.bytes), late.add(w.ptr, gpu.w.bytes), late.add(bias.ptr, gpu.bias.bytes);
      if (seq) late.add(ids.ptr, gpu.seq), q.seq_idx = static_cast<const int32_t*>(ids.ptr);
      if (!seq) late.add(init.ptr, gpu.init.bytes), q.initial_states = init.ptr, q.final_states = fin.ptr;
      int64_t bytes = 0;
      CC_GPU_OK(causal_conv1d::gpu::fwd_workspace_bytes(q, cc_test::device0(), &bytes));
      DeviceBuffer workspace(static_cast<size_t>(bytes));
      const causal_conv1d::DeviceDesc dev = cc_test::device0();
      ChainStream stream;
      CC_GPU_OK(late.launch(stream.s));
      CC_GPU_OK(causal_conv1d::gpu::launch_fwd(q, workspace.ptr, dev, stream.s));
      CC_GPU_OK(causal_conv1d::gpu::device_synchronize());
      gpu.out.bytes = out.to_host<uint8_t>();
      expect_close_buffers(gpu.out, cpu.out, cc_test::tolerance(c.xt), "out");
      if (!seq) {
        EXPECT_EQ(fin.to_host<uint8_t>(), cpu.final_states.bytes) << "final states";
      }
    }
}

TEST(GpuLaunchOrder, BackwardWaitsForTheKernelBefore) {
  if (!cc_test::have_gpu()) GTEST_SKIP() << "no GPU visible";
  for (const BwdVariant& v : bwd_variants()) {
    SCOPED_TRACE(v.name());
    const Case c = v.fp32_case();
    cc_test::BwdProblem cpu(c), gpu(c);
    ASSERT_EQ(causal_conv1d::cpu::launch_bwd(cpu.p, causal_conv1d::cpu::serial_for), 0);
    const cc_test::Problem& f = gpu.fwd;
    DeviceBuffer x(f.x.bytes.size()), w(f.w.bytes.size()), bias(f.bias.bytes.size()), dout(gpu.dout.bytes.size()),
        dx(gpu.dx.bytes), ids(f.seq.size() * sizeof(int32_t)), init(f.init.bytes.size()), dinit(gpu.dinit.bytes),
        dfinal(gpu.dfinal.bytes.size()), dweight(gpu.dweight), dbias(gpu.dbias);
    causal_conv1d::BwdParams q = gpu.p;
    q.f.x = x.ptr, q.f.weight = w.ptr, q.f.bias = bias.ptr, q.dout = dout.ptr, q.dx = dx.ptr;
    q.dweight = static_cast<float*>(dweight.ptr), q.dbias = static_cast<float*>(dbias.ptr);
    q.deterministic = v.det;
    LateInputs late;
    late.add(x.ptr, f.x.bytes), late.add(w.ptr, f.w.bytes), late.add(bias.ptr, f.bias.bytes);
    late.add(dout.ptr, gpu.dout.bytes);
    if (v.seq) late.add(ids.ptr, f.seq), q.f.seq_idx = static_cast<const int32_t*>(ids.ptr);
    if (v.states) {
      late.add(init.ptr, f.init.bytes), late.add(dfinal.ptr, gpu.dfinal.bytes);
      q.f.initial_states = init.ptr, q.dinitial_states = dinit.ptr, q.dfinal_states = dfinal.ptr;
    }
    int64_t elems = 0;
    CC_GPU_OK(causal_conv1d::gpu::bwd_workspace_elems(q, cc_test::device0(), &elems));
    DeviceBuffer workspace(size_t(elems) * sizeof(float));
    q.workspace = static_cast<float*>(workspace.ptr);
    const causal_conv1d::DeviceDesc dev = cc_test::device0();
    ChainStream stream;
    CC_GPU_OK(late.launch(stream.s));
    CC_GPU_OK(causal_conv1d::gpu::launch_bwd(q, dev, stream.s));
    CC_GPU_OK(causal_conv1d::gpu::device_synchronize());
    const double tol = cc_test::tolerance(c.xt) + cc_test::tolerance(c.wt);
    gpu.dx.bytes = dx.to_host<uint8_t>();
    expect_close_buffers(gpu.dx, cpu.dx, tol, "dx");
    if (v.states) {
      gpu.dinit.bytes = dinit.to_host<uint8_t>();
      expect_close_buffers(gpu.dinit, cpu.dinit, tol, "dinitial_states");
    }
    // (Counted, not asserted: every variant runs.)
    double scale = 1.0;
    for (float e : cpu.dweight) scale = std::max(scale, double(std::fabs(e)));
    auto off = [&](const std::vector<float>& got, const std::vector<float>& want) {
      size_t bad = 0;
      for (size_t i = 0; i < got.size(); ++i) bad += !(std::fabs(got[i] - want[i]) <= tol * scale);
      return bad;
    };
    EXPECT_EQ(off(dweight.to_host<float>(), cpu.dweight), 0u) << "dweight elements off";
    EXPECT_EQ(off(dbias.to_host<float>(), cpu.dbias), 0u) << "dbias elements off";
  }
}

TEST(GpuLaunchOrder, UpdateWaitsForTheKernelBefore) {
  if (!cc_test::have_gpu()) GTEST_SKIP() << "no GPU visible";
  for (const UpdateCase& c :
       std::vector<UpdateCase>{{DType::kBFloat16, DType::kBFloat16, 4, 16, 1024, 1, 3, false, false, true},
                               {DType::kFloat16, DType::kFloat16, 4, 300, 512, 1, 4, false, true, true},
                               {DType::kBFloat16, DType::kFloat32, 4, 5, 100, 1, 5, false, false, true},
                               {DType::kBFloat16, DType::kFloat32, 4, 3, 41, 5, 4, true, false, false}}) {
    SCOPED_TRACE(cc_test::update_case_name({c, 0}));
    UpdateProblem cpu(c), gpu(c);
    ASSERT_EQ(causal_conv1d::cpu::launch_update(cpu.p, causal_conv1d::cpu::serial_for), 0);
    DeviceBuffer x(gpu.x.bytes.size()), w(gpu.w.bytes.size()), bias(gpu.bias.bytes.size()),
        state(gpu.state.bytes.size()), out(gpu.out.bytes), idx(gpu.indices.size() * sizeof(int32_t)),
        seqlens(gpu.cache_seqlens.size() * sizeof(int32_t));
    causal_conv1d::UpdateParams q = gpu.p;
    q.x = x.ptr, q.weight = w.ptr, q.bias = bias.ptr, q.conv_state = state.ptr, q.out = out.ptr;
    LateInputs late;
    late.add(x.ptr, gpu.x.bytes), late.add(w.ptr, gpu.w.bytes), late.add(bias.ptr, gpu.bias.bytes);
    late.add(state.ptr, gpu.state.bytes);
    if (q.cache_seqlens)
      late.add(seqlens.ptr, gpu.cache_seqlens), q.cache_seqlens = static_cast<const int32_t*>(seqlens.ptr);
    if (q.conv_state_indices)
      late.add(idx.ptr, gpu.indices), q.conv_state_indices = static_cast<const int32_t*>(idx.ptr);
    const causal_conv1d::DeviceDesc dev = cc_test::device0();
    ChainStream stream;
    CC_GPU_OK(late.launch(stream.s));
    CC_GPU_OK(causal_conv1d::gpu::launch_update(q, dev, stream.s));
    CC_GPU_OK(causal_conv1d::gpu::device_synchronize());
    gpu.out.bytes = out.to_host<uint8_t>();
    expect_close_buffers(gpu.out, cpu.out, cc_test::tolerance(c.xt), "out");
    EXPECT_EQ(state.to_host<uint8_t>(), cpu.state.bytes) << "conv_state";
  }
}

TEST(GpuChained, ForwardReadsThePreviousOutput) {
  if (!cc_test::have_gpu()) GTEST_SKIP() << "no GPU visible";
  // (1, 4096, 256): NVIDIA's re-balanced and short-strip grids; seq_idx: the mask kernel before each.
  for (bool cl : {false, true})
    for (bool seq : {false, true}) {
      SCOPED_TRACE(std::string(cl ? "channel-last" : "channel-first") + (seq ? ", seq_idx" : ""));
      const Case c{DType::kFloat32, DType::kFloat32, 4, cl, true, true, false, seq, 1, 4096, 256};
      Problem cpu(c), gpu(c);
      Buffer ping = cpu.x, pong = cpu.out;
      causal_conv1d::FwdParams p = cpu.p;
      for (int k = 0; k < kChain; ++k) {  // ping -> pong -> ping ...
        p.x = (k % 2 ? pong : ping).data(), p.out = (k % 2 ? ping : pong).data();
        ASSERT_EQ(causal_conv1d::cpu::launch_fwd(p, causal_conv1d::cpu::serial_for), 0);
      }
      DeviceBuffer d_ping(gpu.x.bytes), d_pong(gpu.out.bytes), w(gpu.w.bytes), bias(gpu.bias.bytes), ids(gpu.seq);
      causal_conv1d::FwdParams q = gpu.p;
      q.weight = w.ptr, q.bias = bias.ptr;
      if (seq) q.seq_idx = static_cast<const int32_t*>(ids.ptr);
      int64_t bytes = 0;
      CC_GPU_OK(causal_conv1d::gpu::fwd_workspace_bytes(q, cc_test::device0(), &bytes));
      DeviceBuffer workspace(static_cast<size_t>(bytes));
      ChainStream stream;
      for (int k = 0; k < kChain; ++k) {
        q.x = (k % 2 ? d_pong : d_ping).ptr, q.out = (k % 2 ? d_ping : d_pong).ptr;
        CC_GPU_OK(causal_conv1d::gpu::launch_fwd(q, workspace.ptr, cc_test::device0(), stream.s));
      }
      CC_GPU_OK(causal_conv1d::gpu::device_synchronize());
      Buffer got = ping;
      got.bytes = d_ping.to_host<uint8_t>();  // kChain even: the last output is in ping
      expect_close_buffers(got, ping, kChain * cc_test::tolerance(c.xt), "out of the last forward");
    }
}

TEST(GpuChained, BackwardReadsThePreviousDx) {
  if (!cc_test::have_gpu()) GTEST_SKIP() << "no GPU visible";
  // dout of each backward the dx of the one before; dweight / dbias summed over the chain. The
  // channel-first walk lets the kernel after it start once it has waited (its states pass, or here
  // the next call's walk or mask kernel), and with seq_idx reads its data before it waits for the
  // mask kernel; the states pass reads x and dout before it waits for the walk; the deterministic
  // reduction reads the walk's partials.
  for (const BwdVariant& v : bwd_variants()) {
    SCOPED_TRACE(v.name());
    const Case c = v.fp32_case();
    cc_test::BwdProblem cpu(c), gpu(c);
    Buffer ping = cpu.dout, pong = cpu.dx;
    causal_conv1d::BwdParams p = cpu.p;
    for (int k = 0; k < kChain; ++k) {
      p.dout = (k % 2 ? pong : ping).data(), p.dx = (k % 2 ? ping : pong).data();
      ASSERT_EQ(causal_conv1d::cpu::launch_bwd(p, causal_conv1d::cpu::serial_for), 0);
    }
    const cc_test::Problem& f = gpu.fwd;
    DeviceBuffer x(f.x.bytes), w(f.w.bytes), bias(f.bias.bytes), d_ping(gpu.dout.bytes), d_pong(gpu.dx.bytes),
        dweight(gpu.dweight), dbias(gpu.dbias), ids(f.seq), init(f.init.bytes), dinit(gpu.dinit.bytes),
        dfinal(gpu.dfinal.bytes);
    causal_conv1d::BwdParams q = gpu.p;
    q.f.x = x.ptr, q.f.weight = w.ptr, q.f.bias = bias.ptr;
    if (v.seq) q.f.seq_idx = static_cast<const int32_t*>(ids.ptr);
    if (q.f.initial_states) q.f.initial_states = init.ptr;
    if (q.dinitial_states) q.dinitial_states = dinit.ptr;
    if (q.dfinal_states) q.dfinal_states = dfinal.ptr;
    q.dweight = static_cast<float*>(dweight.ptr), q.dbias = static_cast<float*>(dbias.ptr);
    q.deterministic = v.det;
    int64_t elems = 0;
    CC_GPU_OK(causal_conv1d::gpu::bwd_workspace_elems(q, cc_test::device0(), &elems));
    DeviceBuffer workspace(size_t(elems) * sizeof(float));
    q.workspace = static_cast<float*>(workspace.ptr);
    ChainStream stream;
    for (int k = 0; k < kChain; ++k) {
      q.dout = (k % 2 ? d_pong : d_ping).ptr, q.dx = (k % 2 ? d_ping : d_pong).ptr;
      CC_GPU_OK(causal_conv1d::gpu::launch_bwd(q, cc_test::device0(), stream.s));
    }
    CC_GPU_OK(causal_conv1d::gpu::device_synchronize());
    const double tol = kChain * cc_test::tolerance(c.xt);
    Buffer got = ping;
    got.bytes = d_ping.to_host<uint8_t>();
    expect_close_buffers(got, ping, tol, "dx of the last backward");
    if (v.states) {
      Buffer got_dinit = cpu.dinit;
      got_dinit.bytes = dinit.to_host<uint8_t>();
      expect_close_buffers(got_dinit, cpu.dinit, tol, "dinitial_states of the last backward");
    }
    const std::vector<float> dw = dweight.to_host<float>(), db = dbias.to_host<float>();
    double scale = 1.0;
    for (float e : cpu.dweight) scale = std::max(scale, double(std::fabs(e)));
    for (size_t i = 0; i < dw.size(); ++i) ASSERT_NEAR(dw[i], cpu.dweight[i], tol * scale) << "dweight[" << i << "]";
    for (size_t i = 0; i < db.size(); ++i) ASSERT_NEAR(db[i], cpu.dbias[i], tol * scale) << "dbias[" << i << "]";
  }
}

TEST(GpuChained, UpdatesReadTheStateThePreviousOneWrote) {
  if (!cc_test::have_gpu()) GTEST_SKIP() << "no GPU visible";
  // Decode steps on one conv_state, each with its own token and output: one row a thread (batch
  // 16) and the rows' loop (batch 300), 16-bit (the 8-byte kernels from batch 64 on NVIDIA) and
  // fp32; a longer state (the general kernel's single-token path).
  constexpr int kSteps = 8;
  for (const UpdateCase& c :
       std::vector<UpdateCase>{{DType::kBFloat16, DType::kBFloat16, 4, 16, 1024, 1, 3, false, false, true},
                               {DType::kFloat16, DType::kFloat16, 4, 300, 512, 1, 4, false, true, true},
                               {DType::kFloat32, DType::kFloat32, 3, 64, 256, 1, 2, false, false, false},
                               {DType::kBFloat16, DType::kFloat32, 4, 5, 100, 1, 5, false, false, true}}) {
    SCOPED_TRACE(cc_test::update_case_name({c, 0}));
    UpdateProblem cpu(c), gpu(c);
    std::vector<Buffer> xs, outs_cpu;
    causal_conv1d::UpdateParams p = cpu.p;
    for (int k = 0; k < kSteps; ++k) {
      xs.push_back(cc_test::random_buffer(c.xt, cpu.x.size(), 100 + k));
      outs_cpu.push_back(cpu.out);
      p.x = xs[k].data(), p.out = outs_cpu[k].data();
      ASSERT_EQ(causal_conv1d::cpu::launch_update(p, causal_conv1d::cpu::serial_for), 0);
    }
    DeviceBuffer w(gpu.w.bytes), bias(gpu.bias.bytes), state(gpu.state.bytes), idx(gpu.indices);
    std::vector<std::unique_ptr<DeviceBuffer>> d_xs, d_outs;
    causal_conv1d::UpdateParams q = gpu.p;
    q.weight = w.ptr, q.bias = bias.ptr, q.conv_state = state.ptr;
    if (q.conv_state_indices) q.conv_state_indices = static_cast<const int32_t*>(idx.ptr);
    for (int k = 0; k < kSteps; ++k) {
      d_xs.push_back(std::make_unique<DeviceBuffer>(xs[k].bytes));
      d_outs.push_back(std::make_unique<DeviceBuffer>(gpu.out.bytes));
    }
    ChainStream stream;
    for (int k = 0; k < kSteps; ++k) {
      q.x = d_xs[k]->ptr, q.out = d_outs[k]->ptr;
      CC_GPU_OK(causal_conv1d::gpu::launch_update(q, cc_test::device0(), stream.s));
    }
    CC_GPU_OK(causal_conv1d::gpu::device_synchronize());
    for (int k = 0; k < kSteps; ++k) {
      Buffer got = outs_cpu[k];
      got.bytes = d_outs[k]->to_host<uint8_t>();
      expect_close_buffers(got, outs_cpu[k], cc_test::tolerance(c.xt), ("out of step " + std::to_string(k)).c_str());
    }
    EXPECT_EQ(state.to_host<uint8_t>(), cpu.state.bytes) << "conv_state after the steps";
  }
}

}  // namespace

namespace {

// Every GPU launcher checks the width and both dtypes at its entry (check_width_and_dtypes), so a
// hand-filled params struct with a value outside the enum is an error status, not fp32 weights
// (with_dtype's last case) or a 2-byte element size. Every pointer is null: the launchers must
// return before touching one or the device, so this runs without a GPU too.
TEST(GpuEntryChecks, UnknownDTypeOrWidthIsRejectedBeforeAnyWork) {
  namespace gpu = causal_conv1d::gpu;
  using causal_conv1d::kErrUnsupportedDType;
  using causal_conv1d::kErrUnsupportedWidth;
  const causal_conv1d::DeviceDesc dev;
  const DType kUnknown[] = {static_cast<DType>(3), static_cast<DType>(-1)};
  auto fwd_params = [] {
    causal_conv1d::FwdParams f;
    f.batch = 2, f.dim = 8, f.seqlen = 16, f.width = 4;
    return f;
  };
  for (DType t : kUnknown)
    for (bool weight : {false, true}) {
      SCOPED_TRACE(std::string(weight ? "weight" : "x") + " dtype " + std::to_string(static_cast<int>(t)));
      causal_conv1d::FwdParams f = fwd_params();
      (weight ? f.w_dtype : f.x_dtype) = t;
      int64_t bytes = -1;
      EXPECT_EQ(gpu::fwd_workspace_bytes(f, dev, &bytes), kErrUnsupportedDType);
      EXPECT_EQ(bytes, 0);
      EXPECT_EQ(gpu::launch_fwd(f, nullptr, dev, nullptr), kErrUnsupportedDType);
      causal_conv1d::BwdParams b;
      b.f = f;
      int64_t elems = -1;
      EXPECT_EQ(gpu::bwd_workspace_elems(b, dev, &elems), kErrUnsupportedDType);
      EXPECT_EQ(elems, 0);
      EXPECT_EQ(gpu::launch_bwd(b, dev, nullptr), kErrUnsupportedDType);
      causal_conv1d::UpdateParams u;
      u.batch = 2, u.dim = 8, u.seqlen = 1, u.state_len = 3, u.num_cache_lines = 2, u.width = 4;
      (weight ? u.w_dtype : u.x_dtype) = t;
      EXPECT_EQ(gpu::launch_update(u, dev, nullptr), kErrUnsupportedDType);
      causal_conv1d::ServingFwdParams sf;
      sf.dim = 8, sf.total_tokens = 4, sf.batch = 1, sf.width = 4;
      (weight ? sf.w_dtype : sf.x_dtype) = t;
      EXPECT_EQ(gpu::launch_serving_fwd(sf, nullptr, dev, nullptr), kErrUnsupportedDType);
      causal_conv1d::ServingUpdateParams su;
      su.batch = 1, su.dim = 8, su.seqlen = 1, su.width = 4;
      (weight ? su.w_dtype : su.x_dtype) = t;
      EXPECT_EQ(gpu::launch_serving_update(su, dev, nullptr), kErrUnsupportedDType);
      if (!weight) {
        causal_conv1d::VarlenStatesParams v;
        v.batch = 1, v.dim = 8, v.state_len = 3, v.total_tokens = 4, v.dtype = t;
        EXPECT_EQ(gpu::launch_varlen_states(v, dev, nullptr), kErrUnsupportedDType);
      }
    }
  for (int width : {1, 5}) {
    SCOPED_TRACE("width " + std::to_string(width));
    causal_conv1d::FwdParams f = fwd_params();
    f.width = width;
    int64_t bytes = -1;
    EXPECT_EQ(gpu::fwd_workspace_bytes(f, dev, &bytes), kErrUnsupportedWidth);
    EXPECT_EQ(gpu::launch_fwd(f, nullptr, dev, nullptr), kErrUnsupportedWidth);
    causal_conv1d::BwdParams b;
    b.f = f;
    int64_t elems = -1;
    EXPECT_EQ(gpu::bwd_workspace_elems(b, dev, &elems), kErrUnsupportedWidth);
    EXPECT_EQ(gpu::launch_bwd(b, dev, nullptr), kErrUnsupportedWidth);
    causal_conv1d::UpdateParams u;
    u.batch = 2, u.dim = 8, u.seqlen = 1, u.state_len = 3, u.num_cache_lines = 2, u.width = width;
    EXPECT_EQ(gpu::launch_update(u, dev, nullptr), kErrUnsupportedWidth);
  }
}

// The channel-first forward with seq_idx needs its mask workspace: a batch row of seq_mask_row
// bytes (seqlen + 8 rounded up to 16), and without one (or a misaligned one) the launcher refuses
// before any work. Channel-last needs none. Null pointers only: no GPU needed.
// The launch-order tests' late copy rejects more buffers than it holds and a negative wait before
// it launches anything (a negative spin would have run as a near-endless one).
TEST(GpuEntryChecks, LateCopyRejectsBadArguments) {
  namespace gpu = causal_conv1d::gpu;
  void* dst[gpu::kLateCopyBuffers + 1] = {};
  const void* src[gpu::kLateCopyBuffers + 1] = {};
  size_t bytes[gpu::kLateCopyBuffers + 1] = {};
  EXPECT_EQ(gpu::launch_late_copy(dst, src, bytes, gpu::kLateCopyBuffers + 1, 0, nullptr),
            causal_conv1d::kErrInvalidParams);
  EXPECT_EQ(gpu::launch_late_copy(dst, src, bytes, -1, 0, nullptr), causal_conv1d::kErrInvalidParams);
  EXPECT_EQ(gpu::launch_late_copy(dst, src, bytes, 1, -1, nullptr), causal_conv1d::kErrInvalidParams);
}

TEST(GpuEntryChecks, ForwardSeqIdxWorkspace) {
  namespace gpu = causal_conv1d::gpu;
  const causal_conv1d::DeviceDesc dev;
  causal_conv1d::FwdParams f;
  f.batch = 3, f.dim = 8, f.seqlen = 100, f.width = 4;
  int64_t bytes = -1;
  ASSERT_EQ(gpu::fwd_workspace_bytes(f, dev, &bytes), 0);
  EXPECT_EQ(bytes, 0) << "no seq_idx";
  static const int32_t kIds[1] = {};
  f.seq_idx = kIds;  // never read: the launcher returns first
  ASSERT_EQ(gpu::fwd_workspace_bytes(f, dev, &bytes), 0);
  EXPECT_EQ(bytes, 3 * 112);
  EXPECT_EQ(gpu::launch_fwd(f, nullptr, dev, nullptr), causal_conv1d::kErrInvalidParams);
  alignas(16) static uint8_t host[32];
  EXPECT_EQ(gpu::launch_fwd(f, host + 4, dev, nullptr), causal_conv1d::kErrInvalidParams) << "misaligned workspace";
  f.channel_last = true;
  ASSERT_EQ(gpu::fwd_workspace_bytes(f, dev, &bytes), 0);
  EXPECT_EQ(bytes, 0) << "channel-last reads the ids";
}

// The channel-last backward's grid, seen through the deterministic workspace (a partial slot per
// batch row and time block: slots x dim x (width + 1) floats). With NVIDIA's tuning row on 132
// SMs, (1, 4096, 256) bf16 shortens its ranges to the 8-step floor (64 channel blocks); the wide
// grid (8 warps a block) is then re-balanced to at most 3 blocks an SM: 6 time blocks of 6-step
// ranges (4 blocks at the floor). A row of 1024 steps stops shortening at 16-step ranges, above
// the floor, and keeps them (8 time blocks of wide blocks).
// The backward's partial slots for dense (B, D, L) tensors at width 4 under NVIDIA's tuning row
// on 132 SMs, from the deterministic workspace (slots x D x (width + 1) floats). Null pointers, no
// launch: no GPU needed. l_stride: the time stride of x, dout and dx (0: dense); dx_l_stride: dx's
// alone (0: as the others); dout_batch_stride: dout's batch stride (0: dense).
int64_t nvidia_bwd_slots(DType t, bool channel_last, int64_t B, int64_t D, int64_t L, int64_t l_stride = 0,
                         int64_t dx_l_stride = 0, int64_t dout_batch_stride = 0) {
  causal_conv1d::DeviceDesc dev;
  dev.family = causal_conv1d::ArchFamily::kNvidia, dev.cu_count = 132, dev.wave_size = 32;
  causal_conv1d::BwdParams b;
  b.f.batch = B, b.f.dim = D, b.f.seqlen = L, b.f.width = 4, b.f.channel_last = channel_last;
  b.f.x_dtype = b.f.w_dtype = t;
  b.f.x_batch_stride = b.dout_batch_stride = b.dx_batch_stride = D * L;
  b.f.x_l_stride = b.dout_l_stride = b.dx_l_stride = l_stride > 0 ? l_stride : channel_last ? D : 1;
  if (dx_l_stride > 0) b.dx_l_stride = dx_l_stride;
  if (dout_batch_stride > 0) b.dout_batch_stride = dout_batch_stride;
  b.f.x_c_stride = b.dout_c_stride = b.dx_c_stride = channel_last ? 1 : L;
  b.deterministic = true;
  int64_t elems = -1;
  EXPECT_EQ(causal_conv1d::gpu::bwd_workspace_elems(b, dev, &elems), 0);
  return elems / (D * 5);
}

// The re-balanced kernels index x, dout and dx in 32 bits, so a grid whose offsets would not fit
// there stays at the floor: time stride 2^23 ((256 + 8) rows of it pass 2^31) in any of the three,
// or a second batch row 2^31 - 2^20 elements on (its offset plus a row's (256 + 8) x 4096 pass the
// bound, offsets_fit_int32).
TEST(GpuEntryChecks, ChannelLastBackwardSmallGridIsRebalanced) {
  auto slots = [](int64_t B, int64_t seqlen, int64_t l_stride = 0, int64_t dx_l_stride = 0, int64_t dout_bs = 0) {
    return nvidia_bwd_slots(DType::kBFloat16, true, B, 4096, seqlen, l_stride, dx_l_stride, dout_bs);
  };
  EXPECT_EQ(slots(1, 256), 6);
  EXPECT_EQ(slots(1, 1024), 8);
  EXPECT_EQ(slots(1, 256, int64_t(1) << 22), 6);
  EXPECT_EQ(slots(1, 256, int64_t(1) << 23), 4);
  EXPECT_EQ(slots(1, 256, 0, int64_t(1) << 23), 4);
  EXPECT_EQ(slots(2, 256), 6);
  EXPECT_EQ(slots(2, 256, 0, 0, int64_t(1) << 30), 6);
  EXPECT_EQ(slots(2, 256, 0, 0, (int64_t(1) << 31) - (int64_t(1) << 20)), 8);
}

// fp32 x takes its own strip and range lengths from NVIDIA's tuning row (max_iters_fp32 12 against
// 24, max_steps_fp32 64 against 128), and the deterministic workspace follows them: (8, 4096, 4096)
// channel-first is 1 strip a row of 16 warp iterations in bf16, 3 of 11 in fp32 (4 elements a
// vector); channel-last 8 time blocks of 4 warps x 128 steps in bf16, 16 of 4 x 64 in fp32.
TEST(GpuEntryChecks, BackwardFp32TakesItsOwnStripsAndRanges) {
  auto slots = [](DType t, bool channel_last) { return nvidia_bwd_slots(t, channel_last, 8, 4096, 4096); };
  EXPECT_EQ(slots(DType::kBFloat16, false), 8);
  EXPECT_EQ(slots(DType::kFloat32, false), 24);
  EXPECT_EQ(slots(DType::kBFloat16, true), 64);
  EXPECT_EQ(slots(DType::kFloat32, true), 128);
}

// The channel-first forward's strips under NVIDIA's tuning row on dense rows at width 4 (no
// launch). CUDA builds interleave: up to 4 warps a strip while each keeps 8 iterations, and
// interleaved strips at that floor prefetch 4 iterations past the ring instead of 2. HIP builds
// compile no interleaved kernel (warp strips of at most 24 iterations, 2 ahead), nor do kernels
// with seq_idx or with out in another vector phase than x.
TEST(GpuEntryChecks, ForwardStripsAndPrefetchDistance) {
  namespace gpu = causal_conv1d::gpu;
  causal_conv1d::DeviceDesc dev;
  dev.family = causal_conv1d::ArchFamily::kNvidia, dev.cu_count = 132, dev.wave_size = 32;
  auto strips = [&](DType t, int64_t B, int64_t D, int64_t L, bool seq_idx = false, bool out_shifted = false) {
    causal_conv1d::FwdParams f;
    f.batch = B, f.dim = D, f.seqlen = L, f.width = 4, f.x_dtype = f.w_dtype = t;
    f.x_batch_stride = f.out_batch_stride = D * L;
    f.x_c_stride = f.out_c_stride = L;
    f.x_l_stride = f.out_l_stride = 1;
    static const int32_t kIds[1] = {};
    if (seq_idx) f.seq_idx = kIds;  // never read
    // One element past a 16-byte boundary: out's vectors in another phase than x's.
    if (out_shifted) f.out = reinterpret_cast<void*>(uintptr_t(256 + causal_conv1d::dtype_size(t)));
    gpu::FwdCfStrips st{};
    EXPECT_EQ(gpu::fwd_channel_first_strips(f, dev, &st), 0);
    return std::vector<int64_t>{st.warps_per_strip, st.iters, st.strips_per_row, st.l2_ahead};
  };
  using V = std::vector<int64_t>;
  constexpr bool kCuda = CAUSAL_CONV1D_BACKEND_CUDA;
  // {warps a strip, iterations a strip, strips a row, iterations prefetched past the ring}
  EXPECT_EQ(strips(DType::kFloat32, 8, 4096, 4096), kCuda ? V({4, 8, 1, 4}) : V({1, 16, 2, 2}));
  EXPECT_EQ(strips(DType::kFloat32, 16, 2048, 2048), kCuda ? V({2, 8, 1, 4}) : V({1, 16, 1, 2}));
  EXPECT_EQ(strips(DType::kFloat32, 1, 8192, 16384), kCuda ? V({4, 16, 2, 2}) : V({1, 22, 6, 2}));
  // fp32 rows too short to interleave: strips of 4 iterations at most (NVIDIA's short_iters_fp32).
  EXPECT_EQ(strips(DType::kFloat32, 2, 8192, 1024), kCuda ? V({1, 4, 2, 2}) : V({1, 8, 1, 2}));
  EXPECT_EQ(strips(DType::kFloat32, 8, 2048, 1536), kCuda ? V({1, 4, 3, 2}) : V({1, 12, 1, 2}));
  EXPECT_EQ(strips(DType::kFloat32, 1, 8192, 512), V({1, 4, 1, 2}));
  EXPECT_EQ(strips(DType::kBFloat16, 16, 2048, 2048), V({1, 8, 1, 2}));
  EXPECT_EQ(strips(DType::kBFloat16, 8, 4096, 4096), kCuda ? V({2, 8, 1, 4}) : V({1, 16, 1, 2}));
  EXPECT_EQ(strips(DType::kBFloat16, 4, 5376, 8192), kCuda ? V({4, 8, 1, 4}) : V({1, 16, 2, 2}));
  EXPECT_EQ(strips(DType::kBFloat16, 1, 8192, 16384), kCuda ? V({4, 16, 1, 2}) : V({1, 22, 3, 2}));
  EXPECT_EQ(strips(DType::kBFloat16, 8, 4096, 4096, /*seq_idx=*/true), V({1, 16, 1, 2}));
  EXPECT_EQ(strips(DType::kBFloat16, 8, 4096, 4096, false, /*out_shifted=*/true), V({1, 16, 1, 2}));
}

}  // namespace
