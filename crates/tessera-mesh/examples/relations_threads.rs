//! Thread scaling of the CPU relations (dissertation §3.4.1-§3.4.2): every relation of
//! `tessera bench mesh`'s Table 3.2/3.3 rows except smoothing, timed with 1 thread (the
//! sequential path) and in rayon pools of the given thread counts (the parallel path),
//! median of `runs` runs after one warm-up, and the results checked bit-identical between
//! every thread count. Beside the wall clock: the process CPU time of each run (all threads
//! together, idle workers' spinning included), the work each path does, which a busy
//! shared machine disturbs much less than the wall clock.
//!
//! ```text
//! cargo run --release -p tessera-mesh --example relations_threads -- MESH... [--threads 1,2,16] [--runs 7] [--only NAME] [--min] [--morton] [--interleave] [--per-round] [--pin] [--regime reuse|fresh|default]
//! ```
//!
//! `--interleave` runs the thread counts in turn within each round (1, 2, ..., 1, 2, ...)
//! instead of all runs of one thread count after the other, and adds the median over the
//! rounds of each round's ratio: on a shared machine whose speed drifts between rounds by
//! more than the effects measured, the ratio within a round is the robust figure.
//!
//! `--per-round` (implies `--interleave`) also lists every round's two wall clocks in round
//! order, `1 thread / k threads` ms: a parallel run's speed can change in the middle of a
//! process, which one median hides (session 41: δ3 of the dragon, 2-thread runs of 13-14 ms
//! for the first 68 rounds of every process, then of 8 ms, the 1-thread runs steady at 18-20
//! ms, on the 2-vCPU machine and the 16-core host alike; the heap's layout decided whether the
//! two workers' range counters shared a cache line; BENCHMARKS.md). The p10 and p90 of the
//! per-round ratio beside its median show the spread.
//!
//! `--pin` pins worker `i` of every pool to CPU `i` ([`tessera_core::par::pin_to_cpu`]): on
//! the 2-vCPU machine the scheduler otherwise often runs both workers of the 2-thread pool on
//! one CPU for a whole run (BENCHMARKS.md, session 34).
//!
//! `--regime reuse|fresh|default` (default `reuse`) sets where the timed runs get their
//! memory ([`tessera_core::trace::MemoryRegime`]): `reuse` keeps freed memory in one arena
//! for all threads (every run reuses it), `fresh` gives it back to the kernel before every
//! run (every run faults in zeroed pages), `default` leaves glibc's defaults, under which the
//! one-thread and the parallel runs may not be in one regime (BENCHMARKS.md, session 39).
//! A run's result is dropped after its timer stops, outside the timing.
//!
//! `--morton` renumbers a tetrahedral mesh for locality first (vertices and cells along a
//! Morton curve, then edges and faces derived in sorted vertex order:
//! [`SimplexMesh::morton_ordered`]): the same mesh with another numbering, to separate the cost of the
//! algorithms from the cost of the file's numbering.

use std::time::Instant;
use tessera_core::trace::{process_cpu_ns, MemoryRegime};
use tessera_core::Par;
use tessera_mesh::boundary::extract_boundary;
use tessera_mesh::relations::{
    cell_vertices_checked, compute_cell_edges, compute_cell_vertices, compute_face_cells,
    compute_face_vertices, transpose_edge_vertices,
};
use tessera_mesh::simplex::SimplexMesh;
use tessera_mesh::PolyMesh;
use tessera_sparse::Tcsr;

/// A relation's result, compared between thread counts.
#[derive(PartialEq)]
enum Out {
    Tcsr(Tcsr),
    Boundary(tessera_mesh::boundary::Boundary),
}

type Run = fn(&PolyMesh, Par) -> Out;

const OPS: &[(&str, Run)] = &[
    ("Transpose Cells (d3)", |m, p| {
        Out::Tcsr(compute_face_cells(m, p))
    }),
    // the general transpose of ∂3 (count -> scan -> fill), which the two-slot δ3 above
    // replaces on consistently oriented manifold meshes: before and after in one run
    ("  d3, general path", |m, p| {
        Out::Tcsr(m.cell_faces().transpose(p))
    }),
    ("Transpose Faces (d2)", |m, p| {
        Out::Tcsr(m.face_edges().transpose(p))
    }),
    ("Transpose Edges (d1)", |m, p| {
        Out::Tcsr(transpose_edge_vertices(
            m.edge_vertices(),
            m.num_vertices(),
            p,
        ))
    }),
    ("Cell Edges", |m, p| Out::Tcsr(compute_cell_edges(m, p))),
    ("Cell Vertices", |m, p| {
        Out::Tcsr(compute_cell_vertices(m, p))
    }),
    // the path of meshes whose cells are not known closed (every cell checked), which the
    // closed path above replaces on built or validated meshes: before and after in one run
    ("  cell vertices, checked", |m, p| {
        Out::Tcsr(cell_vertices_checked(m, p))
    }),
    ("Face Vertices", |m, p| {
        Out::Tcsr(compute_face_vertices(m, p))
    }),
    ("Surface Extraction", |m, _| {
        Out::Boundary(extract_boundary(m))
    }),
];

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

/// The `q`-quantile of `sorted` (nearest rank; ascending, not empty).
fn quantile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn minimum(v: Vec<f64>) -> f64 {
    v.into_iter().fold(f64::INFINITY, f64::min)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut files = Vec::new();
    let mut threads = vec![1usize, 2, 16];
    let mut runs = 7usize;
    let mut only: Option<String> = None;
    let mut use_min = false;
    let mut morton = false;
    let mut interleave = false;
    let mut per_round = false;
    let mut pin = false;
    let mut regime = MemoryRegime::Reuse;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--threads" => {
                threads = args
                    .next()
                    .ok_or("--threads needs a list")?
                    .split(',')
                    .map(|t| t.parse())
                    .collect::<Result<_, _>>()?
            }
            "--runs" => runs = args.next().ok_or("--runs needs a number")?.parse()?,
            "--only" => only = Some(args.next().ok_or("--only needs a name")?),
            "--min" => use_min = true,
            "--morton" => morton = true,
            "--interleave" => interleave = true,
            "--per-round" => {
                interleave = true;
                per_round = true
            }
            "--pin" => pin = true,
            "--regime" => regime = MemoryRegime::from_arg(args.next())?,
            f => files.push(f.to_string()),
        }
    }
    // before any thread starts (the pools below)
    regime.enter()?;
    let pools: Vec<(rayon::ThreadPool, Par)> = threads
        .iter()
        .map(|&t| {
            let pool = tessera_core::par::thread_pool(t, pin)?;
            let par = if t == 1 { Par::Seq } else { Par::Rayon };
            Ok((pool, par))
        })
        .collect::<Result<_, rayon::ThreadPoolBuildError>>()?;
    for f in &files {
        let mut mesh = tessera_mesh::io::read_mesh(std::path::Path::new(f))?.mesh;
        if morton {
            mesh = SimplexMesh::morton_ordered(&mesh)?;
        }
        println!(
            "== {f}{}: V {} E {} F {} C {} (ms, {} of {runs} runs after a warm-up{}; memory regime {})",
            if morton { " (Morton order)" } else { "" },
            mesh.num_vertices(),
            mesh.num_edges(),
            mesh.num_faces(),
            mesh.num_cells(),
            if use_min { "minimum" } else { "median" },
            if pin { "; pool workers pinned" } else { "" },
            regime.name()
        );
        let mut head = format!("{:<22}", "operation");
        for t in &threads {
            head += &format!(" {:>9}", format!("{t} thr."));
        }
        for t in &threads[1..] {
            head += &format!(" {:>8}", format!("1/{t}"));
        }
        head += "  identical  process CPU ms:";
        for t in &threads {
            head += &format!(" {:>9}", format!("{t} thr."));
        }
        println!("{head}");
        for (name, run) in OPS {
            if only.as_ref().is_some_and(|o| !name.contains(o.as_str())) {
                continue;
            }
            // per thread count: the mesh set to its path, the first result, and the wall
            // clock and process CPU time of every run
            let meshes: Vec<PolyMesh> = pools
                .iter()
                .map(|(_, par)| {
                    // the surface extraction reads the cached δ3 of a mesh set to this path
                    let mut m = mesh.clone();
                    m.purge_caches();
                    m.set_par(*par);
                    m
                })
                .collect();
            let mut firsts: Vec<Out> = Vec::new();
            for ((pool, par), m) in pools.iter().zip(&meshes) {
                firsts.push(pool.install(|| {
                    m.face_cells();
                    run(m, *par)
                }));
            }
            let same = firsts.iter().all(|o| *o == firsts[0]);
            let mut t = vec![Vec::new(); pools.len()];
            let mut c = vec![Vec::new(); pools.len()];
            let mut one = |k: usize| {
                let ((pool, par), m) = (&pools[k], &meshes[k]);
                regime.before_run();
                let out = pool.install(|| {
                    let c0 = process_cpu_ns().unwrap_or(0);
                    let s = Instant::now();
                    let out = std::hint::black_box(run(m, *par));
                    t[k].push(s.elapsed().as_secs_f64() * 1e3);
                    c[k].push((process_cpu_ns().unwrap_or(0) - c0) as f64 * 1e-6);
                    out
                });
                // freed outside the timing, on the calling thread for every thread count
                drop(out);
            };
            if interleave {
                for _ in 0..runs {
                    for k in 0..pools.len() {
                        one(k);
                    }
                }
            } else {
                for k in 0..pools.len() {
                    for _ in 0..runs {
                        one(k);
                    }
                }
            }
            // each round's ratio 1 thread / k threads: their median, 10th and 90th percentiles
            let round_ratios: Vec<[f64; 3]> = (1..pools.len())
                .map(|k| {
                    let mut v: Vec<f64> = (0..runs).map(|r| t[0][r] / t[k][r]).collect();
                    v.sort_by(|a, b| a.total_cmp(b));
                    [quantile(&v, 0.1), median(v.clone()), quantile(&v, 0.9)]
                })
                .collect();
            let rounds_of = |k: usize| -> String {
                (0..runs)
                    .map(|r| format!("{:.1}/{:.1}", t[0][r], t[k][r]))
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            let listing: Vec<String> = if per_round {
                (1..pools.len()).map(rounds_of).collect()
            } else {
                Vec::new()
            };
            let stat = |v: Vec<f64>| if use_min { minimum(v) } else { median(v) };
            let ms: Vec<f64> = t.into_iter().map(stat).collect();
            let cpu: Vec<f64> = c.into_iter().map(stat).collect();
            let mut line = format!("{name:<22}");
            for t in &ms {
                line += &format!(" {t:>9.3}");
            }
            for t in &ms[1..] {
                line += &format!(" {:>7.2}x", ms[0] / t);
            }
            line += &format!("  {:<9}  {:>14}", if same { "yes" } else { "NO" }, "");
            for c in &cpu {
                line += &format!(" {c:>9.3}");
            }
            if interleave {
                line += "   ratio per round (p10 median p90):";
                for [lo, mid, hi] in &round_ratios {
                    line += &format!(" {lo:.2} {mid:>5.2}x {hi:.2}");
                }
            }
            println!("{line}");
            for (l, tk) in listing.iter().zip(&threads[1..]) {
                println!("  rounds, ms 1/{tk} thr.: {l}");
            }
        }
    }
    Ok(())
}
