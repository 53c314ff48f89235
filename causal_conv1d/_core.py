"""Shared plumbing between the public API, ``cpp_functions`` and the ``causal_conv1d_cuda`` module:
argument normalisation upstream clients rely on, output allocation in the right layout, and the
calls into the registered ops."""

import os
from typing import Optional, Tuple

import torch

from causal_conv1d._ops import _eager, ops

# Overloads, not packets: calling an overload directly skips the packet's overload resolution
# (~0.4 us a call, measured on the H200 machine's host).
_fwd = ops.fwd.default
_bwd = ops.bwd.default
_update = ops.update.default
_update_functional = ops.update_functional.default

# The per-step calls (the forward into a given out, the decode step into a given out or into a fresh
# one) go eagerly through causal_conv1d._eager (csrc/python/eager.cpp: the same op called from C++
# without torch.ops' argument parsing, 1.5-2 us a call less on the H200 machine's host), and
# through the op overloads while dynamo traces (it cannot trace a C function). Only dynamo needs
# that: other tracers (export's non-strict mode, make_fx) reach the entry with fake or functional
# tensors or under dispatch modes, which the entry hands to the overload or the dispatcher.
dynamo_tracing = torch.compiler.is_dynamo_compiling  # (is_compiling() costs 3x as much a call)


def fwd_into(*args):
    """fwd(x, weight, bias, seq_idx, initial_states, out, final_states_out, silu_activation), x in a
    kernel layout already (kernel_layout)."""
    return _fwd(*args) if dynamo_tracing() else _eager.fwd(*args)


def update_into(*args):
    """update(x, conv_state, weight, bias, out, silu_activation, cache_seqlens, conv_state_indices)."""
    return _update(*args) if dynamo_tracing() else _eager.update(*args)


def run_update(*args):
    """Decode step(s) into a fresh out (x's shape and strides, allocated by the op in C++), conv_state
    updated in place: run_update(x, conv_state, weight, bias, silu, cache_seqlens,
    conv_state_indices), the public functions' decode call."""
    return _update_functional(*args) if dynamo_tracing() else _eager.update_functional(*args)


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
    s = x.stride()  # (one query: each tensor method call costs ~0.1 us, on every eager call)
    if len(s) != 3:
        return x, False
    if s[2] != 1 and s[1] != 1:
        x = x.contiguous()
        s = x.stride()
    return x, s[2] != 1 and x.shape[2] > 1


def fwd_any_layout(x, weight, bias, seq_idx, initial_states, out, final_states_out, silu_activation):
    """The forward op on kernel_layout(x): what the eager entry's fwd falls back to (csrc/python/
    eager.cpp takes the fast path only when kernel_layout would return x as it is), so that
    `_eager.fwd` takes x in any strides, as the compat module's out-taking forward does."""
    _fwd(kernel_layout(x)[0], weight, bias, seq_idx, initial_states, out, final_states_out, silu_activation)


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


def bwd_into(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx, dweight, dbias, dinitial_states,
             silu_activation):
    """The backward op into given buffers (the compat module's 12-argument form) on kernel_layout(x),
    dout in x's layout, in deterministic_mode(): what the eager entry's bwd falls back to (csrc/python/
    eager.cpp takes the fast path only when none of these would change what the op gets)."""
    x, channel_last = kernel_layout(x)
    _bwd(x, weight, bias, match_layout(dout, channel_last), seq_idx, initial_states, dfinal_states, dx, dweight,
         dbias, dinitial_states, silu_activation, deterministic_mode())


_eager.bind(fwd_any_layout, _update, _update_functional, bwd_into)


_cpu_output_buffer = ops.cpu_output_buffer.default


def empty_in_layout(x, channel_last):
    """An uninitialised tensor shaped like x in x's layout. Never a view (allocated with its
    strides), so the caller may modify it in place, also when autograd returned it. On the CPU its
    storage comes from the op library's output cache when it is large (csrc/torch/cpu_output_cache.cpp:
    freed large buffers are kept and reused instead of being faulted in again on every call)."""
    if x.device.type == "cpu" and x.dim() == 3:
        batch, dim, seqlen = x.shape
        return _cpu_output_buffer(x, x.shape, (seqlen * dim, 1, dim) if channel_last else (dim * seqlen, seqlen, 1))
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
    """Forward into a fresh output in x's layout (x and channel_last from kernel_layout), and into
    the caller's final_states_out when one is given."""
    out = empty_in_layout(x, channel_last)
    fwd_into(x, weight, bias, seq_idx, initial_states, out, final_states_out, silu)
    return out


def run_fwd_fresh(x, channel_last, weight, bias, seq_idx, initial_states, return_final_states, silu):
    """(out, final_states or None), both fresh. Under torch.compile through the functional op
    (fwd_functional): the out-buffer op would be functionalized there, which for a channel-last
    output costs a copy of it and makes the backward's incoming gradient contiguous (a second
    copy); eagerly through the out-buffer op, one dispatcher hop less."""
    if torch.compiler.is_compiling():
        out, final = fwd_functional(x, weight, bias, seq_idx, initial_states, return_final_states, silu)
        return out, final if return_final_states else None
    final = new_states(x, weight) if return_final_states else None
    return run_fwd(x, channel_last, weight, bias, seq_idx, initial_states, final, silu), final


def run_bwd(x, channel_last, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx,
            return_dinitial_states, silu):
    """Backward; returns (dx, dweight, dbias, dinitial_states) with dweight/dbias accumulated in
    float32 and returned in weight's/bias's dtype, as upstream returns them. dx is the given
    buffer when one is passed (it must have x's layout), else a fresh one."""
    dout = match_layout(dout, channel_last)
    if dx is None and torch.compiler.is_compiling():  # see run_fwd_fresh
        dx, dweight, dbias, dinitial_states = bwd_functional(x, weight, bias, dout, seq_idx, initial_states,
                                                             dfinal_states, return_dinitial_states, silu,
                                                             deterministic_mode())
        return (dx, dweight.to(weight.dtype), dbias.to(bias.dtype) if bias is not None else None,
                dinitial_states if return_dinitial_states else None)
    if dx is None:
        dx = empty_in_layout(x, channel_last)
    dweight = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device)
    dbias = torch.zeros(bias.shape, dtype=torch.float32, device=bias.device) if bias is not None else None
    dinitial_states = new_states(x, weight) if return_dinitial_states else None
    if dynamo_tracing():
        _bwd(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx, dweight, dbias, dinitial_states,
             silu, deterministic_mode())
    else:  # x and dout laid out: the eager entry's fast path (it reads the deterministic mode itself)
        _eager.bwd(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx, dweight, dbias, dinitial_states,
                   silu)
    dweight = dweight.to(weight.dtype)
    if dbias is not None:
        dbias = dbias.to(bias.dtype)
    return dx, dweight, dbias, dinitial_states


# Functional forms of fwd and bwd for torch.compile: they return fresh outputs instead of writing
# into given ones, so the compiled graph has nothing to functionalize. Outputs a call does not ask
# for come back as 0-element tensors (a custom op returns no None). The annotations are evaluated
# (torch.library infers the schema from them): keep them real types.


def _is_channel_last(x):
    return x.dim() == 3 and x.shape[2] > 1 and x.stride(2) != 1


def _fwd_functional_outputs(x, weight, return_final_states):
    out = empty_in_layout(x, _is_channel_last(x))
    final = new_states(x, weight) if return_final_states else x.new_empty(0)
    return out, final


@torch.library.custom_op("causal_conv1d::fwd_functional", mutates_args=())
def fwd_functional(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                   seq_idx: Optional[torch.Tensor], initial_states: Optional[torch.Tensor],
                   return_final_states: bool, silu_activation: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    """fwd into fresh buffers: (out in x's layout, final_states or a 0-element tensor)."""
    out, final = _fwd_functional_outputs(x, weight, return_final_states)
    _fwd(x, weight, bias, seq_idx, initial_states, out, final if return_final_states else None, silu_activation)
    return out, final


@fwd_functional.register_fake
def _fwd_functional_fake(x, weight, bias, seq_idx, initial_states, return_final_states, silu_activation):
    return _fwd_functional_outputs(x, weight, return_final_states)


def _bwd_functional_outputs(x, weight, bias, return_dinitial_states):
    dx = empty_in_layout(x, _is_channel_last(x))
    dweight = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device)
    dbias = (torch.zeros(bias.shape, dtype=torch.float32, device=bias.device) if bias is not None
             else x.new_empty(0, dtype=torch.float32))
    dinitial_states = new_states(x, weight) if return_dinitial_states else x.new_empty(0)
    return dx, dweight, dbias, dinitial_states


@torch.library.custom_op("causal_conv1d::bwd_functional", mutates_args=())
def bwd_functional(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], dout: torch.Tensor,
                   seq_idx: Optional[torch.Tensor], initial_states: Optional[torch.Tensor],
                   dfinal_states: Optional[torch.Tensor], return_dinitial_states: bool, silu_activation: bool,
                   deterministic: bool) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """bwd into fresh buffers: (dx in x's layout, dweight and dbias in float32 (dbias 0-element
    without bias), dinitial_states or a 0-element tensor)."""
    dx, dweight, dbias, dinit = _bwd_functional_outputs(x, weight, bias, return_dinitial_states)
    _bwd(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx, dweight,
         dbias if bias is not None else None, dinit if return_dinitial_states else None, silu_activation,
         deterministic)
    return dx, dweight, dbias, dinit


@bwd_functional.register_fake
def _bwd_functional_fake(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, return_dinitial_states,
                         silu_activation, deterministic):
    return _bwd_functional_outputs(x, weight, bias, return_dinitial_states)


# fwd_functional's gradient, so that causal_conv1d_fn under torch.compile can call the op without
# an autograd.Function: dynamo traces an autograd.Function's backward with a contiguous incoming
# gradient (a copy of a channel-last one, then our match_layout copies it back), whereas the
# backward of an op with registered autograd sees the gradient in the output's layout.


def _fwd_functional_setup(ctx, inputs, output):
    x, weight, bias, seq_idx, initial_states, return_final_states, silu_activation = inputs
    ctx.save_for_backward(x, weight, bias, seq_idx, initial_states)
    ctx.return_final_states = return_final_states
    ctx.silu = silu_activation


def _fwd_functional_backward(ctx, dout, dfinal_states):
    x, weight, bias, seq_idx, initial_states = ctx.saved_tensors
    dout = match_layout(dout, _is_channel_last(x))
    return_dinitial_states = initial_states is not None and ctx.needs_input_grad[4]
    dx, dweight, dbias, dinitial_states = bwd_functional(
        x, weight, bias, dout, seq_idx, initial_states, dfinal_states if ctx.return_final_states else None,
        return_dinitial_states, ctx.silu, deterministic_mode())
    return (dx, dweight.to(weight.dtype), dbias.to(bias.dtype) if bias is not None else None, None,
            dinitial_states if return_dinitial_states else None, None, None)


fwd_functional.register_autograd(_fwd_functional_backward, setup_context=_fwd_functional_setup)
