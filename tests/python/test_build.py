"""The built library is what was asked for: backend, and (HIP) code objects for each arch."""

import os

import pytest

from causal_conv1d._binary import gpu_archs
from causal_conv1d._ops import LIBRARY_PATH, build_config


def test_hip_library_carries_exactly_the_built_archs():
    cfg = build_config()
    if cfg["backend"] != "hip":
        pytest.skip(f"{cfg['backend']} build: no AMD code objects expected")
    assert gpu_archs(LIBRARY_PATH) == sorted(cfg["gpu_archs"].split(","))


@pytest.mark.skipif(
    "CAUSAL_CONV1D_EXPECT_BACKEND" not in os.environ,
    reason="set CAUSAL_CONV1D_EXPECT_BACKEND (scripts/test.sh does) to check the build",
)
def test_build_is_the_expected_one():
    cfg = build_config()
    assert cfg["backend"] == os.environ["CAUSAL_CONV1D_EXPECT_BACKEND"]
    expected_archs = os.environ.get("CAUSAL_CONV1D_EXPECT_ARCHS")
    if expected_archs:
        assert cfg["gpu_archs"].split(",") == expected_archs.split(",")
        if cfg["backend"] == "hip":
            assert gpu_archs(LIBRARY_PATH) == sorted(expected_archs.split(","))


def _gpu_visible_to_rocm():
    import causal_conv1d._diagnostics as d

    return bool(d.kfd_gpu_archs())


@pytest.mark.skipif(build_config()["backend"] != "hip", reason="HIP builds only")
def test_auto_arch_without_gpu_fails_clearly(tmp_path):
    # CAUSAL_CONV1D_HIP_ARCHS=auto on a machine without a visible AMD GPU must stop the configure
    # with a message, not fall back to some arch or to "native".
    import shutil
    import subprocess
    import sys

    if _gpu_visible_to_rocm():
        pytest.skip("an AMD GPU is visible: auto would succeed here")
    if shutil.which("cmake") is None:
        pytest.skip("cmake not on PATH")
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, CAUSAL_CONV1D_BACKEND="hip", CAUSAL_CONV1D_HIP_ARCHS="auto")
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    proc = subprocess.run(["cmake", "-S", repo, "-B", str(tmp_path), *gen, f"-DCAUSAL_CONV1D_PYTHON={sys.executable}"],
                          capture_output=True, text=True, env=env)
    assert proc.returncode != 0
    assert "CAUSAL_CONV1D_HIP_ARCHS=auto found no AMD GPU" in proc.stderr + proc.stdout
