//! `tessera bench fem-solve`: the static linear-elasticity simulation end to end (dissertation
//! §4.1, "the static simulation to convergence"), on the bracket: file load,
//! preprocessing (order-`p` mesh, boundary selection, constraints, load vector), assembly
//! into Bin-BCSR* and the filtered block-Jacobi PCG, with iterations and the SpMV bandwidth.
//!
//! The dissertation's pipeline took 14.1 s to set up and 1.5 s to solve the 1.7M-tet bracket
//! (Quadro GP100). Our target on the H100: under 1.5 s end to end, file load included, and a
//! PCG SpMV at 70 % or more of the copy bandwidth for the bytes Bin-BCSR* must move.
//!
//! Each case is `MESH@P`: a Gmsh file of `../shared/meshes` (bolt holes fixed through the
//! physical group `bolt_holes`, a 20 MPa downward traction on `load_hole`), or `gen:bracket:N`
//! (the generated bracket with the demo's geometric selectors). End-to-end times are wall
//! clock from the start of the load to the displacement in host memory, with a fresh CUDA
//! context per run (opened while the file is read, as `tessera fem solve` does); the first,
//! kernel-cache-warming run is not reported.
//!
//! `--preconditioner block-jacobi,amg,pmg` runs every case with each preconditioner
//! (`default`: the problem's default, AMG for p = 1 and p-multigrid for p >= 2) and prints
//! setup, solve, iterations, levels and complexities side by side. On a GPU the multigrid
//! hierarchy is set up on the device (filtered copy, eigenvalue estimates, smoothed
//! prolongators, Galerkin operators), the AMG aggregation on the host from downloaded block
//! norms (all inside `setup`); its cycle runs on the device.

use anyhow::Context;
use clap::Args;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tessera_core::{DeviceChoice, Par};
use tessera_fem::problem::{PreconditionerKind, Problem};
use tessera_fem::static_solve::{
    solve_problem, stage_ms, StageTimes, StaticOptions, StaticSolution,
};
use tessera_solve::cuda::SolveKernels;

/// H100 copy bandwidth (read + write) the SpMV is set against (bytes/s).
const COPY_BANDWIDTH: f64 = crate::bench_mesh::COPY_BANDWIDTH;

#[derive(Args, Debug)]
pub struct BenchFemSolveArgs {
    /// Cases `MESH@P` (a mesh file or gen:bracket:N, and the order). Default: the shared
    /// bracket-1.69M at p = 1 and bracket-573k at p = 2 when found in --data-dir, else the
    /// generated bracket(131) (1.7M tets) at p = 1 and bracket(98) (0.7M tets) at p = 2.
    #[arg(long = "case")]
    pub cases: Vec<String>,
    /// Where the shared benchmark meshes are (default: the shared mesh folder when present).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// auto, cpu or cuda[:N].
    #[arg(long, default_value = "auto")]
    pub device: DeviceChoice,
    /// PCG relative residual tolerance.
    #[arg(long, default_value_t = 1e-8)]
    pub tolerance: f64,
    /// Timed end-to-end runs per case (the median is reported).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: u32,
    /// Untimed warm-up runs before the timed ones (they fill the kernel caches and the page
    /// cache of the file); 0 for long cases, where the first timed run then includes the
    /// kernel compilation in its setup stages (never in `solve`).
    #[arg(long, default_value_t = 1)]
    pub warmup: u32,
    /// Preconditioners to compare (comma-separated or repeated): block-jacobi, amg, pmg, or
    /// default (AMG for p = 1, p-multigrid for p >= 2).
    #[arg(
        long = "preconditioner",
        value_delimiter = ',',
        default_value = "default"
    )]
    pub preconditioners: Vec<String>,
    /// Print one JSON object per case instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Domain-decomposed solve on these CUDA devices (`cuda:0,cuda:1`; block-Jacobi PCG):
    /// prints per-domain stage times, communication time and bytes per iteration.
    #[arg(long, value_delimiter = ',', value_name = "cuda:N,...")]
    pub devices: Vec<DeviceChoice>,
    /// Domains (with --devices: placed round-robin; default one per device; without
    /// --devices: the in-process CPU domains). Several (`1,4,8`) run every case once per count.
    #[arg(long, value_name = "K", value_delimiter = ',')]
    pub domains: Vec<usize>,
    /// With --devices: where the domains are assembled, `device` (each on its GPU) or `host`
    /// (CPU assembly, matrices uploaded; for comparison). Several (`device,host`) run both.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "device",
        value_name = "device|host"
    )]
    pub domain_assembly: Vec<String>,
}

/// One case of the benchmark.
struct Case {
    label: String,
    problem: Problem,
    tets_hint: String,
}

fn default_cases(data: Option<&Path>) -> Vec<String> {
    match data {
        Some(d)
            if d.join("bracket-1.69M.msh.gz").exists()
                && d.join("bracket-573k.msh.gz").exists() =>
        {
            vec![
                format!("{}@1", d.join("bracket-1.69M.msh.gz").display()),
                format!("{}@2", d.join("bracket-573k.msh.gz").display()),
            ]
        }
        _ => vec!["gen:bracket:131@1".into(), "gen:bracket:98@2".into()],
    }
}

/// The bracket problem of a case (see the module docs).
fn case_problem(spec: &str, tolerance: f64) -> anyhow::Result<Case> {
    let (mesh, p) = spec.rsplit_once('@').with_context(|| {
        format!("`{spec}`: expected MESH@P, for example bracket-1.69M.msh.gz@1")
    })?;
    let order: usize = p
        .parse()
        .ok()
        .filter(|p| (1..=3).contains(p))
        .with_context(|| format!("`{spec}`: the order `{p}` is not 1, 2 or 3"))?;
    let solver =
        format!("[solver]\nmethod = \"pcg\"\ntolerance = {tolerance:e}\nmax_iterations = 100000\n");
    if let Some(r) = mesh.strip_prefix("gen:bracket:") {
        let r: usize = r
            .parse()
            .with_context(|| format!("`{spec}`: `{r}` is not a bracket resolution"))?;
        let mut problem = crate::cmd_demo::demo_problem(r, order)?;
        problem.solver.tolerance = tolerance;
        problem.solver.max_iterations = 100_000;
        return Ok(Case {
            label: format!("bracket({r}) p={order}"),
            problem,
            // the generated bracket has about 0.75 r³ tetrahedra
            tets_hint: if r >= 50 {
                format!("~{:.2}M", 0.75 * (r as f64).powi(3) / 1e6)
            } else {
                String::new()
            },
        });
    }
    let path = Path::new(mesh);
    anyhow::ensure!(path.exists(), "`{spec}`: {} does not exist", path.display());
    let abs = std::fs::canonicalize(path)?;
    let text = format!(
        "title = \"bracket\"\norder = {order}\nunits = \"mm\"\n[mesh]\nfile = {:?}\n[material]\npreset = \"Ti-6Al-4V\"\n\
         [[fixed]]\nselector = {{ type = \"group\", name = \"bolt_holes\" }}\n\
         [[loads]]\ntype = \"traction\"\nselector = {{ type = \"group\", name = \"load_hole\" }}\ntraction = [0.0, 0.0, -20.0]\n{solver}",
        abs.display().to_string()
    );
    let problem = Problem::parse(&text, "<bench problem>", Path::new("."))?;
    Ok(Case {
        label: format!(
            "{} p={order}",
            path.file_name().unwrap_or_default().to_string_lossy()
        ),
        problem,
        tets_hint: String::new(),
    })
}

/// Measurements of one case.
#[derive(Debug, serde::Serialize)]
struct Row {
    case: String,
    device: String,
    /// the preconditioner that ran, with its setup time (ms, the `setup` stage), levels,
    /// operator and grid complexity and hierarchy bytes
    preconditioner: String,
    setup_ms: f64,
    levels: usize,
    operator_complexity: f64,
    grid_complexity: f64,
    hierarchy_bytes: usize,
    setup_stages_ms: StageTimes,
    cells: usize,
    order: usize,
    dofs: usize,
    block_nonzeros: u64,
    fixed_dofs: usize,
    iterations: usize,
    final_residual: f64,
    max_displacement: f64,
    /// median end-to-end wall time (ms)
    end_to_end_ms: f64,
    /// every timed run's end-to-end wall time (ms)
    runs_ms: Vec<f64>,
    /// stage times of the median run (ms)
    stages_ms: StageTimes,
    /// SpMV: median CUDA-event time (ms), bytes it must move, bandwidth (GB/s), fraction of copy bandwidth
    spmv_ms: Option<f64>,
    spmv_bytes: Option<u64>,
    spmv_gbs: Option<f64>,
    spmv_fraction: Option<f64>,
    /// solve time per PCG iteration (ms) and its floor: SpMV bytes + 10 vector passes at the copy bandwidth
    iteration_ms: f64,
    iteration_floor_ms: Option<f64>,
    /// a domain-decomposed run: partition, per-domain sizes and times, device placement,
    /// communication (see `tessera fem solve --domains/--devices --json`)
    domains: Option<serde_json::Value>,
}

fn max_displacement(sol: &StaticSolution) -> f64 {
    sol.u
        .chunks(3)
        .map(|c| (c[0] * c[0] + c[1] * c[1] + c[2] * c[2]).sqrt())
        .fold(0.0, f64::max)
}

fn run_case(
    case: &Case,
    a: &BenchFemSolveArgs,
    domains: Option<usize>,
    host_assembly: bool,
    pb: &indicatif::ProgressBar,
) -> anyhow::Result<Row> {
    let mut devices = Vec::new();
    for d in &a.devices {
        match d {
            DeviceChoice::Cuda(n) => devices.push(*n),
            other => anyhow::bail!("--devices takes CUDA devices (cuda:N), not `{other}`"),
        }
    }
    let domains = domains.or((!devices.is_empty()).then_some(devices.len()));
    let opts = StaticOptions {
        par: Par::auto(),
        device: if domains.is_some() && devices.is_empty() {
            DeviceChoice::Cpu
        } else {
            a.device
        },
        domains: domains.map(|k| tessera_fem::domain_solve::DomainOptions {
            domains: k,
            host_assembly,
            ..Default::default()
        }),
        devices,
        ..Default::default()
    };
    // warm-up: fills the kernel caches and the page cache of the file
    let label = case.label.clone();
    let stage = |what: &str, run: &str| pb.set_message(format!("{label}: {run}: {what}"));
    for _ in 0..a.warmup {
        drop(solve_problem(&case.problem, &opts, &mut |s| {
            stage(s, "warm-up run")
        })?);
    }
    // (wall ms, stage times) per run; the last solution is kept for the SpMV timing (every
    // run computes the same one), and alive during the next run, as a user's process keeps
    // its CUDA context
    let mut runs: Vec<(f64, StageTimes)> = Vec::new();
    let mut last: Option<StaticSolution> = None;
    for i in 0..a.repeat {
        let t = Instant::now();
        let run = format!("run {}/{}", i + 1, a.repeat);
        let sol = solve_problem(&case.problem, &opts, &mut |s| stage(s, &run))?;
        let ms = t.elapsed().as_secs_f64() * 1e3;
        pb.println(format!(
            "{}: run {} {:.1} ms, {} iterations, stages {:?}",
            case.label,
            i + 1,
            ms,
            sol.report.iterations,
            sol.stages_ms
        ));
        runs.push((ms, sol.stages_ms.clone()));
        last = Some(sol);
    }
    let sol = last.expect("at least one run");
    let mut order: Vec<usize> = (0..runs.len()).collect();
    order.sort_by(|&x, &y| runs[x].0.total_cmp(&runs[y].0));
    let (median, stages) = runs[order[order.len() / 2]].clone();
    let solve_ms = stage_ms(&stages, "solve").unwrap_or(f64::NAN);
    let iterations = sol.report.iterations;
    let (mut spmv_ms, mut spmv_bytes, mut floor) = (None, None, None);
    if let Some((gpu, mat)) = &sol.device_matrix {
        let k = SolveKernels::new(gpu)?;
        let n = mat.num_rows();
        let x: Vec<f64> = (0..n)
            .map(|i| ((i * 7919) % 1000) as f64 * 1e-3 - 0.5)
            .collect();
        let xd = gpu.upload(&x)?;
        let mut yd = gpu.zeros::<f64>(n)?;
        let t = gpu.median_ms(50, 5, || {
            mat.spmv(&k, &xd, &mut yd)
                .map_err(|e| tessera_gpu::GpuError::InvalidArgument(e.to_string()))
        })?;
        let bytes = mat.spmv_bytes();
        spmv_ms = Some(t);
        spmv_bytes = Some(bytes);
        // a PCG iteration also streams about 10 vectors of n doubles (filter, update of x and
        // r, preconditioner, direction, three dot products)
        floor = Some((bytes as f64 + 10.0 * 8.0 * n as f64) / COPY_BANDWIDTH * 1e3);
    }
    let spmv_gbs = spmv_ms
        .zip(spmv_bytes)
        .map(|(t, b)| b as f64 / (t * 1e-3) / 1e9);
    Ok(Row {
        case: format!(
            "{} {}{}",
            case.label,
            case.tets_hint,
            match (domains, opts.devices.is_empty(), host_assembly) {
                (Some(k), false, true) => format!(" k={k} host-asm"),
                (Some(k), _, _) => format!(" k={k}"),
                (None, _, _) => String::new(),
            }
        )
        .trim()
        .to_string(),
        device: sol.device.clone(),
        preconditioner: sol.solver.preconditioner.clone(),
        setup_ms: stage_ms(&stages, "setup").unwrap_or(0.0),
        levels: sol.solver.levels,
        operator_complexity: sol.solver.operator_complexity,
        grid_complexity: sol.solver.grid_complexity,
        hierarchy_bytes: sol.solver.hierarchy_bytes,
        setup_stages_ms: sol.solver.setup_stages_ms.clone(),
        cells: sol.ho.num_cells(),
        order: sol.ho.order(),
        dofs: sol.u.len(),
        block_nonzeros: sol.assembly.block_nonzeros,
        fixed_dofs: sol.constraints.num_fixed(),
        iterations,
        final_residual: sol.report.final_residual,
        max_displacement: max_displacement(&sol),
        end_to_end_ms: median,
        runs_ms: runs.iter().map(|r| r.0).collect(),
        stages_ms: stages,
        spmv_ms,
        spmv_bytes,
        spmv_gbs,
        spmv_fraction: spmv_gbs.map(|g| g * 1e9 / COPY_BANDWIDTH),
        iteration_ms: solve_ms / iterations.max(1) as f64,
        iteration_floor_ms: floor,
        domains: sol.domains.as_ref().map(|d| d.to_json()),
    })
}

/// The end-to-end table: one column per stage, in the order the stages ran (a stage a row
/// did not run, such as `upload` on the CPU, shows `-`).
fn end_to_end_table(rows: &[Row]) -> anyhow::Result<tessera_core::table::Table> {
    let mut stages: Vec<&str> = Vec::new();
    for r in rows {
        for (k, _) in &r.stages_ms {
            if !stages.contains(&k.as_str()) {
                stages.push(k);
            }
        }
    }
    let mut head = vec!["case", "device", "tets", "dofs", "iters"];
    let stage_heads: Vec<String> = stages.iter().map(|s| format!("{s} ms")).collect();
    head.extend(stage_heads.iter().map(|s| s.as_str()));
    head.extend(["total ms", "target"]);
    let mut t = tessera_core::table::Table::new(&head);
    for r in rows {
        let mut cells = vec![
            r.case.clone(),
            r.device.clone(),
            r.cells.to_string(),
            r.dofs.to_string(),
            r.iterations.to_string(),
        ];
        for s in &stages {
            cells.push(stage_ms(&r.stages_ms, s).map_or("-".to_string(), |v| format!("{v:.1}")));
        }
        cells.push(format!("{:.1}", r.end_to_end_ms));
        cells.push(if r.order == 1 && r.cells > 1_500_000 {
            format!("{}1500", if r.end_to_end_ms < 1500.0 { "<" } else { ">" })
        } else {
            "-".into()
        });
        t.row(cells)?;
    }
    Ok(t)
}

pub fn run(a: BenchFemSolveArgs) -> anyhow::Result<()> {
    let data = a.data_dir.clone().or_else(|| {
        [".device/data", "../shared/meshes"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_dir())
    });
    let specs = if a.cases.is_empty() {
        default_cases(data.as_deref())
    } else {
        a.cases.clone()
    };
    let mut precs: Vec<Option<PreconditionerKind>> = Vec::new();
    for name in &a.preconditioners {
        let k = match name.trim() {
            "default" => None,
            s => Some(PreconditionerKind::parse(s).with_context(|| {
                format!("unknown preconditioner `{s}` (block-jacobi, amg, pmg or default)")
            })?),
        };
        if !precs.contains(&k) {
            precs.push(k);
        }
    }
    let mut cases = Vec::new();
    for s in &specs {
        for &k in &precs {
            let mut c = case_problem(s, a.tolerance)?;
            c.problem.solver.preconditioner = k;
            cases.push(c);
        }
    }
    let mut assemblies = Vec::new();
    for s in &a.domain_assembly {
        let host = match s.trim() {
            "device" => false,
            "host" => true,
            other => anyhow::bail!("--domain-assembly takes device or host, not `{other}`"),
        };
        if !assemblies.contains(&host) {
            assemblies.push(host);
        }
    }
    let counts: Vec<Option<usize>> = if a.domains.is_empty() {
        vec![None]
    } else {
        a.domains.iter().map(|&k| Some(k)).collect()
    };
    let variants: Vec<(Option<usize>, bool)> = counts
        .iter()
        .flat_map(|&k| {
            let hosts = if a.devices.is_empty() {
                vec![false]
            } else {
                assemblies.clone()
            };
            hosts.into_iter().map(move |h| (k, h))
        })
        .collect();
    let mut rows = Vec::new();
    let pb = crate::util::steps(a.json, (cases.len() * variants.len()) as u64, "cases");
    for c in &cases {
        for &(k, host) in &variants {
            let r = run_case(c, &a, k, host, &pb)?;
            pb.inc(1);
            if a.json {
                println!("{}", serde_json::to_string(&r)?);
            }
            rows.push(r);
        }
    }
    pb.finish_and_clear();
    if a.json {
        return Ok(());
    }
    println!(
        "Static solve end to end (dissertation §4.1; GP100 pipeline on the 1.7M-tet bracket: 14.1 s setup + 1.5 s solve = 15.6 s)"
    );
    println!(
        "end-to-end = wall clock, file load to displacement on the host, median of {} runs after {} warm-up run(s); PCG tolerance {:e}",
        a.repeat, a.warmup, a.tolerance
    );
    print!("{}", end_to_end_table(&rows)?.markdown());
    println!();
    println!("Preconditioners (setup = hierarchy set-up incl. device transfers; operator complexity = Σ blocks / fine blocks; targets on the H100: bracket-1.69M p=1 < 1000 ms end to end, setup + solve < 400 ms, < 100 iterations; bracket-573k p=2 < 3000 ms)");
    println!(
        "{:<26} {:<13} {:>6} {:>9} {:>9} {:>9} {:>6} {:>8} {:>8} {:>10}",
        "case",
        "precond",
        "iters",
        "setup ms",
        "solve ms",
        "total ms",
        "levels",
        "op cx",
        "grid cx",
        "hier MB"
    );
    for r in &rows {
        println!(
            "{:<26} {:<13} {:>6} {:>9.1} {:>9.1} {:>9.1} {:>6} {:>8.3} {:>8.3} {:>10.1}",
            r.case,
            r.preconditioner,
            r.iterations,
            r.setup_ms,
            stage_ms(&r.stages_ms, "solve").unwrap_or(f64::NAN),
            r.end_to_end_ms,
            r.levels,
            r.operator_complexity,
            r.grid_complexity,
            r.hierarchy_bytes as f64 / 1e6
        );
    }
    for r in rows.iter().filter(|r| !r.setup_stages_ms.is_empty()) {
        println!(
            "{} {}: setup stages {:?} ms",
            r.case,
            r.preconditioner,
            r.setup_stages_ms
                .iter()
                .map(|(k, v)| format!("{k} {v:.1}"))
                .collect::<Vec<_>>()
        );
    }
    println!();
    println!("PCG SpMV (Bin-BCSR*, f64; bytes = stored blocks + column indices + diagonal + x + y once; floor at {:.1} TB/s copy bandwidth)", COPY_BANDWIDTH / 1e12);
    println!(
        "{:<26} {:>12} {:>10} {:>10} {:>8} {:>8} {:>13} {:>13}",
        "case", "SpMV bytes", "SpMV ms", "GB/s", "% copy", "target", "ms/iteration", "floor ms/it"
    );
    for r in &rows {
        match (r.spmv_bytes, r.spmv_ms, r.spmv_gbs, r.spmv_fraction) {
            (Some(b), Some(t), Some(g), Some(fr)) => println!(
                "{:<26} {:>12} {:>10.4} {:>10.0} {:>7.1}% {:>8} {:>13.4} {:>13.4}",
                r.case,
                b,
                t,
                g,
                fr * 100.0,
                if fr >= 0.7 { ">=70% ok" } else { "<70%" },
                r.iteration_ms,
                r.iteration_floor_ms.unwrap_or(f64::NAN)
            ),
            _ => println!(
                "{:<26} (CPU run: no device SpMV) {:>13.4} ms/iteration",
                r.case, r.iteration_ms
            ),
        }
    }
    for r in &rows {
        println!(
            "{}: final residual {:.2e}, max |u| {:.4e} mm, {} fixed dofs, {} block nonzeros, runs {:?} ms",
            r.case,
            r.final_residual,
            r.max_displacement,
            r.fixed_dofs,
            r.block_nonzeros,
            r.runs_ms.iter().map(|v| (v * 10.0).round() / 10.0).collect::<Vec<_>>()
        );
    }
    for r in rows.iter().filter(|r| r.domains.is_some()) {
        print_domains(r);
    }
    Ok(())
}

/// Per-domain stage times, communication time and bytes of a domain-decomposed case.
fn print_domains(r: &Row) {
    let Some(dd) = &r.domains else { return };
    let f = |v: &serde_json::Value| v.as_f64().unwrap_or(f64::NAN);
    println!();
    println!(
        "Domains of {} ({} domains, {}, {}): edge cut {} facets, imbalance {:.2} %",
        r.case,
        dd["domains"],
        dd["partitioner"].as_str().unwrap_or(""),
        dd["communicator"].as_str().unwrap_or(""),
        dd["edge_cut"],
        100.0 * f(&dd["imbalance"])
    );
    let dev = dd.get("device").filter(|v| !v.is_null());
    let spmv = |d: usize| {
        dev.and_then(|v| v["spmv_ms"].get(d))
            .map_or("-".to_string(), |v| format!("{:.3}", f(v)))
    };
    let place = |d: usize| {
        dev.and_then(|v| v["placement"].get(d))
            .and_then(|v| v.as_str())
            .unwrap_or("cpu")
            .to_string()
    };
    let per = |key: &str, d: usize| {
        dev.and_then(|v| v[key].get(d))
            .map_or("-".to_string(), |v| format!("{:.2}", f(v)))
    };
    let mut t = tessera_core::table::Table::new(&[
        "domain",
        "device",
        "owned nodes",
        "halo nodes",
        "neighbours",
        "assemble ms",
        "assembly stages ms",
        "local mesh ms",
        "precond setup ms",
        "SpMV ms / apply",
    ]);
    for (d, x) in dd["per_domain"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let _ = t.row(vec![
            d.to_string(),
            place(d),
            x["owned_nodes"].to_string(),
            x["halo_nodes"].to_string(),
            x["neighbours"].to_string(),
            format!("{:.1}", f(&x["assemble_ms"])),
            per("assemble_stages_ms", d),
            per("assemble_mesh_ms", d),
            per("setup_ms", d),
            spmv(d),
        ]);
    }
    print!("{}", t.markdown());
    if let Some(v) = dev {
        println!(
            "assembly: {} ({}); preconditioner: {}; {} PCG iterations",
            v["assembly"].as_str().unwrap_or(""),
            if v["assembly"].as_str() == Some("device") {
                "count, pattern, element matrices and summation on the domain's GPU; 'assemble ms' is the wall time of the domain: local mesh on the host, upload, device stages"
            } else {
                "CPU assembly per domain; the matrices are uploaded when the device operator is built"
            },
            v["preconditioner"].as_str().unwrap_or(""),
            r.iterations
        );
    }
    match dev {
        Some(v) => {
            let apply = f(&v["apply_ms"]);
            let exch = f(&v["exchange_ms"]);
            println!(
                "per PCG iteration: {:.3} ms ({:.3} ms the operator: pack {:.3} ms, exchange {:.3} ms alone = {:.1} % of the iteration, overlapped with the interior bins); halo {} bytes, {} of them between devices (NCCL), reductions {} bytes",
                f(&v["iteration_ms"]),
                apply,
                f(&v["pack_ms"]),
                exch,
                100.0 * exch / f(&v["iteration_ms"]),
                v["halo_bytes_per_iteration"],
                v["remote_bytes_per_iteration"],
                v["reduction_bytes_per_iteration"]
            );
            if let Some(m) = crate::cmd_fem::cmd_fem_solve::device_memory_line(v) {
                println!("peak device memory in use (assembly, setup, solve): {m}");
            }
        }
        None => println!(
            "halo {} bytes per iteration; exchange {:.1} ms in {} applications",
            dd["halo_bytes_per_iteration"],
            f(&dd["exchange_ms"]),
            dd["applies"]
        ),
    }
}
