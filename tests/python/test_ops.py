"""The registered ops: opcheck (schema, fake kernels, autograd registration), torch.compile."""

import pytest
import torch

from _reference import assert_close, conv_ref, make_x
from causal_conv1d import causal_conv1d_fn
from causal_conv1d._ops import build_config, ops


def _fwd_samples(device):
    for channel_last in (False, True):
        x = make_x(2, 16, 33, torch.float32, device, channel_last)
        w = torch.randn(16, 4, device=device)
        b = torch.randn(16, device=device)
        out = torch.empty(2, 33, 16, device=device).transpose(1, 2) if channel_last else torch.empty_like(x)
        yield (x, w, b, None, None, out, None, True)
        init = torch.randn(2, 16, 3, device=device)
        final = torch.empty(2, 16, 3, device=device)
        yield (x, w, None, None, init, out, final, False)
        seq = torch.zeros(2, 33, dtype=torch.int32, device=device)
        seq[:, 20:] = 1
        yield (x, w.half(), b.half(), seq, None, out, None, True)


def test_opcheck_fwd(device):
    for args in _fwd_samples(device):
        torch.library.opcheck(ops.fwd.default, args)


def test_opcheck_bwd(device):
    for channel_last in (False, True):
        x = make_x(2, 16, 33, torch.float32, device, channel_last)
        w = torch.randn(16, 4, device=device)
        b = torch.randn(16, device=device)
        dout = torch.randn_like(x)
        dx = torch.empty(2, 33, 16, device=device).transpose(1, 2) if channel_last else torch.empty_like(x)
        dw = torch.zeros(16, 4, device=device)
        db = torch.zeros(16, device=device)
        init = torch.randn(2, 16, 3, device=device)
        dinit = torch.empty(2, 16, 3, device=device)
        dfinal = torch.randn(2, 16, 3, device=device)
        torch.library.opcheck(ops.bwd.default, (x, w, b, dout, None, init, dfinal, dx, dw, db, dinit, True, False))
        seq = torch.zeros(2, 33, dtype=torch.int32, device=device)
        seq[:, 10:] = 1
        torch.library.opcheck(ops.bwd.default, (x, w, None, dout, seq, None, None, dx, dw, None, None, False, True))


def test_opcheck_functional(device):
    # The functional forms torch.compile calls (causal_conv1d/_core.py): fresh outputs in x's layout.
    for channel_last in (False, True):
        x = make_x(2, 16, 33, torch.float32, device, channel_last)
        w = torch.randn(16, 4, device=device)
        b = torch.randn(16, device=device)
        init = torch.randn(2, 16, 3, device=device)
        seq = torch.zeros(2, 33, dtype=torch.int32, device=device)
        seq[:, 20:] = 1
        dout = torch.randn_like(x)
        dfinal = torch.randn(2, 16, 3, device=device)
        torch.library.opcheck(ops.fwd_functional.default, (x, w, b, None, None, False, True))
        torch.library.opcheck(ops.fwd_functional.default, (x, w, None, None, init, True, False))
        torch.library.opcheck(ops.fwd_functional.default, (x, w.half(), b.half(), seq, None, False, True))
        # With gradients: fwd_functional's registered backward (through bwd_functional).
        grad_args = [t.clone().requires_grad_() for t in (x, w, b, init)]
        torch.library.opcheck(ops.fwd_functional.default, (*grad_args[:3], None, grad_args[3], True, True))
        torch.library.opcheck(ops.bwd_functional.default, (x, w, b, dout, None, init, dfinal, True, True, False))
        torch.library.opcheck(ops.bwd_functional.default, (x, w, None, dout, seq, None, None, False, False, True))
        out, final = ops.fwd_functional(x, w, b, None, init, True, True)
        ref_out, ref_final = conv_ref(x, w, b, initial_states=init, silu=True)
        assert out.stride() == x.stride()
        assert_close(out, ref_out, torch.float32)
        torch.testing.assert_close(final.cpu(), ref_final.cpu(), rtol=0, atol=0)  # copied inputs
        dx, dw, db, dinit = ops.bwd_functional(x, w, None, dout, None, init, None, True, True, False)
        assert dx.stride() == x.stride() and db.numel() == 0 and dinit.shape == (2, 16, 3)
        assert dw.dtype == torch.float32


def test_opcheck_update(device):
    x = torch.randn(3, 16, device=device)
    state = torch.randn(4, 16, 5, device=device)
    w = torch.randn(16, 4, device=device)
    b = torch.randn(16, device=device)
    out = torch.empty_like(x)
    state3 = torch.randn(3, 16, 5, device=device)  # one line per row when there are no indices
    torch.library.opcheck(ops.update.default, (x, state3, w, b, out, True, None, None))
    cs = torch.tensor([0, 3, 9], dtype=torch.int32, device=device)
    idx = torch.tensor([2, -1, 0], dtype=torch.int32, device=device)
    x3 = torch.randn(3, 16, 2, device=device)
    torch.library.opcheck(ops.update.default, (x3, state, w, None, torch.empty_like(x3), False, cs, idx))
    # The functional form (the public functions' call): a fresh out with x's shape and strides.
    torch.library.opcheck(ops.update_functional.default, (x, state3, w, b, True, None, None))
    torch.library.opcheck(ops.update_functional.default, (x3, state, w, None, False, cs, idx))
    xt = torch.randn(16, 3, 2, device=device).permute(1, 0, 2)  # channels not contiguous
    state_t, state_f = state.clone(), state.clone()
    got = ops.update_functional.default(xt, state_t, w, b, True, cs, idx)
    want = torch.empty_like(xt)
    ops.update.default(xt, state_f, w, b, want, True, cs, idx)
    assert got.shape == xt.shape and got.stride() == xt.stride()
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    torch.testing.assert_close(state_t, state_f, rtol=0, atol=0)


def test_opcheck_varlen_states(device):
    x = torch.randn(12, 8, device=device)
    cu = torch.tensor([0, 5, 12], dtype=torch.int32, device=device)
    torch.library.opcheck(ops.varlen_states.default, (x, cu, 4))


def test_out_buffer_ops_fall_through_autograd(device):
    """The ops that return nothing skip PyTorch's boxed autograd fallback (ops.cpp): their autograd
    keys fall through, and an eager call with inputs that require grad, in grad mode, runs the
    kernel as before (no graph node: nothing is returned). So does update_functional (a decode step:
    its out has no graph node either). varlen_states keeps the fallback."""
    for name in ("fwd", "bwd", "update", "update_functional", "serving_fwd", "serving_update"):
        for key in ("AutogradCPU", "AutogradCUDA"):
            assert torch._C._dispatch_kernel_for_dispatch_key_is_fallthrough(f"causal_conv1d::{name}", key), (name, key)
    assert not torch._C._dispatch_has_kernel_for_dispatch_key("causal_conv1d::varlen_states", "AutogradCPU")
    x = make_x(2, 16, 33, torch.float32, device, False).requires_grad_()
    w = torch.randn(16, 4, device=device, requires_grad=True)
    b = torch.randn(16, device=device, requires_grad=True)
    out = torch.empty_like(x, requires_grad=False)
    with torch.enable_grad():
        ops.fwd.default(x, w, b, None, None, out, None, True)
    assert out.grad_fn is None and not out.requires_grad
    assert_close(out, conv_ref(x.detach(), w.detach(), b.detach(), silu=True)[0], torch.float32)
    with torch.enable_grad():
        step = ops.update_functional.default(x[:, :, 0], torch.zeros(2, 16, 3, device=device), w, b, True, None, None)
    assert step.grad_fn is None and not step.requires_grad


def test_compile_fullgraph_forward(device):
    x = make_x(2, 16, 40, torch.float32, device, True)
    w = torch.randn(16, 4, device=device)
    b = torch.randn(16, device=device)

    def f(x, w, b):
        return causal_conv1d_fn(x, w, b, activation="silu") * 2

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    assert_close(compiled(x, w, b), conv_ref(x, w, b, silu=True)[0] * 2, torch.float32)


def test_compile_fullgraph_backward(device):
    x = make_x(2, 16, 40, torch.float32, device, True).requires_grad_()
    w = torch.randn(16, 4, device=device, requires_grad=True)
    b = torch.randn(16, device=device, requires_grad=True)
    init = torch.randn(2, 16, 3, device=device, requires_grad=True)

    def f(x, w, b, init):
        out, final = causal_conv1d_fn(x, w, b, initial_states=init, return_final_states=True, activation="silu")
        return (out * out).sum() + final.sum()

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    grads = torch.autograd.grad(compiled(x, w, b, init), (x, w, b, init))
    eager = torch.autograd.grad(f(x, w, b, init), (x, w, b, init))
    for g, e in zip(grads, eager):
        torch.testing.assert_close(g, e)


def test_compile_fullgraph_update(device):
    from causal_conv1d import causal_conv1d_update

    x = torch.randn(3, 16, device=device)
    w = torch.randn(16, 4, device=device)
    b = torch.randn(16, device=device)
    state = torch.randn(3, 16, 3, device=device)
    state_eager = state.clone()

    def step(x, state):
        return causal_conv1d_update(x, state, w, b, "silu") + 1

    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    out = compiled(x, state)
    ref = step(x, state_eager)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(state, state_eager, rtol=0, atol=0)  # the in-place update survives compile


def test_build_config_reports_backend():
    cfg = build_config()
    assert cfg["backend"] in ("hip", "cuda", "cpu")
    assert cfg["torch_version"] == torch.__version__
    if cfg["backend"] == "cpu":
        assert cfg["gpu_archs"] == ""


def test_compile_graph_has_no_functionalized_ops(device):
    # Under torch.compile the forward and backward go through the functional ops, so AOTAutograd
    # has no mutation to functionalize: no auto_functionalized node, and for channel-last x no
    # copy of the output or of the incoming gradient (inductor turned those into copy kernels).
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    graphs = []

    def capture(gm, example_inputs):
        graphs.append(gm)
        return make_boxed_func(gm.forward)

    backend = aot_autograd(fw_compiler=capture, bw_compiler=capture)
    # Whether AOTAutograd guesses an incoming gradient's strides from its output's (the default of
    # the dev root's PyTorch 2.14) or assumes a contiguous one.
    tangents_like_outputs = getattr(torch._functorch.config, "guess_tangent_strides_as_outputs", False)
    for channel_last in (False, True):
        graphs.clear()
        torch._dynamo.reset()
        x = make_x(2, 16, 40, torch.float32, device, channel_last).requires_grad_()
        w = torch.randn(16, 4, device=device, requires_grad=True)
        b = torch.randn(16, device=device, requires_grad=True)

        def f(x, w, b):
            return causal_conv1d_fn(x, w, b, activation="silu")

        out = torch.compile(f, fullgraph=True, backend=backend)(x, w, b)
        assert out.stride() == x.stride()
        grads = torch.autograd.grad(out, (x, w, b), out.detach() * 3)
        ref = f(x, w, b)
        eager = torch.autograd.grad(ref, (x, w, b), ref.detach() * 3)
        torch.testing.assert_close(out, ref)
        for g, e in zip(grads, eager):
            torch.testing.assert_close(g, e)
        assert len(graphs) == 2  # forward, backward
        fw, bw = ([str(n.target) for n in gm.graph.nodes if n.op == "call_function"] for gm in graphs)
        assert any("fwd_functional" in t for t in fw) and any("bwd_functional" in t for t in bw), (fw, bw)
        unwanted = [t for t in fw + bw if "auto_functionalized" in t or "clone" in t or "copy" in t]
        if channel_last and not tangents_like_outputs:
            # This PyTorch traces the backward with a contiguous incoming gradient: one copy back
            # into x's layout (clone + transposes) is the kernel's requirement, nothing else.
            assert unwanted == ["aten.clone.default"] and not any("clone" in t for t in fw), (fw, bw)
        else:
            assert not unwanted, unwanted
