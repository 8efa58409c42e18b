//! Where a kernel runs.

use std::{fmt, str::FromStr};

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Device {
    /// The reference interpreter: exact semantics, every access checked, slow.
    Interpret,
}

impl FromStr for Device {
    type Err = String;
    fn from_str(s: &str) -> Result<Device, String> {
        match s {
            "interpret" => Ok(Device::Interpret),
            other => Err(format!("unknown device `{other}` (known: interpret)")),
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Device::Interpret => "interpret",
        })
    }
}
