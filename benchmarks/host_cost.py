"""Where an eager call's host microseconds go: the same small forward and decode step called
through each layer of the package, from the op overload up to the public function, next to
upstream's `causal_conv1d_cuda` when `--peer PREFIX` names its install.

Each row is the host time per call of a loop of calls (the GPU keeps up at these sizes, so this
is what an eager caller pays per call); `batch 0` rows run the op's argument checks and return
before any launch, so the difference to the full call is the launch.

    python3 benchmarks/host_cost.py [--peer PREFIX] [--json out.json]
"""

import argparse
import importlib
import json
import statistics
import subprocess
import sys
import time

import torch


def per_call_us(fn, calls=2000, reps=7):
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e6 / calls)
    return statistics.median(times)


def rows_for(impl):
    """(name, fn) pairs for this process's causal_conv1d (ours or the peer)."""
    cc = importlib.import_module("causal_conv1d_cuda")
    from causal_conv1d import causal_conv1d_fn, causal_conv1d_update

    dev, dt = "cuda", torch.bfloat16
    out = []

    def fwd_rows(layout):  # (a function, so that each layout's lambdas keep their own tensors)
        if layout == "cl":
            x = torch.randn(1, 256, 4096, device=dev, dtype=dt).transpose(1, 2)
        else:
            x = torch.randn(1, 4096, 256, device=dev, dtype=dt)
        w = torch.randn(4096, 4, device=dev, dtype=dt)
        b = torch.randn(4096, device=dev, dtype=dt)
        buf = torch.empty_like(x)
        if impl == "ours":
            from causal_conv1d import _core
            from causal_conv1d._ops import ops

            x0 = x[:0]
            buf0 = buf[:0]
            op = ops.fwd.default
            out.append((f"fwd {layout} op overload, batch 0", lambda: op(x0, w, b, None, None, buf0, None, True)))
            out.append((f"fwd {layout} op overload into out", lambda: op(x, w, b, None, None, buf, None, True)))
            cl = layout == "cl"
            out.append((f"fwd {layout} _core.run_fwd", lambda: _core.run_fwd(x, cl, w, b, None, None, None, True)))
        out.append((f"fwd {layout} torch.empty_like(x)", lambda: torch.empty_like(x)))
        out.append((f"fwd {layout} causal_conv1d_cuda.causal_conv1d_fwd into out",
                    lambda: cc.causal_conv1d_fwd(x, w, b, None, None, buf, None, True)))
        out.append((f"fwd {layout} causal_conv1d_fn", lambda: causal_conv1d_fn(x, w, b, activation="silu")))

    if impl == "ours":
        from causal_conv1d._ops import ops

        noarg = ops.build_config.default
        out.append(("floor: an op with no arguments (build_config)", lambda: noarg()))
    fwd_rows("cf")
    fwd_rows("cl")
    xs = torch.randn(1, 4096, device=dev, dtype=dt)
    state = torch.randn(1, 4096, 3, device=dev, dtype=dt)
    w = torch.randn(4096, 4, device=dev, dtype=dt)
    b = torch.randn(4096, device=dev, dtype=dt)
    o = torch.empty_like(xs)
    xs3, o3 = xs.unsqueeze(-1), o.unsqueeze(-1)  # the (batch, dim, 1) form the extension takes
    if impl == "ours":
        from causal_conv1d._ops import ops

        op = ops.update.default
        xs0, state0, o0 = xs[:0], state[:0], o[:0]
        out.append(("update B=1 op overload, batch 0", lambda: op(xs0, state0, w, b, o0, True, None, None)))
        out.append(("update B=1 op overload into out", lambda: op(xs, state, w, b, o, True, None, None)))
    out.append(("update B=1 causal_conv1d_cuda.causal_conv1d_update into out",
                lambda: cc.causal_conv1d_update(xs3, state, w, b, o3, True, None, None)))
    out.append(("update B=1 causal_conv1d_update", lambda: causal_conv1d_update(xs, state, w, b, "silu")))
    return out


def measure(impl):
    res = {}
    for name, fn in rows_for(impl):
        try:
            res[name] = per_call_us(fn)
        except Exception as e:  # a row the peer's API does not have (reported, not hidden)
            res[name] = f"error: {type(e).__name__}: {e}"[:200]
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peer", help="upstream's install prefix, timed in a second process")
    ap.add_argument("--json")
    ap.add_argument("--impl", default="ours", help=argparse.SUPPRESS)
    ap.add_argument("--child-json", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child_json:
        json.dump(measure(args.impl), open(args.child_json, "w"))
        return
    ours = measure("ours")
    peer = {}
    if args.peer:
        path = "/tmp/host_cost_peer.json"
        env = {"PYTHONPATH": args.peer}
        import os

        subprocess.run([sys.executable, __file__, "--impl", "upstream", "--child-json", path], check=True,
                       env={**os.environ, **env}, cwd="/tmp")
        peer = json.load(open(path))
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}; us per call (host)")
    print(f"{'call':58} {'ours':>9} {'upstream':>9}")
    for name, v in ours.items():
        p = peer.get(name, "")
        fmt = lambda t: f"{t:9.2f}" if isinstance(t, float) else f"{str(t)[:40]:>9}"
        print(f"{name:58} {fmt(v)} {fmt(p) if p != '' else ''}")
    if args.json:
        json.dump({"device": torch.cuda.get_device_name(), "ours": ours, "upstream": peer}, open(args.json, "w"),
                  indent=1)


if __name__ == "__main__":
    main()
