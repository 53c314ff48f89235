// Standalone timing of the GPU launchers (launch_fwd, launch_bwd) without torch: what
// benchmarks/bench.py's small_graph measures, from a binary that scripts/kernel_timer.sh builds on
// a machine without a GPU (nvcc, no torch, no CMake torch query) and that runs on the GPU machine
// as it is, so a kernel experiment costs a device call of seconds instead of a package build.
//
//   kernel_timer fwd|bwd cf|cl bf16|fp16|fp32 BATCH DIM SEQLEN [REPS] [WIDTH]
//
// Width 4 by default, SiLU and a bias of x's dtype, weights of x's dtype (dense (dim, width) rows),
// float32 dweight / dbias (the backward adds into them), default (atomic) mode. Every call of a
// CUDA graph works on its own buffer set (at least 8 sets and 256 MB in all, as bench.py rotates),
// so no set is in L2 when its turn comes; the graph is replayed REPS times (default 20) back to back,
// each replay between two events, all queued before one synchronization (bench.py's time_calls),
// and the median time of one call printed with its effective bandwidth (bytes: x read and out
// written, or x and dout read and dx written). KERNEL_TIMER_PROFILE=1 adds one plain launch after
// the replays for a profiler to pick: with ncu, `--graph-profiling graph` (each replay one result)
// and `-k regex:NAME --launch-skip 3*SETS --launch-count 1` past the eager warm-up's launches, or
// `--launch-skip` past every node of the replays too under ncu's default (node) graph profiling.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "causal_conv1d/gpu.h"

namespace {

using causal_conv1d::BwdParams;
using causal_conv1d::DType;
using causal_conv1d::FwdParams;
namespace gpu = causal_conv1d::gpu;

[[noreturn]] void fail(const char* what, const char* detail) {
  std::fprintf(stderr, "kernel_timer: %s: %s\n", what, detail);
  std::exit(1);
}
void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail(what, cudaGetErrorString(e));
}
void check_launcher(int status, const char* what) {
  if (status != 0) fail(what, gpu::gpu_status_string(status));
}

// n values uniform in [-1, 1) as dtype t, on the device (host-generated: a set's worth, copied on
// the device for the other sets).
void* device_random(DType t, size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const size_t es = size_t(causal_conv1d::dtype_size(t));
  std::vector<uint8_t> host(n * es);
  for (size_t i = 0; i < n; ++i) {
    const float v = dist(gen);
    if (t == DType::kFloat32) {
      std::memcpy(&host[i * es], &v, es);
    } else if (t == DType::kFloat16) {
      const __half h = __float2half(v);
      std::memcpy(&host[i * es], &h, es);
    } else {
      const __nv_bfloat16 h = __float2bfloat16(v);
      std::memcpy(&host[i * es], &h, es);
    }
  }
  void* p = nullptr;
  check_cuda(cudaMalloc(&p, host.size()), "cudaMalloc");
  check_cuda(cudaMemcpy(p, host.data(), host.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  return p;
}

DType parse_dtype(const char* s) {
  if (!std::strcmp(s, "fp32")) return DType::kFloat32;
  if (!std::strcmp(s, "fp16")) return DType::kFloat16;
  if (!std::strcmp(s, "bf16")) return DType::kBFloat16;
  fail("dtype must be bf16, fp16 or fp32, got", s);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 7) {
    std::fprintf(stderr, "usage: kernel_timer fwd|bwd cf|cl bf16|fp16|fp32 BATCH DIM SEQLEN [REPS] [WIDTH]\n");
    return 2;
  }
  const bool bwd = !std::strcmp(argv[1], "bwd");
  if (!bwd && std::strcmp(argv[1], "fwd")) fail("op must be fwd or bwd, got", argv[1]);
  const bool cl = !std::strcmp(argv[2], "cl");
  if (!cl && std::strcmp(argv[2], "cf")) fail("layout must be cf or cl, got", argv[2]);
  const DType dt = parse_dtype(argv[3]);
  const int64_t batch = std::atoll(argv[4]), dim = std::atoll(argv[5]), seqlen = std::atoll(argv[6]);
  const int reps = argc > 7 ? std::atoi(argv[7]) : 20;
  const int width = argc > 8 ? std::atoi(argv[8]) : 4;
  if (batch < 1 || dim < 1 || seqlen < 1 || reps < 1) fail("sizes and REPS must be positive", "");
  if (width < causal_conv1d::kMinWidth || width > causal_conv1d::kMaxWidth) fail("WIDTH must be 2, 3 or 4", argv[8]);

  causal_conv1d::DeviceDesc dev;
  check_launcher(gpu::device_desc(0, &dev), "device_desc");
  const size_t n = size_t(batch * dim * seqlen), bytes = n * size_t(causal_conv1d::dtype_size(dt));
  const double moved = double(bwd ? 3 : 2) * double(bytes);
  const int sets = std::max(8, int((256e6 + moved - 1) / moved));

  void* weight = device_random(dt, size_t(dim * width), 1);
  void* bias = device_random(dt, size_t(dim), 2);
  float *dweight = nullptr, *dbias = nullptr;
  check_cuda(cudaMalloc(&dweight, size_t(dim * width) * sizeof(float)), "cudaMalloc");
  check_cuda(cudaMalloc(&dbias, size_t(dim) * sizeof(float)), "cudaMalloc");
  check_cuda(cudaMemset(dweight, 0, size_t(dim * width) * sizeof(float)), "cudaMemset");
  check_cuda(cudaMemset(dbias, 0, size_t(dim) * sizeof(float)), "cudaMemset");
  // (batch, dim, seqlen) tensors: channel-last ones are (batch, seqlen, dim) in memory.
  auto strides = [&](int64_t& bs, int64_t& cs, int64_t& ls) {
    bs = dim * seqlen, cs = cl ? 1 : seqlen, ls = cl ? dim : 1;
  };
  // One set of inputs generated, copied for the others.
  void* x0 = device_random(dt, n, 10);
  void* dout0 = bwd ? device_random(dt, n, 11) : nullptr;
  auto copy_of = [&](const void* src) {
    void* p = nullptr;
    check_cuda(cudaMalloc(&p, bytes), "cudaMalloc");
    check_cuda(cudaMemcpy(p, src, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy");
    return p;
  };
  std::vector<BwdParams> calls(static_cast<size_t>(sets));
  for (int i = 0; i < sets; ++i) {
    BwdParams& p = calls[size_t(i)];
    FwdParams& f = p.f;
    f.batch = batch, f.dim = dim, f.seqlen = seqlen, f.width = width;
    f.x_dtype = f.w_dtype = dt;
    f.silu = true, f.channel_last = cl;
    f.x = i == 0 ? x0 : copy_of(x0);
    strides(f.x_batch_stride, f.x_c_stride, f.x_l_stride);
    f.weight = weight, f.weight_c_stride = width, f.weight_w_stride = 1;
    f.bias = bias, f.bias_stride = 1;
    void* out = nullptr;
    check_cuda(cudaMalloc(&out, bytes), "cudaMalloc");
    if (bwd) {
      p.dout = i == 0 ? dout0 : copy_of(dout0);
      strides(p.dout_batch_stride, p.dout_c_stride, p.dout_l_stride);
      p.dx = out;
      strides(p.dx_batch_stride, p.dx_c_stride, p.dx_l_stride);
      p.dweight = dweight, p.dweight_c_stride = width, p.dweight_w_stride = 1;
      p.dbias = dbias, p.dbias_stride = 1;
    } else {
      f.out = out;
      strides(f.out_batch_stride, f.out_c_stride, f.out_l_stride);
    }
  }
  cudaStream_t stream;
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  auto launch = [&](const BwdParams& p) {
    // (No workspace: no seq_idx, default mode.)
    check_launcher(bwd ? gpu::launch_bwd(p, dev, stream) : gpu::launch_fwd(p.f, nullptr, dev, stream), "launch");
  };
  for (int r = 0; r < 3; ++r)
    for (const BwdParams& p : calls) launch(p);
  check_cuda(cudaStreamSynchronize(stream), "warm-up");

  cudaGraph_t graph;
  cudaGraphExec_t exec;
  check_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "capture");
  for (const BwdParams& p : calls) launch(p);
  check_cuda(cudaStreamEndCapture(stream, &graph), "capture");
  check_cuda(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  for (int r = 0; r < 3; ++r) check_cuda(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
  check_cuda(cudaStreamSynchronize(stream), "graph warm-up");
  std::vector<cudaEvent_t> starts(static_cast<size_t>(reps)), ends(static_cast<size_t>(reps));
  for (int r = 0; r < reps; ++r) {
    check_cuda(cudaEventCreate(&starts[size_t(r)]), "cudaEventCreate");
    check_cuda(cudaEventCreate(&ends[size_t(r)]), "cudaEventCreate");
  }
  for (int r = 0; r < reps; ++r) {
    check_cuda(cudaEventRecord(starts[size_t(r)], stream), "cudaEventRecord");
    check_cuda(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
    check_cuda(cudaEventRecord(ends[size_t(r)], stream), "cudaEventRecord");
  }
  check_cuda(cudaStreamSynchronize(stream), "replays");
  std::vector<double> us;
  for (int r = 0; r < reps; ++r) {
    float ms = 0.0f;
    check_cuda(cudaEventElapsedTime(&ms, starts[size_t(r)], ends[size_t(r)]), "cudaEventElapsedTime");
    us.push_back(double(ms) * 1e3 / sets);
  }
  std::sort(us.begin(), us.end());
  const size_t mid = us.size() / 2;
  const double median = us.size() % 2 ? us[mid] : (us[mid - 1] + us[mid]) / 2;  // (statistics.median's)
  std::printf("%s %s %s (%lld, %lld, %lld) w%d graph %.2f us (min %.2f) %.0f GB/s, %d buffer sets\n", argv[1], argv[2],
              argv[3], static_cast<long long>(batch), static_cast<long long>(dim), static_cast<long long>(seqlen),
              width, median, us.front(), moved / (median * 1e3), sets);
  if (std::getenv("KERNEL_TIMER_PROFILE")) {
    launch(calls.front());
    check_cuda(cudaStreamSynchronize(stream), "profiled launch");
  }
  return 0;
}
