"""Every f32 in ``[0, TOP]`` through the CPU backend's compiled ``erf`` (a ``jax.lax.erf``
kernel on numpy arrays of 2^24 elements: all in 16-lane vectors, so on AVX-512 CPUs the
table ``erf`` of ``runtime/src/cpu/codegen/erf_table.rs``), against scipy's f64 ``erf``:
the largest error in ulps of the f32 nearest the true value (as ``tests/ops.rs`` measures
it), and whether ``erf(-x) == -erf(x)`` bit for bit.

    TPUKIT_BUNDLE= .venv/bin/python scripts/erf_compiled_sweep.py [TOP]   # TOP = 4 by default
"""

import sys

import jax
import numpy as np
from jax.experimental import pallas as pl
from scipy.special import erf
from tpukit import pallas

ROWS = 512  # a block of 512 x 1024 elements
CHUNK = 1 << 24  # elements a call computes


@pallas.custom_kernel(
    lambda x: np.empty_like(x),
    grid=(CHUNK // 1024 // ROWS,),
    in_specs=[pl.BlockSpec((ROWS, 1024), lambda i: (i, 0))],
    out_specs=pl.BlockSpec((ROWS, 1024), lambda i: (i, 0)),
)
def erf_block(x_ref, o_ref):
    o_ref[...] = jax.lax.erf(x_ref[...])


def erf_kernel(x):
    """The compiled ``erf`` of a flat f32 array, a chunk (zero-padded) at a time."""
    out = np.empty_like(x)
    for s in range(0, len(x), CHUNK):
        part = np.zeros(CHUNK, np.float32)
        part[: len(x[s : s + CHUNK])] = x[s : s + CHUNK]
        out[s : s + CHUNK] = np.asarray(erf_block(part.reshape(-1, 1024))).reshape(-1)[
            : len(x[s : s + CHUNK])
        ]
    return out


def ulps(got, x):
    want = erf(x.astype(np.float64))
    w = np.maximum(np.abs(want.astype(np.float32)), np.finfo(np.float32).tiny)
    ulp = (np.nextafter(w, np.float32(np.inf)) - w).astype(np.float64)
    return np.abs(got.astype(np.float64) - want) / ulp


def main():
    top = np.float32(sys.argv[1] if len(sys.argv) > 1 else 4.0).view(np.uint32)
    chunk = 1 << 24
    worst, at, odd = 0.0, 0.0, True
    for start in range(0, int(top) + 1, chunk):
        bits = np.arange(start, start + chunk, dtype=np.uint32)
        x = bits.view(np.float32)
        got = np.asarray(erf_kernel(x))
        assert (np.abs(got) <= 1).all(), "a result outside [-1, 1]"
        e = ulps(got, x)
        i = int(np.argmax(e))
        if e[i] > worst:
            worst, at = float(e[i]), float(x[i])
        neg = np.asarray(erf_kernel(-x))
        odd = odd and bool(
            (neg.view(np.uint32) == (got.view(np.uint32) ^ 0x80000000)).all()
        )
    print(
        f"every f32 in [0, {top.view(np.float32)}]: max {worst:.3f} ulp at {at!r}; odd: {odd}"
    )


if __name__ == "__main__":
    main()
