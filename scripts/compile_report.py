#!/usr/bin/env python3
"""Per-kernel resource report of the HIP kernels, from the compiler itself.

Compiles every csrc/kernels/*.hip for each requested AMD arch with
`hipcc --cuda-device-only -Rpass-analysis=kernel-resource-usage` and prints, per kernel
instantiation: VGPRs, SGPRs, scratch bytes/lane, spills, LDS bytes/block and occupancy
(waves/SIMD). With --check it fails (exit 1) on any scratch use or spill, LDS over 64 KB, or an
occupancy of the forward and update kernels below the arch's floor (--min-occupancy; default 12
waves/SIMD on RDNA3/4, 6 on gfx942/gfx90a), or of the backward kernels below theirs
(BWD_FLOORS: the occupancies their tuning-table rows ask for). SGPR spills (to VGPR lanes, no memory traffic) fail
on the primary arch (gfx1201) and are noted elsewhere.

The kernels include the generated build_config.h (the backend macros); outside a CMake build this
script writes a HIP one for the requested archs with cmake/BuildConfig.cmake (`cmake -P`, so CMake
must be on PATH) into a scratch directory, as the CMake build does at configure time.

Run it in the dev root (or on a ROCm machine):

    scripts/devroot.sh scripts/compile_report.py --check
    scripts/devroot.sh scripts/compile_report.py --arch gfx1201 gfx942 --markdown report.md
"""

import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LDS_LIMIT = 64 * 1024
# Kernel families held to the --min-occupancy floors (the forward and decode kernels; the backward
# has its own, BWD_FLOORS). Floors in waves/SIMD per arch: the tuning table
# (csrc/kernels/tuning.h) asks the compiler for exactly these through the launch bounds.
OCCUPANCY_FAMILIES = ("fwd_channel_first_kernel", "fwd_channel_last_kernel", "update_kernel", "update_decode_kernel",
                      "serving_fwd_kernel", "serving_fwd_states_kernel", "serving_update_kernel")
DEFAULT_FLOORS = ["gfx1201=12", "gfx1200=12", "gfx1100=12", "gfx942=6", "gfx90a=6"]
# The backward kernels' floors per family and arch (csrc/kernels/tuning.h, bwd_cf_tuning /
# bwd_cl_tuning): a kernel that needs more registers than its row allows would spill (checked
# above) or silently run at a lower occupancy than the row's reason assumes.
BWD_FLOORS = {
    "bwd_channel_first_kernel": {"gfx1201": 12, "gfx1200": 12, "gfx1100": 12, "gfx942": 4, "gfx90a": 4},
    "bwd_channel_last_kernel": {"gfx1201": 12, "gfx1200": 12, "gfx1100": 12, "gfx942": 5, "gfx90a": 5},
}

FIELDS = {
    "TotalSGPRs": "sgprs",
    "SGPRs": "sgprs",
    "VGPRs": "vgprs",
    "AGPRs": "agprs",
    "ScratchSize [bytes/lane]": "scratch",
    "Occupancy [waves/SIMD]": "occupancy",
    "SGPRs Spill": "sgpr_spill",
    "VGPRs Spill": "vgpr_spill",
    "LDS Size [bytes/block]": "lds",
}


def write_build_config(include_dir, archs):
    """The HIP build's causal_conv1d/build_config.h under include_dir, as CMake writes it."""
    cmd = ["cmake", f"-DOUTPUT_DIR={include_dir}", "-DBACKEND=hip", f"-DGPU_ARCHS={';'.join(archs)}",
           "-P", os.path.join(REPO, "cmake", "BuildConfig.cmake")]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"writing build_config.h failed:\n{proc.stdout}{proc.stderr}")


def compile_one(hipcc, source, arch, config_dir):
    cmd = [hipcc, "-x", "hip", f"--offload-arch={arch}", "--cuda-device-only", "-c", "-O3", "-DNDEBUG",
           "-std=c++17", f"-I{os.path.join(REPO, 'csrc', 'include')}", f"-I{config_dir}",
           "-Rpass-analysis=kernel-resource-usage", "-o", os.devnull, source]
    start = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"compile failed for {source} ({arch}):\n{proc.stderr[-4000:]}")
    return parse(proc.stderr, arch, source), time.time() - start


def parse(text, arch, source):
    kernels, cur = [], None
    for line in text.splitlines():
        m = re.search(r"remark: +Function Name: (\S+)", line)
        if m:
            cur = {"arch": arch, "file": os.path.basename(source), "mangled": m.group(1)}
            kernels.append(cur)
            continue
        m = re.search(r"remark: +([A-Za-z][^:]*?): (\S+) \[-Rpass-analysis", line)
        if m and cur is not None and m.group(1) in FIELDS:
            value = m.group(2)
            cur[FIELDS[m.group(1)]] = int(value) if value.lstrip("-").isdigit() else value
    return kernels


def demangle(names):
    for tool in ("llvm-cxxfilt-21", "llvm-cxxfilt", "c++filt"):
        try:
            out = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True, check=True)
            return out.stdout.splitlines()
        except (OSError, subprocess.CalledProcessError):
            continue
    return names


def short_name(demangled):
    """causal_conv1d::gpu::(anonymous namespace)::fwd_kernel<...>(Params) -> fwd_kernel<...>"""
    name = re.sub(r"causal_conv1d::(gpu::)?(\(anonymous namespace\)::)?", "", demangled)
    name = re.sub(r"\(.*\)$", "", name)
    name = re.sub(r"^void ", "", name)
    return name.replace("(bool)", "")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", nargs="+", default=["gfx1201", "gfx942"])
    ap.add_argument("--primary", default="gfx1201", help="arch on which SGPR spills are a limit, not a note")
    ap.add_argument("--min-occupancy", nargs="+", default=DEFAULT_FLOORS, metavar="ARCH=WAVES",
                    help="occupancy floor (waves/SIMD) per arch for the forward and update kernels")
    ap.add_argument("--sources", nargs="+", default=None)
    ap.add_argument("--hipcc", default=os.environ.get("HIPCC", "hipcc"))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--json", help="write every kernel's numbers here")
    ap.add_argument("--markdown", help="write the per-family summary table here")
    ap.add_argument("--check", action="store_true", help="exit 1 on a violated limit")
    ap.add_argument("--full", action="store_true", help="print every instantiation, not just families")
    args = ap.parse_args()
    floors = {a: int(n) for a, n in (f.split("=") for f in args.min_occupancy)}

    sources = args.sources or sorted(
        os.path.join(REPO, "csrc", "kernels", f) for f in os.listdir(os.path.join(REPO, "csrc", "kernels"))
        if f.endswith(".hip"))
    jobs = [(s, a) for a in args.arch for s in sources]
    kernels, start = [], time.time()
    with tempfile.TemporaryDirectory() as config_dir, \
            concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        write_build_config(config_dir, args.arch)
        for found, _ in pool.map(lambda j: compile_one(args.hipcc, j[0], j[1], config_dir), jobs):
            kernels.extend(found)
    for k, d in zip(kernels, demangle([k["mangled"] for k in kernels])):
        k["kernel"] = short_name(d)
        k["family"] = k["kernel"].split("<")[0]
    print(f"compiled {len(sources)} files for {' '.join(args.arch)} in {time.time() - start:.0f} s; "
          f"{len(kernels)} kernel instantiations")

    # Per (arch, family) summary: the worst case over instantiations.
    summary = {}
    for k in kernels:
        s = summary.setdefault((k["arch"], k["family"]), {"n": 0, "vgprs": 0, "sgprs": 0, "scratch": 0,
                                                           "vspills": 0, "sspills": 0, "lds": 0, "occupancy": 99})
        s["n"] += 1
        s["vgprs"] = max(s["vgprs"], k.get("vgprs", 0))
        s["sgprs"] = max(s["sgprs"], k.get("sgprs", 0))
        s["scratch"] = max(s["scratch"], k.get("scratch", 0))
        s["vspills"] += k.get("vgpr_spill", 0)
        s["sspills"] += k.get("sgpr_spill", 0)
        s["lds"] = max(s["lds"], k.get("lds", 0))
        s["occupancy"] = min(s["occupancy"], k.get("occupancy", 0))

    header = ("| arch | kernel | instantiations | max VGPRs | max SGPRs | scratch B/lane | VGPR spills "
              "| SGPR spills | max LDS B | min occupancy (waves/SIMD) |")
    rows = [header, "|" + "---|" * 10]
    for (arch, fam), s in sorted(summary.items()):
        rows.append(f"| {arch} | {fam} | {s['n']} | {s['vgprs']} | {s['sgprs']} | {s['scratch']} | {s['vspills']} "
                    f"| {s['sspills']} | {s['lds']} | {s['occupancy']} |")
    table = "\n".join(rows)
    print(table)
    if args.full:
        for k in kernels:
            print(f"{k['arch']:8} {k['kernel']}: VGPRs {k.get('vgprs')} SGPRs {k.get('sgprs')} "
                  f"scratch {k.get('scratch')} spills {k.get('vgpr_spill', 0) + k.get('sgpr_spill', 0)} "
                  f"LDS {k.get('lds')} occupancy {k.get('occupancy')}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(kernels, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table + "\n")

    problems, notes = [], []
    for k in kernels:
        where = f"{k['arch']} {k['kernel']}"
        if k.get("scratch", 0) > 0:
            problems.append(f"{where}: scratch {k['scratch']} bytes/lane")
            # SGPR spills go to VGPR lanes (no memory traffic): a limit on the primary arch, a note on
        # the others; VGPR spills and scratch are limits everywhere.
        if k.get("vgpr_spill", 0) or (k.get("sgpr_spill", 0) and k["arch"] == args.primary):
            problems.append(f"{where}: spills (VGPR {k.get('vgpr_spill')}, SGPR {k.get('sgpr_spill')})")
        elif k.get("sgpr_spill", 0):
            notes.append(f"{where}: {k['sgpr_spill']} SGPRs spilled to VGPR lanes")
        if k.get("lds", 0) > LDS_LIMIT:
            problems.append(f"{where}: LDS {k['lds']} bytes > 64 KB")
        floor = floors.get(k["arch"], 0) if k["family"] in OCCUPANCY_FAMILIES else 0
        floor = BWD_FLOORS.get(k["family"], {}).get(k["arch"], floor)
        if k.get("occupancy", 0) < floor:
            problems.append(f"{where}: occupancy {k.get('occupancy')} < {floor} waves/SIMD")
    if not kernels:
        problems.append("no kernels found")
    if notes:
        print(f"note: {len(notes)} instantiation(s) spill SGPRs to VGPR lanes, e.g. {notes[0]}")
    for p in problems:
        print("LIMIT:", p)
    if problems and args.check:
        return 1
    print("all limits hold" if not problems else f"{len(problems)} limit(s) violated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
