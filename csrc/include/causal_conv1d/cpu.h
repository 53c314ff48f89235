// CPU backend entry points: same params structs and semantics as the GPU launchers. Torch-free;
// the caller supplies the thread pool as a ParallelFor (the torch layer passes at::parallel_for,
// tests may pass a serial loop), so results never depend on which pool runs them.
#pragma once

#include <cstdint>
#include <functional>

#include "causal_conv1d/params.h"
#include "causal_conv1d/serving.h"
#include "causal_conv1d/status.h"

namespace causal_conv1d::cpu {

// Runs body(begin, end) over disjoint sub-ranges covering [0, n), in parallel if it likes.
// grain is the smallest range worth a task.
using ParallelFor = std::function<void(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body)>;

// A ParallelFor that runs everything on the calling thread.
void serial_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body);

int launch_fwd(const FwdParams& p, const ParallelFor& pfor);
// Always bitwise repeatable, whatever the thread count (p.deterministic is implied).
int launch_bwd(const BwdParams& p, const ParallelFor& pfor);
int launch_update(const UpdateParams& p, const ParallelFor& pfor);
int launch_varlen_states(const VarlenStatesParams& p, const ParallelFor& pfor);
// The serving API (serving.h). Metadata is read as given: the torch layer validates it first.
int launch_serving_fwd(const ServingFwdParams& p, const ParallelFor& pfor);
int launch_serving_update(const ServingUpdateParams& p, const ParallelFor& pfor);

}  // namespace causal_conv1d::cpu
