"""A Qwen3.5 round trip through the serving API: a tiny random-weight Qwen3.5 (transformers'
qwen3_5_text) prefills a mixed batch of prompts and decodes 16 tokens, once with transformers' own
PyTorch conv path and once with every gated-DeltaNet layer's conv running the way an inference
engine runs it: the batch's prompts packed back to back into one causal_conv1d_fn call on a
paged conv cache (vLLM's layout, shuffled lines, a longer state than width - 1), then one varlen
causal_conv1d_update per step (plus a padding row). The logits must agree at every step."""

import random

import pytest
import torch

transformers = pytest.importorskip("transformers", reason="transformers is not installed")

from _reference import TOL  # noqa: E402
from _serving_reference import query_start_loc  # noqa: E402
from causal_conv1d import serving  # noqa: E402
from transformers import AutoConfig, AutoModelForCausalLM  # noqa: E402

if "qwen3_5_text" not in transformers.models.auto.configuration_auto.CONFIG_MAPPING_NAMES:
    pytest.skip(f"transformers {transformers.__version__} has no Qwen3.5", allow_module_level=True)

PROMPTS = [1, 4, 9, 23]  # a prompt shorter than the conv's width - 1 among them
STEPS = 16


def _tiny_qwen35():
    torch.manual_seed(0)
    config = AutoConfig.for_model(
        "qwen3_5_text", vocab_size=97, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
        num_attention_heads=2, num_key_value_heads=1, head_dim=32, linear_conv_kernel_dim=4,
        linear_key_head_dim=16, linear_value_head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4,
        layer_types=["linear_attention", "linear_attention", "full_attention", "linear_attention"],
        max_position_embeddings=128, pad_token_id=0)
    return AutoModelForCausalLM.from_config(config).eval()


class ServingConv:
    """One gated-DeltaNet layer's conv, run as an engine runs it. It takes the calls transformers'
    layer makes (causal_conv1d_fn on a left-padded (batch, dim, len) prefill, causal_conv1d_update
    on (batch, dim, 1) decode steps) and keeps its own paged cache: transformers' conv_state is
    ignored."""

    def __init__(self, dim, width, lengths, lines):
        self.lengths = lengths
        self.lines = lines
        # (cache lines, dim, state_len) with dim contiguous and state_len > width - 1, garbage in it
        self.cache = torch.randn(2 * len(lengths) + 3, width + 1, dim).transpose(1, 2)
        self.calls = {"fn": 0, "update": 0}

    def fn(self, x, weight, bias=None, activation=None, seq_idx=None):
        assert seq_idx is None
        batch, dim, length = x.shape
        packed = torch.cat([x[b, :, length - n :] for b, n in enumerate(self.lengths)], dim=1)
        packed = packed.t().contiguous().t()  # vLLM's layout: (dim, tokens) with dim contiguous
        qsl = query_start_loc(self.lengths, "cpu")
        out = serving.causal_conv1d_fn(packed, weight, bias, self.cache, qsl, self.lines,
                                       torch.zeros(batch, dtype=torch.bool), activation=activation)
        result = torch.zeros_like(x)  # left padding: its outputs are zeros in transformers too
        for b, n in enumerate(self.lengths):
            result[b, :, length - n :] = out[:, int(qsl[b]) : int(qsl[b + 1])]
        self.calls["fn"] += 1
        return result

    def update(self, x, conv_state, weight, bias=None, activation=None):
        batch, dim, _ = x.shape
        tokens = torch.cat([x[:, :, 0], torch.randn(1, dim)])  # (batch + 1 tokens, dim), the last a padding row
        idx = torch.cat([self.lines, torch.tensor([-1], dtype=torch.int32)])
        qsl = torch.arange(batch + 2, dtype=torch.int32)
        y = serving.causal_conv1d_update(tokens, self.cache, weight, bias, activation, conv_state_indices=idx,
                                         query_start_loc=qsl, max_query_len=1)
        assert torch.all(y[batch] == 0)
        self.calls["update"] += 1
        return y[:batch, :, None]


def _run(model, ids, mask, forced=None):
    """Prefill, then STEPS greedy decode steps (or the given tokens); returns (logits per step,
    tokens fed)."""
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, use_cache=True)
        logits = [out.logits[:, -1]]
        fed = []
        past = out.past_key_values
        for step in range(STEPS):
            tok = logits[-1].argmax(-1) if forced is None else forced[step]
            fed.append(tok)
            mask = torch.cat([mask, torch.ones(mask.shape[0], 1, dtype=mask.dtype)], dim=1)
            out = model(input_ids=tok[:, None], attention_mask=mask, past_key_values=past, use_cache=True)
            past = out.past_key_values
            logits.append(out.logits[:, -1])
    return logits, fed


def test_qwen35_prefill_and_varlen_decode_match_transformers():
    model = _tiny_qwen35()
    gdn = [layer.linear_attn for layer in model.model.layers if hasattr(layer, "linear_attn")]
    assert len(gdn) == 3
    longest = max(PROMPTS)
    ids = torch.zeros(len(PROMPTS), longest, dtype=torch.long)
    mask = torch.zeros(len(PROMPTS), longest, dtype=torch.long)
    for b, n in enumerate(PROMPTS):  # left padding, as generation batches prompts
        ids[b, longest - n :] = torch.randint(1, 97, (n,))
        mask[b, longest - n :] = 1

    # transformers' own PyTorch path (no causal_conv1d on this device before transformers 5.16)
    torch_update = getattr(transformers.models.qwen3_5.modeling_qwen3_5, "torch_causal_conv1d_update", None)
    if torch_update is None:  # other versions keep no separate PyTorch update to compare with
        pytest.skip(f"transformers {transformers.__version__}: Qwen3.5 has no torch_causal_conv1d_update")
    for layer in gdn:
        layer.causal_conv1d_fn = None
        layer.causal_conv1d_update = torch_update
    expected, tokens = _run(model, ids, mask)

    lines = torch.tensor(random.Random(0).sample(range(1, 2 * len(PROMPTS) + 3), len(PROMPTS)), dtype=torch.int32)
    convs = []
    for layer in gdn:
        conv = ServingConv(layer.conv_dim, layer.conv_kernel_size, PROMPTS, lines)
        layer.causal_conv1d_fn, layer.causal_conv1d_update = conv.fn, conv.update
        convs.append(conv)
    got, _ = _run(model, ids, mask, forced=tokens)

    assert all(c.calls == {"fn": 1, "update": STEPS} for c in convs), [c.calls for c in convs]
    for step, (a, e) in enumerate(zip(got, expected)):
        scale = e.abs().max().item()
        torch.testing.assert_close(a, e, rtol=TOL[torch.float32]["rtol"], atol=TOL[torch.float32]["atol"] * scale,
                                   msg=lambda m, step=step: f"step {step}: {m}")
        assert torch.equal(a.argmax(-1), e.argmax(-1)), f"step {step}: greedy tokens differ"
