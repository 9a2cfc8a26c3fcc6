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
//! - by default the run before it read the same input (as far as it fits, in the caches);
//! - `--flush MIB`: a read of MIB MiB of other memory before every timed run (written once at
//!   the start and only read, so that evicting it costs no write-back): input and arrays
//!   start outside the caches.
//!
//! `--pin` pins worker `i` of the pool to CPU `i` ([`tessera_core::par::pin_to_cpu`]).
//!
//! `--regime reuse|fresh|default` (default `reuse`) sets where the runs' arrays come from
//! ([`tessera_core::trace::MemoryRegime`]): `reuse` keeps freed memory in one arena for all
//! threads, so every run reuses what the run before it freed; `fresh` (also `--fresh`) gives
//! freed memory back to the kernel before every timed run, so each run's arrays are fresh
//! pages, faulted in and zeroed on first touch. Every run's result is dropped after its timer
//! stops. **`default` (glibc's own settings) does not put the two runs in one regime**: the
//! one-thread run allocates on the calling thread, the parallel one on a pool worker, and
//! glibc serves them from different arenas with their own trimming, so one run may get pages
//! that the kernel zeroes inside its timed region while the other reuses memory. On
//! bracket-1.69M's δ3 the one-thread run paid it, and the ratio read 1.8-1.9x where it is
//! about 1.4x with both runs in one regime (BENCHMARKS.md, session 39). Before session 40
//! this tool ran in `default` and timed the drop of each result.
//!
//! `--ideal` adds a third run to every round, the **ideal bound** of that moment: two threads
//! of the pool at once (`rayon::join`), each the one-thread transpose of half of the input
//! rows (split at the middle entry) into arrays of its own, with no merge (not a result: the
//! two halves' transposes are not combined). It does the one-thread run's work in two equal
//! parts with nothing shared, so one thread / ideal is what the machine gives two threads
//! for this work at that moment, and ideal / N threads is how much of it the parallel
//! transpose reaches. (With `--threads N > 2` the halves still use two threads.) The halves
//! are not always in the whole's memory regime: a half may take the one-thread transpose's
//! zeroed path where the whole takes its advised one (δ2 of the dragon: 11 MB against 22 MB),
//! and a half's arrays may stay under glibc's 32 MiB mmap ceiling, reusing freed memory,
//! where the whole's get fresh pages every call (δ2 of bracket-1.69M: 21 MB against 42 MB).
//! For δ3 it is no bound at all: each half's two-slot transpose fills a slot array over all
//! the faces.
//!
//! ```text
//! cargo run --release -p tessera-mesh --example transpose_threads -- MESH... [--threads 2] [--rounds 31] [--morton] [--flush MIB] [--regime reuse|fresh|default] [--fresh] [--pin] [--ideal]
//! ```
//!
//! On the 2-core machine the ratios of this tool changed between periods of a few minutes
//! with the same binary (BENCHMARKS.md, session 34).

use std::time::Instant;
use tessera_core::trace::{process_cpu_ns, MemoryRegime};
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

type Op = fn(&PolyMesh, Par) -> Tcsr;

/// The rows of `m` from `rows.start` to `rows.end`, as a matrix of their own (same columns).
fn row_range(m: &Tcsr, rows: std::ops::Range<usize>) -> Tcsr {
    let off = m.offsets();
    let (b, e) = (off[rows.start] as usize, off[rows.end] as usize);
    Tcsr::from_raw_unchecked(
        m.ncols(),
        off[rows.start..=rows.end]
            .iter()
            .map(|&o| o - b as u32)
            .collect(),
        m.columns()[b..e].to_vec(),
    )
}

/// The row where `m`'s entries are split in two equal halves (nearest row boundary).
fn middle_row(m: &Tcsr) -> usize {
    m.offsets()
        .partition_point(|&o| (o as usize) < m.nnz() / 2)
        .min(m.nrows())
}

/// The two halves of op `k`'s input (`--ideal`), each with its one-thread transpose.
enum Halves {
    EdgePairs(Vec<[u32; 2]>, Vec<[u32; 2]>, usize),
    General(Tcsr, Tcsr),
    TwoSided(Tcsr, Tcsr),
}

impl Halves {
    fn of(k: usize, m: &PolyMesh) -> Halves {
        match k {
            0 => {
                let ev = m.edge_vertices();
                let h = ev.len() / 2;
                Halves::EdgePairs(ev[..h].to_vec(), ev[h..].to_vec(), m.num_vertices())
            }
            1 => {
                let fe = m.face_edges();
                let h = middle_row(fe);
                Halves::General(row_range(fe, 0..h), row_range(fe, h..fe.nrows()))
            }
            _ => {
                let cf = m.cell_faces();
                let h = middle_row(cf);
                Halves::TwoSided(row_range(cf, 0..h), row_range(cf, h..cf.nrows()))
            }
        }
    }

    /// Half `i`'s one-thread transpose.
    fn run(&self, i: usize) -> Tcsr {
        match self {
            Halves::EdgePairs(a, b, nv) => {
                transpose_edge_vertices(if i == 0 { a } else { b }, *nv, Par::Seq)
            }
            Halves::General(a, b) => (if i == 0 { a } else { b }).transpose(Par::Seq),
            Halves::TwoSided(a, b) => (if i == 0 { a } else { b }).transpose_two_sided(Par::Seq),
        }
    }

    /// Both halves at once on two threads of the pool (the caller installs the pool).
    fn run_both(&self) -> (Tcsr, Tcsr) {
        std::hint::black_box(rayon::join(|| self.run(0), || self.run(1)))
    }
}

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
    let mut regime = MemoryRegime::Reuse;
    let mut pin = false;
    let mut ideal = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--threads" => threads = args.next().ok_or("--threads needs a number")?.parse()?,
            "--rounds" => rounds = args.next().ok_or("--rounds needs a number")?.parse()?,
            "--morton" => morton = true,
            "--flush" => flush_mib = args.next().ok_or("--flush needs MiB")?.parse()?,
            "--fresh" => regime = MemoryRegime::Fresh,
            "--regime" => regime = MemoryRegime::from_arg(args.next())?,
            "--pin" => pin = true,
            "--ideal" => ideal = true,
            f => files.push(f.to_string()),
        }
    }
    if files.is_empty() || rounds == 0 || threads < 2 {
        return Err("usage: transpose_threads MESH... [--threads N >= 2] [--rounds R >= 1] [--morton] [--flush MIB] [--regime reuse|fresh|default] [--fresh] [--pin] [--ideal]".into());
    }
    // before any thread starts (the pool below)
    regime.enter()?;
    let pool = tessera_core::par::thread_pool(threads, pin)?;
    let flush_buf: Vec<u64> = (0..(flush_mib << 17) as u64).collect();
    let before_run = || {
        if flush_mib > 0 {
            let s = flush_buf.iter().fold(0u64, |a, &x| a.wrapping_add(x));
            std::hint::black_box(s);
        }
        regime.before_run();
    };
    for f in &files {
        let mut mesh = tessera_mesh::io::read_mesh(std::path::Path::new(f))?.mesh;
        if morton {
            mesh = SimplexMesh::morton_ordered(&mesh)?;
        }
        println!(
            "== {f}{}: V {} E {} F {} C {}; 1 thread against {threads}{}, {rounds} rounds{}, memory regime {}",
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
            regime.name(),
        );
        print!(
            "{:<22} {:>9} {:>9}   ratio per round: median [quartiles]   identical   {threads} thr.: process CPU ms",
            "op (ms, medians)", "1 thr.", format!("{threads} thr.")
        );
        if ideal {
            print!("   ideal (ms)   1 thr. / ideal   ideal / {threads} thr.");
        }
        println!();
        for (k, (name, op)) in OPS.iter().enumerate() {
            let halves = if ideal {
                let h = Halves::of(k, &mesh);
                // the halves' results together hold every entry once
                let (x, y) = (h.run(0), h.run(1));
                assert_eq!(x.nnz() + y.nnz(), op(&mesh, Par::Seq).nnz());
                Some(h)
            } else {
                None
            };
            let (mut ti, mut r1i, mut rin) = (Vec::new(), Vec::new(), Vec::new());
            let one = op(&mesh, Par::Seq);
            let many = pool.install(|| op(&mesh, Par::Rayon));
            let same = one == many;
            drop((one, many));
            let (mut t1, mut tn, mut ratio, mut cpu) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for round in 0..=rounds {
                let (mut a, mut b, mut c, mut d) = (0.0, 0.0, 0.0, 0.0);
                let runs = if halves.is_some() { 3 } else { 2 };
                for j in 0..runs {
                    before_run();
                    if (j + round) % runs == 2 {
                        if let Some(h) = &halves {
                            let s = Instant::now();
                            let out = pool.install(|| h.run_both());
                            d = s.elapsed().as_secs_f64() * 1e3;
                            drop(out);
                        }
                    } else if (j + round) % runs == 0 {
                        let s = Instant::now();
                        let out = std::hint::black_box(op(&mesh, Par::Seq));
                        a = s.elapsed().as_secs_f64() * 1e3;
                        drop(out);
                    } else {
                        let c0 = process_cpu_ns().unwrap_or(0);
                        let s = Instant::now();
                        let out = pool.install(|| std::hint::black_box(op(&mesh, Par::Rayon)));
                        b = s.elapsed().as_secs_f64() * 1e3;
                        drop(out);
                        c = process_cpu_ns().unwrap_or(0).saturating_sub(c0) as f64 * 1e-6;
                    }
                }
                // round 0 warms up
                if round > 0 {
                    t1.push(a);
                    tn.push(b);
                    ratio.push(a / b);
                    cpu.push(c);
                    if halves.is_some() {
                        ti.push(d);
                        r1i.push(a / d);
                        rin.push(d / b);
                    }
                }
            }
            print!(
                "{name:<22} {:>9.3} {:>9.3}   {:>5.2}x [{:.2}-{:.2}x]{:>22}   {:>10.3}",
                quantile(t1, 0.5),
                quantile(tn, 0.5),
                quantile(ratio.clone(), 0.5),
                quantile(ratio.clone(), 0.25),
                quantile(ratio, 0.75),
                if same { "yes" } else { "NO" },
                quantile(cpu, 0.5)
            );
            if halves.is_some() {
                print!(
                    "   {:>10.3}   {:>5.2}x [{:.2}-{:.2}x]   {:>5.2}x [{:.2}-{:.2}x]",
                    quantile(ti, 0.5),
                    quantile(r1i.clone(), 0.5),
                    quantile(r1i.clone(), 0.25),
                    quantile(r1i, 0.75),
                    quantile(rin.clone(), 0.5),
                    quantile(rin.clone(), 0.25),
                    quantile(rin, 0.75),
                );
            }
            println!();
        }
    }
    Ok(())
}
