//! The machine code is generated for: the host CPU, read at run time, or (for a bundle that
//! ships to other machines) the portable x86-64-v3 baseline.
//!
//! Code is tuned for the exact CPU the process runs on (its name and feature string are part
//! of every compiled kernel's identity), so a kernel compiled on an AVX-512 machine uses
//! 512-bit vectors and one compiled on an AVX2 machine does not. Code compiled for another
//! target runs here when this CPU has every feature that target's code may use
//! ([`HostTarget::runs_code_for`]): what lets a wheel's portable bundle serve any AVX2 machine.

use inkwell::OptimizationLevel;
use inkwell::targets::{
    CodeModel, InitializationConfig, RelocMode, Target, TargetMachine, TargetTriple,
};
use std::sync::{Once, OnceLock};

pub(crate) fn initialize() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        Target::initialize_x86(&InitializationConfig::default());
    });
}

/// A target as LLVM names it: triple, CPU and features (`+name` for each feature code may
/// use; the host's string also lists what it lacks, as `-name`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HostTarget {
    pub triple: String,
    pub cpu: String,
    pub features: String,
}

/// The name [`HostTarget::portable`] gives its CPU (LLVM's name of the baseline).
pub const PORTABLE_CPU: &str = "x86-64-v3";

/// The features of x86-64-v3 (Haswell and Zen 1 onwards: AVX2, FMA, BMI1/2, F16C, ...) as
/// LLVM's host feature strings name them, so [`HostTarget::runs_code_for`] can compare them
/// with the host's. The CPU name implies the rest (x87, NOPL), which every x86-64 CPU has.
const PORTABLE_FEATURES: &str = "+64bit,+cx8,+cmov,+mmx,+fxsr,+sse,+sse2,+sse3,+ssse3,+sse4.1,\
+sse4.2,+popcnt,+crc32,+cx16,+sahf,+avx,+avx2,+bmi,+bmi2,+f16c,+fma,+lzcnt,+movbe,+xsave";

impl HostTarget {
    /// The machine this process runs on (read once).
    pub fn detect() -> HostTarget {
        let _gate = crate::fork::section();
        static HOST: OnceLock<HostTarget> = OnceLock::new();
        HOST.get_or_init(|| {
            initialize();
            HostTarget {
                triple: TargetMachine::get_default_triple()
                    .as_str()
                    .to_string_lossy()
                    .into_owned(),
                cpu: TargetMachine::get_host_cpu_name().to_string(),
                features: TargetMachine::get_host_cpu_features().to_string(),
            }
        })
        .clone()
    }

    /// The portable baseline a shipped bundle is compiled for: x86-64-v3 on x86-64 Linux
    /// (the triple is this build's, as the host's is).
    pub fn portable() -> HostTarget {
        initialize();
        HostTarget {
            triple: TargetMachine::get_default_triple()
                .as_str()
                .to_string_lossy()
                .into_owned(),
            cpu: PORTABLE_CPU.to_string(),
            features: PORTABLE_FEATURES.to_string(),
        }
    }

    /// Whether this CPU runs code compiled for `code_for`: the same triple, and every feature
    /// `code_for`'s code may use (`+name`) is one this CPU has. Code tuned for another CPU
    /// name runs correctly (only slower, maybe) when its features are present.
    pub fn runs_code_for(&self, code_for: &HostTarget) -> bool {
        self == code_for || (self.triple == code_for.triple && self.missing(code_for).is_empty())
    }

    /// The features `code_for`'s code may use that this CPU lacks.
    pub fn missing<'a>(&self, code_for: &'a HostTarget) -> Vec<&'a str> {
        let has: std::collections::HashSet<&str> = enabled(&self.features).collect();
        enabled(&code_for.features)
            .filter(|f| !has.contains(f))
            .collect()
    }

    /// Whether 512-bit vectors are available (sets the `dot` micro-kernel's width).
    pub fn has_avx512(&self) -> bool {
        self.features.split(',').any(|f| f == "+avx512f")
    }

    /// Whether the AVX-512 BF16 dot-product instructions (`vdpbf16ps`) are available: bf16
    /// `dot`s then multiply pairs of bf16 in hardware (see `codegen::dot`). Read from the
    /// target's feature string, so the portable baseline never has them and code compiled
    /// with them is only served to CPUs that have them ([`HostTarget::runs_code_for`], and
    /// the feature string is part of every cache key).
    pub fn has_avx512_bf16(&self) -> bool {
        self.has_avx512() && self.features.split(',').any(|f| f == "+avx512bf16")
    }

    /// Whether the target has AVX-512 DQ (`vfpclassps`, `vrangeps`) with AVX-512 VL (their
    /// 128- and 256-bit forms).
    pub fn has_avx512_dq_vl(&self) -> bool {
        let has = |f: &str| self.features.split(',').any(|x| x == f);
        self.has_avx512() && has("+avx512vl") && has("+avx512dq")
    }

    /// Whether rounding to bf16 may use `vcvtneps2bf16` (AVX-512 BF16, with AVX-512 VL for
    /// its narrower forms and AVX-512 DQ's `vfpclassps` to find the subnormals it flushes).
    pub fn has_avx512_bf16_convert(&self) -> bool {
        self.has_avx512_bf16() && self.has_avx512_dq_vl()
    }

    /// The target machine objects are compiled for. The large code model: objects are linked
    /// by RuntimeDyld, whose section memory manager may place a kernel's constants more than
    /// 2 GiB from its code, where the small model's 32-bit PC-relative references silently
    /// wrap (a kernel then read wrong constants or faulted); large-model code addresses
    /// constants and libm with 64-bit absolute relocations, which reach anywhere. Static
    /// relocation: the objects are only ever linked into this process, never shared. On x86,
    /// with [`NO_GATHER`].
    pub(crate) fn machine(&self) -> Result<TargetMachine, String> {
        let triple = TargetTriple::create(&self.triple);
        let target = Target::from_triple(&triple).map_err(|e| e.to_string())?;
        let features = if self.triple.starts_with("x86_64") {
            format!("{},{NO_GATHER}", self.features)
        } else {
            self.features.clone()
        };
        target
            .create_target_machine(
                &triple,
                &self.cpu,
                &features,
                OptimizationLevel::Aggressive,
                RelocMode::Static,
                CodeModel::Large,
            )
            .ok_or_else(|| format!("LLVM cannot target `{}` ({})", self.triple, self.cpu))
    }
}

/// LLVM's tuning that costs vector gathers and scatters as the element-by-element accesses
/// they are, so the loop vectoriser does not trade scalar loads for them. A loop whose
/// addresses LLVM cannot prove contiguous (a window index decomposed by `/` and `%` of a
/// power of two becomes a bit mask it does not see through) was vectorised with two
/// `vgatherqps` per 16 lanes once its body had a cheap vector form (`bf16_round`'s
/// conversion): JAX's paged attention kernel on the CPU went from 1.21 to 2.16–2.50 ms a
/// call (Zen 5, alternating processes), and to 1.07 with this tuning; flash attention and
/// its backward, splash, ragged paged attention and megablox gmm measured the same or
/// faster (2026-11-27).
const NO_GATHER: &str = "+prefer-no-gather,+prefer-no-scatter";

/// The features a feature string enables (`+name`), without their `+`.
fn enabled(features: &str) -> impl Iterator<Item = &str> {
    features.split(',').filter_map(|f| f.strip_prefix('+'))
}
