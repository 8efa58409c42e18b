"""Fits the table-driven f32 ``erf`` of ``runtime/src/cpu/codegen/erf_table.rs`` and checks it.

The vector ``erf`` evaluates, on ``a = min(|x|, CLAMP)``, one degree-5 polynomial in
``a - lo`` per interval (``lo`` the interval's start: ``a`` with the bits below the index
cleared, or 0 in interval 0), picked by ``k = max(bits(a), bits(2^-5)) >> 21`` (the exponent
and the top two mantissa bits: quarter binades). Interval 0 is ``[0, 1.25 * 2^-5)`` (every
smaller ``a`` is mapped onto it) and holds an odd polynomial, so tiny and subnormal ``x`` give
``c1 * x``; intervals 1..27 are the quarter binades up to ``[3.5, 4)``. The tables are indexed
by ``k`` modulo 32 (``vpermt2ps`` reads the low five bits), so the Rust side rotates them by
``FIRST % 32``.

Each interval's polynomial is a relative-error minimax fit of ``erf`` (iteratively
reweighted least squares in f64 on 4000 Chebyshev points, scipy's f64 ``erf`` as the
reference), its coefficients rounded to f32 one by one from the leading one down, each later
coefficient refitted to absorb the rounding of the earlier ones. Then every f32 in ``[0, 4]``
(and beyond the clamp up to 8) is evaluated with f32 FMA Horner steps emulated in f64 and
compared with f64 ``erf``: the printed maximum is in ulps of the f32 nearest the true value
(as ``tests/ops.rs`` measures it). The last interval's constant term is nudged up until the
clamp gives exactly 1 (so ±inf give ±1). ``scripts/erf_compiled_sweep.py`` checks the compiled
code the same way (it matches this emulation bit for bit).

Run: ``.venv/bin/python scripts/erf_table_fit.py [STEP]`` (prints the Rust tables, each
interval's error and the sweep of every STEP-th f32: STEP = 1, the default, takes about ten
minutes on one core; result 2.254 ulp at 0.0137961).
"""

import sys

import numpy as np
from scipy.special import erf

DEGREE = 5
SHIFT = 21  # quarter binades: the exponent and the top two mantissa bits
FIRST = 0x3D000000 >> SHIFT  # the quarter binade of 2^-5
INTERVALS = 28  # up to [3.5, 4)


def clamp_value():
    """The least f32 ``a`` whose f64 ``erf`` rounds to 1 in f32: every larger ``|x|`` uses it."""
    a = np.float32(3.5)
    while np.float32(erf(np.float64(a))) != np.float32(1.0):
        a = np.nextafter(a, np.float32(4.0))
    return a


CLAMP = clamp_value()


def interval(k):
    """The f64 bounds ``[lo, hi]`` of interval ``k`` (0-based) of ``a``."""
    lo_bits = (FIRST + k) << SHIFT
    hi_bits = (FIRST + k + 1) << SHIFT
    lo = 0.0 if k == 0 else float(np.uint32(lo_bits).view(np.float32))
    hi = float(np.uint32(hi_bits).view(np.float32))
    return lo, min(hi, float(CLAMP))


def powers(k):
    """The powers of ``a`` interval ``k``'s polynomial uses (odd ones only in interval 0)."""
    return [1, 3, 5] if k == 0 else list(range(DEGREE + 1))


def fit(k):
    """Interval ``k``'s coefficients (index = power of ``a``), as f32."""
    lo, hi = interval(k)
    t = np.cos(np.pi * (np.arange(4000) + 0.5) / 4000)
    y = erf((lo + hi) / 2 + (hi - lo) / 2 * t)
    a = (hi - lo) / 2 * (t + 1)  # the polynomial's variable: a - lo
    coef = np.zeros(DEGREE + 1)
    free = powers(k)
    fixed = np.zeros(DEGREE + 1)
    # Round the highest free power first, refitting the lower ones each time.
    for _ in range(len(free)):
        rest = y - np.polynomial.polynomial.polyval(a, fixed)
        w = 1.0 / y
        for _ in range(30):
            m = np.stack([a**p for p in free], 1) * (w / y)[:, None]
            c, *_ = np.linalg.lstsq(m, rest * w / y, rcond=None)
            err = np.abs((np.stack([a**p for p in free], 1) @ c - rest) / y)
            w = w * (1 + 2 * err / err.max())
        top = free.pop()
        fixed[top] = np.float32(c[-1])
    coef[:] = fixed
    return coef.astype(np.float32)


def evaluate(a, tables):
    """The vector code's result on f32 ``a >= 0`` (including the clamp), FMA emulated."""
    a = np.minimum(a, CLAMP)
    bits = a.view(np.uint32)
    k = (np.maximum(bits, np.uint32(FIRST << SHIFT)) >> SHIFT).astype(np.int64) - FIRST
    a64 = (a - tables[-1][k]).astype(np.float64)  # exact (Sterbenz)
    r = tables[DEGREE][k].astype(np.float64)
    for p in range(DEGREE - 1, -1, -1):
        r = (r * a64 + tables[p][k]).astype(np.float32).astype(np.float64)
    return r.astype(np.float32)


def ulps(got, a):
    want = erf(a.astype(np.float64))
    w = np.maximum(np.abs(want.astype(np.float32)), np.finfo(np.float32).tiny)
    ulp = (np.nextafter(w, np.float32(np.inf)) - w).astype(np.float64)
    return np.abs(got.astype(np.float64) - want) / ulp


def sweep(tables, top_bits, step=1):
    """The largest error over f32 bit patterns ``0..top_bits`` (every ``step``-th)."""
    worst, at = 0.0, 0.0
    chunk = 1 << 22
    for start in range(0, top_bits, chunk * step):
        bits = np.arange(
            start, min(start + chunk * step, top_bits), step, dtype=np.uint32
        )
        a = bits.view(np.float32)
        got = evaluate(a, tables)
        assert (got <= 1).all(), "a result above 1"
        e = ulps(got, a)
        i = int(np.argmax(e))
        if e[i] > worst:
            worst, at = float(e[i]), float(a[i])
    return worst, at


def rust_literal(v):
    """``v`` (f32) as a Rust literal: the shortest decimal that reads back as ``v``."""
    if v == np.float32(2 / np.sqrt(np.pi)):
        return "FRAC_2_SQRT_PI"
    text = str(np.float32(v))
    return text if "." in text or "e" in text else text + ".0"


def rust_tables(tables):
    """The tables as ``erf_table.rs`` declares them."""
    lines = [
        f"// Generated by scripts/erf_table_fit.py: CLAMP = {CLAMP.view(np.uint32):#x}.",
        f"const COEFFICIENTS: [[f32; {INTERVALS}]; {DEGREE + 1}] = [",
    ]
    for p in range(DEGREE + 1):
        lines.append(f"    [{', '.join(map(rust_literal, tables[p]))}],")
    lines.append("];")
    return "\n".join(lines)


def main():
    coefs = np.stack([fit(k) for k in range(INTERVALS)])  # [interval, power]
    starts = np.array([interval(k)[0] for k in range(INTERVALS)], np.float32)
    tables = [coefs[:, p] for p in range(DEGREE + 1)] + [starts]
    # ±inf (and every |x| >= CLAMP) must give exactly ±1: nudge the last interval's constant
    # term up by ulps until the clamp does.
    last = tables[0][INTERVALS - 1 : INTERVALS]
    while evaluate(np.array([CLAMP], np.float32), tables)[0] < 1:
        last[0] = np.nextafter(last[0], np.float32(2))
    print(rust_tables(tables))
    for k in range(INTERVALS):
        lo, hi = interval(k)
        bits = np.arange(
            np.float32(lo).view(np.uint32),
            np.float32(hi).view(np.uint32),
            97,
            dtype=np.uint32,
        )
        a = bits.view(np.float32)
        print(
            f"// interval {k:2} [{lo:.6g}, {hi:.6g}): {ulps(evaluate(a, tables), a).max():.2f} ulp"
        )
    step = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    top = int(np.float32(8.0).view(np.uint32))
    worst, at = sweep(tables, top, step)
    print(f"max error over every {step}-th f32 in [0, 8]: {worst:.3f} ulp at {at!r}")


if __name__ == "__main__":
    main()
