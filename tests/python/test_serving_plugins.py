"""The vLLM and SGLang plug-ins (causal_conv1d.engine_plugins), driven through stand-in modules that
have each engine's module paths, function names and signatures, and call the functions the way
the engines' model code does (the engines cannot be installed here). A stand-in engine function
only records that it was called: every result the tests check comes from causal_conv1d.serving,
or proves the call fell through to the engine."""

import importlib
import importlib.metadata
import sys
import textwrap

import pytest
import torch

from _reference import assert_close
from _serving_reference import fn_ref, query_start_loc, update_ref
from causal_conv1d import engine_plugins, serving

_PACKAGE_INITS = {
    "vllm": ["vllm", "vllm/model_executor", "vllm/model_executor/layers", "vllm/model_executor/layers/mamba",
             "vllm/model_executor/layers/mamba/ops", "vllm/model_executor/models"],
    "sglang": ["sglang", "sglang/srt", "sglang/srt/plugins", "sglang/srt/layers", "sglang/srt/layers/attention",
               "sglang/srt/layers/attention/mamba", "sglang/srt/layers/attention/linear"],
}

# The newest vLLM signatures (after its pull request #35431: null_block_id, block 0 pads block
# tables); ENGINE_CALLS records every call that reaches the engine's own function.
VLLM_OPS = '''
PAD_SLOT_ID = -1
NULL_BLOCK_ID = 0
ENGINE_CALLS = []


def causal_conv1d_fn(x, weight, bias, conv_states, query_start_loc, cache_indices=None, has_initial_state=None,
                     activation="silu", pad_slot_id=PAD_SLOT_ID, null_block_id=NULL_BLOCK_ID,
                     block_idx_first_scheduled_token=None, block_idx_last_scheduled_token=None,
                     initial_state_idx=None, num_computed_tokens=None, block_size_to_align=0, metadata=None,
                     validate_data=False):
    ENGINE_CALLS.append("causal_conv1d_fn")
    return "engine"


def causal_conv1d_update(x, conv_state, weight, bias=None, activation=None, conv_state_indices=None,
                         num_accepted_tokens=None, query_start_loc=None, max_query_len=-1,
                         {padding}, block_idx_last_scheduled_token=None, initial_state_idx=None,
                         validate_data=False):
    ENGINE_CALLS.append("causal_conv1d_update")
    return "engine"
'''

# A gated-DeltaNet layer's conv calls, as vLLM's model code makes them (names imported by value).
VLLM_MODEL = '''
from vllm.model_executor.layers.mamba.ops.causal_conv1d import causal_conv1d_fn, causal_conv1d_update


def prefill(mixed_qkv, conv_weights, bias, conv_state, has_initial_state, state_indices, query_start_loc,
            metadata=None):
    # mixed_qkv: (tokens, dim); the kernel takes its transposed view
    return causal_conv1d_fn(mixed_qkv.transpose(0, 1), conv_weights, bias, activation="silu",
                            conv_states=conv_state, has_initial_state=has_initial_state,
                            cache_indices=state_indices, query_start_loc=query_start_loc,
                            metadata=metadata).transpose(0, 1)


def decode(mixed_qkv, conv_state, conv_weights, bias, state_indices):
    return causal_conv1d_update(mixed_qkv, conv_state, conv_weights, bias, "silu",
                                conv_state_indices=state_indices, validate_data=True)


def spec_decode(mixed_qkv, conv_state, conv_weights, bias, state_indices, num_accepted, query_start_loc, k):
    return causal_conv1d_update(mixed_qkv, conv_state, conv_weights, bias, "silu",
                                conv_state_indices=state_indices, num_accepted_tokens=num_accepted,
                                query_start_loc=query_start_loc, max_query_len=k + 1, validate_data=False)
'''

SGLANG_TRITON = '''
PAD_SLOT_ID = -1
ENGINE_CALLS = []


def causal_conv1d_fn(x, weight, bias, conv_states, query_start_loc, seq_lens_cpu, cache_indices=None,
                     has_initial_state=None, activation="silu", pad_slot_id=PAD_SLOT_ID, validate_data=False,
                     **kwargs):
    ENGINE_CALLS.append("causal_conv1d_fn")
    return "engine"


def causal_conv1d_update(x, conv_state, weight, bias=None, activation=None, cache_seqlens=None,
                         conv_state_indices=None, num_accept_tokens=None, intermediate_conv_window=None,
                         intermediate_state_indices=None, retrieve_next_token=None, retrieve_next_sibling=None,
                         retrieve_parent_token=None, pad_slot_id=PAD_SLOT_ID, metadata=None, validate_data=False):
    ENGINE_CALLS.append("causal_conv1d_update")
    return "engine"
'''

SGLANG_BACKEND = '''
from sglang.srt.layers.attention.mamba.causal_conv1d_triton import causal_conv1d_fn, causal_conv1d_update


def forward_extend(mixed_qkv, conv_weights, bias, conv_states, has_initial_states, cache_indices,
                   query_start_loc, extend_seq_lens_cpu):
    # mixed_qkv: (tokens, dim)
    return causal_conv1d_fn(mixed_qkv.transpose(0, 1), conv_weights, bias, activation="silu",
                            conv_states=conv_states, has_initial_state=has_initial_states,
                            cache_indices=cache_indices, query_start_loc=query_start_loc,
                            seq_lens_cpu=extend_seq_lens_cpu).transpose(0, 1)


def forward_extend_positional(mixed_qkv, conv_weights, bias, conv_states, query_start_loc, seq_lens, cache_indices):
    return causal_conv1d_fn(mixed_qkv.transpose(0, 1), conv_weights, bias, conv_states, query_start_loc, seq_lens,
                            cache_indices).transpose(0, 1)


def forward_decode(mixed_qkv, conv_states, conv_weights, bias, cache_indices):
    return causal_conv1d_update(mixed_qkv, conv_states, conv_weights, bias, "silu", conv_state_indices=cache_indices)


def target_verify(mixed_qkv, conv_states, conv_weights, bias, cache_indices, window, window_indices):
    return causal_conv1d_update(mixed_qkv, conv_states, conv_weights, bias, "silu", conv_state_indices=cache_indices,
                                intermediate_conv_window=window, intermediate_state_indices=window_indices)
'''

# A stand-in of SGLang's hook registry with its names and REPLACE behaviour: the target is
# replaced by a wrapper (functools.wraps of the original, __wrapped__ set) that calls the hook,
# and modules that imported the original by name are rebound.
SGLANG_HOOKS = '''
import enum
import functools
import pkgutil
import sys
import types


class HookType(enum.Enum):
    BEFORE = "before"
    AFTER = "after"
    AROUND = "around"
    REPLACE = "replace"


class HookRegistry:
    _hooks = {}

    @classmethod
    def register(cls, target, hook, hook_type=HookType.AFTER):
        cls._hooks.setdefault(target, []).append((hook_type, hook))

    @classmethod
    def apply_hooks(cls):
        for target, hooks in cls._hooks.items():
            owner_path, attr = target.rsplit(".", 1)
            owner = pkgutil.resolve_name(owner_path)
            original = getattr(owner, attr)
            wrapped = original
            for hook_type, hook in hooks:
                assert hook_type is HookType.REPLACE

                def wrapper(*args, _hook=hook, **kwargs):
                    return _hook(*args, **kwargs)

                wrapper = functools.wraps(wrapped)(wrapper)
                wrapper.__wrapped__ = wrapped
                wrapped = wrapper
            setattr(owner, attr, wrapped)
            for module in list(sys.modules.values()):
                if isinstance(module, types.ModuleType) and module is not owner:
                    for name, value in list(vars(module).items()):
                        if value is original:
                            setattr(module, name, wrapped)
        cls._hooks = {}
'''


def _write_engine(root, engine, files):
    for package in _PACKAGE_INITS[engine]:
        (root / package).mkdir(parents=True, exist_ok=True)
        (root / package / "__init__.py").write_text("")
    for path, source in files.items():
        (root / path).write_text(textwrap.dedent(source))


@pytest.fixture
def standin(tmp_path, monkeypatch):
    """Writes stand-in engine packages under tmp_path and removes every trace afterwards."""

    def make(engine, files):
        _write_engine(tmp_path, engine, files)
        monkeypatch.syspath_prepend(str(tmp_path))
        importlib.invalidate_caches()

    yield make
    engine_plugins.unregister_vllm()
    for name in [n for n in sys.modules if n.split(".")[0] in ("vllm", "sglang")]:
        del sys.modules[name]


def _vllm(standin, padding="null_block_id=NULL_BLOCK_ID"):
    standin("vllm", {
        "vllm/model_executor/layers/mamba/ops/causal_conv1d.py": VLLM_OPS.replace("{padding}", padding),
        "vllm/model_executor/models/standin_gdn.py": VLLM_MODEL,
    })
    ops = importlib.import_module(engine_plugins.VLLM_MODULE)
    model = importlib.import_module("vllm.model_executor.models.standin_gdn")
    return ops, model


def _batch(dim=40, width=4, lengths=(5, 1, 2, 30), lines=8):
    """A vLLM-shaped prefill batch: x (tokens, dim), cache (lines, dim, state_len) with dim
    contiguous, block 0 reserved (never a sequence's line)."""
    torch.manual_seed(0)
    x = torch.randn(sum(lengths), dim)
    w = torch.randn(dim, width)
    b = torch.randn(dim)
    cache = torch.randn(lines, width - 1 + 2, dim).transpose(1, 2)
    qsl = query_start_loc(lengths, "cpu")
    idx = torch.tensor([3, 1, 6, 2][: len(lengths)], dtype=torch.int32)
    his = torch.tensor([True, False, True, False][: len(lengths)])
    return x, w, b, cache, qsl, idx, his


def test_entry_points_are_declared():
    """The installed distribution declares both plug-ins (pyproject.toml)."""
    for group, func in (("vllm.general_plugins", "register_vllm"), ("sglang.srt.plugins", "register_sglang")):
        eps = [ep for ep in importlib.metadata.entry_points(group=group) if ep.name == "causal_conv1d"]
        assert [ep.value for ep in eps] == [f"causal_conv1d.engine_plugins:{func}"], (group, eps)
        assert eps[0].load() is getattr(engine_plugins, func)


def test_enabled_switch(monkeypatch):
    monkeypatch.setenv(engine_plugins.ENV, "0")
    assert engine_plugins.plugin_enabled()[0] is False
    monkeypatch.setenv(engine_plugins.ENV, "1")
    assert engine_plugins.plugin_enabled()[0] is True
    monkeypatch.setenv(engine_plugins.ENV, "maybe")
    with pytest.raises(ValueError, match="CAUSAL_CONV1D_SERVING_PLUGIN must be 0, 1 or auto"):
        engine_plugins.plugin_enabled()
    monkeypatch.delenv(engine_plugins.ENV)
    enabled, reason = engine_plugins.plugin_enabled()
    # auto: on only for ROCm builds of PyTorch whose causal_conv1d has the serving GPU kernels
    assert enabled == (torch.version.hip is not None and serving.gpu_kernels_available()), reason


def test_vllm_plugin_rebinds_and_runs_ours(standin, monkeypatch):
    ops, model = _vllm(standin)
    original_fn = ops.causal_conv1d_fn
    monkeypatch.setenv(engine_plugins.ENV, "1")
    engine_plugins.register_vllm()
    assert ops.causal_conv1d_fn is not original_fn and model.causal_conv1d_fn is ops.causal_conv1d_fn
    assert model.causal_conv1d_update is ops.causal_conv1d_update
    engine_plugins.register_vllm()  # idempotent: no second wrapper
    assert getattr(ops.causal_conv1d_fn, engine_plugins.ORIGINAL_ATTR) is original_fn

    x, w, b, cache, qsl, idx, his = _batch()
    expected_out, expected_cache = fn_ref(x.t(), w, b, cache, qsl, idx, his)
    out = model.prefill(x, w, b, cache, his, idx, qsl, metadata=object())
    assert_close(out.t(), expected_out, torch.float32)
    assert torch.equal(cache, expected_cache)

    # Decode with newer vLLM's padding: block 0 in the indices marks a padded row (its default).
    new = torch.randn(4, 40)
    dec_idx = torch.tensor([3, 0, 6, 2], dtype=torch.int32)
    expected_out, expected_cache = update_ref(new, cache, w, b, True, dec_idx, null_block_id=0)
    y = model.decode(new.clone(), cache, w, b, dec_idx)
    assert_close(y, expected_out, torch.float32)
    assert torch.equal(cache, expected_cache) and torch.all(y[1] == 0)

    # Speculative decoding, varlen.
    acc = torch.tensor([1, 2, 1, 1], dtype=torch.int32)
    counts = [2, 2, 1, 2]
    spec = torch.randn(sum(counts), 40)
    q = query_start_loc(counts, "cpu")
    expected_out, expected_cache = update_ref(spec, cache, w, b, True, idx, num_accepted_tokens=acc,
                                              query_start_loc=q, null_block_id=0)
    y = model.spec_decode(spec.clone(), cache, w, b, idx, acc, q, k=1)
    assert_close(y, expected_out, torch.float32)
    assert torch.equal(cache, expected_cache)
    assert ops.ENGINE_CALLS == []

    engine_plugins.unregister_vllm()
    assert ops.causal_conv1d_fn is original_fn and model.causal_conv1d_fn is original_fn


def test_vllm_older_padding_convention(standin, monkeypatch):
    """With an older vLLM whose update takes pad_slot_id (no null block), line 0 is a real line."""
    ops, model = _vllm(standin, padding="pad_slot_id=PAD_SLOT_ID")
    monkeypatch.setenv(engine_plugins.ENV, "1")
    engine_plugins.register_vllm()
    _, w, b, cache, _, _, _ = _batch()
    new = torch.randn(2, 40)
    idx = torch.tensor([0, -1], dtype=torch.int32)
    expected_out, expected_cache = update_ref(new, cache, w, b, True, idx, pad_slot_id=-1, null_block_id=None)
    y = model.decode(new.clone(), cache, w, b, idx)
    assert_close(y, expected_out, torch.float32)
    assert torch.equal(cache, expected_cache) and not torch.all(y[0] == 0) and torch.all(y[1] == 0)


def test_vllm_unsupported_modes_fall_through(standin, monkeypatch):
    ops, model = _vllm(standin)
    monkeypatch.setenv(engine_plugins.ENV, "1")
    engine_plugins.register_vllm()
    x, _, b, cache, qsl, idx, his = _batch()
    before = cache.clone()
    assert model.causal_conv1d_fn(x.t(), torch.randn(40, 5), b, cache, qsl, idx, his) == "engine"  # width 5
    assert ops.causal_conv1d_update(torch.randn(4, 40), cache, torch.randn(40, 4), None, "gelu") == "engine"
    assert ops.ENGINE_CALLS == ["causal_conv1d_fn", "causal_conv1d_update"]
    assert torch.equal(cache, before)


def test_vllm_plugin_off(standin, monkeypatch):
    ops, model = _vllm(standin)
    original = ops.causal_conv1d_fn
    monkeypatch.setenv(engine_plugins.ENV, "0")
    engine_plugins.register_vllm()
    assert ops.causal_conv1d_fn is original and model.causal_conv1d_fn is original


def test_unknown_engine_arguments_fall_through():
    """An argument the engine has and this library does not know falls through to the engine when
    it is given a value (a future engine feature must not be silently ignored)."""
    calls = []

    def engine_update(x, conv_state, weight, bias=None, activation=None, conv_state_indices=None,
                      future_feature=None):
        calls.append(future_feature)
        return "engine"

    adapter = engine_plugins._engine_adapter(engine_update, serving.causal_conv1d_update)
    state = torch.randn(2, 8, 3)
    w = torch.randn(8, 4)
    assert adapter(torch.randn(2, 8), state, w, future_feature=True) == "engine"
    expected_out, _ = update_ref(torch.ones(2, 8), state, w)
    assert_close(adapter(torch.ones(2, 8), state, w), expected_out, torch.float32)  # left at its default: ours
    assert calls == [True]


def _sglang(standin):
    standin("sglang", {
        "sglang/srt/plugins/hook_registry.py": SGLANG_HOOKS,
        "sglang/srt/layers/attention/mamba/causal_conv1d_triton.py": SGLANG_TRITON,
        "sglang/srt/layers/attention/linear/standin_gdn_backend.py": SGLANG_BACKEND,
    })
    triton = importlib.import_module(engine_plugins.SGLANG_MODULES[0])
    backend = importlib.import_module("sglang.srt.layers.attention.linear.standin_gdn_backend")
    hooks = importlib.import_module("sglang.srt.plugins.hook_registry")
    return triton, backend, hooks


def test_sglang_plugin_replaces_through_hook_registry(standin, monkeypatch):
    triton, backend, hooks = _sglang(standin)
    monkeypatch.setenv(engine_plugins.ENV, "1")
    engine_plugins.register_sglang()
    registered = dict(hooks.HookRegistry._hooks)
    # Only the module this SGLang has (the newer sglang.kernels path does not exist here).
    assert sorted(registered) == [f"{engine_plugins.SGLANG_MODULES[0]}.{n}" for n in engine_plugins.FUNCTIONS]
    assert all(ht is hooks.HookType.REPLACE for entries in registered.values() for ht, _ in entries)
    hooks.HookRegistry.apply_hooks()  # what SGLang's load_plugins() does after running the plug-ins
    assert backend.causal_conv1d_fn is triton.causal_conv1d_fn

    # SGLang has no null block: line 0 is a real line; -1 (PAD_SLOT_ID) pads.
    x, w, b, cache, qsl, _, his = _batch()
    idx = torch.tensor([0, 5, -1, 2], dtype=torch.int32)
    expected_out, expected_cache = fn_ref(x.t(), w, b, cache, qsl, idx, his, null_block_id=None)
    out = backend.forward_extend(x, w, b, cache, his, idx, qsl, [5, 1, 2, 30])
    assert_close(out.t(), expected_out, torch.float32)
    assert torch.equal(cache, expected_cache)
    # SGLang's positional order: seq_lens_cpu sixth, cache_indices seventh; no has_initial_state.
    expected_out, expected_cache = fn_ref(x.t(), w, b, cache, qsl, idx, None, null_block_id=None)
    out = backend.forward_extend_positional(x, w, b, cache, qsl, [5, 1, 2, 30], idx)
    assert_close(out.t(), expected_out, torch.float32)
    assert torch.equal(cache, expected_cache)

    new = torch.randn(4, 40)
    expected_out, expected_cache = update_ref(new, cache, w, b, True, idx, null_block_id=None)
    y = backend.forward_decode(new.clone(), cache, w, b, idx)
    assert_close(y, expected_out, torch.float32)
    assert torch.equal(cache, expected_cache)
    assert triton.ENGINE_CALLS == []

    # EAGLE target verify with intermediate windows: SGLang's own kernel.
    window = torch.zeros(4, 2, 40, 3)
    assert backend.target_verify(torch.randn(4, 40, 2), cache, w, b, idx, window, torch.arange(4)) == "engine"
    assert triton.ENGINE_CALLS == ["causal_conv1d_update"]


def test_sglang_plugin_off(standin, monkeypatch):
    _, _, hooks = _sglang(standin)
    monkeypatch.setenv(engine_plugins.ENV, "0")
    engine_plugins.register_sglang()
    assert hooks.HookRegistry._hooks == {}
