"""cmake/torch_query.py: what the configure reads of the PyTorch in use, and its ELF reading,
which is causal_conv1d/_binary.py's (one reader for the build and the package)."""

import importlib.util
import os
import re
import subprocess
import sys

import pytest
import torch

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "cmake", "torch_query.py")


def load_torch_query():
    spec = importlib.util.spec_from_file_location("torch_query_under_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tq():
    return load_torch_query()


@pytest.fixture(scope="module")
def output():
    """The script's key=value lines, run as the configure runs it."""
    proc = subprocess.run([sys.executable, SCRIPT], capture_output=True, text=True, check=True)
    pairs = [line.split("=", 1) for line in proc.stdout.splitlines()]
    assert all(len(p) == 2 and re.fullmatch(r"[a-z_0-9]+", p[0]) for p in pairs), proc.stdout
    return dict(pairs)


def test_prints_every_key_the_cmake_module_reads(output):
    with open(os.path.join(ROOT, "cmake", "TorchQuery.cmake")) as f:
        read = set(re.findall(r"_torch_([a-z_0-9]+)\}", f.read()))
    assert read, "TorchQuery.cmake reads no _torch_<key>"
    assert read <= set(output), f"TorchQuery.cmake reads {sorted(read - set(output))}, which the script does not print"


def test_values_describe_this_torch(output):
    assert output["version"] == torch.__version__
    assert output["hip"] == (torch.version.hip or "") and output["cuda"] == (torch.version.cuda or "")
    assert output["library_dir"] == os.path.join(os.path.dirname(torch.__file__), "lib")
    assert output["cxx11_abi"] in ("0", "1")
    assert output["ext_suffix"].endswith(".so")
    assert output["parallel"] in torch.__config__.parallel_info()


def test_openmp_runtime_is_the_one_libtorch_cpu_needs(output, tq):
    if output["parallel"] != "OpenMP":
        pytest.skip(f"ATen parallelises with {output['parallel']}, not OpenMP")
    library = output["openmp_library"]
    assert library and os.path.exists(library), output
    elf = tq.load_binary_reader()
    needed = elf.dynamic(os.path.join(output["library_dir"], "libtorch_cpu.so"))[0]
    assert elf.dynamic(library)[1] in needed, (library, needed)


def test_parallel_backend(tq):
    info = "ATen/Parallel:\n\tat::get_num_threads() : 2\nATen parallel backend: OpenMP\nmkl_get_max_threads() : 2\n"
    assert tq.parallel_backend(info) == "OpenMP"
    assert tq.parallel_backend("ATen parallel backend: native thread pool") == "native thread pool"
    assert tq.parallel_backend("") == "unknown"


MAPS = """\
7f00-7f01 r--p 00000000 08:01 11 /usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0
7f01-7f02 r-xp 00001000 08:01 11 /usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0
7f02-7f03 r--p 00000000 08:01 12 /site/torch/lib/libgomp-a34b3233.so.1
7f03-7f04 r--p 00000000 08:01 13 /usr/lib/libgompfoo.so
7f04-7f05 rw-p 00000000 00:00 0
7f05-7f06 r--p 00000000 08:01 14 /usr/lib/llvm/lib/libomp.so.5
"""


def test_mapped_openmp_runtimes(tq):
    assert tq.mapped_openmp_runtimes(MAPS) == [
        "/usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0",
        "/site/torch/lib/libgomp-a34b3233.so.1",
        "/usr/lib/llvm/lib/libomp.so.5",
    ]


def test_openmp_runtime_choice(tq):
    sonames = {
        "/a/libgomp.so.1": "libgomp.so.1",
        "/b/libgomp-x.so.1": "libgomp-x.so.1",
        "/c/libomp.so.5": "libomp.so.5",
    }
    mapped = list(sonames)
    # The one libtorch_cpu.so names, wherever it is in the list.
    assert tq.openmp_runtime(mapped, ["libc10.so", "libgomp-x.so.1"], sonames.get) == "/b/libgomp-x.so.1"
    # None named: the only one mapped, else none.
    assert tq.openmp_runtime(["/c/libomp.so.5"], ["libc10.so"], sonames.get) == "/c/libomp.so.5"
    assert tq.openmp_runtime(mapped, ["libc10.so"], sonames.get) == ""
    assert tq.openmp_runtime([], [], sonames.get) == ""


def test_elf_reading_is_the_packages(tq):
    # One ELF reader: the script loads causal_conv1d/_binary.py and parses no ELF itself.
    elf = tq.load_binary_reader()
    assert os.path.samefile(elf.__file__, os.path.join(ROOT, "causal_conv1d", "_binary.py"))
    with open(SCRIPT) as f:
        source = f.read()
    assert "unpack" not in source and "\\x7fELF" not in source, "torch_query.py parses ELF itself"


def test_dynamic_reads_needed_and_soname(tq, tmp_path):
    elf = tq.load_binary_reader()
    lib_dir = os.path.join(os.path.dirname(torch.__file__), "lib")
    needed, soname = elf.dynamic(os.path.join(lib_dir, "libtorch_cpu.so"))
    assert soname.startswith("libtorch_cpu.so"), soname
    assert any(n.startswith("libc10.so") for n in needed), needed
    not_elf = tmp_path / "not_elf.so"
    not_elf.write_bytes(b"#!/bin/sh\n" * 8)
    assert elf.dynamic(str(not_elf)) == ([], "")
    empty = tmp_path / "empty.so"
    empty.write_bytes(b"")
    assert elf.dynamic(str(empty)) == ([], "")
