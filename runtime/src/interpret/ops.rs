//! The semantics of each op family on interpreter values.

use super::{
    Env, get,
    tensor::{Tensor, for_each_index, strides},
};
use tpukit_dsl::{
    BinaryOp, CmpOp, DType, DotDims, Indexer, ReduceOp, Start, Type, UnaryOp, bits_of, from_bits,
};

/// The start of each indexer, as numbers.
pub(super) fn starts(index: &[Indexer], env: &Env) -> Vec<i64> {
    index
        .iter()
        .map(|ix| match ix {
            Indexer::Slice { start, .. } | Indexer::Point(start) => match start {
                Start::Static(s) => *s,
                Start::Dynamic(v) => get(env, *v).as_i64(),
            },
        })
        .collect()
}

fn map(x: &Tensor, ty: Type, f: impl Fn(f64) -> f64) -> Tensor {
    Tensor {
        data: x.data.iter().map(|&a| f(a)).collect(),
        ty,
    }
}

pub(super) fn unary(op: UnaryOp, x: &Tensor) -> Tensor {
    let d = x.ty.dtype;
    if !d.is_float() {
        let f = move |a: f64| -> f64 {
            let a = a as i64;
            let r = match op {
                UnaryOp::Neg => a.wrapping_neg(),
                UnaryOp::Abs => a.wrapping_abs(),
                UnaryOp::Not if d == DType::Bool => (a == 0) as i64,
                UnaryOp::Not => !a,
                tpukit_dsl::float_unary_ops!() => {
                    unreachable!("verified: {op:?} on {d}")
                }
            };
            d.wrap_int(r) as f64
        };
        return map(x, x.ty.clone(), f);
    }
    let f = move |a: f64| -> f64 {
        let r = match op {
            UnaryOp::Neg => -a,
            UnaryOp::Abs => a.abs(),
            UnaryOp::Exp => a.exp(),
            UnaryOp::Exp2 => a.exp2(),
            UnaryOp::Log => a.ln(),
            UnaryOp::Log1p => a.ln_1p(),
            UnaryOp::Sqrt => a.sqrt(),
            UnaryOp::Rsqrt => 1.0 / a.sqrt(),
            UnaryOp::Tanh => a.tanh(),
            UnaryOp::Erf => libm::erf(a),
            UnaryOp::Logistic => 1.0 / (1.0 + (-a).exp()),
            UnaryOp::Floor => a.floor(),
            UnaryOp::Ceil => a.ceil(),
            UnaryOp::RoundEven => a.round_ties_even(),
            UnaryOp::Round => a.round(),
            UnaryOp::Sin => a.sin(),
            UnaryOp::Cos => a.cos(),
            UnaryOp::Not => unreachable!("verified: not on floats"),
        };
        d.round_f64(r)
    };
    map(x, x.ty.clone(), f)
}

fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

fn nan_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}

/// A shift of `a` by `b`, integers of `d` (see [`BinaryOp::Shl`]): the amount is read as
/// unsigned in `d`'s width, and an amount of at least the width shifts every bit out.
fn shift(op: BinaryOp, a: i64, b: i64, d: DType) -> i64 {
    let bits = 8 * d.size_bytes() as u32;
    let mask = (1u64 << bits) - 1;
    let amount = (b as u64) & mask;
    let out = amount >= bits as u64;
    match op {
        BinaryOp::Shl if out => 0,
        BinaryOp::Shl => a << amount,
        BinaryOp::ShrA if out => a >> (bits - 1),
        BinaryOp::ShrA => a >> amount,
        BinaryOp::ShrL if out => 0,
        BinaryOp::ShrL => (((a as u64) & mask) >> amount) as i64,
        _ => unreachable!("not a shift"),
    }
}

/// `div_u`/`rem_u` of `a` and `b`, integers of `d` read as unsigned in `d`'s width.
fn unsigned(op: BinaryOp, a: i64, b: i64, d: DType) -> i64 {
    let mask = (1u64 << (8 * d.size_bytes() as u32)) - 1;
    let (a, b) = ((a as u64) & mask, (b as u64) & mask);
    match op {
        BinaryOp::DivU if b == 0 => 0,
        BinaryOp::RemU if b == 0 => a as i64,
        BinaryOp::DivU => (a / b) as i64,
        BinaryOp::RemU => (a % b) as i64,
        _ => unreachable!("not an unsigned division"),
    }
}

pub(super) fn binary(op: BinaryOp, x: &Tensor, y: &Tensor) -> Tensor {
    let d = x.ty.dtype;
    let mut data = Vec::with_capacity(x.data.len());
    for (&a, &b) in x.data.iter().zip(&y.data) {
        data.push(if d.is_float() {
            d.round_f64(match op {
                BinaryOp::Add => a + b,
                BinaryOp::Sub => a - b,
                BinaryOp::Mul => a * b,
                BinaryOp::Div => a / b,
                BinaryOp::Rem => a % b,
                BinaryOp::Pow => a.powf(b),
                BinaryOp::Max => nan_max(a, b),
                BinaryOp::Min => nan_min(a, b),
                BinaryOp::And
                | BinaryOp::Or
                | BinaryOp::Xor
                | BinaryOp::Shl
                | BinaryOp::ShrA
                | BinaryOp::ShrL
                | BinaryOp::DivU
                | BinaryOp::RemU => unreachable!("verified"),
            })
        } else {
            let (a, b) = (a as i64, b as i64);
            let r = match op {
                BinaryOp::Add => a.wrapping_add(b),
                BinaryOp::Sub => a.wrapping_sub(b),
                BinaryOp::Mul => a.wrapping_mul(b),
                BinaryOp::Div if b == 0 => 0,
                BinaryOp::Rem if b == 0 => a,
                BinaryOp::Div => a.wrapping_div(b),
                BinaryOp::Rem => a.wrapping_rem(b),
                BinaryOp::Max => a.max(b),
                BinaryOp::Min => a.min(b),
                BinaryOp::And => a & b,
                BinaryOp::Or => a | b,
                BinaryOp::Xor => a ^ b,
                BinaryOp::Shl | BinaryOp::ShrA | BinaryOp::ShrL => shift(op, a, b, d),
                BinaryOp::DivU | BinaryOp::RemU => unsigned(op, a, b, d),
                BinaryOp::Pow => unreachable!("verified"),
            };
            d.wrap_int(r) as f64
        });
    }
    Tensor {
        ty: x.ty.clone(),
        data,
    }
}

pub(super) fn compare(op: CmpOp, x: &Tensor, y: &Tensor) -> Tensor {
    let data = x
        .data
        .iter()
        .zip(&y.data)
        .map(|(&a, &b)| {
            (match op {
                CmpOp::Eq => a == b,
                CmpOp::Ne => a != b,
                CmpOp::Lt => a < b,
                CmpOp::Le => a <= b,
                CmpOp::Gt => a > b,
                CmpOp::Ge => a >= b,
            }) as u8 as f64
        })
        .collect();
    Tensor {
        ty: x.ty.with_dtype(DType::Bool),
        data,
    }
}

pub(super) fn select(c: &Tensor, t: &Tensor, f: &Tensor) -> Tensor {
    let data = c
        .data
        .iter()
        .zip(t.data.iter().zip(&f.data))
        .map(|(&c, (&t, &f))| if c != 0.0 { t } else { f })
        .collect();
    Tensor {
        ty: t.ty.clone(),
        data,
    }
}

pub(super) fn cast(x: &Tensor, ty: Type) -> Tensor {
    let (from, to) = (x.ty.dtype, ty.dtype);
    map(x, ty, move |a| {
        if to.is_float() {
            to.round_f64(a)
        } else if to.is_bool() {
            (a != 0.0) as u8 as f64
        } else if from.is_float() {
            to.cast_f64_to_int(a) as f64
        } else {
            to.wrap_int(a as i64) as f64
        }
    })
}

/// The bits of `x` read as `ty` (see `OpKind::Bitcast`): between widths, `p` elements of
/// the narrower side along the second-minor dimension make one of the wider side.
pub(super) fn bitcast(x: &Tensor, ty: Type) -> Tensor {
    let (from, to) = (x.ty.dtype, ty.dtype);
    let (fw, tw) = (from.bit_width(), to.bit_width());
    if fw == tw {
        return map(x, ty, move |a| from_bits(to, bits_of(from, a)));
    }
    let rank = ty.rank();
    let in_strides = strides(&x.ty.shape);
    let mut data = Vec::with_capacity(ty.num_elements());
    for_each_index(&ty.shape, |idx| {
        // The input element in row `row` of the second-minor dimension, elsewhere at `idx`.
        let at = |row: usize| {
            let mut off = row * in_strides[rank - 2];
            for d in (0..rank).filter(|&d| d + 2 != rank) {
                off += idx[d] * in_strides[d];
            }
            x.data[off]
        };
        let row = idx[rank - 2];
        let bits = if fw < tw {
            let p = tw / fw;
            (0..p).fold(0u64, |acc, k| {
                acc | bits_of(from, at(row * p + k)) << (k * fw)
            })
        } else {
            let p = fw / tw;
            bits_of(from, at(row / p)) >> ((row % p) * tw)
        };
        data.push(from_bits(to, bits));
    });
    Tensor { ty, data }
}

/// `x` gathered along `axis` at `indices` (see `OpKind::Gather`): an index outside the axis
/// reads 0.
pub(super) fn gather(x: &Tensor, indices: &Tensor, axis: usize, ty: Type) -> Tensor {
    let xs = strides(&x.ty.shape);
    let n = x.ty.shape[axis] as i64;
    let mut data = Vec::with_capacity(ty.num_elements());
    let mut k = 0;
    for_each_index(&ty.shape, |idx| {
        let j = indices.data[k] as i64;
        k += 1;
        if !(0..n).contains(&j) {
            data.push(0.0);
            return;
        }
        let off: usize = (0..idx.len())
            .map(|d| if d == axis { j as usize } else { idx[d] } * xs[d])
            .sum();
        data.push(x.data[off]);
    });
    Tensor { ty, data }
}

/// `x` rolled by `shift` (an i32 scalar) along `axis`, slice `j` along `e` by `j · k` more
/// for a `stride` `(k, e)` (see `OpKind::Roll`): element `i` moves to `i + shift` modulo the
/// extent.
pub(super) fn roll(
    x: &Tensor,
    shift: &Tensor,
    axis: usize,
    stride: Option<(i64, usize)>,
) -> Tensor {
    let xs = strides(&x.ty.shape);
    let n = x.ty.shape[axis].max(1) as i64;
    let base = (shift.data[0] as i64).rem_euclid(n);
    let mut data = Vec::with_capacity(x.data.len());
    for_each_index(&x.ty.shape, |idx| {
        let s = match stride {
            Some((k, e)) => base + (idx[e] as i64 * k).rem_euclid(n),
            None => base,
        };
        let off: usize = (0..idx.len())
            .map(|d| {
                let i = if d == axis {
                    (idx[d] as i64 - s).rem_euclid(n) as usize
                } else {
                    idx[d]
                };
                i * xs[d]
            })
            .sum();
        data.push(x.data[off]);
    });
    Tensor {
        ty: x.ty.clone(),
        data,
    }
}

/// Numpy broadcast: dimensions aligned at the right, size-1 dims repeat.
pub(super) fn broadcast(x: &Tensor, ty: Type) -> Tensor {
    let (rank, xr) = (ty.rank(), x.ty.rank());
    let xs = strides(&x.ty.shape);
    let mut data = Vec::with_capacity(ty.num_elements());
    for_each_index(&ty.shape, |idx| {
        let mut off = 0;
        for d in 0..xr {
            let i = idx[rank - xr + d];
            if x.ty.shape[d] != 1 {
                off += i * xs[d];
            }
        }
        data.push(x.data[off]);
    });
    Tensor { ty, data }
}

pub(super) fn transpose(x: &Tensor, perm: &[usize], ty: Type) -> Tensor {
    let xs = strides(&x.ty.shape);
    let mut data = Vec::with_capacity(ty.num_elements());
    for_each_index(&ty.shape, |idx| {
        data.push(
            x.data[idx
                .iter()
                .zip(perm)
                .map(|(&i, &p)| i * xs[p])
                .sum::<usize>()],
        );
    });
    Tensor { ty, data }
}

pub(super) fn iota(dim: usize, ty: Type) -> Tensor {
    let mut data = Vec::with_capacity(ty.num_elements());
    let d = ty.dtype;
    for_each_index(&ty.shape, |idx| {
        data.push(d.wrap_int(idx[dim] as i64) as f64)
    });
    Tensor { ty, data }
}

pub(super) fn reduce(op: ReduceOp, x: &Tensor, axes: &[usize], ty: Type) -> Tensor {
    let d = x.ty.dtype;
    let init = super::fold::identity(op, d);
    let mut acc = vec![init; ty.num_elements().max(1)];
    let (os, xs) = (strides(&ty.shape), strides(&x.ty.shape));
    for_each_index(&x.ty.shape, |idx| {
        let mut off = 0;
        let mut k = 0;
        for (dim, &i) in idx.iter().enumerate() {
            if !axes.contains(&dim) {
                off += i * os[k];
                k += 1;
            }
        }
        let flat = idx.iter().zip(&xs).map(|(i, s)| i * s).sum::<usize>();
        let v = x.data[flat];
        acc[off] = match op {
            ReduceOp::Sum => acc[off] + v,
            ReduceOp::Max => nan_max(acc[off], v),
            ReduceOp::Min => nan_min(acc[off], v),
        };
    });
    let data = acc
        .into_iter()
        .map(|a| {
            if d.is_float() {
                d.round_f64(a)
            } else {
                d.wrap_int(a as i64) as f64
            }
        })
        .collect();
    Tensor { ty, data }
}

pub(super) fn dot(x: &Tensor, y: &Tensor, dims: DotDims, ty: Type) -> Tensor {
    let rank = x.ty.rank();
    let batch = if rank == 3 { x.ty.shape[0] } else { 1 };
    let b0 = rank - 2;
    let k = x.ty.shape[dims.lhs_contract];
    let (m, n) = (ty.shape[rank - 2], ty.shape[rank - 1]);
    let (xs, ys) = (strides(&x.ty.shape), strides(&y.ty.shape));
    // Strides along (free, contracted) for each operand.
    let (xm, xk) = if dims.lhs_contract == rank - 1 {
        (xs[b0], xs[b0 + 1])
    } else {
        (xs[b0 + 1], xs[b0])
    };
    let (yn, yk) = if dims.rhs_contract == rank - 2 {
        (ys[b0 + 1], ys[b0])
    } else {
        (ys[b0], ys[b0 + 1])
    };
    let (xb, yb) = if rank == 3 { (xs[0], ys[0]) } else { (0, 0) };
    let d = ty.dtype;
    let mut data = Vec::with_capacity(batch * m * n);
    for b in 0..batch {
        for i in 0..m {
            for j in 0..n {
                let mut acc = 0.0f64;
                let mut iacc = 0i64;
                for p in 0..k {
                    let (a, c) = (
                        x.data[b * xb + i * xm + p * xk],
                        y.data[b * yb + j * yn + p * yk],
                    );
                    if d.is_float() {
                        acc += a * c;
                    } else {
                        iacc = iacc.wrapping_add((a as i64).wrapping_mul(c as i64));
                    }
                }
                data.push(if d.is_float() {
                    d.round_f64(acc)
                } else {
                    d.wrap_int(iacc) as f64
                });
            }
        }
    }
    Tensor { ty, data }
}
