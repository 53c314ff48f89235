"""The CPU output cache (csrc/torch/cpu_output_cache.cpp): large CPU outputs of the ops come from it,
their buffers are kept when the tensors die and handed out again, within CAUSAL_CONV1D_CPU_CACHE_MB,
and the tensors behave as any others."""

import io
import os
import subprocess
import sys
import textwrap
import threading

import pytest
import torch

import causal_conv1d
from _reference import assert_close, assert_grad_close, conv_ref, conv_ref_diff, make_x
from causal_conv1d import causal_conv1d_fn
from causal_conv1d._ops import ops

MB = 1 << 20


def _params(dim, width=4):
    return torch.randn(dim, width) * 0.5, torch.randn(dim)


@pytest.fixture(autouse=True)
def _empty_cache():
    causal_conv1d.empty_cpu_cache()
    yield
    causal_conv1d.empty_cpu_cache()


@pytest.mark.parametrize("channel_last", [False, True], ids=["cf", "cl"])
def test_freed_output_is_reused(channel_last):
    x = make_x(2, 256, 1024, torch.float32, "cpu", channel_last)  # 2 MB
    w, b = _params(256)
    ref = conv_ref(x, w, b, silu=True)[0]
    before = causal_conv1d.cpu_cache_info()
    out = causal_conv1d_fn(x, w, b, activation="silu")
    assert (out.stride(1) == 1) == channel_last, "out keeps x's layout"
    ptr = out.data_ptr()
    assert causal_conv1d.cpu_cache_info()["misses"] == before["misses"] + 1
    del out
    kept = causal_conv1d.cpu_cache_info()
    assert (kept["bytes"], kept["buffers"]) == (2 * MB, 1)
    out = causal_conv1d_fn(x, w, b, activation="silu")
    after = causal_conv1d.cpu_cache_info()
    assert out.data_ptr() == ptr, "the kept buffer is handed out again"
    assert (after["hits"], after["bytes"], after["buffers"]) == (kept["hits"] + 1, 0, 0)
    assert_close(out, ref, torch.float32)


@pytest.mark.parametrize("channel_last", [False, True], ids=["cf", "cl"])
def test_training_steps_reuse_their_buffers(channel_last):
    # After the first step, out and dx of every step come from the buffers the step before freed.
    x = make_x(2, 128, 2048, torch.bfloat16, "cpu", channel_last).requires_grad_()
    w = (torch.randn(128, 4) * 0.5).requires_grad_()
    b = torch.randn(128).requires_grad_()
    g = torch.randn_like(x)
    for _ in range(2):
        causal_conv1d_fn(x, w, b, activation="silu").backward(g)
    misses = causal_conv1d.cpu_cache_info()["misses"]
    for _ in range(3):
        x.grad = w.grad = b.grad = None
        causal_conv1d_fn(x, w, b, activation="silu").backward(g)
    assert causal_conv1d.cpu_cache_info()["misses"] == misses, "no large buffer allocated fresh"
    rx, rw, rb = (t.detach().clone().requires_grad_() for t in (x, w, b))
    conv_ref_diff(rx, rw, rb, silu=True)[0].backward(g.double())
    assert_grad_close(x.grad, rx.grad, torch.bfloat16, "dx")
    assert_grad_close(w.grad, rw.grad, torch.float32, "dweight")


def test_small_outputs_bypass_the_cache():
    x = make_x(2, 8, 64, torch.float32, "cpu", False)
    w, b = _params(8)
    before = causal_conv1d.cpu_cache_info()
    out = causal_conv1d_fn(x, w, b)
    del out
    after = causal_conv1d.cpu_cache_info()
    assert (after["misses"], after["bytes"]) == (before["misses"], before["bytes"])


def test_empty_cpu_cache_returns_kept_buffers():
    x = make_x(1, 512, 1024, torch.float32, "cpu", False)
    w, b = _params(512)
    outs = [causal_conv1d_fn(x, w, b) for _ in range(3)]
    del outs
    assert causal_conv1d.cpu_cache_info()["buffers"] == 3
    causal_conv1d.empty_cpu_cache()
    info = causal_conv1d.cpu_cache_info()
    assert (info["bytes"], info["buffers"]) == (0, 0)


def test_cached_tensors_behave_as_others():
    x = make_x(1, 512, 1024, torch.float32, "cpu", False)
    w, b = _params(512)
    out = causal_conv1d_fn(x, w, b)
    expected = out.clone()
    out.resize_(2, 512, 1024)  # a larger storage: allocated and copied by the tensor's allocator
    assert torch.equal(out[0], expected[0])
    out = causal_conv1d_fn(x, w, b)
    buf = io.BytesIO()
    torch.save(out, buf)
    buf.seek(0)
    assert torch.equal(torch.load(buf), expected)
    assert torch.equal(torch.from_numpy(out.numpy()), expected)


def test_threads_freeing_and_allocating():
    x = make_x(1, 512, 512, torch.float32, "cpu", False)  # 1 MB outputs
    w, b = _params(512)
    ref = conv_ref(x, w, b)[0]
    errors = []

    def work():
        try:
            for _ in range(20):
                outs = [causal_conv1d_fn(x, w, b) for _ in range(3)]
                for out in outs:
                    assert_close(out, ref, torch.float32)
                del outs
        except Exception as e:  # reported below, in the test's thread
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    info = causal_conv1d.cpu_cache_info()
    assert info["bytes"] == info["buffers"] * MB <= info["limit_bytes"]


def _run_with_limit(limit, body):
    script = textwrap.dedent(
        """
        import torch, causal_conv1d
        from causal_conv1d import causal_conv1d_fn
        x = torch.randn(1, 512, 1024)  # 2 MB outputs
        w, b = torch.randn(512, 4), torch.randn(512)
        """
    ) + textwrap.dedent(body)
    env = dict(os.environ, CAUSAL_CONV1D_CPU_CACHE_MB=limit)
    return subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)


def test_limit_keeps_the_most_recently_freed():
    r = _run_with_limit("5", """
        o1, o2, o3 = (causal_conv1d_fn(x, w, b) for _ in range(3))
        second, last = o2.data_ptr(), o3.data_ptr()
        del o1, o2, o3  # freed in this order: the first is given back once the third arrives (6 MB > 5)
        info = causal_conv1d.cpu_cache_info()
        assert info["limit_bytes"] == 5 << 20, info
        assert (info["bytes"], info["buffers"]) == (4 << 20, 2), info
        p1 = causal_conv1d_fn(x, w, b)
        p2 = causal_conv1d_fn(x, w, b)
        assert (p1.data_ptr(), p2.data_ptr()) == (last, second)  # the most recently kept first
        """)
    assert r.returncode == 0, r.stderr


def test_limit_zero_turns_the_cache_off():
    r = _run_with_limit("0", """
        out = causal_conv1d_fn(x, w, b)
        del out
        info = causal_conv1d.cpu_cache_info()
        assert (info["bytes"], info["buffers"], info["limit_bytes"]) == (0, 0, 0), info
        """)
    assert r.returncode == 0, r.stderr


def test_bad_limit_is_a_clear_error():
    r = _run_with_limit("lots", """
        try:
            causal_conv1d_fn(x, w, b)
        except RuntimeError as e:
            assert "CAUSAL_CONV1D_CPU_CACHE_MB must be a whole number of megabytes >= 0" in str(e), e
            assert "'lots'" in str(e), e
        else:
            raise AssertionError("no error")
        """)
    assert r.returncode == 0, r.stderr


def test_opcheck():
    x = torch.randn(2, 4, 8)
    for size, stride in (([2, 4, 8], [32, 8, 1]), ([2, 4, 8], [32, 1, 4]), ([1, 512, 1024], [524288, 1024, 1])):
        torch.library.opcheck(ops.cpu_output_buffer.default, (x, size, stride),
                              test_utils=("test_schema", "test_faketensor", "test_autograd_registration"))
