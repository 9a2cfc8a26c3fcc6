//! The operator and preconditioners of a domain-decomposed system (dissertation §7.1.2:
//! "local, per-domain matrix assembly in distributed or multi-GPU simulations using domain
//! decomposition"): every domain holds the block rows of the nodes it owns, and vectors are
//! stored per domain as their owned parts.
//!
//! A domain's local node numbering puts its **owned** nodes first - the `num_interior`
//! interior ones, whose rows reference owned columns only, then the boundary ones - followed by
//! its **halo**: the nodes its rows reference that other domains own, grouped by owner
//! (neighbour) in the order of that neighbour's send list. Its [`DomainMatrix`] is a
//! Bin-BCSR* matrix of `num_owned` block rows whose column indices are local indices
//! (`< num_owned + num_halo`); the diagonal blocks are the owned rows' own.
//!
//! `y = A x` on the domains ([`PartitionedOperator`]) is one **halo exchange** and a local
//! SpMV per domain:
//!
//! 1. pack: each domain gathers the owned values its neighbours need ([`HaloPlan::send_nodes`])
//!    into one send buffer, neighbour after neighbour;
//! 2. the rows of interior nodes (whole bins of 32) are multiplied - they need no halo value,
//!    so on a device this runs while the exchange is in flight;
//! 3. exchange ([`Communicator::exchange`]): the segment for each neighbour lands in that
//!    neighbour's halo part, which is laid out so the receive is contiguous (no unpack
//!    permutation);
//! 4. the remaining (boundary) bins are multiplied.
//!
//! Dot products are per-domain partial sums (each the deterministic chunked sum of
//! [`crate::dot`]) reduced in domain order ([`Communicator::all_reduce_sum`]), so results do
//! not depend on the thread count. The communicator is the only part that moves data between
//! domains: [`InProcess`] copies between the buffers of the domains of this process; an NCCL
//! or MPI communicator implements the same two calls.
//!
//! [`PartitionedOperator`] implements [`BlockOperator`] over the concatenation of the owned
//! parts (domain 0's owned nodes, then domain 1's, ...), so the filtered PCG ([`crate::pcg_with`])
//! runs on it unchanged: with block Jacobi ([`crate::BlockJacobi`], the same preconditioner as
//! on the global matrix, node by node) the iterates are those of the single-domain solve up to
//! the rounding of the different summation order. [`DomainAmg`] is the domain-local multigrid:
//! one AMG hierarchy per domain built on the domain's owned-owned block (halo couplings
//! dropped), applied to all domains at once - a non-overlapping additive Schwarz (block Jacobi
//! over domains) preconditioner with an AMG V-cycle as the subdomain solve. It equals the
//! global AMG for one domain and weakens as domains are added; [`crate::domain_amg`] adds the
//! coarse level that keeps the iteration count nearly independent of the domain count.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use rayon::prelude::*;
use tessera_sparse::binbcsr::{BinBcsr, BIN_SIZE};

use crate::amg::{Amg, AmgParams};
use crate::blockcsr::{offsets, BlockCsr};
use crate::error::SolveError;
use crate::operator::{dot, BlockOperator, Preconditioner};

/// Which owned nodes a domain sends to which neighbour, and where in its halo the values of
/// each neighbour land (see the [module docs](self)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HaloPlan {
    /// Neighbour domains, ascending: those that own a halo node of this domain, and those
    /// whose halo holds a node this domain owns (the same set: the coupling is symmetric).
    pub neighbours: Vec<u32>,
    /// `neighbours.len() + 1` offsets into [`Self::send_nodes`].
    pub send_offsets: Vec<u32>,
    /// Local indices of owned nodes sent to each neighbour, in the receiver's halo order
    /// (ascending global node).
    pub send_nodes: Vec<u32>,
    /// `neighbours.len() + 1` offsets into the halo part: the values from `neighbours[t]`
    /// fill halo nodes `recv_offsets[t]..recv_offsets[t + 1]`.
    pub recv_offsets: Vec<u32>,
}

impl HaloPlan {
    /// Nodes sent per exchange.
    pub fn num_send(&self) -> usize {
        self.send_nodes.len()
    }
    /// Nodes received per exchange (the halo size).
    pub fn num_recv(&self) -> usize {
        self.recv_offsets.last().copied().unwrap_or(0) as usize
    }
    /// Checks the offsets and that sent nodes are owned.
    pub fn validate(&self, num_owned: usize, num_halo: usize) -> Result<(), SolveError> {
        let bad = |m: String| SolveError::InvalidInput {
            what: "halo plan",
            message: m,
        };
        let nn = self.neighbours.len();
        if self.send_offsets.len() != nn + 1 || self.recv_offsets.len() != nn + 1 {
            return Err(bad(format!("{nn} neighbours need {} offsets", nn + 1)));
        }
        if self.neighbours.windows(2).any(|w| w[0] >= w[1]) {
            return Err(bad("neighbours not ascending".into()));
        }
        for o in [&self.send_offsets, &self.recv_offsets] {
            if o[0] != 0 || o.windows(2).any(|w| w[0] > w[1]) {
                return Err(bad("offsets not ascending from 0".into()));
            }
        }
        if self.send_offsets[nn] as usize != self.send_nodes.len() {
            return Err(bad("send offsets do not cover the send list".into()));
        }
        if self.num_recv() != num_halo {
            return Err(bad(format!(
                "receives {} nodes into a halo of {num_halo}",
                self.num_recv()
            )));
        }
        if let Some(&s) = self.send_nodes.iter().find(|&&s| s as usize >= num_owned) {
            return Err(bad(format!("sends node {s}, which is not owned")));
        }
        Ok(())
    }
    fn send_range(&self, t: usize) -> Range<usize> {
        self.send_offsets[t] as usize..self.send_offsets[t + 1] as usize
    }
    fn recv_range(&self, t: usize) -> Range<usize> {
        self.recv_offsets[t] as usize..self.recv_offsets[t + 1] as usize
    }
}

/// The rows of one domain: its owned rows in Bin-BCSR* with local column indices, and its
/// halo exchange plan (see the [module docs](self)).
#[derive(Clone, Debug)]
pub struct DomainMatrix {
    /// `num_owned` block rows; columns `< num_owned` are owned nodes, the others halo nodes
    /// `num_owned + h`.
    pub matrix: BinBcsr<f64>,
    /// Owned nodes `0..num_interior` have no halo column.
    pub num_interior: usize,
    /// Halo nodes.
    pub num_halo: usize,
    pub halo: HaloPlan,
}

impl DomainMatrix {
    /// Checks the column range, the interior rows and the plan.
    pub fn new(
        matrix: BinBcsr<f64>,
        num_interior: usize,
        num_halo: usize,
        halo: HaloPlan,
    ) -> Result<Self, SolveError> {
        let p = matrix.pattern();
        let no = p.num_block_rows();
        let bad = |m: String| SolveError::InvalidInput {
            what: "domain matrix",
            message: m,
        };
        if num_interior > no {
            return Err(bad(format!("{num_interior} interior of {no} owned rows")));
        }
        for i in 0..no {
            for j in p.row_cols(i) {
                let j = j as usize;
                if j >= no + num_halo {
                    return Err(bad(format!("row {i}: column {j} beyond the halo")));
                }
                if i < num_interior && j >= no {
                    return Err(bad(format!("interior row {i} has halo column {j}")));
                }
            }
        }
        halo.validate(no, num_halo)?;
        Ok(Self {
            matrix,
            num_interior,
            num_halo,
            halo,
        })
    }
    /// Owned nodes (block rows).
    pub fn num_owned(&self) -> usize {
        self.matrix.pattern().num_block_rows()
    }
    /// Owned and halo nodes.
    pub fn num_local(&self) -> usize {
        self.num_owned() + self.num_halo
    }
    /// Bins made of interior rows only (they can be multiplied before the exchange).
    pub fn interior_bins(&self) -> usize {
        self.num_interior / BIN_SIZE
    }
    /// Bins of the owned rows.
    pub fn num_bins(&self) -> usize {
        self.matrix.pattern().num_bins()
    }

    /// `y = A x` for the rows of `bins`: `x_owned` (`num_owned · e` values) and `x_halo`
    /// (`num_halo · e`) are the local vector, `y` holds the rows of `bins` only. Rows are
    /// summed in the order of the serial Bin-BCSR* SpMV (diagonal block, then the columns in
    /// local order).
    pub fn spmv_bins(
        &self,
        bins: Range<usize>,
        x_owned: &[f64],
        x_halo: &[f64],
        y: &mut [f64],
        parallel: bool,
    ) {
        let p = self.matrix.pattern();
        let e = p.block_dim();
        let n = p.num_block_rows();
        let chunk = BIN_SIZE * e;
        let first = bins.start;
        let run = |(b, yb): (usize, &mut [f64])| {
            let b = first + b;
            let e2 = e * e;
            let base = p.bin_offsets()[b] as usize;
            let w32 = p.bin_offsets()[b + 1] as usize - base;
            let vals = &self.matrix.values()[base * e2..];
            let diag = self.matrix.diag();
            for lane in 0..yb.len() / e {
                let i = b * BIN_SIZE + lane;
                let mut acc = [0.0f64; 3];
                let d = &diag[i * e2..(i + 1) * e2];
                let xi = &x_owned[i * e..(i + 1) * e];
                for k in 0..e {
                    for l in 0..e {
                        acc[k] += d[k * e + l] * xi[l];
                    }
                }
                for kk in 0..p.row_lengths()[i] as usize {
                    let s = kk * BIN_SIZE + lane;
                    let j = p.col_indices()[base + s] as usize;
                    let xj = if j < n {
                        &x_owned[j * e..(j + 1) * e]
                    } else {
                        &x_halo[(j - n) * e..(j - n + 1) * e]
                    };
                    for k in 0..e {
                        for l in 0..e {
                            acc[k] += vals[(k * e + l) * w32 + s] * xj[l];
                        }
                    }
                }
                yb[lane * e..(lane + 1) * e].copy_from_slice(&acc[..e]);
            }
        };
        if parallel {
            y.par_chunks_mut(chunk).enumerate().for_each(run);
        } else {
            y.chunks_mut(chunk).enumerate().for_each(run);
        }
    }

    /// The owned-owned block `A_dd` with the constrained DOFs `fixed` filtered as in
    /// [`BlockCsr::from_binbcsr_filtered`] (`S A S + I - S`); halo columns are dropped.
    /// `e = 3` only.
    pub fn owned_block_filtered(&self, fixed: &[bool]) -> Result<BlockCsr, SolveError> {
        self.rows_filtered(fixed, None)
    }

    /// The owned rows `Ā_{d,:}` with their halo columns, filtered like
    /// [`Self::owned_block_filtered`]: a `num_owned × num_local` block CSR matrix in local
    /// column numbering (owned, then halo). `fixed_halo` holds the constraint flags of the
    /// halo nodes (`3` per node, received from their owners). `e = 3` only.
    pub fn local_rows_filtered(
        &self,
        fixed: &[bool],
        fixed_halo: &[bool],
    ) -> Result<BlockCsr, SolveError> {
        if fixed_halo.len() != 3 * self.num_halo {
            return Err(SolveError::Dimension {
                expected: 3 * self.num_halo,
                found: fixed_halo.len(),
            });
        }
        self.rows_filtered(fixed, Some(fixed_halo))
    }

    fn rows_filtered(
        &self,
        fixed: &[bool],
        fixed_halo: Option<&[bool]>,
    ) -> Result<BlockCsr, SolveError> {
        let p = self.matrix.pattern();
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
        let fixed_of = |j: usize| -> &[bool] {
            if j < n {
                &fixed[3 * j..3 * j + 3]
            } else {
                let h = fixed_halo.expect("halo columns are kept only with their flags");
                &h[3 * (j - n)..3 * (j - n) + 3]
            }
        };
        let vals = self.matrix.values();
        let diag = self.matrix.diag();
        let rows: Vec<(Vec<u32>, Vec<f64>)> = (0..n)
            .into_par_iter()
            .with_min_len(256)
            .map(|i| {
                let b = i / BIN_SIZE;
                let lane = i % BIN_SIZE;
                let base = p.bin_offsets()[b] as usize;
                let w32 = p.bin_offsets()[b + 1] as usize - base;
                let mut ent: Vec<(u32, [f64; 9])> = Vec::new();
                let mut blk = [0.0; 9];
                blk.copy_from_slice(&diag[i * 9..(i + 1) * 9]);
                ent.push((i as u32, blk));
                for kk in 0..p.row_lengths()[i] as usize {
                    let s = kk * BIN_SIZE + lane;
                    let j = p.col_indices()[base + s];
                    if j as usize >= n && fixed_halo.is_none() {
                        continue;
                    }
                    for (q, v) in blk.iter_mut().enumerate() {
                        *v = vals[base * 9 + q * w32 + s];
                    }
                    ent.push((j, blk));
                }
                ent.sort_unstable_by_key(|x| x.0);
                let fi = &fixed[3 * i..3 * i + 3];
                let mut cols = Vec::with_capacity(ent.len());
                let mut out = Vec::with_capacity(9 * ent.len());
                for (j, mut b) in ent {
                    let fj = fixed_of(j as usize);
                    for r in 0..3 {
                        for q in 0..3 {
                            if fi[r] || fj[q] {
                                b[r * 3 + q] = if j as usize == i && r == q { 1.0 } else { 0.0 };
                            }
                        }
                    }
                    cols.push(j);
                    out.extend_from_slice(&b);
                }
                (cols, out)
            })
            .collect();
        let lens: Vec<u32> = rows.iter().map(|r| r.0.len() as u32).collect();
        let row_ptr = offsets(&lens)?;
        let mut cols = Vec::with_capacity(row_ptr[n] as usize);
        let mut v = Vec::with_capacity(9 * row_ptr[n] as usize);
        for (c, x) in rows {
            cols.extend(c);
            v.extend(x);
        }
        Ok(BlockCsr {
            nrows: n,
            ncols: if fixed_halo.is_some() {
                n + self.num_halo
            } else {
                n
            },
            row_ptr,
            cols,
            vals: v,
        })
    }
}

/// Moves halo values between domains and reduces partial sums (see the [module docs](self)).
/// The calls are collective over the domains the caller holds: `plans[d]`, `send[d]` and
/// `recv[d]` belong to the `d`-th of them.
pub trait Communicator: Sync {
    /// Deliver, for every held domain `d` and neighbour `t`, the packed values
    /// `send[d][e · send_offsets[t]..e · send_offsets[t + 1]]` into the halo part
    /// `recv[neighbours[t]][e · recv_offsets[s]..]` of the neighbour (with `s` the position of
    /// `d` among the neighbour's neighbours).
    fn exchange(
        &self,
        plans: &[&HaloPlan],
        e: usize,
        send: &[&[f64]],
        recv: &mut [&mut [f64]],
    ) -> Result<(), SolveError>;
    /// The sum of every domain's partial sum, added in domain order (the same value for every
    /// domain).
    fn all_reduce_sum(&self, partials: &[f64]) -> f64;
    /// A short name for reports.
    fn name(&self) -> &'static str;
}

/// All domains in this process: the exchange copies between their buffers.
#[derive(Clone, Copy, Debug, Default)]
pub struct InProcess;

impl Communicator for InProcess {
    fn exchange(
        &self,
        plans: &[&HaloPlan],
        e: usize,
        send: &[&[f64]],
        recv: &mut [&mut [f64]],
    ) -> Result<(), SolveError> {
        recv.par_iter_mut()
            .enumerate()
            .try_for_each(|(d, halo)| -> Result<(), SolveError> {
                let plan = plans[d];
                for (t, &j) in plan.neighbours.iter().enumerate() {
                    let from = plans.get(j as usize).ok_or(SolveError::InvalidInput {
                        what: "halo exchange",
                        message: format!("domain {d} names neighbour {j}, which is not held"),
                    })?;
                    let s = from.neighbours.binary_search(&(d as u32)).map_err(|_| {
                        SolveError::InvalidInput {
                            what: "halo exchange",
                            message: format!("domain {j} does not list domain {d}"),
                        }
                    })?;
                    let src = from.send_range(s);
                    let dst = plan.recv_range(t);
                    if src.len() != dst.len() {
                        return Err(SolveError::InvalidInput {
                            what: "halo exchange",
                            message: format!(
                                "domain {j} sends {} nodes to domain {d}, which expects {}",
                                src.len(),
                                dst.len()
                            ),
                        });
                    }
                    halo[dst.start * e..dst.end * e]
                        .copy_from_slice(&send[j as usize][src.start * e..src.end * e]);
                }
                Ok(())
            })
    }
    fn all_reduce_sum(&self, partials: &[f64]) -> f64 {
        partials.iter().sum()
    }
    fn name(&self) -> &'static str {
        "in-process"
    }
}

/// Buffers of one domain reused by every `apply`.
#[derive(Debug, Default)]
struct Scratch {
    send: Vec<f64>,
    halo: Vec<f64>,
}

/// Cumulative times of [`PartitionedOperator::apply`], per domain.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PartitionedTimes {
    /// Applications so far.
    pub applies: u64,
    /// Local SpMV (interior and boundary bins) per domain, ms.
    pub spmv_ms: Vec<f64>,
    /// Packing of send buffers per domain, ms.
    pub pack_ms: Vec<f64>,
    /// Halo exchanges (all domains together), ms.
    pub exchange_ms: f64,
}

/// The operator of a system split into domains (see the [module docs](self)).
pub struct PartitionedOperator<C: Communicator = InProcess> {
    e: usize,
    domains: Vec<DomainMatrix>,
    /// Block-row offsets of the domains in the concatenated owned vectors.
    offsets: Vec<usize>,
    comm: C,
    scratch: Vec<Mutex<Scratch>>,
    applies: AtomicU64,
    spmv_ns: Vec<AtomicU64>,
    pack_ns: Vec<AtomicU64>,
    exchange_ns: AtomicU64,
}

impl<C: Communicator> PartitionedOperator<C> {
    /// The operator of `domains` (all of one block size) with the communicator `comm`.
    /// Errors: mixed block sizes, or halo plans that do not match between neighbours.
    pub fn new(domains: Vec<DomainMatrix>, comm: C) -> Result<Self, SolveError> {
        let e = domains
            .first()
            .map_or(3, |d| d.matrix.pattern().block_dim());
        let mut offsets = vec![0usize];
        for (d, dm) in domains.iter().enumerate() {
            if dm.matrix.pattern().block_dim() != e {
                return Err(SolveError::InvalidInput {
                    what: "partitioned operator",
                    message: format!(
                        "domain {d} has block size {}",
                        dm.matrix.pattern().block_dim()
                    ),
                });
            }
            offsets.push(offsets[d] + dm.num_owned());
            for (t, &j) in dm.halo.neighbours.iter().enumerate() {
                let other = domains.get(j as usize).ok_or(SolveError::InvalidInput {
                    what: "partitioned operator",
                    message: format!("domain {d} names neighbour {j} of {}", domains.len()),
                })?;
                let s = other
                    .halo
                    .neighbours
                    .binary_search(&(d as u32))
                    .map_err(|_| SolveError::InvalidInput {
                        what: "partitioned operator",
                        message: format!("domain {j} does not list its neighbour {d}"),
                    })?;
                if other.halo.send_range(s).len() != dm.halo.recv_range(t).len() {
                    return Err(SolveError::InvalidInput {
                        what: "partitioned operator",
                        message: format!("domains {j} -> {d}: send and receive counts differ"),
                    });
                }
            }
        }
        let k = domains.len();
        let scratch = domains
            .iter()
            .map(|d| {
                Mutex::new(Scratch {
                    send: vec![0.0; d.halo.num_send() * e],
                    halo: vec![0.0; d.num_halo * e],
                })
            })
            .collect();
        Ok(Self {
            e,
            domains,
            offsets,
            comm,
            scratch,
            applies: AtomicU64::new(0),
            spmv_ns: (0..k).map(|_| AtomicU64::new(0)).collect(),
            pack_ns: (0..k).map(|_| AtomicU64::new(0)).collect(),
            exchange_ns: AtomicU64::new(0),
        })
    }

    /// The domains.
    pub fn domains(&self) -> &[DomainMatrix] {
        &self.domains
    }
    /// Block-row offsets of the domains in the concatenated vectors (`k + 1` entries).
    pub fn offsets(&self) -> &[usize] {
        &self.offsets
    }
    /// The communicator.
    pub fn communicator(&self) -> &C {
        &self.comm
    }
    /// Scalar values one halo exchange moves (all domains).
    pub fn halo_values_per_apply(&self) -> u64 {
        self.domains
            .iter()
            .map(|d| (d.num_halo * self.e) as u64)
            .sum()
    }
    /// Bytes one halo exchange moves (f64 values).
    pub fn halo_bytes_per_apply(&self) -> u64 {
        8 * self.halo_values_per_apply()
    }
    /// Cumulative times of the applications so far.
    pub fn times(&self) -> PartitionedTimes {
        let ms = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64 * 1e-6;
        PartitionedTimes {
            applies: self.applies.load(Ordering::Relaxed),
            spmv_ms: self.spmv_ns.iter().map(ms).collect(),
            pack_ms: self.pack_ns.iter().map(ms).collect(),
            exchange_ms: ms(&self.exchange_ns),
        }
    }

    /// The owned parts of a concatenated vector, one slice per domain.
    pub fn split<'v>(&self, v: &'v [f64]) -> Vec<&'v [f64]> {
        let mut out = Vec::with_capacity(self.domains.len());
        let mut rest = v;
        for w in self.offsets.windows(2) {
            let (a, b) = rest.split_at((w[1] - w[0]) * self.e);
            out.push(a);
            rest = b;
        }
        out
    }
    /// Mutable owned parts of a concatenated vector.
    pub fn split_mut<'v>(&self, v: &'v mut [f64]) -> Vec<&'v mut [f64]> {
        let mut out = Vec::with_capacity(self.domains.len());
        let mut rest = v;
        for w in self.offsets.windows(2) {
            let (a, b) = std::mem::take(&mut rest).split_at_mut((w[1] - w[0]) * self.e);
            out.push(a);
            rest = b;
        }
        out
    }

    /// The halo part of every domain for the concatenated vector `x` (`e` values per owned
    /// node): one pack and one [`Communicator::exchange`], as in [`Self::try_apply`]. Used
    /// at setup for node data the neighbours need (constraint flags).
    pub fn halo_values(&self, x: &[f64]) -> Result<Vec<Vec<f64>>, SolveError> {
        let n = self.num_dofs();
        if x.len() != n {
            return Err(SolveError::Dimension {
                expected: n,
                found: x.len(),
            });
        }
        let e = self.e;
        let xs = self.split(x);
        let sends: Vec<Vec<f64>> = self
            .domains
            .iter()
            .zip(&xs)
            .map(|(dm, xd)| {
                let mut s = Vec::with_capacity(dm.halo.num_send() * e);
                for &i in &dm.halo.send_nodes {
                    s.extend_from_slice(&xd[i as usize * e..(i as usize + 1) * e]);
                }
                s
            })
            .collect();
        let mut halos: Vec<Vec<f64>> = self
            .domains
            .iter()
            .map(|dm| vec![0.0; dm.num_halo * e])
            .collect();
        if self.domains.len() > 1 {
            let plans: Vec<&HaloPlan> = self.domains.iter().map(|d| &d.halo).collect();
            let send_refs: Vec<&[f64]> = sends.iter().map(|s| &s[..]).collect();
            let mut recv: Vec<&mut [f64]> = halos.iter_mut().map(|h| &mut h[..]).collect();
            self.comm.exchange(&plans, e, &send_refs, &mut recv)?;
        }
        Ok(halos)
    }

    /// `y = A x` with the result of every stage: the halo exchange, then the local SpMVs
    /// (see the [module docs](self)).
    pub fn try_apply(&self, x: &[f64], y: &mut [f64]) -> Result<(), SolveError> {
        let n = self.num_dofs();
        for len in [x.len(), y.len()] {
            if len != n {
                return Err(SolveError::Dimension {
                    expected: n,
                    found: len,
                });
            }
        }
        let e = self.e;
        let xs = self.split(x);
        let ys = self.split_mut(y);
        let mut guards: Vec<_> = self
            .scratch
            .iter()
            .map(|m| m.lock().unwrap_or_else(|p| p.into_inner()))
            .collect();
        let mut guards: Vec<&mut Scratch> = guards.iter_mut().map(|g| &mut **g).collect();
        let many = self.domains.len() > 1;
        // 1-2: pack, and the interior bins
        let mut ys: Vec<&mut [f64]> = ys;
        let mut tails: Vec<&mut [f64]> = Vec::with_capacity(ys.len());
        let mut heads: Vec<&mut [f64]> = Vec::with_capacity(ys.len());
        for (d, yd) in ys.drain(..).enumerate() {
            let cut = (self.domains[d].interior_bins() * BIN_SIZE * e).min(yd.len());
            let (h, t) = yd.split_at_mut(cut);
            heads.push(h);
            tails.push(t);
        }
        self.domains
            .par_iter()
            .zip(guards.par_iter_mut())
            .zip(heads.into_par_iter())
            .enumerate()
            .for_each(|(d, ((dm, sc), yh))| {
                let t = Instant::now();
                let xd = xs[d];
                for (k, &i) in dm.halo.send_nodes.iter().enumerate() {
                    let i = i as usize;
                    sc.send[k * e..(k + 1) * e].copy_from_slice(&xd[i * e..(i + 1) * e]);
                }
                self.pack_ns[d].fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
                let t = Instant::now();
                dm.spmv_bins(0..dm.interior_bins(), xd, &sc.halo, yh, true);
                self.spmv_ns[d].fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
            });
        // 3: exchange
        if many {
            let t = Instant::now();
            let plans: Vec<&HaloPlan> = self.domains.iter().map(|d| &d.halo).collect();
            let (sends, mut halos): (Vec<&[f64]>, Vec<&mut [f64]>) = guards
                .iter_mut()
                .map(|g| {
                    let Scratch { send, halo } = &mut **g;
                    (&send[..], &mut halo[..])
                })
                .unzip();
            self.comm.exchange(&plans, e, &sends, &mut halos)?;
            self.exchange_ns
                .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
        // 4: the boundary bins
        self.domains
            .par_iter()
            .zip(guards.par_iter())
            .zip(tails.into_par_iter())
            .enumerate()
            .for_each(|(d, ((dm, sc), yt))| {
                let t = Instant::now();
                dm.spmv_bins(dm.interior_bins()..dm.num_bins(), xs[d], &sc.halo, yt, true);
                self.spmv_ns[d].fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
            });
        self.applies.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn domain_of(&self, i: usize) -> usize {
        self.offsets.partition_point(|&o| o <= i) - 1
    }
}

impl<C: Communicator> BlockOperator for PartitionedOperator<C> {
    fn num_block_rows(&self) -> usize {
        *self.offsets.last().unwrap()
    }
    fn block_size(&self) -> usize {
        self.e
    }
    fn apply(&self, x: &[f64], y: &mut [f64]) {
        self.try_apply(x, y)
            .expect("solver vectors have the operator's length and the plans were checked");
    }
    fn diagonal_block(&self, i: usize, out: &mut [f64]) {
        let d = self.domain_of(i);
        let li = i - self.offsets[d];
        let e2 = self.e * self.e;
        out[..e2].copy_from_slice(&self.domains[d].matrix.diag()[li * e2..(li + 1) * e2]);
    }
    /// Per-domain partial sums, reduced in domain order by the communicator.
    fn dot(&self, a: &[f64], b: &[f64]) -> f64 {
        let (sa, sb) = (self.split(a), self.split(b));
        let partials: Vec<f64> = sa
            .par_iter()
            .zip(sb.par_iter())
            .map(|(x, y)| dot(x, y))
            .collect();
        self.comm.all_reduce_sum(&partials)
    }
}

/// Domain-local AMG (see the [module docs](self)): one hierarchy per domain on its filtered
/// owned-owned block, applied to every domain's part of the residual independently (a
/// non-overlapping additive Schwarz preconditioner with AMG subdomain solves).
pub struct DomainAmg {
    amgs: Vec<Amg>,
    /// Scalar offsets of the domains in the concatenated vectors.
    offsets: Vec<usize>,
}

impl DomainAmg {
    /// Set up the hierarchies. `fixed` and `positions` are concatenated like the operator's
    /// vectors (`3` flags and one position per owned node).
    pub fn setup<C: Communicator>(
        op: &PartitionedOperator<C>,
        fixed: &[bool],
        positions: &[[f64; 3]],
        params: &AmgParams,
    ) -> Result<Self, SolveError> {
        let n = op.num_block_rows();
        if fixed.len() != 3 * n || positions.len() != n {
            return Err(SolveError::Dimension {
                expected: n,
                found: positions.len(),
            });
        }
        let o = op.offsets();
        let amgs = op
            .domains()
            .par_iter()
            .enumerate()
            .map(|(d, dm)| {
                let a = dm.owned_block_filtered(&fixed[3 * o[d]..3 * o[d + 1]])?;
                Amg::setup(
                    a,
                    &fixed[3 * o[d]..3 * o[d + 1]],
                    &positions[o[d]..o[d + 1]],
                    params,
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            amgs,
            offsets: o.iter().map(|&x| 3 * x).collect(),
        })
    }
    /// The per-domain hierarchies.
    pub fn hierarchies(&self) -> &[Amg] {
        &self.amgs
    }
}

impl Preconditioner for DomainAmg {
    fn apply(&self, r: &[f64], z: &mut [f64]) {
        let mut zs: Vec<&mut [f64]> = Vec::with_capacity(self.amgs.len());
        let mut rest = z;
        for w in self.offsets.windows(2) {
            let (a, b) = std::mem::take(&mut rest).split_at_mut(w[1] - w[0]);
            zs.push(a);
            rest = b;
        }
        self.amgs
            .par_iter()
            .zip(zs.into_par_iter())
            .enumerate()
            .for_each(|(d, (amg, zd))| {
                amg.apply(&r[self.offsets[d]..self.offsets[d + 1]], zd);
            });
    }
}
