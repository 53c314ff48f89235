"""Workarounds for clients of causal_conv1d; each says which versions need it and why.

``call_causal_conv1d_directly``: transformers >= 5.16 calls causal_conv1d through a wrapper
(``use_kernel_func_from_hub_with_fallback``) that runs transformers' own PyTorch code instead of
the installed package while a model is being exported, and PyTorch 2.7 - 2.13 report "exporting"
inside ``torch.compile`` as well (https://github.com/pytorch/pytorch/issues/176347, fixed in
2.14). A compiled model then never reaches this package. Until PyTorch 2.14, call this on the
modeling module before compiling:

    from causal_conv1d.compat import call_causal_conv1d_directly
    from transformers.models.qwen3_next import modeling_qwen3_next

    call_causal_conv1d_directly(modeling_qwen3_next)

Eager models and ``generate`` without compilation do not need it. Nothing here needs a GPU.
"""

import inspect

import causal_conv1d

__all__ = ["call_causal_conv1d_directly"]


def call_causal_conv1d_directly(modeling_module):
    """causal_conv1d's functions in place of transformers' wrappers in one modeling module. Like
    the wrapper, each drops the keywords it does not take (models pass their kwargs through).

    The functions are looked up on the ``causal_conv1d`` package when this is called, so a
    replacement set there before (a profiling or counting wrapper) is the one installed."""
    for name in ("causal_conv1d_fn", "causal_conv1d_update"):
        ours = getattr(causal_conv1d, name)
        takes = frozenset(inspect.signature(ours).parameters)

        def call(*args, _ours=ours, _takes=takes, **kwargs):
            return _ours(*args, **{k: v for k, v in kwargs.items() if k in _takes})

        setattr(modeling_module, name, call)
