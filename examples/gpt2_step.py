"""An unmodified GPT-2 training step on tpuBLAS, checked against torch eager.

HF `transformers`' GPT2LMHeadModel (2 layers, 128 wide, sequence 64; random weights, nothing
downloaded) runs forward, loss and backward inside `tpublas.mode(fallback="error")`: every
ATen operator on a tpuBLAS kernel from the bundle `import tpukit` loads. The script prints
the operators served, the first iteration beside the steady state, and the loss and
gradients against torch eager. `make demo` runs it (`transformers` comes with `make setup`).
"""

from __future__ import annotations

import time

import torch
import tpukit
import tpukit.tpublas as tb

try:
    import transformers
except ImportError:
    print("transformers is not installed (make setup installs it): skipped")
    raise SystemExit(0) from None

transformers.logging.set_verbosity_error()
cfg = transformers.GPT2Config(n_layer=2, n_embd=128, n_head=4, n_positions=64, vocab_size=1000,
                              resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0,
                              eos_token_id=0)
torch.manual_seed(0)
model = transformers.GPT2LMHeadModel(cfg)
x = torch.randint(0, 1000, (2, 64))


def step():
    model.zero_grad(set_to_none=True)
    loss = model(x, labels=x).loss
    loss.backward()
    return loss.detach(), [p.grad for p in model.parameters()]


want_loss, want_grads = step()
tpukit.warm_up()
compiled = tpukit.cache_stats().compiled
with tb.mode(fallback="error") as m:
    t = time.perf_counter()
    loss, grads = step()
    first = (time.perf_counter() - t) * 1e3
    compiled = tpukit.cache_stats().compiled - compiled
    steady = []
    for _ in range(5):
        t = time.perf_counter()
        step()
        steady.append((time.perf_counter() - t) * 1e3)

ops = sorted(n.removeprefix("aten.").removesuffix(".default") for n in m.served)
print(f"served on tpuBLAS: {len(ops)} ATen operators, {sum(m.served.values()) // 6} calls per "
      f"step; fell back to torch: {len(m.fallback)}")
print("  " + ", ".join(ops))
print(f"first iteration {first:.0f} ms ({compiled} kernels compiled), steady state "
      f"{sorted(steady)[2]:.0f} ms")
worst = max(((g - w).abs().max() / w.abs().max().clamp(min=1e-12)).item()
            for g, w in zip(grads, want_grads, strict=True))
print(f"loss {loss.item():.6f} (torch eager {want_loss.item():.6f}); largest gradient "
      f"difference {worst:.1e} of the gradient's largest element")
ok = torch.allclose(loss, want_loss, rtol=1e-4) and worst < 1e-4 and not m.fallback
print("OK" if ok else "MISMATCH")
raise SystemExit(0 if ok else 1)
