"""The build settings have one owner: setup.py's BUILD_SETTINGS.

Every environment variable setup.py or the CMake files read is in that list, the list and the
"Build settings" table of docs/install.md name the same variables, every setting the list hands to
CMake is one CMake uses, and a setting unset since the last configure of a build directory is
unset for CMake too (setup.py passes -U for it) instead of keeping its old cached value.
"""

import ast
import glob
import os
import re
import shutil
import subprocess

import pytest

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
SETUP = os.path.join(ROOT, "setup.py")

# Environment variables the CMake files read that are not build settings of ours: CMake's own
# HIPCXX (RocmToolchain.cmake leaves the compiler alone when it is set; CMake reads it only at
# the first configure, like CC and CXX).
CMAKE_OWN = {"HIPCXX"}


def cmake_files():
    files = [os.path.join(ROOT, "CMakeLists.txt"), os.path.join(ROOT, "tests", "cpp", "CMakeLists.txt")]
    files += glob.glob(os.path.join(ROOT, "cmake", "*.cmake")) + glob.glob(os.path.join(ROOT, "tests", "cpp", "*.cmake"))
    return sorted(files)


def cmake_code(path):
    """The file without its comments (CMake comments run from # to the end of the line)."""
    with open(path) as f:
        return "\n".join(re.sub(r"#.*", "", line) for line in f)


def build_settings():
    """BUILD_SETTINGS of setup.py, read from its source (importing it would run setup())."""
    with open(SETUP) as f:
        tree = ast.parse(f.read(), SETUP)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "BUILD_SETTINGS" for t in node.targets):
            return dict(ast.literal_eval(node.value))
    raise AssertionError("setup.py has no BUILD_SETTINGS")


def setup_namespace():
    """setup.py's functions, without its setup() call."""
    with open(SETUP) as f:
        tree = ast.parse(f.read(), SETUP)
    tree.body = [
        n for n in tree.body
        if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Call) and getattr(n.value.func, "id", "") == "setup")
    ]
    namespace = {"__file__": SETUP, "__name__": "causal_conv1d_setup"}
    exec(compile(tree, SETUP, "exec"), namespace)
    return namespace


def docs_table_names():
    """The variables in the first column of docs/install.md's "Build settings" table."""
    with open(os.path.join(ROOT, "docs", "install.md")) as f:
        text = f.read()
    section = text.split("\n## Build settings\n", 1)[1].split("\n## ", 1)[0]
    names = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            names.update(re.findall(r"`([A-Z][A-Z0-9_]*)", line.split("|")[1]))
    return names


def env_reads_in_setup():
    with open(SETUP) as f:
        text = f.read()
    pattern = r"""(?:setting|os\.environ\.get|os\.getenv)\(\s*["']([A-Z0-9_]+)["']|os\.environ\[\s*["']([A-Z0-9_]+)["']"""
    return {a or b for a, b in re.findall(pattern, text)}


def env_reads_in_cmake():
    """Variables the CMake files read from the environment, by name: $ENV{X}, DEFINED ENV{X},
    find_* hints `ENV X`, and causal_conv1d_setting(X ...) (which fills X from the environment)."""
    names = {}
    for path in cmake_files():
        code = cmake_code(path)
        found = set(re.findall(r"ENV\{([A-Za-z0-9_]+)\}", code))
        found |= set(re.findall(r"\bENV\s+([A-Z][A-Z0-9_]+)", code))
        found |= set(re.findall(r"causal_conv1d_setting\(\s*([A-Za-z0-9_]+)", code))
        for name in found:
            names.setdefault(name, os.path.relpath(path, ROOT))
    return names


def test_every_variable_setup_py_reads_is_a_build_setting():
    settings = build_settings()
    missing = sorted(env_reads_in_setup() - set(settings))
    assert not missing, f"setup.py reads {missing}, which BUILD_SETTINGS does not list"


def test_every_variable_cmake_reads_is_a_build_setting_setup_py_passes():
    settings = build_settings()
    reads = env_reads_in_cmake()
    assert "CAUSAL_CONV1D_BACKEND" in reads and "ROCM_PATH" in reads, reads  # the scan finds them
    for name, where in sorted(reads.items()):
        if name in CMAKE_OWN:
            continue
        assert name in settings, f"{where} reads {name} from the environment; BUILD_SETTINGS does not list it"
        # CMake would fill it from the environment once and keep it cached afterwards.
        assert settings[name] != "driver", f"{where} reads {name}, but setup.py does not pass it to CMake"


def test_every_setting_passed_to_cmake_is_used_there():
    code = "\n".join(cmake_code(path) for path in cmake_files())
    for name, role in build_settings().items():
        if role != "driver":
            assert re.search(rf"\b{name}\b", code), f"setup.py passes {name} to CMake, which does not use it"


def test_docs_table_lists_exactly_the_build_settings():
    settings, table = set(build_settings()), docs_table_names()
    assert not settings - table, f"docs/install.md's Build settings table lacks {sorted(settings - table)}"
    assert not table - settings, f"docs/install.md's Build settings table has {sorted(table - settings)}, " \
                                 "which BUILD_SETTINGS does not list"


def test_roles_are_known():
    for name, role in build_settings().items():
        assert role in ("library", "tests", "driver"), (name, role)


def test_cmake_args_pass_set_values_and_unset_the_others(monkeypatch):
    ns = setup_namespace()
    for name in ns["BUILD_SETTINGS"]:
        monkeypatch.delenv(name[0], raising=False)
    monkeypatch.setenv("CAUSAL_CONV1D_BACKEND", "cpu")
    monkeypatch.setenv("ROCM_PATH", "")  # empty counts as unset
    monkeypatch.setenv("MAX_JOBS", "3")
    args = ns["cmake_setting_args"]()
    assert "-DCAUSAL_CONV1D_BACKEND=cpu" in args
    assert "-UROCM_PATH" in args and "-UCAUSAL_CONV1D_HIP_ARCHS" in args and "-UCAUSAL_CONV1D_BUILD_TESTS" in args
    assert not [a for a in args if "MAX_JOBS" in a or "CAUSAL_CONV1D_BUILD_DIR" in a], args
    passed = {a[2:].split("=", 1)[0] for a in args}
    assert passed == {n for n, role in ns["BUILD_SETTINGS"] if role != "driver"}


def _configure(project, build, args, env):
    gen = ["-G", "Ninja"] if shutil.which("ninja") and not (build / "CMakeCache.txt").exists() else []
    proc = subprocess.run(["cmake", "-S", str(project), "-B", str(build), *gen, *args], capture_output=True,
                          text=True, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return dict(re.findall(r"^-- setting (\w+)=\[(.*)\]$", proc.stdout, re.M))


def test_unset_setting_does_not_keep_its_cached_value(tmp_path, monkeypatch):
    # A CMake project declaring the settings as CMakeLists.txt does, configured the way setup.py
    # configures: the environment of each run decides, whatever an earlier configure cached.
    if shutil.which("cmake") is None:
        pytest.skip("cmake not on PATH")
    ns = setup_namespace()
    names = ["CAUSAL_CONV1D_BACKEND", "CAUSAL_CONV1D_HIP_ARCHS", "PYTORCH_ROCM_ARCH"]
    project = tmp_path / "project"
    project.mkdir()
    lines = ["cmake_minimum_required(VERSION 3.21)", "project(settings NONE)",
             f'include("{ROOT}/cmake/BuildSettings.cmake")']
    for name in names:
        lines += [f'causal_conv1d_setting({name} STRING "")', f'message(STATUS "setting {name}=[${{{name}}}]")']
    lines.append('causal_conv1d_first_setting(archs CAUSAL_CONV1D_HIP_ARCHS PYTORCH_ROCM_ARCH)')
    lines.append('message(STATUS "setting archs=[${archs}]")')
    lines.append('message(STATUS "setting archs_source=[${archs_SOURCE}]")')
    (project / "CMakeLists.txt").write_text("\n".join(lines) + "\n")
    build = tmp_path / "build"

    def pip_configure(**env):
        for name, _ in ns["BUILD_SETTINGS"]:
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        return _configure(project, build, ns["cmake_setting_args"](), dict(os.environ))

    first = pip_configure(CAUSAL_CONV1D_BACKEND="cpu", PYTORCH_ROCM_ARCH="gfx90a")
    assert first["CAUSAL_CONV1D_BACKEND"] == "cpu" and first["archs"] == "gfx90a", first
    assert first["archs_source"] == "environment PYTORCH_ROCM_ARCH", first
    # A re-configure by the build tool (no arguments, another environment) keeps the values.
    for name, _ in ns["BUILD_SETTINGS"]:
        monkeypatch.delenv(name, raising=False)
    again = _configure(project, build, [], dict(os.environ))
    assert again["CAUSAL_CONV1D_BACKEND"] == "cpu" and again["archs"] == "gfx90a", again
    # The next pip build, with the variables unset or changed: nothing of the first one is left.
    second = pip_configure(CAUSAL_CONV1D_HIP_ARCHS="gfx1201")
    assert second["CAUSAL_CONV1D_BACKEND"] == "" and second["PYTORCH_ROCM_ARCH"] == "", second
    assert second["archs"] == "gfx1201" and second["archs_source"] == "environment CAUSAL_CONV1D_HIP_ARCHS", second
