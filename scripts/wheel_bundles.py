"""Puts tpukit's precompiled bundles into a wheel: `wheel_bundles.py IN.whl OUT.whl`.

The bundles (`WHEEL_BUNDLES`, default ``host portable``):
- ``portable``: ``tpukit/x86-64-v3.tpkb``, every shipped kernel compiled for the x86-64-v3
  baseline (`tpukit bundle build --portable`), kept in target/wheel-bundles/ and rebuilt when
  the ``tpukit`` program that builds it is newer (it is relinked whenever a kernel source, the
  code generator or tpukit's version changes, which is what a bundle's contents depend on).
  ``WHEEL_TPU=0`` leaves libtpu's TPU executables out (a bundle in seconds, not minutes).
- ``host``: ``tpukit/host.tpkb``, tuned for this machine: the one ``make setup`` built for the
  editable install if this host can use it, else built like the portable one.

The wheel's other files are copied as they are; its RECORD gets the bundles' hashes and sizes.
"""

from __future__ import annotations

import base64
import hashlib
import os
import pathlib
import subprocess
import sys
import zipfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
TPUKIT = ROOT / "target" / "debug" / "tpukit"


def say(message: str) -> None:
    print(f"[wheel] {message}", file=sys.stderr)


def tpukit(*args: str) -> str:
    done = subprocess.run([str(TPUKIT), *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"wheel: tpukit {' '.join(args)} failed:\n{done.stderr}")
    return done.stdout


def built(path: pathlib.Path, portable: bool, tpu: bool) -> pathlib.Path:
    """`path`, (re)built by `tpukit bundle build` unless it is newer than the program."""
    if path.exists() and path.stat().st_mtime >= TPUKIT.stat().st_mtime:
        return path
    say(f"precompiling {path.name} ({'x86-64-v3' if portable else 'this CPU'})")
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = (["--portable"] if portable else []) + ([] if tpu else ["--no-tpu"])
    tpukit("bundle", "build", "-o", str(path), *flags)
    return path


def bundles(which: list[str], tpu: bool) -> dict[str, pathlib.Path]:
    """The bundle files to ship, by their name in the package."""
    subprocess.run(["cargo", "build", "-q", "-p", "tpukit-cli"], cwd=ROOT, check=True)
    store = ROOT / "target" / "wheel-bundles" / ("tpu" if tpu else "no-tpu")
    out = {}
    if "host" in which:
        setup = ROOT / "python" / "tpukit" / "host.tpkb"
        fits = setup.exists() and "(usable on this host)" in tpukit("bundle", "inspect", str(setup))
        out["host.tpkb"] = setup if fits else built(store / "host.tpkb", False, tpu)
    if "portable" in which:
        out["x86-64-v3.tpkb"] = built(store / "x86-64-v3.tpkb", True, tpu)
    unknown = set(which) - {"host", "portable"}
    if unknown or not out:
        sys.exit(f"wheel: WHEEL_BUNDLES names {sorted(unknown)}; use host and/or portable")
    return out


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def add(src: pathlib.Path, dst: pathlib.Path, files: dict[str, pathlib.Path]) -> None:
    """Copies the wheel `src` to `dst` with `files` (name in tpukit/ -> path) added."""
    tmp = dst.with_suffix(".tmp")
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zout:
        (record,) = [n for n in zin.namelist() if n.endswith(".dist-info/RECORD")]
        lines = [line for line in zin.read(record).decode().splitlines()
                 if line and not line.startswith(f"{record},")]
        for item in zin.infolist():
            if item.filename != record and item.filename.removeprefix("tpukit/") not in files:
                zout.writestr(item, zin.read(item), compress_type=item.compress_type)
        for name, path in files.items():
            data = path.read_bytes()
            zout.writestr(f"tpukit/{name}", data)
            lines.append(record_line(f"tpukit/{name}", data))
        zout.writestr(record, "\n".join([*lines, f"{record},,"]) + "\n")
    tmp.replace(dst)


def main() -> None:
    src, dst = map(pathlib.Path, sys.argv[1:3])
    which = os.environ.get("WHEEL_BUNDLES", "host portable").split()
    files = bundles(which, os.environ.get("WHEEL_TPU", "1") != "0")
    add(src, dst, files)
    say(f"{dst}: {', '.join(files)} added")


if __name__ == "__main__":
    main()
