"""gelu (exact, erf-based) of a 4096x1024 torch tensor on ONE thread: tpuBLAS against torch.

Process CPU time (``time.process_time``) per call, medians of interleaved rounds (each round
times ``--calls`` calls of each implementation in turn). One thread each:
``torch.set_num_threads(1)`` and ``set_min_split_bytes(1 << 62)`` (tpuBLAS does not split).
Inputs as ``python_speed.py``'s (``torch.rand``), and ``--randn`` for normal ones (every
interval of the erf tables). Run with ``TPUKIT_BUNDLE=`` so kernels compile from this build.

    TPUKIT_BUNDLE= .venv/bin/python benches/gelu_one_thread.py [--rounds 9] [--calls 100]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
import tpukit
from tpukit import tpublas


def per_call_ms(fn, calls):
    t = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - t) / calls * 1e3


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--calls", type=int, default=100)
    p.add_argument("--randn", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(1)
    tpukit._native.set_min_split_bytes(1 << 62)
    g = torch.Generator().manual_seed(0)
    for dtype in (torch.bfloat16, torch.float32):
        make = torch.randn if args.randn else torch.rand
        x = make((4096, 1024), generator=g).to(dtype)
        want = F.gelu(x.float())
        err = (tpublas.gelu(x).float() - want).abs().max().item()
        impls = {"tpublas": lambda x=x: tpublas.gelu(x), "torch": lambda x=x: F.gelu(x)}
        times = {k: [] for k in impls}
        for f in impls.values():
            per_call_ms(f, args.calls // 4)
        for _ in range(args.rounds):
            for k, f in impls.items():
                times[k].append(per_call_ms(f, args.calls))
        med = {k: statistics.median(v) for k, v in times.items()}
        print(
            f"{str(dtype)[6:]:9} tpublas {med['tpublas']:.3f} ms  torch {med['torch']:.3f} ms  "
            f"ratio {med['tpublas'] / med['torch']:.3f}  (max |err| vs f32 gelu {err:.2e}; "
            f"tpublas {min(times['tpublas']):.3f}-{max(times['tpublas']):.3f}, "
            f"torch {min(times['torch']):.3f}-{max(times['torch']):.3f})"
        )


if __name__ == "__main__":
    main()
