"""`make wheel-check`: the wheel installs into a fresh venv and serves every kernel from its bundles.

1. Builds the wheel as `make wheel` does (scripts/wheel.sh), from the dev build `make setup`
   made (WHEEL_PROFILE=dev: nothing LLVM-linked is compiled again) and with a portable bundle
   without TPU executables (WHEEL_TPU=0: seconds, no libtpu) — or checks the wheel given as the
   argument.
2. Installs it with `pip install --no-index` into a new venv in a temporary directory. Its
   dependencies (numpy, ml_dtypes) and the example's (torch) come from the repository's venv,
   seen through a directory of links to its site-packages without tpukit's editable install
   (a `.pth` file names it), so nothing is downloaded and the repository's tpukit is not
   importable.
3. Runs the demo's Python part (examples/tpublas.py, copied out of the repository) with
   `env -i` (no LD_LIBRARY_PATH, a PATH without LLVM) from the temporary directory, and asserts
   that tpukit came from the new venv, the bundle it loaded is the host-tuned one, and every
   kernel came from it (none compiled); then again with only the portable (x86-64-v3) bundle
   installed.
4. Asserts that the installed module needs no library from outside the wheel but the C/C++
   runtime and libz (which every manylinux system has).
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Libraries a manylinux system provides (auditwheel's policy), which the wheel may need.
SYSTEM = ("libc.so", "libm.so", "libgcc_s.so", "libstdc++.so", "libz.so", "ld-linux",
          "libpthread.so", "libdl.so", "librt.so", "linux-vdso.so")

RUN = """
import json, pathlib, runpy, sys
runpy.run_path("tpublas.py", run_name="__main__")
import tpukit
print(json.dumps({"file": tpukit.__file__, "stats": tpukit.cache_stats()._asdict(),
                  "bundles": tpukit._native.loaded_bundles(), "path": sys.path}))
"""


def say(message: str) -> None:
    print(f"[wheel-check] {message}", flush=True)


def build_wheel(out: pathlib.Path) -> pathlib.Path:
    env = {"TPUKIT_PYTHON": sys.executable, **os.environ, "WHEEL_PROFILE": "dev", "WHEEL_TPU": "0",
           "WHEEL_DIR": str(out)}
    done = subprocess.run(["bash", str(ROOT / "scripts" / "wheel.sh")], env=env,
                          stdout=subprocess.PIPE, text=True, check=True)
    return pathlib.Path(done.stdout.strip().splitlines()[-1])


def fresh_venv(tmp: pathlib.Path) -> pathlib.Path:
    """A new venv whose sys.path also holds the repository venv's packages but tpukit."""
    subprocess.run([sys.executable, "-m", "venv", str(tmp / "venv")], check=True)
    python = tmp / "venv" / "bin" / "python"
    deps = tmp / "deps"
    deps.mkdir()
    for entry in pathlib.Path(sysconfig.get_path("purelib")).iterdir():
        if not (entry.name.startswith("tpukit") or entry.suffix == ".pth"):
            (deps / entry.name).symlink_to(entry)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (pathlib.Path(site) / "repository_deps.pth").write_text(f"{deps}\n")
    return python


def run_demo(python: pathlib.Path, tmp: pathlib.Path) -> dict:
    run = tmp / "run"
    run.mkdir(exist_ok=True)
    shutil.copy(ROOT / "examples" / "tpublas.py", run / "tpublas.py")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp), "LD_LIBRARY_PATH": ""}
    done = subprocess.run([str(python), "-c", RUN], cwd=run, env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0, f"the demo failed:\n{done.stdout}\n{done.stderr}"
    assert done.stderr == "", f"the demo printed to stderr:\n{done.stderr}"
    print(done.stdout.rsplit("\n", 2)[0])
    return json.loads(done.stdout.strip().splitlines()[-1])


def check_served(result: dict, venv: pathlib.Path, bundle: str) -> None:
    package = pathlib.Path(result["file"]).parent
    assert package.is_relative_to(venv), f"tpukit imported from {package}, not the new venv"
    assert not any(p.startswith(str(ROOT)) for p in result["path"]), result["path"]
    assert [pathlib.Path(p).name for p, _ in result["bundles"]] == [bundle], result["bundles"]
    stats = result["stats"]
    assert stats["compiled"] == 0 and stats["bundle_hits"] > 0, f"not all from {bundle}: {stats}"


def check_libraries(package: pathlib.Path) -> None:
    (module,) = package.glob("_native*.so")
    ldd = subprocess.run(["ldd", str(module)], capture_output=True, text=True, env={},
                         check=True).stdout
    for line in ldd.splitlines():
        name = line.split()[0]
        if "not found" in line:
            raise AssertionError(f"the module needs {name}, which is not installed:\n{ldd}")
        vendored = f"{package.name}.libs/" in line
        if not vendored and not name.startswith(SYSTEM) and not name.startswith("/"):
            raise AssertionError(f"the module needs {name} from outside the wheel:\n{ldd}")
    assert "llvm" not in ldd.lower() and "mlir" not in ldd.lower(), ldd


def main() -> None:
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tpukit-wheel-check.") as tmp:
        tmp = pathlib.Path(tmp)
        wheel = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else build_wheel(tmp / "dist")
        say(f"{wheel.name} ({wheel.stat().st_size >> 20} MiB) built in "
            f"{time.monotonic() - start:.0f} s; installing into a new venv")
        python = fresh_venv(tmp)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-index",
                        "--disable-pip-version-check", str(wheel)], check=True)
        venv = tmp / "venv"
        result = run_demo(python, tmp)
        check_served(result, venv, "host.tpkb")
        package = pathlib.Path(result["file"]).parent
        check_libraries(package)
        say("host.tpkb served every kernel; now only the portable bundle")
        (package / "host.tpkb").unlink()
        check_served(run_demo(python, tmp), venv, "x86-64-v3.tpkb")
    say(f"ok in {time.monotonic() - start:.0f} s")


if __name__ == "__main__":
    main()
