"""Real clients: tiny random-weight transformers models, run with our causal_conv1d and with
transformers' own PyTorch fallback for the same weights.

Which models: every causal-LM model type of the installed transformers whose modeling file calls
causal_conv1d (found by reading the installed package) and whose kernel path needs nothing else
we lack; a model whose kernel path also needs another kernel package (mamba-ssm, ...) that is not
installed is listed as excluded, with the reason. For each covered model: logits with ours vs the
fallback, greedy generation of 12 tokens through the cache (prefill with causal_conv1d_fn, then
causal_conv1d_update per token), and the conv weights' gradients of one training step. Counting
wrappers around our functions prove the fast path ran.

Up to transformers 5.15, transformers imports causal_conv1d only when a CUDA/ROCm device is
available; on the CPU the test puts our functions where that import would (the modeling module's
globals) and, for models whose layer picks its kernel path by device (LFM2), routes the layer
through that kernel path: the code a GPU user runs, on our CPU backend. From 5.16 on, transformers
wraps each kernel function and resolves the installed package itself on any device; the test
counts the calls going through that wrapper.

The tiny configurations are generic (shared sizes applied where a config has the field, a layer
layout named as the model's default one names its kinds) plus what single models need, with the
reason; they were made to fit transformers 5.12 (dev root, CI) and 5.17 (GPU machine).
"""

import contextlib
import functools
import importlib
import importlib.util
import inspect
import json
import os
import re
import types

import pytest
import torch

transformers = pytest.importorskip("transformers", reason="transformers is not installed")

import causal_conv1d  # noqa: E402
from causal_conv1d import causal_conv1d_fn, causal_conv1d_update  # noqa: E402
from causal_conv1d.compat import call_causal_conv1d_directly  # noqa: E402

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
    # Mamba-2 heads: 8 heads of 16 make the mixer width hidden_size * expand (2) = 128, which the
    # Mamba-2 configs check (under their several names).
    num_heads=8, mamba_n_heads=8, n_mamba_heads=8, mamba_num_heads=8, mamba_head_dim=16, mamba_d_ssm=128,
    state_size=16, mamba_d_state=16, ssm_state_size=16,
    # Configs that derive the layer layout from indices or a period (read-only layer_types): the
    # third layer is the attention layer, as in the layout below.
    full_attn_idxs=[2], attn_layer_indices=[2], attn_layer_period=4, attn_layer_offset=2,
)

# What single model types need beyond that, applied where the config has the field.
_TINY_BY_MODEL = {
    # Multi-head latent attention: as many key/value heads as query heads, small latent sizes.
    "kimi_linear": dict(
        num_key_value_heads=4, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16,
        linear_head_dim=16, linear_num_heads=4, num_local_experts=4,
    ),
    # Its attention layers are sparse (an indexer picks key blocks), which needs the indexer's
    # sizes; the hyper-connection rank is scaled down with the width.
    "qwen4_exp_text": dict(
        indexer_n_heads=2, indexer_kv_heads=1, indexer_head_dim=16, indexer_budget=8, indexer_compress_ratio=4,
        hc_lowrank=16,
    ),
    # Its hybrid layers share one attention block, tied from the first to the others: it needs two.
    "zamba": dict(layer_types=["linear_attention", "hybrid", "linear_attention", "hybrid"]),
}


def _field(config, name):
    """The config's own name for `name` (configs alias some, as layer_types -> layers_block_type)."""
    return getattr(config, "attribute_map", {}).get(name, name)


def _settable(config, name):
    name = _field(config, name)
    attr = getattr(type(config), name, None)
    return hasattr(config, name) and not (isinstance(attr, property) and attr.fset is None)


def _layout(base):
    """Four layer kinds, named as the model's default layout names them: conv layers on both sides
    of a layer with attention. Where the default layout has no attention-only kind, a kind holding
    a conv and attention together ("hybrid") takes the third place."""
    kinds = list(dict.fromkeys(base.layer_types or []))
    attn = [k for k in kinds if "attention" in k and "linear" not in k]
    conv = [k for k in kinds if k not in attn]
    if not conv:  # no default layout to read the name from
        conv = ["linear_attention" if hasattr(base, "linear_num_key_heads") else "conv"]
    hybrid = [k for k in conv if "hybrid" in k]
    third = (attn or [k for k in hybrid if k != conv[0]] or hybrid or ["full_attention"])[0]
    return [conv[0], conv[0], third, conv[0]]


def tiny_config(model_type):
    base = AutoConfig.for_model(model_type)
    sizes = {**_TINY}
    if _settable(base, "layer_types"):
        sizes["layer_types"] = _layout(base)
    sizes.update(_TINY_BY_MODEL.get(model_type, {}))
    # By the field's own name: an alias is set only after the config derived its other fields.
    kwargs = {_field(base, k): v for k, v in sizes.items() if _settable(base, k)}
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


@contextlib.contextmanager
def patching(monkeypatch):
    """Closure-cell patches (yielded) and monkeypatch's, all undone on exit."""
    cells = CellPatch()
    try:
        yield cells
    finally:
        cells.undo()
        monkeypatch.undo()


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
    with patching(monkeypatch) as cells:
        return _run_patched(model_type, device, monkeypatch, cells, ours)


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


def test_discovery_finds_the_models_the_data_file_names():
    # tests/data/transformers_models.json names the covered models per transformers version
    # (checked below; docs/transformers.md shows it).
    assert {"qwen3_next", "qwen3_5_text", "lfm2"} <= set(COVERED), (COVERED, EXCLUDED)
    for model_type, reason in EXCLUDED.items():
        assert reason, model_type
    print("covered:", COVERED)
    print("excluded:", EXCLUDED)


MODELS_FILE = os.path.join(os.path.dirname(__file__), "..", "data", "transformers_models.json")


def recorded_models(version):
    """Model types the data file gives a measured difference for under this transformers version
    (in any of its columns for that version); None when it has no column for the version."""
    with open(MODELS_FILE) as f:
        data = json.load(f)
    columns = [i for i, c in enumerate(data["columns"]) if c["transformers"] == version]
    if not columns:
        return None
    return {m["model_type"] for m in data["models"] if any("max_diff" in m["results"][i] for i in columns)}


def test_data_file_names_exactly_the_covered_models():
    named = recorded_models(transformers.__version__)
    if named is None:
        pytest.skip(f"{os.path.basename(MODELS_FILE)} has no column for transformers {transformers.__version__}")
    assert named == set(COVERED), (sorted(named - set(COVERED)), sorted(set(COVERED) - named))


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


def _our_ops(graphs):
    """Calls of our ops (torch.ops.causal_conv1d.*) in captured FX graphs, their subgraphs (an
    autograd function's forward and backward bodies) included."""
    modules = [m for gm in graphs for m in gm.modules() if isinstance(m, torch.fx.GraphModule)]
    return [str(n.target) for m in modules for n in m.graph.nodes
            if n.op == "call_function" and str(n.target).startswith("causal_conv1d.")]


def _compile_step(layer, backend, x, g):
    """Forward and backward of the compiled layer; the FX graphs dynamo handed the backend."""
    graphs, compile_graph = [], torch._dynamo.lookup_backend(backend)

    def recording(gm, example_inputs):
        graphs.append(gm)
        return compile_graph(gm, example_inputs)

    torch._dynamo.reset()
    layer.zero_grad()
    x = x.clone().requires_grad_()
    compiled = torch.compile(layer, backend=recording)
    compiled(x).backward(g)  # compiles forward and backward
    layer.zero_grad()
    x.grad = None
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        out = compiled(x)
        out.backward(g)
    ran = {e.name for e in prof.events() if e.name.startswith("causal_conv1d::")}
    grads = {n: p.grad.clone() for n, p in layer.named_parameters() if p.grad is not None}
    return out.detach(), x.grad, grads, graphs, ran


@pytest.mark.parametrize(
    "backend",
    # inductor (what users get) takes ~20-50 s on 2 CPU cores: in the exhaustive run. The default
    # run compiles with dynamo's eager backend (the same graph capture and graph breaks, no code
    # generation). aot_eager is not used: it fails on this layer with transformers' own PyTorch
    # path as well (a view in the traced backward), nothing of ours involved.
    ["eager", pytest.param("inductor", marks=pytest.mark.exhaustive)],
)
@pytest.mark.parametrize("device", DEVICES)
def test_compiled_layer_has_no_graph_break_from_our_ops(device, backend, monkeypatch):
    if "qwen3_next" not in COVERED:
        pytest.skip("transformers has no Qwen3-Next")
    with patching(monkeypatch) as cells:
        _compiled_layer(device, backend, monkeypatch, cells)


def apply_compat_workaround(monkeypatch, model_type, counting):
    """causal_conv1d.compat.call_causal_conv1d_directly (the workaround for transformers >= 5.16
    with PyTorch < 2.14, docs/transformers.md) applied to model_type's modeling module with our
    counting functions as the package's; monkeypatch undoes all of it."""
    module = modeling_module(model_type)
    for name in ("causal_conv1d_fn", "causal_conv1d_update"):
        monkeypatch.setattr(module, name, getattr(module, name))  # put back on undo
    monkeypatch.setattr(causal_conv1d, "causal_conv1d_fn", counting.fn)
    monkeypatch.setattr(causal_conv1d, "causal_conv1d_update", counting.update)
    call_causal_conv1d_directly(module)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("model_type", COVERED)
def test_compiled_model_with_compat_workaround(model_type, device, monkeypatch):
    # Whole models compiled (dynamo's eager backend) with the workaround: our ops run in the
    # compiled model, whatever this PyTorch says about exporting, and the logits match
    # transformers' fallback run eagerly.
    ids = torch.randint(3, 96, (2, 21), generator=torch.Generator().manual_seed(1)).to(device)
    with patching(monkeypatch) as cells, torch.no_grad():
        use_fallback(monkeypatch, cells, model_type)
        ref = build(model_type, device)(ids).logits
    with patching(monkeypatch) as cells, torch.no_grad():
        counting = use_ours(monkeypatch, cells, model_type)
        apply_compat_workaround(monkeypatch, model_type, counting)
        torch._dynamo.reset()
        compiled = torch.compile(build(model_type, device), backend="eager")
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            logits = compiled(ids).logits
    ran = {e.name for e in prof.events() if e.name.startswith("causal_conv1d::")}
    assert "causal_conv1d::fwd" in ran, ran
    scale = ref.abs().max().item()
    diff = (logits - ref).abs().max().item()
    print(f"{model_type} {device} compiled with the workaround: max |logits - fallback| = {diff:.3g} (scale {scale:.3g})")
    assert diff <= 1e-5 * scale, (diff, scale)


def exporting_under_compile():
    """Whether this PyTorch reports torch.compiler.is_exporting() as True inside torch.compile
    (PyTorch 2.7 - 2.13: pytorch/pytorch#176347, fixed in 2.14)."""
    def probe(x):
        return x + 1 if torch.compiler.is_exporting() else x - 1

    torch._dynamo.reset()
    return torch.compile(probe, backend="eager", fullgraph=True)(torch.zeros(1)).item() == 1


def _compiled_layer(device, backend, monkeypatch, cells):
    counting = use_ours(monkeypatch, cells, "qwen3_next")
    mod = modeling_module("qwen3_next")
    if hub_cells(mod, "causal_conv1d_fn") is not None and exporting_under_compile():
        # transformers' wrapper calls its own PyTorch code when exporting, and this PyTorch says
        # "exporting" under torch.compile too: a compiled model never reaches the installed
        # package (docs/transformers.md). Compile the layer with our functions where the wrapper
        # stands, as transformers before 5.16 and causal_conv1d.compat's workaround do.
        print("this PyTorch reports exporting under torch.compile: causal_conv1d.compat's workaround applied")
        apply_compat_workaround(monkeypatch, "qwen3_next", counting)
    layer, cfg = _linear_attention_layer(device)
    x = torch.randn(2, 16, cfg.hidden_size, device=device)

    torch._dynamo.reset()
    explain = torch._dynamo.explain(layer)(x)
    ours = [r for r in explain.break_reasons if "causal_conv1d" in str(r)]
    print(f"graph breaks: {explain.graph_break_count} (from our ops: {len(ours)})")
    assert not ours, ours

    x_eager = x.clone().requires_grad_()
    eager = layer(x_eager)
    assert counting.fn_calls >= 1  # eager: through transformers' wrapper into ours
    g = torch.randn_like(eager)
    eager.backward(g)
    grads_eager = {n: p.grad.clone() for n, p in layer.named_parameters() if p.grad is not None}

    try:
        compiled, x_grad, grads, graphs, ran = _compile_step(layer, backend, x, g)
    except Exception as err:
        _skip_if_pytorch_fails_without_ours(err, device, backend, monkeypatch, cells, x, g)
        raise
    # Compiled: our forward and backward ops ran (dispatcher events of a call of the compiled
    # layer). Counting calls cannot show this: a compiled graph replays Python side effects or not
    # depending on the PyTorch version.
    print(f"our ops run by the compiled layer: {sorted(ran)}; "
          f"in its graphs: {sorted(set(_our_ops(graphs)))}")
    assert {"causal_conv1d::fwd", "causal_conv1d::bwd"} <= ran, ran
    torch.testing.assert_close(compiled, eager.detach(), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(x_grad, x_eager.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(grads["conv1d.weight"], grads_eager["conv1d.weight"], rtol=1e-4, atol=1e-5)


def _skip_if_pytorch_fails_without_ours(err, device, backend, monkeypatch, cells, x, g):
    """Skips when the compiler also fails on the layer with transformers' own PyTorch path (a
    compiler bug of the installed PyTorch, seen with inductor's C++ code generation of PyTorch 2.11);
    returns (and the caller re-raises) when the layer compiles without our ops."""
    cells.undo()
    monkeypatch.undo()
    use_fallback(monkeypatch, cells, "qwen3_next")
    layer, _ = _linear_attention_layer(device)
    try:
        _compile_step(layer, backend, x, g)
    except type(err) as again:
        first = str(again).strip().splitlines()[0][:200]
        pytest.skip(f"{backend} fails on this layer without our ops as well ({type(again).__name__}: {first})")
