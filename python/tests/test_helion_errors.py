"""tpukit.helion errors: an unsupported construct or a misuse raises an error that names it and
the kernel's source line (never a crash or a wrong answer)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import tpukit.helion.language as hl  # noqa: E402
from tpukit import helion  # noqa: E402
from tpukit.helion.exc import HelionError, NotInsideKernel, UnsupportedConstruct  # noqa: E402

HERE = r"test_helion_errors\.py:\d+"


def test_unsupported_torch_function_names_it_and_the_line():
    @helion.kernel
    def sorts(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            out[tile, :] = torch.sort(x[tile, :], dim=-1).values
        return out

    with pytest.raises(UnsupportedConstruct, match=rf"torch\.sort.*{HERE}.*torch\.sort"):
        sorts(torch.randn(8, 128))


def test_unsupported_tensor_method_and_hl_api_are_named():
    @helion.kernel
    def method(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            out[tile] = x[tile].cummax(0)
        return out

    with pytest.raises(UnsupportedConstruct, match=rf"Tensor\.cummax.*{HERE}"):
        method(torch.randn(128))

    @helion.kernel
    def scan(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            out[tile] = hl.atomic_cas(x, [tile], x[tile], x[tile])
        return out

    with pytest.raises(UnsupportedConstruct, match=rf"`hl\.atomic_cas` is not supported.*{HERE}"):
        scan(torch.randn(128))


def test_data_dependent_control_flow_on_a_tensor_is_named():
    @helion.kernel
    def branchy(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            v = x[tile]
            if v > 0:
                v = -v
            out[tile] = v
        return out

    with pytest.raises(UnsupportedConstruct, match=rf"device `if` on a tensor.*{HERE}.*if v > 0"):
        branchy(torch.randn(128))

    @helion.kernel
    def loopy(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            v = x[tile]
            while v.sum() > 0:
                v = v - 1
            out[tile] = v
        return out

    with pytest.raises(UnsupportedConstruct, match=rf"data-dependent control flow.*{HERE}"):
        loopy(torch.randn(128))


def test_one_sided_device_if_variable_is_refused_when_the_condition_is_on_device():
    # decorating is fine (the condition might have been decided while tracing); a device
    # condition cannot leave `w` unassigned in one branch of a lax.cond
    @helion.kernel
    def kernel(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            if tile.begin == 0:
                w = x[tile]
            out[tile] = w
        return out

    with pytest.raises(UnsupportedConstruct, match=rf"`w` is assigned in only one branch.*{HERE}"):
        kernel(torch.randn(256))


def test_host_tensor_used_directly_on_device():
    @helion.kernel
    def direct(x, y):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            out[tile] = x[tile] + y
        return out

    with pytest.raises(UnsupportedConstruct, match=rf"host tensor `y` used directly.*{HERE}"):
        direct(torch.randn(128), torch.randn(128))


def test_a_tile_used_as_a_value_and_misused_loops():
    @helion.kernel
    def tile_value(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            out[tile] = x[tile] + tile
        return out

    with pytest.raises(UnsupportedConstruct, match=rf"a tile used as a value.*{HERE}"):
        tile_value(torch.randn(128))

    def breaks(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            out[tile] = x[tile]
            break
        return out

    with pytest.raises(UnsupportedConstruct, match=rf"`break` in a device loop.*{HERE}"):
        helion.kernel(breaks)

    @helion.kernel
    def python_range_inside(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            for _ in hl.static_range(2):
                out[tile] = x[tile]
            for _ in iter([1]):
                out[tile] = x[tile]
        return out

    python_range_inside(torch.randn(128))  # plain Python loops unroll at trace time


def test_kernel_without_device_loop_and_device_api_on_host():
    def no_loop(x):
        return x * 2

    with pytest.raises(HelionError, match="has no `hl.tile`/`hl.grid` loop"):
        helion.kernel(no_loop)

    @helion.kernel
    def zeros_on_host(x):
        z = hl.zeros([4])
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            out[tile] = x[tile] + z
        return out

    with pytest.raises(NotInsideKernel, match=rf"hl\.zeros.*device loop.*{HERE}"):
        zeros_on_host(torch.randn(8))


def test_dtypes_tpus_lack_and_unknown_config_forms():
    @helion.kernel
    def double(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            out[tile] = x[tile] * 2
        return out

    with pytest.raises(HelionError, match="float64 tensors are not supported on TPU"):
        double(torch.randn(128, dtype=torch.float64))
    nested = helion.kernel(double.fn, config=helion.Config(block_sizes=[[32], [16]]))
    with pytest.raises(HelionError, match="nested block_sizes"):
        nested(torch.randn(128))
    with pytest.raises(HelionError, match="Cannot specify both config and configs"):
        helion.kernel(double.fn, config=helion.Config(), configs=[helion.Config()])


def test_a_reduction_over_a_reshaped_partial_tile_is_refused():
    @helion.kernel(config=helion.Config(block_sizes=[32]))
    def flat_max(x):
        out = torch.empty([helion.cdiv(x.size(0), 32)], dtype=x.dtype)
        for t in hl.tile(x.size(0)):
            out[t.id] = x[t, :].reshape(-1).amax()
        return out

    with pytest.raises(UnsupportedConstruct, match=rf"amax over a dimension that a resh.*{HERE}"):
        flat_max(torch.randn(100, 128))


def test_integer_torch_cumsum_and_bad_grid_step():
    # torch.cumsum is the triangular matmul, floats only; hl.cumsum scans integers exactly
    @helion.kernel
    def int_scan(x):
        out = torch.empty_like(x)
        for t in hl.tile(x.size(0)):
            out[t] = torch.cumsum(x[t], 0)
        return out

    with pytest.raises(UnsupportedConstruct, match=rf"cumsum of int32 values.*{HERE}"):
        int_scan(torch.arange(128, dtype=torch.int32))

    @helion.kernel
    def strided(x):
        out = torch.empty_like(x)
        for i in hl.grid(0, x.size(0), 2):
            out[i] = x[i]
        return out

    with pytest.raises(UnsupportedConstruct, match=rf"hl\.grid with step=2.*{HERE}"):
        strided(torch.randn(8))


def test_store_of_the_wrong_shape_names_the_tensor():
    @helion.kernel
    def wrong(x):
        out = torch.empty([x.size(0)], dtype=x.dtype)
        for t in hl.tile(x.size(0)):
            out[t] = x[t, :]
        return out

    with pytest.raises(UnsupportedConstruct, match=rf"storing a value of shape.*`out`.*{HERE}"):
        wrong(torch.randn(8, 128))


def test_an_index_tensor_too_large_for_tpu_scalar_prefetch_is_refused_at_lowering():
    @helion.kernel
    def lookup(idx, w):
        out = torch.empty([idx.size(0), w.size(1)], dtype=w.dtype)
        for t in hl.tile(idx.size(0)):
            out[t, :] = w[idx[t], :]
        return out

    idx = torch.zeros(300_000, dtype=torch.int32)
    w = torch.randn(4, 128)
    with pytest.raises(HelionError, match=r"index tensor `idx` has 300000 elements.*SMEM"):
        lookup.stablehlo(idx, w)
    torch.testing.assert_close(lookup(idx[:1000], w), w[idx[:1000].long()])


def test_loop_level_errors_name_the_loop_line():
    @helion.kernel(config=helion.Config(block_sizes=[128]))
    def offset(x):
        out = torch.zeros_like(x)
        for t in hl.tile(5, x.size(0)):
            out[t] = x[t]
        return out

    with pytest.raises(UnsupportedConstruct, match=rf"begin is not a multiple.*{HERE}.*hl\.tile"):
        offset(torch.randn(1000))

    @helion.kernel
    def reads_only(x):
        for t in hl.tile(x.size(0)):
            _ = x[t] * 2
        return x

    with pytest.raises(HelionError, match=rf"stores to no host tensor.*{HERE}"):
        reads_only(torch.randn(128))
