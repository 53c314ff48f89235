"""causal_conv1d._eager (csrc/python/eager.cpp): the per-step ops' eager entry from Python.

It must behave exactly as the op overloads it stands for: same results, same errors, same
in-place effects, and everything it does not take as it is (keywords, other argument types,
tensor subclasses, __torch_function__ modes) answered by the overload it was bound to. The
public and compat functions reach it eagerly; torch.compile traces the overloads instead.
"""

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

import causal_conv1d_cuda
from _reference import make_x
from causal_conv1d import _core, _eager, causal_conv1d_fn, causal_conv1d_update, cpp_functions
from causal_conv1d._ops import ops

# What causal_conv1d/_core.py binds the entries to.
FALLBACKS = (_core.fwd_any_layout, ops.update.default, ops.update_functional.default, _core.bwd_into)
NAMES = ("fwd", "update", "update_functional", "bwd")


def _fwd_args(device, channel_last=False):
    x = make_x(2, 16, 37, torch.float32, device, channel_last)
    w = torch.randn(16, 4, device=device)
    b = torch.randn(16, device=device)
    out = torch.empty(2, 37, 16, device=device).transpose(1, 2) if channel_last else torch.empty_like(x)
    return [x, w, b, None, None, out, None, True]


def _bwd_args(device, channel_last=False):
    """The compat module's 12-argument backward: into dx and float32 dweight / dbias."""
    x = make_x(2, 16, 37, torch.float32, device, channel_last)
    dout = make_x(2, 16, 37, torch.float32, device, channel_last)
    w = torch.randn(16, 4, device=device)
    b = torch.randn(16, device=device)
    dx = torch.empty(2, 37, 16, device=device).transpose(1, 2) if channel_last else torch.empty_like(x)
    return [x, w, b, dout, None, None, None, dx, torch.zeros(16, 4, device=device), torch.zeros(16, device=device),
            None, True]


def _bwd_ref(args):
    """What the 12-argument form did before the entry: the overload, in deterministic_mode()."""
    ops.bwd.default(*args, _core.deterministic_mode())


def _update_args(device):
    x = torch.randn(3, 16, device=device)
    state = torch.randn(3, 16, 3, device=device)
    w = torch.randn(16, 4, device=device)
    b = torch.randn(16, device=device)
    return [x, state, w, b, torch.empty_like(x), True, None, None]


def _functional_args(device):
    x, state, w, b, _, silu, seqlens, indices = _update_args(device)
    return [x, state, w, b, silu, seqlens, indices]


class _Spy:
    """Stands in for a fallback in bind(): records that the entry fell back to it, then calls it."""

    def __init__(self, fallback):
        self.fallback, self.calls = fallback, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.fallback(*args, **kwargs)


@pytest.fixture
def spies():
    spies = [_Spy(o) for o in FALLBACKS]
    _eager.bind(*spies)
    try:
        yield dict(zip(NAMES, spies))
    finally:
        _eager.bind(*FALLBACKS)


def _clone(args):
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


def test_fwd_matches_overload(device):
    for channel_last in (False, True):
        args = _fwd_args(device, channel_last)
        ref = _clone(args)
        init = torch.randn(2, 16, 3, device=device)
        final, final_ref = torch.empty(2, 16, 3, device=device), torch.empty(2, 16, 3, device=device)
        args[4], ref[4], args[6], ref[6] = init, init, final, final_ref
        _eager.fwd(*args)
        ops.fwd.default(*ref)
        assert torch.equal(args[5], ref[5]) and torch.equal(final, final_ref)


def test_bwd_matches_overload(device, monkeypatch):
    # Both layouts, states in and out, default and deterministic mode: dx and dinitial_states
    # bitwise the overload's, dweight and dbias too where they are bitwise repeatable (CPU, or the
    # deterministic mode; test_bwd_passes_the_deterministic_mode checks the flag itself).
    for mode in ("", "1", "0"):
        monkeypatch.setenv("CAUSAL_CONV1D_DETERMINISTIC", mode)
        for channel_last in (False, True):
            args = _bwd_args(device, channel_last)
            if channel_last:
                args[5] = torch.randn(2, 3, 16, device=device).transpose(1, 2)  # initial_states
                args[6] = torch.randn(2, 3, 16, device=device).transpose(1, 2)  # dfinal_states
                args[10] = torch.empty(2, 3, 16, device=device).transpose(1, 2)  # dinitial_states
            ref = _clone(args)
            for i in (5, 6):
                ref[i] = args[i]
            if channel_last:
                ref[10] = torch.empty(2, 3, 16, device=device).transpose(1, 2)
            _eager.bwd(*args)
            _bwd_ref(ref)
            for i in (7, 10) if channel_last else (7,):  # dx, dinitial_states: no atomics
                assert torch.equal(args[i], ref[i]), (mode, channel_last, i)
            for i in (8, 9):  # dweight, dbias: float32 atomics on the GPU unless deterministic
                if mode == "1" or device == "cpu":
                    assert torch.equal(args[i], ref[i]), (mode, channel_last, i)
                else:
                    torch.testing.assert_close(args[i], ref[i])


def test_bwd_passes_the_deterministic_mode(device, spies, monkeypatch):
    # The op's deterministic flag from the fast path, as deterministic_mode() decides it: the
    # environment variable first, else torch.use_deterministic_algorithms.
    class Mode(TorchDispatchMode):
        flags = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is ops.bwd.default:
                Mode.flags.append(args[-1])
            return func(*args, **(kwargs or {}))

    args = _bwd_args(device)
    for env, algorithms, want in (("1", False, True), ("0", True, False), ("", False, False), ("", True, True)):
        monkeypatch.setenv("CAUSAL_CONV1D_DETERMINISTIC", env)
        torch.use_deterministic_algorithms(algorithms, warn_only=True)
        try:
            with Mode():
                _eager.bwd(*args)
        finally:
            torch.use_deterministic_algorithms(False)
        assert Mode.flags[-1] is want, (env, algorithms)
    monkeypatch.delenv("CAUSAL_CONV1D_DETERMINISTIC")
    with Mode():
        _eager.bwd(*args)
    assert Mode.flags == [True, False, False, True, False] and spies["bwd"].calls == 0


def test_update_matches_overload(device):
    args = _update_args(device)
    ref = _clone(args)
    _eager.update(*args)
    ops.update.default(*ref)
    assert torch.equal(args[4], ref[4]) and torch.equal(args[1], ref[1])  # out, and the state in place
    args = _functional_args(device)
    ref = _clone(args)
    out = _eager.update_functional(*args)
    out_ref = ops.update_functional.default(*ref)
    assert torch.equal(out, out_ref) and torch.equal(args[1], ref[1])
    assert out.stride() == out_ref.stride() and out.grad_fn is None


def test_plain_calls_take_the_fast_path(device, spies):
    _eager.fwd(*_fwd_args(device))
    _eager.update(*_update_args(device))
    _eager.update_functional(*_functional_args(device))
    _eager.bwd(*_bwd_args(device))
    _eager.bwd(*_bwd_args(device, channel_last=True))
    w = torch.nn.Parameter(torch.randn(16, 4, device=device))  # nn.Parameter counts as a plain tensor
    args = _update_args(device)
    args[2] = w
    _eager.update(*args)
    assert [s.calls for s in spies.values()] == [0, 0, 0, 0]


def test_public_calls_reach_the_entry(device, spies):
    x, state, w, b, out, silu, _, _ = _update_args(device)
    causal_conv1d_update(x, state, w, b, "silu")
    causal_conv1d_cuda.causal_conv1d_update(x, state, w, b, out, silu, None, None)
    assert spies["update_functional"].calls == 0 and spies["update"].calls == 0
    # Keyword forms go through the compat module's binding to the same entry, positionally.
    causal_conv1d_cuda.causal_conv1d_update(x, state, w, b, out=out, silu_activation=silu, cache_seqlens=None,
                                            conv_state_indices=None)
    assert spies["update"].calls == 0
    causal_conv1d_cuda.causal_conv1d_fwd(*_fwd_args(device))
    causal_conv1d_fn(make_x(2, 16, 37, torch.float32, device, False), w, b, activation="silu")
    assert spies["fwd"].calls == 0
    args = _bwd_args(device)
    causal_conv1d_cuda.causal_conv1d_bwd(*args)
    names = ("x", "weight", "bias", "dout", "seq_idx", "initial_states", "dfinal_states", "dx", "dweight", "dbias",
             "dinitial_states", "silu_activation")
    causal_conv1d_cuda.causal_conv1d_bwd(*args[:4], **dict(zip(names[4:], args[4:])))
    assert spies["bwd"].calls == 0
    # The returning forms (5, 6 and 7 arguments): update_functional, padded with None.
    seqlens = torch.tensor([1, 2, 5], dtype=torch.int32, device=device)
    indices = torch.tensor([2, 0, 1], dtype=torch.int32, device=device)
    for extra in ((), (seqlens,), (seqlens, indices)):
        ref_state = state.clone()
        got = causal_conv1d_cuda.causal_conv1d_update(x, state, w, b, silu, *extra)
        want = ops.update_functional.default(x, ref_state, w, b, silu, *extra, *(None,) * (2 - len(extra)))
        assert torch.equal(got, want) and torch.equal(state, ref_state)
    assert spies["update_functional"].calls == 0


def test_backward_calls_reach_the_entry(device, monkeypatch):
    # Every eager backward (the compat forms, causal_conv1d_bwd_function, autograd through
    # causal_conv1d_fn) calls the op through the entry's fast path: with the Python layer's overload
    # made to fail (the entry's fallback, bwd_into, calls it too), they still run.
    def overload_called(*args, **kwargs):
        raise AssertionError("the backward went through the op overload, not the eager entry")

    monkeypatch.setattr(_core, "_bwd", overload_called)
    x, w, b, dout, _, _, _, dx, dw, db, _, silu = _bwd_args(device)
    causal_conv1d_cuda.causal_conv1d_bwd(x, w, b, dout, None, None, None, dx, dw, db, None, silu)
    causal_conv1d_cuda.causal_conv1d_bwd(x, w, b, dout, None, None, None, dx, False, silu)
    causal_conv1d_cuda.causal_conv1d_bwd(x, w, b, dout, None, silu)
    cpp_functions.causal_conv1d_bwd_function(x, w, b, dout, None, None, None, None, False, silu)
    xg = x.clone().requires_grad_(True)
    causal_conv1d_fn(xg, w, b, activation="silu").backward(dout)
    assert xg.grad is not None
    with pytest.raises(AssertionError, match="not the eager entry"):  # the check can fail
        _core.bwd_into(x, w, b, dout, None, None, None, dx, dw, db, None, silu)


def test_other_calls_fall_back_to_the_overload(device, spies):
    # Keywords, an int where a bool goes: the overload answers (and accepts both, as torch.ops does).
    args = _fwd_args(device)
    names = ("x", "weight", "bias", "seq_idx", "initial_states", "out", "final_states_out", "silu_activation")
    _eager.fwd(*args[:5], **dict(zip(names[5:], args[5:])))
    args[7] = 1
    _eager.fwd(*args)
    assert spies["fwd"].calls == 2
    args = _update_args(device)
    args[5] = 0
    _eager.update(*args)
    assert spies["update"].calls == 1
    args = _bwd_args(device)
    args[11] = 1  # an int for the bool
    _eager.bwd(*args)
    assert spies["bwd"].calls == 1
    with pytest.raises(RuntimeError) as entry_error:  # an argument short: the overload's message
        _eager.update_functional(*_functional_args(device)[:6])
    assert spies["update_functional"].calls == 1
    with pytest.raises(RuntimeError) as overload_error:
        ops.update_functional.default(*_functional_args(device)[:6])
    assert str(entry_error.value) == str(overload_error.value)


def test_fwd_lays_out_other_strides(device, spies):
    # x neither channel-first nor channel-last: the fallback makes it contiguous (kernel_layout), as
    # the compat module's out-taking forward always did.
    args = _fwd_args(device)
    x = torch.randn(16, 37, 2, device=device).permute(2, 0, 1)
    assert x.stride(2) != 1 and x.stride(1) != 1
    args[0] = x
    _eager.fwd(*args)
    assert spies["fwd"].calls == 1
    ref = _clone(args)
    ref[0] = x.contiguous()
    ops.fwd.default(*ref)
    assert torch.equal(args[5], ref[5])
    out = torch.empty_like(args[5])
    causal_conv1d_cuda.causal_conv1d_fwd(x, args[1], args[2], None, None, out, None, True)
    assert spies["fwd"].calls == 2 and torch.equal(out, ref[5])


def test_bwd_lays_out_other_strides_and_reads_the_mode(device, spies, monkeypatch):
    # x in neither kernel layout, dout in the other one, a bad CAUSAL_CONV1D_DETERMINISTIC: each goes
    # to the fallback, which lays them out (kernel_layout, match_layout) or raises deterministic_mode's
    # error, as the compat module's 12-argument form always did. (Deterministic mode: dweight and
    # dbias bitwise repeatable.)
    monkeypatch.setenv("CAUSAL_CONV1D_DETERMINISTIC", "1")
    args = _bwd_args(device)
    ref = _clone(args)
    args[0] = torch.randn(16, 37, 2, device=device).permute(2, 0, 1).copy_(ref[0])  # neither layout
    assert args[0].stride(2) != 1 and args[0].stride(1) != 1
    _eager.bwd(*args)
    assert spies["bwd"].calls == 1
    _bwd_ref(ref)
    assert all(torch.equal(args[i], ref[i]) for i in (7, 8, 9))
    args = _bwd_args(device)
    ref = _clone(args)
    args[3] = ref[3].transpose(1, 2).contiguous().transpose(1, 2)  # dout channel-last, x channel-first
    _eager.bwd(*args)
    assert spies["bwd"].calls == 2
    _bwd_ref(ref)
    assert all(torch.equal(args[i], ref[i]) for i in (7, 8, 9))
    monkeypatch.setenv("CAUSAL_CONV1D_DETERMINISTIC", "yes")
    with pytest.raises(ValueError, match="CAUSAL_CONV1D_DETERMINISTIC must be 0 or 1"):
        _eager.bwd(*_bwd_args(device))
    assert spies["bwd"].calls == 3


def test_errors_are_the_overloads(device):
    # Through the fast path (plain tensors): the op's own checks, translated as torch.ops translates them.
    cases = []
    args = _fwd_args(device)
    args[0] = args[0][0]
    cases.append((_eager.fwd, ops.fwd.default, args))
    args = _update_args(device)
    args[2] = args[2].double()
    cases.append((_eager.update, ops.update.default, args))
    args = _functional_args(device)
    args[6] = torch.tensor([0, 1, 7], dtype=torch.int64, device=device)
    cases.append((_eager.update_functional, ops.update_functional.default, args))
    args = _bwd_args(device)
    args[3] = args[3][:, :8]  # dout of another shape than x
    cases.append((_eager.bwd, lambda *a: ops.bwd.default(*a, False), args))
    for entry, overload, args in cases:
        with pytest.raises(Exception) as entry_error:
            entry(*args)
        with pytest.raises(Exception) as overload_error:
            overload(*args)
        assert type(entry_error.value) is type(overload_error.value)
        assert str(entry_error.value).splitlines()[0] == str(overload_error.value).splitlines()[0]
        assert str(entry_error.value).startswith("causal_conv1d_")


def test_in_place_version_counters_as_overload(device):
    args = _update_args(device)
    ref = _clone(args)
    before = (args[1]._version, args[4]._version)
    before_ref = (ref[1]._version, ref[4]._version)
    _eager.update(*args)
    ops.update.default(*ref)
    assert (args[1]._version - before[0], args[4]._version - before[1]) == (
        ref[1]._version - before_ref[0], ref[4]._version - before_ref[1])


class _Tagged(torch.Tensor):
    """A subclass whose __torch_function__ records the functions it sees."""

    seen = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.seen.append(func)
        return super().__torch_function__(func, types, args, kwargs or {})


def test_subclasses_and_function_modes_see_the_op(device, spies):
    args = _update_args(device)
    args[0] = args[0].as_subclass(_Tagged)
    _Tagged.seen.clear()
    _eager.update(*args)
    assert spies["update"].calls == 1 and ops.update.default in _Tagged.seen

    class Mode(TorchFunctionMode):
        seen = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            Mode.seen.append(func)
            return func(*args, **(kwargs or {}))

    with Mode():
        _eager.update_functional(*_functional_args(device))
    assert spies["update_functional"].calls == 1 and ops.update_functional.default in Mode.seen


def test_dispatch_modes_and_profiler_see_the_op(device, spies):
    class Mode(TorchDispatchMode):
        seen = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Mode.seen.append(func)
            return func(*args, **(kwargs or {}))

    with Mode():
        _eager.update(*_update_args(device))  # plain tensors: the fast path, the dispatcher calls the mode
    assert spies["update"].calls == 0 and ops.update.default in Mode.seen
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        _eager.fwd(*_fwd_args(device))
    assert spies["fwd"].calls == 0
    assert any(e.name == "causal_conv1d::fwd" for e in prof.events())


def test_compile_traces_the_compat_forms(device):
    # The compat module's out-taking forms, compiled whole: dynamo traces the overloads, not the entry.
    fwd_args = _fwd_args(device, channel_last=True)
    upd_args = _update_args(device)

    bwd_args = _bwd_args(device, channel_last=True)

    def f(x, w, b, out, xs, state, out_step, dout, dx, dw, db):
        causal_conv1d_cuda.causal_conv1d_fwd(x, w, b, None, None, out, None, True)
        causal_conv1d_cuda.causal_conv1d_update(xs, state, w, b, out_step, True, None, None)
        returned = causal_conv1d_cuda.causal_conv1d_update(xs, state, w, b, True)
        causal_conv1d_cuda.causal_conv1d_bwd(x, w, b, dout, None, None, None, dx, dw, db, None, True)
        return out * 2, out_step + 1, returned - 1, dx + 1, dw * 2, db * 2

    ref_fwd, ref_upd, ref_bwd = _clone(fwd_args), _clone(upd_args), _clone(bwd_args)
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    got = compiled(fwd_args[0], fwd_args[1], fwd_args[2], fwd_args[5], upd_args[0], upd_args[1], upd_args[4],
                   bwd_args[3], bwd_args[7], bwd_args[8], bwd_args[9])
    want = f(ref_fwd[0], ref_fwd[1], ref_fwd[2], ref_fwd[5], ref_upd[0], ref_upd[1], ref_upd[4], ref_bwd[3],
             ref_bwd[7], ref_bwd[8], ref_bwd[9])
    for g, r in zip(got, want):
        torch.testing.assert_close(g, r)
    torch.testing.assert_close(upd_args[1], ref_upd[1], rtol=0, atol=0)


def test_bind_checks_its_arguments():
    with pytest.raises(TypeError, match="fwd, update, update_functional and bwd fallbacks"):
        _eager.bind(ops.fwd.default)
    with pytest.raises(TypeError, match="not callable"):
        _eager.bind(ops.fwd.default, None, ops.update_functional.default, _core.bwd_into)
    _eager.update(*_update_args("cpu"))  # a failed bind() leaves the previous binding in place
