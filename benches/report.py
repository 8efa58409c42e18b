"""Writing a benchmark's results into BENCHMARKS.md: each script owns one section, the text
between `<!-- NAME:begin -->` and `<!-- NAME:end -->`, and rewrites only that."""

from __future__ import annotations

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
