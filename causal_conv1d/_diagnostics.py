"""Which GPUs this build can run on, and whether its HIP runtime is the process's only one: the
import-time checks and show_config()."""

import glob
import os
import sys

import torch

from causal_conv1d._binary import gpu_archs
from causal_conv1d._ops import LIBRARY_PATH, build_config, ops

KFD_NODES = "/sys/class/kfd/kfd/topology/nodes"


def compiled_archs():
    """Archs this binary was built for, without feature suffixes (gfx90a:xnack- -> gfx90a)."""
    return [a.split(":")[0] for a in build_config()["gpu_archs"].split(",") if a]


def kfd_gpu_archs(nodes_dir=KFD_NODES):
    """AMD GPU archs of this machine read from the KFD topology in sysfs (what
    rocm_agent_enumerator reads): no HIP runtime is initialised, so this is safe at import.
    gfx_target_version is major * 10000 + minor * 100 + stepping, e.g. 120001 -> gfx1201."""
    archs = []
    for props in sorted(glob.glob(os.path.join(nodes_dir, "*", "properties"))):
        try:
            with open(props) as f:
                fields = dict(line.split(None, 1) for line in f if " " in line.strip())
            version = int(fields.get("gfx_target_version", "0"))
        except (OSError, ValueError):
            continue
        if version:
            archs.append(f"gfx{version // 10000}{(version // 100) % 100}{version % 100:x}")
    return archs


def loaded_hip_runtimes(maps_text=None):
    """The distinct HIP runtime files (libamdhip64.so*) mapped into this process, as real paths,
    read from /proc/self/maps (or from the given text of such a file)."""
    if maps_text is None:
        try:
            with open("/proc/self/maps") as f:
                maps_text = f.read()
        except OSError:
            return []
    files = set()
    for line in maps_text.splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and os.path.basename(parts[5]).startswith("libamdhip64.so"):
            path = parts[5].strip()
            files.add(os.path.realpath(path) if os.path.exists(path) else path)
    return sorted(files)


def check_single_hip_runtime(files):
    """Two different HIP runtimes in one process fail at the first kernel launch (or later, with an
    HSA error that names neither): refuse at import, naming both."""
    if len(files) > 1:
        raise ImportError(
            "causal_conv1d: two different HIP runtimes are loaded into this process: "
            + " and ".join(files)
            + ". The extension was built against a HIP whose library differs from PyTorch's. Rebuild it "
            "with the ROCm matching PyTorch (python -c 'import torch; print(torch.version.hip)'): "
            "ROCM_PATH=/opt/rocm-X.Y pip install --no-build-isolation . (docs/install.md: Which ROCm?)"
        )


def arch_supported(arch):
    """Whether this build's GPU code runs on a device of that arch ("gfx1201"; "90" for NVIDIA
    compute capability 9.0). The rule lives in the library (csrc/include/causal_conv1d/arch_check.h),
    the same one each GPU call applies."""
    return ops.arch_supported(arch)


def check_devices_at_import():
    """Refuses a HIP build that shares the process with a second HIP runtime (naming both files),
    or that runs on a machine none of whose AMD GPUs it has code for, naming both and the rebuild
    command (instead of a later 'invalid device function'). The arch check is skipped with
    CAUSAL_CONV1D_SKIP_ARCH_CHECK=1, or where sysfs does not list the GPUs; each GPU call checks
    its own device again."""
    if build_config()["backend"] == "hip":
        check_single_hip_runtime(loaded_hip_runtimes())
    if os.environ.get("CAUSAL_CONV1D_SKIP_ARCH_CHECK") == "1" or build_config()["backend"] != "hip":
        return
    present = kfd_gpu_archs()
    compiled = compiled_archs()
    if present and not any(arch_supported(a) for a in present):
        raise ImportError(
            f"causal_conv1d was built for {', '.join(compiled)} but this machine's GPUs are "
            f"{', '.join(sorted(set(present)))}. Rebuild for them: "
            f"CAUSAL_CONV1D_HIP_ARCHS={';'.join(sorted(set(present)))} pip install --no-build-isolation . "
            "(or set CAUSAL_CONV1D_SKIP_ARCH_CHECK=1 to use the CPU backend only)."
        )


def device_report():
    """(index, name, arch, supported) for every visible GPU (initialises the GPU runtime)."""
    backend = build_config()["backend"]
    rows = []
    if not torch.cuda.is_available():
        return rows
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        if torch.version.hip:
            arch = props.gcnArchName.split(":")[0]
            ok = backend == "hip" and arch_supported(arch)
        else:
            arch = f"{props.major}{props.minor}"
            ok = backend == "cuda" and arch_supported(arch)
        rows.append((i, props.name, arch, ok))
    return rows


def show_config(file=None):
    """Prints version, backend, compiled archs, PyTorch/ROCm versions and the visible GPUs."""
    import causal_conv1d

    out = file or sys.stdout
    cfg = build_config()
    print(f"causal_conv1d {causal_conv1d.__version__}", file=out)
    print(f"  library:        {LIBRARY_PATH}", file=out)
    print(f"  backend:        {cfg['backend']}", file=out)
    print(f"  compiled archs: {cfg['gpu_archs'] or '(none: CPU only)'}", file=out)
    if cfg["backend"] == "hip":
        print(f"  code objects:   {', '.join(gpu_archs(LIBRARY_PATH)) or '(none found)'}", file=out)
    print(f"  built against:  PyTorch {cfg['torch_version']}", file=out)
    if cfg["backend"] == "hip":
        print(f"  built with:     HIP {cfg.get('hip_version') or '?'} from {cfg.get('rocm_root') or '?'}", file=out)
    runtime = f"ROCm/HIP {torch.version.hip}" if torch.version.hip else (
        f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU only")
    print(f"  running with:   PyTorch {torch.__version__} ({runtime})", file=out)
    if cfg["backend"] == "hip":
        runtimes = loaded_hip_runtimes()
        print(f"  HIP runtime:    {', '.join(runtimes) or '(none loaded)'}", file=out)
    rows = device_report()
    if not rows:
        print("  GPUs:           none visible", file=out)
    for i, name, arch, ok in rows:
        print(f"  GPU {i}:          {name} ({arch}): {'supported' if ok else 'NOT supported by this build'}", file=out)
