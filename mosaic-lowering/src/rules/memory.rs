//! Loads and stores through refs.
//!
//! A window or scratch buffer is a VMEM memref: reads are `vector.load`, writes
//! `tpu.vector_store`, as Pallas emits them (without Pallas's dead "swap" load before each
//! store). Squeezed block dimensions and point indexers appear in the memref as extent-1
//! dimensions and are removed or restored with `vector.shape_cast`. A scalar-prefetch operand
//! lives in SMEM and is read and written one scalar at a time with `memref.load` and
//! `memref.store` (the kernel's copy, see `tpukit_dsl::smem`).
//!
//! Masked loads become a load and a `select` (Mosaic's TensorCore has no masked load); masked
//! stores are `tpu.vector_store … masked` for 32-bit data and a read-select-write otherwise
//! (Mosaic masks only 32-bit stores).

use crate::{
    edge,
    emit::{Emitter, Val},
    lowering::FuncLowering,
    rules::elementwise::{cmpi, convert, select_values, splat},
    rules::row_gather,
    rules::shape::reshape_value,
    types,
};
use tpukit_dsl::{
    BlockDim, DType, Error, Indexer, Literal, Op, OpKind, OperandId, Result, Role, Start, Type,
    Window,
};

/// One IR access mapped onto the operand's buffer: one entry per memref dimension.
struct Access<'c> {
    indices: Vec<Val<'c>>,
    starts: Vec<Start>,
    /// The i32 value of each dynamic start.
    dynamic: Vec<Option<Val<'c>>>,
    sizes: Vec<usize>,
    /// The distance between the elements read along each dimension (1 but in strided loads).
    strides: Vec<usize>,
}

fn access<'c>(
    lw: &FuncLowering<'c, '_>,
    em: &Emitter<'c>,
    id: OperandId,
    index: &[Indexer],
) -> Result<Access<'c>> {
    let operand = lw.kernel.operand(id);
    let squeezed: Vec<bool> = match &operand.window {
        Window::Blocked(b) => b.block.iter().map(|d| *d == BlockDim::Squeezed).collect(),
        Window::Whole => vec![false; operand.shape.len()],
    };
    let mut ix = index.iter();
    let mut a = Access {
        indices: Vec::new(),
        starts: Vec::new(),
        dynamic: Vec::new(),
        sizes: Vec::new(),
        strides: Vec::new(),
    };
    for sq in squeezed {
        let (start, size, stride) = if sq {
            (Start::Static(0), 1, 1)
        } else {
            match ix.next() {
                Some(Indexer::Slice {
                    start,
                    size,
                    stride,
                }) => (*start, *size, *stride),
                Some(Indexer::Point(start)) => (*start, 1, 1),
                None => unreachable!("the verifier checks one indexer per ref dimension"),
            }
        };
        let (index, dynamic) = match start {
            Start::Static(s) => (em.index(s)?, None),
            Start::Dynamic(v) => {
                let v = lw.value(v);
                (
                    em.op1("arith.index_cast", &[v], em.ty("index")?, &[])?,
                    Some(v),
                )
            }
        };
        a.indices.push(index);
        a.starts.push(start);
        a.dynamic.push(dynamic);
        a.sizes.push(size);
        a.strides.push(stride);
    }
    Ok(a)
}

pub fn load<'c>(lw: &mut FuncLowering<'c, '_>, em: &Emitter<'c>, op: &Op) -> Result<Vec<Val<'c>>> {
    let OpKind::Load {
        operand: id,
        ref index,
        mask,
        other,
    } = op.kind
    else {
        unreachable!()
    };
    let result_ty = lw.ty(op.results[0]);
    let operand = lw.kernel.operand(id);
    let buffer = lw.refs[id.0 as usize]
        .ok_or_else(|| Error::new(format!("`{}` is not visible here", operand.name)))?;
    if in_smem(operand) {
        let element = types::memory_element(operand.dtype);
        return Ok(vec![prefetch_load(
            lw,
            em,
            buffer,
            index,
            &operand.name,
            element,
        )?]);
    }
    let a = access(lw, em, id, index)?;
    let stored = operand.dtype;
    let memory = types::memory_element(stored);
    let mut operands = vec![buffer];
    operands.extend(&a.indices);
    let loaded = em.ty(&types::vector(&a.sizes, memory))?;
    let strided = a.strides.iter().any(|&k| k != 1);
    if strided && !matches!(stored, DType::F32 | DType::I32) {
        return Err(Error::unsupported(format!(
            "a strided load of {stored} data from `{}`: Mosaic strides 32-bit data only (a \
             bitcast of the ref to uint32, as ragged paged attention reads bf16, is lowered)",
            operand.name
        )));
    }
    if !strided
        && matches!(stored, DType::F32 | DType::I32)
        && operand.window == Window::Whole
        && let Some(v) = load_rows(lw, em, id, buffer, &a, memory, &result_ty.shape)?
    {
        return Ok(vec![v]);
    }
    let mut v = if !strided {
        em.op1("vector.load", &operands, loaded, &[])?
    } else {
        // `ref[pl.ds(start, n, stride=k)]`, as Pallas lowers it.
        let strides: Vec<String> = a.strides.iter().map(|k| k.to_string()).collect();
        let attr = em.attr(&format!("array<i32: {}>", strides.join(", ")))?;
        em.op1("tpu.strided_load", &operands, loaded, &[("strides", attr)])?
    };
    let memory_ty = Type::new(
        if stored == DType::Bool {
            DType::I32
        } else {
            stored
        },
        a.sizes.clone(),
    );
    // An output's edge is VMEM the kernel owns while its window stays (see
    // `tpukit_dsl::BlockSpec`): read as it is; an input's reads the fill value.
    if let Window::Blocked(spec) = &operand.window
        && operand.role != Role::Output
        && let Some(inside) =
            edge::in_bounds(lw, em, id, &a.starts, &a.sizes, &a.strides, &a.dynamic)?
    {
        let fill = splat(em, spec.fill, &memory_ty)?;
        v = select_values(em, inside, v, fill, &memory_ty)?;
    }
    let mut v = reshape_value(em, v, &a.sizes, &result_ty.shape, memory)?;
    if stored == DType::Bool {
        let zero = splat(em, Literal::Int(0), &result_ty.with_dtype(DType::I32))?;
        v = cmpi(em, "ne", v, zero, &result_ty.with_dtype(DType::I32))?;
    }
    if let Some(mask) = mask {
        let other = match other {
            Some(o) => lw.value(o),
            None => splat(em, Literal::Int(0), result_ty)?,
        };
        v = select_values(em, lw.value(mask), v, other, result_ty)?;
    }
    Ok(vec![v])
}

/// The load `a` of a whole buffer as a strided load of rows (see [`row_gather`]), shaped as
/// `result`; `None` where it does not read one row per tile.
fn load_rows<'c>(
    lw: &FuncLowering<'c, '_>,
    em: &Emitter<'c>,
    id: OperandId,
    buffer: Val<'c>,
    a: &Access<'c>,
    memory: &str,
    result: &[usize],
) -> Result<Option<Val<'c>>> {
    let operand = lw.kernel.operand(id);
    let extents = crate::shapes::window_shape(operand, &lw.shapes.operands[id.0 as usize]);
    let starts: Vec<Option<usize>> = a
        .starts
        .iter()
        .map(|s| match s {
            Start::Static(s) => usize::try_from(*s).ok(),
            Start::Dynamic(_) => None,
        })
        .collect();
    let Some(g) = row_gather::plan(&starts, &a.sizes, &extents) else {
        return Ok(None);
    };
    let (first, second_minor) = (g.first, extents.len() - 2);
    let mut view_shape = extents[..first].to_vec();
    view_shape.extend([g.rows, extents[second_minor + 1]]);
    let space = types::MemorySpace::of(operand.role, operand.space);
    let view_ty = types::memref(em.context, &view_shape, operand.dtype, space)?;
    let view = em.op1("tpu.memref_reshape", &[buffer], view_ty, &[])?;
    // The first row read: dimension `first`'s start in rows, plus the second-minor index.
    let row = match (starts[first], starts[second_minor]) {
        (Some(f), Some(r)) => em.index((f * g.rows_per_first + r) as i64)?,
        _ => {
            let i32_of = |d: usize| match (a.starts[d], a.dynamic[d]) {
                (_, Some(v)) => Ok(v),
                (Start::Static(s), None) => em.i32(s),
                (Start::Dynamic(v), None) => Ok(lw.value(v)),
            };
            let i32_ty = em.ty("i32")?;
            let step = em.i32(g.rows_per_first as i64)?;
            let first_row = em.op1("arith.muli", &[i32_of(first)?, step], i32_ty, &[])?;
            let row = em.op1(
                "arith.addi",
                &[first_row, i32_of(second_minor)?],
                i32_ty,
                &[],
            )?;
            em.op1("arith.index_cast", &[row], em.ty("index")?, &[])?
        }
    };
    let mut indices = vec![view];
    indices.extend(&a.indices[..first]);
    indices.extend([row, a.indices[second_minor + 1]]);
    let mut shape = vec![1; first];
    shape.extend([g.count, extents[second_minor + 1]]);
    let mut strides = vec!["1".to_string(); first];
    strides.extend([g.stride.to_string(), "1".to_string()]);
    let attr = em.attr(&format!("array<i32: {}>", strides.join(", ")))?;
    let loaded = em.ty(&types::vector(&shape, memory))?;
    let v = em.op1("tpu.strided_load", &indices, loaded, &[("strides", attr)])?;
    reshape_value(em, v, &shape, result, memory).map(Some)
}

/// Whether `operand` lives in SMEM, which is read and written one scalar at a time
/// (`memref.load`/`memref.store`): scalar-prefetch operands, and operands in
/// [`tpukit_dsl::Space::Smem`].
fn in_smem(operand: &tpukit_dsl::Operand) -> bool {
    operand.role == Role::Prefetch || operand.space == tpukit_dsl::Space::Smem
}

/// A scalar read from a scalar-prefetch (SMEM) operand of `element` type (an i8 table's
/// element is i8): `memref.load` with `index` indices.
fn prefetch_load<'c>(
    lw: &FuncLowering<'c, '_>,
    em: &Emitter<'c>,
    buffer: Val<'c>,
    index: &[Indexer],
    name: &str,
    element: &str,
) -> Result<Val<'c>> {
    let mut operands = vec![buffer];
    operands.extend(smem_indices(lw, em, index, name)?);
    em.op1("memref.load", &operands, em.ty(element)?, &[])
}

/// The `index` values of a scalar access to a scalar-prefetch (SMEM) operand: every indexer
/// must be a point (SMEM is read and written one scalar at a time).
fn smem_indices<'c>(
    lw: &FuncLowering<'c, '_>,
    em: &Emitter<'c>,
    index: &[Indexer],
    name: &str,
) -> Result<Vec<Val<'c>>> {
    index
        .iter()
        .map(|ix| {
            let Indexer::Point(start) = ix else {
                return Err(Error::new(format!(
                    "`{name}` lives in SMEM (scalar prefetch or `pltpu.SMEM`): access it one \
                     element at a time"
                )));
            };
            match *start {
                Start::Static(s) => em.index(s),
                Start::Dynamic(v) => {
                    em.op1("arith.index_cast", &[lw.value(v)], em.ty("index")?, &[])
                }
            }
        })
        .collect()
}

pub fn store<'c>(lw: &mut FuncLowering<'c, '_>, em: &Emitter<'c>, op: &Op) -> Result<Vec<Val<'c>>> {
    let OpKind::Store {
        operand: id,
        ref index,
        value,
        mask,
    } = op.kind
    else {
        unreachable!()
    };
    let operand = lw.kernel.operand(id);
    let buffer = lw.refs[id.0 as usize]
        .ok_or_else(|| Error::new(format!("`{}` is not visible here", operand.name)))?;
    if in_smem(operand) {
        if mask.is_some() {
            return Err(Error::new(format!(
                "`{}` lives in SMEM (scalar prefetch or `pltpu.SMEM`): store into it one \
                 element at a time, without a mask",
                operand.name
            )));
        }
        let mut v = lw.value(value);
        if operand.dtype == DType::Bool {
            v = convert(em, v, lw.ty(value), DType::I32)?;
        }
        let mut operands = vec![v, buffer];
        operands.extend(smem_indices(lw, em, index, &operand.name)?);
        em.op("memref.store", &operands, &[], &[])?;
        return Ok(Vec::new());
    }
    let a = access(lw, em, id, index)?;
    let value_ty = lw.ty(value);
    let mut v = lw.value(value);
    let memory = types::memory_element(operand.dtype);
    if operand.dtype == DType::Bool {
        v = convert(em, v, value_ty, DType::I32)?;
    }
    let v = reshape_value(em, v, &value_ty.shape, &a.sizes, memory)?;
    let mask = match mask {
        Some(m) => Some(reshape_value(
            em,
            lw.value(m),
            &value_ty.shape,
            &a.sizes,
            "i1",
        )?),
        None => None,
    };
    let memory_ty = Type::new(
        if operand.dtype == DType::Bool {
            DType::I32
        } else {
            operand.dtype
        },
        a.sizes.clone(),
    );
    let (v, mask) = match mask {
        Some(m) if !is_32_bit(operand.dtype) => {
            let mut operands = vec![buffer];
            operands.extend(&a.indices);
            let old = em.op1(
                "vector.load",
                &operands,
                em.ty(&types::vector(&a.sizes, memory))?,
                &[],
            )?;
            (select_values(em, m, v, old, &memory_ty)?, None)
        }
        m => (v, m),
    };
    vector_store(em, v, buffer, &a.indices, mask)?;
    Ok(Vec::new())
}

/// `tpu.vector_store %buffer[indices], %v [masked %mask] {strides = array<i32>}`, as Pallas
/// writes a ref (unstrided, not accumulating).
pub(crate) fn vector_store<'c>(
    em: &Emitter<'c>,
    v: Val<'c>,
    buffer: Val<'c>,
    indices: &[Val<'c>],
    mask: Option<Val<'c>>,
) -> Result<()> {
    let mut operands = vec![v, buffer];
    operands.extend(indices);
    operands.extend(mask);
    let segments = format!(
        "array<i32: 1, 1, {}, {}>",
        indices.len(),
        mask.is_some() as usize
    );
    em.op(
        "tpu.vector_store",
        &operands,
        &[],
        &[
            ("add", em.attr("false")?),
            ("operandSegmentSizes", em.attr(&segments)?),
            ("strides", em.attr("array<i32>")?),
        ],
    )?;
    Ok(())
}

fn is_32_bit(dtype: DType) -> bool {
    matches!(dtype, DType::F32 | DType::I32 | DType::Bool)
}
