//! Where a kernel runs.

use crate::backend::Backend;
use crate::{cpu, interpret};
use std::{fmt, str::FromStr};

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Device {
    /// The reference interpreter: exact semantics, every access checked, slow.
    Interpret,
    /// Compiled for the host CPU through LLVM: fused, vectorised, multi-threaded.
    Cpu,
}

impl Device {
    /// Every device, the default (what a launch that names none uses) first.
    pub const ALL: [Device; 2] = [Device::Cpu, Device::Interpret];

    /// The backend that runs kernels launched on this device.
    pub fn backend(self) -> &'static dyn Backend {
        match self {
            Device::Interpret => &interpret::Interpreter,
            Device::Cpu => &cpu::CpuBackend,
        }
    }

    /// The device's name, as `FromStr` reads it and the Python package spells it.
    pub fn name(self) -> &'static str {
        match self {
            Device::Interpret => "interpret",
            Device::Cpu => "cpu",
        }
    }
}

impl FromStr for Device {
    type Err = String;
    fn from_str(s: &str) -> Result<Device, String> {
        Device::ALL
            .into_iter()
            .find(|d| d.name() == s)
            .ok_or_else(|| {
                let known: Vec<&str> = Device::ALL.iter().map(|d| d.name()).collect();
                format!("unknown device `{s}` (known: {})", known.join(", "))
            })
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How to launch, beyond the device.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct LaunchOptions {
    /// Debug mode (TorchTPU's "Debug eager"): on `cpu`, compile a bounds check into every
    /// element access (reporting kernel, op, source line, grid step and offset) and fill
    /// scratch with NaN. Index maps and dynamic slices are checked in every mode.
    pub debug: bool,
}

impl LaunchOptions {
    /// The options the environment asks for: `TPUKIT_DEBUG=1` turns debug mode on.
    pub fn from_env() -> LaunchOptions {
        LaunchOptions {
            debug: std::env::var("TPUKIT_DEBUG").is_ok_and(|v| v != "0" && !v.is_empty()),
        }
    }
}
