"""Tensors on a GPU other than the current one: every op runs on the tensors' device and on that
device's current stream (runs where two or more GPUs are visible)."""

import pytest
import torch

from _reference import LAYOUT_IDS, LAYOUTS, assert_close, assert_grad_close, conv_ref, conv_ref_diff, make_x, update_ref
from causal_conv1d import causal_conv1d_fn, causal_conv1d_update
from causal_conv1d.causal_conv1d_varlen import causal_conv1d_varlen_states, causal_conv1d_varlen_states_ref

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs two visible GPUs"
)


@pytest.fixture
def second_gpu_with_side_stream():
    """cuda:1 with a non-default current stream, while cuda:0 is the current device."""
    prev_device = torch.cuda.current_device()
    side = torch.cuda.Stream(device=1)
    torch.cuda.set_stream(side)
    torch.cuda.set_device(0)
    assert torch.cuda.current_device() == 0 and torch.cuda.current_stream(1) == side
    yield side
    torch.cuda.set_stream(torch.cuda.default_stream(1))
    torch.cuda.set_device(prev_device)


def _late_write(dst, src):
    """dst.copy_(src) queued on cuda:1's current stream behind a long sleep: an op that runs on
    any other stream reads the old dst."""
    with torch.cuda.device(1):
        torch.cuda._sleep(200_000_000)  # roughly 0.1 s of GPU time on that stream
        dst.copy_(src)


@pytest.mark.parametrize("channel_last", LAYOUTS, ids=LAYOUT_IDS)
def test_fwd_bwd_on_second_gpu(second_gpu_with_side_stream, channel_last):
    x_new = make_x(2, 64, 300, torch.float32, "cuda:1", channel_last)
    x = torch.zeros_like(x_new).requires_grad_()
    w = (torch.randn(64, 4, device="cuda:1") * 0.5).requires_grad_()
    b = torch.randn(64, device="cuda:1").requires_grad_()
    with torch.no_grad():
        _late_write(x, x_new)
    out = causal_conv1d_fn(x, w, b, activation="silu")
    assert out.device == torch.device("cuda:1")
    g = torch.randn_like(out)
    out.backward(g)
    second_gpu_with_side_stream.synchronize()
    assert_close(out, conv_ref(x_new, w, b, silu=True)[0], torch.float32)
    rx, rw, rb = (t.detach().clone().requires_grad_() for t in (x_new, w, b))
    conv_ref_diff(rx, rw, rb, silu=True)[0].backward(g.double())
    assert_grad_close(x.grad, rx.grad, torch.float32, "dx")
    assert_grad_close(w.grad, rw.grad, torch.float32, "dweight")
    assert_grad_close(b.grad, rb.grad, torch.float32, "dbias")


def test_update_and_varlen_states_on_second_gpu(second_gpu_with_side_stream):
    x_new = torch.randn(4, 64, device="cuda:1")
    x = torch.zeros_like(x_new)
    state = torch.randn(4, 64, 3, device="cuda:1")
    w = torch.randn(64, 4, device="cuda:1")
    ref_out, ref_state = update_ref(x_new, state, w, None, True)
    _late_write(x, x_new)
    out = causal_conv1d_update(x, state, w, activation="silu")
    tokens = torch.randn(50, 64, device="cuda:1")
    cu = torch.tensor([0, 7, 20, 50], dtype=torch.int32, device="cuda:1")
    states = causal_conv1d_varlen_states(tokens, cu, 5)
    second_gpu_with_side_stream.synchronize()
    assert out.device == states.device == torch.device("cuda:1")
    assert_close(out, ref_out, torch.float32)
    torch.testing.assert_close(state.cpu(), ref_state, rtol=0, atol=0)
    torch.testing.assert_close(states, causal_conv1d_varlen_states_ref(tokens, cu, 5), rtol=0, atol=0)
