"""The TensorCore's stateful PRNG in Pallas kernels: ``pltpu.prng_seed`` and
``pltpu.prng_random_bits``, and ``pltpu.stateful_uniform``/``stateful_normal``/
``sample_block`` built on them. tpukit defines the bits (importer/src/prng.rs): the tests
check them exactly against a numpy model of that definition, on both devices, and the
properties users rely on (reproducible per seed, distinct draws, the distributions'
moments)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import tpukit
from tpukit import pallas

M32 = np.uint64(0xFFFFFFFF)


def mix(x):
    """The generator's 32-bit bijection (lowbias32), on uint64 arrays holding 32-bit words."""
    x = np.asarray(x, np.uint64) & M32
    for shift, factor in ((16, 0x7FEB352D), (15, 0x846CA68B)):
        x ^= x >> np.uint64(shift)
        x = (x * np.uint64(factor)) & M32
    return x ^ (x >> np.uint64(16))


def model_bits(seeds, shape, draw=0):
    """Draw number `draw` after `prng_seed(*seeds)`, as int32."""
    key = np.uint64(0x2545F491)
    for s in seeds:
        key = mix(key ^ np.uint64(s % 2**32))
    stream = mix(key ^ mix(np.uint64(draw)))
    index = np.arange(int(np.prod(shape)), dtype=np.uint64)
    bits = mix(mix((index + stream) & M32) ^ key)
    return bits.astype(np.uint32).view(np.int32).reshape(shape)


def two_draws(seed_ref, a_ref, b_ref):
    pltpu.prng_seed(seed_ref[0], seed_ref[1])
    a_ref[...] = pltpu.prng_random_bits(a_ref.shape)
    b_ref[...] = pltpu.prng_random_bits(b_ref.shape)


def run_two_draws(seeds, shapes, device):
    kernel = pallas.custom_kernel(
        lambda s: tuple(jax.ShapeDtypeStruct(sh, jnp.int32) for sh in shapes), two_draws,
        in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)])
    return kernel(np.array(seeds, np.int32), device=device)


@pytest.mark.parametrize("device", tpukit.DEVICES)
@pytest.mark.parametrize("shapes", [[(8, 128), (16, 256)], [(24, 200), (4, 256)],
                                    [(2, 8, 128), (8, 128)]])
def test_bits_follow_the_documented_generator(device, shapes):
    seeds = (7, -3)
    a, b = run_two_draws(seeds, shapes, device)
    np.testing.assert_array_equal(a, model_bits(seeds, shapes[0], 0))
    np.testing.assert_array_equal(b, model_bits(seeds, shapes[1], 1))


def test_seeds_and_draws_give_distinct_bits():
    shapes = [(16, 256), (16, 256)]
    a, b = run_two_draws((1, 2), shapes, "cpu")
    a2, _ = run_two_draws((1, 2), shapes, "cpu")
    c, _ = run_two_draws((2, 1), shapes, "cpu")
    np.testing.assert_array_equal(a, a2)
    assert len(np.unique(a)) == a.size  # one draw's elements are all distinct
    for other in (b, c):
        assert np.mean(a == other) < 0.01


def test_each_grid_step_reseeded_by_its_index():
    # a common pattern: prng_seed(seed, program_id) per block
    def kernel(seed_ref, o_ref):
        pltpu.prng_seed(seed_ref[0], pl.program_id(0))
        o_ref[...] = pltpu.prng_random_bits(o_ref.shape)

    call = pallas.custom_kernel(
        lambda s: jax.ShapeDtypeStruct((40, 128), jnp.int32), kernel, grid=(5,),
        in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)))
    for device in tpukit.DEVICES:
        got = call(np.array([42], np.int32), device=device)
        want = np.concatenate([model_bits((42, i), (8, 128)) for i in range(5)])
        np.testing.assert_array_equal(got, want)


def test_stateful_uniform_and_normal_have_their_moments():
    def kernel(seed_ref, u_ref, n_ref):
        pltpu.prng_seed(seed_ref[0])
        u_ref[...] = pltpu.stateful_uniform(shape=u_ref.shape, minval=-1.0, maxval=3.0)
        n_ref[...] = pltpu.stateful_normal(shape=n_ref.shape)

    shape = (256, 256)
    call = pallas.custom_kernel(
        lambda s: (jax.ShapeDtypeStruct(shape, jnp.float32),) * 2, kernel,
        in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)])
    u, n = call(np.array([5], np.int32))
    assert u.min() >= -1.0 and u.max() < 3.0
    # 65536 samples: the mean's standard error is ~0.0045 (uniform) and ~0.004 (normal)
    assert abs(u.mean() - 1.0) < 0.03 and abs(u.var() - 16 / 12) < 0.03
    assert abs(n.mean()) < 0.03 and abs(n.std() - 1.0) < 0.03
    assert np.histogram(u, bins=8, range=(-1, 3))[0].min() > 0.9 * u.size / 8


def test_typed_keys_cross_the_call_and_seed_the_generator():
    # a `key<pl>` operand (pltpu.to_pallas_key) read in SMEM seeds the PRNG; a key copied
    # through the kernel comes back a key with the same data
    def seeded(key_ref, o_ref):
        pltpu.prng_seed(key_ref[...])
        o_ref[...] = pltpu.prng_random_bits(o_ref.shape)

    def copied(key_ref, o_ref):
        pltpu.sync_copy(key_ref, o_ref)

    def program(key):
        smem = pl.BlockSpec(memory_space=pltpu.SMEM)
        bits = pl.pallas_call(seeded, in_specs=[smem],
                              out_shape=jax.ShapeDtypeStruct((8, 128), jnp.int32))(key)
        same = pl.pallas_call(copied, in_specs=[smem], out_specs=smem,
                              out_shape=jax.ShapeDtypeStruct((), jax.typeof(key).dtype))(key)
        return bits, same

    key = pltpu.to_pallas_key(jax.random.key(11, impl="threefry2x32"))
    with pallas.on_cpu():
        bits, same = jax.jit(program)(key)
    data = np.asarray(jax.random.key_data(key)).reshape(-1).astype(np.int64)
    np.testing.assert_array_equal(np.asarray(bits), model_bits(tuple(data), (8, 128)))
    np.testing.assert_array_equal(jax.random.key_data(same), jax.random.key_data(key))


def test_sample_block_does_not_depend_on_the_blocking():
    def body(key_ref, o_ref):
        o_ref[...] = pltpu.sample_block(
            jax.random.uniform, key_ref[...], block_size=o_ref.shape, tile_size=(8, 128),
            total_size=(32, 512), block_index=(pl.program_id(0), pl.program_id(1)))

    key = jax.random.key(3, impl="pallas_tpu")
    results = []
    for block, grid in (((8, 128), (4, 4)), ((16, 256), (2, 2))):
        def program(k, block=block, grid=grid):
            return pl.pallas_call(
                body, out_shape=jax.ShapeDtypeStruct((32, 512), jnp.float32), grid=grid,
                in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)],
                out_specs=pl.BlockSpec(block, lambda i, j: (i, j)))(k)

        with pallas.on_cpu():
            results.append(np.asarray(jax.jit(program)(key)))
    np.testing.assert_array_equal(results[0], results[1])
    assert 0.0 <= results[0].min() and results[0].max() < 1.0
    assert len(np.unique(results[0])) > 0.99 * results[0].size
