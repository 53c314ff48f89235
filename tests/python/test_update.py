"""causal_conv1d_update against a float64 reference: shifted and circular states, cache-line
indices with padding rows, several steps at once, state_len > width - 1."""

import pytest
import torch

from _reference import (
    axis,
    sweep,
    DTYPES,
    DTYPE_PAIRS,
    DTYPE_PAIR_IDS,
    TOL,
    WIDTHS,
    assert_close,
    dtype_id,
    update_ref,
)
from causal_conv1d import causal_conv1d_update
from causal_conv1d.causal_conv1d_interface import causal_conv1d_update_ref


def _run(device, xtype, wtype, width, seqlen, extra_state, circular, indices, silu=True, batch=3, dim=37):
    state_len = width - 1 + extra_state
    lines = batch + 2 if indices else batch
    x_shape = (batch, dim) if seqlen is None else (batch, dim, seqlen)
    x = torch.randn(*x_shape, dtype=xtype, device=device)
    state = torch.randn(lines, dim, state_len, dtype=xtype, device=device)
    w = torch.randn(dim, width, dtype=wtype, device=device) * 0.5
    b = torch.randn(dim, dtype=wtype, device=device)
    cache_seqlens = None
    if circular:
        cache_seqlens = torch.tensor([0, 5, 2 * state_len + 1][:batch], dtype=torch.int32, device=device)
    conv_state_indices = None
    if indices:
        # rows map to lines out of order, and the last row is padding
        conv_state_indices = torch.tensor([3, 0, -1][:batch], dtype=torch.int32, device=device)
    ref_out, ref_state = update_ref(x, state, w, b, silu, cache_seqlens, conv_state_indices)
    out = causal_conv1d_update(x, state, w, b, "silu" if silu else None, cache_seqlens, conv_state_indices)
    assert out.shape == x.shape and out.dtype == xtype
    assert_close(out, ref_out, xtype)
    torch.testing.assert_close(state.cpu(), ref_state, rtol=0, atol=0)  # states are copies: exact
    return x, state, out


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("xtype,wtype", DTYPE_PAIRS, ids=DTYPE_PAIR_IDS)
def test_single_step_dtypes(device, xtype, wtype, width):
    _run(device, xtype, wtype, width, seqlen=None, extra_state=0, circular=False, indices=False)


@sweep(
    dict(
        width=axis(WIDTHS),
        seqlen=axis([None, 1, 2, 5, 9]),
        extra_state=axis([0, 1, 5]),
        circular=axis([False, True], ["shift", "circ"]),
        indices=axis([False, True], ["noidx", "idx"]),
    ),
    # every width, length, state length and state mode; cache-line indices on every other case
    default=lambda width, seqlen, extra_state, circular, indices: (width + seqlen + extra_state + circular + indices) % 2 == 0,
)
def test_options(device, width, seqlen, extra_state, circular, indices):
    _run(device, torch.bfloat16, torch.float32, width, seqlen, extra_state, circular, indices)


@sweep(
    dict(
        xtype=axis(DTYPES),
        wtype=axis(DTYPES),
        width=axis(WIDTHS),
        seqlen=axis([None, 1]),
        extra_state=axis([0, 1], ["state_w-1", "state_w"]),
        indices=axis([False, True], ["noidx", "idx"]),
    ),
    # every vector-kernel variant (x dtype, width, state_len), the weight dtype, the (batch, dim)
    # form and the indices rotating: 72 of 216 cases
    default=lambda xtype, wtype, width, seqlen, extra_state, indices: (wtype + seqlen + indices + width) % 3 == 0,
)
def test_decode_layout(device, xtype, wtype, width, seqlen, extra_state, indices):
    # dim a multiple of 16 bytes' worth of channels and state_len width - 1 or width: the layout
    # decode runs in (the GPU's 16-byte vector path).
    _run(device, xtype, wtype, width, seqlen, extra_state, circular=False, indices=indices, dim=64, batch=3)


@pytest.mark.parametrize("xtype", DTYPES, ids=dtype_id)
def test_no_activation_no_bias(device, xtype):
    x = torch.randn(2, 16, dtype=xtype, device=device)
    state = torch.randn(2, 16, 3, dtype=xtype, device=device)
    w = torch.randn(16, 4, device=device)
    ref_out, ref_state = update_ref(x, state, w)
    out = causal_conv1d_update(x, state, w)
    assert_close(out, ref_out, xtype)
    torch.testing.assert_close(state.cpu(), ref_state, rtol=0, atol=0)


def test_padding_rows_keep_state_and_give_zeros(device):
    x = torch.randn(3, 8, device=device)
    state = torch.randn(4, 8, 3, device=device)
    before = state.clone()
    w = torch.randn(8, 4, device=device)
    idx = torch.tensor([-1, 2, -5], dtype=torch.int32, device=device)
    out = causal_conv1d_update(x, state, w, None, "silu", None, idx)
    assert torch.equal(out[0], torch.zeros_like(out[0])) and torch.equal(out[2], torch.zeros_like(out[2]))
    for line in (0, 1, 3):
        assert torch.equal(state[line], before[line])
    assert not torch.equal(state[2], before[2])


def test_strided_state_and_x(device):
    # conv_state with dim contiguous (vLLM-style (lines, state_len, dim) storage) and x a column
    # slice of a wider buffer.
    big = torch.randn(3, 50, device=device)
    x = big[:, 5:25]
    state = torch.randn(3, 6, 20, device=device).transpose(1, 2)
    w = torch.randn(20, 3, device=device)
    ref_out, ref_state = update_ref(x, state, w, silu=True)
    out = causal_conv1d_update(x, state, w, None, "silu")
    assert_close(out, ref_out, torch.float32)
    torch.testing.assert_close(state.cpu(), ref_state, rtol=0, atol=0)


@pytest.mark.parametrize("xtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("case", ["w_columns", "bias_strided", "w_offset", "state_offset", "x_offset", "dim_pairs"])
def test_decode_layout_fallbacks(device, xtype, case):
    # The decode kernel reads a thread's weights, bias, x and state as runs of vector loads when
    # their layout allows and falls back per tensor otherwise (element loads, narrower channel
    # groups, or the general kernel); each case breaks one of those conditions.
    batch, width = 3, 4
    dim = 66 if case == "dim_pairs" else 64  # 66: a multiple of 2 channels, not of 4
    x = torch.randn(batch, dim + 1, dtype=xtype, device=device)
    x = x[:, 1:] if case == "x_offset" else x[:, :dim]
    flat = torch.randn(batch * dim * (width - 1) + 1, dtype=xtype, device=device)
    state = (flat[1:] if case == "state_offset" else flat[:-1]).view(batch, dim, width - 1)
    if case == "w_columns":
        w = torch.randn(width, dim, device=device).t()  # (dim, width) with the width axis outer
    elif case == "w_offset":
        w = torch.randn(dim * width + 1, device=device)[1:].view(dim, width)
    else:
        w = torch.randn(dim, width, device=device)
    b = torch.randn(2 * dim, device=device)[::2] if case == "bias_strided" else torch.randn(dim, device=device)
    ref_out, ref_state = update_ref(x, state, w, b, True)
    out = causal_conv1d_update(x, state, w, b, "silu")
    assert_close(out, ref_out, xtype)
    torch.testing.assert_close(state.cpu(), ref_state, rtol=0, atol=0)


@pytest.mark.parametrize("circular", [False, True])
def test_matches_upstream_reference(device, circular):
    x = torch.randn(2, 16, 3, device=device)
    state = torch.randn(2, 16, 6, device=device)
    w = torch.randn(16, 4, device=device)
    b = torch.randn(16, device=device)
    cs = torch.tensor([1, 4], dtype=torch.int32, device=device) if circular else None
    s2 = state.clone()
    out = causal_conv1d_update(x, state, w, b, "silu", cs)
    ref = causal_conv1d_update_ref(x, s2, w, b, "silu", cs)
    torch.testing.assert_close(out, ref, **TOL[torch.float32])
    torch.testing.assert_close(state, s2, rtol=0, atol=0)


def test_decode_continues_prefill_state(device):
    # Steps through update with a shifted state reproduce the full-sequence convolution.
    from causal_conv1d import causal_conv1d_fn

    x = torch.randn(2, 24, 12, device=device)
    w = torch.randn(24, 4, device=device)
    b = torch.randn(24, device=device)
    full = causal_conv1d_fn(x, w, b, activation="silu")
    state = torch.zeros(2, 24, 3, device=device)
    steps = [causal_conv1d_update(x[:, :, t], state, w, b, "silu") for t in range(12)]
    assert_close(torch.stack(steps, dim=-1), full, torch.float32)


def test_errors(device):
    x = torch.randn(2, 8, device=device)
    state = torch.randn(2, 8, 3, device=device)
    w = torch.randn(8, 4, device=device)
    with pytest.raises(RuntimeError, match=r"conv_state's state_len \(size\(2\)\) must be >= width - 1 = 3, got 2"):
        causal_conv1d_update(x, state[:, :, :2], w)
    with pytest.raises(RuntimeError, match=r"conv_state must have x's dtype \(Float\), got Half"):
        causal_conv1d_update(x, state.half(), w)
    with pytest.raises(RuntimeError, match=r"conv_state must have batch = 2 rows when conv_state_indices is None, got 3"):
        causal_conv1d_update(x, torch.randn(3, 8, 3, device=device), w)
    with pytest.raises(RuntimeError, match=r"conv_state.size\(1\) must be dim = 8, got 9"):
        causal_conv1d_update(x, torch.randn(2, 9, 3, device=device), w)
    with pytest.raises(RuntimeError, match=r"x must be \(batch, dim\) or \(batch, dim, seqlen\), got shape \(8,\)"):
        causal_conv1d_update(x[0], state, w)
    with pytest.raises(RuntimeError, match=r"cache_seqlens must be int32, got Long"):
        causal_conv1d_update(x, state, w, cache_seqlens=torch.zeros(2, dtype=torch.long, device=device))
    with pytest.raises(RuntimeError, match=r"conv_state_indices must have shape \(batch,\) = \(2,\), got \(3,\)"):
        causal_conv1d_update(x, state, w, conv_state_indices=torch.zeros(3, dtype=torch.int32, device=device))
    with pytest.raises(NotImplementedError, match="activation must be None, silu, or swish"):
        causal_conv1d_update(x, state, w, None, "gelu")


def test_cpu_rejects_bad_index_values():
    x = torch.randn(2, 8)
    state = torch.randn(3, 8, 3)
    before = state.clone()
    w = torch.randn(8, 4)
    with pytest.raises(RuntimeError, match=r"conv_state_indices must be < conv_state.size\(0\) = 3 .* got conv_state_indices\[1\] = 3"):
        causal_conv1d_update(x, state, w, conv_state_indices=torch.tensor([0, 3], dtype=torch.int32))
    with pytest.raises(RuntimeError, match=r"cache_seqlens must be >= 0, got cache_seqlens\[0\] = -1"):
        causal_conv1d_update(x, state[:2], w, cache_seqlens=torch.tensor([-1, 0], dtype=torch.int32))
    assert torch.equal(state, before), "a rejected call writes nothing"
