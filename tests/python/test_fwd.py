"""Forward parity: causal_conv1d_fn against the float64 reference, on every available device."""

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
    assert_close,
    conv_ref,
    dtype_id,
    make_x,
    random_seq_idx,
)
from causal_conv1d import causal_conv1d_fn
from causal_conv1d.causal_conv1d_interface import causal_conv1d_ref



def _params(dim, width, wtype, device, bias=True):
    w = torch.randn(dim, width, dtype=wtype, device=device) * 0.5
    b = torch.randn(dim, dtype=wtype, device=device) if bias else None
    return w, b


@kernel_variant_sweep()
def test_dtypes_widths_layouts(device, xtype, wtype, width, channel_last, has_bias, silu):
    activation = "silu" if silu else None
    x = make_x(2, 37, 129, xtype, device, channel_last)
    w, b = _params(37, width, wtype, device, has_bias)
    out = causal_conv1d_fn(x, w, b, activation=activation)
    assert out.dtype == xtype and out.shape == x.shape and out.device == x.device
    assert (out.stride(1) == 1) == channel_last, "out keeps x's layout"
    ref, _ = conv_ref(x, w, b, silu=activation is not None)
    assert_close(out, ref, xtype)


@pytest.mark.parametrize("seqlen", [1, 2, 3, 127, 129, 4097])
@pytest.mark.parametrize("channel_last", LAYOUTS, ids=LAYOUT_IDS)
@pytest.mark.parametrize("width", WIDTHS)
def test_odd_lengths(device, seqlen, channel_last, width):
    x = make_x(2, 24, seqlen, torch.bfloat16, device, channel_last)
    w, b = _params(24, width, torch.float32, device)
    out = causal_conv1d_fn(x, w, b, activation="silu")
    assert_close(out, conv_ref(x, w, b, silu=True)[0], torch.bfloat16)


@pytest.mark.parametrize("dim", [1, 3, 7, 37, 259])
@pytest.mark.parametrize("channel_last", LAYOUTS, ids=LAYOUT_IDS)
def test_odd_dims(device, dim, channel_last):
    x = make_x(3, dim, 65, torch.float16, device, channel_last)
    w, b = _params(dim, 4, torch.float16, device)
    out = causal_conv1d_fn(x, w, b, activation="swish")
    assert_close(out, conv_ref(x, w, b, silu=True)[0], torch.float16)


@pytest.mark.parametrize("seqlen", [1, 2, 5, 130])
@pytest.mark.parametrize("channel_last", LAYOUTS, ids=LAYOUT_IDS)
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("xtype", DTYPES, ids=dtype_id)
def test_initial_and_final_states(device, xtype, width, channel_last, seqlen):
    # States in both layouts, including seqlen < width - 1 where final states reach back into
    # initial_states.
    _check_states(make_x(2, 40, seqlen, xtype, device, channel_last), width)


def _check_states(x, width):
    """causal_conv1d_fn with initial_states in and final states out against the reference."""
    batch, dim, _ = x.shape
    w, b = _params(dim, width, torch.float32, x.device)
    init = torch.randn(batch, width - 1, dim, dtype=x.dtype, device=x.device).transpose(1, 2)
    out, final = causal_conv1d_fn(x, w, b, initial_states=init, return_final_states=True, activation="silu")
    ref_out, ref_final = conv_ref(x, w, b, initial_states=init, silu=True)
    assert_close(out, ref_out, x.dtype)
    assert final.shape == (batch, dim, width - 1)
    torch.testing.assert_close(final.cpu(), ref_final, rtol=0, atol=0)  # a copy: exact


@pytest.mark.parametrize("seqlen", [4099, 8201, 8192, 30001])
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("xtype", [torch.bfloat16, torch.float32], ids=dtype_id)
def test_channel_first_long_rows_with_states(device, xtype, width, seqlen):
    # Rows long enough that the GPU forward walks a strip with 2 or 4 warps interleaved (NVIDIA,
    # tuning.h's interleave), 30001 in two strips a row; odd lengths put every row at another
    # vector phase, and lane 0 of every warp takes its halo from the vector before its own
    # (initial_states before t = 0), and the warp holding the last position writes the final states.
    _check_states(make_x(2, 3, seqlen, xtype, device, False), width)


@pytest.mark.parametrize("shape", [(2, 37, 1100), (1, 4099, 600)], ids=["3-time-blocks", "2-channel-blocks"])
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("xtype", [torch.bfloat16, torch.float16], ids=dtype_id)
def test_channel_last_states_across_tasks(device, xtype, width, shape):
    # The CPU backend splits a channel-last row into tasks of 512 steps by 4096 channels; bf16
    # rows are read in place except where a step's window reaches before t = 0, so the first task
    # starts from initial_states and the last one writes final states from x itself.
    batch, dim, seqlen = shape
    x = make_x(batch, dim, seqlen, xtype, device, True)
    w, b = _params(dim, width, torch.float32, device)
    init = torch.randn(batch, width - 1, dim, dtype=xtype, device=device).transpose(1, 2)
    out, final = causal_conv1d_fn(x, w, b, initial_states=init, return_final_states=True, activation="silu")
    ref_out, ref_final = conv_ref(x, w, b, initial_states=init, silu=True)
    assert_close(out, ref_out, xtype)
    torch.testing.assert_close(final.cpu(), ref_final, rtol=0, atol=0)  # a copy: exact


@pytest.mark.parametrize("final_layout", ["cf", "cl"])
@pytest.mark.parametrize("channel_last", LAYOUTS, ids=LAYOUT_IDS)
def test_final_states_out_buffer(device, channel_last, final_layout):
    x = make_x(2, 16, 33, torch.float32, device, channel_last)
    w, b = _params(16, 4, torch.float32, device)
    if final_layout == "cf":
        buf = torch.full((2, 16, 3), float("nan"), device=device)
    else:
        buf = torch.full((2, 3, 16), float("nan"), device=device).transpose(1, 2)
    out, final = causal_conv1d_fn(x, w, b, return_final_states=True, final_states_out=buf)
    assert final.data_ptr() == buf.data_ptr(), "final_states_out is written in place and returned"
    ref_out, ref_final = conv_ref(x, w, b)
    assert_close(out, ref_out, torch.float32)
    torch.testing.assert_close(buf.cpu(), ref_final, rtol=0, atol=0)


def test_initial_states_without_final(device):
    x = make_x(1, 8, 20, torch.float32, device, False)
    w, b = _params(8, 3, torch.float32, device)
    init = torch.randn(1, 8, 2, device=device)
    out = causal_conv1d_fn(x, w, b, initial_states=init)
    assert_close(out, conv_ref(x, w, b, initial_states=init)[0], torch.float32)


@pytest.mark.parametrize("channel_last", LAYOUTS, ids=LAYOUT_IDS)
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("xtype", DTYPES, ids=dtype_id)
def test_seq_idx(device, xtype, width, channel_last):
    x = make_x(2, 48, 300, xtype, device, channel_last)
    w, b = _params(48, width, torch.float32, device)
    seq_idx = random_seq_idx(2, 300, device, max_segments=7)
    out = causal_conv1d_fn(x, w, b, seq_idx=seq_idx, activation="silu")
    assert_close(out, conv_ref(x, w, b, seq_idx=seq_idx, silu=True)[0], xtype)


@pytest.mark.parametrize("seqlen", [7, 300])
@pytest.mark.parametrize("channel_last", LAYOUTS, ids=LAYOUT_IDS)
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("xtype", DTYPES, ids=dtype_id)
def test_seq_idx_padding_tokens(device, xtype, width, channel_last, seqlen):
    # Negative ids mark padding tokens (upstream >= 1.6): their output is exactly 0, also with
    # bias and SiLU (silu(bias) would not be), and they never feed a real token's taps.
    x = make_x(2, 40, seqlen, xtype, device, channel_last)
    w, b = _params(40, width, torch.float32, device)
    seq_idx = random_seq_idx(2, seqlen, device, max_segments=4, padding=True)
    assert (seq_idx < 0).any()
    out = causal_conv1d_fn(x, w, b, seq_idx=seq_idx, activation="silu")
    assert torch.all(out.transpose(1, 2)[seq_idx < 0] == 0), "padding outputs are exactly 0"
    assert_close(out, conv_ref(x, w, b, seq_idx=seq_idx, silu=True)[0], xtype)


# Boundaries of the long-sequence tests: on a channel-first warp iteration's first position (128
# or 256 with 16-byte vectors) and one past it, mid-vector, on and just after the first rows of a
# channel-last time chunk (4 to 32 rows), and on a chunk's last row.
LONG_SEQ_CUTS = (128, 129, 256, 257, 1000, 2048, 2049, 2050, 2051, 2079, 2112, 2113, 3333)


def _long_seq_ids(batch, seqlen):
    ids = torch.zeros(batch, seqlen, dtype=torch.int32)
    for cut in LONG_SEQ_CUTS:
        ids[0, cut:] += 1
    ids[0, 2500:2510] = -1
    ids[1, 3900:] = -1
    return ids


@pytest.mark.parametrize("offset", [0, 3], ids=["aligned", "offset3"])
@pytest.mark.parametrize("channel_last", LAYOUTS, ids=LAYOUT_IDS)
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("xtype", DTYPES, ids=dtype_id)
def test_seq_idx_long_sequences(device, xtype, width, channel_last, offset):
    # Long sequences: most of a row's vectors (channel-first) or time chunks (channel-last) lie
    # inside one sequence (the GPU kernels compute those without the masks), next to the boundaries
    # above, a padding run and a padded tail. offset 3: x starts 3 positions into a bigger tensor,
    # so channel-first rows are misaligned (their masks are read byte by byte).
    seqlen = 4096
    seq_idx = _long_seq_ids(2, seqlen).to(device)
    x = make_x(2, 40, seqlen + offset, xtype, device, channel_last)[:, :, offset:]
    w, b = _params(40, width, torch.float32, device)
    out = causal_conv1d_fn(x, w, b, seq_idx=seq_idx, activation="silu")
    assert torch.all(out.transpose(1, 2)[seq_idx < 0] == 0), "padding outputs are exactly 0"
    assert_close(out, conv_ref(x, w, b, seq_idx=seq_idx, silu=True)[0], xtype)


@pytest.mark.parametrize("xtype", [torch.float32, torch.bfloat16], ids=dtype_id)
def test_seq_idx_channel_last_full_chunks(device, xtype):
    # Channel-last on a GPU: enough batch rows and channel blocks for time chunks of 32 rows (the
    # kernel shortens them for small grids), blocks whose chunks lie in one sequence next to
    # blocks whose chunk or halo rows cross a boundary, and a last channel block with idle threads
    # (dim 1000: they take part in the block's vote, then leave).
    if device == "cpu":
        pytest.skip("the GPU kernel's time chunks; the CPU backend has none")
    seqlen = 4096
    seq_idx = _long_seq_ids(4, seqlen).to(device)
    x = make_x(4, 1000, seqlen, xtype, device, True)
    w, b = _params(1000, 4, torch.float32, device)
    out = causal_conv1d_fn(x, w, b, seq_idx=seq_idx, activation="silu")
    assert_close(out, conv_ref(x, w, b, seq_idx=seq_idx, silu=True)[0], xtype)


def test_seq_idx_single_token_segments(device):
    # Every position its own sequence: the conv degenerates to w[:, -1] * x + bias.
    x = make_x(1, 8, 17, torch.float32, device, True)
    w, b = _params(8, 4, torch.float32, device)
    seq_idx = torch.arange(17, dtype=torch.int32, device=device).unsqueeze(0)
    out = causal_conv1d_fn(x, w, b, seq_idx=seq_idx)
    expected = w[:, -1].view(1, 8, 1) * x + b.view(1, 8, 1)
    assert_close(out, expected, torch.float32)


def test_noncontiguous_inputs(device):
    # The shapes real models pass: x a channel-last slice of a fused projection (Mamba2's xBC),
    # weight a transposed view, bias and seq_idx strided views.
    batch, seqlen, dim = 2, 50, 24
    zxbcdt = torch.randn(batch, seqlen, 3 * dim + 5, device=device)
    x = zxbcdt[:, :, dim : 2 * dim].transpose(1, 2)
    assert x.stride(1) == 1 and not x.is_contiguous()
    w = torch.randn(4, dim, device=device).t()
    bias = torch.randn(2 * dim, device=device)[::2]
    seq_big = random_seq_idx(batch, 2 * seqlen, device)
    seq_idx = seq_big[:, ::2]
    out = causal_conv1d_fn(x, w, bias, seq_idx=seq_idx, activation="silu")
    assert out.stride(1) == 1
    assert_close(out, conv_ref(x, w, bias, seq_idx=seq_idx, silu=True)[0], torch.float32)


@pytest.mark.parametrize("xtype", [torch.bfloat16, torch.float32], ids=dtype_id)
@pytest.mark.parametrize("offset", [1, 3, 6])
@pytest.mark.parametrize("seqlen", [37, 13000])
def test_x_slice_of_longer_rows(device, xtype, offset, seqlen):
    # x a window of longer channel-first rows, so its rows sit at another 16-byte phase than those
    # of the dense output: the GPU kernel realigns its output vectors (strip boundaries included at
    # 13000 positions).
    base = torch.randn(2, 3, seqlen + 9, dtype=xtype, device=device)
    x = base[:, :, offset : offset + seqlen]
    w, b = _params(3, 4, xtype, device)
    out = causal_conv1d_fn(x, w, b, activation="silu")
    assert out.is_contiguous()
    assert_close(out, conv_ref(x, w, b, silu=True)[0], xtype)


def test_neither_layout_is_copied(device):
    # stride(1) != 1 and stride(2) != 1: made contiguous in Python, as upstream does.
    base = torch.randn(2, 16, 40, device=device)
    x = base[:, :, ::2]
    w, b = _params(16, 4, torch.float32, device)
    out = causal_conv1d_fn(x, w, b)
    assert_close(out, conv_ref(x, w, b)[0], torch.float32)


def test_large_strides(device):
    # A channel-first x whose channel stride is far larger than seqlen.
    base = torch.randn(2, 6, 5000, device=device)
    x = base[:, :, 4000:4100]
    w, b = _params(6, 3, torch.float32, device)
    out = causal_conv1d_fn(x, w, b)
    assert_close(out, conv_ref(x, w, b)[0], torch.float32)


def test_empty_batch(device):
    x = torch.randn(0, 8, 16, device=device)
    w, b = _params(8, 4, torch.float32, device)
    assert causal_conv1d_fn(x, w, b).shape == (0, 8, 16)


def test_matches_upstream_style_reference(device):
    # causal_conv1d_ref (upstream's signature) agrees with the kernel as well.
    x = make_x(2, 16, 64, torch.float32, device, True)
    w, b = _params(16, 4, torch.float32, device)
    init = torch.randn(2, 16, 3, device=device)
    out, final = causal_conv1d_fn(x, w, b, initial_states=init, return_final_states=True, activation="silu")
    ref_out, ref_final = causal_conv1d_ref(x, w, b, initial_states=init, return_final_states=True, activation="silu")
    assert_close(out, ref_out, torch.float32)
    torch.testing.assert_close(final, ref_final)
