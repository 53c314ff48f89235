#!/usr/bin/env bash
# Builds the standalone kernel timer (benchmarks/kernel_timer.cu) for NVIDIA with nvcc, on a machine
# without a GPU and without torch, and with --tests the GoogleTest binary against the same kernel
# objects (the CPU backend and the tests with the host g++). Both run on the GPU machine as they
# are, so a kernel experiment costs a device call of seconds instead of a package build there:
# build each variant here (--src: a copy of the tree with the change), carry the binaries.
#
#   scripts/kernel_timer.sh [--src DIR] [--arch 90] [--tests] NAME
#
# Output, stripped: build/kernel_timer/NAME/kernel_timer (usage in benchmarks/kernel_timer.cu) and
# with --tests build/kernel_timer/NAME/causal_conv1d_cpp_tests. An object is rebuilt when its source
# or any header under csrc/ (and tests/cpp/ for the tests) is newer than it: a changed .hip file
# takes about a minute here, a changed header rebuilds everything; a NAME built before from another
# --src tree, arch or nvcc starts over. NVCC (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc)
# and GTEST_SOURCE_DIR (default /usr/src/googletest) select the tools.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
src=$repo arch=90 tests=0 name=
while (($#)); do
  case $1 in
    --src) src=$(cd "$2" && pwd -P); shift 2 ;;
    --arch) arch=$2; shift 2 ;;
    --tests) tests=1; shift ;;
    -*) echo "kernel_timer.sh: unknown option $1" >&2; exit 2 ;;
    *) name=$1; shift ;;
  esac
done
[[ -n $name ]] || { sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2; }
nvcc=$(command -v "${NVCC:-nvcc}" || command -v /usr/local/cuda/bin/nvcc || true)
[[ -n $nvcc ]] || { echo "kernel_timer.sh: no nvcc (set NVCC)" >&2; exit 1; }
out=$repo/build/kernel_timer/$name
obj=$out/obj
# What the objects were built from; another tree, arch or compiler starts over (mtimes alone would
# keep objects of a tree copied with its times).
stamp="src=$src arch=$arch nvcc=$("$nvcc" --version | tail -1) gxx=$(g++ -dumpfullversion)"
if [[ ! -f $out/stamp || $(cat "$out/stamp") != "$stamp" ]]; then
  rm -rf "$out"
  mkdir -p "$out"
  echo "$stamp" >"$out/stamp"
fi
mkdir -p "$obj"
# The CUDA build's build_config.h, as CMake writes it.
cmake -DOUTPUT_DIR="$out/generated" -DBACKEND=cuda -DGPU_ARCHS="$arch" -P "$repo/cmake/BuildConfig.cmake"
# As CMakeLists.txt's CUDA build (-O3, the host compiler's -Wall).
nvflags=(-std=c++17 -O3 -Xcompiler=-Wall "-arch=sm_$arch" "-I$out/generated" "-I$src/csrc/include" "-I$src/csrc/kernels")
headers=("$src"/csrc/kernels/*.h "$src"/csrc/include/causal_conv1d/*.h)
stale() {  # $1 (an object) is missing or older than $2 or a header
  [[ -f $1 ]] || return 0
  local f
  for f in "$2" "${headers[@]}"; do [[ $f -nt $1 ]] && return 0; done
  return 1
}
# Compiles in the background, nproc at a time; a failure is recorded and reported after all end.
rm -f "$out/failed"
bg() {
  while (($(jobs -rp | wc -l) >= $(nproc))); do sleep 0.2; done
  ("$@" || touch "$out/failed") &
}
finish() {
  wait
  [[ ! -f $out/failed ]] || { echo "kernel_timer.sh: a compile failed (above)" >&2; exit 1; }
}
kernels=()
for f in "$src"/csrc/kernels/*.hip; do
  o=$obj/$(basename "$f" .hip).o
  kernels+=("$o")
  if stale "$o" "$f"; then bg "$nvcc" "${nvflags[@]}" -x cu -c -o "$o" "$f"; fi
done
t=$out/kernel_timer.o
if stale "$t" "$repo/benchmarks/kernel_timer.cu"; then bg "$nvcc" "${nvflags[@]}" -c -o "$t" "$repo/benchmarks/kernel_timer.cu"; fi
finish
"$nvcc" "-arch=sm_$arch" -o "$out/kernel_timer" "${kernels[@]}" "$t"
strip "$out/kernel_timer"
echo "built $out/kernel_timer"
((tests)) || exit 0

# The GoogleTest binary: the CPU backend with CMakeLists.txt's flags, GoogleTest, the tests.
gtest=${GTEST_SOURCE_DIR:-/usr/src/googletest}/googletest
[[ -f $gtest/src/gtest-all.cc ]] || { echo "kernel_timer.sh: no GoogleTest sources at $gtest" >&2; exit 1; }
tobj=$out/test_obj
mkdir -p "$tobj"
# CMakeLists.txt's warnings (CC_WARNINGS: -Werror=undef catches a build-config macro tested without
# its header); GoogleTest's headers as system ones, as CMake includes them.
cflags=(-std=c++17 -O2 -Wall -Wextra -Wno-unused-parameter -Werror=undef "-I$out/generated" "-I$src/csrc/include"
  "-I$src/csrc/cpu" "-I$src/tests/cpp" -isystem "$gtest/include" -isystem "$gtest")
headers+=("$src"/csrc/cpu/*.h "$src"/tests/cpp/*.h)
objs=()
for f in "$src"/csrc/cpu/*.cpp; do
  o=$tobj/cpu_$(basename "$f" .cpp).o
  objs+=("$o")
  extra=()
  [[ $(basename "$f") == vec.cpp ]] && extra=(-fno-tree-loop-distribute-patterns)
  if stale "$o" "$f"; then
    bg g++ "${cflags[@]}" -O3 -fopenmp-simd -fno-math-errno -fno-trapping-math "${extra[@]}" -c -o "$o" "$f"
  fi
done
for f in "$gtest/src/gtest-all.cc" "$gtest/src/gtest_main.cc"; do
  o=$tobj/$(basename "$f" .cc).o
  objs+=("$o")
  [[ -f $o ]] || bg g++ -std=c++17 -O2 "-I$gtest/include" "-I$gtest" -c -o "$o" "$f"
done
for f in "$src"/tests/cpp/*.cpp; do
  o=$tobj/test_$(basename "$f" .cpp).o
  objs+=("$o")
  if stale "$o" "$f"; then bg g++ "${cflags[@]}" -c -o "$o" "$f"; fi
done
finish
"$nvcc" "-arch=sm_$arch" -o "$out/causal_conv1d_cpp_tests" "${kernels[@]}" "${objs[@]}" -lpthread
strip "$out/causal_conv1d_cpp_tests"
echo "built $out/causal_conv1d_cpp_tests"
