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
    groups_lost, read_mesh, write_mesh_file, write_obj, write_vtu_groups, write_vtu_polygons,
    DataArray, MeshFile, VtuEncoding,
};
use tessera_mesh::quality::{quality_report, validity, QualityReport};
use tessera_mesh::simplex::SimplexMesh;
use tessera_mesh::smooth::{
    smooth as smooth_cpu, smooth_by, SafeStats, SmoothMethod, SmoothParams, SmoothReport,
    DEFAULT_MIN_QUALITY,
};
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
    /// Laplacian smoothing of the inner vertices (dissertation §3.4.2); by default moves that
    /// would invert or degrade a cell are rejected (`--plain`: every move is taken).
    Smooth(SmoothArgs),
    /// Cell quality: inverted and degenerate cells, dihedral angles, radius-ratio and
    /// aspect-ratio histograms, the worst cells.
    Quality(QualityArgs),
    /// Generate a procedural mesh (a mechanical bracket or a box).
    Generate(GenerateArgs),
    /// Volumetric Catmull-Clark subdivision (dissertation §3.4.3), any number of levels.
    Subdivide(SubdivideArgs),
    /// Vertex normals of a surface (area, angle or Max weights; mesh matrix, seed 004).
    Normals(crate::cmd_mesh_matrix::NormalsArgs),
    /// Uniform, cotangent or P1-tetrahedral Laplacian as Matrix Market (mapped SpGEMM, seed 004).
    Laplacian(crate::cmd_mesh_matrix::LaplacianArgs),
    /// Slice a triangle surface by a plane (triangles and quads along the cut, cut polylines).
    Slice(crate::cmd_mesh_matrix::SliceArgs),
    /// Catmull-Clark subdivision of a polygon surface.
    SubdivideSurface(crate::cmd_mesh_matrix::SubdivideSurfaceArgs),
    /// Renumber a surface's vertices (reverse Cuthill-McKee).
    Reorder(crate::cmd_mesh_matrix::ReorderArgs),
    /// Batched edge collapses, face collapses or vertex removals (K-matrix products, seed 004 §8).
    Collapse(crate::cmd_mesh_matrix::CollapseArgs),
    /// Split the cells into K domains (METIS or recursive coordinate bisection); report the
    /// edge cut, the owned-node balance and the halo per domain at order P.
    Partition(crate::cmd_mesh_partition::PartitionArgs),
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
    out: OutputArgs,
    #[command(flatten)]
    device: DeviceArg,
}

/// How output files are written.
#[derive(Args, Debug, Clone, Copy)]
pub struct OutputArgs {
    /// Write .vtu data arrays as ASCII text (default: binary, zlib-compressed, appended
    /// raw, as ParaView writes).
    #[arg(long)]
    pub ascii: bool,
}

impl OutputArgs {
    /// The `.vtu` encoding chosen.
    pub fn vtu(&self) -> VtuEncoding {
        if self.ascii {
            VtuEncoding::Ascii
        } else {
            VtuEncoding::default()
        }
    }
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

/// Smoothing on the chosen backend (dissertation §3.4.2; safe or plain, see
/// `tessera_mesh::smooth`). The GPU gives the CPU's positions exactly (conformance tests
/// `laplacian_smooth_matches_reference`, `smooth_safe_matches_reference`).
pub fn smooth_on(
    b: &Backend,
    m: &mut PolyMesh,
    params: &SmoothParams,
) -> anyhow::Result<SmoothReport> {
    match b.gpu() {
        Some(g) => smooth_by(m, params, |m, setup| -> anyhow::Result<_> {
            let mut dm = DeviceMesh::upload(g, m)?;
            let stats = match setup {
                None => {
                    dm.laplacian_smooth(params.iterations)?;
                    SafeStats::default()
                }
                Some(s) => dm.safe_smooth(s, params.iterations)?,
            };
            Ok((dm.download_positions()?, stats))
        }),
        None => Ok(smooth_cpu(m, params)),
    }
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
    /// Output file; its extension picks the format (.vtu, .msh, .mesh, .node, .ovm; .gz
    /// compresses all but .vtu, which is compressed inside).
    output: PathBuf,
    #[command(flatten)]
    out: OutputArgs,
    #[command(flatten)]
    device: DeviceArg,
}

#[derive(Args, Debug)]
struct BoundaryArgs {
    /// Input mesh file.
    input: PathBuf,
    /// Output surface: .obj (optionally .gz) or .vtu.
    #[arg(short, long)]
    output: PathBuf,
    #[command(flatten)]
    out: OutputArgs,
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
    /// The dissertation's plain Laplacian smoothing: take every move, even one that inverts
    /// a cell (the inverted cells are reported).
    #[arg(long)]
    plain: bool,
    /// Safe smoothing: the mean ratio (0..1, 1 = regular tetrahedron) below which a move may
    /// not push a cell; cells already below it may not get worse.
    #[arg(long, default_value_t = DEFAULT_MIN_QUALITY, value_name = "ETA", conflicts_with = "plain")]
    min_quality: f64,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    out: OutputArgs,
    #[command(flatten)]
    device: DeviceArg,
}

#[derive(Args, Debug)]
struct QualityArgs {
    /// Mesh file.
    file: PathBuf,
    /// How many of the lowest-quality cells to list.
    #[arg(long, default_value_t = 10)]
    worst: usize,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Accepted for uniformity; quality is computed on the CPU.
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
        out: OutputArgs,
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
        out: OutputArgs,
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
        MeshCmd::Quality(a) => quality(a),
        MeshCmd::Generate(a) => generate(a),
        MeshCmd::Subdivide(a) => subdivide(a),
        MeshCmd::Normals(a) => crate::cmd_mesh_matrix::normals(a),
        MeshCmd::Laplacian(a) => crate::cmd_mesh_matrix::laplacian(a),
        MeshCmd::Slice(a) => crate::cmd_mesh_matrix::slice_cmd(a),
        MeshCmd::SubdivideSurface(a) => crate::cmd_mesh_matrix::subdivide_surface(a),
        MeshCmd::Reorder(a) => crate::cmd_mesh_matrix::reorder(a),
        MeshCmd::Collapse(a) => crate::cmd_mesh_matrix::collapse(a),
        MeshCmd::Partition(a) => crate::cmd_mesh_partition::partition(a),
    }
}

fn subdivide(a: SubdivideArgs) -> anyhow::Result<()> {
    check_mesh_output(&a.output)?;
    let dev = a.device.resolve()?;
    let f = load(&a.input)?;
    if a.levels == 0 {
        bail!("--levels must be at least 1");
    }
    // the counts of every level are known from the operators (Eqs. 3.1-3.4): refuse before
    // work when the result would not fit
    tessera_mesh::subdivide::check_levels(&f.mesh, a.levels)?;
    let pb = spinner(&format!("Catmull-Clark subdivision, {} level(s)", a.levels));
    let r = subdivide_on(&dev, &f.mesh, a.levels);
    pb.finish_and_clear();
    let (m, summary) = r?;
    if !f.groups.is_empty() {
        eprintln!(
            "note: the {} physical group(s) of {} are not carried through subdivision",
            f.groups.len(),
            a.input.display()
        );
    }
    let m = file_of(m);
    save(&m, &a.output, a.out)?;
    let m = m.mesh;
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

/// Write a mesh file (with its groups where the format holds them) with a spinner; a
/// note on stderr names groups the format cannot hold.
pub fn save(f: &MeshFile, path: &Path, out: OutputArgs) -> anyhow::Result<()> {
    let pb = spinner(&format!("writing {}", path.display()));
    let r = write_mesh_file(f, path, out.vtu());
    pb.finish_and_clear();
    r?;
    let lost = groups_lost(f, path);
    if !lost.is_empty() {
        let names: Vec<String> = lost
            .iter()
            .map(|g| {
                if g.name.is_empty() {
                    format!("({}, {})", g.dim, g.tag)
                } else {
                    format!("\"{}\"", g.name)
                }
            })
            .collect();
        eprintln!(
            "note: {} cannot hold physical groups; not written: {}",
            path.display(),
            names.join(", ")
        );
    }
    Ok(())
}

/// A mesh without groups as a [`MeshFile`].
fn file_of(mesh: PolyMesh) -> MeshFile {
    MeshFile {
        mesh,
        groups: Vec::new(),
    }
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

/// The `mesh info --json` object (the interface other tools rely on).
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
    /// Cells folded over relative to their neighbours (`tessera_mesh::quality`).
    pub inverted_cells: usize,
    /// Cells of (numerically) zero volume.
    pub degenerate_cells: usize,
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
    let v = validity(m);
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
        inverted_cells: v.inverted,
        degenerate_cells: v.degenerate,
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
        "  cell quality: {} inverted, {} degenerate (details: tessera mesh quality)",
        i.inverted_cells, i.degenerate_cells
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
    check_mesh_output(&a.output)?;
    a.device.resolve()?;
    let f = load(&a.input)?;
    save(&f, &a.output, a.out)?;
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
    enc: VtuEncoding,
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
            enc,
        )?;
    } else {
        bail!("{}: the boundary is written as .obj or .vtu", out.display());
    }
    Ok((s.num_polygons(), s.num_vertices()))
}

fn boundary(a: BoundaryArgs) -> anyhow::Result<()> {
    if !(is_ext(&a.output, "obj") || is_ext(&a.output, "vtu")) {
        bail!(
            "{}: the boundary is written as .obj or .vtu",
            a.output.display()
        );
    }
    check_output_dir(&a.output)?;
    let dev = a.device.resolve()?;
    let f = load(&a.input)?;
    let pb = spinner("extracting the boundary");
    let r = write_boundary_on(&dev, &f.mesh, &a.output, a.out.vtu());
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
    f: &mut MeshFile,
    params: &SmoothParams,
    out: &Path,
    opts: OutputArgs,
) -> anyhow::Result<SmoothReport> {
    let before = f.mesh.positions().to_vec();
    let report = smooth_on(dev, &mut f.mesh, params)?;
    let disp: Vec<[f64; 3]> = before
        .iter()
        .zip(f.mesh.positions())
        .map(|(p, q)| [q[0] - p[0], q[1] - p[1], q[2] - p[2]])
        .collect();
    if is_ext(out, "vtu") {
        write_vtu_groups(
            out,
            &f.mesh,
            &f.groups,
            &[DataArray::point_vectors("smoothing_displacement", &disp)],
            opts.vtu(),
        )?;
    } else {
        save(f, out, opts)?;
    }
    Ok(report)
}

fn smooth(a: SmoothArgs) -> anyhow::Result<()> {
    check_mesh_output(&a.output)?;
    if !(0.0..1.0).contains(&a.min_quality) {
        bail!(
            "--min-quality {} is outside 0..1 (a mean ratio; 1 is the regular tetrahedron)",
            a.min_quality
        );
    }
    let dev = a.device.resolve()?;
    let mut f = load(&a.input)?;
    let params = SmoothParams {
        iterations: a.iterations,
        method: if a.plain {
            SmoothMethod::Plain
        } else {
            SmoothMethod::Safe
        },
        min_quality: a.min_quality,
    };
    let what = if a.plain { "plain" } else { "safe" };
    let pb = spinner(&format!("{what} smoothing ({} iterations)", a.iterations));
    let r = smooth_and_write_on(&dev, &mut f, &params, &a.output, a.out);
    pb.finish_and_clear();
    let r = r?;
    if r.inverted_after > r.inverted_before {
        eprintln!(
            "warning: {} cell(s) inverted after smoothing ({} before; first: {}){}",
            r.inverted_after,
            r.inverted_before,
            list(&r.inverted_cells),
            if a.plain {
                "; without --plain, smoothing rejects moves that invert cells"
            } else {
                ""
            }
        );
    }
    if a.json {
        let mut j = serde_json::to_value(&r)?;
        j["output"] = a.output.display().to_string().into();
        println!("{j}");
        return Ok(());
    }
    println!(
        "{}: {} {what} smoothing iterations on {} vertices ({} movable), largest displacement {:.4e}",
        a.output.display(),
        a.iterations,
        f.mesh.num_vertices(),
        r.movable_vertices,
        r.max_displacement
    );
    if !a.plain {
        println!(
            "  rejected moves: {} (mean-ratio threshold {})",
            r.rejected_moves, a.min_quality
        );
    }
    println!(
        "  inverted cells: {} before, {} after; degenerate after: {}; lowest mean ratio {:.4} before, {:.4} after",
        r.inverted_before, r.inverted_after, r.degenerate_after, r.min_quality_before, r.min_quality_after
    );
    Ok(())
}

/// The first cell indices of a list, comma-separated.
fn list(cells: &[u32]) -> String {
    let v: Vec<String> = cells.iter().take(10).map(|c| c.to_string()).collect();
    v.join(", ")
}

fn quality(a: QualityArgs) -> anyhow::Result<()> {
    a.device.resolve()?;
    let f = load(&a.file)?;
    let pb = spinner("measuring cell quality");
    let r = quality_report(&f.mesh, a.worst);
    pb.finish_and_clear();
    if a.json {
        let mut j = serde_json::to_value(&r)?;
        j["file"] = a.file.display().to_string().into();
        println!("{j}");
        return Ok(());
    }
    print_quality(&a.file, &r);
    Ok(())
}

fn print_quality(file: &Path, r: &QualityReport) {
    println!(
        "{}: {} cells ({} tetrahedra)",
        file.display(),
        r.cells,
        r.tetrahedra
    );
    println!("  inverted cells     {}", r.inverted);
    if r.inverted > 0 {
        println!("    first: {}", list(&r.inverted_cells));
    }
    println!("  degenerate cells   {}", r.degenerate);
    if r.degenerate > 0 {
        println!("    first: {}", list(&r.degenerate_cells));
    }
    println!("  lowest mean ratio  {:.4}", r.min_quality);
    println!(
        "  dihedral angles    {:.2}° .. {:.2}°",
        r.min_dihedral_deg, r.max_dihedral_deg
    );
    if let Some(rr) = r.min_radius_ratio {
        println!("  lowest radius ratio {rr:.4}");
    }
    println!("  largest aspect ratio {:.3}", r.max_aspect_ratio);
    if r.tetrahedra > 0 {
        println!("  radius ratio (3 r_in / R_circ, tetrahedra):");
        for b in &r.radius_ratio_histogram {
            println!("    {:.1} - {:.1}  {:>10}", b.lo, b.hi, b.count);
        }
    }
    println!("  aspect ratio (tetrahedra: l_max / (2√6 r_in); other cells: l_max / l_min):");
    for b in &r.aspect_ratio_histogram {
        let hi = if b.hi.is_finite() {
            format!("{}", b.hi)
        } else {
            "inf".into()
        };
        println!("    {:>5} - {:<5} {:>10}", b.lo, hi, b.count);
    }
    if !r.worst.is_empty() {
        println!("  worst cells (mesh index = order of the volume elements in the file):");
        for s in &r.worst {
            println!(
                "    cell {:>9} {:<11} quality {:>8.4}  volume {:>11.4e}  dihedral {:>6.2}°..{:>6.2}°  at ({:.4}, {:.4}, {:.4}){}",
                s.cell,
                s.kind.name(),
                s.quality,
                s.volume,
                s.min_dihedral_deg,
                s.max_dihedral_deg,
                s.centroid[0],
                s.centroid[1],
                s.centroid[2],
                if s.inverted { "  INVERTED" } else if s.degenerate { "  DEGENERATE" } else { "" }
            );
        }
    }
}

/// Check an output mesh path before any work: a known writable extension and an existing
/// folder.
pub fn check_mesh_output(path: &Path) -> anyhow::Result<()> {
    use tessera_mesh::io::Format;
    match Format::from_path(path) {
        Some(Format::Obj) => bail!(
            "{}: .obj holds surfaces; volume meshes are written as .vtu, .msh, .mesh, .node, .ovm",
            path.display()
        ),
        None => bail!(
            "{}: unknown mesh file extension; writable are .vtu, .msh, .mesh, .node, .ovm",
            path.display()
        ),
        Some(_) => {}
    }
    check_output_dir(path)
}

/// The folder of an output file must exist (checked before any work).
pub fn check_output_dir(path: &Path) -> anyhow::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => return Ok(()),
    };
    if !dir.is_dir() {
        bail!(
            "{}: the folder {} does not exist",
            path.display(),
            dir.display()
        );
    }
    Ok(())
}

fn generate(a: GenerateArgs) -> anyhow::Result<()> {
    let m = match a.what {
        GenerateCmd::Bracket {
            resolution,
            output,
            out,
            device,
        } => {
            check_mesh_output(&output)?;
            device.resolve()?; // generation runs on the CPU
            if !BRACKET_RESOLUTION.contains(&resolution) {
                bail!(
                    "--resolution {resolution} is outside {}..={}",
                    BRACKET_RESOLUTION.start(),
                    BRACKET_RESOLUTION.end()
                );
            }
            tessera_mesh::generate::check_voxels(
                &format!("the bracket at resolution {resolution}"),
                tessera_mesh::generate::bracket_voxels(resolution),
                BoxKind::Tet,
            )?;
            let pb = spinner(&format!("generating a bracket at resolution {resolution}"));
            let m = bracket(resolution);
            pb.finish_and_clear();
            (m?, output, out)
        }
        GenerateCmd::Box {
            kind,
            n,
            extent,
            output,
            out,
            device,
        } => {
            check_mesh_output(&output)?;
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
            let box_kind = match kind {
                KindArg::Tet => BoxKind::Tet,
                KindArg::Hex => BoxKind::Hex,
                KindArg::Mixed => BoxKind::Mixed,
            };
            tessera_mesh::generate::check_voxels(
                &format!("a box of {}x{}x{} voxels", n[0], n[1], n[2]),
                (cells / 6) as u64,
                box_kind,
            )?;
            let kind = match kind {
                KindArg::Tet => BoxKind::Tet,
                KindArg::Hex => BoxKind::Hex,
                KindArg::Mixed => BoxKind::Mixed,
            };
            let pb = spinner("generating a box");
            let m = box_mesh(kind, n, e);
            pb.finish_and_clear();
            (m, output, out)
        }
    };
    let (m, out, opts) = (file_of(m.0), m.1, m.2);
    save(&m, &out, opts)?;
    let m = m.mesh;
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
