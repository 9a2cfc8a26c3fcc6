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
//! With `--device cuda[:N]` (or `auto` when a CUDA device is usable) GPU columns are added:
//! the median of at least 20 CUDA-event runs after warm-up per operation
//! (`tessera_mesh::cuda::bench::run_gpu_mesh_bench`), the bytes each kernel must move at
//! least, the resulting bandwidth as a fraction of the H100's measured copy bandwidth
//! ([`COPY_BANDWIDTH`]), the dissertation's GTX 1080 figures and our speed-up over them.
//!
//! Volumetric Catmull-Clark subdivision (dissertation §3.5.3, Table 3.4): per level, the
//! pre-computation of the relations the subdivision needs (`subdivide::precompute`) and the
//! total (pre-computation + subdivision, `subdivide::catmull_clark` on a mesh without cached
//! relations), with 1 thread and all threads, beside the dissertation's CPU, GPU and OVM
//! rows. Levels: `--levels N`, or automatically every level whose output has fewer than
//! `--max-entities` vertices, edges, faces and cells each (default 60 M; this gives the
//! dissertation's levels: armadillo 1-4, bunny 1-3, dragon 1).
//!
//! The table of operations ([`OPS`]) and of the dissertation's figures ([`PaperOp`],
//! [`TABLE_3_1`], [`TABLE_3_4`]) drive the output.

use anyhow::Context;
use clap::Args;
use serde::Serialize;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::Instant;
use tessera_core::{DeviceChoice, Par};
use tessera_mesh::boundary::extract_boundary;
use tessera_mesh::relations::{
    compute_cell_edges, compute_cell_vertices, compute_face_cells, compute_face_vertices,
    transpose_edge_vertices,
};
use tessera_mesh::smooth::smoothed_positions;
use tessera_mesh::subdivide::{catmull_clark, precompute, subdivision_counts, SubdivisionCounts};
use tessera_mesh::PolyMesh;

use crate::device::{resolve, Backend};

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
    /// Print one JSON document (an array with one object per mesh) instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Where to add GPU columns: auto (CUDA device 0 when usable), cpu (CPU columns only),
    /// cuda or cuda:N. The CPU columns are always measured.
    #[arg(long, default_value = "auto", value_name = "DEVICE")]
    pub device: DeviceChoice,
    /// Catmull-Clark levels to time (Table 3.4); 0 skips subdivision. Default: every level
    /// whose output stays under --max-entities.
    #[arg(long)]
    pub levels: Option<usize>,
    /// Automatic level count: subdivide while every entity count (vertices, edges, faces,
    /// cells) of the next level's output stays below this.
    #[arg(long, default_value_t = 60_000_000)]
    pub max_entities: usize,
    /// Timed CPU runs per subdivision figure (median; after one warm-up run). Large levels
    /// take seconds each, hence a separate, smaller default than --runs.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub subdivision_runs: u32,
    /// Thread counts of the CPU columns (comma-separated; 1 runs the sequential path).
    /// Default: 1 and all cores. The first is the "1 thread" column, the last the
    /// "all threads" column of the tables and of the JSON report.
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..))]
    pub threads: Vec<u32>,
    /// OpenVolumeMesh figures measured on this machine (JSON written by
    /// `scripts/bench-mesh-ovm.sh`, one object or an array), laid beside ours with the
    /// ratio OVM / ours; matched to a mesh by its vertex, edge, face and cell counts.
    #[arg(long, value_name = "FILE.json")]
    pub peer_ovm: Vec<PathBuf>,
    /// Pin worker i of each CPU thread pool to CPU i (Linux), so that the scheduler cannot
    /// run two workers of a pool on one CPU (on a 2-vCPU machine it often did, for whole
    /// runs of a few milliseconds).
    #[arg(long)]
    pub pin: bool,
}

/// OpenVolumeMesh figures of one mesh (the JSON of `scripts/ovm-peer/ovm_peer.cc`).
#[derive(serde::Deserialize, Debug, Clone)]
pub struct PeerOvm {
    pub mesh: String,
    pub vertices: usize,
    pub edges: usize,
    pub faces: usize,
    pub cells: usize,
    pub runs: u32,
    /// Medians of the wall-clock time per operation (our operation names).
    pub ops_ms: std::collections::BTreeMap<String, f64>,
    /// Medians of the thread's CPU time per operation.
    #[serde(default)]
    pub ops_cpu_ms: std::collections::BTreeMap<String, f64>,
}

fn read_peers(files: &[PathBuf]) -> anyhow::Result<Vec<PeerOvm>> {
    let mut out = Vec::new();
    for f in files {
        // a regular file within the input limits (tessera_core::input)
        let bytes = tessera_core::input::read_file(f)?;
        let text = String::from_utf8_lossy(&bytes);
        let v: serde_json::Value =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", f.display()))?;
        let items = match v {
            serde_json::Value::Array(a) => a,
            o => vec![o],
        };
        for it in items {
            out.push(
                serde_json::from_value(it)
                    .with_context(|| format!("{}: not an OVM peer record", f.display()))?,
            );
        }
    }
    Ok(out)
}

/// Measured device-to-device copy bandwidth of the H100 the GPU columns are set against
/// (bytes/s; issue text: "about 3.0 TB/s").
pub const COPY_BANDWIDTH: f64 = 3.0e12;

/// Timed GPU runs per figure (CUDA events; the median is reported).
pub const GPU_RUNS: usize = 20;

/// The GPU benchmark row (`run_gpu_mesh_bench` names) of each operation of [`OPS`].
const GPU_ROW: [(&str, &str); 8] = [
    ("Transpose Cells", "coboundary d3 (face_cells)"),
    ("Transpose Faces", "coboundary d2 (edge_faces)"),
    ("Transpose Edges", "coboundary d1 (vertex_edges)"),
    ("Cell Edges", "cell_edges"),
    ("Cell Vertices", "cell_vertices"),
    ("Face Vertices", "face_vertices"),
    ("Surface Extraction", "boundary"),
    ("Laplacian Smoothing", "laplacian smoothing x10"),
];

/// A level of dissertation Table 3.4: times in ms for armadillo, bunny, dragon (`None`: "—").
#[derive(Clone, Copy, Debug)]
pub struct PaperLevel {
    pub cpu_pre: [Option<f64>; 3],
    pub cpu_total: [Option<f64>; 3],
    pub gpu_pre: [Option<f64>; 3],
    pub gpu_total: [Option<f64>; 3],
    /// OVM (level 1 only).
    pub ovm: [Option<f64>; 3],
}

const NO: [Option<f64>; 3] = [None, None, None];

/// Dissertation Table 3.4, levels 1-4 (volumetric Catmull-Clark subdivision, GTX 1080 GPU).
pub const TABLE_3_4: [PaperLevel; 4] = [
    PaperLevel {
        cpu_pre: [Some(7.50), Some(120.0), Some(2692.0)],
        cpu_total: [Some(13.4), Some(159.0), Some(3844.0)],
        gpu_pre: [Some(6.33), Some(57.3), Some(553.0)],
        gpu_total: [Some(8.71), Some(66.6), Some(754.0)],
        ovm: [Some(392.0), Some(7058.0), Some(125_625.0)],
    },
    PaperLevel {
        cpu_pre: [Some(33.9), Some(611.0), None],
        cpu_total: [Some(60.7), Some(1010.0), None],
        gpu_pre: [Some(13.8), Some(173.0), None],
        gpu_total: [Some(18.3), Some(236.0), None],
        ovm: NO,
    },
    PaperLevel {
        cpu_pre: [Some(294.0), Some(4847.0), None],
        cpu_total: [Some(487.0), Some(8013.0), None],
        gpu_pre: [Some(93.1), Some(1036.0), None],
        gpu_total: [Some(121.0), Some(1401.0), None],
        ovm: NO,
    },
    PaperLevel {
        cpu_pre: [Some(2333.0), None, None],
        cpu_total: [Some(3868.0), None, None],
        gpu_pre: [Some(537.0), None, None],
        gpu_total: [Some(717.0), None, None],
        ovm: NO,
    },
];

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
    PaperSize {
        vertices: 1.01e3,
        edges: 5.08e3,
        faces: 7.23e3,
        cells: 3.16e3,
        ovm_bytes: 348.0 * KI,
        ours_bytes: 226.0 * KI,
    },
    PaperSize {
        vertices: 10.7e3,
        edges: 64.7e3,
        faces: 104e3,
        cells: 50e3,
        ovm_bytes: 4.92 * MI,
        ours_bytes: 3.16 * MI,
    },
    PaperSize {
        vertices: 232e3,
        edges: 1.21e6,
        faces: 1.80e6,
        cells: 825e3,
        ovm_bytes: 85.1 * MI,
        ours_bytes: 55.0 * MI,
    },
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
        paper: PaperOp {
            table: "3.2",
            cpu: [0.20, 2.49, 114.0],
            gpu: [0.22, 0.70, 14.0],
            ovm: [19.6, 372.0, 6788.0],
        },
        setup: Setup::None,
        run: |m, par| {
            black_box(compute_face_cells(m, par));
        },
    },
    Op {
        name: "Transpose Faces",
        paper: PaperOp {
            table: "3.2",
            cpu: [0.26, 3.07, 65.6],
            gpu: [0.20, 1.17, 7.02],
            ovm: [3.19, 56.3, 1424.0],
        },
        setup: Setup::None,
        run: |m, par| {
            black_box(m.face_edges().transpose(par));
        },
    },
    Op {
        name: "Transpose Edges",
        paper: PaperOp {
            table: "3.2",
            cpu: [0.16, 1.71, 35.9],
            gpu: [0.72, 0.58, 4.11],
            ovm: [0.62, 5.73, 184.0],
        },
        setup: Setup::None,
        run: |m, par| {
            black_box(transpose_edge_vertices(
                m.edge_vertices(),
                m.num_vertices(),
                par,
            ));
        },
    },
    Op {
        name: "Cell Edges",
        paper: PaperOp {
            table: "3.2",
            cpu: [3.08, 46.7, 935.0],
            gpu: [0.98, 22.2, 237.0],
            ovm: [1.91, 34.1, 691.0],
        },
        setup: Setup::None,
        run: |m, par| {
            black_box(compute_cell_edges(m, par));
        },
    },
    Op {
        name: "Cell Vertices",
        paper: PaperOp {
            table: "3.2",
            cpu: [3.74, 57.2, 1236.0],
            gpu: [2.72, 25.1, 261.0],
            ovm: [3.90, 65.5, 1369.0],
        },
        setup: Setup::None,
        run: |m, par| {
            black_box(compute_cell_vertices(m, par));
        },
    },
    Op {
        name: "Face Vertices",
        paper: PaperOp {
            table: "3.2",
            cpu: [0.05, 0.85, 17.3],
            gpu: [0.12, 0.44, 1.88],
            ovm: [2.08, 26.3, 558.0],
        },
        setup: Setup::None,
        run: |m, par| {
            black_box(compute_face_vertices(m, par));
        },
    },
    Op {
        name: "Surface Extraction",
        paper: PaperOp {
            table: "3.3",
            cpu: [0.03, 0.28, 5.13],
            gpu: [1.13, 1.15, 2.83],
            ovm: [0.15, 1.21, 22.7],
        },
        setup: Setup::FaceCells,
        run: |m, _| {
            black_box(extract_boundary(m));
        },
    },
    Op {
        name: "Laplacian Smoothing",
        paper: PaperOp {
            table: "3.3",
            cpu: [0.54, 21.4, 860.0],
            gpu: [3.58, 4.48, 116.0],
            ovm: [19.0, 1026.0, 33474.0],
        },
        setup: Setup::FaceCellsVertexEdges,
        run: |m, _| {
            black_box(smoothed_positions(m, SMOOTH_ITERATIONS));
        },
    },
];

/// GPU figures of one operation (CUDA events, median of >= 20 runs after warm-up).
#[derive(Serialize, Debug, Clone)]
struct GpuFigure {
    ms: f64,
    /// Bytes the kernels must move at least (inputs read once, outputs written once).
    bytes: u64,
    /// bytes / time in GB/s (1e9 bytes per second).
    gb_per_s: f64,
    /// gb_per_s as a fraction of [`COPY_BANDWIDTH`].
    fraction_of_copy_bandwidth: f64,
}

impl GpuFigure {
    fn new(ms: f64, bytes: u64) -> Self {
        let bps = if ms > 0.0 {
            bytes as f64 / (ms * 1e-3)
        } else {
            0.0
        };
        GpuFigure {
            ms,
            bytes,
            gb_per_s: bps / 1e9,
            fraction_of_copy_bandwidth: bps / COPY_BANDWIDTH,
        }
    }
}

/// One thread count of the CPU columns.
#[derive(Serialize, Debug, Clone)]
struct ThreadFigure {
    threads: usize,
    ms: f64,
}

/// OpenVolumeMesh's figure for one operation, measured on this machine (`--peer-ovm`).
#[derive(Serialize, Debug, Clone)]
struct PeerFigure {
    ovm_ms: f64,
    ovm_cpu_ms: Option<f64>,
    /// OVM wall time / ours (1 thread).
    ovm_over_ours: f64,
    /// OVM CPU time / ours (1 thread), when both are known.
    ovm_over_ours_cpu: Option<f64>,
    /// Our 1-thread figure the ratios use (for smoothing: the iterations only, as OVM's).
    ours_ms: f64,
    ours_cpu_ms: Option<f64>,
}

#[derive(Serialize, Debug)]
struct OpResult {
    name: &'static str,
    table: &'static str,
    ms_1_thread: f64,
    ms_all_threads: f64,
    /// CPU time of the 1-thread run (median), when known.
    cpu_ms_1_thread: Option<f64>,
    /// Every `--threads` column.
    threads_ms: Vec<ThreadFigure>,
    /// Smoothing only: the iterations without the boundary mask and buffer setup (the
    /// difference of the medians of 10 and 0 iterations), 1 thread.
    iterations_ms_1_thread: Option<f64>,
    iterations_cpu_ms_1_thread: Option<f64>,
    /// OpenVolumeMesh on this machine (`--peer-ovm`).
    peer_ovm: Option<PeerFigure>,
    gpu: Option<GpuFigure>,
    paper_cpu_ms: Option<f64>,
    paper_gpu_ms: Option<f64>,
    paper_ovm_ms: Option<f64>,
    /// paper GPU (GTX 1080) ms / our GPU ms.
    gpu_speedup_over_paper_gpu: Option<f64>,
}

/// A GPU row with no counterpart in the dissertation's tables (e.g. simplex derivation).
#[derive(Serialize, Debug)]
struct ExtraGpuRow {
    name: String,
    gpu: GpuFigure,
}

/// One Catmull-Clark level (Table 3.4).
#[derive(Serialize, Debug)]
struct LevelResult {
    level: usize,
    /// Counts of the level's output mesh.
    output: SubdivisionCounts,
    pre_ms_1_thread: f64,
    total_ms_1_thread: f64,
    pre_ms_all_threads: f64,
    total_ms_all_threads: f64,
    gpu_pre: Option<GpuFigure>,
    gpu_total: Option<GpuFigure>,
    paper_cpu_pre_ms: Option<f64>,
    paper_cpu_total_ms: Option<f64>,
    paper_gpu_pre_ms: Option<f64>,
    paper_gpu_total_ms: Option<f64>,
    paper_ovm_ms: Option<f64>,
    /// paper GPU total / our GPU total.
    gpu_speedup_over_paper_gpu: Option<f64>,
    /// paper CPU total (serial) / our all-threads CPU total.
    cpu_speedup_over_paper_cpu: Option<f64>,
}

#[derive(Serialize, Debug)]
struct SubdivisionResult {
    /// `--levels`, or "auto (max entities N)".
    levels_rule: String,
    runs: u32,
    levels: Vec<LevelResult>,
    /// Why there is no GPU column when a GPU was used ("not available in this build", or
    /// the error), `None` when the GPU column is there or no GPU was used.
    gpu_note: Option<String>,
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
    /// Whether the CPU pools' workers were pinned to CPUs (`--pin`).
    pinned: bool,
    runs: u32,
    smoothing_iterations: usize,
    /// `cpu (N threads)` or the GPU's description.
    device: String,
    /// The GPU the GPU columns come from, if any.
    gpu_device: Option<String>,
    /// The error of the GPU benchmark, if it failed (the CPU columns are still reported).
    gpu_error: Option<String>,
    gpu_runs: Option<usize>,
    copy_bandwidth_bytes_per_s: f64,
    /// The `--peer-ovm` record matched to this mesh: its name and runs per figure.
    peer_ovm_mesh: Option<String>,
    peer_ovm_runs: Option<u32>,
    ops: Vec<OpResult>,
    extra_gpu_ops: Vec<ExtraGpuRow>,
    subdivision: SubdivisionResult,
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

/// CPU time of the calling thread in ns (`clock_gettime(CLOCK_THREAD_CPUTIME_ID)`), if
/// known.
fn thread_cpu_ns() -> Option<u64> {
    tessera_core::trace::thread_cpu_ns()
}

/// Medians in ms of `runs` runs of `op` on `mesh` (after one warm-up), in `pool`: wall
/// clock, and the CPU time of the pool thread when the pool has one thread (robust on a
/// shared machine; `None` when unknown).
fn time_op(
    pool: &rayon::ThreadPool,
    op: &Op,
    mesh: &PolyMesh,
    par: Par,
    runs: u32,
) -> (f64, Option<f64>) {
    time_op_iterations(pool, op, mesh, par, runs, op.run)
}

/// As [`time_op`] with `run` in place of the operation's own function.
fn time_op_iterations(
    pool: &rayon::ThreadPool,
    op: &Op,
    mesh: &PolyMesh,
    par: Par,
    runs: u32,
    run: fn(&PolyMesh, Par),
) -> (f64, Option<f64>) {
    let one = pool.current_num_threads() == 1;
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
        run(m, par);
        let mut cpu = Vec::new();
        let times: Vec<f64> = (0..runs)
            .map(|_| {
                let c0 = thread_cpu_ns();
                let t = Instant::now();
                run(m, par);
                let ms = t.elapsed().as_secs_f64() * 1e3;
                if let (true, Some(a), Some(b)) = (one, c0, thread_cpu_ns()) {
                    cpu.push((b - a) as f64 * 1e-6);
                }
                ms
            })
            .collect();
        let cpu = (cpu.len() == times.len()).then(|| median(cpu));
        (median(times), cpu)
    })
}

fn paper_index(name: &str) -> Option<usize> {
    let lower = name.to_ascii_lowercase();
    PAPER_MESHES.iter().position(|p| lower.contains(p))
}

/// Median times in ms of `runs` runs (after one warm-up) of the pre-computation and of the
/// total (pre-computation + subdivision) of one Catmull-Clark level from `input`, each run on
/// a fresh copy without cached relations (the copy is not timed). Returns the pre and total
/// medians and the subdivided mesh of the last run.
fn time_level(
    pool: &rayon::ThreadPool,
    input: &PolyMesh,
    par: Par,
    runs: u32,
) -> anyhow::Result<(f64, f64, PolyMesh)> {
    pool.install(|| {
        let fresh = || {
            let mut c = input.clone();
            c.purge_caches();
            c.set_par(par);
            c
        };
        let mut pre = Vec::with_capacity(runs as usize);
        for r in 0..=runs {
            let c = fresh();
            let t = Instant::now();
            precompute(&c);
            let ms = t.elapsed().as_secs_f64() * 1e3;
            if r > 0 {
                pre.push(ms);
            }
        }
        let mut total = Vec::with_capacity(runs as usize);
        let mut out = None;
        for r in 0..=runs {
            let c = fresh();
            let t = Instant::now();
            let next = catmull_clark(&c)?;
            let ms = t.elapsed().as_secs_f64() * 1e3;
            if r > 0 {
                total.push(ms);
            }
            out = Some(next);
        }
        let out = out.expect("at least one run");
        Ok((median(pre), median(total), out))
    })
}

/// The Catmull-Clark levels to time on `mesh`: `--levels`, or every level whose output has
/// fewer than `max_entities` of each entity kind (counts from Eqs. 3.1-3.4 before
/// subdividing). Returns the level count and the rule as text.
fn level_rule(levels: Option<usize>, max_entities: usize) -> String {
    match levels {
        Some(n) => format!("--levels {n}"),
        None => format!("auto (every entity count of the output < {max_entities})"),
    }
}

fn fits(c: &SubdivisionCounts, max_entities: usize) -> bool {
    c.vertices.max(c.edges).max(c.faces).max(c.cells) < max_entities
}

/// GPU Catmull-Clark rows (`"precompute"`, `"level N total"`) from helper H11's
/// `tessera_mesh::cuda::subdivide::bench_catmull_clark_gpu`, or why there are none.
fn gpu_subdivision(
    gpu: &tessera_gpu::Gpu,
    mesh: &PolyMesh,
    levels: usize,
) -> Result<Vec<(String, f64, u64)>, String> {
    tessera_mesh::cuda::subdivide::bench_catmull_clark_gpu(gpu, mesh, levels, GPU_RUNS)
        .map_err(|e| e.to_string())
}

fn bench_subdivision(
    mesh: &PolyMesh,
    pi: Option<usize>,
    pools: &[(rayon::ThreadPool, Par)],
    gpu: Option<&tessera_gpu::Gpu>,
    a: &BenchMeshArgs,
) -> anyhow::Result<SubdivisionResult> {
    let mut levels = Vec::new();
    let last = pools.last().expect("at least one thread count");
    let mut cur = mesh.clone();
    cur.purge_caches();
    let mut level = 0usize;
    loop {
        level += 1;
        match a.levels {
            Some(n) if level > n => break,
            Some(_) => {}
            None => {
                let mut probe = cur.clone();
                probe.set_par(Par::Rayon);
                let predicted = last.0.install(|| subdivision_counts(&probe));
                if !fits(&predicted, a.max_entities) {
                    break;
                }
            }
        }
        let (pre1, tot1, _) = time_level(&pools[0].0, &cur, pools[0].1, a.subdivision_runs)?;
        let (pre_n, tot_n, next) = time_level(&last.0, &cur, last.1, a.subdivision_runs)?;
        let paper = TABLE_3_4.get(level - 1);
        let pick =
            |f: fn(&PaperLevel) -> [Option<f64>; 3]| pi.and_then(|i| paper.and_then(|p| f(p)[i]));
        let paper_cpu_total_ms = pick(|p| p.cpu_total);
        levels.push(LevelResult {
            level,
            output: SubdivisionCounts::of(&next),
            pre_ms_1_thread: pre1,
            total_ms_1_thread: tot1,
            pre_ms_all_threads: pre_n,
            total_ms_all_threads: tot_n,
            gpu_pre: None,
            gpu_total: None,
            paper_cpu_pre_ms: pick(|p| p.cpu_pre),
            paper_cpu_total_ms,
            paper_gpu_pre_ms: pick(|p| p.gpu_pre),
            paper_gpu_total_ms: pick(|p| p.gpu_total),
            paper_ovm_ms: pick(|p| p.ovm),
            gpu_speedup_over_paper_gpu: None,
            cpu_speedup_over_paper_cpu: paper_cpu_total_ms.map(|p| p / tot_n),
        });
        cur = next;
        cur.purge_caches();
    }
    drop(cur);
    let mut gpu_note = None;
    if let Some(g) = gpu {
        if !levels.is_empty() {
            match gpu_subdivision(g, mesh, levels.len()) {
                Ok(rows) => {
                    for (name, ms, bytes) in rows {
                        let fig = GpuFigure::new(ms, bytes);
                        if name == "precompute" {
                            levels[0].gpu_pre = Some(fig);
                        } else if let Some(l) = name
                            .strip_prefix("level ")
                            .and_then(|r| r.strip_suffix(" total"))
                            .and_then(|n| n.parse::<usize>().ok())
                        {
                            if let Some(lr) = levels.get_mut(l.wrapping_sub(1)) {
                                lr.gpu_speedup_over_paper_gpu =
                                    lr.paper_gpu_total_ms.map(|p| p / fig.ms);
                                lr.gpu_total = Some(fig);
                            }
                        }
                    }
                }
                Err(e) => gpu_note = Some(e),
            }
        }
    }
    Ok(SubdivisionResult {
        levels_rule: level_rule(a.levels, a.max_entities),
        runs: a.subdivision_runs,
        levels,
        gpu_note,
    })
}

fn bench_one(
    name: String,
    mesh: &PolyMesh,
    pools: &[(rayon::ThreadPool, Par)],
    backend: &Backend,
    a: &BenchMeshArgs,
    pb: &indicatif::ProgressBar,
    peers: &[PeerOvm],
) -> anyhow::Result<MeshResult> {
    let pi = paper_index(&name);
    let runs = a.runs;
    let peer = peers.iter().find(|p| {
        (p.vertices, p.edges, p.faces, p.cells)
            == (
                mesh.num_vertices(),
                mesh.num_edges(),
                mesh.num_faces(),
                mesh.num_cells(),
            )
    });
    let mut ops: Vec<OpResult> = OPS
        .iter()
        .map(|op| {
            let figs: Vec<(f64, Option<f64>)> = pools
                .iter()
                .map(|(pool, par)| {
                    pb.set_message(format!(
                        "{name}: {} ({} thr.)",
                        op.name,
                        pool.current_num_threads()
                    ));
                    time_op(pool, op, mesh, *par, runs)
                })
                .collect();
            let threads_ms = pools
                .iter()
                .zip(&figs)
                .map(|((pool, _), f)| ThreadFigure {
                    threads: pool.current_num_threads(),
                    ms: f.0,
                })
                .collect();
            // smoothing: the iterations alone = median(10 iterations) - median(0 iterations)
            let iterations = (op.name == "Laplacian Smoothing").then(|| {
                let (pool, par) = &pools[0];
                let none = time_op_iterations(pool, op, mesh, *par, runs, |m, _| {
                    black_box(smoothed_positions(m, 0));
                });
                (
                    (figs[0].0 - none.0).max(0.0),
                    figs[0].1.zip(none.1).map(|(a, b)| (a - b).max(0.0)),
                )
            });
            let peer_ovm = peer.and_then(|p| {
                let ovm_ms = *p.ops_ms.get(op.name)?;
                let ovm_cpu_ms = p.ops_cpu_ms.get(op.name).copied();
                let (ours_ms, ours_cpu_ms) = iterations.unwrap_or(figs[0]);
                Some(PeerFigure {
                    ovm_ms,
                    ovm_cpu_ms,
                    ovm_over_ours: ovm_ms / ours_ms,
                    ovm_over_ours_cpu: ovm_cpu_ms.zip(ours_cpu_ms).map(|(o, u)| o / u),
                    ours_ms,
                    ours_cpu_ms,
                })
            });
            OpResult {
                name: op.name,
                table: op.paper.table,
                ms_1_thread: figs[0].0,
                ms_all_threads: figs.last().expect("at least one thread count").0,
                cpu_ms_1_thread: figs[0].1,
                threads_ms,
                iterations_ms_1_thread: iterations.map(|i| i.0),
                iterations_cpu_ms_1_thread: iterations.and_then(|i| i.1),
                peer_ovm,
                gpu: None,
                paper_cpu_ms: pi.map(|i| op.paper.cpu[i]),
                paper_gpu_ms: pi.map(|i| op.paper.gpu[i]),
                paper_ovm_ms: pi.map(|i| op.paper.ovm[i]),
                gpu_speedup_over_paper_gpu: None,
            }
        })
        .collect();
    let mut extra_gpu_ops = Vec::new();
    let mut gpu_error = None;
    if let Some(g) = backend.gpu() {
        pb.set_message(format!("{name}: GPU operations"));
        // on a copy: the GPU benchmark fills the relation caches of the mesh it is given
        let copy = mesh.clone();
        match tessera_mesh::cuda::bench::run_gpu_mesh_bench(g, &copy, GPU_RUNS) {
            Ok(rows) => {
                for (row, ms, bytes) in rows {
                    let fig = GpuFigure::new(ms, bytes);
                    match GPU_ROW
                        .iter()
                        .find(|(_, r)| *r == row)
                        .and_then(|(op, _)| ops.iter_mut().find(|o| o.name == *op))
                    {
                        Some(o) => {
                            o.gpu_speedup_over_paper_gpu = o.paper_gpu_ms.map(|p| p / fig.ms);
                            o.gpu = Some(fig);
                        }
                        None => extra_gpu_ops.push(ExtraGpuRow {
                            name: row.to_string(),
                            gpu: fig,
                        }),
                    }
                }
            }
            Err(e) => gpu_error = Some(e.to_string()),
        }
    }
    pb.set_message(format!("{name}: subdivision"));
    let subdivision = bench_subdivision(mesh, pi, pools, backend.gpu().map(|g| &**g), a)?;
    Ok(MeshResult {
        paper_mesh: pi.map(|i| PAPER_MESHES[i]),
        vertices: mesh.num_vertices(),
        edges: mesh.num_edges(),
        faces: mesh.num_faces(),
        cells: mesh.num_cells(),
        topology_bytes: mesh.topology_bytes(),
        table_3_1_bytes: mesh.topology_bytes() + 12 * mesh.num_vertices(),
        paper_ours_bytes: pi.map(|i| TABLE_3_1[i].ours_bytes),
        paper_ovm_bytes: pi.map(|i| TABLE_3_1[i].ovm_bytes),
        threads: pools.last().expect("a pool").0.current_num_threads(),
        pinned: a.pin,
        runs,
        smoothing_iterations: SMOOTH_ITERATIONS,
        device: backend.describe(),
        gpu_device: backend.gpu().map(|g| g.describe()),
        gpu_error,
        gpu_runs: backend.gpu().map(|_| GPU_RUNS),
        copy_bandwidth_bytes_per_s: COPY_BANDWIDTH,
        peer_ovm_mesh: peer.map(|p| p.mesh.clone()),
        peer_ovm_runs: peer.map(|p| p.runs),
        ops,
        extra_gpu_ops,
        subdivision,
        mesh: name,
    })
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
    x.map_or_else(
        || "-".into(),
        |v| {
            if v >= 100.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.3}")
            }
        },
    )
}

fn opt(x: Option<f64>, f: impl Fn(f64) -> String) -> String {
    x.map_or_else(|| "-".into(), f)
}

fn speedup(x: Option<f64>) -> String {
    opt(x, |v| format!("{v:.1}x"))
}

fn gpu_cols(g: &Option<GpuFigure>) -> (String, String, String) {
    match g {
        Some(g) => (
            ms(Some(g.ms)),
            bytes(g.bytes as f64),
            format!("{:.1}%", 100.0 * g.fraction_of_copy_bandwidth),
        ),
        None => ("-".into(), "-".into(), "-".into()),
    }
}

fn print_table(r: &MeshResult) {
    println!(
        "== {} =={}",
        r.mesh,
        if r.pinned {
            "  (CPU pool workers pinned)"
        } else {
            ""
        }
    );
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
    let gpu = r.gpu_device.is_some();
    match (&r.gpu_device, &r.gpu_error) {
        (Some(d), None) => println!(
            "GPU: {d}; GPU ms = median of {} CUDA-event runs after warm-up; bytes = what the kernels must move at least; %BW = of {:.1} TB/s copy bandwidth; paper GPU = GTX 1080",
            r.gpu_runs.unwrap_or(GPU_RUNS),
            COPY_BANDWIDTH / 1e12
        ),
        (Some(d), Some(e)) => println!("GPU: {d}: the GPU benchmark failed: {e}"),
        (None, _) => {}
    }
    let threads: Vec<usize> = r
        .ops
        .first()
        .map(|o| o.threads_ms.iter().map(|t| t.threads).collect())
        .unwrap_or_default();
    let peer = r.ops.iter().any(|o| o.peer_ovm.is_some());
    let mut head = format!("{:<28} {:>5}", "operation", "table");
    for t in &threads {
        head += &format!(" {:>10}", format!("{t} thr."));
    }
    head += &format!(" {:>10} {:>10}", "paper CPU", "paper OVM");
    if peer {
        head += &format!(
            " {:>10} {:>9} {:>10} {:>10} {:>9}",
            "OVM here", "OVM/ours", "CPU: ours", "OVM", "OVM/ours"
        );
    }
    if gpu {
        head += &format!(
            " {:>10} {:>10} {:>7} {:>10} {:>8}",
            "GPU", "bytes", "%BW", "paper GPU", "speed-up"
        );
    }
    println!(
        "{head}   (ms; CPU: median of {} runs; paper column: {col})",
        r.runs
    );
    for o in &r.ops {
        let name = if o.name == "Laplacian Smoothing" {
            format!("{} ({SMOOTH_ITERATIONS} it.)", o.name)
        } else {
            o.name.to_string()
        };
        let mut line = format!("{:<28} {:>5}", name, o.table);
        for t in &o.threads_ms {
            line += &format!(" {:>10}", ms(Some(t.ms)));
        }
        line += &format!(" {:>10} {:>10}", ms(o.paper_cpu_ms), ms(o.paper_ovm_ms));
        if peer {
            match &o.peer_ovm {
                Some(p) => {
                    line += &format!(
                        " {:>10} {:>9} {:>10} {:>10} {:>9}",
                        ms(Some(p.ovm_ms)),
                        speedup(Some(p.ovm_over_ours)),
                        ms(p.ours_cpu_ms),
                        ms(p.ovm_cpu_ms),
                        speedup(p.ovm_over_ours_cpu)
                    )
                }
                None => {
                    line += &format!(" {:>10} {:>9} {:>10} {:>10} {:>9}", "-", "-", "-", "-", "-")
                }
            }
        }
        if gpu {
            let (g, b, f) = gpu_cols(&o.gpu);
            line += &format!(
                " {g:>10} {b:>10} {f:>7} {:>10} {:>8}",
                ms(o.paper_gpu_ms),
                speedup(o.gpu_speedup_over_paper_gpu)
            );
        }
        println!("{line}");
    }
    if peer {
        println!(
            "OVM here = OpenVolumeMesh on this machine (--peer-ovm: `{}`, median of {} runs), 1 thread, wall clock; CPU columns = the thread's CPU time (1 thread). Smoothing compares the iterations only ({}: ours {} ms).",
            r.peer_ovm_mesh.as_deref().unwrap_or("-"),
            r.peer_ovm_runs.unwrap_or(0),
            "median(10 it.) - median(0 it.)",
            ms(r.ops.iter().find_map(|o| o.iterations_ms_1_thread))
        );
    }
    for x in &r.extra_gpu_ops {
        let (g, b, f) = gpu_cols(&Some(x.gpu.clone()));
        println!(
            "{:<50} GPU {g} ms, {b}, {f} of copy bandwidth (no dissertation figure)",
            x.name
        );
    }
    let s = &r.subdivision;
    println!();
    println!(
        "Catmull-Clark subdivision (Table 3.4; levels: {}; CPU: median of {} runs; pre. = relations, total = pre. + subdivision)",
        s.levels_rule, s.runs
    );
    if gpu {
        match &s.gpu_note {
            Some(n) => println!("GPU subdivision: {n}"),
            None => println!("GPU subdivision: median of {GPU_RUNS} CUDA-event runs; the GPU pre. column is given for level 1"),
        }
    }
    let mut head = format!(
        "{:<4} {:<7} {:>9} {:>10} {:>10} {:>10} {:>10} {:>9}",
        "lvl",
        "row",
        "cells out",
        "1 thread",
        format!("{} thr.", r.threads),
        "paper CPU",
        "paper OVM",
        "vs p.CPU"
    );
    if gpu {
        head += &format!(
            " {:>10} {:>10} {:>7} {:>10} {:>8}",
            "GPU", "bytes", "%BW", "paper GPU", "speed-up"
        );
    }
    println!("{head}");
    for l in &s.levels {
        for (row, one, all, pcpu, ovm, vs, g, pgpu, sp) in [
            (
                "pre.",
                l.pre_ms_1_thread,
                l.pre_ms_all_threads,
                l.paper_cpu_pre_ms,
                None,
                None,
                &l.gpu_pre,
                l.paper_gpu_pre_ms,
                l.gpu_pre
                    .as_ref()
                    .and_then(|g| l.paper_gpu_pre_ms.map(|p| p / g.ms)),
            ),
            (
                "total",
                l.total_ms_1_thread,
                l.total_ms_all_threads,
                l.paper_cpu_total_ms,
                l.paper_ovm_ms,
                l.cpu_speedup_over_paper_cpu,
                &l.gpu_total,
                l.paper_gpu_total_ms,
                l.gpu_speedup_over_paper_gpu,
            ),
        ] {
            let cells = if row == "pre." {
                human(l.output.cells as f64)
            } else {
                String::new()
            };
            let mut line = format!(
                "{:<4} {:<7} {:>9} {:>10} {:>10} {:>10} {:>10} {:>9}",
                l.level,
                row,
                cells,
                ms(Some(one)),
                ms(Some(all)),
                ms(pcpu),
                ms(ovm),
                speedup(vs)
            );
            if gpu {
                let (gm, b, f) = gpu_cols(g);
                line += &format!(
                    " {gm:>10} {b:>10} {f:>7} {:>10} {:>8}",
                    ms(pgpu),
                    speedup(sp)
                );
            }
            println!("{line}");
        }
    }
    println!();
}

pub fn run(a: BenchMeshArgs) -> anyhow::Result<()> {
    let backend = resolve(a.device)?;
    let counts: Vec<usize> = if a.threads.is_empty() {
        vec![1, 0]
    } else {
        a.threads.iter().map(|&t| t as usize).collect()
    };
    let mut pools = Vec::with_capacity(counts.len());
    for &t in &counts {
        let pool = tessera_core::par::thread_pool(t, a.pin)?;
        let par = if pool.current_num_threads() == 1 {
            Par::Seq
        } else {
            Par::Rayon
        };
        pools.push((pool, par));
    }
    let peers = read_peers(&a.peer_ovm)?;
    let note = match (&backend, a.device) {
        (Backend::Cuda(g), _) => format!("GPU columns on {}", g.describe()),
        (Backend::Cpu, DeviceChoice::Cpu) => "--device cpu: CPU columns only".to_string(),
        (Backend::Cpu, _) => "no usable CUDA device (--device auto): CPU columns only".to_string(),
    };
    // one line on stderr with --json (stdout is the JSON document), on stdout otherwise
    if a.json {
        eprintln!("{note}");
    } else {
        println!("{note}");
    }
    let mut results = Vec::new();
    let total = if a.files.is_empty() { 1 } else { a.files.len() };
    let pb = crate::util::steps(a.json, total as u64, "meshes");
    if a.files.is_empty() {
        pb.set_message(format!(
            "generating a bracket (resolution {})",
            a.resolution
        ));
        let t = Instant::now();
        let mesh = tessera_mesh::generate::bracket(a.resolution)?;
        let gen_s = t.elapsed().as_secs_f64();
        if !a.json {
            println!(
                "generated bracket (resolution {}) in {gen_s:.2} s",
                a.resolution
            );
        }
        results.push(bench_one(
            format!("bracket (resolution {})", a.resolution),
            &mesh,
            &pools,
            &backend,
            &a,
            &pb,
            &peers,
        )?);
        pb.inc(1);
        if !a.json {
            pb.suspend(|| print_table(results.last().unwrap()));
        }
    }
    for path in &a.files {
        pb.set_message(format!("reading {}", path.display()));
        let mesh = tessera_mesh::io::read_mesh(path)
            .with_context(|| format!("reading {}", path.display()))?
            .mesh;
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        results.push(
            bench_one(name, &mesh, &pools, &backend, &a, &pb, &peers)
                .with_context(|| format!("benchmarking {}", path.display()))?,
        );
        pb.inc(1);
        if !a.json {
            pb.suspend(|| print_table(results.last().unwrap()));
        }
    }
    pb.finish_and_clear();
    if a.json {
        println!("{}", serde_json::to_string_pretty(&results)?);
    }
    Ok(())
}
