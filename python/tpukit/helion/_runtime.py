"""Running a rewritten Helion kernel: host code in Python, device loops as Pallas kernels.

The rewritten kernel (``_rewrite``) calls ``launch`` for each top-level device loop and
``inner_loop`` for each loop nested in one.

``launch`` plans the loop once per signature (``_plan``: two analysis traces under
``jax.eval_shape``, then a ``pl.pallas_call`` whose body traces the loop again on refs); the
kernel goes through ``tpukit.pallas.custom_kernel`` (lowered by JAX for TPU, imported into
tpukit's IR, run on the CPU) and its outputs are copied into the host tensors.

``inner_loop`` runs a nested loop as a ``lax.fori_loop`` over its whole tiles plus one
last (partial, masked) tile, carrying the variables the body reassigns (an f32 accumulator from
``hl.zeros``, say). Its block size is made TPU-legal for the dimensions it indexes, like the
grid's.
"""

from __future__ import annotations

import os

import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl

from tpukit import _arrays
from tpukit.helion import exc
from tpukit.helion._plan import (
    DEFAULT_INNER_BLOCK,
    check_indices,
    check_prefetch_fits,
    from_kernel,
    kernel_arrays,
    make_plan,
    wrap_errors,
)
from tpukit.helion._state import (
    CallState,
    cdiv,
    current_call,
    current_trace,
    enter_site,
    leave_site,
)
from tpukit.helion._tiles import GridIndex, JaggedTile, Tile, TileBound, TileSpec
from tpukit.helion._values import DTensor, merge_dims, select, unwrap
from tpukit.helion._where import where

# JAX attributes each op to the innermost frame outside its own code; skipping this package's
# frames too makes tpukit's import errors name the line of the user's kernel.
try:
    from jax._src import source_info_util

    source_info_util.register_exclusion(os.path.dirname(os.path.abspath(__file__)))
except (ImportError, AttributeError):  # pragma: no cover - a JAX without it
    pass

__all__ = ["CallState", "device_if", "launch", "inner_loop"]


# --- top-level loops ---------------------------------------------------------------------------


def _key_of(v):
    if _is_host(v):
        return ("T", tuple(v.shape), str(v.dtype))
    if isinstance(v, (int, float, bool, str, type(None))):
        return ("S", type(v).__name__, v)
    if isinstance(v, (tuple, list)):
        return ("L", tuple(_key_of(x) for x in v))
    try:
        hash(v)
        return ("H", v)
    except TypeError:
        return ("O", id(v))


def _is_host(v) -> bool:
    try:
        _arrays.kind(v)
        return True
    except TypeError:
        return False


def _host_arrays(plan, env):
    """The host tensors of this call, by the plan's keys (None if one went away)."""
    out = {}
    for key in plan.order:
        src = plan.sources[key]
        obj = env[src] if isinstance(src, str) else src()
        if obj is None:
            return None
        out[key] = obj
    return out


def _current_plan(st, site, spec, device_fn, env):
    """The plan of this loop for these arguments, the host tensors, and whether the plan is
    new (cached on the kernel once its kernel is traced: see ``launch``)."""
    c0 = st.counter
    key = (
        site,
        c0,
        spec.kind,
        tuple(spec.begins),
        tuple(spec.ends),
        tuple(spec.explicit),
        tuple(sorted((k, _key_of(v)) for k, v in env.items())),
        tuple(sorted((k, _key_of(v)) for k, v in st.config.items())),  # block sizes, tunables
    )
    plan = st.kernel._plans.get(key)
    hosts = _host_arrays(plan, env) if plan is not None else None
    fresh = hosts is None or any(
        tuple(hosts[k].shape) != plan.infos[k].shape for k in plan.order
    )
    if fresh:
        before = dict(st.sizes)
        plan = make_plan(st, spec, device_fn, env, c0)
        plan.sizes = {k: v for k, v in st.sizes.items() if before.get(k) != v}
        hosts = _host_arrays(plan, env)
    st.counter = plan.counter_after
    st.sizes.update(plan.sizes)
    return key, plan, hosts, fresh


def at_site(site):
    """Called by the rewritten kernel just before a loop's ``hl.tile(...)`` is evaluated (see
    ``_state.allocate_block_id``); ``launch``/``inner_loop`` end the site."""
    enter_site(site)
    return site


def launch(site, spec, device_fn, env):
    """Runs one top-level device loop (called by the rewritten kernel)."""
    leave_site()
    st = current_call()
    if not isinstance(spec, TileSpec):
        raise exc.HelionError(
            f"kernel `{st.kernel.name}`: a device loop must iterate over `hl.tile(...)` or "
            f"`hl.grid(...)`, got {type(spec).__name__}"
        )
    key, plan, hosts, fresh = _current_plan(st, site, spec, device_fn, env)
    arrays = kernel_arrays(plan, hosts)
    if fresh and os.environ.get("HELION_PRINT_OUTPUT_CODE") == "1":
        from tpukit.pallas import print_output_code  # the Pallas kernel built, and its Mosaic

        print_output_code(plan.pallas, *arrays)
    name = st.kernel.name
    if st.mode == "lower":
        check_prefetch_fits(plan, arrays, name)
        st.lowered.append(wrap_errors(name, lambda: plan.pallas.lower(*arrays)))
        st.kernels.append(wrap_errors(name, lambda: plan.pallas.kernel(*arrays)))
    else:
        check_indices(plan, hosts)
        results = wrap_errors(name, lambda: plan.pallas(*arrays, device=st.device))
    if fresh:
        # the kernel is traced (with this call's tensors): the plan no longer needs them
        plan.release_tensors()
        st.kernel._plans[key] = plan
    if st.mode == "lower":
        return
    if not isinstance(results, tuple):
        results = (results,)
    for k, r in zip(plan.outputs, results, strict=True):
        _copy_into(hosts[k], from_kernel(_arrays.to_numpy(r), plan.infos[k]))


def _copy_into(obj, result):
    if isinstance(obj, np.ndarray):
        obj[...] = result.astype(obj.dtype, copy=False)
        return
    k = _arrays.kind(obj)
    if k == "torch":
        t = _arrays.to_kind(np.ascontiguousarray(result), "torch")
        obj.copy_(t.to(obj.dtype))
        return
    raise exc.HelionError("JAX arrays are immutable: pass torch tensors or numpy arrays")


# --- inner loops ---------------------------------------------------------------------------


def inner_loop(site, spec, fn, carry):
    """Runs a nested device loop ``for tile in spec: carry = fn(tile, carry)``."""
    leave_site()
    trace = current_trace()
    if trace is None:
        raise exc.HelionError("a nested device loop outside a device loop" + where())
    if not isinstance(spec, TileSpec):
        raise exc.UnsupportedConstruct(
            f"a `for` loop over {type(spec).__name__} inside a device loop (device loops use "
            f"`hl.tile` or `hl.grid`){where()}"
        )
    fn = _locals_stay_unbound(fn)
    if spec.multi and len(spec) > 1:
        # tile([a, b]) inside: nested loops, the last dimension innermost
        return _inner_multi(site, spec, fn, carry, 0, [])
    return _inner_dim(site, spec, 0, lambda t, c: fn(t if not spec.multi else (t,), c), carry)


def _locals_stay_unbound(fn):
    """``fn`` whose results are ``UNBOUND`` wherever its carried input was: a variable first
    assigned inside a loop body (bound before the loop only in a compile-time ``if`` not
    taken) is local to each iteration, as the body must assign it before reading it; after
    the loop it stays unbound (reading it there is an ``UndefinedVariable`` error, where
    Python would see the last iteration's value)."""

    def run(t, carry):
        out = fn(t, carry)
        if len(out) != len(carry):
            return out
        return tuple(UNBOUND if c is UNBOUND else o for c, o in zip(carry, out, strict=True))

    return run


def _inner_multi(site, spec, fn, carry, d, outer):
    if d == len(spec) - 1:
        return _inner_dim(site, spec, d, lambda t, c: fn(tuple(outer + [t]), c), carry)
    return _inner_dim(
        site, spec, d, lambda t, c: _inner_multi(site, spec, fn, c, d + 1, outer + [t]), carry
    )


def _bounds(spec, d):
    """``(begin, static extent, range end, partial, window end)`` of inner dimension ``d``:
    static bounds, or ``tile.begin``/``tile.end`` of an enclosing tile (whose partial last
    tile makes this loop's tiles partial too)."""
    b, e = spec.begins[d], spec.ends[d]
    if not isinstance(b, DTensor) and not isinstance(e, DTensor):
        return b, e - b, e, False, e
    if (
        isinstance(b, TileBound)
        and isinstance(e, TileBound)
        and b.tile is e.tile
        and (b.which, e.which) == ("begin", "end")
    ):
        t = b.tile
        return t._begin, t.size, t.range_end, t.partial, t.window_end
    for v in (b, e):
        if isinstance(v, DTensor) and (v.ndim != 0 or not jnp.issubdtype(v.a.dtype, jnp.integer)):
            raise exc.UnsupportedConstruct(
                f"a nested device loop bound of shape {tuple(v.shape)} and dtype {v.a.dtype} "
                f"(bounds are integer scalars){where()}"
            )
    return unwrap(b), None, unwrap(e), True, None


def _inner_block(trace, site, spec, d, extent):
    """The block size of inner dimension ``d``: the plan's TPU-legal one; in the first
    analysis the program's, the config's or the default, which the plan then legalises."""
    key = (site, d)
    if spec.kind == "grid":
        bs = 1
    elif key in trace.inner_sizes:
        bs = trace.inner_sizes[key]
    else:
        # an explicit block size is kept even past the extent (a masked tile, as in Helion:
        # `hl.zeros([tm, bn])` and the loop's tiles agree), a default one is clipped to it
        bs = spec.block_size(d)
        if bs is None:
            bs = DEFAULT_INNER_BLOCK if extent is None else min(DEFAULT_INNER_BLOCK, extent)
        bs = max(1, bs)
    # a data-dependent extent (None) is recorded as 0: the plan rounds bs up to a legal tiling
    trace.inner_loops[key] = (extent or 0, bs)
    if spec.ids[d] is not None:
        current_call().sizes[spec.ids[d]] = bs
    return key, bs


def _inner_dim(site, spec, d, body, carry):
    """Runs inner dimension ``d``: whole tiles in a ``fori_loop``, then the last tile. Over a
    static range the block size does not divide, the last tile keeps the block size (as in
    Helion) and is partial: it reads past the end into padding, and carried values keep their
    incoming elements wherever it is past the end (``_masked_update``), so an accumulator of
    the block's shape (``acc += x[tm, tn]``) sums only real elements."""
    trace = current_trace()
    begin, extent, range_end, partial, window_end = _bounds(spec, d)
    if extent is None:
        return _dynamic_dim(site, spec, d, body, carry, begin, range_end)
    if extent <= 0:
        return carry
    key, bs = _inner_block(trace, site, spec, d, extent)
    range_begin = begin if isinstance(begin, int) else 0
    n_full, tail = divmod(extent, bs)
    masked_tail = bool(tail) and isinstance(begin, int) and spec.kind != "grid"
    if masked_tail:
        window_end = max(window_end, begin + (n_full + 1) * bs)

    def make(start, size, part=partial):
        t = Tile(start, size, bs, range_begin, range_end, key=key, partial=part,
                 window_end=window_end, count=cdiv(extent, bs))
        return GridIndex(jnp.asarray(start, jnp.int32), t) if spec.kind == "grid" else t

    if trace.mode == "analyze":
        first = make(begin, bs, True) if masked_tail else make(begin, min(bs, extent))
        out = body(first, carry)
        _check_carry(carry, out)
        return out
    if n_full == 1:
        carry = body(make(begin, bs), carry)
    elif n_full > 1:
        carry = _fori(lambda i: make(begin + i * bs, bs), n_full, body, carry)
    if masked_tail:
        last = make(begin + n_full * bs, bs, True)
        carry = _masked_update(carry, body(last, carry), last)
    elif tail:
        carry = body(make(begin + n_full * bs, tail), carry)
    return carry


def _dynamic_dim(site, spec, d, body, carry, begin, end):
    """Inner dimension ``d`` over a range whose bounds are device values (``hl.tile(start,
    end)`` with loaded bounds, ``hl.jagged_tile``): a loop of ``cdiv(end - begin, bs)`` whole
    tiles (a while loop), each partial (masked against ``end``, or per lane against
    ``spec.jagged``'s lengths)."""
    trace = current_trace()
    key, bs = _inner_block(trace, site, spec, d, None)
    jagged = getattr(spec, "jagged", None)
    begin = jnp.asarray(begin, jnp.int32)
    end = jnp.asarray(end, jnp.int32)
    # tiles start at multiples of the block size (aligned slices for Mosaic); the elements
    # before `begin` are invalid, as those past `end` are
    first = (begin // bs) * bs
    n = jnp.maximum((end - first + (bs - 1)) // bs, 0)

    def make(start):
        start = pl.multiple_of(start, bs)
        kw = dict(key=key, partial=True, window_end=0, count=DTensor(n), dynamic=True)
        if jagged is not None:
            return JaggedTile(start, bs, bs, begin, end, parent=jagged, **kw)
        t = Tile(start, bs, bs, begin, end, **kw)
        return GridIndex(jnp.asarray(start, jnp.int32), t) if spec.kind == "grid" else t

    def masked(t, c):
        tile = t.tile if isinstance(t, GridIndex) else t
        return _masked_update(c, body(t, c), tile)

    if trace.mode == "analyze":
        out = body(make(first), carry)
        _check_carry(carry, out)
        return out
    return _fori(lambda i: make(first + i * bs), n, masked, carry)


def _masked_update(before, after, tile):
    """``after`` with the elements past the end of partial ``tile`` taken from ``before``, and
    ``tile`` no longer among its dimensions: a masked lane updates no carried value."""
    out = []
    for b, a in zip(before, after, strict=True):
        axes = [i for i, t in enumerate(getattr(a, "dims", ())) if t is tile]
        if not axes:
            out.append(a)
            continue
        keep = None
        for ax in axes:
            v = tile.valid_along(a.shape, ax, a.dims)
            keep = v if keep is None else keep & v
        old = jnp.broadcast_to(jnp.asarray(unwrap(b), a.a.dtype), a.shape)
        dims = b.dims if isinstance(b, DTensor) else tuple(
            None if t is tile else t for t in a.dims)
        out.append(DTensor(select(keep, a.a, old), dims))
    return tuple(out)


def _fori(tile_at, n, body, carry):
    """``lax.fori_loop`` over ``n`` tiles; carried values keep their dtypes and tiles, and
    carried values that are not device values pass through unchanged (``_split_static``)."""
    static = _split_static(carry)
    dyn = [i for i in range(len(carry)) if i not in static]
    init = tuple(_carry_in(carry[i]) for i in dyn)
    dims = tuple(carry[i].dims if isinstance(carry[i], DTensor) else None for i in dyn)

    def full(c):
        out = list(carry)
        for i, x, dm in zip(dyn, c, dims, strict=True):
            out[i] = DTensor(x, dm)
        return tuple(out)

    def step(i, c):
        vals = full(c)
        out = body(tile_at(i), vals)
        _check_carry(vals, out)
        _check_static(carry, out, static)
        return tuple(
            jnp.asarray(unwrap(out[j])).astype(ci.dtype) for j, ci in zip(dyn, c, strict=True)
        )

    return full(lax.fori_loop(0, n, step, init))


# --- device `if` ----------------------------------------------------------------------------


class _Unbound:
    """A variable a compile-time ``if`` left unassigned, carried through loops and branches
    (``_rewrite._bind_if_unbound``); using it is an error."""

    def __repr__(self):
        return "<unbound variable>"

    def __bool__(self):
        raise exc.UndefinedVariable("a variable assigned only in a branch not taken" + where())


UNBOUND = _Unbound()


def _builtin(py, jnp_op):
    def op(*args):
        if not any(isinstance(a, DTensor) for a in args):
            return py(*args)
        out = args[0]
        for a in args[1:]:
            r = jnp_op(unwrap(out), unwrap(a))
            out = DTensor(r, merge_dims(r.shape, out, a))
        return out

    op.__doc__ = f"Python's ``{py.__name__}`` in device code, elementwise on device values."
    return op


builtin_min = _builtin(min, jnp.minimum)
builtin_max = _builtin(max, jnp.maximum)


def decided(cond) -> bool:
    """Whether an ``if`` condition is known while tracing (not a device value)."""
    return not isinstance(cond, DTensor)


def one_sided_if(message):
    """A device ``if`` (``lax.cond``) assigning a variable used after it in one branch only."""
    raise exc.UnsupportedConstruct(message + where())


def _split_static(carry):
    """The positions of carried values that are not device values or numbers (``UNBOUND``, a
    tile, …): they pass through a ``lax`` loop or branch unchanged."""
    return [i for i, c in enumerate(carry) if not isinstance(c, (DTensor, int, float, bool))]


def _check_static(carry, out, static):
    for i in static:
        if out[i] is not carry[i]:
            raise exc.UnsupportedConstruct(
                f"a variable of type {type(carry[i]).__name__} reassigned in a device loop or "
                f"device `if` (only device values and numbers can be){where()}"
            )


def device_if(cond, then_fn, else_fn, carry):
    """``if cond:`` on a device scalar (see ``_rewrite``): a ``lax.cond`` over the variables
    the branches reassign (stores in the branches happen only on the branch taken)."""
    if cond.ndim != 0:
        raise exc.UnsupportedConstruct(
            f"a device `if` on a tensor of shape {cond.shape} (use `torch.where` for an "
            f"elementwise choice){where()}"
        )
    static = _split_static(carry)
    dyn = [i for i in range(len(carry)) if i not in static]
    init = tuple(_carry_in(carry[i]) for i in dyn)
    dims = tuple(carry[i].dims if isinstance(carry[i], DTensor) else None for i in dyn)
    out_dims: list = []
    out_static: list = []

    def branch(fn):
        def run(ops):
            full = list(carry)
            for i, x, d in zip(dyn, ops, dims, strict=True):
                full[i] = DTensor(x, d)
            out = fn(tuple(full))
            _check_static(carry, out, static)
            rest = [o for i, o in enumerate(out) if i not in static]
            if not out_dims:
                out_dims.extend(o.dims if isinstance(o, DTensor) else None for o in rest)
                out_static.extend(out[i] for i in static)
            return tuple(jnp.asarray(_carry_in(o)) for o in rest)

        return run

    pred = cond.a if cond.a.dtype == jnp.bool_ else cond.a != 0
    try:
        res = lax.cond(pred, branch(then_fn), branch(else_fn), init)
    except TypeError as e:
        raise exc.UnsupportedConstruct(
            f"the branches of a device `if` give variables of different shapes or dtypes "
            f"({e}){where()}"
        ) from None
    values = iter(DTensor(r, d) for r, d in zip(res, out_dims, strict=True))
    n_out = len(out_dims) + len(static)
    return tuple(carry[i] if i in static else next(values) for i in range(n_out))


def _carry_in(v):
    if isinstance(v, DTensor):
        return v.a
    if isinstance(v, (int, float, bool)):
        return jnp.asarray(v)
    raise exc.UnsupportedConstruct(
        f"a variable of type {type(v).__name__} reassigned in a device loop or device `if` "
        f"(only device values and numbers can be){where()}"
    )


def _check_carry(before, after):
    if len(before) != len(after):
        raise exc.HelionError("internal: loop-carried variables changed number")
    for b, a in zip(before, after, strict=True):
        bs = getattr(unwrap(b), "shape", ())
        as_ = getattr(unwrap(a), "shape", ())
        if tuple(bs) != tuple(as_):
            raise exc.UnsupportedConstruct(
                f"a loop-carried variable changes shape from {tuple(bs)} to {tuple(as_)} in a "
                f"device loop{where()}"
            )
