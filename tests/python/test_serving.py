"""The serving API (causal_conv1d.serving) against per-sequence references built from
causal_conv1d_ref (tests/python/_serving_reference.py): random continuous batches, decode after
prefill against whole sequences, speculative decoding against the sequential reference, prefix
caching against the whole prompt's windows, errors, opcheck and torch.compile.

Every numerical test runs on the CPU and, where a GPU is visible, on the GPU (those cases are for
the GPU kernels; until they exist a GPU call must raise NotImplementedError, checked separately).
"""

import random

import pytest
import torch

from _reference import DTYPES, assert_close, axis, sweep
from _serving_reference import fn_ref, make_cache, make_tokens, query_start_loc, update_ref
from causal_conv1d import serving
from causal_conv1d._ops import ops
from causal_conv1d.causal_conv1d_interface import causal_conv1d_ref
from causal_conv1d.serving import causal_conv1d_fn, causal_conv1d_update

X_LAYOUTS = ["tok", "dim", "pitch"]
CACHE_LAYOUTS = ["dim", "state"]

needs_gpu_kernels = pytest.mark.skipif(
    not serving.gpu_kernels_available(), reason="the serving API has no GPU kernels in this build yet"
)


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=[
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU visible"), needs_gpu_kernels])])
def sdevice(request):
    """Devices the serving API runs on: the CPU, and GPUs once its GPU kernels exist."""
    return request.param


def _random_lengths(rng, batch, width):
    """1..3000 tokens, with 1, the lengths below width - 1, and short decode-like ones frequent."""
    lengths = []
    for _ in range(batch):
        kind = rng.random()
        if kind < 0.2:
            lengths.append(1)
        elif kind < 0.35:
            lengths.append(rng.randint(1, max(1, width - 2)))
        elif kind < 0.8:
            lengths.append(rng.randint(2, 40))
        else:
            lengths.append(rng.randint(41, 3000))
    return lengths


def _lines_with_padding(rng, batch, lines, device, pad_slot_id=-1, null_block_id=0):
    """Shuffled distinct cache lines (never the null block), about one in eight a padding entry."""
    chosen = rng.sample(range(1, lines), batch)
    for i in range(batch):
        if rng.random() < 0.125:
            chosen[i] = pad_slot_id if rng.random() < 0.5 else null_block_id
    return torch.tensor(chosen, dtype=torch.int32, device=device)


def _assert_states_equal(actual, expected, what="conv_states"):
    """States are copies of inputs, never rounded: bitwise equal, everywhere (untouched lines and
    positions included)."""
    actual = actual.detach().cpu()
    assert torch.equal(actual, expected), f"{what}: {(actual.double() - expected.double()).abs().max()} max difference"


fn_sweep = sweep(
    dict(
        dtype=axis(DTYPES),
        width=axis([2, 3, 4]),
        x_layout=axis(X_LAYOUTS),
        cache_layout=axis(CACHE_LAYOUTS),
    ),
    default=lambda dtype, width, x_layout, cache_layout: (dtype + width + x_layout + cache_layout) % 3 == 0,
)


@fn_sweep
def test_fn_random_batches(sdevice, dtype, width, x_layout, cache_layout):
    rng = random.Random(1000 * width + 10 * X_LAYOUTS.index(x_layout) + DTYPES.index(dtype))
    batch = rng.choice([1, rng.randint(2, 16), 64])
    lengths = _random_lengths(rng, batch, width)
    dim = rng.choice([40, 72, 300])  # 300: channel blocks of the CPU backend end mid-row
    extra = rng.choice([0, 0, 3])  # state_len > width - 1: positions past width - 2 stay untouched
    lines = batch + 5
    x = make_tokens(dim, sum(lengths), dtype, sdevice, x_layout, pitch_extra=24)
    weight = torch.randn(dim, width, device=sdevice, dtype=rng.choice(DTYPES))
    if (width + DTYPES.index(dtype)) % 2:
        weight = weight.t().contiguous().t()  # (width, dim) in memory: the kernels' per-element weight loads
    bias = torch.randn(dim, device=sdevice, dtype=weight.dtype) if rng.random() < 0.7 else None
    states = make_cache(lines, dim, width - 1 + extra, dtype, sdevice, cache_layout)
    qsl = query_start_loc(lengths, sdevice)
    ci = _lines_with_padding(rng, batch, lines, sdevice)
    his = torch.tensor([rng.random() < 0.6 for _ in range(batch)], device=sdevice)
    expected_out, expected_states = fn_ref(x, weight, bias, states, qsl, ci, his, silu=True)
    out = causal_conv1d_fn(x, weight, bias, states, qsl, ci, his, activation="silu")
    assert out.shape == x.shape and out.dtype == x.dtype
    assert (out.stride(0) == 1) == (x.stride(0) == 1), (out.stride(), x.stride())  # x's memory order
    assert_close(out, expected_out, dtype)
    _assert_states_equal(states, expected_states)


def test_fn_defaults_without_indices(sdevice):
    """No cache_indices: sequence i uses line i, which is never padding (line 0 included); no
    has_initial_state: every sequence starts from zeros; activation defaults to silu."""
    lengths = [3, 1, 9]
    x = make_tokens(16, sum(lengths), torch.float32, sdevice, "dim")
    w = torch.randn(16, 4, device=sdevice)
    states = torch.randn(3, 16, 3, device=sdevice)
    qsl = query_start_loc(lengths, sdevice)
    expected_out, expected_states = fn_ref(x, w, None, states, qsl, silu=True)
    out = causal_conv1d_fn(x, w, None, states, qsl)
    assert_close(out, expected_out, torch.float32)
    _assert_states_equal(states, expected_states)


def test_fn_padding_rules(sdevice):
    """pad_slot_id, null_block_id and negative indices skip a sequence: zero outputs, no state
    read or written; None turns a rule off."""
    lengths = [4, 4, 4, 4]
    x = make_tokens(8, 16, torch.float32, sdevice, "dim")
    w = torch.randn(8, 3, device=sdevice)
    qsl = query_start_loc(lengths, sdevice)
    his = torch.ones(4, dtype=torch.bool, device=sdevice)
    ci = torch.tensor([0, 5, -3, 2], dtype=torch.int32, device=sdevice)
    for pad, null in [(-1, 0), (5, 0), (5, None), (None, None)]:
        states = torch.randn(6, 8, 2, device=sdevice)
        expected_out, expected_states = fn_ref(x, w, None, states, qsl, ci, his, pad_slot_id=pad, null_block_id=null)
        out = causal_conv1d_fn(x, w, None, states, qsl, ci, his, pad_slot_id=pad, null_block_id=null)
        assert_close(out, expected_out, torch.float32, what=f"pad={pad} null={null}")
        _assert_states_equal(states, expected_states, what=f"pad={pad} null={null}")
        skipped = [i for i, line in enumerate([0, 5, -3, 2]) if line < 0 or line == pad or line == null]
        for i in skipped:
            assert torch.all(out[:, 4 * i : 4 * i + 4] == 0)


def test_fn_dtype_of_x_follows_cache(sdevice):
    """x in another dtype than the cache is converted to the cache's first (as vLLM does) and the
    output comes back in x's dtype."""
    x = make_tokens(24, 10, torch.float32, sdevice, "dim")
    w = torch.randn(24, 4, device=sdevice)
    states = torch.randn(2, 24, 3, device=sdevice, dtype=torch.bfloat16)
    qsl = query_start_loc([6, 4], sdevice)
    expected_out, expected_states = fn_ref(x.to(torch.bfloat16), w, None, states, qsl, null_block_id=None)
    out = causal_conv1d_fn(x, w, None, states, qsl, null_block_id=None)
    assert out.dtype == torch.float32
    assert_close(out, expected_out, torch.bfloat16)
    _assert_states_equal(states, expected_states)


def _whole_sequence_outputs(seqs, weight, bias):
    """float64 outputs of every full sequence (dim, len) at once, no cache involved."""
    return [causal_conv1d_ref(s.double()[None], weight.double(), None if bias is None else bias.double(),
                              activation="silu")[0] for s in seqs]


@pytest.mark.parametrize("cache_layout", CACHE_LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=[str(d)[6:] for d in DTYPES])
def test_prefill_then_decode_matches_whole_sequences(sdevice, dtype, cache_layout):
    """Prefill a mixed batch, then 6 decode steps (plain, then varlen with 1-3 tokens per row)
    on the same cache: every output equals the conv of the whole sequence computed at once."""
    rng = random.Random(7)
    width, dim, batch = 4, 96, 9
    prompt = [1, 2, 3, 5, 17, 64, 130, 1, 700]
    lines = torch.tensor(rng.sample(range(1, 20), batch), dtype=torch.int32, device=sdevice)
    states = make_cache(20, dim, width - 1 + 2, dtype, sdevice, cache_layout)
    weight = torch.randn(dim, width, device=sdevice, dtype=dtype)
    bias = torch.randn(dim, device=sdevice, dtype=dtype)
    seqs = [torch.randn(dim, n, dtype=dtype, device=sdevice) for n in prompt]
    outs = [[] for _ in range(batch)]
    x = torch.cat(seqs, dim=1).t().contiguous().t()  # vLLM's layout: dim contiguous
    out = causal_conv1d_fn(x, weight, bias, states, query_start_loc(prompt, sdevice), lines,
                           torch.zeros(batch, dtype=torch.bool, device=sdevice))
    qsl = query_start_loc(prompt, sdevice).tolist()
    for i in range(batch):
        outs[i].append(out[:, qsl[i] : qsl[i + 1]])
    for step in range(6):
        if step < 3:  # plain decode: x (batch, dim), one token per row
            new = torch.randn(batch, dim, dtype=dtype, device=sdevice)
            y = causal_conv1d_update(new.clone(), states, weight, bias, "silu", lines)
            for i in range(batch):
                seqs[i] = torch.cat([seqs[i], new[i][:, None]], dim=1)
                outs[i].append(y[i][:, None])
        else:  # varlen decode: x (tokens, dim), 1-3 tokens per row
            counts = [rng.randint(1, 3) for _ in range(batch)]
            new = torch.randn(sum(counts), dim, dtype=dtype, device=sdevice)
            q = query_start_loc(counts, sdevice)
            y = causal_conv1d_update(new.clone(), states, weight, bias, "silu", lines, query_start_loc=q,
                                     max_query_len=max(counts))
            q = q.tolist()
            for i in range(batch):
                seqs[i] = torch.cat([seqs[i], new[q[i] : q[i + 1]].t()], dim=1)
                outs[i].append(y[q[i] : q[i + 1]].t())
    for i, (got, ref) in enumerate(zip(outs, _whole_sequence_outputs(seqs, weight, bias))):
        assert_close(torch.cat(got, dim=1), ref, dtype, what=f"sequence {i}")


update_sweep = sweep(
    dict(
        dtype=axis(DTYPES),
        width=axis([2, 3, 4]),
        varlen=axis([False, True], ["plain", "varlen"]),
        cache_layout=axis(CACHE_LAYOUTS),
    ),
    default=lambda dtype, width, varlen, cache_layout: (dtype + width + varlen + cache_layout) % 2 == 0,
)


@update_sweep
def test_update_against_reference(sdevice, dtype, width, varlen, cache_layout):
    rng = random.Random(31 * width + DTYPES.index(dtype))
    batch, dim, lines = 12, 264, 16
    states = make_cache(lines, dim, width - 1 + rng.choice([0, 2]), dtype, sdevice, cache_layout)
    weight = torch.randn(dim, width, device=sdevice, dtype=rng.choice(DTYPES))
    bias = torch.randn(dim, device=sdevice, dtype=weight.dtype)
    if (width + DTYPES.index(dtype)) % 2:  # the kernels' per-element weight and bias loads
        weight = weight.t().contiguous().t()
        bias = torch.stack([bias, bias], 1)[:, 0]
    ci = _lines_with_padding(rng, batch, lines, sdevice)
    kwargs = {}
    if varlen:
        counts = [rng.choice([0, 1, 1, 2, 5]) for _ in range(batch)]
        x = torch.randn(sum(counts) + 3, dim, dtype=dtype, device=sdevice)  # 3 tokens of no row
        kwargs["query_start_loc"] = query_start_loc(counts, sdevice)
    else:
        x = torch.randn(batch, dim, 3, dtype=dtype, device=sdevice) if rng.random() < 0.5 else \
            torch.randn(batch, dim, dtype=dtype, device=sdevice)
    expected_out, expected_states = update_ref(x, states, weight, bias, True, ci, null_block_id=0, **kwargs)
    before = x.clone()
    y = causal_conv1d_update(x, states, weight, bias, "silu", ci, null_block_id=0, **kwargs)
    assert y is x  # written in place, as vLLM does
    if varlen:
        end = int(kwargs["query_start_loc"][-1])
        assert torch.equal(x[end:], before[end:])  # tokens of no row are left alone
        expected_out[end:] = before[end:].double()
    assert_close(y, expected_out, dtype)
    _assert_states_equal(states, expected_states)


@pytest.mark.parametrize("batch", [1, 64])
@pytest.mark.parametrize("cache_layout", CACHE_LAYOUTS)
def test_update_wide_dim(sdevice, batch, cache_layout):
    # dim 4096, bf16, state_len = width - 1 (the state runs on the state-contiguous cache): at batch
    # 1 a GPU's decode grid has fewer blocks than CUs and takes 4-byte vectors, at 64 the 8-byte
    # ones (launch_serving_update); both against the reference.
    rng = random.Random(batch)
    dim, lines, dtype = 4096, 2 * batch + 1, torch.bfloat16
    states = make_cache(lines, dim, 3, dtype, sdevice, cache_layout)
    weight = torch.randn(dim, 4, device=sdevice, dtype=dtype)
    bias = torch.randn(dim, device=sdevice, dtype=dtype)
    ci = _lines_with_padding(rng, batch, lines, sdevice)
    x = torch.randn(batch, dim, dtype=dtype, device=sdevice)
    expected_out, expected_states = update_ref(x, states, weight, bias, True, ci, null_block_id=0)
    y = causal_conv1d_update(x, states, weight, bias, "silu", ci, null_block_id=0)
    assert_close(y, expected_out, dtype)
    _assert_states_equal(states, expected_states)


@pytest.mark.parametrize("width", [2, 3, 4])
@pytest.mark.parametrize("varlen", [False, True], ids=["plain", "varlen"])
def test_speculative_decoding(sdevice, width, varlen):
    """Prefill, then rounds of verification: each row feeds its accepted token plus k drafts, the
    engine accepts 0..k of the drafts, and the next round's window starts after the accepted prefix
    (num_accepted_tokens). Every accepted token's output equals the sequential reference (the
    whole accepted sequence at once); the rejected drafts leave no trace."""
    rng = random.Random(5 + width)
    dim, batch, k = 40, 6, 3
    dtype, dev = torch.float32, sdevice
    state_len = width - 1 + k  # vLLM's spec-decode cache: width - 1 + num_speculative_tokens
    lines = torch.tensor(rng.sample(range(1, 10), batch), dtype=torch.int32, device=dev)
    states = torch.randn(10, state_len, dim, dtype=dtype, device=dev).transpose(1, 2)
    weight, bias = torch.randn(dim, width, device=dev), torch.randn(dim, device=dev)
    prompt = [rng.randint(1, 12) for _ in range(batch)]
    accepted_seqs = [torch.randn(dim, n, device=dev) for n in prompt]
    x = torch.cat(accepted_seqs, dim=1)
    causal_conv1d_fn(x, weight, bias, states, query_start_loc(prompt, dev), lines)
    accepted_outs = [[] for _ in range(batch)]
    num_accepted = torch.ones(batch, dtype=torch.int32, device=dev)
    for _ in range(5):
        counts = [k + 1] * batch if not varlen else [rng.randint(1, k + 1) for _ in range(batch)]
        feeds = [torch.randn(dim, c, device=dev) for c in counts]
        if varlen:
            xin = torch.cat(feeds, dim=1).t().contiguous()
            q = query_start_loc(counts, dev)
            y = causal_conv1d_update(xin, states, weight, bias, "silu", lines, num_accepted_tokens=num_accepted,
                                     query_start_loc=q, max_query_len=k + 1)
            q = q.tolist()
            ys = [y[q[i] : q[i + 1]].t() for i in range(batch)]
        else:
            xin = torch.stack(feeds)  # (batch, dim, k + 1)
            y = causal_conv1d_update(xin, states, weight, bias, "silu", lines, num_accepted_tokens=num_accepted)
            ys = [y[i] for i in range(batch)]
        for i in range(batch):
            n = rng.randint(1, counts[i])  # the fed token plus 0 .. counts - 1 drafts accepted
            accepted_seqs[i] = torch.cat([accepted_seqs[i], feeds[i][:, :n]], dim=1)
            accepted_outs[i].append(ys[i][:, :n])
            num_accepted[i] = n
    for i, ref in enumerate(_whole_sequence_outputs(accepted_seqs, weight, bias)):
        assert_close(torch.cat(accepted_outs[i], dim=1), ref[:, prompt[i] :], dtype, what=f"row {i}")
    # Against the per-call reference too, including the positions past the state it writes.
    counts = [2, 4, 1, 3, 4, 2]
    xin = torch.randn(sum(counts), dim, device=dev)
    kw = dict(num_accepted_tokens=num_accepted, query_start_loc=query_start_loc(counts, dev))
    expected_out, expected_states = update_ref(xin, states, weight, bias, True, lines, **kw)
    y = causal_conv1d_update(xin, states, weight, bias, "silu", lines, max_query_len=4, **kw)
    assert_close(y, expected_out, dtype)
    _assert_states_equal(states, expected_states)


def test_sglang_spellings(sdevice):
    """SGLang's keyword num_accept_tokens is num_accepted_tokens; cache_seqlens and the EAGLE tree /
    intermediate-window arguments raise NotImplementedError naming them."""
    states = torch.randn(4, 8, 5, device=sdevice)
    w = torch.randn(8, 4, device=sdevice)
    x = torch.randn(2, 8, 2, device=sdevice)
    acc = torch.tensor([1, 2], dtype=torch.int32, device=sdevice)
    expected_out, expected_states = update_ref(x, states, w, None, True, num_accepted_tokens=acc)
    y = causal_conv1d_update(x.clone(), states, w, None, True, num_accept_tokens=acc)
    assert_close(y, expected_out, torch.float32)
    _assert_states_equal(states, expected_states)
    with pytest.raises(ValueError, match="num_accepted_tokens or num_accept_tokens"):
        causal_conv1d_update(x, states, w, num_accepted_tokens=acc, num_accept_tokens=acc)
    with pytest.raises(NotImplementedError, match="cache_seqlens"):
        causal_conv1d_update(x, states, w, cache_seqlens=acc)
    for name in ("intermediate_conv_window", "retrieve_next_token", "retrieve_parent_token"):
        with pytest.raises(NotImplementedError, match=name):
            causal_conv1d_update(x, states, w, **{name: acc})


def _prefix_cached_prompt(sdevice, width, block, chunks, computed0=0, dtype=torch.float32):
    """One prompt split into chunks across calls with prefix caching, each call checked against
    fn_ref; returns (the prompt (dim, tokens), the cache, the block table (1, blocks), the weight,
    the outputs of the chunks)."""
    dim = 24
    total = computed0 + sum(chunks)
    blocks = (total + block - 1) // block + 1
    lines = 2 * blocks + 3
    table = torch.tensor(random.Random(3).sample(range(1, lines), blocks), dtype=torch.int32, device=sdevice)[None]
    states = torch.randn(lines, width - 1 + 1, dim, dtype=dtype, device=sdevice).transpose(1, 2)
    weight = torch.randn(dim, width, device=sdevice, dtype=dtype)
    prompt = torch.randn(dim, total, dtype=dtype, device=sdevice)
    if computed0:  # the state the first chunk continues from, in the block it ended in
        states[int(table[0, (computed0 - 1) // block]), :, : width - 1] = F_pad_window(prompt[:, :computed0], width)
    computed = computed0
    outs = []
    for n in chunks:
        x = prompt[:, computed : computed + n].t().contiguous().t()
        first, last = computed // block, (computed + n - 1) // block
        init_col = max(computed - 1, 0) // block
        ref_out, ref_states = fn_ref(
            x, weight, None, states, query_start_loc([n], sdevice), table, torch.tensor([computed > 0]),
            block_idx_first=[first], block_idx_last=[last], initial_state_idx=[init_col],
            num_computed_tokens=[computed], block_size=block)
        out = causal_conv1d_fn(
            x, weight, None, states, query_start_loc([n], sdevice), table,
            torch.tensor([computed > 0], device=sdevice),
            block_idx_first_scheduled_token=torch.tensor([first], dtype=torch.int32, device=sdevice),
            block_idx_last_scheduled_token=torch.tensor([last], dtype=torch.int32, device=sdevice),
            initial_state_idx=torch.tensor([init_col], dtype=torch.int32, device=sdevice),
            num_computed_tokens=torch.tensor([computed], dtype=torch.int32, device=sdevice),
            block_size_to_align=block)
        assert_close(out, ref_out, dtype)
        _assert_states_equal(states, ref_states)
        outs.append(out)
        computed += n
    return prompt, states, table, weight, torch.cat(outs, dim=1)


def F_pad_window(seq, width):
    """The last width - 1 columns of seq, zeros in front when it is shorter."""
    h = width - 1
    pad = torch.zeros(seq.shape[0], max(0, h - seq.shape[1]), dtype=seq.dtype, device=seq.device)
    return torch.cat([pad, seq], dim=1)[:, -h:]


@pytest.mark.parametrize("width", [2, 4])
@pytest.mark.parametrize(
    "block,chunks,computed0",
    [(16, [16, 32, 5], 0), (16, [40, 17, 1], 0), (8, [3, 29, 2, 1], 16), (8, [1, 1, 12], 0)],
    ids=["aligned", "unaligned", "continued", "tiny-chunks"])
def test_prefix_caching_block_states(sdevice, width, block, chunks, computed0):
    """A prompt split into chunks across calls: every block's line holds the window of the whole
    prompt before that block's end (the last block: before the prompt's end), exactly; the outputs
    equal the whole prompt's."""
    prompt, states, table, weight, out = _prefix_cached_prompt(sdevice, width, block, chunks, computed0)
    total = prompt.shape[1]
    for b in range(computed0 // block, (total - 1) // block + 1):
        end = min((b + 1) * block, total)
        if end <= computed0:
            continue
        line = int(table[0, b])
        expected = F_pad_window(prompt[:, :end], width)
        assert torch.equal(states[line, :, : width - 1].cpu(), expected.cpu()), f"block {b} (tokens < {end})"
    ref = causal_conv1d_ref(prompt.double()[None], weight.double(), activation="silu")[0][:, computed0:]
    assert_close(out, ref, torch.float32)


def test_prefix_caching_decode(sdevice):
    """Decode after a prefix-cached prefill: the window is read from column initial_state_idx and
    the new state written to column block_idx_last_scheduled_token of a (batch, blocks) table."""
    width, block, dim = 4, 8, 24
    prompt, states, table, weight, _ = _prefix_cached_prompt(sdevice, width, block, [13])
    seq = prompt
    col = (seq.shape[1] - 1) // block
    outs = []
    for _ in range(6):
        new = torch.randn(1, dim, device=sdevice)
        pos = seq.shape[1]  # the new token's position
        last = pos // block
        kw = dict(block_idx_last_scheduled_token=torch.tensor([last], dtype=torch.int32, device=sdevice),
                  initial_state_idx=torch.tensor([col], dtype=torch.int32, device=sdevice))
        expected_out, expected_states = update_ref(new, states, weight, None, True, table,
                                                   block_idx_last=kw["block_idx_last_scheduled_token"],
                                                   initial_state_idx=kw["initial_state_idx"])
        y = causal_conv1d_update(new.clone(), states, weight, None, "silu", table, **kw)
        assert_close(y, expected_out, torch.float32)
        _assert_states_equal(states, expected_states)
        outs.append(y.t())
        seq = torch.cat([seq, new.t()], dim=1)
        col = last
    ref = _whole_sequence_outputs([seq], weight, None)[0][:, -6:]
    assert_close(torch.cat(outs, dim=1), ref, torch.float32)


def test_large_token_pitch():
    """x as a transposed slice of a projection whose token pitch times the token count passes 2^31
    elements: offsets stay 64-bit. The storage is reserved but only the used rows are touched."""
    pitch, tokens, dim = 2**29 + 64, 5, 16
    try:
        wide = torch.empty(tokens, pitch, dtype=torch.bfloat16)
    except RuntimeError:
        pytest.skip("cannot reserve 5 GB of address space")
    x = wide[:, 32 : 32 + dim].t()
    x.copy_(torch.randn(dim, tokens, dtype=torch.bfloat16))
    assert x.stride(1) * (tokens - 1) > 2**31
    w = torch.randn(dim, 3, dtype=torch.bfloat16)
    states = torch.randn(3, dim, 2, dtype=torch.bfloat16)
    qsl = query_start_loc([2, 3], "cpu")
    expected_out, expected_states = fn_ref(x, w, None, states, qsl, null_block_id=None)
    out = causal_conv1d_fn(x, w, None, states, qsl, null_block_id=None)
    assert_close(out, expected_out, torch.bfloat16)
    _assert_states_equal(states, expected_states)
    xv = wide[:, 64 : 64 + dim]  # varlen decode input (tokens, dim) with the same pitch
    xv.copy_(torch.randn(tokens, dim, dtype=torch.bfloat16))
    expected_out, expected_states = update_ref(xv, states, w, None, True, query_start_loc=qsl)
    y = causal_conv1d_update(xv, states, w, None, "silu", query_start_loc=qsl)
    assert_close(y, expected_out, torch.bfloat16)
    _assert_states_equal(states, expected_states)


# --- errors --------------------------------------------------------------------------------------


def _fn_args(device="cpu", lengths=(3, 2), lines=4):
    x = torch.randn(8, sum(lengths), device=device)
    w = torch.randn(8, 4, device=device)
    states = torch.randn(lines, 8, 3, device=device)
    qsl = query_start_loc(lengths, device)
    ci = torch.arange(1, len(lengths) + 1, dtype=torch.int32, device=device)
    return x, w, states, qsl, ci


@pytest.mark.parametrize(
    "change,message",
    [
        (lambda a: a.update(qsl=torch.tensor([0, 4, 3], dtype=torch.int32)), r"non-decreasing.*\[1\] = 4"),
        (lambda a: a.update(qsl=torch.tensor([0, 3, 4], dtype=torch.int32)), r"query_start_loc\[-1\] must be x.size\(1\) = 5"),
        (lambda a: a.update(qsl=torch.tensor([1, 3, 5], dtype=torch.int32)), r"query_start_loc\[0\] must be 0"),
        (lambda a: a.update(qsl=torch.tensor([0, 3, 5])), "query_start_loc must be int32, got Long"),
        (lambda a: a.update(ci=torch.tensor([1, 4], dtype=torch.int32)), r"cache_indices\[1\] = 4 is not a cache line"),
        (lambda a: a.update(ci=torch.tensor([1, 2, 3], dtype=torch.int32)), r"cache_indices must be \(batch,\)"),
        (lambda a: a.update(his=torch.tensor([1, 0], dtype=torch.int32)), "has_initial_state must be bool"),
        (lambda a: a.update(states=torch.randn(4, 8, 2)), r"state_len \(size\(2\)\) must be >= width - 1 = 3"),
        (lambda a: a.update(states=torch.randn(4, 8, 3, dtype=torch.float16)), "conv_states must have x's dtype"),
        (lambda a: a.update(x=torch.randn(2, 8, 5)), r"x must be \(dim, total_tokens\)"),
        (lambda a: a.update(w=torch.randn(7, 4)), "weight must have shape"),
    ],
    ids=["decreasing", "short", "start", "int64", "line", "ci-shape", "his-dtype", "state-len", "state-dtype",
         "x-rank", "weight"],
)
def test_fn_bad_metadata(change, message):
    x, w, states, qsl, ci = _fn_args()
    a = dict(x=x, w=w, states=states, qsl=qsl, ci=ci, his=None)
    change(a)
    if a["states"].dtype != x.dtype:  # the public function converts x; the op itself must refuse
        with pytest.raises(RuntimeError, match=message):
            ops.serving_fwd(a["x"], a["w"], None, a["states"], a["qsl"], a["ci"], None, None, None, None, None, 0,
                            -1, 0, True, False, torch.empty_like(a["x"]))
        return
    with pytest.raises(RuntimeError, match=message):
        causal_conv1d_fn(a["x"], a["w"], None, a["states"], a["qsl"], a["ci"], a["his"])


def test_fn_bad_prefix_caching_metadata():
    x, w, states, qsl, _ = _fn_args(lengths=(10,), lines=6)
    table = torch.tensor([[1, 2, 3]], dtype=torch.int32)

    def call(first, last, init, computed, block=8, table=table):
        t = lambda v: torch.tensor([v], dtype=torch.int32)  # noqa: E731
        return causal_conv1d_fn(x, w, None, states, qsl, table, None, block_idx_first_scheduled_token=t(first),
                                block_idx_last_scheduled_token=t(last), initial_state_idx=t(init),
                                num_computed_tokens=t(computed), block_size_to_align=block)

    call(0, 1, 0, 0)  # 10 tokens from 0 in blocks of 8: blocks 0 and 1
    with pytest.raises(RuntimeError, match="crosses 1 block boundaries, but block_idx_last"):
        call(0, 2, 0, 0)
    with pytest.raises(RuntimeError, match=r"initial_state_idx\[0\] = 3 is not a column of cache_indices \(3 columns\)"):
        call(0, 1, 3, 0)
    with pytest.raises(RuntimeError, match="block_size_to_align > 0"):
        call(0, 1, 0, 0, block=0)
    with pytest.raises(RuntimeError, match=r"num_computed_tokens\[0\] must be >= 0"):
        call(0, 1, 0, -1)
    with pytest.raises(RuntimeError, match=r"cache_indices\[0, 1\] = 9 is not a cache line"):
        call(0, 1, 0, 0, table=torch.tensor([[1, 9, 3]], dtype=torch.int32))
    with pytest.raises(RuntimeError, match="also needs cache_indices, block_idx_first_scheduled_token"):
        causal_conv1d_fn(x, w, None, states, qsl, table, block_idx_last_scheduled_token=torch.tensor([1]).int())


def test_update_bad_metadata():
    states = torch.randn(4, 8, 4)
    w = torch.randn(8, 3)
    x = torch.randn(3, 8)
    ci = torch.tensor([1, 2, 3], dtype=torch.int32)
    with pytest.raises(RuntimeError, match=r"conv_state_indices\[1\] = 7 is not a cache line"):
        causal_conv1d_update(x, states, w, conv_state_indices=torch.tensor([1, 7, 3], dtype=torch.int32))
    with pytest.raises(RuntimeError, match=r"num_accepted_tokens\[2\] = 0 must be in \[1, state_len - width \+ 2\] = \[1, 3\]"):
        causal_conv1d_update(x, states, w, conv_state_indices=ci, num_accepted_tokens=torch.tensor([1, 1, 0]).int())
    with pytest.raises(RuntimeError, match=r"keeps width - 2 \+ the row's 4 tokens = 5 state positions"):
        causal_conv1d_update(torch.randn(3, 8, 4), states, w, conv_state_indices=ci,
                             num_accepted_tokens=torch.tensor([1, 1, 1]).int())
    with pytest.raises(RuntimeError, match=r"query_start_loc must be \(batch \+ 1,\) = \(4,\)"):
        causal_conv1d_update(x, states, w, conv_state_indices=ci, query_start_loc=torch.tensor([0, 1, 3]).int())
    with pytest.raises(RuntimeError, match=r"query_start_loc\[-1\] = 4 exceeds x.size\(0\) = 3"):
        causal_conv1d_update(x, states, w, conv_state_indices=ci, query_start_loc=torch.tensor([0, 1, 2, 4]).int())
    with pytest.raises(RuntimeError, match="non-decreasing"):
        causal_conv1d_update(x, states, w, conv_state_indices=ci, query_start_loc=torch.tensor([0, 2, 1, 3]).int())
    with pytest.raises(RuntimeError, match="conv_state needs at least batch = 3 lines"):
        causal_conv1d_update(x, torch.randn(2, 8, 4), w)
    with pytest.raises(RuntimeError, match="also needs conv_state_indices and initial_state_idx"):
        causal_conv1d_update(x, states, w, conv_state_indices=ci, block_idx_last_scheduled_token=ci)
    with pytest.raises(RuntimeError, match="conv_state must have x's dtype"):
        ops.serving_update(x, states.half(), w, None, ci, None, None, None, None, -1, None, True, False)


def test_unsupported_modes_raise_before_any_work():
    """Widths, dtypes and activations this library lacks raise NotImplementedError (UnsupportedMode)
    and leave the cache alone: the engine plug-ins hand such calls back to the engine."""
    x, _, states, qsl, ci = _fn_args()
    before = states.clone()
    with pytest.raises(serving.UnsupportedMode, match="kernel widths 2, 3 and 4"):
        causal_conv1d_fn(x, torch.randn(8, 5), None, states, qsl, ci)
    with pytest.raises(NotImplementedError, match="activation must be None, 'silu', 'swish' or a bool, got 'gelu'"):
        causal_conv1d_fn(x, torch.randn(8, 4), None, states, qsl, ci, activation="gelu")
    with pytest.raises(NotImplementedError, match="x must be float32, float16 or bfloat16"):
        causal_conv1d_update(torch.ones(2, 8, dtype=torch.float64), states, torch.randn(8, 4))
    assert torch.equal(states, before)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU visible")
@pytest.mark.skipif(serving.gpu_kernels_available(), reason="this build has the serving GPU kernels")
def test_gpu_tensors_raise_without_gpu_kernels():
    """A build without the serving GPU kernels (CAUSAL_CONV1D_BACKEND=cpu next to a GPU PyTorch)
    raises NotImplementedError for GPU tensors: no silent copy to the host."""
    x, w, states, qsl, ci = (t.cuda() for t in _fn_args())
    with pytest.raises(NotImplementedError, match="has no GPU kernels for the serving API"):
        causal_conv1d_fn(x, w, None, states, qsl, ci)
    with pytest.raises(NotImplementedError, match="has no GPU kernels for the serving API"):
        causal_conv1d_update(torch.randn(2, 8, device="cuda"), states, w, conv_state_indices=ci)


# --- registered ops: opcheck, torch.compile ----------------------------------------------------


def test_opcheck_serving_ops(sdevice):
    x, w, states, qsl, ci = (t.to(sdevice) for t in _fn_args())
    his = torch.tensor([True, False], device=sdevice)
    out = torch.empty_like(x)
    torch.library.opcheck(ops.serving_fwd.default,
                          (x, w, None, states, qsl, ci, his, None, None, None, None, 0, -1, 0, True, False, out))
    table = torch.tensor([[1, 2], [3, 0]], dtype=torch.int32, device=sdevice)
    t = lambda *v: torch.tensor(v, dtype=torch.int32, device=sdevice)  # noqa: E731
    x2 = torch.randn(8, 12, device=sdevice)
    torch.library.opcheck(ops.serving_fwd.default,
                          (x2, w, torch.randn(8, device=sdevice), states, t(0, 10, 12), table, his, t(0, 0), t(1, 0),
                           t(0, 0), t(0, 0), 8, -1, None, False, False, torch.empty_like(x2)))
    xu = torch.randn(3, 8, device=sdevice)
    torch.library.opcheck(ops.serving_update.default,
                          (xu, states, w, None, t(1, 2, 3), t(1, 1, 1), t(0, 1, 2, 3), None, None, -1, 0, True, False))


def test_compile_fullgraph(sdevice):
    """Both functions trace into one graph with torch.compile(fullgraph=True): the ops' fake kernels
    carry the in-place writes; results equal eager ones."""
    x, w, states, qsl, ci = (t.to(sdevice) for t in _fn_args())
    his = torch.tensor([True, False], device=sdevice)

    def step(x, states, qsl, ci, his, new):
        out = causal_conv1d_fn(x, w, None, states, qsl, ci, his, activation="silu", metadata=None,
                               seq_lens_cpu=[3, 2])
        y = causal_conv1d_update(new, states, w, None, "silu", ci)
        return out * 2, y + 1

    new = torch.randn(2, 8, device=sdevice)
    eager_states = states.clone()
    eager = step(x, eager_states, qsl, ci, his, new.clone())
    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    got = compiled(x, states, qsl, ci, his, new.clone())
    for a, b in zip(got, eager):
        assert_close(a, b.double(), torch.float32)
    assert torch.equal(states, eager_states)


def test_no_host_work_on_metadata(monkeypatch):
    """The functions never read metadata values on the host: no .item(), .tolist() or .cpu() of a
    tensor (the GPU path relies on this; checked here on the functions' Python side)."""
    calls = []
    for name in ("item", "tolist", "cpu", "numpy"):
        original = getattr(torch.Tensor, name)

        def spy(self, *args, _name=name, _original=original, **kwargs):
            calls.append(_name)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, spy)
    x, w, states, qsl, ci = _fn_args()
    causal_conv1d_fn(x, w, None, states, qsl, ci, torch.tensor([True, True]))
    causal_conv1d_update(torch.randn(2, 8), states, w, None, "silu", ci, num_accepted_tokens=torch.ones(2).int(),
                         query_start_loc=torch.tensor([0, 1, 2]).int())
    assert calls == []



# --- GPU only: CUDA graphs, unvalidated bad metadata, validate_data, 64-bit offsets ------------


def _graph_case(rng, total, batch, dim, lines, device):
    cuts = sorted(rng.sample(range(1, total), batch - 1))
    lengths = [b - a for a, b in zip([0] + cuts, cuts + [total])]
    return (query_start_loc(lengths, device),
            torch.tensor(rng.sample(range(1, lines), batch), dtype=torch.int32, device=device),
            torch.tensor([rng.random() < 0.5 for _ in range(batch)], device=device))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def test_cuda_graph_replay_with_new_metadata(dtype):
    """Both functions captured in one CUDA (HIP) graph, replayed with new metadata values of the same
    shapes (other sequence lengths, lines, initial-state flags, accepted counts): the results follow
    the new values. Capture fails on any host synchronisation, so this also proves there is none."""
    if not (torch.cuda.is_available() and serving.gpu_kernels_available()):
        pytest.skip("needs a GPU and the serving GPU kernels")
    rng = random.Random(11)
    dev, dim, width, total, batch, lines = "cuda", 96, 4, 300, 5, 12
    w = torch.randn(dim, width, device=dev, dtype=dtype)
    b = torch.randn(dim, device=dev, dtype=dtype)
    x = torch.empty(total, dim, device=dev, dtype=dtype)
    cache = torch.empty(lines, width - 1 + 2, dim, device=dev, dtype=dtype).transpose(1, 2)
    qsl, ci, his = _graph_case(rng, total, batch, dim, lines, dev)
    xd = torch.empty(batch * 2, dim, device=dev, dtype=dtype)  # varlen decode, 2 tokens a row, speculative
    dq = torch.arange(0, 2 * batch + 1, 2, dtype=torch.int32, device=dev)
    acc = torch.ones(batch, dtype=torch.int32, device=dev)

    def step():
        out = causal_conv1d_fn(x.t(), w, b, cache, qsl, ci, his)
        y = causal_conv1d_update(xd, cache, w, b, "silu", ci, num_accepted_tokens=acc, query_start_loc=dq,
                                 max_query_len=2)
        return out, y

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()  # warm-up outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out, y = step()
    for trial in range(3):
        new_qsl, new_ci, new_his = _graph_case(rng, total, batch, dim, lines, dev)
        qsl.copy_(new_qsl), ci.copy_(new_ci), his.copy_(new_his)
        acc.copy_(torch.tensor([rng.randint(1, 2) for _ in range(batch)], dtype=torch.int32))
        x.copy_(torch.randn(total, dim, dtype=dtype))
        xd_in = torch.randn(batch * 2, dim, dtype=dtype, device=dev)
        xd.copy_(xd_in)
        cache.copy_(torch.randn(lines, width + 1, dim, dtype=dtype).transpose(1, 2))
        ref_out, ref_cache = fn_ref(x.t(), w, b, cache, qsl, ci, his)
        ref_y, ref_cache = update_ref(xd_in, ref_cache, w, b, True, ci, num_accepted_tokens=acc, query_start_loc=dq)
        graph.replay()
        torch.cuda.synchronize()
        assert_close(out, ref_out, dtype, what=f"replay {trial}: out")
        assert_close(y, ref_y, dtype, what=f"replay {trial}: decode")
        _assert_states_equal(cache, ref_cache, what=f"replay {trial}: cache")


def test_gpu_bad_metadata_never_leaves_the_tensors():
    """Without validate_data the GPU cannot raise on bad metadata; out-of-range lines are treated as
    padding, offsets are clamped, and nothing outside the tensors is written (guard lines around
    the cache stay untouched). With validate_data=True the same calls raise like the CPU's."""
    if not (torch.cuda.is_available() and serving.gpu_kernels_available()):
        pytest.skip("needs a GPU and the serving GPU kernels")
    dev = "cuda"
    backing = torch.randn(8, 16, 3, device=dev)
    guard_before = backing.clone()
    states = backing[2:6]  # lines 0..3 of the cache; lines 0-1 and 6-7 of backing are guards
    x = torch.randn(16, 10, device=dev)
    w = torch.randn(16, 4, device=dev)
    qsl = torch.tensor([0, 4, 3, 99], dtype=torch.int32, device=dev)  # decreasing, past the end
    ci = torch.tensor([1, 7, -5], dtype=torch.int32, device=dev)  # 7: not a line
    causal_conv1d_fn(x, w, None, states, qsl, ci, None, null_block_id=None)
    torch.cuda.synchronize()
    assert torch.equal(backing[:2], guard_before[:2]) and torch.equal(backing[6:], guard_before[6:])
    with pytest.raises(RuntimeError, match="non-decreasing"):
        causal_conv1d_fn(x, w, None, states, qsl, ci, None, null_block_id=None, validate_data=True)
    with pytest.raises(RuntimeError, match=r"cache_indices\[1\] = 7 is not a cache line"):
        causal_conv1d_fn(x, w, None, states, query_start_loc([4, 3, 3], dev), ci, None, null_block_id=None,
                         validate_data=True)
    xd = torch.randn(3, 16, device=dev)
    y = causal_conv1d_update(xd, states, w, None, "silu", ci)  # row 1 (line 7) and row 2 are padding
    torch.cuda.synchronize()
    assert torch.all(y[1:] == 0)
    assert torch.equal(backing[:2], guard_before[:2]) and torch.equal(backing[6:], guard_before[6:])
    with pytest.raises(RuntimeError, match=r"conv_state_indices\[1\] = 7 is not a cache line"):
        causal_conv1d_update(torch.randn(3, 16, device=dev), states, w, None, "silu", ci, validate_data=True)


def test_gpu_large_token_pitch():
    """On the GPU: x a transposed slice of a (tokens, pitch) projection whose token pitch times the
    token count passes 2^31 elements (4.3 GB of bf16)."""
    if not (torch.cuda.is_available() and serving.gpu_kernels_available()):
        pytest.skip("needs a GPU and the serving GPU kernels")
    pitch, tokens, dim = 2**29 + 64, 5, 16
    if torch.cuda.mem_get_info()[0] < 3 * tokens * pitch * 2:
        pytest.skip("needs ~13 GB of free GPU memory")
    wide = torch.empty(tokens, pitch, dtype=torch.bfloat16, device="cuda")
    x = wide[:, 32 : 32 + dim].t()
    x.copy_(torch.randn(dim, tokens, dtype=torch.bfloat16))
    w = torch.randn(dim, 3, dtype=torch.bfloat16, device="cuda")
    states = torch.randn(3, dim, 2, dtype=torch.bfloat16, device="cuda")
    qsl = query_start_loc([2, 3], "cuda")
    expected_out, expected_states = fn_ref(x, w, None, states, qsl, null_block_id=None)
    out = causal_conv1d_fn(x, w, None, states, qsl, null_block_id=None)
    assert_close(out, expected_out, torch.bfloat16)
    _assert_states_equal(states, expected_states)
    xv = wide[:, 64 : 64 + dim]
    xv.copy_(torch.randn(tokens, dim, dtype=torch.bfloat16))
    expected_out, expected_states = update_ref(xv, states, w, None, True, query_start_loc=qsl)
    y = causal_conv1d_update(xv, states, w, None, "silu", query_start_loc=qsl)
    assert_close(y, expected_out, torch.bfloat16)
    _assert_states_equal(states, expected_states)
