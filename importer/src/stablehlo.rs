//! Pure JAX functions: the StableHLO of `@main` (no `tpu_custom_call`) as one kernel.
//!
//! `jax.export(jax.jit(fn), platforms=["tpu"])` of a function written with ordinary JAX ops
//! gives a module whose `@main` takes and returns tensors. It becomes a kernel with **one
//! grid step and whole-array operands**: `@main`'s arguments are inputs, loaded whole at the
//! start; its results are outputs, stored whole at the end; every op in between is imported
//! by one rule of [`STABLEHLO`] into the kernel IR's value ops. That is exact for any
//! function of the supported ops (no op needs to know where a block starts), and it suits
//! the small and medium arrays such functions are used on; it forgoes the CPU backend's
//! parallelism across grid steps.
//!
//! Supported: elementwise arithmetic and math, `compare`, `select`, `clamp`, `sign`,
//! `convert`, splat `constant`, `iota`, `broadcast_in_dim`, `reshape`, `transpose`, `reduce`
//! (sum, max, min over any dimensions), `dot_general` (any batch/contracting dimensions,
//! normalised to a 2-D or batched 3-D `dot`), static unit-stride `slice`, `concatenate` and
//! edge `pad` (through a whole scratch buffer each: stored, then loaded as a window — the IR
//! slices refs, not values), `composite` (`chlo.erf` as the IR's erf, others inlined from
//! their decomposition) and `func.call` (private functions JAX outlines are inlined).
//! Anything else is an error naming the op and the Python line.
//! Text arrives as jaxlib prints it (generic form, debug locations), so melior parses it
//! with the stablehlo ops unregistered and their attributes opaque (read from their text).

use super::rules::Table;
use super::scope::{Scope, attr, op_key, op_name, result_type};
use super::text;
use melior::ir::{
    BlockLike, RegionLike, ValueLike,
    operation::{OperationLike, OperationRef},
};
use tpukit_dsl::{
    Arg, ArraySpec, BinaryOp, CallSpec, CmpOp, DType, DotDims, Error, Ix, Kernel, KernelBuilder,
    Literal, ReduceOp, Result, Role, Type, UnaryOp, ValueId,
};
use tpukit_mosaic::mosaic_context;

/// Imports `@main` of a StableHLO module (generic text, as `tpukit/_lowering.py` prints it)
/// as a single-step kernel called `name` with whole-array inputs and outputs.
pub fn import_stablehlo(module_text: &str, name: &str) -> Result<Kernel> {
    import_inner(module_text, name).map_err(|e| e.in_kernel(name))
}

fn import_inner(module_text: &str, name: &str) -> Result<Kernel> {
    let context = mosaic_context();
    let module = super::parse(&context, module_text)?;
    let main = find_func(module.body().first_operation(), "main")
        .ok_or_else(|| Error::new("the module has no @main"))?;
    let block = main
        .region(0)
        .ok()
        .and_then(|r| r.first_block())
        .ok_or_else(|| Error::new("@main has no body"))?;
    let ret = block
        .terminator()
        .ok_or_else(|| Error::new("@main has no terminator"))?;
    let mut spec = CallSpec::default();
    for i in 0..block.argument_count() {
        let arg = block.argument(i).expect("in range");
        let t = text::value_ty(&arg.r#type().to_string())?;
        spec.inputs.push(ArraySpec::new(t.dtype, t.shape));
    }
    for i in 0..ret.operand_count() {
        let v = ret.operand(i).expect("in range");
        let t = text::value_ty(&v.r#type().to_string())?;
        spec.outputs.push(ArraySpec::new(t.dtype, t.shape));
    }
    // Ops that go through memory get a whole scratch buffer each (reused when a function
    // that holds one is inlined twice: the uses are sequential).
    let mut through_memory = Vec::new();
    let mut f = module.body().first_operation();
    while let Some(o) = f {
        walk(&o, &mut |x| {
            if let Some(t) = scratch_type(x) {
                through_memory.push((op_key(x), t));
            }
        });
        f = o.next_in_block();
    }
    for (_, t) in &through_memory {
        let t = t.clone()?;
        spec.scratch.push(ArraySpec::new(t.dtype, t.shape));
    }
    let mut b = KernelBuilder::new(name, &spec)?;
    let mut scope = Scope::default();
    for i in 0..spec.inputs.len() {
        let r = b.declare(Role::Input, &format!("in{i}"))?;
        let full = vec![Ix::Full; spec.inputs[i].shape.len()];
        let v = b.load(r, &full)?;
        scope.bind_value(block.argument(i).expect("in range").into(), v);
    }
    let outs = (0..spec.outputs.len())
        .map(|i| b.declare(Role::Output, &format!("out{i}")))
        .collect::<Result<Vec<_>>>()?;
    for (i, (key, _)) in through_memory.iter().enumerate() {
        let r = b.declare(Role::Scratch, &format!("scratch{i}"))?;
        scope.scratch.insert(*key, r);
    }
    let results = scope.ops(&mut b, block, STABLEHLO)?;
    for (r, v) in outs.into_iter().zip(results) {
        let full = vec![Ix::Full; b.ty(v).rank()];
        b.store(r, &full, v)?;
    }
    b.finish()
}

/// Calls `f` on `op` and every op nested in its regions.
pub(crate) fn walk<'c, 'a>(op: &OperationRef<'c, 'a>, f: &mut impl FnMut(&OperationRef<'c, 'a>)) {
    f(op);
    for r in op.regions() {
        let mut blk = r.first_block();
        while let Some(bl) = blk {
            let mut o = bl.first_operation();
            while let Some(x) = o {
                walk(&x, f);
                o = x.next_in_block();
            }
            blk = bl.next_in_region();
        }
    }
}

/// The scratch buffer an op needs: a slice stores its operand and loads a window, a
/// concatenation or a pad stores its pieces into its result and loads it whole.
fn scratch_type(op: &OperationRef<'_, '_>) -> Option<Result<Type>> {
    match op_name(op).as_str() {
        "stablehlo.slice" => Some(
            op.operand(0)
                .map_err(|_| Error::new("a slice without an operand"))
                .and_then(|v| text::value_ty(&v.r#type().to_string())),
        ),
        "stablehlo.concatenate" | "stablehlo.pad" => Some(result_type(op, 0)),
        _ => None,
    }
}

/// The `func.func` called `name` among `first` and the ops after it.
fn find_func<'c, 'a>(
    first: Option<OperationRef<'c, 'a>>,
    name: &str,
) -> Option<OperationRef<'c, 'a>> {
    let mut op = first;
    while let Some(o) = op {
        if op_name(&o) == "func.func"
            && attr(&o, "sym_name").is_ok_and(|s| s.trim_matches('"') == name)
        {
            return Some(o);
        }
        op = o.next_in_block();
    }
    None
}

/// An MLIR op (short, so each rule's signature fits a line).
type Op<'c, 'a> = OperationRef<'c, 'a>;

fn terminator(s: &mut Scope, _: &mut KernelBuilder, op: &Op<'_, '_>, _: &Table) -> Result<()> {
    let values = (0..op.operand_count())
        .map(|i| s.value(op, i))
        .collect::<Result<Vec<_>>>()?;
    s.yielded = Some(values);
    Ok(())
}

fn constant(s: &mut Scope, b: &mut KernelBuilder, op: &Op<'_, '_>, _: &Table) -> Result<()> {
    let ty = result_type(op, 0)?;
    let value = attr(op, "value")?;
    if let Some(values) = text::dense_values(&value, &ty)? {
        let v = b.dense(values, ty)?;
        return s.define(op, 0, v);
    }
    let lit = text::literal(&value, ty.dtype)?;
    let v = b.constant(lit, ty);
    s.note_const(v, lit);
    s.define(op, 0, v)
}

fn convert(s: &mut Scope, b: &mut KernelBuilder, op: &Op<'_, '_>, _: &Table) -> Result<()> {
    let to = result_type(op, 0)?.dtype;
    let v = b.cast(s.value(op, 0)?, to)?;
    s.define(op, 0, v)
}

fn compare(s: &mut Scope, b: &mut KernelBuilder, op: &Op<'_, '_>, _: &Table) -> Result<()> {
    // `#stablehlo<comparison_direction GT>`, `#stablehlo<comparison_type FLOAT>`.
    let last_word = |a: String| {
        a.trim_end_matches('>')
            .rsplit(' ')
            .next()
            .map(str::to_string)
    };
    let dir = last_word(attr(op, "comparison_direction")?).unwrap_or_default();
    if let Ok(t) = attr(op, "compare_type") {
        let t = last_word(t).unwrap_or_default();
        // UNSIGNED is fine on bools (false < true); other unsigned integers are not imported.
        let bools = b.ty(s.value(op, 0)?).dtype.is_bool();
        if !(matches!(t.as_str(), "FLOAT" | "SIGNED" | "NOTYPE") || (bools && t == "UNSIGNED")) {
            return Err(Error::unsupported(format!("comparison type `{t}`")));
        }
    }
    let cmp = CmpOp::from_stablehlo(&dir)
        .ok_or_else(|| Error::unsupported(format!("comparison direction `{dir}`")))?;
    let v = b.compare(cmp, s.value(op, 0)?, s.value(op, 1)?)?;
    s.define(op, 0, v)
}

fn select(s: &mut Scope, b: &mut KernelBuilder, op: &Op<'_, '_>, _: &Table) -> Result<()> {
    let v = b.select(s.value(op, 0)?, s.value(op, 1)?, s.value(op, 2)?)?;
    s.define(op, 0, v)
}

/// `clamp(lo, x, hi)` = `min(max(x, lo), hi)`.
fn clamp(s: &mut Scope, b: &mut KernelBuilder, op: &Op<'_, '_>, _: &Table) -> Result<()> {
    let lo = b.binary(BinaryOp::Max, s.value(op, 1)?, s.value(op, 0)?)?;
    let v = b.binary(BinaryOp::Min, lo, s.value(op, 2)?)?;
    s.define(op, 0, v)
}

/// `sign(x)`: 1 above zero, -1 below, `x` itself otherwise (zeros and NaN).
fn sign(s: &mut Scope, b: &mut KernelBuilder, op: &Op<'_, '_>, _: &Table) -> Result<()> {
    let x = s.value(op, 0)?;
    let t = b.ty(x).clone();
    let (one, minus_one, zero) = if t.dtype.is_float() {
        (
            Literal::Float(1.0),
            Literal::Float(-1.0),
            Literal::Float(0.0),
        )
    } else {
        (Literal::Int(1), Literal::Int(-1), Literal::Int(0))
    };
    let one = b.constant(one, t.clone());
    let minus_one = b.constant(minus_one, t.clone());
    let zero = b.constant(zero, t);
    let neg = b.compare(CmpOp::Lt, x, zero)?;
    let pos = b.compare(CmpOp::Gt, x, zero)?;
    let inner = b.select(neg, minus_one, x)?;
    let v = b.select(pos, one, inner)?;
    s.define(op, 0, v)
}

fn iota(s: &mut Scope, b: &mut KernelBuilder, op: &Op<'_, '_>, _: &Table) -> Result<()> {
    let ty = result_type(op, 0)?;
    let dim = text::int(&attr(op, "iota_dimension")?)? as usize;
    let v = if ty.dtype.is_float() {
        let i = b.iota(DType::I32, &ty.shape, dim)?;
        b.cast(i, ty.dtype)?
    } else {
        b.iota(ty.dtype, &ty.shape, dim)?
    };
    s.define(op, 0, v)
}

fn identity_perm(perm: &[usize]) -> bool {
    perm.iter().enumerate().all(|(i, &p)| i == p)
}

fn transpose_if(b: &mut KernelBuilder, x: ValueId, perm: &[usize]) -> Result<ValueId> {
    if identity_perm(perm) {
        Ok(x)
    } else {
        b.transpose(x, perm)
    }
}

fn dims(op: &Op<'_, '_>, name: &str) -> Result<Vec<usize>> {
    Ok(text::int_array(&attr(op, name)?)?
        .into_iter()
        .map(|d| d as usize)
        .collect())
}

/// `broadcast_in_dim`: operand dimension `i` becomes result dimension `dims[i]`; the others
/// are new. Put in order, reshaped to the result's rank with 1s, then broadcast.
fn broadcast_in_dim(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &Op<'_, '_>,
    _: &Table,
) -> Result<()> {
    let x = s.value(op, 0)?;
    let to = result_type(op, 0)?;
    let map = dims(op, "broadcast_dimensions")?;
    let rank = b.ty(x).rank();
    if map.len() != rank || map.iter().any(|&d| d >= to.rank()) {
        return Err(Error::new(format!(
            "broadcast_dimensions {map:?} of a rank-{rank} operand and a rank-{} result",
            to.rank()
        )));
    }
    let mut order: Vec<usize> = (0..map.len()).collect();
    order.sort_by_key(|&i| map[i]);
    let x = transpose_if(b, x, &order)?;
    let xs = b.ty(x).shape.clone();
    let mut shape = vec![1; to.rank()];
    for (k, &i) in order.iter().enumerate() {
        shape[map[i]] = xs[k];
    }
    let x = b.reshape(x, &shape)?;
    let v = b.broadcast_to(x, &to.shape)?;
    s.define(op, 0, v)
}

fn reshape(s: &mut Scope, b: &mut KernelBuilder, op: &Op<'_, '_>, _: &Table) -> Result<()> {
    let to = result_type(op, 0)?;
    let v = b.reshape(s.value(op, 0)?, &to.shape)?;
    s.define(op, 0, v)
}

fn transpose(s: &mut Scope, b: &mut KernelBuilder, op: &Op<'_, '_>, _: &Table) -> Result<()> {
    let perm = dims(op, "permutation")?;
    let v = transpose_if(b, s.value(op, 0)?, &perm)?;
    s.define(op, 0, v)
}

/// `reduce` with a one-op body (`add`, `maximum`, `minimum`); the init value is folded in
/// unless it is that op's identity.
fn reduce(s: &mut Scope, b: &mut KernelBuilder, op: &Op<'_, '_>, _: &Table) -> Result<()> {
    if op.operand_count() != 2 {
        return Err(Error::unsupported(format!(
            "a reduction of {} arrays at once (argmax-style reductions)",
            op.operand_count() / 2
        )));
    }
    let body = op
        .region(0)
        .ok()
        .and_then(|r| r.first_block())
        .ok_or_else(|| Error::new("the reduction has no body"))?;
    let mut names = Vec::new();
    let mut o = body.first_operation();
    while let Some(x) = o {
        names.push(op_name(&x));
        o = x.next_in_block();
    }
    let combiner = match names.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        [combiner, "stablehlo.return"] => ReduceOp::from_stablehlo(combiner),
        _ => None,
    };
    let kind = match combiner {
        Some(kind) => kind,
        None => {
            return Err(Error::unsupported(format!(
                "a reduction whose body is {} (sum, max and min are imported)",
                names
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    };
    let x = s.value(op, 0)?;
    let dtype = b.ty(x).dtype;
    if dtype.is_bool() {
        return Err(Error::unsupported("a reduction of bools"));
    }
    let axes: Vec<i64> = dims(op, "dimensions")?
        .into_iter()
        .map(|d| d as i64)
        .collect();
    let mut v = b.reduce(kind, x, &axes)?;
    let init = s.value(op, 1)?;
    let identity = match (kind, s.constant(init)) {
        (ReduceOp::Sum, Some(l)) => l.as_f64() == 0.0,
        (ReduceOp::Max, Some(l)) => {
            (dtype.is_float() && l.as_f64() == f64::NEG_INFINITY)
                || (dtype == DType::I32 && l.as_i64() == i32::MIN as i64)
        }
        (ReduceOp::Min, Some(l)) => {
            (dtype.is_float() && l.as_f64() == f64::INFINITY)
                || (dtype == DType::I32 && l.as_i64() == i32::MAX as i64)
        }
        _ => false,
    };
    if !identity {
        let combine = match kind {
            ReduceOp::Sum => BinaryOp::Add,
            ReduceOp::Max => BinaryOp::Max,
            ReduceOp::Min => BinaryOp::Min,
        };
        v = b.binary(combine, v, init)?;
    }
    s.define(op, 0, v)
}

/// `dot_general`: each operand transposed to (batch, free, contracting) order for the left,
/// (batch, contracting, free) for the right, flattened to a 2-D or batched 3-D matrix
/// product, and reshaped to StableHLO's result (batch, left free, right free).
fn dot_general(s: &mut Scope, b: &mut KernelBuilder, op: &Op<'_, '_>, _: &Table) -> Result<()> {
    let raw = attr(op, "dot_dimension_numbers")?;
    let field = |name: &str| -> Result<Vec<usize>> {
        match raw.split_once(&format!("{name} = ")) {
            None => Ok(vec![]),
            Some((_, rest)) => {
                let end = rest.find(']').map_or(rest.len(), |i| i + 1);
                Ok(text::int_list(&rest[..end])?
                    .into_iter()
                    .map(|d| d as usize)
                    .collect())
            }
        }
    };
    let (lb, rb) = (
        field("lhs_batching_dimensions")?,
        field("rhs_batching_dimensions")?,
    );
    let (lc, rc) = (
        field("lhs_contracting_dimensions")?,
        field("rhs_contracting_dimensions")?,
    );
    let (lhs, rhs) = (s.value(op, 0)?, s.value(op, 1)?);
    let out = result_type(op, 0)?;
    let (lt, rt) = (b.ty(lhs).clone(), b.ty(rhs).clone());
    let within = |t: &Type, ds: &[usize]| ds.iter().all(|&d| d < t.rank());
    if !(within(&lt, &lb) && within(&lt, &lc) && within(&rt, &rb) && within(&rt, &rc))
        || lb.len() != rb.len()
        || lc.len() != rc.len()
    {
        return Err(Error::new(format!(
            "dimension numbers (batch {lb:?}/{rb:?}, contracting {lc:?}/{rc:?}) of operands \
             {lt} and {rt}"
        )));
    }
    let free = |rank: usize, batch: &[usize], contract: &[usize]| -> Vec<usize> {
        (0..rank)
            .filter(|d| !batch.contains(d) && !contract.contains(d))
            .collect()
    };
    let (lf, rf) = (free(lt.rank(), &lb, &lc), free(rt.rank(), &rb, &rc));
    // The common case needs no reshaping: 2-D operands, one contracting dimension each.
    if lb.is_empty() && lt.rank() == 2 && rt.rank() == 2 && lc.len() == 1 && rc.len() == 1 {
        let dims = DotDims {
            lhs_contract: lc[0],
            rhs_contract: rc[0],
        };
        let v = b.dot(lhs, rhs, dims, out.dtype)?;
        return s.define(op, 0, v);
    }
    let prod = |t: &Type, ds: &[usize]| ds.iter().map(|&d| t.shape[d]).product::<usize>();
    let batched = !lb.is_empty();
    let (bsz, m, k, n) = (
        prod(&lt, &lb),
        prod(&lt, &lf),
        prod(&lt, &lc),
        prod(&rt, &rf),
    );
    let lperm: Vec<usize> = lb.iter().chain(&lf).chain(&lc).copied().collect();
    let rperm: Vec<usize> = rb.iter().chain(&rc).chain(&rf).copied().collect();
    let l = transpose_if(b, lhs, &lperm)?;
    let r = transpose_if(b, rhs, &rperm)?;
    let (lshape, rshape) = if batched {
        (vec![bsz, m, k], vec![bsz, k, n])
    } else {
        (vec![m, k], vec![k, n])
    };
    let l = b.reshape(l, &lshape)?;
    let r = b.reshape(r, &rshape)?;
    let rank = lshape.len();
    let v = b.dot(l, r, DotDims::matmul(rank), out.dtype)?;
    let v = b.reshape(v, &out.shape)?;
    s.define(op, 0, v)
}

/// `func.call @f`: the private function JAX outlined, inlined.
fn call(s: &mut Scope, b: &mut KernelBuilder, op: &Op<'_, '_>, table: &Table) -> Result<()> {
    inline(s, b, op, &attr(op, "callee")?, table)
}

/// `stablehlo.composite`: the IR's own op where it has one (`chlo.erf`), else the
/// decomposition function inlined.
fn composite(s: &mut Scope, b: &mut KernelBuilder, op: &Op<'_, '_>, table: &Table) -> Result<()> {
    let name = attr(op, "name")?;
    let unary = match name.trim_matches('"') {
        "chlo.erf" => Some(UnaryOp::Erf),
        "chlo.tanh" => Some(UnaryOp::Tanh),
        _ => None,
    };
    if let (Some(u), 1) = (unary, op.operand_count()) {
        let v = b.unary(u, s.value(op, 0)?)?;
        return s.define(op, 0, v);
    }
    inline(s, b, op, &attr(op, "decomposition")?, table)
}

/// A static window of each dimension, `start .. limit` with stride 1: the operand stored
/// whole into its scratch buffer, the window loaded back.
fn slice(s: &mut Scope, b: &mut KernelBuilder, op: &Op<'_, '_>, _: &Table) -> Result<()> {
    let (start, limit) = (dims(op, "start_indices")?, dims(op, "limit_indices")?);
    if dims(op, "strides")?.iter().any(|&st| st != 1) {
        return Err(Error::unsupported("a strided slice"));
    }
    let buf = s.scratch_of(op, "the slice")?;
    let x = s.value(op, 0)?;
    let full = vec![Ix::Full; start.len()];
    b.store(buf, &full, x)?;
    let window = start
        .iter()
        .zip(&limit)
        .map(|(&a, &z)| {
            let len = z.checked_sub(a).ok_or_else(|| {
                Error::new(format!("a slice whose limit {z} is below its start {a}"))
            })?;
            Ok(Ix::Ds(Arg::Lit(Literal::Int(a as i64)), len))
        })
        .collect::<Result<Vec<Ix>>>()?;
    let v = b.load(buf, &window)?;
    s.define(op, 0, v)
}

/// Pieces stored side by side along `dimension` into the result's scratch buffer, loaded
/// back whole.
pub(crate) fn concatenate(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &Op<'_, '_>,
    _: &Table,
) -> Result<()> {
    let dim = text::int(&attr(op, "dimension")?)? as usize;
    let buf = s.scratch_of(op, "the concatenation")?;
    let rank = result_type(op, 0)?.rank();
    let mut at = 0;
    for i in 0..op.operand_count() {
        let x = s.value(op, i)?;
        let n = b.ty(x).shape[dim];
        let mut index = vec![Ix::Full; rank];
        index[dim] = Ix::Ds(Arg::Lit(Literal::Int(at as i64)), n);
        b.store(buf, &index, x)?;
        at += n;
    }
    let v = b.load(buf, &vec![Ix::Full; rank])?;
    s.define(op, 0, v)
}

/// `pad` with non-negative edge padding and no interior padding: the pad value everywhere,
/// the operand stored at its offset.
fn pad(s: &mut Scope, b: &mut KernelBuilder, op: &Op<'_, '_>, _: &Table) -> Result<()> {
    let low = text::int_array(&attr(op, "edge_padding_low")?)?;
    let high = text::int_array(&attr(op, "edge_padding_high")?)?;
    let interior = text::int_array(&attr(op, "interior_padding")?)?;
    if low.iter().chain(&high).any(|&p| p < 0) || interior.iter().any(|&p| p != 0) {
        return Err(Error::unsupported(
            "a pad with negative or interior padding",
        ));
    }
    let buf = s.scratch_of(op, "the pad")?;
    let to = result_type(op, 0)?;
    let x = s.value(op, 0)?;
    let fill = b.broadcast_to(s.value(op, 1)?, &to.shape)?;
    let full = vec![Ix::Full; to.rank()];
    b.store(buf, &full, fill)?;
    let shape = b.ty(x).shape.clone();
    let index: Vec<Ix> = low
        .iter()
        .zip(&shape)
        .map(|(&l, &n)| Ix::Ds(Arg::Lit(Literal::Int(l)), n))
        .collect();
    b.store(buf, &index, x)?;
    let v = b.load(buf, &full)?;
    s.define(op, 0, v)
}

/// The function `callee` (`@name`) of `op`'s module, inlined with `op`'s operands.
fn inline(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &Op<'_, '_>,
    callee: &str,
    table: &Table,
) -> Result<()> {
    let callee = callee.trim_start_matches('@').trim_matches('"');
    let mut module = op.parent_operation();
    while let Some(m) = module {
        if op_name(&m) == "builtin.module" {
            break;
        }
        module = m.parent_operation();
    }
    let f = module
        .and_then(|m| m.region(0).ok())
        .and_then(|r| r.first_block())
        .and_then(|blk| find_func(blk.first_operation(), callee))
        .ok_or_else(|| Error::new(format!("no function `@{callee}` in the module")))?;
    let body = f
        .region(0)
        .ok()
        .and_then(|r| r.first_block())
        .ok_or_else(|| Error::new(format!("`@{callee}` has no body")))?;
    let args = (0..op.operand_count())
        .map(|i| s.value(op, i))
        .collect::<Result<Vec<_>>>()?;
    let results = s.block(b, body, &args, table)?;
    for (i, v) in results.into_iter().enumerate() {
        s.define(op, i, v)?;
    }
    Ok(())
}

/// The StableHLO import rules, by op name.
pub const STABLEHLO: &Table = &Table {
    column: |i| i.stablehlo,
    rules: &[
        ("stablehlo.constant", constant),
        ("stablehlo.sign", sign),
        ("stablehlo.clamp", clamp),
        ("stablehlo.compare", compare),
        ("stablehlo.select", select),
        ("stablehlo.convert", convert),
        (
            "stablehlo.reduce_precision",
            super::reduce_precision::reduce_precision,
        ),
        ("stablehlo.iota", iota),
        ("stablehlo.broadcast_in_dim", broadcast_in_dim),
        ("stablehlo.reshape", reshape),
        ("stablehlo.transpose", transpose),
        ("stablehlo.reduce", reduce),
        ("stablehlo.dot_general", dot_general),
        ("stablehlo.return", terminator),
        ("stablehlo.slice", slice),
        ("stablehlo.concatenate", concatenate),
        ("stablehlo.pad", pad),
        ("stablehlo.composite", composite),
        ("func.call", call),
        ("func.return", terminator),
        ("sdy.sharding_constraint", super::rules::identity),
    ],
};

/// Every op name `STABLEHLO` imports (for documentation and error messages).
pub fn supported_ops() -> impl Iterator<Item = &'static str> {
    STABLEHLO.names()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_is_named_once() {
        let mut names: Vec<_> = supported_ops().collect();
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n);
    }
}
