#!/usr/bin/env bash
# The dev root: a Debian-unstable root holding the ROCm HIP toolchain, a CPU build of PyTorch and
# the test tools, so the HIP backend can be compiled for gfx1201 and the tests run on a machine
# with no AMD GPU and no ROCm install.
#
#   scripts/devroot.sh [--] CMD [ARGS...]   build the root if needed, run CMD inside it
#   scripts/devroot.sh --build              only build (or reuse) the root
#   scripts/devroot.sh --path               print the root's directory (building it if needed)
#   scripts/devroot.sh --clean              remove every cached root
#
# The root is cached under $CAUSAL_CONV1D_DEVROOT_CACHE (default /var/cache/causal-conv1d) in a
# directory named after a hash of scripts/devroot-packages.txt and this script's build recipe, so
# editing the package list builds a fresh root; older roots are removed once the new one is ready.
# CMD runs as root inside the root, in the repository, which is bind-mounted at the same path it
# has outside. All mounts live in a private mount namespace (unshare), so they vanish when CMD
# ends, fails or is interrupted; the exit status is CMD's.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
pkg_file=$repo/scripts/devroot-packages.txt
cache=${CAUSAL_CONV1D_DEVROOT_CACHE:-/var/cache/causal-conv1d}
suite=sid
# Bump when the recipe below changes in a way that needs a new root.
recipe_version=1

die() { echo "devroot: $*" >&2; exit 2; }

[[ $(id -u) == 0 ]] || die "must run as root (mmdebstrap, chroot and mount need it)"
[[ -f $pkg_file ]] || die "missing $pkg_file"

packages=$(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$pkg_file" | grep -v '^$' | sort -u | paste -sd, -)
key=$(printf '%s\n%s\n%s\n' "$recipe_version" "$suite" "$packages" | sha256sum | cut -c1-12)
root=$cache/root-$key

ensure_host_tools() {
  local missing=()
  command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
  command -v unshare >/dev/null || missing+=(util-linux)
  if ((${#missing[@]})); then
    echo "devroot: installing ${missing[*]} on the host" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

build_root() {
  [[ -f $root/.devroot-complete ]] && return 0
  ensure_host_tools
  mkdir -p "$cache"
  exec 9>"$cache/.lock"
  flock 9
  [[ -f $root/.devroot-complete ]] && return 0   # built by another process while we waited
  local tmp=$root.partial
  rm -rf "$tmp"
  echo "devroot: building $root (Debian $suite)" >&2
  local start=$SECONDS
  # The archive's unstable Release file can be older than apt's validity window.
  mmdebstrap --variant=apt \
    --aptopt='Acquire::Check-Valid-Until "false"' \
    --aptopt='APT::Install-Recommends "false"' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --include="$packages" \
    "$suite" "$tmp"
  touch "$tmp/.devroot-complete"
  mv "$tmp" "$root"
  echo "devroot: built in $((SECONDS - start)) s" >&2
  # Roots made from an older package list are dead weight (several GB each).
  local old
  for old in "$cache"/root-*; do
    [[ $old == "$root" ]] || rm -rf "$old"
  done
  flock -u 9
}

run_inside() {
  # Variables passed through to the inner command; everything else starts clean.
  local envs=(HOME=/root LANG=C.UTF-8 LC_ALL=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
              PIP_BREAK_SYSTEM_PACKAGES=1 PYTHONDONTWRITEBYTECODE=1 CAUSAL_CONV1D_IN_DEVROOT=1)
  local v
  for v in $(compgen -e); do
    case $v in
      CAUSAL_CONV1D_*|PYTORCH_ROCM_ARCH|HIP_ARCHITECTURES|MAX_JOBS|CMAKE_BUILD_PARALLEL_LEVEL|PYTEST_ADDOPTS|TERM|CI)
        envs+=("$v=${!v}") ;;
    esac
  done
  # The mounts are made inside a private mount namespace: when the last process in it exits
  # (normally, on error or on Ctrl-C) the kernel drops them, so nothing is left mounted.
  exec unshare --mount --propagation private -- /bin/bash -c '
    set -e
    root=$1 repo=$2; shift 2
    mount -t proc proc "$root/proc"
    mount --rbind /dev "$root/dev"
    mount --rbind /sys "$root/sys"
    mount -t tmpfs tmpfs "$root/tmp"
    mkdir -p "$root$repo"
    mount --bind "$repo" "$root$repo"
    exec chroot "$root" /usr/bin/env -i "$@"
  ' devroot "$root" "$repo" "${envs[@]}" /bin/bash -c 'cd "$0" && exec "$@"' "$repo" "$@"
}

case ${1:-} in
  --build) build_root ;;
  --path) build_root; echo "$root" ;;
  --clean) rm -rf "$cache"/root-* ;;
  -h|--help|'') sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' ;;
  --) shift; (($#)) || die "no command given"; build_root; run_inside "$@" ;;
  *) build_root; run_inside "$@" ;;
esac
