//! The GPU part of `tessera bench meshmatrix` without the CLI crate (its release build pulls in
//! every Tessera crate): the same library code (`tessera_mesh::mesh_matrix::bench`,
//! `tessera_mesh::cuda::mesh_matrix_bench`) on the boundary of a tetrahedral mesh, refined to the
//! given triangle counts, renumbered along a Morton curve, with the SpMV rows also in the input's
//! order. Prints the same Markdown tables.
//!
//! `cargo run --release -p tessera-mesh --example bench_meshmatrix -- MESH [TRIANGLES,...] [RUNS]`
//! (a count of 0 is the boundary as read).

use std::path::Path;
use tessera_gpu::Gpu;
use tessera_mesh::cuda::mesh_matrix_bench::{run_gpu, run_gpu_tets};
use tessera_mesh::io::read_simplex_mesh;
use tessera_mesh::mesh_matrix::bench::{
    markdown, morton_renumber, refine_to, tet_boundary, BenchSurface,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(file) = args.first() else {
        return Err("usage: bench_meshmatrix MESH [TRIANGLES,...] [RUNS]".into());
    };
    let targets: Vec<usize> = match args.get(1) {
        Some(s) => s
            .split(',')
            .map(|t| t.trim().parse())
            .collect::<Result<_, _>>()?,
        None => vec![0],
    };
    let runs: usize = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(20);
    let gpu = Gpu::new(0)?;
    eprintln!("device: {}", gpu.name());
    let name = Path::new(file)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tets = read_simplex_mesh(Path::new(file))?.mesh;
    let base = tet_boundary(&tets)?;
    let s = BenchSurface {
        name: format!("{name} (volume)"),
        vertices: tets.num_vertices(),
        triangles: 0,
        tets: tets.num_cells(),
        rows: run_gpu_tets(&gpu, &tets, runs)?,
    };
    print!("{}", markdown(std::slice::from_ref(&s)));
    drop(tets);
    for t in targets {
        let input = if t > base.num_faces() {
            refine_to(&base, t)?
        } else {
            base.clone()
        };
        let mesh = morton_renumber(&input)?;
        let mut rows = run_gpu(&gpu, &mesh, runs, false)?;
        rows.extend(run_gpu(&gpu, &input, runs, true)?.into_iter().map(|mut r| {
            r.variant.push_str(" [input vertex order]");
            r
        }));
        let label = if t > base.num_faces() {
            format!("{name} boundary refined to {} triangles", mesh.num_faces())
        } else {
            format!("{name} boundary")
        };
        let s = BenchSurface {
            name: label,
            vertices: mesh.num_vertices(),
            triangles: mesh.num_faces(),
            tets: 0,
            rows,
        };
        print!("{}", markdown(std::slice::from_ref(&s)));
    }
    Ok(())
}
