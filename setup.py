"""Build driver: setuptools hands the extension to CMake, which decides backend, archs and flags.

    pip install --no-build-isolation .        # or -e . for an editable install

Environment (all optional; CMake reads them, see cmake/GpuBackend.cmake and the README):
    CAUSAL_CONV1D_BACKEND      hip | cuda | cpu | auto (default: from the PyTorch build)
    CAUSAL_CONV1D_HIP_ARCHS    e.g. "gfx1201;gfx1100" (else PYTORCH_ROCM_ARCH, HIP_ARCHITECTURES)
    CAUSAL_CONV1D_CUDA_ARCHS   e.g. "90" (else TORCH_CUDA_ARCH_LIST)
    ROCM_PATH, HIP_PATH        the ROCm to build with (else ROCm Python packages, /opt/rocm, /usr)
    CAUSAL_CONV1D_ALLOW_HIP_MISMATCH  1 to build against a HIP whose major version differs from
                               PyTorch's (refused otherwise)
    CAUSAL_CONV1D_BUILD_DIR    CMake build directory (default: build/cmake-<python tag>-<hash of
                               the settings above>)
    CAUSAL_CONV1D_BUILD_TESTS  1 to also build the GoogleTest suite in that directory
    MAX_JOBS                   parallel compile jobs (default: CPU count)
"""

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


# Environment the CMake configure reads once and caches (cmake/GpuBackend.cmake); a build
# directory per combination keeps a change of these from being ignored by a stale cache.
CONFIG_ENV = (
    "CAUSAL_CONV1D_BACKEND",
    "CAUSAL_CONV1D_HIP_ARCHS",
    "PYTORCH_ROCM_ARCH",
    "HIP_ARCHITECTURES",
    "CAUSAL_CONV1D_CUDA_ARCHS",
    "TORCH_CUDA_ARCH_LIST",
    "ROCM_PATH",
    "HIP_PATH",
    "CAUSAL_CONV1D_ALLOW_HIP_MISMATCH",
)


def default_build_dir():
    settings = "\n".join(f"{k}={os.environ.get(k, '')}" for k in CONFIG_ENV)
    key = hashlib.sha256(f"{sys.executable}\n{settings}".encode()).hexdigest()[:10]
    return ROOT / "build" / f"cmake-{sys.implementation.cache_tag}-{key}"


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        if shutil.which("cmake") is None:
            raise RuntimeError("causal-conv1d needs CMake >= 3.21 on PATH to build")
        ext_path = Path(self.get_ext_fullpath(ext.name)).resolve()
        build_dir = Path(os.environ.get("CAUSAL_CONV1D_BUILD_DIR") or default_build_dir())
        tests_env = os.environ.get("CAUSAL_CONV1D_BUILD_TESTS", "")
        build_tests = tests_env not in ("", "0")
        configure = [
            "cmake", "-S", str(ROOT), "-B", str(build_dir),
            f"-DCAUSAL_CONV1D_PYTHON={sys.executable}",
            f"-DCAUSAL_CONV1D_EXT_OUTPUT_DIR={ext_path.parent}",
            f"-DCAUSAL_CONV1D_EXT_FILENAME={ext_path.name}",
        ]
        if tests_env:  # unset: keep what the build directory has (a test build stays one)
            configure.append(f"-DCAUSAL_CONV1D_BUILD_TESTS={'ON' if build_tests else 'OFF'}")
        if not (build_dir / "CMakeCache.txt").exists() and shutil.which("ninja"):
            configure += ["-G", "Ninja"]
        jobs = os.environ.get("MAX_JOBS") or str(os.cpu_count() or 1)
        build = ["cmake", "--build", str(build_dir), "--parallel", jobs]
        if not build_tests:
            build += ["--target", "_C"]
        subprocess.run(configure, check=True)
        subprocess.run(build, check=True)


setup(
    ext_modules=[CMakeExtension("causal_conv1d._C")],
    cmdclass={"build_ext": CMakeBuild},
)
