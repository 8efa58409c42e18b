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

/// `halve`: halves `x` while its maximum exceeds 1, counting the steps in an i32.
fn halve() -> Kernel {
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
    b.finish().unwrap()
}

#[test]
fn a_while_loop_round_trips_through_the_printer() {
    let k = halve();
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

#[test]
fn a_loop_needs_one_type_per_carried_value() {
    let text = halve().to_string();
    let bad = text.replace(": (i32[], f32[8,128])", ": (f32[8,128])");
    assert_ne!(bad, text);
    let e = parse_kernel(&bad).unwrap_err().to_string();
    assert!(
        e.contains("`while` carries 2 value(s) but has 1 result type(s)"),
        "{e}"
    );
    let bad = text.replacen("do(%", "do(%99, %", 1);
    let e = parse_kernel(&bad).unwrap_err().to_string();
    assert!(
        e.contains("`while`'s body takes one argument per carried value"),
        "{e}"
    );
    let sum = include_str!("snapshots/chunked_sum.ir");
    let bad = sum.replace(": (f32[8,128], f32[8,128])", ": (f32[8,128])");
    assert_ne!(bad, sum);
    let e = parse_kernel(&bad).unwrap_err().to_string();
    assert!(
        e.contains("`for` carries 2 value(s) but has 1 result type(s)"),
        "{e}"
    );
}
