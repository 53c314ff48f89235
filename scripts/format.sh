#!/usr/bin/env bash
# Formats the C++ / HIP / CUDA sources (csrc/, tests/cpp/, benchmarks/*.cu) with clang-format and
# the repository's .clang-format. In the dev root: scripts/devroot.sh scripts/format.sh [--check]
#   --check   change nothing; list the files that are not formatted and exit 1 if there are any
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
fmt=${CLANG_FORMAT:-$(command -v clang-format-21 || command -v clang-format || true)}
[[ -n $fmt ]] || { echo "format.sh: no clang-format found (the dev root has clang-format-21)" >&2; exit 2; }
mapfile -t files < <(git ls-files 'csrc/*.cpp' 'csrc/*.h' 'csrc/*.hip' 'tests/cpp/*.cpp' 'tests/cpp/*.h' 'benchmarks/*.cu')
if [[ ${1:-} == --check ]]; then
  bad=()
  for f in "${files[@]}"; do
    "$fmt" --style=file --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
  done
  if ((${#bad[@]})); then
    printf 'not formatted (run scripts/format.sh): %s\n' "${bad[@]}"
    exit 1
  fi
  echo "format.sh: ${#files[@]} files formatted ($("$fmt" --version))"
else
  "$fmt" --style=file -i "${files[@]}"
fi
