//! The thread scaling of the CPU transposes δ1, δ2 and δ3 (dissertation §3.4.1) measured on
//! **one copy of the input**: every round times the one-thread transpose (`Par::Seq`, on the
//! calling thread) and the parallel one (`Par::Rayon` in a pool of `--threads` threads) of the
//! same arrays, in alternating order, and reports each one's median, the median and
//! quartiles of the per-round ratio one thread / N threads, and the median process CPU time
//! of the parallel runs (all threads together: equal to the wall clock when only one thread
//! ran at a time). The results are checked equal.
//!
//! `relations_threads` gives each thread count a mesh of its own, so that a run reads input
//! that the run before it (of the other thread count) may have pushed out of the caches;
//! here both read the same arrays, and the caches' state before each run can be set:
//! - by default the run before it read the same input (as far as it fits, in the caches),
//!   and its arrays may reuse the memory that run freed;
//! - `--flush MIB`: a read of MIB MiB of other memory before every timed run (written once at
//!   the start and only read, so that evicting it costs no write-back): input and arrays
//!   start outside the caches;
//! - `--fresh`: freed memory is given back to the system before every timed run
//!   (`malloc_trim`), so that each run's arrays are fresh pages, faulted in and zeroed by the
//!   kernel on first touch.
//!
//! `--pin` pins worker `i` of the pool to CPU `i` ([`tessera_core::par::pin_to_cpu`]).
//!
//! ```text
//! cargo run --release -p tessera-mesh --example transpose_threads -- MESH... [--threads 2] [--rounds 31] [--morton] [--flush MIB] [--fresh] [--pin]
//! ```
//!
//! On the 2-core machine the ratios of this tool changed between periods of a few minutes
//! with the same binary (BENCHMARKS.md, session 34).

use std::time::Instant;
use tessera_core::trace::process_cpu_ns;
use tessera_core::Par;
use tessera_mesh::relations::{compute_face_cells, transpose_edge_vertices};
use tessera_mesh::simplex::SimplexMesh;
use tessera_mesh::PolyMesh;
use tessera_sparse::Tcsr;

/// The `f` quantile of `v` (nearest rank).
fn quantile(mut v: Vec<f64>, f: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() - 1) as f64 * f).round() as usize]
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn give_back_free_memory() {
    extern "C" {
        fn malloc_trim(pad: usize) -> i32;
    }
    // SAFETY: glibc's malloc_trim only returns free memory of the heap to the system
    unsafe { malloc_trim(0) };
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn give_back_free_memory() {}

type Op = fn(&PolyMesh, Par) -> Tcsr;

const OPS: &[(&str, Op)] = &[
    ("d1 (vertex -> edges)", |m, p| {
        transpose_edge_vertices(m.edge_vertices(), m.num_vertices(), p)
    }),
    ("d2 (edge -> faces)", |m, p| m.face_edges().transpose(p)),
    ("d3 (face -> cells)", |m, p| compute_face_cells(m, p)),
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut files = Vec::new();
    let mut threads = 2usize;
    let mut rounds = 31usize;
    let mut morton = false;
    let mut flush_mib = 0usize;
    let mut fresh = false;
    let mut pin = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--threads" => threads = args.next().ok_or("--threads needs a number")?.parse()?,
            "--rounds" => rounds = args.next().ok_or("--rounds needs a number")?.parse()?,
            "--morton" => morton = true,
            "--flush" => flush_mib = args.next().ok_or("--flush needs MiB")?.parse()?,
            "--fresh" => fresh = true,
            "--pin" => pin = true,
            f => files.push(f.to_string()),
        }
    }
    if files.is_empty() || rounds == 0 || threads < 2 {
        return Err("usage: transpose_threads MESH... [--threads N >= 2] [--rounds R >= 1] [--morton] [--flush MIB] [--fresh] [--pin]".into());
    }
    let pool = tessera_core::par::thread_pool(threads, pin)?;
    let flush_buf: Vec<u64> = (0..(flush_mib << 17) as u64).collect();
    let before_run = || {
        if flush_mib > 0 {
            let s = flush_buf.iter().fold(0u64, |a, &x| a.wrapping_add(x));
            std::hint::black_box(s);
        }
        if fresh {
            give_back_free_memory();
        }
    };
    for f in &files {
        let mut mesh = tessera_mesh::io::read_mesh(std::path::Path::new(f))?.mesh;
        if morton {
            mesh = SimplexMesh::morton_ordered(&mesh)?;
        }
        println!(
            "== {f}{}: V {} E {} F {} C {}; 1 thread against {threads}{}, {rounds} rounds{}{}",
            if morton { " (Morton order)" } else { "" },
            mesh.num_vertices(),
            mesh.num_edges(),
            mesh.num_faces(),
            mesh.num_cells(),
            if pin { " (pinned)" } else { "" },
            if flush_mib > 0 {
                format!(", {flush_mib} MiB read before each run")
            } else {
                String::new()
            },
            if fresh {
                ", fresh pages for each run"
            } else {
                ""
            },
        );
        println!(
            "{:<22} {:>9} {:>9}   ratio per round: median [quartiles]   identical   {threads} thr.: process CPU ms",
            "op (ms, medians)", "1 thr.", format!("{threads} thr.")
        );
        for (name, op) in OPS {
            let one = op(&mesh, Par::Seq);
            let many = pool.install(|| op(&mesh, Par::Rayon));
            let same = one == many;
            drop((one, many));
            let (mut t1, mut tn, mut ratio, mut cpu) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for round in 0..=rounds {
                let (mut a, mut b, mut c) = (0.0, 0.0, 0.0);
                for k in 0..2 {
                    before_run();
                    if (k + round) % 2 == 0 {
                        let s = Instant::now();
                        std::hint::black_box(op(&mesh, Par::Seq));
                        a = s.elapsed().as_secs_f64() * 1e3;
                    } else {
                        let c0 = process_cpu_ns().unwrap_or(0);
                        let s = Instant::now();
                        pool.install(|| std::hint::black_box(op(&mesh, Par::Rayon)));
                        b = s.elapsed().as_secs_f64() * 1e3;
                        c = process_cpu_ns().unwrap_or(0).saturating_sub(c0) as f64 * 1e-6;
                    }
                }
                // round 0 warms up
                if round > 0 {
                    t1.push(a);
                    tn.push(b);
                    ratio.push(a / b);
                    cpu.push(c);
                }
            }
            println!(
                "{name:<22} {:>9.3} {:>9.3}   {:>5.2}x [{:.2}-{:.2}x]{:>22}   {:>10.3}",
                quantile(t1, 0.5),
                quantile(tn, 0.5),
                quantile(ratio.clone(), 0.5),
                quantile(ratio.clone(), 0.25),
                quantile(ratio, 0.75),
                if same { "yes" } else { "NO" },
                quantile(cpu, 0.5)
            );
        }
    }
    Ok(())
}
