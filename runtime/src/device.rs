//! Where a kernel runs.

use std::{fmt, str::FromStr};

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Device {
    /// The reference interpreter: exact semantics, every access checked, slow.
    Interpret,
    /// Compiled for the host CPU through LLVM: fused, vectorised, multi-threaded.
    Cpu,
}

impl FromStr for Device {
    type Err = String;
    fn from_str(s: &str) -> Result<Device, String> {
        match s {
            "interpret" => Ok(Device::Interpret),
            "cpu" => Ok(Device::Cpu),
            other => Err(format!("unknown device `{other}` (known: interpret, cpu)")),
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Device::Interpret => "interpret",
            Device::Cpu => "cpu",
        })
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
