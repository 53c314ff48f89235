"""Tensors past 2^31 elements: offsets must be 64-bit all the way (GPU only, needs ~13 GB free; in
the exhaustive run, `pytest -m exhaustive`)."""

import pytest
import torch

from _reference import assert_close, conv_ref
from causal_conv1d import causal_conv1d_fn

BIG = 2**31


def _enough_memory(nbytes):
    if not torch.cuda.is_available():
        return False
    free, _ = torch.cuda.mem_get_info()
    return free > 3 * nbytes


def _check_windows(x, w, b, out, starts):
    # The conv is local: out[..., t0:t1] depends on x[..., t0-3:t1]. Check a few windows against
    # the float64 reference, including the one around element index 2^31.
    for t0 in starts:
        t1 = t0 + 64
        lo = max(0, t0 - 3)
        ref, _ = conv_ref(x[:, :, lo:t1].cpu(), w.cpu(), b.cpu(), silu=True)
        assert_close(out[:, :, t0:t1], ref[:, :, t0 - lo :], torch.bfloat16, what=f"out[..., {t0}:{t1}]")


@pytest.mark.exhaustive
@pytest.mark.skipif(not _enough_memory(2 * BIG * 2), reason="needs a GPU with ~13 GB free")
def test_channel_last_past_2_31_elements():
    dim = 4096
    seqlen = BIG // dim + 64  # x has more than 2^31 elements
    x = torch.randn(1, seqlen, dim, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
    w = torch.randn(dim, 4, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(dim, device="cuda", dtype=torch.bfloat16)
    assert x.numel() > BIG
    out = causal_conv1d_fn(x, w, b, activation="silu")
    boundary = BIG // dim  # time step where the element offset crosses 2^31
    _check_windows(x, w, b, out, [0, boundary - 32, seqlen - 64])


@pytest.mark.exhaustive
@pytest.mark.skipif(not _enough_memory(2 * BIG * 2), reason="needs a GPU with ~13 GB free")
def test_channel_first_past_2_31_elements():
    seqlen = 2**19
    dim = BIG // seqlen + 2  # rows past the 2^31-th element
    x = torch.randn(1, dim, seqlen, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(dim, 4, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(dim, device="cuda", dtype=torch.bfloat16)
    assert x.numel() > BIG
    out = causal_conv1d_fn(x, w, b, activation="silu")
    for c in (0, dim - 2, dim - 1):  # the last rows start beyond element 2^31
        _check_windows(x[:, c : c + 1], w[c : c + 1], b[c : c + 1], out[:, c : c + 1], [0, seqlen - 64])
