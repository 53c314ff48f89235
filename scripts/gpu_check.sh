#!/usr/bin/env bash
# The GPU round on an NVIDIA machine (CUDA build of the same HIP source): build with tests, ctest,
# pytest on CPU and GPU, optional compute-sanitizer runs, and the bandwidth benchmark. Logs go to
# $OUT (default ./gpu_out).
#
#   scripts/gpu_check.sh [all|test|bench|sanitize]... [-- PYTEST_ARGS...]
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
  scripts/test.sh -rfE "${pytest_args[@]}" 2>&1 | tee "$OUT/test.log"
  ((PIPESTATUS[0] == 0)) || status=1
fi
if want sanitize; then
  for tool in memcheck racecheck; do
    compute-sanitizer --tool "$tool" --error-exitcode 9 \
      python3 -m pytest tests/python -q -p no:cacheprovider -x -k "cuda and (test_dtypes_widths_layouts and bfloat16-float32 or test_initial_and_final_states or test_seq_idx or test_options or test_grads_with_states or test_grads_seq_idx)" \
      2>&1 | tail -n 30 | tee "$OUT/sanitize_$tool.log"
    ((PIPESTATUS[0] == 0)) || status=1
  done
fi
if want bench; then
  python3 benchmarks/bench.py --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log"
  ((PIPESTATUS[0] == 0)) || status=1
fi
exit $status
