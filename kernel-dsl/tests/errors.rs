//! Bad kernels are stopped with errors that name the kernel, the op and what is wrong: by the
//! builder while the kernel is built, and by the verifier for IR built any other way.

mod common;

use tpukit_dsl::*;

/// Asserts that `r` failed with a message containing every one of `parts`.
fn fails<T: std::fmt::Debug>(r: Result<T>, parts: &[&str]) {
    let e = r.expect_err("expected an error").to_string();
    for p in parts {
        assert!(e.contains(p), "error {e:?} does not mention {p:?}");
    }
}

fn spec_1d(dtype: DType) -> CallSpec {
    CallSpec {
        grid: vec![GridAxis::parallel(Extent::cdiv("n", 128))],
        inputs: vec![ArraySpec::new(dtype, ["n"]).blocked([128], [grid(0)])],
        outputs: vec![ArraySpec::new(dtype, ["n"]).blocked([128], [grid(0)])],
        ..Default::default()
    }
}

fn builder(dtype: DType) -> (KernelBuilder, Ref, Ref) {
    let mut b = KernelBuilder::new("k", &spec_1d(dtype)).unwrap();
    let x = b.declare(Role::Input, "x").unwrap();
    let o = b.declare(Role::Output, "o").unwrap();
    b.set_loc(Some(Loc::new("k.rs", 7, 9)));
    (b, x, o)
}

#[test]
fn builder_rejects_mixed_dtypes_with_location() {
    let (mut b, x, _) = builder(DType::BF16);
    let v = b.load(x, &[]).unwrap();
    let f = b.cast(v, DType::F32).unwrap();
    fails(
        b.binary(BinaryOp::Add, v, f),
        &["kernel `k`", "op `add`", "bf16 and f32", "k.rs:7:9"],
    );
}

#[test]
fn builder_rejects_shapes_that_do_not_broadcast() {
    let (mut b, x, _) = builder(DType::F32);
    let v = b.load(x, &[]).unwrap();
    let w = b.zeros(DType::F32, &[64]);
    fails(
        b.binary(BinaryOp::Mul, v, w),
        &["op `mul`", "[128] and [64] do not broadcast"],
    );
}

#[test]
fn builder_rejects_float_literal_with_ints() {
    let (mut b, _, _) = builder(DType::F32);
    let i = b.program_id(0).unwrap();
    fails(
        b.binary(BinaryOp::Add, i, 0.5),
        &["float literal 0.5", "i32"],
    );
}

#[test]
fn builder_rejects_store_of_wrong_dtype_and_into_inputs() {
    let (mut b, x, o) = builder(DType::BF16);
    let v = b.zeros(DType::F32, &[128]);
    fails(
        b.store(o, &[], v),
        &["op `store`", "f32 value into bf16 ref `o`"],
    );
    let w = b.load(x, &[]).unwrap();
    fails(
        b.store(x, &[], w),
        &["op `store`", "`x` is an input: it is read-only"],
    );
}

#[test]
fn builder_rejects_static_slices_outside_the_block() {
    let (mut b, x, _) = builder(DType::F32);
    fails(
        b.load(x, &[Ix::Ds(100.into(), 64)]),
        &[
            "op `load`",
            "elements 100..164 of dim 0",
            "block extent 128",
        ],
    );
    fails(
        b.load(x, &[Ix::Full, Ix::Full]),
        &["2 indices for ref `x` of rank 1"],
    );
}

#[test]
fn builder_rejects_bad_axes_and_dot_shapes() {
    let (mut b, x, _) = builder(DType::F32);
    let v = b.load(x, &[]).unwrap();
    fails(
        b.reduce(ReduceOp::Sum, v, &[1]),
        &["op `reduce_sum`", "bad axis 1"],
    );
    fails(
        b.program_id(1),
        &[
            "op `program_id`",
            "axis 1 is out of range for a grid of rank 1",
        ],
    );
    let a = b.zeros(DType::F32, &[8, 16]);
    let c = b.zeros(DType::F32, &[8, 16]);
    fails(
        b.matmul(a, c),
        &["op `dot`", "contracting sizes differ: 16"],
    );
    fails(
        b.transpose(a, &[0, 0]),
        &["op `transpose`", "not a permutation"],
    );
    let bad = b.zeros(DType::I32, &[4]);
    fails(
        b.unary(UnaryOp::Exp, bad),
        &["op `exp`", "not defined on i32"],
    );
}

#[test]
fn builder_rejects_loop_carrying_a_changed_type() {
    let (mut b, _, _) = builder(DType::F32);
    let z = b.zeros(DType::F32, &[8]);
    let r = b.for_loop(0, 4, 1, &[z], |b, _, c| {
        Ok(vec![b.cast(c[0], DType::BF16)?])
    });
    fails(r, &["op `for`", "changes type from f32[8] to bf16[8]"]);
    let r = b.if_else(
        true,
        |b| Ok(vec![b.zeros(DType::F32, &[2])]),
        |_| Ok(vec![]),
    );
    fails(r, &["op `if`", "yields 0 values, expected 1"]);
}

#[test]
fn spec_and_parameters_must_agree() {
    let mut b = KernelBuilder::new("k", &spec_1d(DType::F32)).unwrap();
    b.declare(Role::Input, "x").unwrap();
    fails(
        b.declare(Role::Input, "y"),
        &["kernel `k`", "parameter `y` is input #1", "gives 1 input"],
    );
    fails(
        b.finish(),
        &["more output operands than the kernel's 0 output parameter(s)"],
    );
    let spec = CallSpec {
        prefetch: vec![ArraySpec::new(DType::I32, [4usize]).blocked([4], [grid(0)])],
        ..Default::default()
    };
    fails(
        KernelBuilder::new("k", &spec),
        &["prefetch0: prefetch operands take no block spec"],
    );
    let spec = CallSpec {
        inputs: vec![ArraySpec::new(DType::F32, [4usize]).blocked([4], [grid(3)])],
        ..Default::default()
    };
    fails(
        KernelBuilder::new("k", &spec),
        &["index_map", "grid axis 3 does not exist"],
    );
}

/// Each case breaks a valid kernel in one way; the verifier must name what broke.
#[test]
fn verifier_catches_malformed_ir() {
    type Break = fn(&mut Kernel);
    let cases: Vec<(&str, Break, &[&str])> = vec![
        (
            "use of an undefined value",
            |k| {
                k.body.body.ops[2].kind = OpKind::Binary {
                    op: BinaryOp::Add,
                    lhs: ValueId(0),
                    rhs: ValueId(7),
                };
            },
            &["op `add`", "uses %7 where it is not defined"],
        ),
        (
            "wrong result type",
            |k| {
                k.body.types[2] = Type::new(DType::F32, [8usize, 64]);
            },
            &["op `add`", "expected f32[8,128], got f32[8,64]"],
        ),
        (
            "missing yield",
            |k| {
                k.body.body.ops.pop();
            },
            &["must end with `yield`"],
        ),
        (
            "op after yield",
            |k| {
                let y = k.body.body.ops.last().unwrap().clone();
                k.body.body.ops.insert(0, y);
            },
            &["`yield` must be the last op"],
        ),
        (
            "value defined twice",
            |k| {
                k.body.body.ops[1].results = vec![ValueId(0)];
            },
            &["%0 is defined twice"],
        ),
        (
            "store into an input",
            |k| {
                if let OpKind::Store { operand, .. } = &mut k.body.body.ops[3].kind {
                    *operand = OperandId(0);
                }
            },
            &["op `store`", "`x` is an input: it is read-only"],
        ),
        (
            "slice outside the block",
            |k| {
                if let OpKind::Load { index, .. } = &mut k.body.body.ops[0].kind {
                    index[1] = Indexer::slice(Start::Static(64), 128);
                }
            },
            &[
                "op `load`",
                "elements 64..192 of dim 1 are outside `x`'s block extent 128",
            ],
        ),
        (
            "index map of the wrong rank",
            |k| {
                if let Window::Blocked(b) = &mut k.operands[1].window {
                    b.index_map.body.ops[0].kind = OpKind::Yield {
                        values: vec![ValueId(0)],
                    };
                }
            },
            &["operand `y`", "index map", "yields (i32[])"],
        ),
        (
            "block rank",
            |k| {
                if let Window::Blocked(b) = &mut k.operands[2].window {
                    b.block.pop();
                }
            },
            &["operand `o`", "block rank 1 differs from array rank 2"],
        ),
        (
            "duplicate operand names",
            |k| {
                k.operands[1].name = "x".into();
            },
            &["operand `x`: the name is used twice"],
        ),
        (
            "float fill of an int array",
            |k| {
                k.operands[0].dtype = DType::I32;
            },
            &["operand `x`: float fill for a i32 array"],
        ),
        (
            "program id in an index map",
            |k| {
                if let Window::Blocked(b) = &mut k.operands[0].window {
                    let r = b.index_map.types.len() as u32;
                    b.index_map.types.push(Type::scalar(DType::I32));
                    b.index_map.body.ops.insert(
                        0,
                        Op {
                            results: vec![ValueId(r)],
                            kind: OpKind::ProgramId { axis: 0 },
                            loc: None,
                        },
                    );
                }
            },
            &["op `program_id`", "not allowed in an index map"],
        ),
    ];
    for (what, break_it, parts) in cases {
        let mut k = common::add(DType::F32);
        verify(&k).unwrap();
        break_it(&mut k);
        let e = verify(&k).expect_err(what).to_string();
        assert!(e.starts_with("kernel `add`: "), "{what}: {e}");
        for p in parts {
            assert!(e.contains(p), "{what}: error {e:?} does not mention {p:?}");
        }
    }
}

#[test]
fn verifier_accepts_every_kernel_the_builder_makes() {
    for k in [
        common::add(DType::BF16),
        common::matmul(),
        common::chunked_sum(),
        common::gather(),
    ] {
        verify(&k).unwrap();
    }
}

/// A kernel that stores into its prefetch operand `p` (`x` is blocked by `x_map`).
fn writes_prefetch(x_map: IndexExpr) -> Result<Kernel> {
    let spec = CallSpec {
        grid: vec![GridAxis::arbitrary(2usize)],
        prefetch: vec![ArraySpec::new(DType::I32, [2usize])],
        inputs: vec![
            ArraySpec::new(DType::F32, [16usize, 128]).blocked([8, 128], [x_map, 0.into()]),
        ],
        outputs: vec![
            ArraySpec::new(DType::F32, [16usize, 128]).blocked([8, 128], [grid(0), 0.into()]),
        ],
        ..Default::default()
    };
    let mut b = KernelBuilder::new("k", &spec)?;
    let p = b.declare(Role::Prefetch, "p")?;
    let x = b.declare(Role::Input, "x")?;
    let o = b.declare(Role::Output, "o")?;
    let v = b.load(p, &[Ix::At(0.into())])?;
    let w = b.binary(BinaryOp::Add, v, 1)?;
    b.store(p, &[Ix::At(0.into())], w)?;
    let y = b.load(x, &[])?;
    b.store(o, &[], y)?;
    b.finish()
}

#[test]
fn stores_into_prefetch_operands_are_state_that_index_maps_may_not_read() {
    let k = writes_prefetch(grid(0)).unwrap();
    assert_eq!(k.written_prefetch(), vec![OperandId(0)]);
    fails(
        writes_prefetch(prefetch(0, [1.into()])),
        &[
            "kernel `k`",
            "operand `x`: its index map reads prefetch operand `p`, which the body writes",
        ],
    );
}
