#include "conv_problem.h"

namespace cc_test {

std::vector<Case> fwd_cases() {
  std::vector<Case> v;
  const DType types[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};
  for (int xi = 0; xi < 3; ++xi)
    for (int wi = 0; wi < 3; ++wi)
      for (int width = causal_conv1d::kMinWidth; width <= causal_conv1d::kMaxWidth; ++width)
        for (bool cl : {false, true}) {
          // Features rotate so that every layout, width and x dtype sees each of them without the
          // product exploding: the weight dtype picks states, seq_idx or neither (so each (layout,
          // width, x dtype) has all three), and SiLU and bias alternate with width and layout too.
          // (Rotating all of them with the case index, as before, tied them to (layout, width): no
          // channel-last case had SiLU and none of width 3 or 4 had seq_idx.)
          const bool states = wi == 0, seq = wi == 1;
          const bool silu = (xi + wi + width + cl) % 2 == 0, bias = (xi + 2 * wi + width + cl) % 4 != 3;
          v.push_back({types[xi], types[wi], width, cl, silu, bias, states, seq, 2, 67, 131});
        }
  v.push_back({DType::kFloat32, DType::kFloat32, 4, false, true, true, true, false, 1, 3, 2});  // L < W-1
  v.push_back({DType::kFloat32, DType::kFloat32, 4, true, true, true, true, false, 1, 3, 1});
  v.push_back({DType::kBFloat16, DType::kFloat32, 3, false, false, true, false, false, 1, 1, 5000});  // > chunk
  v.push_back({DType::kFloat16, DType::kFloat32, 4, true, true, false, false, true, 2, 200, 40});     // > channel block
  // Sizes that are multiples of every vector width: the all-aligned GPU paths.
  v.push_back({DType::kBFloat16, DType::kFloat32, 4, false, true, true, true, false, 2, 64, 256});
  v.push_back({DType::kBFloat16, DType::kBFloat16, 4, true, true, true, true, false, 2, 512, 64});
  v.push_back({DType::kFloat32, DType::kFloat32, 3, true, false, true, false, true, 3, 256, 100});
  // The CPU channel-last tasks: more channels than a task's block (4096) and more steps than its
  // time block (512), with the fp32 rows used in place and the 16-bit rows through float buffers;
  // without states the backward's vectorised path (its float sums moved to double every 64 steps).
  v.push_back({DType::kFloat32, DType::kFloat32, 4, true, true, true, true, false, 1, 4100, 9});
  v.push_back({DType::kBFloat16, DType::kFloat32, 3, true, true, true, false, false, 2, 4100, 6});
  v.push_back({DType::kFloat32, DType::kFloat32, 4, true, true, false, true, false, 2, 8, 1100});
  v.push_back({DType::kFloat32, DType::kFloat32, 4, true, true, true, false, false, 2, 8, 1100});
  v.push_back({DType::kBFloat16, DType::kBFloat16, 2, true, false, true, true, false, 1, 24, 1030});
  // The prefetching paths for 16-bit x: channel-first rows longer than a chunk through the padded
  // float buffer (the next chunk, then the next row, prefetched), SiLU and states; channel-last
  // bf16 rows read in place, calls of 8 steps over more than one block of 512 channels, without
  // SiLU (the taps store blockwise) and with it.
  v.push_back({DType::kBFloat16, DType::kFloat32, 4, false, true, true, true, false, 2, 3, 4100});
  v.push_back({DType::kFloat16, DType::kFloat16, 3, false, false, true, false, false, 1, 2, 2050});
  v.push_back({DType::kBFloat16, DType::kBFloat16, 4, true, false, true, false, false, 1, 1100, 40});
  v.push_back({DType::kBFloat16, DType::kFloat32, 3, true, true, false, true, false, 1, 1030, 27});
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

std::string update_case_name(const ::testing::TestParamInfo<UpdateCase>& info) {
  const UpdateCase& c = info.param;
  return std::string(causal_conv1d::dtype_name(c.xt)) + "_w" + std::to_string(c.width) + "_B" +
         std::to_string(c.batch) + "_D" + std::to_string(c.dim) + "_L" + std::to_string(c.seqlen) + "_S" +
         std::to_string(c.state_len) + (c.circular ? "_circ" : "_shift") + (c.indices ? "_idx" : "") + "_" +
         std::to_string(info.index);
}

BwdProblem::BwdProblem(const Case& cs) : fwd(cs) {
  const Case& c = fwd.c;
  const int64_t B = c.batch, D = c.dim, L = c.seqlen, W = c.width;
  dout = random_buffer(c.xt, B * D * L, 11);
  dx = Buffer(c.xt, B * D * L);
  for (size_t i = 0; i < dx.size(); ++i) dx.set(i, NAN);
  dinit = Buffer(c.xt, B * D * (W - 1));
  dfinal = random_buffer(c.xt, B * D * (W - 1), 12);
  dweight.assign(D * W, 0.0f);
  dbias.assign(D, 0.0f);
  p.f = fwd.p;
  p.f.out = nullptr;
  p.f.final_states = nullptr;
  // dout and dx in x's layout
  p.dout = dout.data(), p.dout_batch_stride = fwd.p.x_batch_stride;
  p.dout_c_stride = fwd.p.x_c_stride, p.dout_l_stride = fwd.p.x_l_stride;
  p.dx = dx.data(), p.dx_batch_stride = fwd.p.x_batch_stride;
  p.dx_c_stride = fwd.p.x_c_stride, p.dx_l_stride = fwd.p.x_l_stride;
  p.dweight = dweight.data(), p.dweight_c_stride = W, p.dweight_w_stride = 1;
  if (c.bias) p.dbias = dbias.data(), p.dbias_stride = 1;
  if (c.states) {
    p.dinitial_states = dinit.data();
    p.dinit_batch_stride = D * (W - 1), p.dinit_c_stride = W - 1, p.dinit_l_stride = 1;
    p.dfinal_states = dfinal.data();
    p.dfinal_batch_stride = D * (W - 1), p.dfinal_c_stride = 1, p.dfinal_l_stride = D;
  }
  compute_expected();
}

void BwdProblem::compute_expected() {
  const Case& c = fwd.c;
  const int64_t B = c.batch, D = c.dim, L = c.seqlen, W = c.width, H = W - 1;
  want_dx.assign(B * D * L, 0.0);
  want_dinit.assign(B * D * H, 0.0);
  want_dweight.assign(D * W, 0.0);
  want_dbias.assign(D, 0.0);
  auto tap = [&](int64_t b, int64_t t, int k) {
    if (!c.seq_idx) return true;
    const int64_t s = t - H + k;
    return s >= 0 && fwd.seq[b * L + s] == fwd.seq[b * L + t];
  };
  for (int64_t b = 0; b < B; ++b)
    for (int64_t ch = 0; ch < D; ++ch) {
      // dxs[s + H] collects the gradient of input position s in [-H, L)
      std::vector<double> dxs(L + H, 0.0);
      for (int64_t t = 0; t < L; ++t) {
        double y = c.bias ? fwd.bias.get(ch) : 0.0;
        for (int k = 0; k < W; ++k)
          if (tap(b, t, k)) y += double(fwd.w.get(ch * W + k)) * fwd.input(b, ch, t - H + k);
        double dy = dout.get(b * p.dout_batch_stride + ch * p.dout_c_stride + t * p.dout_l_stride);
        if (c.silu) {
          const double sig = 1.0 / (1.0 + std::exp(-y));
          dy *= sig * (1.0 + y * (1.0 - sig));
        }
        if (fwd.padding(b, t)) dy = 0.0;  // a constant output
        want_dbias[ch] += dy;
        for (int k = 0; k < W; ++k) {
          if (!tap(b, t, k)) continue;
          want_dweight[ch * W + k] += dy * fwd.input(b, ch, t - H + k);
          dxs[t + k] += double(fwd.w.get(ch * W + k)) * dy;
        }
      }
      if (c.states)
        for (int j = 0; j < H; ++j)
          dxs[L + j] += dfinal.get(b * p.dfinal_batch_stride + ch * p.dfinal_c_stride + j * p.dfinal_l_stride);
      for (int64_t t = 0; t < L; ++t) want_dx[(b * D + ch) * L + t] = dxs[H + t];
      for (int j = 0; j < H; ++j) want_dinit[(b * D + ch) * H + j] = dxs[j];
    }
}

UpdateProblem::UpdateProblem(const UpdateCase& cs) : c(cs) {
  const int64_t B = c.batch, D = c.dim, L = c.seqlen, S = c.state_len, W = c.width;
  const int64_t lines = c.indices ? B + 2 : B;
  x = random_buffer(c.xt, B * D * L, 21);
  w = random_buffer(c.wt, D * W, 22, -0.5f, 0.5f);
  bias = random_buffer(c.wt, D, 23);
  state = random_buffer(c.xt, lines * D * S, 24);
  out = Buffer(c.xt, B * D * L);
  for (size_t i = 0; i < out.size(); ++i) out.set(i, NAN);
  for (int64_t b = 0; b < B; ++b) {
    cache_seqlens.push_back(static_cast<int32_t>((5 * b + 3) % (3 * S)));
    // rows map to lines in reverse; the last row is padding
    indices.push_back(b == B - 1 ? -1 : static_cast<int32_t>(lines - 1 - b));
  }
  p.batch = B, p.dim = D, p.seqlen = L, p.state_len = S, p.num_cache_lines = lines, p.width = c.width;
  p.x_dtype = c.xt, p.w_dtype = c.wt, p.silu = c.silu;
  // x channel-last-like (dim contiguous), state (lines, D, S) contiguous, out channel-first
  p.x = x.data(), p.x_batch_stride = D * L, p.x_c_stride = 1, p.x_l_stride = D;
  p.weight = w.data(), p.weight_c_stride = W, p.weight_w_stride = 1;
  p.bias = bias.data(), p.bias_stride = 1;
  p.out = out.data(), p.out_batch_stride = D * L, p.out_c_stride = L, p.out_l_stride = 1;
  p.conv_state = state.data(), p.state_batch_stride = D * S, p.state_c_stride = S, p.state_l_stride = 1;
  if (c.circular) p.cache_seqlens = cache_seqlens.data();
  if (c.indices) p.conv_state_indices = indices.data();

  want_out.assign(B * D * L, 0.0);
  want_state = state;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t line = c.indices ? indices[b] : b;
    if (line < 0) continue;
    for (int64_t ch = 0; ch < D; ++ch) {
      const int64_t base = line * D * S + ch * S;
      std::vector<double> seq;
      const int64_t head = c.circular ? cache_seqlens[b] % S : S;
      for (int i = 0; i < W - 1; ++i) seq.push_back(state.get(base + ((head - (W - 1) + i) % S + S) % S));
      for (int64_t t = 0; t < L; ++t) seq.push_back(x.get(b * D * L + t * D + ch));
      for (int64_t t = 0; t < L; ++t) {
        double acc = bias.get(ch);
        for (int k = 0; k < W; ++k) acc += double(w.get(ch * W + k)) * seq[t + k];
        want_out[(b * D + ch) * L + t] = c.silu ? acc / (1.0 + std::exp(-acc)) : acc;
      }
      if (c.circular) {
        for (int64_t t = 0; t < L; ++t) want_state.set(base + (head + t) % S, x.get(b * D * L + t * D + ch));
      } else {
        std::vector<float> all;
        for (int64_t s = 0; s < S; ++s) all.push_back(state.get(base + s));
        for (int64_t t = 0; t < L; ++t) all.push_back(x.get(b * D * L + t * D + ch));
        for (int64_t s = 0; s < S; ++s) want_state.set(base + s, all[all.size() - S + s]);
      }
    }
  }
}

std::vector<UpdateCase> update_cases() {
  std::vector<UpdateCase> v;
  const DType types[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};
  for (DType xt : types)
    for (int width = causal_conv1d::kMinWidth; width <= causal_conv1d::kMaxWidth; ++width)
      for (int mode = 0; mode < 4; ++mode) {
        const bool circular = mode & 1, indices = mode & 2;
        const int64_t seqlen = 1 + (mode + width) % 3 * 2;  // 1, 3 or 5
        const int64_t state_len = width - 1 + mode % 3;     // width - 1 .. width + 1
        v.push_back({xt, types[(width + mode) % 3], width, 3, 41, seqlen, state_len, circular, indices, mode != 1});
      }
  // The decode layout (one token, dim a multiple of the 16-byte vector, shifted state of width - 1
  // or width entries): the GPU's vector path.
  for (DType xt : types)
    for (int width = causal_conv1d::kMinWidth; width <= causal_conv1d::kMaxWidth; ++width)
      for (int extra = 0; extra < 2; ++extra)
        v.push_back({xt, types[(width + extra) % 3], width, 3, 64, 1, width - 1 + extra, false, extra == 1, true});
  // More batch rows than the decode kernel's grid has (64 or 128): each thread walks several rows
  // with its next row prefetched; small and odd-sized dims. Batch 64 / 65 and 128 / 129 on either
  // side of the grids' rows (update_tuning's max_grid_y: one row a thread, then the loop). From
  // batch 64 on NVIDIA a thread owns 8 bytes of channels where dim allows (in the loop, past 128,
  // 16-bit x only): dim 36 at widths 2, 3 and 4; dim 34 only for fp32 up to 128 (16-bit keeps 4
  // bytes: 34 is not a multiple of 4 channels).
  for (DType xt : types)
    for (int indices = 0; indices < 2; ++indices) {
      v.push_back({xt, types[(indices + 1) % 3], 4, 150, 130, 1, 3, false, indices == 1, indices == 0});
      v.push_back({xt, xt, 2, 5, 2, 1, 2, false, indices == 1, true});
      for (int64_t batch : {64, 65, 128, 129})
        v.push_back({xt, xt, 3, batch, 36, 1, 2 + indices, false, indices == 1, true});
      v.push_back({xt, types[indices], 4, 64, 36, 1, 3 + indices, false, indices == 1, indices == 0});
      v.push_back({xt, xt, 2, 128, 36, 1, 1 + indices, false, indices == 1, true});
      v.push_back({xt, types[indices], 4, 64, 34, 1, 3 + indices, false, indices == 1, indices == 0});
      v.push_back({xt, types[indices], 4, 129, 36, 1, 3 + indices, false, indices == 1, indices == 0});
      v.push_back({xt, xt, 2, 300, 36, 1, 1 + indices, false, indices == 1, true});
      v.push_back({xt, xt, 3, 129, 34, 1, 2 + indices, false, indices == 1, true});
    }
  // More channels than the CPU decode path's block (512).
  for (DType xt : types) v.push_back({xt, DType::kFloat32, 4, 9, 1100, 1, 3, false, xt == DType::kFloat16, true});
  return v;
}

}  // namespace cc_test
