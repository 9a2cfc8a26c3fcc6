//! Domain decomposition of an order-`p` mesh and per-domain assembly (dissertation §7.1.2:
//! "local, per-domain matrix assembly in distributed or multi-GPU simulations using domain
//! decomposition"; the assembly itself is §4.4).
//!
//! Pipeline: a cell [`Partition`] (METIS or RCB, [`tessera_mesh::partition`]) -> node
//! ownership -> a [`DomainLayout`] (per domain: local cells, local node numbering, halo
//! exchange plan) -> per-domain Bin-BCSR* assembly of the owned rows ([`assemble_domains`])
//! -> [`tessera_solve::PartitionedOperator`].
//!
//! - **Ownership.** Every node belongs to exactly one domain: all nodes of a simplex share the
//!   owner of that simplex, the domain of one of the simplex's cells picked by a fixed hash
//!   ([`tessera_mesh::partition::owner_of`]; a cell's interior nodes belong to the cell's
//!   domain). So an owned node always lies in a cell of its domain.
//! - **Local cells.** A domain holds every cell containing a node it owns: its own cells
//!   that do, plus one layer of ghost cells of other domains. These are all the cells whose
//!   element matrices sum into its rows (Eq. 4.1).
//! - **Local numbering.** Owned nodes first - interior ones (all of whose cells hold only
//!   owned nodes, so their rows need no halo value), then boundary ones, each run ascending
//!   by global node and then, within windows of [`ROW_WINDOW`] rows, by descending row length
//!   (less bin padding: [`order_rows_in_windows`]) - then the halo (the other nodes of the
//!   local cells, i.e. exactly the off-domain columns of the owned rows), grouped by owning
//!   domain ascending, then by global node. The halo segment of neighbour `j` is therefore contiguous and in the order of
//!   `j`'s send list to this domain ([`tessera_solve::HaloPlan`]).
//! - **Assembly.** Each domain builds the sub-mesh of its local cells (vertices renumbered
//!   in ascending global order, cells in ascending global order, so every cell keeps its
//!   vertex order and its nodes' numbering conventions), and runs the exact-allocation
//!   Bin-BCSR* assembly on it restricted to the owned rows ([`Assembler::new_rows`]):
//!   counts (Eq. 4.6), bins, exact allocation, columns renumbered to local indices, and the
//!   per-node summation of the local cells' element matrices. No global matrix is built,
//!   and no ghost row is assembled. The contributions of each row are added in the same
//!   order as in the global assembly, so each domain's rows equal the global ones exactly.

use crate::assemble::{Assembler, AssemblyStats, Operator, Summation};
use crate::error::FemError;
use crate::nodes::HoMesh;
use crate::pattern::RowSubset;
use rayon::prelude::*;
use std::time::Instant;
use tessera_core::Par;
use tessera_mesh::partition::Partition;
use tessera_mesh::simplex::SimplexMesh;
use tessera_mesh::Point;
use tessera_solve::{DomainMatrix, HaloPlan};
use tessera_sparse::tcsr::col;

/// One domain of a [`DomainLayout`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Domain {
    /// Global indices of the local cells (owned cells holding an owned node, then the ghost
    /// layer), ascending.
    pub cells: Vec<u32>,
    /// How many of [`Self::cells`] are the domain's own (the others are ghost cells).
    pub num_own_cells: usize,
    /// Global node of every local node: owned (interior, boundary), then halo.
    pub local_to_global: Vec<u32>,
    /// Owned nodes.
    pub num_owned: usize,
    /// Owned nodes whose rows need no halo value (the first ones).
    pub num_interior: usize,
    /// Halo exchange plan (send lists in local indices; receive segments of the halo).
    pub halo: HaloPlan,
}

impl Domain {
    /// Halo nodes.
    pub fn num_halo(&self) -> usize {
        self.local_to_global.len() - self.num_owned
    }
    /// Global nodes of the owned nodes, in local order.
    pub fn owned_global(&self) -> &[u32] {
        &self.local_to_global[..self.num_owned]
    }
    /// Global nodes of the halo, in local order.
    pub fn halo_global(&self) -> &[u32] {
        &self.local_to_global[self.num_owned..]
    }
}

/// Node ownership, local numbering and halo plans of all domains of an order-`p` mesh (see
/// the [module docs](self)).
#[derive(Clone, Debug)]
pub struct DomainLayout {
    /// Element order.
    pub order: usize,
    /// The cell partition it was built from.
    pub partition: Partition,
    /// Owning domain of every global node.
    pub node_owner: Vec<u32>,
    pub domains: Vec<Domain>,
    /// Block-row offsets of the domains' owned nodes in concatenated vectors (`k + 1`).
    pub offsets: Vec<usize>,
}

/// `(global, local)` pairs of a domain's nodes sorted by global node, for look-ups.
fn lookup_table(local_to_global: &[u32]) -> Vec<(u32, u32)> {
    let mut t: Vec<(u32, u32)> = local_to_global
        .iter()
        .enumerate()
        .map(|(l, &g)| (g, l as u32))
        .collect();
    t.sort_unstable();
    t
}

/// Owned rows are ordered by length within windows of this many rows (see
/// [`order_rows_in_windows`]).
pub const ROW_WINDOW: usize = 1024;

/// Within each run of [`ROW_WINDOW`] consecutive nodes of `nodes` (ascending global nodes on
/// entry), order the nodes by descending row length `row_len` (block non-zeros, Eq. 4.6), ties
/// by ascending global node. A Bin-BCSR* bin of 32 rows is padded to its longest row
/// (dissertation §4.4.2); on the Morton-ordered bracket at p = 2 the bins of the mesh order
/// are padded by about 56 % of the stored blocks, after this ordering by about 2.5 %, while
/// rows and columns stay within a window of their place in the mesh order (the locality of
/// the SpMV's reads of x). Sorting rows by length is the idea of the formats the dissertation
/// sets aside in §4.4.2 because the output comes in a permuted basis; a domain's local
/// numbering is a permutation already, so here it costs nothing.
fn order_rows_in_windows(nodes: &mut [u32], row_len: &[u32]) {
    nodes
        .par_chunks_mut(ROW_WINDOW)
        .for_each(|w| w.sort_unstable_by_key(|&i| (std::cmp::Reverse(row_len[i as usize]), i)));
}

fn find(table: &[(u32, u32)], g: u32) -> Option<u32> {
    table
        .binary_search_by_key(&g, |x| x.0)
        .ok()
        .map(|i| table[i].1)
}

impl DomainLayout {
    /// The layout of `partition` on the order-`p` mesh `ho`. Errors: a partition of another
    /// mesh, or a domain that owns no node.
    pub fn new(ho: &HoMesh, partition: &Partition) -> Result<Self, FemError> {
        let sm = ho.mesh();
        let p = ho.order();
        partition.check(sm, p)?;
        let k = partition.domains;
        let own = partition.ownership(sm, p);
        let n = ho.num_nodes();
        // owner of every node: that of its simplex
        let mut node_owner = vec![0u32; n];
        for kd in 0..=ho.dim() {
            let per = ho.nodes_per_simplex(kd);
            if per == 0 || own.owner[kd].is_empty() {
                continue;
            }
            let base = ho.node_base(kd);
            node_owner[base..ho.node_base(kd + 1)]
                .par_chunks_mut(per)
                .zip(own.owner[kd].par_iter())
                .for_each(|(dst, &o)| dst.fill(o));
        }
        // owned nodes of each domain, ascending (counting sort by owner)
        let mut count = vec![0usize; k + 1];
        for &o in &node_owner {
            count[o as usize + 1] += 1;
        }
        for d in 0..k {
            count[d + 1] += count[d];
        }
        let mut owned_sorted = vec![0u32; n];
        {
            let mut at = count.clone();
            for (i, &o) in node_owner.iter().enumerate() {
                owned_sorted[at[o as usize]] = i as u32;
                at[o as usize] += 1;
            }
        }
        let nc = ho.node_cells();
        let m = ho.nodes_per_cell();
        // block non-zeros per row (Eq. 4.6), for the order of the owned rows in their windows
        let row_len = crate::count::row_counts(ho, Par::Rayon);
        // per domain: local cells, interior/boundary owned nodes, halo by owner
        let partial: Vec<(Vec<u32>, usize, Vec<u32>, usize)> = (0..k)
            .into_par_iter()
            .map(|d| {
                let owned = &owned_sorted[count[d]..count[d + 1]];
                let mut cells: Vec<u32> = owned
                    .iter()
                    .flat_map(|&i| nc.row(i).iter().map(|&c| col(c)))
                    .collect();
                cells.sort_unstable();
                cells.dedup();
                let num_own_cells = cells
                    .iter()
                    .filter(|&&c| partition.cell_domain[c as usize] == d as u32)
                    .count();
                let mut halo: Vec<(u32, u32)> = Vec::new();
                let mut boundary: Vec<u32> = Vec::new();
                let mut nodes = vec![0u32; m];
                for &c in &cells {
                    ho.cell_nodes(c as usize, &mut nodes);
                    let before = halo.len();
                    for &j in &nodes {
                        let o = node_owner[j as usize];
                        if o != d as u32 {
                            halo.push((o, j));
                        }
                    }
                    if halo.len() > before {
                        boundary.extend(
                            nodes
                                .iter()
                                .filter(|&&j| node_owner[j as usize] == d as u32),
                        );
                    }
                }
                halo.sort_unstable();
                halo.dedup();
                boundary.sort_unstable();
                boundary.dedup();
                // interior = owned \ boundary (both ascending)
                let mut l2g = Vec::with_capacity(owned.len() + halo.len());
                let mut bi = 0;
                for &i in owned {
                    while bi < boundary.len() && boundary[bi] < i {
                        bi += 1;
                    }
                    if bi < boundary.len() && boundary[bi] == i {
                        continue;
                    }
                    l2g.push(i);
                }
                let num_interior = l2g.len();
                l2g.extend_from_slice(&boundary);
                order_rows_in_windows(&mut l2g[..num_interior], &row_len);
                order_rows_in_windows(&mut l2g[num_interior..], &row_len);
                l2g.extend(halo.iter().map(|&(_, j)| j));
                (cells, num_own_cells, l2g, num_interior)
            })
            .collect();
        let tables: Vec<Vec<(u32, u32)>> = partial
            .par_iter()
            .map(|(_, _, l2g, _)| lookup_table(l2g))
            .collect();
        // halo plans: the halo segment of owner j in domain d is what j sends to d
        let domains: Vec<Domain> = (0..k)
            .into_par_iter()
            .map(|d| {
                let (cells, num_own_cells, l2g, num_interior) = &partial[d];
                let num_owned = count[d + 1] - count[d];
                // receive segments, by owner
                let halo_nodes = &l2g[num_owned..];
                let mut neighbours: Vec<u32> =
                    halo_nodes.iter().map(|&j| node_owner[j as usize]).collect();
                neighbours.dedup();
                let mut recv_offsets = vec![0u32];
                for &nb in &neighbours {
                    let end = recv_offsets.last().unwrap()
                        + halo_nodes[*recv_offsets.last().unwrap() as usize..]
                            .iter()
                            .take_while(|&&j| node_owner[j as usize] == nb)
                            .count() as u32;
                    recv_offsets.push(end);
                }
                // send lists: d's owned nodes in the halo of each neighbour j
                let mut send_offsets = vec![0u32];
                let mut send_nodes = Vec::new();
                for &j in &neighbours {
                    let (_, _, jl2g, _) = &partial[j as usize];
                    let jo = count[j as usize + 1] - count[j as usize];
                    for &g in &jl2g[jo..] {
                        if node_owner[g as usize] == d as u32 {
                            send_nodes.push(find(&tables[d], g).expect("owned node is local"));
                        }
                    }
                    send_offsets.push(send_nodes.len() as u32);
                }
                Domain {
                    cells: cells.clone(),
                    num_own_cells: *num_own_cells,
                    local_to_global: l2g.clone(),
                    num_owned,
                    num_interior: *num_interior,
                    halo: HaloPlan {
                        neighbours,
                        send_offsets,
                        send_nodes,
                        recv_offsets,
                    },
                }
            })
            .collect();
        let mut offsets = vec![0usize];
        for dm in &domains {
            offsets.push(offsets.last().unwrap() + dm.num_owned);
        }
        Ok(Self {
            order: p,
            partition: partition.clone(),
            node_owner,
            domains,
            offsets,
        })
    }

    /// Number of domains.
    pub fn num_domains(&self) -> usize {
        self.domains.len()
    }
    /// Total nodes.
    pub fn num_nodes(&self) -> usize {
        self.node_owner.len()
    }

    /// Node-major global vector (`e` values per node) -> concatenated owned parts.
    pub fn scatter<T: Copy + Send + Sync>(&self, global: &[T], e: usize) -> Vec<T> {
        let mut out = Vec::with_capacity(global.len());
        for dm in &self.domains {
            for &g in dm.owned_global() {
                out.extend_from_slice(&global[g as usize * e..(g as usize + 1) * e]);
            }
        }
        out
    }

    /// Concatenated owned parts -> node-major global vector (`e` values per node).
    pub fn gather<T: Copy + Default>(&self, parts: &[T], e: usize) -> Vec<T> {
        let mut out = vec![T::default(); self.num_nodes() * e];
        let mut at = 0;
        for dm in &self.domains {
            for &g in dm.owned_global() {
                out[g as usize * e..(g as usize + 1) * e].copy_from_slice(&parts[at..at + e]);
                at += e;
            }
        }
        out
    }

    /// The sub-mesh of domain `d`'s local cells (vertices renumbered in ascending global
    /// order, cells in ascending global order) and the order-`p` mesh over it, with the
    /// [`RowSubset`] of its owned rows in local numbering.
    pub fn local_mesh(&self, ho: &HoMesh, d: usize) -> Result<(HoMesh, RowSubset), FemError> {
        let sm = ho.mesh();
        let dm = &self.domains[d];
        let nv = sm.vertices_per_cell();
        let mut verts: Vec<u32> = dm
            .cells
            .iter()
            .flat_map(|&c| sm.cell(c as usize).iter().copied())
            .collect();
        verts.sort_unstable();
        verts.dedup();
        let cv: Vec<u32> = dm
            .cells
            .iter()
            .flat_map(|&c| {
                sm.cell(c as usize)
                    .iter()
                    .map(|&v| verts.binary_search(&v).expect("a vertex of the cell") as u32)
            })
            .collect();
        debug_assert_eq!(cv.len(), dm.cells.len() * nv);
        let pos: Vec<Point> = verts.iter().map(|&v| sm.positions()[v as usize]).collect();
        let mut sub = SimplexMesh::new(sm.dim(), cv, pos)?;
        sub.set_par(Par::Seq);
        let lho = HoMesh::new(sub, self.order)?;
        // sub-mesh node -> global node, through the cells' node lists
        let m = ho.nodes_per_cell();
        let mut sub_to_global = vec![u32::MAX; lho.num_nodes()];
        let (mut a, mut b) = (vec![0u32; m], vec![0u32; m]);
        for (lc, &gc) in dm.cells.iter().enumerate() {
            lho.cell_nodes(lc, &mut a);
            ho.cell_nodes(gc as usize, &mut b);
            for (&s, &g) in a.iter().zip(&b) {
                sub_to_global[s as usize] = g;
            }
        }
        let table = lookup_table(&dm.local_to_global);
        let mut column = vec![0u32; lho.num_nodes()];
        let mut node_of_column = vec![u32::MAX; lho.num_nodes()];
        for (s, &g) in sub_to_global.iter().enumerate() {
            let l = find(&table, g).ok_or_else(|| {
                FemError::InvalidInput(format!(
                    "domain {d}: node {g} of a local cell is neither owned nor halo"
                ))
            })?;
            column[s] = l;
            node_of_column[l as usize] = s as u32;
        }
        let rows = node_of_column[..dm.num_owned].to_vec();
        let subset = RowSubset {
            rows,
            column,
            node_of_column,
        };
        subset.validate(lho.num_nodes())?;
        Ok((lho, subset))
    }

    /// Node positions of the owned nodes, concatenated like the operator's vectors.
    pub fn owned_positions(&self, positions: &[Point]) -> Vec<Point> {
        self.scatter(positions, 1)
    }
}

/// One domain's assembled rows and its timings.
#[derive(Clone, Debug)]
pub struct DomainAssembly {
    pub matrix: DomainMatrix,
    pub stats: AssemblyStats,
    /// Wall time of the domain's local mesh, pattern and summation, ms.
    pub total_ms: f64,
}

/// Assemble the owned rows of every domain (see the [module docs](self)). Domains run one
/// after another, each with `par` inside (on one machine the parallelism is within the
/// assembly); each domain touches only its local cells.
pub fn assemble_domains(
    ho: &HoMesh,
    layout: &DomainLayout,
    op: Operator,
    par: Par,
) -> Result<Vec<DomainAssembly>, FemError> {
    (0..layout.num_domains())
        .map(|d| {
            let t = Instant::now();
            let (lho, rows) = layout.local_mesh(ho, d)?;
            let mut asm = Assembler::new_rows(&lho, rows, Summation::PerNode, par)?;
            let matrix = asm.assemble::<f64>(op)?;
            let mut stats = asm.stats().clone();
            stats.bytes_allocated = matrix.bytes_allocated() as u64;
            let dm = &layout.domains[d];
            let matrix =
                DomainMatrix::new(matrix, dm.num_interior, dm.num_halo(), dm.halo.clone())?;
            Ok(DomainAssembly {
                matrix,
                stats,
                total_ms: t.elapsed().as_secs_f64() * 1e3,
            })
        })
        .collect()
}
