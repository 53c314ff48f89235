"""The functional entry points mamba_ssm's fused Mamba2 path calls directly (upstream's
``causal_conv1d.cpp_functions``), same signatures and return values. Each is a thin wrapper over
the registered ops, which already carry fake kernels for torch.compile."""

from typing import Optional

import torch

from causal_conv1d import _core


def causal_conv1d_fwd_function(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: Optional[torch.Tensor],
    seq_idx: Optional[torch.Tensor],
    initial_states: Optional[torch.Tensor],
    final_states_out: Optional[torch.Tensor],
    silu_activation: bool,
) -> torch.Tensor:
    """Returns out (x's layout); writes final_states_out in place when given."""
    x, channel_last = _core.kernel_layout(x)
    return _core.run_fwd(x, channel_last, weight, bias, seq_idx, initial_states, final_states_out, silu_activation)


def causal_conv1d_bwd_function(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: Optional[torch.Tensor],
    dout: torch.Tensor,
    seq_idx: Optional[torch.Tensor],
    initial_states: Optional[torch.Tensor],
    dfinal_states: Optional[torch.Tensor],
    dx: Optional[torch.Tensor],
    return_dinitial_states: bool,
    silu_activation: bool,
) -> tuple:
    """Returns (dx, dweight, dbias, dinitial_states); dx is the given buffer when one is passed
    (it must have x's layout), dweight/dbias come in weight's/bias's dtype."""
    x, channel_last = _core.kernel_layout(x)
    return _core.run_bwd(x, channel_last, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx,
                         return_dinitial_states, silu_activation)


def causal_conv1d_update_function(
    x: torch.Tensor,
    conv_state: torch.Tensor,
    weight: torch.Tensor,
    bias: Optional[torch.Tensor],
    silu_activation: bool,
    cache_seqlens: Optional[torch.Tensor],
    conv_state_indices: Optional[torch.Tensor],
) -> torch.Tensor:
    """Returns out (x's shape); updates conv_state in place."""
    return _core.run_update(x, conv_state, weight, bias, silu_activation, cache_seqlens, conv_state_indices)
