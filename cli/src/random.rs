//! `tpukit random-kernels --seed S --count N -o DIR`: the StableHLO of `N` random valid kernels
//! (`tpukit::random_kernel`, seeds `S`, `S+1`, …), each at extents drawn from its seed (edge
//! blocks included), written as `DIR/random-SEED.mlir`, for libtpu to compile
//! (`tests/conformance/test_random_kernels.py`). Prints one line per kernel: seed, dtype,
//! block, op count, extents and file.

use std::fmt::Write as _;
use std::path::PathBuf;
use tpukit::random_kernel::RandomKernel;
use tpukit_mosaic::{Options, lower};

/// Extents `m × n` for `seed` (1..40 × 1..300, the ranges `tests/fuzz_kernels.rs` draws).
fn extents(seed: u64) -> (usize, usize) {
    let h = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17);
    (1 + (h % 39) as usize, 1 + ((h >> 20) % 299) as usize)
}

pub fn command(args: &[String]) -> Result<String, String> {
    let (mut seed, mut count, mut dir) = (0u64, 1u64, None);
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .ok_or(format!("{flag} needs a value\n{}", super::usage::RANDOM))
        };
        match flag.as_str() {
            "--seed" => seed = value()?.parse().map_err(|_| "--seed: not a number")?,
            "--count" => count = value()?.parse().map_err(|_| "--count: not a number")?,
            "-o" | "--output" => dir = Some(PathBuf::from(value()?)),
            other => {
                return Err(format!(
                    "unknown option `{other}`\n{}",
                    super::usage::RANDOM
                ));
            }
        }
    }
    let dir = dir.ok_or(format!(
        "random-kernels: -o DIR is required\n{}",
        super::usage::RANDOM
    ))?;
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut out = String::new();
    for s in seed..seed.saturating_add(count) {
        let rk = RandomKernel::new(s);
        let (m, n) = extents(s);
        let options = Options {
            bindings: rk.bindings(m, n).into_iter().collect(),
            ..Default::default()
        };
        let lowered = lower(&rk.kernel, &options)
            .map_err(|e| format!("random kernel {s} does not lower: {e}\n{}", rk.kernel))?;
        let file = dir.join(format!("random-{s}.mlir"));
        std::fs::write(&file, lowered.stablehlo).map_err(|e| format!("{}: {e}", file.display()))?;
        let _ = writeln!(
            out,
            "{s} {} {}x{} ops {} extents {m}x{n} {}",
            rk.dtype,
            rk.block.0,
            rk.block.1,
            rk.ops,
            file.display()
        );
    }
    Ok(out)
}
