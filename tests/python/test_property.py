"""Property-based: random shapes, strides and options; forward and gradients match the float64
reference."""

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _reference import DTYPES, assert_close, conv_ref, random_seq_idx
from test_bwd import check_grads
from causal_conv1d import causal_conv1d_fn

LAYOUTS = ["cf", "cl", "cf_slice", "cl_slice", "neither"]


def _make(layout, batch, dim, seqlen, dtype, device):
    if layout == "cf":
        return torch.randn(batch, dim, seqlen, dtype=dtype, device=device)
    if layout == "cl":
        return torch.randn(batch, seqlen, dim, dtype=dtype, device=device).transpose(1, 2)
    if layout == "cf_slice":  # rows of a longer sequence buffer
        return torch.randn(batch, dim, seqlen + 7, dtype=dtype, device=device)[:, :, 3 : 3 + seqlen]
    if layout == "cl_slice":  # channels of a wider projection
        return torch.randn(batch, seqlen, dim + 5, dtype=dtype, device=device)[:, :, 2 : 2 + dim].transpose(1, 2)
    return torch.randn(batch, dim, 2 * seqlen, dtype=dtype, device=device)[:, :, ::2]


problems = st.fixed_dictionaries(
    {
        "batch": st.integers(1, 3),
        "dim": st.integers(1, 40),
        "seqlen": st.integers(1, 70),
        "width": st.integers(2, 4),
        "xtype": st.sampled_from(DTYPES),
        "wtype": st.sampled_from(DTYPES),
        "layout": st.sampled_from(LAYOUTS),
        "bias": st.booleans(),
        "silu": st.booleans(),
        "extra": st.sampled_from(["none", "init", "final", "init_final", "seq_idx", "seq_idx_padding"]),
    }
)


def _check(device, pb):
    torch.manual_seed(pb["batch"] * 1000 + pb["dim"] * 10 + pb["seqlen"])
    x = _make(pb["layout"], pb["batch"], pb["dim"], pb["seqlen"], pb["xtype"], device)
    w = torch.randn(pb["dim"], pb["width"], dtype=pb["wtype"], device=device) * 0.5
    b = torch.randn(pb["dim"], dtype=pb["wtype"], device=device) if pb["bias"] else None
    extra = pb["extra"]
    init = None
    if "init" in extra:
        init = torch.randn(pb["batch"], pb["dim"], pb["width"] - 1, dtype=pb["xtype"], device=device)
    seq_idx = None
    if extra.startswith("seq_idx"):
        seq_idx = random_seq_idx(pb["batch"], pb["seqlen"], device, padding=extra.endswith("padding"))
    final = "final" in extra

    res = causal_conv1d_fn(x, w, b, seq_idx=seq_idx, initial_states=init, return_final_states=final,
                           activation="silu" if pb["silu"] else None)
    out = res[0] if final else res
    ref_out, ref_final = conv_ref(x, w, b, seq_idx=seq_idx, initial_states=init, silu=pb["silu"])
    assert_close(out, ref_out, pb["xtype"])
    if final:
        torch.testing.assert_close(res[1].cpu(), ref_final, rtol=0, atol=0)
    check_grads(x, w, b, seq_idx=seq_idx, init=init, silu=pb["silu"], final=final)


_SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@settings(max_examples=25, **_SETTINGS)
@given(pb=problems)
def test_forward_and_grads_match_reference(device, pb):
    _check(device, pb)


@pytest.mark.exhaustive
@settings(max_examples=300, **_SETTINGS)
@given(pb=problems)
def test_forward_and_grads_match_reference_many(device, pb):
    _check(device, pb)
