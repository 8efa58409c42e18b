//! Random kernels for property tests: a fixed frame (grid, operands with edge-prone windows,
//! a prefetch-driven index map) whose names, dtypes and symbols vary, and a body built by the
//! builder from a list of steps, each picking an op and its operands from the values built so
//! far. Steps whose op does not type-check are skipped (the builder rejects them without
//! changing the kernel), so every generated kernel is valid.

use tpukit_dsl::*;

/// One step of a body: which op (`kind`), two picks among the values so far (`a`, `b`) and a
/// number for constants.
pub type Step = (u8, u8, u8, f64);

/// What varies in the frame.
#[derive(Clone, Debug)]
pub struct Frame {
    pub dtype: u8,
    /// Picks names from lists with plain and quoted names (spaces, quotes, digits first).
    pub names: u8,
    pub located: bool,
}

const KERNEL_NAMES: [&str; 4] = ["k", "my kernel", "0\"quoted\"", "a.b-c$"];
const OPERAND_NAMES: [[&str; 5]; 4] = [
    ["x", "y", "o", "acc", "idx"],
    ["in put", "1", "o", "acc", "i\\dx"],
    ["x", "y", "%o", "a:b", "idx"],
    ["x.0", "y-1", "o$", "_acc", "idx"],
];
const SYMBOLS: [&str; 4] = ["m", "9rows", "a b", "rows"];
const FILES: [&str; 4] = ["k.rs", "dir/a:b.py", "<stdin>", "x y.rs"];

pub fn kernel(frame: &Frame, steps: &[Step]) -> Kernel {
    let dtype = DType::ALL[frame.dtype as usize % DType::ALL.len()];
    let names = OPERAND_NAMES[frame.names as usize % OPERAND_NAMES.len()];
    let sym = SYMBOLS[frame.names as usize % SYMBOLS.len()];
    let fill = if dtype.is_float() {
        Literal::Float(-1.5)
    } else if dtype.is_bool() {
        Literal::Bool(true)
    } else {
        Literal::Int(-3)
    };
    let spec = CallSpec {
        grid: vec![
            GridAxis::parallel(Extent::cdiv(sym, 8)),
            GridAxis::arbitrary(2),
        ],
        prefetch: vec![ArraySpec::new(DType::I32, [Dim::sym(sym)])],
        inputs: vec![
            ArraySpec::new(dtype, [Dim::sym(sym), Dim::Static(256)])
                .blocked([8, 128], [grid(0), grid(1)])
                .fill(fill),
            ArraySpec::new(DType::F32, [Dim::sym("n"), Dim::Static(128)]).blocked(
                [BlockDim::Squeezed, BlockDim::Blocked(128)],
                [prefetch(0, [grid(0)]), 0.into()],
            ),
        ],
        outputs: vec![
            ArraySpec::new(dtype, [Dim::sym(sym), Dim::Static(256)])
                .blocked([8, 128], [grid(0), grid(1)]),
        ],
        scratch: vec![ArraySpec::new(DType::F32, [8usize, 128])],
    };
    let kernel_name = KERNEL_NAMES[frame.names as usize % KERNEL_NAMES.len()];
    let mut b = KernelBuilder::new(kernel_name, &spec).unwrap();
    b.declare(Role::Prefetch, names[4]).unwrap();
    let x = b.declare(Role::Input, names[0]).unwrap();
    let y = b.declare(Role::Input, names[1]).unwrap();
    let o = b.declare(Role::Output, names[2]).unwrap();
    let acc = b.declare(Role::Scratch, names[3]).unwrap();
    let mut pool = vec![
        b.load(x, &[]).unwrap(),
        b.load(y, &[]).unwrap(),
        b.program_id(0).unwrap(),
        b.array_dim(x, 0).unwrap(),
        b.num_programs(1).unwrap(),
    ];
    let refs = Refs { x, o, acc };
    let mut steps = steps.iter().enumerate();
    body(&mut b, &refs, frame, &mut steps, &mut pool, 0);
    b.finish().unwrap()
}

struct Refs {
    x: Ref,
    o: Ref,
    acc: Ref,
}

/// Applies steps until they run out (or, in a region, for as many steps as the region's
/// opening step said), keeping the values each step builds in `pool`.
fn body<'a>(
    b: &mut KernelBuilder,
    refs: &Refs,
    frame: &Frame,
    steps: &mut impl Iterator<Item = (usize, &'a Step)>,
    pool: &mut Vec<ValueId>,
    depth: usize,
) {
    let mut budget = if depth == 0 { usize::MAX } else { 3 };
    while budget > 0 {
        let Some((i, &(kind, a, c, num))) = steps.next() else {
            return;
        };
        budget -= 1;
        if frame.located {
            let file = FILES[i % FILES.len()];
            b.set_loc(Some(Loc::new(file, i as u32 + 1, (a % 7) as u32 + 1)));
        }
        let pick = |n: u8| pool[n as usize % pool.len()];
        let (va, vc) = (pick(a), pick(c));
        let built = match kernel_step(kind) {
            0 => b.unary(UnaryOp::ALL[a as usize % UnaryOp::ALL.len()], vc),
            1 => b.binary(BinaryOp::ALL[c as usize % BinaryOp::ALL.len()], va, vc),
            2 => b.compare(CmpOp::ALL[c as usize % CmpOp::ALL.len()], va, vc),
            3 => {
                let cond = b.compare(CmpOp::Gt, va, vc);
                cond.and_then(|cond| b.select(cond, va, vc))
            }
            4 => b.cast(va, DType::ALL[c as usize % DType::ALL.len()]),
            5 => Ok(constant(b, c, num)),
            6 => {
                let rank = b.ty(va).rank() as i64;
                let op = ReduceOp::ALL[c as usize % ReduceOp::ALL.len()];
                if rank == 0 {
                    continue;
                }
                b.reduce(op, va, &[c as i64 % rank])
            }
            7 => b.transpose(va, &[1, 0]),
            8 => {
                let n = b.ty(va).num_elements();
                b.reshape(va, &[n])
            }
            9 => b.iota(DType::I32, &[8, 128], c as usize % 2),
            10 => b.matmul(va, vc),
            11 => b.broadcast_to(va, &[8, 128]),
            12 => b.store(refs.o, &[], va).map(|()| va),
            13 => {
                let mask = b.compare(CmpOp::Ne, va, vc);
                mask.and_then(|m| b.store_masked(refs.acc, &[], 0.5f32, m))
                    .map(|()| va)
            }
            14 => {
                let mask = b.compare(CmpOp::Lt, va, vc);
                mask.and_then(|m| {
                    b.load_masked(
                        refs.x,
                        &[Ix::Full, Ix::Ds(Arg::Lit(Literal::Int(0)), 64)],
                        m,
                        1,
                    )
                })
            }
            15 => {
                let pid = pool[2];
                let cond = b.compare(CmpOp::Eq, pid, i64::from(c) % 3).unwrap();
                let mark = pool.len();
                let r = b.if_else(
                    cond,
                    |b| {
                        body(b, refs, frame, steps, pool, depth + 1);
                        pool.truncate(mark);
                        Ok(vec![va])
                    },
                    |_| Ok(vec![va]),
                );
                r.map(|v| v[0])
            }
            _ => {
                let mark = pool.len();
                let r = b.for_loop(0, i64::from(c % 5), 1, &[va], |b, iv, carried| {
                    pool.push(iv);
                    pool.extend(carried);
                    body(b, refs, frame, steps, pool, depth + 1);
                    pool.truncate(mark);
                    Ok(carried.to_vec())
                });
                r.map(|v| v[0])
            }
        };
        if let Ok(v) = built {
            pool.push(v);
        }
    }
}

/// Which op a step builds: 18 kinds (16 and 17 both a `for`), regions rarer than the rest.
fn kernel_step(kind: u8) -> u8 {
    kind % 18
}

/// A splat constant of a dtype `c` picks, from `num`: floats as they come (negative, tiny,
/// huge, infinite), integers truncated, bools by sign.
fn constant(b: &mut KernelBuilder, c: u8, num: f64) -> ValueId {
    let dtype = DType::ALL[c as usize % DType::ALL.len()];
    let shape: &[usize] = if c.is_multiple_of(2) { &[] } else { &[8, 128] };
    let value = if dtype.is_float() {
        Literal::Float(num)
    } else if dtype.is_bool() {
        Literal::Bool(num > 0.0)
    } else {
        Literal::Int(num as i64)
    };
    b.constant(value, Type::new(dtype, shape))
}
