//! The machine code is generated for: the host CPU, read at run time.
//!
//! Code is tuned for the exact CPU the process runs on (its name and feature string are part
//! of every compiled kernel's identity), so a kernel compiled on an AVX-512 machine uses
//! 512-bit vectors and one compiled on an AVX2 machine does not.

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

/// The host as LLVM names it: triple, CPU and features.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HostTarget {
    pub triple: String,
    pub cpu: String,
    pub features: String,
}

impl HostTarget {
    /// The machine this process runs on (read once).
    pub fn detect() -> HostTarget {
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

    /// Whether 512-bit vectors are available (sets the `dot` micro-kernel's width).
    pub fn has_avx512(&self) -> bool {
        self.features.split(',').any(|f| f == "+avx512f")
    }

    /// The target machine objects are compiled for. The large code model: objects are linked
    /// by RuntimeDyld, whose section memory manager may place a kernel's constants more than
    /// 2 GiB from its code, where the small model's 32-bit PC-relative references silently
    /// wrap (a kernel then read wrong constants or faulted); large-model code addresses
    /// constants and libm with 64-bit absolute relocations, which reach anywhere. Static
    /// relocation: the objects are only ever linked into this process, never shared.
    pub(crate) fn machine(&self) -> Result<TargetMachine, String> {
        let triple = TargetTriple::create(&self.triple);
        let target = Target::from_triple(&triple).map_err(|e| e.to_string())?;
        target
            .create_target_machine(
                &triple,
                &self.cpu,
                &self.features,
                OptimizationLevel::Aggressive,
                RelocMode::Static,
                CodeModel::Large,
            )
            .ok_or_else(|| format!("LLVM cannot target `{}` ({})", self.triple, self.cpu))
    }
}
