#!/usr/bin/env python3
"""Turns benchmarks/bench.py's JSON into the README's Markdown table: ours next to upstream (time
ratio upstream / ours, > 1 means ours is faster) and F.conv1d, each as % of copy bandwidth.

    python benchmarks/report.py benchmarks/results/h200.json
"""

import json
import sys


def key(r):
    return (r["op"], r["layout"], r["dtype"], tuple(r["shape"]), r["width"], r["variant"])


def main(path):
    data = json.load(open(path))
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
