"""Public API, same names, argument order and defaults as upstream ``causal_conv1d``."""

import torch
import torch.nn.functional as F

from causal_conv1d._ops import ops

_ACTIVATIONS = (None, "silu", "swish")


def _check_activation(activation):
    if activation not in _ACTIVATIONS:
        raise NotImplementedError(f"activation must be None, silu, or swish, got {activation!r}")
    return activation is not None


def _is_channel_last(x):
    """Layout of a (batch, dim, seqlen) tensor the kernels accept (size-1 dims are free)."""
    return not (x.shape[2] <= 1 or x.stride(2) == 1)


def _kernel_layout(x):
    """x as the kernels take it: stride 1 along seqlen or along dim; anything else is copied."""
    if x.stride(2) != 1 and x.stride(1) != 1:
        x = x.contiguous()
    return x


def _empty_out(x):
    """An uninitialised output in x's layout (also when x is a slice of a wider buffer)."""
    batch, dim, seqlen = x.shape
    if _is_channel_last(x):
        return torch.empty((batch, seqlen, dim), dtype=x.dtype, device=x.device).transpose(1, 2)
    return torch.empty((batch, dim, seqlen), dtype=x.dtype, device=x.device)


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
        silu = _check_activation(activation)
        x = _kernel_layout(x)
        if seq_idx is not None and (initial_states is not None or return_final_states):
            raise ValueError(
                "causal_conv1d_fn: seq_idx cannot be combined with initial_states or "
                "return_final_states"
            )
        if return_final_states:
            if final_states_out is None:
                batch, dim, _ = x.shape
                width = weight.shape[1]
                final_states_out = torch.empty(
                    batch, width - 1, dim, device=x.device, dtype=x.dtype
                ).transpose(1, 2)
        else:
            final_states_out = None
        out = _empty_out(x)
        ops.fwd(x, weight, bias, seq_idx, initial_states, out, final_states_out, silu)
        ctx.mark_non_differentiable(*(() if final_states_out is None else (final_states_out,)))
        return out if not return_final_states else (out, final_states_out)

    @staticmethod
    def backward(ctx, dout, *args):
        raise NotImplementedError("causal_conv1d_fn: backward is not implemented yet")


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
    """Causal depthwise 1-D convolution over the last axis.

    x: (batch, dim, seqlen), channel-first (stride(2) == 1) or channel-last (stride(1) == 1)
    weight: (dim, width), width in 2..4
    bias: (dim,)
    seq_idx: (batch, seqlen) int32; positions with different ids never mix
    initial_states: (batch, dim, width - 1)
    final_states_out: (batch, dim, width - 1), to be written to
    activation: None, "silu" or "swish"

    Returns out (batch, dim, seqlen) in x's layout, or (out, final_states) if
    return_final_states.
    """
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
    _check_activation(activation)
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
