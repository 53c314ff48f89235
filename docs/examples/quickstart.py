"""A first run: a forward pass in both layouts and a decode step, each checked against the
pure-PyTorch reference. Runs on the first GPU when one is visible, else on the CPU backend.

    python docs/examples/quickstart.py            # after installing the package
    python docs/examples/quickstart.py --device cpu
"""

import argparse

import torch

from causal_conv1d import causal_conv1d_fn, causal_conv1d_update
from causal_conv1d.causal_conv1d_interface import causal_conv1d_ref, causal_conv1d_update_ref


def main(device):
    torch.manual_seed(0)
    batch, dim, seqlen, width = 2, 64, 512, 4
    x = torch.randn(batch, dim, seqlen, device=device)  # (batch, dim, seqlen), channel-first
    weight = torch.randn(dim, width, device=device)
    bias = torch.randn(dim, device=device)

    out = causal_conv1d_fn(x, weight, bias, activation="silu")
    ref = causal_conv1d_ref(x, weight, bias, activation="silu")
    print(f"forward, channel-first {tuple(x.shape)}: max |ours - reference| = {(out - ref).abs().max().item():.2e}")

    # Channel-last, as Mamba2 and Qwen3-Next produce it: a transposed (batch, seqlen, dim) tensor.
    x_cl = x.transpose(1, 2).contiguous().transpose(1, 2)
    out_cl, final_states = causal_conv1d_fn(x_cl, weight, bias, return_final_states=True, activation="silu")
    print(f"forward, channel-last: max |ours - reference| = {(out_cl - ref).abs().max().item():.2e}, "
          f"final states {tuple(final_states.shape)}")

    # Decode: one token per step; the state (the last width - 1 inputs) is updated in place.
    token = torch.randn(batch, dim, device=device)
    state, state_ref = final_states.clone(), final_states.clone()
    y = causal_conv1d_update(token, state, weight, bias, "silu")
    y_ref = causal_conv1d_update_ref(token, state_ref, weight, bias, "silu")
    print(f"decode step {tuple(token.shape)}: max |ours - reference| = {(y - y_ref).abs().max().item():.2e}, "
          f"state updated as the reference's: {torch.equal(state, state_ref)}")

    worst = max((out - ref).abs().max().item(), (out_cl - ref).abs().max().item(), (y - y_ref).abs().max().item())
    if worst > 1e-4 * max(ref.abs().max().item(), 1.0) or not torch.equal(state, state_ref):
        raise SystemExit(f"results differ from the reference (max difference {worst:.2e})")
    print(f"ok: causal_conv1d on {device} matches the reference")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    main(torch.device(parser.parse_args().device))
