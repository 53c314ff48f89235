// Turning run-time choices into template parameters, once per launch. Torch-free.
//
//   return dispatch_width(p.width, [&](auto W) {
//     constexpr int kWidth = decltype(W)::value;
//     ...
//   });
//
// Each helper calls f with a std::integral_constant (or a type tag) and returns what f returns
// (a status code); an unsupported value returns the matching error code instead of silently doing
// nothing.
#pragma once

#include <type_traits>

#include "causal_conv1d/numeric.h"
#include "causal_conv1d/params.h"
#include "causal_conv1d/status.h"

namespace causal_conv1d {

template <int V>
using IntC = std::integral_constant<int, V>;
template <bool V>
using BoolC = std::integral_constant<bool, V>;

template <typename T>
struct TypeTag {
  using type = T;
};

template <typename F>
int dispatch_width(int width, F&& f) {
  switch (width) {
    case 2: return f(IntC<2>{});
    case 3: return f(IntC<3>{});
    case 4: return f(IntC<4>{});
    default: return kErrUnsupportedWidth;
  }
}

// Calls f(TypeTag<float | Half | BFloat16>{}).
template <typename F>
int dispatch_dtype(DType t, F&& f) {
  switch (t) {
    case DType::kFloat32: return f(TypeTag<float>{});
    case DType::kFloat16: return f(TypeTag<Half>{});
    case DType::kBFloat16: return f(TypeTag<BFloat16>{});
    default: return kErrUnsupportedDType;
  }
}

template <typename F>
int dispatch_bool(bool b, F&& f) {
  return b ? f(BoolC<true>{}) : f(BoolC<false>{});
}

}  // namespace causal_conv1d
