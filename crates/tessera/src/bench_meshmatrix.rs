//! `tessera bench meshmatrix FILES [--triangles N,...]`: the mesh matrix with action maps
//! (seed 004, Tables 2-5) on large surfaces: Mᵀ v and M v (ours, cuSPARSE on the explicit
//! matrix, TCSR for the same relation), normals, slicing, surface Catmull-Clark and Laplacian
//! assembly, beside the seed's figures and the bandwidth floor. Surfaces are renumbered along a
//! Morton curve first (the locality a scanned mesh has in scan order; the seed's meshes are
//! scans); the SpMV rows are also measured in the input's order. The measuring code lives in
//! `tessera_mesh::mesh_matrix::bench` (CPU) and `tessera_mesh::cuda::mesh_matrix_bench` (GPU).

use crate::device::resolve;
use crate::util::spinner;
use clap::Args;
use std::path::PathBuf;
use tessera_core::DeviceChoice;
use tessera_mesh::io::{read_simplex_mesh, read_surface, SurfaceFormat};
use tessera_mesh::mesh_matrix::bench::{
    markdown, morton_renumber, refine_to, run_cpu, run_cpu_tets, tet_boundary, BenchSurface,
};

#[derive(Args, Debug)]
pub struct BenchMeshMatrixArgs {
    /// Surfaces (.obj .ply .off) or tetrahedral volume meshes (their boundary surface, and the
    /// P1 Laplacian assembly of the volume).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Triangle counts to refine each surface to (midpoint refinement, then centroid splits of
    /// the first triangles), e.g. `4000000,29000000`; without it (or for a count not above the
    /// surface's own, e.g. 0) the surface is used as read.
    #[arg(long, value_delimiter = ',')]
    pub triangles: Vec<usize>,
    /// Timed runs per figure (median; CUDA events on the GPU, after 3 warm-ups).
    #[arg(long, default_value_t = 20)]
    pub runs: usize,
    /// Timed runs of the CPU figures (median, after one warm-up).
    #[arg(long, default_value_t = 3)]
    pub cpu_runs: usize,
    /// CPU figures only for surfaces up to this many triangles (0: none).
    #[arg(long, default_value_t = 8_000_000)]
    pub cpu_max_triangles: usize,
    /// auto (GPU rows when a CUDA device is usable), cpu (CPU rows only), cuda or cuda:N.
    #[arg(long, default_value = "auto", value_name = "DEVICE")]
    pub device: DeviceChoice,
    /// Print one JSON document (an array with one object per surface) instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Skip the SpMV rows on the surface in the vertex order of the input (only the Morton
    /// order is measured).
    #[arg(long)]
    pub morton_only: bool,
}

pub fn run(a: BenchMeshMatrixArgs) -> anyhow::Result<()> {
    let dev = resolve(a.device)?;
    if !a.json {
        eprintln!("device: {}", dev.describe());
    }
    let mut out: Vec<BenchSurface> = Vec::new();
    for file in &a.files {
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let pb = spinner(&format!("reading {name}"));
        let volume = SurfaceFormat::from_path(file) == Some(SurfaceFormat::Volume);
        let (base, tets) = if volume {
            let s = read_simplex_mesh(file)?.mesh;
            (tet_boundary(&s)?, Some(s))
        } else {
            (read_surface(file)?, None)
        };
        pb.finish_and_clear();
        if let Some(s) = &tets {
            let mut rows = Vec::new();
            if let Some(g) = dev.gpu() {
                let pb = spinner(&format!("{name}: P1 tetrahedral Laplacian on the GPU"));
                rows.extend(tessera_mesh::cuda::mesh_matrix_bench::run_gpu_tets(
                    g, s, a.runs,
                )?);
                pb.finish_and_clear();
            }
            if a.cpu_max_triangles > 0 {
                let pb = spinner(&format!("{name}: P1 tetrahedral Laplacian on the CPU"));
                rows.extend(run_cpu_tets(s, a.cpu_runs)?);
                pb.finish_and_clear();
            }
            out.push(BenchSurface {
                name: format!("{name} (volume)"),
                vertices: s.num_vertices(),
                triangles: 0,
                tets: s.num_cells(),
                rows,
            });
        }
        let targets: Vec<Option<usize>> = if a.triangles.is_empty() {
            vec![None]
        } else {
            a.triangles.iter().map(|&t| Some(t)).collect()
        };
        for t in targets {
            let pb = spinner(&format!("{name}: refining"));
            // a count at or below the surface's own is the surface as read
            let t = t.filter(|&t| t > base.num_faces());
            let input = match t {
                Some(t) => refine_to(&base, t)?,
                None => base.clone(),
            };
            pb.finish_and_clear();
            let pb = spinner(&format!("{name}: Morton renumbering"));
            let mesh = morton_renumber(&input)?;
            pb.finish_and_clear();
            let label = match t {
                Some(_) => format!(
                    "{name}{} refined to {} triangles",
                    if volume { " boundary" } else { "" },
                    mesh.num_faces()
                ),
                None => format!("{name}{}", if volume { " boundary" } else { "" }),
            };
            let mut rows = Vec::new();
            if let Some(g) = dev.gpu() {
                let pb = spinner(&format!("{label}: GPU"));
                rows.extend(tessera_mesh::cuda::mesh_matrix_bench::run_gpu(
                    g, &mesh, a.runs, false,
                )?);
                if !a.morton_only {
                    let input_rows =
                        tessera_mesh::cuda::mesh_matrix_bench::run_gpu(g, &input, a.runs, true)?;
                    rows.extend(input_rows.into_iter().map(|mut r| {
                        r.variant.push_str(" [input vertex order]");
                        r
                    }));
                }
                pb.finish_and_clear();
            }
            drop(input);
            if mesh.num_faces() <= a.cpu_max_triangles {
                let pb = spinner(&format!("{label}: CPU"));
                rows.extend(run_cpu(&mesh, a.cpu_runs)?);
                pb.finish_and_clear();
            }
            out.push(BenchSurface {
                name: label,
                vertices: mesh.num_vertices(),
                triangles: mesh.num_faces(),
                tets: 0,
                rows,
            });
            if !a.json {
                // print as it goes: a long run shows its results early
                print!("{}", markdown(std::slice::from_ref(out.last().unwrap())));
            }
        }
        if !a.json && tets.is_some() {
            let v = out.iter().find(|s| s.tets > 0 && s.name.starts_with(&name));
            if let Some(v) = v {
                print!("{}", markdown(std::slice::from_ref(v)));
            }
        }
    }
    if a.json {
        println!("{}", serde_json::to_string(&out)?);
    }
    Ok(())
}
