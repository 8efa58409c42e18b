//! `tpukit lower --ir FILE` lowers a kernel written as text to what `tpukit lower NAME` gives
//! for the same kernel, with its symbols bound by the file's `// RUN:` line, `--shape` or
//! `--fit`; bad files and arguments are clear errors.

use std::path::PathBuf;
use std::process::Command;
use tpukit::catalog::{Catalog, KernelSource};
use tpukit::dsl::{DType, Fit, PrintOptions, print_kernel};

/// Runs the CLI: `Ok(stdout)` on success, `Err(stderr)` otherwise.
fn tpukit(args: &[&str]) -> Result<String, String> {
    let out = Command::new(env!("CARGO_BIN_EXE_tpukit"))
        .args(args)
        .output()
        .unwrap();
    let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
    if out.status.success() {
        Ok(text(out.stdout))
    } else {
        Err(text(out.stderr))
    }
}

fn write(name: &str, text: &str) -> String {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn a_printed_catalog_kernel_lowers_as_the_named_one() {
    for (name, shape, dtype) in [
        ("softmax", "1003x256", DType::BF16),
        ("matmul", "300x200x260", DType::F32),
        ("row_gather", "1000x300x77", DType::F32),
    ] {
        let extents: Vec<usize> = shape.split('x').map(|d| d.parse().unwrap()).collect();
        let instance = Catalog.instantiate(name, &extents, dtype).unwrap().unwrap();
        let run: Vec<String> = instance
            .bindings
            .iter()
            .map(|(s, n)| format!("{s}={n}"))
            .collect();
        // With source locations: they are comments to the lowering.
        let text = format!(
            "// RUN: extents {}\n{}",
            run.join(" "),
            print_kernel(&instance.kernel, PrintOptions { locations: true })
        );
        let path = write(&format!("{name}.ir"), &text);
        for output in [&["--text"][..], &["--mosaic"][..]] {
            let named = tpukit(
                &[
                    &["lower", name, "--shape", shape, "--dtype", dtype.name()],
                    output,
                ]
                .concat(),
            )
            .unwrap();
            let from_text = tpukit(&[&["lower", "--ir", &path], output].concat()).unwrap();
            assert_eq!(from_text, named, "{name} {output:?}");
        }
    }
}

#[test]
fn symbols_are_bound_by_shape_fit_or_the_run_line() {
    let add = Catalog.kernels(DType::F32).unwrap();
    let add = &add
        .iter()
        .find(|k| k.id == "add_vectors")
        .unwrap()
        .instance
        .kernel;
    let symbols = add.symbols();
    assert_eq!(symbols, vec!["n".to_string()]);
    let path = write("add_vectors.ir", &add.to_string());
    let err = tpukit(&["lower", "--ir", &path]).unwrap_err();
    assert!(
        err.contains("no extents for the symbols (n)") && err.contains("--shape"),
        "{err}"
    );
    let by_shape = tpukit(&["lower", "--ir", &path, "--shape", "1000"]).unwrap();
    assert!(by_shape.contains("tensor<1000xf32>"), "{by_shape}");
    let edge = add.sample_bindings(Fit::Edge)["n"];
    let by_fit = tpukit(&["lower", "--ir", &path, "--fit", "edge"]).unwrap();
    assert!(by_fit.contains(&format!("tensor<{edge}xf32>")), "{by_fit}");
    let err = tpukit(&["lower", "--ir", &path, "--shape", "10x10"]).unwrap_err();
    assert!(
        err.contains("--shape gives 2 extent(s), the kernel has 1 symbol(s): (n)"),
        "{err}"
    );
    let err = tpukit(&["lower", "--ir", &path, "--dtype", "bf16"]).unwrap_err();
    assert!(err.contains("states its dtypes"), "{err}");
}

#[test]
fn bad_text_is_an_error_with_its_line() {
    let path = write("bad.ir", "kernel @k grid() {\nbody {\n  yeld\n}\n");
    let err = tpukit(&["lower", "--ir", &path]).unwrap_err();
    assert!(
        err.contains("unknown op `yeld`") && err.contains("bad.ir:3:3"),
        "{err}"
    );
    let split = write("split.ir", "// -----\n");
    let err = tpukit(&["lower", "--ir", &split]).unwrap_err();
    assert!(err.contains("separated by `// -----`"), "{err}");
}
