"""The registered ops: opcheck (schema, fake kernels, autograd registration), torch.compile."""

import pytest
import torch

from _reference import assert_close, conv_ref, make_x
from causal_conv1d import causal_conv1d_fn
from causal_conv1d._ops import build_config, ops


def _fwd_samples(device):
    for channel_last in (False, True):
        x = make_x(2, 16, 33, torch.float32, device, channel_last)
        w = torch.randn(16, 4, device=device)
        b = torch.randn(16, device=device)
        out = torch.empty(2, 33, 16, device=device).transpose(1, 2) if channel_last else torch.empty_like(x)
        yield (x, w, b, None, None, out, None, True)
        init = torch.randn(2, 16, 3, device=device)
        final = torch.empty(2, 16, 3, device=device)
        yield (x, w, None, None, init, out, final, False)
        seq = torch.zeros(2, 33, dtype=torch.int32, device=device)
        seq[:, 20:] = 1
        yield (x, w.half(), b.half(), seq, None, out, None, True)


def test_opcheck_fwd(device):
    for args in _fwd_samples(device):
        torch.library.opcheck(ops.fwd.default, args)


def test_opcheck_varlen_states(device):
    x = torch.randn(12, 8, device=device)
    cu = torch.tensor([0, 5, 12], dtype=torch.int32, device=device)
    torch.library.opcheck(ops.varlen_states.default, (x, cu, 4))


def test_compile_fullgraph_forward(device):
    x = make_x(2, 16, 40, torch.float32, device, True)
    w = torch.randn(16, 4, device=device)
    b = torch.randn(16, device=device)

    def f(x, w, b):
        return causal_conv1d_fn(x, w, b, activation="silu") * 2

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    assert_close(compiled(x, w, b), conv_ref(x, w, b, silu=True)[0] * 2, torch.float32)


def test_build_config_reports_backend():
    cfg = build_config()
    assert cfg["backend"] in ("hip", "cuda", "cpu")
    assert cfg["torch_version"] == torch.__version__
    if cfg["backend"] == "cpu":
        assert cfg["gpu_archs"] == ""
