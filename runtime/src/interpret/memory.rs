//! The operands' memory and the windows a grid step sees them through.

mod dma;

use super::tensor::{Tensor, for_each_index, strides};
use crate::{HostArray, RuntimeError};
pub(super) use dma::At;
use tpukit_dsl::{
    Bindings, BlockDim, DType, ErrorKind, Func, Indexer, Kernel, OperandId, Role, Window,
};

/// One operand's elements (row-major, exact as f64) and its window at the current step.
struct Buffer {
    name: String,
    role: Role,
    dtype: DType,
    shape: Vec<usize>,
    data: Vec<f64>,
    /// Where the window starts, per array dimension (all zeros for whole operands).
    origin: Vec<i64>,
    /// The block dims, or `None` for a whole-array operand.
    block: Option<Vec<BlockDim>>,
    /// Per dimension, the tile a copy may round the extent up to (`tpukit_dsl::dma`).
    copy_tiles: Vec<Option<usize>>,
    fill: f64,
    /// An output window's elements past the array's end (block-sized, row-major over the
    /// block's dims): memory while the window stays at one block, the fill value when it
    /// arrives at another (see `tpukit_dsl::BlockSpec`). Empty for other operands.
    edge: Vec<f64>,
    /// The origin `edge` belongs to (`None` before the first step).
    edge_at: Option<Vec<i64>>,
}

impl Buffer {
    /// The shape the body sees through the ref.
    fn ref_shape(&self) -> Vec<usize> {
        match &self.block {
            None => self.shape.clone(),
            Some(b) => b.iter().filter(|d| d.kept()).map(|d| d.size()).collect(),
        }
    }

    /// The array coordinates of ref coordinates `local`.
    fn array_coords(&self, local: &[i64], out: &mut Vec<i64>) {
        out.clear();
        match &self.block {
            None => out.extend_from_slice(local),
            Some(b) => {
                let mut k = 0;
                for (d, bd) in b.iter().enumerate() {
                    let l = if bd.kept() {
                        k += 1;
                        local[k - 1]
                    } else {
                        0
                    };
                    out.push(self.origin[d] + l);
                }
            }
        }
    }

    /// The index in `edge` of array coordinates `coords` of the window (an output's).
    fn edge_index(&self, coords: &[i64]) -> Option<usize> {
        let block = self.block.as_ref()?;
        if self.role != Role::Output {
            return None;
        }
        let mut i = 0;
        for ((&c, &o), bd) in coords.iter().zip(&self.origin).zip(block) {
            i = i * bd.size() + (c - o) as usize;
        }
        Some(i)
    }

    /// Moves an output's edge memory to the window's current origin: kept if the window
    /// stayed at its block, refilled with the fill value if it moved.
    fn follow_window(&mut self) {
        let Some(block) = &self.block else { return };
        if self.role != Role::Output || self.edge_at.as_ref() == Some(&self.origin) {
            return;
        }
        let n: usize = block.iter().map(|d| d.size()).product();
        self.edge.clear();
        self.edge.resize(n, self.fill);
        self.edge_at = Some(self.origin.clone());
    }

    /// The flat offset of `coords` if they lie inside the array.
    fn offset(&self, coords: &[i64], strides: &[usize]) -> Option<usize> {
        let mut off = 0;
        for ((&c, &n), &s) in coords.iter().zip(&self.shape).zip(strides) {
            if c < 0 || c as usize >= n {
                return None;
            }
            off += c as usize * s;
        }
        Some(off)
    }
}

pub(super) struct Memory {
    buffers: Vec<Buffer>,
    /// Debug mode: a read outside a prefetch array is an error, not 0.
    debug: bool,
    copies: dma::Copies,
    /// Set while a copy reads and writes: its windows may reach into the tiles past an HBM
    /// array's end (`tpukit_dsl::dma`), where reads give the fill (0) and writes are dropped.
    copying: bool,
}

impl Memory {
    pub fn new(
        kernel: &Kernel,
        bindings: &Bindings,
        inputs: &[&HostArray],
        outputs: &[HostArray],
        debug: bool,
    ) -> Result<Memory, RuntimeError> {
        let mut ins = inputs.iter();
        let mut outs = outputs.iter();
        let buffers = kernel
            .operands
            .iter()
            .map(|o| {
                let shape: Vec<usize> = o
                    .shape
                    .iter()
                    .map(|d| d.resolve(bindings).expect("bound by launch"))
                    .collect();
                let what = format!("{} `{}` as f64 values", o.role.name(), o.name);
                let data = match o.role {
                    Role::Prefetch | Role::Input => ins
                        .next()
                        .expect("checked by launch")
                        .try_to_f64_vec(&what)?,
                    Role::Output => outs
                        .next()
                        .expect("checked by launch")
                        .try_to_f64_vec(&what)?,
                    // Undefined until written: NaN makes a kernel that forgets to initialise
                    // its scratch fail loudly. Static and at most `MAX_BUFFER_BYTES` (verified).
                    Role::Scratch => vec![
                        if o.dtype.is_float() { f64::NAN } else { 0.0 };
                        shape.iter().product()
                    ],
                };
                let (block, fill) = match &o.window {
                    Window::Whole => (None, 0.0),
                    Window::Blocked(b) => {
                        (Some(b.block.clone()), o.dtype.round_f64(b.fill.as_f64()))
                    }
                };
                Ok(Buffer {
                    copy_tiles: (0..shape.len())
                        .map(|d| tpukit_dsl::dma::copy_tile(o, d))
                        .collect(),
                    name: o.name.clone(),
                    role: o.role,
                    dtype: o.dtype,
                    origin: vec![0; shape.len()],
                    shape,
                    data,
                    block,
                    fill,
                    edge: Vec::new(),
                    edge_at: None,
                })
            })
            .collect::<Result<_, RuntimeError>>()?;
        Ok(Memory {
            buffers,
            debug,
            copies: dma::Copies::default(),
            copying: false,
        })
    }

    pub fn shape(&self, id: OperandId) -> &[usize] {
        &self.buffers[id.0 as usize].shape
    }

    /// Places every blocked operand's window for grid point `point`, evaluating its index
    /// map with `eval`. A window that starts outside its array is an error.
    pub fn place_windows(
        &mut self,
        kernel: &Kernel,
        point: &[usize],
        mut eval: impl FnMut(&mut Memory, &Func, Vec<Tensor>) -> Result<Vec<Tensor>, RuntimeError>,
    ) -> Result<(), RuntimeError> {
        for (i, o) in kernel.operands.iter().enumerate() {
            let Window::Blocked(spec) = &o.window else {
                continue;
            };
            let args = point
                .iter()
                .map(|&p| Tensor::scalar_i32(p as i64))
                .collect();
            let blocks: Vec<i64> = eval(self, &spec.index_map, args)?
                .iter()
                .map(Tensor::as_i64)
                .collect();
            let b = &mut self.buffers[i];
            for (d, (&bi, bd)) in blocks.iter().zip(&spec.block).enumerate() {
                let start = bi * bd.unit() as i64;
                let n = b.shape[d] as i64;
                if start < 0 || (start >= n && !(n == 0 && start == 0)) {
                    return Err(RuntimeError::new(
                        &kernel.name,
                        format!(
                            "the index map of {} `{}` at grid point {point:?} gives block index {blocks:?}: its window starts at element {start} of dim {d}, outside the array of shape {:?}",
                            o.role.name(),
                            o.name,
                            b.shape
                        ),
                    )
                    .with_kind(ErrorKind::Bounds));
                }
                b.origin[d] = start;
            }
            self.buffers[i].follow_window();
        }
        Ok(())
    }

    /// Checks an access against the ref's shape and returns the access shape.
    fn check_access(
        &self,
        id: OperandId,
        index: &[Indexer],
        starts: &[i64],
    ) -> Result<Vec<usize>, String> {
        let b = &self.buffers[id.0 as usize];
        let mut ref_shape = b.ref_shape();
        if self.copying && b.block.is_none() {
            for (n, t) in ref_shape.iter_mut().zip(&b.copy_tiles) {
                *n = t.map_or(*n, |t| n.div_ceil(t) * t);
            }
        }
        let what = if b.block.is_some() { "block" } else { "array" };
        let mut shape = Vec::new();
        for (d, ((ix, &s), &n)) in index.iter().zip(starts).zip(&ref_shape).enumerate() {
            let size = match ix {
                Indexer::Slice { size, .. } => {
                    shape.push(*size);
                    ix.span()
                }
                Indexer::Point(_) => 1,
            };
            if s < 0 || s as usize + size > n {
                let range = if matches!(ix, Indexer::Point(_)) {
                    format!("index {s}")
                } else {
                    format!("slice {s}..{}", s + size as i64)
                };
                return Err(format!(
                    "{range} of dim {d} is outside the {what} of `{}` (extent {n})",
                    b.name
                ));
            }
        }
        Ok(shape)
    }

    /// Visits each element of an access: its position in the access, its array offset
    /// (`None` outside the array) and, outside the array, its index in an output's edge
    /// memory.
    fn each_element(
        &self,
        id: OperandId,
        index: &[Indexer],
        starts: &[i64],
        shape: &[usize],
        mut f: impl FnMut(usize, Option<usize>, Option<usize>),
    ) {
        let b = &self.buffers[id.0 as usize];
        let st = strides(&b.shape);
        let (mut local, mut coords) = (
            Vec::with_capacity(index.len()),
            Vec::with_capacity(b.shape.len()),
        );
        let mut flat = 0;
        for_each_index(shape, |idx| {
            local.clear();
            let mut k = 0;
            for (ix, &s) in index.iter().zip(starts) {
                local.push(match ix {
                    Indexer::Slice { stride, .. } => {
                        k += 1;
                        s + (idx[k - 1] * stride) as i64
                    }
                    Indexer::Point(_) => s,
                });
            }
            b.array_coords(&local, &mut coords);
            match b.offset(&coords, &st) {
                Some(off) => f(flat, Some(off), None),
                None => f(flat, None, b.edge_index(&coords)),
            }
            flat += 1;
        });
    }

    #[allow(clippy::too_many_arguments)]
    pub fn load(
        &self,
        id: OperandId,
        index: &[Indexer],
        starts: &[i64],
        mask: Option<&Tensor>,
        other: Option<&Tensor>,
        ty: tpukit_dsl::Type,
    ) -> Result<Tensor, String> {
        let shape = match self.check_access(id, index, starts) {
            Err(_) if self.reads_zero_past_the_end(id, index) => return Ok(Tensor::splat(ty, 0.0)),
            checked => checked?,
        };
        debug_assert_eq!(shape, ty.shape);
        self.check_in_flight(id, index, starts, &shape, false)?;
        let b = &self.buffers[id.0 as usize];
        let mut out = Tensor::splat(ty, 0.0);
        self.each_element(id, index, starts, &shape, |i, off, edge| {
            out.data[i] = match (mask, other, off, edge) {
                (Some(m), Some(o), _, _) if m.data[i] == 0.0 => o.data[i],
                (_, _, Some(off), _) => b.data[off],
                (_, _, None, Some(e)) => b.edge[e],
                _ => b.fill,
            };
        });
        Ok(out)
    }

    /// Whether an access outside the ref reads 0: a scalar read of a prefetch operand,
    /// outside debug mode (see `OpKind::Load`).
    fn reads_zero_past_the_end(&self, id: OperandId, index: &[Indexer]) -> bool {
        !self.debug
            && self.buffers[id.0 as usize].role == Role::Prefetch
            && index.iter().all(|ix| matches!(ix, Indexer::Point(_)))
    }

    pub fn store(
        &mut self,
        id: OperandId,
        index: &[Indexer],
        starts: &[i64],
        value: &Tensor,
        mask: Option<&Tensor>,
    ) -> Result<(), String> {
        let shape = self.check_access(id, index, starts)?;
        self.check_in_flight(id, index, starts, &shape, true)?;
        let (mut writes, mut edge_writes) = (Vec::new(), Vec::new());
        self.each_element(id, index, starts, &shape, |i, off, edge| {
            if mask.is_some_and(|m| m.data[i] == 0.0) {
                return;
            }
            match (off, edge) {
                (Some(off), _) => writes.push((off, value.data[i])),
                (None, Some(e)) => edge_writes.push((e, value.data[i])),
                (None, None) => {}
            }
        });
        let b = &mut self.buffers[id.0 as usize];
        for (off, v) in writes {
            b.data[off] = v;
        }
        for (e, v) in edge_writes {
            b.edge[e] = v;
        }
        Ok(())
    }

    /// Copies the outputs back into the caller's arrays.
    pub fn write_back(self, outputs: &mut [HostArray]) {
        let outs = self.buffers.into_iter().filter(|b| b.role == Role::Output);
        for (b, out) in outs.zip(outputs.iter_mut()) {
            *out = HostArray::from_f64(b.dtype, &b.shape, &b.data);
        }
    }
}
