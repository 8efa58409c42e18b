"""Whole jitted JAX programs calling tpukit kernels, exported for the TPU platform
(``jax.export(..., platforms=["tpu"])``) and compiled with libtpu for v5e and v6e: each
tpukit kernel is a ``tpu_custom_call`` carrying tpukit's own Mosaic of it (a catalog kernel
written in Rust, an imported Pallas kernel, one whose output aliases an input), beside XLA's
ops. Their results on the CPU are checked in python/tests/test_jax_jit.py."""

import contextlib
import functools
import re

import pytest
from conftest import assert_compiles, imports_by_on_cpu
from tpu_compile import TOPOLOGIES

jax = pytest.importorskip("jax")


def _export(fn, specs) -> str:
    from jax import export
    from tpukit import _lowering

    device = _lowering._tpu_device()
    with jax.default_device(device) if device is not None else contextlib.nullcontext():
        return export.export(jax.jit(fn), platforms=["tpu"])(*specs).mlir_module()


def _catalog_between_jax_ops():
    """``tanh`` → the catalog's ``add_vectors`` (a Rust ``#[tpu_kernel]``) → ``* 2``, twice."""
    import jax.numpy as jnp
    from tpukit import instantiate, launch

    add = instantiate("add_vectors", [1000])

    def program(x, y):
        z = launch(add, jnp.tanh(x), y)[0] * 2
        return launch(add, z, x)[0]

    spec = jax.ShapeDtypeStruct((1000,), jnp.float32)
    return program, [spec, spec], ["add_vectors", "add_vectors"]


def _imported_pallas_kernels():
    """A Pallas kernel imported by tpukit (``custom_kernel``) on 16×128 blocks, then an
    aliased one (its output starts as an input: ``input_output_aliases``), XLA ops around."""
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from tpukit import pallas

    def scaled(x_ref, y_ref, o_ref):
        o_ref[...] = jnp.tanh(x_ref[...]) * y_ref[...] + 1.0

    spec = pl.BlockSpec((16, 128), lambda i, j: (i, j))
    first = pallas.custom_kernel(
        lambda x, y: jax.ShapeDtypeStruct(x.shape, x.dtype), scaled,
        grid=(3, 3), in_specs=[spec, spec], out_specs=spec,
    )

    def accumulate(x_ref, acc_ref, o_ref):
        o_ref[...] += x_ref[...]

    second = pallas.custom_kernel(
        lambda x, acc: jax.ShapeDtypeStruct(acc.shape, acc.dtype), accumulate,
        input_output_aliases={1: 0},
    )

    def program(x, y):
        out = first(x * 2, y)
        return jnp.sum(second(out, y), axis=0)

    shape = jax.ShapeDtypeStruct((48, 384), jnp.float32)
    return program, [shape, shape], ["scaled", "accumulate"]


PROGRAMS = {
    "catalog": _catalog_between_jax_ops,
    "pallas": _imported_pallas_kernels,
}


@functools.cache
def _exported(name):
    program, specs, kernels = PROGRAMS[name]()
    return _export(program, specs), kernels


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_exported_program_carries_tpukit_s_mosaic(name):
    text, kernels = _exported(name)
    assert "@tpukit_kernel" not in text  # the CPU's FFI target is not in a TPU program
    assert re.findall(r'kernel_name = "(\w+)"', text) == kernels
    assert text.count("@tpu_custom_call") + text.count('"tpu_custom_call"') == len(kernels)


@pytest.mark.parametrize("topology", TOPOLOGIES)
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_exported_program_compiles_for_tpu(compiler, name, topology):
    text, kernels = _exported(name)
    result = compiler.compile(text, topology)
    assert result["ok"], result.get("error")
    assert len(result["llo_ops"]) == len(kernels)
    assert all(counts["total"] > 0 for counts in result["llo_ops"])


@functools.cache
def _splash_under_on_cpu():
    """Splash attention (int8 block-mask tables read in its index maps and body), imported by
    ``on_cpu()`` from its jitted entry point, lowered back by tpukit."""
    import jax.numpy as jnp
    from jax.experimental.pallas.ops.tpu.splash_attention import (
        splash_attention_kernel as sk,
    )
    from jax.experimental.pallas.ops.tpu.splash_attention import (
        splash_attention_mask as sm,
    )

    heads, seq = 2, 384
    mask = sm.MultiHeadMask([sm.CausalMask((seq, seq))] * heads)
    kernel = sk.make_splash_mha(mask, head_shards=1, q_seq_shards=1)
    q = jnp.zeros((heads, seq, 128), jnp.float32)
    with imports_by_on_cpu() as texts:
        jax.jit(kernel).lower(q, q, q)
    return texts


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_splash_attention_imported_by_on_cpu_compiles_for_tpu(compiler, topology):
    texts = _splash_under_on_cpu()
    assert texts
    assert_compiles(compiler, texts, topology)


@functools.cache
def _paged_under_on_cpu(dtype, inline):
    """Paged attention (pages copied by manual DMA, double buffered across grid steps; its
    buffer index and first-step flag stored into scalar-prefetch operands; running max and
    sum in outputs whose blocks overhang their arrays), imported by ``on_cpu()`` from its
    jitted entry point, lowered back by tpukit."""
    import jax.numpy as jnp
    from jax.experimental.pallas.ops.tpu.paged_attention import (
        paged_attention_kernel as paged,
    )

    q = jnp.zeros((2, 8, 128), dtype)
    pages = jnp.zeros((2, 16, 16, 128), dtype)
    lengths, indices = jnp.zeros((2,), jnp.int32), jnp.zeros((2, 4), jnp.int32)
    with imports_by_on_cpu() as texts:
        jax.jit(lambda *a: paged.paged_attention(*a, pages_per_compute_block=2,
                                                 inline_seq_dim=inline)).lower(
            q, pages, pages, lengths, indices)
    return texts


@pytest.mark.parametrize("topology", TOPOLOGIES)
@pytest.mark.parametrize(("dtype", "inline"), [("float32", True), ("bfloat16", True),
                                               ("float32", False)])
def test_paged_attention_imported_by_on_cpu_compiles_for_tpu(compiler, dtype, inline, topology):
    texts = _paged_under_on_cpu(dtype, inline)
    assert len(texts) == 1
    result = compiler.compile(texts[0], topology)
    assert result["ok"], result.get("error")
    assert result["llo_ops"][0]["total"] > 0


@functools.cache
def _dynamic_grids_under_on_cpu():
    """Kernels whose grid is sized by a traced value (Mosaic's dynamic ``iteration_bounds``,
    ``tpu.iteration_bound``): megablox ``gmm`` and ``tgmm``, and a small kernel of our own that
    reads ``pl.num_programs`` of its traced axis, imported by ``on_cpu()`` and lowered back."""
    import importlib

    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from tpukit import _cpu_lowering, pallas

    gmm = importlib.import_module("jax.experimental.pallas.ops.tpu.megablox.gmm")

    def count_kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + pl.num_programs(0).astype(jnp.float32)

    def counted(x, n):
        spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
        return pl.pallas_call(
            count_kernel, grid=(n,), in_specs=[spec], out_specs=spec,
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        )(x)

    x = jnp.zeros((256, 128), jnp.float32)
    w = jnp.zeros((3, 128, 128), jnp.float32)
    sizes = jnp.array([100, 0, 156], jnp.int32)
    before = len(_cpu_lowering.imported())
    with pallas.on_cpu():
        jax.jit(gmm.gmm).lower(x, w, sizes)
        jax.jit(gmm.tgmm).lower(x.T, x, sizes)
        jax.jit(counted).lower(x, jnp.int32(3))
    return [(str(k), k.lower()) for k in _cpu_lowering.imported()[before:]]


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_dynamic_grid_kernels_compile_for_tpu(compiler, topology):
    kernels = _dynamic_grids_under_on_cpu()
    assert len(kernels) == 3
    for ir, text in kernels:
        assert "value(0)" in ir  # a grid axis sized by the kernel's first operand
        result = compiler.compile(text, topology)
        assert result["ok"], result.get("error")
        assert result["llo_ops"][0]["total"] > 0


@functools.cache
def _prng_under_on_cpu():
    """The threefry and philox PRNG kernels (uint32 arithmetic, held as i32; unsigned compares
    imported as signed ones of sign-flipped operands), imported by ``on_cpu()`` and lowered
    back by tpukit."""
    import jax.numpy as jnp
    from jax.experimental.pallas.ops.tpu.random import philox, threefry

    key = jnp.array([1, 2], jnp.uint32)
    with imports_by_on_cpu() as texts:
        jax.jit(lambda k: threefry.plthreefry_random_bits(k, 32, (256, 512))).lower(key)
        jax.jit(lambda k: philox.philox_random_bits(k, 32, (8, 256))).lower(key)
        jax.jit(lambda k: philox.philox_split(k, (2,))).lower(key)
    return texts


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_prng_kernels_compile_for_tpu(compiler, topology):
    texts = _prng_under_on_cpu()
    assert len(texts) == 3
    assert_compiles(compiler, texts, topology)


@functools.cache
def _debug_print_under_on_cpu():
    """A kernel printing scalars with ``pl.debug_print`` (``tpu.log``), imported by
    ``on_cpu()`` and lowered back by tpukit."""
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from tpukit import _cpu_lowering, pallas

    def body(x_ref, o_ref):
        pl.debug_print("block {} of {}", pl.program_id(0), pl.num_programs(0))
        pl.debug_print("no values")
        o_ref[...] = x_ref[...] * 2

    spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
    x = jnp.zeros((24, 128), jnp.float32)
    call = pl.pallas_call(body, grid=(3,), in_specs=[spec], out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))
    before = len(_cpu_lowering.imported())
    with pallas.on_cpu():
        jax.jit(call).lower(x)
    return [(str(k), k.lower()) for k in _cpu_lowering.imported()[before:]]


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_debug_print_compiles_for_tpu(compiler, topology):
    (kernel,) = _debug_print_under_on_cpu()
    ir, text = kernel
    assert 'print "block $0 of $1"' in ir
    result = compiler.compile(text, topology)
    assert result["ok"], result.get("error")
    assert result["llo_ops"][0]["total"] > 0


@functools.cache
def _ragged_under_on_cpu(dtype):
    """Ragged paged attention (pages copied by manual DMA into a double buffer whose ref is
    reshaped to rows and read by strided loads; in bf16 through a bitcast of the ref to
    uint32), imported by ``on_cpu()`` from its jitted entry point, lowered back by tpukit."""
    import jax.numpy as jnp
    from jax.experimental.pallas.ops.tpu.ragged_paged_attention import kernel as rpa

    q = jnp.zeros((16, 4, 128), dtype)
    pages = jnp.zeros((16, 16, 4, 128), dtype)
    lens, indices = jnp.zeros((2,), jnp.int32), jnp.zeros((2, 4), jnp.int32)
    with imports_by_on_cpu() as texts:
        jax.jit(lambda *a: rpa.ragged_paged_attention(
            *a, num_kv_pages_per_block=2, num_queries_per_block=8)).lower(
            q, pages, lens, indices, jnp.zeros((3,), jnp.int32), jnp.ones((1,), jnp.int32))
    return texts


@pytest.mark.parametrize("topology", TOPOLOGIES)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_ragged_paged_attention_imported_by_on_cpu_compiles_for_tpu(compiler, dtype, topology):
    texts = _ragged_under_on_cpu(dtype)
    assert len(texts) == 1
    result = compiler.compile(texts[0], topology)
    assert result["ok"], result.get("error")
    assert result["llo_ops"][0]["total"] > 0


@functools.cache
def _mesh_kernels_under_on_cpu():
    """A kernel over a TensorCore mesh (``pl.kernel``) and a ``pl.core_map`` inside
    ``pl.run_state`` that DMAs into an aliased HBM operand, imported by ``on_cpu()`` and
    lowered back by tpukit."""
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    def mesh_program(x):
        @pl.kernel(out_type=x, mesh=pltpu.create_tensorcore_mesh("core"),
                   scratch_types=[pltpu.VMEM(x.shape, x.dtype)])
        def doubled(x_hbm, o_hbm, vmem):
            pltpu.sync_copy(x_hbm, vmem)
            vmem[...] = vmem[...] * 2.0
            pltpu.sync_copy(vmem, o_hbm)

        return doubled(x)

    def in_place(x, acc):
        def stateful(refs):
            x_ref, acc_ref = refs

            @pl.core_map(pltpu.create_tensorcore_mesh("core"))
            def _():
                def body(x_vmem, acc_vmem):
                    pltpu.sync_copy(x_ref, x_vmem)
                    pltpu.sync_copy(acc_ref, acc_vmem)
                    acc_vmem[...] += x_vmem[...]
                    pltpu.sync_copy(acc_vmem, acc_ref)

                pl.run_scoped(body, pltpu.VMEM(x.shape, x.dtype),
                              pltpu.VMEM(acc.shape, acc.dtype))

        return pl.run_state(stateful)((x, acc))

    x = jnp.zeros((16, 256), jnp.float32)
    with imports_by_on_cpu() as texts:
        jax.jit(mesh_program).lower(x)
        jax.jit(in_place).lower(x, x)
    return texts


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_mesh_kernels_imported_by_on_cpu_compile_for_tpu(compiler, topology):
    texts = _mesh_kernels_under_on_cpu()
    assert len(texts) == 2
    assert_compiles(compiler, texts, topology)
