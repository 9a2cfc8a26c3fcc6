//! The SpMV benchmark suite (dissertation §5.4, Tables 5.1-5.3; seed 002 Table 9): per matrix
//! and precision, joint layout/schedule tuning, schedule-only tuning of the natural CSR-AoS-AoS
//! layout, the cuSPARSE baseline, the bytes each variant must move and the achieved bandwidth
//! next to the measured device copy bandwidth, and the memory overhead per layout.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use tessera_gpu::cusparse::CusparseSpmv;

use crate::entry::EntrySpec;
use crate::error::{Result, SpmvError};
use crate::gpu::{test_vector, GpuTimer, SpmvGpu};
use crate::layout::{bytes_moved, memory_overhead_with, CsrMatrix, Layout, LayoutMatrix};
use crate::matrices::{expand_quaternion, MatrixSource, MatrixStats};
use crate::scalar::{Precision, Scalar};
use crate::tuning::{tune, Candidate, Search, TuneParams, TuningDb, TuningKey};

/// Options of [`tune_matrix`] and [`run_bench`].
#[derive(Clone, Debug)]
pub struct BenchOptions {
    pub search: Search,
    /// Timed runs per variant (median) and untimed warm-up runs.
    pub runs: usize,
    pub warmup: usize,
    pub memory_weight: f64,
    /// Tuning database (None: no database).
    pub db: Option<PathBuf>,
    /// Re-tune even on a database hit.
    pub force: bool,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            search: Search::Fast,
            runs: 50,
            warmup: 5,
            memory_weight: 0.0,
            db: Some(TuningDb::default_path()),
            force: false,
        }
    }
}

/// Everything measured for one matrix, entry type and precision.
#[derive(Clone, Debug)]
pub struct TuneReport {
    pub matrix: String,
    pub entry: String,
    pub precision: Precision,
    pub stats: MatrixStats,
    /// Best candidate per layout (of the joint search), best first.
    pub per_layout: Vec<Candidate>,
    /// Best joint variant.
    pub best: Candidate,
    /// Best schedule of the natural CSR-AoS-AoS layout over the full schedule space
    /// (schedule-only tuning, the dissertation's reference for the layout tuning speedup).
    pub natural: Candidate,
    pub from_db: bool,
    pub evaluated: usize,
    /// cuSPARSE time (ms) and what it ran.
    pub cusparse: Option<(f64, String)>,
    /// Bytes the best / natural variant must move, and cuSPARSE's.
    pub bytes_best: usize,
    pub bytes_natural: usize,
    pub bytes_cusparse: usize,
    /// (CSR bytes, [ELL, SI-16, SI-32, cuSPARSE] multiples) with 4-byte indices and 8-byte
    /// scalars (seed 002 Table 9 convention).
    pub memory: (usize, [f64; 4]),
}

fn gbps(bytes: usize, ms: f64) -> f64 {
    bytes as f64 / (ms * 1e-3) / 1e9
}

/// Bytes cuSPARSE must move for its baseline of this entry type, and a description.
fn cusparse_bytes(entry: &str, a: &CsrMatrix<f64>, s: usize) -> Option<(usize, String)> {
    let idx = (a.n_rows + 1 + a.nnz()) * 4;
    match entry {
        "complex" => Some((
            idx + a.nnz() * 2 * s + (a.n_rows + a.n_cols) * 2 * s,
            "CSR complex (cusparseSpMV)".into(),
        )),
        "real" => Some((
            idx + a.nnz() * s + (a.n_rows + a.n_cols) * s,
            "CSR real (cusparseSpMV)".into(),
        )),
        "block3" => Some((
            idx + a.nnz() * 9 * s + (a.n_rows + a.n_cols) * 3 * s,
            "BSR 3x3 (cusparseXbsrmv)".into(),
        )),
        "quaternion" => Some((
            idx + a.nnz() * 16 * s + (a.n_rows + a.n_cols) * 4 * s,
            "BSR 4x4 expansion, Eq. 5.1 (cusparseXbsrmv)".into(),
        )),
        _ => None,
    }
}

fn time_cusparse<T: Scalar + tessera_gpu::cusparse::CusparseScalar>(
    g: &SpmvGpu,
    entry: &str,
    a64: &CsrMatrix<f64>,
    runs: usize,
    warmup: usize,
) -> Result<Option<f64>> {
    let o = g.gpu.ordinal();
    let mut cs = match entry {
        "complex" | "real" => {
            let a: CsrMatrix<T> = a64.cast();
            let l = a.entry_len;
            let x = test_vector::<T>(a.n_cols, l, 3);
            CusparseSpmv::csr(
                o,
                a.n_rows,
                a.n_cols,
                &a.row_ptr,
                &a.col_idx,
                &a.values,
                &x,
                l == 2,
            )?
        }
        "block3" => {
            let a: CsrMatrix<T> = a64.cast();
            let x = test_vector::<T>(a.n_cols, 3, 3);
            CusparseSpmv::bsr(
                o, 3, a.n_rows, a.n_cols, &a.row_ptr, &a.col_idx, &a.values, &x,
            )?
        }
        "quaternion" => {
            let e: CsrMatrix<T> = expand_quaternion(a64)?.cast();
            let x = test_vector::<T>(e.n_cols, 4, 3);
            CusparseSpmv::bsr(
                o, 4, e.n_rows, e.n_cols, &e.row_ptr, &e.col_idx, &e.values, &x,
            )?
        }
        _ => return Ok(None),
    };
    Ok(Some(cs.median_ms(runs, warmup)?))
}

/// Tunes one matrix (joint search, schedule-only natural baseline, cuSPARSE).
pub fn tune_matrix(
    g: &SpmvGpu,
    spec: &EntrySpec,
    a64: &CsrMatrix<f64>,
    name: &str,
    p: Precision,
    opts: &BenchOptions,
) -> Result<TuneReport> {
    match p {
        Precision::F32 => tune_matrix_t::<f32>(g, spec, a64, name, opts),
        Precision::F64 => tune_matrix_t::<f64>(g, spec, a64, name, opts),
    }
}

fn tune_matrix_t<T: Scalar + tessera_gpu::cusparse::CusparseScalar>(
    g: &SpmvGpu,
    spec: &EntrySpec,
    a64: &CsrMatrix<f64>,
    name: &str,
    opts: &BenchOptions,
) -> Result<TuneReport> {
    let p = T::PRECISION;
    let a: CsrMatrix<T> = a64.cast();
    let stats = MatrixStats::of(&a);
    let layouts = Layout::all();
    let mut mem = std::collections::HashMap::new();
    let mut moved = std::collections::HashMap::new();
    for &l in &layouts {
        let m = LayoutMatrix::from_csr(&a, l)?;
        mem.insert(l, m.memory_bytes());
        moved.insert(l, bytes_moved(&m, spec, a.nnz()));
    }
    let memf = |l: Layout| mem.get(&l).copied().unwrap_or(0);
    let key = TuningKey {
        gpu: g.limits.name.clone(),
        sm: g.limits.sm(),
        cuda: g.cuda_version(),
        entry: spec.name.clone(),
        precision: p.name().into(),
        class: stats.class_signature(),
    };
    let mut db = match &opts.db {
        Some(path) => Some(TuningDb::open(path)?),
        None => None,
    };
    // NVRTC runs for all modules of this search in parallel before the timing starts
    let diag = if opts.search == Search::Fast {
        g.limits.diagonal_schedules()
    } else {
        g.limits.all_schedules()
    };
    let mut work: Vec<(Layout, Vec<crate::schedule::Schedule>)> =
        layouts.iter().map(|&l| (l, diag.clone())).collect();
    work.push((Layout::NATURAL, g.limits.all_schedules()));
    g.prewarm(spec, p, &work)?;
    let mut timer = GpuTimer::new(g, spec, &a, opts.runs, opts.warmup);
    let params = TuneParams {
        search: opts.search,
        memory_weight: opts.memory_weight,
        layouts: layouts.clone(),
        force: opts.force,
    };
    let out = tune(
        &mut timer,
        &g.limits,
        &key,
        name,
        db.as_mut(),
        &memf,
        &params,
    )?;
    let nat_params = TuneParams {
        search: Search::Full,
        memory_weight: 0.0,
        layouts: vec![Layout::NATURAL],
        force: true,
    };
    let nat = tune(&mut timer, &g.limits, &key, name, None, &memf, &nat_params)?;
    let best = out
        .best()
        .cloned()
        .ok_or_else(|| SpmvError::Gpu("no variant was timed".into()))?;
    let natural = nat
        .best()
        .cloned()
        .ok_or_else(|| SpmvError::Gpu("no natural variant was timed".into()))?;
    let mut per_layout: Vec<Candidate> = Vec::new();
    for c in &out.ranked {
        if !per_layout.iter().any(|d| d.layout == c.layout) {
            per_layout.push(c.clone());
        }
    }
    let cus = match time_cusparse::<T>(g, &spec.name, a64, opts.runs, opts.warmup) {
        Ok(t) => t,
        Err(e) => {
            eprintln!(
                "warning: cuSPARSE baseline for {name} ({}, {p}) failed: {e}",
                spec.name
            );
            None
        }
    };
    let cb = cusparse_bytes(&spec.name, a64, p.bytes());
    let cusparse = match (cus, &cb) {
        (Some(t), Some((_, d))) => Some((t, d.clone())),
        _ => None,
    };
    let (base, r) = memory_overhead_with(a64, 4, 8)?;
    let cusp_mem = if spec.name == "quaternion" {
        ((a.n_rows + 1 + a.nnz()) * 4 + a.nnz() * 16 * 8) as f64 / base as f64
    } else {
        1.0
    };
    Ok(TuneReport {
        matrix: name.to_string(),
        entry: spec.name.clone(),
        precision: p,
        stats,
        bytes_best: moved.get(&best.layout).copied().unwrap_or(0),
        bytes_natural: moved.get(&natural.layout).copied().unwrap_or(0),
        bytes_cusparse: cb.map(|c| c.0).unwrap_or(0),
        per_layout,
        best,
        natural,
        from_db: out.from_db,
        evaluated: out.evaluated + nat.evaluated,
        cusparse,
        memory: (base, [r[0], r[1], r[2], cusp_mem]),
    })
}

/// Prints the ranked layouts of one report (`tessera spmv tune`).
pub fn print_tune_report(
    r: &TuneReport,
    copy_gbps: Option<f64>,
    w: &mut dyn Write,
) -> std::io::Result<()> {
    writeln!(
        w,
        "matrix {} ({} x {}, {} {} entries, rows {}..{} (median {}), class {})",
        r.matrix,
        r.stats.n_rows,
        r.stats.n_cols,
        r.stats.nnz,
        r.entry,
        r.stats.row_len_min,
        r.stats.row_len_max,
        r.stats.row_len_median,
        r.stats.class_signature()
    )?;
    if r.from_db {
        writeln!(
            w,
            "tuning database hit: no search, the stored variant was re-timed"
        )?;
    } else {
        writeln!(w, "{} variants timed", r.evaluated)?;
    }
    writeln!(w, "| rank | layout | paper notation | schedule | time (us) | GB/s | vs natural | memory (MiB) |")?;
    writeln!(w, "|---|---|---|---|---|---|---|---|")?;
    for (i, c) in r.per_layout.iter().enumerate() {
        writeln!(
            w,
            "| {} | {} | {} | {} | {:.2} | {} | {:.2}x | {:.2} |",
            i + 1,
            c.layout,
            c.layout.paper_name(),
            c.schedule,
            c.time_ms * 1e3,
            if i == 0 {
                format!("{:.0}", gbps(r.bytes_best, c.time_ms))
            } else {
                "".into()
            },
            r.natural.time_ms / c.time_ms,
            c.memory_bytes as f64 / (1 << 20) as f64
        )?;
    }
    writeln!(
        w,
        "best: {} {} at {:.2} us, {:.0} GB/s for {} bytes{}",
        r.best.layout,
        r.best.schedule,
        r.best.time_ms * 1e3,
        gbps(r.bytes_best, r.best.time_ms),
        r.bytes_best,
        copy_gbps
            .map(|c| format!(
                " ({:.0}% of copy bandwidth {:.0} GB/s)",
                100.0 * gbps(r.bytes_best, r.best.time_ms) / c,
                c
            ))
            .unwrap_or_default()
    )?;
    writeln!(
        w,
        "natural CSR-AoS-AoS (schedule tuning only): {} at {:.2} us: layout tuning speedup {:.2}x",
        r.natural.schedule,
        r.natural.time_ms * 1e3,
        r.natural.time_ms / r.best.time_ms
    )?;
    if let Some((t, d)) = &r.cusparse {
        writeln!(
            w,
            "cuSPARSE {d}: {:.2} us, {:.0} GB/s: speedup over cuSPARSE {:.2}x",
            t * 1e3,
            gbps(r.bytes_cusparse, *t),
            t / r.best.time_ms
        )?;
    }
    Ok(())
}

/// The dissertation's GP100 rows (Tables 5.1-5.3): matrix, single layout and speedup,
/// double layout and speedup.
pub const PAPER_GP100: &[(&str, &str, &str, f64, &str, f64)] = &[
    (
        "complex",
        "mhd1280b",
        "CSR-SoA-AoS",
        1.05,
        "CSR-SoA-SoA",
        1.00,
    ),
    (
        "complex",
        "RFdevice",
        "CSR-SoA-AoS",
        1.18,
        "CSR-AoS-AoS",
        1.00,
    ),
    (
        "complex",
        "fem_filter",
        "ELL-AoS-AoS",
        1.52,
        "ELL-AoS-AoS",
        1.16,
    ),
    (
        "complex",
        "mono_500Hz",
        "ELL-AoS-AoS",
        2.09,
        "ELL-AoS-AoS",
        1.84,
    ),
    (
        "quaternion",
        "bunny",
        "ELL-AoS-AoS",
        1.46,
        "ELL-AoS-AoS",
        1.40,
    ),
    (
        "quaternion",
        "armadillo",
        "ELL-AoS-AoS",
        1.68,
        "ELL-SoA-AoS",
        1.42,
    ),
    (
        "quaternion",
        "dragon",
        "ELL-AoS-AoS",
        1.54,
        "ELL-AoS-AoS",
        1.31,
    ),
    (
        "quaternion",
        "buddha",
        "ELL-AoS-AoS",
        1.48,
        "ELL-AoS-AoS",
        1.31,
    ),
    (
        "block3",
        "armadillo_1000.1",
        "SI-16-SoA-SoA",
        1.20,
        "SI-32-SoA-SoA",
        1.18,
    ),
    (
        "block3",
        "bunny2.4M",
        "ELL-AoS-AoS",
        1.12,
        "ELL-AoS-SoA",
        1.21,
    ),
    (
        "block3",
        "nut_37k",
        "SI-32-SoA-SoA",
        1.27,
        "ELL-AoS-AoS",
        1.27,
    ),
    (
        "block3",
        "dragon_100K",
        "ELL-AoS-AoS",
        1.61,
        "ELL-AoS-AoS",
        1.52,
    ),
    (
        "block3",
        "NX_MotorH67k",
        "ELL-SoA-AoS",
        1.95,
        "ELL-SoA-AoS",
        1.67,
    ),
];

/// One suite entry: entry type, source, the dissertation matrix it stands in for.
pub fn suite(
    matrices_dir: Option<&Path>,
    quick: bool,
) -> Vec<(&'static str, MatrixSource, &'static str)> {
    let mut v = Vec::new();
    if let Some(d) = matrices_dir {
        let p = d.join("bcsstk16.mtx.gz");
        if p.exists() {
            v.push((
                "block3",
                MatrixSource::File(p),
                "fem/* (real FEM, 3 DOF/node)",
            ));
        }
    }
    v.push((
        "block3",
        MatrixSource::TetGrid(20, 20, 20),
        "fem/nut_37k (9k block rows)",
    ));
    v.push((
        "block3",
        MatrixSource::TetGrid(40, 40, 40),
        "fem/NX_MotorH67k (69k block rows)",
    ));
    if !quick {
        v.push((
            "block3",
            MatrixSource::TetGrid(56, 56, 56),
            "larger than fem/* (185k block rows)",
        ));
    }
    v.push((
        "quaternion",
        MatrixSource::Sphere(5),
        "surface/bunny scale (10k rows)",
    ));
    v.push((
        "quaternion",
        MatrixSource::Sphere(7),
        "surface/armadillo (173k rows)",
    ));
    if !quick {
        v.push((
            "quaternion",
            MatrixSource::Sphere(8),
            "surface/buddha (544k rows)",
        ));
    }
    if let Some(d) = matrices_dir {
        for (f, analogue) in [
            ("mhd1280b.mtx.gz", "mhd1280b (same matrix)"),
            ("young1c.mtx.gz", "-"),
            ("qc324.mtx.gz", "-"),
        ] {
            let p = d.join(f);
            if p.exists() {
                v.push(("complex", MatrixSource::File(p), analogue));
            }
        }
    }
    if !quick {
        v.push((
            "complex",
            MatrixSource::Random(400_000, 12),
            "RFdevice..mono_500Hz size (random pattern, skewed rows)",
        ));
    }
    v
}

/// Device copy bandwidth (read + write bytes per second, GB/s) of a 256 MiB device-to-device copy.
pub fn copy_bandwidth(g: &SpmvGpu) -> Result<f64> {
    let n = 64usize << 20; // u32 elements = 256 MiB
    let src = g.gpu.zeros::<u32>(n)?;
    let mut dst = g.gpu.zeros::<u32>(n)?;
    let t = g
        .gpu
        .median_ms(20, 3, || g.gpu.copy_device(&src, &mut dst))?;
    Ok(gbps(2 * 4 * n, t))
}

/// Runs the whole suite and prints Tables 5.1-5.3 and Table 9 beside the dissertation's numbers.
pub fn run_bench(
    g: &SpmvGpu,
    matrices_dir: Option<&Path>,
    quick: bool,
    precisions: &[Precision],
    opts: &BenchOptions,
    budget_s: f64,
    w: &mut dyn Write,
) -> Result<Vec<TuneReport>> {
    let start = Instant::now();
    let io = |e: std::io::Error| SpmvError::Gpu(format!("writing output: {e}"));
    let copy = copy_bandwidth(g)?;
    writeln!(w, "# SpMV layout/schedule tuning (dissertation §5.4)\n\ndevice: {} ({}, {} SMs, CUDA/NVRTC {}), copy bandwidth {:.0} GB/s (read+write, 256 MiB D2D)\nsearch: {:?}, {} timed runs (median) after {} warm-up runs per variant\n",
        g.limits.name, g.limits.sm(), g.limits.n_sm, g.cuda_version(), copy, opts.search, opts.runs, opts.warmup).map_err(io)?;
    let mut reports = Vec::new();
    let mut loaded = Vec::new();
    for (entry, src, analogue) in suite(matrices_dir, quick) {
        let spec = EntrySpec::builtin(entry)?;
        let (a, note) = src.load(&spec)?;
        loaded.push((spec, src, analogue, a, note));
    }
    writeln!(
        w,
        "(matrices generated and loaded in {:.1} s)\n",
        start.elapsed().as_secs_f64()
    )
    .map_err(io)?;
    // all matrices in the first precision, then the next (the time budget cuts the tail)
    for &p in precisions {
        for (spec, src, analogue, a, note) in &loaded {
            if start.elapsed().as_secs_f64() > budget_s {
                writeln!(
                    w,
                    "(time budget of {budget_s:.0} s reached: skipping {} {p})",
                    src.name()
                )
                .map_err(io)?;
                continue;
            }
            let t0 = Instant::now();
            let r = tune_matrix(g, spec, a, &src.name(), p, opts)?;
            writeln!(
                w,
                "## {} {} {}  (stands in for: {analogue}; {:.1} s)",
                spec.name,
                src.name(),
                p,
                t0.elapsed().as_secs_f64()
            )
            .map_err(io)?;
            if let Some(n) = note {
                writeln!(w, "note: {n}").map_err(io)?;
            }
            print_tune_report(&r, Some(copy), w).map_err(io)?;
            writeln!(w).map_err(io)?;
            w.flush().map_err(io)?;
            reports.push(r);
        }
    }
    print_summary(&reports, copy, w).map_err(io)?;
    Ok(reports)
}

/// Tables 5.1-5.3 (ours beside the dissertation's GP100 rows) and Table 9.
pub fn print_summary(reports: &[TuneReport], copy: f64, w: &mut dyn Write) -> std::io::Result<()> {
    for (entry, title) in [
        ("complex", "Table 5.1 (complex)"),
        ("quaternion", "Table 5.2 (quaternionic)"),
        ("block3", "Table 5.3 (3x3 blocks)"),
    ] {
        writeln!(w, "### {title}: best layout, layout tuning speedup, speedup over cuSPARSE, achieved bandwidth\n")?;
        writeln!(w, "| matrix | prec | rows | nnz | best layout | schedule | time (us) | GB/s | % copy | layout speedup | cuSPARSE (us) | cuSPARSE GB/s | vs cuSPARSE |")?;
        writeln!(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")?;
        for r in reports.iter().filter(|r| r.entry == entry) {
            let bw = gbps(r.bytes_best, r.best.time_ms);
            let (ct, cbw, sp) = match &r.cusparse {
                Some((t, _)) => (
                    format!("{:.2}", t * 1e3),
                    format!("{:.0}", gbps(r.bytes_cusparse, *t)),
                    format!("{:.2}x", t / r.best.time_ms),
                ),
                None => ("-".into(), "-".into(), "-".into()),
            };
            writeln!(
                w,
                "| {} | {} | {} | {} | {} | {} | {:.2} | {:.0} | {:.0}% | {:.2}x | {} | {} | {} |",
                r.matrix,
                r.precision,
                r.stats.n_rows,
                r.stats.nnz,
                r.best.layout.paper_name(),
                r.best.schedule,
                r.best.time_ms * 1e3,
                bw,
                100.0 * bw / copy,
                r.natural.time_ms / r.best.time_ms,
                ct,
                cbw,
                sp
            )?;
        }
        writeln!(w, "\nDissertation, GP100 rows of the same table (layout tuning speedup vs schedule tuning only):\n")?;
        writeln!(
            w,
            "| matrix | single | speedup | double | speedup |\n|---|---|---|---|---|"
        )?;
        for row in PAPER_GP100.iter().filter(|r| r.0 == entry) {
            writeln!(
                w,
                "| {} | {} | {:.2}x | {} | {:.2}x |",
                row.1, row.2, row.3, row.4, row.5
            )?;
        }
        writeln!(w)?;
    }
    writeln!(
        w,
        "### Memory per layout (seed 002 Table 9 convention: 4-byte indices, 8-byte scalars)\n"
    )?;
    writeln!(
        w,
        "| matrix | entry | CSR/BSR | ELL | SI-16 | SI-32 | cuSp. |\n|---|---|---|---|---|---|---|"
    )?;
    let mut seen = Vec::new();
    for r in reports {
        if seen.contains(&(&r.matrix, &r.entry)) {
            continue;
        }
        seen.push((&r.matrix, &r.entry));
        let (b, m) = r.memory;
        let size = if b >= 1 << 20 {
            format!("{:.1} MiB", b as f64 / (1 << 20) as f64)
        } else {
            format!("{:.1} KiB", b as f64 / 1024.0)
        };
        writeln!(
            w,
            "| {} | {} | {} | {:.1}x | {:.1}x | {:.1}x | {:.1}x |",
            r.matrix, r.entry, size, m[0], m[1], m[2], m[3]
        )?;
    }
    writeln!(w, "\nDissertation Table 9 (seed 002): mhd1280b 449.9 KiB 1.8x 1.5x 1.7x 1.0x; surfaces 1.7-2.5x / 1.1-1.3x / 1.2-1.4x / 3.6x; fem 1.9-7.4x / 1.2-2.0x / 1.3-2.3x / 1.0x")?;
    Ok(())
}
