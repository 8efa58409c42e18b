"""A JAX function as one XLA program on the CPU, its Pallas calls (at any depth, any number of
them) run by tpukit (``custom_jax_kernel`` on ``device="cpu"``).

The function is traced to a jaxpr and bound as one ``tpukit_program`` primitive. Its CPU
lowering lowers that jaxpr inline, in the program being lowered, with tpukit's ``pallas_call``
rule active (``tpukit._cpu_lowering``): every TPU ``pl.pallas_call`` inside, also one nested in
a ``jax.jit`` (a ``func.call`` to a private function), a ``lax.cond`` or a ``scan``, becomes
tpukit's custom call, and XLA compiles and runs every other op. The rule must be active while
the *enclosing* program is lowered, which the caller does not control (``custom_jax_kernel``
may sit inside the user's ``jax.jit``); a primitive of our own is how the activation travels
with the traced function to lowering time. On other platforms (``jax.export`` for TPU) the
jaxpr lowers as JAX lowers it, Pallas calls as ``tpu_custom_call``s.

``vmap`` batches the jaxpr (JAX's own rules, so a Pallas call gets a grid axis) and binds the
primitive again. ``grad`` goes through a ``jax.custom_vjp`` whose forward and backward are
each such a primitive: JAX's VJP of the function, so the backward Pallas kernels of a shipped
op (flash attention's) run in tpukit too. Its residuals are the VJP's own (no recomputation).
"""

from __future__ import annotations

import jax
from jax._src import core, dispatch
from jax._src.interpreters import batching, mlir

from tpukit import _cpu_lowering

program_p = core.Primitive("tpukit_program")
program_p.multiple_results = True
program_p.def_impl(lambda *args, **params: dispatch.apply_primitive(program_p, *args, **params))


@program_p.def_effectful_abstract_eval
def _abstract_eval(*avals, jaxpr, device, debug):
    del avals, device, debug
    return jaxpr.out_avals, jaxpr.effects


def _lower_cpu(ctx, *args, jaxpr, device, debug):
    with _cpu_lowering.on_cpu(device, debug):
        return mlir.lower_fun(core.jaxpr_as_fun(jaxpr), multiple_results=True)(ctx, *args)


def _lower_other(ctx, *args, jaxpr, device, debug):
    del device, debug
    return mlir.lower_fun(core.jaxpr_as_fun(jaxpr), multiple_results=True)(ctx, *args)


mlir.register_lowering(program_p, _lower_other)
mlir.register_lowering(program_p, _lower_cpu, platform="cpu")


def _specs(values) -> list[jax.ShapeDtypeStruct]:
    return [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in values]


def _batch(args, dims, *, jaxpr, device, debug):
    # An unbatched operand's dimension is None, as `jax.vmap`'s in_axes spell it.
    batched = jax.vmap(core.jaxpr_as_fun(jaxpr), in_axes=list(dims), out_axes=0)
    outs = _bind(batched, args, device, debug)
    return outs, [0] * len(outs)


batching.primitive_batchers[program_p] = _batch


def _bind(fn, args, device: str, debug: bool) -> list:
    """``fn`` (a function of flat arrays returning a flat list) on ``args`` as one primitive."""
    jaxpr = jax.make_jaxpr(fn)(*_specs(args))
    return program_p.bind(*args, jaxpr=jaxpr, device=device, debug=debug)


def call(fn, args, device: str, debug: bool = False) -> list:
    """``fn(*args)`` (flat arrays in, a flat list of arrays out) as one tpukit program inside
    the program being traced, differentiable with JAX's VJP of ``fn``."""
    residual_tree = []  # the VJP's structure, found when the forward is traced

    @jax.custom_vjp
    def run(*xs):
        return _bind(fn, xs, device, debug)

    def forward(*xs):
        def primal_and_residuals(*a):
            out, vjp = jax.vjp(fn, *a)
            residuals, tree = jax.tree_util.tree_flatten(vjp)
            residual_tree[:] = [tree]
            return [*out, *residuals]

        flat = _bind(primal_and_residuals, xs, device, debug)
        n_out = len(flat) - residual_tree[0].num_leaves
        return flat[:n_out], flat[n_out:]

    def backward(residuals, cotangents):
        def pullback(res, cts):
            return list(jax.tree_util.tree_unflatten(residual_tree[0], res)(cts))

        n_res = len(residuals)
        flat = _bind(lambda *a: pullback(list(a[:n_res]), list(a[n_res:])),
                     [*residuals, *cotangents], device, debug)
        return tuple(flat)

    run.defvjp(forward, backward)
    return run(*args)
