// A forward problem (inputs, outputs, FwdParams) shared by the CPU and GPU GoogleTests, with the
// formula evaluated in double as the reference.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "causal_conv1d/params.h"
#include "test_util.h"

namespace cc_test {

using causal_conv1d::FwdParams;

struct Case {
  DType xt, wt;
  int width;
  bool channel_last, silu, bias, states, seq_idx;
  int64_t batch, dim, seqlen;
  bool every_11th_padding = true;  // seq_idx: padding tokens every 11th position too (below)
  // seq_idx: sequences of seq_len positions, a new one starting at seq_phase (if > 0) and every
  // seq_len positions after it (0: lengths 1, 2, 3, ..., below).
  int64_t seq_len = 0, seq_phase = 0;
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
        const int64_t fixed = t < c.seq_phase ? 0 : (t - c.seq_phase) / std::max<int64_t>(c.seq_len, 1) + 1;
        seq[b * L + t] = static_cast<int32_t>((c.seq_len > 0 ? fixed : id) + b);
        if (--left == 0) left = ++len, ++id;
      }
    // Padding tokens (negative ids, output exactly 0): every 11th position (unless the case says
    // not) and a tail of batch row 0, so strips and tiles start, end and straddle them.
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < L; ++t)
        if ((c.every_11th_padding && t % 11 == 5) || (b == 0 && t >= L - L / 8)) seq[b * L + t] = t % 2 ? -1 : -3;

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

  bool padding(int64_t b, int64_t t) const { return c.seq_idx && seq[b * c.seqlen + t] < 0; }

  double expected(int64_t b, int64_t ch, int64_t t) const {
    if (padding(b, t)) return 0.0;
    double acc = c.bias ? bias.get(ch) : 0.0;
    for (int k = 0; k < c.width; ++k) {
      const int64_t s = t - (c.width - 1) + k;
      if (c.seq_idx && (s < 0 || seq[b * c.seqlen + s] != seq[b * c.seqlen + t])) continue;
      acc += double(w.get(ch * c.width + k)) * input(b, ch, s);
    }
    return c.silu ? acc / (1.0 + std::exp(-acc)) : acc;
  }
};

// Backward of a Problem: dout random, dfinal random when the case has states; dweight/dbias start
// at zero (the launchers accumulate into them).
struct BwdProblem {
  Problem fwd;
  Buffer dout, dx, dinit, dfinal;
  std::vector<float> dweight, dbias;
  causal_conv1d::BwdParams p;
  // Double-precision gradients from the formula, indexed like the logical tensors:
  // dx[(b * D + c) * L + t], dinit[(b * D + c) * (W - 1) + j], dweight[c * W + k], dbias[c].
  std::vector<double> want_dx, want_dinit, want_dweight, want_dbias;

  explicit BwdProblem(const Case& c);
  void compute_expected();
};

// An update problem: shifted or circular state, optional cache-line indices with a padding row.
struct UpdateCase {
  DType xt, wt;
  int width;
  int64_t batch, dim, seqlen, state_len;
  bool circular, indices, silu;
};

struct UpdateProblem {
  UpdateCase c;
  Buffer x, w, bias, state, out;
  std::vector<int32_t> cache_seqlens, indices;
  causal_conv1d::UpdateParams p;
  std::vector<double> want_out;  // (b * D + c) * L + t
  Buffer want_state;             // same layout as state

  explicit UpdateProblem(const UpdateCase& c);
};

std::vector<Case> fwd_cases();
std::vector<UpdateCase> update_cases();
std::string case_name(const ::testing::TestParamInfo<Case>& info);
std::string update_case_name(const ::testing::TestParamInfo<UpdateCase>& info);

}  // namespace cc_test
