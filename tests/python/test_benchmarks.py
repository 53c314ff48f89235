"""The benchmark scripts still run: benchmarks/serving_bench.py on the CPU backend with small
shapes (its GPU rows time the same calls)."""

import json
import os
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
