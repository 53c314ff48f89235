"""The functional entry points mamba_ssm's fused Mamba2 path calls directly (upstream's
``causal_conv1d.cpp_functions``), same signatures and return values. Each is a thin wrapper over
the registered ops, which already carry fake kernels for torch.compile."""

import torch

from causal_conv1d import _core


def causal_conv1d_fwd_function(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    seq_idx: torch.Tensor | None,
    initial_states: torch.Tensor | None,
    final_states_out: torch.Tensor | None,
    silu_activation: bool,
) -> torch.Tensor:
    """Returns out (x's layout); writes final_states_out in place when given."""
    x, channel_last = _core.kernel_layout(x)
    return _core.run_fwd(x, channel_last, weight, bias, seq_idx, initial_states, final_states_out, silu_activation)


def causal_conv1d_bwd_function(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    dout: torch.Tensor,
    seq_idx: torch.Tensor | None,
    initial_states: torch.Tensor | None,
    dfinal_states: torch.Tensor | None,
    dx: torch.Tensor | None,
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
    bias: torch.Tensor | None,
    silu_activation: bool,
    cache_seqlens: torch.Tensor | None,
    conv_state_indices: torch.Tensor | None,
) -> torch.Tensor:
    """Returns out (x's shape); updates conv_state in place."""
    return _core.run_update(x, conv_state, weight, bias, silu_activation, cache_seqlens, conv_state_indices)
