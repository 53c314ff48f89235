#!/usr/bin/env python3
"""Turns benchmarks/bench.py's JSON into the README's Markdown table: ours next to upstream (time
ratio upstream / ours, > 1 means ours is faster) and F.conv1d, each as % of copy bandwidth. A CPU
result (bench.py --device cpu) gives ours next to F.conv1d, the thread scaling and the decode update.

    python benchmarks/report.py benchmarks/results/h200.json
    python benchmarks/report.py benchmarks/results/cpu-2threads.json
"""

import json
import sys


def key(r):
    return (r["op"], r["layout"], r["dtype"], tuple(r["shape"]), r["width"], r["variant"])


def shape_text(r):
    return "(" + ", ".join(str(s) for s in r["shape"]) + ")"


def main_cpu(data):
    rows, info = data["rows"], data["info"]["ours"]
    print(f"{info['device']}, PyTorch {info['torch']}, measured {info['date']}; copy (read + write) "
          f"{info['copy_GBps']:.1f} GB/s in the same run. Width 4, SiLU, bias.\n")
    by = {(r["impl"], r["op"], r["layout"], r["dtype"], tuple(r["shape"]), r["variant"]): r for r in rows}
    print("| op | layout | dtype | shape (batch, dim, seqlen) | ours into `out` | % copy | ours, public call "
          "| F.conv1d (+ SiLU) | F.conv1d / ours |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["impl"] != "ours" or r["op"] == "update" or "thread" in r["variant"]:
            continue
        if r["variant"] == "out":
            continue
        k = (r["op"], r["layout"], r["dtype"], tuple(r["shape"]))
        out = by.get(("ours", *k, "out"))
        ref = by.get(("F.conv1d", *k, r["variant"]))
        out_text = f"{out['us'] / 1e3:.2f} ms | {out['pct_copy']:.0f}%" if out else "| "
        ref_text = f"{ref['us'] / 1e3:.2f} ms | {ref['us'] / r['us']:.1f}x" if ref else "| "
        op = r["op"] + (" (autograd)" if r["variant"] == "autograd" else "")
        print(f"| {op} | {r['layout']} | {r['dtype']} | {shape_text(r)} | {out_text} | {r['us'] / 1e3:.2f} ms "
              f"| {ref_text} |")
    print("\n| forward fp32, into `out` | layout | 1 thread | 2 threads | speedup |")
    print("|---|---|---|---|---|")
    for r in rows:
        if r["impl"] == "ours" and r["variant"] == "out, 1 thread":
            k = (r["op"], r["layout"], r["dtype"], tuple(r["shape"]))
            two = next((q for q in rows if q["impl"] == "ours" and q["variant"].startswith("out, ")
                        and q["variant"] != "out, 1 thread"
                        and (q["op"], q["layout"], q["dtype"], tuple(q["shape"])) == k), None)
            if two:
                print(f"| {shape_text(r)} | {r['layout']} | {r['us'] / 1e3:.2f} ms | {two['us'] / 1e3:.2f} ms "
                      f"| {r['us'] / two['us']:.2f}x |")
    print("\n| `causal_conv1d_update`, fp32, dim 4096, from Python | batch | time |")
    print("|---|---|---|")
    for r in rows:
        if r["op"] == "update":
            print(f"| | {r['shape'][0]} | {r['us']:.1f} us |")


def main(path):
    data = json.load(open(path))
    if data["info"]["ours"].get("runtime") == "CPU":
        return main_cpu(data)
    rows = data["rows"]
    info = data["info"]["ours"]
    peer_info = data["info"].get("upstream")
    print(f"{info['device']}, {info['runtime']}, PyTorch {info['torch']}, measured {info['date']}; "
          f"device-to-device copy {info['copy_GBps']:.0f} GB/s in our process"
          + (f", {peer_info['copy_GBps']:.0f} GB/s in upstream's ({peer_info['version']})" if peer_info else "")
          + ".\n")
    peer = {key(r): r for r in rows if r["impl"] == "upstream"}
    fallback = {key(r): r for r in rows if r["impl"] == "F.conv1d"}
    print("| op | layout | dtype | width | shape (batch, dim, seqlen) | variant | ours us | % copy | upstream us | % copy "
          "| upstream / ours |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["impl"] != "ours":
            continue
        p = peer.get(key(r))
        shape = ", ".join(str(s) for s in r["shape"])
        pu = f"{p['us']:.2f} | {p['pct_copy']:.1f}%" if p else "unsupported | "
        ratio = f"{p['us'] / r['us']:.2f}x" if p else ""
        print(f"| {r['op']} | {r['layout']} | {r['dtype']} | {r['width']} | ({shape}) | {r['variant']} | {r['us']:.2f} "
              f"| {r['pct_copy']:.1f}% | {pu} | {ratio} |")
    for k, f in fallback.items():
        shape = ", ".join(str(s) for s in f["shape"])
        print(f"\n`F.conv1d(groups=dim)` + SiLU (the fallback), {f['dtype']} ({shape}): {f['us']:.1f} us, "
              f"{f['pct_copy']:.1f}% of copy.", end="")
    print()


if __name__ == "__main__":
    main(sys.argv[1])
