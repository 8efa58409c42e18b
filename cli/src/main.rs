//! `tpukit`: lists the kernels tpukit ships and lowers them for a TPU.
//!
//! ```text
//! tpukit list
//! tpukit kernels [--dtype bf16]
//! tpukit lower NAME --shape 1024x256 [--dtype bf16] [--text] [--mosaic] [-o FILE]
//! tpukit lower ID [--fit divisible|edge] [--dtype bf16] [...]
//! tpukit lower --ir FILE [--shape AxB… | --fit divisible|edge] [...]
//! tpukit bundle build [-o FILE] [--no-tpu]
//! tpukit bundle inspect FILE
//! tpukit random-kernels --seed S --count N -o DIR
//! ```
//!
//! Every command and subcommand answers `--help` (its usage) and `--version` (see [`usage`]).
//!
//! Every command works from the same sources of kernels ([`SOURCES`]: the catalog and
//! tpuBLAS, each a `KernelSource`; `kernels` and `lower` also know the op-table kernels,
//! [`LOWERABLE`]). `list` prints each source's entries under its name
//! (`catalog:`, then `tpublas:` with every operator by ATen name); `lower NAME --shape`
//! instantiates an entry of either (`tpukit lower aten.add.Tensor --shape 4096`). `kernels`
//! lists every distinct kernel the sources ship for a dtype, as `ID NAME` (a catalog entry's
//! name; `OP#I`, kernel `I` of a tpuBLAS operator's declared kernels); `lower ID` lowers one
//! at sample extents (see `Kernel::sample_bindings`) — what the conformance suite compiles
//! and bundles precompile. `lower --ir FILE` lowers a kernel written as IR text (what
//! `println!("{kernel}")` prints; see `tpukit_dsl::KernelFile`): its dtypes are in the text,
//! its symbols are bound by `--shape` (one extent per symbol, in sorted order), by `--fit`,
//! or by the file's `// RUN: extents SYM=N …` line.
//!
//! `lower` writes the StableHLO module holding the kernel's `tpu_custom_call` (what libtpu
//! compiles); `--mosaic` writes the readable Mosaic module instead, `--text` adds the Mosaic
//! text as a comment above the StableHLO for reading.

mod bundle;
mod ir;
mod random;
mod tpu;
mod usage;

use std::{fmt::Write as _, process::ExitCode};
use tpukit::catalog::{Catalog, Instance, KernelSource, op_kernels::OpKernels};
use tpukit::dsl::{DType, Fit};
use tpukit_blas::TpuBlas;
use tpukit_mosaic::{Options, lower};

/// The libraries of kernels tpukit ships, in listing order: what `list` lists and bundles
/// precompile.
const SOURCES: [&dyn KernelSource; 2] = [&Catalog, &TpuBlas];

/// Every source `kernels` lists and `lower` finds kernels in: the shipped ones, and the
/// op-table kernels the rule-coverage tests compile (`op.exp`, …; not shipped).
const LOWERABLE: [&dyn KernelSource; 3] = [&Catalog, &TpuBlas, &OpKernels];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match (usage::meta(&args), args.first().map(String::as_str)) {
        (Some(answer), _) => Ok(answer),
        (None, Some("list")) if args.len() == 1 => Ok(list()),
        (None, Some("list")) => Err(format!("list takes no arguments\n{}", usage::LIST)),
        (None, Some("kernels")) => kernels_command(&args[1..]),
        (None, Some("lower")) => lower_command(&args[1..]),
        (None, Some("bundle")) => bundle::command(&args[1..]),
        (None, Some("random-kernels")) => random::command(&args[1..]),
        _ => Err(usage::all()),
    };
    match result {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("tpukit: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `tpukit list`: every source's entries under its name, in aligned columns.
fn list() -> String {
    let mut out = String::new();
    for source in SOURCES {
        let entries = source.entries();
        let rows: Vec<[String; 3]> = entries
            .iter()
            .map(|e| {
                let dtypes: Vec<&str> = e.dtypes.iter().map(|d| d.name()).collect();
                [e.name.clone(), e.shape.join("x"), dtypes.join(",")]
            })
            .collect();
        let width = |c: usize| rows.iter().map(|r| r[c].len()).max().unwrap_or(0);
        let (name, shape, dtypes) = (width(0), width(1), width(2));
        if !out.is_empty() {
            out.push('\n');
        }
        let _ = writeln!(out, "{}:", source.name());
        for ([n, s, d], e) in rows.iter().zip(&entries) {
            let _ = writeln!(
                out,
                "{n:<name$}  shape {s:<shape$}  dtypes {d:<dtypes$}  {}",
                e.about
            );
        }
    }
    out
}

/// `tpukit kernels [--dtype D]`: every distinct kernel the sources ship for `D`, as
/// `ID NAME`.
fn kernels_command(args: &[String]) -> Result<String, String> {
    let dtype = match args {
        [] => DType::F32,
        [flag, d] if flag == "--dtype" => DType::parse(d).ok_or(format!("unknown dtype `{d}`"))?,
        _ => return Err(usage::KERNELS.to_string()),
    };
    let mut out = String::new();
    for source in LOWERABLE {
        for k in source.kernels(dtype).map_err(|e| e.to_string())? {
            let _ = writeln!(out, "{} {}", k.id, k.instance.kernel.name);
        }
    }
    Ok(out)
}

/// The parsed arguments of `tpukit lower`.
pub(crate) struct LowerArgs {
    /// A kernel's name or id, or with `ir` the path of an IR file.
    name: String,
    ir: bool,
    shape: Vec<usize>,
    fit: Option<Fit>,
    dtype: Option<DType>,
    text: bool,
    mosaic: bool,
    output: Option<String>,
}

fn parse_lower(args: &[String]) -> Result<LowerArgs, String> {
    let mut it = args.iter().peekable();
    let ir = it.next_if(|a| *a == "--ir").is_some();
    let name = it
        .next()
        .ok_or(if ir {
            format!("lower --ir: which file?\n{}", usage::LOWER)
        } else {
            format!("lower: which kernel? (see `tpukit list`)\n{}", usage::LOWER)
        })?
        .clone();
    let mut parsed = LowerArgs {
        name,
        ir,
        shape: Vec::new(),
        fit: None,
        dtype: None,
        text: false,
        mosaic: false,
        output: None,
    };
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--shape" => {
                parsed.shape = value()?
                    .split('x')
                    .map(|d| {
                        d.parse()
                            .map_err(|_| format!("bad extent `{d}` in --shape"))
                    })
                    .collect::<Result<_, _>>()?
            }
            "--dtype" => {
                let d = value()?;
                parsed.dtype = Some(DType::parse(d).ok_or(format!("unknown dtype `{d}`"))?)
            }
            "--fit" => {
                parsed.fit = Some(match value()?.as_str() {
                    "divisible" => Fit::Divisible,
                    "edge" => Fit::Edge,
                    other => return Err(format!("--fit is divisible or edge, not `{other}`")),
                })
            }
            "--text" => parsed.text = true,
            "--mosaic" => parsed.mosaic = true,
            "-o" | "--output" => parsed.output = Some(value()?.clone()),
            other => return Err(format!("unknown option `{other}`\n{}", usage::LOWER)),
        }
    }
    Ok(parsed)
}

/// The kernel `lower` lowers, with the bindings of its symbols: with `--shape`, an entry of
/// a source at that problem shape; without, a shipped kernel by id at sample extents.
fn resolve(a: &LowerArgs) -> Result<Instance, String> {
    if a.ir {
        return ir::resolve(a);
    }
    let dtype = a.dtype.unwrap_or(DType::F32);
    let found = LOWERABLE.iter().find_map(|source| {
        if a.shape.is_empty() {
            source.kernel(&a.name, dtype).map(|k| {
                k.map(|k| Instance {
                    bindings: k
                        .instance
                        .kernel
                        .sample_bindings(a.fit.unwrap_or(Fit::Edge)),
                    kernel: k.instance.kernel,
                })
            })
        } else {
            source.instantiate(&a.name, &a.shape, dtype)
        }
    });
    match found {
        Some(instance) => instance.map_err(|e| e.to_string()),
        None if a.shape.is_empty() => Err(format!(
            "no kernel `{}` (see `tpukit kernels`; an entry of `tpukit list` needs --shape)",
            a.name
        )),
        None => Err(format!("no kernel `{}` (see `tpukit list`)", a.name)),
    }
}

fn lower_command(args: &[String]) -> Result<String, String> {
    let a = parse_lower(args)?;
    let instance = resolve(&a)?;
    let options = Options {
        bindings: instance.bindings,
        ..Options::default()
    };
    let lowered = lower(&instance.kernel, &options).map_err(|e| e.to_string())?;
    let text = if a.mosaic {
        lowered.mosaic
    } else if a.text {
        let mosaic: String = lowered
            .mosaic
            .lines()
            .map(|l| format!("// {l}\n"))
            .collect();
        format!("{mosaic}{}", lowered.stablehlo)
    } else {
        lowered.stablehlo
    };
    match a.output {
        Some(path) => {
            std::fs::write(&path, text).map_err(|e| format!("{path}: {e}"))?;
            Ok(String::new())
        }
        None => Ok(text),
    }
}
