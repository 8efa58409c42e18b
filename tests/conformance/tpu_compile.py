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

from tpukit.tpu import TOPOLOGIES
from tpukit.tpu import Compiler as Client

__all__ = ["TOPOLOGIES", "Compiler", "llo_op_count"]

# Where Mosaic writes its modules. libtpu reads its flags once, when it is first loaded, so they
# are set when this module is imported (conftest.py imports it before any test imports JAX).
DUMP = tempfile.mkdtemp(prefix="tpukit-mosaic-dump-")
atexit.register(shutil.rmtree, DUMP, ignore_errors=True)
os.environ["LIBTPU_INIT_ARGS"] = (
    f"{os.environ.get('LIBTPU_INIT_ARGS', '')} --xla_mosaic_dump_to={DUMP}".strip()
)


class Compiler:
    """libtpu's compile-only client (`tpukit.tpu`), with Mosaic dumping its final LLO module
    per kernel into `DUMP`, which `compile` counts."""

    def __init__(self):
        self.dump = DUMP
        self._client = Client()

    def compile(self, text, topology):
        """Compiles StableHLO `text`; returns a dict with `ok`, `error`, `compile_ms`,
        `executable_bytes` and `llo_ops` (one count per Mosaic kernel)."""
        before = set(glob.glob(os.path.join(self.dump, "*")))
        c = self._client.compile(text, topology)
        row = {"topology": topology, "ok": c.ok}
        if c.ok:
            row.update(compile_ms=c.compile_ms, executable_bytes=len(c.executable))
        else:
            row["error"] = c.error
        written = set(glob.glob(os.path.join(self.dump, "*"))) - before
        finals = sorted(f for f in written if f.endswith("post-finalize-llo.txt"))
        row["llo_ops"] = [llo_op_count(pathlib.Path(f).read_text()) for f in finals]
        for f in written:  # every pass's module is dumped: ~0.5 MB per compile, 1 GB per suite
            pathlib.Path(f).unlink(missing_ok=True)
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
