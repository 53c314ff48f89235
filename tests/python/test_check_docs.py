"""scripts/check_docs.py: the repository's README and docs/ pass it, and it fails (exit status 1)
on each kind of mistake it is there to catch, shown on a small stand-in repository."""

import importlib.util
import json
import os

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
_spec = importlib.util.spec_from_file_location("check_docs", os.path.join(ROOT, "scripts", "check_docs.py"))
check_docs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_docs)


def test_repository_docs_pass():
    assert check_docs.problems(os.path.abspath(ROOT)) == []


DATA = {
    "about": "",
    "columns": [{"transformers": "5.0.0", "device": "CPU", "where": "dev root"}],
    "models": [
        {"model_type": "m1", "name": "M-1", "class": "M1ForCausalLM", "results": [{"max_diff": "1.0e-07", "logit_scale": "0.5"}]},
        {"model_type": "m2", "class": "M2ForCausalLM", "results": [{"not_run": "not in this version"}]},
    ],
}
TABLE = """| model type | class | transformers 5.0.0, CPU (dev root) |
|---|---|---|
| `m1` (M-1) | `M1ForCausalLM` | 1.0e-07 (0.5) |
| `m2` | `M2ForCausalLM` | not in this version |
"""
README = """# x

## Quick start

```bash
sudo scripts/devroot.sh python3 -m causal_conv1d   # a comment
sudo scripts/devroot.sh scripts/test.sh
```

See [install](docs/install.md#which-rocm), `scripts/test.sh`, `tests/python/test_*.py` and upstream's
`tests/test_causal_conv1d.py`; [site](https://example.org/missing.md); [the install page][install].

[install]: docs/install.md
"""
CI = """#!/usr/bin/env bash
echo "=== scripts/devroot.sh scripts/test.sh"
scripts/devroot.sh python3 -m causal_conv1d
scripts/devroot.sh scripts/test.sh
"""


@pytest.fixture
def repo(tmp_path):
    files = {
        "README.md": README,
        ".ci/run": CI,
        "docs/install.md": "# Install\n\n## Which ROCm?\n\nBack to the [README](../README.md#quick-start).\n",
        "docs/transformers.md": "# T\n\n<!-- transformers-table: generated -->\n" + TABLE + "<!-- end transformers-table -->\n",
        "tests/data/transformers_models.json": json.dumps(DATA),
        "tests/python/test_a.py": "",
        "scripts/test.sh": "",
        "scripts/devroot.sh": "",
    }
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def edit(repo, name, old, new):
    path = repo / name
    text = path.read_text()
    assert old in text, (name, old)
    path.write_text(text.replace(old, new))


def test_stand_in_repository_passes(repo):
    assert check_docs.problems(str(repo)) == []


@pytest.mark.parametrize(
    "name, old, new, expected",
    [
        ("README.md", "(docs/install.md#which-rocm)", "(docs/setup.md)", "docs/setup.md does not exist"),
        ("README.md", "#which-rocm)", "#which-cuda)", "has no heading #which-cuda"),
        ("README.md", "[install]: docs/install.md", "[install]: docs/installing.md", "docs/installing.md does not exist"),
        ("docs/install.md", "(../README.md#quick-start)", "(../../README.md)", "leaves the repository"),
        ("README.md", "`scripts/test.sh`", "`scripts/tests.sh`", "names scripts/tests.sh, which does not exist"),
        ("README.md", "`tests/python/test_*.py`", "`tests/python/bench_*.py`", "matches no file"),
        ("README.md", "sudo scripts/devroot.sh scripts/test.sh", "sudo scripts/devroot.sh scripts/test.sh -x",
         "does not run the test suite"),
        (".ci/run", "scripts/devroot.sh scripts/test.sh\n", "scripts/test.sh\n", ".ci/run: does not run"),
        (".ci/run", "scripts/devroot.sh python3 -m causal_conv1d\n", "", "is not a line of .ci/run"),
        ("README.md", "## Quick start", "## Getting started", "no \"## Quick start\" section"),
        ("docs/transformers.md", "1.0e-07 (0.5)", "1.1e-07 (0.5)", "the table differs"),
    ],
)
def test_each_mistake_is_found(repo, name, old, new, expected):
    edit(repo, name, old, new)
    found = check_docs.problems(str(repo))
    assert any(expected in problem for problem in found), found


def test_write_regenerates_the_table(repo):
    edit(repo, "docs/transformers.md", "1.0e-07 (0.5)", "stale")
    assert check_docs.problems(str(repo), write=True) == []
    assert TABLE in (repo / "docs/transformers.md").read_text()


def test_main_exits_non_zero_on_a_problem(repo, capsys):
    assert check_docs.main([], root=str(repo)) == 0
    edit(repo, "README.md", "`scripts/test.sh`", "`scripts/missing.sh`")
    assert check_docs.main([], root=str(repo)) == 1
    assert "1 problem(s)" in capsys.readouterr().out
