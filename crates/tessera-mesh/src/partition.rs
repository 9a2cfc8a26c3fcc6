//! Domain decomposition of a simplex mesh: the cells split into `k` domains, the nodes of an
//! order-`p` mesh owned by exactly one domain each, and the quality of the split
//! (dissertation §7.1.2: "local, per-domain matrix assembly in distributed or multi-GPU
//! simulations using domain decomposition").
//!
//! 1. **Cell partition** ([`partition_cells`]): either METIS' multilevel k-way partition of
//!    the dual graph (cells adjacent through a facet), or a recursive coordinate bisection of
//!    the cell centroids ([`Partitioner::Rcb`]; no library needed). Both balance **node
//!    weights**, not cells: a cell weighs the nodes it shares, `w_T = Σ_{s ⊆ T} C(p-1, k_s) /
//!    |cells(s)|` over its vertices, edges, faces and itself ([`cell_node_weights`]), so the
//!    sum over a domain estimates the nodes (rows) it will own at order `p`.
//! 2. **Ownership** ([`SimplexOwnership`]): all nodes of a simplex share one owner, because a
//!    node's row is determined by the cells of its simplex (Eq. 4.1). A cell owns its own
//!    interior; a vertex, edge or face `s` of dimension `k` is owned by the domain of the cell
//!    `cells(s)[h(k, s) mod |cells(s)|]`, with `cells(s)` the sorted coboundary row and `h` a
//!    fixed integer hash. An interface simplex thus goes to one of the domains of its cells,
//!    in proportion to how many of its cells each holds (matching the weights of step 1,
//!    without the bias of a "lowest domain wins" rule towards domain 0), and deterministically.
//! 3. **Quality** ([`PartitionReport`]): the edge cut (facets between cells of different
//!    domains), the owned nodes per domain and the imbalance `max / mean - 1`, and the halo per
//!    domain: the nodes that rows of owned nodes reference but another domain owns (the nodes
//!    of the cells holding an owned node - the domain's owned cells plus one layer of ghost
//!    cells - that the domain does not own).
//!
//! ```
//! use tessera_mesh::generate::{box_mesh, BoxKind};
//! use tessera_mesh::partition::{partition_cells, PartitionParams, Partitioner};
//! use tessera_mesh::simplex::SimplexMesh;
//! let mesh = SimplexMesh::from_poly(&box_mesh(BoxKind::Tet, [6, 4, 4], [3.0, 2.0, 2.0])).unwrap();
//! let params = PartitionParams { domains: 4, order: 2, partitioner: Partitioner::Rcb };
//! let part = partition_cells(&mesh, &params).unwrap();
//! let report = part.report(&mesh, 2);
//! assert_eq!(report.owned_nodes.len(), 4);
//! assert!(report.imbalance < 0.2 && report.edge_cut > 0);
//! ```

use crate::error::MeshError;
use crate::simplex::{local_edges, SimplexMesh};
use crate::Point;
use rayon::prelude::*;
use serde::Serialize;
use tessera_sparse::tcsr::col;
use tessera_sparse::Tcsr;

/// The algorithm that splits the cells.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Partitioner {
    /// METIS multilevel k-way partition of the dual graph (vendored METIS 5).
    #[default]
    Metis,
    /// Recursive coordinate bisection of the cell centroids (weighted medians).
    Rcb,
}

impl Partitioner {
    /// Command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Partitioner::Metis => "metis",
            Partitioner::Rcb => "rcb",
        }
    }
}

impl std::str::FromStr for Partitioner {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "metis" => Ok(Partitioner::Metis),
            "rcb" => Ok(Partitioner::Rcb),
            _ => Err(format!("unknown partitioner `{s}`: expected metis or rcb")),
        }
    }
}

impl std::fmt::Display for Partitioner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Knobs of [`partition_cells`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionParams {
    /// Number of domains `k >= 1`.
    pub domains: usize,
    /// Element order whose nodes are balanced (`p >= 1`).
    pub order: usize,
    pub partitioner: Partitioner,
}

impl Default for PartitionParams {
    fn default() -> Self {
        Self {
            domains: 2,
            order: 1,
            partitioner: Partitioner::Metis,
        }
    }
}

/// A split of the cells into domains.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partition {
    /// Number of domains.
    pub domains: usize,
    /// Domain of every cell.
    pub cell_domain: Vec<u32>,
    /// The algorithm that produced it.
    pub partitioner: Partitioner,
}

/// `C(n, k)` for the small arguments of node counts.
fn binomial(n: usize, k: usize) -> usize {
    if k > n {
        return 0;
    }
    (0..k).fold(1, |acc, i| acc * (n - i) / (i + 1))
}

/// Interior nodes of one k-simplex at order `p`, `C(p-1, k)` (Eq. 4.4).
pub fn nodes_per_simplex(p: usize, k: usize) -> usize {
    if p == 0 {
        return 0;
    }
    binomial(p - 1, k)
}

/// Fractional node weight of every cell at order `p` (see the [module docs](self)): each
/// simplex's `C(p-1, k)` nodes shared evenly among its cells. The weights sum to the node
/// count of the order-`p` mesh.
pub fn cell_node_weights(mesh: &SimplexMesh, p: usize) -> Vec<f64> {
    let d = mesh.dim();
    let nv = nodes_per_simplex(p, 0) as f64;
    let ne = nodes_per_simplex(p, 1) as f64;
    let nf = if d == 3 {
        nodes_per_simplex(p, 2) as f64
    } else {
        0.0
    };
    let nc = nodes_per_simplex(p, d) as f64;
    let vc = mesh.vertex_cells();
    let ec = if ne > 0.0 {
        Some(mesh.edge_cells())
    } else {
        None
    };
    let fc = if nf > 0.0 {
        Some(mesh.face_cells())
    } else {
        None
    };
    let share = |t: &Tcsr, s: u32| 1.0 / t.row_len(s as usize).max(1) as f64;
    (0..mesh.num_cells())
        .into_par_iter()
        .with_min_len(4096)
        .map(|c| {
            let mut w = nc;
            for &v in mesh.cell(c) {
                w += nv * share(vc, v);
            }
            if let Some(ec) = ec {
                for &e in mesh.cell_edges(c) {
                    w += ne * share(ec, e);
                }
            }
            if let Some(fc) = fc {
                for &f in mesh.cell_faces(c) {
                    w += nf * share(fc, f);
                }
            }
            w
        })
        .collect()
}

/// The dual graph in CSR form: cells adjacent through a shared facet (faces of tetrahedra,
/// edges of triangles), rows sorted.
pub fn dual_graph(mesh: &SimplexMesh) -> (Vec<u32>, Vec<u32>) {
    let fc = mesh.facet_cells();
    let facets = mesh.cell_facets();
    let nf = mesh.dim() + 1;
    let n = mesh.num_cells();
    let rows: Vec<Vec<u32>> = (0..n)
        .into_par_iter()
        .with_min_len(4096)
        .map(|c| {
            let mut r: Vec<u32> = facets[c * nf..(c + 1) * nf]
                .iter()
                .flat_map(|&f| fc.row(col(f) as usize).iter().map(|&t| col(t)))
                .filter(|&t| t as usize != c)
                .collect();
            r.sort_unstable();
            r.dedup();
            r
        })
        .collect();
    let mut xadj = Vec::with_capacity(n + 1);
    xadj.push(0u32);
    let mut adj = Vec::with_capacity(rows.iter().map(Vec::len).sum());
    for r in rows {
        adj.extend_from_slice(&r);
        xadj.push(adj.len() as u32);
    }
    (xadj, adj)
}

/// Split the cells of `mesh` into `params.domains` domains balancing the nodes at order
/// `params.order`. Errors: `k = 0`, `k` larger than the number of cells, a domain that
/// would hold no cell or own no node, or a METIS failure.
pub fn partition_cells(
    mesh: &SimplexMesh,
    params: &PartitionParams,
) -> Result<Partition, MeshError> {
    let k = params.domains;
    let n = mesh.num_cells();
    if k == 0 || k > n {
        return Err(MeshError::DomainCount {
            domains: k,
            cells: n,
        });
    }
    if params.order == 0 {
        return Err(MeshError::Unsupported(
            "element order 0 has no nodes to balance".into(),
        ));
    }
    let weights = cell_node_weights(mesh, params.order);
    let cell_domain = if k == 1 {
        vec![0; n]
    } else {
        match params.partitioner {
            Partitioner::Metis => metis_kway(mesh, &weights, k)?,
            Partitioner::Rcb => rcb(mesh, &weights, k),
        }
    };
    let part = Partition {
        domains: k,
        cell_domain,
        partitioner: params.partitioner,
    };
    part.check(mesh, params.order)?;
    Ok(part)
}

/// METIS k-way on the dual graph with integer node weights (scaled so the total fits METIS'
/// 32-bit indices), fixed seed, 3 % load imbalance allowed.
fn metis_kway(mesh: &SimplexMesh, weights: &[f64], k: usize) -> Result<Vec<u32>, MeshError> {
    let (xadj, adj) = dual_graph(mesh);
    let too_large =
        || MeshError::Unsupported("the dual graph exceeds METIS' 32-bit indices".into());
    if adj.len() > i32::MAX as usize {
        return Err(too_large());
    }
    let xadj: Vec<metis::Idx> = xadj.iter().map(|&v| v as metis::Idx).collect();
    let adj: Vec<metis::Idx> = adj.iter().map(|&v| v as metis::Idx).collect();
    let total: f64 = weights.iter().sum();
    let scale = (1000.0f64).min((1u64 << 30) as f64 / total.max(1.0));
    let vwgt: Vec<metis::Idx> = weights
        .iter()
        .map(|&w| ((w * scale).round() as metis::Idx).max(1))
        .collect();
    let mut part = vec![0 as metis::Idx; weights.len()];
    metis::Graph::new(1, k as metis::Idx, &xadj, &adj)
        .map_err(|e| MeshError::Partition(format!("METIS rejected the dual graph: {e}")))?
        .set_vwgt(&vwgt)
        .set_option(metis::option::Seed(1))
        .set_option(metis::option::UFactor(30))
        .part_kway(&mut part)
        .map_err(|e| MeshError::Partition(format!("METIS failed: {e}")))?;
    Ok(part.into_iter().map(|d| d as u32).collect())
}

/// Recursive coordinate bisection of the cell centroids: split along the longest extent of
/// the current set's bounding box at the weighted position that gives the two halves
/// `k₁ = ⌊k/2⌋` and `k - k₁` domains' shares of the weight.
fn rcb(mesh: &SimplexMesh, weights: &[f64], k: usize) -> Vec<u32> {
    let pos = mesh.positions();
    let nv = mesh.vertices_per_cell();
    let centroids: Vec<Point> = (0..mesh.num_cells())
        .into_par_iter()
        .with_min_len(4096)
        .map(|c| {
            let mut s = [0.0; 3];
            for &v in mesh.cell(c) {
                for a in 0..3 {
                    s[a] += pos[v as usize][a];
                }
            }
            s.map(|x| x / nv as f64)
        })
        .collect();
    let mut ids: Vec<u32> = (0..mesh.num_cells() as u32).collect();
    let mut out = vec![0u32; mesh.num_cells()];
    let mut assign: Vec<(u32, u32)> = Vec::with_capacity(mesh.num_cells());
    rcb_split(&centroids, weights, &mut ids, 0, k, &mut assign);
    for (c, d) in assign {
        out[c as usize] = d;
    }
    out
}

fn rcb_split(
    cen: &[Point],
    w: &[f64],
    ids: &mut [u32],
    first: usize,
    k: usize,
    out: &mut Vec<(u32, u32)>,
) {
    if k == 1 || ids.len() <= 1 {
        out.extend(ids.iter().map(|&c| (c, first as u32)));
        return;
    }
    let mut lo = [f64::INFINITY; 3];
    let mut hi = [f64::NEG_INFINITY; 3];
    for &c in ids.iter() {
        for a in 0..3 {
            lo[a] = lo[a].min(cen[c as usize][a]);
            hi[a] = hi[a].max(cen[c as usize][a]);
        }
    }
    let axis = (0..3)
        .max_by(|&a, &b| (hi[a] - lo[a]).total_cmp(&(hi[b] - lo[b])))
        .unwrap();
    // cells ordered along the axis (ties by index, so the split is deterministic)
    ids.par_sort_unstable_by(|&a, &b| {
        cen[a as usize][axis]
            .total_cmp(&cen[b as usize][axis])
            .then(a.cmp(&b))
    });
    let k1 = k / 2;
    let total: f64 = ids.iter().map(|&c| w[c as usize]).sum();
    let target = total * k1 as f64 / k as f64;
    let mut acc = 0.0;
    let mut cut = ids.len();
    for (i, &c) in ids.iter().enumerate() {
        let wc = w[c as usize];
        if acc + 0.5 * wc > target {
            cut = i;
            break;
        }
        acc += wc;
    }
    // each side keeps at least one cell per domain it will hold
    let cut = cut.clamp(k1.min(ids.len()), ids.len().saturating_sub(k - k1));
    let (a, b) = ids.split_at_mut(cut);
    let mut out_b = Vec::new();
    rayon::join(
        || rcb_split(cen, w, a, first, k1, out),
        || rcb_split(cen, w, b, first + k1, k - k1, &mut out_b),
    );
    out.extend(out_b);
}

/// A fixed integer hash (splitmix64 finalizer) for the ownership rule.
#[inline]
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Owner of a `k`-simplex `s` whose (sorted) incident cells are `cells` (see the
/// [module docs](self)); `None` for a simplex without cells.
#[inline]
pub fn owner_of(cell_domain: &[u32], k: usize, s: u32, cells: &[i32]) -> Option<u32> {
    if cells.is_empty() {
        return None;
    }
    let pick = mix(((s as u64) << 2) | k as u64) % cells.len() as u64;
    Some(cell_domain[col(cells[pick as usize]) as usize])
}

/// The owning domain of every vertex, edge, face (d = 3) and cell: `owner[k][s]`. Simplices
/// of dimensions that carry no node at the order it was built for are left empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimplexOwnership {
    pub owner: [Vec<u32>; 4],
}

impl Partition {
    /// The owner of every node-carrying simplex at order `p` (see the [module docs](self)).
    /// A vertex without cells (unused) is owned by domain 0.
    pub fn ownership(&self, mesh: &SimplexMesh, p: usize) -> SimplexOwnership {
        let d = mesh.dim();
        let mut owner: [Vec<u32>; 4] = Default::default();
        for (k, slot) in owner.iter_mut().enumerate().take(d + 1) {
            if nodes_per_simplex(p, k) == 0 {
                continue;
            }
            *slot = if k == d {
                self.cell_domain.clone()
            } else {
                let t = match k {
                    0 => mesh.vertex_cells(),
                    1 => mesh.edge_cells(),
                    _ => mesh.face_cells(),
                };
                (0..t.nrows())
                    .into_par_iter()
                    .with_min_len(4096)
                    .map(|s| owner_of(&self.cell_domain, k, s as u32, t.row(s)).unwrap_or(0))
                    .collect()
            };
        }
        SimplexOwnership { owner }
    }

    /// Cells per domain.
    pub fn cells_per_domain(&self) -> Vec<u64> {
        let mut n = vec![0u64; self.domains];
        for &d in &self.cell_domain {
            n[d as usize] += 1;
        }
        n
    }

    /// Facets between cells of different domains (the edge cut of the dual graph).
    pub fn edge_cut(&self, mesh: &SimplexMesh) -> u64 {
        let fc = mesh.facet_cells();
        (0..fc.nrows())
            .into_par_iter()
            .with_min_len(4096)
            .filter(|&f| {
                let r = fc.row(f);
                r.len() == 2
                    && self.cell_domain[col(r[0]) as usize] != self.cell_domain[col(r[1]) as usize]
            })
            .count() as u64
    }

    /// Errors for a partition of the wrong length, with an out-of-range domain, or with a
    /// domain that holds no cell or owns no node at order `p`.
    pub fn check(&self, mesh: &SimplexMesh, p: usize) -> Result<(), MeshError> {
        if self.cell_domain.len() != mesh.num_cells() {
            return Err(MeshError::Partition(format!(
                "{} cell domains for {} cells",
                self.cell_domain.len(),
                mesh.num_cells()
            )));
        }
        if let Some((c, &d)) = self
            .cell_domain
            .iter()
            .enumerate()
            .find(|(_, &d)| d as usize >= self.domains)
        {
            return Err(MeshError::Partition(format!(
                "cell {c} is in domain {d}, but there are {} domains",
                self.domains
            )));
        }
        if let Some(d) = self.cells_per_domain().iter().position(|&n| n == 0) {
            return Err(MeshError::EmptyDomain {
                domain: d,
                domains: self.domains,
                what: "cell",
            });
        }
        let owned = self.owned_nodes(&self.ownership(mesh, p), p);
        if let Some(d) = owned.iter().position(|&n| n == 0) {
            return Err(MeshError::EmptyDomain {
                domain: d,
                domains: self.domains,
                what: "node",
            });
        }
        Ok(())
    }

    /// Owned nodes per domain at order `p`.
    pub fn owned_nodes(&self, own: &SimplexOwnership, p: usize) -> Vec<u64> {
        let mut n = vec![0u64; self.domains];
        for (k, o) in own.owner.iter().enumerate() {
            let per = nodes_per_simplex(p, k) as u64;
            for &d in o {
                n[d as usize] += per;
            }
        }
        n
    }

    /// Edge cut, ownership, imbalance and halo of the partition at order `p` (see the
    /// [module docs](self)).
    pub fn report(&self, mesh: &SimplexMesh, p: usize) -> PartitionReport {
        let own = self.ownership(mesh, p);
        let owned = self.owned_nodes(&own, p);
        let dim = mesh.dim();
        let k = self.domains;
        // the domains that own a node of each cell: the cell is local to each of them
        let nl = local_edges(dim).len();
        let cell_owners = |c: usize, out: &mut Vec<u32>| {
            out.clear();
            for (kd, o) in own.owner.iter().enumerate() {
                if o.is_empty() {
                    continue;
                }
                match kd {
                    0 => out.extend(mesh.cell(c).iter().map(|&v| o[v as usize])),
                    1 => out.extend(mesh.cell_edges(c)[..nl].iter().map(|&e| o[e as usize])),
                    x if x == dim => out.push(o[c]),
                    _ => out.extend(mesh.cell_faces(c).iter().map(|&f| o[f as usize])),
                }
            }
            out.sort_unstable();
            out.dedup();
        };
        let mut local_cells = vec![0u64; k];
        let mut halo = vec![0u64; k];
        let mut buf = Vec::new();
        for c in 0..mesh.num_cells() {
            cell_owners(c, &mut buf);
            for &d in &buf {
                local_cells[d as usize] += 1;
            }
        }
        // halo: distinct (domain, simplex) pairs of local cells not owned by the domain
        for (kd, o) in own.owner.iter().enumerate() {
            if o.is_empty() {
                continue;
            }
            let per = nodes_per_simplex(p, kd) as u64;
            let mut pairs: Vec<u64> = (0..mesh.num_cells())
                .into_par_iter()
                .with_min_len(2048)
                .fold(
                    || (Vec::new(), Vec::new()),
                    |(mut acc, mut ow): (Vec<u64>, Vec<u32>), c| {
                        cell_owners(c, &mut ow);
                        let simplices: &[u32] = match kd {
                            0 => mesh.cell(c),
                            1 => &mesh.cell_edges(c)[..nl],
                            x if x == dim => std::slice::from_ref(&0),
                            _ => mesh.cell_faces(c),
                        };
                        for &d in &ow {
                            for &s in simplices {
                                let s = if kd == dim { c as u32 } else { s };
                                if o[s as usize] != d {
                                    acc.push(((d as u64) << 32) | s as u64);
                                }
                            }
                        }
                        (acc, ow)
                    },
                )
                .map(|(a, _)| a)
                .reduce(Vec::new, |mut a, b| {
                    a.extend(b);
                    a
                });
            pairs.par_sort_unstable();
            pairs.dedup();
            for v in pairs {
                halo[(v >> 32) as usize] += per;
            }
        }
        let total: u64 = owned.iter().sum();
        let mean = total as f64 / k as f64;
        let max = owned.iter().copied().max().unwrap_or(0);
        PartitionReport {
            domains: k,
            partitioner: self.partitioner,
            order: p,
            cells: mesh.num_cells() as u64,
            nodes: total,
            edge_cut: self.edge_cut(mesh),
            imbalance: if mean > 0.0 {
                max as f64 / mean - 1.0
            } else {
                0.0
            },
            cells_per_domain: self.cells_per_domain(),
            local_cells,
            owned_nodes: owned,
            halo_nodes: halo,
        }
    }
}

/// Quality of a partition at one element order ([`Partition::report`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PartitionReport {
    pub domains: usize,
    pub partitioner: Partitioner,
    /// Element order `p` the node counts are for.
    pub order: usize,
    pub cells: u64,
    /// Nodes of the order-`p` mesh (each owned once).
    pub nodes: u64,
    /// Facets between cells of different domains.
    pub edge_cut: u64,
    /// `max owned nodes / mean - 1` (the same for DOFs, `e` per node).
    pub imbalance: f64,
    /// Cells assigned to each domain.
    pub cells_per_domain: Vec<u64>,
    /// Cells each domain holds: its own plus the ghost cells around its owned nodes.
    pub local_cells: Vec<u64>,
    /// Nodes each domain owns.
    pub owned_nodes: Vec<u64>,
    /// Nodes owned elsewhere that rows of each domain's owned nodes reference.
    pub halo_nodes: Vec<u64>,
}

impl PartitionReport {
    /// Total halo nodes over all domains (the values one halo exchange moves, per DOF).
    pub fn total_halo(&self) -> u64 {
        self.halo_nodes.iter().sum()
    }
    /// Largest halo of one domain.
    pub fn max_halo(&self) -> u64 {
        self.halo_nodes.iter().copied().max().unwrap_or(0)
    }
}

/// One row of a partition-quality sweep ([`sweep`]): a mesh split into `domains` domains
/// balancing the nodes of order `order`, with `dofs_per_node` DOFs per node.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SweepRow {
    pub mesh: String,
    pub cells: u64,
    pub partitioner: Partitioner,
    pub domains: usize,
    pub order: usize,
    pub dofs: u64,
    pub edge_cut: u64,
    pub imbalance: f64,
    /// Halo DOFs per domain: mean and largest.
    pub halo_dofs_mean: f64,
    pub halo_dofs_max: u64,
    /// Halo DOFs of all domains over all DOFs: the values one exchange moves per DOF solved.
    pub halo_ratio: f64,
    /// Wall time of the partition (without the report), ms.
    pub partition_ms: f64,
}

/// Partition `mesh` for every combination of `partitioners`, `domains` and `orders` and report
/// each ([`Partition::report`]); `on_row` sees each row as it is done.
pub fn sweep(
    mesh: &SimplexMesh,
    name: &str,
    partitioners: &[Partitioner],
    domains: &[usize],
    orders: &[usize],
    on_row: &mut dyn FnMut(&SweepRow),
) -> Result<Vec<SweepRow>, MeshError> {
    let e = mesh.dim() as u64;
    let mut rows = Vec::new();
    for &partitioner in partitioners {
        for &k in domains {
            for &p in orders {
                let t = std::time::Instant::now();
                let part = partition_cells(
                    mesh,
                    &PartitionParams {
                        domains: k,
                        order: p,
                        partitioner,
                    },
                )?;
                let partition_ms = t.elapsed().as_secs_f64() * 1e3;
                let r = part.report(mesh, p);
                let row = SweepRow {
                    mesh: name.to_string(),
                    cells: r.cells,
                    partitioner,
                    domains: k,
                    order: p,
                    dofs: r.nodes * e,
                    edge_cut: r.edge_cut,
                    imbalance: r.imbalance,
                    halo_dofs_mean: (r.total_halo() * e) as f64 / k as f64,
                    halo_dofs_max: r.max_halo() * e,
                    halo_ratio: r.total_halo() as f64 / r.nodes.max(1) as f64,
                    partition_ms,
                };
                on_row(&row);
                rows.push(row);
            }
        }
    }
    Ok(rows)
}

/// The rows of a [`sweep`] as a Markdown table.
pub fn sweep_markdown(rows: &[SweepRow]) -> String {
    let mut t = tessera_core::table::Table::new(&[
        "mesh",
        "cells",
        "partitioner",
        "k",
        "p",
        "DOFs",
        "edge cut",
        "imbalance %",
        "halo DOFs / domain (mean)",
        "halo DOFs (max)",
        "halo / DOFs",
        "partition ms",
    ]);
    for r in rows {
        t.row(vec![
            r.mesh.clone(),
            r.cells.to_string(),
            r.partitioner.name().to_string(),
            r.domains.to_string(),
            r.order.to_string(),
            r.dofs.to_string(),
            r.edge_cut.to_string(),
            format!("{:.2}", 100.0 * r.imbalance),
            format!("{:.0}", r.halo_dofs_mean),
            r.halo_dofs_max.to_string(),
            format!("{:.4}", r.halo_ratio),
            format!("{:.0}", r.partition_ms),
        ])
        .expect("twelve columns");
    }
    t.markdown()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{box_mesh, BoxKind};

    fn tets(n: [usize; 3]) -> SimplexMesh {
        SimplexMesh::from_poly(&box_mesh(
            BoxKind::Tet,
            n,
            [n[0] as f64, n[1] as f64, n[2] as f64],
        ))
        .unwrap()
    }

    #[test]
    fn weights_sum_to_node_count() {
        let m = tets([4, 3, 3]);
        for p in 1..=3 {
            let w: f64 = cell_node_weights(&m, p).iter().sum();
            let nodes = m.num_vertices()
                + (p - 1) * m.num_edges()
                + nodes_per_simplex(p, 2) * m.num_faces()
                + nodes_per_simplex(p, 3) * m.num_cells();
            assert!((w - nodes as f64).abs() < 1e-6 * nodes as f64, "p = {p}");
        }
    }

    #[test]
    fn every_simplex_owned_by_a_domain_of_its_cells() {
        let m = tets([5, 4, 3]);
        for partitioner in [Partitioner::Rcb, Partitioner::Metis] {
            let params = PartitionParams {
                domains: 5,
                order: 3,
                partitioner,
            };
            let part = partition_cells(&m, &params).unwrap();
            let own = part.ownership(&m, 3);
            for (k, t) in [m.vertex_cells(), m.edge_cells(), m.face_cells()]
                .into_iter()
                .enumerate()
            {
                for s in 0..t.nrows() {
                    let o = own.owner[k][s];
                    assert!(t
                        .row(s)
                        .iter()
                        .any(|&c| part.cell_domain[col(c) as usize] == o));
                }
            }
            let r = part.report(&m, 3);
            assert_eq!(r.owned_nodes.iter().sum::<u64>(), r.nodes);
            assert!(r.owned_nodes.iter().all(|&n| n > 0));
        }
    }

    #[test]
    fn domain_count_errors() {
        let m = tets([2, 1, 1]);
        let n = m.num_cells();
        for k in [0, n + 1] {
            let e = partition_cells(
                &m,
                &PartitionParams {
                    domains: k,
                    ..Default::default()
                },
            )
            .unwrap_err();
            assert!(matches!(e, MeshError::DomainCount { .. }), "{e}");
            assert!(e.to_string().contains(&format!("{k} domains")), "{e}");
        }
        // as many domains as cells: some domain owns no vertex at p = 1
        let e = partition_cells(
            &m,
            &PartitionParams {
                domains: n,
                order: 1,
                partitioner: Partitioner::Rcb,
            },
        )
        .unwrap_err();
        assert!(matches!(e, MeshError::EmptyDomain { .. }), "{e}");
    }

    #[test]
    fn rcb_balances_nodes() {
        let m = tets([12, 6, 5]);
        for k in [2, 3, 4, 7, 8] {
            let part = partition_cells(
                &m,
                &PartitionParams {
                    domains: k,
                    order: 2,
                    partitioner: Partitioner::Rcb,
                },
            )
            .unwrap();
            let r = part.report(&m, 2);
            assert!(r.imbalance < 0.15, "k = {k}: {}", r.imbalance);
        }
    }
}
