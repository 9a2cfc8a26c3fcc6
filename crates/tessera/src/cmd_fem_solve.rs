//! `tessera fem solve PROBLEM.toml [--device D] [-o OUT/] [--json]`: a static linear-elasticity
//! analysis from a problem file (dissertation §4.1). Writes `OUT/<title>.vtu`
//! (higher-order cells, nodal displacement/strain/stress/von Mises, cell values) and
//! `OUT/summary.json`, and prints the summary.

use anyhow::Context;
use clap::Args;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tessera_core::{DeviceChoice, Par};
use tessera_fem::problem::Problem;
use tessera_fem::results::{compute_results, summary_json};
use tessera_fem::static_solve::{solve_problem, StaticOptions};
use tessera_fem::vtk_ho::stage_results_vtu;

#[derive(Args, Debug)]
pub struct SolveArgs {
    /// Problem description (TOML): mesh, order, material, fixed regions, loads, solver.
    /// Every key is described in docs/problem-format.md; examples in examples/*.toml
    /// (examples/bracket-gmsh.toml solves a Gmsh mesh through its physical groups).
    pub problem: PathBuf,
    /// auto, cpu, cuda or cuda:N (auto: CUDA device 0 when usable, else the CPU).
    #[arg(long, default_value = "auto")]
    pub device: DeviceChoice,
    /// Output directory for the .vtu and summary.json.
    #[arg(short = 'o', long = "out", default_value = "tessera-out")]
    pub out: PathBuf,
    /// Print the summary as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Run single-threaded (identical results).
    #[arg(long)]
    pub serial: bool,
    /// Print each stage's start time to stderr as it begins, and the PCG's residual
    /// history (iteration, relative residual) while it runs.
    #[arg(long, short = 'v')]
    pub verbose: bool,
    /// Write the .vtu arrays as ASCII text (default: binary, zlib-compressed, appended raw).
    #[arg(long)]
    pub ascii: bool,
    /// Solve even when the mesh has inverted (folded-over) cells, for experiments; by default
    /// such a mesh is refused with the cells named.
    #[arg(long)]
    pub allow_inverted: bool,
    /// Split the mesh into K domains: each assembles the rows of the nodes it owns and the
    /// PCG runs on the partitioned operator (halo exchange + local SpMV), in this process on
    /// the CPU. Results are gathered into the same single .vtu.
    #[arg(long, value_name = "K")]
    pub domains: Option<usize>,
    /// Run the domains on CUDA devices, for example `cuda:0,cuda:1`: domains are placed
    /// round-robin (one per device unless --domains K asks for more), exchange halos by NCCL
    /// between devices and by device copies on one device; block-Jacobi PCG.
    #[arg(long, value_delimiter = ',', value_name = "cuda:N,...")]
    pub devices: Vec<DeviceChoice>,
    /// Partitioner for --domains: metis or rcb.
    #[arg(long, default_value = "metis", requires = "domains")]
    pub partitioner: tessera_mesh::partition::Partitioner,
    /// Coarse level of the domain AMG (`amg`/`pmg` problems with --domains, on the CPU):
    /// hybrid (coarse correction, domain-local cycles, coarse again), additive, or none (the
    /// one-level domain-local AMG, whose iterations grow with K).
    #[arg(long, default_value = "hybrid", requires = "domains")]
    pub coarse: tessera_fem::domain_solve::CoarseChoice,
}

pub fn run(a: SolveArgs) -> anyhow::Result<()> {
    // the output folder before any work: it must be creatable and not a file
    if a.out.exists() && !a.out.is_dir() {
        anyhow::bail!(
            "-o {}: is a file; give a folder for the results",
            a.out.display()
        );
    }
    crate::cmd_mesh::check_output_dir(&a.out)?;
    let problem = Problem::from_file(&a.problem)?;
    if a.ascii {
        ASCII.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    if a.allow_inverted {
        ALLOW_INVERTED.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    let mut devices = Vec::with_capacity(a.devices.len());
    for d in &a.devices {
        match d {
            DeviceChoice::Cuda(n) => devices.push(*n),
            other => anyhow::bail!("--devices takes CUDA devices (cuda:N), not `{other}`"),
        }
    }
    let domains = a.domains.or((!devices.is_empty()).then_some(devices.len()));
    *DEVICES.lock().unwrap_or_else(|e| e.into_inner()) = devices;
    if let Some(k) = domains {
        *DOMAINS.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(tessera_fem::domain_solve::DomainOptions {
                domains: k,
                partitioner: a.partitioner,
                coarse: a.coarse,
                ..Default::default()
            });
    }
    // generated meshes (`cells`, `bracket = N`) are sized before any work
    tessera_fem::estimate::check_problem(&problem)?;
    let par = if a.serial { Par::Seq } else { Par::auto() };
    if a.verbose {
        VERBOSE.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    let summary = run_problem(&problem, a.device, None, par, &a.out, a.json)?;
    if a.json {
        println!("{summary}");
    } else {
        print_summary(&summary);
    }
    Ok(())
}

/// The observer of the PCG iterations: the spinner shows the iteration and the relative
/// residual; with `verbose` the history goes to stderr (the first 10 iterations, every 10th,
/// and at least every half second between them).
fn pcg_monitor(
    pb: Option<indicatif::ProgressBar>,
    verbose: bool,
    t_all: Instant,
) -> tessera_solve::monitor::Monitor {
    let last = std::sync::Mutex::new(None::<Instant>);
    std::sync::Arc::new(move |it: usize, rel: f64| {
        if let Some(pb) = &pb {
            pb.set_message(format!(
                "solve: PCG iteration {it}, relative residual {rel:.3e}"
            ));
        }
        if verbose {
            let mut last = last.lock().unwrap_or_else(|e| e.into_inner());
            let due = last.is_none_or(|t| t.elapsed().as_secs_f64() >= 0.5);
            if it <= 10 || it % 10 == 0 || due {
                eprintln!(
                    "[{:>9.1} ms] pcg iteration {it:>6}  relative residual {rel:.3e}",
                    t_all.elapsed().as_secs_f64() * 1e3
                );
                *last = Some(Instant::now());
            }
        }
    })
}

/// `--verbose`: stage start times go to stderr.
static VERBOSE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `--allow-inverted`: solve tangled meshes.
static ALLOW_INVERTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `--domains K --partitioner P`: a domain-decomposed solve.
static DOMAINS: std::sync::Mutex<Option<tessera_fem::domain_solve::DomainOptions>> =
    std::sync::Mutex::new(None);

/// `--devices`: the CUDA devices of a domain-decomposed solve.
static DEVICES: std::sync::Mutex<Vec<usize>> = std::sync::Mutex::new(Vec::new());

/// `--ascii`: the result .vtu in ASCII.
static ASCII: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Solve, post-process and write results; returns the JSON summary (also written to
/// `out/summary.json`). Progress goes to stderr unless `quiet`.
pub fn run_problem(
    problem: &Problem,
    device: DeviceChoice,
    gpu: Option<std::sync::Arc<tessera_gpu::Gpu>>,
    par: Par,
    out: &Path,
    quiet: bool,
) -> anyhow::Result<serde_json::Value> {
    let t_all = Instant::now();
    let opts = StaticOptions {
        par,
        device,
        gpu,
        allow_inverted: ALLOW_INVERTED.load(std::sync::atomic::Ordering::Relaxed),
        domains: *DOMAINS.lock().unwrap_or_else(|e| e.into_inner()),
        devices: DEVICES.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        ..Default::default()
    };
    let pb = if quiet {
        None
    } else {
        Some(crate::util::spinner("load"))
    };
    let mut progress = |stage: &str| {
        if VERBOSE.load(std::sync::atomic::Ordering::Relaxed) {
            eprintln!("[{:>9.1} ms] {stage}", t_all.elapsed().as_secs_f64() * 1e3);
        }
        if let Some(pb) = &pb {
            pb.set_message(stage.to_string());
        }
    };
    let sol = {
        // the PCG's iterations: on the spinner, and with -v the residual history on stderr
        let verbose = VERBOSE.load(std::sync::atomic::Ordering::Relaxed);
        let _monitor = (verbose || pb.is_some()).then(|| {
            tessera_solve::monitor::MonitorGuard::set(pcg_monitor(pb.clone(), verbose, t_all))
        });
        solve_problem(problem, &opts, &mut progress)?
    };
    progress("results");
    let t = Instant::now();
    let lame = problem.material.lame()?;
    let results = compute_results(&sol.ho, &sol.u, lame)?;
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let safe: String = problem
        .title
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let vtu = out.join(format!("{safe}.vtu"));
    let enc = if ASCII.load(std::sync::atomic::Ordering::Relaxed) {
        tessera_mesh::io::VtuEncoding::Ascii
    } else {
        tessera_mesh::io::VtuEncoding::default()
    };
    // the .vtu and summary.json of one run carry the same id and are published together
    let run_id = format!(
        "{:x}-{:x}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    );
    let staged_vtu = stage_results_vtu(
        &vtu,
        &sol.ho,
        &results,
        enc,
        Some(&format!("tessera run {run_id}")),
    )?;
    let results_ms = t.elapsed().as_secs_f64() * 1e3;
    if let Some(pb) = &pb {
        pb.finish_and_clear();
    }
    let mut stages = sol.stages_ms.clone();
    stages.push(("results".into(), results_ms));
    let mut extra = serde_json::json!({
        "device": sol.device,
        "solver": match problem.solver.method { tessera_fem::problem::SolverMethod::Pcg => "pcg (filtered constraints)", tessera_fem::problem::SolverMethod::Cholesky => "cholesky (faer sparse LLT, constraints eliminated)" },
        "preconditioner": sol.solver.preconditioner,
        "setup_ms": tessera_fem::static_solve::stage_ms(&sol.stages_ms, "setup").unwrap_or(0.0),
        "levels": sol.solver.levels,
        "level_dofs": sol.solver.level_dofs,
        "operator_complexity": sol.solver.operator_complexity,
        "grid_complexity": sol.solver.grid_complexity,
        "hierarchy_bytes": sol.solver.hierarchy_bytes,
        "setup_stages_ms": sol.solver.setup_stages_ms.iter().map(|(k, v)| (k.clone(), serde_json::json!(v))).collect::<serde_json::Map<String, serde_json::Value>>(),
        "fixed_dofs": sol.constraints.num_fixed(),
        "block_nonzeros": sol.assembly.block_nonzeros,
        "youngs": problem.material.youngs,
        "poisson": problem.material.poisson,
        "total_ms": t_all.elapsed().as_secs_f64() * 1e3,
        "vtu": vtu.display().to_string(),
        "run_id": run_id,
    });
    if let Some(dd) = &sol.domains {
        extra["domains"] = dd.to_json();
    }
    let summary = summary_json(
        &problem.title,
        &sol.ho,
        sol.u.len(),
        sol.nonzeros,
        &stages,
        &sol.report,
        &results,
        extra,
    );
    let sj = out.join("summary.json");
    let text = serde_json::to_string_pretty(&summary)? + "\n";
    let staged_summary = tessera_core::atomic::stage(&sj, |w| w.write_all(text.as_bytes()))?;
    tessera_core::atomic::publish(vec![staged_vtu, staged_summary])?;
    Ok(summary)
}

/// Human-readable summary.
pub fn print_summary(s: &serde_json::Value) {
    let g = |k: &str| s.get(k).cloned().unwrap_or(serde_json::Value::Null);
    println!(
        "problem          {} (p = {}, {} tetrahedra, {} nodes)",
        g("title").as_str().unwrap_or(""),
        g("order"),
        g("cells"),
        g("nodes")
    );
    println!(
        "dofs             {} ({} fixed), {} nonzeros",
        g("dofs"),
        g("fixed_dofs"),
        g("nonzeros")
    );
    println!(
        "solver           {}, {}: {} iterations, relative residual {:.3e}",
        g("solver").as_str().unwrap_or(""),
        g("preconditioner").as_str().unwrap_or(""),
        g("iterations"),
        g("final_residual").as_f64().unwrap_or(f64::NAN)
    );
    if g("levels").as_u64().unwrap_or(1) > 1 {
        println!(
            "multigrid        {} levels {}, operator complexity {:.3}, grid complexity {:.3}, setup {:.1} ms",
            g("levels"),
            g("level_dofs"),
            g("operator_complexity").as_f64().unwrap_or(f64::NAN),
            g("grid_complexity").as_f64().unwrap_or(f64::NAN),
            g("setup_ms").as_f64().unwrap_or(f64::NAN)
        );
    }
    println!(
        "max displacement {:.6e}",
        g("max_displacement").as_f64().unwrap_or(f64::NAN)
    );
    println!(
        "max von Mises    {:.6e}",
        g("max_von_mises").as_f64().unwrap_or(f64::NAN)
    );
    if let Some(st) = s.get("stages").and_then(|v| v.as_array()) {
        for e in st {
            println!(
                "  {:<14} {:>10.1} ms",
                e["stage"].as_str().unwrap_or(""),
                e["ms"].as_f64().unwrap_or(f64::NAN)
            );
        }
    }
    if let Some(dd) = s.get("domains") {
        print_domains(dd);
    }
    println!("wrote            {}", g("vtu").as_str().unwrap_or(""));
}

/// The per-domain part of the summary of a `--domains` run.
fn print_domains(dd: &serde_json::Value) {
    let f = |v: &serde_json::Value| v.as_f64().unwrap_or(f64::NAN);
    let applies = dd["applies"].as_u64().unwrap_or(0);
    println!(
        "domains          {} ({}, {}): edge cut {} facets, imbalance {:.2} %, halo {} bytes per iteration, exchange {:.1} ms in {} applications",
        dd["domains"],
        dd["partitioner"].as_str().unwrap_or(""),
        dd["communicator"].as_str().unwrap_or(""),
        dd["edge_cut"],
        100.0 * f(&dd["imbalance"]),
        dd["halo_bytes_per_iteration"],
        f(&dd["exchange_ms"]),
        applies
    );
    let mut t = tessera_core::table::Table::new(&[
        "domain",
        "owned nodes",
        "halo nodes",
        "neighbours",
        "assemble ms",
        "solve spmv ms",
        "pack ms",
    ]);
    for (d, x) in dd["per_domain"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        t.row(vec![
            d.to_string(),
            x["owned_nodes"].to_string(),
            x["halo_nodes"].to_string(),
            x["neighbours"].to_string(),
            format!("{:.1}", f(&x["assemble_ms"])),
            format!("{:.1}", f(&x["spmv_ms"])),
            format!("{:.2}", f(&x["pack_ms"])),
        ])
        .expect("seven columns");
    }
    for line in t.markdown().lines() {
        println!("  {line}");
    }
    if let Some(c) = dd.get("coarse").filter(|v| !v.is_null()) {
        println!(
            "coarse level     {} DOFs gathered ({}, {} levels); per application: local {:.1} ms, coarse {:.1} ms, operator {:.1} ms in {} applications",
            c["coarse_dofs"],
            c["combination"].as_str().unwrap_or(""),
            c["coarse_levels"],
            f(&c["local_ms"]),
            f(&c["coarse_ms"]),
            f(&c["operator_ms"]),
            c["applies"]
        );
    }
    if let Some(dev) = dd.get("device").filter(|v| !v.is_null()) {
        print_device_domains(dev);
    }
}

/// `cuda:0 12.3 of 139.8 GiB, cuda:1 ...`: the peak device memory in use of a `--devices`
/// run's summary (`device.peak_memory_bytes`), or `None` when it has none.
pub(crate) fn device_memory_line(dev: &serde_json::Value) -> Option<String> {
    let gib = |v: &serde_json::Value| v.as_f64().unwrap_or(f64::NAN) / (1u64 << 30) as f64;
    let peak = dev["peak_memory_bytes"].as_array()?;
    let total = dev["device_memory_bytes"].as_array()?;
    let devices: Vec<&str> = dev["devices"].as_str()?.split(',').collect();
    let parts: Vec<String> = devices
        .iter()
        .zip(peak.iter().zip(total))
        .map(|(d, (p, t))| format!("{d} {:.1} of {:.1} GiB", gib(p), gib(t)))
        .collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// The device part of a `--devices` run: placement, bytes and per-application stage times.
fn print_device_domains(dev: &serde_json::Value) {
    let f = |v: &serde_json::Value| v.as_f64().unwrap_or(f64::NAN);
    println!(
        "devices          {} ({}), domains on {}; per iteration: halo {} bytes ({} between devices), reductions {} bytes",
        dev["devices"].as_str().unwrap_or(""),
        dev["communicator"].as_str().unwrap_or(""),
        dev["placement"]
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_str()).collect::<Vec<_>>().join(","))
            .unwrap_or_default(),
        dev["halo_bytes_per_iteration"],
        dev["remote_bytes_per_iteration"],
        dev["reduction_bytes_per_iteration"]
    );
    let spmv: Vec<String> = dev["spmv_ms"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| format!("{:.3}", f(v)))
        .collect();
    let per = |key: &str| -> String {
        dev[key]
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| format!("{:.1}", f(v)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if dev["assembly"].as_str() == Some("device") {
        println!(
            "device assembly  per domain: device stages [{}] ms, local mesh + upload (host) [{}] ms",
            per("assemble_stages_ms"),
            per("assemble_mesh_ms")
        );
    } else {
        println!(
            "host assembly    per domain: assembly stages [{}] ms, local mesh [{}] ms (matrices uploaded)",
            per("assemble_stages_ms"),
            per("assemble_mesh_ms")
        );
    }
    println!(
        "preconditioner   {}{}",
        dev["preconditioner"].as_str().unwrap_or(""),
        if dev["setup_ms"].as_array().is_some_and(|a| !a.is_empty()) {
            format!(", setup per domain [{}] ms", per("setup_ms"))
        } else {
            String::new()
        }
    );
    println!(
        "device apply     {:.3} ms (pack {:.3} ms, exchange {:.3} ms, SpMV per domain [{}] ms), {:.3} ms per iteration, upload {:.1} ms",
        f(&dev["apply_ms"]),
        f(&dev["pack_ms"]),
        f(&dev["exchange_ms"]),
        spmv.join(", "),
        f(&dev["iteration_ms"]),
        f(&dev["upload_ms"])
    );
    if let Some(m) = device_memory_line(dev) {
        println!("device memory    peak in use {m}");
    }
}
