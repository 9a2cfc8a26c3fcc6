//! Domain decomposition on a GPU (dissertation §7.1.2): `k` domains on one device against the
//! single-domain solve (CPU reference and the one-domain GPU PCG), the partitioned device SpMV
//! against the global one, NCCL's one-rank path, the per-domain assembly on the device against
//! the CPU's, the domain AMG on the devices against the CPU `DomainAmg`, and the errors of a
//! device placement. All tests need a CUDA GPU (`#[ignore]`d) and skip with a message without
//! one.

mod domain_common;
use domain_common::{
    beam_system, global, layout, rel_diff, scatter_constraints, stiffness_op, tets,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tessera_core::Par;
use tessera_fem::domain::{assemble_domains, DomainLayout};
use tessera_fem::domain_gpu::assemble_domains_gpu;
use tessera_fem::nodes::HoMesh;
use tessera_gpu::Gpu;
use tessera_mesh::partition::Partitioner;
use tessera_solve::cuda::{
    owned_filtered_copy, pcg_gpu, BinSchedule, DeviceBinBcsr, DeviceDomainAmg, DeviceDomains,
    DeviceDomainsOptions, DomainPreconditioner, SolveKernels,
};
use tessera_solve::{
    pcg, pcg_with, AmgParams, BlockOperator, DomainAmg, DomainMatrix, InProcess,
    PartitionedOperator, PcgParams,
};

fn gpu() -> Option<Gpu> {
    match Gpu::probe() {
        Ok(g) => {
            eprintln!("running on {}", g.describe());
            Some(g)
        }
        Err(e) => {
            if std::env::var_os("TESSERA_REQUIRE_GPU").is_some() {
                panic!("TESSERA_REQUIRE_GPU is set but no GPU is usable: {e}");
            }
            eprintln!("skipped: no usable CUDA GPU ({e})");
            None
        }
    }
}

fn domains(ho: &HoMesh, lay: &DomainLayout) -> Vec<DomainMatrix> {
    assemble_domains(ho, lay, stiffness_op(), Par::Rayon)
        .unwrap()
        .into_iter()
        .map(|d| d.matrix)
        .collect()
}

/// The partitioned device SpMV equals the global CPU SpMV to f64 round-off, for k = 1, 2, 4, 8
/// domains on one GPU (METIS and RCB, p = 1 and 2), with and without the overlapped exchange.
#[test]
#[ignore = "needs a CUDA GPU"]
fn partitioned_device_spmv_matches_global() {
    let Some(g) = gpu() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(2121);
    for p in [1, 2] {
        let ho = HoMesh::new(tets([9, 5, 4]), p).unwrap();
        let kg = global(&ho);
        let n = ho.num_nodes() * 3;
        let x: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
        let mut y = vec![0.0; n];
        kg.apply(&x, &mut y);
        let scale = y.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        for k in [1, 2, 4, 8] {
            for partitioner in [Partitioner::Metis, Partitioner::Rcb] {
                let lay = layout(&ho, k, partitioner);
                let mats = domains(&ho, &lay);
                // overlap with the boundary bins beside the interior bins (both schedules),
                // after them, and no overlap
                for (overlap, concurrent_boundary, schedule) in [
                    (true, true, BinSchedule::Resident),
                    (true, true, BinSchedule::PerBin),
                    (true, false, BinSchedule::PerBin),
                    (false, false, BinSchedule::Resident),
                ] {
                    let opts = DeviceDomainsOptions {
                        overlap,
                        concurrent_boundary,
                        schedule,
                        ..Default::default()
                    };
                    let dd = DeviceDomains::new(&mats, &vec![&g; k], opts).unwrap();
                    assert_eq!(dd.num_devices(), 1);
                    let xs = dd.upload(&lay.scatter(&x, 3)).unwrap();
                    let mut ys = dd.zeros().unwrap();
                    dd.apply(&xs, &mut ys).unwrap();
                    let yg = lay.gather(&dd.download(&ys).unwrap(), 3);
                    let err = y
                        .iter()
                        .zip(&yg)
                        .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
                    // f64 round-off of a row sum in a different column order
                    assert!(
                        err <= 1e-13 * scale,
                        "p = {p}, k = {k}, {partitioner}, {opts:?}: {err:e} vs {scale:e}"
                    );
                    if k == 1 {
                        assert_eq!(dd.halo_bytes_per_apply(), 0);
                    } else {
                        assert!(dd.halo_bytes_per_apply() > 0);
                    }
                    assert_eq!(dd.remote_bytes_per_apply(), 0);
                }
            }
        }
    }
}

/// k = 1, 2, 4, 8 domains on one GPU give the single-domain solution (CPU reference and the
/// one-domain GPU PCG) to the solver tolerance, with the block-Jacobi iteration count within 2;
/// the iterates do not depend on the overlap or on the NCCL reduction path (bitwise equal).
#[test]
#[ignore = "needs a CUDA GPU"]
fn partitioned_solve_matches_reference() {
    let Some(g) = gpu() else { return };
    let ks = SolveKernels::new(&g).unwrap();
    let params = PcgParams {
        tolerance: 1e-10,
        ..Default::default()
    };
    let nccl = tessera_gpu::NcclLibrary::load();
    if let Err(e) = &nccl {
        eprintln!("the NCCL variant is skipped: {e}");
    }
    for p in [1, 2] {
        let ho = HoMesh::new(tets([12, 3, 3]), p).unwrap();
        let kg = global(&ho);
        let (cons, f) = beam_system(&ho);
        let mut u0 = Vec::new();
        let rep0 = pcg(&kg, &f, &cons, &params, &mut u0).unwrap();
        let dk = DeviceBinBcsr::upload(&g, &kg).unwrap();
        let mut ug = Vec::new();
        let repg = pcg_gpu(&ks, &dk, &f, &cons, &params, &mut ug).unwrap();
        for k in [1, 2, 4, 8] {
            let lay = layout(&ho, k, Partitioner::Metis);
            let mats = domains(&ho, &lay);
            let lc = scatter_constraints(&lay, &cons);
            let lf = lay.scatter(&f, 3);
            let dd = DeviceDomains::new(&mats, &vec![&g; k], Default::default()).unwrap();
            let mut us = Vec::new();
            let rep = dd.pcg(&lf, &lc, &params, &mut us).unwrap();
            let u = lay.gather(&us, 3);
            let (d_cpu, d_gpu) = (rel_diff(&u, &u0), rel_diff(&u, &ug));
            eprintln!(
                "block Jacobi p = {p}, k = {k}: {} iterations (one domain: CPU {}, GPU {}), \
                 |u - u0| / |u0| = {d_cpu:.1e}, |u - u_gpu| / |u_gpu| = {d_gpu:.1e}",
                rep.iterations, rep0.iterations, repg.iterations
            );
            assert!(d_cpu <= 1e-7, "p = {p}, k = {k}: {d_cpu:e}");
            assert!(d_gpu <= 1e-7, "p = {p}, k = {k}: {d_gpu:e}");
            assert!(
                rep.iterations.abs_diff(rep0.iterations) <= 2,
                "p = {p}, k = {k}: {} vs {} iterations",
                rep.iterations,
                rep0.iterations
            );
            assert!(rep.final_residual <= params.tolerance);
            // no overlap; the boundary bins after the interior ones, in row order; and (when
            // NCCL is there) the NCCL all-reduce over one rank: the same rows and partial sums
            // added in the same order, so bitwise the same iterates
            let mut variants = vec![
                DeviceDomainsOptions {
                    overlap: false,
                    force_nccl: false,
                    concurrent_boundary: false,
                    schedule: BinSchedule::Resident,
                    high_priority_exchange: false,
                    overlap_update: false,
                },
                DeviceDomainsOptions {
                    overlap: true,
                    force_nccl: false,
                    concurrent_boundary: false,
                    schedule: BinSchedule::PerBin,
                    high_priority_exchange: true,
                    overlap_update: true,
                },
            ];
            if nccl.is_ok() {
                // the all-reduce path, with x updated in the fused pass before it and
                // beside it (pcg_update_rs_partial + pcg_update_x)
                for overlap_update in [false, true] {
                    variants.push(DeviceDomainsOptions {
                        overlap: true,
                        force_nccl: true,
                        concurrent_boundary: true,
                        schedule: BinSchedule::Resident,
                        high_priority_exchange: false,
                        overlap_update,
                    });
                }
            }
            for opts in variants {
                let dv = DeviceDomains::new(&mats, &vec![&g; k], opts).unwrap();
                assert_eq!(dv.uses_nccl(), opts.force_nccl);
                let mut uv = Vec::new();
                let rv = dv.pcg(&lf, &lc, &params, &mut uv).unwrap();
                assert_eq!(rv.iterations, rep.iterations, "{opts:?}");
                assert_eq!(rv.history, rep.history, "{opts:?}");
                assert_eq!(uv, us, "{opts:?}");
            }
        }
    }
}

/// More devices than the machine has is a clear error naming how many there are.
#[test]
#[ignore = "needs a CUDA GPU"]
fn placement_on_a_missing_device_is_a_clear_error() {
    let Some(_g) = gpu() else { return };
    let count = Gpu::device_count().unwrap();
    let e = Gpu::new(count).unwrap_err().to_string();
    assert!(
        e.contains(&format!("device {count} requested, but there are {count}")),
        "{e}"
    );
}

/// Each domain's owned rows assembled on the device (count, pattern, element matrices,
/// per-node summation over the local cells, local columns) equal the CPU's
/// `assemble_domains`: bin offsets, row lengths and column indices exactly, values and
/// diagonal blocks to 1e-12 of the largest entry (the element matrices are computed in another
/// order on the device), for k = 1, 2, 4 domains (METIS, and RCB at k = 4), p = 1 and 2; the
/// device-assembled operator solves like the uploaded one (the same iterations).
#[test]
#[ignore = "needs a CUDA GPU"]
fn domain_assembly_matches_reference() {
    let Some(g) = gpu() else { return };
    let params = PcgParams {
        tolerance: 1e-10,
        ..Default::default()
    };
    for p in [1, 2] {
        // uneven: 9 x 5 x 4 boxes, bins with partly filled lanes
        let ho = HoMesh::new(tets([9, 5, 4]), p).unwrap();
        let (cons, f) = beam_system(&ho);
        for (k, partitioner) in [
            (1, Partitioner::Metis),
            (2, Partitioner::Metis),
            (4, Partitioner::Metis),
            (4, Partitioner::Rcb),
        ] {
            let lay = layout(&ho, k, partitioner);
            let host = domains(&ho, &lay);
            let dev = assemble_domains_gpu(&vec![&g; k], &ho, &lay, stiffness_op()).unwrap();
            assert_eq!(dev.len(), k);
            for (d, (h, a)) in host.iter().zip(&dev).enumerate() {
                let what = format!("p = {p}, k = {k} ({partitioner}), domain {d}");
                // the host checks of a domain matrix hold for the device one
                let m = a.matrix.download(&g).unwrap().matrix;
                let (hp, mp) = (h.matrix.pattern(), m.pattern());
                assert_eq!(mp.num_block_rows(), hp.num_block_rows(), "{what}");
                assert!(mp.num_block_rows() > 32, "{what}: rows span several bins");
                assert_eq!(mp.bin_offsets(), hp.bin_offsets(), "{what}");
                assert_eq!(mp.row_lengths(), hp.row_lengths(), "{what}");
                assert_eq!(mp.col_indices(), hp.col_indices(), "{what}");
                assert_eq!(a.matrix.num_interior, h.num_interior, "{what}");
                assert_eq!(a.matrix.num_halo, h.num_halo, "{what}");
                assert_eq!(a.matrix.halo, h.halo, "{what}");
                let scale = h.matrix.diag().iter().fold(0.0f64, |x, v| x.max(v.abs()));
                for (name, x, y) in [
                    ("values", m.values(), h.matrix.values()),
                    ("diagonal", m.diag(), h.matrix.diag()),
                ] {
                    assert_eq!(x.len(), y.len(), "{what}: {name}");
                    let err = x
                        .iter()
                        .zip(y)
                        .fold(0.0f64, |e, (a, b)| e.max((a - b).abs()));
                    assert!(
                        err <= 1e-12 * scale,
                        "{what}: {name} differ by {err:e} (scale {scale:e})"
                    );
                }
                assert!(a.device_ms > 0.0 && a.total_ms >= a.mesh_ms, "{what}");
                assert_eq!(
                    a.stats.block_nonzeros,
                    h.matrix.pattern().block_nonzeros(),
                    "{what}"
                );
            }
            // the device-assembled operator gives the iterates of the uploaded one
            let lc = scatter_constraints(&lay, &cons);
            let lf = lay.scatter(&f, 3);
            let up = DeviceDomains::new(&host, &vec![&g; k], Default::default()).unwrap();
            let mut uh = Vec::new();
            let rh = up.pcg(&lf, &lc, &params, &mut uh).unwrap();
            let mats = dev.into_iter().map(|a| a.matrix).collect();
            let dd = DeviceDomains::from_device(mats, &vec![&g; k], Default::default()).unwrap();
            let mut ud = Vec::new();
            let rd = dd.pcg(&lf, &lc, &params, &mut ud).unwrap();
            assert!(
                rd.iterations.abs_diff(rh.iterations) <= 2,
                "p = {p}, k = {k}: {} vs {} iterations",
                rd.iterations,
                rh.iterations
            );
            assert!(rel_diff(&ud, &uh) <= 1e-7, "p = {p}, k = {k}");
        }
    }
}

/// The partitioned device PCG with the domain AMG (one hierarchy per domain on its filtered
/// owned-owned block, set up on the device from the device-assembled matrix) against the CPU
/// `DomainAmg` PCG on the host-assembled domains: the same iteration count within 2 and the
/// same solution to the solver tolerance, for k = 1, 2, 4 (p = 1 and 2). The owned-owned
/// block extracted on the device equals the CPU's exactly (same matrix), and the CPU
/// hierarchies uploaded to the device (`DeviceDomainAmg::upload`) give the CPU iteration count
/// within 1.
#[test]
#[ignore = "needs a CUDA GPU"]
fn partitioned_amg_matches_reference() {
    let Some(g) = gpu() else { return };
    let ks = SolveKernels::new(&g).unwrap();
    let params = PcgParams {
        tolerance: 1e-10,
        ..Default::default()
    };
    let amg_params = AmgParams::default();
    for p in [1, 2] {
        let ho = HoMesh::new(tets([16, 5, 4]), p).unwrap();
        let (cons, f) = beam_system(&ho);
        let pos = ho.node_positions();
        for k in [1, 2, 4] {
            let lay = layout(&ho, k, Partitioner::Metis);
            let host = domains(&ho, &lay);
            let lc = scatter_constraints(&lay, &cons);
            let lf = lay.scatter(&f, 3);
            let lpos = lay.owned_positions(&pos);
            // CPU reference
            let op = PartitionedOperator::new(host.clone(), InProcess).unwrap();
            let amg = DomainAmg::setup(&op, &lc.fixed, &lpos, &amg_params).unwrap();
            let mut u0 = Vec::new();
            let r0 = pcg_with(&op, &amg, &lf, &lc, &params, &mut u0, &mut |_, _| {}).unwrap();
            // device: assembled there, hierarchies set up there
            let dev = assemble_domains_gpu(&vec![&g; k], &ho, &lay, stiffness_op()).unwrap();
            let mats: Vec<_> = dev.into_iter().map(|a| a.matrix).collect();
            for (d, (m, h)) in mats.iter().zip(&host).enumerate() {
                // with the device matrix downloaded, the extraction is exact
                let o = lay.offsets[d];
                let fx = &lc.fixed[3 * o..3 * lay.offsets[d + 1]];
                let a = owned_filtered_copy(&ks, &m.matrix, fx)
                    .unwrap()
                    .download(&g)
                    .unwrap();
                let hm = m.download(&g).unwrap();
                assert_eq!(hm.halo, h.halo);
                let b = hm.owned_block_filtered(fx).unwrap();
                assert_eq!(a.row_ptr, b.row_ptr, "p = {p}, k = {k}, domain {d}");
                assert_eq!(a.cols, b.cols, "p = {p}, k = {k}, domain {d}");
                assert_eq!(a.vals, b.vals, "p = {p}, k = {k}, domain {d}");
            }
            let dd = DeviceDomains::from_device(mats, &vec![&g; k], Default::default()).unwrap();
            let damg = DeviceDomainAmg::setup(&dd, &lc.fixed, &lpos, &amg_params).unwrap();
            assert_eq!(damg.hierarchies().len(), k);
            let mut us = Vec::new();
            let rep = dd
                .pcg_with(&lf, &lc, &params, DomainPreconditioner::Amg(&damg), &mut us)
                .unwrap();
            let diff = rel_diff(&us, &u0);
            eprintln!(
                "domain AMG p = {p}, k = {k}: device {} iterations, CPU {} (levels {:?}), |u - u_cpu| / |u_cpu| = {diff:.1e}",
                rep.iterations,
                r0.iterations,
                damg.hierarchies().iter().map(|h| h.num_levels()).collect::<Vec<_>>()
            );
            assert!(
                rep.iterations.abs_diff(r0.iterations) <= 2,
                "p = {p}, k = {k}: {} vs {} iterations",
                rep.iterations,
                r0.iterations
            );
            assert!(diff <= 1e-7, "p = {p}, k = {k}: {diff:e}");
            assert!(rep.final_residual <= params.tolerance);
            // the CPU hierarchies on the device: the CPU iterates up to rounding
            let up = DeviceDomainAmg::upload(&dd, &amg).unwrap();
            let mut uu = Vec::new();
            let ru = dd
                .pcg_with(&lf, &lc, &params, DomainPreconditioner::Amg(&up), &mut uu)
                .unwrap();
            assert!(
                ru.iterations.abs_diff(r0.iterations) <= 1,
                "p = {p}, k = {k}: uploaded {} vs {} iterations",
                ru.iterations,
                r0.iterations
            );
            assert!(rel_diff(&uu, &u0) <= 1e-7, "p = {p}, k = {k}");
        }
    }
}

/// `k` domains placed round-robin on two GPUs (halos between the devices by NCCL send/receive,
/// dot products by an NCCL all-reduce) give exactly the iterates of the same `k` domains on one
/// GPU: the same partitioned SpMV bit for bit, and for the block-Jacobi PCG and the domain-AMG
/// PCG the same iteration count, residual history and solution bit for bit (the partial sums
/// are added in domain order wherever the domains are). Also equal to the single-domain solve
/// to the solver tolerance. Needs two CUDA devices and NCCL; skips with a message otherwise.
#[test]
#[ignore = "needs two CUDA GPUs"]
fn multi_device_solve_matches_one_device() {
    let Some(g0) = gpu() else { return };
    let count = Gpu::device_count().unwrap();
    if count < 2 {
        eprintln!("skipped: {count} CUDA device(s); this test needs two");
        return;
    }
    if let Err(e) = tessera_gpu::NcclLibrary::load() {
        eprintln!("skipped: {e}");
        return;
    }
    let g1 = Gpu::new(1).unwrap();
    eprintln!("second device {}", g1.describe());
    let params = PcgParams {
        tolerance: 1e-10,
        ..Default::default()
    };
    let mut rng = ChaCha8Rng::seed_from_u64(2122);
    for p in [1, 2] {
        let ho = HoMesh::new(tets([14, 4, 4]), p).unwrap();
        let kg = global(&ho);
        let (cons, f) = beam_system(&ho);
        let mut u0 = Vec::new();
        let rep0 = pcg(&kg, &f, &cons, &params, &mut u0).unwrap();
        let pos = ho.node_positions();
        for k in [2, 3, 4] {
            let lay = layout(&ho, k, Partitioner::Metis);
            let mats = domains(&ho, &lay);
            let lc = scatter_constraints(&lay, &cons);
            let lf = lay.scatter(&f, 3);
            let one = DeviceDomains::new(&mats, &vec![&g0; k], Default::default()).unwrap();
            let place: Vec<&Gpu> = (0..k).map(|d| if d % 2 == 0 { &g0 } else { &g1 }).collect();
            let two = DeviceDomains::new(&mats, &place, Default::default()).unwrap();
            assert_eq!(two.num_devices(), 2);
            assert!(two.uses_nccl());
            assert!(two.remote_bytes_per_apply() > 0);
            assert_eq!(two.placement(), (0..k).map(|d| d % 2).collect::<Vec<_>>());
            // the SpMV, bit for bit
            let n = ho.num_nodes() * 3;
            let x: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
            let xl = lay.scatter(&x, 3);
            let mut y1 = one.zeros().unwrap();
            one.apply(&one.upload(&xl).unwrap(), &mut y1).unwrap();
            let mut y2 = two.zeros().unwrap();
            two.apply(&two.upload(&xl).unwrap(), &mut y2).unwrap();
            assert_eq!(
                one.download(&y1).unwrap(),
                two.download(&y2).unwrap(),
                "p = {p}, k = {k}: SpMV"
            );
            // block-Jacobi PCG
            let (mut u1, mut u2) = (Vec::new(), Vec::new());
            let r1 = one.pcg(&lf, &lc, &params, &mut u1).unwrap();
            let r2 = two.pcg(&lf, &lc, &params, &mut u2).unwrap();
            eprintln!(
                "p = {p}, k = {k}: block Jacobi {} iterations on two devices ({} on one, {} \
                 single-domain CPU), halo {} bytes per apply, {} between the devices",
                r2.iterations,
                r1.iterations,
                rep0.iterations,
                two.halo_bytes_per_apply(),
                two.remote_bytes_per_apply()
            );
            assert_eq!(r2.iterations, r1.iterations, "p = {p}, k = {k}");
            assert_eq!(r2.history, r1.history, "p = {p}, k = {k}");
            assert_eq!(u2, u1, "p = {p}, k = {k}");
            let u = lay.gather(&u2, 3);
            assert!(rel_diff(&u, &u0) <= 1e-7, "p = {p}, k = {k}");
            assert!(r2.iterations.abs_diff(rep0.iterations) <= 2);
            // domain AMG, hierarchies set up on each domain's device
            let lpos = lay.owned_positions(&pos);
            let amg_params = AmgParams::default();
            let a1 = DeviceDomainAmg::setup(&one, &lc.fixed, &lpos, &amg_params).unwrap();
            let a2 = DeviceDomainAmg::setup(&two, &lc.fixed, &lpos, &amg_params).unwrap();
            let (mut v1, mut v2) = (Vec::new(), Vec::new());
            let s1 = one
                .pcg_with(&lf, &lc, &params, DomainPreconditioner::Amg(&a1), &mut v1)
                .unwrap();
            let s2 = two
                .pcg_with(&lf, &lc, &params, DomainPreconditioner::Amg(&a2), &mut v2)
                .unwrap();
            eprintln!(
                "p = {p}, k = {k}: domain AMG {} iterations on two devices, {} on one",
                s2.iterations, s1.iterations
            );
            assert_eq!(s2.iterations, s1.iterations, "p = {p}, k = {k}: AMG");
            assert_eq!(s2.history, s1.history, "p = {p}, k = {k}: AMG");
            assert_eq!(v2, v1, "p = {p}, k = {k}: AMG");
            assert!(
                rel_diff(&lay.gather(&v2, 3), &u0) <= 1e-7,
                "p = {p}, k = {k}"
            );
        }
    }
}
