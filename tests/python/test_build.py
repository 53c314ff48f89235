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


_FAKE_TORCH = {
    "torch/__init__.py": "__version__ = '2.99.0'\nfrom . import _C, utils, version\n",
    "torch/version.py": "hip = None\ncuda = None\n",
    "torch/_C.py": "_GLIBCXX_USE_CXX11_ABI = True\n",
    "torch/utils/__init__.py": "from . import cpp_extension\n",
    "torch/utils/cpp_extension.py": (
        "import os\n"
        "def include_paths():\n"
        "    return [os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), 'include')]\n"
    ),
}


def test_configure_stops_when_torch_has_no_cpp_headers(tmp_path):
    # A PyTorch without its C++ headers (Debian's python3-torch without libtorch-dev, a stripped
    # wheel): the configure names the missing header and what provides it.
    import shutil
    import subprocess
    import sys

    if shutil.which("cmake") is None:
        pytest.skip("cmake not on PATH")
    fake = tmp_path / "site"
    for rel, text in _FAKE_TORCH.items():
        (fake / rel).parent.mkdir(parents=True, exist_ok=True)
        (fake / rel).write_text(text)
    (fake / "include" / "torch").mkdir(parents=True)  # the directory exists, the headers do not
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=str(fake), CAUSAL_CONV1D_BACKEND="cpu")
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    proc = subprocess.run(["cmake", "-S", repo, "-B", str(tmp_path / "build"), *gen,
                           f"-DCAUSAL_CONV1D_PYTHON={sys.executable}"], capture_output=True, text=True, env=env)
    text = " ".join((proc.stderr + proc.stdout).split())  # CMake wraps long messages
    assert proc.returncode != 0
    assert "PyTorch 2.99.0" in text and "has no C++ headers" in text, text
    assert "torch/library.h" in text and "libtorch-dev" in text, text


def _hip_check(tmp_path, found, torch, allow=""):
    """Runs cmake/HipVersionCheck.cmake's decision in script mode; returns (exit code, output)."""
    import shutil
    import subprocess

    if shutil.which("cmake") is None:
        pytest.skip("cmake not on PATH")
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    script = tmp_path / "check.cmake"
    script.write_text(
        f'include("{repo}/cmake/HipVersionCheck.cmake")\n'
        f'causal_conv1d_check_hip_versions("{found}" "/opt/rocm-x/lib/cmake/hip" "{torch}" '
        f'"torch.version.hip of python3" "{allow}")\n'
    )
    proc = subprocess.run(["cmake", "-P", str(script)], capture_output=True, text=True)
    return proc.returncode, " ".join((proc.stdout + proc.stderr).split())


@pytest.mark.parametrize(
    "found,torch,allow,ok,expect",
    [
        ("6.4.43484", "6.4.43484-2d6e21c8d", "", True, "matches PyTorch's HIP 6.4.43484-2d6e21c8d"),
        ("6.4.43484", "6.3.42131-fa1d09cbd", "", True, "CMake Warning"),
        ("7.0.51831", "6.4.43484-2d6e21c8d", "", False, "different major versions cannot share a process"),
        ("7.0.51831", "6.4.43484-2d6e21c8d", "1", True, "built anyway because CAUSAL_CONV1D_ALLOW_HIP_MISMATCH=1"),
        ("6.4.43484", "", "", True, "PyTorch is not a ROCm build"),
    ],
    ids=["same", "minor", "major", "major-allowed", "no-rocm-torch"],
)
def test_hip_version_check(tmp_path, found, torch, allow, ok, expect):
    # The configure-time rule: same major.minor fine, other minor a warning, other major an error
    # (unless overridden) naming both versions, their sources and the ROCm to use.
    rc, text = _hip_check(tmp_path, found, torch, allow)
    assert (rc == 0) == ok, text
    assert expect in text, text
    if torch:
        assert found in text and torch in text, "both versions are named"
    if not ok:
        assert "ROCM_PATH=/opt/rocm-6.4" in text and "CMAKE_PREFIX_PATH" in text, text
        assert "/opt/rocm-x/lib/cmake/hip" in text and "torch.version.hip of python3" in text, text


def test_cpu_ops_share_torchs_openmp_runtime():
    # The torch layer is compiled with OpenMP so that at::parallel_for uses PyTorch's threads
    # (cpu_ops.cpp refuses to compile otherwise), and is linked to the runtime torch already has:
    # a second OpenMP runtime would ignore torch.set_num_threads. After loading our library the
    # process maps exactly the OpenMP runtimes it mapped with torch alone.
    import re
    import subprocess
    import sys

    import torch

    code = (
        "import os, re, sys\n"
        "def omp():\n"
        "    found = set()\n"
        "    for line in open('/proc/self/maps'):\n"
        "        path = line.split()[-1]\n"
        "        if re.match(r'lib(gomp|omp|iomp5)([-.].*)?\\.so', os.path.basename(path)):\n"
        "            found.add(os.path.realpath(path))\n"
        "    return sorted(found)\n"
        "import torch\n"
        "before = omp()\n"
        "import causal_conv1d._ops\n"
        "print(before)\n"
        "print(omp())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    before, after = out[0], out[1]
    assert before == after, f"OpenMP runtimes with torch alone: {before}; after loading causal_conv1d: {after}"
    if "ATen parallel backend: OpenMP" in torch.__config__.parallel_info():
        assert re.search(r"gomp|omp", after), after


def _build_config_header(tmp_path, backend, archs="", rocm_root=""):
    """The build_config.h cmake/BuildConfig.cmake writes for these values: (path, text)."""
    import shutil
    import subprocess

    if shutil.which("cmake") is None:
        pytest.skip("cmake not on PATH")
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    script = tmp_path / "write.cmake"
    # The value goes through a file so that no CMake quoting rule touches it.
    (tmp_path / "rocm_root.txt").write_text(rocm_root)
    script.write_text(
        f'include("{repo}/cmake/BuildConfig.cmake")\n'
        f'file(READ "{tmp_path}/rocm_root.txt" _root)\n'
        f'causal_conv1d_write_build_config("{tmp_path}/inc" BACKEND {backend} GPU_ARCHS {archs} '
        f'TORCH_VERSION 2.99.0 ROCM_ROOT "${{_root}}")\n'
    )
    proc = subprocess.run(["cmake", "-P", str(script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    path = tmp_path / "inc" / "causal_conv1d" / "build_config.h"
    return path, path.read_text()


@pytest.mark.parametrize("backend,hip,cuda", [("hip", 1, 0), ("cuda", 0, 1), ("cpu", 0, 0)])
def test_build_config_header_names_one_backend(tmp_path, backend, hip, cuda):
    # The one place the sources learn the backend: 0/1 macros (at most one backend set) and the
    # strings build_config() reports.
    _, text = _build_config_header(tmp_path, backend, archs="gfx1201;gfx942" if hip else "")
    assert f"#define CAUSAL_CONV1D_BACKEND_HIP {hip}\n" in text, text
    assert f"#define CAUSAL_CONV1D_BACKEND_CUDA {cuda}\n" in text, text
    assert f'#define CAUSAL_CONV1D_BACKEND_NAME "{backend}"\n' in text, text
    assert ('#define CAUSAL_CONV1D_GPU_ARCHS "gfx1201,gfx942"\n' if hip else '#define CAUSAL_CONV1D_GPU_ARCHS ""\n') in text
    assert '#define CAUSAL_CONV1D_TORCH_VERSION "2.99.0"\n' in text, text


def test_build_config_header_rejects_an_unknown_backend(tmp_path):
    import subprocess

    _build_config_header(tmp_path, "cpu")  # skips without cmake
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.run(["cmake", f"-DOUTPUT_DIR={tmp_path}/x", "-DBACKEND=rocm", "-P",
                           os.path.join(repo, "cmake", "BuildConfig.cmake")], capture_output=True, text=True)
    assert proc.returncode != 0
    assert "BACKEND must be hip, cuda or cpu, got 'rocm'" in " ".join(proc.stderr.split())


def test_build_config_header_strings_are_c_literals(tmp_path):
    # A ROCm root with a quote and a backslash still gives a C string of exactly that text.
    import shutil
    import subprocess

    cxx = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler on PATH")
    root = 'C:\\rocm "6.4"'
    path, _ = _build_config_header(tmp_path, "hip", archs="gfx1201", rocm_root=root)
    src = tmp_path / "print.cpp"
    src.write_text('#include <cstdio>\n#include "causal_conv1d/build_config.h"\n'
                   "#if !CAUSAL_CONV1D_HAS_GPU || !CAUSAL_CONV1D_BACKEND_HIP || CAUSAL_CONV1D_BACKEND_CUDA\n"
                   '#error "a HIP build_config.h"\n#endif\n'
                   "int main() { std::fputs(CAUSAL_CONV1D_ROCM_ROOT, stdout); }\n")
    exe = tmp_path / "print"
    subprocess.run([cxx, "-Werror=undef", f"-I{path.parent.parent}", str(src), "-o", str(exe)], check=True)
    assert subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout == root
