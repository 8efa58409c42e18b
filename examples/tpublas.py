"""A transformer MLP block on tpuBLAS, from Python, checked against torch eager.

`import tpukit` loads the precompiled bundle the package ships, so the first call of every
operator links machine code and compiles nothing: the script prints each first call's time and
where the process's kernels came from. Run with `.venv/bin/python examples/tpublas.py` (after
`make setup`); `make demo` runs it.
"""

from __future__ import annotations

import time

import torch
import tpukit
import tpukit.tpublas as tb


def block(x, ln_w, ln_b, w1, b1, w2, b2, ops):
    """LayerNorm → Linear → GELU → Linear → residual add → softmax over the features."""
    h = ops["layer_norm"](x, [x.shape[-1]], ln_w, ln_b, 1e-5)[0]
    h = ops["gelu"](ops["addmm"](b1, h, w1), approximate="tanh")
    y = ops["add"](x, ops["addmm"](b2, h, w2))
    return ops["softmax"](y, -1, False)


TPUBLAS = {"layer_norm": tb.native_layer_norm, "addmm": tb.addmm, "gelu": tb.gelu,
           "add": tb.add, "softmax": tb._softmax}
TORCH = {"layer_norm": torch.ops.aten.native_layer_norm, "addmm": torch.addmm,
         "gelu": torch.nn.functional.gelu, "add": torch.add,
         "softmax": torch.ops.aten._softmax}


def timed(name, f, seen=set()):  # noqa: B006 - the names called so far in this process
    """Calls `f` and prints how long it took, and whether it was the operator's first call."""
    t = time.perf_counter()
    out = f()
    first = "first call" if name not in seen else "again"
    seen.add(name)
    print(f"  {name:<12} {first:<10} {(time.perf_counter() - t) * 1e3:6.2f} ms")
    return out


def main() -> None:
    torch.manual_seed(0)
    tokens, d, hidden = 300, 512, 1000  # none a multiple of the kernels' blocks
    x = torch.randn(tokens, d)
    params = [torch.ones(d), torch.zeros(d), torch.randn(d, hidden) / d**0.5,
              torch.randn(hidden), torch.randn(hidden, d) / hidden**0.5, torch.randn(d)]

    print(f"tpuBLAS: a {tokens}x{d} MLP block (hidden {hidden}), f32, in a fresh process:")
    timed_ops = {name: (lambda *a, f=f, name=name, **k: timed(name, lambda: f(*a, **k)))
                 for name, f in TPUBLAS.items()}
    got = block(x, *params, timed_ops)
    compiled, _, bundle, _ = tpukit.cache_stats()
    print(f"  kernels: {bundle} from the bundle, {compiled} compiled")

    want = block(x, *params, TORCH)
    err = (got - want).abs().max().item()
    print(f"  max |tpuBLAS - torch| = {err:.2e}")
    assert err < 1e-5, "tpuBLAS and torch disagree"

    xb, pb = x.bfloat16(), [p.bfloat16() for p in params]
    got, want = block(xb, *pb, TPUBLAS), block(xb, *pb, TORCH)
    err = (got.float() - want.float()).abs().max().item()
    print(f"  bf16: max |tpuBLAS - torch| = {err:.2e} (bf16 rounds to 2^-8)")
    assert got.dtype == torch.bfloat16 and err < 1e-2, "tpuBLAS and torch disagree in bf16"
    print("tpublas: ok")


if __name__ == "__main__":
    main()
