"""causal-conv1d for ROCm: a drop-in, HIP-native replacement for the ``causal-conv1d`` package.

    from causal_conv1d import causal_conv1d_fn, causal_conv1d_update
"""

__version__ = "1.6.1"

from causal_conv1d._diagnostics import check_devices_at_import, show_config  # noqa: E402
from causal_conv1d._ops import cpu_cache_info, empty_cpu_cache  # noqa: E402
from causal_conv1d.causal_conv1d_interface import causal_conv1d_fn, causal_conv1d_update  # noqa: E402

check_devices_at_import()

__all__ = ["causal_conv1d_fn", "causal_conv1d_update", "show_config", "cpu_cache_info", "empty_cpu_cache", "__version__"]
