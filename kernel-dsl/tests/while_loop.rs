//! `while` loops: built (the condition must be a bool scalar), verified, printed and parsed
//! back. Run on both devices by python/tests/test_pallas_ops.py (a data-dependent
//! `lax.while_loop`); lowered by `mosaic-lowering/tests/lower/while.ir`.

use tpukit_dsl::*;

fn builder() -> (KernelBuilder, Ref, Ref) {
    let spec = CallSpec {
        inputs: vec![ArraySpec::new(DType::F32, [8, 128])],
        outputs: vec![ArraySpec::new(DType::F32, [8, 128])],
        ..Default::default()
    };
    let mut b = KernelBuilder::new("halve", &spec).unwrap();
    let x = b.declare(Role::Input, "x").unwrap();
    let o = b.declare(Role::Output, "o").unwrap();
    (b, x, o)
}

#[test]
fn a_while_loop_round_trips_through_the_printer() {
    let (mut b, x, o) = builder();
    let v = b.load(x, &[]).unwrap();
    let zero = b.value(0, Some(DType::I32)).unwrap();
    let out = b
        .while_loop(
            &[zero, v],
            |b, c| {
                let m = b.reduce(ReduceOp::Max, c[1], &[0, 1])?;
                b.compare(CmpOp::Gt, m, 1.0)
            },
            |b, c| {
                Ok(vec![
                    b.binary(BinaryOp::Add, c[0], 1)?,
                    b.binary(BinaryOp::Mul, c[1], 0.5)?,
                ])
            },
        )
        .unwrap();
    b.store(o, &[], out[1]).unwrap();
    let k = b.finish().unwrap();
    let text = k.to_string();
    assert!(
        text.contains("= while iter(%") && text.contains("} do(%"),
        "{text}"
    );
    let back = parse_kernel(&text).unwrap();
    assert_eq!(back.to_string(), text);
    assert_eq!(back.structural_hash(), k.structural_hash());
}

#[test]
fn a_while_condition_is_a_bool_scalar() {
    let (mut b, x, _) = builder();
    let v = b.load(x, &[]).unwrap();
    let e = b
        .while_loop(&[v], |_, c| Ok(c[0]), |_, c| Ok(c.to_vec()))
        .expect_err("a vector condition")
        .to_string();
    assert!(e.contains("op `while`") && e.contains("bool scalar"), "{e}");
}
