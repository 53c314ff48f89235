"""Plug-ins that point vLLM and SGLang at causal_conv1d.serving, through each engine's documented
plug-in point (no fork, no edited engine file):

- vLLM: the ``vllm.general_plugins`` entry point ``causal_conv1d`` -> ``register_vllm()``, which
  vLLM calls in every process before it builds a model. It rebinds ``causal_conv1d_fn`` and
  ``causal_conv1d_update`` in ``vllm.model_executor.layers.mamba.ops.causal_conv1d`` and in every
  loaded module that imported them by name (``from ... import causal_conv1d_fn``), the way
  hardware plug-ins such as vllm-ascend patch vLLM.
- SGLang: the ``sglang.srt.plugins`` entry point ``causal_conv1d`` -> ``register_sglang()``, which
  registers REPLACE hooks on SGLang's Triton ``causal_conv1d_fn`` / ``causal_conv1d_update`` in its
  hook registry (``sglang.srt.plugins.hook_registry``); SGLang applies them, and rebinds modules
  that imported the functions by name, before serving.

When: by default on ROCm builds of PyTorch once this build has the serving API's GPU kernels
(``causal_conv1d.serving.gpu_kernels_available()``); ``CAUSAL_CONV1D_SERVING_PLUGIN=0`` turns the
plug-ins off, ``=1`` turns them on whatever the platform (e.g. to test on NVIDIA).

Each replacement takes the engine's own signature (positional order and defaults read from the
engine's function, so ``null_block_id`` / ``pad_slot_id`` defaults follow the installed version)
and calls the engine's function instead for any call this library does not implement: an
``UnsupportedMode`` (width, dtype, activation, device, SGLang's EAGLE tree and intermediate
windows), or an argument the engine has and this library does not know, given a non-default value.
"""

import functools
import importlib
import importlib.util
import inspect
import logging
import os
import pkgutil
import sys
import types

import torch

from causal_conv1d import serving

logger = logging.getLogger(__name__)

ENV = "CAUSAL_CONV1D_SERVING_PLUGIN"
VLLM_MODULE = "vllm.model_executor.layers.mamba.ops.causal_conv1d"
# Where SGLang keeps its Triton conv functions (moved to sglang.kernels in newer versions).
SGLANG_MODULES = (
    "sglang.srt.layers.attention.mamba.causal_conv1d_triton",
    "sglang.kernels.ops.mamba.causal_conv1d_triton",
)
FUNCTIONS = ("causal_conv1d_fn", "causal_conv1d_update")
# The attribute a replacement keeps the engine's function under (idempotence, undo, fall-through).
ORIGINAL_ATTR = "_causal_conv1d_engine_original"


def plugin_enabled():
    """(enabled, reason) from CAUSAL_CONV1D_SERVING_PLUGIN (0, 1, or unset / auto)."""
    value = os.environ.get(ENV, "auto").strip().lower()
    if value in ("0", "off", "false"):
        return False, f"{ENV}={value}"
    if value in ("1", "on", "true"):
        return True, f"{ENV}={value}"
    if value not in ("", "auto"):
        raise ValueError(f"{ENV} must be 0, 1 or auto, got {value!r}")
    if torch.version.hip is None:
        return False, "PyTorch is not a ROCm build (set CAUSAL_CONV1D_SERVING_PLUGIN=1 to use it anyway)"
    if not serving.gpu_kernels_available():
        return False, "this build of causal_conv1d has no GPU kernels for the serving API yet"
    return True, "ROCm build of PyTorch"


def _engine_adapter(original, ours):
    """A function with the engine's call signature that runs ``ours`` and falls back to
    ``original`` for the calls ``ours`` does not implement."""
    params = list(inspect.signature(original).parameters.values())
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    defaults = {p.name: p.default for p in params if p.default is not p.empty}
    takes = {p.name for p in inspect.signature(ours).parameters.values() if p.kind != p.VAR_KEYWORD}
    engine_names = {p.name for p in params}
    # Padding markers the engine does not have must not apply with our defaults (SGLang has no
    # null block; newer vLLM's update has no pad_slot_id).
    absent = {name: None for name in ("pad_slot_id", "null_block_id") if name in takes and name not in engine_names}

    @functools.wraps(original)
    def replacement(*args, **kwargs):
        if len(args) > len(positional):
            return original(*args, **kwargs)
        call = dict(defaults)
        call.update(zip(positional, args))
        call.update(kwargs)
        for name in [n for n in call if n not in takes]:
            value = call.pop(name)
            if value is not None and not (name in defaults and value is defaults[name]):
                return original(*args, **kwargs)  # an engine feature this library does not know
        for name, value in absent.items():
            call.setdefault(name, value)
        try:
            return ours(**call)
        except serving.UnsupportedMode:
            return original(*args, **kwargs)

    setattr(replacement, ORIGINAL_ATTR, original)
    return replacement


def _rebind(original, replacement):
    """Replaces every module-level binding of ``original`` in sys.modules; returns how many."""
    count = 0
    for module in list(sys.modules.values()):
        if not isinstance(module, types.ModuleType):
            continue
        try:
            names = [name for name, value in vars(module).items() if value is original]
        except TypeError:
            continue
        for name in names:
            setattr(module, name, replacement)
            count += 1
    return count


def register_vllm():
    """vLLM's general-plugin entry point (``vllm.general_plugins``)."""
    enabled, reason = plugin_enabled()
    if not enabled:
        logger.info("causal_conv1d: vLLM plug-in off (%s)", reason)
        return
    module = importlib.import_module(VLLM_MODULE)
    for name in FUNCTIONS:
        original = getattr(module, name)
        if hasattr(original, ORIGINAL_ATTR):
            continue  # already in place (vLLM loads general plug-ins once per process, but be safe)
        replacement = _engine_adapter(original, getattr(serving, name))
        setattr(module, name, replacement)
        count = _rebind(original, replacement)
        logger.info("causal_conv1d: vLLM's %s.%s now runs causal_conv1d.serving (%d bindings, %s)", VLLM_MODULE,
                    name, count, reason)


def unregister_vllm():
    """Puts vLLM's own functions back (for tests and for turning the plug-in off in-process)."""
    module = sys.modules.get(VLLM_MODULE)
    if module is None:
        return
    for name in FUNCTIONS:
        replacement = getattr(module, name)
        original = getattr(replacement, ORIGINAL_ATTR, None)
        if original is not None:
            setattr(module, name, original)
            _rebind(replacement, original)


def _module_exists(dotted):
    """Whether a submodule of an installed package exists, without importing it (plug-ins load
    early; importing SGLang's kernel modules here could import Triton or create an import cycle)."""
    top, _, rest = dotted.partition(".")
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        return False
    for root in spec.submodule_search_locations:
        path = os.path.join(root, *rest.split("."))
        if os.path.isfile(path + ".py") or os.path.isfile(os.path.join(path, "__init__.py")):
            return True
    return False


class _SGLangReplacement:
    """A REPLACE hook for one SGLang target. SGLang's REPLACE hooks get only the call's arguments;
    the original function is found on the first call, behind the hook registry's wrapper
    (its ``__wrapped__`` chain), and the adapter built from its signature."""

    def __init__(self, target, ours):
        self.target = target
        self.ours = ours
        self._adapter = None
        functools.update_wrapper(self, ours, updated=())
        del self.__wrapped__  # the registry wraps the original; this must not look like a wrapper

    def __call__(self, *args, **kwargs):
        if self._adapter is None:
            original = inspect.unwrap(pkgutil.resolve_name(self.target))
            self._adapter = _engine_adapter(original, self.ours)
        return self._adapter(*args, **kwargs)


def register_sglang():
    """SGLang's general-plugin entry point (``sglang.srt.plugins``)."""
    enabled, reason = plugin_enabled()
    if not enabled:
        logger.info("causal_conv1d: SGLang plug-in off (%s)", reason)
        return
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    modules = [m for m in SGLANG_MODULES if _module_exists(m)]
    if not modules:
        logger.warning("causal_conv1d: none of SGLang's Triton conv modules found (%s); plug-in inactive",
                       ", ".join(SGLANG_MODULES))
    for module in modules:
        for name in FUNCTIONS:
            target = f"{module}.{name}"
            HookRegistry.register(target, _SGLangReplacement(target, getattr(serving, name)), HookType.REPLACE)
            logger.info("causal_conv1d: SGLang's %s will run causal_conv1d.serving (%s)", target, reason)
