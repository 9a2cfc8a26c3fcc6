//! The static linear-elasticity simulation end to end (dissertation §4.1: "the static
//! simulation to convergence"), as four stages run in order by [`solve_problem`]:
//!
//! 1. [`load_stage`]: read or generate the mesh (and open the GPU meanwhile);
//! 2. [`preprocess`]: the order-`p` mesh, boundary selections, constraints, the load vector
//!    and the rigid-mode check;
//! 3. [`assemble_cpu`] / [`assemble_gpu`]: `K` into Bin-BCSR* (§4.4);
//! 4. [`solve_stage`]: `K u = f` by the filtered PCG of `tessera_solve` running directly
//!    on Bin-BCSR* (on the device for GPU runs), or by its direct sparse Cholesky.
//!
//! The solution vector holds Bernstein-Bézier coefficients (see [`crate::loads`]).
//!
//! Meshes read from files are renumbered along a Morton curve before anything else
//! ([`SimplexMesh::renumber_morton`]) for the memory locality of assembly and the solver;
//! the results (`.vtu`) are written in that numbering, with the same geometry and cells.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;
use tessera_gpu::Gpu;

use tessera_core::{DeviceChoice, Par};
use tessera_mesh::simplex::SimplexMesh;
use tessera_mesh::MeshError;
use tessera_sparse::binbcsr::BinBcsr;

use tessera_solve::cuda::{
    device_filtered_copy, pcg_gpu, pcg_gpu_with, DeviceAmg, DeviceOperator, DevicePmg, SolveKernels,
};
use tessera_solve::{
    pcg, pcg_with, Amg, BlockCsr, Constraints, PMultigrid, PcgParams, SolveError, SolveReport,
};

use crate::assemble::{assemble_stiffness, AssembleOptions, AssemblyStats, Operator, Summation};
use crate::cuda::{DeviceBinBcsr, DeviceHoMesh, FemKernels, GpuAssembler};
use crate::error::FemError;
use crate::loads::{add_body_force, add_traction, boundary_faces, face_nodes, BoundaryFace};
use crate::multigrid::degree_elevation;
use crate::nodes::HoMesh;
use crate::problem::{
    Load, MeshSource, PreconditionerKind, Problem, ProblemError, Selector, SolverMethod,
};

pub use tessera_solve::relative_residual;

/// Failures of a static solve.
#[derive(Debug, thiserror::Error)]
pub enum StaticError {
    #[error(transparent)]
    Problem(#[from] ProblemError),
    /// Mesh errors (they name their file and line themselves).
    #[error(transparent)]
    Mesh(#[from] MeshError),
    #[error(transparent)]
    Fem(#[from] FemError),
    #[error(transparent)]
    Solve(#[from] SolveError),
    /// A selector that names a missing group or selects no boundary face.
    #[error("`{key}`: {message}")]
    Selection { key: String, message: String },
    #[error("{0}")]
    Unsupported(String),
    /// Work refused before it starts (memory estimate over the budget).
    #[error(transparent)]
    Core(#[from] tessera_core::CoreError),
    /// A mesh file with cells folded over relative to their neighbours.
    #[error("{file}: {count} inverted cell(s), first {first}; the mesh is tangled (see `tessera mesh quality {file}`); smooth it without --plain, or pass --allow-inverted to solve anyway")]
    InvertedCells {
        file: String,
        count: usize,
        first: String,
    },
}

/// A surface physical group of the mesh file, as sorted vertex triples.
#[derive(Clone, Debug)]
pub struct SurfaceGroup {
    pub name: String,
    pub tag: i32,
    pub dim: u8,
    pub faces: HashSet<[u32; 3]>,
}

/// A loaded tetrahedral mesh with its physical groups.
pub struct LoadedMesh {
    pub mesh: SimplexMesh,
    pub groups: Vec<SurfaceGroup>,
    /// For a mesh file: the file and where each (renumbered) cell came from, so that a
    /// cell found degenerate later is named by its line.
    pub source: Option<(std::path::PathBuf, tessera_mesh::io::CellLocations)>,
}

/// Load (read or generate) the problem's mesh and convert it to a [`SimplexMesh`]; a file
/// with inverted cells is refused (naming how many and the first ones) unless
/// `allow_inverted`.
pub fn load_mesh(
    source: &MeshSource,
    par: Par,
    allow_inverted: bool,
) -> Result<LoadedMesh, StaticError> {
    use tessera_mesh::generate::{box_mesh, bracket, BoxKind};
    let mut origin = None;
    let (mut mesh, groups) = match source {
        // straight to the simplex form, then renumbered along a Morton curve for the locality
        // of assembly and SpMV (file numberings are often scattered)
        MeshSource::File(p) => {
            let mut mf = tessera_mesh::io::read_simplex_mesh(p)?;
            if mf.inverted.count > 0 && !allow_inverted {
                return Err(StaticError::InvertedCells {
                    file: p.display().to_string(),
                    count: mf.inverted.count,
                    first: mf.inverted.describe(5),
                });
            }
            mf.mesh.set_par(par);
            let (new_of_old, old_of_new_cell) = mf.mesh.renumber_morton_with_cells();
            mf.cell_locations.permute(&old_of_new_cell);
            origin = Some((p.clone(), mf.cell_locations));
            let groups = mf
                .groups
                .into_iter()
                .map(|g| SurfaceGroup {
                    name: g.name,
                    tag: g.tag,
                    dim: g.dim,
                    faces: g
                        .faces
                        .into_iter()
                        .map(|t| {
                            let mut u = t.map(|v| new_of_old[v as usize]);
                            u.sort_unstable();
                            u
                        })
                        .collect(),
                })
                .collect();
            (mf.mesh, groups)
        }
        MeshSource::Bracket(r) => (simplex_of(&bracket(*r)?)?, Vec::new()),
        MeshSource::Box { cells, size } => (
            simplex_of(&box_mesh(BoxKind::Tet, *cells, *size))?,
            Vec::new(),
        ),
    };
    if mesh.dim() != 3 || mesh.num_cells() == 0 {
        return Err(StaticError::Unsupported(
            "static solve needs a tetrahedral mesh with at least one cell".into(),
        ));
    }
    mesh.set_par(par);
    Ok(LoadedMesh {
        mesh,
        groups,
        source: origin,
    })
}

fn simplex_of(poly: &tessera_mesh::PolyMesh) -> Result<SimplexMesh, StaticError> {
    SimplexMesh::from_poly(poly).map_err(|e| {
        StaticError::Unsupported(format!("static solve needs a tetrahedral mesh: {e}"))
    })
}

/// The boundary faces selected by `sel` (`key` names the selector in messages). Errors for a
/// group that does not exist or is not a surface group, and for an empty selection.
pub fn select_faces(
    ho: &HoMesh,
    faces: &[BoundaryFace],
    groups: &[SurfaceGroup],
    sel: &Selector,
    key: &str,
) -> Result<Vec<BoundaryFace>, StaticError> {
    let err = |message: String| StaticError::Selection {
        key: key.to_string(),
        message,
    };
    let available = || {
        if groups.is_empty() {
            "the mesh has no physical groups".to_string()
        } else {
            format!(
                "the mesh has: {}",
                groups
                    .iter()
                    .map(|g| format!(
                        "{} (tag {}, dim {})",
                        if g.name.is_empty() {
                            "<unnamed>"
                        } else {
                            &g.name
                        },
                        g.tag,
                        g.dim
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    };
    let group = match sel {
        Selector::GroupName(n) => Some(
            groups
                .iter()
                .find(|g| &g.name == n)
                .ok_or_else(|| err(format!("no physical group named `{n}`; {}", available())))?,
        ),
        Selector::GroupTag(t) => Some(
            groups
                .iter()
                .find(|g| g.tag == *t && g.dim == 2)
                .or_else(|| groups.iter().find(|g| g.tag == *t))
                .ok_or_else(|| err(format!("no physical group with tag {t}; {}", available())))?,
        ),
        _ => None,
    };
    let pos = ho.mesh().positions();
    let out: Vec<BoundaryFace> = if let Some(g) = group {
        if g.dim != 2 {
            return Err(err(format!("physical group `{}` (tag {}) has dimension {}; fixed regions and loads need a surface group (dimension 2)", g.name, g.tag, g.dim)));
        }
        faces
            .iter()
            .filter(|f| g.faces.contains(&f.vertices))
            .copied()
            .collect()
    } else {
        faces
            .iter()
            .filter(|f| {
                f.vertices
                    .iter()
                    .all(|&v| sel.contains(pos[v as usize]) == Some(true))
            })
            .copied()
            .collect()
    };
    if out.is_empty() {
        let mut lo = [f64::INFINITY; 3];
        let mut hi = [f64::NEG_INFINITY; 3];
        for p in pos {
            for k in 0..3 {
                lo[k] = lo[k].min(p[k]);
                hi[k] = hi[k].max(p[k]);
            }
        }
        return Err(err(format!(
            "selects no boundary face (the mesh spans {lo:?} .. {hi:?})"
        )));
    }
    Ok(out)
}

/// Options of [`solve_problem`].
#[derive(Clone, Debug)]
pub struct StaticOptions {
    pub par: Par,
    /// `cpu`, `cuda[:N]`, or `auto` (CUDA device 0 when usable, else the CPU).
    pub device: DeviceChoice,
    pub summation: Summation,
    /// An already opened GPU to run on (overrides `device`); otherwise one is opened, in a
    /// background thread while the mesh loads.
    pub gpu: Option<Arc<Gpu>>,
    /// Solve even when the mesh file has inverted (folded-over) cells (for experiments; the
    /// results of a tangled mesh are not those of the body).
    pub allow_inverted: bool,
    /// Split the mesh into domains, each assembling its owned rows, and solve with the
    /// partitioned operator ([`crate::domain_solve`]); `None`: one matrix.
    pub domains: Option<crate::domain_solve::DomainOptions>,
    /// CUDA devices of a domain-decomposed solve ([`crate::domain_gpu`]; domains placed
    /// round-robin); empty: the domains run on the CPU.
    pub devices: Vec<usize>,
}

impl Default for StaticOptions {
    fn default() -> Self {
        StaticOptions {
            par: Par::auto(),
            device: DeviceChoice::Auto,
            summation: Summation::Auto,
            gpu: None,
            allow_inverted: false,
            domains: None,
            devices: Vec::new(),
        }
    }
}

/// A solved static problem.
pub struct StaticSolution {
    pub ho: HoMesh,
    /// Displacement BB coefficients, 3 per node, node-major.
    pub u: Vec<f64>,
    /// The load vector.
    pub f: Vec<f64>,
    pub constraints: Constraints,
    pub report: SolveReport,
    pub assembly: AssemblyStats,
    /// The stiffness matrix in host memory (CPU runs, and GPU runs with the direct solver).
    pub matrix: Option<BinBcsr<f64>>,
    /// The stiffness matrix in device memory (GPU runs), with its device.
    pub device_matrix: Option<(Arc<Gpu>, DeviceBinBcsr<f64>)>,
    /// Where assembly and solve ran: `cpu` or `cuda:N`.
    pub device: String,
    /// Milliseconds per stage in run order: load, preprocess, assemble, solve (GPU runs
    /// also `gpu_init`: context creation and kernel loading, overlapped with `load`; and
    /// `upload`: the device mesh, with its host-side cell -> node and node -> cells arrays).
    pub stages_ms: StageTimes,
    /// Scalar stored nonzeros of `K` (diagonal blocks included, padding excluded).
    pub nonzeros: u64,
    /// The preconditioner that ran and its hierarchy.
    pub solver: SolverInfo,
    /// Domains, halo and per-domain times of a domain-decomposed run.
    pub domains: Option<crate::domain_solve::DomainSolveInfo>,
}

/// Check that the fixed DOFs remove every rigid-body motion of a 3D body (3 translations,
/// 3 rotations): with `R` the 6 rigid modes sampled at the fixed DOFs (a linear field's BB
/// coefficients are its values at the nodes), `K` restricted to the free DOFs of a connected
/// body is singular exactly when `Rᵀ R` is. Positions are centred and scaled first; an
/// eigenvalue below 1e-12 of the largest counts as zero. The error names the free modes.
pub fn check_rigid_modes(ho: &HoMesh, cons: &Constraints) -> Result<(), SolveError> {
    check_rigid_modes_of(ho, cons, |_| true)
}

/// [`check_rigid_modes`] over the nodes for which `take(node)` holds.
fn check_rigid_modes_of(
    ho: &HoMesh,
    cons: &Constraints,
    take: impl Fn(usize) -> bool,
) -> Result<(), SolveError> {
    if cons.num_fixed() == 0 {
        return Err(SolveError::Unconstrained);
    }
    let x = ho.node_positions();
    let n = (0..x.len()).filter(|&i| take(i)).count().max(1) as f64;
    let mut c = [0.0; 3];
    for (i, p) in x.iter().enumerate() {
        if take(i) {
            for k in 0..3 {
                c[k] += p[k] / n;
            }
        }
    }
    let scale = x
        .iter()
        .enumerate()
        .filter(|(i, _)| take(*i))
        .flat_map(|(_, p)| (0..3).map(move |k| (p[k] - c[k]).abs()))
        .fold(0.0f64, f64::max)
        .max(f64::MIN_POSITIVE);
    let mut g = [[0.0f64; 6]; 6];
    for (i, p) in x.iter().enumerate() {
        if !take(i) {
            continue;
        }
        let q = [
            (p[0] - c[0]) / scale,
            (p[1] - c[1]) / scale,
            (p[2] - c[2]) / scale,
        ];
        for k in 0..3 {
            if !cons.fixed[i * 3 + k] {
                continue;
            }
            // component k of the modes: translations e_j, rotations e_j × q
            let mut r = [0.0; 6];
            r[k] = 1.0;
            let rot = [[0.0, -q[2], q[1]], [q[2], 0.0, -q[0]], [-q[1], q[0], 0.0]];
            for j in 0..3 {
                // (e_j × q)_k
                r[3 + j] = -rot[k][j];
            }
            for a in 0..6 {
                for b in 0..6 {
                    g[a][b] += r[a] * r[b];
                }
            }
        }
    }
    let (vals, vecs) = jacobi_eigen6(g);
    let max = vals.iter().cloned().fold(0.0f64, f64::max);
    let names = [
        "translation x",
        "translation y",
        "translation z",
        "rotation about x",
        "rotation about y",
        "rotation about z",
    ];
    let mut free = Vec::new();
    for (m, &v) in vals.iter().enumerate() {
        if v <= 1e-12 * max.max(f64::MIN_POSITIVE) {
            // describe the null vector by its dominant components
            let w: Vec<f64> = (0..6).map(|a| vecs[a][m]).collect();
            let big = w.iter().fold(0.0f64, |a, b| a.max(b.abs()));
            let parts: Vec<&str> = (0..6)
                .filter(|&a| w[a].abs() >= 0.3 * big)
                .map(|a| names[a])
                .collect();
            free.push(parts.join(" + "));
        }
    }
    if free.is_empty() {
        Ok(())
    } else {
        Err(SolveError::RigidModesFree {
            free: free.len(),
            modes: free.join("; "),
        })
    }
}

/// Eigenvalues and eigenvectors (columns) of a symmetric 6 × 6 matrix by cyclic Jacobi.
fn jacobi_eigen6(mut a: [[f64; 6]; 6]) -> ([f64; 6], [[f64; 6]; 6]) {
    let mut v = [[0.0; 6]; 6];
    for (i, row) in v.iter_mut().enumerate() {
        row[i] = 1.0;
    }
    for _ in 0..100 {
        let off: f64 = (0..6)
            .flat_map(|i| (0..6).filter(move |&j| j != i).map(move |j| (i, j)))
            .map(|(i, j)| a[i][j] * a[i][j])
            .sum();
        let diag: f64 = (0..6).map(|i| a[i][i] * a[i][i]).sum();
        if off <= 1e-30 * diag.max(f64::MIN_POSITIVE) {
            break;
        }
        for p in 0..6 {
            for q in p + 1..6 {
                if a[p][q] == 0.0 {
                    continue;
                }
                let theta = (a[q][q] - a[p][p]) / (2.0 * a[p][q]);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let t = if theta == 0.0 { 1.0 } else { t };
                let cs = 1.0 / (t * t + 1.0).sqrt();
                let sn = t * cs;
                for k in 0..6 {
                    let (akp, akq) = (a[k][p], a[k][q]);
                    a[k][p] = cs * akp - sn * akq;
                    a[k][q] = sn * akp + cs * akq;
                }
                for k in 0..6 {
                    let (apk, aqk) = (a[p][k], a[q][k]);
                    a[p][k] = cs * apk - sn * aqk;
                    a[q][k] = sn * apk + cs * aqk;
                }
                for row in v.iter_mut() {
                    let (vkp, vkq) = (row[p], row[q]);
                    row[p] = cs * vkp - sn * vkq;
                    row[q] = sn * vkp + cs * vkq;
                }
            }
        }
    }
    let mut vals = [0.0; 6];
    for i in 0..6 {
        vals[i] = a[i][i];
    }
    (vals, v)
}

/// Constraints and load vector of a problem on an order-`p` mesh.
pub fn constraints_and_loads(
    problem: &Problem,
    ho: &HoMesh,
    groups: &[SurfaceGroup],
) -> Result<(Constraints, Vec<f64>), StaticError> {
    let n = ho.num_nodes() * 3;
    let faces = boundary_faces(ho);
    let mut sel_iter = problem.selector_keys.iter();
    let mut cons = Constraints::none(n);
    let mut nodes = Vec::new();
    for fr in &problem.fixed {
        let (key, sel) = sel_iter.next().expect("one key per selector");
        let chosen = select_faces(ho, &faces, groups, sel, key)?;
        for bf in &chosen {
            face_nodes(ho, bf, &mut nodes);
            for &v in &nodes {
                for k in 0..3 {
                    if fr.components[k] {
                        cons.fix(v as usize, 3, k, fr.displacement[k]);
                    }
                }
            }
        }
    }
    let mut f = vec![0.0; n];
    for load in &problem.loads {
        match load {
            Load::Traction { selector, traction } => {
                let (key, _) = sel_iter.next().expect("one key per selector");
                let chosen = select_faces(ho, &faces, groups, selector, key)?;
                add_traction(ho, &chosen, |_| *traction, &mut f);
            }
            Load::Pressure { selector, pressure } => {
                let (key, _) = sel_iter.next().expect("one key per selector");
                let chosen = select_faces(ho, &faces, groups, selector, key)?;
                add_traction(ho, &chosen, |bf| bf.normal.map(|c| -pressure * c), &mut f);
            }
            Load::Gravity { acceleration } => {
                let rho = problem.material.density;
                add_body_force(ho, acceleration.map(|a| rho * a), &mut f)?;
            }
        }
    }
    Ok((cons, f))
}

/// Open the GPU a run asks for: `None` for the CPU (`cpu`, or `auto` without a usable
/// device), an error when `cuda[:N]` cannot be used.
pub fn open_gpu(device: DeviceChoice) -> Result<Option<Arc<Gpu>>, StaticError> {
    Gpu::open(device).map(|g| g.map(Arc::new)).map_err(|e| {
        StaticError::Fem(FemError::Device {
            device: device.to_string(),
            reason: e.to_string().replace('\n', " "),
        })
    })
}

/// Stage times in run order: `(stage, milliseconds)`.
pub type StageTimes = Vec<(String, f64)>;

/// The time of stage `name` in `stages`, if it ran.
pub fn stage_ms(stages: &[(String, f64)], name: &str) -> Option<f64> {
    stages.iter().find(|(n, _)| n == name).map(|(_, t)| *t)
}

/// Runs stages in order: announces each to the progress callback and records its time.
struct StageRunner<'p> {
    list: StageTimes,
    progress: &'p mut dyn FnMut(&str),
}

impl StageRunner<'_> {
    fn run<R>(&mut self, name: &str, f: impl FnOnce() -> R) -> R {
        (self.progress)(name);
        let t = Instant::now();
        let r = f();
        self.list
            .push((name.to_string(), t.elapsed().as_secs_f64() * 1e3));
        r
    }
}

/// A loaded mesh with the GPU the run uses (opened while the mesh loaded) and the time that
/// opening took (context creation, kernel loading).
pub struct Loaded {
    pub mesh: LoadedMesh,
    pub gpu: Option<Arc<Gpu>>,
    pub gpu_init_ms: Option<f64>,
}

/// Stage 1: load (read or generate) the mesh; on a GPU run, open the device and load the
/// FEM and solver kernels in a background thread meanwhile.
pub fn load_stage(problem: &Problem, opts: &StaticOptions) -> Result<Loaded, StaticError> {
    let (mesh, gpu) = std::thread::scope(|s| {
        let init = (opts.gpu.is_none() && opts.device != DeviceChoice::Cpu).then(|| {
            s.spawn(|| {
                let t = Instant::now();
                let g = open_gpu(opts.device)?;
                if let Some(g) = &g {
                    FemKernels::new(g)?;
                    SolveKernels::new(g).map_err(FemError::from)?;
                }
                Ok::<_, StaticError>((g, t.elapsed().as_secs_f64() * 1e3))
            })
        });
        let mesh = load_mesh(&problem.mesh, opts.par, opts.allow_inverted);
        let gpu = match init {
            Some(h) => match h.join() {
                Ok(r) => r.map(|(g, t)| (g, Some(t))),
                Err(_) => Err(StaticError::Unsupported(
                    "GPU initialisation panicked".into(),
                )),
            },
            None => Ok((opts.gpu.clone(), None)),
        };
        (mesh, gpu)
    });
    let (gpu, gpu_init_ms) = gpu?;
    Ok(Loaded {
        mesh: mesh?,
        gpu,
        gpu_init_ms,
    })
}

/// The discrete problem before assembly: the order-`p` mesh, constraints and loads.
pub struct Prepared {
    pub ho: HoMesh,
    pub constraints: Constraints,
    pub f: Vec<f64>,
}

/// Stage 2: the order-`p` mesh, the boundary selections, constraints and the load vector, and
/// the check that the constraints remove every rigid-body mode.
pub fn preprocess(problem: &Problem, loaded: LoadedMesh) -> Result<Prepared, StaticError> {
    let mut tr = tessera_core::trace::Tracer::new("preprocess");
    let ho = HoMesh::new(loaded.mesh, problem.order)?;
    tr.mark("HoMesh::new");
    let (constraints, f) = constraints_and_loads(problem, &ho, &loaded.groups)?;
    tr.mark("constraints + loads");
    check_finite("loads", "the load vector", &f)?;
    check_rigid_modes_per_body(&ho, &constraints)?;
    tr.mark("rigid-mode check");
    Ok(Prepared { ho, constraints, f })
}

/// A non-finite value of a nodal vector (3 components per node): an error naming the
/// stage and the first offending node.
fn check_finite(stage: &'static str, what: &str, v: &[f64]) -> Result<(), StaticError> {
    match v.iter().position(|x| !x.is_finite()) {
        None => Ok(()),
        Some(i) => Err(StaticError::Mesh(MeshError::NonFiniteValue {
            stage,
            what: format!("{what} (component {})", ["x", "y", "z"][i % 3]),
            entity: "node",
            index: i / 3,
            value: v[i],
        })),
    }
}

/// The first block row of `K` holding a NaN or infinite value (diagonal blocks first).
pub fn first_non_finite_row(k: &BinBcsr<f64>) -> Option<(usize, f64)> {
    use tessera_sparse::binbcsr::BIN_SIZE;
    let p = k.pattern();
    let e2 = p.block_dim() * p.block_dim();
    if let Some(i) = k.diag().iter().position(|x| !x.is_finite()) {
        return Some((i / e2, k.diag()[i]));
    }
    let v = k.values();
    let i = v.iter().position(|x| !x.is_finite())?;
    // value i lies in bin b at offset (i - base e²) of a component-major, `w`-slot layout
    let offs = p.bin_offsets();
    let b = offs.partition_point(|&o| (o as usize) * e2 <= i) - 1;
    let base = offs[b] as usize;
    let w = offs[b + 1] as usize - base;
    let slot_in_bin = (i - base * e2) % w.max(1);
    Some((b * BIN_SIZE + slot_in_bin % BIN_SIZE, v[i]))
}

/// [`check_rigid_modes`] for every connected body of the mesh (cells joined through shared
/// vertices): a second body that nothing holds (a floating part) makes `K` singular even
/// when the first is fixed, which the check over the whole mesh cannot see. The error
/// names the body by its size and one of its vertices.
pub fn check_rigid_modes_per_body(ho: &HoMesh, cons: &Constraints) -> Result<(), SolveError> {
    let mesh = ho.mesh();
    let nv = mesh.num_vertices();
    // union-find over the vertices of each cell
    let mut parent: Vec<u32> = (0..nv as u32).collect();
    fn find(parent: &mut [u32], mut x: u32) -> u32 {
        while parent[x as usize] != x {
            parent[x as usize] = parent[parent[x as usize] as usize];
            x = parent[x as usize];
        }
        x
    }
    let m = mesh.dim() + 1;
    for cell in mesh.cell_vertices().chunks(m) {
        let a = find(&mut parent, cell[0]);
        for &v in &cell[1..] {
            let b = find(&mut parent, v);
            if a != b {
                parent[b as usize] = a;
            }
        }
    }
    let mut body_of_root = vec![u32::MAX; nv];
    let mut bodies = 0u32;
    let mut body_of_cell = Vec::with_capacity(ho.num_cells());
    for cell in mesh.cell_vertices().chunks(m) {
        let r = find(&mut parent, cell[0]) as usize;
        if body_of_root[r] == u32::MAX {
            body_of_root[r] = bodies;
            bodies += 1;
        }
        body_of_cell.push(body_of_root[r]);
    }
    if bodies <= 1 {
        return check_rigid_modes(ho, cons);
    }
    // every node takes the body of a cell it belongs to
    let mut body_of_node = vec![u32::MAX; ho.num_nodes()];
    let mut nodes = vec![0u32; ho.nodes_per_cell()];
    let mut cells_of_body = vec![0usize; bodies as usize];
    let mut first_vertex = vec![u32::MAX; bodies as usize];
    for (c, &b) in body_of_cell.iter().enumerate() {
        ho.cell_nodes(c, &mut nodes);
        for &n in &nodes {
            body_of_node[n as usize] = b;
        }
        cells_of_body[b as usize] += 1;
        if first_vertex[b as usize] == u32::MAX {
            first_vertex[b as usize] = mesh.cell_vertices()[c * m];
        }
    }
    for b in 0..bodies {
        let mut sub = cons.clone();
        for (i, f) in sub.fixed.iter_mut().enumerate() {
            if body_of_node[i / 3] != b {
                *f = false;
            }
        }
        let describe = |what: String| {
            format!(
                "body {} of {bodies} ({} tetrahedra, with vertex {}): {what}",
                b + 1,
                cells_of_body[b as usize],
                first_vertex[b as usize]
            )
        };
        match check_rigid_modes_of(ho, &sub, |node| body_of_node[node] == b) {
            Ok(()) => {}
            Err(SolveError::RigidModesFree { free, modes }) => {
                return Err(SolveError::RigidModesFree {
                    free,
                    modes: describe(modes),
                })
            }
            Err(SolveError::Unconstrained) => {
                return Err(SolveError::RigidModesFree {
                    free: 6,
                    modes: describe("nothing fixes it (a floating part)".into()),
                })
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Stage 3 on the CPU: `K` of linear elasticity into Bin-BCSR* (dissertation §4.4).
pub fn assemble_cpu(
    problem: &Problem,
    ho: &HoMesh,
    opts: &StaticOptions,
) -> Result<crate::assemble::Assembly<f64>, StaticError> {
    Ok(assemble_stiffness::<f64>(
        ho,
        &problem.material,
        &AssembleOptions {
            summation: opts.summation,
            par: opts.par,
            device: DeviceChoice::Cpu,
        },
    )?)
}

/// Stage 3 on a GPU: upload the mesh (its own stage, `upload`), then assemble `K` on the
/// device (dissertation §4.4.3-§4.4.4). The matrix stays in device memory.
fn assemble_gpu(
    problem: &Problem,
    ho: &HoMesh,
    gpu: &Gpu,
    opts: &StaticOptions,
    stages: &mut StageRunner<'_>,
) -> Result<(DeviceBinBcsr<f64>, AssemblyStats), StaticError> {
    let kernels = FemKernels::new(gpu)?;
    let lame = problem.material.lame()?;
    let dm = stages.run("upload", || DeviceHoMesh::upload(gpu, ho))?;
    stages.run("assemble", || {
        let mut asm = GpuAssembler::new(&kernels, &dm, opts.summation)?;
        let mat = asm.assemble::<f64>(Operator::Stiffness(lame))?;
        gpu.synchronize().map_err(|e| FemError::Device {
            device: format!("cuda:{}", gpu.ordinal()),
            reason: e.to_string(),
        })?;
        Ok((mat, asm.stats().clone()))
    })
}

/// The stiffness matrix where assembly left it.
#[derive(Clone, Copy)]
pub enum Stiffness<'a> {
    Host(&'a BinBcsr<f64>),
    Device(&'a Gpu, &'a DeviceBinBcsr<f64>),
}

/// What the solver reports beside the iteration: the preconditioner that ran and its
/// hierarchy (for block Jacobi: one level, complexities 1).
#[derive(Clone, Debug, PartialEq)]
pub struct SolverInfo {
    /// `block-jacobi`, `amg`, `pmg`, or `cholesky` for the direct solver.
    pub preconditioner: String,
    /// Levels of the multigrid hierarchy (the finest included).
    pub levels: usize,
    /// `Σ blocks / blocks₀` over the levels (the finest operator counts as 1).
    pub operator_complexity: f64,
    /// `Σ DOFs / DOFs₀` over the levels.
    pub grid_complexity: f64,
    /// Bytes of the hierarchy beyond the finest operator.
    pub hierarchy_bytes: usize,
    /// DOFs per level.
    pub level_dofs: Vec<usize>,
    /// Setup sub-stages in run order (ms).
    pub setup_stages_ms: StageTimes,
}

impl SolverInfo {
    fn single(name: &str) -> Self {
        SolverInfo {
            preconditioner: name.to_string(),
            levels: 1,
            operator_complexity: 1.0,
            grid_complexity: 1.0,
            hierarchy_bytes: 0,
            level_dofs: Vec::new(),
            setup_stages_ms: Vec::new(),
        }
    }
}

/// A preconditioner set up for the stiffness matrix (stage `setup`).
pub enum SolverSetup<'a> {
    BlockJacobi,
    Amg(Amg),
    Pmg(PMultigrid<'a, BinBcsr<f64>>),
    /// The direct solver needs no preconditioner.
    Direct,
}

/// The stiffness matrix's preconditioner, set up (stage `setup`): the multigrid
/// hierarchies are built on the filtered operator from the control-point positions
/// (rigid-body modes) and, for p-multigrid, the degree elevation to order 1.
pub fn setup_stage<'a>(
    problem: &Problem,
    prep: &'a Prepared,
    k: &'a BinBcsr<f64>,
) -> Result<(SolverSetup<'a>, SolverInfo), StaticError> {
    if problem.solver.method == SolverMethod::Cholesky {
        return Ok((SolverSetup::Direct, SolverInfo::single("cholesky")));
    }
    let cons = &prep.constraints;
    let params = &problem.solver.multigrid;
    let kind = problem.solver.preconditioner_for(prep.ho.order());
    let kind = if kind == PreconditionerKind::Pmg && prep.ho.order() == 1 {
        PreconditionerKind::Amg
    } else {
        kind
    };
    match kind {
        PreconditionerKind::BlockJacobi => {
            Ok((SolverSetup::BlockJacobi, SolverInfo::single("block-jacobi")))
        }
        PreconditionerKind::Amg => {
            let t = Instant::now();
            let abar = BlockCsr::from_binbcsr_filtered(k, &cons.fixed)?;
            let positions = prep.ho.node_positions();
            let copy_ms = t.elapsed().as_secs_f64() * 1e3;
            let amg = Amg::setup(abar, &cons.fixed, &positions, &params.amg)?;
            let mut stages = vec![("filtered_copy".to_string(), copy_ms)];
            stages.extend(amg.stats.setup_ms.iter().cloned());
            let info = SolverInfo {
                preconditioner: "amg".into(),
                levels: amg.num_levels(),
                operator_complexity: amg.stats.operator_complexity,
                grid_complexity: amg.stats.grid_complexity,
                hierarchy_bytes: amg.stats.hierarchy_bytes,
                level_dofs: amg.stats.dofs.clone(),
                setup_stages_ms: stages,
            };
            Ok((SolverSetup::Amg(amg), info))
        }
        PreconditionerKind::Pmg => {
            let t = Instant::now();
            let abar = BlockCsr::from_binbcsr_filtered(k, &cons.fixed)?;
            let prol = degree_elevation(&prep.ho)?;
            let nv = prol.ncols;
            let coarse_fixed = &cons.fixed[..3 * nv];
            let coarse_pos = &prep.ho.mesh().positions()[..nv];
            let copy_ms = t.elapsed().as_secs_f64() * 1e3;
            let pmg = PMultigrid::setup(k, cons, &abar, &prol, coarse_fixed, coarse_pos, params)?;
            drop(abar);
            let mut stages = vec![("filtered_copy".to_string(), copy_ms)];
            stages.extend(pmg.setup_ms.iter().cloned());
            let fine_blocks = k.pattern().block_nonzeros() as f64;
            let st = &pmg.amg.stats;
            let mut level_dofs = vec![3 * k.pattern().num_block_rows()];
            level_dofs.extend(st.dofs.iter().copied());
            let info = SolverInfo {
                preconditioner: "pmg".into(),
                levels: pmg.num_levels(),
                operator_complexity: 1.0 + st.blocks.iter().sum::<usize>() as f64 / fine_blocks,
                grid_complexity: level_dofs.iter().sum::<usize>() as f64 / level_dofs[0] as f64,
                hierarchy_bytes: st.hierarchy_bytes
                    + st.blocks[0] * 72
                    + pmg.p.bytes()
                    + pmg.r.bytes(),
                level_dofs,
                setup_stages_ms: stages,
            };
            Ok((SolverSetup::Pmg(pmg), info))
        }
    }
}

/// Stage 4: solve `K u = f` with the problem's method and the preconditioner of
/// [`setup_stage`]. The PCG runs where the matrix is; the direct solver runs on the CPU (a
/// device matrix is downloaded first and returned).
pub fn solve_stage(
    problem: &Problem,
    prep: &Prepared,
    k: Stiffness<'_>,
    prec: &SolverSetup<'_>,
) -> Result<(Vec<f64>, SolveReport, Option<BinBcsr<f64>>), StaticError> {
    let params = pcg_params(problem);
    let (f, cons) = (&prep.f, &prep.constraints);
    let mut u = Vec::new();
    let none = &mut |_: usize, _: f64| {};
    let (report, host) = match (prec, k) {
        (SolverSetup::Direct, Stiffness::Host(m)) => (cholesky_report(m, f, cons, &mut u)?, None),
        (SolverSetup::Direct, Stiffness::Device(gpu, m)) => {
            let host = m.download(gpu)?;
            let report = cholesky_report(&host, f, cons, &mut u)?;
            (report, Some(host))
        }
        (SolverSetup::BlockJacobi, Stiffness::Host(m)) => {
            (pcg(m, f, cons, &params, &mut u)?, None)
        }
        (SolverSetup::BlockJacobi, Stiffness::Device(gpu, m)) => {
            let sk = SolveKernels::new(gpu)?;
            (pcg_gpu(&sk, m, f, cons, &params, &mut u)?, None)
        }
        (SolverSetup::Amg(amg), Stiffness::Host(m)) => {
            (pcg_with(m, amg, f, cons, &params, &mut u, none)?, None)
        }
        (SolverSetup::Pmg(pmg), Stiffness::Host(m)) => {
            (pcg_with(m, pmg, f, cons, &params, &mut u, none)?, None)
        }
        (_, Stiffness::Device(..)) => {
            return Err(StaticError::Unsupported(
                "solve_stage runs multigrid preconditioners on host matrices; GPU runs set them up and upload them in solve_problem".into(),
            ))
        }
    };
    accept_solution(problem, prep, k, host.as_ref(), &u, &report)?;
    Ok((u, report, host))
}

/// The same acceptance for every method, preconditioner and device: a finite displacement
/// and a true relative residual of the returned solution within 100 times the tolerance (a
/// converged PCG on a singular or badly conditioned system can report a small recursive
/// residual while `K u = f` does not hold). `host` is a host copy of a device matrix, used
/// when there is one.
fn accept_solution(
    problem: &Problem,
    prep: &Prepared,
    k: Stiffness<'_>,
    host: Option<&BinBcsr<f64>>,
    u: &[f64],
    report: &SolveReport,
) -> Result<(), StaticError> {
    let (f, cons) = (&prep.f, &prep.constraints);
    check_finite("solve", "the displacement", u)?;
    let true_res = match (k, host) {
        (_, Some(h)) => relative_residual(h, f, cons, u),
        (Stiffness::Host(m), None) => relative_residual(m, f, cons, u),
        (Stiffness::Device(gpu, m), None) => device_relative_residual(gpu, m, f, cons, u)?,
    };
    let limit = (100.0 * problem.solver.tolerance).max(1e-10);
    if true_res.is_nan() || true_res > limit {
        return Err(StaticError::Solve(SolveError::InvalidInput {
            what: "solve",
            message: format!(
                "the {} reported convergence (relative residual {:.3e}) but the returned displacement has a true relative residual of {true_res:.3e} (> {limit:.1e}): the system is singular or too badly conditioned",
                match problem.solver.method {
                    SolverMethod::Pcg => "PCG",
                    SolverMethod::Cholesky => "direct solver",
                },
                report.final_residual
            ),
        }));
    }
    Ok(())
}
/// [`relative_residual`] with `K` on the device: `K u` and `K z` by the device SpMV.
fn device_relative_residual(
    gpu: &Gpu,
    m: &DeviceBinBcsr<f64>,
    f: &[f64],
    cons: &Constraints,
    u: &[f64],
) -> Result<f64, StaticError> {
    let sk = SolveKernels::new(gpu)?;
    let n = f.len();
    let apply = |x: &[f64]| -> Result<Vec<f64>, StaticError> {
        let xd = gpu.upload(x).map_err(SolveError::from)?;
        let mut yd = gpu.zeros::<f64>(n.max(1)).map_err(SolveError::from)?;
        m.spmv(&sk, &xd, &mut yd)?;
        Ok(gpu.download(&yd).map_err(SolveError::from)?)
    };
    let ku = apply(u)?;
    let kz = apply(&cons.start_vector())?;
    let norm = |y: &[f64]| -> f64 {
        (0..n)
            .filter(|&i| !cons.fixed[i])
            .map(|i| (f[i] - y[i]).powi(2))
            .sum::<f64>()
            .sqrt()
    };
    let (r, r0) = (norm(&ku), norm(&kz));
    Ok(if r0 == 0.0 { r } else { r / r0 })
}

fn pcg_params(problem: &Problem) -> PcgParams {
    PcgParams {
        tolerance: problem.solver.tolerance,
        max_iterations: problem.solver.max_iterations,
        ..Default::default()
    }
}

/// Stages `setup` and `solve` of a GPU run with a multigrid preconditioner: the hierarchy
/// is set up on the device ([`amg_gpu`], [`pmg_gpu`]; the matrix is not downloaded) and the PCG
/// runs on the device with the device cycle ([`tessera_solve::cuda::DeviceAmg`],
/// [`tessera_solve::cuda::DevicePmg`]) whose finest level is the device matrix itself. The
/// `setup` stage's sub-stages are in [`SolverInfo::setup_stages_ms`]. Returns the solution,
/// the report, the host copy of the matrix when one was made, and the solver info.
fn multigrid_gpu(
    problem: &Problem,
    prep: &Prepared,
    gpu: &Gpu,
    mat: &DeviceBinBcsr<f64>,
    st: &mut StageRunner<'_>,
) -> Result<(Vec<f64>, SolveReport, Option<BinBcsr<f64>>, SolverInfo), StaticError> {
    (st.progress)("setup");
    match effective_preconditioner(problem, prep) {
        PreconditionerKind::Amg => amg_gpu(problem, prep, gpu, mat, st),
        PreconditionerKind::Pmg => pmg_gpu(problem, prep, gpu, mat, st),
        _ => Err(StaticError::Unsupported(
            "multigrid_gpu needs a multigrid preconditioner".into(),
        )),
    }
}

/// The `setup` and `solve` stages of a GPU run with p-multigrid, the matrix never leaving
/// the device: [`DevicePmg::setup`] on the device matrix, its filtered copy made on the
/// device, and the degree elevation to order 1.
fn pmg_gpu(
    problem: &Problem,
    prep: &Prepared,
    gpu: &Gpu,
    mat: &DeviceBinBcsr<f64>,
    st: &mut StageRunner<'_>,
) -> Result<(Vec<f64>, SolveReport, Option<BinBcsr<f64>>, SolverInfo), StaticError> {
    let t0 = Instant::now();
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
    let fixed = &prep.constraints.fixed[..];
    let t = Instant::now();
    let prol = degree_elevation(&prep.ho)?;
    let nv = prol.ncols;
    let coarse_fixed = &fixed[..3 * nv];
    let coarse_pos = &prep.ho.mesh().positions()[..nv];
    let prol_ms = ms(t);
    let t = Instant::now();
    let sk = SolveKernels::new(gpu)?;
    let prim = gpu.primitives().map_err(SolveError::from)?;
    let abar = device_filtered_copy(&sk, &prim, mat, fixed)?;
    gpu.synchronize().map_err(SolveError::from)?;
    let dcopy_ms = ms(t);
    let pmg = DevicePmg::setup(
        &sk,
        mat as &dyn DeviceOperator,
        abar,
        &prol,
        fixed,
        coarse_fixed,
        coarse_pos,
        &problem.solver.multigrid,
    )?;
    drop(prol);
    let sa =
        pmg.amg.stats().cloned().ok_or_else(|| {
            StaticError::Unsupported("device AMG setup without statistics".into())
        })?;
    let fine_blocks = mat.pattern().block_nonzeros() as f64;
    let mut level_dofs = vec![3 * mat.pattern().num_block_rows()];
    level_dofs.extend(sa.dofs.iter().copied());
    let mut stages = vec![
        ("degree_elevation".to_string(), prol_ms),
        ("filtered_copy_device".to_string(), dcopy_ms),
    ];
    stages.extend(pmg.setup_ms.iter().cloned());
    let info = SolverInfo {
        preconditioner: "pmg".into(),
        levels: pmg.num_levels(),
        operator_complexity: 1.0 + sa.blocks.iter().sum::<usize>() as f64 / fine_blocks,
        grid_complexity: level_dofs.iter().sum::<usize>() as f64 / level_dofs[0] as f64,
        hierarchy_bytes: sa.hierarchy_bytes + sa.blocks[0] * 72 + pmg.transfer_bytes(),
        level_dofs,
        setup_stages_ms: stages,
    };
    st.list.push(("setup".to_string(), ms(t0)));
    let mut u = Vec::new();
    let report = st.run("solve", || {
        pcg_gpu_with(
            &sk,
            mat,
            &pmg,
            &prep.f,
            &prep.constraints,
            &pcg_params(problem),
            &mut u,
        )
    })?;
    accept_solution(
        problem,
        prep,
        Stiffness::Device(gpu, mat),
        None,
        &u,
        &report,
    )?;
    Ok((u, report, None, info))
}

/// The preconditioner that runs: the problem's choice, with p-multigrid at order 1 being AMG.
fn effective_preconditioner(problem: &Problem, prep: &Prepared) -> PreconditionerKind {
    let kind = problem.solver.preconditioner_for(prep.ho.order());
    if kind == PreconditionerKind::Pmg && prep.ho.order() == 1 {
        PreconditionerKind::Amg
    } else {
        kind
    }
}

/// The `setup` and `solve` stages of a GPU run with AMG, the matrix never leaving the
/// device: [`DeviceAmg::setup`] on its filtered copy made on the device (the host runs the
/// aggregation on downloaded block norms and the tentative prolongators).
fn amg_gpu(
    problem: &Problem,
    prep: &Prepared,
    gpu: &Gpu,
    mat: &DeviceBinBcsr<f64>,
    st: &mut StageRunner<'_>,
) -> Result<(Vec<f64>, SolveReport, Option<BinBcsr<f64>>, SolverInfo), StaticError> {
    let fixed = &prep.constraints.fixed[..];
    let params = &problem.solver.multigrid.amg;
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
    let t0 = Instant::now();
    let positions = prep.ho.node_positions();
    let sk = SolveKernels::new(gpu)?;
    let prim = gpu.primitives().map_err(SolveError::from)?;
    let a0 = device_filtered_copy(&sk, &prim, mat, fixed)?;
    gpu.synchronize().map_err(SolveError::from)?;
    let dcopy_ms = ms(t0);
    let amg = DeviceAmg::setup(
        &sk,
        a0,
        fixed,
        &positions,
        params,
        Some(mat as &dyn DeviceOperator),
    )?;
    let stats = amg
        .stats()
        .cloned()
        .ok_or_else(|| StaticError::Unsupported("device AMG setup without statistics".into()))?;
    let mut stages = vec![("filtered_copy_device".to_string(), dcopy_ms)];
    stages.extend(stats.setup_ms.iter().cloned());
    let info = SolverInfo {
        preconditioner: "amg".into(),
        levels: amg.num_levels(),
        operator_complexity: stats.operator_complexity,
        grid_complexity: stats.grid_complexity,
        hierarchy_bytes: stats.hierarchy_bytes,
        level_dofs: stats.dofs.clone(),
        setup_stages_ms: stages,
    };
    st.list.push(("setup".to_string(), ms(t0)));
    let mut u = Vec::new();
    let report = st.run("solve", || {
        pcg_gpu_with(
            &sk,
            mat,
            &amg,
            &prep.f,
            &prep.constraints,
            &pcg_params(problem),
            &mut u,
        )
    })?;
    accept_solution(
        problem,
        prep,
        Stiffness::Device(gpu, mat),
        None,
        &u,
        &report,
    )?;
    Ok((u, report, None, info))
}

/// Run the whole static simulation on the CPU or a GPU (see [`StaticOptions::device`]).
/// `progress` is called with each stage's name as it starts.
///
/// On a GPU, the context is created and the kernels are loaded in a background thread while
/// the mesh file is read; assembly (§4.4) and the PCG run on the device, only the load vector
/// goes up and the displacement comes back. A multigrid hierarchy is set up with its sparse
/// products on the device (see [`multigrid_gpu`]); its cycle runs on the device. The direct solver (`method = "cholesky"`) runs
/// on the CPU with the downloaded matrix.
pub fn solve_problem(
    problem: &Problem,
    opts: &StaticOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<StaticSolution, StaticError> {
    if let Some(dd) = &opts.domains {
        return crate::domain_solve::solve_domains(problem, opts, dd, progress);
    }
    problem.material.validate()?;
    let mut st = StageRunner {
        list: Vec::new(),
        progress,
    };
    let loaded = st.run("load", || load_stage(problem, opts))?;
    // a CPU run (no device found under `auto`) lists no GPU stage
    if let (Some(t), Some(_)) = (loaded.gpu_init_ms, &loaded.gpu) {
        st.list.push(("gpu_init".into(), t));
    }
    let mut mesh = loaded.mesh;
    let origin = mesh.source.take();
    // a file's size is known once it is read: refuse an order it cannot afford before the
    // order-p mesh is built
    if let Some((file, _)) = &origin {
        let c = crate::estimate::file_counts(mesh.mesh.num_vertices(), mesh.mesh.num_cells());
        crate::estimate::check_file_problem(file, &c, problem)?;
    }
    let locate = |e: StaticError| locate_cell(origin.as_ref(), e);
    let prep = st
        .run("preprocess", || preprocess(problem, mesh))
        .map_err(locate)?;
    let kind = problem.solver.preconditioner_for(prep.ho.order());
    let (u, report, matrix, device_matrix, assembly, info) = match loaded.gpu {
        Some(gpu)
            if problem.solver.method == SolverMethod::Cholesky
                || kind == PreconditionerKind::BlockJacobi =>
        {
            let (mat, stats) =
                assemble_gpu(problem, &prep.ho, &gpu, opts, &mut st).map_err(locate)?;
            check_device_matrix(&gpu, &mat)?;
            let (prec, info) = if problem.solver.method == SolverMethod::Cholesky {
                (SolverSetup::Direct, SolverInfo::single("cholesky"))
            } else {
                (SolverSetup::BlockJacobi, SolverInfo::single("block-jacobi"))
            };
            let (u, report, host) = st.run("solve", || {
                solve_stage(problem, &prep, Stiffness::Device(&gpu, &mat), &prec)
            })?;
            (u, report, host, Some((gpu, mat)), stats, info)
        }
        Some(gpu) => {
            let (mat, stats) =
                assemble_gpu(problem, &prep.ho, &gpu, opts, &mut st).map_err(locate)?;
            check_device_matrix(&gpu, &mat)?;
            let (u, report, host, info) = multigrid_gpu(problem, &prep, &gpu, &mat, &mut st)?;
            (u, report, host, Some((gpu, mat)), stats, info)
        }
        None => {
            let asm = st
                .run("assemble", || assemble_cpu(problem, &prep.ho, opts))
                .map_err(locate)?;
            let m = asm.matrix;
            if let Some((node, value)) = first_non_finite_row(&m) {
                return Err(StaticError::Mesh(MeshError::NonFiniteValue {
                    stage: "assembly",
                    what: "the stiffness matrix".into(),
                    entity: "node",
                    index: node,
                    value,
                }));
            }
            let (prec, info) = st.run("setup", || setup_stage(problem, &prep, &m))?;
            let (u, report, _) = st.run("solve", || {
                solve_stage(problem, &prep, Stiffness::Host(&m), &prec)
            })?;
            drop(prec);
            (u, report, Some(m), None, asm.stats, info)
        }
    };
    let device = device_matrix
        .as_ref()
        .map_or("cpu".to_string(), |(g, _)| format!("cuda:{}", g.ordinal()));
    let nonzeros = assembly.block_nonzeros * 9;
    Ok(StaticSolution {
        ho: prep.ho,
        u,
        f: prep.f,
        constraints: prep.constraints,
        report,
        assembly,
        matrix,
        device_matrix,
        device,
        stages_ms: st.list,
        nonzeros,
        solver: info,
        domains: None,
    })
}

/// A non-finite value on the diagonal of a device matrix (a NaN anywhere in an element
/// matrix reaches its diagonal blocks), named by its node.
fn check_device_matrix(gpu: &Gpu, mat: &DeviceBinBcsr<f64>) -> Result<(), StaticError> {
    let diag = gpu
        .download(mat.diagonal())
        .map_err(|e| StaticError::Solve(e.into()))?;
    match diag.iter().position(|x| !x.is_finite()) {
        None => Ok(()),
        Some(i) => Err(StaticError::Mesh(MeshError::NonFiniteValue {
            stage: "assembly",
            what: "the stiffness matrix (diagonal block)".into(),
            entity: "node",
            index: i / 9,
            value: diag[i],
        })),
    }
}

/// A degenerate cell found after reading (by the element geometry) named by its place in
/// the mesh file: `FILE:line N: degenerate tetrahedron ...` instead of a renumbered index.
fn locate_cell(
    origin: Option<&(std::path::PathBuf, tessera_mesh::io::CellLocations)>,
    e: StaticError,
) -> StaticError {
    let (path, locs) = match origin {
        Some(o) => o,
        None => return e,
    };
    match e {
        StaticError::Fem(FemError::DegenerateCell { cell, volume }) => match locs.describe(cell) {
            Some(location) => StaticError::Mesh(MeshError::Parse {
                path: path.clone(),
                location,
                msg: format!(
                    "degenerate tetrahedron: volume {volume:e} is zero relative to its size"
                ),
            }),
            None => StaticError::Fem(FemError::DegenerateCell { cell, volume }),
        },
        other => other,
    }
}

/// The direct solve with its report (one "iteration", the true relative residual).
fn cholesky_report(
    k: &BinBcsr<f64>,
    f: &[f64],
    cons: &Constraints,
    u: &mut Vec<f64>,
) -> Result<SolveReport, StaticError> {
    *u = tessera_solve::cholesky::solve_constrained(k, f, cons)?;
    let res = relative_residual(k, f, cons, u);
    Ok(SolveReport {
        iterations: 1,
        final_residual: res,
        history: vec![1.0, res],
    })
}
