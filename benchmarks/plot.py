#!/usr/bin/env python3
"""Plots benchmarks/bench.py's JSON: % of copy bandwidth per shape, ours vs upstream vs F.conv1d
(a CPU result: effective GB/s of ours and F.conv1d per case, next to the copy bandwidth).

    python benchmarks/plot.py benchmarks/results/h200.json      # writes benchmarks/results/h200.png
    python benchmarks/plot.py benchmarks/results/cpu-2threads.json
"""

import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

IMPLS = [("ours", "#c0392b"), ("upstream", "#7f8c8d"), ("F.conv1d", "#2c3e50")]


def main_cpu(data, path, out=None):
    rows = data["rows"]
    info = data["info"]["ours"]
    cases = []
    for r in rows:
        k = (r["op"], r["layout"], r["dtype"], tuple(r["shape"]))
        if r["impl"] == "F.conv1d" and k not in cases:
            cases.append(k)
    series = [("ours into out", "ours", ("out",), "#e6b0aa"), ("ours, public call", "ours", ("", "autograd"), "#c0392b"),
              ("F.conv1d (+ SiLU)", "F.conv1d", ("", "autograd"), "#2c3e50")]
    fig, ax = plt.subplots(figsize=(14, 5.5))
    width = 0.8 / len(series)
    for i, (label, impl, variants, color) in enumerate(series):
        vals = {(r["op"], r["layout"], r["dtype"], tuple(r["shape"])): r["GBps"] for r in rows
                if r["impl"] == impl and r["variant"] in variants}
        xs = [j + (i - 1) * width for j, k in enumerate(cases) if k in vals]
        ys = [vals[k] for k in cases if k in vals]
        ax.bar(xs, ys, width, label=label, color=color)
    ax.axhline(info["copy_GBps"], color="black", linewidth=0.8, linestyle="--", label="copy (read + write)")
    ax.set_xticks(range(len(cases)))
    ax.set_xticklabels([f"{op} {layout}\n{dtype}\n{'x'.join(map(str, shape))}" for op, layout, dtype, shape in cases],
                       fontsize=8)
    ax.set_ylabel("effective GB/s (minimal bytes / time)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"causal-conv1d CPU backend, width 4, SiLU + bias: {info['device']}, PyTorch {info['torch']}, "
                 f"{info['date']}  (shape = batch x dim x seqlen)", fontsize=10)
    fig.tight_layout()
    out = out or os.path.splitext(path)[0] + ".png"
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def main(path, out=None):
    data = json.load(open(path))
    if data["info"]["ours"].get("runtime") == "CPU":
        return main_cpu(data, path, out)
    rows = [r for r in data["rows"] if r["dtype"] == "bf16" and r["width"] == 4 and r["variant"] == ""]
    panels = [("fwd", "cf", "forward, channel-first"), ("fwd", "cl", "forward, channel-last"),
              ("bwd", "cf", "backward, channel-first"), ("bwd", "cl", "backward, channel-last")]
    fig, axes = plt.subplots(2, 2, figsize=(13, 8), sharey=True)
    for ax, (op, layout, title) in zip(axes.flat, panels):
        sel = [r for r in rows if r["op"] == op and r["layout"] == layout]
        shapes = []
        for r in sel:
            if tuple(r["shape"]) not in shapes:
                shapes.append(tuple(r["shape"]))
        width = 0.8 / len(IMPLS)
        for i, (impl, color) in enumerate(IMPLS):
            vals = {tuple(r["shape"]): r["pct_copy"] for r in sel if r["impl"] == impl}
            xs = [j + (i - 1) * width for j, s in enumerate(shapes) if s in vals]
            ys = [vals[s] for s in shapes if s in vals]
            if ys:
                ax.bar(xs, ys, width, label=impl, color=color)
        ax.set_xticks(range(len(shapes)))
        ax.set_xticklabels(["\n".join(["x".join(map(str, s))]) for s in shapes], fontsize=8)
        ax.set_title(title)
        ax.axhline(100, color="black", linewidth=0.5)
        ax.set_ylim(0, 110)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("% of device copy bandwidth")
    axes[1][0].set_ylabel("% of device copy bandwidth")
    axes[0][0].legend()
    info = data["info"]["ours"]
    fig.suptitle(f"causal-conv1d, bf16, width 4, SiLU + bias: {info['device']} ({info['runtime']}), "
                 f"copy {info['copy_GBps']:.0f} GB/s, {info['date']}  (shape = batch x dim x seqlen)")
    fig.tight_layout()
    out = out or os.path.splitext(path)[0] + ".png"
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(*sys.argv[1:])
