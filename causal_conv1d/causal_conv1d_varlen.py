"""Final convolution states of packed (variable-length) sequences."""

import torch
from torch import Tensor

from causal_conv1d._ops import ops


def causal_conv1d_varlen_states(x: Tensor, cu_seqlens: Tensor, state_len: int) -> Tensor:
    """Gathers each packed sequence's last ``state_len`` tokens as its conv state.

    x: (total_tokens, dim). cu_seqlens: (batch + 1,) int32 or int64, non-decreasing, starting at 0,
    the sequence offsets into x. Returns states (batch, dim, state_len) in channel-last memory;
    columns before a sequence's start (sequences shorter than state_len) are 0.

    On the CPU invalid offsets raise; on the GPU they are clamped to x (never read out of
    bounds) since checking them would need a host synchronisation.
    """
    return ops.varlen_states(x, cu_seqlens, state_len)


def causal_conv1d_varlen_states_ref(x: Tensor, cu_seqlens: Tensor, state_len: int) -> Tensor:
    """Pure-PyTorch reference of :func:`causal_conv1d_varlen_states`."""
    _, dim = x.shape
    batch = cu_seqlens.shape[0] - 1
    states = torch.zeros(batch, state_len, dim, dtype=x.dtype, device=x.device).transpose(1, 2)
    for i in range(batch):
        end = int(cu_seqlens[i + 1])
        start = max(int(cu_seqlens[i]), end - state_len)
        if end > start:
            states[i, :, state_len - (end - start):] = x[start:end].T
    return states
