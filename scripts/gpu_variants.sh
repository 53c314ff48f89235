#!/usr/bin/env bash
# Tuning experiments on a GPU machine: builds the package once per variant of the tuning table, in
# parallel, and times each variant with benchmarks/bench.py in its own process. A variant is NAME=SED:
# a sed expression applied to a scratch copy of csrc/kernels/tuning.h (NAME=. keeps the table as
# it is in the working tree), or +PATCH: the working tree with a patch file applied (e.g.
# base=+peers/revert.patch, made with `git diff -R`, times code changes against their base
# in one run), or @REV: the tree of git revision REV (e.g. base=@HEAD times the
# last commit next to the working tree's changes; on a machine that receives a copy of the
# working tree, check that its git objects include that commit: they can be older). Results and build logs go to $OUT (default
# ./gpu_out): NAME.json, NAME.log, and the same for the peer when CAUSAL_CONV1D_PEER names
# upstream's install prefix.
#
#   scripts/gpu_variants.sh [--bench-args 'ARGS'] NAME=SED ...
#   scripts/gpu_variants.sh --bench-args '--only bwd --quick' base=. \
#       cf5='s/kNvidia: return {128, 4, 4, 16, 2, false}/kNvidia: return {128, 5, 5, 16, 2, false}/'
#
# Every variant prints its bench.py table; the last lines compare each row across variants.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
OUT=${OUT:-$repo/gpu_out}
mkdir -p "$OUT"
bench_args=(--only bwd --quick)
variants=()
while (($#)); do
  case $1 in
    --bench-args) read -ra bench_args <<<"$2"; shift 2 ;;
    *=*) variants+=("$1"); shift ;;
    *) echo "gpu_variants: expected NAME=SED, NAME=+PATCH or NAME=@REV, got '$1'" >&2; exit 2 ;;
  esac
done
((${#variants[@]})) || { sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2; }
export CAUSAL_CONV1D_CUDA_ARCHS=${CAUSAL_CONV1D_CUDA_ARCHS:-90} PYTHONUNBUFFERED=1
if [[ -x /usr/bin/g++ ]]; then export CXX=/usr/bin/g++ CUDAHOSTCXX=/usr/bin/g++; fi
jobs=$(($(nproc) / ${#variants[@]}))
((jobs > 0)) || jobs=1
status=0
for v in "${variants[@]}"; do
  name=${v%%=*} expr=${v#*=}
  (
    src=/tmp/variant-$name
    rm -rf "$src" "$src.site"
    mkdir -p "$src"
    if [[ $expr == @* ]]; then
      git -C "$repo" archive "${expr#@}" | tar -x -C "$src" || exit 1
    else
      git -C "$repo" ls-files -z --cached --others --exclude-standard | (cd "$repo" && xargs -0 cp --parents -t "$src")
      if [[ $expr == +* ]]; then
        git -C "$src" apply "$(realpath "${expr#+}")" || exit 1
      elif [[ $expr != . ]]; then
        sed -i -e "$expr" "$src/csrc/kernels/tuning.h"
      fi
    fi
    if [[ $expr != . && $expr != @* && $expr != +* ]] && cmp -s "$src/csrc/kernels/tuning.h" "$repo/csrc/kernels/tuning.h"; then
      echo "$name: the sed expression changed nothing in tuning.h" >"$OUT/$name.build.log"
      exit 1
    fi
    cd "$src" && MAX_JOBS=$jobs CMAKE_BUILD_PARALLEL_LEVEL=$jobs python3 -m pip install --no-build-isolation --no-deps \
      --disable-pip-version-check -q --target "$src.site" . >"$OUT/$name.build.log" 2>&1
  ) &
done
for job in $(jobs -p); do wait "$job" || status=1; done
for v in "${variants[@]}"; do
  name=${v%%=*}
  if [[ ! -d /tmp/variant-$name.site/causal_conv1d ]]; then
    echo "$name: build failed"; tail -n 30 "$OUT/$name.build.log"; status=1; continue
  fi
  (cd /tmp && PYTHONPATH=/tmp/variant-$name.site python3 "$repo/benchmarks/bench.py" --impl "$name" \
    "${bench_args[@]}" --json "$OUT/$name.json") >"$OUT/$name.log" 2>&1 || { tail -n 20 "$OUT/$name.log"; status=1; }
done
if [[ -n ${CAUSAL_CONV1D_PEER:-} ]]; then
  (cd /tmp && PYTHONPATH=$CAUSAL_CONV1D_PEER python3 "$repo/benchmarks/bench.py" --impl upstream \
    "${bench_args[@]}" --json "$OUT/upstream.json") >"$OUT/upstream.log" 2>&1 || { tail -n 20 "$OUT/upstream.log"; status=1; }
fi
python3 - "$OUT" <<'PY'
import glob, json, os, sys
runs = {}
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    try:
        data = json.load(open(path))
    except (OSError, ValueError):
        continue
    for r in data.get("rows", []):
        if r["impl"] in ("F.conv1d",):
            continue
        k = (r["op"], r["layout"], r["dtype"], tuple(r["shape"]), r["width"], r["variant"])
        runs.setdefault(k, {})[r["impl"]] = r
names = sorted({i for v in runs.values() for i in v})
print("\n" + " " * 48 + "".join(f"{n:>16}" for n in names) + "   (us, % of copy)")
for k, v in runs.items():
    cells = "".join(f"{v[n]['us']:9.1f} {v[n]['pct_copy']:5.1f}%" if n in v else " " * 16 for n in names)
    print(f"{k[0]:4} {k[1]:3} {k[2]:5} w{k[4]} {str(k[3]):18} {k[5]:13}" + cells)
PY
exit $status
