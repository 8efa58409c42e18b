"""Every Python block of the READMEs runs as written.

Each file's ```python blocks run in order in one fresh process, sharing one namespace (a block
may use what an earlier block of the same file defined, as a reader going down the page
would); a failure names the file and the block's first line. A block preceded by the line
``<!-- no-test -->`` is skipped (none is today; the comment must say why where it is used).
"""

import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
READMES = [ROOT / "README.md", ROOT / "python" / "README.md"]
SKIP = "<!-- no-test -->"

# Runs the blocks (JSON on stdin: [[label, source], ...]) in one namespace; a traceback's
# frames name the block by its label ("README.md:42").
# The source is registered with linecache under the label, for code that reads its own source
# (Helion kernels do).
RUNNER = """
import json, linecache, sys
namespace = {"__name__": "__main__"}
for label, source in json.load(sys.stdin):
    linecache.cache[label] = (len(source), None, source.splitlines(True), label)
    exec(compile(source, label, "exec"), namespace)
"""


def python_blocks(path: pathlib.Path) -> list[tuple[int, str]]:
    """(first line number, source) of each ```python block not marked ``<!-- no-test -->``."""
    blocks, lines = [], path.read_text().splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```python":
            start = i + 1
            end = next(j for j in range(start, len(lines)) if lines[j].strip() == "```")
            skipped = i > 0 and lines[i - 1].strip().startswith(SKIP)
            if not skipped:
                blocks.append((start + 1, "\n".join(lines[start:end]) + "\n"))
            i = end
        i += 1
    return blocks


@pytest.mark.parametrize("readme", READMES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_python_block_runs(readme, tmp_path):
    pytest.importorskip("torch")  # the seed examples are TorchTPU's, with torch tensors
    blocks = python_blocks(readme)
    assert blocks, f"{readme}: no python blocks found"
    labels = [(f"{readme.relative_to(ROOT)}:{line}", src) for line, src in blocks]
    done = subprocess.run(
        [sys.executable, "-c", RUNNER],
        input=json.dumps(labels),
        capture_output=True,
        text=True,
        cwd=tmp_path,  # blocks that write files write them here
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
        timeout=900,
    )
    assert done.returncode == 0, f"a block of {readme.name} failed:\n{done.stderr[-4000:]}"


def test_no_readme_reaches_into_the_native_module():
    """``tpukit._native`` is not part of the package's namespace after ``import tpukit``:
    documented calls go through the package (``tpukit.cache_stats()``, …)."""
    for readme in READMES:
        for n, line in enumerate(readme.read_text().splitlines(), 1):
            assert "tpukit._native." not in line, f"{readme.name}:{n}: {line.strip()}"


def test_the_block_extractor(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "text\n```python\na = 1\n```\n```sh\nls\n```\n<!-- no-test -->\n```python\nboom\n```\n"
        "```python\nb = a\n```\n"
    )
    assert python_blocks(page) == [(3, "a = 1\n"), (13, "b = a\n")]
