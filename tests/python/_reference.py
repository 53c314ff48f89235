"""Float64 references and tolerances shared by the tests."""

import torch
import torch.nn.functional as F

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
DTYPE_PAIRS = [(xt, wt) for xt in DTYPES for wt in DTYPES]

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
    initial_states (or are 0); with seq_idx a tap counts only if its position has t's id.
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


def random_seq_idx(batch, seqlen, device, max_segments=5):
    """int32 (batch, seqlen) ids: non-decreasing runs of random lengths, as packed sequences give."""
    rows = []
    for _ in range(batch):
        cuts = torch.randint(1, max(seqlen, 2), (max_segments - 1,)).sort().values
        ids = torch.zeros(seqlen, dtype=torch.int32)
        for c in cuts.tolist():
            ids[c:] += 1
        rows.append(ids)
    return torch.stack(rows).to(device)
