//! `tessera spmv`: the SpMV code generator and joint schedule/layout autotuner for compound
//! entries (dissertation Chapter 5): `tune`, `bench`, `codegen`, `verify`, `memory`.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context};
use clap::{Args, Subcommand};
use tessera_core::DeviceChoice;
use tessera_spmv::bench::{
    copy_bandwidth, print_tune_report, run_bench, tune_matrix, BenchOptions,
};
use tessera_spmv::gpu::{conformance_schedules, verify_cpu, verify_gpu, SpmvGpu, VariantCheck};
use tessera_spmv::layout::memory_overhead_with;
use tessera_spmv::matrices::{MatrixSource, MatrixStats};
use tessera_spmv::tuning::{Search, TuningDb};
use tessera_spmv::{codegen, EntrySpec, Layout, Precision, Schedule, ScheduleKind, SpmvError};

#[derive(Args, Debug)]
pub struct SpmvArgs {
    #[command(subcommand)]
    cmd: SpmvCmd,
}

#[derive(Subcommand, Debug)]
enum SpmvCmd {
    /// Jointly tune layout and schedule for one matrix; print the ranked layouts and the
    /// speedups over the natural CSR-AoS-AoS layout and over cuSPARSE. Times generated CUDA
    /// kernels: needs a CUDA GPU (the CPU layouts are checked by `spmv verify --device cpu`).
    Tune(TuneArgs),
    /// Run the whole suite: Tables 5.1-5.3 and Table 9 beside the dissertation's numbers.
    /// Needs a CUDA GPU (as `tune`).
    Bench(BenchArgs),
    /// Print the generated CUDA source of one variant.
    Codegen(CodegenArgs),
    /// Run every layout (and on a GPU every schedule variant) against the CPU reference;
    /// exits non-zero if any disagrees.
    Verify(VerifyArgs),
    /// Memory use of each outer layout for one matrix (as in Table 9 of the layout-tuning
    /// paper; computed on the CPU).
    Memory(MemoryArgs),
}

#[derive(Args, Debug)]
struct MatrixArg {
    /// A .mtx[.gz] / .obj / .ply file, or gen:sphere:L, gen:torus:NxM, gen:tetgrid:N[xNxN], gen:random:N:MEAN.
    matrix: String,
    /// Entry type: real, complex, quaternion, dualquat, blockE (E = 1..8; block3 = 3x3 blocks), or a TOML spec file.
    #[arg(long)]
    entry: String,
}

#[derive(Args, Debug)]
struct TuneArgs {
    #[command(flatten)]
    m: MatrixArg,
    /// Scalar type of the entries: f32 or f64.
    #[arg(long, default_value = "f32")]
    precision: String,
    /// full: exhaustive joint search; fast: one schedule per threads-per-SM diagonal, then
    /// the best diagonal in full (the schedule-tuning paper, §5.4).
    #[arg(long, default_value = "fast")]
    search: String,
    /// Weight w of the memory overhead in the score time * (bytes / bytes_CSR)^w.
    #[arg(long, default_value_t = 0.0)]
    memory_weight: f64,
    /// Timed runs per variant (the median is used).
    #[arg(long, default_value_t = 50)]
    runs: usize,
    /// Untimed runs before timing.
    #[arg(long, default_value_t = 5)]
    warmup: usize,
    /// Tuning database (default: $TESSERA_TUNING_DB or the cache folder).
    #[arg(long)]
    db: Option<PathBuf>,
    /// Do not read or write the tuning database.
    #[arg(long)]
    no_db: bool,
    /// Search even when the database has a record (the new result replaces it).
    #[arg(long)]
    force: bool,
    /// The CUDA device: cuda or cuda:N (auto picks cuda:0; there is no CPU tuning).
    #[arg(long, default_value = "cuda")]
    device: DeviceChoice,
}

#[derive(Args, Debug)]
struct BenchArgs {
    /// Smaller suite (skips the largest matrices).
    #[arg(long)]
    quick: bool,
    /// full or fast (see `spmv tune --help`).
    #[arg(long, default_value = "fast")]
    search: String,
    /// f32, f64 or both.
    #[arg(long, default_value = "both")]
    precision: String,
    /// Folder with the Matrix Market test matrices (default: the shared matrix folder when
    /// present, else generated matrices only).
    #[arg(long)]
    matrices: Option<PathBuf>,
    /// Stop starting new matrices after this many seconds.
    #[arg(long, default_value_t = 1e9)]
    budget_s: f64,
    /// Timed runs per variant (the median is used).
    #[arg(long, default_value_t = 50)]
    runs: usize,
    /// Untimed runs before timing.
    #[arg(long, default_value_t = 5)]
    warmup: usize,
    /// Weight w of the memory overhead in the score time * (bytes / bytes_CSR)^w.
    #[arg(long, default_value_t = 0.0)]
    memory_weight: f64,
    /// Do not read or write the tuning database (always search).
    #[arg(long)]
    no_db: bool,
    /// The CUDA device: cuda or cuda:N (auto picks cuda:0; there is no CPU benchmark).
    #[arg(long, default_value = "cuda")]
    device: DeviceChoice,
}

#[derive(Args, Debug)]
struct CodegenArgs {
    /// Entry type: real, complex, quaternion, dualquat, blockE (E = 1..8; block3 = 3x3
    /// blocks), or a TOML spec file.
    #[arg(long)]
    entry: String,
    /// Scalar type of the entries: f32 or f64.
    #[arg(long, default_value = "f32")]
    precision: String,
    /// OUTER-INNER-VECTOR: OUTER in csr, ell, sell16, sell32; INNER and VECTOR in aos, soa.
    #[arg(long)]
    layout: String,
    /// Schedule kind: static (rows split evenly over the blocks) or dynamic (blocks take
    /// chunks of rows from a shared counter).
    #[arg(long, default_value = "static")]
    schedule: String,
    /// Blocks per SM (n_b).
    #[arg(long, default_value_t = 4)]
    nb: u32,
    /// Threads per block (n_t).
    #[arg(long, default_value_t = 256)]
    nt: u32,
}

#[derive(Args, Debug)]
struct VerifyArgs {
    #[command(flatten)]
    m: MatrixArg,
    /// f32, f64 or both.
    #[arg(long, default_value = "both")]
    precision: String,
    /// cpu: every layout's CPU reference; cuda[:N]: every layout x schedule on the GPU.
    #[arg(long, default_value = "cpu")]
    device: DeviceChoice,
    /// On a GPU: conformance (both families, several n_b / n_t), diagonal (one per threads-per-SM
    /// value and family) or all (the whole schedule space).
    #[arg(long, default_value = "conformance")]
    schedules: String,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct MemoryArgs {
    #[command(flatten)]
    m: MatrixArg,
}

fn entry(s: &str) -> anyhow::Result<EntrySpec> {
    if s.ends_with(".toml") || Path::new(s).is_file() {
        Ok(EntrySpec::from_toml_file(Path::new(s))?)
    } else {
        Ok(EntrySpec::builtin(s)?)
    }
}

fn precisions(s: &str) -> anyhow::Result<Vec<Precision>> {
    if s == "both" {
        Ok(Precision::ALL.to_vec())
    } else {
        Ok(vec![s.parse()?])
    }
}

fn load(m: &MatrixArg) -> anyhow::Result<(EntrySpec, MatrixSource, tessera_spmv::CsrMatrix<f64>)> {
    let spec = entry(&m.entry)?;
    let src = MatrixSource::parse(&m.matrix)?;
    let (a, note) = src.load(&spec)?;
    if let Some(n) = note {
        eprintln!("note: {n}");
    }
    Ok((spec, src, a))
}

fn open_gpu(d: DeviceChoice) -> anyhow::Result<SpmvGpu> {
    let n = match d {
        DeviceChoice::Cuda(n) => n,
        DeviceChoice::Auto => 0,
        DeviceChoice::Cpu => bail!(
            "spmv tune and spmv bench time generated CUDA kernels and have no CPU path; use --device cuda[:N] on a machine with a GPU (`tessera spmv verify --device cpu` checks every layout on the CPU)"
        ),
    };
    SpmvGpu::new(n).map_err(|e| {
        anyhow!(
            "--device cuda:{n} is not usable: {}",
            e.to_string().replace('\n', " ")
        )
    })
}

fn db_path(no_db: bool, db: Option<PathBuf>) -> Option<PathBuf> {
    if no_db {
        None
    } else {
        Some(db.unwrap_or_else(TuningDb::default_path))
    }
}

pub fn run(args: SpmvArgs) -> anyhow::Result<()> {
    match args.cmd {
        SpmvCmd::Codegen(a) => {
            let spec = entry(&a.entry)?;
            let p: Precision = a.precision.parse()?;
            let layout: Layout = a.layout.parse()?;
            let kind: ScheduleKind = a.schedule.parse()?;
            let s = Schedule {
                kind,
                n_b: a.nb,
                n_t: a.nt,
            };
            tessera_spmv::DeviceLimits::h100().check(&s)?;
            print!("{}", codegen::generate(&spec, p, layout, &[s])?);
            Ok(())
        }
        SpmvCmd::Memory(a) => {
            let (spec, src, m) = load(&a.m)?;
            let st = MatrixStats::of(&m);
            let (base, r) = memory_overhead_with(&m, 4, 8)?;
            println!("{} ({} x {}, {} {} entries; 4-byte indices, 8-byte scalars as in the layout-tuning paper's Table 9)", src.name(), st.n_rows, st.n_cols, st.nnz, spec.name);
            println!("| CSR/BSR | ELL | SI-16 | SI-32 |\n|---|---|---|---|");
            println!(
                "| {:.1} KiB | {:.2}x | {:.2}x | {:.2}x |",
                base as f64 / 1024.0,
                r[0],
                r[1],
                r[2]
            );
            Ok(())
        }
        SpmvCmd::Verify(a) => {
            let (spec, src, m) = load(&a.m)?;
            let mut all: Vec<(Precision, VariantCheck)> = Vec::new();
            let gpu = if a.device == DeviceChoice::Cpu {
                None
            } else {
                Some(open_gpu(a.device)?)
            };
            let device = match &gpu {
                None => "cpu".to_string(),
                Some(g) => format!("{} ({})", g.limits.name, g.limits.sm()),
            };
            for p in precisions(&a.precision)? {
                let res = match &gpu {
                    None => match p {
                        Precision::F32 => verify_cpu::<f32>(&spec, &m, &Layout::all())?,
                        Precision::F64 => verify_cpu::<f64>(&spec, &m, &Layout::all())?,
                    },
                    Some(g) => {
                        let scheds = match a.schedules.as_str() {
                            "conformance" => conformance_schedules(),
                            "diagonal" => g.limits.diagonal_schedules(),
                            "all" => g.limits.all_schedules(),
                            o => bail!("--schedules {o}: expected conformance, diagonal or all"),
                        };
                        match p {
                            Precision::F32 => {
                                verify_gpu::<f32>(g, &spec, &m, &Layout::all(), &scheds)?
                            }
                            Precision::F64 => {
                                verify_gpu::<f64>(g, &spec, &m, &Layout::all(), &scheds)?
                            }
                        }
                    }
                };
                all.extend(res.into_iter().map(|c| (p, c)));
            }
            let bad = all.iter().filter(|(_, c)| !c.ok).count();
            if a.json {
                let v: Vec<_> = all
                    .iter()
                    .map(|(p, c)| serde_json::json!({"precision": p.name(), "layout": c.layout, "schedule": c.schedule, "max_rel_err": c.max_rel_err, "ok": c.ok}))
                    .collect();
                let doc = serde_json::json!({"matrix": src.name(), "entry": spec.name, "device": device, "variants": v, "failed": bad});
                println!("{}", serde_json::to_string_pretty(&doc)?);
            } else {
                println!(
                    "{} ({} entries) on {}: {} variants",
                    src.name(),
                    spec.name,
                    device,
                    all.len()
                );
                for (p, c) in &all {
                    println!(
                        "{} {} {:<16} {:<28} max rel err {:.3e}",
                        if c.ok { "ok  " } else { "FAIL" },
                        p,
                        c.layout,
                        c.schedule.as_deref().unwrap_or("cpu reference"),
                        c.max_rel_err
                    );
                }
            }
            if bad > 0 {
                bail!(
                    "{bad} of {} variants disagree with the CPU reference",
                    all.len()
                );
            }
            Ok(())
        }
        SpmvCmd::Tune(a) => {
            // the device first: no matrix is built for a run that cannot happen
            let p: Precision = a.precision.parse()?;
            let search: Search = a.search.parse()?;
            let g = open_gpu(a.device)?;
            let (spec, src, m) = load(&a.m)?;
            let opts = BenchOptions {
                search,
                runs: a.runs,
                warmup: a.warmup,
                memory_weight: a.memory_weight,
                db: db_path(a.no_db, a.db),
                force: a.force,
            };
            let copy = copy_bandwidth(&g).ok();
            println!(
                "device: {} ({}, {} SMs), tuning database: {}",
                g.limits.name,
                g.limits.sm(),
                g.limits.n_sm,
                opts.db
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or("off".into())
            );
            let r = tune_matrix(&g, &spec, &m, &src.name(), p, &opts)?;
            let mut out = std::io::stdout().lock();
            print_tune_report(&r, copy, &mut out)?;
            out.flush()?;
            Ok(())
        }
        SpmvCmd::Bench(a) => {
            let g = open_gpu(a.device)?;
            let dir = a.matrices.or_else(|| {
                [
                    "../shared/matrices",
                    "shared/matrices",
                    ".device/data/matrices",
                ]
                .iter()
                .map(PathBuf::from)
                .find(|p| p.is_dir())
            });
            let opts = BenchOptions {
                search: a.search.parse()?,
                runs: a.runs,
                warmup: a.warmup,
                memory_weight: a.memory_weight,
                db: if a.no_db {
                    None
                } else {
                    Some(TuningDb::default_path())
                },
                force: false,
            };
            let mut out = std::io::stdout().lock();
            run_bench(
                &g,
                dir.as_deref(),
                a.quick,
                &precisions(&a.precision)?,
                &opts,
                a.budget_s,
                &mut out,
            )
            .map_err(|e: SpmvError| anyhow!(e))
            .context("spmv bench")?;
            Ok(())
        }
    }
}
