//! The domain-decomposed operator and block-Jacobi PCG on one or several GPUs (dissertation
//! §7.1.2: per-domain assembly "in distributed or multi-GPU simulations using domain
//! decomposition"); the device counterpart of [`crate::partitioned`].
//!
//! Every domain lives on one device (several domains may share one): its owned rows as a
//! device Bin-BCSR* matrix with local columns (owned nodes, then halo nodes), its halo send
//! list, and its parts of the solver vectors (owned values; the input of an `apply` also has
//! a halo part, a separate buffer). `y = A x` ([`DeviceDomains::apply`]) is, per device:
//!
//! 1. **pack** ([`super::halo::halo_pack`]) the owned values every neighbour needs into the
//!    domain's send buffer, on a second stream of the device (the exchange stream, once the
//!    main stream has written `x`);
//! 2. **exchange** on the exchange stream: between domains of one device a device
//!    copy, between devices NCCL send/receive in one group ([`tessera_gpu::NcclComm`]). The
//!    halo of a domain is laid out neighbour by neighbour in the order of that neighbour's
//!    send list, so each segment lands directly in its place: the unpack is the identity
//!    and is skipped ([`super::halo::halo_unpack`] serves other layouts);
//! 3. meanwhile, the **interior bins** (rows with owned columns only) are multiplied on the
//!    main stream;
//! 4. the **boundary bins** are multiplied on the exchange stream as soon as the halo has
//!    arrived, *while* the interior bins run ([`DeviceDomainsOptions::concurrent_boundary`]);
//!    the main stream then waits for them. For the exchange stream's kernels (pack, NCCL,
//!    boundary bins) to start during the interior SpMV, that stream has the device's highest
//!    priority and the interior launch gives each warp one bin, so its blocks retire and free
//!    multiprocessors as it goes ([`BinSchedule`]). (Serially, after the interior bins, the
//!    boundary bins were a launch of a few hundred bins, one per warp, and the whole GPU
//!    waited for the slowest.)
//!
//! Row results do not depend on the stream, only on the row.
//!
//! Dot products are per-domain partial sums by the fixed-grid kernels of the one-domain PCG,
//! written to slot `d` of a small per-device buffer; across devices an NCCL all-reduce of these
//! buffers (every domain's slot is zero on the other devices, so the sum is exact) gives every
//! device all partials, and a one-block kernel on every device adds them in domain order
//! (`dd_sum_slots`). Each device then forms α, β and the convergence checks itself with the
//! one-domain PCG's device-scalar kernels, so the iteration runs without host synchronisation
//! (the host polls the status every few iterations) and every device computes the same
//! numbers. The iterates therefore do not depend on how the domains are placed on devices:
//! one device with `k` domains is the reference of `k` domains on several devices, bit for bit
//! (`multi_device_solve_matches_one_device`).
//!
//! Across devices, block Jacobi's `x += α c` runs on the main streams while the partials of
//! `rᵀr` and `rᵀs` are all-reduced on the exchange streams
//! ([`DeviceDomainsOptions::overlap_update`]; the same arithmetic as the fused update).

use std::sync::Mutex;
use std::time::Instant;

use rayon::prelude::*;
use tessera_gpu::{DeviceBuffer, Event, Gpu, Kernel, LaunchConfig, NcclComm, Transfer};

use super::halo::halo_pack;
use super::pcg::{device_pcg_result, device_pcg_state};
use super::{
    cfg, to_u32, up, DeviceAmg, DeviceBinBcsr, DeviceBlockCsr, SolveKernels, BLOCK, DOT_BLOCKS,
};
use crate::amg::AmgParams;
use crate::constraints::Constraints;
use crate::error::SolveError;
use crate::jacobi::{identity_on_fixed, invert_small};
use crate::partitioned::{DomainMatrix, HaloPlan};
use crate::pcg::{check_system, PcgParams, SolveReport};
use tessera_sparse::binbcsr::BIN_SIZE;

/// Blocks of the fused update pass (fixed: deterministic sums).
const UPDATE_BLOCKS: u32 = 1024;

/// How [`DeviceDomains`] runs.
#[derive(Clone, Copy, Debug)]
pub struct DeviceDomainsOptions {
    /// Exchange on a second stream per device while the interior bins are multiplied.
    pub overlap: bool,
    /// Use NCCL also when all domains are on one device (a communicator of one rank: the
    /// all-reduce path of several devices, checked on one); with several devices NCCL is
    /// always used.
    pub force_nccl: bool,
    /// With `overlap`: multiply the boundary bins on the exchange stream while the interior
    /// bins run (default), instead of after them on the main stream.
    /// `TESSERA_DD_BOUNDARY=serial` turns it off (for comparisons).
    pub concurrent_boundary: bool,
    /// How the SpMV launches hand out bins ([`BinSchedule`]).
    /// `TESSERA_DD_SCHEDULE=resident|per-bin` overrides the default (for comparisons).
    pub schedule: BinSchedule,
    /// With `overlap`: the exchange stream has the device's highest priority, so the pack,
    /// the exchange and the boundary bins start as soon as blocks of the interior bins
    /// retire. `TESSERA_DD_SIDE_PRIORITY=normal` turns it off (for comparisons).
    pub high_priority_exchange: bool,
    /// Across devices with block Jacobi: `x += α c` on the main streams while the partial
    /// sums of `rᵀr` and `rᵀs` are all-reduced on the exchange streams (instead of inside the
    /// fused update, before the all-reduce); the same arithmetic per element, so the same
    /// iterates. `TESSERA_DD_OVERLAP_UPDATE=off` turns it off (for comparisons).
    pub overlap_update: bool,
}

/// How an SpMV launch of [`DeviceDomains`] hands out its bins to warps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinSchedule {
    /// Listing 4.1's dynamic schedule: as many blocks as the device holds at once, each warp
    /// takes bins from an atomic counter until none is left; beside concurrent boundary bins
    /// the interior launch leaves one block per multiprocessor free for them.
    Resident,
    /// One bin per warp and as many blocks as that needs: blocks retire as they finish, and
    /// the hardware starts the next (the exchange stream's first, when it has priority).
    PerBin,
    /// `PerBin` when the domains exchange a halo (the exchange and the boundary bins then
    /// start while the interior bins run), `Resident` otherwise (default). Measured on two
    /// H200 (bracket-1.69M p = 2, BENCHMARKS.md): per bin with the high-priority exchange
    /// stream 1.158 ms per iteration against 1.19-1.34 for the resident schedule; one
    /// domain alone 1.93 ms resident against 2.01 per bin.
    Auto,
}

impl Default for DeviceDomainsOptions {
    fn default() -> Self {
        let env = |k: &str| std::env::var(k).unwrap_or_default();
        DeviceDomainsOptions {
            overlap: true,
            force_nccl: false,
            concurrent_boundary: env("TESSERA_DD_BOUNDARY") != "serial",
            schedule: match env("TESSERA_DD_SCHEDULE").as_str() {
                "resident" => BinSchedule::Resident,
                "per-bin" => BinSchedule::PerBin,
                _ => BinSchedule::Auto,
            },
            high_priority_exchange: env("TESSERA_DD_SIDE_PRIORITY") != "normal",
            overlap_update: env("TESSERA_DD_OVERLAP_UPDATE") != "off",
        }
    }
}

/// One device of the placement.
struct Device<'g> {
    gpu: &'g Gpu,
    /// The exchange stream ([`Gpu::fork_stream`]), when overlapping.
    side: Option<Gpu>,
    k: SolveKernels<'g>,
    /// Recorded on the main stream once the input of an `apply` is written.
    x_ready: Event,
    /// Recorded on the exchange stream after the halo exchange (and the boundary bins).
    delivered: Event,
    /// The domain SpMV kernel (`dd_spmv_<e>`) and how many of its blocks one
    /// multiprocessor holds.
    spmv: Kernel,
    spmv_blocks_per_sm: u32,
    /// `3 k` partial sums (slot `s k + d`), only this device's domains written.
    red: DeviceBuffer<f64>,
    partials_done: Event,
    /// Recorded on the exchange stream after an all-reduce of `red`.
    reduced: Event,
}

impl Device<'_> {
    fn side(&self) -> &Gpu {
        self.side.as_ref().unwrap_or(self.gpu)
    }
}

/// One domain on its device.
struct Domain {
    dev: usize,
    n_owned: usize,
    interior_bins: usize,
    nbins: usize,
    matrix: DeviceBinBcsr<f64>,
    n_send: usize,
    send_idx: DeviceBuffer<u32>,
    partial: DeviceBuffer<f64>,
    partial2: DeviceBuffer<f64>,
}

/// Buffers written by every `apply`.
struct Scratch {
    send: Vec<DeviceBuffer<f64>>,
    halo: Vec<DeviceBuffer<f64>>,
    /// Bin counters of the interior and the boundary SpMV of every domain.
    counters: Vec<[DeviceBuffer<u32>; 2]>,
    /// The all-reduced partial sums per device (NCCL only).
    red_all: Vec<DeviceBuffer<f64>>,
}

/// Cumulative host-side times of [`DeviceDomains::apply`] calls, each measured to completion
/// of the device work ([`DeviceDomains::timed_apply`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeviceApplyTimes {
    /// Pack kernels of all domains, ms.
    pub pack_ms: f64,
    /// The exchange (copies and NCCL), ms.
    pub exchange_ms: f64,
    /// Local SpMV per domain (interior and boundary bins), ms.
    pub spmv_ms: Vec<f64>,
    /// The whole `apply` with overlap, ms.
    pub apply_ms: f64,
}

/// One domain's owned rows in device memory: the device counterpart of [`DomainMatrix`]
/// (block rows = owned nodes; columns `< num_owned` owned, the others halo nodes
/// `num_owned + h`; owned nodes `0..num_interior` have no halo column). Built by uploading a
/// host [`DomainMatrix`] ([`DeviceDomainMatrix::upload`]) or assembled on the domain's device
/// (`tessera_fem::domain_gpu::assemble_domains_gpu`).
pub struct DeviceDomainMatrix {
    pub matrix: DeviceBinBcsr<f64>,
    pub num_interior: usize,
    pub num_halo: usize,
    pub halo: HaloPlan,
}

impl DeviceDomainMatrix {
    /// Checks the interior rows and the halo plan against the matrix's rows (the column
    /// ranges are the assembler's contract; [`DomainMatrix::new`] checks them on the host).
    pub fn new(
        matrix: DeviceBinBcsr<f64>,
        num_interior: usize,
        num_halo: usize,
        halo: HaloPlan,
    ) -> Result<Self, SolveError> {
        let no = matrix.pattern().num_block_rows();
        if num_interior > no {
            return Err(SolveError::InvalidInput {
                what: "domain matrix",
                message: format!("{num_interior} interior of {no} owned rows"),
            });
        }
        halo.validate(no, num_halo)?;
        Ok(Self {
            matrix,
            num_interior,
            num_halo,
            halo,
        })
    }
    /// Upload a host domain matrix to `gpu`.
    pub fn upload(gpu: &Gpu, dm: &DomainMatrix) -> Result<Self, SolveError> {
        Ok(Self {
            matrix: DeviceBinBcsr::upload(gpu, &dm.matrix)?,
            num_interior: dm.num_interior,
            num_halo: dm.num_halo,
            halo: dm.halo.clone(),
        })
    }
    /// Copy back to the host as a [`DomainMatrix`] (with its checks: columns below owned +
    /// halo, interior rows without halo columns).
    pub fn download(&self, gpu: &Gpu) -> Result<DomainMatrix, SolveError> {
        let m = self
            .matrix
            .download_rect(gpu, self.num_owned() + self.num_halo)?;
        DomainMatrix::new(m, self.num_interior, self.num_halo, self.halo.clone())
    }
    /// Owned nodes (block rows).
    pub fn num_owned(&self) -> usize {
        self.matrix.pattern().num_block_rows()
    }
    /// Bins made of interior rows only.
    pub fn interior_bins(&self) -> usize {
        self.num_interior / BIN_SIZE
    }
    /// Bins of the owned rows.
    pub fn num_bins(&self) -> usize {
        self.matrix.pattern().num_bins()
    }
}

/// A domain-decomposed operator on one or several GPUs (see the [module docs](self)).
pub struct DeviceDomains<'g> {
    e: usize,
    /// Boundary bins on the exchange stream while the interior bins run.
    concurrent_boundary: bool,
    schedule: BinSchedule,
    /// [`DeviceDomainsOptions::overlap_update`].
    overlap_update: bool,
    devices: Vec<Device<'g>>,
    domains: Vec<Domain>,
    /// Block-row offsets of the domains in concatenated vectors.
    offsets: Vec<usize>,
    /// Same-device transfers (device copies), per device.
    copies: Vec<Vec<Transfer>>,
    /// Transfers between devices (NCCL), buffers indexed by domain.
    remote: Vec<Transfer>,
    nccl: Option<NcclComm>,
    scratch: Mutex<Scratch>,
    halo_values: u64,
    remote_values: u64,
    /// Largest device memory in use seen on each device (see [`DeviceDomains::note_memory`]).
    peak_in_use: Mutex<Vec<u64>>,
}

impl<'g> DeviceDomains<'g> {
    /// Upload `domains` (see [`DomainMatrix`]); domain `d` goes to `placement[d]`. Devices are
    /// told apart by ordinal; several domains on one device exchange by device copies, domains
    /// on different devices by NCCL (a missing NCCL library is then an error).
    pub fn new(
        domains: &[DomainMatrix],
        placement: &[&'g Gpu],
        opts: DeviceDomainsOptions,
    ) -> Result<Self, SolveError> {
        if domains.len() != placement.len() {
            return Err(SolveError::InvalidInput {
                what: "device domains",
                message: format!(
                    "{} domains placed on {} devices",
                    domains.len(),
                    placement.len()
                ),
            });
        }
        let dev = domains
            .iter()
            .zip(placement)
            .map(|(dm, g)| DeviceDomainMatrix::upload(g, dm))
            .collect::<Result<Vec<_>, _>>()?;
        Self::from_device(dev, placement, opts)
    }

    /// The operator of domain matrices already in device memory (domain `d`'s on
    /// `placement[d]`, e.g. assembled there), taken over without a copy; otherwise as
    /// [`DeviceDomains::new`].
    pub fn from_device(
        domains: Vec<DeviceDomainMatrix>,
        placement: &[&'g Gpu],
        opts: DeviceDomainsOptions,
    ) -> Result<Self, SolveError> {
        let k = domains.len();
        if k == 0 || placement.len() != k {
            return Err(SolveError::InvalidInput {
                what: "device domains",
                message: format!("{k} domains placed on {} devices", placement.len()),
            });
        }
        let e = domains[0].matrix.pattern().block_dim();
        if e > 3 {
            return Err(SolveError::InvalidInput {
                what: "device domains",
                message: format!("block size {e} (the device kernels take 1..3)"),
            });
        }
        if let Some(d) = domains
            .iter()
            .position(|d| d.matrix.pattern().block_dim() != e)
        {
            return Err(SolveError::InvalidInput {
                what: "device domains",
                message: format!("domain {d} has another block size than domain 0"),
            });
        }
        // distinct devices in order of first use
        let mut gpus: Vec<&'g Gpu> = Vec::new();
        let mut dev_of = Vec::with_capacity(k);
        for g in placement {
            let at = match gpus.iter().position(|h| h.ordinal() == g.ordinal()) {
                Some(i) => i,
                None => {
                    gpus.push(g);
                    gpus.len() - 1
                }
            };
            dev_of.push(at);
        }
        let mut devices = Vec::with_capacity(gpus.len());
        for g in &gpus {
            let side = if opts.overlap {
                Some(g.fork_stream_with(opts.high_priority_exchange)?)
            } else {
                None
            };
            let kern = SolveKernels::new(g)?;
            let spmv = kern.k(&format!("dd_spmv_{e}"))?;
            let spmv_blocks_per_sm = spmv.max_active_blocks_per_sm(BLOCK)?;
            devices.push(Device {
                gpu: g,
                side,
                k: kern,
                x_ready: g.new_event()?,
                delivered: g.new_event()?,
                spmv,
                spmv_blocks_per_sm,
                red: g.zeros::<f64>(3 * k)?,
                partials_done: g.new_event()?,
                reduced: g.new_event()?,
            });
        }
        // transfers: for every domain d and neighbour t, d's send segment t into the halo of
        // the neighbour j at j's receive segment for d (checked to have equal lengths)
        let mut copies = vec![Vec::new(); devices.len()];
        let mut remote = Vec::new();
        let (mut halo_values, mut remote_values) = (0u64, 0u64);
        for (d, dm) in domains.iter().enumerate() {
            for (t, &j) in dm.halo.neighbours.iter().enumerate() {
                let j = j as usize;
                let other = domains.get(j).ok_or_else(|| SolveError::InvalidInput {
                    what: "device domains",
                    message: format!("domain {d} names neighbour {j} of {k}"),
                })?;
                let s = other
                    .halo
                    .neighbours
                    .binary_search(&(d as u32))
                    .map_err(|_| SolveError::InvalidInput {
                        what: "device domains",
                        message: format!("domain {j} does not list its neighbour {d}"),
                    })?;
                let src = dm.halo.send_offsets[t] as usize..dm.halo.send_offsets[t + 1] as usize;
                let dst = other.halo.recv_offsets[s] as usize;
                let dst_end = other.halo.recv_offsets[s + 1] as usize;
                if dst_end - dst != src.len() {
                    return Err(SolveError::InvalidInput {
                        what: "device domains",
                        message: format!("domains {d} -> {j}: send and receive counts differ"),
                    });
                }
                let tr = Transfer {
                    from_buf: d,
                    from: src.start * e..src.end * e,
                    to_buf: j,
                    to_at: dst * e,
                };
                halo_values += (src.len() * e) as u64;
                if dev_of[d] == dev_of[j] {
                    copies[dev_of[d]].push(tr);
                } else {
                    remote_values += (src.len() * e) as u64;
                    remote.push(tr);
                }
            }
        }
        let nccl = if devices.len() > 1 || opts.force_nccl {
            let sides: Vec<&Gpu> = devices.iter().map(|d| d.side()).collect();
            Some(NcclComm::new(&sides)?)
        } else {
            None
        };
        let mut out = Vec::with_capacity(k);
        let mut send = Vec::with_capacity(k);
        let mut halo = Vec::with_capacity(k);
        let mut counters = Vec::with_capacity(k);
        let mut offsets = vec![0usize];
        for (d, dm) in domains.into_iter().enumerate() {
            let g = gpus[dev_of[d]];
            let n_owned = dm.num_owned();
            offsets.push(offsets[d] + n_owned);
            send.push(g.zeros::<f64>(dm.halo.num_send() * e)?);
            halo.push(g.zeros::<f64>(dm.num_halo * e)?);
            counters.push([g.zeros::<u32>(1)?, g.zeros::<u32>(1)?]);
            out.push(Domain {
                dev: dev_of[d],
                n_owned,
                interior_bins: dm.interior_bins(),
                nbins: dm.num_bins(),
                matrix: dm.matrix,
                n_send: dm.halo.num_send(),
                send_idx: up(g, &dm.halo.send_nodes)?,
                partial: g.zeros::<f64>(DOT_BLOCKS as usize)?,
                partial2: g.zeros::<f64>(2 * UPDATE_BLOCKS as usize)?,
            });
        }
        Ok(DeviceDomains {
            e,
            concurrent_boundary: opts.overlap && opts.concurrent_boundary,
            overlap_update: opts.overlap_update,
            schedule: match opts.schedule {
                BinSchedule::Auto if halo_values > 0 => BinSchedule::PerBin,
                BinSchedule::Auto => BinSchedule::Resident,
                s => s,
            },
            devices,
            domains: out,
            offsets,
            copies,
            remote,
            nccl,
            scratch: Mutex::new(Scratch {
                send,
                halo,
                counters,
                red_all: gpus
                    .iter()
                    .map(|g| g.zeros::<f64>(3 * k))
                    .collect::<Result<_, _>>()?,
            }),
            halo_values,
            remote_values,
            peak_in_use: Mutex::new(Vec::new()),
        })
        .and_then(|dd| {
            dd.note_memory()?;
            Ok(dd)
        })
    }

    /// Device memory in use on every device (in the order of first use), bytes
    /// ([`Gpu::memory_in_use`]).
    pub fn memory_in_use(&self) -> Result<Vec<u64>, SolveError> {
        self.devices
            .iter()
            .map(|d| Ok(d.gpu.memory_in_use()? as u64))
            .collect()
    }

    /// Record the memory in use now into the per-device peaks ([`DeviceDomains::peak_memory`]);
    /// called after the operator is built, after a domain AMG setup, and once a PCG has
    /// allocated its vectors (after waiting for the devices, so allocations have happened).
    pub fn note_memory(&self) -> Result<(), SolveError> {
        self.synchronize()?;
        let now = self.memory_in_use()?;
        let mut peak = self.peak_in_use.lock().unwrap_or_else(|p| p.into_inner());
        if peak.len() != now.len() {
            *peak = vec![0; now.len()];
        }
        for (p, n) in peak.iter_mut().zip(now) {
            *p = (*p).max(n);
        }
        Ok(())
    }

    /// The largest memory in use seen on each device by [`DeviceDomains::note_memory`]
    /// (device ordinal, bytes, device total bytes).
    pub fn peak_memory(&self) -> Vec<(usize, u64, u64)> {
        let peak = self.peak_in_use.lock().unwrap_or_else(|p| p.into_inner());
        self.devices
            .iter()
            .zip(peak.iter())
            .map(|(d, &p)| (d.gpu.ordinal(), p, d.gpu.total_memory() as u64))
            .collect()
    }

    /// Number of domains.
    pub fn num_domains(&self) -> usize {
        self.domains.len()
    }
    /// Number of distinct devices.
    pub fn num_devices(&self) -> usize {
        self.devices.len()
    }
    /// Device ordinal of every domain.
    pub fn placement(&self) -> Vec<usize> {
        self.domains
            .iter()
            .map(|d| self.devices[d.dev].gpu.ordinal())
            .collect()
    }
    /// Whether an NCCL communicator is used.
    pub fn uses_nccl(&self) -> bool {
        self.nccl.is_some()
    }
    /// Block size `e`.
    pub fn block_size(&self) -> usize {
        self.e
    }
    /// Block-row offsets of the domains in concatenated vectors (`k + 1` entries).
    pub fn offsets(&self) -> &[usize] {
        &self.offsets
    }
    /// Bytes one halo exchange moves (all domains; `f64`).
    pub fn halo_bytes_per_apply(&self) -> u64 {
        8 * self.halo_values
    }
    /// Bytes one halo exchange moves between devices (NCCL).
    pub fn remote_bytes_per_apply(&self) -> u64 {
        8 * self.remote_values
    }
    /// The device of domain `d`.
    pub fn gpu_of(&self, d: usize) -> &'g Gpu {
        self.devices[self.domains[d].dev].gpu
    }

    fn check_parts(&self, what: &str, v: &[DeviceBuffer<f64>]) -> Result<(), SolveError> {
        if v.len() != self.domains.len() {
            return Err(SolveError::InvalidInput {
                what: "device domains",
                message: format!(
                    "{what}: {} parts for {} domains",
                    v.len(),
                    self.domains.len()
                ),
            });
        }
        for (d, (b, dm)) in v.iter().zip(&self.domains).enumerate() {
            if b.len() < dm.n_owned * self.e {
                return Err(SolveError::InvalidInput {
                    what: "device domains",
                    message: format!(
                        "{what}, domain {d}: {} values for {} owned DOFs",
                        b.len(),
                        dm.n_owned * self.e
                    ),
                });
            }
        }
        Ok(())
    }

    /// New per-domain vectors (owned parts) of zeros, each on its domain's device.
    pub fn zeros(&self) -> Result<Vec<DeviceBuffer<f64>>, SolveError> {
        self.domains
            .iter()
            .map(|d| Ok(self.devices[d.dev].gpu.zeros::<f64>(d.n_owned * self.e)?))
            .collect()
    }
    /// Upload a concatenated vector (domain 0's owned values, then domain 1's, ...).
    pub fn upload(&self, v: &[f64]) -> Result<Vec<DeviceBuffer<f64>>, SolveError> {
        let n = self.offsets[self.domains.len()] * self.e;
        if v.len() != n {
            return Err(SolveError::Dimension {
                expected: n,
                found: v.len(),
            });
        }
        self.domains
            .iter()
            .enumerate()
            .map(|(d, dm)| {
                let r = self.offsets[d] * self.e..self.offsets[d + 1] * self.e;
                up(self.devices[dm.dev].gpu, &v[r])
            })
            .collect()
    }
    /// Download per-domain vectors into one concatenated vector.
    pub fn download(&self, v: &[DeviceBuffer<f64>]) -> Result<Vec<f64>, SolveError> {
        self.check_parts("download", v)?;
        let mut out = Vec::with_capacity(self.offsets[self.domains.len()] * self.e);
        for (b, dm) in v.iter().zip(&self.domains) {
            out.extend(
                self.devices[dm.dev]
                    .gpu
                    .download_range(b, 0..dm.n_owned * self.e)?,
            );
        }
        Ok(out)
    }

    /// `y = A x` on per-domain vectors (see the [module docs](self)); enqueued, not waited for.
    pub fn apply(
        &self,
        x: &[DeviceBuffer<f64>],
        y: &mut [DeviceBuffer<f64>],
    ) -> Result<(), SolveError> {
        self.check_parts("x", x)?;
        self.check_parts("y", y)?;
        let mut guard = self.scratch.lock().unwrap_or_else(|p| p.into_inner());
        let sc = &mut *guard;
        self.pack(x, sc)?;
        self.exchange(sc)?;
        let all = DomainFilter(usize::MAX);
        if self.concurrent_boundary {
            // boundary bins on the exchange stream, behind the halo they read; the interior
            // bins make room for them ([`BinSchedule`])
            self.spmv_filtered(x, sc, y, Bins::Boundary, &all)?;
            self.spmv_filtered(x, sc, y, Bins::InteriorBesideBoundary, &all)?;
            self.main_waits_for_side(|d| &d.delivered)
        } else {
            self.spmv_filtered(x, sc, y, Bins::Interior, &all)?;
            self.main_waits_for_side(|d| &d.delivered)?;
            self.spmv_filtered(x, sc, y, Bins::Boundary, &all)
        }
    }

    /// On every device with an exchange stream: the exchange stream waits for the work
    /// enqueued so far on the main stream (marked by the device's event `ev`).
    fn side_waits_for_main(
        &self,
        ev: for<'a> fn(&'a Device<'g>) -> &'a Event,
    ) -> Result<(), SolveError> {
        for dev in &self.devices {
            if let Some(side) = &dev.side {
                ev(dev).record(dev.gpu)?;
                side.wait_event(ev(dev))?;
            }
        }
        Ok(())
    }

    /// On every device with an exchange stream: the main stream waits for the work enqueued
    /// so far on the exchange stream (marked by the device's event `ev`).
    fn main_waits_for_side(
        &self,
        ev: for<'a> fn(&'a Device<'g>) -> &'a Event,
    ) -> Result<(), SolveError> {
        for dev in &self.devices {
            if let Some(side) = &dev.side {
                ev(dev).record(side)?;
                dev.gpu.wait_event(ev(dev))?;
            }
        }
        Ok(())
    }

    /// Sum of every device's partial-sum slots `red` into `red_all` of every device (NCCL
    /// all-reduce on the exchange streams, once the main streams have written the partials).
    fn all_reduce_slots(&self, comm: &NcclComm, sc: &mut Scratch) -> Result<(), SolveError> {
        self.side_waits_for_main(|d| &d.partials_done)?;
        let send: Vec<&DeviceBuffer<f64>> = self.devices.iter().map(|d| &d.red).collect();
        let mut recv: Vec<&mut DeviceBuffer<f64>> = sc.red_all.iter_mut().collect();
        comm.all_reduce_sum(&send, &mut recv)?;
        Ok(())
    }

    /// Pack on the exchange stream, once the main stream has written `x`.
    fn pack(&self, x: &[DeviceBuffer<f64>], sc: &mut Scratch) -> Result<(), SolveError> {
        self.side_waits_for_main(|d| &d.x_ready)?;
        for (d, dm) in self.domains.iter().enumerate() {
            let dev = &self.devices[dm.dev];
            halo_pack(
                &dev.k,
                dev.side(),
                dm.n_send,
                self.e,
                &dm.send_idx,
                &x[d],
                &mut sc.send[d],
            )?;
        }
        Ok(())
    }

    fn exchange(&self, sc: &mut Scratch) -> Result<(), SolveError> {
        for (dev, list) in self.devices.iter().zip(&self.copies) {
            for t in list {
                dev.side().copy_device_range(
                    &sc.send[t.from_buf],
                    t.from.start,
                    &mut sc.halo[t.to_buf],
                    t.to_at,
                    t.from.len(),
                )?;
            }
        }
        if let Some(comm) = &self.nccl {
            if !self.remote.is_empty() {
                let sends: Vec<(usize, &DeviceBuffer<f64>)> = self
                    .domains
                    .iter()
                    .zip(&sc.send)
                    .map(|(dm, b)| (dm.dev, b))
                    .collect();
                let mut recvs: Vec<(usize, &mut DeviceBuffer<f64>)> = self
                    .domains
                    .iter()
                    .zip(sc.halo.iter_mut())
                    .map(|(dm, b)| (dm.dev, b))
                    .collect();
                comm.exchange(&sends, &mut recvs, &self.remote)?;
            }
        }
        Ok(())
    }

    /// One range of bins ([`Bins`]) of every domain (or of the domain `only` names).
    fn spmv_filtered(
        &self,
        x: &[DeviceBuffer<f64>],
        sc: &mut Scratch,
        y: &mut [DeviceBuffer<f64>],
        bins: Bins,
        only: &DomainFilter,
    ) -> Result<(), SolveError> {
        let interior = bins != Bins::Boundary;
        for (d, dm) in self.domains.iter().enumerate() {
            if only.0 != usize::MAX && only.0 != d {
                continue;
            }
            let dev = &self.devices[dm.dev];
            // the boundary bins run on the exchange stream when they run beside the interior
            let g = if bins == Bins::Boundary && self.concurrent_boundary {
                dev.side()
            } else {
                dev.gpu
            };
            let (first, nb) = if interior {
                (0, dm.interior_bins)
            } else {
                (dm.interior_bins, dm.nbins - dm.interior_bins)
            };
            if nb == 0 {
                continue;
            }
            let p = dm.matrix.pattern();
            let counter = &mut sc.counters[d][usize::from(!interior)];
            let warps_per_block = (BLOCK / 32) as usize;
            let persistent = self.schedule == BinSchedule::Resident;
            let mut blocks = nb.div_ceil(warps_per_block);
            if persistent {
                g.memset_zero(counter)?;
                // resident blocks only (the bins are handed out dynamically): all of them,
                // or, beside the boundary bins, one per multiprocessor fewer
                let per_sm = match bins {
                    Bins::InteriorBesideBoundary if dm.nbins > dm.interior_bins => {
                        dev.spmv_blocks_per_sm.saturating_sub(1).max(1)
                    }
                    _ => dev.spmv_blocks_per_sm.max(1),
                };
                blocks = blocks.min(g.sm_count().max(1) as usize * per_sm as usize);
            }
            let blocks = to_u32(blocks.max(1), "SpMV blocks")?;
            let persistent = u32::from(persistent);
            let (n, first32, nb32) = (to_u32(dm.n_owned, "owned nodes")?, first as u32, nb as u32);
            // the interior bins read no halo value: they get the owned part as a placeholder,
            // so they do not wait for the exchange that writes the halo part
            let xh = if interior { &x[d] } else { &sc.halo[d] };
            g.launch(&dev.spmv, LaunchConfig::blocks(blocks, BLOCK))
                .arg(&n)
                .arg(&first32)
                .arg(&nb32)
                .arg(&p.bin_offsets)
                .arg(&p.row_lengths)
                .arg(&p.col_indices)
                .arg(&dm.matrix.values)
                .arg(&dm.matrix.diag)
                .arg(&x[d])
                .arg(xh)
                .arg(&y[d])
                .arg(&*counter)
                .arg(&persistent)
                .run()?;
        }
        Ok(())
    }
}

impl DeviceDomains<'_> {
    /// The global sums of partial-sum slots `slots` (slot `s` of domain `d` is element
    /// `s k + d` of its device's buffer): across devices an NCCL all-reduce, then the host adds
    /// the domains' partials in domain order (the initial residual and δ of a solve; the
    /// iterations reduce on the devices, [`DeviceDomains::reduce_on_devices`]).
    fn reduce(&self, slots: &[usize]) -> Result<Vec<f64>, SolveError> {
        let k = self.domains.len();
        let vals = if let Some(comm) = &self.nccl {
            let mut guard = self.scratch.lock().unwrap_or_else(|p| p.into_inner());
            self.all_reduce_slots(comm, &mut guard)?;
            self.devices[0].side().download(&guard.red_all[0])?
        } else {
            self.devices[0].gpu.download(&self.devices[0].red)?
        };
        Ok(slots
            .iter()
            .map(|&s| vals[s * k..(s + 1) * k].iter().sum())
            .collect())
    }

    /// Solve `A x = b` with Dirichlet constraints by the filtered block-Jacobi PCG of
    /// [`crate::pcg::pcg`] on the domains (see the [module docs](self)): `b`, `cons` and `x` are
    /// concatenated over the domains' owned nodes, like the vectors of
    /// [`crate::PartitionedOperator`]. Same iteration, checks, report and errors as the CPU
    /// solver; the scalars of the iteration are formed on every device from the all-reduced
    /// partial sums (see the [module docs](self)).
    pub fn pcg(
        &self,
        b: &[f64],
        cons: &Constraints,
        params: &PcgParams,
        x: &mut Vec<f64>,
    ) -> Result<SolveReport, SolveError> {
        self.pcg_with(b, cons, params, DomainPreconditioner::BlockJacobi, x)
    }

    /// [`DeviceDomains::pcg`] with the preconditioner `prec`: block Jacobi, or the
    /// domain-local AMG ([`DeviceDomainAmg`], one V-cycle per domain on its part of the
    /// residual: additive Schwarz), the iteration of [`crate::pcg::pcg_with`].
    pub fn pcg_with(
        &self,
        b: &[f64],
        cons: &Constraints,
        params: &PcgParams,
        prec: DomainPreconditioner<'_, '_>,
        x: &mut Vec<f64>,
    ) -> Result<SolveReport, SolveError> {
        let e = self.e;
        let k = self.domains.len();
        let n = self.offsets[k] * e;
        check_system(n, b, cons)?;
        let e32 = to_u32(e, "block size")?;
        let amg = match prec {
            DomainPreconditioner::BlockJacobi => None,
            DomainPreconditioner::Amg(a) => {
                if a.amgs.len() != k {
                    return Err(SolveError::InvalidInput {
                        what: "device domains",
                        message: format!("{} domain hierarchies for {k} domains", a.amgs.len()),
                    });
                }
                Some(a)
            }
        };
        // per domain: inverted diagonal blocks (block Jacobi), constraint mask
        let mut inv = Vec::with_capacity(k);
        let mut fixed = Vec::with_capacity(k);
        for (d, dm) in self.domains.iter().enumerate() {
            let g = self.devices[dm.dev].gpu;
            let lo = self.offsets[d];
            let fx = &cons.fixed[lo * e..self.offsets[d + 1] * e];
            if amg.is_none() {
                let diag = g.download_range(&dm.matrix.diag, 0..dm.n_owned * e * e)?;
                let blocks: Vec<Result<Vec<f64>, SolveError>> = (0..dm.n_owned)
                    .into_par_iter()
                    .with_min_len(1024)
                    .map(|i| {
                        let mut blk = diag[i * e * e..(i + 1) * e * e].to_vec();
                        identity_on_fixed(&mut blk, e, &fx[i * e..(i + 1) * e]);
                        invert_small(&blk, e).ok_or(SolveError::SingularBlock { node: lo + i })
                    })
                    .collect();
                let mut flat = Vec::with_capacity(dm.n_owned * e * e);
                for r in blocks {
                    flat.extend(r?);
                }
                inv.push(up(g, &flat)?);
            }
            let f: Vec<u32> = fx.iter().map(|&f| u32::from(f)).collect();
            fixed.push(up(g, &f)?);
        }
        let mut scal = self
            .devices
            .iter()
            .map(|dev| DeviceScalars::new(dev.gpu, params.max_iterations))
            .collect::<Result<Vec<_>, _>>()?;
        let kns = self
            .devices
            .iter()
            .map(|dev| DomainKernels::new(&dev.k))
            .collect::<Result<Vec<_>, _>>()?;
        let xd = self.upload(&cons.start_vector())?;
        let bd = self.upload(b)?;
        let mut r = self.zeros()?;
        let c = self.zeros()?;
        let mut q = self.zeros()?;
        let s = self.zeros()?;
        let lens: Vec<u32> = self
            .domains
            .iter()
            .map(|dm| to_u32(dm.n_owned * e, "DOFs"))
            .collect::<Result<_, _>>()?;
        let nodes: Vec<u32> = self.domains.iter().map(|dm| dm.n_owned as u32).collect();
        self.note_memory()?;
        // r = S(b - A x0), ‖r‖, c = S P⁻¹ r, δ = rᵀc
        self.apply(&xd, &mut r)?;
        for (d, dm) in self.domains.iter().enumerate() {
            let dev = &self.devices[dm.dev];
            let g = dev.gpu;
            let kk = &dev.k;
            g.launch(&kk.k("pcg_residual")?, cfg(lens[d] as usize, BLOCK)?)
                .arg(&lens[d])
                .arg(&bd[d])
                .arg(&fixed[d])
                .arg(&r[d])
                .run()?;
            self.dot(d, &r[d], &r[d], 1)?;
            match amg {
                None => {
                    g.launch(&kk.k("pcg_jacobi")?, cfg(dm.n_owned, BLOCK)?)
                        .arg(&nodes[d])
                        .arg(&e32)
                        .arg(&inv[d])
                        .arg(&fixed[d])
                        .arg(&r[d])
                        .arg(&c[d])
                        .run()?;
                    self.dot(d, &r[d], &c[d], 2)?;
                }
                Some(a) => self.precondition_amg(a, d, &r[d], &c[d], &fixed[d], &scal, &kns)?,
            }
        }
        let sums = self.reduce(&[1, 2])?;
        let r0 = sums[0].sqrt();
        let delta = sums[1];
        let history = vec![1.0];
        if !r0.is_finite() {
            return Err(SolveError::NonFinite {
                what: "initial residual",
                iteration: 0,
            });
        }
        if r0 == 0.0 {
            *x = self.download(&xd)?;
            return Ok(SolveReport {
                iterations: 0,
                final_residual: 0.0,
                history,
            });
        }
        // The iterations run without host synchronisation: every device holds the scalars
        // of the one-domain kernels (st = [δ, α, β, r0, tol, divergence], status, history)
        // and forms α and β itself from the all-reduced partial sums, added in domain order
        // (dd_sum_slots), so all devices compute the same numbers. The host polls the status
        // of device 0 every `poll` iterations; once a device has ended the solve, every
        // vector kernel returns at once and the iterate stays frozen.
        let st0 = device_pcg_state(delta, r0, params);
        for (dev, sc) in self.devices.iter().zip(&mut scal) {
            dev.gpu.copy_to_device(&st0, &mut sc.st)?;
        }
        let poll = if amg.is_some() { 4 } else { 16 };
        // across devices (NCCL), block Jacobi updates x on the main streams while the
        // partials of rᵀr and rᵀs are all-reduced on the exchange streams (same arithmetic
        // per element as the fused update, so the iterates do not change)
        let split_x = amg.is_none() && self.nccl.is_some() && self.overlap_update;
        let monitored = crate::monitor::is_monitored();
        let mut last_report = Instant::now();
        let mut ended: Option<(u32, usize)> = None;
        let mut last = 0usize;
        for it in 1..=params.max_iterations {
            let it32 = it as u32;
            self.apply(&c, &mut q)?;
            // q = S(A c) and the partials of cᵀq, slot d
            for (d, dm) in self.domains.iter().enumerate() {
                let (dev, kn, sc) = (&self.devices[dm.dev], &kns[dm.dev], &scal[dm.dev]);
                dev.gpu
                    .launch(&kn.filter_dot, LaunchConfig::blocks(DOT_BLOCKS, 256))
                    .arg(&lens[d])
                    .arg(&fixed[d])
                    .arg(&q[d])
                    .arg(&c[d])
                    .arg(&dm.partial)
                    .arg(&sc.status)
                    .run()?;
                dev.gpu
                    .launch(&kn.dot_final, LaunchConfig::blocks(1, 256))
                    .arg(&DOT_BLOCKS)
                    .arg(&dm.partial)
                    .arg(&dev.red)
                    .arg(&(d as u32))
                    .arg(&sc.status)
                    .run()?;
            }
            self.reduce_on_devices(0, 1, &scal, &kns)?;
            for (dev, (kn, sc)) in self.devices.iter().zip(kns.iter().zip(&scal)) {
                dev.gpu
                    .launch(&kn.alpha, LaunchConfig::blocks(1, 1))
                    .arg(&sc.out)
                    .arg(&sc.st)
                    .arg(&sc.status)
                    .arg(&it32)
                    .run()?;
            }
            for (d, dm) in self.domains.iter().enumerate() {
                let (dev, kn, sc) = (&self.devices[dm.dev], &kns[dm.dev], &scal[dm.dev]);
                let g = dev.gpu;
                let (sa, sb) = ((k + d) as u32, (2 * k + d) as u32);
                match amg {
                    None => {
                        // r -= α q, s = S(P⁻¹ r), partials of rᵀr and rᵀs, and x += α c in
                        // the same pass, or (split_x) while these partials are all-reduced
                        // across the devices
                        let update = if split_x {
                            &kn.update_rs
                        } else {
                            &kn.update_jacobi
                        };
                        g.launch(update, LaunchConfig::blocks(UPDATE_BLOCKS, 256))
                            .arg(&nodes[d])
                            .arg(&e32)
                            .arg(&sc.st)
                            .arg(&sc.status)
                            .arg(&inv[d])
                            .arg(&fixed[d])
                            .arg(&c[d])
                            .arg(&q[d])
                            .arg(&xd[d])
                            .arg(&r[d])
                            .arg(&s[d])
                            .arg(&dm.partial2)
                            .run()?;
                        g.launch(&kn.dot_final2, LaunchConfig::blocks(1, 256))
                            .arg(&UPDATE_BLOCKS)
                            .arg(&dm.partial2)
                            .arg(&dev.red)
                            .arg(&sa)
                            .arg(&sb)
                            .arg(&sc.status)
                            .run()?;
                    }
                    Some(a) => {
                        // x += α c, r -= α q and rᵀr; then s = S M_d⁻¹ r and rᵀs (after the
                        // solve has ended the cycle still runs on the frozen residual, unused)
                        g.launch(&kn.update, LaunchConfig::blocks(DOT_BLOCKS, 256))
                            .arg(&lens[d])
                            .arg(&sc.st)
                            .arg(&sc.status)
                            .arg(&c[d])
                            .arg(&q[d])
                            .arg(&xd[d])
                            .arg(&r[d])
                            .arg(&dm.partial)
                            .run()?;
                        g.launch(&kn.dot_final, LaunchConfig::blocks(1, 256))
                            .arg(&DOT_BLOCKS)
                            .arg(&dm.partial)
                            .arg(&dev.red)
                            .arg(&sa)
                            .arg(&sc.status)
                            .run()?;
                        self.precondition_amg(a, d, &r[d], &s[d], &fixed[d], &scal, &kns)?;
                    }
                }
            }
            self.reduce_on_devices_beside(1, 2, &scal, &kns, || {
                if !split_x {
                    return Ok(());
                }
                for (d, dm) in self.domains.iter().enumerate() {
                    let (dev, kn, sc) = (&self.devices[dm.dev], &kns[dm.dev], &scal[dm.dev]);
                    dev.gpu
                        .launch(&kn.update_x, cfg(lens[d] as usize, BLOCK)?)
                        .arg(&lens[d])
                        .arg(&sc.st)
                        .arg(&sc.status)
                        .arg(&c[d])
                        .arg(&xd[d])
                        .run()?;
                }
                Ok(())
            })?;
            for (dev, (kn, sc)) in self.devices.iter().zip(kns.iter().zip(&scal)) {
                dev.gpu
                    .launch(&kn.beta, LaunchConfig::blocks(1, 1))
                    .arg(&sc.out)
                    .arg(&sc.st)
                    .arg(&sc.status)
                    .arg(&sc.hist)
                    .arg(&it32)
                    .run()?;
            }
            for (d, dm) in self.domains.iter().enumerate() {
                let (dev, kn, sc) = (&self.devices[dm.dev], &kns[dm.dev], &scal[dm.dev]);
                dev.gpu
                    .launch(&kn.direction, cfg(lens[d] as usize, BLOCK)?)
                    .arg(&lens[d])
                    .arg(&sc.st)
                    .arg(&sc.status)
                    .arg(&s[d])
                    .arg(&c[d])
                    .run()?;
            }
            last = it;
            if it % poll == 0 || it == params.max_iterations {
                let g0 = self.devices[0].gpu;
                let sv = g0.download_range(&scal[0].status, 0..2)?;
                if sv[0] != 0 {
                    ended = Some((sv[0], sv[1] as usize));
                    break;
                }
                if monitored && last_report.elapsed() >= crate::monitor::GPU_REPORT_INTERVAL {
                    crate::monitor::report(it, g0.download_at(&scal[0].hist, it)?);
                    last_report = Instant::now();
                }
            }
        }
        let g0 = self.devices[0].gpu;
        let (hist, st) = (&scal[0].hist, &scal[0].st);
        device_pcg_result(g0, ended, last, hist, st, history, params, || {
            *x = self.download(&xd)?;
            Ok(())
        })
    }

    /// Global sums of the partial-sum slots `s0 .. s0 + ns` into `out[s]` of every device's
    /// scalars, without a host synchronisation: across devices an NCCL all-reduce of the
    /// per-device slot buffers (on the exchange stream, ordered by events), then on every
    /// device `dd_sum_slots` adds the domains' partials in domain order.
    fn reduce_on_devices(
        &self,
        s0: u32,
        ns: u32,
        scal: &[DeviceScalars],
        kns: &[DomainKernels],
    ) -> Result<(), SolveError> {
        self.reduce_on_devices_beside(s0, ns, scal, kns, || Ok(()))
    }

    /// [`DeviceDomains::reduce_on_devices`], enqueueing `beside` on the main streams while the
    /// all-reduce runs on the exchange streams (work that does not read the sums).
    fn reduce_on_devices_beside(
        &self,
        s0: u32,
        ns: u32,
        scal: &[DeviceScalars],
        kns: &[DomainKernels],
        beside: impl FnOnce() -> Result<(), SolveError>,
    ) -> Result<(), SolveError> {
        let k32 = self.domains.len() as u32;
        let mut guard = self.scratch.lock().unwrap_or_else(|p| p.into_inner());
        let sc = &mut *guard;
        if let Some(comm) = &self.nccl {
            self.all_reduce_slots(comm, sc)?;
            beside()?;
            self.main_waits_for_side(|d| &d.reduced)?;
        } else {
            beside()?;
        }
        for (i, dev) in self.devices.iter().enumerate() {
            let red = if self.nccl.is_some() {
                &sc.red_all[i]
            } else {
                &dev.red
            };
            dev.gpu
                .launch(&kns[i].sum_slots, LaunchConfig::blocks(1, 32))
                .arg(&k32)
                .arg(red)
                .arg(&scal[i].out)
                .arg(&s0)
                .arg(&ns)
                .arg(&scal[i].status)
                .run()?;
        }
        Ok(())
    }

    /// `z = S M_d⁻¹ r` on domain `d` (one V-cycle of its hierarchy, then the constraint
    /// filter) and the partials of `rᵀz` into slot `2 k + d` (skipped once the status of the
    /// domain's device in `scal` has ended the solve).
    #[allow(clippy::too_many_arguments)]
    fn precondition_amg(
        &self,
        amg: &DeviceDomainAmg,
        d: usize,
        r: &DeviceBuffer<f64>,
        z: &DeviceBuffer<f64>,
        fixed: &DeviceBuffer<u32>,
        scal: &[DeviceScalars],
        kns: &[DomainKernels],
    ) -> Result<(), SolveError> {
        let dm = &self.domains[d];
        let (dev, kn, sc) = (&self.devices[dm.dev], &kns[dm.dev], &scal[dm.dev]);
        let g = dev.gpu;
        let len = to_u32(dm.n_owned * self.e, "DOFs")?;
        amg.amgs[d].cycle(&dev.k, r, z)?;
        g.launch(&kn.filter_dot, LaunchConfig::blocks(DOT_BLOCKS, 256))
            .arg(&len)
            .arg(fixed)
            .arg(z)
            .arg(r)
            .arg(&dm.partial)
            .arg(&sc.status)
            .run()?;
        let at = (2 * self.domains.len() + d) as u32;
        g.launch(&kn.dot_final, LaunchConfig::blocks(1, 256))
            .arg(&DOT_BLOCKS)
            .arg(&dm.partial)
            .arg(&dev.red)
            .arg(&at)
            .arg(&sc.status)
            .run()?;
        Ok(())
    }

    /// `a · b` of domain `d` into its slot `slot k + d` (deterministic two-pass sum).
    fn dot(
        &self,
        d: usize,
        a: &DeviceBuffer<f64>,
        b: &DeviceBuffer<f64>,
        slot: usize,
    ) -> Result<(), SolveError> {
        let dm = &self.domains[d];
        let dev = &self.devices[dm.dev];
        let g = dev.gpu;
        let len = to_u32(dm.n_owned * self.e, "DOFs")?;
        g.launch(
            &dev.k.k("dot_partial")?,
            LaunchConfig::blocks(DOT_BLOCKS, 256),
        )
        .arg(&len)
        .arg(a)
        .arg(b)
        .arg(&dm.partial)
        .run()?;
        let at = (slot * self.domains.len() + d) as u32;
        g.launch(&dev.k.k("dot_final")?, LaunchConfig::blocks(1, 256))
            .arg(&DOT_BLOCKS)
            .arg(&dm.partial)
            .arg(&dev.red)
            .arg(&at)
            .run()?;
        Ok(())
    }

    /// Wait for all devices' streams.
    pub fn synchronize(&self) -> Result<(), SolveError> {
        for d in &self.devices {
            d.gpu.synchronize()?;
            if let Some(s) = &d.side {
                s.synchronize()?;
            }
        }
        Ok(())
    }

    /// Times of the stages of one `apply` on `x` (each stage run alone and waited for, then
    /// the whole overlapped `apply`), medians of `runs` after one warm-up.
    pub fn timed_apply(
        &self,
        x: &[DeviceBuffer<f64>],
        y: &mut [DeviceBuffer<f64>],
        runs: usize,
    ) -> Result<DeviceApplyTimes, SolveError> {
        let runs = runs.max(1);
        self.apply(x, y)?;
        self.synchronize()?;
        let med = |mut v: Vec<f64>| tessera_gpu::median(&mut v);
        let mut t = DeviceApplyTimes::default();
        let mut pack = Vec::new();
        let mut exch = Vec::new();
        let mut whole = Vec::new();
        let mut guard = self.scratch.lock().unwrap_or_else(|p| p.into_inner());
        for _ in 0..runs {
            let t0 = Instant::now();
            self.pack(x, &mut guard)?;
            self.synchronize()?;
            pack.push(t0.elapsed().as_secs_f64() * 1e3);
            let t0 = Instant::now();
            self.exchange(&mut guard)?;
            self.synchronize()?;
            exch.push(t0.elapsed().as_secs_f64() * 1e3);
        }
        t.pack_ms = med(pack);
        t.exchange_ms = med(exch);
        // per-domain SpMV: a domain's interior and boundary bins alone
        for d in 0..self.domains.len() {
            let mut v = Vec::new();
            for _ in 0..runs {
                let t0 = Instant::now();
                self.spmv_one(d, x, &mut guard, y)?;
                self.synchronize()?;
                v.push(t0.elapsed().as_secs_f64() * 1e3);
            }
            t.spmv_ms.push(med(v));
        }
        drop(guard);
        for _ in 0..runs {
            let t0 = Instant::now();
            self.apply(x, y)?;
            self.synchronize()?;
            whole.push(t0.elapsed().as_secs_f64() * 1e3);
        }
        t.apply_ms = med(whole);
        Ok(t)
    }

    fn spmv_one(
        &self,
        d: usize,
        x: &[DeviceBuffer<f64>],
        sc: &mut Scratch,
        y: &mut [DeviceBuffer<f64>],
    ) -> Result<(), SolveError> {
        // the SpMV of every domain is launched per domain; run only `d`'s by a filtered view
        let only = DomainFilter(d);
        self.spmv_filtered(x, sc, y, Bins::Boundary, &only)?;
        self.spmv_filtered(x, sc, y, Bins::Interior, &only)
    }
}

/// Restricts an SpMV pass to one domain (for per-domain timings).
struct DomainFilter(usize);

/// Which bins an SpMV launch multiplies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bins {
    /// The interior bins with every resident block.
    Interior,
    /// The interior bins, leaving one block per multiprocessor to the boundary bins that
    /// run at the same time on the exchange stream.
    InteriorBesideBoundary,
    /// The boundary bins (rows with halo columns).
    Boundary,
}

/// The scalars of the partitioned PCG on one device, as in the one-domain PCG without host
/// synchronisation (`pcg_alpha`, `pcg_beta`): `st = [δ, α, β, r0, tol, divergence, cᵀq of a
/// breakdown, -]`, `status = [state, iteration]`, the relative residual history, and the
/// global sums `out = [cᵀq, rᵀr, rᵀs]`. Every device holds its own copy, computed from the
/// same all-reduced partials in the same order, so all copies are equal.
struct DeviceScalars {
    st: DeviceBuffer<f64>,
    status: DeviceBuffer<u32>,
    hist: DeviceBuffer<f64>,
    out: DeviceBuffer<f64>,
}

impl DeviceScalars {
    fn new(g: &Gpu, max_iterations: usize) -> Result<Self, SolveError> {
        Ok(Self {
            st: g.zeros::<f64>(8)?,
            status: g.zeros::<u32>(2)?,
            hist: g.zeros::<f64>(max_iterations + 1)?,
            out: g.zeros::<f64>(3)?,
        })
    }
}

/// The kernels of the partitioned PCG iteration on one device, resolved once per solve.
struct DomainKernels {
    filter_dot: Kernel,
    dot_final: Kernel,
    alpha: Kernel,
    beta: Kernel,
    update_jacobi: Kernel,
    update_rs: Kernel,
    update_x: Kernel,
    update: Kernel,
    dot_final2: Kernel,
    direction: Kernel,
    sum_slots: Kernel,
}

impl DomainKernels {
    fn new(k: &SolveKernels<'_>) -> Result<Self, SolveError> {
        Ok(Self {
            filter_dot: k.k("pcg_filter_dot_partial")?,
            dot_final: k.k("dot_final_dev")?,
            alpha: k.k("pcg_alpha")?,
            beta: k.k("pcg_beta")?,
            update_jacobi: k.k("pcg_update_precond_partial")?,
            update_rs: k.k("pcg_update_rs_partial")?,
            update_x: k.k("pcg_update_x")?,
            update: k.k("pcg_update_partial")?,
            dot_final2: k.k("dot_final2_dev")?,
            direction: k.k("pcg_direction_dev")?,
            sum_slots: k.k("dd_sum_slots")?,
        })
    }
}

/// The preconditioner of [`DeviceDomains::pcg_with`].
#[derive(Clone, Copy)]
pub enum DomainPreconditioner<'a, 'h> {
    /// Inverted `e × e` diagonal blocks (the same as on the global matrix).
    BlockJacobi,
    /// One AMG V-cycle per domain on its owned-owned block (additive Schwarz).
    Amg(&'a DeviceDomainAmg<'h>),
}

/// The domain-local AMG on the devices (dissertation §7.1.2 with the solver crate's AMG): one
/// smoothed-aggregation hierarchy per domain on its filtered owned-owned block `S A_oo S +
/// (I − S)` (halo couplings dropped), held on the domain's device, applied to every domain's
/// part of the residual independently - the device counterpart of [`crate::DomainAmg`].
pub struct DeviceDomainAmg<'h> {
    amgs: Vec<DeviceAmg<'h>>,
    /// Setup wall time per domain, ms.
    setup_ms: Vec<f64>,
}

impl DeviceDomainAmg<'static> {
    /// Set up every domain's hierarchy from its device matrix with [`DeviceAmg::setup`] (the
    /// block norms, `λ_max` estimates, smoothed prolongators and Galerkin products on the
    /// domain's device, aggregation on the host from the downloaded block norms). The
    /// owned-owned block is extracted and filtered on the device. `fixed` and `positions` are
    /// concatenated like the operator's vectors (3 flags and one position per owned node).
    pub fn setup(
        dd: &DeviceDomains<'_>,
        fixed: &[bool],
        positions: &[[f64; 3]],
        params: &AmgParams,
    ) -> Result<Self, SolveError> {
        let k = dd.domains.len();
        let o = &dd.offsets;
        if dd.e != 3 || fixed.len() != 3 * o[k] || positions.len() != o[k] {
            return Err(SolveError::Dimension {
                expected: o[k],
                found: positions.len(),
            });
        }
        let mut amgs = Vec::with_capacity(k);
        let mut setup_ms = Vec::with_capacity(k);
        for (d, dm) in dd.domains.iter().enumerate() {
            let t = Instant::now();
            let dev = &dd.devices[dm.dev];
            let fx = &fixed[3 * o[d]..3 * o[d + 1]];
            let a0 = owned_filtered_copy(&dev.k, &dm.matrix, fx)?;
            let amg = DeviceAmg::setup(&dev.k, a0, fx, &positions[o[d]..o[d + 1]], params, None)?;
            dev.gpu.synchronize()?;
            amgs.push(amg);
            setup_ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
        dd.note_memory()?;
        Ok(Self { amgs, setup_ms })
    }

    /// Upload the host hierarchies of a [`crate::DomainAmg`] (set up on the CPU from host
    /// domain matrices), domain `d`'s to its device.
    pub fn upload(dd: &DeviceDomains<'_>, amg: &crate::DomainAmg) -> Result<Self, SolveError> {
        let h = amg.hierarchies();
        if h.len() != dd.domains.len() {
            return Err(SolveError::InvalidInput {
                what: "device domains",
                message: format!("{} hierarchies for {} domains", h.len(), dd.domains.len()),
            });
        }
        let mut amgs = Vec::with_capacity(h.len());
        let mut setup_ms = Vec::with_capacity(h.len());
        for (d, a) in h.iter().enumerate() {
            let t = Instant::now();
            amgs.push(DeviceAmg::upload(dd.gpu_of(d), a, None)?);
            setup_ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
        Ok(Self { amgs, setup_ms })
    }
}

impl<'h> DeviceDomainAmg<'h> {
    /// The per-domain hierarchies.
    pub fn hierarchies(&self) -> &[DeviceAmg<'h>] {
        &self.amgs
    }
    /// Setup (or upload) wall time per domain, ms.
    pub fn setup_ms(&self) -> &[f64] {
        &self.setup_ms
    }
    /// Device bytes of all hierarchies.
    pub fn bytes(&self) -> usize {
        self.amgs.iter().map(|a| a.bytes()).sum()
    }
}

/// The filtered owned-owned block `S A_oo S + (I − S)` of a domain's device matrix (`3 × 3`
/// blocks) as device block CSR, equal to [`DomainMatrix::owned_block_filtered`].
pub fn owned_filtered_copy(
    k: &SolveKernels<'_>,
    m: &DeviceBinBcsr<f64>,
    fixed: &[bool],
) -> Result<DeviceBlockCsr, SolveError> {
    let p = m.pattern();
    let n = p.num_block_rows();
    if p.block_dim() != 3 {
        return Err(SolveError::InvalidInput {
            what: "domain multigrid",
            message: format!("needs 3 × 3 node blocks, not e = {}", p.block_dim()),
        });
    }
    if fixed.len() != 3 * n {
        return Err(SolveError::Dimension {
            expected: 3 * n,
            found: fixed.len(),
        });
    }
    let g = k.gpu();
    let nu = to_u32(n, "block rows")?;
    if n == 0 {
        return DeviceBlockCsr::from_parts(
            0,
            0,
            0,
            g.zeros::<u32>(1)?,
            g.zeros::<u32>(1)?,
            g.zeros::<f64>(9)?,
        );
    }
    let counts = g.alloc::<u32>(n)?;
    g.launch(&k.k("dd_owned_counts")?, cfg(n, BLOCK)?)
        .arg(&nu)
        .arg(&p.bin_offsets)
        .arg(&p.row_lengths)
        .arg(&p.col_indices)
        .arg(&counts)
        .run()?;
    let prim = g.primitives()?;
    let row_ptr = prim.offsets_from_counts(&counts)?;
    drop(counts);
    let nnz = g.download_at(&row_ptr, n)? as usize;
    let flags: Vec<u8> = fixed.iter().map(|&f| u8::from(f)).collect();
    let flags = g.upload(&flags)?;
    let cols = g.alloc::<u32>(nnz)?;
    let vals = g.alloc::<f64>(9 * nnz)?;
    g.launch(&k.k("dd_owned_filtered_copy")?, cfg(n, BLOCK)?)
        .arg(&nu)
        .arg(&p.bin_offsets)
        .arg(&p.row_lengths)
        .arg(&p.col_indices)
        .arg(&m.values)
        .arg(&m.diag)
        .arg(&flags)
        .arg(&row_ptr)
        .arg(&cols)
        .arg(&vals)
        .run()?;
    DeviceBlockCsr::from_parts(n, n, nnz, row_ptr, cols, vals)
}
