"""Float64 references, tolerances and parameter sweeps shared by the tests."""

import itertools

import pytest
import torch
import torch.nn.functional as F

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
DTYPE_PAIRS = [(xt, wt) for xt in DTYPES for wt in DTYPES]
DTYPE_PAIR_IDS = [f"{str(a)[6:]}-{str(b)[6:]}" for a, b in DTYPE_PAIRS]
# Kernel widths the library supports (csrc/include/causal_conv1d/params.h: kMinWidth..kMaxWidth).
WIDTHS = [2, 3, 4]
# x layouts: channel-first (stride(2) == 1) and channel-last (stride(1) == 1).
LAYOUTS = [False, True]
LAYOUT_IDS = ["cf", "cl"]

# Relative/absolute tolerance of results stored in dtype (one rounding of an fp32 accumulation).
TOL = {
    torch.float32: dict(rtol=1e-4, atol=1e-4),
    torch.float16: dict(rtol=3e-3, atol=3e-3),
    torch.bfloat16: dict(rtol=1e-2, atol=1e-2),
}


def dtype_id(t):
    return str(t).replace("torch.", "")


def conv_ref(x, weight, bias=None, seq_idx=None, initial_states=None, silu=False):
    """out, final_states of the causal depthwise conv, computed in float64 on the CPU.

    out[b, c, t] = act(bias[c] + sum_k w[c, k] * x[b, c, t - (W-1) + k]); positions < 0 come from
    initial_states (or are 0); with seq_idx a tap counts only if its position has t's id, and a
    negative id marks a padding token whose output is exactly 0.
    final_states = the last W-1 positions of [initial_states, x], in x's dtype.
    """
    batch, dim, seqlen = x.shape
    width = weight.shape[1]
    xd = x.detach().cpu().double()
    wd = weight.detach().cpu().double()
    if initial_states is None:
        pad = torch.zeros(batch, dim, width - 1, dtype=torch.float64)
    else:
        pad = initial_states.detach().cpu().double()
    xp = torch.cat([pad, xd], dim=-1)
    if seq_idx is None:
        out = F.conv1d(xp, wd.unsqueeze(1), None, groups=dim)
    else:
        seq = seq_idx.cpu().long()
        seqp = torch.cat([torch.full((batch, width - 1), -1, dtype=torch.long), seq], dim=-1)
        out = torch.zeros(batch, dim, seqlen, dtype=torch.float64)
        for k in range(width):
            same = (seqp[:, k : k + seqlen] == seq).unsqueeze(1)
            out += wd[:, k].view(1, dim, 1) * xp[:, :, k : k + seqlen] * same
    if bias is not None:
        out = out + bias.detach().cpu().double().view(1, dim, 1)
    if silu:
        out = F.silu(out)
    if seq_idx is not None:
        out = out * (seq >= 0).unsqueeze(1)  # padding tokens: exactly 0
    final = xp[:, :, xp.shape[-1] - (width - 1) :].to(x.dtype)
    return out, final


def assert_close(actual, expected, dtype, what="out"):
    actual = actual.detach().cpu().double()
    expected = expected.detach().cpu().double()
    assert not torch.isnan(actual).any(), f"{what}: NaN in result"
    torch.testing.assert_close(actual, expected, **TOL[dtype], msg=lambda m: f"{what}: {m}")


def make_x(batch, dim, seqlen, dtype, device, channel_last):
    """x in the requested layout (channel-last the way Mamba2 makes it: a transposed (b, l, d))."""
    if channel_last:
        return torch.randn(batch, seqlen, dim, dtype=dtype, device=device).transpose(1, 2)
    return torch.randn(batch, dim, seqlen, dtype=dtype, device=device)


def random_seq_idx(batch, seqlen, device, max_segments=5, padding=False):
    """int32 (batch, seqlen) ids: non-decreasing runs of random lengths, as packed sequences give.

    padding=True also marks padding tokens with negative ids: a tail of each row (as upstream's
    varlen padding test makes them) and a run inside it, with two different negative values.
    """
    rows = []
    for _ in range(batch):
        cuts = torch.randint(1, max(seqlen, 2), (max_segments - 1,)).sort().values
        ids = torch.zeros(seqlen, dtype=torch.int32)
        for c in cuts.tolist():
            ids[c:] += 1
        if padding:
            tail = int(torch.randint(0, seqlen // 3 + 2, ()))
            if tail:
                ids[seqlen - tail :] = -1
            start = int(torch.randint(0, seqlen, ()))
            ids[start : start + int(torch.randint(1, 6, ()))] = -7
        rows.append(ids)
    return torch.stack(rows).to(device)


def conv_ref_diff(x, weight, bias=None, seq_idx=None, initial_states=None, silu=False):
    """Differentiable float64 version of conv_ref (inputs are upcast, gradients flow back to them).

    Returns (out, final_states) in float64.
    """
    batch, dim, seqlen = x.shape
    width = weight.shape[1]
    xd, wd = x.double(), weight.double()
    if initial_states is None:
        pad = torch.zeros(batch, dim, width - 1, dtype=torch.float64, device=x.device)
    else:
        pad = initial_states.double()
    xp = torch.cat([pad, xd], dim=-1)
    if seq_idx is None:
        out = F.conv1d(xp, wd.unsqueeze(1), None, groups=dim)
    else:
        seq = seq_idx.long()
        seqp = torch.cat([torch.full((batch, width - 1), -1, dtype=torch.long, device=x.device), seq], dim=-1)
        terms = []
        for k in range(width):
            same = (seqp[:, k : k + seqlen] == seq).unsqueeze(1)
            terms.append(wd[:, k].view(1, dim, 1) * xp[:, :, k : k + seqlen] * same)
        out = torch.stack(terms).sum(0)
    if bias is not None:
        out = out + bias.double().view(1, dim, 1)
    if silu:
        out = F.silu(out)
    if seq_idx is not None:
        out = out * (seq >= 0).unsqueeze(1)  # padding tokens: a constant 0, no gradient
    return out, xp[:, :, xp.shape[-1] - (width - 1) :]


def assert_grad_close(actual, expected, dtype, what):
    """Gradients stored in dtype: elementwise dtype tolerance, absolute part scaled by the largest
    expected magnitude (reductions over batch and time cancel, so small entries carry the
    rounding of large partial sums)."""
    actual = actual.detach().cpu().double()
    expected = expected.detach().cpu().double()
    assert not torch.isnan(actual).any(), f"{what}: NaN in result"
    scale = max(expected.abs().max().item(), 1.0)
    tol = TOL[dtype]
    torch.testing.assert_close(actual, expected, rtol=tol["rtol"], atol=tol["atol"] * scale,
                               msg=lambda m: f"{what}: {m}")


def update_ref(x, conv_state, weight, bias=None, silu=False, cache_seqlens=None, conv_state_indices=None):
    """float64 reference of causal_conv1d_update with every option; returns (out, new_state).

    Does not modify its inputs. Padding rows (negative index) give zero output, untouched state.
    """
    squeeze = x.dim() == 2
    xs = (x.unsqueeze(-1) if squeeze else x).detach().cpu()
    state = conv_state.detach().cpu().clone()
    w = weight.detach().cpu().double()
    b = bias.detach().cpu().double() if bias is not None else None
    batch, dim, seqlen = xs.shape
    width = w.shape[1]
    state_len = state.shape[-1]
    out = torch.zeros(batch, dim, seqlen, dtype=torch.float64)
    for r in range(batch):
        line = r if conv_state_indices is None else int(conv_state_indices[r])
        if line < 0:
            continue
        if cache_seqlens is None:
            window = state[line, :, state_len - (width - 1):].double()
        else:
            head = int(cache_seqlens[r])
            idx = [(head - (width - 1) + i) % state_len for i in range(width - 1)]
            window = state[line][:, idx].double()
        seq = torch.cat([window, xs[r].double()], dim=-1)
        for t in range(seqlen):
            acc = (seq[:, t : t + width] * w).sum(-1)
            if b is not None:
                acc = acc + b
            out[r, :, t] = F.silu(acc) if silu else acc
        if cache_seqlens is None:
            state[line] = torch.cat([state[line], xs[r]], dim=-1)[:, -state_len:]
        else:
            for t in range(seqlen):
                state[line, :, (head + t) % state_len] = xs[r, :, t]
    return (out.squeeze(-1) if squeeze else out), state


def sweep(axes, default):
    """pytest parameters for the full product of `axes`, a dict {name: [(value, id), ...]}.

    Every case runs in the `exhaustive` run (`pytest -m exhaustive`, once per kernel change); the
    default run keeps the cases for which default(**indices) is true, where indices maps each axis
    name to the case's position along it. The predicates keep every compile-time kernel variant
    (x dtype, width, layout, activation) and rotate the run-time choices (weight dtype, bias,
    index buffers) through them, so the default run proves each variant with each option.
    """
    names = list(axes)
    params = []
    for combo in itertools.product(*(list(enumerate(axes[n])) for n in names)):
        idx = {n: i for n, (i, _) in zip(names, combo)}
        values = [v for _, (v, _) in combo]
        case_id = "-".join(str(i) for _, (_, i) in combo)
        marks = () if default(**idx) else (pytest.mark.exhaustive,)
        params.append(pytest.param(*values, id=case_id, marks=marks))
    return pytest.mark.parametrize(",".join(names), params)


def axis(values, ids=None):
    """[(value, id), ...] for sweep()."""
    ids = ids or [dtype_id(v) if isinstance(v, torch.dtype) else str(v) for v in values]
    return list(zip(values, ids))


def kernel_variant_sweep():
    """The (xtype, wtype, width, channel_last, silu, has_bias) sweep of the forward and backward
    parity tests: the default run keeps every kernel variant (x dtype, width, layout, activation)
    with and without bias, the weight dtype rotating (72 of 216 cases)."""
    return sweep(
        dict(
            xtype=axis(DTYPES),
            wtype=axis(DTYPES),
            width=axis(WIDTHS),
            channel_last=axis(LAYOUTS, LAYOUT_IDS),
            silu=axis([False, True], ["id", "silu"]),
            has_bias=axis([False, True], ["nobias", "bias"]),
        ),
        default=lambda xtype, wtype, width, channel_last, silu, has_bias: (wtype + has_bias + width + channel_last) % 3
        == 0,
    )
