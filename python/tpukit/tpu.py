"""Compile-only TPU targets: StableHLO text → a libtpu executable, on a host without a TPU.

libtpu (from ``jax[tpu]``) runs XLA:TPU and Mosaic for a topology it is told about, so any
machine can compile what a TPU would run. ``Compiler`` holds one compile-only device per
topology; ``python -m tpukit.tpu --out DIR FILE...`` compiles StableHLO files and writes each
executable next to a JSON line per compile (what ``tpukit bundle build`` runs to put TPU
executables into bundles).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time
from dataclasses import dataclass

from tpukit import _libtpu, _native

TOPOLOGIES = tuple(_native.tpu_topologies())  # the topologies tpukit lowers for, default first


def prepare_environment():
    """What libtpu must be told before it loads (see ``tpukit._libtpu``); ``import tpukit``
    did it already, this is for callers that changed the environment since."""
    _libtpu.prepare_environment()


@dataclass
class Compiled:
    ok: bool
    topology: str
    executable: bytes = b""
    compile_ms: float = 0.0
    error: str = ""


class Compiler:
    """One compile-only TPU device per topology; JAX is imported on construction."""

    def __init__(self):
        prepare_environment()
        from jax._src.interpreters import mlir as jax_mlir
        from jax._src.lib import xla_client
        from jax.experimental import topologies
        from jaxlib.mlir import ir

        self._ir, self._context, self._xc = ir, jax_mlir.make_ir_context, xla_client
        self._topologies = topologies
        self._devices = {}

    def device(self, topology: str):
        if topology not in self._devices:
            desc = self._topologies.get_topology_desc(platform="tpu", topology_name=topology)
            self._devices[topology] = desc.devices[0]
        return self._devices[topology]

    def compile(self, text: str, topology: str) -> Compiled:
        """Compiles StableHLO ``text`` for ``topology``; a failure carries libtpu's message."""
        try:
            dev = self.device(topology)
            with self._context(), self._ir.Location.unknown():
                module = self._ir.Module.parse(text)
                t0 = time.perf_counter()
                exe = dev.client.compile(
                    module,
                    executable_devices=self._xc.DeviceList((dev,)),
                    compile_options=self._xc.CompileOptions(),
                )
                ms = (time.perf_counter() - t0) * 1e3
            return Compiled(True, topology, exe.serialize(), round(ms, 1))
        except Exception as e:  # noqa: BLE001 -- libtpu's message is the useful part
            return Compiled(False, topology, error=str(e).strip()[:2000] or type(e).__name__)


def available() -> bool:
    """Whether libtpu can be loaded here (``jax[tpu]`` installed)."""
    import importlib.util

    return importlib.util.find_spec("libtpu") is not None and (
        importlib.util.find_spec("jax") is not None
    )


def executable_path(out: pathlib.Path, module: pathlib.Path, topology: str) -> pathlib.Path:
    """Where ``main`` writes the executable of ``module`` for ``topology``."""
    return out / f"{module.stem}.{topology.replace(':', '-')}.tpu"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topology", action="append", help="v5e:2x2 (default), v6e:2x2, …")
    parser.add_argument("--out", required=True, type=pathlib.Path, help="executables go here")
    parser.add_argument("modules", nargs="+", type=pathlib.Path)
    args = parser.parse_args(argv)
    if not available():
        print(json.dumps({"ok": False, "error": "libtpu is not installed"}), flush=True)
        return 2
    compiler = Compiler()
    ok = True
    for path in args.modules:
        text = path.read_text()
        for topology in args.topology or TOPOLOGIES:
            c = compiler.compile(text, topology)
            if c.ok:
                executable_path(args.out, path, topology).write_bytes(c.executable)
            ok &= c.ok
            row = {"file": str(path), "topology": topology, "ok": c.ok, "ms": c.compile_ms}
            if not c.ok:
                row["error"] = c.error
            print(json.dumps(row), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
