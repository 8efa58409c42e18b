"""Compiles StableHLO modules for TPU targets with libtpu's compile-only client (no TPU needed).

The oracle for tpukit's Mosaic lowering: libtpu runs XLA:TPU and Mosaic down to LLO, exactly as
it would for a real chip. With `--xla_mosaic_dump_to` Mosaic also writes its module after every
pass; the final one (`*-post-finalize-llo.txt`) gives LLO op counts, a static proxy for cost.

    python tpu_compile.py [--topology v5e:2x2 ...] module.mlir ...   # one JSON line per compile
"""

import argparse
import atexit
import collections
import glob
import json
import os
import pathlib
import re
import shutil
import sys
import tempfile
import time

TOPOLOGIES = ("v5e:2x2", "v6e:2x2")


class Compiler:
    """One compile-only TPU device per topology; jax is imported once, on first use."""

    def __init__(self):
        self.dump = tempfile.mkdtemp(prefix="tpukit-mosaic-dump-")
        atexit.register(shutil.rmtree, self.dump, ignore_errors=True)
        flags = os.environ.get("LIBTPU_INIT_ARGS", "")
        os.environ["LIBTPU_INIT_ARGS"] = (
            f"{flags} --xla_mosaic_dump_to={self.dump}".strip()
        )
        # Names the accelerator so libtpu does not probe the host for one.
        os.environ.setdefault("TPU_ACCELERATOR_TYPE", "v5litepod-4")
        from jax._src.interpreters import mlir as jax_mlir
        from jax._src.lib import xla_client
        from jax.experimental import topologies
        from jaxlib.mlir import ir

        self._ir, self._context, self._xc = ir, jax_mlir.make_ir_context, xla_client
        self._topologies = topologies
        self._devices = {}

    def device(self, topology):
        if topology not in self._devices:
            desc = self._topologies.get_topology_desc(
                platform="tpu", topology_name=topology
            )
            self._devices[topology] = desc.devices[0]
        return self._devices[topology]

    def compile(self, text, topology):
        """Compiles StableHLO `text`; returns a dict with `ok`, `error`, `llo_ops` (per kernel)."""
        dev = self.device(topology)
        before = set(glob.glob(os.path.join(self.dump, "*")))
        row = {"topology": topology, "device_kind": dev.device_kind, "ok": False}
        try:
            with self._context(), self._ir.Location.unknown():
                module = self._ir.Module.parse(text)
                t0 = time.perf_counter()
                exe = dev.client.compile(
                    module,
                    executable_devices=self._xc.DeviceList((dev,)),
                    compile_options=self._xc.CompileOptions(),
                )
                row["compile_ms"] = round((time.perf_counter() - t0) * 1e3, 1)
            row["executable_bytes"] = len(exe.serialize())
            row["ok"] = True
        except Exception as e:  # noqa: BLE001 -- libtpu's message is the useful part
            row["error"] = str(e).strip()[:2000] or type(e).__name__
        finals = sorted(
            set(glob.glob(os.path.join(self.dump, "*post-finalize-llo.txt"))) - before
        )
        row["llo_ops"] = [llo_op_count(pathlib.Path(f).read_text()) for f in finals]
        return row


def llo_op_count(text):
    """Counts `llo.*` operations (not types or attributes) in a final Mosaic LLO dump."""
    ops = collections.Counter(
        re.findall(r"(?:=\s*|^\s*)(llo\.[a-z_0-9.]+)", text, flags=re.MULTILINE)
    )
    return {"total": sum(ops.values()), **dict(ops.most_common())}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--topology", action="append", help="v5e:2x2, v6e:2x2, v5p:2x2x1, ..."
    )
    parser.add_argument("modules", nargs="+")
    args = parser.parse_args()
    compiler = Compiler()
    ok = True
    for topology in args.topology or TOPOLOGIES:
        for path in args.modules:
            text = pathlib.Path(path).read_text()
            row = {"file": path, **compiler.compile(text, topology)}
            ok &= row["ok"]
            print(json.dumps(row), flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
