#!/usr/bin/env python3
"""Turns benchmarks/bench.py's JSON into Markdown: every row of a GPU run, ours next to upstream
(time ratio upstream / ours, > 1 means ours is faster) and F.conv1d, each as % of copy bandwidth. A
CPU result (bench.py --device cpu) gives ours next to F.conv1d, the thread scaling and the decode
update.

    python benchmarks/report.py benchmarks/results/h200.json
    python benchmarks/report.py benchmarks/results/cpu-2threads.json

--update-docs rewrites the figures of the GPU tables in README.md and docs/performance.md, and the
copy bandwidth each quotes, from a GPU run (the rows those tables list stay as written: their first
columns name the JSON rows);
--check-docs only says whether they match it (exit 1 and the differing rows if not; the tests run
it on the committed results).

    python benchmarks/report.py benchmarks/results/h200.json --update-docs
"""

import argparse
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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


# The GPU tables of the docs: (file, header, the sentence giving the copy bandwidth their "% copy"
# cells are shares of: a pattern whose one group is the figure). Without a dtype column a row is bf16.
DOC_TABLES = (
    ("README.md", "| op | layout | shape (batch, dim, seqlen) | ours us | % copy | upstream us | % copy | x |",
     r"device copy's \((\d+) GB/s\)"),
    ("docs/performance.md",
     "| op | layout | dtype | shape (batch, dim, seqlen) | ours us | % copy | upstream us | % copy | x |",
     r"copy\s+(\d+) GB/s \(bytes read \+ written\)"),
)
FALLBACK_LABEL = "`F.conv1d(groups=dim)` + SiLU (the fallback)"
# A row's label: (op, variant) in the JSON.
DOC_OPS = {
    "fwd": ("fwd", ""), "bwd": ("bwd", ""), "fwd + seq_idx": ("fwd", "seq_idx"), "fwd + states": ("fwd", "states"),
    "bwd, deterministic": ("bwd", "deterministic"), "bwd, seq_idx": ("bwd", "seq_idx"),
    "bwd, states": ("bwd", "states"), "fwd, in a CUDA graph": ("fwd", "graph"),
    "bwd, in a CUDA graph": ("bwd", "graph"),
    "fwd + bwd through autograd, per step from the host": ("fwd+bwd", "autograd"),
    "update, in a CUDA graph": ("update", "graph"), "update, eager from Python": ("update", "eager"),
    FALLBACK_LABEL: ("fwd", ""),
}
DOC_LAYOUTS = {"channel-first": "cf", "channel-last": "cl", "": "-"}


def doc_row(label, layout, dtype, shape, by, show_dtype):
    """One table row's text from the run (by: (impl, op, layout, dtype, shape, variant) -> row, width 4)."""
    if label not in DOC_OPS or layout not in DOC_LAYOUTS:
        raise KeyError(f"no JSON row for the table row {label!r} / {layout!r}")
    op, variant = DOC_OPS[label]
    m = re.fullmatch(r"batch (\d+), dim (\d+)", shape)
    dims = (int(m.group(1)), int(m.group(2)), 1) if m else tuple(int(v) for v in shape.strip("()").split(","))
    impl = "F.conv1d" if label == FALLBACK_LABEL else "ours"
    k = (op, DOC_LAYOUTS[layout], dtype, dims, variant)
    if (impl, *k) not in by:
        raise KeyError(f"the run has no {impl} row {k}")
    o, u = by[(impl, *k)], by.get(("upstream", *k))
    cells = [label, layout] + ([dtype] if show_dtype else []) + [shape]
    nd = 2 if variant in ("graph", "autograd") else 1
    if impl == "F.conv1d":
        cells += [f"{o['us']:.1f}", f"{o['pct_copy']:.1f}%", "", "", ""]
    elif variant == "eager":
        cells += [f"{o['us']:.1f} per call", "", f"{u['us']:.1f} per call", "", f"{u['us'] / o['us']:.2f}"]
    elif u is None:
        cells += [f"{o['us']:.{nd}f}", f"{o['pct_copy']:.1f}%", "unsupported", "", ""]
    else:
        cells += [f"{o['us']:.{nd}f}", f"{o['pct_copy']:.1f}%", f"{u['us']:.{nd}f}", f"{u['pct_copy']:.1f}%",
                  f"{u['us'] / o['us']:.2f}"]
    return "| " + " | ".join(cells) + " |"


def doc_tables(data, root):
    """{path: (old text, new text)} of each doc whose GPU table the run rewrites."""
    by = {(r["impl"], r["op"], r["layout"], r["dtype"], tuple(r["shape"]), r["variant"]): r
          for r in data["rows"] if r["width"] == 4}
    copy = f"{data['info']['ours']['copy_GBps']:.0f}"
    out = {}
    for rel, header, copy_pattern in DOC_TABLES:
        path = os.path.join(root, rel)
        text = open(path, encoding="utf-8").read()
        start = text.find(header + "\n")
        if start < 0:
            raise KeyError(f"{rel}: no table headed {header!r}")
        end = text.find("\n\n", start)
        end = len(text) if end < 0 else end
        lines = text[start:end].split("\n")
        with_dtype = "| dtype |" in header
        new = lines[:2]
        for line in lines[2:]:
            c = [v.strip() for v in line.strip().strip("|").split("|")]
            label, layout = c[0], c[1]
            dtype, shape = (c[2], c[3]) if with_dtype else ("bf16", c[2])
            new.append(doc_row(label, layout, dtype, shape, by, with_dtype))
        rewritten = text[:start] + "\n".join(new) + text[end:]
        found = list(re.finditer(copy_pattern, rewritten))
        if len(found) != 1:
            raise KeyError(f"{rel}: {len(found)} copy-bandwidth figures match {copy_pattern!r}, not 1")
        g = found[0]
        rewritten = rewritten[:g.start(1)] + copy + rewritten[g.end(1):]
        out[rel] = (text, rewritten)
    return out


def docs_main(path, root, write):
    data = json.load(open(path))
    if data["info"]["ours"].get("runtime") == "CPU":
        sys.exit("--update-docs / --check-docs take a GPU run")
    try:
        tables = doc_tables(data, root)
    except KeyError as e:
        sys.exit(f"{path}: {e.args[0]}")
    stale = 0
    for rel, (old, new) in tables.items():
        if old == new:
            continue
        if write:
            with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
                f.write(new)
            print(f"{rel}: table rewritten from {path}")
        else:
            stale += 1
            for a, b in zip(old.splitlines(), new.splitlines()):
                if a != b:
                    print(f"{rel}:\n  table: {a}\n  run:   {b}")
    if stale:
        sys.exit(f"{stale} doc table(s) differ from {path}: python benchmarks/report.py {path} --update-docs")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--update-docs", action="store_true", help="rewrite the docs' GPU tables from this run")
    mode.add_argument("--check-docs", action="store_true", help="exit 1 if the docs' GPU tables differ from it")
    ap.add_argument("--root", default=ROOT, help=argparse.SUPPRESS)  # the tests' copy of the docs
    args = ap.parse_args()
    if args.update_docs or args.check_docs:
        docs_main(args.json, args.root, args.update_docs)
    else:
        main(args.json)
