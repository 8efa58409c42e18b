//! Bad arguments give errors that name the operator and the problem.

use tpukit::HostArray;
use tpukit::dsl::DType;
use tpukit_blas::{Value, find, run};

#[track_caller]
fn fails(name: &str, args: &[Value], needle: &str) {
    let e = run(name, args).unwrap_err().to_string();
    assert!(e.contains(name) && e.contains(needle), "{name}: {e}");
}

#[test]
fn errors_name_the_operator() {
    let f = |s: &[usize]| Value::Tensor(HostArray::zeros(DType::F32, s));
    let b = |s: &[usize]| Value::Tensor(HostArray::zeros(DType::BF16, s));
    let i = |s: &[usize]| Value::Tensor(HostArray::zeros(DType::I32, s));
    fails(
        "aten.add.Tensor",
        &[f(&[3, 4]), f(&[5])],
        "do not broadcast",
    );
    fails("aten.mm.default", &[f(&[3, 4]), b(&[4, 5])], "same dtype");
    fails(
        "aten.mm.default",
        &[f(&[3, 4]), f(&[5, 4])],
        "cannot be multiplied",
    );
    fails(
        "aten.bmm.default",
        &[f(&[2, 3, 4]), f(&[3, 4, 5])],
        "cannot be multiplied",
    );
    fails(
        "aten.addmm.default",
        &[f(&[7]), f(&[3, 4]), f(&[4, 5])],
        "does not broadcast",
    );
    fails("aten.sum.dim_IntList", &[i(&[4])], "i32");
    fails(
        "aten.sum.dim_IntList",
        &[f(&[4, 5]), Value::IntList(vec![2])],
        "out of range",
    );
    fails("aten._softmax.default", &[f(&[4, 5])], "must be an int");
    fails(
        "aten.native_layer_norm.default",
        &[f(&[4, 5]), Value::IntList(vec![4])],
        "trailing shape",
    );
    fails(
        "aten.index_select.default",
        &[f(&[4, 5]), Value::Int(0), f(&[1])],
        "must be i32",
    );
    let idx = Value::Tensor(HostArray::from_f64(DType::I32, &[2], &[1.0, 9.0]));
    fails(
        "aten.index_select.default",
        &[f(&[4, 5]), Value::Int(0), idx],
        "index 9 is out of range",
    );
    fails(
        "aten.permute.default",
        &[f(&[4, 5]), Value::IntList(vec![0, 0])],
        "not a permutation",
    );
    fails(
        "aten.gelu.default",
        &[f(&[4]), "fast".into()],
        "approximate",
    );
    assert!(find("add.Tensor").is_some() && find("aten.mm").is_some() && find("nope").is_none());
    let e = run("aten.nope", &[]).unwrap_err().to_string();
    assert!(e.contains("no such tpuBLAS operator"), "{e}");
}
