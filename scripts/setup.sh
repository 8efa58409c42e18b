#!/usr/bin/env bash
# Installs what tpukit needs on a fresh Debian 12 machine, and nothing that is already there:
# Debian's LLVM/MLIR 22 packages, the Python venv at .venv (numpy, jax[tpu] with libtpu), and the
# Rust dependencies. Safe to run again: each step checks before it installs.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(llvm-22-dev libmlir-22-dev mlir-22-tools libpolly-22-dev clang-22
              libzstd-dev libz3-dev libxml2-dev zlib1g-dev)
PY_PACKAGES=(numpy "jax[tpu]==0.10.2" pytest ruff)

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

missing=()
for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    say "installing Debian packages: ${missing[*]}"
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

stamp=.venv/.tpukit-setup
want="$(printf '%s\n' "${PY_PACKAGES[@]}")"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    say "creating the Python venv at .venv (${PY_PACKAGES[*]})"
    [ -x .venv/bin/python ] || python3 -m venv .venv
    .venv/bin/pip install -q --disable-pip-version-check "${PY_PACKAGES[@]}"
    printf '%s' "$want" > "$stamp"
fi

say "fetching Rust dependencies"
cargo fetch -q
say "ready"
