"""Per-call cost of a tiny tpukit kernel (an (8, 128) f32 add), eager and inside ``jax.jit``
(an XLA custom call run by tpukit's FFI handler), beside a plain jitted add.

Rows: the eager call on numpy arrays (tpukit's own launch path) and on JAX arrays (a cached
jitted custom call); the kernel alone under ``jax.jit`` (dispatch included); a jitted chain
of 16 kernel calls and of 16 adds, divided by 16 (the marginal cost of one call inside a
compiled program; XLA fuses the adds into one loop). Then the same add on (2048, 2048) f32
arrays, where the handler's in-place launch matters. Medians of many calls after warm-up; not
a test, the machine is noisy.

    PYTHONPATH=python .venv/bin/python benches/jax_call.py
"""

from __future__ import annotations

import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from tpukit import pallas

CHAIN = 16


def median_us(fn, repeats=2000) -> float:
    for _ in range(50):
        fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6


def main():
    def body(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]

    add = pallas.custom_kernel(lambda x, y: jax.ShapeDtypeStruct(x.shape, x.dtype), body)
    xn = np.random.default_rng(0).standard_normal((8, 128)).astype(np.float32)
    xj = jnp.asarray(xn)

    def chain(f):
        def run(x, y):
            for _ in range(CHAIN):
                x = f(x, y)
            return x

        return jax.jit(run)

    def plain_add(x, y):
        return x + y

    jit_kernel, jit_add = jax.jit(add), jax.jit(plain_add)
    chain_kernel, chain_add = chain(add), chain(plain_add)
    rows = [
        ("eager, numpy arrays", lambda: add(xn, xn)),
        ("eager, JAX arrays", lambda: add(xj, xj)),
        ("jax.jit(kernel), one call", lambda: jit_kernel(xj, xj).block_until_ready()),
        ("jax.jit(kernel), one call on numpy arrays", lambda: np.asarray(jit_kernel(xn, xn))),
        ("jax.jit(x + y), one call", lambda: jit_add(xj, xj).block_until_ready()),
    ]
    print("| call | µs per call |\n|---|---:|")
    for name, fn in rows:
        print(f"| {name} | {median_us(fn):.1f} |")
    for name, fn in [("kernel", chain_kernel), ("add", chain_add)]:
        us = median_us(lambda fn=fn: fn(xj, xj).block_until_ready(), 500) / CHAIN
        print(f"| inside jit, a chain of {CHAIN} {name} calls, per call | {us:.1f} |")

    block = pl.BlockSpec((256, 2048), lambda i: (i, 0))
    big_add = pallas.custom_kernel(
        lambda x, y: jax.ShapeDtypeStruct(x.shape, x.dtype), body,
        grid=(8,), in_specs=[block, block], out_specs=block,
    )
    bn = np.random.default_rng(1).standard_normal((2048, 2048)).astype(np.float32)
    bj = jnp.asarray(bn)
    jit_big, jit_big_add = jax.jit(big_add), jax.jit(plain_add)
    for name, fn in [
        ("eager, numpy arrays", lambda: big_add(bn, bn)),
        ("jax.jit(kernel)", lambda: jit_big(bj, bj).block_until_ready()),
        ("jax.jit(x + y)", lambda: jit_big_add(bj, bj).block_until_ready()),
    ]:
        print(f"| (2048, 2048): {name} | {median_us(fn, 100):.0f} |")


if __name__ == "__main__":
    main()
