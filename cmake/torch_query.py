"""What the build needs of the PyTorch in use, as key=value lines for cmake/TorchQuery.cmake:
version, HIP and CUDA versions, include directories, library directory, C++ ABI, extension
suffix, Python's header directory, ATen's parallel backend and the OpenMP runtime libtorch_cpu.so uses.

    <python> cmake/torch_query.py

It runs at configure time, with the Python the extension is built for and before the package
exists, so it imports nothing of the package: the ELF reader (DT_NEEDED, DT_SONAME) is
causal_conv1d/_binary.py's, loaded by path. tests/python/test_torch_query.py tests it.
"""

import importlib.util
import os
import re
import sysconfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# OpenMP runtimes: system libgomp.so.1, a wheel's own libgomp-<hash>.so.1 or libgomp.so.1 in
# torch/lib, LLVM libomp, Intel libiomp5.
OPENMP_LIBRARY = re.compile(r"lib(gomp|omp|iomp5)([-.].*)?\.so")


def load_binary_reader():
    """causal_conv1d/_binary.py as a module of its own (the package is not importable yet)."""
    path = os.path.join(ROOT, "causal_conv1d", "_binary.py")
    spec = importlib.util.spec_from_file_location("causal_conv1d_build_binary_reader", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def parallel_backend(parallel_info):
    """The backend torch.__config__.parallel_info() names ("OpenMP", "native thread pool", ...),
    or "unknown"."""
    for line in parallel_info.splitlines():
        if line.startswith("ATen parallel backend"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def mapped_openmp_runtimes(maps):
    """Paths of the OpenMP runtimes in a /proc/<pid>/maps text, in order of first appearance."""
    mapped = []
    for line in maps.splitlines():
        fields = line.split()
        path = fields[-1] if len(fields) >= 6 else ""
        if OPENMP_LIBRARY.match(os.path.basename(path)) and path not in mapped:
            mapped.append(path)
    return mapped


def openmp_runtime(mapped, needed, soname):
    """Among the mapped runtimes, the one whose soname (soname(path)) libtorch_cpu.so lists as
    DT_NEEDED (needed); else the only one mapped; else ""."""
    for path in mapped:
        if soname(path) in needed:
            return path
    return mapped[0] if len(mapped) == 1 else ""


def query():
    """The key=value pairs TorchQuery.cmake reads, in order."""
    import torch
    import torch.utils.cpp_extension as ce

    library_dir = os.path.join(os.path.dirname(torch.__file__), "lib")
    try:
        info = torch.__config__.parallel_info()
    except Exception:
        info = ""
    # The runtime libtorch_cpu.so uses, among those this process has mapped since `import torch`.
    elf = load_binary_reader()
    with open("/proc/self/maps") as f:
        mapped = mapped_openmp_runtimes(f.read())
    try:
        needed = elf.dynamic(os.path.join(library_dir, "libtorch_cpu.so"))[0]
    except OSError:
        needed = []
    omp = openmp_runtime(mapped, needed, lambda path: elf.dynamic(path)[1])
    return {
        "version": torch.__version__,
        "hip": torch.version.hip or "",
        "cuda": torch.version.cuda or "",
        "include_dirs": "|".join(ce.include_paths()),
        "library_dir": library_dir,
        "cxx11_abi": str(int(torch._C._GLIBCXX_USE_CXX11_ABI)),
        "ext_suffix": sysconfig.get_config_var("EXT_SUFFIX"),
        "python_include_dir": sysconfig.get_paths()["include"],
        "parallel": parallel_backend(info),
        "openmp_library": os.path.realpath(omp) if omp else "",
        "openmp_mapped": "|".join(mapped),
    }


def main():
    for key, value in query().items():
        print(f"{key}={value}")


if __name__ == "__main__":
    main()
