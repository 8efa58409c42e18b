//! `tpukit lower --ir FILE`: a kernel written as IR text (`tpukit::dsl::KernelFile`), with its
//! symbols bound from the command line or the file.

use crate::LowerArgs;
use tpukit::catalog::Instance;
use tpukit::dsl::{Bindings, KernelFile};

/// The kernel of the IR file `a.name`, its symbols bound by `--shape` (in sorted order),
/// `--fit`, or the file's `// RUN:` line, in that order of precedence.
pub(crate) fn resolve(a: &LowerArgs) -> Result<Instance, String> {
    let path = &a.name;
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    if text.lines().any(|l| l.trim() == "// -----") {
        return Err(format!(
            "{path} holds several kernels separated by `// -----` (a FileCheck file): \
             copy the one to lower into a file of its own"
        ));
    }
    let file = KernelFile::parse(&text, path).map_err(|e| e.to_string())?;
    if a.dtype.is_some() {
        return Err(format!(
            "--dtype: the IR in {path} states its dtypes (edit the text to change them)"
        ));
    }
    let symbols = file.kernel.symbols();
    let bindings: Bindings = if !a.shape.is_empty() {
        if a.shape.len() != symbols.len() {
            return Err(format!(
                "--shape gives {} extent(s), the kernel has {} symbol(s): ({})",
                a.shape.len(),
                symbols.len(),
                symbols.join(", ")
            ));
        }
        symbols.into_iter().zip(a.shape.iter().copied()).collect()
    } else if let Some(fit) = a.fit {
        file.kernel.sample_bindings(fit)
    } else if let Some(bindings) = file.bindings {
        bindings
    } else if symbols.is_empty() {
        Bindings::new()
    } else {
        let run: Vec<String> = symbols.iter().map(|s| format!("{s}=N")).collect();
        return Err(format!(
            "{path}: no extents for the symbols ({}): give --shape (one extent per symbol, in \
             that order), --fit edge|divisible, or a `// RUN: extents {}` line",
            symbols.join(", "),
            run.join(" ")
        ));
    };
    Ok(Instance {
        kernel: file.kernel,
        bindings,
    })
}
