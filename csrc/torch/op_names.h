// The ops' names, each defined once. An op has two: the name it is registered under
// (torch.ops.causal_conv1d.<registered>: ops.cpp defines the schema, cpu_ops.cpp and gpu_ops.cpp
// the kernels, causal_conv1d/_ops.py calls it) and the name its error messages start with
// ("causal_conv1d_fwd: x must be ..."): upstream's function names, which users know, and the
// serving module's functions. tests/python/test_errors.py compares those messages.
#pragma once

namespace causal_conv1d::torch_ops {

struct OpName {
  const char* registered;
  const char* error;
};

inline constexpr OpName kFwdOp{"fwd", "causal_conv1d_fwd"};
inline constexpr OpName kBwdOp{"bwd", "causal_conv1d_bwd"};
inline constexpr OpName kUpdateOp{"update", "causal_conv1d_update"};
// The update returning a fresh out (shaped and strided like x): the public functions' decode call,
// one op call without a Python-level allocation before it. Same checks and messages as kUpdateOp.
inline constexpr OpName kUpdateFunctionalOp{"update_functional", "causal_conv1d_update"};
inline constexpr OpName kVarlenStatesOp{"varlen_states", "causal_conv1d_varlen_states"};
inline constexpr OpName kServingFwdOp{"serving_fwd", "serving.causal_conv1d_fn"};
inline constexpr OpName kServingUpdateOp{"serving_update", "serving.causal_conv1d_update"};

}  // namespace causal_conv1d::torch_ops
