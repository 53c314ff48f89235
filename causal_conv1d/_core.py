"""Shared plumbing between the public API, ``cpp_functions`` and the ``causal_conv1d_cuda`` module:
argument normalisation upstream clients rely on, output allocation in the right layout, and the
calls into the registered ops."""

import os

import torch

from causal_conv1d._ops import ops

_ACTIVATIONS = (None, "silu", "swish")
_fwd = ops.fwd.default
_bwd = ops.bwd.default


def silu_flag(activation):
    """True for "silu"/"swish", False for None; upstream's NotImplementedError otherwise."""
    if activation is None:
        return False
    if activation == "silu" or activation == "swish":
        return True
    raise NotImplementedError(f"activation must be None, silu, or swish, got {activation!r}")


def deterministic_mode():
    """Whether backward must give bitwise-repeatable dweight/dbias.

    CAUSAL_CONV1D_DETERMINISTIC=1 turns it on and =0 forces it off; when unset,
    torch.use_deterministic_algorithms(True) turns it on.
    """
    env = os.environ.get("CAUSAL_CONV1D_DETERMINISTIC", "")
    if env == "":
        return torch.are_deterministic_algorithms_enabled()
    if env == "1":
        return True
    if env == "0":
        return False
    raise ValueError(f"CAUSAL_CONV1D_DETERMINISTIC must be 0 or 1, got {env!r}")


def is_channel_last(x):
    """Layout of a (batch, dim, seqlen) tensor the kernels take (size-1 dims are free)."""
    return not (x.shape[2] <= 1 or x.stride(2) == 1)


def kernel_layout(x):
    """x with stride 1 along seqlen or along dim; anything else is made contiguous (as upstream)."""
    if x.stride(2) != 1 and x.stride(1) != 1:
        x = x.contiguous()
    return x


def match_layout(t, x):
    """t (same shape as x) with stride 1 along the dim x has it, copying only if needed."""
    if is_channel_last(x):
        if t.shape[1] > 1 and t.stride(1) != 1:
            t = t.transpose(1, 2).contiguous().transpose(1, 2)
    elif t.shape[2] > 1 and t.stride(2) != 1:
        t = t.contiguous()
    return t


def empty_like_layout(x, dtype=None):
    """An uninitialised (batch, dim, seqlen) tensor in x's layout, also when x is a slice of a
    wider buffer (where torch.empty_like would fall back to contiguous)."""
    batch, dim, seqlen = x.shape
    dtype = x.dtype if dtype is None else dtype
    if is_channel_last(x):
        return torch.empty((batch, seqlen, dim), dtype=dtype, device=x.device).transpose(1, 2)
    return torch.empty((batch, dim, seqlen), dtype=dtype, device=x.device)


def new_states(x, width):
    """(batch, dim, width - 1) states buffer, channel-last as upstream allocates it."""
    batch, dim, _ = x.shape
    return torch.empty(batch, width - 1, dim, device=x.device, dtype=x.dtype).transpose(1, 2)


def run_fwd(x, weight, bias, seq_idx, initial_states, final_states_out, silu):
    """Forward into a fresh output in x's layout (x already normalised by kernel_layout)."""
    out = empty_like_layout(x)
    _fwd(x, weight, bias, seq_idx, initial_states, out, final_states_out, silu)
    return out


def run_bwd(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx, return_dinitial_states, silu):
    """Backward with fresh float32 dweight/dbias; returns (dx, dweight, dbias, dinitial_states)
    with dweight/dbias still float32."""
    dout = match_layout(dout, x)
    if dx is None:
        dx = empty_like_layout(x)
    dweight = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device)
    dbias = torch.zeros(bias.shape, dtype=torch.float32, device=bias.device) if bias is not None else None
    dinitial_states = new_states(x, weight.shape[1]) if return_dinitial_states else None
    _bwd(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx, dweight, dbias, dinitial_states,
         silu, deterministic_mode())
    return dx, dweight, dbias, dinitial_states
