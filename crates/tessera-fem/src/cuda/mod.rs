//! FEM assembly on CUDA (dissertation §4.4.3-§4.4.4, §4.5; the GPU columns of Tables
//! 4.2-4.3). The device matrices, their SpMV (Listing 4.1) and the PCG live in
//! [`tessera_solve::cuda`].
//!
//! | step | GPU algorithm | CPU reference |
//! |---|---|---|
//! | node counts (Eq. 4.6) | atomic adds of binomials per simplex, expanded per node | [`crate::count::row_counts`] |
//! | bin offsets | per-bin maxima by warp shuffles, scan (tessera-gpu), exact allocation | [`crate::pattern::build_pattern`] |
//! | column indices | one thread per row, sorted insertion, 63 slots in shared memory, global fallback | [`crate::pattern::fill_columns`] |
//! | element matrices | one warp per cell, closed form with host-tabulated weights | [`crate::element::ElementTemplate`] |
//! | summation | per node (node -> cells), inline (p = 1), per entry (contribution lists) | [`crate::assemble`] |
//!
//! The mesh is uploaded once ([`DeviceHoMesh`]): vertex positions, `cellVertices`, the
//! simplex arrays the Eq. 4.6 passes read, and (computed on the host) the cell -> node array
//! and the node -> cells map. Each block row is owned by one thread in every kernel that
//! writes matrix entries, and entries are summed in the CPU reference's order, so the GPU
//! matrix equals the CPU one up to rounding (and is deterministic from run to run).

use crate::assemble::{AssemblyStats, Operator, Summation};
use crate::element::{num_sym_blocks, ElementTemplate};
use crate::error::FemError;
use crate::material::Material;
use crate::multi_index::binomial;
use crate::nodes::HoMesh;
use crate::pattern::{RowSubset, Stages};
use rayon::prelude::*;
use std::sync::Arc;
use tessera_gpu::{
    CompileOptions, DeviceBuffer, Element, EventTimer, Gpu, GpuError, Kernel, LaunchConfig, Module,
    Primitives,
};
use tessera_sparse::binbcsr::{BIN_SIZE, PAD};

/// CUDA source of the FEM kernels (deterministic: a constant).
pub const SOURCE: &str = include_str!("kernels/fem.cu");

const BLOCK: u32 = 256;
/// Threads per block of the column fill (63 shared-memory slots each: 32 KB per block).
const FILL_BLOCK: u32 = 128;

fn gpu_err(e: GpuError) -> FemError {
    FemError::Device {
        device: "cuda".into(),
        reason: e.to_string(),
    }
}

pub use tessera_solve::cuda::{DeviceBinBcsr, DeviceBinBcsrPattern, GpuScalar};

/// The compiled FEM kernels of one device.
pub struct FemKernels<'g> {
    gpu: &'g Gpu,
    prims: Primitives<'g>,
    module: Arc<Module>,
}

impl<'g> FemKernels<'g> {
    /// Compile (once, then from the kernel caches) and load the FEM kernels.
    pub fn new(gpu: &'g Gpu) -> Result<Self, FemError> {
        let module = gpu
            .compile(SOURCE, &CompileOptions::named("tessera_fem.cu"))
            .map_err(gpu_err)?;
        Ok(FemKernels {
            gpu,
            prims: gpu.primitives().map_err(gpu_err)?,
            module,
        })
    }
    /// The device.
    pub fn gpu(&self) -> &'g Gpu {
        self.gpu
    }
    fn k(&self, name: &str) -> Result<Kernel, FemError> {
        self.module.function(name).map_err(gpu_err)
    }
}

fn cfg(n: usize, threads: u32) -> Result<LaunchConfig, FemError> {
    LaunchConfig::for_items(n, threads).map_err(gpu_err)
}

fn grid_stride(n: usize) -> LaunchConfig {
    LaunchConfig::blocks((n.div_ceil(BLOCK as usize)).clamp(1, 1 << 16) as u32, BLOCK)
}

/// Upload, with a one-element placeholder for empty arrays (kernels never read it).
fn up<T: Element>(gpu: &Gpu, data: &[T]) -> Result<DeviceBuffer<T>, FemError> {
    if data.is_empty() {
        gpu.upload(&[T::default()]).map_err(gpu_err)
    } else {
        gpu.upload(data).map_err(gpu_err)
    }
}

fn to_u32(n: usize, what: &str) -> Result<u32, FemError> {
    u32::try_from(n).map_err(|_| FemError::TooLarge(format!("{what} = {n} does not fit 32 bits")))
}

fn check_err(gpu: &Gpu, err: &DeviceBuffer<u32>, what: &str) -> Result<u32, FemError> {
    let v = gpu.download_at(err, 0).map_err(gpu_err)?;
    if v != 0 && what == "element" {
        return Err(FemError::DegenerateCell {
            cell: v as usize - 1,
            volume: f64::NAN,
        });
    }
    Ok(v)
}

// ============================================================================ mesh

/// An order-`p` simplex mesh in device memory, as assembly needs it (see the module docs).
pub struct DeviceHoMesh {
    d: usize,
    p: usize,
    m: usize,
    nnodes: usize,
    /// Block rows assembled: all nodes, or the rows of a [`RowSubset`].
    nrows: usize,
    /// Mesh node of every row for a [`RowSubset`] (the counts of Eq. 4.6 are formed for all
    /// nodes, then gathered for the rows).
    row_nodes: Option<DeviceBuffer<u32>>,
    ncells: usize,
    base: [usize; 5],
    per: [usize; 4],
    counts: [usize; 6],
    positions: DeviceBuffer<f64>,
    cell_vertices: DeviceBuffer<u32>,
    edges: DeviceBuffer<u32>,
    faces: DeviceBuffer<u32>,
    face_edges: DeviceBuffer<i32>,
    cell_edges: DeviceBuffer<u32>,
    cell_faces: DeviceBuffer<u32>,
    cell_nodes: DeviceBuffer<u32>,
    nc_offsets: DeviceBuffer<u32>,
    nc_cells: DeviceBuffer<i32>,
}

impl DeviceHoMesh {
    /// Upload `ho` (the cell -> node array and the node -> cells map are formed on the host).
    pub fn upload(gpu: &Gpu, ho: &HoMesh) -> Result<Self, FemError> {
        Self::upload_inner(gpu, ho, None)
    }

    /// Upload `ho` for the assembly of the rows of `rows` only, with columns in the subset's
    /// numbering (dissertation §7.1.2: a domain's owned rows over its local cells): the cell
    /// -> node array holds columns instead of nodes and the node -> cells map is listed for
    /// the rows, so the pattern and summation kernels run unchanged on `rows.rows.len()`
    /// rows. Row `i` must be the node of column `i` (the owned nodes are the first columns,
    /// as in [`crate::domain::DomainLayout::local_mesh`]).
    pub fn upload_rows(gpu: &Gpu, ho: &HoMesh, rows: &RowSubset) -> Result<Self, FemError> {
        rows.validate(ho.num_nodes())?;
        if let Some(i) = rows
            .rows
            .iter()
            .enumerate()
            .position(|(i, &r)| rows.node_of_column[i] != r)
        {
            return Err(FemError::InvalidInput(format!(
                "row subset: row {i} (node {}) is not column {i}; the device assembly needs \
                 the rows numbered first among the columns",
                rows.rows[i]
            )));
        }
        Self::upload_inner(gpu, ho, Some(rows))
    }

    fn upload_inner(gpu: &Gpu, ho: &HoMesh, rows: Option<&RowSubset>) -> Result<Self, FemError> {
        let sm = ho.mesh();
        let d = ho.dim();
        let p = ho.order();
        let m = ho.nodes_per_cell();
        let nc = ho.num_cells();
        if (nc as u64) * (num_sym_blocks(m) as u64) * 2 > u32::MAX as u64
            || (nc as u64) * (m as u64) > u32::MAX as u64
        {
            return Err(FemError::TooLarge(
                "cell -> node arrays need more than 32-bit indices".into(),
            ));
        }
        let mut tr = tessera_core::trace::Tracer::new("DeviceHoMesh::upload");
        let pos: Vec<f64> = sm
            .positions()
            .iter()
            .flat_map(|p| p.iter().copied())
            .collect();
        let mut cn = vec![0u32; nc * m];
        cn.par_chunks_mut(m.max(1))
            .enumerate()
            .with_min_len(256)
            .for_each(|(c, out)| {
                ho.cell_nodes(c, out);
                if let Some(rs) = rows {
                    for j in out.iter_mut() {
                        *j = rs.column[*j as usize];
                    }
                }
            });
        tr.mark("positions + cell nodes");
        let ncm = match rows {
            None => ho.node_cells_tcsr(),
            Some(rs) => {
                // the incident cells of every row's node, rows in order
                let cells_of = ho.node_cells();
                let mut offsets = Vec::with_capacity(rs.rows.len() + 1);
                offsets.push(0u32);
                let mut cols = Vec::new();
                for &r in &rs.rows {
                    cols.extend_from_slice(cells_of.row(r));
                    offsets.push(u32::try_from(cols.len()).map_err(|_| {
                        FemError::TooLarge("more than 2^32 node-cell pairs".into())
                    })?);
                }
                tessera_sparse::tcsr::Tcsr::from_raw_unchecked(nc, offsets, cols)
            }
        };
        tr.mark("node -> cells");
        let empty_u32: &[u32] = &[];
        let edges: &[u32] = sm.edges().as_flattened();
        tr.mark("edges");
        let faces: &[u32] = if d == 3 && p >= 2 {
            sm.faces().as_flattened()
        } else {
            empty_u32
        };
        let face_edges: &[i32] = if d == 3 && p >= 2 {
            sm.face_edges()
        } else {
            &[]
        };
        let cell_edges: &[u32] = if p >= 2 {
            sm.cell_edges_array()
        } else {
            empty_u32
        };
        let cell_faces: &[u32] = if d == 3 && p >= 3 {
            sm.cell_faces_array()
        } else {
            empty_u32
        };
        let mut base = [0usize; 5];
        for k in 0..=d + 1 {
            base[k] = ho.node_base(k.min(d + 1));
        }
        for k in d + 2..5 {
            base[k] = base[d + 1];
        }
        let per = [
            1,
            ho.nodes_per_simplex(1),
            ho.nodes_per_simplex(2),
            ho.nodes_per_simplex(3),
        ];
        let counts = [
            sm.num_vertices(),
            edges.len(),
            faces.len(),
            face_edges.len(),
            cell_edges.len(),
            cell_faces.len(),
        ];
        tr.mark("faces, face edges, cell edges, cell faces");
        let r = Ok(DeviceHoMesh {
            d,
            p,
            m,
            nnodes: ho.num_nodes(),
            nrows: rows.map_or(ho.num_nodes(), |rs| rs.rows.len()),
            row_nodes: match rows {
                Some(rs) => Some(up(gpu, &rs.rows)?),
                None => None,
            },
            ncells: nc,
            base,
            per,
            counts,
            positions: up(gpu, &pos)?,
            cell_vertices: up(gpu, sm.cell_vertices())?,
            edges: up(gpu, edges)?,
            faces: up(gpu, faces)?,
            face_edges: up(gpu, face_edges)?,
            cell_edges: up(gpu, cell_edges)?,
            cell_faces: up(gpu, cell_faces)?,
            cell_nodes: up(gpu, &cn)?,
            nc_offsets: up(gpu, ncm.offsets())?,
            nc_cells: up(gpu, ncm.columns())?,
        });
        tr.mark("copies");
        r
    }
    pub fn num_nodes(&self) -> usize {
        self.nnodes
    }
    /// Block rows the assembly builds (all nodes, or those of the row subset).
    pub fn num_rows(&self) -> usize {
        self.nrows
    }
    pub fn num_cells(&self) -> usize {
        self.ncells
    }
    pub fn order(&self) -> usize {
        self.p
    }
    pub fn dim(&self) -> usize {
        self.d
    }
}

// ============================================================================ assembly

/// Per-entry contribution lists in device memory (see [`crate::assemble::Summation::PerEntry`]).
struct DeviceEntryMaps {
    off_offsets: DeviceBuffer<u32>,
    off: DeviceBuffer<u32>,
    diag_offsets: DeviceBuffer<u32>,
    diag: DeviceBuffer<u32>,
}

/// Stiffness weights `W_abij` and mass weights of [`ElementTemplate`], tabulated on the host
/// with the same formulas (see [`crate::element`]).
fn weights(tmpl: &ElementTemplate) -> (Vec<f64>, Vec<f64>) {
    let (d, p) = (tmpl.dim(), tmpl.order());
    let alphas = tmpl.multi_indices();
    let m = alphas.len();
    let nv = d + 1;
    let mb = |a: &[u8; 4], b: &[u8; 4]| -> f64 {
        (0..4)
            .map(|i| binomial(a[i] as usize + b[i] as usize, a[i] as usize) as f64)
            .product()
    };
    let denom_k = binomial(2 * p - 2, p - 1) as f64 * binomial(2 * p - 2 + d, d) as f64;
    let pp = (p * p) as f64;
    let mut stiff = vec![0.0; m * m * nv * nv];
    for a in 0..m {
        for b in 0..m {
            for i in 0..nv {
                if alphas[a][i] == 0 {
                    continue;
                }
                let mut ai = alphas[a];
                ai[i] -= 1;
                for j in 0..nv {
                    if alphas[b][j] == 0 {
                        continue;
                    }
                    let mut bj = alphas[b];
                    bj[j] -= 1;
                    stiff[(a * m + b) * nv * nv + i * nv + j] = pp * mb(&ai, &bj) / denom_k;
                }
            }
        }
    }
    let denom_m = binomial(2 * p, p) as f64 * binomial(2 * p + d, d) as f64;
    let mut mass = vec![0.0; m * m];
    for a in 0..m {
        for b in 0..m {
            mass[a * m + b] = mb(&alphas[a], &alphas[b]) / denom_m;
        }
    }
    (stiff, mass)
}

/// A reusable GPU assembler: the exact pattern (and the per-entry maps) are built once on
/// the device; [`GpuAssembler::assemble`] sums new values (dissertation §4.1).
pub struct GpuAssembler<'k, 'g> {
    k: &'k FemKernels<'g>,
    dm: &'k DeviceHoMesh,
    summation: Summation,
    pattern: Arc<DeviceBinBcsrPattern>,
    maps: Option<DeviceEntryMaps>,
    stiff_w: DeviceBuffer<f64>,
    mass_w: DeviceBuffer<f64>,
    pairs: DeviceBuffer<u32>,
    nsym: usize,
    stats: AssemblyStats,
}

fn timed<R>(
    gpu: &Gpu,
    stages: &mut Stages,
    name: &str,
    f: impl FnOnce() -> Result<R, FemError>,
) -> Result<R, FemError> {
    let t = EventTimer::new(gpu).map_err(gpu_err)?;
    t.start().map_err(gpu_err)?;
    let r = f()?;
    let ms = t.stop().map_err(gpu_err)? as f64;
    *stages.entry(name.to_string()).or_insert(0.0) += ms;
    Ok(r)
}

impl<'k, 'g> GpuAssembler<'k, 'g> {
    /// Build the exact pattern on the device (and, for per-entry summation, the maps).
    /// Stage times (CUDA events, ms): `count_contributions`, `bin_offsets`, `alloc_final`,
    /// `column_indices`, `entry_maps`.
    pub fn new(
        k: &'k FemKernels<'g>,
        dm: &'k DeviceHoMesh,
        summation: Summation,
    ) -> Result<Self, FemError> {
        let g = k.gpu;
        let tmpl = ElementTemplate::new(dm.d, dm.p)?;
        let summation = summation.resolve(false, dm.p);
        if summation == Summation::Inline && dm.p != 1 {
            return Err(FemError::Device {
                device: "cuda".into(),
                reason: format!("inline summation runs on the GPU for p = 1 only (dissertation §4.4.4), not p = {}", dm.p),
            });
        }
        let e = tmpl.dof_dim();
        let mut stages = Stages::new();
        let pattern = Arc::new(build_pattern_gpu(k, dm, e, &mut stages)?);
        let maps = if summation == Summation::PerEntry {
            Some(timed(g, &mut stages, "entry_maps", || {
                build_entry_maps_gpu(k, dm, &pattern)
            })?)
        } else {
            None
        };
        let (sw, mw) = weights(&tmpl);
        let m = dm.m;
        let mut pairs = Vec::with_capacity(num_sym_blocks(m));
        for a in 0..m {
            for b in a..m {
                pairs.push(a as u32 | (b as u32) << 16);
            }
        }
        let n = pattern.num_block_rows();
        let padding = pattern.num_slots() as u64 - pattern.off_diagonal_blocks();
        let stats = AssemblyStats {
            dofs: (n * e) as u64,
            block_nonzeros: pattern.block_nonzeros(),
            zayer_bound: dm.ncells as u64 * (m * m) as u64,
            bytes_allocated: 0,
            padding_blocks: padding,
            aux_bytes: 0,
            stages_ms: stages,
        };
        Ok(GpuAssembler {
            k,
            dm,
            summation,
            pattern,
            maps,
            stiff_w: up(g, &sw)?,
            mass_w: up(g, &mw)?,
            pairs: up(g, &pairs)?,
            nsym: num_sym_blocks(m),
            stats,
        })
    }

    /// The device pattern.
    pub fn pattern(&self) -> &Arc<DeviceBinBcsrPattern> {
        &self.pattern
    }
    /// Statistics (pattern stages and those of the last summation).
    pub fn stats(&self) -> &AssemblyStats {
        &self.stats
    }

    /// Sum the element matrices of `op` into a new device matrix on the shared pattern.
    /// Stages: `alloc_element_matrices`, `element_matrices`, `summation`.
    pub fn assemble<T: GpuScalar>(&mut self, op: Operator) -> Result<DeviceBinBcsr<T>, FemError> {
        let g = self.k.gpu;
        for s in ["alloc_element_matrices", "element_matrices", "summation"] {
            self.stats.stages_ms.remove(s);
        }
        let mut stages = std::mem::take(&mut self.stats.stages_ms);
        let r = self.assemble_inner::<T>(op, &mut stages);
        self.stats.stages_ms = stages;
        let mat = r?;
        let s = std::mem::size_of::<T>() as u64;
        let p = &*self.pattern;
        let e2 = (p.block_dim() * p.block_dim()) as u64;
        self.stats.bytes_allocated = 4
            * (p.num_slots() + p.num_bins() + 1 + p.num_block_rows()) as u64
            + (p.num_slots() as u64 + p.num_block_rows() as u64) * e2 * s;
        let elts = if self.summation == Summation::Inline {
            0
        } else {
            self.dm.ncells as u64 * self.nsym as u64 * e2 * s
        };
        let maps = self.maps.as_ref().map_or(0, |m| {
            (m.off_offsets.bytes() + m.off.bytes() + m.diag_offsets.bytes() + m.diag.bytes()) as u64
        });
        self.stats.aux_bytes = elts + maps;
        let _ = g;
        Ok(mat)
    }

    fn assemble_inner<T: GpuScalar>(
        &self,
        op: Operator,
        stages: &mut Stages,
    ) -> Result<DeviceBinBcsr<T>, FemError> {
        let g = self.k.gpu;
        let dm = self.dm;
        let p = &*self.pattern;
        let e2 = p.block_dim() * p.block_dim();
        let (opcode, lambda, mu) = match op {
            Operator::Stiffness(l) => (0u32, l.lambda, l.mu),
            Operator::Mass(rho) => (1u32, rho, 0.0),
        };
        if self.summation == Summation::Inline && opcode != 0 {
            return Err(FemError::Device {
                device: "cuda".into(),
                reason: "inline summation on the GPU assembles the p = 1 stiffness matrix only"
                    .into(),
            });
        }
        let err = g.zeros::<u32>(1).map_err(gpu_err)?;
        let nc = to_u32(dm.ncells, "cells")?;
        let m = dm.m as u32;
        let nsym = self.nsym as u32;
        let elts: DeviceBuffer<T> = if self.summation == Summation::Inline {
            g.zeros::<T>(1).map_err(gpu_err)?
        } else {
            let buf = timed(g, stages, "alloc_element_matrices", || {
                g.alloc::<T>((dm.ncells * self.nsym * e2).max(1))
                    .map_err(gpu_err)
            })?;
            timed(g, stages, "element_matrices", || {
                let w = if opcode == 0 {
                    &self.stiff_w
                } else {
                    &self.mass_w
                };
                g.launch(
                    &self
                        .k
                        .k(&format!("element_matrices_{}_{}", T::SUFFIX, dm.d))?,
                    cfg(dm.ncells * 32, BLOCK)?,
                )
                .arg(&nc)
                .arg(&dm.positions)
                .arg(&dm.cell_vertices)
                .arg(w)
                .arg(&self.pairs)
                .arg(&m)
                .arg(&nsym)
                .arg(&opcode)
                .arg(&lambda)
                .arg(&mu)
                .arg(&buf)
                .arg(&err)
                .run()
                .map_err(gpu_err)
            })?;
            check_err(g, &err, "element")?;
            buf
        };
        let n = p.num_block_rows() as u32;
        let mat = timed(g, stages, "summation", || {
            let mut values = g.alloc::<T>((p.num_slots() * e2).max(1)).map_err(gpu_err)?;
            let diag = g
                .alloc::<T>((p.num_block_rows() * e2).max(1))
                .map_err(gpu_err)?;
            match &self.maps {
                None => {
                    g.memset_zero(&mut values).map_err(gpu_err)?;
                    let mode = u32::from(self.summation == Summation::Inline);
                    g.launch(
                        &self.k.k(&format!("sum_per_node_{}_{}", T::SUFFIX, dm.d))?,
                        cfg(p.num_block_rows(), BLOCK)?,
                    )
                    .arg(&n)
                    .arg(&p.bin_offsets)
                    .arg(&p.row_lengths)
                    .arg(&p.col_indices)
                    .arg(&dm.nc_offsets)
                    .arg(&dm.nc_cells)
                    .arg(&dm.cell_nodes)
                    .arg(&m)
                    .arg(&elts)
                    .arg(&mode)
                    .arg(&dm.positions)
                    .arg(&dm.cell_vertices)
                    .arg(&lambda)
                    .arg(&mu)
                    .arg(&values)
                    .arg(&diag)
                    .arg(&err)
                    .run()
                    .map_err(gpu_err)?;
                }
                Some(maps) => {
                    // padding slots have empty lists and keep the zeros
                    g.memset_zero(&mut values).map_err(gpu_err)?;
                    let ns = to_u32(p.num_slots(), "slots")?;
                    let nb = p.num_bins() as u32;
                    g.launch(
                        &self.k.k(&format!("sum_per_entry_{}_{}", T::SUFFIX, dm.d))?,
                        cfg(p.num_slots(), BLOCK)?,
                    )
                    .arg(&ns)
                    .arg(&nb)
                    .arg(&p.bin_offsets)
                    .arg(&maps.off_offsets)
                    .arg(&maps.off)
                    .arg(&elts)
                    .arg(&values)
                    .run()
                    .map_err(gpu_err)?;
                    g.launch(
                        &self
                            .k
                            .k(&format!("sum_per_entry_diag_{}_{}", T::SUFFIX, dm.d))?,
                        cfg(p.num_block_rows(), BLOCK)?,
                    )
                    .arg(&n)
                    .arg(&maps.diag_offsets)
                    .arg(&maps.diag)
                    .arg(&elts)
                    .arg(&diag)
                    .run()
                    .map_err(gpu_err)?;
                }
            }
            DeviceBinBcsr::from_parts(self.pattern.clone(), values, diag).map_err(FemError::from)
        })?;
        let bad = check_err(g, &err, "summation")?;
        if bad != 0 {
            return Err(FemError::PatternMismatch {
                row: bad as usize - 1,
                expected: 0,
                found: 0,
            });
        }
        Ok(mat)
    }
}

/// The exact pattern on the device (dissertation §4.4.3).
fn build_pattern_gpu(
    k: &FemKernels<'_>,
    dm: &DeviceHoMesh,
    e: usize,
    stages: &mut Stages,
) -> Result<DeviceBinBcsrPattern, FemError> {
    let g = k.gpu;
    let (d, p) = (dm.d, dm.p);
    let n = dm.nnodes;
    let n32 = to_u32(n, "nodes")?;
    let coef = |k: usize, l: usize| binomial(p + k, l) as u32;
    let kmax = (p - 1).min(d);
    let nsimp = [
        dm.counts[0],
        dm.counts[1] / 2,
        if d == 3 { dm.counts[2] / 3 } else { dm.ncells },
        dm.ncells,
    ];
    let lengths = timed(g, stages, "count_contributions", || {
        let init = |len: usize, v: u32| -> Result<DeviceBuffer<u32>, FemError> {
            let b = g.alloc::<u32>(len.max(1)).map_err(gpu_err)?;
            let l = len as u64;
            g.launch(&k.k("fill_u32")?, grid_stride(len))
                .arg(&b)
                .arg(&l)
                .arg(&v)
                .run()
                .map_err(gpu_err)?;
            Ok(b)
        };
        let add = |t: &DeviceBuffer<u32>,
                   len: usize,
                   c: u32,
                   acc: &DeviceBuffer<u32>|
         -> Result<(), FemError> {
            if c == 0 || len == 0 {
                return Ok(());
            }
            let l = len as u64;
            g.launch(&k.k("count_add")?, grid_stride(len))
                .arg(t)
                .arg(&l)
                .arg(&c)
                .arg(acc)
                .run()
                .map_err(gpu_err)
        };
        let cv_len = dm.ncells * (d + 1);
        // k = 0
        let c0 = init(nsimp[0], coef(0, 0))?;
        add(&dm.edges, dm.counts[1], coef(0, 1), &c0)?;
        if d == 3 {
            add(&dm.faces, dm.counts[2], coef(0, 2), &c0)?;
            add(&dm.cell_vertices, cv_len, coef(0, 3), &c0)?;
        } else {
            add(&dm.cell_vertices, cv_len, coef(0, 2), &c0)?;
        }
        let dummy = || g.zeros::<u32>(1).map_err(gpu_err);
        let c1 = if kmax >= 1 {
            let c1 = init(nsimp[1], coef(1, 1))?;
            if d == 3 {
                let c = coef(1, 2);
                if c > 0 && dm.counts[3] > 0 {
                    let l = dm.counts[3] as u64;
                    g.launch(&k.k("count_add_encoded")?, grid_stride(dm.counts[3]))
                        .arg(&dm.face_edges)
                        .arg(&l)
                        .arg(&c)
                        .arg(&c1)
                        .run()
                        .map_err(gpu_err)?;
                }
                add(&dm.cell_edges, dm.counts[4], coef(1, 3), &c1)?;
            } else {
                add(&dm.cell_edges, dm.counts[4], coef(1, 2), &c1)?;
            }
            c1
        } else {
            dummy()?
        };
        let c2 = if kmax >= 2 {
            if d == 3 {
                let c2 = init(nsimp[2], coef(2, 2))?;
                add(&dm.cell_faces, dm.counts[5], coef(2, 3), &c2)?;
                c2
            } else {
                init(dm.ncells, coef(2, 2))?
            }
        } else {
            dummy()?
        };
        let c3 = if kmax >= 3 {
            init(dm.ncells, coef(3, 3))?
        } else {
            dummy()?
        };
        let len = g.alloc::<u32>(n.max(1)).map_err(gpu_err)?;
        let b = |k: usize| -> u32 {
            if k <= d {
                dm.base[k] as u32
            } else {
                n32
            }
        };
        let per = |k: usize| dm.per[k].max(1) as u32;
        g.launch(&k.k("row_lengths")?, cfg(n, BLOCK)?)
            .arg(&n32)
            .arg(&b(0))
            .arg(&b(1))
            .arg(&b(2))
            .arg(&b(3))
            .arg(&per(1))
            .arg(&per(2))
            .arg(&per(3))
            .arg(&c0)
            .arg(&c1)
            .arg(&c2)
            .arg(&c3)
            .arg(&len)
            .run()
            .map_err(gpu_err)?;
        match &dm.row_nodes {
            None => Ok(len),
            Some(rows) => {
                // the counts of the subset's rows (their incident cells are all local)
                let nr = to_u32(dm.nrows, "rows")?;
                let sub = g.alloc::<u32>(dm.nrows.max(1)).map_err(gpu_err)?;
                g.launch(&k.k("gather_u32")?, cfg(dm.nrows, BLOCK)?)
                    .arg(&nr)
                    .arg(rows)
                    .arg(&len)
                    .arg(&sub)
                    .run()
                    .map_err(gpu_err)?;
                Ok(sub)
            }
        }
    })?;
    // from here on, rows (all nodes, or the subset's rows numbered as columns)
    let n = dm.nrows;
    let n32 = to_u32(n, "rows")?;
    let nbins = n.div_ceil(BIN_SIZE);
    let bin_offsets = timed(g, stages, "bin_offsets", || {
        let slots = g.alloc::<u32>(nbins.max(1)).map_err(gpu_err)?;
        let nb = nbins as u32;
        g.launch(&k.k("bin_slots")?, cfg(nbins * 32, BLOCK)?)
            .arg(&lengths)
            .arg(&n32)
            .arg(&nb)
            .arg(&slots)
            .run()
            .map_err(gpu_err)?;
        if nbins == 0 {
            return g.zeros::<u32>(1).map_err(gpu_err);
        }
        k.prims.offsets_from_counts(&slots).map_err(gpu_err)
    })?;
    let nslots = g.download_at(&bin_offsets, nbins).map_err(gpu_err)? as usize;
    let cols = timed(g, stages, "alloc_final", || {
        let cols = g.alloc::<u32>(nslots.max(1)).map_err(gpu_err)?;
        let l = nslots as u64;
        g.launch(&k.k("fill_u32")?, grid_stride(nslots))
            .arg(&cols)
            .arg(&l)
            .arg(&PAD)
            .run()
            .map_err(gpu_err)?;
        Ok(cols)
    })?;
    let err = g.zeros::<u32>(1).map_err(gpu_err)?;
    timed(g, stages, "column_indices", || {
        let m = dm.m as u32;
        g.launch(
            &k.k("fill_columns")?,
            cfg(n, FILL_BLOCK)?.with_shared(FILL_BLOCK * 63 * 4),
        )
        .arg(&n32)
        .arg(&bin_offsets)
        .arg(&lengths)
        .arg(&dm.nc_offsets)
        .arg(&dm.nc_cells)
        .arg(&dm.cell_nodes)
        .arg(&m)
        .arg(&cols)
        .arg(&err)
        .run()
        .map_err(gpu_err)
    })?;
    let bad = check_err(g, &err, "pattern")?;
    if bad != 0 {
        let row = bad as usize - 1;
        let expected = g.download_at(&lengths, row).map_err(gpu_err)? + 1;
        return Err(FemError::PatternMismatch {
            row,
            expected,
            found: 0,
        });
    }
    let off_diagonal_blocks = k.prims.reduce_sum_u32(&lengths).map_err(gpu_err)?;
    Ok(DeviceBinBcsrPattern::from_parts(
        n,
        e,
        nbins,
        nslots,
        bin_offsets,
        lengths,
        cols,
        off_diagonal_blocks,
    ))
}

/// Per-entry contribution lists on the device: count, scan, fill (one thread per row).
fn build_entry_maps_gpu(
    k: &FemKernels<'_>,
    dm: &DeviceHoMesh,
    p: &DeviceBinBcsrPattern,
) -> Result<DeviceEntryMaps, FemError> {
    let g = k.gpu;
    let n = p.num_block_rows() as u32;
    let m = dm.m as u32;
    let err = g.zeros::<u32>(1).map_err(gpu_err)?;
    let mut off_counts = g.zeros::<u32>(p.num_slots().max(1)).map_err(gpu_err)?;
    let diag_counts = g.zeros::<u32>(p.num_block_rows().max(1)).map_err(gpu_err)?;
    let kern = k.k("entry_maps")?;
    let run = |pass: u32,
               oc: &DeviceBuffer<u32>,
               oo: &DeviceBuffer<u32>,
               doff: &DeviceBuffer<u32>,
               ocodes: &DeviceBuffer<u32>,
               dcodes: &DeviceBuffer<u32>| {
        g.launch(&kern, cfg(p.num_block_rows(), BLOCK)?)
            .arg(&pass)
            .arg(&n)
            .arg(&p.bin_offsets)
            .arg(&p.row_lengths)
            .arg(&p.col_indices)
            .arg(&dm.nc_offsets)
            .arg(&dm.nc_cells)
            .arg(&dm.cell_nodes)
            .arg(&m)
            .arg(oc)
            .arg(&diag_counts)
            .arg(oo)
            .arg(doff)
            .arg(ocodes)
            .arg(dcodes)
            .arg(&err)
            .run()
            .map_err(gpu_err)
    };
    let dummy = g.zeros::<u32>(1).map_err(gpu_err)?;
    run(0, &off_counts, &dummy, &dummy, &dummy, &dummy)?;
    if check_err(g, &err, "maps")? != 0 {
        return Err(FemError::PatternMismatch {
            row: check_err(g, &err, "maps")? as usize - 1,
            expected: 0,
            found: 0,
        });
    }
    let too_large = |e: GpuError| FemError::TooLarge(format!("per-entry contribution lists: {e}"));
    let off_counts_view = if p.num_slots() == 0 {
        g.zeros::<u32>(0).ok()
    } else {
        None
    };
    let _ = off_counts_view;
    let off_offsets = if p.num_slots() == 0 {
        g.zeros::<u32>(1).map_err(gpu_err)?
    } else {
        k.prims
            .offsets_from_counts(&off_counts)
            .map_err(too_large)?
    };
    let diag_offsets = if p.num_block_rows() == 0 {
        g.zeros::<u32>(1).map_err(gpu_err)?
    } else {
        k.prims
            .offsets_from_counts(&diag_counts)
            .map_err(too_large)?
    };
    let n_off = g
        .download_at(&off_offsets, p.num_slots())
        .map_err(gpu_err)? as usize;
    let n_diag = g
        .download_at(&diag_offsets, p.num_block_rows())
        .map_err(gpu_err)? as usize;
    let off = g.alloc::<u32>(n_off.max(1)).map_err(gpu_err)?;
    let diag = g.alloc::<u32>(n_diag.max(1)).map_err(gpu_err)?;
    // pass 1 reuses the slot counters as cursors
    g.memset_zero(&mut off_counts).map_err(gpu_err)?;
    run(1, &off_counts, &off_offsets, &diag_offsets, &off, &diag)?;
    Ok(DeviceEntryMaps {
        off_offsets,
        off,
        diag_offsets,
        diag,
    })
}

/// Assemble the stiffness matrix of linear isotropic elasticity (Eq. 4.7) on the GPU with
/// `opts.summation` (`opts.par` and `opts.device` are not used here). Returns the device
/// matrix and the statistics with CUDA-event stage times; download with
/// [`DeviceBinBcsr::download`].
pub fn assemble_stiffness_gpu<T: GpuScalar>(
    gpu: &Gpu,
    mesh: &HoMesh,
    material: &Material,
    opts: &crate::assemble::AssembleOptions,
) -> Result<(DeviceBinBcsr<T>, AssemblyStats), FemError> {
    let lame = material.lame()?;
    assemble_gpu(gpu, mesh, Operator::Stiffness(lame), opts.summation)
}

/// Assemble the consistent mass matrix on the GPU (per-node or per-entry summation).
pub fn assemble_mass_gpu<T: GpuScalar>(
    gpu: &Gpu,
    mesh: &HoMesh,
    material: &Material,
    opts: &crate::assemble::AssembleOptions,
) -> Result<(DeviceBinBcsr<T>, AssemblyStats), FemError> {
    material.validate()?;
    assemble_gpu(gpu, mesh, Operator::Mass(material.density), opts.summation)
}

/// Upload, pattern, summation; `total` is the sum of the device stages.
pub fn assemble_gpu<T: GpuScalar>(
    gpu: &Gpu,
    mesh: &HoMesh,
    op: Operator,
    summation: Summation,
) -> Result<(DeviceBinBcsr<T>, AssemblyStats), FemError> {
    let k = FemKernels::new(gpu)?;
    let dm = DeviceHoMesh::upload(gpu, mesh)?;
    let mut asm = GpuAssembler::new(&k, &dm, summation)?;
    let mat = asm.assemble::<T>(op)?;
    let mut stats = asm.stats().clone();
    let total: f64 = stats.stages_ms.values().sum();
    stats.stages_ms.insert("total".into(), total);
    Ok((mat, stats))
}

// ============================================================================ bench

/// GPU assembly and SpMV timings of one mesh (dissertation Table 4.2 stages, §4.5).
#[derive(Clone, Debug, PartialEq)]
pub struct GpuAssemblyBench {
    pub order: usize,
    pub cells: usize,
    pub dofs: u64,
    pub block_nonzeros: u64,
    pub summation: Summation,
    pub scalar: &'static str,
    /// Median stage times (ms): `count_contributions`, `bin_offsets`, `alloc_final`,
    /// `column_indices`, `entry_maps` (per entry), `alloc_element_matrices`,
    /// `element_matrices`, `summation`, and `total` (median of the per-run sums).
    pub stages_ms: Stages,
    /// Table 4.2 grouping (ms): counts, pattern (bin offsets + allocation + column indices),
    /// element matrices (allocation + computation), summation (maps + summation).
    pub table_4_2_ms: [f64; 4],
    /// Median SpMV time (ms), bytes it must move, and the resulting GB/s.
    pub spmv_ms: f64,
    pub spmv_bytes: u64,
    pub spmv_gbs: f64,
    /// Host-side upload of the mesh (ms, wall clock; not part of the assembly stages).
    pub upload_ms: f64,
}

/// Time GPU assembly of the stiffness matrix (`runs` >= 10 timed runs of the whole
/// pipeline after one warm-up, CUDA events, medians per stage) and the SpMV of the result.
pub fn bench_assembly_gpu<T: GpuScalar>(
    gpu: &Gpu,
    mesh: &HoMesh,
    material: &Material,
    summation: Summation,
    runs: usize,
) -> Result<GpuAssemblyBench, FemError> {
    let runs = runs.max(10);
    let lame = material.lame()?;
    let k = FemKernels::new(gpu)?;
    let t0 = std::time::Instant::now();
    let dm = DeviceHoMesh::upload(gpu, mesh)?;
    gpu.synchronize().map_err(gpu_err)?;
    let upload_ms = t0.elapsed().as_secs_f64() * 1e3;
    let mut per_stage: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
    let mut last = None;
    for r in 0..=runs {
        let mut asm = GpuAssembler::new(&k, &dm, summation)?;
        let mat = asm.assemble::<T>(Operator::Stiffness(lame))?;
        if r > 0 {
            let st = &asm.stats().stages_ms;
            for (name, v) in st {
                per_stage.entry(name.clone()).or_default().push(*v);
            }
            per_stage
                .entry("total".into())
                .or_default()
                .push(st.values().sum());
        }
        last = Some((mat, asm.stats().clone()));
    }
    let (mat, stats) = last.expect("at least one run");
    let stages_ms: Stages = per_stage
        .into_iter()
        .map(|(k, mut v)| (k, tessera_gpu::median(&mut v)))
        .collect();
    let s = |n: &str| stages_ms.get(n).copied().unwrap_or(0.0);
    let table = [
        s("count_contributions"),
        s("bin_offsets") + s("alloc_final") + s("column_indices"),
        s("alloc_element_matrices") + s("element_matrices"),
        s("entry_maps") + s("summation"),
    ];
    let ne = mat.num_rows();
    let x: Vec<T> = (0..ne)
        .map(|i| T::from_f64(1.0 + (i % 7) as f64 * 0.125))
        .collect();
    let xd = up(gpu, &x)?;
    let mut yd = gpu.zeros::<T>(ne.max(1)).map_err(gpu_err)?;
    let sk = tessera_solve::cuda::SolveKernels::new(gpu).map_err(FemError::from)?;
    let spmv_ms = gpu
        .median_ms(runs, 3, || {
            mat.spmv(&sk, &xd, &mut yd)
                .map_err(|e| GpuError::InvalidArgument(e.to_string()))
        })
        .map_err(gpu_err)?;
    let bytes = mat.spmv_bytes();
    Ok(GpuAssemblyBench {
        order: dm.p,
        cells: dm.ncells,
        dofs: stats.dofs,
        block_nonzeros: stats.block_nonzeros,
        summation,
        scalar: T::NAME,
        stages_ms,
        table_4_2_ms: table,
        spmv_ms,
        spmv_bytes: bytes,
        spmv_gbs: bytes as f64 / (spmv_ms * 1e-3) / 1e9,
        upload_ms,
    })
}
