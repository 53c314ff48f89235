"""What torch.compile adds around the ops: a layer run eagerly, under inductor's default mode and
under mode="reduce-overhead" (CUDA graphs), with the kernels one step launches and its time.

Layers: the training step of a conv layer (causal_conv1d_fn with SiLU + bias, forward and backward,
both layouts) and a decode step (causal_conv1d_update). For each mode it lists the GPU kernels of
one step (torch.profiler) and counts those that are not ours and not the layer's own work (copies,
fills, inductor kernels), and prints the lines of inductor's generated code that touch our ops'
buffers, so that a functionalization copy shows up by name.

    python3 benchmarks/compile_cost.py [--json out.json] [--code-dir DIR]
"""

import argparse
import json
import os
import statistics

import torch
import torch._inductor.utils as inductor_utils

import causal_conv1d
from causal_conv1d import causal_conv1d_fn, causal_conv1d_update

OURS = ("causal_conv1d", "fwd_channel", "bwd_channel", "bwd_reduce", "update_", "causal_conv1d::")


def step_kernels(fn, args):
    """Names of the GPU kernels one call of fn(*args) launches."""
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn(*args)
        torch.cuda.synchronize()
    names = []
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            names.append(e.name)
    return names


def time_us(fn, args, reps=200):
    for _ in range(10):
        fn(*args)
    torch.cuda.synchronize()
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn(*args)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / reps)
    return statistics.median(times)


def classify(names):
    ours = [n for n in names if any(k in n for k in OURS)]
    other = [n for n in names if n not in ours]
    return ours, other


def conv_layer(x, w, b):
    return causal_conv1d_fn(x, w, b, activation="silu")


def train_step(layer):
    """Forward through `layer` (eager or compiled) and backward; the gradients are dropped first
    so that no accumulation kernel runs."""

    def step(x, w, b, g):
        x.grad = w.grad = b.grad = None
        y = layer(x, w, b)
        y.backward(g)
        return y

    return step


def make_train_args(batch, dim, seqlen, width, channel_last, dtype):
    dev = "cuda"
    if channel_last:
        x = torch.randn(batch, seqlen, dim, device=dev, dtype=dtype).transpose(1, 2)
    else:
        x = torch.randn(batch, dim, seqlen, device=dev, dtype=dtype)
    x.requires_grad_(True)
    w = torch.randn(dim, width, device=dev, dtype=dtype, requires_grad=True)
    b = torch.randn(dim, device=dev, dtype=dtype, requires_grad=True)
    g = torch.randn_like(x)
    return x, w, b, g


def decode_layer(x, conv_state, w, b):
    return causal_conv1d_update(x, conv_state, w, b, activation="silu")


def make_decode_args(batch, dim, width, dtype):
    dev = "cuda"
    x = torch.randn(batch, dim, device=dev, dtype=dtype)
    state = torch.randn(batch, dim, width - 1, device=dev, dtype=dtype)
    w = torch.randn(dim, width, device=dev, dtype=dtype)
    b = torch.randn(dim, device=dev, dtype=dtype)
    return x, state, w, b


def code_lines(code):
    """Lines of generated code that call our ops or copy into / out of buffers."""
    keep = []
    for line in code.splitlines():
        s = line.strip()
        if "causal_conv1d" in s or ".copy_(" in s or "aten.copy" in s or "clone" in s:
            keep.append(s[:200])
    return keep


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--code-dir", help="write inductor's generated code here, one file per case")
    args = ap.parse_args()
    torch.manual_seed(0)
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, causal_conv1d {causal_conv1d.__version__}")
    cases = []
    for cl in (False, True):
        cases.append((f"train {'cl' if cl else 'cf'} (2, 2048, 1024)", conv_layer,
                      lambda cl=cl: make_train_args(2, 2048, 1024, 4, cl, torch.bfloat16)))
    cases.append(("decode (16, 4096)", decode_layer, lambda: make_decode_args(16, 4096, 4, torch.bfloat16)))
    results = []
    for name, fn, make in cases:
        for mode in ("eager", "default", "reduce-overhead"):
            torch._dynamo.reset()
            a = make()
            train = name.startswith("train")
            if mode == "eager":
                f = train_step(fn) if train else fn
                code = []
            else:
                c = torch.compile(fn, mode=None if mode == "default" else mode, fullgraph=True)
                f = train_step(c) if train else c
                _, code = inductor_utils.run_and_get_code(f, *a)
                if args.code_dir:
                    os.makedirs(args.code_dir, exist_ok=True)
                    stem = f"{name.split()[0]}_{name.split()[1]}_{mode}"
                    for i, c in enumerate(code):
                        with open(os.path.join(args.code_dir, f"{stem}_{i}.py"), "w") as fh:
                            fh.write(c)
            for _ in range(5):  # warm up (reduce-overhead records its graph on the first calls)
                f(*a)
            names = step_kernels(f, a)
            ours, other = classify(names)
            us = time_us(f, a)
            row = {"case": name, "mode": mode, "us": us, "kernels": len(names), "ours": len(ours),
                   "other": other, "code": [ln for c in code for ln in code_lines(c)]}
            results.append(row)
            print(f"{name:28} {mode:16} {us:8.1f} us  kernels {len(names):3}  ours {len(ours):2}  other: "
                  + ", ".join(sorted(set(other)))[:300])
    for r in results:
        if r["code"]:
            print(f"\n--- {r['case']} {r['mode']}: generated code touching our ops or copying")
            for ln in r["code"]:
                print("   ", ln)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": results}, fh,
                      indent=1)


if __name__ == "__main__":
    main()
