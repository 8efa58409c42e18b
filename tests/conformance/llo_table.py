"""LLO op counts of tpukit's lowering beside the same kernel written in JAX Pallas.

Both are compiled by libtpu for v5e and v6e; the count is the number of `llo.*` ops in Mosaic's
final module (`*-post-finalize-llo.txt`), a static proxy for per-step cost. The Pallas kernels
are the twins of `pallas_twins.py` (the golden tests compare them with tpukit's op by op).
Prints a Markdown table; `--write` also puts it into BENCHMARKS.md between the `llo-bench`
markers. Run after `cargo build -p tpukit-cli`:

    .venv/bin/python tests/conformance/llo_table.py [--write]
"""

import subprocess
import sys

import pallas_twins
from conftest import CLI, ROOT
from tpu_compile import TOPOLOGIES, Compiler

CASES = [
    ("add_vectors", (4096,)),
    ("softmax", (64, 256)),
    ("layer_norm", (64, 384)),
    ("matmul", (256, 512, 256)),
    ("row_gather", (1000, 256, 64)),
    ("flash_attention", (8, 512, 512, 128)),
]
DTYPES = ("f32", "bf16")

BEGIN, END = "<!-- llo-bench:begin -->", "<!-- llo-bench:end -->"


def pallas_text(name, shape, dtype):
    """The Pallas twin (`pallas_twins.py`) lowered for TPU, as StableHLO text."""
    import jax

    call, args = pallas_twins.twins()[name](shape, dtype)
    return jax.jit(call).trace(*args).lower(lowering_platforms=("tpu",)).as_text()


def rows(compiler):
    for name, shape in CASES:
        for dtype in DTYPES:
            shape_text = "x".join(map(str, shape))
            ours = subprocess.run(
                [str(CLI), "lower", name, "--shape", shape_text, "--dtype", dtype],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            theirs = pallas_text(name, shape, dtype)
            for topology in TOPOLOGIES:
                counts = []
                for text in (ours, theirs):
                    row = compiler.compile(text, topology)
                    ok = row["ok"] and row["llo_ops"]
                    counts.append(str(row["llo_ops"][0]["total"]) if ok else "fails")
                yield [name, shape_text, dtype, topology, *counts]


def main():
    write = "--write" in sys.argv[1:]
    lines = [
        "| kernel | shape | dtype | target | tpukit | Pallas |",
        "|---|---|---|---|---:|---:|",
    ]
    print("\n".join(lines), flush=True)
    for cells in rows(Compiler()):
        lines.append("| " + " | ".join(cells) + " |")
        print(lines[-1], flush=True)
    if write:
        path = ROOT / "BENCHMARKS.md"
        text = path.read_text()
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        path.write_text(f"{head}{BEGIN}\n" + "\n".join(lines) + f"\n{END}{tail}")
        print(f"wrote the table into {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
