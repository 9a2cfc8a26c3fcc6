//! `tessera mesh ...`: volumetric mesh files and operations on the polyhedral mesh of
//! dissertation Chapter 3 (§3.4: boundary operators in TCSR; §3.4.2: boundary extraction
//! and Laplacian smoothing).

use crate::device::Backend;
use crate::util::spinner;
use anyhow::bail;
use clap::{Args, Subcommand, ValueEnum};
use serde::Serialize;
use std::path::{Path, PathBuf};
use tessera_core::DeviceChoice;
use tessera_mesh::boundary::extract_boundary;
use tessera_mesh::boundary::Boundary;
use tessera_mesh::cuda::DeviceMesh;
use tessera_mesh::generate::{box_mesh, bracket, BoxKind, BRACKET_RESOLUTION};
use tessera_mesh::io::{
    read_mesh, write_mesh, write_obj, write_vtu, write_vtu_polygons, DataArray, MeshFile,
};
use tessera_mesh::simplex::SimplexMesh;
use tessera_mesh::smooth::laplacian_smooth;
use tessera_mesh::subdivide::subdivide_summary;
use tessera_mesh::{CellType, PolyMesh};

#[derive(Args, Debug)]
pub struct MeshArgs {
    #[command(subcommand)]
    cmd: MeshCmd,
}

#[derive(Subcommand, Debug)]
enum MeshCmd {
    /// Counts, boundary, cell types and storage of a mesh file (`--json` for one JSON object).
    Info(InfoArgs),
    /// Convert a mesh between formats, chosen by extension (.msh .mesh .node/.ele .ovm -> .vtu .msh .mesh .node .ovm; .gz compresses).
    Convert(ConvertArgs),
    /// Extract the boundary surface (dissertation §3.4.2) and write it as .obj or .vtu.
    Boundary(BoundaryArgs),
    /// Laplacian smoothing of the inner vertices (dissertation §3.4.2).
    Smooth(SmoothArgs),
    /// Generate a procedural mesh (a mechanical bracket or a box).
    Generate(GenerateArgs),
    /// Volumetric Catmull-Clark subdivision (dissertation §3.4.3), any number of levels.
    Subdivide(SubdivideArgs),
}

#[derive(Args, Debug)]
struct SubdivideArgs {
    /// Input mesh file.
    input: PathBuf,
    /// Number of subdivision levels.
    #[arg(short, long, default_value_t = 1)]
    levels: usize,
    /// Output mesh file (.vtu, .ovm, .msh for hexahedral results, ...).
    #[arg(short, long)]
    output: PathBuf,
    /// Print the per-level counts and times as one JSON object.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    device: DeviceArg,
}

/// `--device auto|cpu|cuda[:N]`.
#[derive(Args, Debug, Clone)]
pub struct DeviceArg {
    /// Where to compute: auto (CUDA when usable, else the CPU), cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto", value_name = "DEVICE")]
    pub device: DeviceChoice,
}

impl DeviceArg {
    /// Resolve the backend and say on stderr which device runs.
    pub fn resolve(&self) -> anyhow::Result<Backend> {
        check_device(self.device)
    }
}

/// Resolve `--device` for the mesh commands: `auto` picks CUDA when usable, else the CPU;
/// an explicit CUDA request that cannot be served fails with one line. A chosen GPU is
/// named on stderr.
pub fn check_device(d: DeviceChoice) -> anyhow::Result<Backend> {
    let b = match crate::device::resolve(d) {
        Ok(b) => b,
        Err(e) => bail!("no CUDA device available: {e}"),
    };
    if b.is_cuda() {
        // the CPU is the default and stays silent, so that error output stays one line
        eprintln!("device: {}", b.describe());
    }
    Ok(b)
}

/// Boundary extraction on the chosen backend (dissertation §3.4.2); the GPU result equals
/// the CPU reference exactly (conformance test `boundary_matches_reference`).
pub fn boundary_on(b: &Backend, m: &PolyMesh) -> anyhow::Result<Boundary> {
    match b.gpu() {
        Some(g) => {
            let mut dm = DeviceMesh::upload(g, m)?;
            let db = dm.boundary()?;
            Ok(db.download(g)?)
        }
        None => Ok(extract_boundary(m)),
    }
}

/// Laplacian smoothing on the chosen backend.
pub fn smooth_on(b: &Backend, m: &mut PolyMesh, iterations: usize) -> anyhow::Result<()> {
    match b.gpu() {
        Some(g) => {
            let mut dm = DeviceMesh::upload(g, m)?;
            dm.laplacian_smooth(iterations)?;
            let p = dm.download_positions()?;
            *m.positions_mut() = p;
        }
        None => laplacian_smooth(m, iterations),
    }
    Ok(())
}

#[derive(Args, Debug)]
struct InfoArgs {
    /// Mesh file (.msh, .mesh, .node/.ele, .ovm; optionally .gz).
    file: PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    device: DeviceArg,
}

#[derive(Args, Debug)]
struct ConvertArgs {
    /// Input mesh file.
    input: PathBuf,
    /// Output file; its extension picks the format (.vtu, .msh, .mesh, .node, .ovm, + .gz).
    output: PathBuf,
    #[command(flatten)]
    device: DeviceArg,
}

#[derive(Args, Debug)]
struct BoundaryArgs {
    /// Input mesh file.
    input: PathBuf,
    /// Output surface: .obj or .vtu (optionally .gz).
    #[arg(short, long)]
    output: PathBuf,
    #[command(flatten)]
    device: DeviceArg,
}

#[derive(Args, Debug)]
struct SmoothArgs {
    /// Input mesh file.
    input: PathBuf,
    /// Number of Jacobi smoothing iterations.
    #[arg(short = 'k', long, default_value_t = 10)]
    iterations: usize,
    /// Output mesh file (a .vtu also gets the smoothing displacement as point data).
    #[arg(short, long)]
    output: PathBuf,
    #[command(flatten)]
    device: DeviceArg,
}

#[derive(Args, Debug)]
struct GenerateArgs {
    #[command(subcommand)]
    what: GenerateCmd,
}

#[derive(Subcommand, Debug)]
enum GenerateCmd {
    /// A mechanical bracket (plate with bolt holes and a rib with a load hole), voxelized
    /// and split conformingly into tetrahedra (about 0.75 * N^3 tets).
    Bracket {
        /// Voxels along the longest side (12..=1000; 24 gives about 10k tets, 110 about 1M).
        #[arg(short, long, default_value_t = 24)]
        resolution: usize,
        /// Output mesh file.
        #[arg(short, long)]
        output: PathBuf,
        #[command(flatten)]
        device: DeviceArg,
    },
    /// A box of NX x NY x NZ voxels as tetrahedra, hexahedra or a mix of all four types.
    Box {
        /// Cell kind.
        #[arg(long, value_enum, default_value_t = KindArg::Tet)]
        kind: KindArg,
        /// Voxels per axis.
        #[arg(long, num_args = 3, value_names = ["NX", "NY", "NZ"], default_values_t = [4, 4, 4])]
        n: Vec<usize>,
        /// Box size per axis.
        #[arg(long, num_args = 3, value_names = ["EX", "EY", "EZ"], default_values_t = [1.0, 1.0, 1.0])]
        extent: Vec<f64>,
        /// Output mesh file.
        #[arg(short, long)]
        output: PathBuf,
        #[command(flatten)]
        device: DeviceArg,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum KindArg {
    Tet,
    Hex,
    Mixed,
}

pub fn run(a: MeshArgs) -> anyhow::Result<()> {
    match a.cmd {
        MeshCmd::Info(a) => info(a),
        MeshCmd::Convert(a) => convert(a),
        MeshCmd::Boundary(a) => boundary(a),
        MeshCmd::Smooth(a) => smooth(a),
        MeshCmd::Generate(a) => generate(a),
        MeshCmd::Subdivide(a) => subdivide(a),
    }
}

fn subdivide(a: SubdivideArgs) -> anyhow::Result<()> {
    let dev = a.device.resolve()?;
    let f = load(&a.input)?;
    if a.levels == 0 {
        bail!("--levels must be at least 1");
    }
    let pb = spinner(&format!("Catmull-Clark subdivision, {} level(s)", a.levels));
    let r = subdivide_on(&dev, &f.mesh, a.levels);
    pb.finish_and_clear();
    let (m, summary) = r?;
    save(&m, &a.output)?;
    if a.json {
        println!("{}", serde_json::to_string(&summary)?);
        return Ok(());
    }
    println!(
        "{}: {} vertices, {} edges, {} faces, {} cells after {} level(s)",
        a.output.display(),
        m.num_vertices(),
        m.num_edges(),
        m.num_faces(),
        m.num_cells(),
        a.levels
    );
    for l in &summary.levels {
        println!(
            "  level {}: {} cells, precompute {:.1} ms, subdivision {:.1} ms",
            l.level,
            l.counts.cells,
            l.precompute_seconds * 1e3,
            l.subdivide_seconds * 1e3
        );
    }
    Ok(())
}

/// Subdivision on the chosen backend. The CPU reference (`tessera_mesh::subdivide`) runs
/// when no GPU path applies.
pub fn subdivide_on(
    dev: &Backend,
    m: &PolyMesh,
    levels: usize,
) -> anyhow::Result<(PolyMesh, tessera_mesh::subdivide::SubdivisionSummary)> {
    let Some(gpu) = dev.gpu() else {
        return Ok(subdivide_summary(m, levels)?);
    };
    // GPU path (topology equal to the CPU reference, positions within 1e-12 of the extent:
    // conformance test `catmull_clark_matches_reference`)
    use tessera_mesh::cuda::subdivide::{catmull_clark_gpu_with, precompute};
    use tessera_mesh::subdivide::{LevelSummary, SubdivisionCounts, SubdivisionSummary};
    let mut summary = SubdivisionSummary {
        input: SubdivisionCounts::of(m),
        levels: Vec::with_capacity(levels),
    };
    let mut cur = DeviceMesh::upload(gpu, m)?;
    for level in 1..=levels {
        let t0 = std::time::Instant::now();
        let next = {
            let rel = precompute(&cur)?;
            gpu.synchronize()?;
            let t1 = std::time::Instant::now();
            let next = catmull_clark_gpu_with(&cur, &rel)?;
            gpu.synchronize()?;
            let t2 = std::time::Instant::now();
            summary.levels.push(LevelSummary {
                level,
                counts: SubdivisionCounts {
                    vertices: next.num_vertices(),
                    edges: next.num_edges(),
                    faces: next.num_faces(),
                    cells: next.num_cells(),
                },
                precompute_seconds: (t1 - t0).as_secs_f64(),
                subdivide_seconds: (t2 - t1).as_secs_f64(),
            });
            next
        };
        cur = next;
    }
    Ok((cur.download()?, summary))
}

/// Read a mesh with a spinner; errors name the file (and line or byte offset).
pub fn load(path: &Path) -> anyhow::Result<MeshFile> {
    let pb = spinner(&format!("reading {}", path.display()));
    let r = read_mesh(path);
    pb.finish_and_clear();
    Ok(r?)
}

/// Write a mesh with a spinner.
pub fn save(mesh: &PolyMesh, path: &Path) -> anyhow::Result<()> {
    let pb = spinner(&format!("writing {}", path.display()));
    let r = write_mesh(mesh, path);
    pb.finish_and_clear();
    Ok(r?)
}

/// Cell counts by type (classified by their faces, as `CellType::classify`).
#[derive(Serialize, Debug, Default, Clone, PartialEq, Eq)]
pub struct CellTypeCounts {
    pub tetrahedron: usize,
    pub hexahedron: usize,
    pub prism: usize,
    pub pyramid: usize,
    pub polyhedron: usize,
}

/// A physical group in `mesh info`.
#[derive(Serialize, Debug, Clone)]
pub struct GroupInfo {
    pub dim: u8,
    pub tag: i32,
    pub name: String,
    pub entities: usize,
}

/// The `mesh info --json` object (the interface other tools rely on, issue 2).
#[derive(Serialize, Debug, Clone)]
pub struct MeshInfo {
    pub file: String,
    pub vertices: usize,
    pub edges: usize,
    pub faces: usize,
    pub cells: usize,
    pub boundary_faces: usize,
    pub boundary_edges: usize,
    pub boundary_vertices: usize,
    /// V - E + F - C
    pub euler_characteristic: i64,
    pub manifold: bool,
    pub cell_types: CellTypeCounts,
    /// Bytes of the always-stored arrays (items 1-6 of §3.4; caches excluded).
    pub topology_bytes: usize,
    /// Bytes of the compact simplex-mesh storage (`cellVertices`, dissertation §3.4.4) for
    /// simplicial input; null otherwise.
    pub simplex_topology_bytes: Option<usize>,
    pub geometry_bytes: usize,
    pub groups: Vec<GroupInfo>,
}

pub fn cell_type_counts(m: &PolyMesh) -> CellTypeCounts {
    let cf = m.cell_faces();
    let fe = m.face_edges();
    let mut t = CellTypeCounts::default();
    let mut sizes = Vec::with_capacity(8);
    for c in 0..m.num_cells() {
        sizes.clear();
        sizes.extend(
            cf.row(c)
                .iter()
                .map(|&v| fe.row_len(tessera_sparse::tcsr::col(v) as usize)),
        );
        match CellType::classify(&sizes) {
            CellType::Tetrahedron => t.tetrahedron += 1,
            CellType::Hexahedron => t.hexahedron += 1,
            CellType::Prism => t.prism += 1,
            CellType::Pyramid => t.pyramid += 1,
            CellType::Polyhedron => t.polyhedron += 1,
        }
    }
    t
}

/// The `mesh info` record of a mesh file, with the boundary computed on any backend.
pub fn mesh_info_with(file: &str, f: &MeshFile, b: Boundary) -> MeshInfo {
    let m = &f.mesh;
    let ct = cell_type_counts(m);
    let simplicial = m.num_cells() > 0 && ct.tetrahedron == m.num_cells();
    let simplex_topology_bytes = if simplicial {
        SimplexMesh::from_poly(m).ok().map(|s| s.topology_bytes())
    } else {
        None
    };
    MeshInfo {
        file: file.to_string(),
        vertices: m.num_vertices(),
        edges: m.num_edges(),
        faces: m.num_faces(),
        cells: m.num_cells(),
        boundary_faces: b.faces.len(),
        boundary_edges: b.edges.len(),
        boundary_vertices: b.vertices.len(),
        euler_characteristic: m.euler_characteristic(),
        manifold: b.manifold,
        cell_types: ct,
        topology_bytes: m.topology_bytes(),
        simplex_topology_bytes,
        geometry_bytes: m.geometry_bytes(),
        groups: f
            .groups
            .iter()
            .map(|g| GroupInfo {
                dim: g.dim,
                tag: g.tag,
                name: g.name.clone(),
                entities: g.entities.len(),
            })
            .collect(),
    }
}

fn info(a: InfoArgs) -> anyhow::Result<()> {
    let dev = a.device.resolve()?;
    let f = load(&a.file)?;
    let pb = spinner("extracting the boundary");
    let b = boundary_on(&dev, &f.mesh);
    pb.finish_and_clear();
    let i = mesh_info_with(&a.file.display().to_string(), &f, b?);
    if a.json {
        println!("{}", serde_json::to_string(&i)?);
        return Ok(());
    }
    println!("{}", i.file);
    println!("  vertices   {:>12}", i.vertices);
    println!("  edges      {:>12}", i.edges);
    println!("  faces      {:>12}", i.faces);
    println!("  cells      {:>12}", i.cells);
    println!(
        "  Euler characteristic V-E+F-C = {}",
        i.euler_characteristic
    );
    println!(
        "  boundary: {} faces, {} edges, {} vertices; {}",
        i.boundary_faces,
        i.boundary_edges,
        i.boundary_vertices,
        if i.manifold {
            "manifold"
        } else {
            "non-manifold"
        }
    );
    let t = &i.cell_types;
    let types: Vec<String> = [
        ("tetrahedra", t.tetrahedron),
        ("hexahedra", t.hexahedron),
        ("prisms", t.prism),
        ("pyramids", t.pyramid),
        ("polyhedra", t.polyhedron),
    ]
    .iter()
    .filter(|(_, n)| *n > 0)
    .map(|(s, n)| format!("{n} {s}"))
    .collect();
    println!(
        "  cell types: {}",
        if types.is_empty() {
            "none".into()
        } else {
            types.join(", ")
        }
    );
    println!(
        "  storage: topology {} bytes (∂1, ∂2, ∂3 in TCSR), geometry {} bytes",
        i.topology_bytes, i.geometry_bytes
    );
    if let Some(sb) = i.simplex_topology_bytes {
        println!("  simplex mesh storage: {sb} bytes (cellVertices only, §3.4.4)");
    }
    for g in &i.groups {
        let what = ["vertices", "edges", "faces", "cells"][g.dim.min(3) as usize];
        let name = if g.name.is_empty() {
            String::new()
        } else {
            format!(" \"{}\"", g.name)
        };
        println!(
            "  group ({}, {}){name}: {} {what}",
            g.dim, g.tag, g.entities
        );
    }
    Ok(())
}

fn convert(a: ConvertArgs) -> anyhow::Result<()> {
    a.device.resolve()?;
    let f = load(&a.input)?;
    save(&f.mesh, &a.output)?;
    if !f.groups.is_empty() {
        eprintln!(
            "note: {} physical group(s) of {} are not written to {}",
            f.groups.len(),
            a.input.display(),
            a.output.display()
        );
    }
    let m = &f.mesh;
    println!(
        "{} -> {}: {} vertices, {} cells",
        a.input.display(),
        a.output.display(),
        m.num_vertices(),
        m.num_cells()
    );
    Ok(())
}

fn is_ext(p: &Path, ext: &str) -> bool {
    let s = p.to_string_lossy().to_ascii_lowercase();
    let s = s.strip_suffix(".gz").unwrap_or(&s);
    s.ends_with(&format!(".{ext}"))
}

/// Write the boundary surface of `m` to `.obj` or `.vtu` (with the mesh vertex and face
/// ids as data), extracting it on the chosen backend. Returns (polygons, vertices).
pub fn write_boundary_on(
    dev: &Backend,
    m: &PolyMesh,
    out: &Path,
) -> anyhow::Result<(usize, usize)> {
    let b = boundary_on(dev, m)?;
    let s = b.surface(m);
    if is_ext(out, "obj") {
        write_obj(out, &s.positions, &s.polygon_offsets, &s.polygon_vertices)?;
    } else if is_ext(out, "vtu") {
        let vid: Vec<f64> = s.vertex_map.iter().map(|&v| v as f64).collect();
        let fid: Vec<f64> = b
            .faces
            .iter()
            .map(|&f| tessera_sparse::tcsr::col(f) as f64)
            .collect();
        write_vtu_polygons(
            out,
            &s.positions,
            &s.polygon_offsets,
            &s.polygon_vertices,
            &[
                DataArray::point_scalars("mesh_vertex", vid),
                DataArray::cell_scalars("mesh_face", fid),
            ],
        )?;
    } else {
        bail!("{}: the boundary is written as .obj or .vtu", out.display());
    }
    Ok((s.num_polygons(), s.num_vertices()))
}

fn boundary(a: BoundaryArgs) -> anyhow::Result<()> {
    let dev = a.device.resolve()?;
    let f = load(&a.input)?;
    let pb = spinner("extracting the boundary");
    let r = write_boundary_on(&dev, &f.mesh, &a.output);
    pb.finish_and_clear();
    let (np, nv) = r?;
    println!(
        "{}: boundary of {} polygons, {} vertices",
        a.output.display(),
        np,
        nv
    );
    Ok(())
}

/// Smooth on the chosen backend and write; a `.vtu` gets the per-vertex displacement.
pub fn smooth_and_write_on(
    dev: &Backend,
    m: &mut PolyMesh,
    iterations: usize,
    out: &Path,
) -> anyhow::Result<f64> {
    let before = m.positions().to_vec();
    smooth_on(dev, m, iterations)?;
    let disp: Vec<[f64; 3]> = before
        .iter()
        .zip(m.positions())
        .map(|(p, q)| [q[0] - p[0], q[1] - p[1], q[2] - p[2]])
        .collect();
    let max = disp
        .iter()
        .map(|d| (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt())
        .fold(0.0, f64::max);
    if is_ext(out, "vtu") {
        write_vtu(
            out,
            m,
            &[DataArray::point_vectors("smoothing_displacement", &disp)],
        )?;
    } else {
        write_mesh(m, out)?;
    }
    Ok(max)
}

fn smooth(a: SmoothArgs) -> anyhow::Result<()> {
    let dev = a.device.resolve()?;
    let mut f = load(&a.input)?;
    let pb = spinner(&format!("smoothing ({} iterations)", a.iterations));
    let r = smooth_and_write_on(&dev, &mut f.mesh, a.iterations, &a.output);
    pb.finish_and_clear();
    let max = r?;
    println!(
        "{}: {} iterations on {} vertices, largest displacement {:.4e}",
        a.output.display(),
        a.iterations,
        f.mesh.num_vertices(),
        max
    );
    Ok(())
}

fn generate(a: GenerateArgs) -> anyhow::Result<()> {
    let (m, out) = match a.what {
        GenerateCmd::Bracket {
            resolution,
            output,
            device,
        } => {
            device.resolve()?; // generation runs on the CPU
            if !BRACKET_RESOLUTION.contains(&resolution) {
                bail!(
                    "--resolution {resolution} is outside {}..={}",
                    BRACKET_RESOLUTION.start(),
                    BRACKET_RESOLUTION.end()
                );
            }
            let pb = spinner(&format!("generating a bracket at resolution {resolution}"));
            let m = bracket(resolution);
            pb.finish_and_clear();
            (m?, output)
        }
        GenerateCmd::Box {
            kind,
            n,
            extent,
            output,
            device,
        } => {
            device.resolve()?;
            let (n, e) = ([n[0], n[1], n[2]], [extent[0], extent[1], extent[2]]);
            if n.iter().any(|&x| x == 0) {
                bail!("--n needs three positive voxel counts, got {n:?}");
            }
            if e.iter().any(|&x| !(x.is_finite() && x > 0.0)) {
                bail!("--extent needs three positive sizes, got {e:?}");
            }
            let cells = n[0] as u128 * n[1] as u128 * n[2] as u128 * 6;
            if cells > u32::MAX as u128 / 8 {
                bail!("--n {n:?} gives too many cells for 32-bit indices");
            }
            let kind = match kind {
                KindArg::Tet => BoxKind::Tet,
                KindArg::Hex => BoxKind::Hex,
                KindArg::Mixed => BoxKind::Mixed,
            };
            let pb = spinner("generating a box");
            let m = box_mesh(kind, n, e);
            pb.finish_and_clear();
            (m, output)
        }
    };
    save(&m, &out)?;
    println!(
        "{}: {} vertices, {} edges, {} faces, {} cells",
        out.display(),
        m.num_vertices(),
        m.num_edges(),
        m.num_faces(),
        m.num_cells()
    );
    Ok(())
}
