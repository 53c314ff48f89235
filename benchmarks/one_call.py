#!/usr/bin/env python3
"""One op on one shape, a few times: the target for a profiler on the GPU machine.

    ncu --clock-control none -k regex:bwd --launch-skip 2 --launch-count 1 \\
        python3 benchmarks/one_call.py bwd cl 8 4096 4096
    PYTHONPATH=/tmp/upstream ncu ... python3 benchmarks/one_call.py bwd cl 8 4096 4096   # the peer

Drives `causal_conv1d_cuda` (ours, or whichever is first on the path) with bf16, width 4, SiLU and
bias unless --dtype / --width say otherwise, and prints which module ran.
"""

import argparse

import torch

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("op", choices=["fwd", "bwd"])
    ap.add_argument("layout", choices=["cf", "cl"])
    ap.add_argument("shape", type=int, nargs=3, metavar=("BATCH", "DIM", "SEQLEN"))
    ap.add_argument("--dtype", choices=list(DTYPES), default="bf16")
    ap.add_argument("--width", type=int, default=4)
    ap.add_argument("--calls", type=int, default=4)
    ap.add_argument("--states", action="store_true",
                    help="initial_states in; fwd: final_states out; bwd: dfinal_states in, dinitial_states out "
                         "(as bench.py's states rows)")
    ap.add_argument("--seq-idx", type=int, nargs="?", const=8, metavar="N",
                    help="N packed sequences a row (default 8, as bench.py's seq_idx rows)")
    args = ap.parse_args()
    import causal_conv1d_cuda as cc

    b, d, l = args.shape
    dt = DTYPES[args.dtype]

    def make():
        if args.layout == "cl":
            return torch.randn(b, l, d, device="cuda", dtype=dt).transpose(1, 2)
        return torch.randn(b, d, l, device="cuda", dtype=dt)

    x, dout, out = make(), make(), make()
    w = torch.randn(d, args.width, device="cuda", dtype=dt)
    bias = torch.randn(d, device="cuda", dtype=dt)
    dw = torch.zeros(d, args.width, device="cuda")
    db = torch.zeros(d, device="cuda")
    if args.seq_idx is not None and args.seq_idx < 1:
        ap.error("--seq-idx takes a number of sequences >= 1")
    seq = init = dfin = dinit = None
    if args.seq_idx:
        seq = (torch.arange(l, device="cuda", dtype=torch.int32) * args.seq_idx // l).expand(b, l).contiguous()
    if args.states:
        init, dfin, dinit = (torch.randn(b, args.width - 1, d, device="cuda", dtype=dt).transpose(1, 2) for _ in range(3))
    for _ in range(args.calls):
        if args.op == "fwd":
            cc.causal_conv1d_fwd(x, w, bias, seq, init, out, dfin, True)
        else:
            cc.causal_conv1d_bwd(x, w, bias, dout, seq, init, dfin, out, dw, db, dinit, True)
    torch.cuda.synchronize()
    extra = " states" * args.states + (f" seq_idx({args.seq_idx} a row)" if args.seq_idx else "")
    print(f"{args.op} {args.layout} {args.dtype} {tuple(args.shape)}{extra} x{args.calls} with {cc.__file__}")


if __name__ == "__main__":
    main()
