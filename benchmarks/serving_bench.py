#!/usr/bin/env python3
"""The serving API (`causal_conv1d.serving`) against issue 21's targets and, with --vllm FILE, next to
vLLM's Triton kernels in the same run.

Prefill: `causal_conv1d_fn` over a batch of sequences with lengths drawn from 1..--max-len (fixed
seed), vLLM's call shape: x (dim, tokens) with dim contiguous, conv_states (lines, dim, width - 1)
in either layout ("dim": dim contiguous, vLLM's default and the only one its prefill takes;
"state": state contiguous, vLLM's VLLM_SSM_CONV_STATE_LAYOUT=DS), cache lines shuffled, every other sequence with an initial state.
Bytes: x read, out written, the initial windows read and every sequence's final window written.
Next to it, our fixed-length forward over the same tokens as one channel-last row
(`causal_conv1d_fn` on (1, dim, tokens)): the target is the same time per token within 5%.

Decode: `causal_conv1d_update` with conv_state_indices (a shuffled cache line per row), one token a
row, next to the plain update (`causal_conv1d.causal_conv1d_update`, row i on state i) at the same
batch. Bytes: x read, out written, the window read and written. The serving update writes its
output into x (as vLLM's does), so replays feed outputs back in: the timing does not depend on the
values, and the cross-check runs on fresh inputs.

GPU rows are kernel times: replays of a CUDA graph holding the calls (which also proves that no
call synchronises with the host: capture fails if one does), inputs rotating over enough buffers
to defeat the L2. The prefill is also timed eagerly from the host ("eager"). vLLM's kernels get
the same inputs; its prefill gets the `metadata` its engine builds (the program table), so neither
side copies query_start_loc to the host; both outputs and caches are checked against each other.
The vLLM file needs only Triton: its `vllm.*` imports are stubbed (PAD_SLOT_ID = -1).

    python benchmarks/serving_bench.py --json benchmarks/results/serving-h200.json
    python benchmarks/serving_bench.py --vllm peers/vllm_causal_conv1d.py
    python benchmarks/serving_bench.py --device cpu --quick          # CPU backend, small shapes
"""

import argparse
import importlib.util
import json
import math
import os
import re
import sys
import types

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import DTYPES, copy_bandwidth, cpu_time, device_info, esize, graph_time, time_calls  # noqa: E402


def load_vllm(path):
    """vLLM's causal_conv1d ops file as a module, its `from vllm... import` lines served by stubs."""
    import triton
    import triton.language as tl

    provided = {"tl": tl, "triton": triton, "PAD_SLOT_ID": -1, "NULL_BLOCK_ID": 0}
    source = open(path).read()
    for module, grouped, line in re.findall(r"^from (vllm[\w.]*) import (?:\(([^)]*)\)|([^\n]*))", source, re.M):
        names = grouped or line.split("#")[0]
        parts = module.split(".")
        for i in range(1, len(parts) + 1):
            sys.modules.setdefault(".".join(parts[:i]), types.ModuleType(".".join(parts[:i])))
        for name in (n.strip() for n in names.split(",") if n.strip()):
            if name not in provided:
                raise SystemExit(f"{path} imports {name} from {module}: no stub for it")
            setattr(sys.modules[module], name, provided[name])
    spec = importlib.util.spec_from_file_location("vllm_causal_conv1d_peer", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class VllmPrefillMetadata:
    """What vLLM's engine hands its prefill: the (sequence, chunk) of every Triton program."""

    def __init__(self, lengths, device, block_m=8):
        seq, chunk = [], []
        for i, n in enumerate(lengths):
            k = -(-n // block_m)
            seq += [i] * k
            chunk += list(range(k))
        self.batch_ptr = torch.tensor(seq, dtype=torch.int32, device=device)
        self.token_chunk_offset_ptr = torch.tensor(chunk, dtype=torch.int32, device=device)
        self.nums_dict = {block_m: {"tot": len(seq), "mlist": self.batch_ptr, "mlist_len": len(seq),
                                    "offsetlist": self.token_chunk_offset_ptr, "batch_ptr": self.batch_ptr,
                                    "token_chunk_offset_ptr": self.token_chunk_offset_ptr}}


def cache(lines, dim, state_len, layout, dt, device):
    if layout == "dim":  # vLLM's default: (lines, dim, state_len) with dim contiguous
        return torch.randn(lines, state_len, dim, dtype=dt, device=device).transpose(1, 2)
    return torch.randn(lines, dim, state_len, dtype=dt, device=device)


class Runner:
    def __init__(self, args):
        self.gpu = args.device == "gpu"
        self.device = "cuda" if self.gpu else "cpu"
        self.reps = 10 if args.quick else 30
        self.rotate_bytes = args.rotate_bytes
        self.rows = []
        self.checks = []
        self.vllm = load_vllm(args.vllm) if args.vllm else None

    def add(self, impl, op, layout, shape, t, moved, variant=""):
        row = dict(impl=impl, op=op, layout=layout, shape=list(shape), variant=variant, us=t * 1e6,
                   GBps=moved / t / 1e9)
        self.rows.append(row)
        print(f"{impl:9} {op:8} {layout:5} {str(tuple(shape)):18} {variant:14} {row['us']:10.2f} us "
              f"{row['GBps']:7.1f} GB/s", flush=True)
        return t

    def cross_check(self, op, layout, got, want, cache, cache2, qsl):
        """Ours against vLLM on the same inputs (outputs (dim, tokens) within bf16 rounding, caches
        bitwise); a disagreement is reported with the sequences it is in, not raised: our kernels'
        correctness is the test suite's job, this says whether the two compute the same thing."""
        bad = ((got.float() - want.float()).abs() > 2e-2 + 2e-2 * want.float().abs()).any(0)
        seqs = []
        if bad.any() and qsl is not None:
            tokens = bad.nonzero().flatten()
            seqs = sorted(set((torch.searchsorted(qsl.to(tokens.device), tokens.to(qsl.dtype), right=True) - 1).tolist()))
        note = dict(op=op, layout=layout, tokens_differing=int(bad.sum()), sequences_differing=seqs,
                    caches_equal=bool(torch.equal(cache, cache2)))
        self.checks.append(note)
        print(f"cross-check {op} {layout}: {note}", flush=True)

    def kernel_time(self, calls):
        """GPU: per call, from graph replays; CPU (one buffer set): bench.py's median wall time."""
        if self.gpu:
            return graph_time(calls)
        return cpu_time(calls[0], min_reps=self.reps, min_seconds=0.05)

    def sets(self, nbytes):
        return max(1, math.ceil(self.rotate_bytes / max(nbytes, 1))) if self.gpu else 1

    def prefill(self, batch, dim, max_len, layout, dtype="bf16", width=4, seed=0):
        from causal_conv1d import causal_conv1d_fn as fixed_fn
        from causal_conv1d.serving import causal_conv1d_fn

        dt, dev, state_len = DTYPES[dtype], self.device, width - 1
        gen = torch.Generator().manual_seed(seed)
        lengths = torch.randint(1, max_len + 1, (batch,), generator=gen).tolist()
        tokens = sum(lengths)
        qsl = torch.tensor([0] + lengths, dtype=torch.int64).cumsum(0).to(torch.int32).to(dev)
        lines = 2 * batch
        idx = torch.randperm(lines, generator=gen)[:batch].to(torch.int32).to(dev)
        has_init = (torch.arange(batch) % 2 == 0).to(dev)
        w = torch.randn(dim, width, dtype=dt, device=dev)
        b = torch.randn(dim, dtype=dt, device=dev)
        es = esize(dt)
        nbytes = (2 * tokens * dim + (batch // 2 + batch % 2 + batch) * dim * state_len) * es
        shape = (batch, dim, tokens)
        sets = [(torch.randn(tokens, dim, dtype=dt, device=dev).t(), cache(lines, dim, state_len, layout, dt, dev))
                for _ in range(self.sets(nbytes))]
        ours = [lambda x=x, cs=cs: causal_conv1d_fn(x, w, b, cs, qsl, idx, has_init, "silu") for x, cs in sets]
        self.add("ours", "prefill", layout, shape, self.kernel_time(ours), nbytes)
        if self.gpu:
            self.add("ours", "prefill", layout, shape, time_calls(ours, self.reps), nbytes, "eager")
        # our fixed-length forward over the same tokens: one channel-last row (allocating its output,
        # as the serving call does)
        fixed = [lambda x=x: fixed_fn(x.unsqueeze(0), w, b, activation="silu") for x, _ in sets]
        self.add("ours", "fwd", "cl", (1, dim, tokens), self.kernel_time(fixed), 2 * tokens * dim * es, "same tokens")
        if self.vllm is None or layout != "dim":  # vLLM's prefill asserts a dim-contiguous cache
            return
        meta = VllmPrefillMetadata(lengths, dev)
        theirs = [lambda x=x, cs=cs: self.vllm.causal_conv1d_fn(x, w, b, cs, qsl, idx, has_init, "silu",
                                                                metadata=meta) for x, cs in sets]
        self.add("vllm", "prefill", layout, shape, self.kernel_time(theirs), nbytes)
        self.add("vllm", "prefill", layout, shape, time_calls(theirs, self.reps), nbytes, "eager")
        # the two on the same inputs and caches
        x, cs = sets[0]
        cs2 = cs.clone()
        got, want = causal_conv1d_fn(x, w, b, cs, qsl, idx, has_init, "silu"), \
            self.vllm.causal_conv1d_fn(x, w, b, cs2, qsl, idx, has_init, "silu", metadata=meta)
        self.cross_check("prefill", layout, got, want, cs, cs2, qsl)

    def decode(self, batch, dim, layout, dtype="bf16", width=4, seed=0):
        from causal_conv1d import causal_conv1d_update as plain_update
        from causal_conv1d.serving import causal_conv1d_update

        dt, dev, state_len = DTYPES[dtype], self.device, width - 1
        gen = torch.Generator().manual_seed(seed)
        lines = 2 * batch
        w = torch.randn(dim, width, dtype=dt, device=dev)
        b = torch.randn(dim, dtype=dt, device=dev)
        nbytes = batch * dim * (2 + 2 * state_len) * esize(dt)
        shape = (batch, dim, 1)
        count = max(8, self.sets(nbytes)) if self.gpu else 1
        sets = [(torch.randn(batch, dim, dtype=dt, device=dev), cache(lines, dim, state_len, layout, dt, dev),
                 torch.randperm(lines, generator=gen)[:batch].to(torch.int32).to(dev)) for _ in range(count)]
        ours = [lambda x=x, cs=cs, i=i: causal_conv1d_update(x, cs, w, b, "silu", i) for x, cs, i in sets]
        self.add("ours", "decode", layout, shape, self.kernel_time(ours), nbytes, "indices")
        plain = [(torch.randn(batch, dim, dtype=dt, device=dev), torch.randn(batch, dim, state_len, dtype=dt, device=dev))
                 for _ in range(count)]
        self.add("ours", "update", "state", shape,
                 self.kernel_time([lambda x=x, s=s: plain_update(x, s, w, b, "silu") for x, s in plain]), nbytes,
                 "plain")
        # The plain update through a cache and conv_state_indices (upstream's batch gather), on the
        # state-contiguous caches: what the index lookup costs the plain kernel.
        if layout == "state":
            gathered = [lambda x=x, cs=cs, i=i: plain_update(x, cs, w, b, "silu", conv_state_indices=i)
                        for x, cs, i in sets]
            self.add("ours", "update", "state", shape, self.kernel_time(gathered), nbytes, "plain, indices")
        if self.vllm is None:
            return
        theirs = [lambda x=x, cs=cs, i=i: self.vllm.causal_conv1d_update(x, cs, w, b, "silu", i) for x, cs, i in sets]
        self.add("vllm", "decode", layout, shape, self.kernel_time(theirs), nbytes, "indices")
        # On fresh inputs: both write their outputs into x, so the timed calls fed outputs back in.
        x, cs, i = torch.randn_like(sets[0][0]), sets[0][1], sets[0][2]
        x2, cs2 = x.clone(), cs.clone()
        got, want = causal_conv1d_update(x, cs, w, b, "silu", i), self.vllm.causal_conv1d_update(x2, cs2, w, b, "silu", i)
        self.cross_check("decode", layout, got.t(), want.t(), cs, cs2, None)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="write all results here")
    ap.add_argument("--vllm", metavar="FILE", help="vLLM's mamba/ops/causal_conv1d.py, timed in the same run")
    ap.add_argument("--device", choices=["gpu", "cpu"], default="gpu")
    ap.add_argument("--quick", action="store_true", help="small shapes, fewer repetitions (a smoke run)")
    ap.add_argument("--rotate-bytes", type=float, default=256e6)
    ap.add_argument("--only", choices=["prefill", "decode"], help="time one of the two (default: both)")
    args = ap.parse_args()
    if args.device == "gpu" and not torch.cuda.is_available():
        print("serving_bench.py needs a GPU (or --device cpu)", file=sys.stderr)
        return 2
    run = Runner(args)
    info = device_info() if run.gpu else {"device": "CPU", "torch": torch.__version__}
    if run.gpu:
        info["copy_GBps"] = copy_bandwidth() / 1e9
        print(f"{info['device']}: device-to-device copy {info['copy_GBps']:.0f} GB/s (read + write)", flush=True)
    batch, dim, max_len = (4, 256, 40) if args.quick else (64, 8192, 2048)
    if args.only != "decode":
        for layout in ("dim", "state"):
            run.prefill(batch, dim, max_len, layout)
    if args.only != "prefill":
        for b in (1, 8) if args.quick else (1, 64, 256):
            for layout in ("dim", "state"):
                run.decode(b, dim, layout)
    if "copy_GBps" in info:
        for r in run.rows:
            r["pct_copy"] = 100 * r["GBps"] / info["copy_GBps"]
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"info": info, "rows": run.rows, "vllm_cross_checks": run.checks}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
