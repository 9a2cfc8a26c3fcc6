//! The domain-decomposed solve on GPUs (`fem solve --devices cuda:0,cuda:1 [--domains K]`;
//! dissertation §7.1.2): the domains of [`crate::domain_solve`] are placed on the listed devices
//! round-robin (domain `d` on `devices[d % n]`), each domain's assembled owned rows are uploaded
//! to its device, and the filtered block-Jacobi PCG runs on
//! [`tessera_solve::cuda::DeviceDomains`]: halo exchange by device copies between domains of one
//! device and by NCCL between devices, dot products reduced over the domains in domain order.
//!
//! The per-domain assembly runs on the CPU (the exact-allocation Bin-BCSR* assembly restricted
//! to the owned rows, [`crate::domain::assemble_domains`]); the matrices are uploaded.

use std::time::Instant;

use tessera_gpu::Gpu;
use tessera_solve::cuda::{DeviceDomains, DeviceDomainsOptions};
use tessera_solve::{Constraints, DomainMatrix, PcgParams, SolveReport};

use crate::static_solve::StaticError;

/// The device of every domain: `devices[d % devices.len()]` (round-robin).
pub fn round_robin(devices: &[usize], domains: usize) -> Vec<usize> {
    (0..domains).map(|d| devices[d % devices.len()]).collect()
}

/// Open the listed CUDA devices (distinct ordinals). More devices than the machine has, or a
/// device listed twice, is an error that says what there is.
pub fn open_devices(devices: &[usize]) -> Result<Vec<Gpu>, StaticError> {
    if devices.is_empty() {
        return Err(StaticError::Unsupported("--devices lists no device".into()));
    }
    for (i, a) in devices.iter().enumerate() {
        if devices[..i].contains(a) {
            return Err(StaticError::Unsupported(format!(
                "cuda:{a} is listed twice in --devices; NCCL runs one rank per device, so put \
                 several domains on one device with --domains K instead"
            )));
        }
    }
    let count = Gpu::device_count().map_err(|e| {
        StaticError::Unsupported(format!(
            "--devices {}: no CUDA device is usable ({e})",
            list(devices)
        ))
    })?;
    if let Some(&bad) = devices.iter().find(|&&o| o >= count) {
        return Err(StaticError::Unsupported(format!(
            "--devices {}: cuda:{bad} does not exist; this machine has {count} CUDA device{} (cuda:0{})",
            list(devices),
            if count == 1 { "" } else { "s" },
            if count > 1 {
                format!("..cuda:{}", count - 1)
            } else {
                String::new()
            }
        )));
    }
    devices
        .iter()
        .map(|&o| {
            Gpu::new(o).map_err(|e| {
                StaticError::Unsupported(format!("cuda:{o}: {}", e.to_string().replace('\n', " ")))
            })
        })
        .collect()
}

/// `cuda:0,cuda:1`.
pub fn list(devices: &[usize]) -> String {
    devices
        .iter()
        .map(|o| format!("cuda:{o}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// What the device solve measured (per application of the operator: medians of timed
/// applications after the solve, each stage alone and waited for).
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceDomainsReport {
    /// The devices, as listed.
    pub devices: Vec<usize>,
    /// Device ordinal of every domain.
    pub placement: Vec<usize>,
    /// `nccl` when domains on several devices exchange through NCCL, else `device copies`.
    pub communicator: String,
    /// Bytes of the halo exchange per PCG iteration (one application): all of it, and the part
    /// that crosses devices.
    pub halo_bytes_per_iteration: u64,
    pub remote_bytes_per_iteration: u64,
    /// Bytes of the reductions per iteration: three partial sums per domain.
    pub reduction_bytes_per_iteration: u64,
    /// Upload of the domains' matrices, ms.
    pub upload_ms: f64,
    /// Pack kernels of all domains per application, ms.
    pub pack_ms: f64,
    /// The exchange alone per application, ms.
    pub exchange_ms: f64,
    /// Local SpMV of each domain alone (interior and boundary bins), ms.
    pub spmv_ms: Vec<f64>,
    /// One whole application (exchange overlapped with the interior bins), ms.
    pub apply_ms: f64,
    /// Solve time per PCG iteration, ms.
    pub iteration_ms: f64,
}

impl DeviceDomainsReport {
    /// As JSON (for the run summary).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "devices": list(&self.devices),
            "placement": self.placement.iter().map(|o| format!("cuda:{o}")).collect::<Vec<_>>(),
            "communicator": self.communicator,
            "halo_bytes_per_iteration": self.halo_bytes_per_iteration,
            "remote_bytes_per_iteration": self.remote_bytes_per_iteration,
            "reduction_bytes_per_iteration": self.reduction_bytes_per_iteration,
            "upload_ms": self.upload_ms,
            "pack_ms": self.pack_ms,
            "exchange_ms": self.exchange_ms,
            "spmv_ms": self.spmv_ms,
            "apply_ms": self.apply_ms,
            "iteration_ms": self.iteration_ms,
        })
    }
}

/// Solve on the devices (see the [module docs](self)): `f`, `cons` and the returned
/// displacement are concatenated over the domains' owned nodes.
pub fn solve_on_devices(
    gpus: &[Gpu],
    devices: &[usize],
    domains: &[DomainMatrix],
    f: &[f64],
    cons: &Constraints,
    params: &PcgParams,
) -> Result<(Vec<f64>, SolveReport, DeviceDomainsReport), StaticError> {
    let placement = round_robin(devices, domains.len());
    let refs: Vec<&Gpu> = placement
        .iter()
        .map(|o| {
            let at = devices.iter().position(|d| d == o).unwrap_or(0);
            &gpus[at]
        })
        .collect();
    let t = Instant::now();
    let dd = DeviceDomains::new(domains, &refs, DeviceDomainsOptions::default())?;
    dd.synchronize()?;
    let upload_ms = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let mut us = Vec::new();
    let report = dd.pcg(f, cons, params, &mut us)?;
    let solve_ms = t.elapsed().as_secs_f64() * 1e3;
    // stage times per application, on the solution vector
    let x = dd.upload(&us)?;
    let mut y = dd.zeros()?;
    let times = dd.timed_apply(&x, &mut y, 5)?;
    Ok((
        us,
        report.clone(),
        DeviceDomainsReport {
            devices: devices.to_vec(),
            placement,
            communicator: if dd.uses_nccl() {
                "nccl".into()
            } else {
                "device copies".into()
            },
            halo_bytes_per_iteration: dd.halo_bytes_per_apply(),
            remote_bytes_per_iteration: dd.remote_bytes_per_apply(),
            reduction_bytes_per_iteration: 3 * 8 * domains.len() as u64,
            upload_ms,
            pack_ms: times.pack_ms,
            exchange_ms: times.exchange_ms,
            spmv_ms: times.spmv_ms,
            apply_ms: times.apply_ms,
            iteration_ms: solve_ms / report.iterations.max(1) as f64,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_go_round_robin() {
        assert_eq!(round_robin(&[0, 1], 5), vec![0, 1, 0, 1, 0]);
        assert_eq!(round_robin(&[3], 2), vec![3, 3]);
        assert_eq!(list(&[0, 1]), "cuda:0,cuda:1");
    }

    #[test]
    fn duplicate_or_missing_devices_are_clear_errors() {
        let e = open_devices(&[0, 0]).unwrap_err().to_string();
        assert!(e.contains("cuda:0 is listed twice"), "{e}");
        assert!(open_devices(&[]).is_err());
        // no driver here: a clear error; with one, cuda:64 does not exist
        let e = open_devices(&[64]).unwrap_err().to_string();
        assert!(
            e.contains("no CUDA device is usable") || e.contains("cuda:64 does not exist"),
            "{e}"
        );
    }
}
