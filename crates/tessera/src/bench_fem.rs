//! `tessera bench fem`: FEM assembly stage times per dissertation Tables 4.1-4.3, beside the
//! dissertation's Quadro GP100 figures, with the Zayer et al. bound ratio and a serial
//! COO-sort assembly baseline.
//!
//! The benchmark is table-driven: every measurement is a [`Record`] of one backend on one
//! (mesh, order, summation); the printed tables are built from the records and the
//! reference tables below. A new backend (for example the CUDA kernels) is one more
//! [`Backend`] variant and one match arm in [`measure`].

use crate::cmd_fem::load_simplex_mesh;
use clap::Args;
use std::collections::BTreeMap;
use std::time::Instant;
use tessera_core::Par;
use tessera_fem::assemble::{assemble_stiffness, AssembleOptions, Assembly, Summation};
use tessera_fem::element::{sym_index, CellGeometry, ElementTemplate};
use tessera_fem::material::{Lame, Material};
use tessera_fem::nodes::HoMesh;

#[derive(Args, Debug)]
pub struct BenchFemArgs {
    /// Bracket resolutions to generate (ignored when --mesh is given). Default: 12,24 on the
    /// CPU; on CUDA the Table 4.1 sweep 22..130 (bracket(130) = 1.6M tets, p = 3 up to bracket(98) = 0.72M).
    #[arg(long, value_delimiter = ',')]
    pub resolutions: Vec<usize>,
    /// cpu (the CPU reference tables) or cuda[:N] / auto (the GPU columns of Tables 4.1-4.3).
    #[arg(long, default_value = "cpu")]
    pub device: tessera_core::DeviceChoice,
    /// Mesh files (or gen:bracket:N / gen:box:N) instead of generated brackets.
    #[arg(long)]
    pub mesh: Vec<String>,
    /// Polynomial orders.
    #[arg(long, value_delimiter = ',', default_values_t = vec![1usize, 2, 3])]
    pub orders: Vec<usize>,
    /// Repetitions per measurement (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
    /// Skip the serial COO-sort baseline.
    #[arg(long)]
    pub no_baseline: bool,
    /// Print the records as JSON lines instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// Where a measurement ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Backend {
    /// CPU reference, rayon threads.
    CpuRayon,
    /// CPU reference, one thread.
    CpuSeq,
    /// Serial COO assembly: element matrices, triplets, sort, reduce (our baseline).
    CooSortSerial,
}

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Backend::CpuRayon => "cpu-rayon",
            Backend::CpuSeq => "cpu-seq",
            Backend::CooSortSerial => "coo-sort-serial",
        }
    }
}

/// One measurement: median stage times in ms of one backend on one (mesh, p, summation).
#[derive(Clone, Debug)]
pub struct Record {
    pub mesh: String,
    pub tets: usize,
    pub vertices: usize,
    pub edges: usize,
    pub faces: usize,
    pub order: usize,
    pub backend: Backend,
    pub summation: Summation,
    pub block_nonzeros: u64,
    pub zayer_bound: u64,
    pub bytes_allocated: u64,
    pub padding_blocks: u64,
    pub aux_bytes: u64,
    pub stages_ms: BTreeMap<String, f64>,
}

/// Table 4.2 rows: our stage key and the dissertation's label.
const STAGES: [(&str, &str); 8] = [
    ("alloc_element_matrices", "Alloc. Elt.S."),
    ("count_contributions", "Count Contr."),
    ("bin_offsets", "Bin Offsets"),
    ("alloc_final", "Alloc. Final"),
    ("column_indices", "Col. Indices"),
    ("element_matrices", "Elt. Stiff"),
    ("summation", "Summation"),
    ("total", "Total"),
];

/// Dissertation Table 4.1/4.2 mesh sizes (tetrahedra).
const GP100_TETS: [f64; 11] = [
    7.7e3, 44.2e3, 90.6e3, 133.3e3, 213.4e3, 276.3e3, 367.6e3, 505.8e3, 719.1e3, 1.1e6, 1.7e6,
];

/// Dissertation Table 4.2 (Quadro GP100, ms), rows in [`STAGES`] order, per order p = 1, 2, 3
/// (p = 3 has only the first 9 meshes).
const GP100_STAGES: [[&[f64]; 8]; 3] = [
    [
        &[
            0.285, 0.812, 1.41, 1.99, 3.01, 3.8, 4.93, 6.66, 9.28, 11.5, 18.0,
        ],
        &[
            0.644, 0.475, 0.0894, 0.491, 0.479, 0.481, 0.135, 0.15, 0.544, 0.555, 1.01,
        ],
        &[
            0.961, 0.696, 0.515, 0.458, 1.63, 1.64, 1.69, 1.7, 1.08, 1.06, 1.43,
        ],
        &[
            0.0169, 0.466, 1.62, 1.57, 1.94, 2.68, 4.19, 5.41, 7.1, 9.32, 13.8,
        ],
        &[
            0.172, 0.921, 0.977, 1.28, 1.53, 1.82, 2.08, 2.33, 2.95, 3.53, 5.13,
        ],
        &[
            0.0649, 0.105, 0.142, 0.191, 0.266, 0.33, 0.426, 0.585, 0.837, 1.34, 2.4,
        ],
        &[
            0.365, 0.886, 1.61, 2.38, 3.65, 4.64, 6.06, 8.19, 11.5, 16.2, 25.5,
        ],
        &[
            2.51, 4.36, 6.36, 8.36, 12.5, 15.4, 19.5, 25.0, 33.3, 43.5, 67.3,
        ],
    ],
    [
        &[
            0.772, 3.36, 6.49, 8.04, 12.6, 16.1, 21.3, 29.3, 42.0, 62.2, 98.8,
        ],
        &[
            0.0731, 0.12, 0.151, 0.162, 0.925, 1.02, 1.01, 1.44, 1.78, 2.32, 3.44,
        ],
        &[
            0.0933, 0.678, 0.743, 0.47, 0.713, 0.691, 0.957, 1.04, 1.12, 0.886, 0.158,
        ],
        &[
            1.23, 4.86, 8.84, 10.7, 16.3, 20.4, 26.6, 35.6, 49.5, 72.3, 114.0,
        ],
        &[
            1.51, 2.51, 4.81, 6.01, 9.39, 11.9, 16.2, 21.7, 30.6, 45.2, 71.3,
        ],
        &[
            0.132, 0.313, 0.511, 0.686, 1.11, 1.42, 1.9, 2.61, 3.63, 5.49, 8.87,
        ],
        &[
            1.98, 6.78, 14.1, 20.0, 32.0, 41.4, 55.1, 75.7, 107.0, 160.0, 254.0,
        ],
        &[
            5.79, 18.6, 35.6, 46.1, 73.0, 93.0, 123.0, 167.0, 236.0, 348.0, 551.0,
        ],
    ],
    [
        &[2.45, 10.2, 20.2, 29.6, 47.3, 60.9, 81.1, 129.0, 232.0],
        &[0.166, 0.181, 0.579, 0.581, 1.28, 1.53, 1.76, 2.3, 2.96],
        &[0.574, 0.557, 0.949, 0.604, 0.738, 0.813, 1.68, 1.13, 0.93],
        &[4.91, 18.3, 34.3, 49.0, 76.4, 98.1, 129.0, 175.0, 261.0],
        &[8.82, 17.9, 37.8, 55.3, 88.5, 114.0, 152.0, 208.0, 297.0],
        &[0.394, 1.74, 3.12, 4.55, 6.76, 8.97, 11.6, 16.2, 23.0],
        &[9.92, 43.1, 85.5, 124.0, 194.0, 256.0, 339.0, 463.0, 658.0],
        &[27.2, 92.0, 183.0, 263.0, 415.0, 541.0, 716.0, 996.0, 1480.0],
    ],
];

/// Dissertation Table 4.1: exact block non-zeros and the Zayer et al. bound per order.
const GP100_EXACT_BOUND: [[(f64, f64); 11]; 3] = [
    [
        (29.8e3, 124.0e3),
        (140.0e3, 707.7e3),
        (272.8e3, 1.4e6),
        (393.7e3, 2.1e6),
        (615.6e3, 3.4e6),
        (787.9e3, 4.4e6),
        (1.0e6, 5.9e6),
        (1.4e6, 8.1e6),
        (2.0e6, 11.5e6),
        (2.9e6, 17.1e6),
        (4.6e6, 27.2e6),
    ],
    [
        (363.9e3, 774.9e3),
        (1.9e6, 4.4e6),
        (3.8e6, 9.1e6),
        (5.5e6, 13.3e6),
        (8.7e6, 21.3e6),
        (11.2e6, 27.6e6),
        (14.9e6, 36.8e6),
        (20.4e6, 50.6e6),
        (28.8e6, 71.9e6),
        (42.7e6, 107.1e6),
        (67.4e6, 170.3e6),
    ],
    [
        (1.9e6, 3.1e6),
        (10.3e6, 17.7e6),
        (20.8e6, 36.2e6),
        (30.4e6, 53.3e6),
        (48.4e6, 85.4e6),
        (62.5e6, 110.5e6),
        (82.9e6, 147.0e6),
        (113.7e6, 202.3e6),
        (161.2e6, 287.6e6),
        (239.4e6, 428.5e6),
        (329.3e6, 681.1e6),
    ],
];

/// Dissertation Table 4.3 (GP100, ms): summation per node ("Simplex"), per entry, inline, and
/// element-matrix allocation; p = 1 (all four) and p = 2 (no inline; per entry failed on the
/// two largest meshes: NaN).
const GP100_SUMMATION: [[&[f64]; 4]; 2] = [
    [
        &[
            0.43, 0.991, 1.75, 2.57, 3.91, 4.97, 6.48, 8.77, 12.3, 17.6, 27.9,
        ],
        &[
            0.226, 0.473, 0.876, 1.26, 2.01, 2.54, 3.36, 4.53, 6.43, 9.65, 15.6,
        ],
        &[
            0.387, 0.761, 1.61, 2.37, 3.73, 4.7, 6.33, 8.66, 12.3, 18.3, 28.9,
        ],
        &[
            0.285, 0.812, 1.41, 1.99, 3.01, 3.8, 4.93, 6.66, 9.28, 11.5, 18.0,
        ],
    ],
    [
        &[
            2.11, 7.1, 14.6, 20.7, 33.1, 42.8, 57.0, 78.3, 111.0, 165.0, 263.0,
        ],
        &[
            0.82,
            3.0,
            5.88,
            8.56,
            13.7,
            17.9,
            23.3,
            32.0,
            45.2,
            f64::NAN,
            f64::NAN,
        ],
        &[f64::NAN; 11],
        &[
            0.772, 3.36, 6.49, 8.04, 12.6, 16.1, 21.3, 29.3, 42.0, 62.2, 98.8,
        ],
    ],
];

/// Zayer et al. total assembly times (ms, Tesla K40m) as quoted in dissertation §4.5.1.
const ZAYER_TETS: [f64; 4] = [250e3, 500e3, 800e3, 1e6];
const ZAYER_MS: [[f64; 4]; 2] = [[82.3, 185.0, 287.0, 402.0], [623.0, 1642.0, 2732.0, 3584.0]];

/// Index of the dissertation mesh nearest in tetrahedra (log scale).
fn nearest_gp100(tets: usize, len: usize) -> usize {
    let t = (tets.max(1) as f64).ln();
    (0..len)
        .min_by(|&a, &b| {
            (GP100_TETS[a].ln() - t)
                .abs()
                .total_cmp(&(GP100_TETS[b].ln() - t).abs())
        })
        .unwrap_or(0)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        f64::NAN
    } else {
        v[v.len() / 2]
    }
}

struct MeshInfo {
    name: String,
    ho: HoMesh,
    tets: usize,
    vertices: usize,
    edges: usize,
    faces: usize,
}

/// Run one backend `repeat` times and keep the median of each stage.
fn measure(
    backend: Backend,
    m: &MeshInfo,
    summation: Summation,
    material: &Material,
    repeat: usize,
) -> anyhow::Result<Record> {
    let mut runs: Vec<BTreeMap<String, f64>> = Vec::new();
    let mut last = None;
    for _ in 0..repeat.max(1) {
        let (stages, info) = match backend {
            Backend::CpuRayon | Backend::CpuSeq => {
                let par = if backend == Backend::CpuRayon {
                    Par::Rayon
                } else {
                    Par::Seq
                };
                let o = AssembleOptions {
                    summation,
                    par,
                    device: tessera_core::DeviceChoice::Cpu,
                };
                let a: Assembly<f32> = assemble_stiffness(&m.ho, material, &o)?;
                let s = a.stats;
                (
                    s.stages_ms.clone(),
                    (
                        s.block_nonzeros,
                        s.zayer_bound,
                        s.bytes_allocated,
                        s.padding_blocks,
                        s.aux_bytes,
                    ),
                )
            }
            Backend::CooSortSerial => {
                let (stages, blocks, bytes) = coo_sort_assembly(&m.ho, material.lame()?)?;
                (stages, (blocks, 0, bytes, 0, 0))
            }
        };
        runs.push(stages);
        last = Some(info);
    }
    let keys: Vec<String> = runs[0].keys().cloned().collect();
    let stages_ms = keys.into_iter().map(|k| {
        let v = median(runs.iter().filter_map(|r| r.get(&k).copied()).collect());
        (k, v)
    });
    let (block_nonzeros, zayer_bound, bytes_allocated, padding_blocks, aux_bytes) = last.unwrap();
    Ok(Record {
        mesh: m.name.clone(),
        tets: m.tets,
        vertices: m.vertices,
        edges: m.edges,
        faces: m.faces,
        order: m.ho.order(),
        backend,
        summation,
        block_nonzeros,
        zayer_bound,
        bytes_allocated,
        padding_blocks,
        aux_bytes,
        stages_ms: stages_ms.collect(),
    })
}

/// The serial COO-sort baseline: element matrices, all `m²` blocks of every cell as
/// `(row, col)` keyed triplets, a sort by key, and a reduction of duplicates into BSR
/// (`f32` values, like the benchmarked assembly). Returns stage times, the number of
/// distinct blocks and the bytes of the final BSR.
fn coo_sort_assembly(ho: &HoMesh, lame: Lame) -> anyhow::Result<(BTreeMap<String, f64>, u64, u64)> {
    let t0 = Instant::now();
    let d = ho.dim();
    let tmpl = ElementTemplate::new(d, ho.order())?;
    let m = tmpl.num_nodes();
    let e2 = d * d;
    let n = ho.num_nodes() as u64;
    let sm = ho.mesh();
    let mut keys: Vec<(u64, u32)> = Vec::with_capacity(ho.num_cells() * m * m);
    let mut vals: Vec<f32> = Vec::with_capacity(ho.num_cells() * m * m * e2);
    let mut sym = vec![0.0; tmpl.sym_len()];
    let mut nodes = vec![0u32; m];
    for c in 0..ho.num_cells() {
        let v: Vec<[f64; 3]> = sm
            .cell(c)
            .iter()
            .map(|&i| sm.positions()[i as usize])
            .collect();
        let g = CellGeometry::new(d, &v, c)?;
        tmpl.stiffness_sym(&g, lame, &mut sym);
        ho.cell_nodes(c, &mut nodes);
        for a in 0..m {
            for b in 0..m {
                keys.push((nodes[a] as u64 * n + nodes[b] as u64, keys.len() as u32));
                let (lo, hi, tr) = if a <= b { (a, b, false) } else { (b, a, true) };
                let s = &sym[sym_index(lo, hi, m) * e2..][..e2];
                for k in 0..d {
                    for l in 0..d {
                        vals.push(if tr { s[l * d + k] } else { s[k * d + l] } as f32);
                    }
                }
            }
        }
    }
    let t1 = Instant::now();
    keys.sort_unstable();
    let t2 = Instant::now();
    let mut row_ptr = vec![0u64; n as usize + 1];
    let mut col_idx: Vec<u32> = Vec::new();
    let mut bvals: Vec<f32> = Vec::new();
    let mut prev = u64::MAX;
    for &(key, idx) in &keys {
        let src = &vals[idx as usize * e2..][..e2];
        if key != prev {
            row_ptr[(key / n) as usize + 1] += 1;
            col_idx.push((key % n) as u32);
            bvals.extend_from_slice(src);
            prev = key;
        } else {
            let dst = bvals.len() - e2;
            for q in 0..e2 {
                bvals[dst + q] += src[q];
            }
        }
    }
    for i in 0..n as usize {
        row_ptr[i + 1] += row_ptr[i];
    }
    let t3 = Instant::now();
    let ms = |a: Instant, b: Instant| (b - a).as_secs_f64() * 1e3;
    let mut st = BTreeMap::new();
    st.insert("element_matrices".to_string(), ms(t0, t1));
    st.insert("sort".to_string(), ms(t1, t2));
    st.insert("reduce".to_string(), ms(t2, t3));
    st.insert("total".to_string(), ms(t0, t3));
    let bytes = (row_ptr.len() * 8 + col_idx.len() * 4 + bvals.len() * 4) as u64;
    Ok((st, col_idx.len() as u64, bytes))
}

fn fmt_ms(v: Option<f64>) -> String {
    match v {
        Some(x) if x.is_finite() => {
            if x >= 100.0 {
                format!("{x:.0}")
            } else if x >= 1.0 {
                format!("{x:.2}")
            } else {
                format!("{x:.3}")
            }
        }
        _ => "-".into(),
    }
}

fn fmt_count(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.1} M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1} k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

pub fn run(a: BenchFemArgs) -> anyhow::Result<()> {
    let backend = crate::device::resolve(a.device)?;
    if let crate::device::Backend::Cuda(g) = &backend {
        return run_gpu(&a, g);
    }
    let material = Material::new(1.0, 0.3, 1.0);
    let resolutions = if a.resolutions.is_empty() {
        vec![12, 24]
    } else {
        a.resolutions.clone()
    };
    let specs: Vec<String> = if a.mesh.is_empty() {
        resolutions
            .iter()
            .map(|r| format!("gen:bracket:{r}"))
            .collect()
    } else {
        a.mesh.clone()
    };
    for &p in &a.orders {
        anyhow::ensure!(
            (1..=3).contains(&p),
            "bench fem covers the dissertation's orders 1..=3 (got {p})"
        );
    }
    let mut records: Vec<Record> = Vec::new();
    let threads = rayon::current_num_threads();
    for spec in &specs {
        let sm = load_simplex_mesh(spec)?;
        let (tets, vertices, edges, faces) = (
            sm.num_cells(),
            sm.num_vertices(),
            sm.num_edges(),
            sm.num_faces(),
        );
        for &p in &a.orders {
            let info = MeshInfo {
                name: spec.clone(),
                ho: HoMesh::new(sm.clone(), p)?,
                tets,
                vertices,
                edges,
                faces,
            };
            eprintln!("bench fem: {spec} ({tets} tets), p = {p}");
            let mut backends = vec![
                (Backend::CpuRayon, Summation::PerNode),
                (Backend::CpuSeq, Summation::PerNode),
            ];
            backends.push((Backend::CpuRayon, Summation::PerEntry));
            backends.push((Backend::CpuRayon, Summation::Inline));
            if !a.no_baseline {
                backends.push((Backend::CooSortSerial, Summation::PerNode));
            }
            for (b, s) in backends {
                records.push(measure(b, &info, s, &material, a.repeat)?);
            }
        }
    }
    if a.json {
        for r in &records {
            let j = serde_json::json!({
                "mesh": r.mesh, "tets": r.tets, "vertices": r.vertices, "edges": r.edges, "faces": r.faces,
                "order": r.order, "backend": r.backend.name(), "summation": r.summation.name(), "precision": "f32",
                "threads": threads, "block_nonzeros": r.block_nonzeros, "zayer_bound": r.zayer_bound,
                "bytes_allocated": r.bytes_allocated, "padding_blocks": r.padding_blocks, "aux_bytes": r.aux_bytes,
                "stages_ms": r.stages_ms,
            });
            println!("{j}");
        }
        return Ok(());
    }
    print_tables(&records, &a.orders, threads);
    Ok(())
}

fn find<'r>(
    records: &'r [Record],
    mesh: &str,
    p: usize,
    b: Backend,
    s: Summation,
) -> Option<&'r Record> {
    records
        .iter()
        .find(|r| r.mesh == mesh && r.order == p && r.backend == b && r.summation == s)
}

fn print_tables(records: &[Record], orders: &[usize], threads: usize) {
    let mut meshes: Vec<(String, usize)> = Vec::new();
    for r in records {
        if !meshes.iter().any(|(m, _)| *m == r.mesh) {
            meshes.push((r.mesh.clone(), r.tets));
        }
    }
    println!("FEM assembly, CPU reference ({threads} rayon threads, f32 values), medians; GP100 = dissertation (Quadro GP100)");
    println!();
    println!("Table 4.1: sizes, exact block non-zeros (Eq. 4.6) and the Zayer et al. bound");
    print!(
        "{:<18} {:>9} {:>9} {:>9} {:>9}",
        "mesh", "vertices", "edges", "faces", "cells"
    );
    for &p in orders {
        print!(" | p={p}: {:>9} {:>9} {:>5}", "exact", "bound", "ratio");
    }
    println!();
    for (mesh, tets) in &meshes {
        let Some(r0) = records.iter().find(|r| &r.mesh == mesh) else {
            continue;
        };
        print!(
            "{:<18} {:>9} {:>9} {:>9} {:>9}",
            mesh,
            fmt_count(r0.vertices as f64),
            fmt_count(r0.edges as f64),
            fmt_count(r0.faces as f64),
            fmt_count(*tets as f64)
        );
        for &p in orders {
            match find(records, mesh, p, Backend::CpuRayon, Summation::PerNode) {
                Some(r) => print!(
                    " |       {:>9} {:>9} {:>5.1}",
                    fmt_count(r.block_nonzeros as f64),
                    fmt_count(r.zayer_bound as f64),
                    r.zayer_bound as f64 / r.block_nonzeros as f64
                ),
                None => print!(" |       {:>9} {:>9} {:>5}", "-", "-", "-"),
            }
        }
        println!();
        let g = nearest_gp100(*tets, 11);
        print!(
            "{:<18} {:>9} {:>9} {:>9} {:>9}",
            "  GP100 nearest",
            "",
            "",
            "",
            fmt_count(GP100_TETS[g])
        );
        for &p in orders {
            let (ex, bd) = GP100_EXACT_BOUND[p - 1][g];
            print!(
                " |       {:>9} {:>9} {:>5.1}",
                fmt_count(ex),
                fmt_count(bd),
                bd / ex
            );
        }
        println!();
    }
    for &p in orders {
        println!();
        println!("Table 4.2({}): stage times in ms, p = {p} (per-node summation); ours | GP100 at the nearest mesh", ["a", "b", "c"][p - 1]);
        print!("{:<14}", "tets");
        for (_, tets) in &meshes {
            let g = nearest_gp100(*tets, GP100_STAGES[p - 1][0].len());
            print!(
                " {:>9} | {:>8}",
                fmt_count(*tets as f64),
                fmt_count(GP100_TETS[g])
            );
        }
        println!();
        for (si, (key, label)) in STAGES.iter().enumerate() {
            print!("{label:<14}");
            for (mesh, tets) in &meshes {
                let ours = find(records, mesh, p, Backend::CpuRayon, Summation::PerNode)
                    .and_then(|r| r.stages_ms.get(*key).copied());
                let refs = GP100_STAGES[p - 1][si];
                let g = nearest_gp100(*tets, refs.len());
                print!(" {:>9} | {:>8}", fmt_ms(ours), fmt_ms(refs.get(g).copied()));
            }
            println!();
        }
    }
    println!();
    println!("Table 4.3: summation methods in ms (incl. element matrices where precomputed); ours | GP100 at the nearest mesh");
    for &p in orders {
        print!("p = {p:<10}");
        for (_, tets) in &meshes {
            print!(
                " {:>9} | {:>8}",
                fmt_count(*tets as f64),
                fmt_count(GP100_TETS[nearest_gp100(*tets, 11)])
            );
        }
        println!();
        let rows = [
            (Summation::PerNode, "Simplex", 0),
            (Summation::PerEntry, "Entry", 1),
            (Summation::Inline, "Inline", 2),
        ];
        for (s, label, ri) in rows {
            print!("{label:<14}");
            for (mesh, tets) in &meshes {
                let ours = find(records, mesh, p, Backend::CpuRayon, s)
                    .and_then(|r| r.stages_ms.get("summation").copied());
                let refv = if p <= 2 {
                    GP100_SUMMATION[p - 1][ri]
                        .get(nearest_gp100(*tets, 11))
                        .copied()
                } else {
                    None
                };
                print!(" {:>9} | {:>8}", fmt_ms(ours), fmt_ms(refv));
            }
            println!();
        }
        print!("{:<14}", "Alloc");
        for (mesh, tets) in &meshes {
            let ours = find(records, mesh, p, Backend::CpuRayon, Summation::PerNode)
                .and_then(|r| r.stages_ms.get("alloc_element_matrices").copied());
            let refv = if p <= 2 {
                GP100_SUMMATION[p - 1][3]
                    .get(nearest_gp100(*tets, 11))
                    .copied()
            } else {
                None
            };
            print!(" {:>9} | {:>8}", fmt_ms(ours), fmt_ms(refv));
        }
        println!();
        print!("{:<14}", "Entry maps");
        for (mesh, _) in &meshes {
            let ours = find(records, mesh, p, Backend::CpuRayon, Summation::PerEntry)
                .and_then(|r| r.stages_ms.get("entry_maps").copied());
            print!(" {:>9} | {:>8}", fmt_ms(ours), "-");
        }
        println!();
        print!("{:<14}", "Inline geom.");
        for (mesh, _) in &meshes {
            let ours = find(records, mesh, p, Backend::CpuRayon, Summation::Inline)
                .and_then(|r| r.stages_ms.get("cell_geometry").copied());
            print!(" {:>9} | {:>8}", fmt_ms(ours), "-");
        }
        println!();
    }
    println!();
    println!("Total by summation in ms (pattern included; GP100 = dissertation per-node total)");
    for &p in orders {
        for (s, label) in [
            (Summation::PerNode, "per-node"),
            (Summation::PerEntry, "per-entry"),
            (Summation::Inline, "inline"),
        ] {
            print!("p = {p} {label:<10}");
            for (mesh, tets) in &meshes {
                let ours = find(records, mesh, p, Backend::CpuRayon, s)
                    .and_then(|r| r.stages_ms.get("total").copied());
                let g = nearest_gp100(*tets, GP100_STAGES[p - 1][0].len());
                let refv = GP100_STAGES[p - 1][STAGES.len() - 1].get(g).copied();
                print!(" {:>9} | {:>8}", fmt_ms(ours), fmt_ms(refv));
            }
            println!();
        }
    }
    println!();
    println!("Inline summation (the CPU default up to p = 3), stage times in ms; the column pass in parts");
    println!(
        "(relations: node -> cells transposes, paid by the first assembly of a mesh and cached)"
    );
    const INLINE_STAGES: [(&str, &str); 11] = [
        ("count_contributions", "Count Contr."),
        ("bin_offsets", "Bin Offsets"),
        ("alloc_final", "Alloc. Final"),
        ("column_indices", "Col. Indices"),
        ("column_indices: relations", "  relations"),
        ("column_indices: cell_nodes", "  cell nodes"),
        ("column_indices: lists", "  lists"),
        ("column_indices: fill", "  fill + map"),
        ("cell_geometry", "Cell geometry"),
        ("summation", "Summation"),
        ("total", "Total"),
    ];
    for &p in orders {
        print!("p = {p:<10}");
        for (_, tets) in &meshes {
            print!(" {:>9}", fmt_count(*tets as f64));
        }
        println!();
        for (key, label) in INLINE_STAGES {
            print!("{label:<14}");
            for (mesh, _) in &meshes {
                let ours = find(records, mesh, p, Backend::CpuRayon, Summation::Inline)
                    .and_then(|r| r.stages_ms.get(key).copied());
                print!(" {:>9}", fmt_ms(ours));
            }
            println!();
        }
    }
    println!();
    println!("Memory (bytes): Bin-BCSR* final matrix, bin padding blocks, temporaries (per-node | per-entry)");
    for &p in orders {
        for (mesh, _) in &meshes {
            if let (Some(a), Some(b)) = (
                find(records, mesh, p, Backend::CpuRayon, Summation::PerNode),
                find(records, mesh, p, Backend::CpuRayon, Summation::PerEntry),
            ) {
                let coo = find(records, mesh, p, Backend::CooSortSerial, Summation::PerNode);
                println!(
                    "p = {p} {mesh:<18} final {:>12}  padding {:>10} ({:.1}% of allocated blocks)  temp {:>12} | {:>12}{}",
                    a.bytes_allocated,
                    a.padding_blocks,
                    100.0 * a.padding_blocks as f64 / (a.block_nonzeros + a.padding_blocks) as f64,
                    a.aux_bytes,
                    b.aux_bytes,
                    coo.map(|c| format!("  (COO baseline BSR {} bytes)", c.bytes_allocated)).unwrap_or_default()
                );
            }
        }
    }
    println!();
    println!("Speedup over the serial COO-sort baseline (total ms)");
    println!(
        "{:<6} {:<18} {:>10} {:>10} {:>10} {:>9} {:>9}",
        "order", "mesh", "coo-sort", "cpu-seq", "cpu-rayon", "vs seq", "vs coo"
    );
    for &p in orders {
        for (mesh, _) in &meshes {
            let t = |b| {
                find(records, mesh, p, b, Summation::PerNode)
                    .and_then(|r| r.stages_ms.get("total").copied())
            };
            let (c, s, r) = (
                t(Backend::CooSortSerial),
                t(Backend::CpuSeq),
                t(Backend::CpuRayon),
            );
            let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
                (Some(a), Some(b)) if b > 0.0 => format!("{:.1}x", a / b),
                _ => "-".into(),
            };
            println!(
                "{:<6} {:<18} {:>10} {:>10} {:>10} {:>9} {:>9}",
                p,
                mesh,
                fmt_ms(c),
                fmt_ms(s),
                fmt_ms(r),
                ratio(s, r),
                ratio(c, r)
            );
            if let (Some(cr), Some(ours)) = (
                find(records, mesh, p, Backend::CooSortSerial, Summation::PerNode),
                find(records, mesh, p, Backend::CpuRayon, Summation::PerNode),
            ) {
                if cr.block_nonzeros != ours.block_nonzeros {
                    println!(
                        "       warning: COO baseline found {} blocks, Eq. 4.6 {}",
                        cr.block_nonzeros, ours.block_nonzeros
                    );
                }
            }
        }
    }
    println!();
    println!("Zayer et al. (Tesla K40m, from dissertation §4.5.1), total ms:");
    for (p, row) in ZAYER_MS.iter().enumerate() {
        let cells: Vec<String> = ZAYER_TETS
            .iter()
            .zip(row)
            .map(|(t, v)| format!("{}: {v}", fmt_count(*t)))
            .collect();
        println!("  p = {}: {}", p + 1, cells.join(", "));
    }
}

// ============================================================================ GPU columns

/// Default GPU sweep: bracket resolutions near the dissertation's Table 4.1 sizes (about
/// 8k, 44k, 90k, 213k, 367k, 719k, 1.1M and 1.6M tetrahedra).
const GPU_RESOLUTIONS: [usize; 8] = [22, 39, 49, 65, 78, 98, 113, 130];
/// p = 3 is measured up to this many tetrahedra by default (the dissertation stops at 719k).
const GPU_P3_MAX_TETS: usize = 800_000;
/// H100 SXM HBM3 peak bandwidth (GB/s) for the SpMV roofline.
const H100_PEAK_GBS: f64 = 3000.0;
/// Issue 5 targets on the H100: (p, dissertation mesh in tets, total ms, GP100 ms).
const TARGETS: [(usize, f64, f64, f64); 3] = [
    (1, 1.7e6, 15.0, 67.3),
    (2, 1.7e6, 110.0, 551.0),
    (3, 719.1e3, 300.0, 1480.0),
];

/// One GPU measurement (dissertation Tables 4.1-4.3, GPU columns).
struct GpuRecord {
    mesh: String,
    tets: usize,
    vertices: usize,
    edges: usize,
    faces: usize,
    stats: tessera_fem::assemble::AssemblyStats,
    bench: tessera_fem::cuda::GpuAssemblyBench,
}

fn gpu_bench_one<T: tessera_fem::cuda::GpuScalar>(
    g: &tessera_gpu::Gpu,
    ho: &HoMesh,
    material: &Material,
    s: Summation,
    runs: usize,
) -> anyhow::Result<(
    tessera_fem::assemble::AssemblyStats,
    tessera_fem::cuda::GpuAssemblyBench,
)> {
    let o = AssembleOptions {
        summation: s,
        par: Par::Rayon,
        device: tessera_core::DeviceChoice::Cuda(g.ordinal()),
    };
    // one assembly for the sizes (exact count, bound, bytes, padding), then the timed runs
    let (_, stats) = tessera_fem::cuda::assemble_stiffness_gpu::<T>(g, ho, material, &o)?;
    let bench = tessera_fem::cuda::bench_assembly_gpu::<T>(g, ho, material, s, runs)?;
    Ok((stats, bench))
}

fn run_gpu(a: &BenchFemArgs, g: &std::sync::Arc<tessera_gpu::Gpu>) -> anyhow::Result<()> {
    let material = Material::new(1.0, 0.3, 1.0);
    let explicit = !a.resolutions.is_empty() || !a.mesh.is_empty();
    let resolutions = if a.resolutions.is_empty() {
        GPU_RESOLUTIONS.to_vec()
    } else {
        a.resolutions.clone()
    };
    let specs: Vec<String> = if a.mesh.is_empty() {
        resolutions
            .iter()
            .map(|r| format!("gen:bracket:{r}"))
            .collect()
    } else {
        a.mesh.clone()
    };
    for &p in &a.orders {
        anyhow::ensure!(
            (1..=3).contains(&p),
            "bench fem covers the dissertation's orders 1..=3 (got {p})"
        );
    }
    let device = g.describe();
    eprintln!("bench fem: device {device}");
    let mut recs: Vec<GpuRecord> = Vec::new();
    let t_all = Instant::now();
    for spec in &specs {
        let t = Instant::now();
        let sm = load_simplex_mesh(spec)?;
        let (tets, vertices, edges, faces) = (
            sm.num_cells(),
            sm.num_vertices(),
            sm.num_edges(),
            sm.num_faces(),
        );
        eprintln!(
            "bench fem: {spec}: {tets} tets ({:.1} s to generate)",
            t.elapsed().as_secs_f64()
        );
        for &p in &a.orders {
            if p == 3 && !explicit && tets > GPU_P3_MAX_TETS {
                continue;
            }
            let ho = HoMesh::new(sm.clone(), p)?;
            let mut sums = vec![Summation::PerNode, Summation::PerEntry];
            if p == 1 {
                sums.push(Summation::Inline);
            }
            let mut jobs: Vec<(Summation, bool)> = sums.iter().map(|&s| (s, false)).collect();
            jobs.push((Summation::PerNode, true));
            for (s, f64_) in jobs {
                let r = if f64_ {
                    gpu_bench_one::<f64>(g, &ho, &material, s, a.repeat)
                } else {
                    gpu_bench_one::<f32>(g, &ho, &material, s, a.repeat)
                };
                match r {
                    Ok((stats, bench)) => {
                        eprintln!(
                            "bench fem: {spec} p = {p} {} {}: total {:.3} ms",
                            s.name(),
                            bench.scalar,
                            bench.stages_ms.get("total").copied().unwrap_or(f64::NAN)
                        );
                        recs.push(GpuRecord {
                            mesh: spec.clone(),
                            tets,
                            vertices,
                            edges,
                            faces,
                            stats,
                            bench,
                        });
                    }
                    // e.g. out of device memory for per-entry maps: reported, the sweep goes on
                    Err(e) => eprintln!(
                        "bench fem: {spec} p = {p} {} {}: failed: {e}",
                        s.name(),
                        if f64_ { "f64" } else { "f32" }
                    ),
                }
            }
        }
    }
    eprintln!("bench fem: done in {:.1} s", t_all.elapsed().as_secs_f64());
    if a.json {
        for r in &recs {
            let b = &r.bench;
            let j = serde_json::json!({
                "mesh": r.mesh, "tets": r.tets, "vertices": r.vertices, "edges": r.edges, "faces": r.faces,
                "order": b.order, "backend": "cuda", "device": device, "summation": b.summation.name(), "precision": b.scalar,
                "dofs": b.dofs, "block_nonzeros": b.block_nonzeros, "zayer_bound": r.stats.zayer_bound,
                "bytes_allocated": r.stats.bytes_allocated, "padding_blocks": r.stats.padding_blocks, "aux_bytes": r.stats.aux_bytes,
                "stages_ms": b.stages_ms, "table_4_2_ms": b.table_4_2_ms, "upload_ms": b.upload_ms,
                "spmv_ms": b.spmv_ms, "spmv_bytes": b.spmv_bytes, "spmv_gbs": b.spmv_gbs, "spmv_fraction_of_peak": b.spmv_gbs / H100_PEAK_GBS,
            });
            println!("{j}");
        }
        for t in target_checks(&recs) {
            println!(
                "{}",
                serde_json::json!({"target": {"order": t.0, "tets": t.1, "total_ms": t.2, "limit_ms": t.3, "gp100_ms": t.4, "met": t.2 <= t.3}})
            );
        }
        return Ok(());
    }
    print_gpu_tables(&recs, &a.orders, &device);
    Ok(())
}

fn gfind<'r>(
    recs: &'r [GpuRecord],
    mesh: &str,
    p: usize,
    s: Summation,
    scalar: &str,
) -> Option<&'r GpuRecord> {
    recs.iter().find(|r| {
        r.mesh == mesh && r.bench.order == p && r.bench.summation == s && r.bench.scalar == scalar
    })
}

fn gtotal(r: &GpuRecord) -> Option<f64> {
    r.bench.stages_ms.get("total").copied()
}

/// The issue 5 targets: per order, the f32 per-node record nearest the dissertation's mesh
/// (within a factor 1.5 in tetrahedra): (p, tets, total ms, limit ms, GP100 ms).
fn target_checks(recs: &[GpuRecord]) -> Vec<(usize, usize, f64, f64, f64)> {
    let mut out = Vec::new();
    for (p, want, limit, gp) in TARGETS {
        let best = recs
            .iter()
            .filter(|r| {
                r.bench.order == p
                    && r.bench.summation == Summation::PerNode
                    && r.bench.scalar == "f32"
            })
            .filter(|r| (r.tets as f64 / want).ln().abs() < 1.5f64.ln())
            .min_by(|a, b| {
                (a.tets as f64 / want)
                    .ln()
                    .abs()
                    .total_cmp(&(b.tets as f64 / want).ln().abs())
            });
        if let Some(r) = best {
            if let Some(t) = gtotal(r) {
                out.push((p, r.tets, t, limit, gp));
            }
        }
    }
    out
}

fn print_gpu_tables(recs: &[GpuRecord], orders: &[usize], device: &str) {
    let mut meshes: Vec<(String, usize)> = Vec::new();
    for r in recs {
        if !meshes.iter().any(|(m, _)| *m == r.mesh) {
            meshes.push((r.mesh.clone(), r.tets));
        }
    }
    println!("FEM assembly on {device}: medians of CUDA-event stage times (f32 unless noted); GP100 = dissertation (Quadro GP100)");
    println!();
    println!("Table 4.1: sizes, exact block non-zeros (Eq. 4.6) and the Zayer et al. bound");
    print!(
        "{:<18} {:>9} {:>9} {:>9} {:>9}",
        "mesh", "vertices", "edges", "faces", "cells"
    );
    for &p in orders {
        print!(" | p={p}: {:>9} {:>9} {:>5}", "exact", "bound", "ratio");
    }
    println!();
    for (mesh, tets) in &meshes {
        let Some(r0) = recs.iter().find(|r| &r.mesh == mesh) else {
            continue;
        };
        print!(
            "{:<18} {:>9} {:>9} {:>9} {:>9}",
            mesh,
            fmt_count(r0.vertices as f64),
            fmt_count(r0.edges as f64),
            fmt_count(r0.faces as f64),
            fmt_count(*tets as f64)
        );
        for &p in orders {
            match gfind(recs, mesh, p, Summation::PerNode, "f32") {
                Some(r) => print!(
                    " |       {:>9} {:>9} {:>5.1}",
                    fmt_count(r.bench.block_nonzeros as f64),
                    fmt_count(r.stats.zayer_bound as f64),
                    r.stats.zayer_bound as f64 / r.bench.block_nonzeros as f64
                ),
                None => print!(" |       {:>9} {:>9} {:>5}", "-", "-", "-"),
            }
        }
        println!();
        let gi = nearest_gp100(*tets, 11);
        print!(
            "{:<18} {:>9} {:>9} {:>9} {:>9}",
            "  GP100 nearest",
            "",
            "",
            "",
            fmt_count(GP100_TETS[gi])
        );
        for &p in orders {
            let (ex, bd) = GP100_EXACT_BOUND[p - 1][gi];
            print!(
                " |       {:>9} {:>9} {:>5.1}",
                fmt_count(ex),
                fmt_count(bd),
                bd / ex
            );
        }
        println!();
    }
    for &p in orders {
        println!();
        println!("Table 4.2({}): stage times in ms, p = {p} (per-node summation); ours | GP100 at the nearest mesh", ["a", "b", "c"][p - 1]);
        print!("{:<14}", "tets");
        let cols: Vec<&(String, usize)> = meshes
            .iter()
            .filter(|(m, _)| gfind(recs, m, p, Summation::PerNode, "f32").is_some())
            .collect();
        for (_, tets) in &cols {
            let gi = nearest_gp100(*tets, GP100_STAGES[p - 1][0].len());
            print!(
                " {:>9} | {:>8}",
                fmt_count(*tets as f64),
                fmt_count(GP100_TETS[gi])
            );
        }
        println!();
        for (si, (key, label)) in STAGES.iter().enumerate() {
            print!("{label:<14}");
            for (mesh, tets) in &cols {
                let ours = gfind(recs, mesh, p, Summation::PerNode, "f32")
                    .and_then(|r| r.bench.stages_ms.get(*key).copied());
                let refs = GP100_STAGES[p - 1][si];
                print!(
                    " {:>9} | {:>8}",
                    fmt_ms(ours),
                    fmt_ms(refs.get(nearest_gp100(*tets, refs.len())).copied())
                );
            }
            println!();
        }
        print!("{:<14}", "Total f64");
        for (mesh, _) in &cols {
            print!(
                " {:>9} | {:>8}",
                fmt_ms(gfind(recs, mesh, p, Summation::PerNode, "f64").and_then(gtotal)),
                "-"
            );
        }
        println!();
    }
    println!();
    println!("Table 4.3: summation methods in ms (incl. element matrices where precomputed); ours | GP100 at the nearest mesh");
    for &p in orders {
        let cols: Vec<&(String, usize)> = meshes
            .iter()
            .filter(|(m, _)| recs.iter().any(|r| &r.mesh == m && r.bench.order == p))
            .collect();
        print!("p = {p:<10}");
        for (_, tets) in &cols {
            print!(
                " {:>9} | {:>8}",
                fmt_count(*tets as f64),
                fmt_count(GP100_TETS[nearest_gp100(*tets, 11)])
            );
        }
        println!();
        let rows = [
            (Summation::PerNode, "Simplex", 0),
            (Summation::PerEntry, "Entry", 1),
            (Summation::Inline, "Inline", 2),
        ];
        for (s, label, ri) in rows {
            print!("{label:<14}");
            for (mesh, tets) in &cols {
                let ours = gfind(recs, mesh, p, s, "f32").map(|r| {
                    r.bench.stages_ms.get("summation").copied().unwrap_or(0.0)
                        + r.bench
                            .stages_ms
                            .get("element_matrices")
                            .copied()
                            .unwrap_or(0.0)
                });
                let refv = if p <= 2 {
                    GP100_SUMMATION[p - 1][ri]
                        .get(nearest_gp100(*tets, 11))
                        .copied()
                } else {
                    None
                };
                print!(" {:>9} | {:>8}", fmt_ms(ours), fmt_ms(refv));
            }
            println!();
        }
        print!("{:<14}", "Alloc");
        for (mesh, tets) in &cols {
            let ours = gfind(recs, mesh, p, Summation::PerNode, "f32")
                .and_then(|r| r.bench.stages_ms.get("alloc_element_matrices").copied());
            let refv = if p <= 2 {
                GP100_SUMMATION[p - 1][3]
                    .get(nearest_gp100(*tets, 11))
                    .copied()
            } else {
                None
            };
            print!(" {:>9} | {:>8}", fmt_ms(ours), fmt_ms(refv));
        }
        println!();
        print!("{:<14}", "Entry maps");
        for (mesh, _) in &cols {
            let ours = gfind(recs, mesh, p, Summation::PerEntry, "f32")
                .and_then(|r| r.bench.stages_ms.get("entry_maps").copied());
            print!(" {:>9} | {:>8}", fmt_ms(ours), "-");
        }
        println!();
    }
    println!();
    println!(
        "Memory (bytes) and Bin-BCSR* SpMV (per-node matrix; roofline {H100_PEAK_GBS:.0} GB/s)"
    );
    for &p in orders {
        for (mesh, _) in &meshes {
            for scalar in ["f32", "f64"] {
                if let Some(r) = gfind(recs, mesh, p, Summation::PerNode, scalar) {
                    let entry = gfind(recs, mesh, p, Summation::PerEntry, "f32")
                        .filter(|_| scalar == "f32");
                    println!(
                        "p = {p} {mesh:<18} {scalar} final {:>12}  padding {:>10} ({:.1}%)  temp {:>12}{}  SpMV {:>8.3} ms {:>7.0} GB/s ({:.0}% of peak)",
                        r.stats.bytes_allocated,
                        r.stats.padding_blocks,
                        100.0 * r.stats.padding_blocks as f64 / (r.stats.block_nonzeros + r.stats.padding_blocks).max(1) as f64,
                        r.stats.aux_bytes,
                        entry.map(|e| format!(" | entry {:>12}", e.stats.aux_bytes)).unwrap_or_default(),
                        r.bench.spmv_ms,
                        r.bench.spmv_gbs,
                        100.0 * r.bench.spmv_gbs / H100_PEAK_GBS
                    );
                }
            }
        }
    }
    println!();
    println!("Targets (H100, f32 per-node total):");
    for (p, tets, t, limit, gp) in target_checks(recs) {
        println!(
            "  p = {p} at {}: {} ms (target <= {limit} ms, GP100 {gp} ms): {}",
            fmt_count(tets as f64),
            fmt_ms(Some(t)),
            if t <= limit { "met" } else { "MISSED" }
        );
    }
    println!();
    println!("Zayer et al. (Tesla K40m, from dissertation §4.5.1), total ms:");
    for (p, row) in ZAYER_MS.iter().enumerate() {
        let cells: Vec<String> = ZAYER_TETS
            .iter()
            .zip(row)
            .map(|(t, v)| format!("{}: {v}", fmt_count(*t)))
            .collect();
        println!("  p = {}: {}", p + 1, cells.join(", "));
    }
}
