#!/usr/bin/env bash
# Builds the HIP backend through the ROCm layouts of a ROCm box, not only the distribution's /usr
# (run in the dev root: scripts/devroot.sh scripts/test_rocm_layouts.sh; CI does):
#   1. an AMD-style /opt/rocm-X.Y tree (links into the system's ROCm packages), found through
#      ROCM_PATH while the system's ROCm tools are hidden from PATH: configure, build the op
#      library for gfx1201, check it used that tree's compiler and loads;
#   2. the same tree as ROCm Python packages (a stand-in `rocm_sdk` module that answers
#      `python -m rocm_sdk path --root`, as TheRock's rocm[devel] wheels do): configure;
#   3. ROCM_PATH naming a directory that is no ROCm: the configure stops and names it.
# Exits non-zero on any failure. The system layout itself is what scripts/test.sh builds.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
py=${PYTHON:-python3}
work=$(mktemp -d)
[[ ${KEEP:-0} == 1 ]] || trap 'rm -rf "$work"' EXIT
multiarch=$(gcc -dumpmachine)
syscmake=/usr/lib/$multiarch/cmake
fail() { echo "test_rocm_layouts: FAILED: $*" >&2; exit 1; }

hip_version=$(sed -n 's/^set(PACKAGE_VERSION "\(.*\)")/\1/p' "$syscmake/hip/hip-config-version.cmake")
[[ -n $hip_version ]] || fail "no system HIP found under $syscmake/hip"
clang_dir=$(dirname "$(dirname "$(readlink -f "$(hipconfig --hipclangpath)/clang++")")")  # /usr/lib/llvm-N
bitcode=$(find "$clang_dir" -path '*amdgcn/bitcode' -type d | head -n1)
rocm=$work/opt/rocm-${hip_version%.*}

echo "=== an AMD-style tree: $rocm (HIP $hip_version, LLVM $clang_dir)"
mkdir -p "$rocm"/{bin,lib/cmake,include,amdgcn,share,.info}
ln -s "$clang_dir" "$rocm/llvm"
for t in hipcc hipconfig; do ln -s "/usr/bin/$t" "$rocm/bin/$t"; done
for p in hip hip-lang; do  # their own dependencies (amd_comgr, hsa-runtime64) resolve under /usr
  [[ -d $syscmake/$p ]] && ln -s "$syscmake/$p" "$rocm/lib/cmake/$p"
done
for p in rocprim hipcub; do ln -s "/usr/share/cmake/$p" "$rocm/lib/cmake/$p"; done
for f in /usr/lib/"$multiarch"/libamdhip64.so*; do ln -s "$f" "$rocm/lib/"; done
for d in hip rocprim hipcub hsa; do [[ -d /usr/include/$d ]] && ln -s "/usr/include/$d" "$rocm/include/$d"; done
ln -s "$bitcode" "$rocm/amdgcn/bitcode"
ln -s /usr/share/hip "$rocm/share/hip"  # share/hip/version: clang reads the HIP version there
echo "$hip_version" >"$rocm/.info/version"

# PATH without the system's ROCm: every /usr/bin tool but hip*, clang*, amd*, rocm*, llvm*.
mkdir "$work/sysbin"
for f in /usr/bin/*; do
  case $(basename "$f") in hip* | clang* | amd* | rocm* | roc-* | llvm* | offload-arch) ;; *) ln -s "$f" "$work/sysbin/" ;; esac
done
hidden_path=$rocm/bin:$work/sysbin
base_env=(env -u ROCM_PATH -u HIP_PATH -u HIPCXX PATH="$hidden_path" CAUSAL_CONV1D_BACKEND=hip
          CAUSAL_CONV1D_HIP_ARCHS=gfx1201 PYTHONDONTWRITEBYTECODE=1)
configure() {  # configure DIR LOG [ENV...]
  local dir=$1 log=$2
  shift 2
  "${base_env[@]}" "$@" cmake -S "$repo" -B "$dir" -G Ninja -DCAUSAL_CONV1D_PYTHON="$(command -v "$py")" \
    -DCAUSAL_CONV1D_EXT_OUTPUT_DIR="$dir/ext" >"$log" 2>&1
}

echo "--- 1. ROCM_PATH=$rocm, system ROCm hidden from PATH: configure and build"
PATH=$hidden_path command -v hipcc | grep -q "^$rocm/" || fail "hipcc on the hidden PATH is not the tree's"
PATH=$hidden_path command -v clang++ >/dev/null && fail "a clang++ is still on the hidden PATH"
configure "$work/b1" "$work/b1.log" ROCM_PATH="$rocm" || { cat "$work/b1.log"; fail "configure through ROCM_PATH"; }
grep -E 'causal-conv1d: (ROCm|HIP|backend)' "$work/b1.log"
grep -q "causal-conv1d: ROCm $rocm (environment ROCM_PATH)" "$work/b1.log" || fail "the tree was not the ROCm used"
grep -Eq "^CMAKE_HIP_COMPILER:[A-Z]+=$rocm/llvm/bin/clang\+\+$" "$work/b1/CMakeCache.txt" ||
  fail "the HIP compiler is not the tree's clang++"
start=$SECONDS
"${base_env[@]}" ROCM_PATH="$rocm" cmake --build "$work/b1" --target _C >"$work/b1-build.log" 2>&1 ||
  { grep -m1 -A3 FAILED "$work/b1-build.log"; tail -40 "$work/b1-build.log"; fail "build through ROCM_PATH"; }
echo "built the op library in $((SECONDS - start)) s"
lib=$(ls "$work"/b1/ext/_C*.so)
grep -q "$rocm/llvm/bin/clang++" "$work/b1/compile_commands.json" || fail "kernels not compiled by the tree's clang++"
"$py" -c "import torch, sys; torch.ops.load_library(sys.argv[1]); print('loads:', sys.argv[1])" "$lib"

echo "--- 2. the tree as ROCm Python packages (python -m rocm_sdk path --root)"
mkdir -p "$work/pyfake/rocm_sdk"
cat >"$work/pyfake/rocm_sdk/__main__.py" <<PY
import sys
if sys.argv[1:] == ["path", "--root"]:
    print("$rocm")
else:
    sys.exit("rocm_sdk stand-in: only 'path --root'")
PY
touch "$work/pyfake/rocm_sdk/__init__.py"
configure "$work/b2" "$work/b2.log" PYTHONPATH="$work/pyfake" || { cat "$work/b2.log"; fail "configure through rocm_sdk"; }
grep 'causal-conv1d: ROCm' "$work/b2.log"
grep -q "causal-conv1d: ROCm $rocm (ROCm Python packages" "$work/b2.log" || fail "rocm_sdk's root was not used"

echo "--- 3. ROCM_PATH naming no ROCm"
mkdir "$work/not-rocm"
if configure "$work/b3" "$work/b3.log" ROCM_PATH="$work/not-rocm"; then fail "configure accepted a ROCM_PATH without ROCm"; fi
tr -s ' \n' ' ' <"$work/b3.log" | grep -o "ROCM_PATH=$work/not-rocm (environment ROCM_PATH) is not a ROCm install[^.]*" ||
  fail "no clear error for a wrong ROCM_PATH"
echo "=== ROCm layouts: all passed"
