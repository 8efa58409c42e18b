//! Building kernels: the API `#[tpu_kernel]` expands into and the Python frontends call.
//!
//! The builder does what a user of JAX expects and the IR keeps explicit: literals take the
//! dtype of the value they meet (JAX's weak types), shapes broadcast numpy-style, missing
//! trailing indexers mean "the whole dimension". Every op it appends is checked as it is
//! built, so errors name the op and the user's line; [`KernelBuilder::finish`] runs the full
//! verifier once more.

mod dma;

use crate::{
    BinaryOp, BlockSpec, CallSpec, CmpOp, DType, DotDims, Error, ErrorKind, Func, GridAxis,
    IndexBinOp, IndexExpr, Indexer, Kernel, Literal, Loc, Op, OpKind, Operand, OperandId, ReduceOp,
    Region, Result, Role, Start, Type, UnaryOp, ValueId, Window, bail_op,
};

/// An input to a builder method: an SSA value or a literal that takes its dtype from context.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Arg {
    /// A value the builder made.
    Value(ValueId),
    /// A literal: a constant of the dtype (and shape) the op needs it at.
    Lit(Literal),
}

impl From<ValueId> for Arg {
    fn from(v: ValueId) -> Arg {
        Arg::Value(v)
    }
}

macro_rules! arg_from_literal {
    ($($t:ty => $variant:ident as $as:ty),*) => {$(
        impl From<$t> for Arg {
            fn from(x: $t) -> Arg {
                Arg::Lit(Literal::$variant(x as $as))
            }
        }
    )*};
}
arg_from_literal!(f64 => Float as f64, f32 => Float as f64, i64 => Int as i64, i32 => Int as i64,
    usize => Int as i64, bool => Bool as bool);

/// How one dimension of a ref is accessed, as the user writes it.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Ix {
    /// `..`: the whole dimension.
    Full,
    /// `ref[i]`: one element, the dimension is dropped.
    At(Arg),
    /// `pl.ds(start, size)`.
    Ds(Arg, usize),
}

/// A kernel operand as the body sees it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Ref(pub OperandId);

/// Builds the ops of one function (a kernel body or an index map): a value-type table and a
/// stack of open regions.
#[derive(Debug, Default)]
struct FuncBuilder {
    types: Vec<Type>,
    open: Vec<Region>,
}

impl FuncBuilder {
    fn new_value(&mut self, ty: Type) -> ValueId {
        self.types.push(ty);
        ValueId(self.types.len() as u32 - 1)
    }

    fn push(&mut self, kind: OpKind, result_types: Vec<Type>, loc: Option<Loc>) -> Vec<ValueId> {
        let results = result_types
            .into_iter()
            .map(|t| self.new_value(t))
            .collect();
        let op = Op {
            results: Vec::clone(&results),
            kind,
            loc,
        };
        self.open.last_mut().expect("an open region").ops.push(op);
        results
    }

    fn finish(mut self, yields: Vec<ValueId>, loc: Option<Loc>) -> Func {
        self.push(OpKind::Yield { values: yields }, vec![], loc);
        let body = self.open.pop().expect("the function's region");
        assert!(self.open.is_empty(), "unclosed regions");
        Func {
            types: self.types,
            body,
        }
    }
}

/// Builds one [`Kernel`] from a [`CallSpec`] and a body.
#[derive(Debug)]
pub struct KernelBuilder {
    name: String,
    grid: Vec<GridAxis>,
    operands: Vec<Operand>,
    /// Whether the body declared each operand (see [`KernelBuilder::declare`]).
    declared: Vec<bool>,
    f: FuncBuilder,
    loc: Option<Loc>,
}

impl KernelBuilder {
    /// Starts a kernel with the grid and operands of `spec` (operands named after their
    /// role until the body declares them).
    pub fn new(name: &str, spec: &CallSpec) -> Result<KernelBuilder> {
        let mut operands = Vec::new();
        let roles = [
            (Role::Prefetch, &spec.prefetch),
            (Role::Input, &spec.inputs),
            (Role::Output, &spec.outputs),
            (Role::Scratch, &spec.scratch),
        ];
        for (role, arrays) in roles {
            for (i, a) in arrays.iter().enumerate() {
                let label = format!("{}{}", role.name(), i);
                let window = match &a.block {
                    None => Window::Whole,
                    Some(b) => {
                        if role == Role::Prefetch || role == Role::Scratch {
                            return Err(Error::new(format!(
                                "{label}: {} operands take no block spec",
                                role.name()
                            ))
                            .in_kernel(name));
                        }
                        let index_map =
                            index_map_func(&b.index_map, spec).map_err(|e| e.in_kernel(name))?;
                        let fill = b.fill.unwrap_or(if a.dtype.is_float() {
                            Literal::Float(0.0)
                        } else {
                            Literal::Int(0)
                        });
                        Window::Blocked(BlockSpec {
                            block: b.block.clone(),
                            index_map,
                            fill,
                        })
                    }
                };
                operands.push(Operand {
                    name: label,
                    role,
                    dtype: a.dtype,
                    shape: a.shape.clone(),
                    window,
                    space: a.space,
                    initial: a.initial,
                });
            }
        }
        let declared = vec![false; operands.len()];
        let mut f = FuncBuilder::default();
        f.open.push(Region::default());
        Ok(KernelBuilder {
            name: name.to_string(),
            grid: spec.grid.clone(),
            operands,
            declared,
            f,
            loc: None,
        })
    }

    /// Binds the body's next parameter of `role` (in order) to the spec's operand and names it.
    pub fn declare(&mut self, role: Role, name: &str) -> Result<Ref> {
        let (count, next) = {
            let of_role: Vec<usize> = (0..self.operands.len())
                .filter(|&i| self.operands[i].role == role)
                .collect();
            (
                of_role.len(),
                of_role.into_iter().find(|&i| !self.declared[i]),
            )
        };
        let Some(i) = next else {
            return Err(self.err(
                None,
                format!(
                    "parameter `{name}` is {} #{} but the call spec gives {count} {} operand(s)",
                    role.name(),
                    count,
                    role.name()
                ),
            ));
        };
        self.declared[i] = true;
        self.operands[i].name = name.to_string();
        Ok(Ref(OperandId(i as u32)))
    }

    /// Sets the source location recorded on the ops built from now on.
    pub fn set_loc(&mut self, loc: Option<Loc>) {
        self.loc = loc;
    }

    /// The name of the kernel being built.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The type of the value `v`. Panics if `v` was not made by this builder.
    pub fn ty(&self, v: ValueId) -> &Type {
        &self.f.types[v.0 as usize]
    }

    /// The shape the body sees through `r` (static dims; symbols are an error).
    pub fn ref_shape(&self, r: Ref) -> Result<Vec<usize>> {
        let o = &self.operands[r.0.0 as usize];
        o.ref_shape()
            .iter()
            .map(|d| {
                d.as_static().ok_or_else(|| {
                    self.err(None, format!("ref `{}` has symbolic extent `{d}`", o.name))
                })
            })
            .collect()
    }

    /// The dtype of the operand `r` refers to.
    pub fn ref_dtype(&self, r: Ref) -> DType {
        self.operands[r.0.0 as usize].dtype
    }

    /// Checks that every operand of the spec was declared, closes the body and verifies.
    pub fn finish(self) -> Result<Kernel> {
        if let Some(i) = self.declared.iter().position(|d| !d) {
            let o = &self.operands[i];
            let declared = self
                .operands
                .iter()
                .zip(&self.declared)
                .filter(|(p, d)| p.role == o.role && **d)
                .count();
            return Err(self.err(
                None,
                format!(
                    "the call spec gives more {} operands than the kernel's {declared} {} parameter(s)",
                    o.role.name(),
                    o.role.name()
                ),
            ));
        }
        let loc = self.loc.clone();
        let kernel = Kernel {
            name: self.name,
            grid: self.grid,
            operands: self.operands,
            body: self.f.finish(vec![], loc),
        };
        crate::verify(&kernel)?;
        Ok(kernel)
    }

    fn err(&self, op: Option<&str>, message: String) -> Error {
        Error {
            kernel: Some(self.name.clone()),
            op: op.map(str::to_string),
            loc: self.loc.clone(),
            ..Error::new(message)
        }
    }

    fn fix(&self, e: Error) -> Error {
        e.in_kernel(&self.name).at(self.loc.as_ref())
    }

    fn push1(&mut self, kind: OpKind, ty: Type) -> ValueId {
        self.f.push(kind, vec![ty], self.loc.clone())[0]
    }

    // ---- values -------------------------------------------------------------------------

    /// A splat constant.
    pub fn constant(&mut self, value: impl Into<Literal>, ty: Type) -> ValueId {
        self.push1(
            OpKind::Const {
                value: value.into(),
            },
            ty,
        )
    }

    /// A constant of type `ty` with `values` in row-major order (as many as `ty` has
    /// elements): a splat [`OpKind::Const`] when they are all equal, else [`OpKind::Dense`].
    pub fn dense(&mut self, values: Vec<Literal>, ty: Type) -> Result<ValueId> {
        if values.len() != ty.num_elements() {
            return Err(self
                .err(
                    Some("dense"),
                    format!("{} values for a constant of type {ty}", values.len()),
                )
                .with_kind(ErrorKind::Shape));
        }
        if let Some(&first) = values.first()
            && values.iter().all(|v| v == &first)
        {
            return Ok(self.constant(first, ty));
        }
        self.checked(OpKind::Dense { values }, ty)
    }

    /// A constant of zeros (`false` for bool) of `dtype` and `shape`.
    pub fn zeros(&mut self, dtype: DType, shape: &[usize]) -> ValueId {
        self.constant(Literal::Int(0), Type::new(dtype, shape))
    }

    /// A constant of `value` (converted to `dtype`) in every element of `shape`.
    pub fn full(&mut self, value: impl Into<Literal>, dtype: DType, shape: &[usize]) -> ValueId {
        self.constant(value, Type::new(dtype, shape))
    }

    /// `value` (a literal or a scalar of `dtype`) broadcast to `shape`.
    pub fn splat(
        &mut self,
        value: impl Into<Arg>,
        dtype: DType,
        shape: &[usize],
    ) -> Result<ValueId> {
        let v = self.value_like(value.into(), &Type::new(dtype, shape))?;
        if self.ty(v).dtype != dtype {
            let t = self.ty(v).clone();
            return Err(self
                .err(
                    Some("broadcast"),
                    format!("a {t} value cannot fill a {dtype} array: cast it first"),
                )
                .with_kind(ErrorKind::DType));
        }
        self.broadcast_to(v, shape)
    }

    /// Turns an [`Arg`] into a value; a literal takes `like`'s dtype, or its own default
    /// (f32, i32, bool) when there is none.
    pub fn value(&mut self, a: impl Into<Arg>, like: Option<DType>) -> Result<ValueId> {
        match a.into() {
            Arg::Value(v) => Ok(v),
            Arg::Lit(lit) => {
                let dtype = self.literal_dtype(lit, like)?;
                Ok(self.constant(lit, Type::scalar(dtype)))
            }
        }
    }

    /// Like [`Self::value`], but a literal becomes a splat of `like`'s whole type.
    fn value_like(&mut self, a: Arg, like: &Type) -> Result<ValueId> {
        match a {
            Arg::Value(v) => Ok(v),
            Arg::Lit(lit) => {
                let dtype = self.literal_dtype(lit, Some(like.dtype))?;
                Ok(self.constant(lit, Type::new(dtype, like.shape.clone())))
            }
        }
    }

    /// The dtype a literal takes next to a value of dtype `like` (JAX's weak typing).
    fn literal_dtype(&self, lit: Literal, like: Option<DType>) -> Result<DType> {
        Ok(match (lit, like) {
            (Literal::Float(x), Some(d)) if !d.is_float() => {
                return Err(self
                    .err(None, format!("float literal {x} used with a {d} value"))
                    .with_kind(ErrorKind::DType));
            }
            (_, Some(d)) => d,
            (Literal::Float(_), None) => DType::F32,
            (Literal::Int(_), None) => DType::I32,
            (Literal::Bool(_), None) => DType::Bool,
        })
    }

    /// An i32 scalar (grid indices, loop bounds, slice starts).
    pub fn index_value(&mut self, a: impl Into<Arg>, what: &str) -> Result<ValueId> {
        let v = self.value(a, Some(DType::I32))?;
        let t = self.ty(v);
        if t != &Type::scalar(DType::I32) {
            return Err(self
                .err(None, format!("{what} must be an i32 scalar, got {t}"))
                .with_kind(ErrorKind::DType));
        }
        Ok(v)
    }

    /// The index of the current grid step along `axis` (`pl.program_id`), an i32 scalar; an
    /// error if the grid has no such axis.
    pub fn program_id(&mut self, axis: usize) -> Result<ValueId> {
        self.grid_axis("program_id", axis)?;
        Ok(self.push1(OpKind::ProgramId { axis }, Type::scalar(DType::I32)))
    }

    /// The number of steps of the grid along `axis` (`pl.num_programs`), an i32 scalar; an
    /// error if the grid has no such axis.
    pub fn num_programs(&mut self, axis: usize) -> Result<ValueId> {
        self.grid_axis("num_programs", axis)?;
        Ok(self.push1(OpKind::NumPrograms { axis }, Type::scalar(DType::I32)))
    }

    fn grid_axis(&self, op: &str, axis: usize) -> Result<()> {
        if axis >= self.grid.len() {
            return Err(self.err(
                Some(op),
                format!(
                    "axis {axis} is out of range for a grid of rank {}",
                    self.grid.len()
                ),
            ));
        }
        Ok(())
    }

    /// The runtime extent of `r`'s global dimension `axis`.
    pub fn array_dim(&mut self, r: Ref, axis: usize) -> Result<ValueId> {
        let rank = self.operands[r.0.0 as usize].shape.len();
        if axis >= rank {
            return Err(self.err(
                Some("array_dim"),
                format!("axis {axis} is out of range for a rank-{rank} array"),
            ));
        }
        Ok(self.push1(
            OpKind::ArrayDim { operand: r.0, axis },
            Type::scalar(DType::I32),
        ))
    }

    // ---- refs ---------------------------------------------------------------------------

    fn indexers(&mut self, op: &str, r: Ref, index: &[Ix]) -> Result<(Vec<Indexer>, Vec<usize>)> {
        let o = &self.operands[r.0.0 as usize];
        let ref_shape = o.ref_shape();
        let name = o.name.clone();
        if index.len() > ref_shape.len() {
            return Err(self
                .err(
                    Some(op),
                    format!(
                        "{} indices for ref `{name}` of rank {}",
                        index.len(),
                        ref_shape.len()
                    ),
                )
                .with_kind(ErrorKind::Shape));
        }
        let mut out = Vec::new();
        let mut shape = Vec::new();
        for (d, dim) in ref_shape.iter().enumerate() {
            let ix = index.get(d).copied().unwrap_or(Ix::Full);
            let start = |b: &mut Self, a: Arg| -> Result<Start> {
                Ok(match a {
                    Arg::Lit(Literal::Int(i)) => Start::Static(i),
                    a => Start::Dynamic(b.index_value(a, "an index")?),
                })
            };
            match ix {
                Ix::Full => {
                    let Some(n) = dim.as_static() else {
                        return Err(self.err(
                            Some(op),
                            format!("`..` over symbolic extent `{dim}` of ref `{name}`: use a static slice"),
                        ));
                    };
                    out.push(Indexer::slice(Start::Static(0), n));
                    shape.push(n);
                }
                Ix::At(a) => out.push(Indexer::Point(start(self, a)?)),
                Ix::Ds(a, size) => {
                    out.push(Indexer::slice(start(self, a)?, size));
                    shape.push(size);
                }
            }
        }
        Ok((out, shape))
    }

    /// `ref[index]`.
    pub fn load(&mut self, r: Ref, index: &[Ix]) -> Result<ValueId> {
        let (index, shape) = self.indexers("load", r, index)?;
        self.plain_load(r, index, shape)
    }

    /// An unmasked `Load` of `r` at checked `index`, of `shape`.
    fn plain_load(&mut self, r: Ref, index: Vec<Indexer>, shape: Vec<usize>) -> Result<ValueId> {
        let dtype = self.ref_dtype(r);
        let kind = OpKind::Load {
            operand: r.0,
            index,
            mask: None,
            other: None,
        };
        self.checked(kind, Type::new(dtype, shape))
    }

    /// `ref[index]` taking every `strides[d]`-th element along each dimension `d` of the ref
    /// (`pl.ds(start, size, stride)`; 1 for points and whole dimensions): a plain load when
    /// every stride is 1.
    pub fn load_strided(&mut self, r: Ref, index: &[Ix], strides: &[usize]) -> Result<ValueId> {
        let (mut index, shape) = self.indexers("load", r, index)?;
        if strides.len() != index.len() {
            return Err(Error::new(format!(
                "{} strides for a load of rank {}",
                strides.len(),
                index.len()
            ))
            .with_kind(ErrorKind::Shape));
        }
        for (ix, &k) in index.iter_mut().zip(strides) {
            match ix {
                Indexer::Slice { stride, .. } => *stride = k,
                Indexer::Point(_) if k == 1 => {}
                Indexer::Point(_) => {
                    return Err(Error::new("a stride on a point of a load"));
                }
            }
        }
        self.plain_load(r, index, shape)
    }

    /// `ref[index]` where `mask`, else `other` (default: zero).
    pub fn load_masked(
        &mut self,
        r: Ref,
        index: &[Ix],
        mask: ValueId,
        other: impl Into<Arg>,
    ) -> Result<ValueId> {
        let (index, shape) = self.indexers("load", r, index)?;
        let dtype = self.ref_dtype(r);
        let mask = self.broadcast_to(mask, &shape)?;
        let other = self.value(other, Some(dtype))?;
        let other = self.broadcast_to(other, &shape)?;
        let kind = OpKind::Load {
            operand: r.0,
            index,
            mask: Some(mask),
            other: Some(other),
        };
        self.checked(kind, Type::new(dtype, shape))
    }

    /// `ref[index] = value` (a literal or a smaller shape broadcasts).
    pub fn store(&mut self, r: Ref, index: &[Ix], value: impl Into<Arg>) -> Result<()> {
        self.store_impl(r, index, value.into(), None)
    }

    /// `ref[index] = value` where the bool `mask` is true (`pl.store(..., mask=)`); the other
    /// elements keep their contents.
    pub fn store_masked(
        &mut self,
        r: Ref,
        index: &[Ix],
        value: impl Into<Arg>,
        mask: ValueId,
    ) -> Result<()> {
        self.store_impl(r, index, value.into(), Some(mask))
    }

    fn store_impl(
        &mut self,
        r: Ref,
        index: &[Ix],
        value: Arg,
        mask: Option<ValueId>,
    ) -> Result<()> {
        let (index, shape) = self.indexers("store", r, index)?;
        let dtype = self.ref_dtype(r);
        let value = self.value_like(value, &Type::new(dtype, shape.clone()))?;
        let vt = self.ty(value).clone();
        if vt.dtype != dtype {
            let name = self.operands[r.0.0 as usize].name.clone();
            return Err(self
                .err(
                    Some("store"),
                    format!(
                        "storing a {} value into {dtype} ref `{name}`: cast it first",
                        vt.dtype
                    ),
                )
                .with_kind(ErrorKind::DType));
        }
        let value = self.broadcast_to(value, &shape)?;
        let mask = match mask {
            Some(m) => Some(self.broadcast_to(m, &shape)?),
            None => None,
        };
        let kind = OpKind::Store {
            operand: r.0,
            index,
            value,
            mask,
        };
        self.check(&kind, &[])?;
        self.f.push(kind, vec![], self.loc.clone());
        Ok(())
    }

    // ---- elementwise --------------------------------------------------------------------

    /// The elementwise `op` of `x`, of `x`'s type; an error if `op` does not accept its dtype.
    pub fn unary(&mut self, op: UnaryOp, x: impl Into<Arg>) -> Result<ValueId> {
        let x = self.value(x, None)?;
        let t = self.ty(x).clone();
        self.checked(OpKind::Unary { op, x }, t)
    }

    /// Two operands brought to one dtype (literals adapt) and one shape (broadcasting).
    fn pair(&mut self, op: &str, a: Arg, b: Arg) -> Result<(ValueId, ValueId)> {
        let (a, b) = match (a, b) {
            (Arg::Lit(_), Arg::Value(bv)) => {
                let t = self.ty(bv).clone();
                (self.value_like(a, &t)?, bv)
            }
            (Arg::Value(av), _) => {
                let t = self.ty(av).clone();
                (av, self.value_like(b, &t)?)
            }
            (Arg::Lit(_), Arg::Lit(_)) => {
                let av = self.value(a, None)?;
                let d = self.ty(av).dtype;
                (av, self.value(b, Some(d))?)
            }
        };
        let (ta, tb) = (self.ty(a).clone(), self.ty(b).clone());
        if ta.dtype != tb.dtype {
            return Err(self
                .err(
                    Some(op),
                    format!(
                        "operands have different dtypes {} and {}: cast one of them",
                        ta.dtype, tb.dtype
                    ),
                )
                .with_kind(ErrorKind::DType));
        }
        let shape = broadcast_shapes(&ta.shape, &tb.shape).ok_or_else(|| {
            self.err(
                Some(op),
                format!("shapes {:?} and {:?} do not broadcast", ta.shape, tb.shape),
            )
            .with_kind(ErrorKind::Shape)
        })?;
        Ok((self.broadcast_to(a, &shape)?, self.broadcast_to(b, &shape)?))
    }

    /// The elementwise `op` of `a` and `b`, broadcast to one shape; a literal takes the other
    /// operand's dtype. An error if the shapes do not broadcast, the dtypes differ or `op`
    /// does not accept the dtype.
    pub fn binary(
        &mut self,
        op: BinaryOp,
        a: impl Into<Arg>,
        b: impl Into<Arg>,
    ) -> Result<ValueId> {
        let (lhs, rhs) = self.pair(op.name(), a.into(), b.into())?;
        let t = self.ty(lhs).clone();
        self.checked(OpKind::Binary { op, lhs, rhs }, t)
    }

    /// The elementwise comparison `a op b` (broadcast as in [`KernelBuilder::binary`]), a bool
    /// value.
    pub fn compare(&mut self, op: CmpOp, a: impl Into<Arg>, b: impl Into<Arg>) -> Result<ValueId> {
        let (lhs, rhs) = self.pair(op.name(), a.into(), b.into())?;
        let t = self.ty(lhs).with_dtype(DType::Bool);
        self.checked(OpKind::Compare { op, lhs, rhs }, t)
    }

    /// `jnp.where(cond, on_true, on_false)`.
    pub fn select(
        &mut self,
        cond: impl Into<Arg>,
        on_true: impl Into<Arg>,
        on_false: impl Into<Arg>,
    ) -> Result<ValueId> {
        let cond = self.value(cond, Some(DType::Bool))?;
        let (t, f) = self.pair("select", on_true.into(), on_false.into())?;
        let ct = self.ty(cond).clone();
        let vt = self.ty(t).clone();
        let shape = broadcast_shapes(&ct.shape, &vt.shape).ok_or_else(|| {
            self.err(
                Some("select"),
                format!(
                    "condition shape {:?} and value shape {:?} do not broadcast",
                    ct.shape, vt.shape
                ),
            )
            .with_kind(ErrorKind::Shape)
        })?;
        let cond = self.broadcast_to(cond, &shape)?;
        let on_true = self.broadcast_to(t, &shape)?;
        let on_false = self.broadcast_to(f, &shape)?;
        let ty = Type::new(vt.dtype, shape);
        self.checked(
            OpKind::Select {
                cond,
                on_true,
                on_false,
            },
            ty,
        )
    }

    /// `x` converted to `dtype` (`x` itself if it has that dtype already).
    pub fn cast(&mut self, x: impl Into<Arg>, dtype: DType) -> Result<ValueId> {
        let x = self.value(x, None)?;
        if self.ty(x).dtype == dtype {
            return Ok(x);
        }
        let t = self.ty(x).with_dtype(dtype);
        self.checked(OpKind::Cast { x }, t)
    }

    /// `x` gathered along `axis` at `indices` (i32, of the result's shape; see
    /// [`OpKind::Gather`]): `jnp.take_along_axis`.
    pub fn gather(&mut self, x: ValueId, indices: ValueId, axis: usize) -> Result<ValueId> {
        let t = self.ty(indices).with_dtype(self.ty(x).dtype);
        self.checked(OpKind::Gather { x, indices, axis }, t)
    }

    /// `x` rolled by `shift` (an i32 scalar or literal) along `axis`, as `jnp.roll` and
    /// `pltpu.roll` do: element `i` moves to `i + shift` modulo the extent ([`OpKind::Roll`]).
    pub fn roll(&mut self, x: ValueId, shift: impl Into<Arg>, axis: usize) -> Result<ValueId> {
        let t = self.ty(x).clone();
        if axis >= t.rank() {
            return Err(self
                .err(Some("roll"), format!("axis {axis} of a {t} value"))
                .with_kind(ErrorKind::Shape));
        }
        let shift = self.index_value(shift, "a roll's shift")?;
        self.checked(
            OpKind::Roll {
                x,
                shift,
                axis,
                stride: None,
            },
            t,
        )
    }

    /// [`KernelBuilder::roll`] with slice `j` along `stride_axis` rolled `j · stride`
    /// further (`pltpu.roll(..., stride=, stride_axis=)`).
    pub fn strided_roll(
        &mut self,
        x: ValueId,
        shift: impl Into<Arg>,
        axis: usize,
        (stride, stride_axis): (i64, usize),
    ) -> Result<ValueId> {
        let t = self.ty(x).clone();
        let shift = self.index_value(shift, "a roll's shift")?;
        self.checked(
            OpKind::Roll {
                x,
                shift,
                axis,
                stride: Some((stride, stride_axis)),
            },
            t,
        )
    }

    /// The bits of `x` read as `dtype` (see [`OpKind::Bitcast`] for the shape of a bitcast
    /// between widths); `x` itself if it has that dtype already.
    pub fn bitcast(&mut self, x: impl Into<Arg>, dtype: DType) -> Result<ValueId> {
        let x = self.value(x, None)?;
        let t = self.ty(x).clone();
        if t.dtype == dtype {
            return Ok(x);
        }
        let shape = crate::bitcast_shape(&t, dtype).ok_or_else(|| {
            Error::unsupported(format!(
                "a bitcast of {t} to {dtype} (bool is not bitcast; between widths the \
                 second-minor dimension must pack exactly)"
            ))
        })?;
        self.checked(OpKind::Bitcast { x }, Type::new(dtype, shape))
    }

    /// Broadcasts to `shape` (numpy rules); a no-op when the shape already matches.
    pub fn broadcast_to(&mut self, x: impl Into<Arg>, shape: &[usize]) -> Result<ValueId> {
        let x = self.value(x, None)?;
        let t = self.ty(x).clone();
        if t.shape == shape {
            return Ok(x);
        }
        if let Some(value) = self.constant_of(x) {
            return Ok(self.constant(value, Type::new(t.dtype, shape)));
        }
        self.checked(OpKind::Broadcast { x }, Type::new(t.dtype, shape))
    }

    /// The value of a splat constant defined in the open region (so broadcasts of constants
    /// fold into one constant).
    fn constant_of(&self, x: ValueId) -> Option<Literal> {
        self.f.open.iter().rev().find_map(|r| {
            r.ops.iter().find_map(|op| match op.kind {
                OpKind::Const { value } if op.results == [x] => Some(value),
                _ => None,
            })
        })
    }

    /// `x` with the same elements in row-major order in `shape` (`x` itself if it has that
    /// shape); an error if the element counts differ.
    pub fn reshape(&mut self, x: ValueId, shape: &[usize]) -> Result<ValueId> {
        let t = self.ty(x).clone();
        if t.shape == shape {
            return Ok(x);
        }
        self.checked(OpKind::Reshape { x }, Type::new(t.dtype, shape))
    }

    /// `x` with its axes permuted: axis `i` of the result is axis `perm[i]` of `x`; an error if
    /// `perm` is not a permutation of `x`'s axes.
    pub fn transpose(&mut self, x: ValueId, perm: &[usize]) -> Result<ValueId> {
        let t = self.ty(x).clone();
        if perm.len() != t.rank() || !is_permutation(perm) {
            return Err(self.err(
                Some("transpose"),
                format!(
                    "{perm:?} is not a permutation of the {} axes of {t}",
                    t.rank()
                ),
            ));
        }
        let shape: Vec<usize> = perm.iter().map(|&p| t.shape[p]).collect();
        self.checked(
            OpKind::Transpose {
                x,
                perm: perm.to_vec(),
            },
            Type::new(t.dtype, shape),
        )
    }

    /// A value of integer `dtype` and `shape` whose elements are their index along `dim`
    /// (`lax.broadcasted_iota`); an error if `dim` is not an axis of `shape` or `dtype` is not
    /// an integer type.
    pub fn iota(&mut self, dtype: DType, shape: &[usize], dim: usize) -> Result<ValueId> {
        self.checked(OpKind::Iota { dim }, Type::new(dtype, shape))
    }

    /// Reduces `axes` away (negative axes count from the end).
    pub fn reduce(&mut self, op: ReduceOp, x: ValueId, axes: &[i64]) -> Result<ValueId> {
        let t = self.ty(x).clone();
        let rank = t.rank() as i64;
        let mut norm = Vec::new();
        for &a in axes {
            let a2 = if a < 0 { a + rank } else { a };
            if a2 < 0 || a2 >= rank || norm.contains(&(a2 as usize)) {
                return Err(self.err(
                    Some(op.name()),
                    format!("bad axis {a} for a value of rank {rank}"),
                ));
            }
            norm.push(a2 as usize);
        }
        norm.sort();
        let shape: Vec<usize> = (0..t.rank())
            .filter(|d| !norm.contains(d))
            .map(|d| t.shape[d])
            .collect();
        self.checked(
            OpKind::Reduce { op, x, axes: norm },
            Type::new(t.dtype, shape),
        )
    }

    /// Like [`Self::reduce`], keeping each reduced axis with extent 1 (`keepdims=True`).
    pub fn reduce_keepdims(&mut self, op: ReduceOp, x: ValueId, axes: &[i64]) -> Result<ValueId> {
        let rank = self.ty(x).rank() as i64;
        let r = self.reduce(op, x, axes)?;
        let kept: Vec<i64> = axes
            .iter()
            .map(|&a| if a < 0 { a + rank } else { a })
            .collect();
        let shape: Vec<usize> = (0..rank)
            .map(|d| {
                if kept.contains(&d) {
                    1
                } else {
                    self.ty(x).shape[d as usize]
                }
            })
            .collect();
        self.reshape(r, &shape)
    }

    /// Matrix product with `dims`, accumulated in f32 (i32 for integers) and returned as `out`.
    pub fn dot(
        &mut self,
        lhs: ValueId,
        rhs: ValueId,
        dims: DotDims,
        out: DType,
    ) -> Result<ValueId> {
        let (lt, rt) = (self.ty(lhs).clone(), self.ty(rhs).clone());
        let shape = dot_shape(&lt, &rt, dims).map_err(|m| self.err(Some("dot"), m))?;
        self.checked(OpKind::Dot { lhs, rhs, dims }, Type::new(out, shape))
    }

    /// `a @ b` (2-D or batched 3-D) with an f32 result for float inputs.
    pub fn matmul(&mut self, lhs: ValueId, rhs: ValueId) -> Result<ValueId> {
        let lt = self.ty(lhs).clone();
        let out = if lt.dtype.is_float() {
            DType::F32
        } else {
            DType::I32
        };
        self.dot(lhs, rhs, DotDims::matmul(lt.rank().max(2)), out)
    }

    // ---- control flow -------------------------------------------------------------------

    /// `lax.while_loop`: `cond` gives a bool scalar from the carried values, `body` the next
    /// carried values; returns the carried values once `cond` fails.
    pub fn while_loop(
        &mut self,
        init: &[ValueId],
        cond: impl FnOnce(&mut Self, &[ValueId]) -> Result<ValueId>,
        body: impl FnOnce(&mut Self, &[ValueId]) -> Result<Vec<ValueId>>,
    ) -> Result<Vec<ValueId>> {
        let loc = self.loc.clone();
        let carried = |b: &mut Self| -> Vec<ValueId> {
            init.iter()
                .map(|&v| {
                    let t = b.ty(v).clone();
                    b.f.new_value(t)
                })
                .collect()
        };
        let cond_args = carried(self);
        let body_args = carried(self);
        self.f.open.push(Region {
            args: cond_args.clone(),
            ops: vec![],
        });
        let c = cond(self, &cond_args).and_then(|c| {
            if self.ty(c) != &Type::scalar(DType::Bool) {
                let t = self.ty(c).clone();
                return Err(self.err(
                    Some("while"),
                    format!("the condition must be a bool scalar, got {t}"),
                ));
            }
            Ok(c)
        });
        let c = match c {
            Ok(c) => c,
            Err(e) => {
                self.f.open.pop();
                return Err(self.fix(e));
            }
        };
        self.f
            .push(OpKind::Yield { values: vec![c] }, vec![], loc.clone());
        let cond_region = self.f.open.pop().expect("loop condition");
        self.f.open.push(Region {
            args: body_args.clone(),
            ops: vec![],
        });
        let yielded = match body(self, &body_args) {
            Ok(y) => y,
            Err(e) => {
                self.f.open.pop();
                return Err(self.fix(e));
            }
        };
        self.loc = loc.clone();
        let yielded = self.coerce_yield("while", &yielded, init)?;
        self.f
            .push(OpKind::Yield { values: yielded }, vec![], loc.clone());
        let body_region = self.f.open.pop().expect("loop body");
        let types = init.iter().map(|&v| self.ty(v).clone()).collect();
        let kind = OpKind::While {
            init: init.to_vec(),
            cond: cond_region,
            body: body_region,
        };
        Ok(self.f.push(kind, types, loc))
    }

    /// `for iv in (lower..upper).step_by(step)`, carrying `init` through `body`, which gets
    /// the induction variable and the carried values and returns the next carried values.
    pub fn for_loop(
        &mut self,
        lower: impl Into<Arg>,
        upper: impl Into<Arg>,
        step: impl Into<Arg>,
        init: &[ValueId],
        body: impl FnOnce(&mut Self, ValueId, &[ValueId]) -> Result<Vec<ValueId>>,
    ) -> Result<Vec<ValueId>> {
        let lower = self.index_value(lower, "a loop bound")?;
        let upper = self.index_value(upper, "a loop bound")?;
        let step = self.index_value(step, "a loop step")?;
        let loc = self.loc.clone();
        let iv = self.f.new_value(Type::scalar(DType::I32));
        let carried: Vec<ValueId> = init
            .iter()
            .map(|&v| {
                let t = self.ty(v).clone();
                self.f.new_value(t)
            })
            .collect();
        let mut args = vec![iv];
        args.extend(&carried);
        self.f.open.push(Region { args, ops: vec![] });
        let yielded = body(self, iv, &carried);
        let yielded = match yielded {
            Ok(y) => y,
            Err(e) => {
                self.f.open.pop();
                return Err(self.fix(e));
            }
        };
        self.loc = loc.clone();
        let yielded = self.coerce_yield("for", &yielded, init)?;
        self.f
            .push(OpKind::Yield { values: yielded }, vec![], loc.clone());
        let region = self.f.open.pop().expect("loop body");
        let types = init.iter().map(|&v| self.ty(v).clone()).collect();
        let kind = OpKind::For {
            lower,
            upper,
            step,
            init: init.to_vec(),
            body: region,
        };
        Ok(self.f.push(kind, types, loc))
    }

    /// Yielded values brought to the types of `like` (literals and broadcasts allowed).
    fn coerce_yield(
        &mut self,
        op: &str,
        values: &[ValueId],
        like: &[ValueId],
    ) -> Result<Vec<ValueId>> {
        if values.len() != like.len() {
            return Err(self.err(
                Some(op),
                format!(
                    "region yields {} values, expected {}",
                    values.len(),
                    like.len()
                ),
            ));
        }
        let mut out = Vec::new();
        for (&v, &l) in values.iter().zip(like) {
            let (vt, lt) = (self.ty(v).clone(), self.ty(l).clone());
            if vt.dtype != lt.dtype {
                return Err(self.err(
                    Some(op),
                    format!("a carried value changes type from {lt} to {vt}"),
                ));
            }
            out.push(self.broadcast_to(v, &lt.shape)?);
        }
        Ok(out)
    }

    /// `if cond { then } else { else }`, each branch returning values of the same types.
    pub fn if_else(
        &mut self,
        cond: impl Into<Arg>,
        then_branch: impl FnOnce(&mut Self) -> Result<Vec<ValueId>>,
        else_branch: impl FnOnce(&mut Self) -> Result<Vec<ValueId>>,
    ) -> Result<Vec<ValueId>> {
        let cond = self.value(cond, Some(DType::Bool))?;
        if self.ty(cond) != &Type::scalar(DType::Bool) {
            let t = self.ty(cond).clone();
            return Err(self
                .err(
                    Some("if"),
                    format!("condition must be a bool scalar, got {t}"),
                )
                .with_kind(ErrorKind::DType));
        }
        let loc = self.loc.clone();
        self.f.open.push(Region::default());
        let then_values = match then_branch(self) {
            Ok(v) => v,
            Err(e) => {
                self.f.open.pop();
                return Err(self.fix(e));
            }
        };
        self.loc = loc.clone();
        self.f.push(
            OpKind::Yield {
                values: then_values.clone(),
            },
            vec![],
            loc.clone(),
        );
        let then_region = self.f.open.pop().expect("then region");
        self.f.open.push(Region::default());
        let else_values = match else_branch(self) {
            Ok(v) => v,
            Err(e) => {
                self.f.open.pop();
                return Err(self.fix(e));
            }
        };
        self.loc = loc.clone();
        let else_values = self.coerce_yield("if", &else_values, &then_values)?;
        self.f.push(
            OpKind::Yield {
                values: else_values,
            },
            vec![],
            loc.clone(),
        );
        let else_region = self.f.open.pop().expect("else region");
        let types = then_values.iter().map(|&v| self.ty(v).clone()).collect();
        let kind = OpKind::If {
            cond,
            then_region,
            else_region,
        };
        Ok(self.f.push(kind, types, loc))
    }

    /// `pl.when(cond)`: runs `body` only when `cond` holds.
    pub fn when(
        &mut self,
        cond: impl Into<Arg>,
        body: impl FnOnce(&mut Self) -> Result<()>,
    ) -> Result<()> {
        self.if_else(cond, |b| body(b).map(|()| vec![]), |_| Ok(vec![]))?;
        Ok(())
    }

    // ---- checking -----------------------------------------------------------------------

    /// Checks `kind` with the verifier's rule, then appends it.
    fn checked(&mut self, kind: OpKind, ty: Type) -> Result<ValueId> {
        self.check(&kind, std::slice::from_ref(&ty))?;
        Ok(self.push1(kind, ty))
    }

    fn check(&self, kind: &OpKind, results: &[Type]) -> Result<()> {
        let ctx = crate::verify::Context {
            grid_rank: self.grid.len(),
            operands: &self.operands,
            types: &self.f.types,
            // The grid's operands are known to the kernel's verification (`finish`).
            grid_values: &[],
        };
        crate::verify::check_op(&ctx, kind, results).map_err(|m| self.err(Some(kind.name()), m))
    }
}

/// The numpy broadcast of two shapes, if they are compatible.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
    for i in 0..rank {
        let da = if i < rank - a.len() {
            1
        } else {
            a[i - (rank - a.len())]
        };
        let db = if i < rank - b.len() {
            1
        } else {
            b[i - (rank - b.len())]
        };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return None,
        };
    }
    Some(out)
}

pub(crate) fn is_permutation(perm: &[usize]) -> bool {
    let mut seen = vec![false; perm.len()];
    perm.iter()
        .all(|&p| p < perm.len() && !std::mem::replace(&mut seen[p], true))
}

/// The result shape of a `dot`, or why there is none.
pub(crate) fn dot_shape(lt: &Type, rt: &Type, dims: DotDims) -> Result<Vec<usize>, String> {
    let rank = lt.rank();
    if !(rank == 2 || rank == 3) || rt.rank() != rank {
        return Err(format!(
            "operands must both be rank 2 or both rank 3, got {lt} and {rt}"
        ));
    }
    if lt.dtype != rt.dtype {
        return Err(format!("operand dtypes differ: {lt} and {rt}"));
    }
    if lt.dtype.is_bool() {
        return Err("bool operands".into());
    }
    let b = rank - 2;
    if dims.lhs_contract < b
        || dims.lhs_contract >= rank
        || dims.rhs_contract < b
        || dims.rhs_contract >= rank
    {
        return Err(format!(
            "contracting dims {dims:?} must be one of the last two"
        ));
    }
    if b == 1 && lt.shape[0] != rt.shape[0] {
        return Err(format!("batch sizes differ: {lt} and {rt}"));
    }
    let (k1, k2) = (lt.shape[dims.lhs_contract], rt.shape[dims.rhs_contract]);
    if k1 != k2 {
        return Err(format!(
            "contracting sizes differ: {k1} ({lt}) and {k2} ({rt})"
        ));
    }
    let m = lt.shape[if dims.lhs_contract == rank - 1 {
        rank - 2
    } else {
        rank - 1
    }];
    let n = rt.shape[if dims.rhs_contract == rank - 1 {
        rank - 2
    } else {
        rank - 1
    }];
    let mut shape = if b == 1 { vec![lt.shape[0]] } else { vec![] };
    shape.extend([m, n]);
    Ok(shape)
}

/// Lowers index-map expressions into an IR function of the grid indices.
fn index_map_func(exprs: &[IndexExpr], spec: &CallSpec) -> Result<Func> {
    let mut f = FuncBuilder::default();
    let args: Vec<ValueId> = (0..spec.grid.len())
        .map(|_| f.new_value(Type::scalar(DType::I32)))
        .collect();
    f.open.push(Region {
        args: args.clone(),
        ops: vec![],
    });
    let mut yields = Vec::new();
    for e in exprs {
        yields.push(index_expr(&mut f, &args, e, spec)?);
    }
    Ok(f.finish(yields, None))
}

fn index_expr(
    f: &mut FuncBuilder,
    grid: &[ValueId],
    e: &IndexExpr,
    spec: &CallSpec,
) -> Result<ValueId> {
    let i32s = Type::scalar(DType::I32);
    Ok(match e {
        IndexExpr::Grid(axis) => *grid.get(*axis).ok_or_else(|| {
            Error::op(
                "index_map",
                format!("grid axis {axis} does not exist (grid rank {})", grid.len()),
            )
        })?,
        IndexExpr::NumPrograms(axis) => {
            if *axis >= grid.len() {
                return Err(Error::op(
                    "index_map",
                    format!("grid axis {axis} does not exist (grid rank {})", grid.len()),
                ));
            }
            f.push(OpKind::NumPrograms { axis: *axis }, vec![i32s], None)[0]
        }
        IndexExpr::Const(c) => f.push(
            OpKind::Const {
                value: Literal::Int(*c),
            },
            vec![i32s],
            None,
        )[0],
        IndexExpr::Binary(op, a, b) => {
            let lhs = index_expr(f, grid, a, spec)?;
            let rhs = index_expr(f, grid, b, spec)?;
            let op = match op {
                IndexBinOp::Add => BinaryOp::Add,
                IndexBinOp::Sub => BinaryOp::Sub,
                IndexBinOp::Mul => BinaryOp::Mul,
                IndexBinOp::Div => BinaryOp::Div,
                IndexBinOp::Rem => BinaryOp::Rem,
                IndexBinOp::Max => BinaryOp::Max,
                IndexBinOp::Min => BinaryOp::Min,
                IndexBinOp::And => BinaryOp::And,
                IndexBinOp::Or => BinaryOp::Or,
                IndexBinOp::Xor => BinaryOp::Xor,
            };
            f.push(OpKind::Binary { op, lhs, rhs }, vec![i32s], None)[0]
        }
        IndexExpr::Compare(op, a, b) => {
            let (lhs, rhs) = (index_expr(f, grid, a, spec)?, index_expr(f, grid, b, spec)?);
            let bools = Type::scalar(DType::Bool);
            let x = f.push(OpKind::Compare { op: *op, lhs, rhs }, vec![bools], None)[0];
            f.push(OpKind::Cast { x }, vec![i32s], None)[0]
        }
        IndexExpr::Select {
            cond,
            on_true,
            on_false,
        } => {
            let c = index_expr(f, grid, cond, spec)?;
            let zero = index_expr(f, grid, &IndexExpr::Const(0), spec)?;
            let bools = Type::scalar(DType::Bool);
            let cond = f.push(
                OpKind::Compare {
                    op: CmpOp::Ne,
                    lhs: c,
                    rhs: zero,
                },
                vec![bools],
                None,
            )[0];
            let on_true = index_expr(f, grid, on_true, spec)?;
            let on_false = index_expr(f, grid, on_false, spec)?;
            let kind = OpKind::Select {
                cond,
                on_true,
                on_false,
            };
            f.push(kind, vec![i32s], None)[0]
        }
        IndexExpr::Prefetch { operand, index } => {
            let Some(p) = spec.prefetch.get(*operand) else {
                bail_op!(
                    "index_map",
                    "prefetch operand {operand} does not exist ({} given)",
                    spec.prefetch.len()
                );
            };
            // An i8 table (splash attention's block masks) is read as i8 and widened: the
            // index arithmetic is i32.
            if !matches!(p.dtype, DType::I32 | DType::I8) || index.len() != p.shape.len() {
                bail_op!(
                    "index_map",
                    "prefetch operand {operand} is {}{:?}; index maps read i32 or i8 elements with one index per dimension",
                    p.dtype,
                    p.shape
                );
            }
            let mut ix = Vec::new();
            for e in index {
                ix.push(Indexer::Point(Start::Dynamic(index_expr(
                    f, grid, e, spec,
                )?)));
            }
            let kind = OpKind::Load {
                operand: OperandId(*operand as u32),
                index: ix,
                mask: None,
                other: None,
            };
            let element = f.push(kind, vec![Type::scalar(p.dtype)], None)[0];
            if p.dtype == DType::I32 {
                element
            } else {
                f.push(OpKind::Cast { x: element }, vec![i32s], None)[0]
            }
        }
    })
}
