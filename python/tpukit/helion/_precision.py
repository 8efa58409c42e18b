"""Where an elementwise operation on low-precision floats (bf16, f16) rounds.

torch eager computes an elementwise operation on bf16 tensors in f32 and rounds its result once
to bf16; Helion's generated code does the same (Inductor's lowering computes each operation in
f32 registers and casts to the operation's dtype). An operation JAX spells as several primitives
(``sigmoid`` is ``1 / (1 + exp(-x))``, ``silu``, ``lerp``, ``log2``, the tanh ``gelu``) would
instead round after each of them: ``rounded_once`` runs it on the f32 values of its
low-precision operands and rounds the result once, to the dtype it gives for the original
operands (a Python float operand keeps its f32 value). ``opmath_scalar`` does the same for a
product or quotient of a bf16 value and a Python number, as torch does.
Reductions and matmuls accumulate in f32 on their own (``_ops``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

LOW = (np.dtype(jnp.bfloat16), np.dtype(np.float16))
"""The float dtypes computed in f32 and rounded."""


def _is_low(v) -> bool:
    return getattr(v, "dtype", None) in LOW and hasattr(v, "shape")


def rounded_once(impl):
    """``impl`` (a function of JAX arrays and Python values) computed on the f32 values of its
    bf16/f16 array arguments, its result rounded once to the dtype ``impl`` gives for the
    arguments as they are. Unchanged when no argument is low precision or that dtype is not a
    low-precision float (comparisons give bools; an f32 operand makes the result f32)."""

    def run(*args, **kwargs):
        leaves, tree = jax.tree_util.tree_flatten((args, kwargs))
        low = [i for i, v in enumerate(leaves) if _is_low(v)]
        if not low:
            return impl(*args, **kwargs)

        def on(*values):
            filled = list(leaves)
            for i, v in zip(low, values, strict=True):
                filled[i] = v
            a, k = jax.tree_util.tree_unflatten(tree, filled)
            return impl(*a, **k)

        out = jax.eval_shape(on, *(leaves[i] for i in low))
        if getattr(out, "dtype", None) not in LOW:
            return impl(*args, **kwargs)
        return on(*(leaves[i].astype(jnp.float32) for i in low)).astype(out.dtype)

    run.__name__ = getattr(impl, "__name__", "op")
    return run


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def opmath_scalar(op):
    """``op(a, b, …)`` of a bf16/f16 array and a Python number computed in f32 with the
    number's f32 value, rounded once to the array's dtype: torch's products and quotients by a
    scalar (``x * 0.1`` scales by f32 0.1; JAX's weak typing would round 0.1 to bf16 first, a
    systematic error; torch's ``+``/``-`` do round it). Any other operands: ``op`` as it is
    (two bf16 arrays already round once per ``+ - * /``)."""

    def run(a, b, *rest, **kwargs):
        arr = a if _is_number(b) else b if _is_number(a) else None
        if arr is None or not _is_low(arr):
            return op(a, b, *rest, **kwargs)
        a32 = a if _is_number(a) else a.astype(jnp.float32)
        b32 = b if _is_number(b) else b.astype(jnp.float32)
        return op(a32, b32, *rest, **kwargs).astype(arr.dtype)

    run.__name__ = getattr(op, "__name__", "op")
    return run
