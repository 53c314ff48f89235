"""Real clients: tiny random-weight transformers models, run with our causal_conv1d and with
transformers' own PyTorch fallback for the same weights.

Which models: every causal-LM model type of the installed transformers whose modeling file calls
causal_conv1d (found by reading the installed package) and whose kernel path needs nothing else
we lack; a model whose kernel path also needs another kernel package (mamba-ssm, ...) that is not
installed is listed as excluded, with the reason. For each covered model: logits with ours vs the
fallback, greedy generation of 12 tokens through the cache (prefill with causal_conv1d_fn, then
causal_conv1d_update per token), and the conv weights' gradients of one training step. Counting
wrappers around our functions prove the fast path ran.

transformers imports causal_conv1d only when a CUDA/ROCm device is available; on the CPU the test
puts our functions where that import would (the modeling module's globals) and, for models whose
layer picks its kernel path by device (LFM2), routes the layer through that kernel path: the code
a GPU user runs, on our CPU backend.
"""

import functools
import importlib
import importlib.util
import inspect
import re
import types

import pytest
import torch

transformers = pytest.importorskip("transformers", reason="transformers is not installed")

import causal_conv1d  # noqa: E402
from causal_conv1d import causal_conv1d_fn, causal_conv1d_update  # noqa: E402

from transformers import AutoConfig, AutoModelForCausalLM  # noqa: E402
from transformers.models.auto.configuration_auto import model_type_to_module_name  # noqa: E402
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES  # noqa: E402

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _discover():
    """(covered model types, {excluded model type: reason}) from the installed transformers."""
    covered, excluded, seen_classes = [], {}, {}
    for model_type, class_name in sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items()):
        module = model_type_to_module_name(model_type)
        spec = importlib.util.find_spec(f"transformers.models.{module}.modeling_{module}")
        if spec is None or spec.origin is None:
            continue
        source = open(spec.origin).read()
        if "causal_conv1d" not in source:
            continue
        # Other kernels its fast path loads next to causal-conv1d (mamba-ssm, ...) through
        # lazy_load_kernel, which has no PyTorch fallback. (From transformers 5.16 on, each kernel
        # function is wrapped on its own with its PyTorch code as the fallback: nothing is lacking.)
        others = set(re.findall(r'lazy_load_kernel\("([^"]+)"\)', source)) - {"causal-conv1d"}
        missing = sorted(k for k in others if importlib.util.find_spec(k.replace("-", "_")) is None)
        if missing:
            excluded[model_type] = f"its kernel path also needs {', '.join(missing)} (not installed)"
            continue
        # One model type per class: the text-only config where a multimodal one shares the class.
        if class_name in seen_classes:
            first = seen_classes[class_name]
            keep = model_type if model_type.endswith("_text") else first
            drop = first if keep == model_type else model_type
            excluded[drop] = f"same class ({class_name}) as {keep}"
            if keep == model_type:
                covered[covered.index(first)] = model_type
            seen_classes[class_name] = keep
            continue
        seen_classes[class_name] = model_type
        covered.append(model_type)
    return covered, excluded


COVERED, EXCLUDED = _discover()

# Sizes of the tiny models, applied where a config has the field.
_TINY = dict(
    vocab_size=96, hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4,
    num_key_value_heads=2, head_dim=16, max_position_embeddings=256, linear_key_head_dim=16,
    linear_value_head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4, linear_conv_kernel_dim=4,
    moe_intermediate_size=32, shared_expert_intermediate_size=32, num_experts=4, num_experts_per_tok=2,
    num_dense_layers=1, block_multiple_of=16, conv_L_cache=3, pad_token_id=0, bos_token_id=1, eos_token_id=2,
)


def _settable(config, name):
    attr = getattr(type(config), name, None)
    return hasattr(config, name) and not (isinstance(attr, property) and attr.fset is None)


def tiny_config(model_type):
    base = AutoConfig.for_model(model_type)
    kwargs = {k: v for k, v in _TINY.items() if _settable(base, k)}
    # Conv layers on both sides of an attention layer, named as the model's default layout names
    # them (configs that derive layer_types from other fields keep their own layout).
    if _settable(base, "layer_types"):
        kinds = list(dict.fromkeys(base.layer_types or []))
        attn = [k for k in kinds if "attention" in k and "linear" not in k] or ["full_attention"]
        conv = [k for k in kinds if k not in attn]
        if not conv:  # no default layout to read the name from
            conv = ["linear_attention" if hasattr(base, "linear_num_key_heads") else "conv"]
        kwargs["layer_types"] = [conv[0], conv[0], attn[0], conv[0]]
    if hasattr(base, "full_attn_idxs"):
        kwargs["full_attn_idxs"] = [2]
    return AutoConfig.for_model(model_type, **kwargs)


def modeling_module(model_type):
    module = model_type_to_module_name(model_type)
    return importlib.import_module(f"transformers.models.{module}.modeling_{module}")


class Counting:
    """Our two functions behind counting wrappers that keep their signatures (transformers
    inspects them)."""

    def __init__(self):
        self.fn_calls = 0
        self.update_calls = 0

        @functools.wraps(causal_conv1d_fn)
        def fn(*args, **kwargs):
            self.fn_calls += 1
            return causal_conv1d_fn(*args, **kwargs)

        @functools.wraps(causal_conv1d_update)
        def update(*args, **kwargs):
            self.update_calls += 1
            return causal_conv1d_update(*args, **kwargs)

        self.fn, self.update = fn, update


def _kernel_path_layers(mod):
    """Classes of `mod` whose forward picks a kernel path by device (cuda_kernels_forward vs
    slow_forward, as LFM2's short conv)."""
    return [c for _, c in inspect.getmembers(mod, inspect.isclass)
            if c.__module__ == mod.__name__ and hasattr(c, "cuda_kernels_forward") and hasattr(c, "slow_forward")]


def _kernel_forward(self, hidden_states, past_key_values=None, attention_mask=None, seq_idx=None, **kwargs):
    return self.cuda_kernels_forward(hidden_states, past_key_values, attention_mask, seq_idx=seq_idx)


def hub_cells(mod, name):
    """transformers >= 5.16 wraps each kernel function of a modeling module
    (use_kernel_func_from_hub_with_fallback): the wrapper drops keywords the implementation's
    signature lacks and calls the implementation it resolved when the module was imported (our
    package when installed, on any device; otherwise its own PyTorch code, `__wrapped__`). Returns
    the wrapper's closure cells by name, or None for an older transformers (module globals)."""
    f = getattr(mod, name, None)
    names = getattr(getattr(f, "__code__", None), "co_freevars", ())
    if f is None or "implementation" not in names or not hasattr(f, "__wrapped__"):
        return None
    return dict(zip(names, f.__closure__)), f.__wrapped__


class CellPatch:
    """Sets closure cells and puts them back (monkeypatch does not reach cells)."""

    def __init__(self):
        self.saved = []

    def set(self, cell, value):
        self.saved.append((cell, cell.cell_contents))
        cell.cell_contents = value

    def undo(self):
        for cell, value in reversed(self.saved):
            cell.cell_contents = value
        self.saved.clear()


def use_ours(monkeypatch, cells, model_type):
    """Our (counting) functions where transformers calls causal_conv1d."""
    mod = modeling_module(model_type)
    counting = Counting()
    for name, ours in (("causal_conv1d_fn", counting.fn), ("causal_conv1d_update", counting.update)):
        hub = hub_cells(mod, name)
        if hub is None:  # transformers < 5.16: the module's globals, set only with a GPU
            monkeypatch.setattr(mod, name, ours)
            continue
        # transformers resolved the installed package itself; count the calls it makes into it
        assert hub[0]["implementation"].cell_contents is getattr(causal_conv1d, name), name
        cells.set(hub[0]["implementation"], ours)
    for cls in _kernel_path_layers(mod):
        monkeypatch.setattr(mod, "is_fast_path_available", True)
        monkeypatch.setattr(cls, "forward", _kernel_forward)
    return counting


def use_fallback(monkeypatch, cells, model_type):
    """transformers without causal_conv1d: its own PyTorch code."""
    mod = modeling_module(model_type)
    for name in ("causal_conv1d_fn", "causal_conv1d_update"):
        hub = hub_cells(mod, name)
        if hub is None:
            monkeypatch.setattr(mod, name, None)
        else:
            cells.set(hub[0]["implementation"], hub[1])
            cells.set(hub[0]["is_new_implementation"], False)
    if hasattr(mod, "is_fast_path_available"):
        monkeypatch.setattr(mod, "is_fast_path_available", False)


def build(model_type, device, seed=0):
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(tiny_config(model_type)).to(device=device, dtype=torch.float32)
    return model.eval()


def conv_weights(model):
    return {n: p for n, p in model.named_parameters() if n.endswith("conv1d.weight") or n.endswith("conv.conv.weight")}


def _run(model_type, device, monkeypatch, ours):
    """Logits, greedy tokens, conv weight grads of one fresh model (same seed: same weights)."""
    cells = CellPatch()
    try:
        return _run_patched(model_type, device, monkeypatch, cells, ours)
    finally:
        cells.undo()
        monkeypatch.undo()


def _run_patched(model_type, device, monkeypatch, cells, ours):
    counting = use_ours(monkeypatch, cells, model_type) if ours else use_fallback(monkeypatch, cells, model_type)
    model = build(model_type, device)
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(3, 96, (2, 21), generator=gen).to(device)
    with torch.no_grad():
        logits = model(ids).logits
        tokens = model.generate(ids[:1, :9], max_new_tokens=12, min_new_tokens=12, do_sample=False)
    model.train()
    labels = torch.randint(3, 96, (2, 21), generator=gen).to(device)
    model(ids, labels=labels).loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in conv_weights(model).items()}
    return logits, tokens, grads, counting


def test_discovery_finds_the_models_the_readme_names():
    # The README's client list names exactly these; a new transformers that adds or drops one
    # fails here first.
    assert {"qwen3_next", "qwen3_5_text", "lfm2"} <= set(COVERED), (COVERED, EXCLUDED)
    for model_type, reason in EXCLUDED.items():
        assert reason, model_type
    print("covered:", COVERED)
    print("excluded:", EXCLUDED)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("model_type", COVERED)
def test_model_with_ours_matches_fallback(model_type, device, monkeypatch):
    ref_logits, ref_tokens, ref_grads, _ = _run(model_type, device, monkeypatch, ours=False)
    logits, tokens, grads, counting = _run(model_type, device, monkeypatch, ours=True)

    n_conv = len(ref_grads)  # conv layers of the model
    assert n_conv > 0, model_type
    # The fast path ran: one causal_conv1d_fn per conv layer and forward pass, one
    # causal_conv1d_update per conv layer and decoded token.
    assert counting.fn_calls >= 3 * n_conv, counting.fn_calls
    assert counting.update_calls >= 11 * n_conv, counting.update_calls

    scale = ref_logits.abs().max().item()
    diff = (logits - ref_logits).abs().max().item()
    print(f"{model_type} {device}: max |logits - fallback| = {diff:.3g} (scale {scale:.3g}); "
          f"calls fn={counting.fn_calls} update={counting.update_calls}")
    assert diff <= 1e-5 * scale, (diff, scale)
    assert torch.equal(tokens, ref_tokens), (tokens, ref_tokens)
    assert grads.keys() == ref_grads.keys()
    for name in grads:
        g, r = grads[name], ref_grads[name]
        gscale = r.abs().max().item()
        torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-5 * max(gscale, 1e-6), msg=name)


@pytest.mark.parametrize("model_type", COVERED)
def test_transformers_imports_our_package_itself(model_type):
    # transformers finds the installed package on its own: from 5.16 on, on any device (its hub
    # wrapper resolves the package at import); before, only when a GPU is present.
    mod = modeling_module(model_type)
    for name in ("causal_conv1d_fn", "causal_conv1d_update"):
        hub = hub_cells(mod, name)
        if hub is not None:
            assert hub[0]["implementation"].cell_contents is getattr(causal_conv1d, name), name
        elif not torch.cuda.is_available():
            pytest.skip("this transformers imports causal_conv1d only with a GPU")
        else:
            assert getattr(mod, name) is getattr(causal_conv1d, name), name


def _linear_attention_layer(device):
    """Qwen3-Next's gated-DeltaNet layer (the one with the conv), tiny, with our functions."""
    cfg = tiny_config("qwen3_next")
    mod = modeling_module("qwen3_next")
    torch.manual_seed(0)
    layer = mod.Qwen3NextGatedDeltaNet(cfg, layer_idx=0).to(device)
    return layer, cfg


@pytest.mark.parametrize(
    "backend",
    # inductor (what users get) takes ~50 s on 2 CPU cores: in the exhaustive run. The default
    # run compiles with dynamo's eager backend (the same graph capture and graph breaks, no code
    # generation). aot_eager is not used: it fails on this layer with transformers' own PyTorch
    # path as well (a view in the traced backward), nothing of ours involved.
    ["eager", pytest.param("inductor", marks=pytest.mark.exhaustive)],
)
@pytest.mark.parametrize("device", DEVICES)
def test_compiled_layer_has_no_graph_break_from_our_ops(device, backend, monkeypatch):
    if "qwen3_next" not in COVERED:
        pytest.skip("transformers has no Qwen3-Next")
    cells = CellPatch()
    try:
        _compiled_layer(device, backend, monkeypatch, cells)
    finally:
        cells.undo()


def _compiled_layer(device, backend, monkeypatch, cells):
    counting = use_ours(monkeypatch, cells, "qwen3_next")
    layer, cfg = _linear_attention_layer(device)
    x = torch.randn(2, 16, cfg.hidden_size, device=device)

    torch._dynamo.reset()
    explain = torch._dynamo.explain(layer)(x)
    ours = [r for r in explain.break_reasons if "causal_conv1d" in str(r)]
    print(f"graph breaks: {explain.graph_break_count} (from our ops: {len(ours)})")
    assert not ours, ours

    x_eager = x.clone().requires_grad_()
    x_comp = x.clone().requires_grad_()
    eager = layer(x_eager)
    compiled = torch.compile(layer, backend=backend)(x_comp)
    torch.testing.assert_close(compiled, eager, rtol=1e-4, atol=1e-5)
    g = torch.randn_like(eager)
    eager.backward(g)
    grads_eager = {n: p.grad.clone() for n, p in layer.named_parameters() if p.grad is not None}
    layer.zero_grad()
    compiled.backward(g)
    torch.testing.assert_close(x_comp.grad, x_eager.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(layer.conv1d.weight.grad, grads_eager["conv1d.weight"], rtol=1e-4, atol=1e-5)
    assert counting.fn_calls >= 2
