use tpukit_dsl::*;

#[test]
fn builds_and_prints_softmax() {
    let spec = CallSpec {
        grid: vec![GridAxis::parallel(Extent::cdiv("m", 8))],
        inputs: vec![
            ArraySpec::new(DType::F32, [Dim::sym("m"), Dim::Static(128)])
                .blocked([8, 128], [grid(0), 0.into()])
                .fill(f64::NEG_INFINITY),
        ],
        outputs: vec![
            ArraySpec::new(DType::F32, [Dim::sym("m"), Dim::Static(128)])
                .blocked([8, 128], [grid(0), 0.into()]),
        ],
        ..Default::default()
    };
    let mut b = KernelBuilder::new("softmax", &spec).unwrap();
    let x = b.declare(Role::Input, "x").unwrap();
    let o = b.declare(Role::Output, "o").unwrap();
    let v = b.load(x, &[]).unwrap();
    let m = b.reduce(ReduceOp::Max, v, &[-1]).unwrap();
    let m = b.reshape(m, &[8, 1]).unwrap();
    let d = b.binary(BinaryOp::Sub, v, m).unwrap();
    let e = b.unary(UnaryOp::Exp, d).unwrap();
    let s = b.reduce(ReduceOp::Sum, e, &[1]).unwrap();
    let s = b.reshape(s, &[8, 1]).unwrap();
    let r = b.binary(BinaryOp::Div, e, s).unwrap();
    let r2 = b.binary(BinaryOp::Mul, r, 1.0).unwrap();
    b.store(o, &[], r2).unwrap();
    let k = b.finish().unwrap();
    println!("{k}");
    println!("{}", k.structural_hash());
}
