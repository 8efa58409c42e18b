//! `tpukit`: lists the kernels tpukit ships and lowers them for a TPU.
//!
//! ```text
//! tpukit list
//! tpukit kernels [--dtype bf16]
//! tpukit lower NAME --shape 1024x256 [--dtype bf16] [--text] [--mosaic] [-o FILE]
//! tpukit lower OP#I [--fit divisible|edge] [--dtype bf16] [...]
//! tpukit bundle build [-o FILE] [--no-tpu]
//! tpukit bundle inspect FILE
//! ```
//!
//! `list` prints the catalog, then a `tpublas:` section with every tpuBLAS operator by ATen
//! name; `lower` takes either (`tpukit lower aten.add.Tensor --shape 4096`). `kernels` lists
//! every distinct kernel the tpuBLAS operators launch for a dtype, as `OP#I` (kernel `I` of
//! the operator's declared kernels); `lower OP#I` lowers one at sample extents (see
//! `Kernel::sample_bindings`) — what the conformance suite compiles.
//!
//! `lower` writes the StableHLO module holding the kernel's `tpu_custom_call` (what libtpu
//! compiles); `--mosaic` writes the readable Mosaic module instead, `--text` adds the Mosaic
//! text as a comment above the StableHLO for reading.

mod bundle;
mod tpu;

use std::{fmt::Write as _, process::ExitCode};
use tpukit::Launchable as _;
use tpukit::catalog::{CATALOG, Instance, find};
use tpukit::dsl::{DType, Fit};
use tpukit_mosaic::{Options, lower};

const USAGE: &str = "usage:
  tpukit list
  tpukit kernels [--dtype f32|bf16]
  tpukit lower NAME --shape AxB… [--dtype f32|bf16] [--text] [--mosaic] [-o FILE]
  tpukit lower OP#I [--fit divisible|edge] [--dtype f32|bf16] [--text] [--mosaic] [-o FILE]
  tpukit bundle build [-o FILE] [--no-tpu]
  tpukit bundle inspect FILE";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("list") => Ok(list()),
        Some("kernels") => kernels_command(&args[1..]),
        Some("lower") => lower_command(&args[1..]),
        Some("bundle") => bundle::command(&args[1..]),
        Some("-h" | "--help") => Ok(format!("{USAGE}\n")),
        _ => Err(USAGE.to_string()),
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

fn list() -> String {
    let mut out = String::new();
    for e in CATALOG {
        let dtypes: Vec<&str> = e.dtypes.iter().map(|d| d.name()).collect();
        let _ = writeln!(
            out,
            "{:<12} shape {:<8} dtypes {:<9} {}",
            e.name,
            e.shape.join("x"),
            dtypes.join(","),
            e.about
        );
    }
    let _ = writeln!(out, "\ntpublas:");
    for op in tpukit_blas::ops() {
        let _ = writeln!(
            out,
            "{:<36} shape {:<18} dtypes f32,bf16  {}",
            op.name(),
            op.shape().join("x"),
            op.about
        );
    }
    out
}

/// `tpukit kernels [--dtype D]`: every distinct tpuBLAS kernel for `D`, as `OP#I NAME`.
fn kernels_command(args: &[String]) -> Result<String, String> {
    let dtype = match args {
        [] => DType::F32,
        [flag, d] if flag == "--dtype" => DType::parse(d).ok_or(format!("unknown dtype `{d}`"))?,
        _ => return Err(USAGE.to_string()),
    };
    let mut out = String::new();
    for (id, kernel) in tpukit_blas::kernel_ids(dtype).map_err(|e| e.to_string())? {
        let _ = writeln!(out, "{id} {}", kernel.kernel().name);
    }
    Ok(out)
}

/// The parsed arguments of `tpukit lower`.
struct LowerArgs {
    name: String,
    shape: Vec<usize>,
    fit: Fit,
    dtype: DType,
    text: bool,
    mosaic: bool,
    output: Option<String>,
}

fn parse_lower(args: &[String]) -> Result<LowerArgs, String> {
    let mut it = args.iter();
    let name = it
        .next()
        .ok_or("lower: which kernel? (see `tpukit list`)")?
        .clone();
    let mut parsed = LowerArgs {
        name,
        shape: Vec::new(),
        fit: Fit::Edge,
        dtype: DType::F32,
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
                parsed.dtype = DType::parse(d).ok_or(format!("unknown dtype `{d}`"))?
            }
            "--fit" => {
                parsed.fit = match value()?.as_str() {
                    "divisible" => Fit::Divisible,
                    "edge" => Fit::Edge,
                    other => return Err(format!("--fit is divisible or edge, not `{other}`")),
                }
            }
            "--text" => parsed.text = true,
            "--mosaic" => parsed.mosaic = true,
            "-o" | "--output" => parsed.output = Some(value()?.clone()),
            other => return Err(format!("unknown option `{other}`\n{USAGE}")),
        }
    }
    if parsed.shape.is_empty() && !parsed.name.contains('#') {
        return Err("lower: --shape is required".into());
    }
    Ok(parsed)
}

/// The kernel `lower` lowers, with the bindings of its symbols: a catalog kernel or an
/// operator's main kernel at a problem shape, or kernel `OP#I` at sample extents.
fn resolve(a: &LowerArgs) -> Result<Instance, String> {
    if let Some((op, i)) = a.name.split_once('#') {
        let op = tpukit_blas::find(op).ok_or(format!("no tpuBLAS operator `{op}`"))?;
        let i: usize = i
            .parse()
            .map_err(|_| format!("bad kernel number in `{}`", a.name))?;
        let kernels = op.kernels(a.dtype).map_err(|e| e.to_string())?;
        if i >= kernels.len() {
            return Err(format!(
                "{} has {} kernels for {}, not {}",
                op.name(),
                kernels.len(),
                a.dtype,
                i + 1
            ));
        }
        let kernel = kernels[i].kernel().clone();
        let bindings = kernel.sample_bindings(a.fit);
        return Ok(Instance { kernel, bindings });
    }
    match (find(&a.name), tpukit_blas::find(&a.name)) {
        (Some(entry), _) => entry.instantiate(&a.shape, a.dtype),
        (None, Some(op)) => op.instantiate(&a.shape, a.dtype),
        (None, None) => return Err(format!("no kernel `{}` (see `tpukit list`)", a.name)),
    }
    .map_err(|e| e.to_string())
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
