"""Shared plumbing between the public API, ``cpp_functions`` and the ``causal_conv1d_cuda`` module:
argument normalisation upstream clients rely on, output allocation in the right layout, and the
calls into the registered ops."""

import os

import torch

from causal_conv1d._ops import ops

_fwd = ops.fwd.default
_bwd = ops.bwd.default
_update = ops.update.default
# The ops into caller-given outputs, as overloads: calling an overload directly skips the packet's
# overload resolution (~0.4 us a call, measured on the H200 machine's host).
fwd_into = _fwd
update_into = _update


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


def kernel_layout(x):
    """(x, channel_last): x with stride 1 along seqlen (channel-first) or along dim (channel-last),
    anything else made contiguous first as upstream does, and which of the two it is (a size-1
    seqlen counts as channel-first, as the op's own check has it). This is the one place the
    Python side decides a layout; the op checks that every buffer it is given matches x's.
    x of another rank is passed through untouched so that the op reports it."""
    if x.dim() != 3:
        return x, False
    if x.stride(2) != 1 and x.stride(1) != 1:
        x = x.contiguous()
    return x, x.shape[2] > 1 and x.stride(2) != 1


def match_layout(t, channel_last):
    """t (shaped like x) with stride 1 along the dim x has it, copying only if needed."""
    if t.dim() != 3:
        return t  # the op reports the shape
    if channel_last:
        if t.shape[1] > 1 and t.stride(1) != 1:
            t = t.transpose(1, 2).contiguous().transpose(1, 2)
    elif t.shape[2] > 1 and t.stride(2) != 1:
        t = t.contiguous()
    return t


def empty_in_layout(x, channel_last):
    """An uninitialised tensor shaped like x in x's layout. Never a view (allocated with its
    strides), so the caller may modify it in place, also when autograd returned it."""
    if channel_last:
        batch, dim, seqlen = x.shape
        return torch.empty_strided((batch, dim, seqlen), (seqlen * dim, 1, dim), dtype=x.dtype, device=x.device)
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


def new_states(x, weight):
    """(batch, dim, width - 1) states buffer, channel-last in memory as upstream allocates it, and
    not a view. When x or weight has the wrong rank the op rejects them before it looks at this
    buffer, so an empty one stands in."""
    if x.dim() != 3 or weight.dim() != 2:
        return x.new_empty(0)
    batch, dim, _ = x.shape
    halo = max(weight.shape[1] - 1, 0)
    return torch.empty_strided((batch, dim, halo), (halo * dim, 1, dim), dtype=x.dtype, device=x.device)


def run_fwd(x, channel_last, weight, bias, seq_idx, initial_states, final_states_out, silu):
    """Forward into a fresh output in x's layout (x and channel_last from kernel_layout)."""
    out = empty_in_layout(x, channel_last)
    _fwd(x, weight, bias, seq_idx, initial_states, out, final_states_out, silu)
    return out


def run_bwd(x, channel_last, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx,
            return_dinitial_states, silu):
    """Backward; returns (dx, dweight, dbias, dinitial_states) with dweight/dbias accumulated in
    float32 and returned in weight's/bias's dtype, as upstream returns them. dx is the given
    buffer when one is passed (it must have x's layout), else a fresh one."""
    dout = match_layout(dout, channel_last)
    if dx is None:
        dx = empty_in_layout(x, channel_last)
    dweight = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device)
    dbias = torch.zeros(bias.shape, dtype=torch.float32, device=bias.device) if bias is not None else None
    dinitial_states = new_states(x, weight) if return_dinitial_states else None
    _bwd(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx, dweight, dbias, dinitial_states,
         silu, deterministic_mode())
    dweight = dweight.to(weight.dtype)
    if dbias is not None:
        dbias = dbias.to(bias.dtype)
    return dx, dweight, dbias, dinitial_states


def run_update(x, conv_state, weight, bias, silu, cache_seqlens, conv_state_indices):
    """Decode step(s) into a fresh output shaped like x; conv_state is updated in place."""
    out = torch.empty_like(x)  # the cheapest allocation on the decode path (any x strides are accepted)
    _update(x, conv_state, weight, bias, out, silu, cache_seqlens, conv_state_indices)
    return out
