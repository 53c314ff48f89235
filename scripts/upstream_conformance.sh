#!/usr/bin/env bash
# Upstream's own test suite against the installed causal_conv1d (ours), on a GPU machine.
#
#   scripts/upstream_conformance.sh UPSTREAM_CHECKOUT [PYTEST_ARGS...]
#
# UPSTREAM_CHECKOUT is a checkout of Dao-AILab/causal-conv1d kept outside the package (e.g. the
# git-ignored peers/causal-conv1d); nothing of it is copied into this repository. Its
# tests/test_causal_conv1d.py runs unchanged except for its imports: the functions under test
# (causal_conv1d_fn, causal_conv1d_update, causal_conv1d_varlen_states, ...) come from the installed
# package, while the pure-PyTorch references (every imported name ending in _ref) are taken from
# upstream's own source files, so our package is never judged by our own references.
#
# Prints the pass / fail / skip counts and exits non-zero on any failure or error, or when no
# test ran. Extra arguments go to pytest (e.g. -n 8 with pytest-xdist, -k update).
set -euo pipefail
(($# >= 1)) || { sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2; }
upstream=$(cd "$1" && pwd -P)
shift
py=${PYTHON:-python3}
for f in tests/test_causal_conv1d.py causal_conv1d/causal_conv1d_interface.py causal_conv1d/causal_conv1d_varlen.py; do
  [[ -f $upstream/$f ]] || { echo "upstream_conformance: $upstream/$f not found (not a causal-conv1d checkout?)" >&2; exit 2; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$py" - "$upstream" "$work" <<'PY'
"""Writes the test module with rewritten imports and a module holding upstream's references."""
import ast
import sys
from pathlib import Path

upstream, work = Path(sys.argv[1]), Path(sys.argv[2])

# Upstream's references, taken verbatim (by name) from its source files and run with the module
# globals they use. Their files are not imported: those also load upstream's compiled extension.
sources = ["causal_conv1d/causal_conv1d_interface.py", "causal_conv1d/causal_conv1d_varlen.py"]
refs = {}
for rel in sources:
    text = (upstream / rel).read_text()
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef) and node.name.endswith("_ref"):
            refs[node.name] = ast.get_source_segment(text, node)
header = "import torch\nimport torch.nn.functional as F\nfrom torch import Tensor\nfrom einops import rearrange\n\n"
(work / "_upstream_refs.py").write_text(header + "\n\n".join(refs.values()) + "\n")

test_path = upstream / "tests" / "test_causal_conv1d.py"
text = test_path.read_text()
lines = text.splitlines(keepends=True)
edits = []
for node in ast.parse(text).body:
    if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("causal_conv1d"):
        ours = [a for a in node.names if not a.name.endswith("_ref")]
        theirs = [a for a in node.names if a.name.endswith("_ref")]
        missing = [a.name for a in theirs if a.name not in refs]
        if missing:
            sys.exit(f"upstream_conformance: reference(s) {missing} not found in {sources}")
        fmt = lambda names: ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in names)
        new = ""
        if ours:
            new += f"from {node.module} import {fmt(ours)}\n"
        if theirs:
            new += f"from _upstream_refs import {fmt(theirs)}  # upstream's own reference\n"
        edits.append((node.lineno - 1, node.end_lineno, new))
for start, end, new in reversed(edits):
    lines[start:end] = [new]
(work / "test_causal_conv1d.py").write_text("".join(lines))
print(f"references from upstream: {', '.join(sorted(refs))}")
PY

# The package under test must be ours (installed), not upstream's.
"$py" - <<'PY'
import causal_conv1d
from causal_conv1d._ops import build_config
cfg = build_config()
print(f"package under test: causal_conv1d {causal_conv1d.__version__} from {causal_conv1d.__file__} "
      f"(backend {cfg['backend']}, archs {cfg['gpu_archs'] or '-'})")
PY
rev=$(git -C "$upstream" rev-parse --short HEAD 2>/dev/null || echo "unknown revision")
version=$(sed -n 's/^__version__ = "\(.*\)"/\1/p' "$upstream/causal_conv1d/__init__.py")
echo "upstream tests: causal-conv1d $version ($rev), $(wc -l <"$work/test_causal_conv1d.py") lines"

set +e
(cd "$work" && "$py" -m pytest test_causal_conv1d.py -q -p no:cacheprovider -o addopts= \
  --junitxml="$work/junit.xml" "$@")
rc=$?
set -e
"$py" - "$work/junit.xml" "$rc" <<'PY'
import sys
import xml.etree.ElementTree as ET

path, rc = sys.argv[1], int(sys.argv[2])
try:
    root = ET.parse(path).getroot()
except (OSError, ET.ParseError) as e:
    sys.exit(f"upstream conformance: no results ({e}); pytest exit code {rc}")
suites = [root] if root.tag == "testsuite" else list(root)
count = {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")}
passed = count["tests"] - count["failures"] - count["errors"] - count["skipped"]
print(f"upstream conformance: {passed} passed, {count['failures']} failed, {count['errors']} errors, "
      f"{count['skipped']} skipped")
ok = passed > 0 and count["failures"] == 0 and count["errors"] == 0 and rc in (0,)
sys.exit(0 if ok else 1)
PY
