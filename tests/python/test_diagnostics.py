"""show_config, the import-time arch check, and the sysfs reader behind it."""

import io
import os
import subprocess
import sys

import pytest

from causal_conv1d import _diagnostics, show_config
from causal_conv1d._ops import build_config


def _fake_kfd(tmp_path, versions):
    for i, v in enumerate(versions):
        node = tmp_path / str(i)
        node.mkdir()
        (node / "properties").write_text(f"cpu_cores_count 0\ngfx_target_version {v}\nsimd_count 64\n")
    return str(tmp_path)


def test_kfd_arch_names(tmp_path):
    nodes = _fake_kfd(tmp_path, [0, 120001, 90010, 90402, 110000])
    assert _diagnostics.kfd_gpu_archs(nodes) == ["gfx1201", "gfx90a", "gfx942", "gfx1100"]


def test_import_check_names_both_archs_and_the_fix(tmp_path, monkeypatch):
    monkeypatch.setattr(_diagnostics.kfd_gpu_archs, "__defaults__", (_fake_kfd(tmp_path, [110001]),))
    monkeypatch.setattr(_diagnostics, "build_config", lambda: {"backend": "hip", "gpu_archs": "gfx1201"})
    monkeypatch.setattr(_diagnostics, "arch_supported", lambda a: a == "gfx1201")
    monkeypatch.delenv("CAUSAL_CONV1D_SKIP_ARCH_CHECK", raising=False)
    with pytest.raises(ImportError, match=r"built for gfx1201 but this machine's GPUs are gfx1101.*CAUSAL_CONV1D_HIP_ARCHS=gfx1101 pip install --no-build-isolation"):
        _diagnostics.check_devices_at_import()
    monkeypatch.setenv("CAUSAL_CONV1D_SKIP_ARCH_CHECK", "1")
    _diagnostics.check_devices_at_import()  # skipped on request


def test_import_check_passes_when_one_gpu_is_supported(tmp_path, monkeypatch):
    monkeypatch.setattr(_diagnostics.kfd_gpu_archs, "__defaults__", (_fake_kfd(tmp_path, [110001, 120001]),))
    monkeypatch.setattr(_diagnostics, "build_config", lambda: {"backend": "hip", "gpu_archs": "gfx1201,gfx942"})
    monkeypatch.setattr(_diagnostics, "arch_supported", lambda a: a in ("gfx1201", "gfx942"))
    _diagnostics.check_devices_at_import()


def test_arch_rule_comes_from_the_library():
    # The diagnostics ask the library's own rule (arch_check.h, covered by GoogleTest): the
    # build's archs are supported; on NVIDIA any newer compute capability runs the embedded PTX.
    cfg = build_config()
    compiled = [a.split(":")[0] for a in cfg["gpu_archs"].split(",") if a]
    for arch in compiled:
        assert _diagnostics.arch_supported(arch)
    assert not _diagnostics.arch_supported("gfx000")
    if cfg["backend"] == "cuda":
        assert _diagnostics.arch_supported(str(max(int(a) for a in compiled) + 10))
    if cfg["backend"] == "cpu":
        assert not compiled


def test_show_config_lists_the_build():
    buf = io.StringIO()
    show_config(file=buf)
    text = buf.getvalue()
    cfg = build_config()
    assert f"backend:        {cfg['backend']}" in text
    assert "PyTorch" in text and "GPU" in text
    if cfg["backend"] == "hip":
        for arch in cfg["gpu_archs"].split(","):
            assert arch in text


def test_python_dash_m():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-m", "causal_conv1d"], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.startswith("causal_conv1d ")


_MAPS = """\
7f00a000-7f00b000 r-xp 00000000 08:01 123 /opt/torch/lib/libamdhip64.so.6
7f00b000-7f00c000 r--p 00001000 08:01 123 /opt/torch/lib/libamdhip64.so.6
7f10a000-7f10b000 r-xp 00000000 08:01 456 /opt/rocm-7.0.0/lib/libamdhip64.so.7.0.51831
7f20a000-7f20b000 r-xp 00000000 08:01 789 /usr/lib/x86_64-linux-gnu/libc.so.6
7f30a000-7f30b000 rw-p 00000000 00:00 0
"""


def test_loaded_hip_runtimes_reads_distinct_files():
    assert _diagnostics.loaded_hip_runtimes(_MAPS) == [
        "/opt/rocm-7.0.0/lib/libamdhip64.so.7.0.51831",
        "/opt/torch/lib/libamdhip64.so.6",
    ]
    assert _diagnostics.loaded_hip_runtimes("") == []


def test_two_hip_runtimes_refuse_import_naming_both():
    files = _diagnostics.loaded_hip_runtimes(_MAPS)
    with pytest.raises(ImportError, match=r"two different HIP runtimes are loaded") as err:
        _diagnostics.check_single_hip_runtime(files)
    assert "/opt/torch/lib/libamdhip64.so.6" in str(err.value)
    assert "/opt/rocm-7.0.0/lib/libamdhip64.so.7.0.51831" in str(err.value)
    assert "ROCM_PATH=/opt/rocm-X.Y" in str(err.value)
    _diagnostics.check_single_hip_runtime(files[:1])  # one runtime: fine
    _diagnostics.check_single_hip_runtime([])


def test_one_runtime_through_two_names_is_one(tmp_path):
    # The same file mapped under a link and its real name (lib/libamdhip64.so -> .so.6.4.43484).
    real = tmp_path / "libamdhip64.so.6.4.43484"
    real.write_bytes(b"")
    link = tmp_path / "libamdhip64.so"
    link.symlink_to(real.name)
    maps = f"1-2 r-xp 0 0:0 1 {real}\n3-4 r-xp 0 0:0 1 {link}\n"
    assert _diagnostics.loaded_hip_runtimes(maps) == [str(real)]


def test_this_process_has_at_most_one_hip_runtime():
    # What the import-time check saw: importing causal_conv1d did not fail, and the runtimes now
    # loaded are at most one (none in a CUDA or CPU build).
    runtimes = _diagnostics.loaded_hip_runtimes()
    assert len(runtimes) <= 1
    if build_config()["backend"] == "hip":
        assert runtimes, "a HIP build links libamdhip64"
