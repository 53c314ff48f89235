"""Returned tensors belong to the caller: they are fresh (never views of a hidden buffer), keep x's
layout, and can be modified in place afterwards, also when autograd returned them. Upstream's own
test does `out += F.sigmoid(final_states).sum(dim=-1, keepdim=True)` after return_final_states=True
and then backpropagates through both."""

import pytest
import torch
import torch.nn.functional as F

import causal_conv1d_cuda
from _reference import LAYOUT_IDS, LAYOUTS, assert_close, assert_grad_close, conv_ref, conv_ref_diff, make_x
from causal_conv1d import causal_conv1d_fn, cpp_functions
from causal_conv1d.causal_conv1d_interface import CausalConv1dFn


def _leaf(t, grad):
    return t.detach().clone().requires_grad_(grad)


@pytest.mark.parametrize("use_apply", [False, True], ids=["fn", "apply"])
@pytest.mark.parametrize("grad", [False, True], ids=["nograd", "grad"])
@pytest.mark.parametrize("channel_last", LAYOUTS, ids=LAYOUT_IDS)
def test_upstream_in_place_pattern(device, channel_last, grad, use_apply):
    # Exactly upstream's pattern: out and final_states returned, out modified in place with a
    # function of final_states, then backward through both.
    x = _leaf(make_x(2, 24, 40, torch.float32, device, channel_last), grad)
    w = _leaf(torch.randn(24, 4, device=device) * 0.5, grad)
    b = _leaf(torch.randn(24, device=device), grad)
    init = _leaf(torch.randn(2, 3, 24, device=device).transpose(1, 2), grad)
    if use_apply:
        out, final = CausalConv1dFn.apply(x, w, b, None, init, True, None, "silu")
    else:
        out, final = causal_conv1d_fn(x, w, b, initial_states=init, return_final_states=True, activation="silu")
    assert out._base is None and final._base is None, "outputs are not views"
    assert (out.stride(1) == 1) == channel_last, "out keeps x's layout"
    out += F.sigmoid(final).sum(dim=-1, keepdim=True)
    final.mul_(2)  # the final states are the caller's too

    rx, rw, rb, rinit = (_leaf(t, True) for t in (x, w, b, init))
    rout, rfinal = conv_ref_diff(rx, rw, rb, initial_states=rinit, silu=True)
    rout = rout + F.sigmoid(rfinal).sum(dim=-1, keepdim=True)
    assert_close(out, rout, torch.float32)
    assert_close(final, 2 * rfinal, torch.float32, what="final_states")
    if grad:
        g = torch.randn_like(out)
        out.backward(g)
        rout.backward(g.double())
        for mine, ref, what in ((x, rx, "dx"), (w, rw, "dweight"), (b, rb, "dbias"), (init, rinit, "dinit")):
            assert_grad_close(mine.grad, ref.grad, torch.float32, what)


@pytest.mark.parametrize("channel_last", LAYOUTS, ids=LAYOUT_IDS)
def test_functional_entry_points_return_fresh_tensors(device, channel_last):
    # cpp_functions and causal_conv1d_cuda (what mamba_ssm calls) return tensors the caller owns.
    x = make_x(2, 16, 33, torch.float32, device, channel_last)
    w = torch.randn(16, 4, device=device)
    b = torch.randn(16, device=device)
    ref = conv_ref(x, w, b, silu=True)[0]
    for out in (cpp_functions.causal_conv1d_fwd_function(x, w, b, None, None, None, True),
                causal_conv1d_cuda.causal_conv1d_fwd(x, w, b, None, None, None, True)):
        assert out._base is None and (out.stride(1) == 1) == channel_last
        out += 1
        assert_close(out, ref + 1, torch.float32)
    dout = torch.randn_like(x)
    dx, dweight, dbias, _ = cpp_functions.causal_conv1d_bwd_function(x, w, b, dout, None, None, None, None, False, True)
    dx2, dweight2, dbias2 = causal_conv1d_cuda.causal_conv1d_bwd(x, w, b, dout, None, None, True)
    for t in (dx, dweight, dbias, dx2, dweight2, dbias2):
        assert t._base is None
    dx.add_(1)
    torch.testing.assert_close(dx, dx2 + 1)
