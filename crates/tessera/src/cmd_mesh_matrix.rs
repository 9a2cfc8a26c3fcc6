//! `tessera mesh normals|laplacian|slice|subdivide-surface|reorder|collapse`: polygon surfaces
//! through the mesh matrix with action maps (seed 004). Surfaces are read from .obj, .ply, .off,
//! or as the boundary of any volume mesh; written as .obj, .ply, .off or .vtu.

use crate::cmd_mesh::DeviceArg;
use crate::util::spinner;
use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Instant;
use tessera_mesh::cuda::mesh_matrix::{
    download_mesh, download_points, upload_mesh, MeshMatrixKernels,
};
use tessera_mesh::io::{read_simplex_mesh, read_surface, write_surface, write_surface_with};
use tessera_mesh::mesh_matrix::collapse::{
    collapse_edges, collapse_faces, parse_edge_list, remove_vertices,
};
use tessera_mesh::mesh_matrix::normals::{vertex_normals, NormalWeights};
use tessera_mesh::mesh_matrix::rcm::{adjacency_bandwidth, reorder_rcm};
use tessera_mesh::mesh_matrix::slice::{slice, Plane};
use tessera_mesh::mesh_matrix::spgemm::{cotan_laplacian, tet_laplacian, uniform_laplacian};
use tessera_mesh::mesh_matrix::subdivide::catmull_clark;
use tessera_mesh::mesh_matrix::{MeshMatrix, PairMap, PolygonMesh};

fn load(path: &PathBuf) -> anyhow::Result<PolygonMesh> {
    let pb = spinner(&format!("reading {}", path.display()));
    let r = read_surface(path);
    pb.finish_and_clear();
    Ok(r?)
}

/// A one-line JSON summary of a surface command.
#[derive(Serialize)]
struct Summary {
    output: String,
    vertices: usize,
    faces: usize,
    seconds: f64,
    device: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<serde_json::Value>,
}

fn report(json: bool, s: Summary, text: String) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(&s)?);
    } else {
        println!("{text}");
    }
    Ok(())
}

// ------------------------------------------------------------------ normals

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum WeightsArg {
    Area,
    Angle,
    Max,
}

#[derive(Args, Debug)]
pub struct NormalsArgs {
    /// Input surface (.obj .ply .off, or a volume mesh for its boundary).
    input: PathBuf,
    /// Output surface with vertex normals (.ply: nx ny nz; .obj: vn; .vtu: point data; .off: NOFF).
    #[arg(short, long)]
    output: PathBuf,
    /// Weighting of the face normals at a vertex: area, angle or max (N. Max 1999).
    #[arg(long, value_enum, default_value_t = WeightsArg::Area)]
    weights: WeightsArg,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    device: DeviceArg,
}

pub fn normals(a: NormalsArgs) -> anyhow::Result<()> {
    let dev = a.device.resolve()?;
    let mesh = load(&a.input)?;
    let w = match a.weights {
        WeightsArg::Area => NormalWeights::Area,
        WeightsArg::Angle => NormalWeights::Angle,
        WeightsArg::Max => NormalWeights::Max,
    };
    let t = Instant::now();
    let n = match dev.gpu() {
        Some(g) => {
            // gathered over the transpose in f64: the CPU's order of summation
            let k = MeshMatrixKernels::new(g)?;
            let (mut dm, p) = upload_mesh::<f64>(&k, &mesh)?;
            download_points(g, &k.normals(&mut dm, &p, w, true)?)?
        }
        None => vertex_normals(&mesh.matrix, &mesh.positions, w)?,
    };
    let secs = t.elapsed().as_secs_f64();
    write_surface_with(&a.output, &mesh, Some(&n), false)?;
    report(
        a.json,
        Summary {
            output: a.output.display().to_string(),
            vertices: mesh.num_vertices(),
            faces: mesh.num_faces(),
            seconds: secs,
            device: dev.describe(),
            detail: Some(serde_json::json!({ "weights": w.name() })),
        },
        format!(
            "{}: {} vertex normals ({} weights) of {} faces in {:.1} ms",
            a.output.display(),
            n.len(),
            w.name(),
            mesh.num_faces(),
            secs * 1e3
        ),
    )
}

// ------------------------------------------------------------------ laplacian

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum LaplacianKind {
    /// D - (A ∨ Aᵀ) of the vertex graph (any polygons).
    Uniform,
    /// The cotangent Laplacian (P1 triangles).
    Cotan,
    /// The P1 Laplacian of a tetrahedral volume mesh.
    Tet,
}

#[derive(Args, Debug)]
pub struct LaplacianArgs {
    /// Input: a surface (uniform, cotan) or a tetrahedral volume mesh (tet).
    input: PathBuf,
    /// Which Laplacian.
    #[arg(long, value_enum)]
    kind: LaplacianKind,
    /// Output Matrix Market file (coordinate real general).
    #[arg(short, long)]
    output: PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    device: DeviceArg,
}

pub fn laplacian(a: LaplacianArgs) -> anyhow::Result<()> {
    let dev = a.device.resolve()?;
    let (m, positions): (MeshMatrix, Vec<[f64; 3]>) = if a.kind == LaplacianKind::Tet {
        let pb = spinner(&format!("reading {}", a.input.display()));
        let f = read_simplex_mesh(&a.input);
        pb.finish_and_clear();
        let s = f?.mesh;
        if s.dim() != 3 {
            bail!("{}: --kind tet needs a tetrahedral mesh", a.input.display());
        }
        (MeshMatrix::from_simplex_cells(&s)?, s.positions().to_vec())
    } else {
        let s = load(&a.input)?;
        (s.matrix, s.positions)
    };
    let t = Instant::now();
    let l = match dev.gpu() {
        Some(g) => {
            let k = MeshMatrixKernels::new(g)?;
            let mut dm = k.upload(&m)?;
            let p = tessera_mesh::cuda::mesh_matrix::upload_points::<f64>(g, &positions)?;
            let d = match a.kind {
                LaplacianKind::Uniform => k.spgemm::<f64>(&mut dm, &PairMap::graph_laplacian())?,
                LaplacianKind::Cotan => k.cotan_laplacian(&mut dm, &p)?,
                LaplacianKind::Tet => k.tet_laplacian(&mut dm, &p)?,
            };
            d.download(g)?
        }
        None => match a.kind {
            LaplacianKind::Uniform => uniform_laplacian(&m)?,
            LaplacianKind::Cotan => cotan_laplacian(&m, &positions)?,
            LaplacianKind::Tet => tet_laplacian(&m, &positions)?,
        },
    };
    let secs = t.elapsed().as_secs_f64();
    let kind = format!("{:?}", a.kind).to_lowercase();
    l.write_matrix_market(
        &a.output,
        &format!(
            "tessera mesh laplacian --kind {kind} {} (mesh matrix with action maps, seed 004)",
            a.input.display()
        ),
    )?;
    report(
        a.json,
        Summary {
            output: a.output.display().to_string(),
            vertices: m.num_vertices(),
            faces: m.num_faces(),
            seconds: secs,
            device: dev.describe(),
            detail: Some(serde_json::json!({ "kind": kind, "rows": l.nrows, "nonzeros": l.nnz() })),
        },
        format!(
            "{}: {kind} Laplacian, {} x {}, {} nonzeros, assembled in {:.1} ms",
            a.output.display(),
            l.nrows,
            l.ncols,
            l.nnz(),
            secs * 1e3
        ),
    )
}

// ------------------------------------------------------------------ slice

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum KeepArg {
    /// Both sides, split along the cut.
    Both,
    /// The side the normal points to.
    Above,
    /// The other side.
    Below,
}

#[derive(Args, Debug)]
pub struct SliceArgs {
    /// Input triangle surface.
    input: PathBuf,
    /// The plane: a point and a normal, `px,py,pz,nx,ny,nz`.
    #[arg(long, allow_hyphen_values = true)]
    plane: Plane,
    /// Output surface (triangles and quads along the cut).
    #[arg(short, long)]
    output: PathBuf,
    /// Which faces to keep.
    #[arg(long, value_enum, default_value_t = KeepArg::Both)]
    keep: KeepArg,
    /// Also write the cut polylines as .obj (`l` lines).
    #[arg(long)]
    polylines: Option<PathBuf>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    device: DeviceArg,
}

pub fn slice_cmd(a: SliceArgs) -> anyhow::Result<()> {
    let dev = a.device.resolve()?;
    let mesh = load(&a.input)?;
    let t = Instant::now();
    let r = match dev.gpu() {
        Some(g) => {
            let k = MeshMatrixKernels::new(g)?;
            let (mut dm, p) = upload_mesh::<f64>(&k, &mesh)?;
            k.slice(&mut dm, &p, &a.plane)?.download(g)?
        }
        None => slice(&mesh, &a.plane)?,
    };
    let secs = t.elapsed().as_secs_f64();
    let out = match a.keep {
        KeepArg::Both => r.mesh.clone(),
        KeepArg::Above => r.side(1)?,
        KeepArg::Below => r.side(-1)?,
    };
    write_surface(&a.output, &out)?;
    if let Some(pl) = &a.polylines {
        let pos = &r.mesh.positions;
        tessera_mesh::io::write_atomic(pl, |w| {
            writeln!(w, "# tessera cut polylines: {}", r.polylines.len())?;
            let mut ids = vec![0u32; pos.len()];
            let mut next = 1u32;
            for p in &r.polylines {
                for &v in &p.vertices {
                    if ids[v as usize] == 0 {
                        let q = pos[v as usize];
                        writeln!(w, "v {} {} {}", q[0], q[1], q[2])?;
                        ids[v as usize] = next;
                        next += 1;
                    }
                }
            }
            for p in &r.polylines {
                let mut line = String::from("l");
                for &v in &p.vertices {
                    line.push_str(&format!(" {}", ids[v as usize]));
                }
                if p.closed {
                    line.push_str(&format!(" {}", ids[p.vertices[0] as usize]));
                }
                writeln!(w, "{line}")?;
            }
            Ok(())
        })
        .with_context(|| format!("writing {}", pl.display()))?;
    }
    let lengths: Vec<f64> = r
        .polylines
        .iter()
        .map(|p| p.length(&r.mesh.positions))
        .collect();
    let closed = r.polylines.iter().filter(|p| p.closed).count();
    report(
        a.json,
        Summary {
            output: a.output.display().to_string(),
            vertices: out.num_vertices(),
            faces: out.num_faces(),
            seconds: secs,
            device: dev.describe(),
            detail: Some(serde_json::json!({
                "cut_edges": r.cut_edges,
                "polylines": r.polylines.len(),
                "closed_polylines": closed,
                "polyline_lengths": lengths,
            })),
        },
        format!(
            "{}: {} vertices, {} faces; {} edges cut, {} polyline(s) ({} closed, length {:.6}) in {:.1} ms",
            a.output.display(),
            out.num_vertices(),
            out.num_faces(),
            r.cut_edges,
            r.polylines.len(),
            closed,
            lengths.iter().sum::<f64>(),
            secs * 1e3
        ),
    )
}

// ------------------------------------------------------------------ subdivide-surface

#[derive(Args, Debug)]
pub struct SubdivideSurfaceArgs {
    /// Input polygon surface.
    input: PathBuf,
    /// Number of Catmull-Clark steps.
    #[arg(short, long, default_value_t = 1)]
    levels: usize,
    /// Output surface (quads).
    #[arg(short, long)]
    output: PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    device: DeviceArg,
}

pub fn subdivide_surface(a: SubdivideSurfaceArgs) -> anyhow::Result<()> {
    let dev = a.device.resolve()?;
    if a.levels == 0 {
        bail!("--levels must be at least 1");
    }
    let mesh = load(&a.input)?;
    let pb = spinner(&format!("surface Catmull-Clark, {} level(s)", a.levels));
    let t = Instant::now();
    let r: anyhow::Result<PolygonMesh> = (|| match dev.gpu() {
        Some(g) => {
            let k = MeshMatrixKernels::new(g)?;
            let (mut dm, mut p) = upload_mesh::<f64>(&k, &mesh)?;
            for _ in 0..a.levels {
                let (d2, p2) = k.catmull_clark(&mut dm, &p)?;
                dm = d2;
                p = p2;
            }
            Ok(download_mesh(g, &dm, &p)?)
        }
        None => {
            let mut m = mesh.clone();
            for _ in 0..a.levels {
                m = catmull_clark(&m)?;
            }
            Ok(m)
        }
    })();
    pb.finish_and_clear();
    let out = r?;
    let secs = t.elapsed().as_secs_f64();
    write_surface(&a.output, &out)?;
    report(
        a.json,
        Summary {
            output: a.output.display().to_string(),
            vertices: out.num_vertices(),
            faces: out.num_faces(),
            seconds: secs,
            device: dev.describe(),
            detail: Some(serde_json::json!({ "levels": a.levels })),
        },
        format!(
            "{}: {} vertices, {} quads after {} Catmull-Clark step(s) in {:.1} ms",
            a.output.display(),
            out.num_vertices(),
            out.num_faces(),
            a.levels,
            secs * 1e3
        ),
    )
}

// ------------------------------------------------------------------ reorder

#[derive(Args, Debug)]
pub struct ReorderArgs {
    /// Input polygon surface.
    input: PathBuf,
    /// Reverse Cuthill-McKee ordering of the vertices (faces follow their smallest vertex).
    #[arg(long)]
    rcm: bool,
    /// Output surface.
    #[arg(short, long)]
    output: PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

pub fn reorder(a: ReorderArgs) -> anyhow::Result<()> {
    if !a.rcm {
        bail!("choose an ordering: --rcm (reverse Cuthill-McKee)");
    }
    let mesh = load(&a.input)?;
    let before = adjacency_bandwidth(&mesh)?;
    let t = Instant::now();
    let (out, _) = reorder_rcm(&mesh)?;
    let secs = t.elapsed().as_secs_f64();
    let after = adjacency_bandwidth(&out)?;
    write_surface(&a.output, &out)?;
    report(
        a.json,
        Summary {
            output: a.output.display().to_string(),
            vertices: out.num_vertices(),
            faces: out.num_faces(),
            seconds: secs,
            device: "cpu".into(),
            detail: Some(
                serde_json::json!({ "bandwidth_before": before, "bandwidth_after": after }),
            ),
        },
        format!(
            "{}: RCM order, adjacency bandwidth {before} -> {after} ({:.1} ms)",
            a.output.display(),
            secs * 1e3
        ),
    )
}

// ------------------------------------------------------------------ collapse

#[derive(Args, Debug)]
pub struct CollapseArgs {
    /// Input polygon surface (an oriented 2-manifold, possibly with boundary).
    input: PathBuf,
    /// Edges to collapse as one batch: a text file of `i j` lines (0-based vertex indices, `#`
    /// comments); vertex j merges into i, which moves to the midpoint.
    #[arg(long, conflicts_with_all = ["faces", "remove_vertices"])]
    edges: Option<PathBuf>,
    /// Faces to collapse as one batch: `f i` lines (face f into its vertex i).
    #[arg(long, conflicts_with = "remove_vertices")]
    faces: Option<PathBuf>,
    /// Vertices to remove as one batch: `v` lines (their faces merge into one polygon).
    #[arg(long)]
    remove_vertices: Option<PathBuf>,
    /// Output surface.
    #[arg(short, long)]
    output: PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

fn read_text(p: &PathBuf) -> anyhow::Result<String> {
    // a regular file within the input limits (tessera_core::input)
    let bytes = tessera_core::input::read_file(p)?;
    String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "{}: byte {}: not UTF-8 text",
            p.display(),
            e.utf8_error().valid_up_to()
        )
    })
}

pub fn collapse(a: CollapseArgs) -> anyhow::Result<()> {
    let mesh = load(&a.input)?;
    let chi = mesh.euler_characteristic();
    let t = Instant::now();
    let (out, what, count) = if let Some(p) = &a.edges {
        let e = parse_edge_list(p, &read_text(p)?)?;
        (collapse_edges(&mesh, &e)?, "edge collapses", e.len())
    } else if let Some(p) = &a.faces {
        let f = parse_edge_list(p, &read_text(p)?)?;
        (collapse_faces(&mesh, &f)?, "face collapses", f.len())
    } else if let Some(p) = &a.remove_vertices {
        let text = read_text(p)?;
        let mut v = Vec::new();
        for (ln, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            v.push(line.parse::<u32>().map_err(|_| {
                anyhow::anyhow!(
                    "{}:line {}: expected a vertex index, found `{line}`",
                    p.display(),
                    ln + 1
                )
            })?);
        }
        (remove_vertices(&mesh, &v)?, "vertex removals", v.len())
    } else {
        bail!("give the batch: --edges FILE, --faces FILE or --remove-vertices FILE");
    };
    let secs = t.elapsed().as_secs_f64();
    write_surface(&a.output, &out)?;
    let chi2 = out.euler_characteristic();
    report(
        a.json,
        Summary {
            output: a.output.display().to_string(),
            vertices: out.num_vertices(),
            faces: out.num_faces(),
            seconds: secs,
            device: "cpu".into(),
            detail: Some(serde_json::json!({ "operations": count, "euler_before": chi, "euler_after": chi2 })),
        },
        format!(
            "{}: {count} {what}, {} -> {} vertices, {} -> {} faces, Euler characteristic {chi} -> {chi2}",
            a.output.display(),
            mesh.num_vertices(),
            out.num_vertices(),
            mesh.num_faces(),
            out.num_faces()
        ),
    )
}
