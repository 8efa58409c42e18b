//! The verifier: every kernel, however it was built, is checked here before any backend sees
//! it. Errors name the kernel, the op and its source location.

use crate::{
    DType, Dim, Error, Extent, Func, Indexer, Initial, Kernel, Literal, Op, OpKind, Operand,
    Region, Result, Role, SemaphoreKind, Space, Start, Type, ValueId, Window,
    builder::{broadcast_shapes, dot_shape, is_permutation},
    limits::check_buffer,
};

/// What the typing rule of a single op needs to know about its surroundings.
pub(crate) struct Context<'a> {
    pub grid_rank: usize,
    pub operands: &'a [Operand],
    pub types: &'a [Type],
    /// The operands that size the grid ([`Kernel::grid_values`]), which no op may read.
    pub grid_values: &'a [usize],
}

/// Checks a whole kernel: grid, operands, index maps and body.
pub fn verify(kernel: &Kernel) -> Result<()> {
    verify_inner(kernel).map_err(|e| e.in_kernel(&kernel.name))
}

fn verify_inner(k: &Kernel) -> Result<()> {
    verify_sizes(k)?;
    for (axis, a) in k.grid.iter().enumerate() {
        if let Extent::CeilDiv { block: 0, .. } = a.extent {
            return Err(Error::new(format!(
                "grid axis {axis}: ceil-division by a zero block"
            )));
        }
    }
    verify_grid_values(k)?;
    let mut names = std::collections::HashSet::new();
    let mut last_role = Role::Prefetch;
    for o in &k.operands {
        let what = |m: String| Error::new(format!("operand `{}`: {m}", o.name));
        if !names.insert(o.name.as_str()) {
            return Err(what("the name is used twice".into()));
        }
        if o.role < last_role {
            return Err(what(
                "operands must be ordered prefetch, inputs, outputs, scratch".into(),
            ));
        }
        last_role = o.role;
        match (&o.window, o.role) {
            (Window::Blocked(_), Role::Prefetch | Role::Scratch) => {
                return Err(what(format!("{} operands are whole arrays", o.role.name())));
            }
            (Window::Whole, Role::Scratch) if o.shape.iter().any(|d| d.as_static().is_none()) => {
                return Err(what("scratch shapes must be static".into()));
            }
            (Window::Blocked(b), _) => verify_block(k, o, b).map_err(what)?,
            _ => {}
        }
        verify_space(o).map_err(what)?;
        if o.initial == Initial::Undefined && o.role != Role::Output {
            return Err(what("only an output starts undefined".into()));
        }
    }
    let grid_values = k.grid_values();
    let ctx = Context {
        grid_rank: k.grid.len(),
        operands: &k.operands,
        types: &k.body.types,
        grid_values: &grid_values,
    };
    if !k.body.body.args.is_empty() {
        return Err(Error::new("the kernel body takes no arguments"));
    }
    verify_func(&ctx, &k.body, &[], Place::Body)?;
    crate::smem::check_index_maps(k)
}

/// Each [`Extent::Value`] names a one-element int32 prefetch operand (0-d, or `[1]` as
/// `grid=(n,)` with a `(1,)`-shaped `n` traces), and those operands are the kernel's first
/// ones (where a TPU custom call takes its dynamic grid bounds).
fn verify_grid_values(k: &Kernel) -> Result<()> {
    let values = k.grid_values();
    for (position, &i) in values.iter().enumerate() {
        let Some(o) = k.operands.get(i) else {
            return Err(Error::new(format!(
                "a grid extent is the value of operand {i}, but the kernel has {}",
                k.operands.len()
            )));
        };
        if o.role != Role::Prefetch
            || o.dtype != crate::DType::I32
            || !o.shape.iter().all(|d| *d == Dim::Static(1))
        {
            return Err(Error::new(format!(
                "a grid extent is the value of operand `{}`, which must be a one-element i32 \
                 scalar-prefetch operand",
                o.name
            )));
        }
        if i != position {
            return Err(Error::new(format!(
                "operand `{}` sizes the grid, so it must come before every other operand",
                o.name
            )));
        }
    }
    Ok(())
}

/// Checks every buffer a backend sizes from the kernel's static shapes (block windows,
/// scratch operands, values) against [`crate::MAX_BUFFER_BYTES`], before anything computes
/// an element count that could overflow.
fn verify_sizes(k: &Kernel) -> Result<()> {
    let too_big = |m: String| Error::new(m).with_kind(crate::ErrorKind::Shape);
    for o in &k.operands {
        let what = |kind: &str| format!("operand `{}`: the {kind}", o.name);
        match &o.window {
            Window::Blocked(b) => {
                let block: Vec<usize> = b.block.iter().map(|d| d.size()).collect();
                check_buffer(&what("block"), o.dtype, &block).map_err(too_big)?;
            }
            Window::Whole if o.role == Role::Scratch => {
                let shape: Vec<usize> = o.shape.iter().filter_map(|d| d.as_static()).collect();
                check_buffer(&what("scratch buffer"), o.dtype, &shape).map_err(too_big)?;
            }
            Window::Whole => {}
        }
    }
    let funcs = std::iter::once(&k.body).chain(k.operands.iter().filter_map(|o| match &o.window {
        Window::Blocked(b) => Some(&b.index_map),
        Window::Whole => None,
    }));
    for f in funcs {
        for t in &f.types {
            check_buffer("a value", t.dtype, &t.shape).map_err(too_big)?;
        }
    }
    Ok(())
}

/// An operand in HBM is a whole input or output; semaphores are i32 scratch, inputs or
/// outputs (see [`crate::dma`]).
fn verify_space(o: &Operand) -> Result<(), String> {
    match o.space {
        Space::Local => Ok(()),
        Space::Smem if o.role == Role::Prefetch => {
            Err("prefetch operands are in SMEM already: they take no memory space".into())
        }
        Space::Smem => Ok(()),
        Space::Any if !matches!(o.role, Role::Input | Role::Output) => Err(format!(
            "{} operands live in kernel memory, not `any`",
            o.role.name()
        )),
        Space::Semaphore(_) if o.role == Role::Prefetch || o.dtype != DType::I32 => {
            Err("semaphores are i32 scratch, input or output operands".into())
        }
        _ if matches!(o.window, Window::Blocked(_)) => {
            Err("an operand outside kernel memory takes no block spec".into())
        }
        _ => Ok(()),
    }
}

fn verify_block(k: &Kernel, o: &Operand, b: &crate::BlockSpec) -> Result<(), String> {
    if b.block.len() != o.shape.len() {
        return Err(format!(
            "block rank {} differs from array rank {}",
            b.block.len(),
            o.shape.len()
        ));
    }
    if b.block.iter().any(|d| d.kept() && d.size() == 0) {
        return Err("block dims must be positive".into());
    }
    match b.fill {
        Literal::Float(_) if !o.dtype.is_float() => {
            return Err(format!("float fill for a {} array", o.dtype));
        }
        _ => {}
    }
    let i32s = Type::scalar(DType::I32);
    let grid_values = k.grid_values();
    let ctx = Context {
        grid_rank: k.grid.len(),
        operands: &k.operands,
        types: &b.index_map.types,
        grid_values: &grid_values,
    };
    let args = &b.index_map.body.args;
    if args.len() != k.grid.len() || args.iter().any(|&a| b.index_map.ty(a) != &i32s) {
        return Err(format!(
            "the index map must take {} i32 grid indices",
            k.grid.len()
        ));
    }
    let yields = vec![i32s; o.shape.len()];
    verify_func(&ctx, &b.index_map, &yields, Place::IndexMap).map_err(|e| format!("index map: {e}"))
}

#[derive(Copy, Clone, PartialEq)]
enum Place {
    Body,
    IndexMap,
}

/// Checks SSA scoping (each value defined once, used only where visible) and every op.
fn verify_func(ctx: &Context, f: &Func, yields: &[Type], place: Place) -> Result<()> {
    let mut defined = vec![false; f.types.len()];
    let mut scope: Vec<ValueId> = Vec::new();
    for &a in &f.body.args {
        define(&mut defined, &mut scope, a, None)?;
    }
    verify_region(ctx, f, &f.body, yields, place, &mut defined, &mut scope)
}

fn define(
    defined: &mut [bool],
    scope: &mut Vec<ValueId>,
    v: ValueId,
    op: Option<&Op>,
) -> Result<()> {
    let named = |m: String| match op {
        Some(op) => Error::op(op.kind.name(), m).at(op.loc.as_ref()),
        None => Error::new(m),
    };
    match defined.get_mut(v.0 as usize) {
        None => Err(named(format!("%{} has no type", v.0))),
        Some(true) => Err(named(format!("%{} is defined twice", v.0))),
        Some(d) => {
            *d = true;
            scope.push(v);
            Ok(())
        }
    }
}

fn verify_region(
    ctx: &Context,
    f: &Func,
    region: &Region,
    yields: &[Type],
    place: Place,
    defined: &mut Vec<bool>,
    scope: &mut Vec<ValueId>,
) -> Result<()> {
    let mark = scope.len();
    let n = region.ops.len();
    if n == 0 || !matches!(region.ops[n - 1].kind, OpKind::Yield { .. }) {
        return Err(Error::new("a region must end with `yield`"));
    }
    for (i, op) in region.ops.iter().enumerate() {
        let err = |m: String| Error::op(op.kind.name(), m).at(op.loc.as_ref());
        for v in op.kind.operands() {
            if !scope.contains(&v) {
                return Err(err(format!("uses %{} where it is not defined", v.0)));
            }
        }
        if place == Place::IndexMap {
            let allowed = match &op.kind {
                OpKind::Load { operand, .. } => {
                    ctx.operands.get(operand.0 as usize).map(|o| o.role) == Some(Role::Prefetch)
                }
                OpKind::Store { .. } | OpKind::ProgramId { .. } | OpKind::Print { .. } => false,
                _ => true,
            };
            if !allowed {
                return Err(err(
                    "not allowed in an index map (which may read prefetch operands and the grid's \
                     extents only)"
                        .into(),
                ));
            }
        }
        match &op.kind {
            OpKind::Yield { values } => {
                if i != n - 1 {
                    return Err(err("`yield` must be the last op of its region".into()));
                }
                let got: Vec<&Type> = values.iter().map(|&v| f.ty(v)).collect();
                if got.len() != yields.len() || got.iter().zip(yields).any(|(a, b)| *a != b) {
                    return Err(err(format!(
                        "yields ({}) but the region must yield ({})",
                        list(got.iter().copied()),
                        list(yields.iter())
                    )));
                }
            }
            OpKind::For { init, body, .. } => {
                let results: Vec<Type> = op.results.iter().map(|&r| f.ty(r).clone()).collect();
                let inits: Vec<Type> = init.iter().map(|&v| f.ty(v).clone()).collect();
                if results != inits {
                    return Err(err(
                        "results must have the types of the carried values".into()
                    ));
                }
                let args: Vec<Type> = body.args.iter().map(|&a| f.ty(a).clone()).collect();
                let mut want = vec![Type::scalar(DType::I32)];
                want.extend(inits.iter().cloned());
                if args != want {
                    return Err(err("the body's arguments must be the i32 induction variable and the carried values".into()));
                }
                check_op(ctx, &op.kind, &results).map_err(err)?;
                for &a in &body.args {
                    define(defined, scope, a, Some(op))?;
                }
                verify_region(ctx, f, body, &inits, place, defined, scope)?;
            }
            OpKind::While { init, cond, body } => {
                let results: Vec<Type> = op.results.iter().map(|&r| f.ty(r).clone()).collect();
                let inits: Vec<Type> = init.iter().map(|&v| f.ty(v).clone()).collect();
                if results != inits {
                    return Err(err(
                        "results must have the types of the carried values".into()
                    ));
                }
                for (what, region, yields) in [
                    ("condition", cond, vec![Type::scalar(DType::Bool)]),
                    ("body", body, inits.clone()),
                ] {
                    let args: Vec<Type> = region.args.iter().map(|&a| f.ty(a).clone()).collect();
                    if args != inits {
                        return Err(err(format!(
                            "the {what}'s arguments must be the carried values"
                        )));
                    }
                    for &a in &region.args {
                        define(defined, scope, a, Some(op))?;
                    }
                    verify_region(ctx, f, region, &yields, place, defined, scope)?;
                }
            }
            OpKind::If {
                then_region,
                else_region,
                ..
            } => {
                let results: Vec<Type> = op.results.iter().map(|&r| f.ty(r).clone()).collect();
                check_op(ctx, &op.kind, &results).map_err(err)?;
                if !then_region.args.is_empty() || !else_region.args.is_empty() {
                    return Err(err("`if` regions take no arguments".into()));
                }
                verify_region(ctx, f, then_region, &results, place, defined, scope)?;
                verify_region(ctx, f, else_region, &results, place, defined, scope)?;
            }
            kind => {
                let results: Vec<Type> = op.results.iter().map(|&r| f.ty(r).clone()).collect();
                check_op(ctx, kind, &results).map_err(err)?;
            }
        }
        for &r in &op.results {
            define(defined, scope, r, Some(op))?;
        }
    }
    scope.truncate(mark);
    Ok(())
}

fn list<'a>(types: impl Iterator<Item = &'a Type>) -> String {
    types.map(|t| t.to_string()).collect::<Vec<_>>().join(", ")
}

/// The typing rule of one op, given its result types. Regions are checked by the caller.
pub(crate) fn check_op(ctx: &Context, kind: &OpKind, results: &[Type]) -> Result<(), String> {
    let ty = |v: &ValueId| -> Result<&Type, String> {
        ctx.types
            .get(v.0 as usize)
            .ok_or_else(|| format!("%{} has no type", v.0))
    };
    let one = || -> Result<&Type, String> {
        match results {
            [t] => Ok(t),
            _ => Err(format!("has {} results, expected 1", results.len())),
        }
    };
    let i32s = Type::scalar(DType::I32);
    match kind {
        OpKind::Const { value } => {
            let t = one()?;
            if matches!(value, Literal::Float(_)) && !t.dtype.is_float() {
                return Err(format!("float constant of type {t}"));
            }
        }
        OpKind::Dense { values } => {
            let t = one()?;
            if values.len() != t.num_elements() {
                return Err(format!(
                    "{} values for a constant of type {t}",
                    values.len()
                ));
            }
            if !t.dtype.is_float() && values.iter().any(|v| matches!(v, Literal::Float(_))) {
                return Err(format!("float values in a constant of type {t}"));
            }
        }
        OpKind::ProgramId { axis } | OpKind::NumPrograms { axis } => {
            if *axis >= ctx.grid_rank {
                return Err(format!(
                    "axis {axis} is out of range for a grid of rank {}",
                    ctx.grid_rank
                ));
            }
            expect(one()?, &i32s)?;
        }
        OpKind::ArrayDim { operand, axis } => {
            let o = operand_of(ctx, *operand)?;
            if *axis >= o.shape.len() {
                return Err(format!(
                    "axis {axis} is out of range for `{}` of rank {}",
                    o.name,
                    o.shape.len()
                ));
            }
            expect(one()?, &i32s)?;
        }
        OpKind::Load {
            operand,
            index,
            mask,
            other,
        } => {
            let o = local(operand_of(ctx, *operand)?)?;
            if ctx.grid_values.contains(&(operand.0 as usize)) {
                return Err(format!(
                    "`{}` sizes the grid and is no buffer of the kernel: it cannot be read",
                    o.name
                ));
            }
            if index.iter().any(|ix| ix.stride() != 1) && o.role == Role::Prefetch {
                return Err(format!("a strided read of scalar-prefetch `{}`", o.name));
            }
            let shape = access_shape_with(ctx, o, index, true, false)?;
            let t = Type::new(o.dtype, shape);
            expect(one()?, &t)?;
            if let Some(m) = mask {
                expect(ty(m)?, &t.with_dtype(DType::Bool)).map_err(|e| format!("mask: {e}"))?;
            }
            if let Some(v) = other {
                expect(ty(v)?, &t).map_err(|e| format!("other: {e}"))?;
            }
            if mask.is_some() != other.is_some() {
                return Err("a masked load needs both `mask` and `other`".into());
            }
        }
        OpKind::Store {
            operand,
            index,
            value,
            mask,
        } => {
            let o = local(operand_of(ctx, *operand)?)?;
            if o.role == Role::Input {
                return Err(format!("`{}` is an input: it is read-only", o.name));
            }
            let shape = access_shape(ctx, o, index)?;
            let t = Type::new(o.dtype, shape);
            expect(ty(value)?, &t).map_err(|e| format!("value: {e}"))?;
            if let Some(m) = mask {
                expect(ty(m)?, &t.with_dtype(DType::Bool)).map_err(|e| format!("mask: {e}"))?;
            }
            if !results.is_empty() {
                return Err("has results".into());
            }
        }
        OpKind::Unary { op, x } => {
            let t = ty(x)?;
            if !op.accepts(t.dtype) {
                return Err(format!("not defined on {}", t.dtype));
            }
            expect(one()?, t)?;
        }
        OpKind::Binary { op, lhs, rhs } => {
            let t = same(ty(lhs)?, ty(rhs)?)?;
            if !op.accepts(t.dtype) {
                return Err(format!("not defined on {}", t.dtype));
            }
            expect(one()?, t)?;
        }
        OpKind::Compare { lhs, rhs, .. } => {
            let t = same(ty(lhs)?, ty(rhs)?)?;
            expect(one()?, &t.with_dtype(DType::Bool))?;
        }
        OpKind::Select {
            cond,
            on_true,
            on_false,
        } => {
            let t = same(ty(on_true)?, ty(on_false)?)?;
            expect(ty(cond)?, &t.with_dtype(DType::Bool)).map_err(|e| format!("condition: {e}"))?;
            expect(one()?, t)?;
        }
        OpKind::Cast { x } => {
            let (t, r) = (ty(x)?, one()?);
            if t.shape != r.shape {
                return Err(format!("changes the shape from {t} to {r}"));
            }
        }
        OpKind::Roll {
            x,
            shift,
            axis,
            stride,
        } => {
            let (t, s, r) = (ty(x)?, ty(shift)?, one()?);
            if t != r || *axis >= r.rank() || *s != Type::scalar(DType::I32) {
                return Err(format!(
                    "cannot roll {t} into {r} along axis {axis} by a shift of type {s}"
                ));
            }
            if let Some((k, e)) = stride
                && (*k < 0 || *e >= r.rank() || e == axis)
            {
                return Err(format!(
                    "cannot roll {r} along axis {axis} with stride {k} along axis {e}"
                ));
            }
        }
        OpKind::Gather { x, indices, axis } => {
            let (t, i, r) = (ty(x)?, ty(indices)?, one()?);
            let fits = i.dtype == DType::I32
                && i.shape == r.shape
                && t.dtype == r.dtype
                && t.rank() == r.rank()
                && *axis < r.rank()
                && (0..r.rank()).all(|d| d == *axis || t.shape[d] == r.shape[d]);
            if !fits {
                return Err(format!(
                    "cannot gather {r} from {t} along axis {axis} with indices {i}"
                ));
            }
        }
        OpKind::Bitcast { x } => {
            let (t, r) = (ty(x)?, one()?);
            if Some(&r.shape) != crate::bitcast_shape(t, r.dtype).as_ref() {
                return Err(format!("cannot bitcast {t} to {r}"));
            }
        }
        OpKind::Broadcast { x } => {
            let (t, r) = (ty(x)?, one()?);
            if t.dtype != r.dtype || broadcast_shapes(&t.shape, &r.shape).as_ref() != Some(&r.shape)
            {
                return Err(format!("cannot broadcast {t} to {r}"));
            }
        }
        OpKind::Reshape { x } => {
            let (t, r) = (ty(x)?, one()?);
            if t.dtype != r.dtype || t.num_elements() != r.num_elements() {
                return Err(format!("cannot reshape {t} to {r}"));
            }
        }
        OpKind::Transpose { x, perm } => {
            let t = ty(x)?;
            if perm.len() != t.rank() || !is_permutation(perm) {
                return Err(format!("{perm:?} is not a permutation of the axes of {t}"));
            }
            let shape: Vec<usize> = perm.iter().map(|&p| t.shape[p]).collect();
            expect(one()?, &Type::new(t.dtype, shape))?;
        }
        OpKind::Iota { dim } => {
            let r = one()?;
            if !r.dtype.is_int() || *dim >= r.rank() {
                return Err(format!("dimension {dim} of an integer vector, got {r}"));
            }
        }
        OpKind::Reduce { op, x, axes } => {
            let t = ty(x)?;
            if axes.windows(2).any(|w| w[0] >= w[1]) || axes.iter().any(|&a| a >= t.rank()) {
                return Err(format!(
                    "axes {axes:?} must be sorted, distinct and below rank {}",
                    t.rank()
                ));
            }
            if !op.accepts(t.dtype) {
                return Err(format!("not defined on {}: cast the values first", t.dtype));
            }
            let shape: Vec<usize> = (0..t.rank())
                .filter(|d| !axes.contains(d))
                .map(|d| t.shape[d])
                .collect();
            expect(one()?, &Type::new(t.dtype, shape))?;
        }
        OpKind::Dot { lhs, rhs, dims } => {
            let (lt, rt) = (ty(lhs)?, ty(rhs)?);
            let shape = dot_shape(lt, rt, *dims)?;
            let r = one()?;
            if r.shape != shape || r.dtype.is_float() != lt.dtype.is_float() || r.dtype.is_bool() {
                return Err(format!("result {r} does not fit {lt} · {rt}"));
            }
        }
        OpKind::For {
            lower, upper, step, ..
        } => {
            for (what, v) in [
                ("lower bound", lower),
                ("upper bound", upper),
                ("step", step),
            ] {
                expect(ty(v)?, &i32s).map_err(|e| format!("{what}: {e}"))?;
            }
        }
        OpKind::If { cond, .. } => {
            expect(ty(cond)?, &Type::scalar(DType::Bool)).map_err(|e| format!("condition: {e}"))?;
        }
        OpKind::Yield { .. } => {}
        OpKind::DmaStart { src, dst, sem } => {
            let (so, st) = copy_end(ctx, src)?;
            let (d, dt) = copy_end(ctx, dst)?;
            if matches!(d.role, Role::Input | Role::Prefetch) {
                return Err(format!(
                    "`{}` is an {}: it is read-only",
                    d.name,
                    d.role.name()
                ));
            }
            if !crate::dma::copies_between(&st, &dt) {
                return Err(format!(
                    "copies {st} from `{}` into {dt} of `{}`",
                    so.name, d.name
                ));
            }
            // A regular semaphore counts completed copies (Mosaic allows it on v6e).
            any_semaphore(ctx, sem)?;
            none(results)?;
        }
        OpKind::DmaWait { sem, src, dst } => {
            let (_, st) = copy_end(ctx, src)?;
            let (d, dt) = copy_end(ctx, dst)?;
            if !crate::dma::copies_between(&st, &dt) {
                return Err(format!(
                    "waits for a copy of {st} into {dt} of `{}`",
                    d.name
                ));
            }
            semaphore(ctx, sem, SemaphoreKind::Dma)?;
            none(results)?;
        }
        OpKind::SemaphoreSignal { sem, amount } | OpKind::SemaphoreWait { sem, amount } => {
            semaphore(ctx, sem, SemaphoreKind::Regular)?;
            expect(ty(amount)?, &i32s).map_err(|e| format!("amount: {e}"))?;
            none(results)?;
        }
        OpKind::Print { message, args } => {
            if message.chars().any(char::is_control) {
                return Err("a printed message holds no control characters (newlines)".into());
            }
            for (i, a) in args.iter().enumerate() {
                expect(ty(a)?, &i32s).map_err(|e| format!("argument {i}: {e}"))?;
            }
            none(results)?;
        }
        OpKind::While { .. } => {}
        OpKind::SemaphoreRead { sem } => {
            let o = operand_of(ctx, sem.operand)?;
            if !matches!(o.space, Space::Semaphore(_)) {
                return Err(format!("`{}` is not a semaphore", o.name));
            }
            point(ctx, o, &sem.index)?;
            expect(one()?, &i32s)?;
        }
    }
    Ok(())
}

fn none(results: &[Type]) -> Result<(), String> {
    if !results.is_empty() {
        return Err("has results".into());
    }
    Ok(())
}

/// `o`, if loads and stores may reach it.
fn local(o: &Operand) -> Result<&Operand, String> {
    match o.space {
        Space::Local | Space::Smem => Ok(o),
        Space::Any => Err(format!(
            "`{}` lives in HBM (memory space `any`): copy it into a scratch buffer with a DMA \
             first",
            o.name
        )),
        Space::Semaphore(_) => Err(format!(
            "`{}` is a semaphore: use the semaphore ops",
            o.name
        )),
    }
}

/// The operand and accessed type of a copy's source or destination.
fn copy_end<'a>(ctx: &'a Context, p: &crate::Place) -> Result<(&'a Operand, Type), String> {
    let o = operand_of(ctx, p.operand)?;
    if matches!(o.space, Space::Semaphore(_)) {
        return Err(format!("copies to or from semaphore `{}`", o.name));
    }
    // A copy may reach into the tiles past an HBM array's end (see `crate::dma`).
    let shape = access_shape_with(ctx, o, &p.index, false, true)?;
    Ok((o, Type::new(o.dtype, shape)))
}

/// Checks that `p` names one semaphore, of either kind.
fn any_semaphore(ctx: &Context, p: &crate::Place) -> Result<(), String> {
    let o = operand_of(ctx, p.operand)?;
    if !matches!(o.space, Space::Semaphore(_)) {
        return Err(format!("`{}` is not a semaphore", o.name));
    }
    point(ctx, o, &p.index)
}

/// Checks that `p` names one semaphore of `kind`.
fn semaphore(ctx: &Context, p: &crate::Place, kind: SemaphoreKind) -> Result<(), String> {
    let o = operand_of(ctx, p.operand)?;
    if o.space != Space::Semaphore(kind) {
        let want = Space::Semaphore(kind).name().unwrap_or_default();
        return Err(format!("`{}` is not a {}", o.name, want.replace('_', " ")));
    }
    point(ctx, o, &p.index)
}

/// Checks that `index` names one element of `o`.
fn point(ctx: &Context, o: &Operand, index: &[Indexer]) -> Result<(), String> {
    if index.iter().any(|ix| matches!(ix, Indexer::Slice { .. })) {
        return Err(format!("a slice of semaphores `{}`: name one", o.name));
    }
    access_shape(ctx, o, index).map(|_| ())
}

fn operand_of<'a>(ctx: &'a Context, id: crate::OperandId) -> Result<&'a Operand, String> {
    ctx.operands
        .get(id.0 as usize)
        .ok_or_else(|| format!("operand #{} does not exist", id.0))
}

/// The shape a store or copy through `index` writes or reads (consecutive elements),
/// checking static bounds.
fn access_shape(ctx: &Context, o: &Operand, index: &[Indexer]) -> Result<Vec<usize>, String> {
    access_shape_with(ctx, o, index, false, false)
}

/// The shape an access through `index` reads or writes, checking static bounds; only with
/// `strided` may its slices take every k-th element; a `copy`'s window may reach into the
/// tiles past an HBM array's end ([`crate::dma::copy_tile`]).
fn access_shape_with(
    ctx: &Context,
    o: &Operand,
    index: &[Indexer],
    strided: bool,
    copy: bool,
) -> Result<Vec<usize>, String> {
    if !strided && index.iter().any(|ix| ix.stride() != 1) {
        return Err(format!(
            "a strided access of `{}` (only loads read with a stride)",
            o.name
        ));
    }
    let ref_shape = o.ref_shape();
    if index.len() != ref_shape.len() {
        return Err(format!(
            "{} indexers for `{}` of rank {}",
            index.len(),
            o.name,
            ref_shape.len()
        ));
    }
    let mut shape = Vec::new();
    for (d, (ix, dim)) in index.iter().zip(&ref_shape).enumerate() {
        let (start, size) = match *ix {
            Indexer::Slice {
                start,
                size,
                stride,
            } => {
                if stride == 0 {
                    return Err(format!("a slice of dim {d} with stride 0"));
                }
                shape.push(size);
                (start, ix.span())
            }
            Indexer::Point(start) => (start, 1),
        };
        if let Start::Dynamic(v) = start {
            let t = ctx
                .types
                .get(v.0 as usize)
                .ok_or_else(|| format!("%{} has no type", v.0))?;
            expect(t, &Type::scalar(DType::I32)).map_err(|e| format!("start of dim {d}: {e}"))?;
        }
        // A scalar read of a prefetch operand may fall outside it (see `OpKind::Load`).
        let tolerated =
            o.role == Role::Prefetch && index.iter().all(|ix| matches!(ix, Indexer::Point(_)));
        let tile = if copy {
            crate::dma::copy_tile(o, d)
        } else {
            None
        };
        let padded = dim
            .as_static()
            .map(|n| tile.map_or(n, |t| n.div_ceil(t) * t));
        if let (Start::Static(s), Some(n)) = (start, padded.as_ref())
            && !tolerated
            && (s < 0 || s as i128 + size as i128 > *n as i128)
        {
            // i128: a start near i64::MAX (or a negative one) plus the size must not overflow.
            return Err(format!(
                "elements {s}..{} of dim {d} are outside `{}`'s {} extent {n}",
                s as i128 + size as i128,
                o.name,
                if matches!(o.window, Window::Blocked(_)) {
                    "block"
                } else {
                    "array"
                }
            ));
        }
        if matches!(ix, Indexer::Slice { .. }) && dim.as_static().is_none() && size == 0 {
            return Err(format!("empty slice of dim {d}"));
        }
    }
    Ok(shape)
}

fn same<'a>(a: &'a Type, b: &Type) -> Result<&'a Type, String> {
    if a != b {
        return Err(format!("operand types differ: {a} and {b}"));
    }
    Ok(a)
}

fn expect(got: &Type, want: &Type) -> Result<(), String> {
    if got != want {
        return Err(format!("expected {want}, got {got}"));
    }
    Ok(())
}
