//! Run-time backend choice for every command that computes (`--device auto|cpu|cuda[:N]`,
//! DESIGN.md: "auto = CUDA when a driver and device are present").
#![allow(dead_code)] // the commands take `--device` as they gain GPU paths

use anyhow::anyhow;
use std::sync::Arc;
use tessera_core::DeviceChoice;
use tessera_gpu::Gpu;

/// Where a command runs.
#[derive(Clone, Debug)]
pub enum Backend {
    /// The CPU reference (rayon pool).
    Cpu,
    /// A CUDA device.
    Cuda(Arc<Gpu>),
}

/// Resolve the user's choice: `auto` gives CUDA device 0 when it is usable and the CPU
/// otherwise; `cpu` the CPU; `cuda[:N]` that device, or one clear error line saying why it
/// cannot be used.
pub fn resolve(choice: DeviceChoice) -> anyhow::Result<Backend> {
    match Gpu::open(choice) {
        Ok(Some(g)) => Ok(Backend::Cuda(Arc::new(g))),
        Ok(None) => Ok(Backend::Cpu),
        Err(e) => Err(anyhow!(
            "--device {choice} is not usable: {}",
            e.to_string().replace('\n', " ")
        )),
    }
}

impl Backend {
    /// One line for logs: `cpu (2 threads)` or `cuda:0 NVIDIA H100 80GB HBM3 (sm_90, ...)`.
    pub fn describe(&self) -> String {
        match self {
            Backend::Cpu => {
                let n = rayon::current_num_threads();
                format!("cpu ({n} thread{})", if n == 1 { "" } else { "s" })
            }
            Backend::Cuda(g) => g.describe(),
        }
    }
    /// The GPU, when running on one.
    pub fn gpu(&self) -> Option<&Arc<Gpu>> {
        match self {
            Backend::Cuda(g) => Some(g),
            Backend::Cpu => None,
        }
    }
    pub fn is_cuda(&self) -> bool {
        matches!(self, Backend::Cuda(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_and_auto_always_resolve() {
        assert!(matches!(resolve(DeviceChoice::Cpu).unwrap(), Backend::Cpu));
        assert!(resolve(DeviceChoice::Cpu)
            .unwrap()
            .describe()
            .starts_with("cpu ("));
        // auto never fails: CUDA when usable, else the CPU
        let b = resolve(DeviceChoice::Auto).unwrap();
        assert!(b.describe().starts_with("cpu (") || b.describe().starts_with("cuda:0 "));
    }

    #[test]
    fn unusable_cuda_is_one_line() {
        // an ordinal no machine has: an error on every machine, GPU or not
        let e = resolve(DeviceChoice::Cuda(4096)).unwrap_err().to_string();
        assert!(e.starts_with("--device cuda:4096 is not usable: "), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }
}
