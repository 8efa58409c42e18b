"""`HELION_PRINT_OUTPUT_CODE=1`, as Helion users set it: each kernel tpukit generates from a
Helion program is printed to stderr (its Pallas program and its Mosaic) when it is built."""

import os
import subprocess
import sys
import textwrap

import pytest

PROGRAM = textwrap.dedent(
    """
    import torch
    from tpukit import helion
    import tpukit.helion.language as hl

    @helion.kernel(config=helion.Config(block_sizes=[8]))
    def scale(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            out[tile, :] = x[tile, :] * 3
        return out

    x = torch.randn(20, 128)
    torch.testing.assert_close(scale(x), x * 3)
    torch.testing.assert_close(scale(x), x * 3)  # the same kernel: printed once
    print("ok")
    """
)


def run(tmp_path, **env):
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    return subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300,
        env={**{k: v for k, v in os.environ.items() if k != "HELION_PRINT_OUTPUT_CODE"}, **env},
    )


def test_generated_code_is_printed_once_per_kernel(tmp_path):
    pytest.importorskip("torch")
    done = run(tmp_path, HELION_PRINT_OUTPUT_CODE="1")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n"
    assert done.stderr.count("# kernel `scale`: the Pallas program (jaxpr)") == 1
    assert "pallas_call[" in done.stderr
    assert done.stderr.count("# kernel `scale`: its Mosaic") == 1
    assert "func.func @scale(" in done.stderr and "arith.mulf" in done.stderr


def test_nothing_is_printed_without_it(tmp_path):
    pytest.importorskip("torch")
    done = run(tmp_path)
    assert done.returncode == 0, done.stderr
    assert "pallas_call[" not in done.stderr
