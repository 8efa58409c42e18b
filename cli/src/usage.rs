//! What `tpukit` says about itself: the usage of every command, and the answers to `--help`
//! and `--version`, which every command and subcommand takes (anywhere among its arguments,
//! before anything else is parsed).

/// The program's version: the crates' version, also the Python package's.
pub const VERSION: &str = concat!("tpukit ", env!("CARGO_PKG_VERSION"), "\n");

pub const LIST: &str = "usage: tpukit list
  every kernel the sources ship, by source (`catalog:`, `tpublas:`): name, the meaning of its
  problem shape, its dtypes and what it computes";

pub const KERNELS: &str = "usage: tpukit kernels [--dtype f32|bf16]
  every distinct kernel the sources ship for a dtype (default f32), as `ID NAME`; `tpukit lower
  ID` lowers one";

pub const LOWER: &str =
    "usage: tpukit lower NAME --shape AxB… [--dtype f32|bf16] [--text] [--mosaic] [-o FILE]
       tpukit lower ID [--fit divisible|edge] [--dtype f32|bf16] [--text] [--mosaic] [-o FILE]
       tpukit lower --ir FILE [--shape AxB… | --fit divisible|edge] [--text] [--mosaic] [-o FILE]
  the StableHLO module (a Mosaic tpu_custom_call) a TPU runs: of the entry NAME of `tpukit
  list` at a problem shape, of the kernel ID of `tpukit kernels` at sample extents (edge
  blocks with --fit edge, the default), or of a kernel written as IR text (--ir: symbols
  bound by --shape, one extent per symbol in sorted order, --fit or the file's `// RUN:
  extents` line)
  --text    the Mosaic text as a comment above the StableHLO
  --mosaic  the readable Mosaic module instead
  -o FILE   write to FILE instead of stdout";

pub const BUNDLE: &str = "usage: tpukit bundle build [-o FILE] [--portable] [--no-tpu]
       tpukit bundle inspect FILE
  build: compile every shipped kernel for this host's CPU or the x86-64-v3 baseline (and, where
         libtpu is installed, for v5e and v6e unless --no-tpu) into one bundle (default
         tpukit-host.tpkb)
  inspect: list a bundle's entries and check every checksum";

pub const BUNDLE_BUILD: &str = "usage: tpukit bundle build [-o FILE] [--portable] [--no-tpu]
  compile every shipped kernel for this host's CPU, lower each to its StableHLO/Mosaic module
  and, where libtpu is installed, compile that for v5e and v6e, into one bundle
  -o FILE     the bundle to write (default tpukit-host.tpkb)
  --portable  compile for the x86-64-v3 baseline (any AVX2 machine runs it), not this CPU
  --no-tpu    no TPU executables (no libtpu needed)";

pub const BUNDLE_INSPECT: &str = "usage: tpukit bundle inspect FILE
  the bundle's header (whether this host can use it) and its entries, every checksum checked";

pub const RANDOM: &str = "usage: tpukit random-kernels [--seed S] [--count N] -o DIR
  the StableHLO of N (default 1) random valid kernels (seeds S, S+1, …; default 0), each at
  extents drawn from its seed, as DIR/random-SEED.mlir: for libtpu to compile (conformance)";

/// Every command, for `tpukit --help` and a call that names none.
pub fn all() -> String {
    let commands: Vec<&str> = [LIST, KERNELS, LOWER, BUNDLE, RANDOM]
        .iter()
        .map(|u| u.strip_prefix("usage: ").unwrap_or(u))
        .collect();
    format!(
        "usage: tpukit COMMAND [--help] [--version]\n\n{}",
        commands.join("\n\n")
    )
}

/// The usage of the (sub)command `args` name (the arguments before the first option or
/// operand that is not a command name).
fn of(args: &[String]) -> String {
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    match words.as_slice() {
        ["list", ..] => LIST.into(),
        ["kernels", ..] => KERNELS.into(),
        ["lower", ..] => LOWER.into(),
        ["bundle", "build", ..] => BUNDLE_BUILD.into(),
        ["bundle", "inspect", ..] => BUNDLE_INSPECT.into(),
        ["bundle", ..] => BUNDLE.into(),
        ["random-kernels", ..] => RANDOM.into(),
        _ => all(),
    }
}

/// The answer to `--help`/`-h` or `--version`/`-V` among `args`, if one is asked for.
pub fn meta(args: &[String]) -> Option<String> {
    let asks = |flags: [&str; 2]| args.iter().any(|a| flags.contains(&a.as_str()));
    if asks(["--help", "-h"]) {
        Some(format!("{}\n", of(args)))
    } else if asks(["--version", "-V"]) {
        Some(VERSION.into())
    } else {
        None
    }
}
