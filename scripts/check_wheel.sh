#!/usr/bin/env bash
# Builds a wheel for several AMD archs and checks, from the offload bundles inside its library,
# that it carries a code object for each one (and nothing else).
#
#   scripts/devroot.sh scripts/check_wheel.sh "gfx1201;gfx942"
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$repo"
archs=${1:-"gfx1201;gfx942"}
py=${PYTHON:-python3}
export CAUSAL_CONV1D_BACKEND=${CAUSAL_CONV1D_BACKEND:-hip} CAUSAL_CONV1D_HIP_ARCHS=$archs PIP_ROOT_USER_ACTION=ignore
export CAUSAL_CONV1D_BUILD_DIR=$repo/build/wheel-$(echo "$archs" | tr -c 'a-zA-Z0-9\n' '_')
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
start=$SECONDS
"$py" -m pip wheel --no-build-isolation --no-deps --disable-pip-version-check -w "$out/wheel" . >"$out/log" 2>&1 ||
  { tail -n 60 "$out/log"; exit 1; }
echo "wheel for $archs built in $((SECONDS - start)) s: $(basename "$out"/wheel/*.whl)"
"$py" -m zipfile -e "$out"/wheel/*.whl "$out/site"
EXPECT="$archs" "$py" - "$out/site" <<'PY'
import glob, os, re, sys
sys.path.insert(0, os.path.join(os.environ.get("PWD", "."), ""))
from causal_conv1d._binary import gpu_archs, offload_targets  # the reader from the source tree
lib = glob.glob(os.path.join(sys.argv[1], "causal_conv1d", "_C*.so"))[0]
want = sorted(a for a in re.split(r"[;, ]+", os.environ["EXPECT"]) if a)
got = gpu_archs(lib)
print("offload bundles:", ", ".join(t for t in offload_targets(lib) if "amdgcn" in t))
assert got == want, f"code objects {got}, expected {want}"
print("ok: one code object per requested arch")
PY
