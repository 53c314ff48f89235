"""Backward: gradients of causal_conv1d_fn against autograd through a float64 reference."""

import pytest
import torch

from _reference import (
    kernel_variant_sweep,
    axis,
    sweep,
    DTYPES,
    DTYPE_PAIRS,
    DTYPE_PAIR_IDS,
    LAYOUTS,
    LAYOUT_IDS,
    WIDTHS,
    assert_grad_close,
    conv_ref_diff,
    dtype_id,
    make_x,
    random_seq_idx,
)
from causal_conv1d import causal_conv1d_fn



def _leaf(t):
    return t.detach().clone().requires_grad_(True)


def check_grads(x, w, b=None, seq_idx=None, init=None, silu=True, final=False):
    """Runs causal_conv1d_fn and the reference with the same upstream gradients; compares grads."""
    x, w = _leaf(x), _leaf(w)
    b = _leaf(b) if b is not None else None
    init = _leaf(init) if init is not None else None
    act = "silu" if silu else None
    res = causal_conv1d_fn(x, w, b, seq_idx=seq_idx, initial_states=init, return_final_states=final, activation=act)
    out, fin = res if final else (res, None)
    dout = torch.randn_like(out)
    dfin = torch.randn_like(fin) if final else None
    torch.autograd.backward([out] + ([fin] if final else []), [dout] + ([dfin] if final else []))

    rx, rw = _leaf(x), _leaf(w)
    rb = _leaf(b) if b is not None else None
    rinit = _leaf(init) if init is not None else None
    rout, rfin = conv_ref_diff(rx, rw, rb, seq_idx=seq_idx, initial_states=rinit, silu=silu)
    torch.autograd.backward([rout] + ([rfin] if final else []),
                            [dout.double()] + ([dfin.double()] if final else []))

    assert x.grad.dtype == x.dtype and w.grad.dtype == w.dtype
    assert_grad_close(x.grad, rx.grad, x.dtype, "dx")
    assert_grad_close(w.grad, rw.grad, w.dtype, "dweight")
    if b is not None:
        assert b.grad.dtype == b.dtype
        assert_grad_close(b.grad, rb.grad, b.dtype, "dbias")
    if init is not None:
        assert_grad_close(init.grad, rinit.grad, init.dtype, "dinitial_states")
    return x.grad


@kernel_variant_sweep()
def test_grads_dtypes_widths_layouts(device, xtype, wtype, width, channel_last, has_bias, silu):
    x = make_x(2, 19, 77, xtype, device, channel_last)
    w = torch.randn(19, width, dtype=wtype, device=device) * 0.5
    b = torch.randn(19, dtype=wtype, device=device) if has_bias else None
    check_grads(x, w, b, silu=silu)


@pytest.mark.parametrize("seqlen", [1, 2, 3, 129, 1024, 1030])
@pytest.mark.parametrize("channel_last", LAYOUTS, ids=LAYOUT_IDS)
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("xtype", DTYPES, ids=dtype_id)
def test_grads_with_states(device, xtype, width, channel_last, seqlen):
    # dinitial_states and dfinal_states, also when seqlen < width - 1 (the final states then
    # include initial states, so dfinal flows into dinitial_states); 1024: whole 16-byte vectors,
    # the channel-first states pass's vector loads.
    x = make_x(2, 24, seqlen, xtype, device, channel_last)
    w = torch.randn(24, width, device=device) * 0.5
    b = torch.randn(24, device=device)
    init = torch.randn(2, width - 1, 24, dtype=xtype, device=device).transpose(1, 2)
    check_grads(x, w, b, init=init, final=True)


# 6501 positions: channel-first rows of several strips on a GPU that start misaligned, so the states
# pass takes its element path (its vector loads need aligned rows of whole vectors). 2 and 5: the
# last width - 1 positions reach into the first width - 1 (the pass's head part takes dfinal_states
# there too).
@pytest.mark.parametrize("seqlen", [2, 5, 40, 6501])
@pytest.mark.parametrize("channel_last", LAYOUTS, ids=LAYOUT_IDS)
def test_grads_final_states_only(device, channel_last, seqlen):
    x = make_x(2, 16, seqlen, torch.float32, device, channel_last)
    check_grads(x, torch.randn(16, 4, device=device), torch.randn(16, device=device), final=True)


# initial_states with their gradient and no final states: the channel-first states pass's head
# part alone (5: shorter than 2 (width - 1); 40: whole vectors; 6501: misaligned rows).
@pytest.mark.parametrize("seqlen", [5, 40, 6501])
@pytest.mark.parametrize("channel_last", LAYOUTS, ids=LAYOUT_IDS)
def test_grads_initial_states_only(device, channel_last, seqlen):
    x = make_x(2, 16, seqlen, torch.bfloat16, device, channel_last)
    init = torch.randn(2, 3, 16, dtype=torch.bfloat16, device=device).transpose(1, 2)
    check_grads(x, torch.randn(16, 4, device=device) * 0.5, torch.randn(16, device=device), init=init)


@pytest.mark.parametrize("channel_last", LAYOUTS, ids=LAYOUT_IDS)
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("xtype", DTYPES, ids=dtype_id)
def test_grads_seq_idx(device, xtype, width, channel_last):
    x = make_x(2, 32, 200, xtype, device, channel_last)
    w = torch.randn(32, width, device=device) * 0.5
    b = torch.randn(32, device=device)
    check_grads(x, w, b, seq_idx=random_seq_idx(2, 200, device, max_segments=6))


def check_grads_seq_idx(seq_idx, dim, xtype, width, channel_last, device):
    # Gradients against the reference with seq_idx (batch, seqlen, on device); dx exactly 0 at the
    # padding tokens (only padding outputs read them).
    batch, seqlen = seq_idx.shape
    x = make_x(batch, dim, seqlen, xtype, device, channel_last)
    w = torch.randn(dim, width, device=device) * 0.5
    b = torch.randn(dim, device=device)
    dx = check_grads(x, w, b, seq_idx=seq_idx)
    assert torch.all(dx.transpose(1, 2)[seq_idx < 0] == 0), "dx is exactly 0 at padding tokens"


@pytest.mark.parametrize("channel_last", LAYOUTS, ids=LAYOUT_IDS)
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("xtype", DTYPES, ids=dtype_id)
def test_grads_seq_idx_padding_tokens(device, xtype, width, channel_last):
    # Padding outputs are a constant 0: no gradient flows from them, dx is 0 at padding inputs
    # (only padding outputs read them) and dweight/dbias leave them out.
    check_grads_seq_idx(random_seq_idx(2, 150, device, max_segments=4, padding=True), 32, xtype, width, channel_last,
                        device)


def check_grads_cut_rows(device, xtype, width, channel_last, seqlen, cuts, pads):
    # Two rows of 16 channels whose ids step up at each cut, with padding tokens (row, start, stop,
    # id < 0) written over them.
    seq_idx = torch.zeros(2, seqlen, dtype=torch.int32)
    for cut in cuts:
        seq_idx[:, cut:] += 1
    for row, start, stop, pad_id in pads:
        seq_idx[row, start:stop] = pad_id
    check_grads_seq_idx(seq_idx.to(device), 16, xtype, width, channel_last, device)


@pytest.mark.parametrize("seqlen", [4109, 8192])
@pytest.mark.parametrize("channel_last", LAYOUTS, ids=LAYOUT_IDS)
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("xtype", [torch.bfloat16, torch.float32], ids=dtype_id)
def test_grads_seq_idx_long_sequences(device, xtype, width, channel_last, seqlen):
    # Sequences of hundreds to thousands of tokens: most warp iterations of the channel-first
    # kernel lie inside one sequence (computed without the masks), and the boundaries fall on an
    # iteration's first position (256 bf16 / 128 fp32 elements a warp), one past it (the last
    # lane's carried dy halo), a lane's first position and mid-vector; a padding run and a padding
    # tail in the second row. seqlen 4109: rows start misaligned.
    pads = [(1, 2500, 2503, -7), (1, seqlen - 40, seqlen, -1)]
    check_grads_cut_rows(device, xtype, width, channel_last, seqlen, (768, 1025, 1288, 1795, 3000), pads)


@pytest.mark.parametrize("seqlen", [4109, 8192])
@pytest.mark.parametrize("channel_last", LAYOUTS, ids=LAYOUT_IDS)
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("xtype", [torch.bfloat16, torch.float32], ids=dtype_id)
def test_grads_seq_idx_starts_at_vectors(device, xtype, width, channel_last, seqlen):
    # Sequences starting at a lane's first position (multiples of 8 bf16 / 4 fp32 elements in
    # seqlen-8192 rows; in the 4109 rows, which start 5 elements apart mod 8, each cut is a vector
    # start in some rows), where the channel-first kernel's x halo (from the previous lane) and dy
    # halo (from the next lane, or carried from the iteration above) cross the boundary; cuts at a
    # warp iteration's start (512, 2560) and one past it, sequences of 1, 2 and 8 tokens from a
    # vector start, a sequence starting mid-vector right after one, and padding starting at a
    # vector (1536; 1800 and 3072: one token, after which the id resumes, so the taps of the
    # positions after it reach back past it). A form that computed such starts without the masks
    # by testing only the first position's taps failed here (benchmarks/NOTES.md, seventeenth
    # session).
    cuts = (512, 513, 1000, 1008, 1016, 1017, 1024, 2048, 2049, 2051, 2056, 2560, 3328)
    pads = [(0, 1536, 1544, -1), (0, 1800, 1801, -2), (1, 3072, 3073, -3)]
    check_grads_cut_rows(device, xtype, width, channel_last, seqlen, cuts, pads)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU visible")
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("xtype", [torch.bfloat16, torch.float32], ids=dtype_id)
def test_gpu_channel_last_seq_idx_long_ranges(xtype, width):
    # A grid large enough that the channel-last kernel's warps walk long time ranges (up to 128
    # steps; 8 on the small shapes above), so the loops over whole 6-step groups run: runs of
    # clean groups without the masks, the others with them. Boundaries fall at every offset in a
    # group, padding runs of 1-5 tokens sit inside long sequences, row 1 ends in padding, and dim
    # leaves lanes of the last warp past it.
    batch, dim, seqlen = 2, 1026, 8192
    seq_idx = torch.zeros(batch, seqlen, dtype=torch.int32)
    for j in range(1, 48):
        seq_idx[0, 150 * j + j % 13 :] += 1
    for j in range(1, 30):
        seq_idx[1, 250 * j + 2 * j % 7 :] += 1
    for row, start, length in ((0, 4000, 1), (0, 5003, 3), (1, 1500, 5), (1, 6001, 2)):
        seq_idx[row, start : start + length] = -7
    seq_idx[1, seqlen - 300 :] = -1
    check_grads_seq_idx(seq_idx.to("cuda"), dim, xtype, width, True, "cuda")


@pytest.mark.parametrize("seqlen", [30, 6501])
@pytest.mark.parametrize("channel_last", LAYOUTS, ids=LAYOUT_IDS)
def test_initial_states_without_grad(device, channel_last, seqlen):
    # initial_states that do not require grad get None, and dx and dweight are still right (no
    # dinitial_states asked for, no dfinal_states).
    x = make_x(1, 8, seqlen, torch.bfloat16, device, channel_last).requires_grad_()
    w = torch.randn(8, 3, device=device, requires_grad=True)
    init = torch.randn(1, 3 - 1, 8, dtype=torch.bfloat16, device=device).transpose(1, 2)
    out = causal_conv1d_fn(x, w, initial_states=init, activation="silu")
    dout = torch.randn_like(out)
    out.backward(dout)
    rx = x.detach().clone().requires_grad_()
    rw = w.detach().clone().requires_grad_()
    conv_ref_diff(rx, rw, initial_states=init, silu=True)[0].backward(dout)
    assert_grad_close(x.grad, rx.grad, torch.bfloat16, "dx")
    assert_grad_close(w.grad, rw.grad, w.dtype, "dweight")


def test_noncontiguous_dout(device):
    # dout in the other layout than x is made to match x's layout.
    x = make_x(2, 16, 50, torch.float32, device, True).requires_grad_()
    w = torch.randn(16, 4, device=device, requires_grad=True)
    out = causal_conv1d_fn(x, w, activation="silu")
    dout = torch.randn(2, 16, 50, device=device)  # channel-first while x is channel-last
    out.backward(dout)
    rx, rw = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    conv_ref_diff(rx, rw, silu=True)[0].backward(dout.double())
    assert_grad_close(x.grad, rx.grad, torch.float32, "dx")
    assert_grad_close(w.grad, rw.grad, torch.float32, "dweight")


def _grads(x, w, b, init=None):
    # With init: initial_states in, final states out, both in the backward (dinitial_states last).
    x, w, b = _leaf(x), _leaf(w), _leaf(b)
    if init is None:
        out = causal_conv1d_fn(x, w, b, activation="silu")
        out.backward(torch.ones_like(out))
        return x.grad, w.grad, b.grad
    init = _leaf(init)
    out, fin = causal_conv1d_fn(x, w, b, initial_states=init, return_final_states=True, activation="silu")
    torch.autograd.backward((out, fin), (torch.ones_like(out), torch.full_like(fin, 0.5)))
    return x.grad, w.grad, b.grad, init.grad


def test_cpu_backward_is_bitwise_repeatable_on_any_thread_count():
    x = make_x(4, 64, 500, torch.float32, "cpu", True)
    w = torch.randn(64, 4)
    b = torch.randn(64)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = _grads(x, w, b)
        torch.set_num_threads(max(2, threads))
        many = _grads(x, w, b)
        again = _grads(x, w, b)
    finally:
        torch.set_num_threads(threads)
    for a, m, r in zip(one, many, again):
        assert torch.equal(a, m) and torch.equal(m, r)


@pytest.mark.parametrize("value,expected", [("1", True), ("0", False), ("", None)])
def test_deterministic_switch(monkeypatch, value, expected):
    from causal_conv1d._core import deterministic_mode

    monkeypatch.setenv("CAUSAL_CONV1D_DETERMINISTIC", value)
    if expected is None:
        assert deterministic_mode() == torch.are_deterministic_algorithms_enabled()
        prev = torch.are_deterministic_algorithms_enabled()
        try:
            torch.use_deterministic_algorithms(True)
            assert deterministic_mode() is True
            monkeypatch.setenv("CAUSAL_CONV1D_DETERMINISTIC", "0")
            assert deterministic_mode() is False, "env 0 forces it off even in deterministic mode"
        finally:
            torch.use_deterministic_algorithms(prev)
    else:
        assert deterministic_mode() is expected


def test_deterministic_switch_rejects_garbage(monkeypatch):
    from causal_conv1d._core import deterministic_mode

    monkeypatch.setenv("CAUSAL_CONV1D_DETERMINISTIC", "yes please")
    with pytest.raises(ValueError, match="CAUSAL_CONV1D_DETERMINISTIC must be 0 or 1"):
        deterministic_mode()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU visible")
@pytest.mark.parametrize("states", [False, True], ids=["plain", "states"])
@pytest.mark.parametrize("channel_last", LAYOUTS, ids=LAYOUT_IDS)
def test_gpu_deterministic_mode_is_bitwise_repeatable(monkeypatch, channel_last, states):
    # Deterministic mode: identical bits on every run; default mode (atomics): within tolerance
    # of it, and dx (dinitial_states) the same bits. With states the channel-first default mode
    # runs the states pass alongside the walk (each storing its own positions of dx): a race
    # between them would show here as dx differing from the deterministic run's.
    x = make_x(4, 256, 2000, torch.bfloat16, "cuda", channel_last)
    w = torch.randn(256, 4, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(256, device="cuda", dtype=torch.bfloat16)
    init = torch.randn(4, 3, 256, device="cuda", dtype=torch.bfloat16).transpose(1, 2) if states else None
    monkeypatch.setenv("CAUSAL_CONV1D_DETERMINISTIC", "1")
    det = [_grads(x, w, b, init) for _ in range(3)]
    for run in det[1:]:
        for a, r in zip(det[0], run):
            assert torch.equal(a, r)
    monkeypatch.setenv("CAUSAL_CONV1D_DETERMINISTIC", "0")
    for _ in range(3):
        default = _grads(x, w, b, init)
        assert torch.equal(default[0], det[0][0]), "dx does not depend on the mode"
        if states:
            assert torch.equal(default[3], det[0][3]), "dinitial_states does not depend on the mode"
        for a, r, what in zip(default[1:3], det[0][1:3], ("dweight", "dbias")):
            assert_grad_close(a.float(), r.float(), torch.bfloat16, what)
