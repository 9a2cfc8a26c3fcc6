//! Run-time device choice: `--device auto|cpu|cuda[:N]` (DESIGN.md, "GPU support is always
//! compiled; whether a GPU is used is decided at run time").

use std::fmt;
use std::str::FromStr;

/// What the user asked for on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DeviceChoice {
    /// CUDA device 0 when a driver and a device are present, else the CPU.
    #[default]
    Auto,
    /// The CPU reference backend.
    Cpu,
    /// CUDA device with the given ordinal.
    Cuda(usize),
}

/// A `--device` value that is not `auto`, `cpu`, `cuda` or `cuda:N`.
#[derive(Debug, thiserror::Error)]
#[error("invalid device `{0}`: expected auto, cpu, cuda or cuda:N")]
pub struct DeviceParseError(pub String);

impl FromStr for DeviceChoice {
    type Err = DeviceParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim().to_ascii_lowercase();
        match t.as_str() {
            "auto" => Ok(DeviceChoice::Auto),
            "cpu" => Ok(DeviceChoice::Cpu),
            "cuda" | "gpu" => Ok(DeviceChoice::Cuda(0)),
            _ => {
                if let Some(n) = t.strip_prefix("cuda:") {
                    n.parse()
                        .map(DeviceChoice::Cuda)
                        .map_err(|_| DeviceParseError(s.to_string()))
                } else {
                    Err(DeviceParseError(s.to_string()))
                }
            }
        }
    }
}

impl fmt::Display for DeviceChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceChoice::Auto => write!(f, "auto"),
            DeviceChoice::Cpu => write!(f, "cpu"),
            DeviceChoice::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn parse_device_choices() {
        assert_eq!("auto".parse::<DeviceChoice>().unwrap(), DeviceChoice::Auto);
        assert_eq!("cpu".parse::<DeviceChoice>().unwrap(), DeviceChoice::Cpu);
        assert_eq!(
            "cuda".parse::<DeviceChoice>().unwrap(),
            DeviceChoice::Cuda(0)
        );
        assert_eq!(
            "cuda:3".parse::<DeviceChoice>().unwrap(),
            DeviceChoice::Cuda(3)
        );
        assert!("cuda:x".parse::<DeviceChoice>().is_err());
        assert!("tpu".parse::<DeviceChoice>().is_err());
    }
}
