"""Writing a benchmark's results into BENCHMARKS.md: each script owns one section, the text
between `<!-- NAME:begin -->` and `<!-- NAME:end -->`, and rewrites only that."""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "BENCHMARKS.md"


def write_section(name: str, text: str, intro: str = "", path: Path = BENCHMARKS) -> None:
    """Replaces section ``name``'s text by ``text``; a file without the section gets it
    appended, after ``intro`` (a heading and a sentence, say)."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    doc = path.read_text() if path.exists() else "# Benchmarks\n"
    if begin not in doc:
        doc += f"\n{intro}{begin}\n{end}\n"
    head, rest = doc.split(begin, 1)
    tail = rest.split(end, 1)[1]
    path.write_text(f"{head}{begin}\n{text.rstrip()}\n{end}{tail}")


def arguments(doc: str, seconds: tuple[float, float]) -> tuple[argparse.Namespace, int, float]:
    """A benchmark script's command line (``--write``: rewrite its section; ``--quick``: a
    smoke run), with the rounds and the seconds per batch it asks for (``seconds``: quick,
    full)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite BENCHMARKS.md's section")
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run)")
    args = parser.parse_args()
    return args, 3 if args.quick else 7, seconds[0] if args.quick else seconds[1]


def fma_peak(threads: int) -> dict:
    """GFLOP/s of ``benches/fma_peak.c`` (f32 FMAs; bf16 dot products where the CPU has
    AVX-512 BF16) run as ``threads`` processes at once, summed: the machine's FMA peak for
    the matmul rows. ``{}`` when no C compiler builds it (the rows then say so)."""
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "fma_peak"
        try:
            subprocess.run(["cc", "-O2", "-march=native", "-ffp-contract=fast",
                            str(Path(__file__).resolve().parent / "fma_peak.c"), "-o", str(exe)],
                           check=True, capture_output=True)
        except (OSError, subprocess.CalledProcessError):
            return {}
        runs = [subprocess.Popen([exe], stdout=subprocess.PIPE, text=True)
                for _ in range(threads)]
        peak: dict = {}
        for p in runs:
            for line in p.communicate()[0].splitlines():
                dtype, gflops, _ = line.split()
                peak[dtype] = peak.get(dtype, 0.0) + float(gflops)
        return peak
