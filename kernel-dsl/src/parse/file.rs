//! A kernel file: kernel IR text whose `// RUN:` comment lines say at which extents to lower
//! or run it (what `tpukit lower --ir FILE` and the lowering's FileCheck tests read).
//!
//! ```text
//! // RUN: extents m=200 n=384     every symbol of the kernel, bound to an extent
//! // RUN: fit edge               or: sample extents (`Kernel::sample_bindings`), edge|divisible
//! ```

use super::parse_kernel_in;
use crate::{Bindings, Error, Fit, Kernel, Loc, Result};

/// A parsed kernel file.
#[derive(Clone, Debug)]
pub struct KernelFile {
    /// The kernel the file defines.
    pub kernel: Kernel,
    /// The extents its `// RUN:` lines bind every symbol to; `None` without such a line.
    pub bindings: Option<Bindings>,
}

impl KernelFile {
    /// Parses `text` (naming `file` in errors): the kernel, then its `// RUN:` lines.
    pub fn parse(text: &str, file: &str) -> Result<KernelFile> {
        let kernel = parse_kernel_in(text, file)?;
        let mut bindings: Option<Bindings> = None;
        for (i, line) in text.lines().enumerate() {
            let Some(run) = line
                .trim_start()
                .strip_prefix("//")
                .and_then(|c| c.trim_start().strip_prefix("RUN:"))
            else {
                continue;
            };
            let at = |m: String| Error::new(m).at(Some(&Loc::new(file, i as u32 + 1, 1)));
            let mut words = run.split_whitespace();
            let found = match words.next() {
                Some("extents") => words
                    .map(|w| {
                        let (sym, n) = w.split_once('=').ok_or_else(|| {
                            at(format!("RUN: expected `symbol=extent`, found `{w}`"))
                        })?;
                        let n = n
                            .parse()
                            .map_err(|_| at(format!("RUN: `{n}` is not an extent")))?;
                        Ok((sym.to_string(), n))
                    })
                    .collect::<Result<Bindings>>()?,
                Some("fit") => {
                    let fit = match (words.next(), words.next()) {
                        (Some("edge"), None) => Fit::Edge,
                        (Some("divisible"), None) => Fit::Divisible,
                        _ => return Err(at("RUN: expected `fit edge` or `fit divisible`".into())),
                    };
                    kernel.sample_bindings(fit)
                }
                other => {
                    return Err(at(format!(
                        "RUN: expected `extents SYM=N …` or `fit edge|divisible`, found `{}`",
                        other.unwrap_or("nothing")
                    )));
                }
            };
            if bindings.is_some() {
                return Err(at("RUN: the extents are already given above".into()));
            }
            let symbols = kernel.symbols();
            if let Some(s) = found.keys().find(|s| !symbols.contains(s)) {
                return Err(at(format!(
                    "RUN: `{s}` is not a symbol of the kernel (its symbols: {})",
                    symbols.join(", ")
                )));
            }
            if let Some(s) = symbols.iter().find(|s| !found.contains_key(*s)) {
                return Err(at(format!("RUN: no extent for the symbol `{s}`")));
            }
            bindings = Some(found);
        }
        Ok(KernelFile { kernel, bindings })
    }
}
