"""Loads the compiled op library and registers the fake (meta) kernels torch.compile traces with.

The ops live in the ``torch.ops.causal_conv1d`` namespace; the public API in
``causal_conv1d_interface`` and friends calls them. Nothing here allocates on the hot path.
"""

import os
import sysconfig

import torch

_here = os.path.dirname(os.path.abspath(__file__))


def _find_binary(name, what):
    # Built per interpreter (the name carries Python's extension suffix).
    path = os.path.join(_here, name + sysconfig.get_config_var("EXT_SUFFIX"))
    if not os.path.exists(path):
        raise ImportError(
            f"causal_conv1d: {what} {os.path.basename(path)} is missing in {_here}. "
            "Build it with `pip install --no-build-isolation .` (or `-e .`) using this Python."
        )
    return path


LIBRARY_PATH = _find_binary("_C", "the compiled op library")
torch.ops.load_library(LIBRARY_PATH)
ops = torch.ops.causal_conv1d

# The eager entry (csrc/python/eager.cpp): fast-call functions for the per-step ops, bound (by
# causal_conv1d/_core.py, which also decides when they are used) to what they fall back to.
_find_binary("_eager", "the compiled eager entry")
from causal_conv1d import _eager  # noqa: E402,F401  (after the op library: bind() looks its ops up)


def build_config():
    """What the loaded binary was built for, as a dict (backend, gpu_archs, torch_version)."""
    lines = ops.build_config().strip().splitlines()
    return dict(line.split("=", 1) for line in lines)


@torch.library.register_fake("causal_conv1d::fwd")
def _fwd_fake(x, weight, bias, seq_idx, initial_states, out, final_states_out, silu_activation):
    return None


@torch.library.register_fake("causal_conv1d::bwd")
def _bwd_fake(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx, dweight, dbias,
              dinitial_states, silu_activation, deterministic):
    return None


@torch.library.register_fake("causal_conv1d::update")
def _update_fake(x, conv_state, weight, bias, out, silu_activation, cache_seqlens, conv_state_indices):
    return None


@torch.library.register_fake("causal_conv1d::update_functional")
def _update_functional_fake(x, conv_state, weight, bias, silu_activation, cache_seqlens, conv_state_indices):
    return torch.empty_like(x)


@torch.library.register_fake("causal_conv1d::cpu_output_buffer")
def _cpu_output_buffer_fake(like, size, stride):
    return torch.empty_strided(size, stride, dtype=like.dtype, device=like.device)


def cpu_cache_info():
    """The CPU output cache (large CPU outputs of the ops are kept when freed and reused; see
    ``empty_cpu_cache``): a dict of ``bytes`` and ``buffers`` kept now, ``hits`` and ``misses``
    (large allocations served from the cache / fresh since the process started) and ``limit_bytes``
    (``CAUSAL_CONV1D_CPU_CACHE_MB``, default 256 MB; 0: the cache is off)."""
    kept, buffers, hits, misses, limit = ops.cpu_cache_info()
    return {"bytes": kept, "buffers": buffers, "hits": hits, "misses": misses, "limit_bytes": limit}


def empty_cpu_cache():
    """Returns the CPU buffers the output cache keeps to the system (as ``torch.cuda.empty_cache``
    does for the GPU's caching allocator). Tensors in use are not affected."""
    ops.cpu_cache_clear()


@torch.library.register_fake("causal_conv1d::varlen_states")
def _varlen_states_fake(x, cu_seqlens, state_len):
    batch = cu_seqlens.shape[0] - 1
    return x.new_empty((batch, state_len, x.shape[1])).transpose(1, 2)


@torch.library.register_fake("causal_conv1d::serving_fwd")
def _serving_fwd_fake(x, weight, bias, conv_states, query_start_loc, cache_indices, has_initial_state,
                      block_idx_first_scheduled_token, block_idx_last_scheduled_token, initial_state_idx,
                      num_computed_tokens, block_size_to_align, pad_slot_id, null_block_id, silu_activation,
                      validate_data, out):
    return None


@torch.library.register_fake("causal_conv1d::serving_update")
def _serving_update_fake(x, conv_state, weight, bias, conv_state_indices, num_accepted_tokens, query_start_loc,
                         block_idx_last_scheduled_token, initial_state_idx, pad_slot_id, null_block_id,
                         silu_activation, validate_data):
    return None
