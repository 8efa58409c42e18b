//! The reference interpreter: runs a verified kernel step by step over its grid.
//!
//! Every element is held as an f64, which represents every value of every tpukit dtype
//! exactly; each op computes in f64 and rounds to its result dtype. For `+ - * / sqrt` that is
//! exactly the dtype's own correctly rounded arithmetic; transcendentals are more accurate
//! than any f32 implementation, and reductions and `dot` accumulate in f64 (more precise than
//! the f32 accumulation the semantics promise, never less). Every access is bounds-checked.

pub(crate) mod fold;
mod memory;
mod ops;
mod tensor;

use crate::backend::Backend;
use crate::{HostArray, LaunchOptions, Launchable, RuntimeError};
use memory::{At, Memory};
use tensor::Tensor;
use tpukit_dsl::{Bindings, ErrorKind, Func, Kernel, Op, OpKind, Region, ValueId};

/// The reference interpreter as a backend: every access checked, scratch filled with NaN,
/// in every mode; debug mode only makes a scalar read past a prefetch array an error (see
/// `OpKind::Load`).
pub(crate) struct Interpreter;

impl Backend for Interpreter {
    fn run(
        &self,
        kernel: &dyn Launchable,
        bindings: &Bindings,
        inputs: &[&HostArray],
        outputs: &mut [HostArray],
        options: LaunchOptions,
    ) -> Result<(), RuntimeError> {
        run(kernel.kernel(), bindings, inputs, outputs, options.debug)
    }
}

fn run(
    kernel: &Kernel,
    bindings: &Bindings,
    inputs: &[&HostArray],
    outputs: &mut [HostArray],
    debug: bool,
) -> Result<(), RuntimeError> {
    let grid: Vec<usize> = kernel
        .grid
        .iter()
        .map(|a| a.extent.resolve(bindings).expect("bound by launch"))
        .collect();
    let mut mem = Memory::new(kernel, bindings, inputs, outputs, debug)
        .map_err(|e| RuntimeError::new(&kernel.name, e.message).with_kind(e.kind))?;
    let mut point = vec![0usize; grid.len()];
    if grid.iter().all(|&n| n > 0) {
        loop {
            let mut m = Machine {
                kernel,
                grid: &grid,
                point: &point,
                mem: &mut mem,
            };
            m.step()?;
            if !tensor::advance(&mut point, &grid) {
                break;
            }
        }
    }
    mem.check_copies_done()
        .map_err(|m| RuntimeError::new(&kernel.name, m))?;
    mem.write_back(outputs);
    Ok(())
}

/// One grid step in progress.
struct Machine<'a> {
    kernel: &'a Kernel,
    grid: &'a [usize],
    point: &'a [usize],
    mem: &'a mut Memory,
}

/// Why an op failed: a problem of this op (to be located), or an error already located
/// inside one of its regions.
enum Failure {
    Here(ErrorKind, String),
    Nested(RuntimeError),
}

/// The access checks of [`Memory`] fail with a message: an access outside a block or array.
impl From<String> for Failure {
    fn from(m: String) -> Failure {
        Failure::Here(ErrorKind::Bounds, m)
    }
}

/// SSA values of one function, by id.
type Env = Vec<Option<Tensor>>;

impl Machine<'_> {
    fn step(&mut self) -> Result<(), RuntimeError> {
        self.mem
            .place_windows(self.kernel, self.point, |mem, f, args| {
                let mut m = Machine {
                    kernel: self.kernel,
                    grid: self.grid,
                    point: self.point,
                    mem,
                };
                let mut env = vec![None; f.types.len()];
                m.region(f, &f.body, &mut env, args)
            })?;
        let body = &self.kernel.body;
        let mut env = vec![None; body.types.len()];
        self.region(body, &body.body, &mut env, vec![])?;
        Ok(())
    }

    /// Runs a region with its arguments bound, returning the values it yields.
    fn region(
        &mut self,
        f: &Func,
        r: &Region,
        env: &mut Env,
        args: Vec<Tensor>,
    ) -> Result<Vec<Tensor>, RuntimeError> {
        for (a, v) in r.args.iter().zip(args) {
            env[a.0 as usize] = Some(v);
        }
        for op in &r.ops {
            if let OpKind::Yield { values } = &op.kind {
                return Ok(values.iter().map(|v| get(env, *v).clone()).collect());
            }
            let results = match self.op(f, op, env) {
                Ok(r) => r,
                Err(Failure::Here(kind, m)) => return Err(self.error(op, m).with_kind(kind)),
                Err(Failure::Nested(e)) => return Err(e),
            };
            for (r, v) in op.results.iter().zip(results) {
                env[r.0 as usize] = Some(v);
            }
        }
        unreachable!("verified regions end with yield")
    }

    fn error(&self, op: &Op, message: String) -> RuntimeError {
        let at = op
            .loc
            .as_ref()
            .map(|l| format!(" at {l}"))
            .unwrap_or_default();
        RuntimeError::new(
            &self.kernel.name,
            format!(
                "op `{}`{at} in grid step {:?}: {message}",
                op.kind.name(),
                self.point
            ),
        )
    }

    fn op(&mut self, f: &Func, op: &Op, env: &mut Env) -> Result<Vec<Tensor>, Failure> {
        let ty = |i: usize| f.ty(op.results[i]).clone();
        let v = |id: &ValueId| get(env, *id);
        Ok(vec![match &op.kind {
            OpKind::Const { value } => Tensor::splat(ty(0), ty(0).dtype.round_f64(value.as_f64())),
            OpKind::Dense { values } => Tensor {
                data: values
                    .iter()
                    .map(|v| ty(0).dtype.round_f64(v.as_f64()))
                    .collect(),
                ty: ty(0),
            },
            OpKind::ProgramId { axis } => Tensor::scalar_i32(self.point[*axis] as i64),
            OpKind::NumPrograms { axis } => Tensor::scalar_i32(self.grid[*axis] as i64),
            OpKind::ArrayDim { operand, axis } => {
                Tensor::scalar_i32(self.mem.shape(*operand)[*axis] as i64)
            }
            OpKind::Load {
                operand,
                index,
                mask,
                other,
            } => {
                let starts = ops::starts(index, env);
                let mask = mask.map(|m| get(env, m));
                let other = other.map(|o| get(env, o));
                self.mem
                    .load(*operand, index, &starts, mask, other, ty(0))?
            }
            OpKind::Store {
                operand,
                index,
                value,
                mask,
            } => {
                let starts = ops::starts(index, env);
                self.mem.store(
                    *operand,
                    index,
                    &starts,
                    v(value),
                    mask.map(|m| get(env, m)),
                )?;
                return Ok(vec![]);
            }
            OpKind::Unary { op: u, x } => ops::unary(*u, v(x)),
            OpKind::Binary { op: b, lhs, rhs } => ops::binary(*b, v(lhs), v(rhs)),
            OpKind::Compare { op: c, lhs, rhs } => ops::compare(*c, v(lhs), v(rhs)),
            OpKind::Select {
                cond,
                on_true,
                on_false,
            } => ops::select(v(cond), v(on_true), v(on_false)),
            OpKind::Cast { x } => ops::cast(v(x), ty(0)),
            OpKind::Bitcast { x } => ops::bitcast(v(x), ty(0)),
            OpKind::Gather { x, indices, axis } => ops::gather(v(x), v(indices), *axis, ty(0)),
            OpKind::Roll {
                x,
                shift,
                axis,
                stride,
            } => ops::roll(v(x), v(shift), *axis, *stride),
            OpKind::Broadcast { x } => ops::broadcast(v(x), ty(0)),
            OpKind::Reshape { x } => Tensor {
                ty: ty(0),
                data: v(x).data.clone(),
            },
            OpKind::Transpose { x, perm } => ops::transpose(v(x), perm, ty(0)),
            OpKind::Iota { dim } => ops::iota(*dim, ty(0)),
            OpKind::Reduce { op: r, x, axes } => ops::reduce(*r, v(x), axes, ty(0)),
            OpKind::Dot { lhs, rhs, dims } => ops::dot(v(lhs), v(rhs), *dims, ty(0)),
            OpKind::For {
                lower,
                upper,
                step,
                init,
                body,
            } => {
                let (lo, hi, st) = (v(lower).as_i64(), v(upper).as_i64(), v(step).as_i64());
                if st <= 0 {
                    return Err(Failure::Here(
                        ErrorKind::Invalid,
                        format!("loop step {st} is not positive"),
                    ));
                }
                let mut carried: Vec<Tensor> = init.iter().map(|i| get(env, *i).clone()).collect();
                let mut iv = lo;
                while iv < hi {
                    let mut args = vec![Tensor::scalar_i32(iv)];
                    args.append(&mut carried);
                    carried = self.region(f, body, env, args).map_err(Failure::Nested)?;
                    iv += st;
                }
                return Ok(carried);
            }
            OpKind::While { init, cond, body } => {
                let mut carried: Vec<Tensor> = init.iter().map(|i| get(env, *i).clone()).collect();
                loop {
                    let c = self.region(f, cond, env, carried.clone());
                    if c.map_err(Failure::Nested)?[0].data[0] == 0.0 {
                        return Ok(carried);
                    }
                    carried = self
                        .region(f, body, env, carried)
                        .map_err(Failure::Nested)?;
                }
            }
            OpKind::If {
                cond,
                then_region,
                else_region,
            } => {
                let r = if v(cond).data[0] != 0.0 {
                    then_region
                } else {
                    else_region
                };
                return self.region(f, r, env, vec![]).map_err(Failure::Nested);
            }
            OpKind::Yield { .. } => unreachable!("handled by region"),
            OpKind::Print { message, args } => {
                let values: Vec<i64> = args.iter().map(|a| get(env, *a).as_i64()).collect();
                crate::print::line(&tpukit_dsl::format_message(message, &values));
                return Ok(Vec::new());
            }
            OpKind::DmaStart { .. }
            | OpKind::DmaWait { .. }
            | OpKind::SemaphoreSignal { .. }
            | OpKind::SemaphoreWait { .. }
            | OpKind::SemaphoreRead { .. } => {
                return self
                    .dma(op, env)
                    .map_err(|m| Failure::Here(ErrorKind::Invalid, m));
            }
        }])
    }

    /// The copy and semaphore ops (see `memory/dma.rs`).
    fn dma(&mut self, op: &Op, env: &Env) -> Result<Vec<Tensor>, String> {
        fn at<'p>(p: &'p tpukit_dsl::Place, env: &Env) -> At<'p> {
            At {
                starts: ops::starts(&p.index, env),
                place: p,
            }
        }
        let amount = |v: &ValueId| get(env, *v).as_i64();
        match &op.kind {
            OpKind::DmaStart { src, dst, sem } => {
                let started = match &op.loc {
                    Some(l) => format!("{l}, grid step {:?}", self.point),
                    None => format!("grid step {:?}", self.point),
                };
                // The verifier makes `sem` a semaphore.
                let kind = match self.kernel.operand(sem.operand).space {
                    tpukit_dsl::Space::Semaphore(kind) => kind,
                    _ => tpukit_dsl::SemaphoreKind::Dma,
                };
                self.mem
                    .dma_start(at(src, env), at(dst, env), at(sem, env), started, kind)?
            }
            OpKind::DmaWait { sem, dst, .. } => self.mem.dma_wait(at(sem, env), at(dst, env))?,
            OpKind::SemaphoreSignal { sem, amount: a } => {
                self.mem.semaphore_signal(at(sem, env), amount(a))?
            }
            OpKind::SemaphoreWait { sem, amount: a } => {
                self.mem.semaphore_wait(at(sem, env), amount(a))?
            }
            OpKind::SemaphoreRead { sem } => {
                return Ok(vec![self.mem.semaphore_read(at(sem, env))?]);
            }
            _ => unreachable!("only copy and semaphore ops"),
        }
        Ok(vec![])
    }
}

fn get(env: &Env, v: ValueId) -> &Tensor {
    env[v.0 as usize]
        .as_ref()
        .expect("verified: defined before use")
}
