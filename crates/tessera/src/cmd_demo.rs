//! `tessera demo`: the main job. For now (issue 2) it runs the modeling stages of the
//! dissertation's cycle on the polyhedral mesh of Chapter 3: generate a bracket, extract
//! its boundary (§3.4.2), jitter the inner vertices and smooth them again (Laplacian
//! smoothing of inner vertices, §3.4.2), and write `.vtu` files for ParaView. Later
//! issues append stages (subdivision, FEM) to the same [`DemoSummary`].

use crate::cmd_mesh::{
    boundary_on, cell_type_counts, check_device, smooth_on, subdivide_on, write_boundary_on,
    CellTypeCounts,
};
use crate::util::spinner;
use anyhow::Context;
use clap::Args;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tessera_core::DeviceChoice;
use tessera_mesh::generate::{bracket, BRACKET_RESOLUTION};
use tessera_mesh::io::{write_vtu, DataArray};
use tessera_mesh::PolyMesh;

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Where to compute: auto, cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto", value_name = "DEVICE")]
    device: DeviceChoice,
    /// Print the summary as one JSON object.
    #[arg(long)]
    json: bool,
    /// Bracket resolution (voxels along its longest side; 24 gives about 10k tetrahedra).
    #[arg(long, default_value_t = 24)]
    resolution: usize,
    /// Laplacian smoothing iterations.
    #[arg(long, default_value_t = 10)]
    iterations: usize,
    /// Output directory for the .vtu files.
    #[arg(long, default_value = "./tessera-demo")]
    out: PathBuf,
}

/// Counts of the demo mesh.
#[derive(Serialize, Debug, Clone)]
pub struct MeshSummary {
    pub vertices: usize,
    pub edges: usize,
    pub faces: usize,
    pub cells: usize,
    pub boundary_faces: usize,
    pub boundary_vertices: usize,
    pub euler_characteristic: i64,
    pub cell_types: CellTypeCounts,
    pub topology_bytes: usize,
}

/// One timed stage.
#[derive(Serialize, Debug, Clone)]
pub struct Stage {
    pub name: String,
    pub ms: f64,
    /// What the stage produced, in one line.
    pub detail: String,
}

/// Everything `tessera demo` did (serialized by `--json`).
#[derive(Serialize, Debug, Clone)]
pub struct DemoSummary {
    pub device: String,
    pub resolution: usize,
    pub out_dir: String,
    pub mesh: MeshSummary,
    pub stages: Vec<Stage>,
    pub files: Vec<String>,
    pub total_ms: f64,
    /// The static solve (issue 6): DOFs, PCG iterations, final relative residual, largest
    /// displacement (mm) and von Mises stress (MPa), its stage times, and its full summary.
    pub dofs: u64,
    pub iterations: u64,
    /// The PCG's preconditioner (the default for p = 2: p-multigrid).
    pub preconditioner: String,
    pub final_residual: f64,
    pub max_displacement: f64,
    pub max_von_mises: f64,
    pub stages_ms: serde_json::Value,
    pub static_solve: serde_json::Value,
}

/// Runs stages in order, timing each and keeping a line about it.
struct Stages {
    list: Vec<Stage>,
    quiet: bool,
}

impl Stages {
    fn run<T>(
        &mut self,
        name: &str,
        f: impl FnOnce() -> anyhow::Result<(T, String)>,
    ) -> anyhow::Result<T> {
        let pb = if self.quiet {
            None
        } else {
            Some(spinner(name))
        };
        let t = Instant::now();
        let r = f();
        let ms = t.elapsed().as_secs_f64() * 1e3;
        if let Some(pb) = pb {
            pb.finish_and_clear();
        }
        let (v, detail) = r?;
        self.list.push(Stage {
            name: name.to_string(),
            ms,
            detail,
        });
        Ok(v)
    }
}

pub fn run(a: DemoArgs) -> anyhow::Result<()> {
    let device = check_device(a.device)?;
    if !BRACKET_RESOLUTION.contains(&a.resolution) {
        anyhow::bail!(
            "--resolution {} is outside {}..={}",
            a.resolution,
            BRACKET_RESOLUTION.start(),
            BRACKET_RESOLUTION.end()
        );
    }
    std::fs::create_dir_all(&a.out)
        .with_context(|| format!("{}: cannot create the output directory", a.out.display()))?;
    let total = Instant::now();
    let mut st = Stages {
        list: Vec::new(),
        quiet: a.json,
    };
    let mut files = Vec::new();
    let file = |name: &str| -> PathBuf { a.out.join(name) };

    let mut mesh: PolyMesh = st.run("generate bracket", || {
        let m = bracket(a.resolution)?;
        let d = format!(
            "{} tetrahedra, {} vertices",
            m.num_cells(),
            m.num_vertices()
        );
        Ok((m, d))
    })?;
    let b = st.run("extract boundary", || {
        let b = boundary_on(&device, &mesh)?;
        let d = format!(
            "{} faces, {} edges, {} vertices",
            b.faces.len(),
            b.edges.len(),
            b.vertices.len()
        );
        Ok((b, d))
    })?;
    let p = file("bracket.vtu");
    st.run("write bracket.vtu", || {
        let mut on_boundary = vec![0.0; mesh.num_vertices()];
        for &v in &b.vertices {
            on_boundary[v as usize] = 1.0;
        }
        write_vtu(
            &p,
            &mesh,
            &[DataArray::point_scalars("boundary_vertex", on_boundary)],
        )?;
        Ok(((), p.display().to_string()))
    })?;
    files.push(p.display().to_string());
    let p = file("bracket-boundary.vtu");
    st.run("write bracket-boundary.vtu", || {
        let (np, nv) = write_boundary_on(&device, &mesh, &p, Default::default())?;
        Ok(((), format!("{np} polygons, {nv} vertices")))
    })?;
    files.push(p.display().to_string());
    // A voxel mesh is already Laplacian-smooth inside (every inner vertex sits at the mean
    // of its neighbours), so the inner vertices are first jittered deterministically by up
    // to 0.3 voxel sizes per axis to give the smoothing something to do.
    let h = tessera_mesh::generate::bracket_geometry(a.resolution).voxel_size;
    st.run("jitter inner vertices", || {
        let mut inner = vec![true; mesh.num_vertices()];
        for &v in &b.vertices {
            inner[v as usize] = false;
        }
        let mut n = 0;
        for (i, p) in mesh.positions_mut().iter_mut().enumerate() {
            if inner[i] {
                for (d, x) in p.iter_mut().enumerate() {
                    *x += 0.3 * h * jitter(i as u64 * 3 + d as u64);
                }
                n += 1;
            }
        }
        Ok((
            (),
            format!(
                "{n} inner vertices moved by up to {:.3} mm per axis",
                0.3 * h
            ),
        ))
    })?;
    let before = mesh.positions().to_vec();
    st.run(&format!("smooth ({} iterations)", a.iterations), || {
        let params = tessera_mesh::smooth::SmoothParams {
            iterations: a.iterations,
            ..Default::default()
        };
        let r = smooth_on(&device, &mut mesh, &params)?;
        Ok((
            (),
            format!(
                "safe smoothing: largest inner-vertex displacement {:.3} mm, {} moves rejected, inverted cells {} -> {}",
                r.max_displacement, r.rejected_moves, r.inverted_before, r.inverted_after
            ),
        ))
    })?;
    let p = file("bracket-smoothed.vtu");
    st.run("write bracket-smoothed.vtu", || {
        let disp: Vec<[f64; 3]> = before
            .iter()
            .zip(mesh.positions())
            .map(|(p, q)| [q[0] - p[0], q[1] - p[1], q[2] - p[2]])
            .collect();
        write_vtu(
            &p,
            &mesh,
            &[DataArray::point_vectors("smoothing_displacement", &disp)],
        )?;
        Ok(((), p.display().to_string()))
    })?;
    files.push(p.display().to_string());
    // Volumetric Catmull-Clark (dissertation §3.4.3): one level turns every tetrahedron
    // into four hexahedra.
    let sub = st.run("Catmull-Clark subdivision (1 level)", || {
        let (m, _) = subdivide_on(&device, &mesh, 1)?;
        let d = format!("{} hexahedra, {} vertices", m.num_cells(), m.num_vertices());
        Ok((m, d))
    })?;
    let p = file("bracket-subdivided.vtu");
    st.run("write bracket-subdivided.vtu", || {
        write_vtu(&p, &sub, &[])?;
        Ok(((), p.display().to_string()))
    })?;
    files.push(p.display().to_string());
    drop(sub);
    // The static simulation to convergence (dissertation §4.1; issue 6): the bracket at p = 2,
    // bolt holes fixed, a downward traction on the rib's load hole; PCG on Bin-BCSR* with the
    // default preconditioner (p-multigrid).
    let fem = st.run("static solve (p = 2)", || {
        let problem = demo_problem(a.resolution, 2)?;
        let s = crate::cmd_fem::cmd_fem_solve::run_problem(
            &problem,
            if device.is_cuda() {
                a.device
            } else {
                DeviceChoice::Cpu
            },
            device.gpu().cloned(),
            tessera_core::Par::auto(),
            &a.out,
            true,
        )?;
        let d = format!(
            "{} dofs, {} PCG iterations ({}), max |u| {:.4e} mm, max von Mises {:.4e} MPa",
            s["dofs"],
            s["iterations"],
            s["preconditioner"].as_str().unwrap_or("?"),
            s["max_displacement"].as_f64().unwrap_or(f64::NAN),
            s["max_von_mises"].as_f64().unwrap_or(f64::NAN)
        );
        Ok((s, d))
    })?;
    files.push(fem["vtu"].as_str().unwrap_or_default().to_string());

    let summary = DemoSummary {
        device: device.describe(),
        resolution: a.resolution,
        out_dir: a.out.display().to_string(),
        mesh: MeshSummary {
            vertices: mesh.num_vertices(),
            edges: mesh.num_edges(),
            faces: mesh.num_faces(),
            cells: mesh.num_cells(),
            boundary_faces: b.faces.len(),
            boundary_vertices: b.vertices.len(),
            euler_characteristic: mesh.euler_characteristic(),
            cell_types: cell_type_counts(&mesh),
            topology_bytes: mesh.topology_bytes(),
        },
        stages: st.list,
        files,
        total_ms: total.elapsed().as_secs_f64() * 1e3,
        dofs: fem["dofs"].as_u64().unwrap_or(0),
        iterations: fem["iterations"].as_u64().unwrap_or(0),
        preconditioner: fem["preconditioner"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        final_residual: fem["final_residual"].as_f64().unwrap_or(f64::NAN),
        max_displacement: fem["max_displacement"].as_f64().unwrap_or(f64::NAN),
        max_von_mises: fem["max_von_mises"].as_f64().unwrap_or(f64::NAN),
        stages_ms: fem["stages_ms"].clone(),
        static_solve: fem,
    };
    if a.json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        print_summary(&summary, &a.out);
    }
    Ok(())
}

/// The demo's static problem on the bracket at `resolution`: Ti-6Al-4V, p = 2, the four bolt
/// holes fixed (cylinder selectors, one voxel of tolerance for the staircase walls), and a
/// 20 MPa downward traction on the load hole's wall in the rib.
pub(crate) fn demo_problem(
    resolution: usize,
    order: usize,
) -> anyhow::Result<tessera_fem::problem::Problem> {
    let g = tessera_mesh::generate::bracket_geometry(resolution);
    let h = g.voxel_size;
    let mut t = format!(
        "title = \"bracket-static\"\norder = {order}\nunits = \"mm\"\n[mesh]\ngenerate = {{ bracket = {resolution} }}\n[material]\npreset = \"Ti-6Al-4V\"\n"
    );
    for c in g.bolt_hole_centres {
        t += &format!(
            "[[fixed]]\nselector = {{ type = \"cylinder\", point = [{:?}, {:?}, 0.0], axis = [0, 0, 1], radius = {:?}, tolerance = {h:?} }}\n",
            c[0], c[1], g.bolt_hole_radius
        );
    }
    let c = g.load_hole_centre;
    t += &format!(
        "[[loads]]\ntype = \"traction\"\nselector = {{ type = \"cylinder\", point = [{:?}, {:?}, {:?}], axis = [0, 1, 0], radius = {:?}, tolerance = {h:?} }}\ntraction = [0.0, 0.0, -20.0]\n",
        c[0], c[1], c[2], g.load_hole_radius
    );
    Ok(tessera_fem::problem::Problem::parse(
        &t,
        "<demo problem>",
        Path::new("."),
    )?)
}

/// A deterministic value in [-1, 1) from an integer (splitmix64).
fn jitter(i: u64) -> f64 {
    let mut z = i.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 52) as f64 - 1.0
}

fn print_summary(s: &DemoSummary, out: &Path) {
    let m = &s.mesh;
    println!(
        "tessera demo: bracket at resolution {} on {}",
        s.resolution, s.device
    );
    println!(
        "  mesh: {} vertices, {} edges, {} faces, {} tetrahedra; Euler characteristic {}",
        m.vertices, m.edges, m.faces, m.cells, m.euler_characteristic
    );
    println!(
        "  boundary: {} faces, {} vertices; topology {} bytes",
        m.boundary_faces, m.boundary_vertices, m.topology_bytes
    );
    for st in &s.stages {
        println!("  {:<32} {:>10.2} ms  {}", st.name, st.ms, st.detail);
    }
    println!("  {:<32} {:>10.2} ms", "total", s.total_ms);
    println!("  open the .vtu files in {} with ParaView", out.display());
}
