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
