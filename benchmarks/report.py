#!/usr/bin/env python3
"""Turns benchmarks/bench.py's JSON into the Markdown tables of the README.

    python benchmarks/report.py bench.json
"""

import json
import sys


def main(path):
    data = json.load(open(path))
    info, rows = data["info"], data["results"]
    print(f"{info['device']}, {info['runtime']}, PyTorch {info['torch']}, measured {info['date']}; "
          f"device-to-device copy {info['copy_GBps']:.0f} GB/s (bytes read + written).\n")
    print("| op | layout | dtype | shape (batch, dim, seqlen) | time (us) | GB/s | % of copy | target |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        target = "" if r.get("target") is None else f"{r['target']:.0%}"
        if "det_over_default" in r:
            target = f"det/default {r['det_over_default']:.2f} (<= 1.30)"
        shape = ", ".join(str(s) for s in r["shape"])
        print(f"| {r['kind']} | {r['layout']} | {r['dtype']} | ({shape}) | {r['time_us']:.1f} | {r['GBps']:.0f} | "
              f"{r['ratio']:.1%} | {target} |")
    if "update_eager_batch1_us" in info:
        print(f"\nEager `causal_conv1d_update` from Python, batch 1, dim 8192, bf16: "
              f"{info['update_eager_batch1_us']:.1f} us per call (target <= 10 us).")


if __name__ == "__main__":
    main(sys.argv[1])
