#!/usr/bin/env bash
# The test suite: build the extension in place (editable install) with the GoogleTest suite,
# run ctest, run pytest, then check that a regular wheel of the same build imports from outside
# the source tree and carries the same code objects.
#
#   scripts/devroot.sh scripts/test.sh     # without ROCm: HIP build for gfx1201 in the dev root
#   scripts/test.sh                        # on a ROCm (or CUDA) box with PyTorch installed
#
# In the dev root the defaults are CAUSAL_CONV1D_BACKEND=hip and CAUSAL_CONV1D_HIP_ARCHS=gfx1201
# (its PyTorch is a CPU build). Extra arguments go to pytest. Exits non-zero on any failure,
# including "no tests ran". CAUSAL_CONV1D_TEST_WHEEL=0 skips the final wheel check (a second
# full build), as scripts/gpu_check.sh does.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$repo"
py=${PYTHON:-python3}

if [[ ${CAUSAL_CONV1D_IN_DEVROOT:-0} == 1 ]]; then
  export CAUSAL_CONV1D_BACKEND=${CAUSAL_CONV1D_BACKEND:-hip}
  export CAUSAL_CONV1D_HIP_ARCHS=${CAUSAL_CONV1D_HIP_ARCHS:-gfx1201}
  export CAUSAL_CONV1D_EXPECT_BACKEND=${CAUSAL_CONV1D_EXPECT_BACKEND:-$CAUSAL_CONV1D_BACKEND}
  export CAUSAL_CONV1D_EXPECT_ARCHS=${CAUSAL_CONV1D_EXPECT_ARCHS:-$CAUSAL_CONV1D_HIP_ARCHS}
fi
if [[ ${CAUSAL_CONV1D_IN_DEVROOT:-0} == 1 ]]; then
  # The ROCm build needs no CUDA: prove it on every run in the dev root.
  if command -v nvcc >/dev/null || [[ -n ${CUDA_HOME:-} || -n ${CUDA_PATH:-} ]]; then
    echo "the dev root must have no nvcc and no CUDA_HOME/CUDA_PATH"; exit 1
  fi
  echo "no nvcc on PATH, CUDA_HOME unset: the HIP build below uses none"
fi
tag=${CAUSAL_CONV1D_BACKEND:-auto}-$(echo "${CAUSAL_CONV1D_HIP_ARCHS:-}${CAUSAL_CONV1D_CUDA_ARCHS:-}" | tr -c 'a-zA-Z0-9\n' '_')
export CAUSAL_CONV1D_BUILD_DIR=${CAUSAL_CONV1D_BUILD_DIR:-$repo/build/test-$tag}
pip_args=(--no-build-isolation --no-deps --disable-pip-version-check)
export PIP_ROOT_USER_ACTION=ignore

step() { printf '\n=== %s\n' "$*"; }

step "build (editable install, with GoogleTest) in $CAUSAL_CONV1D_BUILD_DIR"
start=$SECONDS
log=$CAUSAL_CONV1D_BUILD_DIR.log
mkdir -p "$(dirname "$log")"
if ! CAUSAL_CONV1D_BUILD_TESTS=1 "$py" -m pip install "${pip_args[@]}" -v -e . >"$log" 2>&1; then
  tail -n 80 "$log"
  echo "build failed (full log: $log)"
  exit 1
fi
grep -E 'causal-conv1d:' "$log" | sort -u
echo "build took $((SECONDS - start)) s"

step "ctest"
ctest --test-dir "$CAUSAL_CONV1D_BUILD_DIR" --output-on-failure --no-tests=error -j "$(nproc)"

step "pytest"
"$py" -m pytest tests/python -q -p no:cacheprovider "$@"

if [[ ${CAUSAL_CONV1D_TEST_WHEEL:-1} == 0 ]]; then
  step "all tests passed (wheel check skipped: CAUSAL_CONV1D_TEST_WHEEL=0)"
  exit 0
fi
step "regular (non-editable) wheel, unpacked into a scratch directory, imported from outside the tree"
# A wheel, not `pip install`, so the environment (and its editable install) is left as it was.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
"$py" -m pip wheel "${pip_args[@]}" -w "$scratch/wheel" . >"$scratch/wheel.log" 2>&1 || { tail -n 40 "$scratch/wheel.log"; exit 1; }
"$py" -m zipfile -e "$scratch"/wheel/causal_conv1d-*.whl "$scratch/site"
(cd "$scratch" && PYTHONPATH="$scratch/site" "$py" - <<'PY'
import os, causal_conv1d, causal_conv1d_cuda
from causal_conv1d._ops import LIBRARY_PATH, build_config
from causal_conv1d._binary import gpu_archs
assert os.path.dirname(causal_conv1d.__file__).startswith(os.getcwd()), causal_conv1d.__file__
assert causal_conv1d_cuda.__file__.startswith(os.getcwd()), causal_conv1d_cuda.__file__
from causal_conv1d import _eager  # the eager entry, built beside the op library
assert _eager.__file__.startswith(os.getcwd()), _eager.__file__
cfg = build_config()
print(f"wheel: causal_conv1d {causal_conv1d.__version__} from {os.path.dirname(causal_conv1d.__file__)}")
print(f"backend={cfg['backend']} gpu_archs={cfg['gpu_archs']} AMD code objects={gpu_archs(LIBRARY_PATH)}")
expected = os.environ.get("CAUSAL_CONV1D_EXPECT_BACKEND")
assert expected is None or cfg["backend"] == expected, (cfg, expected)
if cfg["backend"] == "hip":
    assert gpu_archs(LIBRARY_PATH) == sorted(cfg["gpu_archs"].split(",")), cfg
PY
)
step "all tests passed"
