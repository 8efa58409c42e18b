"""``tpukit.helion``: run Helion programs on tpukit.

Change ``import helion`` / ``import helion.language as hl`` to ``from tpukit import helion`` /
``import tpukit.helion.language as hl``; the kernel then runs on tpukit's CPU backend
(``device="cpu"``, compiled through LLVM, the default) or its interpreter
(``device="interpret"``): per call (``kernel(x, device="interpret")``), per kernel
(``@helion.kernel(device=…)``) or for a block of code (``with helion.device("interpret"):``).
For a TPU, ``kernel.stablehlo(*args)`` gives the StableHLO module of each device loop (a Mosaic
``tpu_custom_call``, what JAX lowered; ``kernel.lower`` joins them) and ``kernel.ir(*args)``
the kernel IR tpukit runs (``.lower()`` of one is tpukit's own Mosaic lowering of it). Both
compile with libtpu for v5e and v6e (tests/conformance/test_helion.py).

How a program is translated:

- The kernel's source is parsed (as Helion does): each device loop, and each ``if`` in device
  code, is rewritten into functions (``_rewrite``). Host code (shapes, allocations, ``return``)
  runs as ordinary Python/PyTorch.
- Each top-level ``hl.tile``/``hl.grid`` loop becomes one Pallas kernel (``pl.pallas_call``)
  whose grid has one axis per tiled dimension (``_runtime``, ``_plan``). Nested ``hl.tile``
  loops become ``lax.fori_loop`` over whole tiles plus one last tile that keeps the block
  size, masked (a partial tile), carrying the variables the body reassigns; ``hl.grid``
  loops are tiles of one element. A nested loop whose bounds are device values
  (``hl.tile(start, end)`` of loaded offsets, ``hl.jagged_tile``) is a while loop over
  block-aligned tiles, masked against its bounds (``_runtime._dynamic_dim``). An ``if``
  whose condition is known while tracing (an
  ``hl.constexpr`` or Python value, ``x is not None``) runs as written; one on a device
  scalar becomes ``lax.cond``.
- Block sizes come from ``config=Config(block_sizes=[…])`` in order of first appearance
  (``hl.tile`` dimensions without an explicit ``block_size`` and ``hl.register_block_size``
  calls, outer loops first). Without one, a grid dimension gets 1024 if it tiles the last
  dimension of a 1-D tensor, 128 the last dimension of a tensor, 32 the second-to-last, 1 a
  leading one; a nested loop gets 128; ``register_block_size(n)`` gives ``min(128,
  next_power_of_2(n))``; all clipped to the dimension (except an inner loop's explicit block
  size, whose tile is then masked, as in Helion). Every block size is then rounded up to a
  legal TPU tiling of the dimensions it indexes (a multiple of 128 on a last dimension, of 8
  on the one before, or the whole dimension), nested loops' too: Mosaic must prove their
  dynamic slice starts aligned. ``configs=[…]`` autotunes among them on the active device
  on the first call of each shape signature, ``kernel.autotune(args)`` around the defaults
  (``_autotune``); ``hl.register_tunable`` reads ``Config(name=…)``, else the fragment's
  default. Helion's public names (``helion.exc``, ``helion.runtime``, ``helion.aot_kernel``,
  …) exist; python/tpukit/helion/README.md lists each and what it does here.
- Layouts (``_plan``): a tensor dimension always indexed by the same grid tile is blocked by it
  (``BlockSpec``); any other is whole and sliced in the kernel. Tensors both read and written
  (``hl.atomic_add``, stores with ``extra_mask``, read-after-write) start their output block
  from their input block; when grid steps revisit the same block, their axes run in order
  (``arbitrary``) and the block stays in VMEM between consecutive visits, or the whole tensor
  does when the visits are not consecutive: atomics are exact. Index tensors of gathers and
  scatters (``w[idx[tile], :]``) go to scalar prefetch (SMEM, at most about 256K int32
  indices on v5e/v6e); rows are moved one at a time. A device scalar plus a range indexing a
  dimension (``start + hl.arange(n)``, ``x[h : h + 1]``) is a dynamic slice, and a flat
  tensor indexed by rows walked from loaded offsets is read and written in windows of rows
  (``_windows``; the index's affine form, ``_affine``, shows both). Other loads at computed
  indices (``t[tile.index + 1]``, ``flat[tile.index * v + labels[tile]]``) read the indexed
  dimension whole and select each element by a one-hot compare (``_memory.take``; stores:
  ``put``); a dimension a tile reaches past (``x[t0, t1]`` with ``t1`` tiling a wider
  output) is whole and padded.
- Partial tiles (``_values``): the last tile of a range its block size does not divide reads
  past the end; those elements are never written back and never counted — every value knows
  which of its dimensions come from a partial tile, and reductions, scans, matmul
  contractions and ``hl.reduce`` replace those elements by their identity first (Helion's
  "reduction operations know to ignore the invalid elements").
- Torch code inside device loops runs on ``DTensor`` values wrapping the JAX arrays being
  traced (``_ops``): operators, the ``torch.*``/``Tensor.*``/``F.*`` functions of
  ``_ops.ELEMENTWISE`` and ``_ops.STRUCTURAL`` (reductions, softmax, var/mean, cumsum,
  mm/addmm/bmm/baddbmm/matmul/``@``, views, casts, ``torch.where``, factories), and
  ``[:, None]`` broadcasting. Anything else — a torch function, an ``hl`` API tpukit does not
  translate, an atomic at computed indices — raises
  ``tpukit.helion.exc.UnsupportedConstruct`` naming it and the kernel source line.
- Shapes and scalar arguments are compile-time constants (``static_shapes`` is accepted but
  every signature is its own specialization); a device loop is traced, lowered and imported
  once per signature and config, then cached on the kernel; compiled code is cached by the
  runtime.
"""

from __future__ import annotations

from tpukit.helion import _compat, _testing, autotuner, exc, language, runtime  # noqa: F401
from tpukit.helion._config import Config
from tpukit.helion._kernel import BoundKernel, Kernel, aot_kernel, device, kernel
from tpukit.helion._state import cdiv, next_power_of_2
from tpukit.helion.runtime.settings import RefMode, Settings

__all__ = [
    "BoundKernel",
    "Config",
    "Kernel",
    "RefMode",
    "Settings",
    "aot_kernel",
    "autotuner",
    "cdiv",
    "device",
    "exc",
    "jit",
    "kernel",
    "language",
    "next_power_of_2",
    "runtime",
]

jit = kernel

# Helion names with no counterpart here (python/tpukit/helion/README.md says why): using one is
# an error naming it, not an AttributeError that looks like a typo.
_NOT_SUPPORTED = {"from_cache", "OutputCodeOptions", "experimental"}


def __getattr__(name):
    if name in _NOT_SUPPORTED:
        raise exc.UnsupportedConstruct(f"`helion.{name}` is not supported by tpukit.helion")
    raise AttributeError(f"module 'tpukit.helion' has no attribute {name!r}")
