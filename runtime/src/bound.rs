//! A launch bound once: a prepared kernel's symbols bound to fixed input dtypes and shapes,
//! its grid and operand extents resolved and its compiled code looked up, for a host that
//! launches the same call again and again on new memory (tpuBLAS's plans). A launch then
//! allocates the outputs (or, bound with its outputs' shapes, writes into the caller's) and
//! runs the compiled code: no binding, no resolving, no cache lookup, no reshape of the
//! results.
//!
//! Invariants: `grid` and `dims` are what `launch::bind` and `cpu::extents` give for the
//! signatures the launch was bound to, `shapes` hold the bound outputs' element counts, and
//! `compiled` holds the kernel's compiled code (not its debug build: debug launches take the
//! general path, [`crate::launch_borrowed`]). Kernels whose grid reads an input's value
//! ([`tpukit_dsl::Extent::Value`]) are not bound: their extents depend on the data.

use std::sync::{Arc, OnceLock};

use crate::launch::{bind, new_output, output_shapes};
use crate::{HostArray, Launchable, Prepared, RuntimeError, cpu};
use tpukit_dsl::{DType, Kernel, Role};

/// One kernel launch with its extents fixed (see the module docs).
pub struct BoundLaunch {
    kernel: Arc<Prepared>,
    /// Looked up at the first run (a plan made in debug mode may never run without it).
    compiled: OnceLock<Arc<cpu::Compiled>>,
    /// The kernel the compiled code runs, if not `kernel`'s own IR: its CPU form
    /// (`Compiled::launched`), whose grid and windows `grid` and `dims` are of.
    cpu_form: Option<Kernel>,
    grid: Vec<i64>,
    dims: Vec<i64>,
    /// Per output, the shape it is handed back in (row-major, of the bound element count).
    shapes: Vec<Vec<usize>>,
    /// Whether the launch's work is under [`cpu::BRIEF_WORK`].
    brief: bool,
}

impl BoundLaunch {
    /// `kernel` bound to inputs of the dtypes and shapes `inputs` (the prefetch operands,
    /// then the inputs); None for a kernel whose grid reads input values. An error if the
    /// signatures do not fit the kernel (as a launch's would be).
    pub fn new(
        kernel: Arc<Prepared>,
        inputs: &[(DType, &[usize])],
    ) -> Result<Option<BoundLaunch>, RuntimeError> {
        BoundLaunch::bound(kernel, inputs, None)
    }

    /// `kernel` bound as [`BoundLaunch::new`] binds it, for runs into caller-given outputs of
    /// the dtypes and shapes `outputs` ([`BoundLaunch::run_into`]): how a launch whose output
    /// extents no input gives (a fill of a requested size) is bound.
    pub fn new_into(
        kernel: Arc<Prepared>,
        inputs: &[(DType, &[usize])],
        outputs: &[(DType, &[usize])],
    ) -> Result<Option<BoundLaunch>, RuntimeError> {
        BoundLaunch::bound(kernel, inputs, Some(outputs))
    }

    fn bound(
        kernel: Arc<Prepared>,
        inputs: &[(DType, &[usize])],
        outputs: Option<&[(DType, &[usize])]>,
    ) -> Result<Option<BoundLaunch>, RuntimeError> {
        let k = kernel.kernel();
        if !k.grid_values().is_empty() {
            return Ok(None);
        }
        let bindings = bind(k, inputs, outputs)?;
        let shapes = output_shapes(k, &bindings)?;
        let cpu_form = cpu::launched(k, false);
        let run = cpu_form.as_ref().unwrap_or(k);
        let (grid, dims) = cpu::extents(run, &bindings);
        let brief = cpu::launch_work(run, &grid, &dims, cpu::step_compute(run)) < cpu::BRIEF_WORK;
        Ok(Some(BoundLaunch {
            kernel,
            compiled: OnceLock::new(),
            cpu_form,
            grid,
            dims,
            shapes,
            brief,
        }))
    }

    /// Hands output `j` back in `shape` (as the launch's results), which must hold as many
    /// elements as the output.
    pub fn reshape_output(&mut self, j: usize, shape: &[usize]) -> Result<(), RuntimeError> {
        let now = &mut self.shapes[j];
        if shape.iter().product::<usize>() != now.iter().product::<usize>() {
            return Err(RuntimeError::new(
                &self.kernel.kernel().name,
                format!("output {j} of shape {now:?} cannot be handed back as {shape:?}"),
            ));
        }
        *now = shape.to_vec();
        Ok(())
    }

    /// Whether a run takes a few microseconds at most: the launch's work is under
    /// [`cpu::BRIEF_WORK`] (below the split threshold unless a measurement lowered it:
    /// one thread runs it) and its compiled code has been looked up (a first run may
    /// compile). A host may make such a run without releasing its own lock: nothing in it
    /// waits for a thread that could need that lock.
    pub fn is_brief(&self) -> bool {
        self.brief && self.compiled.get().is_some()
    }

    /// The kernel's outputs computed from `inputs`, each new (in the shape
    /// [`BoundLaunch::reshape_output`] gave it).
    ///
    /// # Safety
    /// Each pointer addresses row-major contiguous elements of the dtype and shape its input
    /// was bound to, valid and not written by anyone else for the call.
    pub unsafe fn run(&self, inputs: &[*const u8]) -> Result<Vec<HostArray>, RuntimeError> {
        let k = self.kernel.kernel();
        let compiled = self.compiled()?;
        let whole = self.kernel.whole_outputs();
        let mut outputs = Vec::with_capacity(self.shapes.len());
        for (i, ((_, o), shape)) in k
            .operands_with_role(Role::Output)
            .zip(&self.shapes)
            .enumerate()
        {
            outputs.push(new_output(k, o, shape, whole[i], inputs)?);
        }
        let out_ptrs: Vec<*mut u8> = outputs.iter_mut().map(HostArray::data_ptr_mut).collect();
        let run = self.cpu_form.as_ref().unwrap_or(k);
        // SAFETY: the caller's contract for the inputs; the outputs are new and row-major, of
        // the bound element counts (a reshape changes no layout), and those the kernel does
        // not write whole are zeroed; the extents are the bound ones of `run`, the kernel the
        // code was compiled from (`cpu::launched` of `k`, as in `new`).
        unsafe { cpu::run_resolved(run, compiled, (&self.grid, &self.dims), inputs, &out_ptrs) }?;
        Ok(outputs)
    }

    /// Runs the kernel on `inputs` writing into `outputs`, whose contents are the outputs'
    /// initial values (as for [`crate::launch_into`]).
    ///
    /// # Safety
    /// As for [`BoundLaunch::run`]'s inputs; each output pointer addresses row-major
    /// contiguous, writable elements of the dtype and shape its output was bound to
    /// ([`BoundLaunch::new_into`]), overlapping no other array, which nothing else accesses
    /// during the call.
    pub unsafe fn run_into(
        &self,
        inputs: &[*const u8],
        outputs: &[*mut u8],
    ) -> Result<(), RuntimeError> {
        let compiled = self.compiled()?;
        let run = self.cpu_form.as_ref().unwrap_or(self.kernel.kernel());
        // SAFETY: the caller's contract, the extents the bound ones of `run` (as in `run`).
        unsafe { cpu::run_resolved(run, compiled, (&self.grid, &self.dims), inputs, outputs) }
    }

    /// The kernel's compiled code, looked up at the first run.
    fn compiled(&self) -> Result<&Arc<cpu::Compiled>, RuntimeError> {
        Ok(match self.compiled.get() {
            Some(c) => c,
            None => {
                let c = cpu::cached(self.kernel.kernel(), self.kernel.hash(), false)?;
                self.compiled.get_or_init(|| c)
            }
        })
    }
}
