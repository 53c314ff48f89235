"""The serving API: causal conv1d with the continuous-batching call shape of vLLM and SGLang.

    from causal_conv1d.serving import causal_conv1d_fn, causal_conv1d_update

Both functions take the argument names, order and defaults of vLLM's
``vllm/model_executor/layers/mamba/ops/causal_conv1d.py`` and accept the keywords SGLang passes, so
an engine's call can be pointed at them unchanged (``causal_conv1d.engine_plugins`` does that
for vLLM and SGLang). They read and write exactly the cache positions vLLM's kernels do:

- a state line is (dim, state_len) in a (cache_lines, dim, state_len) cache with any strides
  (vLLM keeps dim contiguous; state contiguous works as well);
- ``causal_conv1d_fn`` (prefill) reads the initial window from positions 0 .. width - 2 and writes
  the sequence's last width - 1 inputs there; positions past width - 2 are never touched;
- ``causal_conv1d_update`` (decode) reads the window at positions o .. o + width - 2, o =
  num_accepted_tokens - 1 with speculative decoding (else 0), and writes positions 0 .. S - 1 with
  the last S entries of [window, new tokens], S = width - 2 + tokens with speculative decoding
  (the state keeps every draft token, so the next step can start after any accepted prefix), else
  width - 1.

A cache index that is negative, equal to ``pad_slot_id`` or equal to ``null_block_id`` marks a
padded entry: no state is read or written and its outputs are 0. Lines chosen implicitly (no
index tensor: line i for sequence i) are never padding.

No function here synchronises with the device or reads device memory on the host (unless asked to
by validate_data=True on the GPU): every launch is sized from shapes, and sequences are found on the
device. On the CPU the metadata is always
validated (bad offsets, cache lines out of range, inconsistent prefix-caching blocks raise a
RuntimeError naming the entry); on the GPU only with ``validate_data=True`` (which copies the index
tensors to the host), and otherwise an invalid cache line is treated as padding and offsets are
clamped, so nothing outside the tensors is ever read or written. A build without the serving GPU
kernels raises ``NotImplementedError`` (``UnsupportedMode``) for GPU tensors, never falling back
to the host.
"""

import torch

from causal_conv1d._ops import build_config, ops

# vLLM's values: PAD_SLOT_ID marks padded entries; block 0 is the null block of newer vLLM's block
# tables (its pull request #35431), which pads them with it.
PAD_SLOT_ID = -1
NULL_BLOCK_ID = 0

# Read once: a custom op returning a string cannot run inside torch.compile.
_GPU_KERNELS = build_config().get("serving_gpu") == "1"
_FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


class UnsupportedMode(NotImplementedError):
    """A call this library does not implement (an unsupported width, dtype, activation or device, or
    an engine feature such as SGLang's EAGLE tree). Raised before anything is read or written, so
    a caller (the engine plug-ins) can hand the very same call to another implementation."""


def gpu_kernels_available():
    """Whether this build has the serving API's GPU kernels (False: CPU tensors only)."""
    return _GPU_KERNELS


def _silu_flag(op, activation):
    # vLLM passes True for "silu" (and False for none) as well as the names.
    if activation is None or activation is False:
        return False
    if activation is True or activation == "silu" or activation == "swish":
        return True
    raise UnsupportedMode(f"{op}: activation must be None, 'silu', 'swish' or a bool, got {activation!r}")


def _check_supported(op, x, weight, cache):
    """The modes this library runs; anything else raises UnsupportedMode before any work."""
    for name, t in (("x", x), ("weight", weight), (cache[0], cache[1])):
        if t.dtype not in _FLOAT_DTYPES:
            raise UnsupportedMode(f"{op}: {name} must be float32, float16 or bfloat16, got {t.dtype}")
    if weight.dim() == 2 and not 2 <= weight.shape[1] <= 4:
        raise UnsupportedMode(f"{op}: kernel widths 2, 3 and 4 are supported, got weight of shape {tuple(weight.shape)}")
    if x.device.type == "cuda" and not _GPU_KERNELS:
        raise UnsupportedMode(
            f"{op}: this build of causal_conv1d has no GPU kernels for the serving API (x is on {x.device}); "
            "it runs CPU tensors only"
        )


def _empty_like_layout(x):
    """An uninitialised (dim, tokens) tensor with x's memory order (tokens contiguous, or dim
    contiguous as vLLM's transposed projections are), densely packed."""
    dim, tokens = x.shape
    if dim > 1 and x.stride(0) == 1:
        return torch.empty((tokens, dim), dtype=x.dtype, device=x.device).t()
    return torch.empty((dim, tokens), dtype=x.dtype, device=x.device)


def causal_conv1d_fn(
    x,
    weight,
    bias,
    conv_states,
    query_start_loc,
    cache_indices=None,
    has_initial_state=None,
    activation="silu",
    pad_slot_id=PAD_SLOT_ID,
    null_block_id=NULL_BLOCK_ID,
    block_idx_first_scheduled_token=None,
    block_idx_last_scheduled_token=None,
    initial_state_idx=None,
    num_computed_tokens=None,
    block_size_to_align=0,
    metadata=None,
    validate_data=False,
    *,
    seq_lens_cpu=None,
    **kwargs,
):
    """Causal depthwise conv of a batch of concatenated sequences (prefill), continuing each from
    its cache line and leaving its final window there.

    x: (dim, total_tokens), any strides (vLLM passes a transposed (tokens, dim) view)
    weight: (dim, width), width 2..4; bias: (dim,) or None
    conv_states: (cache_lines, dim, state_len >= width - 1), updated in place, x's dtype (x is
        converted to it first, as vLLM does)
    query_start_loc: int32 (batch + 1,): sequence i is tokens query_start_loc[i] ..
        query_start_loc[i + 1] - 1; starts at 0 and ends at total_tokens
    cache_indices: int32 (batch,) cache line of each sequence (None: line i), or with prefix
        caching (batch, blocks), a block table
    has_initial_state: bool (batch,): whether the sequence continues from its line's window
        (None: none does; a sequence without one starts from zeros)
    activation: None, "silu", "swish" or a bool
    pad_slot_id, null_block_id: cache index values that mark padding (None: no such value)
    block_idx_first_scheduled_token, block_idx_last_scheduled_token, initial_state_idx,
    num_computed_tokens: int32 (batch,), prefix caching (vLLM's "align" mode, on when
        block_idx_last_scheduled_token is given): the initial window comes from column
        initial_state_idx[i] of the block table; the window before each block boundary the chunk
        crosses (where num_computed_tokens[i] + t is a multiple of block_size_to_align) goes to
        that block's column, from block_idx_first_scheduled_token[i] on; the final window to
        column block_idx_last_scheduled_token[i]
    validate_data: on the GPU, check the metadata's values first (copies the index tensors to the
        host: a synchronisation); the CPU always checks them
    metadata, seq_lens_cpu, **kwargs: what vLLM and SGLang pass; not needed (no host work is done
        with them)

    Returns out (dim, total_tokens) in x's dtype and memory order; padded sequences' outputs are 0.
    """
    op = "serving.causal_conv1d_fn"
    silu = _silu_flag(op, activation)
    _check_supported(op, x, weight, ("conv_states", conv_states))
    out_dtype = x.dtype
    if x.dtype != conv_states.dtype:
        x = x.to(conv_states.dtype)
    if x.dim() == 2 and x.stride(0) != 1 and x.stride(1) != 1:
        x = x.contiguous()
    out = _empty_like_layout(x) if x.dim() == 2 else torch.empty_like(x)  # other ranks: the op reports them
    ops.serving_fwd(
        x,
        weight,
        bias,
        conv_states,
        query_start_loc,
        cache_indices,
        has_initial_state,
        block_idx_first_scheduled_token,
        block_idx_last_scheduled_token,
        initial_state_idx,
        num_computed_tokens,
        block_size_to_align,
        pad_slot_id,
        null_block_id,
        silu,
        bool(validate_data),
        out,
    )
    return out if out.dtype == out_dtype else out.to(out_dtype)


def causal_conv1d_update(
    x,
    conv_state,
    weight,
    bias=None,
    activation=None,
    conv_state_indices=None,
    num_accepted_tokens=None,
    query_start_loc=None,
    max_query_len=-1,
    pad_slot_id=PAD_SLOT_ID,
    block_idx_last_scheduled_token=None,
    initial_state_idx=None,
    validate_data=False,
    *,
    null_block_id=None,
    num_accept_tokens=None,
    cache_seqlens=None,
    intermediate_conv_window=None,
    intermediate_state_indices=None,
    retrieve_next_token=None,
    retrieve_next_sibling=None,
    retrieve_parent_token=None,
    metadata=None,
):
    """Decode step(s) on the conv cache, the outputs written into x (which is returned).

    x: (batch, dim) or (batch, dim, seqlen); with query_start_loc, (total_tokens, dim) holding the
        rows' tokens back to back (varlen decode)
    conv_state: (cache_lines, dim, state_len >= width - 1), updated in place, any strides
    weight: (dim, width), width 2..4; bias: (dim,) or None; activation: None, "silu", "swish", bool
    conv_state_indices: int32 (batch,) cache line of each row (None: line i), or (batch, blocks)
        with prefix caching
    num_accepted_tokens: int32 (batch,), speculative decoding: the window starts at position
        num_accepted_tokens - 1 of the line, and the line keeps width - 2 + the row's tokens
        entries, so state_len must hold them. SGLang's spelling num_accept_tokens is accepted.
    query_start_loc: int32 (batch + 1,), varlen decode (batch = conv_state_indices.size(0) when
        given); tokens of no row are left as they are
    max_query_len: vLLM's launch hint; not needed here
    pad_slot_id, null_block_id: cache index values that mark padded rows (None: no such value;
        negative values always do). Padded rows get outputs 0 and leave the cache alone.
    block_idx_last_scheduled_token, initial_state_idx: int32 (batch,), prefix caching: the window
        is read from column initial_state_idx[i] and the new state written to column
        block_idx_last_scheduled_token[i] of conv_state_indices
    validate_data: on the GPU, check the metadata's values first (a synchronisation); the CPU
        always checks them. metadata: accepted for the engines, not needed.
    cache_seqlens (a circular state, causal_conv1d.causal_conv1d_update has it) and SGLang's EAGLE
    tree / intermediate-window arguments raise UnsupportedMode (NotImplementedError).

    Returns x holding the outputs (a new tensor in x's dtype when x's dtype differs from
    conv_state's, as vLLM converts x to the cache's dtype first).
    """
    op = "serving.causal_conv1d_update"
    sglang_extras = (
        ("intermediate_conv_window", intermediate_conv_window),
        ("intermediate_state_indices", intermediate_state_indices),
        ("retrieve_next_token", retrieve_next_token),
        ("retrieve_next_sibling", retrieve_next_sibling),
        ("retrieve_parent_token", retrieve_parent_token),
    )
    given = [name for name, value in sglang_extras if value is not None]
    if given:
        raise UnsupportedMode(f"{op}: SGLang's {', '.join(given)} (EAGLE tree / intermediate windows) are not supported")
    if cache_seqlens is not None:
        raise UnsupportedMode(
            f"{op}: cache_seqlens (a circular conv state) is not supported by the serving API; "
            "causal_conv1d.causal_conv1d_update implements it"
        )
    if num_accept_tokens is not None:
        if num_accepted_tokens is not None:
            raise ValueError(f"{op}: give num_accepted_tokens or num_accept_tokens (SGLang's name), not both")
        num_accepted_tokens = num_accept_tokens
    silu = _silu_flag(op, activation)
    _check_supported(op, x, weight, ("conv_state", conv_state))
    out_dtype = x.dtype
    if x.dtype != conv_state.dtype:
        x = x.to(conv_state.dtype)
    ops.serving_update(
        x,
        conv_state,
        weight,
        bias,
        conv_state_indices,
        num_accepted_tokens,
        query_start_loc,
        block_idx_last_scheduled_token,
        initial_state_idx,
        pad_slot_id,
        null_block_id,
        silu,
        bool(validate_data),
    )
    return x if x.dtype == out_dtype else x.to(out_dtype)


__all__ = [
    "causal_conv1d_fn",
    "causal_conv1d_update",
    "gpu_kernels_available",
    "UnsupportedMode",
    "PAD_SLOT_ID",
    "NULL_BLOCK_ID",
]
