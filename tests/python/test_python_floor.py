"""The package's modules keep to the Python floor pyproject.toml declares (requires-python).

CI has no interpreter that old (Debian 12: 3.11; the dev root: Debian unstable's), so this checks
the source instead of importing it: each module parses with the floor's grammar, and nothing that
runs at import or call time needs a newer Python: PEP 604 unions (`torch.Tensor | None`) in
annotations evaluated at definition time (no `from __future__ import annotations`) or in
isinstance/issubclass, and the newer keyword arguments `zip(strict=)`, `dataclass(slots=,
kw_only=)`. It does not cover standard-library functions added after the floor in general.
"""

import ast
import os
import re

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")

# The modules a wheel ships ([tool.setuptools] packages and py-modules in pyproject.toml), and the
# build's own Python program, which the configure runs with the Python the package is built for.
PACKAGE_FILES = sorted(
    [os.path.join("causal_conv1d", f) for f in os.listdir(os.path.join(ROOT, "causal_conv1d")) if f.endswith(".py")]
    + ["causal_conv1d_cuda.py", os.path.join("cmake", "torch_query.py")]
)


def python_floor():
    text = open(os.path.join(ROOT, "pyproject.toml")).read()
    match = re.search(r'^requires-python\s*=\s*">=\s*(\d+)\.(\d+)"', text, re.M)
    assert match, "pyproject.toml: requires-python must read \">=X.Y\""
    return int(match.group(1)), int(match.group(2))


def _has_bitor(node):
    return node is not None and any(
        isinstance(n, ast.BinOp) and isinstance(n.op, ast.BitOr) for n in ast.walk(node)
    )


def runtime_problems(source, filename, floor):
    """What in `source` needs a Python newer than `floor` at import or call time, as
    'file:line: reason' strings. A syntax error under the floor's grammar is one such problem."""
    try:
        tree = ast.parse(source, filename, feature_version=floor)
    except SyntaxError as err:
        return [f"{filename}:{err.lineno}: not Python {floor[0]}.{floor[1]} syntax: {err.msg}"]
    postponed = any(
        isinstance(n, ast.ImportFrom) and n.module == "__future__" and any(a.name == "annotations" for a in n.names)
        for n in tree.body
    )
    problems = []
    for node in ast.walk(tree):
        where = f"{filename}:{getattr(node, 'lineno', '?')}"
        if not postponed:
            annotations = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args
                every = args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]
                annotations = [a.annotation for a in every if a is not None] + [node.returns]
            elif isinstance(node, ast.AnnAssign):
                annotations = [node.annotation]  # evaluated at module and class level
            if any(_has_bitor(a) for a in annotations):
                problems.append(f"{where}: `X | Y` in an annotation evaluated at definition time (Python >= 3.10)")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            name = node.func.id
            if name in ("isinstance", "issubclass") and len(node.args) == 2 and _has_bitor(node.args[1]):
                problems.append(f"{where}: `X | Y` as {name}'s type (Python >= 3.10)")
            keywords = {k.arg for k in node.keywords}
            if name == "zip" and "strict" in keywords:
                problems.append(f"{where}: zip(strict=) (Python >= 3.10)")
            if name == "dataclass" and keywords & {"slots", "kw_only", "match_args"}:
                problems.append(f"{where}: dataclass({', '.join(sorted(keywords))}) (Python >= 3.10)")
    return problems


@pytest.mark.parametrize("path", PACKAGE_FILES)
def test_module_runs_on_the_declared_floor(path):
    floor = python_floor()
    with open(os.path.join(ROOT, path)) as f:
        source = f.read()
    assert runtime_problems(source, path, floor) == []


@pytest.mark.parametrize(
    "source, expected",
    [
        ("import torch\ndef f(x: torch.Tensor | None): pass\n", "annotation"),
        ("def f(x) -> int | None: pass\n", "annotation"),
        ("class A:\n    x: int | None = None\n", "annotation"),
        ("isinstance(1, int | str)\n", "isinstance"),
        ("list(zip([1], [2], strict=True))\n", "zip(strict=)"),
        ("match 1:\n    case 1: pass\n", "syntax"),
    ],
)
def test_check_finds_what_needs_a_newer_python(source, expected):
    problems = runtime_problems(source, "example.py", (3, 9))
    assert len(problems) == 1 and expected in problems[0], problems


def test_check_accepts_postponed_and_optional_annotations():
    postponed = "from __future__ import annotations\nimport torch\ndef f(x: torch.Tensor | None): pass\n"
    optional = "from typing import Optional\nimport torch\ndef f(x: Optional[torch.Tensor]) -> bool: return x | 1\n"
    assert runtime_problems(postponed, "a.py", (3, 9)) == []
    assert runtime_problems(optional, "b.py", (3, 9)) == []
