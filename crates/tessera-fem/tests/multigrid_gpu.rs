//! GPU conformance of the multigrid cycles of `tessera-solve` on FEM problems against the CPU
//! reference: the AMG V-/W-cycle (Chebyshev and damped block-Jacobi smoothing), the
//! p-multigrid cycle, PCG with them, and the static solve with the default preconditioners.
//! The hierarchies are set up on the host and uploaded, or set up with the device products
//! (`amg_setup_matches_reference`). All tests need a CUDA GPU and skip cleanly without one.

use std::path::Path;
use tessera_fem::multigrid::degree_elevation;
use tessera_fem::problem::Problem;
use tessera_fem::static_solve::{solve_problem, StaticOptions};
use tessera_gpu::Gpu;
use tessera_solve::amg::{AmgParams, Cycle};
use tessera_solve::blockcsr::BlockCsr;
use tessera_solve::cuda::{
    device_filtered_copy, pcg_gpu_with, DeviceAmg, DeviceBinBcsr, DeviceOperator, DevicePmg,
    SolveKernels,
};
use tessera_solve::pmg::PmgParams;
use tessera_solve::smoother::Smoother;
use tessera_solve::{pcg_with, PcgParams};

fn gpu() -> Option<Gpu> {
    match Gpu::probe() {
        Ok(g) => Some(g),
        Err(e) => {
            eprintln!("skipping: no CUDA GPU ({e})");
            None
        }
    }
}

#[path = "common/bracket_mg.rs"]
mod bracket_mg;
use bracket_mg::{amg_of, bracket, discretize, pmg_of};

struct Lcg(u64);
impl Lcg {
    fn f(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    }
}

/// Random vectors vanishing on the constrained DOFs, and a smooth one.
fn test_vectors(fixed: &[bool], seed: u64) -> Vec<Vec<f64>> {
    let mut g = Lcg(seed);
    let n = fixed.len();
    let mut v: Vec<Vec<f64>> = (0..2)
        .map(|_| (0..n).map(|i| if fixed[i] { 0.0 } else { g.f() }).collect())
        .collect();
    v.push(
        (0..n)
            .map(|i| {
                if fixed[i] {
                    0.0
                } else {
                    (i as f64 * 1e-3).sin()
                }
            })
            .collect(),
    );
    v
}

fn max_rel(a: &[f64], b: &[f64]) -> f64 {
    let scale = b.iter().fold(0.0f64, |s, v| s.max(v.abs()));
    a.iter()
        .zip(b)
        .fold(0.0f64, |s, (x, y)| s.max((x - y).abs()))
        / scale
}

/// The device cycle `cycle(b) -> x` against the CPU cycle on the test vectors.
fn compare_cycles(
    gpu: &Gpu,
    what: &str,
    fixed: &[bool],
    cpu: &dyn Fn(&[f64], &mut [f64]),
    dev: &dyn Fn(&tessera_gpu::DeviceBuffer<f64>, &tessera_gpu::DeviceBuffer<f64>),
    tol: f64,
) {
    let n = fixed.len();
    for (t, b) in test_vectors(fixed, 11).iter().enumerate() {
        let mut x_cpu = vec![0.0; n];
        cpu(b, &mut x_cpu);
        let bd = gpu.upload(b).unwrap();
        let xd = gpu.zeros::<f64>(n).unwrap();
        dev(&bd, &xd);
        let x = gpu.download(&xd).unwrap();
        let err = max_rel(&x, &x_cpu);
        println!("{what} vector {t}: n = {n}, max rel diff {err:.3e}");
        assert!(
            err <= tol,
            "{what} vector {t}: max rel diff {err:e} > {tol:e}"
        );
    }
}

/// Same pattern exactly, values to `tol` relative to the largest entry.
fn assert_bcsr_eq(what: &str, dev: &BlockCsr, host: &BlockCsr, tol: f64) {
    assert_eq!(
        (dev.nrows, dev.ncols),
        (host.nrows, host.ncols),
        "{what}: shape"
    );
    assert_eq!(dev.row_ptr, host.row_ptr, "{what}: row offsets");
    assert_eq!(dev.cols, host.cols, "{what}: columns");
    let err = max_rel(&dev.vals, &host.vals);
    println!(
        "{what}: {} x {} blocks, {} stored, max rel diff {err:.3e}",
        host.nrows,
        host.ncols,
        host.nnz()
    );
    assert!(err <= tol, "{what}: max rel diff {err:e} > {tol:e}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn amg_setup_matches_reference() {
    let Some(gpu) = gpu() else { return };
    let k = SolveKernels::new(&gpu).unwrap();
    let prim = gpu.primitives().unwrap();
    for (r, p) in [(12usize, 1usize), (12, 2)] {
        let (prep, kh) = discretize(&bracket(r, p));
        let fixed = prep.constraints.fixed.as_slice();
        let positions = prep.ho.node_positions();
        let params = AmgParams {
            coarse_size: 60,
            ..Default::default()
        };
        let host = amg_of(&prep, &kh, &params);
        let kd = DeviceBinBcsr::upload(&gpu, &kh).unwrap();
        let abar = BlockCsr::from_binbcsr_filtered(&kh, fixed).unwrap();
        let a0 = device_filtered_copy(&k, &prim, &kd, fixed).unwrap();
        let name = format!("bracket {r} p = {p}");
        assert_bcsr_eq(
            &format!("{name} filtered copy"),
            &a0.download(&gpu).unwrap(),
            &abar,
            0.0,
        );
        let dev = DeviceAmg::setup(&k, a0, fixed, &positions, &params, None).unwrap();
        assert!(
            host.num_levels() >= 3,
            "{name}: {} levels",
            host.num_levels()
        );
        assert_eq!(dev.num_levels(), host.num_levels(), "{name}: levels");
        for (l, lev) in host.levels.iter().enumerate() {
            assert_eq!(
                dev.aggregates()[l].of_node,
                lev.aggregates.of_node,
                "{name} level {l}: aggregates"
            );
            let (pd, rd, ad) = dev.download_level(&gpu, l).unwrap();
            assert_bcsr_eq(&format!("{name} level {l} A"), &ad.unwrap(), &lev.a, 1e-12);
            assert_bcsr_eq(&format!("{name} level {l} P"), &pd, &lev.p, 1e-12);
            assert_bcsr_eq(&format!("{name} level {l} R"), &rd, &lev.r, 1e-12);
        }
        let inv = dev.download_coarse_inverse(&gpu).unwrap();
        let err = max_rel(&inv, &host.coarse_inverse);
        println!("{name} coarse inverse: max rel diff {err:.3e}");
        assert!(err <= 1e-10, "{name} coarse inverse: {err:e}");
        let st = dev.stats().unwrap();
        assert_eq!(st.dofs, host.stats.dofs, "{name}: DOFs per level");
        assert_eq!(st.blocks, host.stats.blocks, "{name}: blocks per level");
        assert_eq!(
            st.hierarchy_bytes, host.stats.hierarchy_bytes,
            "{name}: bytes"
        );
        // the cycle of the device-built hierarchy, on the device Bin-BCSR* fine level
        let abar_dev = device_filtered_copy(&k, &prim, &kd, fixed).unwrap();
        let on_bin = DeviceAmg::setup(
            &k,
            abar_dev,
            fixed,
            &positions,
            &params,
            Some(&kd as &dyn DeviceOperator),
        )
        .unwrap();
        compare_cycles(
            &gpu,
            &format!("{name}: cycle of the device setup"),
            fixed,
            &|b, x| host.cycle(b, x),
            &|b, x| on_bin.cycle(&k, b, x).unwrap(),
            1e-10,
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn amg_vcycle_matches_reference() {
    let Some(gpu) = gpu() else { return };
    let k = SolveKernels::new(&gpu).unwrap();
    let (prep, kh) = discretize(&bracket(12, 1));
    let fixed = prep.constraints.fixed.as_slice();
    let kd = DeviceBinBcsr::upload(&gpu, &kh).unwrap();
    let variants = [
        (
            "V, Chebyshev 2",
            AmgParams {
                coarse_size: 60,
                ..Default::default()
            },
        ),
        (
            "W, Chebyshev 3",
            AmgParams {
                cycle: Cycle::W,
                smoother: Smoother::Chebyshev { degree: 3 },
                coarse_size: 60,
                ..Default::default()
            },
        ),
        (
            "V, block Jacobi 2 x 0.6",
            AmgParams {
                smoother: Smoother::Jacobi {
                    sweeps: 2,
                    omega: 0.6,
                },
                coarse_size: 60,
                ..Default::default()
            },
        ),
    ];
    for (name, params) in variants {
        let amg = amg_of(&prep, &kh, &params);
        assert!(amg.num_levels() >= 2, "{name}: {} levels", amg.num_levels());
        // the finest level on the device Bin-BCSR* (as in the static solve) ...
        let on_bin =
            DeviceAmg::upload(&gpu, &amg, Some((&kd as &dyn DeviceOperator, fixed))).unwrap();
        // ... and on the uploaded filtered block CSR copy
        let on_csr = DeviceAmg::upload(&gpu, &amg, None).unwrap();
        for (dev, how) in [(&on_bin, "Bin-BCSR* fine level"), (&on_csr, "block CSR")] {
            compare_cycles(
                &gpu,
                &format!("amg {name}, {how}, {} levels", amg.num_levels()),
                fixed,
                &|b, x| amg.cycle(b, x),
                &|b, x| dev.cycle(&k, b, x).unwrap(),
                1e-10,
            );
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn pmg_vcycle_matches_reference() {
    let Some(gpu) = gpu() else { return };
    let k = SolveKernels::new(&gpu).unwrap();
    for p in [2, 3] {
        let (prep, kh) = discretize(&bracket(12, p));
        let fixed = prep.constraints.fixed.as_slice();
        let kd = DeviceBinBcsr::upload(&gpu, &kh).unwrap();
        let pmg = pmg_of(&prep, &kh, &PmgParams::default());
        let dev = DevicePmg::upload(&gpu, &pmg, &kd, fixed).unwrap();
        compare_cycles(
            &gpu,
            &format!("pmg p = {p}, {} levels", pmg.num_levels()),
            fixed,
            &|b, x| pmg.cycle(b, x),
            &|b, x| dev.cycle(&k, b, x).unwrap(),
            1e-10,
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn pmg_setup_matches_reference() {
    let Some(gpu) = gpu() else { return };
    let k = SolveKernels::new(&gpu).unwrap();
    let prim = gpu.primitives().unwrap();
    for p in [2, 3] {
        let (prep, kh) = discretize(&bracket(12, p));
        let fixed = prep.constraints.fixed.as_slice();
        let params = PmgParams::default();
        let host = pmg_of(&prep, &kh, &params);
        let kd = DeviceBinBcsr::upload(&gpu, &kh).unwrap();
        let abar = device_filtered_copy(&k, &prim, &kd, fixed).unwrap();
        let prol = degree_elevation(&prep.ho).unwrap();
        let nv = prol.ncols;
        let dev = DevicePmg::setup(
            &k,
            &kd as &dyn DeviceOperator,
            abar,
            &prol,
            fixed,
            &fixed[..3 * nv],
            &prep.ho.mesh().positions()[..nv],
            &params,
        )
        .unwrap();
        let name = format!("pmg p = {p}");
        let dl = (dev.smoother().lmax - host.smoother.lmax).abs() / host.smoother.lmax;
        println!(
            "{name}: smoother lmax {:.6e} (host {:.6e}), rel diff {dl:.3e}",
            dev.smoother().lmax,
            host.smoother.lmax
        );
        assert!(dl <= 1e-8, "{name}: smoother interval");
        assert_eq!(dev.num_levels(), host.num_levels(), "{name}: levels");
        for (l, lev) in host.amg.levels.iter().enumerate() {
            assert_eq!(
                dev.amg.aggregates()[l].of_node,
                lev.aggregates.of_node,
                "{name} order-1 level {l}: aggregates"
            );
            let (pd, rd, ad) = dev.amg.download_level(&gpu, l).unwrap();
            assert_bcsr_eq(
                &format!("{name} order-1 level {l} A"),
                &ad.unwrap(),
                &lev.a,
                1e-12,
            );
            assert_bcsr_eq(&format!("{name} order-1 level {l} P"), &pd, &lev.p, 1e-12);
            assert_bcsr_eq(&format!("{name} order-1 level {l} R"), &rd, &lev.r, 1e-12);
        }
        compare_cycles(
            &gpu,
            &format!("{name}: cycle of the device setup"),
            fixed,
            &|b, x| host.cycle(b, x),
            &|b, x| dev.cycle(&k, b, x).unwrap(),
            1e-10,
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn pcg_multigrid_matches_reference() {
    let Some(gpu) = gpu() else { return };
    let k = SolveKernels::new(&gpu).unwrap();
    let params = PcgParams {
        tolerance: 1e-8,
        max_iterations: 500,
        ..Default::default()
    };
    for p in [1, 2] {
        let (prep, kh) = discretize(&bracket(12, p));
        let cons = &prep.constraints;
        let kd = DeviceBinBcsr::upload(&gpu, &kh).unwrap();
        let (mut u_cpu, mut u_gpu) = (Vec::new(), Vec::new());
        let (rc, rg) = if p == 1 {
            let amg = amg_of(&prep, &kh, &AmgParams::default());
            let dev = DeviceAmg::upload(
                &gpu,
                &amg,
                Some((&kd as &dyn DeviceOperator, cons.fixed.as_slice())),
            )
            .unwrap();
            (
                pcg_with(
                    &kh,
                    &amg,
                    &prep.f,
                    cons,
                    &params,
                    &mut u_cpu,
                    &mut |_, _| {},
                )
                .unwrap(),
                pcg_gpu_with(&k, &kd, &dev, &prep.f, cons, &params, &mut u_gpu).unwrap(),
            )
        } else {
            let pmg = pmg_of(&prep, &kh, &PmgParams::default());
            let dev = DevicePmg::upload(&gpu, &pmg, &kd, &cons.fixed).unwrap();
            (
                pcg_with(
                    &kh,
                    &pmg,
                    &prep.f,
                    cons,
                    &params,
                    &mut u_cpu,
                    &mut |_, _| {},
                )
                .unwrap(),
                pcg_gpu_with(&k, &kd, &dev, &prep.f, cons, &params, &mut u_gpu).unwrap(),
            )
        };
        let err = max_rel(&u_gpu, &u_cpu);
        println!(
            "pcg + {} p = {p}: iterations cpu {} gpu {}, residual cpu {:.2e} gpu {:.2e}, max rel diff {err:.2e}",
            if p == 1 { "amg" } else { "pmg" },
            rc.iterations,
            rg.iterations,
            rc.final_residual,
            rg.final_residual
        );
        assert!(rg.iterations.abs_diff(rc.iterations) <= 1);
        assert!(rg.final_residual <= 1e-8);
        assert!(err <= 1e-6, "solutions differ by {err:e}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn static_solve_multigrid_matches_reference() {
    let Some(gpu) = gpu() else { return };
    let gpu = std::sync::Arc::new(gpu);
    for p in [1, 2] {
        let pr = bracket(12, p);
        let cpu = solve_problem(
            &pr,
            &StaticOptions {
                device: tessera_core::DeviceChoice::Cpu,
                ..Default::default()
            },
            &mut |_| {},
        )
        .unwrap();
        let dev = solve_problem(
            &pr,
            &StaticOptions {
                gpu: Some(gpu.clone()),
                ..Default::default()
            },
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(dev.solver.preconditioner, cpu.solver.preconditioner);
        assert_eq!(dev.solver.levels, cpu.solver.levels);
        assert!(dev.device.starts_with("cuda"), "{}", dev.device);
        let err = max_rel(&dev.u, &cpu.u);
        println!(
            "static solve p = {p} ({}): iterations cpu {} gpu {}, max rel diff {err:.2e}, gpu stages {:?}",
            dev.solver.preconditioner, cpu.report.iterations, dev.report.iterations, dev.stages_ms
        );
        assert!(dev.report.iterations.abs_diff(cpu.report.iterations) <= 1);
        assert!(err <= 1e-6);
    }
}

/// Device timing of the static solve with the given preconditioners on mesh files (for
/// BENCHMARKS.md, where the release `tessera` binary cannot be packed): cases from
/// `TESSERA_MG_BENCH="FILE@P:PREC,..."` (PREC block-jacobi, amg, pmg or default); bolt holes
/// fixed (group `bolt_holes`), 20 MPa traction on `load_hole`, PCG to 1e-8. One warm-up run,
/// then `TESSERA_MG_REPEAT` (default 2) timed runs with their stages.
#[test]
#[ignore = "needs a CUDA GPU and TESSERA_MG_BENCH"]
fn bench_multigrid_static_solve() {
    let Ok(spec) = std::env::var("TESSERA_MG_BENCH") else {
        eprintln!("skipping: TESSERA_MG_BENCH is not set");
        return;
    };
    // TESSERA_MG_DEVICE=cpu times the CPU path instead
    let cpu = std::env::var("TESSERA_MG_DEVICE").as_deref() == Ok("cpu");
    let gpu = if cpu {
        None
    } else {
        let Some(g) = gpu() else { return };
        Some(std::sync::Arc::new(g))
    };
    let repeat: usize = std::env::var("TESSERA_MG_REPEAT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    for case in spec.split(',') {
        let (file, rest) = case.rsplit_once('@').expect("FILE@P:PREC");
        let (p, prec) = rest.split_once(':').unwrap_or((rest, "default"));
        let abs = std::fs::canonicalize(file).expect("mesh file");
        let mut text = format!(
            "order = {p}\n[mesh]\nfile = {:?}\n[material]\npreset = \"Ti-6Al-4V\"\n\
             [[fixed]]\nselector = {{ type = \"group\", name = \"bolt_holes\" }}\n\
             [[loads]]\ntype = \"traction\"\nselector = {{ type = \"group\", name = \"load_hole\" }}\ntraction = [0.0, 0.0, -20.0]\n\
             [solver]\nmethod = \"pcg\"\ntolerance = 1e-8\nmax_iterations = 100000\n",
            abs.display().to_string()
        );
        if prec != "default" {
            text += &format!("preconditioner = \"{prec}\"\n");
        }
        let pr = Problem::parse(&text, "bench.toml", Path::new(".")).unwrap();
        let opts = StaticOptions {
            gpu: gpu.clone(),
            device: if cpu {
                tessera_core::DeviceChoice::Cpu
            } else {
                tessera_core::DeviceChoice::Auto
            },
            ..Default::default()
        };
        drop(solve_problem(&pr, &opts, &mut |_| {}).unwrap());
        for run in 0..repeat {
            let t = std::time::Instant::now();
            let sol = solve_problem(&pr, &opts, &mut |_| {}).unwrap();
            let ms = t.elapsed().as_secs_f64() * 1e3;
            let s = &sol.solver;
            println!(
                "BENCH {file} p={p} {} on {} run {run}: end-to-end {ms:.1} ms, dofs {}, iterations {}, residual {:.2e}, levels {}, operator complexity {:.3}, grid complexity {:.3}, hierarchy {:.1} MB, level dofs {:?}",
                s.preconditioner,
                sol.device,
                sol.u.len(),
                sol.report.iterations,
                sol.report.final_residual,
                s.levels,
                s.operator_complexity,
                s.grid_complexity,
                s.hierarchy_bytes as f64 / 1e6,
                s.level_dofs
            );
            println!(
                "BENCH   stages {:?}",
                sol.stages_ms
                    .iter()
                    .map(|(k, v)| format!("{k} {v:.1}"))
                    .collect::<Vec<_>>()
            );
            println!(
                "BENCH   setup stages {:?}",
                s.setup_stages_ms
                    .iter()
                    .map(|(k, v)| format!("{k} {v:.1}"))
                    .collect::<Vec<_>>()
            );
        }
    }
}
