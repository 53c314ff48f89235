#!/usr/bin/env python3
"""Effective bandwidth of the GPU kernels next to device-to-device copy bandwidth and, with --peer,
next to another installed causal-conv1d (upstream built from source), all in one run.

effective bandwidth = minimal bytes that must move / kernel time. Forward: x read + out written;
backward: x and dout read + dx written; update: x read, out written, the conv_state window read
and written. Copy bandwidth = bytes read + written by a large device-to-device copy, measured in
the same process. Inputs rotate among enough buffer sets that every cycle touches more than
--rotate-bytes (default 256 MB: more than an H200's 60 MB L2 and a gfx1201's 64 MB Infinity
Cache), so no call is served from a cache.

Both implementations are driven through the same entry points, the `causal_conv1d_cuda` module
(ours provides upstream's signatures) and `causal_conv1d.causal_conv1d_update`; the peer runs in
a separate process with its prefix first on the import path.

    python benchmarks/bench.py                               # ours only
    python benchmarks/bench.py --peer /tmp/upstream --json benchmarks/results/h200.json
    python benchmarks/bench.py --quick --only fwd
    python benchmarks/bench.py --device cpu --threads 2    # the CPU backend, next to F.conv1d

Writes one row per (impl, op, layout, shape, dtype, width, variant) with `us` and `pct_copy`.
"""

import argparse
import datetime
import itertools
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

FWD_SHAPES = [(1, 8192, 16384), (4, 5376, 8192), (8, 4096, 4096), (16, 2048, 2048), (2, 8192, 1024), (1, 4096, 256)]
LARGE = [(1, 8192, 16384), (4, 5376, 8192), (8, 4096, 4096)]
UPDATE_BATCHES = [1, 16, 64, 256]
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def esize(dtype):
    return torch.tensor([], dtype=dtype).element_size()


def time_calls(calls, reps, warmup=3):
    """Median time (s) of one call, each timed with device events; calls rotate over buffer sets."""
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


def graph_time(calls):
    """Kernel time per call from replays of a CUDA graph holding every call once (no launch gaps,
    no host cost): what a captured training or serving step pays."""
    for c in calls:  # warm up outside capture
        c()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for c in calls:
            c()
    graph.replay()
    torch.cuda.synchronize()
    return time_calls([graph.replay], 20) / len(calls)


def copy_bandwidth(nbytes=2 << 30):
    src = torch.empty(nbytes // 2, dtype=torch.bfloat16, device="cuda").normal_()
    dst = torch.empty_like(src)
    t = time_calls([lambda: dst.copy_(src)], reps=20)
    del src, dst
    return 2 * nbytes / t


class Bench:
    def __init__(self, impl, rotate_bytes, quick):
        import causal_conv1d_cuda  # ours, or the peer's when its prefix is first on the path

        self.cc = causal_conv1d_cuda
        self.impl = impl
        self.rotate_bytes = rotate_bytes
        self.reps = 10 if quick else 30
        self.rows = []

    def sets(self, bytes_per_call):
        return max(1, math.ceil(self.rotate_bytes / max(bytes_per_call, 1)))

    def add(self, op, layout, dtype, shape, width, t, moved, variant=""):
        row = dict(impl=self.impl, op=op, layout=layout, dtype=dtype, shape=list(shape), width=width,
                   variant=variant, us=t * 1e6, GBps=moved / t / 1e9)
        self.rows.append(row)
        print(f"{self.impl:9} {op:7} {layout:3} {dtype:5} w{width} {str(tuple(shape)):20} {variant:12} "
              f"{row['us']:9.2f} us {row['GBps']:7.0f} GB/s", flush=True)

    def fwd(self, shape, layout, dtype, width=4, variant=""):
        batch, dim, seqlen = shape
        dt = DTYPES[dtype]
        nbytes = 2 * batch * dim * seqlen * esize(dt)
        w = torch.randn(dim, width, device="cuda", dtype=dt)
        b = torch.randn(dim, device="cuda", dtype=dt)
        calls = []
        for _ in range(self.sets(nbytes)):
            if layout == "cl":
                x = torch.randn(batch, seqlen, dim, device="cuda", dtype=dt).transpose(1, 2)
                out = torch.empty(batch, seqlen, dim, device="cuda", dtype=dt).transpose(1, 2)
            else:
                x = torch.randn(batch, dim, seqlen, device="cuda", dtype=dt)
                out = torch.empty_like(x)
            seq = init = fin = None
            if variant == "seq_idx":  # 8 packed sequences a row
                seq = (torch.arange(seqlen, device="cuda", dtype=torch.int32) * 8 // seqlen).expand(batch, seqlen)
                seq = seq.contiguous()
            if variant == "states":
                init = torch.randn(batch, width - 1, dim, device="cuda", dtype=dt).transpose(1, 2)
                fin = torch.empty(batch, width - 1, dim, device="cuda", dtype=dt).transpose(1, 2)
            calls.append(lambda x=x, out=out, seq=seq, init=init, fin=fin:
                         self.cc.causal_conv1d_fwd(x, w, b, seq, init, out, fin, True))
        self.add("fwd", layout, dtype, shape, width, time_calls(calls, self.reps), nbytes, variant)

    def bwd(self, shape, layout, dtype, deterministic, width=4, variant=""):
        """variant: "" | "seq_idx" (8 packed sequences a row) | "states" (initial_states in, dfinal_states
        in, dinitial_states out)."""
        batch, dim, seqlen = shape
        dt = DTYPES[dtype]
        nbytes = 3 * batch * dim * seqlen * esize(dt)
        w = torch.randn(dim, width, device="cuda", dtype=dt)
        b = torch.randn(dim, device="cuda", dtype=dt)
        dw = torch.zeros(dim, width, device="cuda")
        db = torch.zeros(dim, device="cuda")
        seq = None
        if variant == "seq_idx":
            seq = (torch.arange(seqlen, device="cuda", dtype=torch.int32) * 8 // seqlen).expand(batch, seqlen).contiguous()
        calls = []
        for _ in range(self.sets(nbytes)):
            if layout == "cl":
                x, dout, dx = (torch.randn(batch, seqlen, dim, device="cuda", dtype=dt).transpose(1, 2) for _ in range(3))
            else:
                x, dout, dx = (torch.randn(batch, dim, seqlen, device="cuda", dtype=dt) for _ in range(3))
            init = dfin = dinit = None
            if variant == "states":
                init, dfin, dinit = (torch.randn(batch, width - 1, dim, device="cuda", dtype=dt).transpose(1, 2)
                                     for _ in range(3))
            calls.append(lambda x=x, dout=dout, dx=dx, init=init, dfin=dfin, dinit=dinit:
                         self.cc.causal_conv1d_bwd(x, w, b, dout, seq, init, dfin, dx, dw, db, dinit, True))
        os.environ["CAUSAL_CONV1D_DETERMINISTIC"] = "1" if deterministic else "0"
        try:
            t = time_calls(calls, max(10, self.reps // 2))
        finally:
            del os.environ["CAUSAL_CONV1D_DETERMINISTIC"]
        self.add("bwd", layout, dtype, shape, width, t, nbytes, "deterministic" if deterministic else variant)

    def small_graph(self, op, shape, layout, dtype="bf16", width=4):
        """fwd or bwd of a small or mid-size shape inside a CUDA graph: kernel time (the eager rows
        time the same shapes from the host, where the host's cost per call can bound them)."""
        batch, dim, seqlen = shape
        dt = DTYPES[dtype]
        nbytes = (2 if op == "fwd" else 3) * batch * dim * seqlen * esize(dt)
        w = torch.randn(dim, width, device="cuda", dtype=dt)
        b = torch.randn(dim, device="cuda", dtype=dt)
        dw = torch.zeros(dim, width, device="cuda")
        db = torch.zeros(dim, device="cuda")

        def make():
            if layout == "cl":
                return torch.randn(batch, seqlen, dim, device="cuda", dtype=dt).transpose(1, 2)
            return torch.randn(batch, dim, seqlen, device="cuda", dtype=dt)

        calls = []
        for _ in range(max(8, self.sets(nbytes))):
            x, dout, out = make(), make(), make()
            if op == "fwd":
                calls.append(lambda x=x, out=out: self.cc.causal_conv1d_fwd(x, w, b, None, None, out, None, True))
            else:
                calls.append(lambda x=x, dout=dout, dx=out:
                             self.cc.causal_conv1d_bwd(x, w, b, dout, None, None, None, dx, dw, db, None, True))
        self.add(op, layout, dtype, shape, width, graph_time(calls), nbytes, "graph")

    def autograd(self, shape, layout, dtype="bf16", width=4):
        """Forward + backward through causal_conv1d_fn with autograd (x, weight, bias requiring
        grad), timed per step from the host. Bytes: the forward's x read and out written plus the
        backward's x and dout read and dx written."""
        from causal_conv1d import causal_conv1d_fn

        batch, dim, seqlen = shape
        dt = DTYPES[dtype]
        nbytes = 5 * batch * dim * seqlen * esize(dt)
        w = torch.randn(dim, width, device="cuda", dtype=dt, requires_grad=True)
        b = torch.randn(dim, device="cuda", dtype=dt, requires_grad=True)
        calls = []
        for _ in range(self.sets(nbytes)):
            if layout == "cl":
                x = torch.randn(batch, seqlen, dim, device="cuda", dtype=dt).transpose(1, 2)
            else:
                x = torch.randn(batch, dim, seqlen, device="cuda", dtype=dt)
            x.requires_grad_(True)
            dout = torch.randn_like(x)

            def step(x=x, dout=dout):
                causal_conv1d_fn(x, w, b, activation="silu").backward(dout)

            calls.append(step)
        self.add("fwd+bwd", layout, dtype, shape, width, time_calls(calls, self.reps), nbytes, "autograd")

    def update_graph(self, batch, dim=8192, dtype="bf16", width=4):
        """Kernel time per update from replays of a CUDA graph of many updates (no launch gaps)."""
        dt = DTYPES[dtype]
        state_len = width - 1
        per_call = batch * dim * (2 + 2 * state_len) * esize(dt)
        count = max(8, self.sets(per_call))
        w = torch.randn(dim, width, device="cuda", dtype=dt)
        b = torch.randn(dim, device="cuda", dtype=dt)
        # x and out (batch, dim, 1): the form upstream's extension takes (its Python adds the axis)
        sets = [(torch.randn(batch, dim, 1, device="cuda", dtype=dt),
                 torch.randn(batch, dim, state_len, device="cuda", dtype=dt),
                 torch.empty(batch, dim, 1, device="cuda", dtype=dt)) for _ in range(count)]
        calls = [lambda x=x, state=state, out=out: self.cc.causal_conv1d_update(x, state, w, b, out, True, None, None)
                 for x, state, out in sets]
        self.add("update", "-", dtype, (batch, dim, 1), width, graph_time(calls), per_call, "graph")

    def update_eager(self, dim=8192, dtype="bf16", width=4, calls=2000):
        """Wall time per eager causal_conv1d.causal_conv1d_update call from Python at batch 1."""
        from causal_conv1d import causal_conv1d_update

        dt = DTYPES[dtype]
        w = torch.randn(dim, width, device="cuda", dtype=dt)
        b = torch.randn(dim, device="cuda", dtype=dt)
        x = torch.randn(1, dim, device="cuda", dtype=dt)
        state = torch.randn(1, dim, width - 1, device="cuda", dtype=dt)
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
        t = statistics.median(samples)
        self.add("update", "-", dtype, (1, dim, 1), width, t, 1 * dim * (2 + 2 * (width - 1)) * esize(dt), "eager")

    def fallback(self, shape, dtype="bf16", width=4):
        """What models fall back to without the extension: F.conv1d(groups=dim) + SiLU."""
        batch, dim, seqlen = shape
        dt = DTYPES[dtype]
        nbytes = 2 * batch * dim * seqlen * esize(dt)
        w = torch.randn(dim, 1, width, device="cuda", dtype=dt)
        b = torch.randn(dim, device="cuda", dtype=dt)
        calls = []
        for _ in range(min(4, self.sets(nbytes))):
            x = torch.randn(batch, dim, seqlen, device="cuda", dtype=dt)
            calls.append(lambda x=x: F.silu(F.conv1d(x, w, b, padding=width - 1, groups=dim)[..., :seqlen]))
        self.add("fwd", "cf", dtype, shape, width, time_calls(calls, 5), nbytes)


def run_all(bench, only, quick):
    def safe(fn, *a, **k):
        try:
            fn(*a, **k)
        except (RuntimeError, AssertionError, TypeError) as e:  # a peer without the feature
            print(f"{bench.impl}: {fn.__name__}{a} {k}: unsupported ({str(e).splitlines()[0][:100]})", flush=True)

    dtypes = ["bf16"] if quick else ["bf16", "fp16", "fp32"]
    if only in ("all", "fwd"):
        for dtype in dtypes:
            for layout in ("cf", "cl"):
                for shape in FWD_SHAPES:
                    safe(bench.fwd, shape, layout, dtype)
        for width in (2, 3):
            for layout in ("cf", "cl"):
                safe(bench.fwd, (8, 4096, 4096), layout, "bf16", width)
        for layout in ("cf", "cl"):
            for variant in ("seq_idx", "states"):
                safe(bench.fwd, (8, 4096, 4096), layout, "bf16", 4, variant)
            for shape in ((1, 4096, 256), (2, 8192, 1024)):
                safe(bench.small_graph, "fwd", shape, layout)
    if only in ("all", "bwd"):
        for dtype in dtypes:
            for layout in ("cf", "cl"):
                for shape in LARGE + ([(2, 8192, 1024), (1, 4096, 256)] if dtype == "bf16" else []):
                    safe(bench.bwd, shape, layout, dtype, False)
        for layout in ("cf", "cl"):
            safe(bench.bwd, (8, 4096, 4096), layout, "bf16", True)
            for variant in ("seq_idx", "states"):
                safe(bench.bwd, (8, 4096, 4096), layout, "bf16", False, 4, variant)
        for layout in ("cf", "cl"):
            for shape in ((1, 4096, 256), (2, 8192, 1024)):
                safe(bench.small_graph, "bwd", shape, layout)
            safe(bench.autograd, (2, 8192, 1024), layout)
    if only in ("all", "update"):
        for batch in UPDATE_BATCHES:
            safe(bench.update_graph, batch)
        safe(bench.update_eager)


# --- CPU (--device cpu): the same measures on the CPU backend, next to F.conv1d ----------------

CPU_SHAPES = [(2, 1024, 4096), (1, 4096, 2048)]


def cpu_time(fn, min_reps=5, min_seconds=0.3):
    """Median wall time (s) of fn() over at least min_reps calls and min_seconds."""
    fn()
    fn()
    samples, start = [], time.perf_counter()
    while len(samples) < min_reps or time.perf_counter() - start < min_seconds:
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def cpu_copy_bandwidth(nbytes=128 << 20):
    src = torch.randn(nbytes // 4)
    dst = torch.empty_like(src)
    return 2 * nbytes / cpu_time(lambda: dst.copy_(src), min_reps=10)


def run_cpu(args):
    import causal_conv1d_cuda
    from causal_conv1d import causal_conv1d_fn, causal_conv1d_update

    torch.set_num_threads(args.threads)
    model = "CPU"
    if os.path.exists("/proc/cpuinfo"):
        model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                      if line.startswith("model name")), model)
    info = {"device": f"{model} ({os.cpu_count()} cores, {torch.get_num_threads()} threads)",
            "date": datetime.date.today().isoformat(), "torch": torch.__version__, "runtime": "CPU"}
    # Copy bandwidth varies by a third from run to run on a shared 2-core VM: measured before and
    # after the kernels, and the higher of the two is the reference (the conservative percentage).
    copy_first = cpu_copy_bandwidth()
    print(f"{info['device']}, torch {info['torch']}; copy {copy_first / 1e9:.2f} GB/s (read + write)", flush=True)
    rows = []

    def add(impl, op, layout, dtype, shape, t, moved, variant=""):
        row = dict(impl=impl, op=op, layout=layout, dtype=dtype, shape=list(shape), width=4, variant=variant,
                   us=t * 1e6, GBps=moved / t / 1e9)
        rows.append(row)
        print(f"{impl:9} {op:8} {layout:3} {dtype:5} {str(tuple(shape)):18} {variant:18} {row['us']:10.1f} us "
              f"{row['GBps']:6.2f} GB/s", flush=True)
        return t

    def make(shape, layout, dt, grad=False):
        batch, dim, seqlen = shape
        x = torch.randn(batch, seqlen, dim, dtype=dt).transpose(1, 2) if layout == "cl" else \
            torch.randn(batch, dim, seqlen, dtype=dt)
        return x.requires_grad_(grad)

    def rotated(shape, layout, dt, nbytes):
        """A call of the kernel into a preallocated out that takes the next of enough (x, out) sets
        to move more than --rotate-bytes a cycle, so no set is still in the caches (an L3 holds
        one set of these shapes) when its turn comes again, as a copy's source is not."""
        sets = [make(shape, layout, dt) for _ in range(max(1, math.ceil(args.rotate_bytes / nbytes)))]
        sets = [(x, torch.empty_like(x)) for x in sets]
        w, b = torch.randn(shape[1], 4, dtype=dt), torch.randn(shape[1], dtype=dt)
        turn = itertools.count()

        def call():
            x, out = sets[next(turn) % len(sets)]
            causal_conv1d_cuda.causal_conv1d_fwd(x, w, b, None, None, out, None, True)
        return call

    for dtype in ("fp32", "bf16"):
        dt = DTYPES[dtype]
        for layout in ("cf", "cl"):
            for shape in CPU_SHAPES:
                x = make(shape, layout, dt)
                w = torch.randn(shape[1], 4, dtype=dt)
                b = torch.randn(shape[1], dtype=dt)
                nbytes = 2 * x.numel() * esize(dt)
                # "out": the kernel into a preallocated output (the measure next to copy, which
                # also writes into an existing tensor), over rotated buffers; "": the public call,
                # which allocates its output as F.conv1d does (a fresh 32 MB tensor is fresh
                # pages: the kernel zeroes them on first touch, which costs more than the
                # convolution on this machine).
                add("ours", "fwd", layout, dtype, shape, cpu_time(rotated(shape, layout, dt, nbytes), min_reps=10),
                    nbytes, "out")
                add("ours", "fwd", layout, dtype, shape, cpu_time(lambda: causal_conv1d_fn(x, w, b, activation="silu")),
                    nbytes)
                w3 = w.unsqueeze(1)
                add("F.conv1d", "fwd", layout, dtype, shape,
                    cpu_time(lambda: F.silu(F.conv1d(x, w3, b, padding=3, groups=shape[1])[..., :shape[2]])), nbytes)
    # forward + backward through autograd
    for dtype, layout in (("fp32", "cf"), ("bf16", "cf"), ("fp32", "cl"), ("bf16", "cl")):
        dt = DTYPES[dtype]
        shape = CPU_SHAPES[0]
        x = make(shape, layout, dt, grad=True)
        w = torch.randn(shape[1], 4, dtype=dt, requires_grad=True)
        b = torch.randn(shape[1], dtype=dt, requires_grad=True)
        g = torch.randn_like(x)
        nbytes = 5 * x.numel() * esize(dt)  # fwd: x, out; bwd: x, dout, dx

        def ours():
            causal_conv1d_fn(x, w, b, activation="silu").backward(g)

        def ref():
            F.silu(F.conv1d(x, w.unsqueeze(1), b, padding=3, groups=shape[1])[..., :shape[2]]).backward(g)

        add("ours", "fwd+bwd", layout, dtype, shape, cpu_time(ours), nbytes, "autograd")
        add("F.conv1d", "fwd+bwd", layout, dtype, shape, cpu_time(ref), nbytes, "autograd")
    # thread scaling of the forward, both layouts, the large shapes
    for layout in ("cf", "cl"):
        for shape in CPU_SHAPES:
            nbytes = 2 * shape[0] * shape[1] * shape[2] * 4
            call = rotated(shape, layout, torch.float32, nbytes)
            for threads in sorted({1, args.threads}):
                torch.set_num_threads(threads)
                add("ours", "fwd", layout, "fp32", shape, cpu_time(call, min_reps=10), nbytes,
                    f"out, {threads} thread" + ("s" if threads > 1 else ""))
    torch.set_num_threads(args.threads)
    # decode update from Python (the whole call), dim 4096
    for batch in (1, 8, 64):
        dim = 4096
        x = torch.randn(batch, dim)
        state = torch.randn(batch, dim, 3)
        w, b = torch.randn(dim, 4), torch.randn(dim)
        add("ours", "update", "-", "fp32", (batch, dim, 1),
            cpu_time(lambda: causal_conv1d_update(x, state, w, b, "silu"), min_reps=200),
            batch * dim * 4 * (2 + 2 * 3), "eager")
    copy_last = cpu_copy_bandwidth()
    copy_bw = max(copy_first, copy_last)
    info["copy_GBps"] = copy_bw / 1e9
    print(f"copy {copy_last / 1e9:.2f} GB/s at the end; reference {copy_bw / 1e9:.2f} GB/s")
    for row in rows:
        row["pct_copy"] = 100 * row["GBps"] * 1e9 / copy_bw
    return {"info": {"ours": info}, "rows": rows}


def device_info():
    props = torch.cuda.get_device_properties(0)
    return {
        "device": props.name,
        "date": datetime.date.today().isoformat(),
        "torch": torch.__version__,
        "runtime": f"HIP {torch.version.hip}" if torch.version.hip else f"CUDA {torch.version.cuda}",
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="write all results here")
    ap.add_argument("--peer", metavar="PREFIX", help="also time the causal-conv1d installed in PREFIX (upstream)")
    ap.add_argument("--rotate-bytes", type=float, default=256e6,
                    help="bytes of distinct buffers each timing cycles through (>= 128e6 defeats a 64 MB cache)")
    ap.add_argument("--quick", action="store_true", help="bf16 only, fewer repetitions")
    ap.add_argument("--only", choices=["all", "fwd", "bwd", "update"], default="all")
    ap.add_argument("--impl", default="ours", help=argparse.SUPPRESS)  # set in the peer's process
    ap.add_argument("--device", choices=["gpu", "cpu"], default="gpu",
                    help="cpu: the CPU backend next to F.conv1d and copy bandwidth")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="intra-op threads for --device cpu")
    args = ap.parse_args()
    if args.device == "cpu":
        result = run_cpu(args)
        if args.json:
            os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)
        return 0
    if not torch.cuda.is_available():
        print("bench.py needs a GPU", file=sys.stderr)
        return 2

    info = device_info()
    copy_bw = copy_bandwidth()
    info.update(copy_GBps=copy_bw / 1e9, rotate_bytes=args.rotate_bytes)
    bench = Bench(args.impl, args.rotate_bytes, args.quick)
    import causal_conv1d

    info["module"] = bench.cc.__file__
    info["version"] = causal_conv1d.__version__
    print(f"{args.impl}: {info['device']}, {info['runtime']}, torch {info['torch']}; {bench.cc.__file__}")
    print(f"{args.impl}: device-to-device copy {copy_bw / 1e9:.0f} GB/s (read + write)", flush=True)
    run_all(bench, args.only, args.quick)
    if args.impl == "ours":
        for shape in FWD_SHAPES[:3] if not args.quick else FWD_SHAPES[2:3]:
            bench.impl = "F.conv1d"
            bench.fallback(shape)
        bench.impl = "ours"
    for r in bench.rows:
        r["pct_copy"] = 100 * r["GBps"] * 1e9 / copy_bw
    result = {"info": {args.impl: info}, "rows": bench.rows}

    if args.peer:
        prefix = os.path.abspath(args.peer)
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "peer.json")
            env = dict(os.environ, PYTHONPATH=os.pathsep.join([prefix, os.environ.get("PYTHONPATH", "")]))
            cmd = [sys.executable, os.path.abspath(__file__), "--impl", "upstream", "--json", out, "--only", args.only,
                   "--rotate-bytes", str(args.rotate_bytes)] + (["--quick"] if args.quick else [])
            subprocess.run(cmd, env=env, check=True, cwd=tmp)
            peer = json.load(open(out))
        if not peer["info"]["upstream"]["module"].startswith(prefix):
            raise SystemExit(f"the peer process imported {peer['info']['upstream']['module']}, not {prefix}")
        result["info"].update(peer["info"])
        result["rows"] += peer["rows"]
        print_ratios(result["rows"])
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


def key(r):
    return (r["op"], r["layout"], r["dtype"], tuple(r["shape"]), r["width"], r["variant"])


def print_ratios(rows):
    peer = {key(r): r for r in rows if r["impl"] == "upstream"}
    print("\nours vs upstream (time ratio upstream / ours: > 1 means ours is faster)")
    for r in rows:
        if r["impl"] != "ours" or key(r) not in peer:
            continue
        p = peer[key(r)]
        print(f"{r['op']:7} {r['layout']:3} {r['dtype']:5} w{r['width']} {str(tuple(r['shape'])):20} {r['variant']:13} "
              f"{r['us']:9.2f} vs {p['us']:9.2f} us  {r['pct_copy']:5.1f}% vs {p['pct_copy']:5.1f}%  "
              f"{p['us'] / r['us']:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
