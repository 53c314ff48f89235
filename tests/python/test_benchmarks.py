"""The benchmark scripts still run: benchmarks/serving_bench.py on the CPU backend with small
shapes (its GPU rows time the same calls), and benchmarks/bench.py's CPU mode."""

import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_serving_bench_cpu_smoke(tmp_path):
    out = tmp_path / "serving.json"
    script = os.path.join(ROOT, "benchmarks", "serving_bench.py")
    subprocess.run([sys.executable, script, "--device", "cpu", "--quick", "--json", str(out)], check=True,
                   cwd=tmp_path)
    rows = json.load(open(out))["rows"]
    seen = {(r["op"], r["layout"], r["variant"]) for r in rows}
    for layout in ("dim", "state"):
        assert ("prefill", layout, "") in seen
        assert ("decode", layout, "indices") in seen
    assert ("fwd", "cl", "same tokens") in seen and ("update", "state", "plain") in seen
    assert ("update", "state", "plain, indices") in seen
    assert all(r["us"] > 0 and r["GBps"] > 0 for r in rows)


def test_serving_bench_only_decode(tmp_path):
    out = tmp_path / "serving.json"
    script = os.path.join(ROOT, "benchmarks", "serving_bench.py")
    subprocess.run([sys.executable, script, "--device", "cpu", "--quick", "--only", "decode", "--json", str(out)],
                   check=True, cwd=tmp_path)
    ops = {r["op"] for r in json.load(open(out))["rows"]}
    assert ops == {"decode", "update"}


def test_bench_cpu_mode(tmp_path):
    # The CPU figures of docs/performance.md: every row, the kernel into out over rotated buffer
    # sets (here one set each: --rotate-bytes below one call's bytes), next to F.conv1d.
    out = tmp_path / "cpu.json"
    script = os.path.join(ROOT, "benchmarks", "bench.py")
    subprocess.run([sys.executable, script, "--device", "cpu", "--threads", "2", "--rotate-bytes", "1e6", "--json",
                    str(out)], check=True, cwd=tmp_path)
    rows = json.load(open(out))["rows"]
    seen = {(r["impl"], r["op"], r["layout"], r["dtype"], r["variant"]) for r in rows}
    for dtype in ("fp32", "bf16"):
        for layout in ("cf", "cl"):
            assert ("ours", "fwd", layout, dtype, "out") in seen
            assert ("F.conv1d", "fwd", layout, dtype, "") in seen
            assert ("ours", "fwd+bwd", layout, dtype, "autograd") in seen
    assert ("ours", "update", "-", "fp32", "eager") in seen
    assert all(r["us"] > 0 and r["GBps"] > 0 and r["pct_copy"] > 0 for r in rows)


def _report(*args, cwd=None):
    script = os.path.join(ROOT, "benchmarks", "report.py")
    return subprocess.run([sys.executable, script, *args], capture_output=True, text=True, cwd=cwd)


def test_doc_tables_match_the_committed_gpu_results():
    # README.md's and docs/performance.md's GPU tables are benchmarks/results/h200.json's figures.
    res = _report(os.path.join(ROOT, "benchmarks", "results", "h200.json"), "--check-docs")
    assert res.returncode == 0, res.stdout + res.stderr


def test_doc_tables_check_and_update(tmp_path):
    results = os.path.join(ROOT, "benchmarks", "results", "h200.json")
    (tmp_path / "docs").mkdir()
    for rel in ("README.md", os.path.join("docs", "performance.md")):
        with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
            (tmp_path / rel).write_text(f.read(), encoding="utf-8")
    perf = tmp_path / "docs" / "performance.md"
    text = perf.read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| bwd, seq_idx | channel-first | bf16 |"))
    cells = row.split("|")
    cells[5] = " 1.0 "  # ours us
    perf.write_text(text.replace(row, "|".join(cells)), encoding="utf-8")
    res = _report(results, "--check-docs", "--root", str(tmp_path))
    assert res.returncode == 1 and "bwd, seq_idx" in res.stdout, res.stdout + res.stderr
    res = _report(results, "--update-docs", "--root", str(tmp_path))
    assert res.returncode == 0, res.stdout + res.stderr
    with open(os.path.join(ROOT, "docs", "performance.md"), encoding="utf-8") as f:
        assert perf.read_text(encoding="utf-8") == f.read()
    # The copy bandwidth the "% copy" cells are shares of is the run's too.
    readme = tmp_path / "README.md"
    committed = readme.read_text(encoding="utf-8")
    readme.write_text(re.sub(r"device copy's \((\d+) GB/s\)", "device copy's (1 GB/s)", committed), encoding="utf-8")
    res = _report(results, "--check-docs", "--root", str(tmp_path))
    assert res.returncode == 1 and "1 GB/s" in res.stdout, res.stdout + res.stderr
    res = _report(results, "--update-docs", "--root", str(tmp_path))
    assert res.returncode == 0 and readme.read_text(encoding="utf-8") == committed, res.stdout + res.stderr
    # A table row the run has no row for is an error, not a silently kept line.
    perf.write_text(text.replace(row, row.replace("(8, 4096, 4096)", "(8, 4096, 4095)")), encoding="utf-8")
    res = _report(results, "--check-docs", "--root", str(tmp_path))
    assert res.returncode != 0 and "no ours row" in res.stderr, res.stdout + res.stderr
