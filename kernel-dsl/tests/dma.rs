//! The copy and semaphore ops: built, verified (operands in HBM reached only by copies,
//! semaphores only by semaphore ops, copies between places of one type), printed and parsed
//! back. Their semantics are run on both devices by python/tests/test_pallas_dma.py and the
//! lowering's FileCheck case `mosaic-lowering/tests/lower/dma.ir`.

use tpukit_dsl::*;

fn spec() -> CallSpec {
    CallSpec {
        grid: vec![GridAxis::arbitrary(2)],
        inputs: vec![ArraySpec::new(DType::F32, [16, 128]).any()],
        outputs: vec![ArraySpec::new(DType::F32, [16, 128]).blocked([8, 128], [grid(0), 0.into()])],
        scratch: vec![
            ArraySpec::new(DType::F32, [8, 128]),
            ArraySpec::semaphores(SemaphoreKind::Dma, [2]),
            ArraySpec::semaphores(SemaphoreKind::Regular, []),
        ],
        ..Default::default()
    }
}

struct Refs {
    x: Ref,
    o: Ref,
    buf: Ref,
    sems: Ref,
    flag: Ref,
}

fn builder() -> (KernelBuilder, Refs) {
    let mut b = KernelBuilder::new("copy", &spec()).unwrap();
    let x = b.declare(Role::Input, "x").unwrap();
    let o = b.declare(Role::Output, "o").unwrap();
    let buf = b.declare(Role::Scratch, "buf").unwrap();
    let sems = b.declare(Role::Scratch, "sems").unwrap();
    let flag = b.declare(Role::Scratch, "flag").unwrap();
    (
        b,
        Refs {
            x,
            o,
            buf,
            sems,
            flag,
        },
    )
}

fn error<T: std::fmt::Debug>(r: Result<T>) -> String {
    r.expect_err("expected an error").to_string()
}

#[test]
fn a_copy_round_trips_through_the_printer() {
    let (mut b, r) = builder();
    let i = b.program_id(0).unwrap();
    let row = b.binary(BinaryOp::Mul, i, 8).unwrap();
    let src = [Ix::Ds(row.into(), 8)];
    let sem = [Ix::At(i.into())];
    b.dma_start((r.x, &src), (r.buf, &[]), (r.sems, &sem))
        .unwrap();
    b.dma_wait((r.sems, &sem), (r.x, &src), (r.buf, &[]))
        .unwrap();
    let v = b.load(r.buf, &[]).unwrap();
    b.store(r.o, &[], v).unwrap();
    b.semaphore_signal(r.flag, &[], 3).unwrap();
    let n = b.semaphore_read(r.flag, &[]).unwrap();
    b.semaphore_wait(r.flag, &[], n).unwrap();
    let k = b.finish().unwrap();
    let text = k.to_string();
    for part in [
        "input %x: f32[16,128] any",
        "scratch %sems: i32[2] dma_semaphore",
        "scratch %flag: i32[] semaphore",
        "dma_start %x[ds(%",
        "dma_wait %sems[%",
        "semaphore_signal %flag[], %",
        "= semaphore_read %flag[] : i32[]",
    ] {
        assert!(text.contains(part), "{part:?} not in {text}");
    }
    let back = parse_kernel(&text).unwrap();
    assert_eq!(back.to_string(), text);
    assert_eq!(back.structural_hash(), k.structural_hash());
}

#[test]
fn an_operand_in_hbm_is_reached_only_by_copies() {
    let (mut b, r) = builder();
    let e = error(b.load(r.x, &[]));
    assert!(e.contains("op `load`") && e.contains("lives in HBM"), "{e}");
}

#[test]
fn semaphores_are_reached_only_by_semaphore_ops() {
    let (mut b, r) = builder();
    let e = error(b.load(r.sems, &[]));
    assert!(e.contains("`sems` is a semaphore"), "{e}");
    let e = error(b.semaphore_signal(r.sems, &[Ix::At(0.into())], 1));
    assert!(
        e.contains("is not a semaphore"),
        "a DMA semaphore is not regular: {e}"
    );
    // A copy may signal a regular semaphore (it counts copies), but not a buffer; only
    // DMA semaphores are waited on by `dma_wait`.
    b.dma_start((r.x, &[Ix::Ds(0.into(), 8)]), (r.buf, &[]), (r.flag, &[]))
        .unwrap();
    let e = error(b.dma_start((r.x, &[Ix::Ds(0.into(), 8)]), (r.buf, &[]), (r.x, &[])));
    assert!(e.contains("`x` is not a semaphore"), "{e}");
    let e = error(b.dma_wait((r.flag, &[]), (r.x, &[Ix::Ds(0.into(), 8)]), (r.buf, &[])));
    assert!(e.contains("is not a dma semaphore"), "{e}");
    let e = error(b.dma_start(
        (r.x, &[Ix::Ds(0.into(), 8)]),
        (r.buf, &[]),
        (r.sems, &[Ix::Ds(0.into(), 2)]),
    ));
    assert!(e.contains("name one"), "a slice of semaphores: {e}");
}

#[test]
fn a_copy_moves_one_type() {
    let (mut b, r) = builder();
    let e = error(b.dma_start(
        (r.x, &[Ix::Ds(0.into(), 4)]),
        (r.buf, &[]),
        (r.sems, &[Ix::At(0.into())]),
    ));
    assert!(
        e.contains("op `dma_start`") && e.contains("copies f32[4,128]"),
        "{e}"
    );
}

/// A kernel of `spec` with an empty body, every operand declared.
fn empty(spec: &CallSpec) -> Result<Kernel> {
    let mut b = KernelBuilder::new("copy", spec)?;
    for (role, n) in [
        (Role::Prefetch, spec.prefetch.len()),
        (Role::Input, spec.inputs.len()),
        (Role::Output, spec.outputs.len()),
        (Role::Scratch, spec.scratch.len()),
    ] {
        for i in 0..n {
            b.declare(role, &format!("{}{i}", role.name()))?;
        }
    }
    b.finish()
}

#[test]
fn spaces_are_checked_on_operands() {
    assert!(empty(&spec()).is_ok());
    let mut bad = spec();
    bad.scratch[0] = ArraySpec::new(DType::F32, [8, 128]).any();
    let e = error(empty(&bad));
    assert!(e.contains("scratch operands live in kernel memory"), "{e}");
    let mut bad = spec();
    bad.prefetch = vec![ArraySpec::semaphores(SemaphoreKind::Dma, [2])];
    let e = error(empty(&bad));
    assert!(
        e.contains("semaphores are i32 scratch, input or output operands"),
        "{e}"
    );
    let mut bad = spec();
    bad.outputs[0] = ArraySpec::semaphores(SemaphoreKind::Dma, [2]).blocked([1], [grid(0)]);
    let e = error(empty(&bad));
    assert!(e.contains("takes no block spec"), "{e}");
}

/// Semaphores crossing the call (see `tpukit_dsl::dma`): a copy started on a semaphore output
/// and a wait on a semaphore input, printed and parsed back.
#[test]
fn semaphore_inputs_and_outputs_round_trip() {
    let spec = CallSpec {
        inputs: vec![
            ArraySpec::new(DType::F32, [8, 128]).any(),
            ArraySpec::semaphores(SemaphoreKind::Dma, []),
        ],
        outputs: vec![
            ArraySpec::new(DType::F32, [8, 128]).any(),
            ArraySpec::semaphores(SemaphoreKind::Dma, [2]),
        ],
        ..Default::default()
    };
    let mut b = KernelBuilder::new("hand_over", &spec).unwrap();
    let x = b.declare(Role::Input, "x").unwrap();
    let before = b.declare(Role::Input, "before").unwrap();
    let o = b.declare(Role::Output, "o").unwrap();
    let sems = b.declare(Role::Output, "sems").unwrap();
    b.dma_wait((before, &[]), (x, &[]), (o, &[])).unwrap();
    b.dma_start((x, &[]), (o, &[]), (sems, &[Ix::At(1.into())]))
        .unwrap();
    let k = b.finish().unwrap();
    assert_eq!(k.semaphore_operands(), vec![OperandId(1), OperandId(3)]);
    let text = k.to_string();
    assert!(
        text.contains("input %before: i32[] dma_semaphore"),
        "{text}"
    );
    assert!(
        text.contains("output %sems: i32[2] dma_semaphore"),
        "{text}"
    );
    assert_eq!(parse_kernel(&text).unwrap().to_string(), text);
}

/// Operands in SMEM (`Space::Smem`): loads and stores reach them, they print as `smem` and
/// parse back; a prefetch operand takes no memory space (it is in SMEM already).
#[test]
fn smem_operands_round_trip() {
    let spec = CallSpec {
        inputs: vec![ArraySpec::new(DType::I32, [4]).smem()],
        outputs: vec![ArraySpec::new(DType::I32, [4]).smem()],
        ..Default::default()
    };
    let mut b = KernelBuilder::new("counts", &spec).unwrap();
    let x = b.declare(Role::Input, "x").unwrap();
    let o = b.declare(Role::Output, "o").unwrap();
    let v = b.load(x, &[Ix::At(2.into())]).unwrap();
    b.store(o, &[Ix::At(0.into())], v).unwrap();
    let k = b.finish().unwrap();
    let text = k.to_string();
    assert!(text.contains("input %x: i32[4] smem"), "{text}");
    assert!(text.contains("output %o: i32[4] smem"), "{text}");
    assert_eq!(parse_kernel(&text).unwrap().to_string(), text);
    let mut bad = spec.clone();
    bad.prefetch = vec![ArraySpec::new(DType::I32, [4]).smem()];
    let e = error(empty(&bad));
    assert!(e.contains("prefetch operands are in SMEM already"), "{e}");
}
