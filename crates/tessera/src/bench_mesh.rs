//! `tessera bench mesh [FILES...] [--runs N] [--json]`: the mesh operations of dissertation
//! §3.5.1-§3.5.2 (Tables 3.2 and 3.3) on the CPU, with one thread and with all threads,
//! printed beside the dissertation's CPU and OpenVolumeMesh (OVM) columns, and the mesh
//! sizes beside Table 3.1 (level 0).
//!
//! Every operation is timed on relations computed from scratch (the free functions of
//! `tessera_mesh::relations`, never the mesh's cache). Surface extraction and smoothing
//! start from a mesh with δ3 (and δ1 for smoothing) already computed, as in the
//! dissertation ("the set of boundary faces is trivial to compute" from δ3; δ1 "is also
//! computed once beforehand"); their time includes the boundary masks. Our surface
//! extraction also lists the boundary edges and vertices (the dissertation's figure is the
//! list of boundary faces), and smoothing allocates its two position buffers. One thread runs
//! the sequential path (`Par::Seq`) in a one-thread rayon pool, all threads the parallel
//! path (`Par::Rayon`) in a pool of all cores. Each figure is the median of `--runs` runs
//! after one warm-up run.
//!
//! The table of operations ([`OPS`]) and of the dissertation's figures ([`PaperOp`],
//! [`TABLE_3_1`]) drive the output; GPU columns are added there.

use anyhow::Context;
use clap::Args;
use serde::Serialize;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::Instant;
use tessera_core::Par;
use tessera_mesh::boundary::extract_boundary;
use tessera_mesh::relations::{compute_cell_edges, compute_cell_vertices, compute_face_vertices, transpose_edge_vertices};
use tessera_mesh::smooth::smoothed_positions;
use tessera_mesh::PolyMesh;

#[derive(Args, Debug)]
pub struct BenchMeshArgs {
    /// Mesh files (any format `tessera mesh` reads, gzip allowed). Without files a generated
    /// bracket is used (see --resolution).
    pub files: Vec<PathBuf>,
    /// Timed runs per measurement; the median is reported (at least 5).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(5..))]
    pub runs: u32,
    /// Resolution of the generated bracket (voxels along its longest side; about
    /// 0.75 * resolution^3 tetrahedra) when no files are given.
    #[arg(long, default_value_t = 60)]
    pub resolution: usize,
    /// Print one JSON document instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// The dissertation's three level-0 meshes (Table 3.1), in column order.
const PAPER_MESHES: [&str; 3] = ["armadillo", "bunny", "dragon"];

/// A row of dissertation Table 3.2 or 3.3: times in ms for armadillo, bunny, dragon.
#[derive(Clone, Copy, Debug)]
pub struct PaperOp {
    pub table: &'static str,
    pub cpu: [f64; 3],
    pub gpu: [f64; 3],
    pub ovm: [f64; 3],
}

/// Dissertation Table 3.1, level 0: vertices, edges, faces, cells, OVM bytes, "Ours" bytes
/// (binary suffixes in the source: Ki = 1024, Mi = 1024^2).
#[derive(Clone, Copy, Debug)]
pub struct PaperSize {
    pub vertices: f64,
    pub edges: f64,
    pub faces: f64,
    pub cells: f64,
    pub ovm_bytes: f64,
    pub ours_bytes: f64,
}

const KI: f64 = 1024.0;
const MI: f64 = 1024.0 * 1024.0;

/// Table 3.1 rows "Armadillo 0", "Bunny 0", "Dragon 0".
pub const TABLE_3_1: [PaperSize; 3] = [
    PaperSize { vertices: 1.01e3, edges: 5.08e3, faces: 7.23e3, cells: 3.16e3, ovm_bytes: 348.0 * KI, ours_bytes: 226.0 * KI },
    PaperSize { vertices: 10.7e3, edges: 64.7e3, faces: 104e3, cells: 50e3, ovm_bytes: 4.92 * MI, ours_bytes: 3.16 * MI },
    PaperSize { vertices: 232e3, edges: 1.21e6, faces: 1.80e6, cells: 825e3, ovm_bytes: 85.1 * MI, ours_bytes: 55.0 * MI },
];

/// What an operation needs computed (untimed) before it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Setup {
    /// Nothing: the operation uses the stored operators only.
    None,
    /// δ3 (face -> cells) cached.
    FaceCells,
    /// δ3 and δ1 (vertex -> edges) cached.
    FaceCellsVertexEdges,
}

/// One benchmarked operation: its name as in the dissertation's tables and its figures.
struct Op {
    name: &'static str,
    paper: PaperOp,
    setup: Setup,
    run: fn(&PolyMesh, Par),
}

/// Laplacian smoothing iterations per timed run.
pub const SMOOTH_ITERATIONS: usize = 10;

const OPS: &[Op] = &[
    Op {
        name: "Transpose Cells",
        paper: PaperOp { table: "3.2", cpu: [0.20, 2.49, 114.0], gpu: [0.22, 0.70, 14.0], ovm: [19.6, 372.0, 6788.0] },
        setup: Setup::None,
        run: |m, par| {
            black_box(m.cell_faces().transpose(par));
        },
    },
    Op {
        name: "Transpose Faces",
        paper: PaperOp { table: "3.2", cpu: [0.26, 3.07, 65.6], gpu: [0.20, 1.17, 7.02], ovm: [3.19, 56.3, 1424.0] },
        setup: Setup::None,
        run: |m, par| {
            black_box(m.face_edges().transpose(par));
        },
    },
    Op {
        name: "Transpose Edges",
        paper: PaperOp { table: "3.2", cpu: [0.16, 1.71, 35.9], gpu: [0.72, 0.58, 4.11], ovm: [0.62, 5.73, 184.0] },
        setup: Setup::None,
        run: |m, par| {
            black_box(transpose_edge_vertices(m.edge_vertices(), m.num_vertices(), par));
        },
    },
    Op {
        name: "Cell Edges",
        paper: PaperOp { table: "3.2", cpu: [3.08, 46.7, 935.0], gpu: [0.98, 22.2, 237.0], ovm: [1.91, 34.1, 691.0] },
        setup: Setup::None,
        run: |m, par| {
            black_box(compute_cell_edges(m, par));
        },
    },
    Op {
        name: "Cell Vertices",
        paper: PaperOp { table: "3.2", cpu: [3.74, 57.2, 1236.0], gpu: [2.72, 25.1, 261.0], ovm: [3.90, 65.5, 1369.0] },
        setup: Setup::None,
        run: |m, par| {
            black_box(compute_cell_vertices(m, par));
        },
    },
    Op {
        name: "Face Vertices",
        paper: PaperOp { table: "3.2", cpu: [0.05, 0.85, 17.3], gpu: [0.12, 0.44, 1.88], ovm: [2.08, 26.3, 558.0] },
        setup: Setup::None,
        run: |m, par| {
            black_box(compute_face_vertices(m, par));
        },
    },
    Op {
        name: "Surface Extraction",
        paper: PaperOp { table: "3.3", cpu: [0.03, 0.28, 5.13], gpu: [1.13, 1.15, 2.83], ovm: [0.15, 1.21, 22.7] },
        setup: Setup::FaceCells,
        run: |m, _| {
            black_box(extract_boundary(m));
        },
    },
    Op {
        name: "Laplacian Smoothing",
        paper: PaperOp { table: "3.3", cpu: [0.54, 21.4, 860.0], gpu: [3.58, 4.48, 116.0], ovm: [19.0, 1026.0, 33474.0] },
        setup: Setup::FaceCellsVertexEdges,
        run: |m, _| {
            black_box(smoothed_positions(m, SMOOTH_ITERATIONS));
        },
    },
];

#[derive(Serialize, Debug)]
struct OpResult {
    name: &'static str,
    table: &'static str,
    ms_1_thread: f64,
    ms_all_threads: f64,
    paper_cpu_ms: Option<f64>,
    paper_gpu_ms: Option<f64>,
    paper_ovm_ms: Option<f64>,
}

#[derive(Serialize, Debug)]
struct MeshResult {
    mesh: String,
    /// Index into armadillo/bunny/dragon when the file name names one of them.
    paper_mesh: Option<&'static str>,
    vertices: usize,
    edges: usize,
    faces: usize,
    cells: usize,
    /// Items 1-5 of dissertation §3.4 (∂3, ∂2 with offsets, ∂1 pairs).
    topology_bytes: usize,
    /// Topology plus positions as 3 x f32, the basis of Table 3.1's "Ours" column.
    table_3_1_bytes: usize,
    paper_ours_bytes: Option<f64>,
    paper_ovm_bytes: Option<f64>,
    threads: usize,
    runs: u32,
    smoothing_iterations: usize,
    ops: Vec<OpResult>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

/// Median time in ms of `runs` runs of `op` on `mesh` (after one warm-up), in `pool`.
fn time_op(pool: &rayon::ThreadPool, op: &Op, mesh: &PolyMesh, par: Par, runs: u32) -> f64 {
    pool.install(|| {
        let prepared;
        let m = match op.setup {
            Setup::None => mesh,
            Setup::FaceCells | Setup::FaceCellsVertexEdges => {
                let mut c = mesh.clone();
                c.purge_caches();
                c.set_par(par);
                c.face_cells();
                if op.setup == Setup::FaceCellsVertexEdges {
                    c.vertex_edges();
                }
                prepared = c;
                &prepared
            }
        };
        (op.run)(m, par);
        let times: Vec<f64> = (0..runs)
            .map(|_| {
                let t = Instant::now();
                (op.run)(m, par);
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        median(times)
    })
}

fn paper_index(name: &str) -> Option<usize> {
    let lower = name.to_ascii_lowercase();
    PAPER_MESHES.iter().position(|p| lower.contains(p))
}

fn bench_one(
    name: String,
    mesh: &PolyMesh,
    pools: &[(rayon::ThreadPool, Par); 2],
    runs: u32,
) -> MeshResult {
    let pi = paper_index(&name);
    let ops = OPS
        .iter()
        .map(|op| OpResult {
            name: op.name,
            table: op.paper.table,
            ms_1_thread: time_op(&pools[0].0, op, mesh, pools[0].1, runs),
            ms_all_threads: time_op(&pools[1].0, op, mesh, pools[1].1, runs),
            paper_cpu_ms: pi.map(|i| op.paper.cpu[i]),
            paper_gpu_ms: pi.map(|i| op.paper.gpu[i]),
            paper_ovm_ms: pi.map(|i| op.paper.ovm[i]),
        })
        .collect();
    MeshResult {
        paper_mesh: pi.map(|i| PAPER_MESHES[i]),
        vertices: mesh.num_vertices(),
        edges: mesh.num_edges(),
        faces: mesh.num_faces(),
        cells: mesh.num_cells(),
        topology_bytes: mesh.topology_bytes(),
        table_3_1_bytes: mesh.topology_bytes() + 12 * mesh.num_vertices(),
        paper_ours_bytes: pi.map(|i| TABLE_3_1[i].ours_bytes),
        paper_ovm_bytes: pi.map(|i| TABLE_3_1[i].ovm_bytes),
        threads: pools[1].0.current_num_threads(),
        runs,
        smoothing_iterations: SMOOTH_ITERATIONS,
        ops,
        mesh: name,
    }
}

fn human(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.2} M", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.1} k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

fn bytes(x: f64) -> String {
    if x >= MI {
        format!("{:.2} Mi", x / MI)
    } else {
        format!("{:.1} Ki", x / KI)
    }
}

fn ms(x: Option<f64>) -> String {
    x.map_or_else(|| "-".into(), |v| if v >= 100.0 { format!("{v:.0}") } else { format!("{v:.3}") })
}

fn print_table(r: &MeshResult) {
    println!("== {} ==", r.mesh);
    println!(
        "ours:  V {}  E {}  F {}  C {}   topology {} + positions (f32) = {}  [f64 positions as stored: {}]",
        human(r.vertices as f64),
        human(r.edges as f64),
        human(r.faces as f64),
        human(r.cells as f64),
        bytes(r.topology_bytes as f64),
        bytes(r.table_3_1_bytes as f64),
        bytes((r.topology_bytes + 24 * r.vertices) as f64),
    );
    if let Some(i) = r.paper_mesh.and_then(paper_index) {
        let p = TABLE_3_1[i];
        println!(
            "paper: V {}  E {}  F {}  C {}   ours {}, OVM {}   (Table 3.1, row {} level 0)",
            human(p.vertices),
            human(p.edges),
            human(p.faces),
            human(p.cells),
            bytes(p.ours_bytes),
            bytes(p.ovm_bytes),
            PAPER_MESHES[i],
        );
    }
    let col = r.paper_mesh.map_or("-".to_string(), |p| p.to_string());
    println!(
        "{:<28} {:>5} {:>12} {:>12} {:>11} {:>11}   (ms; median of {} runs; paper column: {col})",
        "operation",
        "table",
        "1 thread",
        format!("{} threads", r.threads),
        "paper CPU",
        "paper OVM",
        r.runs
    );
    for o in &r.ops {
        let name = if o.name == "Laplacian Smoothing" {
            format!("{} ({SMOOTH_ITERATIONS} it.)", o.name)
        } else {
            o.name.to_string()
        };
        println!(
            "{:<28} {:>5} {:>12} {:>12} {:>11} {:>11}",
            name,
            o.table,
            ms(Some(o.ms_1_thread)),
            ms(Some(o.ms_all_threads)),
            ms(o.paper_cpu_ms),
            ms(o.paper_ovm_ms)
        );
    }
    println!();
}

pub fn run(a: BenchMeshArgs) -> anyhow::Result<()> {
    let pools = [
        (rayon::ThreadPoolBuilder::new().num_threads(1).build()?, Par::Seq),
        (rayon::ThreadPoolBuilder::new().build()?, Par::Rayon),
    ];
    let mut results = Vec::new();
    if a.files.is_empty() {
        let t = Instant::now();
        let mesh = tessera_mesh::generate::bracket(a.resolution)?;
        let gen_s = t.elapsed().as_secs_f64();
        if !a.json {
            println!("generated bracket (resolution {}) in {gen_s:.2} s", a.resolution);
        }
        results.push(bench_one(format!("bracket (resolution {})", a.resolution), &mesh, &pools, a.runs));
        if !a.json {
            print_table(results.last().unwrap());
        }
    }
    for path in &a.files {
        let mesh = tessera_mesh::io::read_mesh(path).with_context(|| format!("reading {}", path.display()))?.mesh;
        let name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
        results.push(bench_one(name, &mesh, &pools, a.runs));
        if !a.json {
            print_table(results.last().unwrap());
        }
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&results)?);
    }
    Ok(())
}
