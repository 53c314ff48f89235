"""Build driver: setuptools hands the extension to CMake, which decides backend, archs and flags.

    pip install --no-build-isolation .        # or -e . for an editable install

The build settings are environment variables, all optional: BUILD_SETTINGS below lists them and
docs/install.md ("Build settings") says what each does.
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


# Every environment variable the build reads, with its role:
#   "library"  passed to CMake; the default build directory is one per combination of these
#   "tests"    passed to CMake; only the GoogleTest suite depends on it
#   "driver"   read by setup.py itself
# Each one passed to CMake goes on every configure, as -D<name>=<value> when set and as -U<name>
# when unset or empty, so CMake never keeps a value an earlier configure left in its cache
# (cmake/BuildSettings.cmake). docs/install.md documents each; tests/python/test_build_settings.py
# checks that this list, that table and the variables setup.py and cmake/ read agree.
BUILD_SETTINGS = (
    ("CAUSAL_CONV1D_BACKEND", "library"),
    ("CAUSAL_CONV1D_HIP_ARCHS", "library"),
    ("PYTORCH_ROCM_ARCH", "library"),
    ("HIP_ARCHITECTURES", "library"),
    ("CAUSAL_CONV1D_CUDA_ARCHS", "library"),
    ("TORCH_CUDA_ARCH_LIST", "library"),
    ("ROCM_PATH", "library"),
    ("HIP_PATH", "library"),
    ("CAUSAL_CONV1D_ALLOW_HIP_MISMATCH", "library"),
    ("CAUSAL_CONV1D_BUILD_TESTS", "tests"),
    ("CAUSAL_CONV1D_GTEST_SOURCE_DIR", "tests"),
    ("CAUSAL_CONV1D_BUILD_DIR", "driver"),
    ("MAX_JOBS", "driver"),
)


def setting(name):
    """A build setting's value, "" when unset."""
    assert name in dict(BUILD_SETTINGS), f"{name} is not in BUILD_SETTINGS"
    return os.environ.get(name, "")


def cmake_setting_args():
    """-D<name>=<value> or -U<name> for every setting CMake reads."""
    args = []
    for name, role in BUILD_SETTINGS:
        if role != "driver":
            value = setting(name)
            args.append(f"-D{name}={value}" if value else f"-U{name}")
    return args


def default_build_dir():
    settings = "\n".join(f"{name}={setting(name)}" for name, role in BUILD_SETTINGS if role == "library")
    key = hashlib.sha256(f"{sys.executable}\n{settings}".encode()).hexdigest()[:10]
    return ROOT / "build" / f"cmake-{sys.implementation.cache_tag}-{key}"


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    """One CMake configure per build; each extension is its CMake target of the same name (_C, the
    op library; _eager, the eager entry), both written into the package directory setuptools
    expects _C in."""

    def build_extension(self, ext):
        if shutil.which("cmake") is None:
            raise RuntimeError("causal-conv1d needs CMake >= 3.21 on PATH to build")
        build_dir = Path(setting("CAUSAL_CONV1D_BUILD_DIR") or default_build_dir())
        if not getattr(self, "_cmake_configured", False):
            op_library = Path(self.get_ext_fullpath("causal_conv1d._C")).resolve()
            configure = [
                "cmake", "-S", str(ROOT), "-B", str(build_dir),
                f"-DCAUSAL_CONV1D_PYTHON={sys.executable}",
                f"-DCAUSAL_CONV1D_EXT_OUTPUT_DIR={op_library.parent}",
                f"-DCAUSAL_CONV1D_EXT_FILENAME={op_library.name}",
                *cmake_setting_args(),
            ]
            if not (build_dir / "CMakeCache.txt").exists() and shutil.which("ninja"):
                configure += ["-G", "Ninja"]
            subprocess.run(configure, check=True)
            self._cmake_configured = True
        jobs = setting("MAX_JOBS") or str(os.cpu_count() or 1)
        build = ["cmake", "--build", str(build_dir), "--parallel", jobs]
        if setting("CAUSAL_CONV1D_BUILD_TESTS") in ("", "0"):
            build += ["--target", ext.name.rsplit(".", 1)[1]]
        subprocess.run(build, check=True)


setup(
    ext_modules=[CMakeExtension("causal_conv1d._C"), CMakeExtension("causal_conv1d._eager")],
    cmdclass={"build_ext": CMakeBuild},
)
