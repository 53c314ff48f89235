// The serving API's GPU launchers against its CPU backend, through the same params structs: a
// prefill batch (mixed lengths, padding, initial states, prefix caching, a channel-contiguous x and
// cache as vLLM lays them out) and decode steps (plain, varlen, speculative). Outputs to the
// dtype's tolerance, caches bit for bit. Skips without a GPU; run under compute-sanitizer by
// scripts/gpu_check.sh sanitize.
#include <cmath>
#include <vector>

#include "causal_conv1d/cpu.h"
#include "causal_conv1d/gpu.h"
#include "causal_conv1d/serving.h"
#include "test_util.h"

namespace {

using causal_conv1d::DeviceDesc;
using causal_conv1d::DType;
using causal_conv1d::ServingFwdParams;
using causal_conv1d::ServingUpdateParams;
using cc_test::Buffer;
using cc_test::DeviceBuffer;

constexpr int64_t kDim = 200, kLines = 9, kStateLen = 5;

void expect_close(const Buffer& got, const Buffer& want, DType t, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  const double tol = cc_test::tolerance(t);
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got.get(i), want.get(i), tol * (1.0 + std::fabs(want.get(i)))) << what << "[" << i << "]";
}

DeviceBuffer device_copy(const Buffer& b) { return DeviceBuffer(b.bytes); }

struct ServingCase {
  DType t;
  int width;
  bool prefix_caching;
};

class GpuServingFwd : public ::testing::TestWithParam<ServingCase> {};

TEST_P(GpuServingFwd, MatchesCpu) {
  if (!cc_test::have_gpu()) GTEST_SKIP() << "no GPU visible";
  const ServingCase sc = GetParam();
  // Sequences: 70 tokens (crosses chunks and, with prefix caching, two block boundaries), 1, 2
  // (shorter than width - 1), 9 (padding: line -1), 30.
  const std::vector<int32_t> qsl = {0, 70, 71, 73, 82, 112};
  const int64_t batch = 5, tokens = 112;
  // cache_indices (batch, 4): a block table with prefix caching, column 0 otherwise.
  const std::vector<int32_t> table = {3, 4, 5, 6, 2, 0, 0, 0, 7, 0, 0, 0, -1, 0, 0, 0, 8, 1, 0, 0};
  const std::vector<int32_t> first = {0, 0, 0, 0, 0}, last = {2, 0, 0, 0, 1}, init_idx = {0, 0, 0, 0, 0},
                             computed = {0, 0, 0, 0, 16};
  const std::vector<uint8_t> his = {0, 1, 1, 1, 1};

  Buffer x = cc_test::random_buffer(sc.t, tokens * kDim, 1);  // (tokens, dim): x_c_stride 1
  Buffer w = cc_test::random_buffer(DType::kFloat32, kDim * sc.width, 2);
  Buffer bias = cc_test::random_buffer(DType::kFloat32, kDim, 3);
  Buffer cache = cc_test::random_buffer(sc.t, kLines * kStateLen * kDim, 4);  // (lines, state, dim)
  Buffer out_cpu(sc.t, tokens * kDim), out_gpu(sc.t, tokens * kDim), cache_cpu = cache, cache_gpu = cache;

  ServingFwdParams p;
  p.dim = kDim, p.total_tokens = tokens, p.batch = batch, p.num_cache_lines = kLines, p.state_len = kStateLen;
  p.width = sc.width, p.x_dtype = sc.t, p.w_dtype = DType::kFloat32, p.silu = true;
  p.x_c_stride = 1, p.x_l_stride = kDim, p.out_c_stride = 1, p.out_l_stride = kDim;
  p.weight_c_stride = sc.width, p.weight_w_stride = 1, p.bias_stride = 1;
  p.state_line_stride = kStateLen * kDim, p.state_c_stride = 1, p.state_l_stride = kDim;
  p.ci_seq_stride = 4, p.ci_block_stride = 1, p.ci_blocks = 4;
  p.his_stride = 1;
  p.prefix_caching = sc.prefix_caching;
  p.block_size = 32;
  p.padding.has_null_block = true;  // block 0 pads the table

  auto bind = [&](ServingFwdParams& q, const void* xp, const void* wp, const void* bp, void* op, void* cp,
                  const int32_t* qp, const int32_t* tp, const bool* hp, const int32_t* f, const int32_t* l,
                  const int32_t* ii, const int32_t* nc) {
    q.x = xp, q.weight = wp, q.bias = bp, q.out = op, q.conv_states = cp;
    q.query_start_loc = {qp, 1};
    q.cache_indices = tp, q.has_initial_state = hp;
    q.block_idx_first = {f, 1}, q.block_idx_last = {l, 1}, q.initial_state_idx = {ii, 1};
    q.num_computed_tokens = {nc, 1};
  };
  ServingFwdParams pc = p;
  bind(pc, x.data(), w.data(), bias.data(), out_cpu.data(), cache_cpu.data(), qsl.data(), table.data(),
       reinterpret_cast<const bool*>(his.data()), first.data(), last.data(), init_idx.data(), computed.data());
  ASSERT_EQ(causal_conv1d::cpu::launch_serving_fwd(pc, causal_conv1d::cpu::serial_for), 0);

  DeviceBuffer dx = device_copy(x), dw = device_copy(w), db = device_copy(bias), dout(out_gpu.bytes.size()),
               dcache = device_copy(cache), dq(qsl), dt(table), dh(his), df(first), dl(last), di(init_idx),
               dn(computed);
  ServingFwdParams pg = p;
  bind(pg, dx.ptr, dw.ptr, db.ptr, dout.ptr, dcache.ptr, static_cast<const int32_t*>(dq.ptr),
       static_cast<const int32_t*>(dt.ptr), static_cast<const bool*>(dh.ptr), static_cast<const int32_t*>(df.ptr),
       static_cast<const int32_t*>(dl.ptr), static_cast<const int32_t*>(di.ptr), static_cast<const int32_t*>(dn.ptr));
  int64_t elems = 0;
  CC_GPU_OK(causal_conv1d::gpu::serving_fwd_workspace_elems(pg, cc_test::device0(), &elems));
  DeviceBuffer ws(elems * sizeof(int32_t));
  CC_GPU_OK(causal_conv1d::gpu::launch_serving_fwd(pg, static_cast<int32_t*>(ws.ptr), cc_test::device0(), nullptr));
  CC_GPU_OK(causal_conv1d::gpu::device_synchronize());
  causal_conv1d::gpu::copy_to_host(out_gpu.data(), dout.ptr, out_gpu.bytes.size());
  causal_conv1d::gpu::copy_to_host(cache_gpu.data(), dcache.ptr, cache_gpu.bytes.size());
  expect_close(out_gpu, out_cpu, sc.t, "out");
  EXPECT_EQ(cache_gpu.bytes, cache_cpu.bytes) << "the cache holds copies of inputs: bit for bit";
}

INSTANTIATE_TEST_SUITE_P(Serving, GpuServingFwd,
                         ::testing::Values(ServingCase{DType::kFloat32, 4, false},
                                           ServingCase{DType::kBFloat16, 4, true},
                                           ServingCase{DType::kFloat16, 3, true},
                                           ServingCase{DType::kBFloat16, 2, false}));

// dim_cache: the cache keeps dim contiguous, as vLLM allocates it (the vector kernel; kDim is a
// multiple of its channel groups); otherwise state contiguous (the scalar kernel, or with
// short_state the vector kernel's state runs). tap_major: the weights laid out (width, dim) instead
// of (dim, width) (the vector kernel's element loads instead of its weight runs). bias: with a
// bias. short_state: state_len = width - 1 (no speculative decoding then: its windows need more).
struct ServingUpdateCase {
  DType t;
  int width;
  bool dim_cache;
  bool tap_major = false;
  bool bias = false;
  bool short_state = false;
};

class GpuServingUpdate : public ::testing::TestWithParam<ServingUpdateCase> {};

TEST_P(GpuServingUpdate, VarlenSpeculativeMatchesCpu) {
  if (!cc_test::have_gpu()) GTEST_SKIP() << "no GPU visible";
  const ServingUpdateCase sc = GetParam();
  // Rows of 2, 0, 3, 1 tokens (varlen); row 3 is padding (line 0, the null block).
  const std::vector<int32_t> qsl = {0, 2, 2, 5, 6}, lines = {4, 2, 7, 0}, accepted = {1, 2, 3, 1};
  const int64_t batch = 4, tokens = 7;  // one token of no row at the end
  const int64_t state_len = sc.short_state ? sc.width - 1 : kStateLen;
  Buffer x = cc_test::random_buffer(sc.t, tokens * kDim, 5);
  Buffer w = cc_test::random_buffer(sc.t, kDim * sc.width, 6);
  Buffer bias = cc_test::random_buffer(sc.t, kDim, 8);
  Buffer cache = cc_test::random_buffer(sc.t, kLines * kDim * state_len, 7);
  Buffer x_cpu = x, x_gpu = x, cache_cpu = cache, cache_gpu = cache;

  ServingUpdateParams p;
  p.batch = batch, p.dim = kDim, p.total_tokens = tokens, p.num_cache_lines = kLines, p.state_len = state_len;
  p.width = sc.width, p.x_dtype = sc.t, p.w_dtype = sc.t, p.silu = false;
  p.x_c_stride = 1, p.x_l_stride = kDim;
  p.weight_c_stride = sc.tap_major ? 1 : sc.width, p.weight_w_stride = sc.tap_major ? kDim : 1;
  p.bias_stride = 1;
  p.state_line_stride = kDim * state_len;
  p.state_c_stride = sc.dim_cache ? 1 : state_len, p.state_l_stride = sc.dim_cache ? kDim : 1;
  p.padding.has_null_block = true;
  ServingUpdateParams pc = p;
  pc.x = x_cpu.data(), pc.weight = w.data(), pc.conv_state = cache_cpu.data();
  pc.bias = sc.bias ? bias.data() : nullptr;
  pc.conv_state_indices = lines.data(), pc.csi_seq_stride = 1;
  if (!sc.short_state) pc.num_accepted_tokens = {accepted.data(), 1};
  pc.query_start_loc = {qsl.data(), 1};
  ASSERT_EQ(causal_conv1d::cpu::launch_serving_update(pc, causal_conv1d::cpu::serial_for), 0);

  // This small grid takes the decode's narrow vectors on any real GPU (fewer blocks than CUs);
  // a device described with one CU takes the wide ones.
  DeviceDesc one_cu = cc_test::device0();
  one_cu.cu_count = 1;
  for (const DeviceDesc& dev : {cc_test::device0(), one_cu}) {
    SCOPED_TRACE(dev.cu_count == 1 ? "wide vectors (one CU)" : "narrow vectors (this GPU)");
    DeviceBuffer dx = device_copy(x), dw = device_copy(w), db = device_copy(bias), dcache = device_copy(cache),
                 dl(lines), da(accepted), dq(qsl);
    ServingUpdateParams pg = p;
    pg.x = dx.ptr, pg.weight = dw.ptr, pg.conv_state = dcache.ptr;
    pg.bias = sc.bias ? db.ptr : nullptr;
    pg.conv_state_indices = static_cast<const int32_t*>(dl.ptr), pg.csi_seq_stride = 1;
    if (!sc.short_state) pg.num_accepted_tokens = {static_cast<const int32_t*>(da.ptr), 1};
    pg.query_start_loc = {static_cast<const int32_t*>(dq.ptr), 1};
    CC_GPU_OK(causal_conv1d::gpu::launch_serving_update(pg, dev, nullptr));
    CC_GPU_OK(causal_conv1d::gpu::device_synchronize());
    causal_conv1d::gpu::copy_to_host(x_gpu.data(), dx.ptr, x_gpu.bytes.size());
    causal_conv1d::gpu::copy_to_host(cache_gpu.data(), dcache.ptr, cache_gpu.bytes.size());
    expect_close(x_gpu, x_cpu, sc.t, "x (outputs)");
    EXPECT_EQ(cache_gpu.bytes, cache_cpu.bytes) << "the cache holds copies of inputs: bit for bit";
  }
}

// The plain decode step (one token a row, x (batch, dim), no varlen or speculation: the vector
// kernel's kOne instantiation on its layouts) with each form of cache line: conv_state_indices
// (batch,), column 0 of a (batch, 2) block table, and none (row i, line i). Rows whose line is the
// null block, negative, pad_slot_id, or past the cache (invalid: the GPU treats it as padding,
// which the CPU reference is given instead, as it rejects such lines) get zeros and leave the
// cache alone.
TEST_P(GpuServingUpdate, PlainDecodeMatchesCpu) {
  if (!cc_test::have_gpu()) GTEST_SKIP() << "no GPU visible";
  const ServingUpdateCase sc = GetParam();
  constexpr int64_t kBatch = 7, kPadSlot = 5;
  const int64_t state_len = sc.short_state ? sc.width - 1 : kStateLen;
  const std::vector<int32_t> gpu_lines = {4, 0, 7, -1, kLines + 3, int32_t(kPadSlot), 8};
  std::vector<int32_t> cpu_lines = gpu_lines;
  cpu_lines[4] = -1;
  Buffer x = cc_test::random_buffer(sc.t, kBatch * kDim, 25);
  Buffer w = cc_test::random_buffer(sc.t, kDim * sc.width, 26);
  Buffer bias = cc_test::random_buffer(sc.t, kDim, 28);
  Buffer cache = cc_test::random_buffer(sc.t, kLines * kDim * state_len, 27);

  ServingUpdateParams p;
  p.batch = kBatch, p.dim = kDim, p.seqlen = 1, p.num_cache_lines = kLines, p.state_len = state_len;
  p.width = sc.width, p.x_dtype = sc.t, p.w_dtype = sc.t, p.silu = true;
  p.x_batch_stride = kDim, p.x_c_stride = 1, p.x_l_stride = 1;
  p.weight_c_stride = sc.tap_major ? 1 : sc.width, p.weight_w_stride = sc.tap_major ? kDim : 1;
  p.bias_stride = 1;
  p.state_line_stride = kDim * state_len;
  p.state_c_stride = sc.dim_cache ? 1 : state_len, p.state_l_stride = sc.dim_cache ? kDim : 1;
  p.padding.has_null_block = true, p.padding.pad_slot_id = kPadSlot;
  DeviceDesc one_cu = cc_test::device0();
  one_cu.cu_count = 1;
  for (const int form : {0, 1, 2}) {  // indices (batch,), a (batch, 2) block table, no indices
    SCOPED_TRACE(form == 0 ? "conv_state_indices (batch,)" : form == 1 ? "block table column 0" : "no indices");
    // The block table's column 1 holds a valid line that must not be used.
    auto table = [&](const std::vector<int32_t>& lines) {
      if (form != 1) return lines;
      std::vector<int32_t> t;
      for (const int32_t l : lines) t.insert(t.end(), {l, 1});
      return t;
    };
    const std::vector<int32_t> cpu_table = table(cpu_lines), gpu_table = table(gpu_lines);
    ServingUpdateParams q = p;
    q.csi_seq_stride = form == 1 ? 2 : 1, q.csi_block_stride = 1, q.csi_blocks = form == 1 ? 2 : 1;
    Buffer x_cpu = x, cache_cpu = cache;
    ServingUpdateParams pc = q;
    pc.x = x_cpu.data(), pc.weight = w.data(), pc.conv_state = cache_cpu.data();
    pc.bias = sc.bias ? bias.data() : nullptr;
    pc.conv_state_indices = form == 2 ? nullptr : cpu_table.data();
    ASSERT_EQ(causal_conv1d::cpu::launch_serving_update(pc, causal_conv1d::cpu::serial_for), 0);
    for (const DeviceDesc& dev : {cc_test::device0(), one_cu}) {
      SCOPED_TRACE(dev.cu_count == 1 ? "wide vectors (one CU)" : "narrow vectors (this GPU)");
      DeviceBuffer dx = device_copy(x), dw = device_copy(w), db = device_copy(bias), dcache = device_copy(cache),
                   dl(gpu_table);
      ServingUpdateParams pg = q;
      pg.x = dx.ptr, pg.weight = dw.ptr, pg.conv_state = dcache.ptr;
      pg.bias = sc.bias ? db.ptr : nullptr;
      pg.conv_state_indices = form == 2 ? nullptr : static_cast<const int32_t*>(dl.ptr);
      CC_GPU_OK(causal_conv1d::gpu::launch_serving_update(pg, dev, nullptr));
      CC_GPU_OK(causal_conv1d::gpu::device_synchronize());
      Buffer x_gpu = x, cache_gpu = cache;
      causal_conv1d::gpu::copy_to_host(x_gpu.data(), dx.ptr, x_gpu.bytes.size());
      causal_conv1d::gpu::copy_to_host(cache_gpu.data(), dcache.ptr, cache_gpu.bytes.size());
      expect_close(x_gpu, x_cpu, sc.t, "x (outputs)");
      EXPECT_EQ(cache_gpu.bytes, cache_cpu.bytes) << "the cache holds copies of inputs: bit for bit";
    }
  }
}

// A plain decode step (one token a row, x (batch, dim)) of more rows than a grid column holds
// (65535 on every family): the vector kernel's rows continue in the grid's z dimension. Lines
// reversed through conv_state_indices, every 1000th row padding (pad_slot_id -1).
TEST(GpuServingUpdateRows, RowsPastTheGridMatchCpu) {
  if (!cc_test::have_gpu()) GTEST_SKIP() << "no GPU visible";
  constexpr int64_t kBatch = 65535 + 700, kD = 16, kW = 4;
  const DType t = DType::kBFloat16;
  std::vector<int32_t> lines(kBatch);
  for (int64_t i = 0; i < kBatch; ++i) lines[i] = i % 1000 == 7 ? -1 : int32_t(kBatch - 1 - i);
  Buffer x = cc_test::random_buffer(t, kBatch * kD, 15);
  Buffer w = cc_test::random_buffer(t, kD * kW, 16);
  Buffer bias = cc_test::random_buffer(t, kD, 17);
  Buffer cache = cc_test::random_buffer(t, kBatch * kD * (kW - 1), 18);
  Buffer x_cpu = x, x_gpu = x, cache_cpu = cache, cache_gpu = cache;
  ServingUpdateParams p;
  p.batch = kBatch, p.dim = kD, p.seqlen = 1, p.num_cache_lines = kBatch, p.state_len = kW - 1;
  p.width = kW, p.x_dtype = t, p.w_dtype = t, p.silu = true;
  p.x_batch_stride = kD, p.x_c_stride = 1, p.x_l_stride = kD;
  p.weight_c_stride = kW, p.weight_w_stride = 1, p.bias_stride = 1;
  p.state_line_stride = kD * (kW - 1), p.state_c_stride = 1, p.state_l_stride = kD;  // dim contiguous
  p.csi_seq_stride = 1;
  ServingUpdateParams pc = p;
  pc.x = x_cpu.data(), pc.weight = w.data(), pc.bias = bias.data(), pc.conv_state = cache_cpu.data();
  pc.conv_state_indices = lines.data();
  ASSERT_EQ(causal_conv1d::cpu::launch_serving_update(pc, causal_conv1d::cpu::serial_for), 0);
  DeviceBuffer dx = device_copy(x), dw = device_copy(w), db = device_copy(bias), dcache = device_copy(cache), dl(lines);
  ServingUpdateParams pg = p;
  pg.x = dx.ptr, pg.weight = dw.ptr, pg.bias = db.ptr, pg.conv_state = dcache.ptr;
  pg.conv_state_indices = static_cast<const int32_t*>(dl.ptr);
  CC_GPU_OK(causal_conv1d::gpu::launch_serving_update(pg, cc_test::device0(), nullptr));
  CC_GPU_OK(causal_conv1d::gpu::device_synchronize());
  causal_conv1d::gpu::copy_to_host(x_gpu.data(), dx.ptr, x_gpu.bytes.size());
  causal_conv1d::gpu::copy_to_host(cache_gpu.data(), dcache.ptr, cache_gpu.bytes.size());
  expect_close(x_gpu, x_cpu, t, "x (outputs)");
  EXPECT_EQ(cache_gpu.bytes, cache_cpu.bytes) << "the cache holds copies of inputs: bit for bit";
}

INSTANTIATE_TEST_SUITE_P(Serving, GpuServingUpdate,
                         ::testing::Values(ServingUpdateCase{DType::kFloat32, 4, false},
                                           ServingUpdateCase{DType::kBFloat16, 3, false, false, true},
                                           ServingUpdateCase{DType::kFloat16, 2, false, true, false},
                                           ServingUpdateCase{DType::kFloat32, 4, true, false, true},
                                           ServingUpdateCase{DType::kFloat32, 3, true, true, true},
                                           ServingUpdateCase{DType::kBFloat16, 3, true},
                                           ServingUpdateCase{DType::kBFloat16, 4, true, false, true},
                                           ServingUpdateCase{DType::kBFloat16, 4, true, true, false},
                                           ServingUpdateCase{DType::kFloat16, 2, true, false, true},
                                           ServingUpdateCase{DType::kFloat16, 3, true, true, true},
                                           // state_len = width - 1: state runs (state contiguous), and
                                           // the dim-contiguous vector kernel with a short line
                                           ServingUpdateCase{DType::kBFloat16, 4, false, false, true, true},
                                           ServingUpdateCase{DType::kFloat32, 3, false, true, false, true},
                                           ServingUpdateCase{DType::kFloat16, 2, false, false, true, true},
                                           ServingUpdateCase{DType::kBFloat16, 3, false, true, false, true},
                                           ServingUpdateCase{DType::kFloat32, 4, false, false, false, true},
                                           ServingUpdateCase{DType::kBFloat16, 3, true, false, true, true}));

}  // namespace
