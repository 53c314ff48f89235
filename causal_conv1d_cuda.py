"""The extension module name older clients import directly (``import causal_conv1d_cuda``).

Each function accepts every signature upstream has shipped, told apart by the number of
arguments (positional plus keyword, named as upstream names them):

causal_conv1d_fwd
    4  (x, weight, bias, silu_activation) -> out
    5  (x, weight, bias, seq_idx, silu_activation) -> out
    7  (x, weight, bias, seq_idx, initial_states, final_states_out, silu_activation) -> out
    8  (x, weight, bias, seq_idx, initial_states, out, final_states_out, silu_activation) -> None
causal_conv1d_bwd
    6  (x, weight, bias, dout, dx, silu_activation) -> [dx, dweight, dbias]
    7  (x, weight, bias, dout, seq_idx, dx, silu_activation) -> [dx, dweight, dbias]
    10 (x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx, return_dinitial_states,
        silu_activation) -> [dx, dweight, dbias, dinitial_states]
    12 (x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx, dweight, dbias,
        dinitial_states, silu_activation) -> None; dweight/dbias are float32 and accumulate
causal_conv1d_update
    5  (x, conv_state, weight, bias, silu_activation) -> out
    6  (x, conv_state, weight, bias, silu_activation, cache_seqlens) -> out
    7  (x, conv_state, weight, bias, silu_activation, cache_seqlens, conv_state_indices) -> out
    8  (x, conv_state, weight, bias, out, silu_activation, cache_seqlens, conv_state_indices)
       -> None

The returning forms allocate what they return (dx when None) and give dweight/dbias in
weight's/bias's dtype, as upstream does.
"""

from causal_conv1d import _core
from causal_conv1d._ops import _eager

# The out-taking forms call the eager entry without a frame between (see causal_conv1d/_core.py).
_dynamo_tracing = _core.dynamo_tracing
_eager_fwd = _eager.fwd
_eager_bwd = _eager.bwd
_eager_update = _eager.update
_eager_update_functional = _eager.update_functional
_NONES = ((None, None), (None,), ())  # cache_seqlens, conv_state_indices left out of a 5- or 6-argument call

_FWD_FORMS = {
    4: ("x", "weight", "bias", "silu_activation"),
    5: ("x", "weight", "bias", "seq_idx", "silu_activation"),
    7: ("x", "weight", "bias", "seq_idx", "initial_states", "final_states_out", "silu_activation"),
    8: ("x", "weight", "bias", "seq_idx", "initial_states", "out", "final_states_out", "silu_activation"),
}
_BWD_FORMS = {
    6: ("x", "weight", "bias", "dout", "dx", "silu_activation"),
    7: ("x", "weight", "bias", "dout", "seq_idx", "dx", "silu_activation"),
    10: ("x", "weight", "bias", "dout", "seq_idx", "initial_states", "dfinal_states", "dx",
         "return_dinitial_states", "silu_activation"),
    12: ("x", "weight", "bias", "dout", "seq_idx", "initial_states", "dfinal_states", "dx", "dweight",
         "dbias", "dinitial_states", "silu_activation"),
}
_UPDATE_FORMS = {
    5: ("x", "conv_state", "weight", "bias", "silu_activation"),
    6: ("x", "conv_state", "weight", "bias", "silu_activation", "cache_seqlens"),
    7: ("x", "conv_state", "weight", "bias", "silu_activation", "cache_seqlens", "conv_state_indices"),
    8: ("x", "conv_state", "weight", "bias", "out", "silu_activation", "cache_seqlens", "conv_state_indices"),
}


def _bind(name, forms, args, kwargs):
    n = len(args) + len(kwargs)
    if not kwargs and n in forms:  # all positional: the common call, kept cheap
        return n, dict(zip(forms[n], args))
    if n not in forms:
        counts = ", ".join(str(k) for k in sorted(forms))
        raise TypeError(f"{name}() takes {counts} arguments (one per upstream signature), got {n}")
    names = forms[n]
    bound = dict(zip(names, args))
    for key, value in kwargs.items():
        if key not in names or key in bound:
            raise TypeError(f"{name}(): unexpected or repeated argument {key!r} for the {n}-argument form {names}")
        bound[key] = value
    return n, bound


def causal_conv1d_fwd(*args, **kwargs):
    if len(args) == 8 and not kwargs:  # the out-taking form fused callers run per step: no binding
        if _dynamo_tracing():
            _core.fwd_any_layout(*args)
        else:
            _eager_fwd(*args)  # (any strides of x: the entry lays it out as _core.kernel_layout does)
        return None
    n, a = _bind("causal_conv1d_fwd", _FWD_FORMS, args, kwargs)
    x, channel_last = _core.kernel_layout(a["x"])
    if n == 8:
        _core.fwd_into(x, a["weight"], a["bias"], a["seq_idx"], a["initial_states"], a["out"],
                       a["final_states_out"], a["silu_activation"])
        return None
    return _core.run_fwd(x, channel_last, a["weight"], a["bias"], a.get("seq_idx"), a.get("initial_states"),
                         a.get("final_states_out"), a["silu_activation"])


def causal_conv1d_bwd(*args, **kwargs):
    if len(args) == 12 and not kwargs:  # the into-buffers form fused layers run per step: no binding
        (_core.bwd_into if _dynamo_tracing() else _eager_bwd)(*args)
        return None
    n, a = _bind("causal_conv1d_bwd", _BWD_FORMS, args, kwargs)
    if n == 12:  # keywords: bound, then the same entry, positionally
        (_core.bwd_into if _dynamo_tracing() else _eager_bwd)(*(a[k] for k in _BWD_FORMS[12]))
        return None
    x, channel_last = _core.kernel_layout(a["x"])
    dx, dweight, dbias, dinitial_states = _core.run_bwd(
        x, channel_last, a["weight"], a["bias"], a["dout"], a.get("seq_idx"), a.get("initial_states"),
        a.get("dfinal_states"), a["dx"], a.get("return_dinitial_states", False), a["silu_activation"])
    return [dx, dweight, dbias, dinitial_states] if n == 10 else [dx, dweight, dbias]


def causal_conv1d_update(*args, **kwargs):
    if not kwargs:  # positional calls, what decode loops make: no binding
        n = len(args)
        if n == 8:  # into out
            (_core.update_into if _dynamo_tracing() else _eager_update)(*args)
            return None
        if 5 <= n <= 7:  # returning out: update_functional's own argument order, padded with None
            return (_core.run_update if _dynamo_tracing() else _eager_update_functional)(*args, *_NONES[n - 5])
    n, a = _bind("causal_conv1d_update", _UPDATE_FORMS, args, kwargs)
    args = (a["x"], a["conv_state"], a["weight"], a["bias"])
    if n == 8:
        _core.update_into(*args, a["out"], a["silu_activation"], a["cache_seqlens"], a["conv_state_indices"])
        return None
    return _core.run_update(*args, a["silu_activation"], a.get("cache_seqlens"), a.get("conv_state_indices"))
