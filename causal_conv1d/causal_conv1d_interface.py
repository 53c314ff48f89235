"""Public API, same names, argument order and defaults as upstream ``causal_conv1d``."""

import torch
import torch.nn.functional as F

from causal_conv1d import _core


class CausalConv1dFn(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx,
        x,
        weight,
        bias=None,
        seq_idx=None,
        initial_states=None,
        return_final_states=False,
        final_states_out=None,
        activation=None,
    ):
        silu = _core.silu_flag(activation)
        x, channel_last = _core.kernel_layout(x)
        if return_final_states and final_states_out is not None:
            ctx.mark_dirty(final_states_out)  # the caller's buffer, written in place
            out = _core.run_fwd(x, channel_last, weight, bias, seq_idx, initial_states, final_states_out, silu)
        else:
            out, final_states_out = _core.run_fwd_fresh(x, channel_last, weight, bias, seq_idx, initial_states,
                                                        return_final_states, silu)
        ctx.save_for_backward(x, weight, bias, seq_idx, initial_states)
        ctx.silu = silu
        ctx.channel_last = channel_last
        ctx.return_final_states = return_final_states
        return out if not return_final_states else (out, final_states_out)

    @staticmethod
    def backward(ctx, dout, *args):
        x, weight, bias, seq_idx, initial_states = ctx.saved_tensors
        dfinal_states = args[0] if ctx.return_final_states else None
        return_dinitial_states = initial_states is not None and ctx.needs_input_grad[4]
        dx, dweight, dbias, dinitial_states = _core.run_bwd(
            x, ctx.channel_last, weight, bias, dout, seq_idx, initial_states, dfinal_states, None,
            return_dinitial_states, ctx.silu
        )
        return dx, dweight, dbias, None, dinitial_states, None, None, None


def causal_conv1d_fn(
    x,
    weight,
    bias=None,
    seq_idx=None,
    initial_states=None,
    return_final_states=False,
    final_states_out=None,
    activation=None,
):
    """Causal depthwise 1-D convolution over the last axis; differentiable w.r.t. x, weight, bias
    and initial_states.

    x: (batch, dim, seqlen), channel-first (stride(2) == 1) or channel-last (stride(1) == 1);
       any other striding is copied to contiguous first
    weight: (dim, width), width in 2..4
    bias: (dim,)
    seq_idx: (batch, seqlen) int32; positions with different ids never mix
    initial_states: (batch, dim, width - 1)
    return_final_states: also return the last width - 1 inputs (batch, dim, width - 1)
    final_states_out: (batch, dim, width - 1) buffer the final states are written to
    activation: None, "silu" or "swish"

    Returns out (batch, dim, seqlen) in x's layout and dtype, or (out, final_states).
    """
    if torch.compiler.is_compiling() and (final_states_out is None or not return_final_states):
        # The functional op with its registered gradient: nothing to functionalize, and the incoming
        # gradient keeps the output's layout (see causal_conv1d/_core.py).
        silu = _core.silu_flag(activation)
        x, _ = _core.kernel_layout(x)
        out, final = _core.fwd_functional(x, weight, bias, seq_idx, initial_states, return_final_states, silu)
        return (out, final) if return_final_states else out
    return CausalConv1dFn.apply(
        x,
        weight,
        bias,
        seq_idx,
        initial_states,
        return_final_states,
        final_states_out,
        activation,
    )


def causal_conv1d_ref(
    x,
    weight,
    bias=None,
    initial_states=None,
    return_final_states=False,
    final_states_out=None,
    activation=None,
):
    """Pure-PyTorch reference (F.conv1d with left padding), upstream's signature.

    x: (batch, dim, seqlen); weight: (dim, width); bias: (dim,);
    initial_states, final_states_out: (batch, dim, width - 1).
    """
    _core.silu_flag(activation)
    dtype_in = x.dtype
    x = x.to(weight.dtype)
    seqlen = x.shape[-1]
    dim, width = weight.shape
    if initial_states is None:
        out = F.conv1d(x, weight.unsqueeze(1), bias, padding=width - 1, groups=dim)
    else:
        x = torch.cat([initial_states.to(weight.dtype), x], dim=-1)
        out = F.conv1d(x, weight.unsqueeze(1), bias, padding=0, groups=dim)
    out = out[..., :seqlen]
    if return_final_states:
        final_states = F.pad(x, (width - 1 - x.shape[-1], 0)).to(dtype_in)
        if final_states_out is not None:
            final_states_out.copy_(final_states)
        else:
            final_states_out = final_states
    out = (out if activation is None else F.silu(out)).to(dtype=dtype_in)
    return out if not return_final_states else (out, final_states_out)


def causal_conv1d_update(
    x, conv_state, weight, bias=None, activation=None, cache_seqlens=None, conv_state_indices=None
):
    """One or more decode steps, updating conv_state in place.

    x: (batch, dim) or (batch, dim, seqlen)
    conv_state: (batch, dim, state_len) with state_len >= width - 1, or, with conv_state_indices,
        (num_cache_lines, dim, state_len); updated in place
    weight: (dim, width); bias: (dim,); activation: None, "silu" or "swish"
    cache_seqlens: (batch,) int32. If given, conv_state is a circular buffer: x goes to positions
        (cache_seqlens + t) % state_len and the window is the width - 1 entries before them.
    conv_state_indices: (batch,) int32 cache line of each row; a negative index marks a padding
        row, whose state is left alone and whose output is zero.

    Returns out with x's shape and dtype.
    """
    return _core.run_update(x, conv_state, weight, bias, _core.silu_flag(activation), cache_seqlens,
                            conv_state_indices)


def causal_conv1d_update_ref(x, conv_state, weight, bias=None, activation=None, cache_seqlens=None):
    """Pure-PyTorch reference of causal_conv1d_update (without conv_state_indices), upstream's
    signature. Updates conv_state in place."""
    _core.silu_flag(activation)
    dtype_in = x.dtype
    unsqueeze = x.dim() == 2
    if unsqueeze:
        x = x.unsqueeze(-1)
    batch, dim, seqlen = x.shape
    width = weight.shape[1]
    state_len = conv_state.shape[-1]
    assert conv_state.shape == (batch, dim, state_len)
    assert weight.shape == (dim, width)
    if cache_seqlens is None:
        x_new = torch.cat([conv_state, x], dim=-1).to(weight.dtype)
        conv_state.copy_(x_new[:, :, -state_len:])
    else:
        width_idx = torch.arange(-(width - 1), 0, dtype=torch.long, device=x.device).unsqueeze(0)
        width_idx = torch.remainder(width_idx + cache_seqlens.unsqueeze(1), state_len)
        width_idx = width_idx.unsqueeze(1).expand(-1, dim, -1)
        x_new = torch.cat([conv_state.gather(2, width_idx), x], dim=-1).to(weight.dtype)
        copy_idx = torch.arange(seqlen, dtype=torch.long, device=x.device).unsqueeze(0)
        copy_idx = torch.remainder(copy_idx + cache_seqlens.unsqueeze(1), state_len)
        copy_idx = copy_idx.unsqueeze(1).expand(-1, dim, -1)
        conv_state.scatter_(2, copy_idx, x)
    out = F.conv1d(x_new, weight.unsqueeze(1), bias, padding=0, groups=dim)[:, :, -seqlen:]
    if unsqueeze:
        out = out.squeeze(-1)
    return (out if activation is None else F.silu(out)).to(dtype=dtype_in)
