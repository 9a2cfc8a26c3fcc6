//! Assembly of the stiffness and consistent mass matrices into Bin-BCSR* (dissertation
//! §4.4.4, §4.5; Eq. 4.1: `K_ijkl = Σ_{T ∋ i, j} E_{T, L_T(i) L_T(j) kl}`).
//!
//! After the exact pattern ([`crate::pattern`]), the element matrices are summed in one of the
//! three ways the dissertation compares (§4.4.4, §4.5.2):
//!
//! - [`Summation::PerNode`]: each block row `i` (one task per bin of 32 rows, lanes in order)
//!   walks its node -> cells map; for every node `j` of every incident cell it adds the
//!   precomputed element block `E_{T,ab}` at the column position of `j` in row `i`. The
//!   positions come from the [`PositionMap`] built once with the pattern (the dissertation's
//!   GPU looks each column up by binary search during the summation; on the CPU the look-ups
//!   are done once per pattern and every refill reuses them). The diagonal is summed in
//!   registers and a row's off-diagonal blocks in a contiguous row buffer, written to the
//!   bin's strided layout once per row. Element matrices are computed once per cell,
//!   straight into the value type.
//! - [`Summation::Inline`]: the same walk, but the element blocks of row `a` are computed inside
//!   the summation from the cell's geometry (volume and barycentric gradients, computed once
//!   per cell into a small array: no element matrix array is allocated), with the operations
//!   of the stored element matrices, so the result equals the per-node one bit for bit. The
//!   dissertation implements this for p = 1 only (register pressure on the GPU); on the CPU
//!   it works for every `p`, and moving far fewer bytes it is the faster CPU summation. At
//!   p = 1 the block kernel is specialised (one outer product per block, no weight tables),
//!   and the geometry of the cells a few rows ahead is prefetched.
//! - [`Summation::PerEntry`]: per-entry contribution lists are precomputed (an
//!   `(entries) × (element blocks)` sparse map with `m² |T|` entries in total); summation then
//!   adds each entry's contributions in registers and writes it once.
//!
//! [`Summation::Auto`] (the default) picks inline on the CPU up to p = 3 and per-node on the
//! GPU and at higher orders ([`Summation::resolve`]).
//!
//! All three add the same contributions in the same order (cells ascending, then local node),
//! so they agree to rounding; each is deterministic, and `Par::Seq` equals `Par::Rayon`
//! bit for bit (every output entry is written by exactly one task).
//!
//! Element matrices are computed in `f64` ([`crate::element`]) and converted to `T` when stored
//! or added; sums are accumulated in `T`.

use crate::element::{num_sym_blocks, sym_index, CellGeometry, ElementTemplate};
use crate::error::FemError;
use crate::material::{Lame, Material};
use crate::nodes::HoMesh;
use crate::pattern::{
    build_pattern, build_pattern_rows_with_positions, build_pattern_with_positions, time,
    zayer_bound, PositionMap, RowSubset, Stages, DIAG,
};
use rayon::prelude::*;
use std::sync::Arc;
use std::time::Instant;
use tessera_core::{DeviceChoice, Par};
use tessera_sparse::binbcsr::{BinBcsr, BinBcsrPattern, Scalar, BIN_SIZE};

/// How element matrices are summed (dissertation §4.4.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Summation {
    /// The faster of per-node and inline for the device and order ([`Summation::resolve`]):
    /// inline on the CPU for `p <= 3`, per-node otherwise. All give the same values.
    #[default]
    Auto,
    /// Node -> cells maps and precomputed element matrices ("per node" / "Simplex" in Table 4.3).
    PerNode,
    /// Node -> cells maps, element matrices computed inside the summation ("Inline").
    Inline,
    /// Precomputed per-entry contribution lists ("Entry").
    PerEntry,
}

impl Summation {
    /// Command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Summation::Auto => "auto",
            Summation::PerNode => "per-node",
            Summation::Inline => "inline",
            Summation::PerEntry => "per-entry",
        }
    }

    /// The summation [`Summation::Auto`] stands for on the CPU (`cpu`) or a GPU at order
    /// `p`; any other method is returned as it is. On the CPU the inline summation moves a
    /// cell's geometry (112 bytes) instead of its stored element matrix (360 bytes at p = 1
    /// in f32, 1,980 at p = 2, 7,560 at p = 3) and is the faster one up to p = 3
    /// (BENCHMARKS.md); higher orders, unmeasured, keep the per-node summation, and so does
    /// the GPU, whose inline kernel covers p = 1 only (dissertation §4.4.4).
    pub fn resolve(self, cpu: bool, p: usize) -> Summation {
        match self {
            Summation::Auto if cpu && p <= 3 => Summation::Inline,
            Summation::Auto => Summation::PerNode,
            s => s,
        }
    }
}

impl std::str::FromStr for Summation {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Summation::Auto),
            "per-node" | "node" => Ok(Summation::PerNode),
            "inline" => Ok(Summation::Inline),
            "per-entry" | "entry" => Ok(Summation::PerEntry),
            _ => Err(format!(
                "unknown summation `{s}`: expected auto, per-node, inline or per-entry"
            )),
        }
    }
}

/// Knobs of [`assemble_stiffness`] and [`assemble_mass`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AssembleOptions {
    pub summation: Summation,
    pub par: Par,
    /// Where to assemble; `Auto` and `Cpu` run the CPU reference. CUDA assembly kernels are
    /// not part of this crate yet, so `Cuda(_)` is an error.
    pub device: DeviceChoice,
}

impl Default for AssembleOptions {
    fn default() -> Self {
        Self {
            summation: Summation::Auto,
            par: Par::auto(),
            device: DeviceChoice::Cpu,
        }
    }
}

/// Sizes and stage times of one assembly.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct AssemblyStats {
    /// Degrees of freedom `n e`.
    pub dofs: u64,
    /// Exact number of `e × e` blocks, diagonal included (Eq. 4.6 summed).
    pub block_nonzeros: u64,
    /// Zayer et al.'s upper bound on the blocks ([`zayer_bound`]).
    pub zayer_bound: u64,
    /// Bytes of the final Bin-BCSR* matrix (pattern, values, diagonal).
    pub bytes_allocated: u64,
    /// Off-diagonal slots that are bin padding.
    pub padding_blocks: u64,
    /// Bytes of temporary arrays of the summation (element matrices, per-entry maps).
    pub aux_bytes: u64,
    /// Stage times in ms (Table 4.2 rows: `alloc_element_matrices`, `count_contributions`,
    /// `bin_offsets`, `alloc_final`, `column_indices`, `element_matrices`, `entry_maps`,
    /// `summation`, and `total`).
    pub stages_ms: Stages,
}

impl AssemblyStats {
    /// The counts known once the pattern is built (the byte counts are filled by the refill).
    fn of_pattern(pattern: &BinBcsrPattern, e: usize, mesh: &HoMesh, stages: Stages) -> Self {
        Self {
            dofs: (pattern.num_block_rows() * e) as u64,
            block_nonzeros: pattern.block_nonzeros(),
            zayer_bound: zayer_bound(mesh),
            bytes_allocated: 0,
            padding_blocks: pattern.padding_blocks(),
            aux_bytes: 0,
            stages_ms: stages,
        }
    }
}

/// An assembled matrix and its statistics.
#[derive(Clone, Debug)]
pub struct Assembly<T: Scalar> {
    pub matrix: BinBcsr<T>,
    pub stats: AssemblyStats,
}

/// The bilinear form to assemble.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Operator {
    /// Linear isotropic elasticity (Eq. 4.7).
    Stiffness(Lame),
    /// Consistent mass with density `ρ`.
    Mass(f64),
}

/// Assemble the stiffness matrix `K` of linear isotropic elasticity (Eq. 4.7) for `mesh`
/// (order `p` from the mesh) into Bin-BCSR* (dissertation §4.4).
pub fn assemble_stiffness<T: Scalar>(
    mesh: &HoMesh,
    material: &Material,
    opts: &AssembleOptions,
) -> Result<Assembly<T>, FemError> {
    let lame = material.lame()?;
    assemble(mesh, Operator::Stiffness(lame), opts)
}

/// Assemble the consistent mass matrix `M` (density from `material`).
pub fn assemble_mass<T: Scalar>(
    mesh: &HoMesh,
    material: &Material,
    opts: &AssembleOptions,
) -> Result<Assembly<T>, FemError> {
    material.validate()?;
    assemble(mesh, Operator::Mass(material.density), opts)
}

/// Pattern, then summation, with stage times.
pub fn assemble<T: Scalar>(
    mesh: &HoMesh,
    op: Operator,
    opts: &AssembleOptions,
) -> Result<Assembly<T>, FemError> {
    check_device(opts.device)?;
    let t0 = Instant::now();
    let mut asm = Assembler::new(mesh, opts.summation, opts.par)?;
    let matrix = asm.assemble::<T>(op)?;
    let mut stats = asm.stats.clone();
    stats.bytes_allocated = matrix.bytes_allocated() as u64;
    stats.aux_bytes = asm.aux_bytes::<T>();
    stats
        .stages_ms
        .insert("total".into(), t0.elapsed().as_secs_f64() * 1e3);
    Ok(Assembly { matrix, stats })
}

fn check_device(d: DeviceChoice) -> Result<(), FemError> {
    match d {
        DeviceChoice::Auto | DeviceChoice::Cpu => Ok(()),
        DeviceChoice::Cuda(_) => Err(FemError::Device {
            device: d.to_string(),
            reason: "GPU assembly kernels are not available in this build; use --device cpu".into(),
        }),
    }
}

/// Per-entry contribution lists (dissertation §4.4.4, "per entry" maps): for every
/// off-diagonal slot and every diagonal block, the element blocks that sum into it, encoded
/// as `(cell · m(m+1)/2 + sym_index) << 1 | transposed`.
#[derive(Clone, Debug)]
struct EntryMaps {
    off_offsets: Vec<u32>,
    off: Vec<u32>,
    diag_offsets: Vec<u32>,
    diag: Vec<u32>,
}

/// A reusable assembler: the pattern (and per-entry maps) are computed once; values are
/// summed again for each call of [`Assembler::assemble`] (dissertation §4.1: "when there are
/// no changes to the topology, only the summation step must be repeated").
pub struct Assembler<'a> {
    mesh: &'a HoMesh,
    tmpl: ElementTemplate,
    summation: Summation,
    par: Par,
    pattern: Arc<BinBcsrPattern>,
    maps: Option<EntryMaps>,
    positions: Option<PositionMap>,
    rows: Option<Arc<RowSubset>>,
    stats: AssemblyStats,
}

impl<'a> Assembler<'a> {
    /// Build the exact pattern (and, for [`Summation::PerEntry`], the entry maps).
    /// [`Summation::Auto`] is resolved for the CPU ([`Summation::resolve`]).
    pub fn new(mesh: &'a HoMesh, summation: Summation, par: Par) -> Result<Self, FemError> {
        let summation = summation.resolve(true, mesh.order());
        let d = mesh.dim();
        let tmpl = ElementTemplate::new(d, mesh.order())?;
        let e = tmpl.dof_dim();
        let mut stages = Stages::new();
        let (pattern, positions) = if summation == Summation::PerEntry {
            (build_pattern(mesh, e, par, &mut stages)?, None)
        } else {
            let (p, m) = build_pattern_with_positions(mesh, e, par, &mut stages)?;
            (p, Some(m))
        };
        let pattern = Arc::new(pattern);
        let maps = if summation == Summation::PerEntry {
            Some(time(&mut stages, "entry_maps", || {
                build_entry_maps(mesh, &pattern, par)
            })?)
        } else {
            None
        };
        let stats = AssemblyStats::of_pattern(&pattern, e, mesh, stages);
        Ok(Self {
            mesh,
            tmpl,
            summation,
            par,
            pattern,
            maps,
            positions,
            rows: None,
            stats,
        })
    }

    /// An assembler of the rows of `rows` only (per-node or inline summation): the exact
    /// pattern of those rows with columns renumbered by the subset, and values summed from
    /// the cells incident to each row's node (dissertation §4.4.3-§4.4.4 restricted to the
    /// nodes a domain owns, §7.1.2). Element matrices are still computed for every cell of
    /// `mesh` (each contributes to some row when `mesh` holds only the cells around the rows).
    pub fn new_rows(
        mesh: &'a HoMesh,
        rows: RowSubset,
        summation: Summation,
        par: Par,
    ) -> Result<Self, FemError> {
        let summation = summation.resolve(true, mesh.order());
        if summation == Summation::PerEntry {
            return Err(FemError::InvalidInput(
                "a row-restricted assembly sums per node or inline, not per entry".into(),
            ));
        }
        let d = mesh.dim();
        let tmpl = ElementTemplate::new(d, mesh.order())?;
        let e = tmpl.dof_dim();
        let mut stages = Stages::new();
        let (pattern, positions) =
            build_pattern_rows_with_positions(mesh, e, &rows, par, &mut stages)?;
        let pattern = Arc::new(pattern);
        let stats = AssemblyStats::of_pattern(&pattern, e, mesh, stages);
        Ok(Self {
            mesh,
            tmpl,
            summation,
            par,
            pattern,
            maps: None,
            positions: Some(positions),
            rows: Some(Arc::new(rows)),
            stats,
        })
    }

    /// The summation method in use ([`Summation::Auto`] resolved).
    pub fn summation(&self) -> Summation {
        self.summation
    }

    /// The row subset of a row-restricted assembler ([`Self::new_rows`]).
    pub fn rows(&self) -> Option<&RowSubset> {
        self.rows.as_deref()
    }

    /// The exact pattern.
    pub fn pattern(&self) -> &Arc<BinBcsrPattern> {
        &self.pattern
    }

    /// Statistics so far (pattern stages, and those of the last summation).
    pub fn stats(&self) -> &AssemblyStats {
        &self.stats
    }

    fn aux_bytes<T: Scalar>(&self) -> u64 {
        let elt = if self.summation == Summation::Inline {
            (self.mesh.num_cells() * std::mem::size_of::<CellGeometry>()) as u64
        } else {
            (self.mesh.num_cells() * self.tmpl.sym_len() * std::mem::size_of::<T>()) as u64
        };
        let maps = self.maps.as_ref().map_or(0, |m| {
            4 * (m.off_offsets.len() + m.off.len() + m.diag_offsets.len() + m.diag.len()) as u64
        });
        elt + maps + self.positions.as_ref().map_or(0, PositionMap::bytes)
    }

    /// Sum the element matrices of `op` into a new matrix on the shared pattern.
    pub fn assemble<T: Scalar>(&mut self, op: Operator) -> Result<BinBcsr<T>, FemError> {
        let mut stages = std::mem::take(&mut self.stats.stages_ms);
        for k in [
            "alloc_element_matrices",
            "element_matrices",
            "cell_geometry",
            "summation",
        ] {
            stages.remove(k);
        }
        let res = self.assemble_inner(op, &mut stages);
        self.stats.stages_ms = stages;
        res
    }

    fn assemble_inner<T: Scalar>(
        &self,
        op: Operator,
        stages: &mut Stages,
    ) -> Result<BinBcsr<T>, FemError> {
        let mesh = self.mesh;
        let par = self.par;
        let mut matrix = BinBcsr::<T>::zeros(self.pattern.clone());
        match self.summation {
            Summation::Inline => {
                let map = self.positions.as_ref().expect("built with the pattern");
                let geom = time(stages, "cell_geometry", || cell_geometries(mesh, par))?;
                time(stages, "summation", || {
                    sum_per_node(
                        mesh,
                        &self.tmpl,
                        &mut matrix,
                        par,
                        Source::Inline(op, &geom),
                        map,
                        self.rows.as_deref(),
                    )
                })?;
            }
            Summation::PerNode | Summation::PerEntry | Summation::Auto => {
                let sym_len = self.tmpl.sym_len();
                let ncells = mesh.num_cells();
                let mut elts: Vec<T> = time(stages, "alloc_element_matrices", || {
                    let mut v = vec![T::ZERO; ncells * sym_len];
                    tessera_core::bulk::advise_huge_pages(&mut v);
                    v
                });
                time(stages, "element_matrices", || {
                    element_matrices(mesh, &self.tmpl, op, par, &mut elts)
                })?;
                time(stages, "summation", || {
                    match (&self.maps, &self.positions) {
                        (Some(maps), _) => sum_per_entry(&self.tmpl, maps, &mut matrix, par, &elts),
                        (None, Some(map)) => sum_per_node(
                            mesh,
                            &self.tmpl,
                            &mut matrix,
                            par,
                            Source::Stored(&elts),
                            map,
                            self.rows.as_deref(),
                        ),
                        (None, None) => unreachable!("per-node summation has a position map"),
                    }
                })?;
            }
        }
        Ok(matrix)
    }
}

/// Geometry of cell `c` from its vertex positions.
fn cell_geometry(mesh: &HoMesh, c: usize) -> Result<CellGeometry, FemError> {
    let sm = mesh.mesh();
    let pos = sm.positions();
    let mut v = [[0.0; 3]; 4];
    for (k, &vi) in sm.cell(c).iter().enumerate() {
        v[k] = pos[vi as usize];
    }
    CellGeometry::new(mesh.dim(), &v[..mesh.dim() + 1], c)
}

/// The symmetric element matrices of all cells (`sym_len` scalars per cell), computed once
/// per cell straight into `T` (chunks of cells per task).
fn element_matrices<T: Scalar>(
    mesh: &HoMesh,
    tmpl: &ElementTemplate,
    op: Operator,
    par: Par,
    out: &mut [T],
) -> Result<(), FemError> {
    let sym_len = tmpl.sym_len();
    if sym_len == 0 {
        return Ok(());
    }
    const CELLS: usize = 256;
    let chunk = |(k, dst): (usize, &mut [T])| -> Result<(), FemError> {
        for (j, cell) in dst.chunks_exact_mut(sym_len).enumerate() {
            let c = k * CELLS + j;
            let g = cell_geometry(mesh, c)?;
            match op {
                Operator::Stiffness(l) => tmpl.stiffness_sym_as(&g, l, cell),
                Operator::Mass(rho) => tmpl.mass_sym_as(&g, rho, cell),
            }
        }
        Ok(())
    };
    if par.is_parallel() {
        out.par_chunks_mut(sym_len * CELLS)
            .enumerate()
            .try_for_each(chunk)
    } else {
        out.chunks_mut(sym_len * CELLS)
            .enumerate()
            .try_for_each(chunk)
    }
}

/// The geometry (volume, barycentric gradients) of every cell, computed once per cell for
/// the inline summation; degenerate cells are reported here.
fn cell_geometries(mesh: &HoMesh, par: Par) -> Result<Vec<CellGeometry>, FemError> {
    use std::mem::MaybeUninit;
    let n = mesh.num_cells();
    // written once, straight into the new array's pages (no fill before)
    let mut out: Vec<CellGeometry> = Vec::with_capacity(n);
    tessera_core::bulk::advise_huge_pages(&mut out);
    const CELLS: usize = 1024;
    let chunk = |(k, dst): (usize, &mut [MaybeUninit<CellGeometry>])| -> Result<(), FemError> {
        for (j, g) in dst.iter_mut().enumerate() {
            g.write(cell_geometry(mesh, k * CELLS + j)?);
        }
        Ok(())
    };
    let spare = &mut out.spare_capacity_mut()[..n];
    if par.is_parallel() {
        spare
            .par_chunks_mut(CELLS)
            .enumerate()
            .try_for_each(chunk)?;
    } else {
        spare.chunks_mut(CELLS).enumerate().try_for_each(chunk)?;
    }
    // SAFETY: every element of `spare` (exactly `0..n` of the capacity) was written above;
    // on an error we returned before this point and the vector is dropped with length 0.
    unsafe { out.set_len(n) };
    Ok(out)
}

enum Source<'s, T> {
    /// Precomputed symmetric element matrices.
    Stored(&'s [T]),
    /// Blocks computed inside the summation from each cell's geometry.
    Inline(Operator, &'s [CellGeometry]),
}

/// Per-node (and inline) summation: one task per bin, lanes in order (dissertation §4.4.4),
/// every contribution added at the position the [`PositionMap`] holds for it.
fn sum_per_node<T: Scalar>(
    mesh: &HoMesh,
    tmpl: &ElementTemplate,
    matrix: &mut BinBcsr<T>,
    par: Par,
    src: Source<'_, T>,
    map: &PositionMap,
    rows: Option<&RowSubset>,
) -> Result<(), FemError> {
    match tmpl.dof_dim() {
        3 => sum_per_node_e::<T, 3, 9>(mesh, tmpl, matrix, par, src, map, rows),
        2 => sum_per_node_e::<T, 2, 4>(mesh, tmpl, matrix, par, src, map, rows),
        e => Err(FemError::UnsupportedDimension(e)),
    }
}

/// [`sum_per_node`] for `E`-dimensional DOFs (`E2 = E²` scalars per block).
fn sum_per_node_e<T: Scalar, const E: usize, const E2: usize>(
    mesh: &HoMesh,
    tmpl: &ElementTemplate,
    matrix: &mut BinBcsr<T>,
    par: Par,
    src: Source<'_, T>,
    map: &PositionMap,
    rows: Option<&RowSubset>,
) -> Result<(), FemError> {
    let node = |i: usize| rows.map_or(i, |r| r.rows[i] as usize) as u32;
    let pattern = matrix.pattern_arc().clone();
    let p = &*pattern;
    let n = p.num_block_rows();
    let m = tmpl.num_nodes();
    let nsym = num_sym_blocks(m);
    let nc = mesh.node_cells();
    if map.m != m || map.row_start.len() != n + 1 {
        return Err(FemError::PatternMismatch {
            row: 0,
            expected: map.m as u32,
            found: m as u32,
        });
    }
    // element block of (a, b): its upper-triangle index and whether it is transposed
    let sym: Vec<(usize, bool)> = (0..m * m)
        .map(|ab| {
            let (a, b) = (ab / m, ab % m);
            if a <= b {
                (sym_index(a, b, m), false)
            } else {
                (sym_index(b, a, m), true)
            }
        })
        .collect();
    let run = |(b, vals, diag): (usize, &mut [T], &mut [T])| -> Result<(), FemError> {
        let base = p.bin_offsets()[b] as usize;
        let w32 = p.bin_offsets()[b + 1] as usize - base;
        // the row's off-diagonal blocks, contiguous (`E2` scalars per column position):
        // contributions are added here and the row is written to the bin's strided
        // layout once, instead of touching `E2` planes `w32` apart for every contribution
        let mut acc = vec![[T::ZERO; E2]; w32 / BIN_SIZE];
        let rows = BIN_SIZE.min(n - b * BIN_SIZE);
        let mut next_cells = nc.row(node(b * BIN_SIZE));
        for lane in 0..rows {
            let i = b * BIN_SIZE + lane;
            let r0 = map.row_start[i] as usize;
            let len = p.row_lengths()[i] as usize;
            let acc = &mut acc[..len];
            acc.fill([T::ZERO; E2]);
            let mut dacc = [T::ZERO; E2];
            let cells = next_cells;
            if lane + 1 < rows {
                next_cells = nc.row(node(i + 1));
            }
            for (k, &c) in cells.iter().enumerate() {
                if let Source::Inline(_, geom) = src {
                    // the geometry of a later cell of this row (or the next): cells around
                    // a node are far apart in memory
                    let ahead = k + PREFETCH_CELLS;
                    let pc = if ahead < cells.len() {
                        Some(cells[ahead])
                    } else if lane + 1 < rows {
                        next_cells.get(ahead - cells.len()).copied()
                    } else {
                        None
                    };
                    if let Some(pc) = pc {
                        // all cache lines of the cell's geometry (two or three)
                        let gp = (&geom[pc as usize] as *const CellGeometry).cast::<u8>();
                        let size = std::mem::size_of::<CellGeometry>();
                        for off in (0..size).step_by(64).chain([size - 1]) {
                            prefetch_ptr(gp.wrapping_add(off));
                        }
                    }
                }
                if let Source::Stored(elts) = src {
                    // the element blocks of a later (row, cell) pair of this bin: their
                    // cells are far apart in memory, so their loads are started early
                    let ahead = k + PREFETCH_PAIRS;
                    let (pc, pk) = if ahead < cells.len() {
                        (cells[ahead] as usize, r0 + ahead)
                    } else if lane + 1 < rows && ahead - cells.len() < next_cells.len() {
                        let j = ahead - cells.len();
                        (next_cells[j] as usize, map.row_start[i + 1] as usize + j)
                    } else {
                        (usize::MAX, 0)
                    };
                    if pc != usize::MAX {
                        let pa = map.local[pk] as usize;
                        for &(si, _) in &sym[pa * m..(pa + 1) * m] {
                            prefetch(&elts[(pc * nsym + si) * E2]);
                        }
                    }
                }
                let c = c as usize;
                let a = map.local[r0 + k] as usize;
                let ranks = &map.rank[(r0 + k) * m..(r0 + k + 1) * m];
                // block (a, bl) of the element matrix (e × e row-major) at its position
                let mut put = |bl: usize, blk: [T; E2]| {
                    let rank = ranks[bl];
                    if rank == DIAG {
                        for q in 0..E2 {
                            dacc[q] += blk[q];
                        }
                    } else {
                        let dst = &mut acc[rank as usize];
                        for q in 0..E2 {
                            dst[q] += blk[q];
                        }
                    }
                };
                match src {
                    Source::Inline(Operator::Stiffness(l), geom) => {
                        tmpl.stiffness_row_with::<T, E, E2>(&geom[c], l, a, &mut put)
                    }
                    Source::Inline(Operator::Mass(rho), geom) => {
                        tmpl.mass_row_with::<T, E, E2>(&geom[c], rho, a, &mut put)
                    }
                    Source::Stored(elts) => {
                        for bl in 0..m {
                            let (si, tr) = sym[a * m + bl];
                            let s: &[T; E2] = elts[(c * nsym + si) * E2..][..E2]
                                .try_into()
                                .expect("E2 scalars");
                            let mut blk = *s;
                            if tr {
                                for k in 0..E {
                                    for l in 0..E {
                                        blk[k * E + l] = s[l * E + k];
                                    }
                                }
                            }
                            put(bl, blk);
                        }
                    }
                }
            }
            for q in 0..E2 {
                let plane = &mut vals[q * w32..(q + 1) * w32];
                for (k, blk) in acc.iter().enumerate() {
                    plane[k * BIN_SIZE + lane] = blk[q];
                }
            }
            diag[lane * E2..(lane + 1) * E2].copy_from_slice(&dacc);
        }
        Ok(())
    };
    let bins = matrix.bins_mut();
    if par.is_parallel() {
        bins.into_par_iter().try_for_each(run)
    } else {
        bins.into_iter().try_for_each(run)
    }
}

/// How many (row, cell) pairs ahead [`sum_per_node`] starts loading element blocks.
const PREFETCH_PAIRS: usize = 2;

/// How many (row, cell) pairs ahead the inline summation starts loading cell geometry.
const PREFETCH_CELLS: usize = 4;

/// Start loading the cache line at `p` (a hint that never dereferences `p`).
#[inline(always)]
fn prefetch_ptr(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint that never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Start loading the cache line of `x` (a hint; no effect on the results).
#[inline(always)]
fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint that never faults; the address is of a live reference.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            x as *const T as *const i8,
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}

/// Build the per-entry contribution lists (count, scan, fill; one task per bin).
fn build_entry_maps(mesh: &HoMesh, p: &BinBcsrPattern, par: Par) -> Result<EntryMaps, FemError> {
    let n = p.num_block_rows();
    let m = mesh.nodes_per_cell();
    let nsym = num_sym_blocks(m);
    if (mesh.num_cells() as u64) * (nsym as u64) * 2 > u32::MAX as u64 {
        return Err(FemError::TooLarge(
            "per-entry maps need more than 32-bit element block indices".into(),
        ));
    }
    let nc = mesh.node_cells();
    // visit (row i, lane, contribution) in the per-node order, calling f(slot or diag, code)
    let visit = |b: usize, f: &mut dyn FnMut(usize, Option<usize>, u32)| -> Result<(), FemError> {
        let base = p.bin_offsets()[b] as usize;
        let mut nodes = vec![0u32; m];
        let mut row_cols: Vec<u32> = Vec::new();
        for lane in 0..BIN_SIZE.min(n - b * BIN_SIZE) {
            let i = b * BIN_SIZE + lane;
            row_cols.clear();
            row_cols.extend(
                (0..p.row_lengths()[i] as usize)
                    .map(|k| p.col_indices()[base + k * BIN_SIZE + lane]),
            );
            for &c in nc.row(i as u32) {
                let c = c as usize;
                mesh.cell_nodes(c, &mut nodes);
                let a = nodes.iter().position(|&x| x as usize == i).ok_or(
                    FemError::PatternMismatch {
                        row: i,
                        expected: 0,
                        found: 0,
                    },
                )?;
                for (bl, &j) in nodes.iter().enumerate() {
                    let (lo, hi, tr) = if a <= bl { (a, bl, 0) } else { (bl, a, 1) };
                    let code = (((c * nsym + sym_index(lo, hi, m)) as u32) << 1) | tr;
                    if j as usize == i {
                        f(i, None, code);
                    } else {
                        let k =
                            row_cols
                                .binary_search(&j)
                                .map_err(|_| FemError::PatternMismatch {
                                    row: i,
                                    expected: row_cols.len() as u32 + 1,
                                    found: row_cols.len() as u32 + 2,
                                })?;
                        f(i, Some(base + k * BIN_SIZE + lane), code);
                    }
                }
            }
        }
        Ok(())
    };
    let nb = p.num_bins();
    // count
    let count_bin = |b: usize| -> Result<(Vec<u32>, Vec<u32>), FemError> {
        let base = p.bin_offsets()[b] as usize;
        let mut off = vec![0u32; p.bin_offsets()[b + 1] as usize - base];
        let mut dg = vec![0u32; BIN_SIZE.min(n - b * BIN_SIZE)];
        visit(b, &mut |i, s, _| match s {
            Some(s) => off[s - base] += 1,
            None => dg[i - b * BIN_SIZE] += 1,
        })?;
        Ok((off, dg))
    };
    let counts: Vec<Result<(Vec<u32>, Vec<u32>), FemError>> = if par.is_parallel() {
        (0..nb).into_par_iter().map(count_bin).collect()
    } else {
        (0..nb).map(count_bin).collect()
    };
    let mut off_counts = Vec::with_capacity(p.num_slots());
    let mut diag_counts = Vec::with_capacity(n);
    for r in counts {
        let (o, d) = r?;
        off_counts.extend(o);
        diag_counts.extend(d);
    }
    let too_large = || FemError::TooLarge("more than 2^32 - 1 per-entry contributions".into());
    let off_offsets =
        tessera_core::scan::offsets_from_counts(par, &off_counts).ok_or_else(too_large)?;
    let diag_offsets =
        tessera_core::scan::offsets_from_counts(par, &diag_counts).ok_or_else(too_large)?;
    drop(off_counts);
    drop(diag_counts);
    let mut off = vec![0u32; *off_offsets.last().unwrap() as usize];
    let mut diag = vec![0u32; *diag_offsets.last().unwrap() as usize];
    // fill: split both arrays by bins
    let off_splits: Vec<u32> = p
        .bin_offsets()
        .iter()
        .map(|&o| off_offsets[o as usize])
        .collect();
    let diag_splits: Vec<u32> = (0..=nb)
        .map(|b| diag_offsets[(b * BIN_SIZE).min(n)])
        .collect();
    let off_pieces = split_mut(&mut off, &off_splits);
    let diag_pieces = split_mut(&mut diag, &diag_splits);
    let fill_bin = |(b, (op, dp)): (usize, (&mut [u32], &mut [u32]))| -> Result<(), FemError> {
        let obase = off_splits[b] as usize;
        let dbase = diag_splits[b] as usize;
        let mut ocur: Vec<u32> = Vec::new();
        let pbase = p.bin_offsets()[b] as usize;
        ocur.extend(
            (pbase..p.bin_offsets()[b + 1] as usize).map(|s| off_offsets[s] - obase as u32),
        );
        let mut dcur: Vec<u32> = (b * BIN_SIZE..((b + 1) * BIN_SIZE).min(n))
            .map(|i| diag_offsets[i] - dbase as u32)
            .collect();
        visit(b, &mut |i, s, code| match s {
            Some(s) => {
                let k = &mut ocur[s - pbase];
                op[*k as usize] = code;
                *k += 1;
            }
            None => {
                let k = &mut dcur[i - b * BIN_SIZE];
                dp[*k as usize] = code;
                *k += 1;
            }
        })
    };
    let pieces: Vec<(&mut [u32], &mut [u32])> = off_pieces.into_iter().zip(diag_pieces).collect();
    let res: Vec<Result<(), FemError>> = if par.is_parallel() {
        pieces.into_par_iter().enumerate().map(fill_bin).collect()
    } else {
        pieces.into_iter().enumerate().map(fill_bin).collect()
    };
    res.into_iter().collect::<Result<(), FemError>>()?;
    Ok(EntryMaps {
        off_offsets,
        off,
        diag_offsets,
        diag,
    })
}

fn split_mut<'a>(mut data: &'a mut [u32], splits: &[u32]) -> Vec<&'a mut [u32]> {
    let mut out = Vec::with_capacity(splits.len().saturating_sub(1));
    for w in splits.windows(2) {
        let (a, b) = std::mem::take(&mut data).split_at_mut((w[1] - w[0]) as usize);
        out.push(a);
        data = b;
    }
    out
}

/// Per-entry summation: every entry sums its contribution list in registers and is written
/// once (dissertation §4.4.4).
fn sum_per_entry<T: Scalar>(
    tmpl: &ElementTemplate,
    maps: &EntryMaps,
    matrix: &mut BinBcsr<T>,
    par: Par,
    elts: &[T],
) -> Result<(), FemError> {
    let pattern = matrix.pattern_arc().clone();
    let p = &*pattern;
    let n = p.num_block_rows();
    let e = tmpl.dof_dim();
    let e2 = e * e;
    let gather = |list: &[u32]| -> [T; 9] {
        let mut acc = [T::ZERO; 9];
        for &code in list {
            let s = &elts[(code >> 1) as usize * e2..][..e2];
            if code & 1 == 0 {
                for q in 0..e2 {
                    acc[q] += s[q];
                }
            } else {
                for k in 0..e {
                    for l in 0..e {
                        acc[k * e + l] += s[l * e + k];
                    }
                }
            }
        }
        acc
    };
    let run = |(b, vals, diag): (usize, &mut [T], &mut [T])| {
        let base = p.bin_offsets()[b] as usize;
        let w32 = p.bin_offsets()[b + 1] as usize - base;
        for s in 0..w32 {
            let gs = base + s;
            let list = &maps.off[maps.off_offsets[gs] as usize..maps.off_offsets[gs + 1] as usize];
            if list.is_empty() {
                continue;
            }
            let acc = gather(list);
            for q in 0..e2 {
                vals[q * w32 + s] = acc[q];
            }
        }
        for lane in 0..BIN_SIZE.min(n - b * BIN_SIZE) {
            let i = b * BIN_SIZE + lane;
            let list = &maps.diag[maps.diag_offsets[i] as usize..maps.diag_offsets[i + 1] as usize];
            let acc = gather(list);
            diag[lane * e2..(lane + 1) * e2].copy_from_slice(&acc[..e2]);
        }
    };
    let bins = matrix.bins_mut();
    if par.is_parallel() {
        bins.into_par_iter().for_each(run);
    } else {
        bins.into_iter().for_each(run);
    }
    Ok(())
}
