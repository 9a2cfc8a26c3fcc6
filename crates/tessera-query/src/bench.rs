//! The benchmark of dissertation §6.4.3 (Tables 6.2-6.4): compile times, execution times
//! split into calculation and GPU->CPU copy, and break-even frames, for the interpreter,
//! the CPU JIT and the GPU JIT, for the three example expressions on square grids. The
//! simulation's fields live on the GPU (as in the dissertation's setup), so the CPU back
//! ends pay for downloading every field they read and the GPU back end only for the one
//! derived field. Printed beside the dissertation's numbers and the bandwidth floor.

use crate::error::QueryError;
use crate::math::Precision;
use crate::{jit, ptx, Backend, Par, Query};
use std::fmt::Write;
use std::time::Instant;

/// The three expressions of §6.4.3.
pub const EXPRESSIONS: [&str; 3] = [
    "abs(Pressure)",
    "sqrt(VelocityX^2+VelocityY^2)",
    "(VelocityX^2+VelocityY^2)/2 + Pressure",
];
/// Field names of the fluid simulation.
pub const FIELDS: [&str; 3] = ["VelocityX", "VelocityY", "Pressure"];

/// Dissertation Table 6.2 (compile ms: interp, CPU, GPU; execution ms: interp, CPU, GPU), 1024² grid.
pub const TABLE_6_2: [[f64; 6]; 3] = [
    [0.03, 6.60, 77.1, 14.1, 8.91, 4.49],
    [0.04, 7.22, 77.1, 53.1, 13.1, 4.27],
    [0.04, 9.37, 77.2, 63.1, 17.1, 4.38],
];
/// Dissertation Table 6.3 (ms: CPU calc, CPU copy, GPU calc, GPU copy), other machine.
pub const TABLE_6_3: [[f64; 4]; 3] = [
    [1.99, 1.04, 0.10, 0.98],
    [2.20, 1.98, 0.13, 0.97],
    [1.13, 3.02, 0.16, 0.99],
];

static LOAD_COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Options of the benchmark.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// Grid edge lengths (the grid has `n * n` cells).
    pub sizes: Vec<usize>,
    /// Timed repetitions per measurement (median reported); fewer are used for big grids.
    pub reps: usize,
    /// Use the GPU if one is present.
    pub gpu: bool,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            sizes: vec![1024, 4096],
            reps: 21,
            gpu: true,
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        0.0
    } else {
        v[v.len() / 2]
    }
}

fn time_ms(reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    median(
        (0..reps.max(1))
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect(),
    )
}

/// Break-even frames of method `a` (cheap compile, slow frames) against `b`:
/// `n = ceil((tc_b - tc_a) / (te_a - te_b))` (§6.4.3). `None` if `b` never pays off.
pub fn break_even(tc_a: f64, te_a: f64, tc_b: f64, te_b: f64) -> Option<(u64, f64)> {
    let gain = te_a - te_b;
    if gain <= 0.0 {
        return None;
    }
    let x = ((tc_b - tc_a) / gain).max(0.0);
    Some((x.ceil().max(1.0) as u64, x))
}

struct Row {
    compile: [f64; 3],
    gpu_warm: f64,
    calc: [f64; 3],
    copy: [f64; 3],
}

fn fields(n: usize) -> Vec<Vec<f32>> {
    // a smooth synthetic flow (a vortex with a pressure dip): values like a CFD frame
    let side = (n as f64).sqrt() as usize;
    let mut vx = Vec::with_capacity(n);
    let mut vy = Vec::with_capacity(n);
    let mut p = Vec::with_capacity(n);
    for k in 0..n {
        let (i, j) = ((k % side.max(1)) as f32, (k / side.max(1)) as f32);
        let (x, y) = (i / side as f32 - 0.5, j / side as f32 - 0.5);
        vx.push(-y * 2.0);
        vy.push(x * 2.0);
        p.push(-(x * x + y * y) + 0.1 * (8.0 * x).sin());
    }
    vec![vx, vy, p]
}

/// GPU->host download rates [GB/s] of one buffer, median of `reps`: into a freshly allocated
/// `Vec` ([`tessera_gpu::Gpu::download`]: the pages of a new allocation fault during the copy),
/// into a reused `Vec` (`download_into`) and into a reused pinned buffer (`download_pinned`).
fn copy_rates(
    g: &tessera_gpu::Gpu,
    buf: &tessera_gpu::DeviceBuffer<f32>,
    reps: usize,
) -> Result<[f64; 3], tessera_gpu::GpuError> {
    let gb = buf.bytes() as f64 / 1e9;
    let mut err = None;
    let mut keep = |r: Result<(), tessera_gpu::GpuError>| {
        if let Err(x) = r {
            err = Some(x);
        }
    };
    let fresh = time_ms(reps, || keep(g.download(buf).map(|_| ())));
    let mut host = vec![0.0f32; buf.len()];
    let reused = time_ms(reps, || keep(g.download_into(buf, &mut host)));
    let mut pin = g.alloc_pinned::<f32>(buf.len())?;
    let pinned = time_ms(reps, || keep(g.download_pinned(buf, &mut pin)));
    if let Some(x) = err {
        return Err(x);
    }
    Ok([fresh, reused, pinned].map(|ms| gb / (ms * 1e-3)))
}

/// Runs the benchmark and returns the report (markdown tables).
pub fn run(opts: &BenchOptions) -> Result<String, QueryError> {
    let mut out = String::new();
    let gpu = if opts.gpu {
        match tessera_gpu::Gpu::probe() {
            Ok(g) => Some(g),
            Err(e) => {
                let _ = writeln!(out, "GPU: none ({e}); GPU rows say \"no GPU\"");
                None
            }
        }
    } else {
        None
    };
    if let Some(g) = &gpu {
        let _ = writeln!(out, "GPU: {}", g.describe());
    }
    let _ = writeln!(out, "CPU: {} threads available; CPU back ends timed single-threaded (Par::Seq), as in the dissertation", rayon::current_num_threads());
    let ge = |e: tessera_gpu::GpuError| QueryError::Gpu(e.to_string());
    for &side in &opts.sizes {
        let n = side * side;
        let reps = if n > 4_000_000 {
            opts.reps.min(7)
        } else {
            opts.reps
        };
        let host = fields(n);
        let _ = writeln!(
            out,
            "\n## {side}x{side} grid ({n} cells, f32), median of {reps} runs\n"
        );
        // device copies of the fields, as the simulation would hold them
        let dev = match &gpu {
            Some(g) => Some(
                host.iter()
                    .map(|h| g.upload(h))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(ge)?,
            ),
            None => None,
        };
        let bw = match &gpu {
            Some(g) => {
                // on a 256 MiB buffer, so the figure is the DRAM bandwidth, not launch latency
                let big = 64 << 20;
                let src = g.zeros::<f32>(big).map_err(ge)?;
                let mut dst = g.alloc::<f32>(big).map_err(ge)?;
                let ms = g
                    .median_ms(9, 2, || g.copy_device(&src, &mut dst))
                    .map_err(ge)?;
                Some(2.0 * (big * 4) as f64 / (ms * 1e-3) / 1e9)
            }
            None => None,
        };
        if let Some(b) = bw {
            let _ = writeln!(out, "measured device bandwidth (256 MiB device-to-device copy, read+write): {b:.0} GB/s");
        }
        if let (Some(g), Some(d)) = (&gpu, &dev) {
            let [fresh, reused, pinned] = copy_rates(g, &d[0], reps).map_err(ge)?;
            let _ = writeln!(out, "GPU->host download of one field ({:.1} MB): into a fresh Vec {fresh:.1} GB/s, into a reused Vec {reused:.1} GB/s, into pinned memory {pinned:.1} GB/s (the tables use pinned buffers allocated once)", (n * 4) as f64 / 1e6);
        }
        let _ = writeln!(out);
        let mut rows = Vec::new();
        for (ei, e) in EXPRESSIONS.iter().enumerate() {
            let q = Query::compile(e, &FIELDS)?;
            let used = q.used_fields();
            // compile times
            let c_interp = time_ms(reps, || {
                let _ = Query::compile(e, &FIELDS);
            });
            let c_jit = time_ms(reps, || {
                let q = Query::compile(e, &FIELDS).expect("compiled above");
                let _ = jit::JitKernel::compile(q.ir(Precision::F32));
            });
            let (mut c_gpu, mut c_gpu_warm) = (f64::NAN, f64::NAN);
            if let Some(g) = &gpu {
                // cold: unique PTX text per run so no cache can answer (emit + driver JIT + load);
                // warm: the same query again (emit + kernel-cache hit)
                let mut v = Vec::new();
                for _ in 0..reps.min(11) {
                    let k = LOAD_COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let t = Instant::now();
                    let q = Query::compile(e, &FIELDS)?;
                    let mut m = ptx::emit_for(q.ir(Precision::F32), g.sm().max(ptx::DEFAULT_SM));
                    let _ = write!(m.text, "// bench load {k} {}\n", std::process::id());
                    let module = g.load_ptx(&m.text, &m.name).map_err(ge)?;
                    let _ = module.function(&m.name).map_err(ge)?;
                    v.push(t.elapsed().as_secs_f64() * 1e3);
                }
                c_gpu = median(v);
                let _ = q.gpu_kernel(g, Precision::F32)?;
                c_gpu_warm = time_ms(reps, || {
                    let q = Query::compile(e, &FIELDS).expect("compiled above");
                    let _ = q.gpu_kernel(g, Precision::F32);
                });
                let _ = writeln!(out, "Expr. {}: GPU compile-and-load cold (driver JIT) {c_gpu:.3} ms, warm (kernel cache) {c_gpu_warm:.3} ms", ei + 1);
            }
            // execution: calculation
            let refs: Vec<&[f32]> = host.iter().map(|h| h.as_slice()).collect();
            let mut o = vec![0.0f32; n];
            let e_interp = time_ms(reps, || {
                q.eval_cpu_with(Backend::Interp, Par::Seq, &refs, &mut o)
                    .expect("sizes match")
            });
            let interp_out = o.clone();
            let e_jit = time_ms(reps, || {
                q.eval_cpu_with(Backend::CpuJit, Par::Seq, &refs, &mut o)
                    .expect("sizes match")
            });
            if interp_out
                .iter()
                .zip(&o)
                .any(|(a, b)| a.to_bits() != b.to_bits())
            {
                return Err(QueryError::Jit(format!(
                    "bench: interpreter and JIT differ on `{e}`"
                )));
            }
            let (mut e_gpu, mut copy_cpu, mut copy_gpu) = (f64::NAN, f64::NAN, f64::NAN);
            if let (Some(g), Some(d)) = (&gpu, &dev) {
                let k = q.gpu_kernel(g, Precision::F32)?;
                let mut dout = g.alloc::<f32>(n).map_err(ge)?;
                let drefs: Vec<&tessera_gpu::DeviceBuffer<f32>> = d.iter().collect();
                let mut err = None;
                e_gpu = g
                    .median_ms(reps, 2, || {
                        if let Err(x) = q.launch(g, &k, &drefs, &mut dout) {
                            err = Some(x);
                        }
                        Ok(())
                    })
                    .map_err(ge)?;
                if let Some(x) = err {
                    return Err(x);
                }
                let got = g.download(&dout).map_err(ge)?;
                let bad = got
                    .iter()
                    .zip(&o)
                    .filter(|(a, b)| (**a - **b).abs() > 1e-5 * b.abs().max(1.0))
                    .count();
                if bad > 0 {
                    return Err(QueryError::Gpu(format!(
                        "bench: GPU result differs from the CPU in {bad} cells for `{e}`"
                    )));
                }
                // copies: CPU back ends download every field they read; GPU only the result.
                // Into page-locked host buffers allocated once, as a frame loop would reuse
                // them (a fresh Vec per copy page-faults during the copy: see `copy_rates`).
                let mut pins = Vec::new();
                for _ in 0..d.len() {
                    pins.push(g.alloc_pinned::<f32>(n).map_err(ge)?);
                }
                let mut pout = g.alloc_pinned::<f32>(n).map_err(ge)?;
                g.download_pinned(&dout, &mut pout).map_err(ge)?;
                if pout.as_slice().map_err(ge)? != got.as_slice() {
                    return Err(QueryError::Gpu("bench: pinned download differs".into()));
                }
                let mut err = None;
                copy_cpu = time_ms(reps, || {
                    for &f in &used {
                        if let Err(x) = g.download_pinned(&d[f], &mut pins[f]) {
                            err = Some(x);
                        }
                    }
                });
                copy_gpu = time_ms(reps, || {
                    if let Err(x) = g.download_pinned(&dout, &mut pout) {
                        err = Some(x);
                    }
                });
                if let Some(x) = err {
                    return Err(ge(x));
                }
                if let Some(b) = bw {
                    let floor = (used.len() + 1) as f64 * (n * 4) as f64 / (b * 1e9) * 1e3;
                    let _ = writeln!(out, "Expr. {}: GPU calculation {e_gpu:.3} ms, bandwidth floor {floor:.3} ms ({} fields read + 1 written) -> {:.2}x the floor", ei + 1, used.len(), e_gpu / floor);
                }
            }
            rows.push(Row {
                compile: [c_interp, c_jit, c_gpu],
                gpu_warm: c_gpu_warm,
                calc: [e_interp, e_jit, e_gpu],
                copy: [copy_cpu, copy_cpu, copy_gpu],
            });
        }
        let f = |v: f64| {
            if v.is_nan() {
                "no GPU".to_string()
            } else {
                format!("{v:.3}")
            }
        };
        let fc = |v: f64| {
            if v.is_nan() {
                "n/a".to_string()
            } else {
                format!("{v:.3}")
            }
        };
        let _ = writeln!(out, "\n### Table 6.2: compile and execution time [ms] (ours; dissertation 1024² in parentheses)\n");
        let _ = writeln!(out, "| Expr. | compile interp | compile CPU JIT | compile GPU JIT cold / warm | exec interp | exec CPU JIT | exec GPU JIT |");
        let _ = writeln!(out, "|---|---|---|---|---|---|---|");
        for (i, r) in rows.iter().enumerate() {
            let d = TABLE_6_2[i];
            let tot = |k: usize| {
                if r.copy[k].is_nan() {
                    r.calc[k]
                } else {
                    r.calc[k] + r.copy[k]
                }
            };
            let te = [
                tot(0),
                tot(1),
                if r.calc[2].is_nan() { f64::NAN } else { tot(2) },
            ];
            let _ = writeln!(
                out,
                "| {} | {} ({}) | {} ({}) | {} / {} ({}) | {} ({}) | {} ({}) | {} ({}) |",
                i + 1,
                f(r.compile[0]),
                d[0],
                f(r.compile[1]),
                d[1],
                f(r.compile[2]),
                f(r.gpu_warm),
                d[2],
                f(te[0]),
                d[3],
                f(te[1]),
                d[4],
                f(te[2]),
                d[5]
            );
        }
        let _ = writeln!(out, "\nExecution = calculation + copy of the fields needed on the executing device (copy is n/a without a GPU). GPU compile: cold = emit + driver PTX JIT + load of never-seen PTX; warm = emit + kernel-cache hit. Break-even uses cold.");
        let _ = writeln!(out, "\n### Table 6.3: calculation and GPU->CPU copy [ms] (dissertation's other machine in parentheses)\n");
        let _ = writeln!(out, "| Expr. | interp calc | CPU JIT calc | CPU copy | GPU calc | GPU copy | CPU copy share | GPU copy share |");
        let _ = writeln!(out, "|---|---|---|---|---|---|---|---|");
        for (i, r) in rows.iter().enumerate() {
            let d = TABLE_6_3[i];
            let share = |calc: f64, copy: f64| {
                if copy.is_nan() || calc.is_nan() {
                    "n/a".to_string()
                } else {
                    format!("{:.1}%", 100.0 * copy / (calc + copy))
                }
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} ({}) | {} ({}) | {} ({}) | {} ({}) | {} | {} |",
                i + 1,
                f(r.calc[0]),
                f(r.calc[1]),
                d[0],
                fc(r.copy[1]),
                d[1],
                f(r.calc[2]),
                d[2],
                fc(r.copy[2]),
                d[3],
                share(r.calc[1], r.copy[1]),
                share(r.calc[2], r.copy[2])
            );
        }
        let _ = writeln!(out, "\n### Table 6.4: break-even frames, rounded up (before rounding); dissertation 1024² in brackets\n");
        let _ = writeln!(out, "| Expr. | CPU JIT vs interp | GPU JIT vs interp | GPU JIT vs CPU JIT | interp/CPU JIT calc ratio |");
        let _ = writeln!(out, "|---|---|---|---|---|");
        let dis = [
            ["2 (1.27)", "9 (8.02)", "16 (15.95)"],
            ["1 (0.18)", "2 (1.58)", "8 (7.91)"],
            ["1 (0.20)", "2 (1.31)", "6 (5.33)"],
        ];
        for (i, r) in rows.iter().enumerate() {
            let te = |k: usize| {
                if r.copy[k].is_nan() {
                    r.calc[k]
                } else {
                    r.calc[k] + r.copy[k]
                }
            };
            let be = |a: usize, b: usize| {
                if r.calc[b].is_nan() || r.calc[a].is_nan() {
                    return "no GPU".to_string();
                }
                match break_even(r.compile[a], te(a), r.compile[b], te(b)) {
                    Some((n, x)) => format!("{n} ({x:.2})"),
                    None => "never".to_string(),
                }
            };
            let _ = writeln!(
                out,
                "| {} | {} [{}] | {} [{}] | {} [{}] | {:.1}x |",
                i + 1,
                be(0, 1),
                dis[i][0],
                be(0, 2),
                dis[i][1],
                be(1, 2),
                dis[i][2],
                r.calc[0] / r.calc[1]
            );
        }
    }
    Ok(out)
}
