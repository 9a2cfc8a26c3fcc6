//! `tessera fem ...`: higher-order simplex FEM (dissertation Chapter 4).
//!
//! `tessera fem assemble MESH --order P --youngs E --poisson NU [--precision f32|f64]
//! [--device D] [--summation auto|per-node|inline|per-entry] [--json]` assembles the stiffness
//! matrix of linear isotropic elasticity into Bin-BCSR* with exact allocation and prints its
//! size, the Zayer et al. bound, memory, ‖K‖_F and stage times.
//!
//! `tessera fem assemble MESH|PROBLEM.toml ... -o K.mtx [--rhs b.mtx] [--nullspace B.mtx]
//! [--fixed fixed.txt]` exports the system for other solvers (Matrix Market, see
//! `tessera_solve::matrix_market`): with a problem file, that problem's `K` (f64, the
//! problem's material and order, the mesh numbering `tessera fem solve` uses), its load
//! vector and its constrained DOFs.

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use std::path::{Path, PathBuf};
use tessera_core::{DeviceChoice, Par};
use tessera_fem::assemble::{
    assemble_mass, assemble_stiffness, AssembleOptions, Assembly, AssemblyStats, Summation,
};
use tessera_fem::estimate::SimplexCounts;
use tessera_fem::material::Material;
use tessera_fem::nodes::HoMesh;
use tessera_mesh::simplex::SimplexMesh;
use tessera_sparse::binbcsr::Scalar;

#[path = "cmd_fem_solve.rs"]
pub mod cmd_fem_solve;

#[derive(Args, Debug)]
pub struct FemArgs {
    #[command(subcommand)]
    cmd: FemCmd,
}

#[derive(Subcommand, Debug)]
enum FemCmd {
    /// Assemble K (or M) of an order-p tetrahedral mesh into Bin-BCSR* (dissertation §4.4).
    Assemble(AssembleArgs),
    /// Static linear-elasticity analysis from a problem file (dissertation §4.1): writes .vtu and summary.json.
    Solve(cmd_fem_solve::SolveArgs),
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Precision {
    F32,
    F64,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum SummationArg {
    /// Inline on the CPU up to p = 3, per-node otherwise (the same values).
    Auto,
    PerNode,
    Inline,
    PerEntry,
}

impl From<SummationArg> for Summation {
    fn from(s: SummationArg) -> Self {
        match s {
            SummationArg::Auto => Summation::Auto,
            SummationArg::PerNode => Summation::PerNode,
            SummationArg::Inline => Summation::Inline,
            SummationArg::PerEntry => Summation::PerEntry,
        }
    }
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum MatrixKind {
    /// Stiffness matrix K (Eq. 4.7).
    Stiffness,
    /// Consistent mass matrix M.
    Mass,
}

#[derive(Args, Debug)]
pub struct AssembleArgs {
    /// Mesh file (any format `tessera mesh` reads), or `gen:bracket:N` (the generated bracket
    /// at resolution N), or `gen:box:N` (an N x N x N unit box of Kuhn tetrahedra), or a
    /// problem file (`.toml`, as `tessera fem solve` reads; implies f64 on the CPU).
    pub mesh: String,
    /// Write K as Matrix Market (coordinate real symmetric, lower triangle, 1-based; DOFs
    /// node-major x, y, z). Assembles f64 on the CPU.
    #[arg(short = 'o', long = "output")]
    pub output: Option<PathBuf>,
    /// With -o and a problem file: the load vector b (Matrix Market array, n x 1).
    #[arg(long, requires = "output")]
    pub rhs: Option<PathBuf>,
    /// With -o: the six rigid-body modes at the nodes (Matrix Market array, n x 6: translations
    /// x, y, z, rotations about x, y, z through the centroid, lengths scaled to O(1)).
    #[arg(long, requires = "output")]
    pub nullspace: Option<PathBuf>,
    /// With -o and a problem file: the constrained DOFs, one `DOF VALUE` line each (0-based
    /// DOF index, prescribed displacement).
    #[arg(long, requires = "output")]
    pub fixed: Option<PathBuf>,
    /// Polynomial order p >= 1.
    #[arg(long, short = 'p', default_value_t = 1)]
    pub order: usize,
    /// Young's modulus E.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub youngs: f64,
    /// Poisson's ratio ν.
    #[arg(long, default_value_t = 0.3, allow_negative_numbers = true)]
    pub poisson: f64,
    /// Mass density ρ (for --matrix mass).
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub density: f64,
    /// Scalar type of the matrix values (default: f32 on the GPU, f64 on the CPU).
    #[arg(long, value_enum)]
    pub precision: Option<Precision>,
    /// auto, cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto")]
    pub device: DeviceChoice,
    /// Summation method (dissertation §4.4.4).
    #[arg(long, value_enum, default_value_t = SummationArg::Auto)]
    pub summation: SummationArg,
    /// Which matrix to assemble.
    #[arg(long, value_enum, default_value_t = MatrixKind::Stiffness)]
    pub matrix: MatrixKind,
    /// Run single-threaded (the result is identical).
    #[arg(long)]
    pub serial: bool,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Assemble even when the mesh file has inverted (folded-over) cells, for experiments.
    #[arg(long)]
    pub allow_inverted: bool,
}

pub fn run(a: FemArgs) -> anyhow::Result<()> {
    match a.cmd {
        FemCmd::Assemble(a) => run_assemble(a),
        FemCmd::Solve(a) => cmd_fem_solve::run(a),
    }
}

/// The simplex counts of a `gen:` specification (`None` for files and malformed specs,
/// which [`load_simplex_mesh`] reports).
pub fn gen_counts(spec: &str) -> Option<SimplexCounts> {
    let rest = spec.strip_prefix("gen:")?;
    let (kind, n) = rest.split_once(':')?;
    let n: usize = n.parse().ok()?;
    match kind {
        "bracket" if tessera_mesh::generate::BRACKET_RESOLUTION.contains(&n) => {
            Some(tessera_fem::estimate::bracket_counts(n))
        }
        "box" if (1..=400).contains(&n) => Some(tessera_fem::estimate::box_counts([n as u64; 3])),
        _ => None,
    }
}

/// Refuse an assembly whose estimate ([`tessera_fem::estimate`]) exceeds the memory budget.
fn check_assembly_memory(
    spec: &str,
    c: &SimplexCounts,
    order: usize,
    scalar_bytes: u64,
    stored_elements: bool,
    generated: bool,
) -> anyhow::Result<()> {
    use tessera_fem::estimate::{assembly_bytes, mesh_bytes, num_nodes};
    let mut need = assembly_bytes(order, c, scalar_bytes, stored_elements);
    if generated {
        need = need.saturating_add(mesh_bytes(c));
    }
    tessera_core::memory::check(
        format!(
            "assembling {spec} ({} tetrahedra, p = {order}, {} nodes)",
            c.cells,
            num_nodes(order, c)
        ),
        need,
    )?;
    Ok(())
}

/// Load a tetrahedral mesh from a file or a `gen:` specification.
pub fn load_simplex_mesh(spec: &str) -> anyhow::Result<SimplexMesh> {
    load_simplex_mesh_checked(spec, true)
}

/// [`load_simplex_mesh`]; a file with inverted cells is refused unless `allow_inverted`
/// (the count and the first cells with their place in the file are named).
pub fn load_simplex_mesh_checked(spec: &str, allow_inverted: bool) -> anyhow::Result<SimplexMesh> {
    let poly = if let Some(rest) = spec.strip_prefix("gen:") {
        let (kind, n) = rest
            .split_once(':')
            .with_context(|| format!("`{spec}`: expected gen:bracket:N or gen:box:N"))?;
        let n: usize = n
            .parse()
            .with_context(|| format!("`{spec}`: `{n}` is not a resolution"))?;
        match kind {
            "bracket" => tessera_mesh::generate::bracket(n)?,
            "box" => {
                anyhow::ensure!(
                    (1..=400).contains(&n),
                    "`{spec}`: box resolution must be in 1..=400"
                );
                tessera_mesh::generate::box_mesh(
                    tessera_mesh::generate::BoxKind::Tet,
                    [n; 3],
                    [1.0; 3],
                )
            }
            _ => anyhow::bail!("`{spec}`: unknown generator `{kind}` (expected bracket or box)"),
        }
    } else {
        let f = tessera_mesh::io::read_simplex_mesh(Path::new(spec))?;
        if f.inverted.count > 0 && !allow_inverted {
            anyhow::bail!(
                "{spec}: {} inverted cell(s), first {}; the mesh is tangled (see `tessera mesh quality {spec}`); smooth it without --plain, or pass --allow-inverted to assemble anyway",
                f.inverted.count,
                f.inverted.describe(5)
            );
        }
        anyhow::ensure!(f.mesh.num_cells() > 0, "{spec}: the mesh has no cells");
        return Ok(f.mesh);
    };
    let sm = SimplexMesh::from_poly(&poly)
        .with_context(|| format!("{spec}: FEM assembly needs a tetrahedral mesh"))?;
    anyhow::ensure!(sm.num_cells() > 0, "{spec}: the mesh has no cells");
    Ok(sm)
}

fn run_assemble(a: AssembleArgs) -> anyhow::Result<()> {
    // every output's folder before any work (assembly of a large mesh takes seconds)
    for p in [&a.output, &a.rhs, &a.nullspace, &a.fixed]
        .into_iter()
        .flatten()
    {
        crate::cmd_mesh::check_output_dir(p)?;
    }
    if a.output.is_some() || a.mesh.ends_with(".toml") {
        return run_export(a);
    }
    let material = Material::new(a.youngs, a.poisson, a.density);
    material.validate()?;
    // Inline summation computes element matrices inside the summation kernel, which the GPU
    // does for p = 1 only (dissertation §4.4.4): `auto` then stays on the CPU, `cuda` is an error.
    let inline_hi = a.summation == SummationArg::Inline && a.order > 1;
    let backend = match a.device {
        DeviceChoice::Auto if inline_hi => crate::device::Backend::Cpu,
        DeviceChoice::Cuda(n) if inline_hi => anyhow::bail!(
            "--summation inline runs on the GPU for p = 1 only (dissertation §4.4.4), not p = {}; use --summation per-node|per-entry or --device cpu (cuda:{n} requested)",
            a.order
        ),
        d => crate::device::resolve(d)?,
    };
    eprintln!("tessera fem assemble: device {}", backend.describe());
    let device_name = match &backend {
        crate::device::Backend::Cpu => "cpu".to_string(),
        crate::device::Backend::Cuda(g) => format!("cuda:{}", g.ordinal()),
    };
    let precision = a.precision.unwrap_or(if backend.is_cuda() {
        Precision::F32
    } else {
        Precision::F64
    });
    let summation = Summation::from(a.summation).resolve(!backend.is_cuda(), a.order);
    let stored = summation != Summation::Inline;
    let scalar = match precision {
        Precision::F32 => 4,
        Precision::F64 => 8,
    };
    if let Some(c) = gen_counts(&a.mesh) {
        check_assembly_memory(&a.mesh, &c, a.order, scalar, stored, true)?;
    }
    let sm = load_simplex_mesh_checked(&a.mesh, a.allow_inverted)?;
    let (nv, nc) = (sm.num_vertices(), sm.num_cells());
    // a file's counts are known once it is read (edges and faces from V - E + F - T = 1
    // and F ≈ 2T)
    let c = SimplexCounts {
        vertices: nv as u64,
        edges: (nv + nc) as u64,
        faces: 2 * nc as u64,
        cells: nc as u64,
    };
    check_assembly_memory(&a.mesh, &c, a.order, scalar, stored, false)?;
    let ho = HoMesh::new(sm, a.order)?;
    let opts = AssembleOptions {
        summation,
        par: if a.serial { Par::Seq } else { Par::auto() },
        device: if backend.is_cuda() {
            a.device
        } else {
            DeviceChoice::Cpu
        },
    };
    let (stats, fro) = match (&backend, precision) {
        (crate::device::Backend::Cpu, Precision::F64) => {
            assemble_any::<f64>(&ho, &material, &opts, a.matrix)?
        }
        (crate::device::Backend::Cpu, Precision::F32) => {
            assemble_any::<f32>(&ho, &material, &opts, a.matrix)?
        }
        (crate::device::Backend::Cuda(g), Precision::F64) => {
            assemble_any_gpu::<f64>(g, &ho, &material, &opts, a.matrix)?
        }
        (crate::device::Backend::Cuda(g), Precision::F32) => {
            assemble_any_gpu::<f32>(g, &ho, &material, &opts, a.matrix)?
        }
    };
    if a.json {
        let j = serde_json::json!({
            "mesh": a.mesh,
            "vertices": nv,
            "cells": nc,
            "order": a.order,
            "matrix": match a.matrix { MatrixKind::Stiffness => "stiffness", MatrixKind::Mass => "mass" },
            "precision": match precision { Precision::F32 => "f32", Precision::F64 => "f64" },
            "device": device_name,
            "device_description": backend.describe(),
            "summation": summation.name(),
            "nodes": ho.num_nodes(),
            "dofs": stats.dofs,
            "block_nonzeros": stats.block_nonzeros,
            "zayer_bound": stats.zayer_bound,
            "bytes_allocated": stats.bytes_allocated,
            "padding_blocks": stats.padding_blocks,
            "aux_bytes": stats.aux_bytes,
            "frobenius_norm": fro,
            "stages_ms": stats.stages_ms,
        });
        println!("{j}");
    } else {
        println!(
            "mesh            {} ({nv} vertices, {nc} tetrahedra), p = {}, {} nodes",
            a.mesh,
            a.order,
            ho.num_nodes()
        );
        println!("dofs            {}", stats.dofs);
        println!(
            "block nonzeros  {} exact (Eq. 4.6), Zayer et al. bound {} (ratio {:.2})",
            stats.block_nonzeros,
            stats.zayer_bound,
            stats.zayer_bound as f64 / stats.block_nonzeros as f64
        );
        println!(
            "memory          {} bytes Bin-BCSR*, {} padding blocks, {} bytes temporary",
            stats.bytes_allocated, stats.padding_blocks, stats.aux_bytes
        );
        println!("||K||_F         {fro:.9e}");
        for (k, v) in &stats.stages_ms {
            println!("  {k:<24} {v:>10.3} ms");
        }
    }
    Ok(())
}

fn assemble_any<T: Scalar>(
    ho: &HoMesh,
    m: &Material,
    o: &AssembleOptions,
    kind: MatrixKind,
) -> anyhow::Result<(AssemblyStats, f64)> {
    let a: Assembly<T> = match kind {
        MatrixKind::Stiffness => assemble_stiffness(ho, m, o)?,
        MatrixKind::Mass => assemble_mass(ho, m, o)?,
    };
    Ok((a.stats, a.matrix.frobenius_norm()))
}

/// GPU assembly (dissertation §4.4, `tessera_fem::cuda`): the matrix is downloaded and ‖K‖_F
/// computed on the host exactly as on the CPU path.
fn assemble_any_gpu<T: tessera_fem::cuda::GpuScalar>(
    gpu: &tessera_gpu::Gpu,
    ho: &HoMesh,
    m: &Material,
    o: &AssembleOptions,
    kind: MatrixKind,
) -> anyhow::Result<(AssemblyStats, f64)> {
    let (dm, stats) = match kind {
        MatrixKind::Stiffness => tessera_fem::cuda::assemble_stiffness_gpu::<T>(gpu, ho, m, o)?,
        MatrixKind::Mass => tessera_fem::cuda::assemble_mass_gpu::<T>(gpu, ho, m, o)?,
    };
    let host = dm.download(gpu)?;
    Ok((stats, host.frobenius_norm()))
}

/// Stage `bytes` for `path` ([`tessera_core::atomic::stage`]: a private temporary file
/// beside it); the export publishes all its files together.
fn stage_bytes(path: &Path, bytes: &[u8]) -> anyhow::Result<tessera_core::atomic::Staged> {
    Ok(tessera_core::atomic::stage(path, |w| w.write_all(bytes))?)
}

/// `tessera fem assemble ... -o K.mtx`: the Matrix Market export (see the module docs).
fn run_export(a: AssembleArgs) -> anyhow::Result<()> {
    use tessera_solve::matrix_market::{write_array, write_symmetric};
    let output = a
        .output
        .clone()
        .context("a problem file is exported with -o K.mtx (and --rhs, --nullspace, --fixed)")?;
    anyhow::ensure!(
        a.matrix == MatrixKind::Stiffness,
        "-o exports the stiffness matrix only"
    );
    let is_problem = a.mesh.ends_with(".toml");
    // whether the summation at order p stores element matrices (the CPU's)
    let stored = |p: usize| Summation::from(a.summation).resolve(true, p) != Summation::Inline;
    let (ho, material, cons_f) = if is_problem {
        let path = Path::new(&a.mesh);
        let problem = tessera_fem::problem::Problem::from_file(path)?;
        tessera_fem::estimate::check_problem(&problem)?;
        let loaded =
            tessera_fem::static_solve::load_mesh(&problem.mesh, Par::auto(), a.allow_inverted)?;
        let c =
            tessera_fem::estimate::file_counts(loaded.mesh.num_vertices(), loaded.mesh.num_cells());
        check_assembly_memory(&a.mesh, &c, problem.order, 8, stored(problem.order), false)?;
        let ho = HoMesh::new(loaded.mesh, problem.order)?;
        let (cons, f) =
            tessera_fem::static_solve::constraints_and_loads(&problem, &ho, &loaded.groups)?;
        (ho, problem.material.clone(), Some((cons, f)))
    } else {
        anyhow::ensure!(
            a.rhs.is_none() && a.fixed.is_none(),
            "--rhs and --fixed need a problem file (PROBLEM.toml) with loads and fixed regions"
        );
        let m = Material::new(a.youngs, a.poisson, a.density);
        if let Some(c) = gen_counts(&a.mesh) {
            check_assembly_memory(&a.mesh, &c, a.order, 8, stored(a.order), true)?;
        }
        let sm = load_simplex_mesh_checked(&a.mesh, a.allow_inverted)?;
        let c = tessera_fem::estimate::file_counts(sm.num_vertices(), sm.num_cells());
        check_assembly_memory(&a.mesh, &c, a.order, 8, stored(a.order), false)?;
        (HoMesh::new(sm, a.order)?, m, None)
    };
    material.validate()?;
    let opts = AssembleOptions {
        summation: a.summation.into(),
        par: if a.serial { Par::Seq } else { Par::auto() },
        device: DeviceChoice::Cpu,
    };
    let k = assemble_stiffness::<f64>(&ho, &material, &opts)?.matrix;
    let n = 3 * ho.num_nodes();
    let comment = format!(
        "tessera fem assemble {}: stiffness K of linear elasticity, p = {}, {} nodes, DOFs node-major (x, y, z)",
        a.mesh,
        ho.order(),
        ho.num_nodes()
    );
    let mut buf = Vec::new();
    write_symmetric(&k, &comment, &mut buf)?;
    // K, b, the modes and the fixed DOFs are published together (a reader never sees a
    // K of one run beside the b of another)
    let mut staged = vec![stage_bytes(&output, &buf)?];
    let mut written = vec![output.display().to_string()];
    if let Some(p) = &a.nullspace {
        let b = tessera_solve::nullspace::rigid_body_modes(
            &ho.node_positions(),
            &[],
            tessera_solve::NearNullSpace::RigidBody,
        );
        let mut buf = Vec::new();
        write_array(
            &b,
            n,
            6,
            "rigid-body modes: translations x, y, z; rotations about x, y, z through the centroid",
            &mut buf,
        )?;
        staged.push(stage_bytes(p, &buf)?);
        written.push(p.display().to_string());
    }
    if let Some((cons, f)) = &cons_f {
        if let Some(p) = &a.rhs {
            let mut buf = Vec::new();
            write_array(f, n, 1, "load vector b", &mut buf)?;
            staged.push(stage_bytes(p, &buf)?);
            written.push(p.display().to_string());
        }
        if let Some(p) = &a.fixed {
            let mut text = String::from(
                "# constrained DOFs: DOF (0-based, node-major x, y, z) and prescribed value\n",
            );
            for i in 0..n {
                if cons.fixed[i] {
                    text += &format!("{i} {:e}\n", cons.values[i]);
                }
            }
            staged.push(stage_bytes(p, text.as_bytes())?);
            written.push(p.display().to_string());
        }
    }
    tessera_core::atomic::publish(staged)?;
    if a.json {
        println!(
            "{}",
            serde_json::json!({
                "mesh": a.mesh,
                "order": ho.order(),
                "nodes": ho.num_nodes(),
                "dofs": n,
                "block_nonzeros": k.pattern().block_nonzeros(),
                "fixed_dofs": cons_f.as_ref().map(|(c, _)| c.num_fixed()),
                "written": written,
            })
        );
    } else {
        println!(
            "{} dofs, {} block nonzeros; wrote {}",
            n,
            k.pattern().block_nonzeros(),
            written.join(", ")
        );
    }
    Ok(())
}
