//! `tessera bench meshmatrix`: the measuring code and the table printer (seed 004 §9, Tables
//! 2-5, Figs. 4-5). The CPU rows are measured here (this module), the GPU rows in
//! [`crate::cuda::mesh_matrix_bench`]; both produce [`BenchRow`]s that [`markdown`] prints beside
//! the seed's figure and, for the GPU, the bandwidth floor (bytes that must move / 3.0 TB/s, the
//! H100's measured copy bandwidth).
//!
//! Surfaces: the boundary of a volume mesh (or a surface file), made larger by midpoint
//! refinement (each triangle into 4) and, to hit a triangle count exactly, by splitting the first
//! triangles at their centroids (each into 3): [`refine_to`].

use super::normals::{vertex_normals, NormalWeights};
use super::slice::{slice, Plane};
use super::spgemm::{cotan_laplacian, tet_laplacian, uniform_laplacian};
use super::subdivide::{catmull_clark, midpoint_refine};
use super::{spmv, ActionMap, MeshMatrix, PolygonMesh};
use crate::simplex::SimplexMesh;
use crate::MeshError;
use rayon::prelude::*;
use serde::Serialize;
use std::time::Instant;

/// Bytes per second the GPU floors are set against (the H100's measured copy bandwidth).
pub const COPY_BANDWIDTH: f64 = 3.0e12;

/// One measured operation.
#[derive(Clone, Debug, Serialize)]
pub struct BenchRow {
    /// Table section (`Mᵀ v`, `normals`, ...).
    pub section: String,
    /// What was measured (structure, method).
    pub variant: String,
    /// `gpu` or `cpu`.
    pub device: String,
    /// Median milliseconds.
    pub ms: f64,
    /// Bytes the operation must move at least (inputs read once, outputs written once).
    pub bytes: u64,
    /// Bytes of the structure the operation reads (for the mesh matrix vs TCSR comparison).
    pub structure_bytes: Option<u64>,
    /// The seed's figure for the same operation and size class.
    pub seed: Option<String>,
    /// A check of the result (agreement with a baseline).
    pub note: String,
}

impl BenchRow {
    /// `bytes / COPY_BANDWIDTH` in ms (GPU rows).
    pub fn floor_ms(&self) -> Option<f64> {
        (self.device == "gpu" && self.bytes > 0).then(|| self.bytes as f64 / COPY_BANDWIDTH * 1e3)
    }
}

/// The measurements of one surface (and of its volume mesh, when it came from one).
#[derive(Clone, Debug, Serialize)]
pub struct BenchSurface {
    pub name: String,
    pub vertices: usize,
    pub triangles: usize,
    pub tets: usize,
    pub rows: Vec<BenchRow>,
}

/// The seed's figures (GeForce 980 Ti; Xeon E5-2637 v3) of the size class nearest to `nf`
/// triangles: Tables 2-5.
#[derive(Clone, Copy, Debug)]
pub struct SeedFigures {
    pub model: &'static str,
    /// Table 2 (ms): Mᵀv cuSPARSE, ours; Mv cuSPARSE, ours (4M and 29M only).
    pub table2: Option<[f64; 4]>,
    /// Table 3 (s): trimesh2, ours CPU, ours GPU.
    pub normals: [f64; 3],
    /// Table 4 (s): CPU, GPU.
    pub slicing: [f64; 2],
    /// Table 5 (s): MeshLab, OpenSubdiv, ours CPU, ours GPU.
    pub catmull_clark: [f64; 4],
}

/// Seed Tables 2-5 by model.
pub const SEED: [(usize, SeedFigures); 3] = [
    (
        4_000_000,
        SeedFigures {
            model: "Embreea Orchid (4M)",
            table2: Some([0.74, 0.35, 8.97, 0.27]),
            normals: [0.61, 0.32, 0.0078],
            slicing: [0.17, 0.011],
            catmull_clark: [8.24, 6.77, 2.93, 0.25],
        },
    ),
    (
        21_500_000,
        SeedFigures {
            model: "Earhart Flight Suit (21.5M)",
            table2: None,
            normals: [3.31, 1.93, 0.046],
            slicing: [1.13, 0.065],
            catmull_clark: [44.58, 54.82, 27.29, 2.01],
        },
    ),
    (
        29_000_000,
        SeedFigures {
            model: "Pergolesi side chair (29M)",
            table2: Some([5.54, 2.52, 63.56, 1.96]),
            normals: [4.45, 2.81, 0.073],
            slicing: [1.68, 0.125],
            catmull_clark: [252.68, 90.75, 48.66, 4.09],
        },
    ),
];

/// The seed's row nearest to `nf` triangles (by ratio).
pub fn seed_for(nf: usize) -> SeedFigures {
    let r = |n: usize| ((nf.max(1) as f64) / n as f64).ln().abs();
    SEED.iter()
        .min_by(|a, b| r(a.0).total_cmp(&r(b.0)))
        .expect("three rows")
        .1
}

/// A triangle surface with `target` triangles (or one more): midpoint refinement while the
/// result stays at or below `target`, then the first triangles split at their centroids (all of
/// them where even that does not reach the count) until it is reached.
pub fn refine_to(mesh: &PolygonMesh, target: usize) -> Result<PolygonMesh, MeshError> {
    if mesh.matrix.uniform_size() != Some(3) {
        return Err(MeshError::Unsupported(
            "refining to a triangle count needs a triangle mesh".into(),
        ));
    }
    let mut m = mesh.clone();
    while m.num_faces() > 0 && m.num_faces() < target {
        let nf = m.num_faces();
        if 4 * nf <= target {
            m = midpoint_refine(&m)?;
        } else if target <= 3 * nf {
            m = centroid_split(&m, (target - nf).div_ceil(2))?;
        } else {
            m = centroid_split(&m, nf)?;
        }
    }
    Ok(m)
}

/// Split the first `k` triangles at their centroids (each into 3, in place).
fn centroid_split(m: &PolygonMesh, k: usize) -> Result<PolygonMesh, MeshError> {
    let nf = m.num_faces();
    let k = k.min(nf);
    let nv = m.num_vertices();
    let rowind = m.matrix.rowind();
    let mut positions = m.positions.clone();
    let mut tris = Vec::with_capacity(3 * (nf + 2 * k));
    for f in 0..nf {
        let t = &rowind[3 * f..3 * f + 3];
        if f < k {
            let c = (nv + f) as u32;
            let p = |i: usize| m.positions[t[i] as usize];
            let (a, b, d) = (p(0), p(1), p(2));
            positions.push([
                (a[0] + b[0] + d[0]) / 3.0,
                (a[1] + b[1] + d[1]) / 3.0,
                (a[2] + b[2] + d[2]) / 3.0,
            ]);
            tris.extend_from_slice(&[t[0], t[1], c, t[1], t[2], c, t[2], t[0], c]);
        } else {
            tris.extend_from_slice(t);
        }
    }
    let n = positions.len();
    PolygonMesh::from_matrix(positions, MeshMatrix::from_uniform(n, 3, tris)?)
}

/// Renumber the vertices along a Morton (Z-order) curve of their positions and sort the faces
/// by their smallest new vertex (stable): the locality a scanned mesh has in scan order, made
/// here for surfaces whose numbering came from elsewhere (the boundary of a volume mesh).
pub fn morton_renumber(mesh: &PolygonMesh) -> Result<PolygonMesh, MeshError> {
    let (lo, hi) = mesh.bounds();
    let ext = (0..3)
        .map(|k| hi[k] - lo[k])
        .fold(0.0f64, f64::max)
        .max(1e-300);
    let spread = |mut x: u64| {
        x &= 0x1f_ffff;
        x = (x | x << 32) & 0x1f00000000ffff;
        x = (x | x << 16) & 0x1f0000ff0000ff;
        x = (x | x << 8) & 0x100f00f00f00f00f;
        x = (x | x << 4) & 0x10c30c30c30c30c3;
        (x | x << 2) & 0x1249249249249249
    };
    let mut keys: Vec<(u64, u32)> = mesh
        .positions
        .par_iter()
        .enumerate()
        .map(|(i, p)| {
            let q = |k: usize| (((p[k] - lo[k]) / ext) * 2097151.0).clamp(0.0, 2097151.0) as u64;
            (
                spread(q(0)) | spread(q(1)) << 1 | spread(q(2)) << 2,
                i as u32,
            )
        })
        .collect();
    keys.par_sort_unstable();
    let mut new_of_old = vec![0u32; keys.len()];
    for (k, &(_, old)) in keys.iter().enumerate() {
        new_of_old[old as usize] = k as u32;
    }
    let r = mesh.renumber_vertices(&new_of_old)?;
    let m = &r.matrix;
    let mut faces: Vec<(u32, u32)> = (0..m.num_faces() as u32)
        .into_par_iter()
        .map(|f| (*m.face(f as usize).iter().min().expect("a face"), f))
        .collect();
    faces.par_sort_unstable();
    let order: Vec<u32> = faces.into_iter().map(|x| x.1).collect();
    let matrix = m.permute_faces(&order)?;
    PolygonMesh::from_matrix(r.positions, matrix)
}

/// The boundary surface of a tetrahedral mesh (faces of one cell, oriented outward), its
/// vertices renumbered in their order.
pub fn tet_boundary(mesh: &SimplexMesh) -> Result<PolygonMesh, MeshError> {
    if mesh.vertices_per_cell() != 4 {
        return Err(MeshError::Unsupported(
            "a tetrahedral mesh is needed".into(),
        ));
    }
    // outward faces of a tetrahedron with (v1 - v0) · ((v2 - v0) × (v3 - v0)) > 0; cells of the
    // other orientation use them reversed
    const OUT: [[usize; 3]; 4] = [[1, 2, 3], [0, 3, 2], [0, 1, 3], [0, 2, 1]];
    let cv = mesh.cell_vertices();
    let p = mesh.positions();
    let mut faces: Vec<([u32; 3], [u32; 3])> = (0..mesh.num_cells())
        .into_par_iter()
        .flat_map_iter(|c| {
            let t = &cv[4 * c..4 * c + 4];
            let q = |i: usize| p[t[i] as usize];
            let d = |i: usize| [q(i)[0] - q(0)[0], q(i)[1] - q(0)[1], q(i)[2] - q(0)[2]];
            let (a, b, e) = (d(1), d(2), d(3));
            let det = a[0] * (b[1] * e[2] - b[2] * e[1]) - a[1] * (b[0] * e[2] - b[2] * e[0])
                + a[2] * (b[0] * e[1] - b[1] * e[0]);
            OUT.iter().map(move |o| {
                let f = if det >= 0.0 {
                    [t[o[0]], t[o[1]], t[o[2]]]
                } else {
                    [t[o[0]], t[o[2]], t[o[1]]]
                };
                let mut k = f;
                k.sort_unstable();
                (k, f)
            })
        })
        .collect();
    faces.par_sort_unstable_by_key(|x| x.0);
    let mut offsets = vec![0u32];
    let mut verts = Vec::new();
    let mut i = 0;
    while i < faces.len() {
        let mut j = i + 1;
        while j < faces.len() && faces[j].0 == faces[i].0 {
            j += 1;
        }
        if j - i == 1 {
            verts.extend_from_slice(&faces[i].1);
            offsets.push(verts.len() as u32);
        }
        i = j;
    }
    Ok(PolygonMesh::new(mesh.positions().to_vec(), &offsets, &verts)?.remove_unused_vertices())
}

/// The slicing plane of the benchmark: through the centre of the bounding box, normal
/// `(0.3, -0.2, 1)`.
pub fn bench_plane(mesh: &PolygonMesh) -> Plane {
    let (lo, hi) = mesh.bounds();
    Plane {
        point: [
            0.5 * (lo[0] + hi[0]),
            0.5 * (lo[1] + hi[1]),
            0.5 * (lo[2] + hi[2]),
        ],
        normal: [0.3, -0.2, 1.0],
    }
}

/// Median of `runs` wall-clock timings (ms) after one warm-up.
pub fn time_cpu<R>(
    runs: usize,
    mut f: impl FnMut() -> Result<R, MeshError>,
) -> Result<f64, MeshError> {
    std::hint::black_box(f()?);
    let mut v = Vec::with_capacity(runs.max(1));
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        std::hint::black_box(f()?);
        v.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(tessera_gpu::median(&mut v))
}

fn row(section: &str, variant: &str, device: &str, ms: f64, bytes: u64) -> BenchRow {
    BenchRow {
        section: section.into(),
        variant: variant.into(),
        device: device.into(),
        ms,
        bytes,
        structure_bytes: None,
        seed: None,
        note: String::new(),
    }
}

/// The CPU rows (f64, rayon on all threads) of one triangle surface; relations are computed
/// from scratch in every run (a fresh copy of the matrix, no cached transpose).
pub fn run_cpu(mesh: &PolygonMesh, runs: usize) -> Result<Vec<BenchRow>, MeshError> {
    let m = &mesh.matrix;
    let (nv, nf) = (mesh.num_vertices() as u64, mesh.num_faces() as u64);
    let seed = seed_for(nf as usize);
    let threads = rayon::current_num_threads();
    let dev = format!("cpu ({threads} threads)");
    let mut rows = Vec::new();
    let xv: Vec<f64> = (0..nv).map(|i| 0.5 + (i % 1000) as f64 * 1e-3).collect();
    let xf: Vec<f64> = (0..nf).map(|i| 0.5 + (i % 997) as f64 * 1e-3).collect();
    let ms = time_cpu(runs, || spmv::mtv(m, &ActionMap::binary(), &xv, 1))?;
    rows.push(row(
        "Mᵀ v",
        "mesh matrix, rowind only",
        &dev,
        ms,
        16 * nf + 8 * nv,
    ));
    let ms = time_cpu(runs, || {
        let fresh = m.clone();
        spmv::mv(&fresh, &ActionMap::binary(), &xf, 1)
    })?;
    rows.push(row(
        "M v",
        "mesh matrix, gather (transpose built in the run)",
        &dev,
        ms,
        16 * nf + 8 * nv,
    ));
    let ms = time_cpu(runs, || spmv::mv_serial(m, &ActionMap::binary(), &xf, 1))?;
    rows.push(row(
        "M v",
        "mesh matrix, serial Algorithm 1",
        "cpu (1 thread)",
        ms,
        16 * nf + 8 * nv,
    ));
    for w in [NormalWeights::Area, NormalWeights::Max] {
        let ms = time_cpu(runs, || {
            let fresh = m.clone();
            vertex_normals(&fresh, &mesh.positions, w)
        })?;
        let mut r = row(
            "normals",
            &format!("{} weights", w.name()),
            &dev,
            ms,
            12 * nf + 48 * nv,
        );
        if w == NormalWeights::Max {
            r.seed = Some(format!(
                "{} s (ours CPU), {} s (trimesh2), {}",
                seed.normals[1], seed.normals[0], seed.model
            ));
        }
        rows.push(r);
    }
    let plane = bench_plane(mesh);
    let ms = time_cpu(runs, || {
        slice(
            &PolygonMesh::from_matrix(mesh.positions.clone(), m.clone())?,
            &plane,
        )
    })?;
    let mut r = row("slicing", "plane through the centre", &dev, ms, 0);
    r.seed = Some(format!("{} s, {}", seed.slicing[0], seed.model));
    rows.push(r);
    let ms = time_cpu(runs, || {
        catmull_clark(&PolygonMesh::from_matrix(
            mesh.positions.clone(),
            m.clone(),
        )?)
    })?;
    let mut r = row("Catmull-Clark, 1 step", "from the face table", &dev, ms, 0);
    r.seed = Some(format!(
        "{} s (ours CPU), {} s (OpenSubdiv), {} s (MeshLab), {}",
        seed.catmull_clark[2], seed.catmull_clark[1], seed.catmull_clark[0], seed.model
    ));
    rows.push(r);
    let ms = time_cpu(runs, || uniform_laplacian(&m.clone()))?;
    rows.push(row("Laplacian assembly", "uniform (graph)", &dev, ms, 0));
    let ms = time_cpu(runs, || cotan_laplacian(&m.clone(), &mesh.positions))?;
    rows.push(row(
        "Laplacian assembly",
        "cotangent (P1 triangles)",
        &dev,
        ms,
        0,
    ));
    Ok(rows)
}

/// CPU rows of the P1 tetrahedral Laplacian assembly of a tetrahedral mesh.
pub fn run_cpu_tets(mesh: &SimplexMesh, runs: usize) -> Result<Vec<BenchRow>, MeshError> {
    let cells = MeshMatrix::from_simplex_cells(mesh)?;
    let threads = rayon::current_num_threads();
    let ms = time_cpu(runs, || tet_laplacian(&cells.clone(), mesh.positions()))?;
    let mut r = row(
        "Laplacian assembly",
        "P1 tetrahedra (Q_tet, 6 values per cell)",
        &format!("cpu ({threads} threads)"),
        ms,
        0,
    );
    r.seed = Some("up to 150x Matlab `sparse` (Fig. 5, figures not tabulated)".into());
    Ok(vec![r])
}

/// The shared table printer: one Markdown table per surface, rows grouped by section.
pub fn markdown(surfaces: &[BenchSurface]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    for b in surfaces {
        let _ = writeln!(
            s,
            "\n### {}: {} vertices, {} triangles{}\n",
            b.name,
            b.vertices,
            b.triangles,
            if b.tets > 0 {
                format!(", {} tetrahedra", b.tets)
            } else {
                String::new()
            }
        );
        let _ = writeln!(
            s,
            "| operation | variant | device | ms | floor ms | of floor | structure bytes | seed | note |"
        );
        let _ = writeln!(s, "|---|---|---|---:|---:|---:|---:|---|---|");
        for r in &b.rows {
            let (floor, frac) = match r.floor_ms() {
                Some(f) => (format!("{f:.4}"), format!("{:.2}x", r.ms / f)),
                None => ("".into(), "".into()),
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:.4} | {} | {} | {} | {} | {} |",
                r.section,
                r.variant,
                r.device,
                r.ms,
                floor,
                frac,
                r.structure_bytes.map(|b| b.to_string()).unwrap_or_default(),
                r.seed.clone().unwrap_or_default(),
                r.note
            );
        }
    }
    s
}
