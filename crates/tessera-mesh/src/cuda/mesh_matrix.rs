//! The mesh matrix with action maps on the GPU (seed 004 §7), tested against the CPU reference
//! of [`crate::mesh_matrix`] (`*_matches_reference` in `tests/gpu_mesh_matrix.rs`).
//!
//! | operation | GPU algorithm (one thread per ...) | CPU reference |
//! |---|---|---|
//! | `Mᵀ v` | column, result in registers, specialized for triangles and quads | [`spmv::mtv`] |
//! | `M v` | column, `atomicAdd` into the rows (the seed's choice) | [`spmv::mv`] |
//! | `M v` (gather) | row of the cached transpose | [`spmv::mv`] |
//! | transpose (vertex -> corners) | histogram -> scan -> atomic fill -> segmented sort | [`MeshMatrix::transpose`] |
//! | `C = M Q Mᵀ` | row: bound -> scan -> contributions, stable insertion sort, combine -> scan -> compact | [`spgemm::mapped_spgemm`] |
//! | vertex normals | face with atomics (scatter), or vertex over the transpose (gather) | [`normals::vertex_normals`] |
//! | twins, edge numbers, fans | corner (search in the transpose), scan of owners, vertex walk | [`edges`] |
//! | plane slicing | vertex, edge, face: count -> scan -> fill | [`slice::slice`] |
//! | surface Catmull-Clark | face, edge, vertex, corner | [`subdivide::catmull_clark`] |
//!
//! Values are `f32` or `f64` ([`MmReal`]). The module is compiled with `--fmad=false`, so the
//! `f64` results of the gather kernels equal the CPU's bit for bit and topology (slicing
//! classifies vertices by the sign of a distance) is identical; atomics add in any order, so
//! scattered sums agree to rounding. Invalid input (non-manifold edges or vertices) is detected
//! on the device; the error is then produced by the CPU reference on the downloaded mesh, so it
//! is the same error with the same message.
//!
//! [`spmv::mtv`]: crate::mesh_matrix::spmv::mtv
//! [`spmv::mv`]: crate::mesh_matrix::spmv::mv
//! [`spgemm::mapped_spgemm`]: crate::mesh_matrix::spgemm::mapped_spgemm
//! [`normals::vertex_normals`]: crate::mesh_matrix::normals::vertex_normals
//! [`edges`]: crate::mesh_matrix::edges
//! [`slice::slice`]: crate::mesh_matrix::slice::slice
//! [`subdivide::catmull_clark`]: crate::mesh_matrix::subdivide::catmull_clark

use crate::mesh_matrix::action::{PairStencil, Stencil};
use crate::mesh_matrix::normals::NormalWeights;
use crate::mesh_matrix::slice::{chain_polylines, Plane, Sliced};
use crate::mesh_matrix::{ActionMap, Combine, Csr, Diagonal, MeshMatrix, PairMap, PolygonMesh};
use crate::{MeshError, Point};
use std::sync::Arc;
use tessera_gpu::{
    CompileOptions, DeviceBuffer, Element, Gpu, KernelArg, LaunchConfig, Module, Primitives,
    SegOrder,
};

/// CUDA source of the mesh matrix kernels (deterministic: a constant).
pub const SOURCE: &str = include_str!("kernels/mesh_matrix.cu");

const BLOCK: u32 = 256;

/// Scalars of the device values.
pub trait MmReal: Element + KernelArg + PartialEq + PartialOrd {
    /// Kernel name suffix (`f32`, `f64`).
    const SUFFIX: &'static str;
    fn from_f64(x: f64) -> Self;
    fn to_f64(self) -> f64;
}
impl MmReal for f32 {
    const SUFFIX: &'static str = "f32";
    fn from_f64(x: f64) -> Self {
        x as f32
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
}
impl MmReal for f64 {
    const SUFFIX: &'static str = "f64";
    fn from_f64(x: f64) -> Self {
        x
    }
    fn to_f64(self) -> f64 {
        self
    }
}

/// Every kernel the Rust side launches (checked against the source without a GPU).
pub fn kernel_names() -> Vec<String> {
    let mut v: Vec<String> = [
        "mm_transpose_fill",
        "mm_corner_face",
        "mm_spgemm_bound",
        "mm_twins",
        "mm_edge_ids",
        "mm_fans",
        "mm_cc_quads",
        "mm_tcsr_spmv_f32",
        "mm_adjacency_scatter_f32",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for s in ["f32", "f64"] {
        for w in [1, 3] {
            for n in [0, 3, 4] {
                for k in ["mtv", "mv_atomic", "mv_gather"] {
                    v.push(format!("mm_{k}_{s}_w{w}_n{n}"));
                }
            }
        }
        for k in [
            "spgemm_fill",
            "spgemm_compact",
            "normals_scatter",
            "normalize",
            "normals_gather",
            "slice_dist",
            "slice_cut_flags",
            "slice_cut_points",
            "slice_face_counts",
            "slice_fill",
            "cc_face_points",
            "cc_edge_points",
            "cc_vertex_points",
            "copy",
            "half_cot",
            "tet_values",
        ] {
            v.push(format!("mm_{k}_{s}"));
        }
    }
    v
}

/// The compile options of the module (`--fmad=false`: the CPU's rounding).
pub fn compile_options() -> CompileOptions {
    let mut o = CompileOptions::named("tessera_mesh_matrix.cu");
    o.extra.push("--fmad=false".into());
    o
}

/// The transpose vertex -> corners in device memory (rows sorted).
pub struct DeviceTranspose {
    pub offsets: DeviceBuffer<u32>,
    pub corners: DeviceBuffer<u32>,
}

impl DeviceTranspose {
    pub fn bytes(&self) -> usize {
        self.offsets.bytes() + self.corners.bytes()
    }
}

/// Twins and edge numbers in device memory (see [`crate::mesh_matrix::edges`]).
pub struct DeviceHalfEdges {
    pub twin: DeviceBuffer<u32>,
    pub edge_of_corner: DeviceBuffer<u32>,
    pub edge_corner: DeviceBuffer<u32>,
    pub num_edges: usize,
}

/// A mesh matrix in device memory, with its derived relations cached on the device.
pub struct DeviceMeshMatrix {
    nv: usize,
    nf: usize,
    nnz: usize,
    /// uniform face size, 0 for mixed
    n: u32,
    max_face: usize,
    pub rowind: DeviceBuffer<u32>,
    /// colptr (mixed) or a 1-element placeholder
    colptr: DeviceBuffer<u32>,
    /// face of every corner (mixed) or a placeholder
    cface: DeviceBuffer<u32>,
    transpose: Option<DeviceTranspose>,
    half_edges: Option<DeviceHalfEdges>,
    fans_checked: bool,
}

impl DeviceMeshMatrix {
    pub fn num_vertices(&self) -> usize {
        self.nv
    }
    pub fn num_faces(&self) -> usize {
        self.nf
    }
    pub fn nnz(&self) -> usize {
        self.nnz
    }
    /// `Some(n)` for the rowind-only form.
    pub fn uniform_size(&self) -> Option<usize> {
        (self.n != 0).then_some(self.n as usize)
    }
    fn mixed(&self) -> u32 {
        (self.n == 0) as u32
    }
    /// Bytes of the stored form (rowind, and colptr when mixed).
    pub fn bytes(&self) -> usize {
        self.rowind.bytes() + if self.n == 0 { self.colptr.bytes() } else { 0 }
    }
    /// The cached transpose, if computed.
    pub fn cached_transpose(&self) -> Option<&DeviceTranspose> {
        self.transpose.as_ref()
    }
    /// Drop the cached relations (so the next operation computes them from scratch).
    pub fn purge_caches(&mut self) {
        self.transpose = None;
        self.half_edges = None;
        self.fans_checked = false;
    }
    /// Download the matrix.
    pub fn download(&self, gpu: &Gpu) -> Result<MeshMatrix, MeshError> {
        let rowind = gpu.download(&self.rowind)?;
        if self.n != 0 {
            MeshMatrix::from_uniform(self.nv, self.n as usize, rowind)
        } else {
            let colptr = gpu.download(&self.colptr)?;
            MeshMatrix::from_faces(self.nv, &colptr, &rowind)
        }
    }
}

/// An [`ActionMap`] in device memory.
pub struct DeviceActionMap<T: MmReal> {
    table: DeviceBuffer<T>,
    entry_values: DeviceBuffer<T>,
    face_weights: DeviceBuffer<T>,
    flags: u32,
}

/// A CSR matrix in device memory (the product of a mapped SpGEMM).
pub struct DeviceCsr<T: MmReal> {
    pub nrows: usize,
    pub rowptr: DeviceBuffer<u32>,
    pub colind: DeviceBuffer<u32>,
    pub values: DeviceBuffer<T>,
}

impl<T: MmReal> DeviceCsr<T> {
    pub fn nnz(&self) -> usize {
        self.colind.len()
    }
    /// Download as a host [`Csr`] (values widened to `f64`).
    pub fn download(&self, gpu: &Gpu) -> Result<Csr, MeshError> {
        Ok(Csr {
            nrows: self.nrows,
            ncols: self.nrows,
            rowptr: gpu.download(&self.rowptr)?,
            colind: gpu.download(&self.colind)?,
            values: gpu
                .download(&self.values)?
                .into_iter()
                .map(|x| x.to_f64())
                .collect(),
        })
    }
}

/// The result of [`MeshMatrixKernels::slice`] in device memory.
pub struct DeviceSliced<T: MmReal> {
    pub mesh: DeviceMeshMatrix,
    pub positions: DeviceBuffer<T>,
    pub face_side: DeviceBuffer<i32>,
    /// `(from, to)` pairs, one per cut triangle.
    pub segments: DeviceBuffer<u32>,
    pub cut_edges: usize,
}

impl<T: MmReal> DeviceSliced<T> {
    /// Download as the CPU's [`Sliced`] (polylines chained on the host).
    pub fn download(&self, gpu: &Gpu) -> Result<Sliced, MeshError> {
        let matrix = self.mesh.download(gpu)?;
        let positions = download_points(gpu, &self.positions)?;
        let face_side = gpu
            .download(&self.face_side)?
            .into_iter()
            .map(|s| s as i8)
            .collect();
        let seg = gpu.download(&self.segments)?;
        let segments: Vec<[u32; 2]> = seg.chunks(2).map(|c| [c[0], c[1]]).collect();
        let nv0 = matrix.num_vertices() - self.cut_edges;
        let polylines = chain_polylines(&segments, nv0, matrix.num_vertices());
        Ok(Sliced {
            mesh: PolygonMesh::from_matrix(positions, matrix)?,
            face_side,
            segments,
            polylines,
            cut_edges: self.cut_edges,
        })
    }
}

/// Upload positions as `3 nv` values of `T`.
pub fn upload_points<T: MmReal>(gpu: &Gpu, p: &[Point]) -> Result<DeviceBuffer<T>, MeshError> {
    let v: Vec<T> = p.iter().flatten().map(|&x| T::from_f64(x)).collect();
    Ok(gpu.upload(&v)?)
}

/// Download `3 n` values as points.
pub fn download_points<T: MmReal>(gpu: &Gpu, b: &DeviceBuffer<T>) -> Result<Vec<Point>, MeshError> {
    Ok(gpu
        .download(b)?
        .chunks(3)
        .map(|c| [c[0].to_f64(), c[1].to_f64(), c[2].to_f64()])
        .collect())
}

/// The mesh matrix kernels of one device.
pub struct MeshMatrixKernels<'g> {
    gpu: &'g Gpu,
    prims: Primitives<'g>,
    module: Arc<Module>,
}

fn cfg(n: usize) -> Result<LaunchConfig, MeshError> {
    Ok(LaunchConfig::for_items(n, BLOCK)?)
}

impl<'g> MeshMatrixKernels<'g> {
    /// Compile (once, then from the kernel caches) and load the kernels.
    pub fn new(gpu: &'g Gpu) -> Result<Self, MeshError> {
        let module = gpu.compile(SOURCE, &compile_options())?;
        Ok(MeshMatrixKernels {
            gpu,
            prims: gpu.primitives()?,
            module,
        })
    }
    pub fn gpu(&self) -> &'g Gpu {
        self.gpu
    }
    fn k(&self, name: &str) -> Result<tessera_gpu::Kernel, MeshError> {
        Ok(self.module.function(name)?)
    }

    /// Upload a mesh matrix (for mixed faces also the face of every corner, built on the
    /// device).
    pub fn upload(&self, m: &MeshMatrix) -> Result<DeviceMeshMatrix, MeshError> {
        let g = self.gpu;
        let rowind = g.upload(m.rowind())?;
        let (n, colptr, cface) = match m.colptr() {
            None => (
                m.uniform_size().unwrap_or(3) as u32,
                g.zeros::<u32>(1)?,
                g.zeros::<u32>(1)?,
            ),
            Some(c) => {
                let colptr = g.upload(c)?;
                let cface = g.alloc::<u32>(m.nnz())?;
                let nf = m.num_faces() as u64;
                g.launch(&self.k("mm_corner_face")?, cfg(m.num_faces())?)
                    .arg(&colptr)
                    .arg(&nf)
                    .arg(&cface)
                    .run()?;
                (0, colptr, cface)
            }
        };
        Ok(DeviceMeshMatrix {
            nv: m.num_vertices(),
            nf: m.num_faces(),
            nnz: m.nnz(),
            n,
            max_face: m.max_face_size(),
            rowind,
            colptr,
            cface,
            transpose: None,
            half_edges: None,
            fans_checked: false,
        })
    }

    /// The transpose vertex -> corners, computed from scratch.
    pub fn transpose(&self, dm: &DeviceMeshMatrix) -> Result<DeviceTranspose, MeshError> {
        let g = self.gpu;
        if dm.nv == 0 {
            return Ok(DeviceTranspose {
                offsets: g.zeros::<u32>(1)?,
                corners: g.zeros::<u32>(0)?,
            });
        }
        let counts = self.prims.histogram(&dm.rowind, dm.nv as u32)?;
        let offsets = self.prims.offsets_from_counts(&counts)?;
        let cursor = g.duplicate(&offsets)?;
        let mut corners = g.alloc::<u32>(dm.nnz)?;
        let nnz = dm.nnz as u64;
        g.launch(&self.k("mm_transpose_fill")?, cfg(dm.nnz)?)
            .arg(&dm.rowind)
            .arg(&nnz)
            .arg(&cursor)
            .arg(&corners)
            .run()?;
        self.prims
            .segmented_sort(&mut corners, &offsets, SegOrder::Unsigned)?;
        Ok(DeviceTranspose { offsets, corners })
    }

    /// Compute and cache the transpose.
    pub fn require_transpose(&self, dm: &mut DeviceMeshMatrix) -> Result<(), MeshError> {
        if dm.transpose.is_none() {
            dm.transpose = Some(self.transpose(dm)?);
        }
        Ok(())
    }

    /// Upload an action map for a matrix whose faces have at most `max_face` vertices.
    pub fn upload_map<T: MmReal>(
        &self,
        dm: &DeviceMeshMatrix,
        map: &ActionMap,
    ) -> Result<DeviceActionMap<T>, MeshError> {
        map.check(dm.nnz, dm.nf)?;
        let g = self.gpu;
        let up = |v: &[f64]| -> Result<DeviceBuffer<T>, MeshError> {
            let t: Vec<T> = v.iter().map(|&x| T::from_f64(x)).collect();
            Ok(g.upload(&t)?)
        };
        let mut flags = 0u32;
        let ones = matches!(map.stencil, Stencil::Ones) && map.scale == 1.0;
        if ones {
            flags |= 4;
        }
        let table = up(&map.table(dm.max_face.max(1)))?;
        let entry_values = match map.entry_values {
            Some(v) => {
                flags |= 1;
                up(v)?
            }
            None => g.zeros::<T>(1)?,
        };
        let face_weights = match map.face_weights {
            Some(w) => {
                flags |= 2;
                up(w)?
            }
            None => g.zeros::<T>(1)?,
        };
        Ok(DeviceActionMap {
            table,
            entry_values,
            face_weights,
            flags,
        })
    }

    fn spmv_name<T: MmReal>(&self, kind: &str, dm: &DeviceMeshMatrix, width: usize) -> String {
        let n = match dm.n {
            3 => 3,
            4 => 4,
            _ => 0,
        };
        format!("mm_{kind}_{}_w{width}_n{n}", T::SUFFIX)
    }

    fn check_width(width: usize) -> Result<(), MeshError> {
        if width != 1 && width != 3 {
            return Err(MeshError::Unsupported(format!(
                "the GPU mapped SpMV multiplies 1 or 3 values per row, not {width}"
            )));
        }
        Ok(())
    }

    /// `y = Mᵀ_Q x` into `y` (`width` values per face).
    pub fn mtv_into<T: MmReal>(
        &self,
        dm: &DeviceMeshMatrix,
        map: &DeviceActionMap<T>,
        x: &DeviceBuffer<T>,
        width: usize,
        y: &mut DeviceBuffer<T>,
    ) -> Result<(), MeshError> {
        Self::check_width(width)?;
        if x.len() != dm.nv * width || y.len() != dm.nf * width {
            return Err(MeshError::InvalidTopology(format!(
                "GPU Mᵀ v: x has {} values, y {} (want {} and {})",
                x.len(),
                y.len(),
                dm.nv * width,
                dm.nf * width
            )));
        }
        let (mixed, n, nf) = (dm.mixed(), dm.n, dm.nf as u64);
        self.gpu
            .launch(
                &self.k(&self.spmv_name::<T>("mtv", dm, width))?,
                cfg(dm.nf)?,
            )
            .arg(&dm.rowind)
            .arg(&dm.colptr)
            .arg(&mixed)
            .arg(&n)
            .arg(&nf)
            .arg(&map.table)
            .arg(&map.entry_values)
            .arg(&map.face_weights)
            .arg(&map.flags)
            .arg(x)
            .arg(&*y)
            .run()?;
        Ok(())
    }

    /// `y = Mᵀ_Q x` (new buffer).
    pub fn mtv<T: MmReal>(
        &self,
        dm: &DeviceMeshMatrix,
        map: &DeviceActionMap<T>,
        x: &DeviceBuffer<T>,
        width: usize,
    ) -> Result<DeviceBuffer<T>, MeshError> {
        let mut y = self.gpu.alloc::<T>(dm.nf * width)?;
        self.mtv_into(dm, map, x, width, &mut y)?;
        Ok(y)
    }

    /// `y = M_Q x` with atomics into `y` (zeroed here).
    pub fn mv_atomic_into<T: MmReal>(
        &self,
        dm: &DeviceMeshMatrix,
        map: &DeviceActionMap<T>,
        x: &DeviceBuffer<T>,
        width: usize,
        y: &mut DeviceBuffer<T>,
    ) -> Result<(), MeshError> {
        Self::check_width(width)?;
        if x.len() != dm.nf * width || y.len() != dm.nv * width {
            return Err(MeshError::InvalidTopology(format!(
                "GPU M v: x has {} values, y {} (want {} and {})",
                x.len(),
                y.len(),
                dm.nf * width,
                dm.nv * width
            )));
        }
        self.gpu.memset_zero(y)?;
        let (mixed, n, nf) = (dm.mixed(), dm.n, dm.nf as u64);
        self.gpu
            .launch(
                &self.k(&self.spmv_name::<T>("mv_atomic", dm, width))?,
                cfg(dm.nf)?,
            )
            .arg(&dm.rowind)
            .arg(&dm.colptr)
            .arg(&mixed)
            .arg(&n)
            .arg(&nf)
            .arg(&map.table)
            .arg(&map.entry_values)
            .arg(&map.face_weights)
            .arg(&map.flags)
            .arg(x)
            .arg(&*y)
            .run()?;
        Ok(())
    }

    /// `y = M_Q x` with atomics (new buffer).
    pub fn mv_atomic<T: MmReal>(
        &self,
        dm: &DeviceMeshMatrix,
        map: &DeviceActionMap<T>,
        x: &DeviceBuffer<T>,
        width: usize,
    ) -> Result<DeviceBuffer<T>, MeshError> {
        let mut y = self.gpu.alloc::<T>(dm.nv * width)?;
        self.mv_atomic_into(dm, map, x, width, &mut y)?;
        Ok(y)
    }

    /// `y = M_Q x` gathered over a transpose into `y`.
    pub fn mv_gather_into<T: MmReal>(
        &self,
        dm: &DeviceMeshMatrix,
        t: &DeviceTranspose,
        map: &DeviceActionMap<T>,
        x: &DeviceBuffer<T>,
        width: usize,
        y: &mut DeviceBuffer<T>,
    ) -> Result<(), MeshError> {
        Self::check_width(width)?;
        if x.len() != dm.nf * width || y.len() != dm.nv * width {
            return Err(MeshError::InvalidTopology(format!(
                "GPU M v: x has {} values, y {} (want {} and {})",
                x.len(),
                y.len(),
                dm.nf * width,
                dm.nv * width
            )));
        }
        let (mixed, n, nv) = (dm.mixed(), dm.n, dm.nv as u64);
        self.gpu
            .launch(
                &self.k(&self.spmv_name::<T>("mv_gather", dm, width))?,
                cfg(dm.nv)?,
            )
            .arg(&t.offsets)
            .arg(&t.corners)
            .arg(&dm.colptr)
            .arg(&dm.cface)
            .arg(&mixed)
            .arg(&n)
            .arg(&nv)
            .arg(&map.table)
            .arg(&map.entry_values)
            .arg(&map.face_weights)
            .arg(&map.flags)
            .arg(x)
            .arg(&*y)
            .run()?;
        Ok(())
    }

    /// `y = M_Q x` gathered over the cached transpose (computed when missing).
    pub fn mv_gather<T: MmReal>(
        &self,
        dm: &mut DeviceMeshMatrix,
        map: &DeviceActionMap<T>,
        x: &DeviceBuffer<T>,
        width: usize,
    ) -> Result<DeviceBuffer<T>, MeshError> {
        self.require_transpose(dm)?;
        let mut y = self.gpu.alloc::<T>(dm.nv * width)?;
        let t = dm.transpose.as_ref().expect("required");
        self.mv_gather_into(dm, t, map, x, width, &mut y)?;
        Ok(y)
    }

    /// The mapped SpGEMM `C = M Q Mᵀ` (see [`crate::mesh_matrix::spgemm`]).
    pub fn spgemm<T: MmReal>(
        &self,
        dm: &mut DeviceMeshMatrix,
        map: &PairMap,
    ) -> Result<DeviceCsr<T>, MeshError> {
        self.spgemm_values(dm, map, None)
    }

    /// The P1 cotangent Laplacian of a triangle mesh, its half cotangents computed on the
    /// device (see [`crate::mesh_matrix::spgemm::cotan_laplacian`]).
    pub fn cotan_laplacian<T: MmReal>(
        &self,
        dm: &mut DeviceMeshMatrix,
        p: &DeviceBuffer<T>,
    ) -> Result<DeviceCsr<T>, MeshError> {
        if dm.uniform_size() != Some(3) && dm.nf > 0 {
            return Err(MeshError::Unsupported(
                "the cotangent Laplacian needs a triangle mesh".into(),
            ));
        }
        let vals = self.entry_values(dm, p, "mm_half_cot", 3)?;
        let map = crate::mesh_matrix::spgemm::cotan_map_with(Vec::new());
        self.spgemm_values(dm, &map, Some(&vals))
    }

    /// The P1 tetrahedral Laplacian (`Q_tet` and 6 edge values per cell computed on the
    /// device; see [`crate::mesh_matrix::spgemm::tet_laplacian`]).
    pub fn tet_laplacian<T: MmReal>(
        &self,
        dm: &mut DeviceMeshMatrix,
        p: &DeviceBuffer<T>,
    ) -> Result<DeviceCsr<T>, MeshError> {
        if dm.uniform_size() != Some(4) && dm.nf > 0 {
            return Err(MeshError::Unsupported(
                "the P1 tetrahedral Laplacian needs a mesh matrix of tetrahedra (4 vertices per column)"
                    .into(),
            ));
        }
        let vals = self.entry_values(dm, p, "mm_tet_values", 6)?;
        let map = crate::mesh_matrix::spgemm::tet_map_with(Vec::new());
        self.spgemm_values(dm, &map, Some(&vals))
    }

    /// Per-face values of a Laplacian (`per` values per face) by kernel `name`; a degenerate
    /// face is reported as the CPU reference reports it.
    fn entry_values<T: MmReal>(
        &self,
        dm: &DeviceMeshMatrix,
        p: &DeviceBuffer<T>,
        name: &str,
        per: usize,
    ) -> Result<DeviceBuffer<T>, MeshError> {
        if p.len() != 3 * dm.nv {
            return Err(MeshError::InvalidTopology(format!(
                "{} position values for {} vertices",
                p.len(),
                dm.nv
            )));
        }
        let g = self.gpu;
        let out = g.alloc::<T>(per * dm.nf)?;
        let err = g.zeros::<u32>(1)?;
        let nf = dm.nf as u64;
        g.launch(&self.k(&format!("{name}_{}", T::SUFFIX))?, cfg(dm.nf)?)
            .arg(&dm.rowind)
            .arg(&nf)
            .arg(p)
            .arg(&out)
            .arg(&err)
            .run()?;
        if g.download_at(&err, 0)? != 0 {
            let m = dm.download(g)?;
            let pos = download_points(g, p)?;
            let e = if per == 3 {
                crate::mesh_matrix::spgemm::half_cotangents(&m, &pos).err()
            } else {
                crate::mesh_matrix::spgemm::tet_edge_values(&m, &pos).err()
            };
            return Err(e.unwrap_or_else(|| {
                MeshError::InvalidTopology(
                    "the device found a degenerate element, the CPU reference did not".into(),
                )
            }));
        }
        Ok(out)
    }

    /// [`Self::spgemm`] with the per-entry values already on the device (`values`, used in
    /// place of `map.values.values`, whose index table still applies).
    pub fn spgemm_values<T: MmReal>(
        &self,
        dm: &mut DeviceMeshMatrix,
        map: &PairMap,
        values: Option<&DeviceBuffer<T>>,
    ) -> Result<DeviceCsr<T>, MeshError> {
        // the checks of the CPU reference
        if let PairStencil::Table { n, q } = &map.stencil {
            if q.len() != n * n || (dm.uniform_size() != Some(*n) && dm.nf > 0) {
                return Err(MeshError::InvalidTopology(format!(
                    "a {n} x {n} action map needs faces of {n} vertices"
                )));
            }
        }
        if let Some(pv) = &map.values {
            let nvals = values.map_or(pv.values.len(), |v| v.len());
            if (dm.uniform_size() != Some(pv.n) && dm.nf > 0)
                || pv.index.len() != pv.n * pv.n
                || nvals != pv.m * dm.nf
                || pv.index.iter().any(|&i| i != 255 && i as usize >= pv.m)
            {
                return Err(MeshError::InvalidTopology(
                    "values per face entry do not match the mesh".into(),
                ));
            }
        }
        self.require_transpose(dm)?;
        let g = self.gpu;
        let up = |v: &[f64]| -> Result<DeviceBuffer<T>, MeshError> {
            let t: Vec<T> = v.iter().map(|&x| T::from_f64(x)).collect();
            Ok(g.upload(&t)?)
        };
        let (kind, qtab, qn, cshift, ccoef, nterms): (u32, _, u32, _, _, u32) = match &map.stencil {
            PairStencil::Ones => (
                0,
                g.zeros::<T>(1)?,
                0,
                g.zeros::<i32>(1)?,
                g.zeros::<T>(1)?,
                0,
            ),
            PairStencil::Table { n, q } => (
                1,
                up(q)?,
                *n as u32,
                g.zeros::<i32>(1)?,
                g.zeros::<T>(1)?,
                0,
            ),
            PairStencil::Circulant(terms) => {
                let s: Vec<i32> = terms.iter().map(|t| t.0).collect();
                let c: Vec<f64> = terms.iter().map(|t| t.1).collect();
                (
                    2,
                    g.zeros::<T>(1)?,
                    0,
                    g.upload(&s)?,
                    up(&c)?,
                    terms.len() as u32,
                )
            }
        };
        let uploaded;
        let (pv_idx, pv_vals, pv_m, pv_n, has_pv) = match &map.values {
            Some(pv) => {
                let idx: Vec<u32> = pv.index.iter().map(|&i| i as u32).collect();
                let vals = match values {
                    Some(v) => v,
                    None => {
                        uploaded = up(&pv.values)?;
                        &uploaded
                    }
                };
                (g.upload(&idx)?, vals, pv.m as u32, pv.n as u32, 1u32)
            }
            None => {
                uploaded = g.zeros::<T>(1)?;
                (g.zeros::<u32>(1)?, &uploaded, 0, 0, 0)
            }
        };
        let neg_row_sum = (map.diagonal == Diagonal::NegRowSum) as u32;
        let combine_or = (map.combine == Combine::Or) as u32;
        let t = dm.transpose.as_ref().expect("required");
        let (mixed, n, nv) = (dm.mixed(), dm.n, dm.nv as u64);
        let bound = g.alloc::<u32>(dm.nv)?;
        g.launch(&self.k("mm_spgemm_bound")?, cfg(dm.nv)?)
            .arg(&t.offsets)
            .arg(&t.corners)
            .arg(&dm.colptr)
            .arg(&dm.cface)
            .arg(&mixed)
            .arg(&n)
            .arg(&nv)
            .arg(&bound)
            .run()?;
        let boff = self.prims.offsets_from_counts(&bound)?;
        let total = g.download_at(&boff, dm.nv)? as usize;
        let cols = g.alloc::<u32>(total)?;
        let vals = g.alloc::<T>(total)?;
        let ucount = g.alloc::<u32>(dm.nv)?;
        g.launch(
            &self.k(&format!("mm_spgemm_fill_{}", T::SUFFIX))?,
            cfg(dm.nv)?,
        )
        .arg(&t.offsets)
        .arg(&t.corners)
        .arg(&dm.rowind)
        .arg(&dm.colptr)
        .arg(&dm.cface)
        .arg(&mixed)
        .arg(&n)
        .arg(&nv)
        .arg(&kind)
        .arg(&qtab)
        .arg(&qn)
        .arg(&cshift)
        .arg(&ccoef)
        .arg(&nterms)
        .arg(&pv_idx)
        .arg(pv_vals)
        .arg(&pv_m)
        .arg(&pv_n)
        .arg(&has_pv)
        .arg(&neg_row_sum)
        .arg(&combine_or)
        .arg(&boff)
        .arg(&cols)
        .arg(&vals)
        .arg(&ucount)
        .run()?;
        let rowptr = self.prims.offsets_from_counts(&ucount)?;
        let nnz = g.download_at(&rowptr, dm.nv)? as usize;
        let colind = g.alloc::<u32>(nnz)?;
        let values = g.alloc::<T>(nnz)?;
        g.launch(
            &self.k(&format!("mm_spgemm_compact_{}", T::SUFFIX))?,
            cfg(dm.nv)?,
        )
        .arg(&boff)
        .arg(&rowptr)
        .arg(&cols)
        .arg(&vals)
        .arg(&nv)
        .arg(&colind)
        .arg(&values)
        .run()?;
        Ok(DeviceCsr {
            nrows: dm.nv,
            rowptr,
            colind,
            values,
        })
    }

    /// Unit vertex normals from positions `p` (`3 nv` values): `gather` sums over the cached
    /// transpose (the CPU's order), otherwise one thread per face scatters with atomics.
    pub fn normals<T: MmReal>(
        &self,
        dm: &mut DeviceMeshMatrix,
        p: &DeviceBuffer<T>,
        weights: NormalWeights,
        gather: bool,
    ) -> Result<DeviceBuffer<T>, MeshError> {
        let mut out = self.gpu.alloc::<T>(3 * dm.nv)?;
        if gather {
            self.require_transpose(dm)?;
        }
        self.normals_into(dm, p, weights, gather, &mut out)?;
        Ok(out)
    }

    /// [`Self::normals`] into `out`; `gather` needs the cached transpose.
    pub fn normals_into<T: MmReal>(
        &self,
        dm: &DeviceMeshMatrix,
        p: &DeviceBuffer<T>,
        weights: NormalWeights,
        gather: bool,
        out: &mut DeviceBuffer<T>,
    ) -> Result<(), MeshError> {
        if p.len() != 3 * dm.nv || out.len() != 3 * dm.nv {
            return Err(MeshError::InvalidTopology(format!(
                "GPU normals: {} position values for {} vertices",
                p.len(),
                dm.nv
            )));
        }
        let g = self.gpu;
        let (mixed, n, w) = (dm.mixed(), dm.n, weights.code());
        if gather {
            let t = dm.transpose.as_ref().ok_or_else(|| {
                MeshError::Unsupported("gathered normals need the cached transpose".into())
            })?;
            let nv = dm.nv as u64;
            g.launch(
                &self.k(&format!("mm_normals_gather_{}", T::SUFFIX))?,
                cfg(dm.nv)?,
            )
            .arg(&t.offsets)
            .arg(&t.corners)
            .arg(&dm.rowind)
            .arg(&dm.colptr)
            .arg(&dm.cface)
            .arg(&mixed)
            .arg(&n)
            .arg(&nv)
            .arg(p)
            .arg(&w)
            .arg(&*out)
            .run()?;
        } else {
            g.memset_zero(out)?;
            let nf = dm.nf as u64;
            g.launch(
                &self.k(&format!("mm_normals_scatter_{}", T::SUFFIX))?,
                cfg(dm.nf)?,
            )
            .arg(&dm.rowind)
            .arg(&dm.colptr)
            .arg(&mixed)
            .arg(&n)
            .arg(&nf)
            .arg(p)
            .arg(&w)
            .arg(&*out)
            .run()?;
            let nv = dm.nv as u64;
            g.launch(
                &self.k(&format!("mm_normalize_{}", T::SUFFIX))?,
                cfg(dm.nv)?,
            )
            .arg(&nv)
            .arg(&*out)
            .run()?;
        }
        Ok(())
    }

    /// The error of the CPU reference for a mesh the device found invalid.
    fn cpu_error(
        &self,
        dm: &DeviceMeshMatrix,
        fans: bool,
        what: &str,
    ) -> Result<MeshError, MeshError> {
        let m = dm.download(self.gpu)?;
        let he = crate::mesh_matrix::edges::half_edges(&m);
        let e = match he {
            Err(e) => e,
            Ok(he) if fans => match crate::mesh_matrix::edges::check_vertex_fans(&m, &he) {
                Err(e) => e,
                Ok(()) => MeshError::InvalidTopology(format!(
                    "{what}: the device found the mesh non-manifold, the CPU reference did not"
                )),
            },
            Ok(_) => MeshError::InvalidTopology(format!(
                "{what}: the device found the mesh non-manifold, the CPU reference did not"
            )),
        };
        Ok(e)
    }

    /// Twins and edge numbers, computed and cached (an error for non-manifold edges).
    pub fn require_half_edges(&self, dm: &mut DeviceMeshMatrix) -> Result<(), MeshError> {
        if dm.half_edges.is_some() {
            return Ok(());
        }
        self.require_transpose(dm)?;
        let g = self.gpu;
        let twin = g.alloc::<u32>(dm.nnz)?;
        let owner = g.alloc::<u32>(dm.nnz)?;
        let err = g.zeros::<u32>(1)?;
        let (mixed, n, nnz) = (dm.mixed(), dm.n, dm.nnz as u64);
        {
            let t = dm.transpose.as_ref().expect("required");
            g.launch(&self.k("mm_twins")?, cfg(dm.nnz)?)
                .arg(&t.offsets)
                .arg(&t.corners)
                .arg(&dm.rowind)
                .arg(&dm.colptr)
                .arg(&dm.cface)
                .arg(&mixed)
                .arg(&n)
                .arg(&nnz)
                .arg(&twin)
                .arg(&owner)
                .arg(&err)
                .run()?;
        }
        if g.download_at(&err, 0)? != 0 {
            return Err(self.cpu_error(dm, false, "edges")?);
        }
        let eoff = self.prims.offsets_from_counts(&owner)?;
        let ne = g.download_at(&eoff, dm.nnz)? as usize;
        let edge_of_corner = g.alloc::<u32>(dm.nnz)?;
        let edge_corner = g.alloc::<u32>(ne)?;
        g.launch(&self.k("mm_edge_ids")?, cfg(dm.nnz)?)
            .arg(&twin)
            .arg(&owner)
            .arg(&eoff)
            .arg(&nnz)
            .arg(&edge_of_corner)
            .arg(&edge_corner)
            .run()?;
        dm.half_edges = Some(DeviceHalfEdges {
            twin,
            edge_of_corner,
            edge_corner,
            num_edges: ne,
        });
        Ok(())
    }

    /// Check that every vertex is a single fan (after the half-edges), cached.
    pub fn require_fans(&self, dm: &mut DeviceMeshMatrix) -> Result<(), MeshError> {
        if dm.fans_checked {
            return Ok(());
        }
        self.require_half_edges(dm)?;
        let g = self.gpu;
        let err = g.zeros::<u32>(1)?;
        let (mixed, n, nv) = (dm.mixed(), dm.n, dm.nv as u64);
        {
            let t = dm.transpose.as_ref().expect("required");
            let he = dm.half_edges.as_ref().expect("required");
            g.launch(&self.k("mm_fans")?, cfg(dm.nv)?)
                .arg(&t.offsets)
                .arg(&t.corners)
                .arg(&dm.colptr)
                .arg(&dm.cface)
                .arg(&mixed)
                .arg(&n)
                .arg(&nv)
                .arg(&he.twin)
                .arg(&err)
                .run()?;
        }
        if g.download_at(&err, 0)? != 0 {
            return Err(self.cpu_error(dm, true, "vertex fans")?);
        }
        dm.fans_checked = true;
        Ok(())
    }

    /// The cached half-edges (after [`Self::require_half_edges`]).
    pub fn half_edges<'a>(&self, dm: &'a DeviceMeshMatrix) -> Option<&'a DeviceHalfEdges> {
        dm.half_edges.as_ref()
    }

    /// Slice a triangle mesh by a plane (see [`crate::mesh_matrix::slice`]).
    pub fn slice<T: MmReal>(
        &self,
        dm: &mut DeviceMeshMatrix,
        p: &DeviceBuffer<T>,
        plane: &Plane,
    ) -> Result<DeviceSliced<T>, MeshError> {
        if dm.uniform_size() != Some(3) && dm.nf > 0 {
            return Err(MeshError::Unsupported(
                "plane slicing needs a triangle mesh".into(),
            ));
        }
        if p.len() != 3 * dm.nv {
            return Err(MeshError::InvalidTopology(format!(
                "GPU slice: {} position values for {} vertices",
                p.len(),
                dm.nv
            )));
        }
        self.require_half_edges(dm)?;
        let g = self.gpu;
        let s = T::SUFFIX;
        let (nv, nf) = (dm.nv as u64, dm.nf as u64);
        let d = g.alloc::<T>(dm.nv)?;
        let f = |x: f64| T::from_f64(x);
        let (p0, p1, p2) = (f(plane.point[0]), f(plane.point[1]), f(plane.point[2]));
        let (n0, n1, n2) = (f(plane.normal[0]), f(plane.normal[1]), f(plane.normal[2]));
        g.launch(&self.k(&format!("mm_slice_dist_{s}"))?, cfg(dm.nv)?)
            .arg(p)
            .arg(&nv)
            .arg(&p0)
            .arg(&p1)
            .arg(&p2)
            .arg(&n0)
            .arg(&n1)
            .arg(&n2)
            .arg(&d)
            .run()?;
        let he = dm.half_edges.as_ref().expect("required");
        let ne = he.num_edges as u64;
        let cut = g.alloc::<u32>(he.num_edges)?;
        g.launch(
            &self.k(&format!("mm_slice_cut_flags_{s}"))?,
            cfg(he.num_edges)?,
        )
        .arg(&he.edge_corner)
        .arg(&dm.rowind)
        .arg(&ne)
        .arg(&d)
        .arg(&cut)
        .run()?;
        let coff = self.prims.offsets_from_counts(&cut)?;
        let ncut = g.download_at(&coff, he.num_edges)? as usize;
        let nv_out = dm.nv + ncut;
        if nv_out >= u32::MAX as usize {
            return Err(MeshError::Unsupported(
                "the sliced mesh exceeds 32-bit vertex indices".into(),
            ));
        }
        let positions = g.alloc::<T>(3 * nv_out)?;
        let n3 = 3 * nv;
        g.launch(&self.k(&format!("mm_copy_{s}"))?, cfg(3 * dm.nv)?)
            .arg(p)
            .arg(&n3)
            .arg(&positions)
            .run()?;
        g.launch(
            &self.k(&format!("mm_slice_cut_points_{s}"))?,
            cfg(he.num_edges)?,
        )
        .arg(&he.edge_corner)
        .arg(&dm.rowind)
        .arg(&ne)
        .arg(&d)
        .arg(&coff)
        .arg(p)
        .arg(&nv)
        .arg(&positions)
        .run()?;
        let nfc = g.alloc::<u32>(dm.nf)?;
        let nec = g.alloc::<u32>(dm.nf)?;
        g.launch(&self.k(&format!("mm_slice_face_counts_{s}"))?, cfg(dm.nf)?)
            .arg(&dm.rowind)
            .arg(&nf)
            .arg(&d)
            .arg(&nfc)
            .arg(&nec)
            .run()?;
        let foff = self.prims.offsets_from_counts(&nfc)?;
        let entoff = self.prims.offsets_from_counts(&nec)?;
        let nf_out = g.download_at(&foff, dm.nf)? as usize;
        let nnz_out = g.download_at(&entoff, dm.nf)? as usize;
        let ncutf = nf_out - dm.nf;
        let orow = g.alloc::<u32>(nnz_out)?;
        let ocol = if dm.nf == 0 {
            g.zeros::<u32>(1)?
        } else {
            g.alloc::<u32>(nf_out + 1)?
        };
        let side = g.alloc::<i32>(nf_out)?;
        let seg = g.alloc::<u32>(2 * ncutf)?;
        g.launch(&self.k(&format!("mm_slice_fill_{s}"))?, cfg(dm.nf)?)
            .arg(&dm.rowind)
            .arg(&nf)
            .arg(&d)
            .arg(&he.edge_of_corner)
            .arg(&coff)
            .arg(&nv)
            .arg(&foff)
            .arg(&entoff)
            .arg(&orow)
            .arg(&ocol)
            .arg(&side)
            .arg(&seg)
            .run()?;
        let mesh = DeviceMeshMatrix {
            nv: nv_out,
            nf: nf_out,
            nnz: nnz_out,
            n: if ncutf == 0 { 3 } else { 0 },
            max_face: if ncutf == 0 { 3 } else { 4 },
            rowind: orow,
            colptr: ocol,
            cface: g.zeros::<u32>(1)?,
            transpose: None,
            half_edges: None,
            fans_checked: false,
        };
        // a mixed result needs the face of every corner for later operations
        let mesh = if mesh.n == 0 {
            let cface = g.alloc::<u32>(nnz_out)?;
            let nfo = nf_out as u64;
            g.launch(&self.k("mm_corner_face")?, cfg(nf_out)?)
                .arg(&mesh.colptr)
                .arg(&nfo)
                .arg(&cface)
                .run()?;
            DeviceMeshMatrix { cface, ..mesh }
        } else {
            mesh
        };
        Ok(DeviceSliced {
            mesh,
            positions,
            face_side: side,
            segments: seg,
            cut_edges: ncut,
        })
    }

    /// One step of surface Catmull-Clark (see [`crate::mesh_matrix::subdivide`]): the quad
    /// mesh and its positions.
    pub fn catmull_clark<T: MmReal>(
        &self,
        dm: &mut DeviceMeshMatrix,
        p: &DeviceBuffer<T>,
    ) -> Result<(DeviceMeshMatrix, DeviceBuffer<T>), MeshError> {
        if p.len() != 3 * dm.nv {
            return Err(MeshError::InvalidTopology(format!(
                "GPU Catmull-Clark: {} position values for {} vertices",
                p.len(),
                dm.nv
            )));
        }
        self.require_fans(dm)?;
        let g = self.gpu;
        let s = T::SUFFIX;
        let he = dm.half_edges.as_ref().expect("required");
        let t = dm.transpose.as_ref().expect("required");
        let (nv, ne, nf) = (dm.nv, he.num_edges, dm.nf);
        let total = nv + ne + nf;
        if total >= u32::MAX as usize || 4 * dm.nnz >= u32::MAX as usize {
            return Err(MeshError::Unsupported(format!(
                "one subdivision step gives {total} vertices and {} quads, beyond 32-bit indices",
                dm.nnz
            )));
        }
        let out = g.alloc::<T>(3 * total)?;
        let (mixed, n) = (dm.mixed(), dm.n);
        let (nv64, ne64, nf64, nnz64) = (nv as u64, ne as u64, nf as u64, dm.nnz as u64);
        let (ebase, fbase) = (nv as u64, (nv + ne) as u64);
        g.launch(&self.k(&format!("mm_cc_face_points_{s}"))?, cfg(nf)?)
            .arg(&dm.rowind)
            .arg(&dm.colptr)
            .arg(&mixed)
            .arg(&n)
            .arg(&nf64)
            .arg(p)
            .arg(&fbase)
            .arg(&out)
            .run()?;
        g.launch(&self.k(&format!("mm_cc_edge_points_{s}"))?, cfg(ne)?)
            .arg(&he.edge_corner)
            .arg(&he.twin)
            .arg(&dm.rowind)
            .arg(&dm.colptr)
            .arg(&dm.cface)
            .arg(&mixed)
            .arg(&n)
            .arg(&ne64)
            .arg(p)
            .arg(&ebase)
            .arg(&fbase)
            .arg(&out)
            .run()?;
        g.launch(&self.k(&format!("mm_cc_vertex_points_{s}"))?, cfg(nv)?)
            .arg(&t.offsets)
            .arg(&t.corners)
            .arg(&he.twin)
            .arg(&dm.rowind)
            .arg(&dm.colptr)
            .arg(&dm.cface)
            .arg(&mixed)
            .arg(&n)
            .arg(&nv64)
            .arg(p)
            .arg(&fbase)
            .arg(&out)
            .run()?;
        let quads = g.alloc::<u32>(4 * dm.nnz)?;
        let (nv32, ne32) = (nv as u32, ne as u32);
        g.launch(&self.k("mm_cc_quads")?, cfg(dm.nnz)?)
            .arg(&dm.rowind)
            .arg(&dm.colptr)
            .arg(&dm.cface)
            .arg(&mixed)
            .arg(&n)
            .arg(&nnz64)
            .arg(&he.edge_of_corner)
            .arg(&nv32)
            .arg(&ne32)
            .arg(&quads)
            .run()?;
        let mesh = DeviceMeshMatrix {
            nv: total,
            nf: dm.nnz,
            nnz: 4 * dm.nnz,
            n: 4,
            max_face: 4,
            rowind: quads,
            colptr: g.zeros::<u32>(1)?,
            cface: g.zeros::<u32>(1)?,
            transpose: None,
            half_edges: None,
            fans_checked: false,
        };
        Ok((mesh, out))
    }

    /// TCSR SpMV `y = A x` (`f32`), the dissertation's structure for the same relations.
    pub fn tcsr_spmv_f32(
        &self,
        offsets: &DeviceBuffer<u32>,
        columns: &DeviceBuffer<i32>,
        x: &DeviceBuffer<f32>,
        y: &mut DeviceBuffer<f32>,
    ) -> Result<(), MeshError> {
        let nrows = (offsets.len() - 1) as u64;
        self.gpu
            .launch(&self.k("mm_tcsr_spmv_f32")?, cfg(offsets.len() - 1)?)
            .arg(offsets)
            .arg(columns)
            .arg(&nrows)
            .arg(x)
            .arg(&*y)
            .run()?;
        Ok(())
    }

    /// The oriented adjacency `M̄ Q_3 M̄ᵀ x` of a triangle mesh applied without forming it
    /// (atomics into `y`, zeroed here).
    pub fn adjacency_scatter_f32(
        &self,
        dm: &DeviceMeshMatrix,
        x: &DeviceBuffer<f32>,
        y: &mut DeviceBuffer<f32>,
    ) -> Result<(), MeshError> {
        if dm.uniform_size() != Some(3) {
            return Err(MeshError::Unsupported(
                "the adjacency scatter kernel is for triangle meshes".into(),
            ));
        }
        self.gpu.memset_zero(y)?;
        let nf = dm.nf as u64;
        self.gpu
            .launch(&self.k("mm_adjacency_scatter_f32")?, cfg(dm.nf)?)
            .arg(&dm.rowind)
            .arg(&nf)
            .arg(x)
            .arg(&*y)
            .run()?;
        Ok(())
    }

    /// The primitives of this device.
    pub fn primitives(&self) -> &Primitives<'g> {
        &self.prims
    }
}

/// Convenience: a host polygon mesh on the device (matrix and positions in `T`).
pub fn upload_mesh<T: MmReal>(
    k: &MeshMatrixKernels,
    mesh: &PolygonMesh,
) -> Result<(DeviceMeshMatrix, DeviceBuffer<T>), MeshError> {
    Ok((
        k.upload(&mesh.matrix)?,
        upload_points(k.gpu(), &mesh.positions)?,
    ))
}

/// Download a device mesh and its positions as a [`PolygonMesh`].
pub fn download_mesh<T: MmReal>(
    gpu: &Gpu,
    dm: &DeviceMeshMatrix,
    p: &DeviceBuffer<T>,
) -> Result<PolygonMesh, MeshError> {
    PolygonMesh::from_matrix(download_points(gpu, p)?, dm.download(gpu)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs without a GPU: every kernel the Rust side launches is defined in the source.
    #[test]
    fn every_launched_kernel_is_defined() {
        for n in kernel_names() {
            let defined = SOURCE.contains(&format!("void {n}(")) || macro_defined(&n);
            assert!(defined, "kernel `{n}` is not in mesh_matrix.cu");
        }
    }

    /// Kernels generated by the instantiation macros (`mm_mtv_##S##_w##W##_n##N`).
    fn macro_defined(name: &str) -> bool {
        let parts: Vec<&str> = name.split('_').collect();
        // mm_<kind...>_<suffix>[_w<W>_n<N>]
        let (kind, suffix, rest) = match parts.iter().position(|p| *p == "f32" || *p == "f64") {
            Some(i) => (parts[1..i].join("_"), parts[i], &parts[i + 1..]),
            None => return false,
        };
        let inst = match rest {
            [w, n] => {
                let (w, n) = (&w[1..], &n[1..]);
                SOURCE.contains(&format!("mm_{kind}_##S##_w##W##_n##N("))
                    && SOURCE.contains(&format!("SPMV_INST(S, T, {w}, {n})"))
            }
            [] => SOURCE.contains(&format!("mm_{kind}_##S(")),
            _ => false,
        };
        let typed = SOURCE.contains(&format!(
            "({suffix}, {})",
            if suffix == "f32" { "float" } else { "double" }
        ));
        inst && typed
    }

    /// Compiles the source with NVRTC where the library is present (no GPU needed), so a
    /// kernel that does not compile is found before a device run.
    #[test]
    fn source_compiles_with_nvrtc_when_available() {
        if tessera_gpu::probe::probe_nvrtc().is_err() {
            eprintln!("skipping: NVRTC not found");
            return;
        }
        let ptx = tessera_gpu::compile::compile_to_ptx(
            SOURCE,
            "tessera_mesh_matrix.cu",
            &compile_options().to_args(90),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        for n in kernel_names() {
            assert!(
                ptx.contains(&format!(".entry {n}(")),
                "no entry {n} in the PTX"
            );
        }
    }
}
