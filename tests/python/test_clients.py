"""Call patterns copied from the clients that import causal_conv1d: if one of these breaks, a real
model breaks. Each compares with the float64 reference (or with the full-sequence forward)."""

import pytest
import torch
import torch.nn.functional as F

from _reference import TOL, assert_close, assert_grad_close, conv_ref, conv_ref_diff, random_seq_idx


def _conv1d_module(dim, width, device, dtype=torch.float32):
    # nn.Conv1d(groups=dim) as the models hold it: weight (dim, 1, width)
    conv = torch.nn.Conv1d(dim, dim, width, groups=dim, padding=width - 1, bias=True).to(device, dtype)
    return conv


def test_mamba_simple(device):
    # mamba_ssm/modules/mamba_simple.py: keyword forward on channel-first x, then step() with
    # causal_conv1d_update(x, conv_state, weight, bias, activation) (activation positional) on a
    # (batch, dim, d_conv) state rolled by the kernel.
    from causal_conv1d import causal_conv1d_fn, causal_conv1d_update

    dim, d_conv, batch, seqlen = 32, 4, 2, 20
    conv = _conv1d_module(dim, d_conv, device)
    weight = conv.weight.squeeze(1)  # rearrange(w, "d 1 w -> d w")
    x = torch.randn(batch, dim, seqlen, device=device)
    out = causal_conv1d_fn(x=x, weight=weight, bias=conv.bias, activation="silu")
    assert_close(out, conv_ref(x, weight, conv.bias, silu=True)[0], torch.float32)

    conv_state = torch.zeros(batch, dim, d_conv, device=device)
    steps = [causal_conv1d_update(x[:, :, t], conv_state, weight, conv.bias, "silu") for t in range(seqlen)]
    assert_close(torch.stack(steps, -1), out, torch.float32)


def test_mamba2_channel_last_with_seq_idx_and_grad(device):
    # mamba_ssm/modules/mamba2.py: xBC (batch, seqlen, dim) -> transpose -> conv with seq_idx ->
    # transpose back; trained end to end.
    from causal_conv1d import causal_conv1d_fn

    batch, seqlen, dim, d_conv = 2, 64, 48, 4
    conv = _conv1d_module(dim, d_conv, device, torch.bfloat16)
    weight = conv.weight.squeeze(1)
    xBC = torch.randn(batch, seqlen, dim, device=device, dtype=torch.bfloat16, requires_grad=True)
    seq_idx = random_seq_idx(batch, seqlen, device, max_segments=4)
    y = causal_conv1d_fn(xBC.transpose(1, 2), weight, bias=conv.bias, activation="silu", seq_idx=seq_idx).transpose(1, 2)
    assert y.shape == (batch, seqlen, dim) and y.is_contiguous()
    g = torch.randn_like(y)
    y.backward(g)

    rx = xBC.detach().clone().requires_grad_()
    rw = weight.detach().clone().requires_grad_()
    rb = conv.bias.detach().clone().requires_grad_()
    ry, _ = conv_ref_diff(rx.transpose(1, 2), rw, rb, seq_idx=seq_idx, silu=True)
    ry.transpose(1, 2).backward(g.double())
    assert_close(y, ry.transpose(1, 2), torch.bfloat16)
    assert_grad_close(xBC.grad, rx.grad, torch.bfloat16, "dxBC")
    assert_grad_close(conv.weight.grad.squeeze(1), rw.grad, torch.bfloat16, "dweight")
    assert_grad_close(conv.bias.grad, rb.grad, torch.bfloat16, "dbias")


def test_mamba_ssm_fused_path_cpp_functions(device):
    # mamba_ssm/ops/triton/ssd_combined.py (mamba_split_conv1d_scan_combined): forward through
    # causal_conv1d_fwd_function, backward through causal_conv1d_bwd_function writing dx into a
    # slice of the big dzxbcdt gradient buffer.
    from causal_conv1d.cpp_functions import causal_conv1d_bwd_function, causal_conv1d_fwd_function

    batch, seqlen, dim, width = 2, 40, 24, 4
    zxbcdt = torch.randn(batch, seqlen, 3 * dim, device=device)
    xBC = zxbcdt[:, :, dim : 2 * dim]
    weight = torch.randn(dim, width, device=device)
    bias = torch.randn(dim, device=device)
    seq_idx = random_seq_idx(batch, seqlen, device, max_segments=3)
    out = causal_conv1d_fwd_function(xBC.transpose(1, 2), weight, bias, seq_idx, None, None, True)
    assert_close(out, conv_ref(xBC.transpose(1, 2), weight, bias, seq_idx=seq_idx, silu=True)[0], torch.float32)

    dzxbcdt = torch.full((batch, seqlen, 3 * dim), 7.0, device=device)
    dx_given = dzxbcdt[:, :, dim : 2 * dim].transpose(1, 2)
    dout = torch.randn(batch, seqlen, dim, device=device).transpose(1, 2)
    dx, dweight, dbias, dinit = causal_conv1d_bwd_function(
        xBC.transpose(1, 2), weight, bias, dout, seq_idx, None, None, dx_given, False, True
    )
    assert dx.data_ptr() == dx_given.data_ptr(), "dx is written into the given buffer"
    assert dinit is None and dweight.dtype == weight.dtype and dbias.dtype == bias.dtype
    assert torch.all(dzxbcdt[:, :, :dim] == 7.0) and torch.all(dzxbcdt[:, :, 2 * dim :] == 7.0)

    rx = xBC.transpose(1, 2).detach().clone().requires_grad_()
    rw, rb = weight.detach().clone().requires_grad_(), bias.detach().clone().requires_grad_()
    conv_ref_diff(rx, rw, rb, seq_idx=seq_idx, silu=True)[0].backward(dout.double())
    assert_grad_close(dx, rx.grad, torch.float32, "dx")
    assert_grad_close(dweight, rw.grad, torch.float32, "dweight")
    assert_grad_close(dbias, rb.grad, torch.float32, "dbias")


def test_cpp_functions_update_and_states(device):
    from causal_conv1d.cpp_functions import causal_conv1d_bwd_function, causal_conv1d_fwd_function, causal_conv1d_update_function

    x = torch.randn(2, 16, 30, device=device)
    w, b = torch.randn(16, 3, device=device), torch.randn(16, device=device)
    init = torch.randn(2, 16, 2, device=device)
    final = torch.empty(2, 16, 2, device=device)
    out = causal_conv1d_fwd_function(x, w, b, None, init, final, False)
    ref_out, ref_final = conv_ref(x, w, b, initial_states=init)
    assert_close(out, ref_out, torch.float32)
    torch.testing.assert_close(final.cpu(), ref_final, rtol=0, atol=0)
    dx, dw, db, dinit = causal_conv1d_bwd_function(x, w, b, torch.ones_like(out), None, init, None, None, True, False)
    assert dinit.shape == (2, 16, 2)

    state = torch.randn(2, 16, 2, device=device)
    s2 = state.clone()
    out = causal_conv1d_update_function(x[:, :, 0], state, w, b, True, None, None)
    from _reference import update_ref

    ref, ref_state = update_ref(x[:, :, 0], s2, w, b, True)
    assert_close(out, ref, torch.float32)
    torch.testing.assert_close(state.cpu(), ref_state, rtol=0, atol=0)


def test_qwen3_next_prefill_then_decode(device):
    # transformers' Qwen3-Next gated DeltaNet: keyword call with seq_idx=None on a channel-last
    # mixed_qkv, the conv state kept as F.pad(mixed_qkv, (kernel_size - seqlen, 0)) (state_len =
    # kernel_size, one more than needed), then one update per decoded token on (batch, dim, 1).
    from causal_conv1d import causal_conv1d_fn, causal_conv1d_update

    batch, prefill, decode, dim, k = 2, 9, 5, 40, 4
    conv = _conv1d_module(dim, k, device)
    weight = conv.weight.squeeze(1)
    tokens = torch.randn(batch, prefill + decode, dim, device=device)

    mixed_qkv = tokens[:, :prefill].transpose(1, 2)
    out_prefill = causal_conv1d_fn(x=mixed_qkv, weight=weight, bias=conv.bias, activation="silu", seq_idx=None)
    conv_state = F.pad(mixed_qkv, (k - mixed_qkv.shape[-1], 0))
    assert conv_state.shape == (batch, dim, k)

    outs = [out_prefill]
    for t in range(prefill, prefill + decode):
        step = tokens[:, t : t + 1].transpose(1, 2)  # (batch, dim, 1)
        outs.append(causal_conv1d_update(step, conv_state, weight, conv.bias, "silu"))
    full = causal_conv1d_fn(tokens.transpose(1, 2), weight, conv.bias, activation="silu")
    assert_close(torch.cat(outs, dim=-1), full, torch.float32)


def test_older_mamba_ssm_causal_conv1d_cuda(device):
    # mamba_ssm <= 2.2.4 (selective_scan_interface.mamba_inner_fn): the returning forms of the
    # extension module, called positionally.
    import causal_conv1d_cuda

    x = torch.randn(2, 16, 33, device=device)
    w, b = torch.randn(16, 4, device=device), torch.randn(16, device=device)
    out = causal_conv1d_cuda.causal_conv1d_fwd(x, w, b, None, None, None, True)
    assert_close(out, conv_ref(x, w, b, silu=True)[0], torch.float32)

    dout = torch.randn_like(out)
    dx = torch.empty_like(x)
    dx_ret, dw, db, *_ = causal_conv1d_cuda.causal_conv1d_bwd(x, w, b, dout, None, None, None, dx, False, True)
    assert dx_ret.data_ptr() == dx.data_ptr()
    rx, rw, rb = (t.detach().clone().requires_grad_() for t in (x, w, b))
    conv_ref_diff(rx, rw, rb, silu=True)[0].backward(dout.double())
    assert_grad_close(dx, rx.grad, torch.float32, "dx")
    assert_grad_close(dw, rw.grad, torch.float32, "dweight")
    assert_grad_close(db, rb.grad, torch.float32, "dbias")


def test_causal_conv1d_cuda_every_form(device):
    import causal_conv1d_cuda

    x = torch.randn(2, 8, 20, device=device)
    w, b = torch.randn(8, 3, device=device), torch.randn(8, device=device)
    ref = conv_ref(x, w, b, silu=True)[0]
    assert_close(causal_conv1d_cuda.causal_conv1d_fwd(x, w, b, True), ref, torch.float32)
    assert_close(causal_conv1d_cuda.causal_conv1d_fwd(x, w, b, None, True), ref, torch.float32)
    out = torch.empty_like(x)
    assert causal_conv1d_cuda.causal_conv1d_fwd(x, w, b, None, None, out, None, True) is None
    assert_close(out, ref, torch.float32)

    dout = torch.randn_like(x)
    three = causal_conv1d_cuda.causal_conv1d_bwd(x, w, b, dout, None, True)
    assert len(three) == 3
    seven = causal_conv1d_cuda.causal_conv1d_bwd(x, w, b, dout, None, None, True)
    assert len(seven) == 3
    dweight = torch.zeros(8, 3, device=device)
    dbias = torch.zeros(8, device=device)
    dx = torch.empty_like(x)
    assert causal_conv1d_cuda.causal_conv1d_bwd(x, w, b, dout, None, None, None, dx, dweight, dbias, None, True) is None
    for a, c in zip(three, (dx, dweight, dbias)):
        torch.testing.assert_close(a, c, **TOL[torch.float32])

    state = torch.randn(2, 8, 2, device=device)
    s = [state.clone() for _ in range(4)]
    xs = x[:, :, 0]
    o5 = causal_conv1d_cuda.causal_conv1d_update(xs, s[0], w, b, True)
    o6 = causal_conv1d_cuda.causal_conv1d_update(xs, s[1], w, b, True, None)
    o7 = causal_conv1d_cuda.causal_conv1d_update(xs, s[2], w, b, True, None, None)
    o8 = torch.empty_like(xs)
    assert causal_conv1d_cuda.causal_conv1d_update(xs, s[3], w, b, o8, True, None, None) is None
    for o in (o6, o7, o8):
        torch.testing.assert_close(o, o5, rtol=0, atol=0)
    with pytest.raises(TypeError, match=r"causal_conv1d_fwd\(\) takes 4, 5, 7, 8 arguments"):
        causal_conv1d_cuda.causal_conv1d_fwd(x, w)
    with pytest.raises(TypeError, match="unexpected or repeated argument 'activation'"):
        causal_conv1d_cuda.causal_conv1d_fwd(x, w, b, activation=True)


def test_public_names_exist():
    import causal_conv1d
    import causal_conv1d_cuda
    from causal_conv1d import causal_conv1d_interface, causal_conv1d_varlen, cpp_functions
    major, minor, patch = (int(p) for p in causal_conv1d.__version__.split("+")[0].split(".")[:3])
    assert (major, minor, patch) >= (1, 6, 1), "clients pin causal-conv1d >= 1.4.0; we claim 1.6.1"
    for name in ("causal_conv1d_fn", "causal_conv1d_update"):
        assert callable(getattr(causal_conv1d, name))
    for name in ("CausalConv1dFn", "causal_conv1d_fn", "causal_conv1d_ref", "causal_conv1d_update",
                 "causal_conv1d_update_ref"):
        assert hasattr(causal_conv1d_interface, name)
    for name in ("causal_conv1d_fwd_function", "causal_conv1d_bwd_function", "causal_conv1d_update_function"):
        assert callable(getattr(cpp_functions, name))
    assert callable(causal_conv1d_varlen.causal_conv1d_varlen_states)
    for name in ("causal_conv1d_fwd", "causal_conv1d_bwd", "causal_conv1d_update"):
        assert callable(getattr(causal_conv1d_cuda, name))
