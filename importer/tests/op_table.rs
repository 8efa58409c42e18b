//! Every import name of the op table — each Mosaic `arith`/`math` op, `cmpf`/`cmpi`
//! predicate and `multi_reduction` kind, each StableHLO op and comparison direction — is
//! imported as its op. The modules are generated here, one per name, in the generic form
//! jaxlib prints (`stable_mosaic.*` ops); deleting a name from the table fails its case.

use tpukit_dsl::{BinaryOp, CmpOp, DType, Kernel, OpKind, ReduceOp, Type, UnaryOp};
use tpukit_import::{import_mosaic, import_stablehlo};

/// The element type a Mosaic or StableHLO name operates on: integer spellings (`addi`,
/// `maxsi`, `slt`, `absi`, bitwise ops and shifts) take i32, the rest f32.
fn element(name: &str) -> &'static str {
    let short = name.rsplit('.').next().unwrap_or(name);
    let int = short.ends_with('i')
        || short.starts_with("shift")
        || [
            "eq", "ne", "slt", "sle", "sgt", "sge", "and", "or", "xor", "not",
        ]
        .contains(&short);
    if int && !["oeq", "une"].contains(&short) {
        "i32"
    } else {
        "f32"
    }
}

fn memref(t: &str, shape: &str) -> String {
    format!("memref<{shape}x{t}, #tpu.memory_space<vmem>>")
}

/// A Mosaic kernel of `ins` inputs and one output, all `8x128` (the output `out_shape`),
/// whose body is `body` between the loads (`%x`, `%y`) and the store of `%r`.
fn mosaic(t: &str, ins: usize, body: &str, out_shape: &str, out_t: &str) -> String {
    let arg_types: Vec<String> = (0..ins)
        .map(|_| memref(t, "8x128"))
        .chain([memref(out_t, out_shape)])
        .collect();
    let args: Vec<String> = arg_types
        .iter()
        .enumerate()
        .map(|(i, ty)| format!("%arg{i}: {ty}"))
        .collect();
    let loads: String = ["x", "y"][..ins]
        .iter()
        .enumerate()
        .map(|(i, v)| {
            format!(
                "    %{v} = \"stable_mosaic.vector.load\"(%arg{i}, %c0, %c0) : ({}, index, index) -> vector<8x128x{t}>\n",
                memref(t, "8x128")
            )
        })
        .collect();
    let out = memref(out_t, out_shape);
    format!(
        r#""builtin.module"() ({{
  "stable_mosaic.func.func"() ({{
  ^bb0({args}):
    %c0 = "stable_mosaic.arith.constant"() {{value = 0 : index}} : () -> index
{loads}{body}
    "stable_mosaic.vector.store"(%r, %arg{ins}, %c0, %c0) : (vector<{out_shape}x{out_t}>, {out}, index, index) -> ()
    "stable_mosaic.func.return"() : () -> ()
  }}) {{dimension_semantics = [], function_type = ({types}) -> (), scalar_prefetch = 0 : i64, scratch_operands = 0 : i64, sym_name = "k", tpu.core_type = #tpu.core_type<tc>}} : () -> ()
}}) {{stable_mosaic.version = 11 : i64}} : () -> ()
"#,
        args = args.join(", "),
        types = arg_types.join(", "),
    )
}

fn ty(t: &str, shape: &[usize]) -> Type {
    Type::new(DType::parse(t).expect("dtype"), shape.to_vec())
}

fn import(text: &str, t: &str, ins: usize, out: (&str, &[usize])) -> Kernel {
    let operands = vec![ty(t, &[8, 128]); ins];
    import_mosaic(text, &operands, &[ty(out.0, out.1)], "k")
        .unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// Every op kind of the kernel body.
fn kinds(k: &Kernel) -> Vec<OpKind> {
    k.body.body.ops.iter().map(|o| o.kind.clone()).collect()
}

fn has(k: &Kernel, pred: impl Fn(&OpKind) -> bool) -> bool {
    kinds(k).iter().any(pred)
}

#[test]
fn every_mosaic_elementwise_name_imports_as_its_op() {
    let mut checked = 0;
    for &u in UnaryOp::ALL {
        for name in u.info().mosaic {
            let t = element(name);
            let body = format!(
                "    %r = \"stable_mosaic.{name}\"(%x) : (vector<8x128x{t}>) -> vector<8x128x{t}>"
            );
            let k = import(&mosaic(t, 1, &body, "8x128", t), t, 1, (t, &[8, 128]));
            let found = has(&k, |o| matches!(o, OpKind::Unary { op, .. } if *op == u));
            assert!(found, "{name} did not import as {}", u.name());
            checked += 1;
        }
    }
    for &b in BinaryOp::ALL {
        for name in b.info().mosaic {
            let t = element(name);
            let body = format!(
                "    %r = \"stable_mosaic.{name}\"(%x, %y) : (vector<8x128x{t}>, vector<8x128x{t}>) -> vector<8x128x{t}>"
            );
            let k = import(&mosaic(t, 2, &body, "8x128", t), t, 2, (t, &[8, 128]));
            let found = has(&k, |o| matches!(o, OpKind::Binary { op, .. } if *op == b));
            assert!(found, "{name} did not import as {}", b.name());
            checked += 1;
        }
    }
    assert!(checked > UnaryOp::ALL.len());
}

#[test]
fn every_mosaic_predicate_imports_as_its_comparison() {
    const CMPF: [&str; 16] = [
        "false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq", "ugt", "uge", "ult",
        "ule", "une", "uno", "true",
    ];
    const CMPI: [&str; 10] = [
        "eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge",
    ];
    for &c in CmpOp::ALL {
        for pred in c.info().mosaic {
            let (t, op, code) = match CMPF.iter().position(|p| p == pred) {
                Some(code) => ("f32", "cmpf", code),
                None => (
                    "i32",
                    "cmpi",
                    CMPI.iter().position(|p| p == pred).expect("a predicate"),
                ),
            };
            let body = format!(
                "    %b = \"stable_mosaic.arith.{op}\"(%x, %y) {{predicate = {code} : i64}} : (vector<8x128x{t}>, vector<8x128x{t}>) -> vector<8x128xi1>\n    %r = \"stable_mosaic.arith.select\"(%b, %x, %y) : (vector<8x128xi1>, vector<8x128x{t}>, vector<8x128x{t}>) -> vector<8x128x{t}>"
            );
            let k = import(&mosaic(t, 2, &body, "8x128", t), t, 2, (t, &[8, 128]));
            let found = has(&k, |o| matches!(o, OpKind::Compare { op, .. } if *op == c));
            assert!(found, "predicate {pred} did not import as {}", c.name());
        }
    }
}

#[test]
fn every_mosaic_reduction_kind_imports_as_its_reduction() {
    for &r in ReduceOp::ALL {
        for kind in r.info().mosaic {
            let t = element(kind);
            let zero = if t == "f32" { "0.0" } else { "0" };
            let body = format!(
                "    %acc = \"stable_mosaic.arith.constant\"() {{value = dense<{zero}> : vector<8x{t}>}} : () -> vector<8x{t}>\n    %s = \"stable_mosaic.vector.multi_reduction\"(%x, %acc) {{kind = #vector.kind<{kind}>, reduction_dims = array<i64: 1>}} : (vector<8x128x{t}>, vector<8x{t}>) -> vector<8x{t}>\n    %r = \"stable_mosaic.vector.shape_cast\"(%s) : (vector<8x{t}>) -> vector<8x1x{t}>"
            );
            let k = import(&mosaic(t, 1, &body, "8x1", t), t, 1, (t, &[8, 1]));
            let found = has(&k, |o| matches!(o, OpKind::Reduce { op, .. } if *op == r));
            assert!(found, "kind {kind} did not import as {}", r.name());
        }
    }
}

/// A StableHLO `@main` of `ins` `8x128xT` arguments returning `%r` of `out`.
fn stablehlo(t: &str, ins: usize, body: &str, out: &str) -> String {
    let tensor = format!("tensor<8x128x{t}>");
    let args: Vec<String> = (0..ins).map(|i| format!("%arg{i}: {tensor}")).collect();
    let types = vec![tensor; ins].join(", ");
    format!(
        r#""builtin.module"() ({{
  "func.func"() ({{
  ^bb0({args}):
{body}
    "func.return"(%r) : ({out}) -> ()
  }}) {{function_type = ({types}) -> {out}, sym_name = "main"}} : () -> ()
}}) : () -> ()
"#,
        args = args.join(", ")
    )
}

#[test]
fn every_stablehlo_name_imports_as_its_op() {
    for &u in UnaryOp::ALL {
        for name in u.info().stablehlo {
            let t = element(name);
            let body =
                format!("    %r = \"{name}\"(%arg0) : (tensor<8x128x{t}>) -> tensor<8x128x{t}>");
            let text = stablehlo(t, 1, &body, &format!("tensor<8x128x{t}>"));
            let k = import_stablehlo(&text, "k").unwrap_or_else(|e| panic!("{name}: {e}"));
            let found = has(&k, |o| matches!(o, OpKind::Unary { op, .. } if *op == u));
            assert!(found, "{name} did not import as {}", u.name());
        }
    }
    for &b in BinaryOp::ALL {
        for name in b.info().stablehlo {
            let t = element(name);
            let body = format!(
                "    %r = \"{name}\"(%arg0, %arg1) : (tensor<8x128x{t}>, tensor<8x128x{t}>) -> tensor<8x128x{t}>"
            );
            let text = stablehlo(t, 2, &body, &format!("tensor<8x128x{t}>"));
            let k = import_stablehlo(&text, "k").unwrap_or_else(|e| panic!("{name}: {e}"));
            let found = has(&k, |o| matches!(o, OpKind::Binary { op, .. } if *op == b));
            assert!(found, "{name} did not import as {}", b.name());
        }
    }
    for &c in CmpOp::ALL {
        for dir in c.info().stablehlo {
            let body = format!(
                "    %r = \"stablehlo.compare\"(%arg0, %arg1) {{comparison_direction = #stablehlo<comparison_direction {dir}>}} : (tensor<8x128xf32>, tensor<8x128xf32>) -> tensor<8x128xi1>"
            );
            let text = stablehlo("f32", 2, &body, "tensor<8x128xi1>");
            let k = import_stablehlo(&text, "k").unwrap_or_else(|e| panic!("{dir}: {e}"));
            let found = has(&k, |o| matches!(o, OpKind::Compare { op, .. } if *op == c));
            assert!(found, "direction {dir} did not import as {}", c.name());
        }
    }
}
