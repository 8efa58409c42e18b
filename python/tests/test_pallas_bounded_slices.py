"""``pltpu.emit_pipeline`` over blocks of a traced number of rows (``pl.BoundedSlice``,
python/tests/bounded_slice_kernels.py): each block is copied into its buffer slot sliced to
its rows (a squeezed view of traced size), one row at a time; on tpukit's ``cpu`` and
``interpret`` under ``on_cpu()`` against numpy. The libtpu compile is in
tests/conformance/test_pallas_ops.py."""

import bounded_slice_kernels as bk
import jax
import ml_dtypes
import numpy as np
import pytest
from conftest import assert_close

import tpukit
from tpukit import pallas

BF16 = ml_dtypes.bfloat16


def _ranges(rng, rows, max_rows):
    """A random partition of ``range(rows)`` into ranges of 1 to ``max_rows`` rows, shuffled."""
    cuts, at = [0], 0
    while at < rows:
        at = min(rows, at + int(rng.integers(1, max_rows + 1)))
        cuts.append(at)
    ranges = np.array(list(zip(cuts[:-1], cuts[1:], strict=True)), np.int32)
    return ranges[rng.permutation(len(ranges))]


def _scaled(x):
    return (x.astype(np.float32) * 2 + 1).astype(x.dtype)


@pytest.mark.parametrize("dtype", [np.float32, BF16])
@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_blocks_of_traced_row_ranges(device, dtype, rng):
    """Ranges of 1 to 8 rows, read from SMEM in the index map, covering all 21 rows."""
    x = rng.standard_normal((21, 8, 128)).astype(dtype)
    ranges = _ranges(rng, 21, 8)
    with pallas.on_cpu(device=device):
        got = jax.jit(bk.scaled_row_ranges, static_argnums=2)(x, ranges, 8)
    assert_close(np.asarray(got), _scaled(x), f"{device}, ranges {ranges.tolist()}")


@pytest.mark.parametrize("dtype", [np.float32, BF16])
@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_a_bounded_slice_at_a_static_start(device, dtype, rng):
    x = rng.standard_normal((16, 8, 256)).astype(dtype)
    with pallas.on_cpu(device=device):
        got = jax.jit(bk.scaled_rows_at, static_argnums=(1, 2))(x, 5, 6)
    assert_close(np.asarray(got), _scaled(x[5:11]), device)
