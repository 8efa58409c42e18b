"""LLO op counts of JAX's shipped TPU Pallas ops: JAX's own Mosaic beside tpukit's lowering of
the same kernels imported from it.

Each op is the jitted program of `benches/shipped_ops.py` (the same shapes). JAX's column
compiles the program JAX lowers for TPU; tpukit's compiles each Pallas call tpukit imported
from it under `on_cpu()` (`_cpu_lowering.imported()`), lowered back by tpukit. Both by libtpu
for v5e and v6e; a count is the number of `llo.*` ops in Mosaic's final modules, summed over
the op's kernels (the `jax.grad` row has three), a static proxy for per-step cost. Prints a
Markdown table; `--write` also puts it into BENCHMARKS.md between the `llo-shipped` markers:

    .venv/bin/python tests/conformance/llo_shipped.py [--write]
"""

import sys

from conftest import ROOT
from tpu_compile import TOPOLOGIES, Compiler

sys.path.insert(0, str(ROOT / "benches"))
import shipped_ops  # benches/ is not a package: imported by path
from report import write_section


def kernels_of(program, args):
    """The StableHLO modules of `program`'s Pallas calls as tpukit imports and lowers them."""
    from tpukit import _cpu_lowering, pallas

    before = len(_cpu_lowering.imported())
    with pallas.on_cpu():
        program.lower(*args)
    return [k.lower() for k in _cpu_lowering.imported()[before:]]


def total(compiler, texts, topology):
    """`(kernels, summed LLO ops)` of `texts` compiled for `topology`, or None if one fails."""
    kernels, ops = 0, 0
    for text in texts:
        row = compiler.compile(text, topology)
        if not (row["ok"] and row["llo_ops"]):
            return None
        kernels += len(row["llo_ops"])
        ops += sum(c["total"] for c in row["llo_ops"])
    return kernels, ops


def rows(compiler):
    for name, program, _plain, args in shipped_ops.cases():
        theirs = [program.trace(*args).lower(lowering_platforms=("tpu",)).as_text()]
        ours = kernels_of(program, args)
        for topology in TOPOLOGIES:
            counts = [total(compiler, texts, topology) for texts in (ours, theirs)]
            cells = [f"{ops}" if c else "fails" for c in counts for ops in [c and c[1]]]
            kernels = counts[1][0] if counts[1] else len(ours)
            ratio = f"{counts[0][1] / counts[1][1]:.2f}" if all(counts) else ""
            yield [name, topology, str(kernels), *cells, ratio]


def main():
    lines = [
        "| op (f32) | target | kernels | tpukit | JAX | tpukit / JAX |",
        "|---|---|---:|---:|---:|---:|",
    ]
    print("\n".join(lines), flush=True)
    for cells in rows(Compiler()):
        lines.append("| " + " | ".join(cells) + " |")
        print(lines[-1], flush=True)
    if "--write" in sys.argv[1:]:
        write_section("llo-shipped", "\n".join(lines))
        print("wrote the table into BENCHMARKS.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
