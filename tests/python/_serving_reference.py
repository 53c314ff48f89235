"""Per-sequence references of the serving API (causal_conv1d.serving), built from
causal_conv1d_ref one sequence at a time in float64, and the batch builders its tests share.

The cache-position rules are written out here independently of the library: a prefill reads and
writes positions 0 .. width - 2 of a line; a decode step reads positions o .. o + width - 2
(o = num_accepted_tokens - 1, or 0) and writes positions 0 .. S - 1 (S = width - 2 + tokens with
num_accepted_tokens, else width - 1). Explicit indices that are negative, pad_slot_id or
null_block_id mark padding: outputs 0, no state read or written.
"""

import torch

from causal_conv1d.causal_conv1d_interface import causal_conv1d_ref


def _padding(line, pad_slot_id, null_block_id):
    return line < 0 or (pad_slot_id is not None and line == pad_slot_id) or (
        null_block_id is not None and line == null_block_id)


def _conv(window, tokens, weight, bias, silu):
    """Outputs (dim, len) in float64 of the conv over [window, tokens]; window (dim, width - 1)."""
    out = causal_conv1d_ref(tokens.double()[None], weight.double(), None if bias is None else bias.double(),
                            initial_states=window.double()[None], activation="silu" if silu else None)
    return out[0]


def fn_ref(x, weight, bias, conv_states, query_start_loc, cache_indices=None, has_initial_state=None, silu=True,
           pad_slot_id=-1, null_block_id=0, block_idx_first=None, block_idx_last=None, initial_state_idx=None,
           num_computed_tokens=None, block_size=0):
    """(out float64 (dim, tokens), new conv_states) of serving.causal_conv1d_fn; inputs untouched."""
    states = conv_states.detach().cpu().clone()
    xs = x.detach().cpu()
    dim, tokens = xs.shape
    width = weight.shape[1]
    h = width - 1
    qsl = [int(v) for v in query_start_loc.cpu()]
    out = torch.zeros(dim, tokens, dtype=torch.float64)
    apc = block_idx_last is not None
    table = None if cache_indices is None else cache_indices.cpu()
    for i in range(len(qsl) - 1):
        a, z = qsl[i], qsl[i + 1]
        if z == a:
            continue
        if table is None:
            in_line = out_line = i
        else:
            row = table[i] if table.dim() == 2 else table[i : i + 1]
            in_line = int(row[int(initial_state_idx[i]) if apc else 0])
            out_line = int(row[int(block_idx_last[i]) if apc else 0])
            if _padding(in_line, pad_slot_id, null_block_id):
                continue
        init = has_initial_state is not None and bool(has_initial_state[i])
        window = states[in_line, :, :h].clone() if init else torch.zeros(dim, h, dtype=states.dtype)
        seq = xs[:, a:z]
        out[:, a:z] = _conv(window, seq, weight.cpu(), None if bias is None else bias.cpu(), silu)
        concat = torch.cat([window, seq.to(states.dtype)], dim=1)  # concat[:, h + t] = token t
        if apc:
            computed = int(num_computed_tokens[i])
            first = int(block_idx_first[i])
            boundary = block_size - computed % block_size
            for k in range(int(block_idx_last[i]) - first):
                line = int(row[first + k])
                if not _padding(line, pad_slot_id, null_block_id):
                    states[line, :, :h] = concat[:, boundary : boundary + h]
                boundary += block_size
        if table is None or not _padding(out_line, pad_slot_id, null_block_id):
            states[out_line, :, :h] = concat[:, -h:]
    return out, states


def update_ref(x, conv_state, weight, bias=None, silu=False, conv_state_indices=None, num_accepted_tokens=None,
               query_start_loc=None, pad_slot_id=-1, null_block_id=None, block_idx_last=None,
               initial_state_idx=None):
    """(out float64 shaped like x, new conv_state) of serving.causal_conv1d_update; inputs untouched."""
    state = conv_state.detach().cpu().clone()
    xs = x.detach().cpu()
    width = weight.shape[1]
    h = width - 1
    varlen = query_start_loc is not None
    if varlen:
        qsl = [int(v) for v in query_start_loc.cpu()]
        rows = [xs[qsl[i] : qsl[i + 1]].t() for i in range(len(qsl) - 1)]
    else:
        squeeze = xs.dim() == 2
        x3 = xs.unsqueeze(-1) if squeeze else xs
        rows = [x3[i] for i in range(x3.shape[0])]
    outs = []
    table = None if conv_state_indices is None else conv_state_indices.cpu()
    for i, seq in enumerate(rows):
        zero = torch.zeros(seq.shape, dtype=torch.float64)
        if table is None:
            in_line = out_line = i
        else:
            row = table[i] if table.dim() == 2 else table[i : i + 1]
            in_line = int(row[int(initial_state_idx[i]) if block_idx_last is not None else 0])
            out_line = int(row[int(block_idx_last[i]) if block_idx_last is not None else 0])
            if _padding(in_line, pad_slot_id, null_block_id):
                outs.append(zero)
                continue
        if seq.shape[1] == 0:
            outs.append(zero)
            continue
        o = int(num_accepted_tokens[i]) - 1 if num_accepted_tokens is not None else 0
        window = state[in_line, :, o : o + h].clone()
        outs.append(_conv(window, seq, weight.cpu(), None if bias is None else bias.cpu(), silu))
        concat = torch.cat([window, seq.to(state.dtype)], dim=1)
        keep = h - 1 + seq.shape[1] if num_accepted_tokens is not None else h
        if table is None or not _padding(out_line, pad_slot_id, null_block_id):
            state[out_line, :, :keep] = concat[:, concat.shape[1] - keep :]
    if varlen:
        out = torch.zeros(xs.shape, dtype=torch.float64)
        for i, o in enumerate(outs):
            out[qsl[i] : qsl[i + 1]] = o.t()
        return out, state
    out = torch.stack(outs)
    return (out.squeeze(-1) if xs.dim() == 2 else out), state


def make_tokens(dim, tokens, dtype, device, layout, pitch_extra=0):
    """x (dim, tokens) in one of the layouts engines pass: "tok" (tokens contiguous), "dim" (a
    transposed (tokens, dim), what vLLM passes) or "pitch" (a transposed slice of a wider
    (tokens, dim + pitch_extra) projection: dim contiguous, token stride > dim)."""
    if layout == "tok":
        return torch.randn(dim, tokens, dtype=dtype, device=device)
    if layout == "dim":
        return torch.randn(tokens, dim, dtype=dtype, device=device).t()
    wide = torch.randn(tokens, dim + pitch_extra, dtype=dtype, device=device)
    return wide[:, pitch_extra // 2 : pitch_extra // 2 + dim].t()


def make_cache(lines, dim, state_len, dtype, device, layout):
    """conv state cache (lines, dim, state_len): "dim" keeps dim contiguous (vLLM's default), "state"
    keeps each channel's state contiguous (VLLM_SSM_CONV_STATE_LAYOUT=DS)."""
    if layout == "dim":
        return torch.randn(lines, state_len, dim, dtype=dtype, device=device).transpose(1, 2)
    return torch.randn(lines, dim, state_len, dtype=dtype, device=device)


def query_start_loc(lengths, device):
    qsl = [0]
    for n in lengths:
        qsl.append(qsl[-1] + n)
    return torch.tensor(qsl, dtype=torch.int32, device=device)
