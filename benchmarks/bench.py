#!/usr/bin/env python3
"""Effective bandwidth of the GPU kernels against device-to-device copy bandwidth, same process.

effective bandwidth = minimal bytes that must move (read x, write out, plus states, weights,
bias; for the update also conv_state read and written) / kernel time. Copy bandwidth = bytes read
plus written by a large device-to-device tensor copy. The ratio of the two is what the targets
are stated in. Inputs rotate among several buffer sets so no call is served from the L2 cache.

    python benchmarks/bench.py                      # the table from design.md / the issues
    python benchmarks/bench.py --json out.json --quick

Prints a table and writes every number to --json.
"""

import argparse
import datetime
import json
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import causal_conv1d  # noqa: F401  (loads the ops)
from causal_conv1d import causal_conv1d_update
from causal_conv1d._ops import ops

FWD_SHAPES = [(1, 8192, 16384), (4, 5376, 8192), (8, 4096, 4096), (16, 2048, 2048), (2, 8192, 1024)]
UPDATE_BATCHES = [1, 16, 64, 256]
ROTATE_BYTES = 256 << 20  # rotate buffer sets until at least this much memory is touched per cycle


def esize(dtype):
    return torch.tensor([], dtype=dtype).element_size()


def time_calls(calls, reps, warmup=3):
    """Median time (s) of one call, timing each with CUDA events; calls rotate over buffer sets."""
    for i in range(warmup * len(calls)):
        calls[i % len(calls)]()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        starts[i].record()
        calls[i % len(calls)]()
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)) / 1e3


def copy_bandwidth(nbytes=2 << 30):
    src = torch.empty(nbytes // 2, dtype=torch.bfloat16, device="cuda").normal_()
    dst = torch.empty_like(src)
    t = time_calls([lambda: dst.copy_(src)], reps=20)
    return 2 * nbytes / t


def n_sets(bytes_per_call):
    return max(1, math.ceil(ROTATE_BYTES / max(bytes_per_call, 1)))


def bench_fwd(shape, layout, dtype, width=4, reps=30):
    batch, dim, seqlen = shape
    nbytes = 2 * batch * dim * seqlen * esize(dtype)
    w = torch.randn(dim, width, device="cuda", dtype=dtype)
    b = torch.randn(dim, device="cuda", dtype=dtype)
    calls = []
    for _ in range(n_sets(nbytes)):
        if layout == "cl":
            x = torch.randn(batch, seqlen, dim, device="cuda", dtype=dtype).transpose(1, 2)
            out = torch.empty(batch, seqlen, dim, device="cuda", dtype=dtype).transpose(1, 2)
        else:
            x = torch.randn(batch, dim, seqlen, device="cuda", dtype=dtype)
            out = torch.empty_like(x)
        calls.append(lambda x=x, out=out: ops.fwd(x, w, b, None, None, out, None, True))
    t = time_calls(calls, reps)
    moved = nbytes + (dim * width + dim) * esize(dtype)
    return t, moved


def bench_bwd(shape, layout, dtype, deterministic, width=4, reps=20):
    """Backward kernel time; bytes = read x and dout, write dx, plus the dweight/dbias partials."""
    batch, dim, seqlen = shape
    nbytes = 3 * batch * dim * seqlen * esize(dtype)
    w = torch.randn(dim, width, device="cuda", dtype=dtype)
    b = torch.randn(dim, device="cuda", dtype=dtype)
    dw = torch.zeros(dim, width, device="cuda")
    db = torch.zeros(dim, device="cuda")
    calls = []
    for _ in range(n_sets(nbytes)):
        if layout == "cl":
            x, dout, dx = (torch.randn(batch, seqlen, dim, device="cuda", dtype=dtype).transpose(1, 2) for _ in range(3))
        else:
            x, dout, dx = (torch.randn(batch, dim, seqlen, device="cuda", dtype=dtype) for _ in range(3))
        calls.append(lambda x=x, dout=dout, dx=dx: ops.bwd(x, w, b, dout, None, None, None, dx, dw, db, None, True,
                                                          deterministic))
    t = time_calls(calls, reps)
    tiles = seqlen / (64 if layout == "cl" else 128 * (16 // esize(dtype)))
    partials = 2 * batch * math.ceil(tiles) * dim * (width + 1) * 4 if deterministic else 0
    return t, nbytes + partials + 2 * (dim * width + dim) * esize(dtype)


def bench_fwd_torch_fallback(shape, dtype, width=4, reps=10):
    """What models fall back to without the extension: F.conv1d(groups=dim) + SiLU."""
    batch, dim, seqlen = shape
    x = torch.randn(batch, dim, seqlen, device="cuda", dtype=dtype)
    w = torch.randn(dim, 1, width, device="cuda", dtype=dtype)
    b = torch.randn(dim, device="cuda", dtype=dtype)
    t = time_calls([lambda: F.silu(F.conv1d(x, w, b, padding=width - 1, groups=dim)[..., :seqlen])], reps)
    return t, 2 * x.numel() * esize(dtype)


def update_sets(batch, dim, width, state_len, dtype, count):
    w = torch.randn(dim, width, device="cuda", dtype=dtype)
    b = torch.randn(dim, device="cuda", dtype=dtype)
    sets = []
    for _ in range(count):
        x = torch.randn(batch, dim, device="cuda", dtype=dtype)
        state = torch.randn(batch, dim, state_len, device="cuda", dtype=dtype)
        sets.append((x, state, torch.empty_like(x)))
    return w, b, sets


def bench_update_graph(batch, dim, dtype, width=4, reps=20):
    """Kernel time per update, from replays of a CUDA graph of many updates (no launch gaps)."""
    state_len = width - 1
    per_call = batch * dim * (2 + 2 * state_len) * esize(dtype)
    count = max(8, n_sets(per_call))
    w, b, sets = update_sets(batch, dim, width, state_len, dtype, count)
    for x, state, out in sets:  # warm up outside capture
        ops.update(x, state, w, b, out, True, None, None)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for x, state, out in sets:
            ops.update(x, state, w, b, out, True, None, None)
    graph.replay()
    torch.cuda.synchronize()
    t = time_calls([graph.replay], reps) / count
    return t, per_call + (dim * width + dim) * esize(dtype)


def bench_update_eager(dim=8192, dtype=torch.bfloat16, width=4, calls=2000):
    """Wall time per eager causal_conv1d_update call from Python at batch 1 (the decode loop)."""
    w, b, sets = update_sets(1, dim, width, width - 1, dtype, 1)
    x, state, _ = sets[0]
    for _ in range(200):
        causal_conv1d_update(x, state, w, b, "silu")
    torch.cuda.synchronize()
    samples = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            causal_conv1d_update(x, state, w, b, "silu")
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - start) / calls)
    return statistics.median(samples)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="write all results here")
    ap.add_argument("--quick", action="store_true", help="bf16 only, fewer repetitions")
    ap.add_argument("--no-fallback", action="store_true", help="skip the F.conv1d comparison")
    ap.add_argument("--only", choices=["all", "fwd", "bwd", "update"], default="all", help="which kernels to time")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench.py needs a GPU", file=sys.stderr)
        return 2

    props = torch.cuda.get_device_properties(0)
    info = {
        "device": props.name,
        "date": datetime.date.today().isoformat(),
        "torch": torch.__version__,
        "runtime": f"HIP {torch.version.hip}" if torch.version.hip else f"CUDA {torch.version.cuda}",
    }
    copy_bw = copy_bandwidth()
    info["copy_GBps"] = copy_bw / 1e9
    results = []

    def add(kind, layout, dtype, shape, t, moved, target=None):
        bw = moved / t
        row = dict(kind=kind, layout=layout, dtype=str(dtype).replace("torch.", ""), shape=list(shape),
                   time_us=t * 1e6, GBps=bw / 1e9, ratio=bw / copy_bw, target=target)
        results.append(row)
        mark = "" if target is None else ("  ok" if row["ratio"] >= target else f"  MISS (target {target:.0%})")
        print(f"{kind:8} {layout:3} {row['dtype']:9} {str(tuple(shape)):20} {row['time_us']:9.1f} us "
              f"{row['GBps']:8.0f} GB/s {row['ratio']:6.1%}{mark}", flush=True)

    print(f"{info['device']}, {info['runtime']}, torch {info['torch']}, {info['date']}")
    print(f"device-to-device copy: {copy_bw / 1e9:.0f} GB/s (read + write)")
    dtypes = [torch.bfloat16] if args.quick else [torch.bfloat16, torch.float16, torch.float32]
    for dtype in dtypes if args.only in ("all", "fwd") else []:
        for layout in ("cf", "cl"):
            for shape in FWD_SHAPES:
                small = shape == (2, 8192, 1024)
                target = 0.75 if small else (0.93 if layout == "cf" else 0.90)
                t, moved = bench_fwd(shape, layout, dtype, reps=10 if args.quick else 30)
                add("fwd", layout, dtype, shape, t, moved, target if dtype == torch.bfloat16 else None)
    if args.only in ("all", "bwd"):
        for layout in ("cf", "cl"):
            for shape in FWD_SHAPES:
                small = shape == (2, 8192, 1024)
                target = 0.60 if small else (0.88 if layout == "cf" else 0.85)
                t_def, moved = bench_bwd(shape, layout, torch.bfloat16, False, reps=10 if args.quick else 20)
                add("bwd", layout, torch.bfloat16, shape, t_def, moved, target)
                t_det, moved = bench_bwd(shape, layout, torch.bfloat16, True, reps=10 if args.quick else 20)
                add("bwd-det", layout, torch.bfloat16, shape, t_det, moved)
                results[-1]["det_over_default"] = t_det / t_def
                print(f"         deterministic / default time: {t_det / t_def:.2f} (target <= 1.30)")
    if args.only in ("all", "update"):
        for batch in UPDATE_BATCHES:
            t, moved = bench_update_graph(batch, 8192, torch.bfloat16)
            add("update", "-", torch.bfloat16, (batch, 8192, 1), t, moved, 0.70 if batch == 256 else None)
        eager = bench_update_eager()
        info["update_eager_batch1_us"] = eager * 1e6
        print(f"update, eager from Python, batch 1, dim 8192: {eager * 1e6:.1f} us per call (target <= 10 us)")
    if not args.no_fallback and args.only == "all":
        t, moved = bench_fwd_torch_fallback((8, 4096, 4096), torch.bfloat16)
        add("F.conv1d", "cf", torch.bfloat16, (8, 4096, 4096), t, moved)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"info": info, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
