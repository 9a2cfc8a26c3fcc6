//! Domain decomposition on a GPU (dissertation §7.1.2): `k` domains on one device against the
//! single-domain solve (CPU reference and the one-domain GPU PCG), the partitioned device SpMV
//! against the global one, NCCL's one-rank path, and the errors of a device placement. All
//! tests need a CUDA GPU (`#[ignore]`d) and skip with a message without one.

mod domain_common;
use domain_common::{global, layout, stiffness_op, tets};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tessera_core::Par;
use tessera_fem::domain::{assemble_domains, DomainLayout};
use tessera_fem::nodes::HoMesh;
use tessera_gpu::Gpu;
use tessera_mesh::partition::Partitioner;
use tessera_solve::cuda::{
    pcg_gpu, DeviceBinBcsr, DeviceDomains, DeviceDomainsOptions, SolveKernels,
};
use tessera_solve::{pcg, BlockOperator, Constraints, DomainMatrix, PcgParams};

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

/// A beam fixed at x = 0 with a downward force on the nodes at x = L.
fn beam_system(ho: &HoMesh) -> (Constraints, Vec<f64>) {
    let pos = ho.node_positions();
    let n = ho.num_nodes();
    let l = pos.iter().fold(0.0f64, |m, p| m.max(p[0]));
    let mut cons = Constraints::none(3 * n);
    let mut f = vec![0.0; 3 * n];
    for (i, q) in pos.iter().enumerate() {
        if q[0] < 1e-9 {
            for c in 0..3 {
                cons.fix(i, 3, c, 0.0);
            }
        }
        if q[0] > l - 1e-9 {
            f[3 * i + 2] = -1.0;
        }
    }
    (cons, f)
}

fn rel_diff(a: &[f64], b: &[f64]) -> f64 {
    let d = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y) * (x - y))
        .sum::<f64>()
        .sqrt();
    let n = b.iter().map(|v| v * v).sum::<f64>().sqrt();
    d / n
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
                for overlap in [true, false] {
                    let opts = DeviceDomainsOptions {
                        overlap,
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
                        "p = {p}, k = {k}, {partitioner}, overlap {overlap}: {err:e} vs {scale:e}"
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
            let lc = Constraints {
                fixed: lay.scatter(&cons.fixed, 3),
                values: lay.scatter(&cons.values, 3),
            };
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
            // no overlap, and (when NCCL is there) the NCCL all-reduce over one rank: the
            // same partial sums added in the same order, so bitwise the same iterates
            let mut variants = vec![DeviceDomainsOptions {
                overlap: false,
                force_nccl: false,
            }];
            if nccl.is_ok() {
                variants.push(DeviceDomainsOptions {
                    overlap: true,
                    force_nccl: true,
                });
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
