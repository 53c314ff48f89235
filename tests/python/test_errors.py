"""Bad input gets an error naming the argument, what was expected and what came."""

import re

import pytest
import torch

from causal_conv1d import causal_conv1d_fn
from causal_conv1d._ops import ops


def _args(device, batch=2, dim=8, seqlen=16, width=4):
    x = torch.randn(batch, dim, seqlen, device=device)
    w = torch.randn(dim, width, device=device)
    b = torch.randn(dim, device=device)
    return x, w, b


def _fwd(x, w, b=None, seq_idx=None, init=None, out=None, final=None, silu=False):
    out = torch.empty_like(x) if out is None else out
    ops.fwd(x, w, b, seq_idx, init, out, final, silu)
    return out


def test_x_rank(device):
    x, w, b = _args(device)
    with pytest.raises(RuntimeError, match=r"causal_conv1d_fwd: x must be \(batch, dim, seqlen\), got shape \(8, 16\)"):
        _fwd(x[0], w, b, out=torch.empty(8, 16, device=device))


def _entry_points():
    """Every public function that takes x, called the way clients call it."""
    import causal_conv1d_cuda
    from causal_conv1d import causal_conv1d_update, cpp_functions
    from causal_conv1d.causal_conv1d_interface import CausalConv1dFn
    from causal_conv1d.causal_conv1d_varlen import causal_conv1d_varlen_states

    def state(x):
        return torch.zeros(2, 8, 3, device=x.device)

    return {
        "causal_conv1d_fn": ("fwd", lambda x, w: causal_conv1d_fn(x, w, activation="silu")),
        "causal_conv1d_fn final": ("fwd", lambda x, w: causal_conv1d_fn(x, w, return_final_states=True)),
        "CausalConv1dFn": ("fwd", lambda x, w: CausalConv1dFn.apply(x, w)),
        "fwd_function": ("fwd", lambda x, w: cpp_functions.causal_conv1d_fwd_function(x, w, None, None, None, None, True)),
        "bwd_function": ("bwd", lambda x, w: cpp_functions.causal_conv1d_bwd_function(
            x, w, None, torch.ones_like(x), None, None, None, None, False, True)),
        "update_function": ("update", lambda x, w: cpp_functions.causal_conv1d_update_function(
            x, state(x), w, None, True, None, None)),
        "causal_conv1d_update": ("update", lambda x, w: causal_conv1d_update(x, state(x), w)),
        "cuda.causal_conv1d_fwd": ("fwd", lambda x, w: causal_conv1d_cuda.causal_conv1d_fwd(x, w, None, True)),
        "cuda.causal_conv1d_bwd": ("bwd", lambda x, w: causal_conv1d_cuda.causal_conv1d_bwd(
            x, w, None, torch.ones_like(x), None, True)),
        "cuda.causal_conv1d_update": ("update", lambda x, w: causal_conv1d_cuda.causal_conv1d_update(
            x, state(x), w, None, True)),
        "varlen_states": ("varlen", lambda x, w: causal_conv1d_varlen_states(
            x, torch.tensor([0, 1], dtype=torch.int32, device=x.device), 3)),
    }


_EXPECTED_X = {
    "fwd": r"causal_conv1d_fwd: x must be \(batch, dim, seqlen\), got shape ",
    "bwd": r"causal_conv1d_bwd: x must be \(batch, dim, seqlen\), got shape ",
    "update": r"causal_conv1d_update: x must be \(batch, dim\) or \(batch, dim, seqlen\), got shape ",
    "varlen": r"causal_conv1d_varlen_states: x must be \(total_tokens, dim\), got shape ",
}


@pytest.mark.parametrize("name", list(_entry_points()))
@pytest.mark.parametrize("rank", [1, 2, 4])
def test_x_rank_at_every_entry_point(device, name, rank):
    # A clear error naming x, the expected shape and the given one, never an IndexError from
    # the Python wrappers. (2-D x is a valid decode step and 3-D x a valid varlen batch.)
    kind, call = _entry_points()[name]
    if (kind == "update" and rank == 2) or (kind == "varlen" and rank == 2):
        pytest.skip("a valid shape for this entry point")
    shape = {1: (8,), 2: (2, 8), 4: (2, 8, 16, 1)}[rank]
    x = torch.randn(*shape, device=device)
    w = torch.randn(8, 4, device=device)
    given = "(" + ", ".join(str(n) for n in shape) + ("," if rank == 1 else "") + ")"
    with pytest.raises(RuntimeError, match=_EXPECTED_X[kind] + re.escape(given)):
        call(x, w)


def test_weight_rank(device):
    x, w, b = _args(device)
    with pytest.raises(RuntimeError, match=r"weight must be \(dim, width\), got shape \(8, 4, 1\)"):
        _fwd(x, w.unsqueeze(-1), b)


def test_weight_dim_mismatch(device):
    x, w, b = _args(device)
    with pytest.raises(RuntimeError, match=r"weight must have shape \(dim, width\) = \(8, 4\), got \(9, 4\)"):
        _fwd(x, torch.randn(9, 4, device=device), b)


@pytest.mark.parametrize("width", [1, 5])
def test_unsupported_width(device, width):
    x, w, b = _args(device, width=width)
    with pytest.raises(RuntimeError, match=f"kernel width \\(weight.size\\(1\\)\\) must be 2, 3 or 4, got {width}"):
        causal_conv1d_fn(x, w, b)


@pytest.mark.parametrize("arg", ["x", "weight"])
def test_dtype(device, arg):
    x, w, b = _args(device)
    if arg == "x":
        x = x.to(torch.float64)
    else:
        w = w.to(torch.int32)
    with pytest.raises(RuntimeError, match=f"{arg} must be float32, float16 or bfloat16, got"):
        _fwd(x, w, None, out=torch.empty(x.shape, device=device))


def test_bias_dtype_and_shape(device):
    x, w, b = _args(device)
    with pytest.raises(RuntimeError, match=r"bias must have weight's dtype \(Float\), got Half"):
        _fwd(x, w, b.half())
    with pytest.raises(RuntimeError, match=r"bias must have shape \(dim,\) = \(8,\), got \(7,\)"):
        _fwd(x, w, b[:7])


def test_out_checks(device):
    x, w, b = _args(device)
    with pytest.raises(RuntimeError, match=r"out must have x's dtype \(Float\), got Half"):
        _fwd(x, w, b, out=torch.empty(x.shape, device=device, dtype=torch.half))
    with pytest.raises(RuntimeError, match=r"out must have shape x's shape"):
        _fwd(x, w, b, out=torch.empty(2, 8, 15, device=device))
    with pytest.raises(RuntimeError, match=r"out must have stride 1 along seqlen"):
        _fwd(x, w, b, out=torch.empty(2, 16, 8, device=device).transpose(1, 2))
    with pytest.raises(RuntimeError, match=r"out must not share memory with x"):
        _fwd(x, w, b, out=x)


def test_x_without_unit_stride_at_op_level(device):
    x, w, b = _args(device)
    x = torch.randn(2, 8, 32, device=device)[:, :, ::2]
    with pytest.raises(RuntimeError, match=r"x must be contiguous along seqlen .* or along dim"):
        _fwd(x, w, b, out=torch.empty(x.shape, device=device))


def test_seq_idx_checks(device):
    x, w, b = _args(device)
    with pytest.raises(RuntimeError, match=r"seq_idx must be int32, got Long"):
        causal_conv1d_fn(x, w, b, seq_idx=torch.zeros(2, 16, dtype=torch.long, device=device))
    with pytest.raises(RuntimeError, match=r"seq_idx must have shape \(batch, seqlen\) = \(2, 16\), got \(2, 15\)"):
        causal_conv1d_fn(x, w, b, seq_idx=torch.zeros(2, 15, dtype=torch.int32, device=device))


def test_seq_idx_with_states(device):
    x, w, b = _args(device)
    seq_idx = torch.zeros(2, 16, dtype=torch.int32, device=device)
    init = torch.zeros(2, 8, 3, device=device)
    # One rule, one home: the op's check, whichever entry point is used.
    msg = r"causal_conv1d_fwd: seq_idx cannot be combined with initial_states or final states"
    with pytest.raises(RuntimeError, match=msg):
        causal_conv1d_fn(x, w, b, seq_idx=seq_idx, initial_states=init)
    with pytest.raises(RuntimeError, match=msg + r" \(final_states_out, return_final_states=True\)"):
        causal_conv1d_fn(x, w, b, seq_idx=seq_idx, return_final_states=True)
    with pytest.raises(RuntimeError, match=msg):
        _fwd(x, w, b, seq_idx=seq_idx, init=init)


def test_states_checks(device):
    x, w, b = _args(device)
    with pytest.raises(RuntimeError, match=r"initial_states must have shape \(batch, dim, width - 1\) = \(2, 8, 3\), got \(2, 8, 4\)"):
        causal_conv1d_fn(x, w, b, initial_states=torch.zeros(2, 8, 4, device=device))
    with pytest.raises(RuntimeError, match=r"initial_states must have x's dtype \(Float\), got BFloat16"):
        causal_conv1d_fn(x, w, b, initial_states=torch.zeros(2, 8, 3, device=device, dtype=torch.bfloat16))
    with pytest.raises(RuntimeError, match=r"final_states_out must have shape \(batch, dim, width - 1\) = \(2, 8, 3\), got \(2, 8, 2\)"):
        causal_conv1d_fn(x, w, b, return_final_states=True, final_states_out=torch.zeros(2, 8, 2, device=device))


def test_activation(device):
    x, w, b = _args(device)
    with pytest.raises(NotImplementedError, match="activation must be None, silu, or swish, got 'relu'"):
        causal_conv1d_fn(x, w, b, activation="relu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU to mix devices")
def test_mixed_devices():
    x, w, b = _args("cuda")
    with pytest.raises(RuntimeError, match=r"weight must be on the same device as x \(cuda:0\), got cpu"):
        _fwd(x, w.cpu(), b)


def test_varlen_checks():
    x = torch.randn(10, 4)
    with pytest.raises(RuntimeError, match=r"cu_seqlens must be int32 or int64, got Float"):
        ops.varlen_states(x, torch.tensor([0.0, 10.0]), 3)
    with pytest.raises(RuntimeError, match=r"cu_seqlens must be non-decreasing"):
        ops.varlen_states(x, torch.tensor([0, 6, 4], dtype=torch.int32), 3)
    with pytest.raises(RuntimeError, match=r"cu_seqlens\[-1\] = 11 exceeds x.size\(0\) = 10"):
        ops.varlen_states(x, torch.tensor([0, 11], dtype=torch.int32), 3)
    with pytest.raises(RuntimeError, match=r"x must be \(total_tokens, dim\)"):
        ops.varlen_states(x[None], torch.tensor([0, 10], dtype=torch.int32), 3)
    with pytest.raises(RuntimeError, match=r"state_len must be >= 0, got -1"):
        ops.varlen_states(x, torch.tensor([0, 10], dtype=torch.int32), -1)


def _bwd_args(device):
    x, w, b = _args(device)
    return dict(x=x, w=w, b=b, dout=torch.randn_like(x), seq=None, init=None, dfinal=None, dx=torch.empty_like(x),
                dw=torch.zeros(8, 4, device=device), db=torch.zeros(8, device=device), dinit=None)


def _bwd(a):
    ops.bwd(a["x"], a["w"], a["b"], a["dout"], a["seq"], a["init"], a["dfinal"], a["dx"], a["dw"], a["db"],
            a["dinit"], True, False)


def test_bwd_checks(device):
    a = _bwd_args(device)
    a["dw"] = torch.zeros(8, 4, device=device, dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match=r"causal_conv1d_bwd: dweight must be float32 \(it accumulates\), got BFloat16"):
        _bwd(a)
    a = _bwd_args(device)
    a["b"] = None
    with pytest.raises(RuntimeError, match=r"dbias was given but bias is None"):
        _bwd(a)
    a = _bwd_args(device)
    a["dx"] = a["dout"]
    with pytest.raises(RuntimeError, match=r"dx must not share memory with dout"):
        _bwd(a)
    a = _bwd_args(device)
    a["dout"] = torch.randn(2, 16, 8, device=device).transpose(1, 2)
    with pytest.raises(RuntimeError, match=r"dout must have stride 1 along seqlen \(x is channel-first\)"):
        _bwd(a)
    a = _bwd_args(device)
    a["seq"] = torch.zeros(2, 16, dtype=torch.int32, device=device)
    a["dinit"] = torch.empty(2, 8, 3, device=device)
    with pytest.raises(RuntimeError, match=r"seq_idx cannot be combined with initial_states, dfinal_states or dinitial_states"):
        _bwd(a)
    a = _bwd_args(device)
    a["dfinal"] = torch.zeros(2, 8, 2, device=device)
    with pytest.raises(RuntimeError, match=r"dfinal_states must have shape \(batch, dim, width - 1\) = \(2, 8, 3\), got \(2, 8, 2\)"):
        _bwd(a)
