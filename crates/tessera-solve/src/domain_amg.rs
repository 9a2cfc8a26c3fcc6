//! Two-level domain-decomposed AMG (dissertation §7.1.2): the domain-local hierarchies of
//! [`DomainAmg`] plus a coarse correction on the union of the domains' first coarse spaces,
//! gathered onto one place ("the root") and solved there - the coarse-level gather of
//! distributed smoothed aggregation.
//!
//! The one-level [`DomainAmg`] is block Jacobi over domains: it cannot move information
//! between domains within one application, so its PCG iteration count grows with the number
//! of domains `k`. The coarse space repairs that:
//!
//! 1. **Coarse space.** Every domain aggregates only its own nodes (domain-local MIS(2)
//!    aggregation on its filtered owned-owned block `Ā_dd`, the first level of its own
//!    hierarchy) and builds the tentative prolongator `P̂_d` of the rigid-body modes on its
//!    aggregates (QR per aggregate; the coarse near-null space is the `R` factors). Coarse
//!    DOFs are numbered domain by domain; `P̂ = diag(P̂_d)`. A domain too small to coarsen keeps
//!    all its DOFs on the coarse level (`P̂_d = I`).
//! 2. **Smoothed prolongator.** `P = (I − ω D⁻¹ Ā) P̂`, each domain computing its owned rows
//!    `P_d = P̂_d − ω D_d⁻¹ (Ā_{d,:} P̂_loc)` from its **whole** rows `Ā_{d,:}` (halo columns
//!    included) and `P̂_loc` = its own rows of `P̂` and the rows of its halo nodes (their
//!    owners'), with `ω = 4/3 / λ_max(D⁻¹Ā_dd)` of its own hierarchy. Smoothing across the
//!    interface keeps `P B_c ≈ B` there too; a prolongator smoothed with the owned-owned block
//!    alone does not reproduce the rigid-body modes on interface rows (on the 4:1 test beam
//!    at 8 domains its PCG needed 83 iterations instead of 34). Rows next to the interface
//!    touch the neighbours' aggregates.
//! 3. **Coarse operator.** The Galerkin product over the whole filtered operator, couplings
//!    between domains included: domain `d` contributes `P_dᵀ (Ā_{d,:} P_loc)`, with `P_loc`
//!    its rows of `P` and those of its halo nodes (from their owners); the contributions are
//!    summed at the root in domain order into `A_c = Pᵀ Ā P`, made exactly symmetric, and
//!    given an AMG hierarchy of its own (near-null space: the coarse rigid-body modes; a small
//!    `A_c` is inverted densely by it).
//! 4. **Preconditioner.** With `M` the domain-local V-cycles and `Q = P B_c Pᵀ` the coarse
//!    correction (`B_c` one coarse V-cycle):
//!    - [`CoarseCombination::Additive`]: `z = M r + Q r`;
//!    - [`CoarseCombination::Hybrid`] (default, the "deflated"/balancing form): coarse, then
//!      local on the remaining residual, then coarse again,
//!      `I − B A = (I − Q A)(I − M A)(I − Q A)`. Both are symmetric; both are positive
//!      definite because `M` and `B_c` are and `‖I − Q A‖_A ≤ 1` (the coarse V-cycle
//!      converges), without a damping of `M` - so PCG stays valid.
//!
//! **What crosses the communicator** (the map onto ranks, one domain per rank). A domain
//! computes with its own rows, its halo data and the gathered coarse problem only:
//! - setup: one halo exchange of the constraint flags ([`PartitionedOperator::halo_values`]);
//!   twice the rows of a row-distributed matrix for the halo nodes - `P̂`, then `P` - along
//!   the halo exchange's send lists (rows of variable length; in this process they are
//!   copied between the domains); the coarse rows `P_dᵀ Ā_{d,:} P_loc` and the coarse
//!   near-null space of every domain go to the root, which sums them and sets up the coarse
//!   AMG;
//! - every application: each domain's restricted residual `P_dᵀ r_d` (values on the coarse
//!   DOFs its rows touch) goes to the root and is summed there in domain order; the coarse
//!   cycle runs at the root; each domain receives the coarse values its rows touch
//!   ([`TwoLevelDomainAmg::touched_coarse_dofs`]) and prolongates. The hybrid form does this
//!   twice and applies the operator twice (two halo exchanges).
//!
//! Every step sums in a fixed order (domains in order, the products of
//! [`crate::blockcsr`]), so the result does not depend on the thread count.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use rayon::prelude::*;

use crate::amg::{
    smooth_prolongator, tentative_prolongator, unit_diagonal_where_zero, Amg, AmgParams,
};
use crate::blockcsr::{offsets, BlockCsr, B2};
use crate::error::SolveError;
use crate::operator::{BlockOperator, Preconditioner};
use crate::partitioned::{Communicator, DomainAmg, PartitionedOperator};

/// How the coarse correction is combined with the domain-local cycles (see the
/// [module docs](self)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CoarseCombination {
    /// `z = M r + Q r`: one coarse solve per application, no extra operator application.
    Additive,
    /// Coarse, local, coarse (`(I − QA)(I − MA)(I − QA)`): two coarse solves and two operator
    /// applications per application, far fewer iterations.
    #[default]
    Hybrid,
}

impl CoarseCombination {
    /// Name as on the command line.
    pub fn name(self) -> &'static str {
        match self {
            CoarseCombination::Additive => "additive",
            CoarseCombination::Hybrid => "hybrid",
        }
    }
}

/// Sizes and times of a [`TwoLevelDomainAmg`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TwoLevelStats {
    /// Coarse DOFs contributed by each domain.
    pub coarse_dofs_per_domain: Vec<usize>,
    /// Stored `3 × 3` blocks of the gathered coarse operator.
    pub coarse_blocks: usize,
    /// Levels of the coarse hierarchy (1: inverted densely).
    pub coarse_levels: usize,
    /// Setup stages (ms): the domain hierarchies, the halo rows of `P`, the coarse rows per
    /// domain, the coarse hierarchy.
    pub setup_ms: Vec<(String, f64)>,
}

impl TwoLevelStats {
    /// Coarse DOFs in all.
    pub fn coarse_dofs(&self) -> usize {
        self.coarse_dofs_per_domain.iter().sum()
    }
}

/// Cumulative times of the applications of a [`TwoLevelDomainAmg`] (ms).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TwoLevelTimes {
    pub applies: u64,
    /// Domain-local cycles.
    pub local_ms: f64,
    /// Restriction, coarse cycle and prolongation.
    pub coarse_ms: f64,
    /// Operator applications inside the hybrid form.
    pub operator_ms: f64,
}

#[derive(Default)]
struct Scratch {
    /// Fine vectors.
    t: Vec<f64>,
    w: Vec<f64>,
    /// Coarse right-hand side and solution.
    rc: Vec<f64>,
    xc: Vec<f64>,
    /// Per domain: its partial coarse vector (restriction), or the coarse values it touches
    /// (prolongation).
    per_domain: Vec<Vec<f64>>,
}

/// The owned rows of the smoothed prolongator of one domain, with its columns compacted to
/// the coarse DOFs they touch.
struct DomainCoarse {
    /// Coarse block columns of the rows, ascending.
    touched: Vec<u32>,
    /// `P_d`: owned block rows × `touched.len()`.
    p: BlockCsr,
    /// `P_dᵀ`.
    r: BlockCsr,
}

impl DomainCoarse {
    fn compact(p: &BlockCsr) -> Self {
        let mut touched = p.cols.clone();
        touched.sort_unstable();
        touched.dedup();
        let mut pc = p.clone();
        for c in pc.cols.iter_mut() {
            *c = touched.binary_search(c).expect("a column of the rows") as u32;
        }
        pc.ncols = touched.len();
        let r = pc.transpose();
        Self { touched, p: pc, r }
    }
}

/// The local rows (owned, then halo) of a row-distributed matrix `parts[d]` (owned rows of
/// domain `d`) for domain `d`: its own rows and, for every halo node, the row its owner
/// sends (the halo exchange's send lists); columns shifted by `shift[d]` / `shift[owner]`.
fn local_rows_of<C: Communicator>(
    op: &PartitionedOperator<C>,
    d: usize,
    parts: &[&BlockCsr],
    shift: &[usize],
    ncols: usize,
) -> Result<BlockCsr, SolveError> {
    let doms = op.domains();
    let dm = &doms[d];
    let mut rows: Vec<(&BlockCsr, usize, u32)> = (0..dm.num_owned())
        .map(|i| (parts[d], i, shift[d] as u32))
        .collect();
    rows.reserve(dm.num_halo);
    for &j in &dm.halo.neighbours {
        let j = j as usize;
        let from = &doms[j].halo;
        let s =
            from.neighbours
                .binary_search(&(d as u32))
                .map_err(|_| SolveError::InvalidInput {
                    what: "coarse space",
                    message: format!("domain {j} does not list its neighbour {d}"),
                })?;
        let sent =
            &from.send_nodes[from.send_offsets[s] as usize..from.send_offsets[s + 1] as usize];
        rows.extend(
            sent.iter()
                .map(|&l| (parts[j], l as usize, shift[j] as u32)),
        );
    }
    if rows.len() != dm.num_local() {
        return Err(SolveError::InvalidInput {
            what: "coarse space",
            message: format!(
                "domain {d} receives {} halo rows for {} halo nodes",
                rows.len() - dm.num_owned(),
                dm.num_halo
            ),
        });
    }
    gather_rows(&rows, ncols)
}

/// The first `n` rows of `m`.
fn first_rows(m: &BlockCsr, n: usize) -> BlockCsr {
    let end = m.row_ptr[n] as usize;
    BlockCsr {
        nrows: n,
        ncols: m.ncols,
        row_ptr: m.row_ptr[..=n].to_vec(),
        cols: m.cols[..end].to_vec(),
        vals: m.vals[..end * B2].to_vec(),
    }
}

/// `Σ_d` of the domains' coarse rows `(touched_d, C_d)` (row `q` of `C_d` is coarse row
/// `touched_d[q]`), added in domain order: an `nc × nc` matrix.
fn sum_rows(parts: &[(DomainCoarse, BlockCsr)], nc: usize) -> Result<BlockCsr, SolveError> {
    // the contributions to every coarse row, in domain order
    let mut counts = vec![0u32; nc];
    for (dc, _) in parts {
        for &c in &dc.touched {
            counts[c as usize] += 1;
        }
    }
    let start = offsets(&counts)?;
    let mut next = start.clone();
    let mut from = vec![(0u32, 0u32); start[nc] as usize];
    for (d, (dc, _)) in parts.iter().enumerate() {
        for (q, &c) in dc.touched.iter().enumerate() {
            from[next[c as usize] as usize] = (d as u32, q as u32);
            next[c as usize] += 1;
        }
    }
    let rows: Vec<(Vec<u32>, Vec<f64>)> = (0..nc)
        .into_par_iter()
        .with_min_len(64)
        .map(|i| {
            let mut ent: Vec<(u32, &[f64])> = Vec::new();
            for &(d, q) in &from[start[i] as usize..start[i + 1] as usize] {
                let c = &parts[d as usize].1;
                for kk in c.row_range(q as usize) {
                    ent.push((c.cols[kk], &c.vals[kk * B2..(kk + 1) * B2]));
                }
            }
            // stable: equal columns keep the domain order
            ent.sort_by_key(|e| e.0);
            let mut cols: Vec<u32> = Vec::with_capacity(ent.len());
            let mut vals: Vec<f64> = Vec::with_capacity(B2 * ent.len());
            for (j, v) in ent {
                if cols.last() == Some(&j) {
                    let at = vals.len() - B2;
                    for e in 0..B2 {
                        vals[at + e] += v[e];
                    }
                } else {
                    cols.push(j);
                    vals.extend_from_slice(v);
                }
            }
            (cols, vals)
        })
        .collect();
    let lens: Vec<u32> = rows.iter().map(|r| r.0.len() as u32).collect();
    let row_ptr = offsets(&lens)?;
    let mut cols = Vec::with_capacity(row_ptr[nc] as usize);
    let mut vals = Vec::with_capacity(B2 * row_ptr[nc] as usize);
    for (c, v) in rows {
        cols.extend(c);
        vals.extend(v);
    }
    Ok(BlockCsr {
        nrows: nc,
        ncols: nc,
        row_ptr,
        cols,
        vals,
    })
}

/// Domain-local AMG plus a gathered coarse correction (see the [module docs](self)).
pub struct TwoLevelDomainAmg<'a, C: Communicator> {
    op: &'a PartitionedOperator<C>,
    /// Constraint flags, concatenated like the operator's vectors.
    fixed: Vec<bool>,
    local: DomainAmg,
    /// The rows of `P` per domain.
    domains: Vec<DomainCoarse>,
    /// Block offsets of the domains' coarse DOFs (`k + 1`).
    coarse_offsets: Vec<usize>,
    coarse: Amg,
    combination: CoarseCombination,
    stats: TwoLevelStats,
    scratch: Mutex<Scratch>,
    applies: AtomicU64,
    local_ns: AtomicU64,
    coarse_ns: AtomicU64,
    operator_ns: AtomicU64,
}

/// The identity of `n` block rows.
fn identity(n: usize) -> BlockCsr {
    let mut vals = vec![0.0; B2 * n];
    for i in 0..n {
        for c in 0..3 {
            vals[B2 * i + 4 * c] = 1.0;
        }
    }
    BlockCsr {
        nrows: n,
        ncols: n,
        row_ptr: (0..=n as u32).collect(),
        cols: (0..n as u32).collect(),
        vals,
    }
}

/// Stack the rows `rows[q] = (matrix, row, column shift)` into one matrix of `ncols` columns.
fn gather_rows(rows: &[(&BlockCsr, usize, u32)], ncols: usize) -> Result<BlockCsr, SolveError> {
    let lens: Vec<u32> = rows
        .iter()
        .map(|&(m, i, _)| m.row_range(i).len() as u32)
        .collect();
    let row_ptr = offsets(&lens)?;
    let nnz = row_ptr[rows.len()] as usize;
    let mut cols = Vec::with_capacity(nnz);
    let mut vals = Vec::with_capacity(B2 * nnz);
    for &(m, i, shift) in rows {
        let r = m.row_range(i);
        cols.extend(m.cols[r.clone()].iter().map(|&c| c + shift));
        vals.extend_from_slice(&m.vals[r.start * B2..r.end * B2]);
    }
    Ok(BlockCsr {
        nrows: rows.len(),
        ncols,
        row_ptr,
        cols,
        vals,
    })
}

fn ms_since(t: Instant, acc: &mut Vec<(String, f64)>, name: &str) {
    acc.push((name.to_string(), t.elapsed().as_secs_f64() * 1e3));
}

impl<'a, C: Communicator> TwoLevelDomainAmg<'a, C> {
    /// Set up the domain hierarchies, the coarse operator `Pᵀ Ā P` and its AMG for the
    /// operator `op`. `fixed` (3 flags per owned node) and `positions` (one per owned node)
    /// are concatenated like the operator's vectors.
    pub fn setup(
        op: &'a PartitionedOperator<C>,
        fixed: &[bool],
        positions: &[[f64; 3]],
        params: &AmgParams,
        combination: CoarseCombination,
    ) -> Result<Self, SolveError> {
        let mut setup_ms = Vec::new();
        let t = Instant::now();
        let local = DomainAmg::setup(op, fixed, positions, params)?;
        ms_since(t, &mut setup_ms, "domain hierarchies");
        let o = op.offsets();
        let doms = op.domains();
        let k = doms.len();
        let m = params.near_null_space.dim();
        let t = Instant::now();
        // 1. the tentative prolongator of every domain's first aggregation and its coarse
        //    near-null space (the identity for a domain too small to aggregate)
        let tent: Vec<(BlockCsr, Vec<f64>)> = local
            .hierarchies()
            .par_iter()
            .enumerate()
            .map(|(d, amg)| match amg.levels.first() {
                Some(l0) => tentative_prolongator(&l0.aggregates, 1, &amg.near_null[0], m),
                None => Ok((identity(o[d + 1] - o[d]), amg.near_null[0].clone())),
            })
            .collect::<Result<_, _>>()?;
        let all_aggregated = local.hierarchies().iter().all(|a| !a.levels.is_empty());
        let mut coarse_offsets = vec![0usize];
        for (pt, _) in &tent {
            coarse_offsets.push(coarse_offsets[coarse_offsets.len() - 1] + pt.ncols);
        }
        let nc = coarse_offsets[k];
        if nc > u32::MAX as usize / 2 {
            return Err(SolveError::TooLarge(format!("{nc} coarse block rows")));
        }
        let mut coarse_b = Vec::with_capacity(3 * m * nc);
        for (_, b) in &tent {
            coarse_b.extend_from_slice(b);
        }
        // constraint flags of the halo nodes: one halo exchange
        let flags: Vec<f64> = fixed.iter().map(|&f| f as u8 as f64).collect();
        let fixed_halo: Vec<Vec<bool>> = op
            .halo_values(&flags)?
            .into_iter()
            .map(|h| h.into_iter().map(|v| v != 0.0).collect())
            .collect();
        // 2. the smoothed prolongator, row block of every domain: P_d = P̂_d − ω D⁻¹ (Ā_{d,:} P̂_loc)
        //    over the domain's whole rows (halo columns included), so that P reproduces the
        //    rigid-body modes across the interfaces too; its columns are the domain's own
        //    aggregates and those of its neighbours next to the interface
        let tent_p: Vec<&BlockCsr> = tent.iter().map(|(p, _)| p).collect();
        let rows_and_p: Vec<(BlockCsr, BlockCsr)> = (0..k)
            .into_par_iter()
            .map(|d| {
                let a =
                    doms[d].local_rows_filtered(&fixed[3 * o[d]..3 * o[d + 1]], &fixed_halo[d])?;
                let pt_loc = local_rows_of(op, d, &tent_p, &coarse_offsets, nc)?;
                let hier = &local.hierarchies()[d];
                let pd = match hier.levels.first() {
                    Some(l0) => smooth_prolongator(
                        &a,
                        &l0.dinv,
                        &pt_loc,
                        params.prolongation_damping / l0.lambda,
                    )?,
                    None => first_rows(&pt_loc, doms[d].num_owned()),
                };
                Ok((a, pd))
            })
            .collect::<Result<_, SolveError>>()?;
        drop(tent_p);
        drop(tent);
        ms_since(t, &mut setup_ms, "prolongator");
        // 3. the coarse rows of every domain, P_dᵀ (Ā_{d,:} P_loc) with the halo rows of P
        //    from their owners, summed at the root in domain order
        let t = Instant::now();
        let p_glob: Vec<&BlockCsr> = rows_and_p.iter().map(|(_, p)| p).collect();
        let parts: Vec<(DomainCoarse, BlockCsr)> = (0..k)
            .into_par_iter()
            .map(|d| {
                let p_loc = local_rows_of(op, d, &p_glob, &vec![0; k + 1], nc)?;
                let ap = rows_and_p[d].0.matmul(&p_loc)?;
                drop(p_loc);
                let dc = DomainCoarse::compact(p_glob[d]);
                let c = dc.r.matmul(&ap)?;
                Ok((dc, c))
            })
            .collect::<Result<_, SolveError>>()?;
        drop(p_glob);
        drop(rows_and_p);
        let mut ac = sum_rows(&parts, nc)?;
        ac.symmetrize()?;
        unit_diagonal_where_zero(&mut ac);
        let domains: Vec<DomainCoarse> = parts.into_iter().map(|(dc, _)| dc).collect();
        ms_since(t, &mut setup_ms, "coarse operator");
        // 4. the coarse hierarchy at the root
        let t = Instant::now();
        let group = if all_aggregated { (m / 3).max(1) } else { 1 };
        let coarse_blocks = ac.nnz();
        let coarse = Amg::setup_grouped(ac, coarse_b, group, params)?;
        ms_since(t, &mut setup_ms, "coarse hierarchy");
        let stats = TwoLevelStats {
            coarse_dofs_per_domain: coarse_offsets
                .windows(2)
                .map(|w| 3 * (w[1] - w[0]))
                .collect(),
            coarse_blocks,
            coarse_levels: coarse.num_levels(),
            setup_ms,
        };
        let n = op.num_dofs();
        let buffers = domains
            .iter()
            .map(|dc| vec![0.0; 3 * dc.touched.len()])
            .collect();
        Ok(Self {
            op,
            fixed: fixed.to_vec(),
            local,
            domains,
            coarse_offsets,
            coarse,
            combination,
            stats,
            scratch: Mutex::new(Scratch {
                t: vec![0.0; n],
                w: vec![0.0; n],
                rc: vec![0.0; 3 * nc],
                xc: vec![0.0; 3 * nc],
                per_domain: buffers,
            }),
            applies: AtomicU64::new(0),
            local_ns: AtomicU64::new(0),
            coarse_ns: AtomicU64::new(0),
            operator_ns: AtomicU64::new(0),
        })
    }

    /// The domain-local part (the one-level preconditioner).
    pub fn local(&self) -> &DomainAmg {
        &self.local
    }
    /// The hierarchy of the gathered coarse operator.
    pub fn coarse(&self) -> &Amg {
        &self.coarse
    }
    /// Coarse DOFs (the gathered level).
    pub fn coarse_dofs(&self) -> usize {
        3 * self.coarse_offsets[self.coarse_offsets.len() - 1]
    }
    /// Coarse DOFs the rows of each domain's prolongator touch (its own and its
    /// neighbours' next to the interface): the values it receives per coarse correction.
    pub fn touched_coarse_dofs(&self) -> Vec<usize> {
        self.domains.iter().map(|dc| 3 * dc.touched.len()).collect()
    }
    /// The combination of the two levels.
    pub fn combination(&self) -> CoarseCombination {
        self.combination
    }
    /// Sizes and setup times.
    pub fn stats(&self) -> &TwoLevelStats {
        &self.stats
    }
    /// Cumulative times of the applications so far.
    pub fn times(&self) -> TwoLevelTimes {
        let ms = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64 * 1e-6;
        TwoLevelTimes {
            applies: self.applies.load(Ordering::Relaxed),
            local_ms: ms(&self.local_ns),
            coarse_ms: ms(&self.coarse_ns),
            operator_ms: ms(&self.operator_ns),
        }
    }

    /// `z (+)= Q r = P B_c Pᵀ r`: restriction per domain, the partial coarse vectors summed
    /// at the root in domain order, the coarse cycle there, and the prolongation per domain
    /// from the coarse values it touches.
    fn coarse_correction(&self, r: &[f64], z: &mut [f64], add: bool, s: &mut Scratch) {
        let t = Instant::now();
        let rs = self.op.split(r);
        self.domains
            .par_iter()
            .zip(s.per_domain.par_iter_mut())
            .zip(rs.into_par_iter())
            .for_each(|((dc, buf), r_d)| dc.r.spmv(r_d, buf));
        s.rc.fill(0.0);
        for (dc, buf) in self.domains.iter().zip(&s.per_domain) {
            for (q, &c) in dc.touched.iter().enumerate() {
                let c = c as usize;
                for e in 0..3 {
                    s.rc[3 * c + e] += buf[3 * q + e];
                }
            }
        }
        self.coarse.cycle(&s.rc, &mut s.xc);
        let xc = &s.xc;
        let zs = self.op.split_mut(z);
        self.domains
            .par_iter()
            .zip(s.per_domain.par_iter_mut())
            .zip(zs.into_par_iter())
            .for_each(|((dc, buf), zd)| {
                for (q, &c) in dc.touched.iter().enumerate() {
                    let c = c as usize;
                    buf[3 * q..3 * q + 3].copy_from_slice(&xc[3 * c..3 * c + 3]);
                }
                if add {
                    dc.p.spmv_add(buf, zd);
                } else {
                    dc.p.spmv(buf, zd);
                }
            });
        self.coarse_ns
            .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }

    /// `t = r − S A S z` (the filtered operator the PCG iterates with).
    fn residual(&self, r: &[f64], z: &mut [f64], t: &mut [f64]) {
        let s = Instant::now();
        mask(z, &self.fixed);
        self.op.apply(z, t);
        t.par_iter_mut()
            .zip(r.par_iter())
            .zip(self.fixed.par_iter())
            .for_each(|((ti, ri), &f)| *ti = if f { 0.0 } else { ri - *ti });
        self.operator_ns
            .fetch_add(s.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }

    fn local_cycle(&self, r: &[f64], z: &mut [f64]) {
        let t = Instant::now();
        self.local.apply(r, z);
        self.local_ns
            .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }
}

fn mask(v: &mut [f64], fixed: &[bool]) {
    v.par_iter_mut().zip(fixed.par_iter()).for_each(|(x, &f)| {
        if f {
            *x = 0.0
        }
    });
}

impl<C: Communicator> Preconditioner for TwoLevelDomainAmg<'_, C> {
    fn apply(&self, r: &[f64], z: &mut [f64]) {
        let mut guard = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
        let s = &mut *guard;
        match self.combination {
            CoarseCombination::Additive => {
                self.local_cycle(r, z);
                self.coarse_correction(r, z, true, s);
            }
            CoarseCombination::Hybrid => {
                // z = Q r
                self.coarse_correction(r, z, false, s);
                // z += M (r − A z)
                let mut t = std::mem::take(&mut s.t);
                let mut w = std::mem::take(&mut s.w);
                self.residual(r, z, &mut t);
                self.local_cycle(&t, &mut w);
                z.par_iter_mut()
                    .zip(w.par_iter())
                    .for_each(|(zi, wi)| *zi += wi);
                // z += Q (r − A z)
                self.residual(r, z, &mut t);
                self.coarse_correction(&t, z, true, s);
                s.t = t;
                s.w = w;
            }
        }
        mask(z, &self.fixed);
        self.applies.fetch_add(1, Ordering::Relaxed);
    }
}
