"""causal_conv1d_varlen_states against its pure-PyTorch reference."""

import pytest
import torch

from _reference import DTYPES, dtype_id
from causal_conv1d.causal_conv1d_varlen import (
    causal_conv1d_varlen_states,
    causal_conv1d_varlen_states_ref,
)


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64], ids=["i32", "i64"])
@pytest.mark.parametrize("state_len", [1, 3, 4, 9])
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_matches_reference(device, dtype, state_len, index_dtype):
    lengths = [5, 0, 1, 12, 3, 8]
    cu = torch.tensor([0] + torch.tensor(lengths).cumsum(0).tolist(), dtype=index_dtype, device=device)
    x = torch.randn(int(cu[-1]), 67, dtype=dtype, device=device)
    states = causal_conv1d_varlen_states(x, cu, state_len)
    assert states.shape == (len(lengths), 67, state_len)
    assert states.stride(1) == 1, "channel-last, as upstream returns it"
    torch.testing.assert_close(states.cpu(), causal_conv1d_varlen_states_ref(x.cpu(), cu.cpu(), state_len), rtol=0, atol=0)


def test_strided_x(device):
    # x a column slice of a wider (tokens, features) buffer.
    big = torch.randn(20, 50, device=device)
    x = big[:, 10:30]
    cu = torch.tensor([0, 7, 20], dtype=torch.int32, device=device)
    states = causal_conv1d_varlen_states(x, cu, 4)
    torch.testing.assert_close(states.cpu(), causal_conv1d_varlen_states_ref(x.cpu(), cu.cpu(), 4), rtol=0, atol=0)


def test_empty_batch(device):
    x = torch.randn(0, 8, device=device)
    cu = torch.zeros(1, dtype=torch.int32, device=device)
    assert causal_conv1d_varlen_states(x, cu, 3).shape == (0, 8, 3)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU visible")
def test_gpu_clamps_bad_offsets():
    # The GPU cannot raise on bad offsets without a sync; it must still stay inside x.
    x = torch.randn(10, 16, device="cuda")
    cu = torch.tensor([0, 4, 1000], dtype=torch.int32, device="cuda")
    states = causal_conv1d_varlen_states(x, cu, 3)
    torch.cuda.synchronize()
    torch.testing.assert_close(states[1].cpu(), x[7:10].T.cpu(), rtol=0, atol=0)
