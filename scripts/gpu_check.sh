#!/usr/bin/env bash
# The GPU round on an NVIDIA machine (CUDA build of the same HIP source): build with tests, ctest,
# pytest on CPU and GPU, optional compute-sanitizer runs, and the bandwidth benchmark. Logs go to
# $OUT (default ./gpu_out).
#
#   scripts/gpu_check.sh [all|test|exhaustive|conformance|sanitize|bench]... [-- PYTEST_ARGS...]
#
#   test         build with tests, ctest, pytest (default run) on CPU and GPU
#   exhaustive   pytest -m exhaustive: the full sweeps and > 2^31-element cases (per kernel change)
#   conformance  upstream's own test suite against this build (scripts/upstream_conformance.sh),
#                from the checkout in $CAUSAL_CONV1D_UPSTREAM (default peers/causal-conv1d)
#   sanitize     the GPU GoogleTests under compute-sanitizer memcheck and racecheck
#   bench        benchmarks/bench.py (with --peer $CAUSAL_CONV1D_PEER when set) and its plot
#
# Needs a CUDA build of PyTorch, nvcc, CMake; CAUSAL_CONV1D_CUDA_ARCHS defaults to 90 (Hopper).
# GoogleTest is found installed or built from CAUSAL_CONV1D_GTEST_SOURCE_DIR.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$repo"
OUT=${OUT:-$repo/gpu_out}
mkdir -p "$OUT"
steps=()
pytest_args=()
while (($#)); do
  case $1 in
    --) shift; pytest_args=("$@"); break ;;
    *) steps+=("$1"); shift ;;
  esac
done
((${#steps[@]})) || steps=(all)
want() { [[ " ${steps[*]} " == *" all "* || " ${steps[*]} " == *" $1 "* ]]; }

export CAUSAL_CONV1D_CUDA_ARCHS=${CAUSAL_CONV1D_CUDA_ARCHS:-90}
export CAUSAL_CONV1D_EXPECT_BACKEND=${CAUSAL_CONV1D_EXPECT_BACKEND:-cuda}
export PYTHONUNBUFFERED=1
# A compiler whose libstdc++ is static cannot build a torch extension (CMake says so); prefer the
# system one when the environment points elsewhere.
if [[ -x /usr/bin/g++ ]]; then export CXX=/usr/bin/g++ CUDAHOSTCXX=/usr/bin/g++; fi
status=0

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/device.txt"
if want test; then
  CAUSAL_CONV1D_TEST_WHEEL=0 scripts/test.sh -rfE "${pytest_args[@]}" 2>&1 | tee "$OUT/test.log"
  ((PIPESTATUS[0] == 0)) || status=1
fi
if want exhaustive; then
  python3 -m pytest tests/python -q -p no:cacheprovider -rfE -m exhaustive "${pytest_args[@]}" 2>&1 |
    tee "$OUT/exhaustive.log"
  ((PIPESTATUS[0] == 0)) || status=1
fi
if want conformance; then
  scripts/upstream_conformance.sh "${CAUSAL_CONV1D_UPSTREAM:-peers/causal-conv1d}" "${pytest_args[@]}" 2>&1 |
    tee "$OUT/conformance.log"
  ((PIPESTATUS[0] == 0)) || status=1
fi
if want sanitize; then
  # The GoogleTest GPU cases (forward, update, backward against the CPU) under memcheck and
  # racecheck: every kernel, both layouts, all dtypes, without PyTorch's own kernels in the way.
  gtest=$(find "${CAUSAL_CONV1D_BUILD_DIR:-$repo/build/test-auto-90}" -name causal_conv1d_cpp_tests -type f | head -n1)
  for tool in memcheck racecheck; do
    compute-sanitizer --tool "$tool" --error-exitcode 9 "$gtest" --gtest_filter='*Gpu*' --gtest_brief=1 \
      2>&1 | tail -n 15 | tee "$OUT/sanitize_$tool.log"
    ((PIPESTATUS[0] == 0)) || status=1
  done
fi
if want bench; then
  # Side by side with upstream when CAUSAL_CONV1D_PEER names its install prefix.
  python3 benchmarks/bench.py --json "$OUT/bench.json" ${CAUSAL_CONV1D_PEER:+--peer "$CAUSAL_CONV1D_PEER"} 2>&1 |
    tee "$OUT/bench.log"
  ((PIPESTATUS[0] == 0)) || status=1
  python3 benchmarks/plot.py "$OUT/bench.json" "$OUT/bench.png" || status=1
fi
exit $status
