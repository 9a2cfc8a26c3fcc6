//! The filtered PCG on device vectors (dissertation §4.4.2).

use rayon::prelude::*;
use tessera_gpu::{DeviceBuffer, Gpu, LaunchConfig};

use super::{
    cfg, dot_into, to_u32, up, DeviceOperator, DevicePreconditioner, SolveKernels, BLOCK,
    DOT_BLOCKS,
};
use crate::constraints::Constraints;
use crate::error::SolveError;
use crate::jacobi::{identity_on_fixed, invert_small};
use crate::pcg::{check_system, PcgParams, SolveReport};

/// Blocks of the fused PCG update pass (fixed, so its sums are deterministic too).
const UPDATE_BLOCKS: u32 = 1024;

/// Solve `A x = b` with Dirichlet constraints by the filtered block-Jacobi PCG of
/// [`crate::pcg::pcg`] on device vectors (dissertation §4.4.2): the operator's SpMV, the
/// inverted diagonal blocks (inverted on the host from the separately stored diagonal,
/// constrained rows and columns replaced by the identity), fused vector updates and
/// deterministic two-pass dot products. Same iteration, checks, report and errors as the CPU
/// solver; `x` receives the solution.
pub fn pcg_gpu<A: DeviceOperator + ?Sized>(
    k: &SolveKernels<'_>,
    a: &A,
    b: &[f64],
    cons: &Constraints,
    params: &PcgParams,
    x: &mut Vec<f64>,
) -> Result<SolveReport, SolveError> {
    pcg_gpu_impl(k, a, None, b, cons, params, x)
}

/// Solve `A x = b` with Dirichlet constraints by the filtered PCG of
/// [`crate::pcg::pcg_with`] on device vectors with the preconditioner `m` (a multigrid
/// cycle): same iteration, checks, report and errors as the CPU solver. The status is
/// polled after every iteration (a cycle costs far more than the synchronisation).
pub fn pcg_gpu_with<A: DeviceOperator + ?Sized>(
    k: &SolveKernels<'_>,
    a: &A,
    m: &dyn DevicePreconditioner,
    b: &[f64],
    cons: &Constraints,
    params: &PcgParams,
    x: &mut Vec<f64>,
) -> Result<SolveReport, SolveError> {
    pcg_gpu_impl(k, a, Some(m), b, cons, params, x)
}

fn pcg_gpu_impl<A: DeviceOperator + ?Sized>(
    k: &SolveKernels<'_>,
    a: &A,
    prec: Option<&dyn DevicePreconditioner>,
    b: &[f64],
    cons: &Constraints,
    params: &PcgParams,
    x: &mut Vec<f64>,
) -> Result<SolveReport, SolveError> {
    let g = k.gpu;
    let nb = a.num_block_rows();
    let e = a.block_size();
    let n = nb * e;
    check_system(n, b, cons)?;
    let n32 = to_u32(n, "DOFs")?;
    let nb32 = nb as u32;
    let e32 = e as u32;
    // block-Jacobi inverses (only for block Jacobi)
    let diag = if prec.is_none() {
        g.download_range(a.diagonal(), 0..nb * e * e)?
    } else {
        Vec::new()
    };
    let inv: Vec<Result<Vec<f64>, SolveError>> = (0..if prec.is_none() { nb } else { 0 })
        .into_par_iter()
        .with_min_len(1024)
        .map(|i| {
            let mut blk = diag[i * e * e..(i + 1) * e * e].to_vec();
            identity_on_fixed(&mut blk, e, &cons.fixed[i * e..(i + 1) * e]);
            invert_small(&blk, e).ok_or(SolveError::SingularBlock { node: i })
        })
        .collect();
    let mut flat = Vec::with_capacity(nb * e * e);
    for r in inv {
        flat.extend(r?);
    }
    let inv = up(g, &flat)?;
    let fixed: Vec<u32> = cons.fixed.iter().map(|&f| u32::from(f)).collect();
    let fixed = up(g, &fixed)?;
    let x0: Vec<f64> = (0..n)
        .map(|i| if cons.fixed[i] { cons.values[i] } else { 0.0 })
        .collect();
    let xd = up(g, &x0)?;
    let bd = up(g, b)?;
    let mut r = g.zeros::<f64>(n.max(1))?;
    let mut c = g.zeros::<f64>(n.max(1))?;
    let mut q = g.zeros::<f64>(n.max(1))?;
    let mut s = g.zeros::<f64>(n.max(1))?;
    let out = g.zeros::<f64>(4)?;
    let vcfg = cfg(n, BLOCK)?;
    let ncfg = cfg(nb, BLOCK)?;
    let fetch = |xd: &DeviceBuffer<f64>, x: &mut Vec<f64>| -> Result<(), SolveError> {
        *x = g.download_range(xd, 0..n)?;
        Ok(())
    };
    a.apply(k, &xd, &mut r)?;
    g.launch(&k.k("pcg_residual")?, vcfg)
        .arg(&n32)
        .arg(&bd)
        .arg(&fixed)
        .arg(&r)
        .run()?;
    dot_into(k, n32, &r, &r, &out, 0)?;
    let r0 = g.download_at(&out, 0)?.sqrt();
    let history = vec![1.0];
    if !r0.is_finite() {
        return Err(SolveError::NonFinite {
            what: "initial residual",
            iteration: 0,
        }
        .into());
    }
    if r0 == 0.0 {
        fetch(&xd, x)?;
        return Ok(SolveReport {
            iterations: 0,
            final_residual: 0.0,
            history,
        });
    }
    match prec {
        None => {
            g.launch(&k.k("pcg_jacobi")?, ncfg)
                .arg(&nb32)
                .arg(&e32)
                .arg(&inv)
                .arg(&fixed)
                .arg(&r)
                .arg(&c)
                .run()?;
        }
        Some(m) => {
            m.apply(k, &r, &mut c)?;
            g.launch(&k.k("pcg_filter")?, vcfg)
                .arg(&n32)
                .arg(&fixed)
                .arg(&c)
                .run()?;
        }
    }
    dot_into(k, n32, &r, &c, &out, 0)?;
    let delta = g.download_at(&out, 0)?;
    // The iterations run without host synchronisation: α, β and the checks are computed on
    // the device (pcg_alpha, pcg_beta), every vector kernel returns at once after the solve
    // has ended, and the host polls the status every POLL iterations. The arithmetic is
    // the same as the CPU solver's, iteration for iteration.
    let poll = if prec.is_none() { 16 } else { 1 };
    let st = up(g, &device_pcg_state(delta, r0, params))?;
    let status = g.zeros::<u32>(2)?;
    let hist = g.zeros::<f64>(params.max_iterations + 1)?;
    let out3 = g.zeros::<f64>(3)?;
    let fdot = k.k("pcg_filter_dot_partial")?;
    let upj = k.k("pcg_update_precond_partial")?;
    let dirk = k.k("pcg_direction_dev")?;
    let alphak = k.k("pcg_alpha")?;
    let betak = k.k("pcg_beta")?;
    let df = k.k("dot_final_dev")?;
    let df2 = k.k("dot_final2_dev")?;
    let partial = k.dot_partial.lock().unwrap_or_else(|e| e.into_inner());
    let partial2 = g.zeros::<f64>(2 * UPDATE_BLOCKS as usize)?;
    let (upk, filt_dot) = (k.k("pcg_update_partial")?, k.k("pcg_filter_dot_partial")?);
    let mut ended: Option<(u32, usize)> = None;
    let mut last = 0usize;
    // progress for an observer (crate::monitor): the residual of a poll, read back at most
    // every GPU_REPORT_INTERVAL
    let monitored = crate::monitor::is_monitored();
    let mut last_report = std::time::Instant::now();
    for it in 1..=params.max_iterations {
        let it32 = it as u32;
        a.apply(k, &c, &mut q)?;
        // q = S(A c) and cᵀq
        g.launch(&fdot, LaunchConfig::blocks(DOT_BLOCKS, 256))
            .arg(&n32)
            .arg(&fixed)
            .arg(&q)
            .arg(&c)
            .arg(&*partial)
            .arg(&status)
            .run()?;
        g.launch(&df, LaunchConfig::blocks(1, 256))
            .arg(&DOT_BLOCKS)
            .arg(&*partial)
            .arg(&out3)
            .arg(&0u32)
            .arg(&status)
            .run()?;
        g.launch(&alphak, LaunchConfig::blocks(1, 1))
            .arg(&out3)
            .arg(&st)
            .arg(&status)
            .arg(&it32)
            .run()?;
        match prec {
            None => {
                // x += α c, r -= α q, s = S(P⁻¹ r), rᵀr and rᵀs
                g.launch(&upj, LaunchConfig::blocks(UPDATE_BLOCKS, 256))
                    .arg(&nb32)
                    .arg(&e32)
                    .arg(&st)
                    .arg(&status)
                    .arg(&inv)
                    .arg(&fixed)
                    .arg(&c)
                    .arg(&q)
                    .arg(&xd)
                    .arg(&r)
                    .arg(&s)
                    .arg(&partial2)
                    .run()?;
                g.launch(&df2, LaunchConfig::blocks(1, 256))
                    .arg(&UPDATE_BLOCKS)
                    .arg(&partial2)
                    .arg(&out3)
                    .arg(&1u32)
                    .arg(&2u32)
                    .arg(&status)
                    .run()?;
            }
            Some(m) => {
                // x += α c, r -= α q and rᵀr; then s = S(M⁻¹ r) and rᵀs (after the solve has
                // ended the cycle still runs once, on the frozen residual, and is unused)
                g.launch(&upk, LaunchConfig::blocks(DOT_BLOCKS, 256))
                    .arg(&n32)
                    .arg(&st)
                    .arg(&status)
                    .arg(&c)
                    .arg(&q)
                    .arg(&xd)
                    .arg(&r)
                    .arg(&*partial)
                    .run()?;
                g.launch(&df, LaunchConfig::blocks(1, 256))
                    .arg(&DOT_BLOCKS)
                    .arg(&*partial)
                    .arg(&out3)
                    .arg(&1u32)
                    .arg(&status)
                    .run()?;
                m.apply(k, &r, &mut s)?;
                g.launch(&filt_dot, LaunchConfig::blocks(DOT_BLOCKS, 256))
                    .arg(&n32)
                    .arg(&fixed)
                    .arg(&s)
                    .arg(&r)
                    .arg(&*partial)
                    .arg(&status)
                    .run()?;
                g.launch(&df, LaunchConfig::blocks(1, 256))
                    .arg(&DOT_BLOCKS)
                    .arg(&*partial)
                    .arg(&out3)
                    .arg(&2u32)
                    .arg(&status)
                    .run()?;
            }
        }
        g.launch(&betak, LaunchConfig::blocks(1, 1))
            .arg(&out3)
            .arg(&st)
            .arg(&status)
            .arg(&hist)
            .arg(&it32)
            .run()?;
        g.launch(&dirk, vcfg)
            .arg(&n32)
            .arg(&st)
            .arg(&status)
            .arg(&s)
            .arg(&c)
            .run()?;
        last = it;
        if it % poll == 0 || it == params.max_iterations {
            let sv = g.download_range(&status, 0..2)?;
            if sv[0] != 0 {
                ended = Some((sv[0], sv[1] as usize));
                break;
            }
            if monitored && last_report.elapsed() >= crate::monitor::GPU_REPORT_INTERVAL {
                crate::monitor::report(it, g.download_at(&hist, it)?);
                last_report = std::time::Instant::now();
            }
        }
    }
    drop(partial);
    device_pcg_result(g, ended, last, &hist, &st, history, params, || {
        fetch(&xd, x)
    })
}

/// The initial scalar state `st` of the device PCG kernels (`pcg_alpha`, `pcg_beta`, ...):
/// `[δ, α, β, r0, tolerance, divergence factor, cᵀq of a breakdown, -]`.
pub(crate) fn device_pcg_state(delta: f64, r0: f64, params: &PcgParams) -> [f64; 8] {
    [
        delta,
        0.0,
        0.0,
        r0,
        params.tolerance,
        params.divergence_factor,
        0.0,
        0.0,
    ]
}

/// The end of a PCG whose scalars live on the device (`pcg_alpha`, `pcg_beta`): the relative
/// residuals of iterations `1..=upto` read back from `hist` (`upto` = the iteration that ended
/// the solve, else the `last` one run), and the result of the device status `ended`
/// (`(state, iteration)`, `None` when the iteration limit was reached): on convergence the
/// report, after `fetch` has read the solution back; otherwise the error of the state that
/// stopped the iteration (`st[6]` holds the `cᵀq` of a breakdown). Shared by [`pcg_gpu`] and
/// the partitioned PCG ([`super::DeviceDomains::pcg_with`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn device_pcg_result(
    g: &Gpu,
    ended: Option<(u32, usize)>,
    last: usize,
    hist: &DeviceBuffer<f64>,
    st: &DeviceBuffer<f64>,
    mut history: Vec<f64>,
    params: &PcgParams,
    fetch: impl FnOnce() -> Result<(), SolveError>,
) -> Result<SolveReport, SolveError> {
    let upto = ended.map_or(last, |(_, i)| i);
    if upto > 0 {
        history.extend(g.download_range(hist, 1..upto + 1)?);
        if crate::monitor::is_monitored() {
            crate::monitor::report(upto, history[upto]);
        }
    }
    let at = |i: usize| history.get(i).copied().unwrap_or(f64::NAN);
    match ended {
        Some((1, it)) => {
            fetch()?;
            let final_residual = at(it);
            Ok(SolveReport {
                iterations: it,
                final_residual,
                history,
            })
        }
        Some((2, it)) => Err(SolveError::NonFinite {
            what: "search direction",
            iteration: it,
        }),
        Some((3, it)) => Err(SolveError::Singular {
            iteration: it,
            value: g.download_at(st, 6)?,
        }),
        Some((4, it)) => Err(SolveError::NonFinite {
            what: "residual",
            iteration: it,
        }),
        Some((5, it)) => Err(SolveError::Diverged {
            iteration: it,
            residual: at(it),
        }),
        Some((code, _)) => Err(SolveError::Device {
            device: format!("cuda:{}", g.ordinal()),
            reason: format!("PCG status {code} is unknown"),
        }),
        None => Err(SolveError::NotConverged {
            iterations: params.max_iterations,
            residual: at(params.max_iterations),
            tolerance: params.tolerance,
        }),
    }
}
