"""Every Helion example kernel (examples/helion/), lowered for TPU, compiles with libtpu for v5e
and v6e — on shapes the blocks divide and shapes they do not, in f32 and bf16.

Two lowerings of each kernel are compiled:

* ``jax``: what ``kernel.stablehlo(...)`` returns — the StableHLO JAX produced from the Pallas
  kernel tpukit.helion translated the program into (what a TPU would run);
* ``tpukit``: tpukit's own Mosaic lowering (``Kernel.lower``) of the kernel IR tpukit imported
  from it and runs on the CPU (``kernel.ir(...)``) — including kernels that read their output
  (``hl.atomic_add`` in split-K matmul) and 1-D edge blocks of exactly 128 elements (the f32
  bias of ``matmul_epilogue`` on 150 columns).
"""

import functools
import importlib
import pathlib
import sys

import pytest
from conftest import helion_modules
from tpu_compile import TOPOLOGIES

torch = pytest.importorskip("torch")

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "helion"

# kernel -> (example module, argument builder(shape, dtype), [divisible shape, other shape])
KERNELS = {
    "add": ("add", lambda s, d: (_randn(s, d), _randn(s[1:], d)), [(256, 512), (100, 300)]),
    "exp": ("exp", lambda s, d: (_randn(s, d),), [(4096,), (3000,)]),
    "softmax": ("softmax", lambda s, d: (_randn(s, d),), [(64, 256), (100, 300)]),
    "softmax_decomposed": ("softmax", lambda s, d: (_randn(s, d),), [(64, 256), (100, 300)]),
    "softmax_two_pass": ("softmax", lambda s, d: (_randn(s, d),), [(64, 256), (100, 300)]),
    "layer_norm": ("layer_norm", lambda s, d: (_randn(s, d), [s[1]], _randn(s[1:], d),
                                                _randn(s[1:], d)), [(64, 384), (100, 300)]),
    "layer_norm_no_bias": ("layer_norm", lambda s, d: (_randn(s, d), [s[1]], _randn(s[1:], d)),
                           [(64, 384), (100, 300)]),
    "rms_norm": ("rms_norm", lambda s, d: (_randn(s, d), _randn(s[1:], d)),
                 [(64, 512), (100, 300)]),
    "sum_kernel": ("sum", lambda s, d: (_randn(s, d),), [(64, 512), (100, 300)]),
    "matmul": ("matmul", lambda s, d: _mm(s, d), [(128, 256, 128), (200, 300, 150)]),
    "matmul_epilogue": ("matmul", lambda s, d: _mm(s, d) + (_bias_relu(s, d),),
                        [(128, 256, 128), (200, 300, 150)]),
    "matmul_dot": ("matmul", lambda s, d: _mm(s, d), [(128, 256, 128), (200, 300, 150)]),
    "matmul_split_k": ("matmul_split_k", lambda s, d: _mm(s, d),
                       [(64, 512, 128), (100, 300, 150)]),
    "matmul_split_k_epilogue": ("matmul_split_k", lambda s, d: _mm(s, d) + (_bias(s, d),),
                                [(64, 512, 128), (100, 300, 150)]),
    "bmm": ("bmm", lambda s, d: (_randn(s[:3], d), _randn((s[0], s[2], s[3]), d)),
            [(2, 64, 128, 128), (3, 40, 200, 136)]),
    "embedding": ("embedding", lambda s, d: (torch.randint(0, s[2], s[:2], dtype=torch.int32),
                                             _randn(s[2:], d)), [(8, 32, 16, 128), (7, 13, 50, 300)]),
}
# kernels whose name differs from the entry's
FUNCTIONS = {"layer_norm_no_bias": "layer_norm", "matmul_epilogue": "matmul",
             "matmul_split_k_epilogue": "matmul_split_k"}
# examples run with a non-default config
CONFIGS = {"matmul_split_k": {"split_k": 4}, "matmul_split_k_epilogue": {"split_k": 4}}

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}

def _randn(shape, dtype):
    return torch.randn(shape).to(dtype)


def _mm(s, d):
    return (_randn(s[:2], d), _randn(s[1:], d))


def _bias(s, d):
    bias = _randn(s[2:], d)
    return lambda acc, tile: acc + bias[tile[1]]


def _bias_relu(s, d):
    bias = _randn(s[2:], d)
    return lambda acc, tile: torch.relu(acc + bias[tile[1]])


def test_every_example_kernel_is_covered():
    """Each `@helion.kernel` of examples/helion/ has conformance cases."""
    import ast

    kernels = set()
    for path in EXAMPLES.glob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and any(
                "kernel" in ast.unparse(d) for d in node.decorator_list
            ):
                kernels.add(node.name)
    assert kernels == {FUNCTIONS.get(n, n) for n in KERNELS}


def _kernel(name):
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    from tpukit import helion

    module, _, _ = KERNELS[name]
    k = getattr(importlib.import_module(module), FUNCTIONS.get(name, name))
    if name in CONFIGS:
        k = helion.kernel(k.fn, config=helion.Config(**CONFIGS[name]))
    return k


@functools.cache
def _lowered(name, shape, dtype, path):
    """The StableHLO modules (one per device loop) of one kernel, lowered once per path."""
    torch.manual_seed(0)
    _, build, _ = KERNELS[name]
    kernel = _kernel(name)
    args = build(shape, DTYPES[dtype])
    return helion_modules(kernel, args, path)


CASES = []
for _name, (_, _, _shapes) in KERNELS.items():
    for _shape in _shapes:
        for _dtype in DTYPES:
            for _path in ("jax", "tpukit"):
                for _topology in TOPOLOGIES:
                    CASES.append(pytest.param(
                        _name, _shape, _dtype, _path, _topology,
                        id=f"{_name}-{'x'.join(map(str, _shape))}-{_dtype}-{_path}-{_topology}",
                    ))


@pytest.mark.parametrize(("name", "shape", "dtype", "path", "topology"), CASES)
def test_helion_kernel_compiles_for_tpu(compiler, name, shape, dtype, path, topology):
    modules = _lowered(name, shape, dtype, path)
    assert len(modules) == 1, "each example has one device loop"
    result = compiler.compile(modules[0], topology)
    assert result["ok"], result.get("error")
    assert len(result["llo_ops"]) == 1, "one Mosaic kernel per module"
    assert result["llo_ops"][0]["total"] > 0
