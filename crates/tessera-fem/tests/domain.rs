//! Domain decomposition (dissertation §7.1.2): ownership and halo invariants, per-domain
//! assembly against the global Bin-BCSR* matrix, the partitioned SpMV and the partitioned
//! PCG against the single-domain solve.

mod domain_common;
use domain_common::{
    beam_system, global, layout, rel_diff, scatter_constraints, stiffness_op, tets,
};
use std::collections::BTreeSet;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tessera_core::Par;
use tessera_fem::domain::{assemble_domains, DomainLayout};
use tessera_fem::nodes::HoMesh;
use tessera_mesh::partition::{partition_cells, PartitionParams, Partitioner};
use tessera_mesh::MeshError;
use tessera_solve::{
    pcg, pcg_with, AmgParams, BlockJacobi, BlockOperator, CoarseCombination, Constraints,
    DomainAmg, InProcess, PartitionedOperator, PcgParams, Preconditioner, TwoLevelDomainAmg,
};

fn operator(ho: &HoMesh, lay: &DomainLayout) -> PartitionedOperator<InProcess> {
    let doms = assemble_domains(ho, lay, stiffness_op(), Par::Rayon).unwrap();
    PartitionedOperator::new(doms.into_iter().map(|d| d.matrix).collect(), InProcess).unwrap()
}

#[test]
fn ownership_and_halo_invariants() {
    for p in [1, 2, 3] {
        let ho = HoMesh::new(tets([7, 5, 3]), p).unwrap();
        let k_glob = global(&ho);
        for (k, partitioner) in [(3, Partitioner::Metis), (5, Partitioner::Rcb)] {
            let lay = layout(&ho, k, partitioner);
            // every node owned exactly once
            let mut seen = vec![0u8; ho.num_nodes()];
            for (d, dm) in lay.domains.iter().enumerate() {
                for &g in dm.owned_global() {
                    seen[g as usize] += 1;
                    assert_eq!(lay.node_owner[g as usize], d as u32);
                }
            }
            assert!(seen.iter().all(|&s| s == 1), "p = {p}, k = {k}");
            let report = lay.partition.report(ho.mesh(), p);
            for (d, dm) in lay.domains.iter().enumerate() {
                // halo = exactly the off-domain columns of the owned rows
                let mut want = BTreeSet::new();
                let mut has_halo_col = BTreeSet::new();
                for &g in dm.owned_global() {
                    for j in k_glob.pattern().row_cols(g as usize) {
                        if lay.node_owner[j as usize] != d as u32 {
                            want.insert(j);
                            has_halo_col.insert(g);
                        }
                    }
                }
                let got: BTreeSet<u32> = dm.halo_global().iter().copied().collect();
                assert_eq!(got.len(), dm.num_halo(), "halo nodes are distinct");
                assert_eq!(got, want, "p = {p}, k = {k}, domain {d}");
                // interior rows first, exactly those without a halo column
                for (l, &g) in dm.owned_global().iter().enumerate() {
                    assert_eq!(l >= dm.num_interior, has_halo_col.contains(&g));
                }
                // the simplex-level report agrees with the node-level layout
                assert_eq!(report.owned_nodes[d], dm.num_owned as u64);
                assert_eq!(report.halo_nodes[d], dm.num_halo() as u64);
                assert_eq!(report.local_cells[d], dm.cells.len() as u64);
                // send lists: what each neighbour expects, in its order
                for (t, &j) in dm.halo.neighbours.iter().enumerate() {
                    let from = &lay.domains[j as usize];
                    let s = from.halo.neighbours.binary_search(&(d as u32)).unwrap();
                    let sent: Vec<u32> = from.halo.send_nodes[from.halo.send_offsets[s] as usize
                        ..from.halo.send_offsets[s + 1] as usize]
                        .iter()
                        .map(|&l| from.local_to_global[l as usize])
                        .collect();
                    let recv = &dm.halo_global()
                        [dm.halo.recv_offsets[t] as usize..dm.halo.recv_offsets[t + 1] as usize];
                    assert_eq!(sent, recv);
                }
            }
        }
    }
}

#[test]
fn domain_rows_equal_global_rows() {
    for p in [1, 2] {
        let ho = HoMesh::new(tets([6, 4, 3]), p).unwrap();
        let kg = global(&ho);
        let lay = layout(&ho, 4, Partitioner::Metis);
        let doms = assemble_domains(&ho, &lay, stiffness_op(), Par::Seq).unwrap();
        for (dm, da) in lay.domains.iter().zip(&doms) {
            let m = &da.matrix.matrix;
            for (li, &g) in dm.owned_global().iter().enumerate() {
                let gcols: Vec<u32> = kg.pattern().row_cols(g as usize).collect();
                let lcols: Vec<u32> = m
                    .pattern()
                    .row_cols(li)
                    .map(|l| dm.local_to_global[l as usize])
                    .collect();
                let mut sorted = lcols.clone();
                sorted.sort_unstable();
                assert_eq!(sorted, gcols, "row {g}");
                assert_eq!(m.block(li, li), kg.block(g as usize, g as usize));
                for (l, &gj) in m.pattern().row_cols(li).zip(&lcols) {
                    // the same contributions in the same order: bit for bit
                    assert_eq!(m.block(li, l as usize), kg.block(g as usize, gj as usize));
                }
            }
        }
    }
}

#[test]
fn partitioned_spmv_matches_global() {
    let mut rng = ChaCha8Rng::seed_from_u64(21);
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
                let op = operator(&ho, &lay);
                assert_eq!(op.num_dofs(), n);
                let xs = lay.scatter(&x, 3);
                let mut ys = vec![0.0; n];
                op.apply(&xs, &mut ys);
                let yg = lay.gather(&ys, 3);
                let err = y
                    .iter()
                    .zip(&yg)
                    .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
                // f64 round-off of a row sum in a different column order
                assert!(
                    err <= 1e-13 * scale,
                    "p = {p}, k = {k}, {partitioner}: {err:e} vs {scale:e}"
                );
                // the distributed dot product is the global one to round-off
                let d1 = op.dot(&xs, &ys);
                let d0 = tessera_solve::dot(&x, &y);
                assert!((d1 - d0).abs() <= 1e-12 * d0.abs().max(1.0));
                if k == 1 {
                    assert_eq!(op.halo_bytes_per_apply(), 0);
                } else {
                    assert!(op.halo_bytes_per_apply() > 0);
                }
            }
        }
    }
}

#[test]
fn partitioned_solve_matches_reference() {
    let params = PcgParams {
        tolerance: 1e-10,
        ..Default::default()
    };
    for p in [1, 2] {
        let ho = HoMesh::new(tets([12, 3, 3]), p).unwrap();
        let kg = global(&ho);
        let (cons, f) = beam_system(&ho);
        let mut u0 = Vec::new();
        let rep0 = pcg(&kg, &f, &cons, &params, &mut u0).unwrap();
        let norm0 = u0.iter().map(|v| v * v).sum::<f64>().sqrt();
        for k in [1, 2, 4, 8] {
            let lay = layout(&ho, k, Partitioner::Metis);
            let op = operator(&ho, &lay);
            let lc = scatter_constraints(&lay, &cons);
            let lf = lay.scatter(&f, 3);
            let mut us = Vec::new();
            let rep = pcg(&op, &lf, &lc, &params, &mut us).unwrap();
            let u = lay.gather(&us, 3);
            let diff = u
                .iter()
                .zip(&u0)
                .map(|(a, b)| (a - b) * (a - b))
                .sum::<f64>()
                .sqrt();
            // both solves stop at a relative residual of 1e-10; the solutions agree to far
            // better than the condition number times that would allow in the worst case
            eprintln!(
                "block Jacobi p = {p}, k = {k}: {} iterations (one domain: {}), |u - u0| / |u0| = {:.1e}",
                rep.iterations,
                rep0.iterations,
                diff / norm0
            );
            assert!(
                diff <= 1e-7 * norm0,
                "p = {p}, k = {k}: {diff:e} / {norm0:e}"
            );
            assert!(
                rep.iterations.abs_diff(rep0.iterations) <= 2,
                "p = {p}, k = {k}: {} vs {} iterations",
                rep.iterations,
                rep0.iterations
            );
        }
    }
}

#[test]
fn domain_amg_preconditions_partitioned_pcg() {
    let params = PcgParams {
        tolerance: 1e-8,
        ..Default::default()
    };
    let ho = HoMesh::new(tets([12, 4, 4]), 1).unwrap();
    let kg = global(&ho);
    let (cons, f) = beam_system(&ho);
    let mut u0 = Vec::new();
    let rep_bj = pcg(&kg, &f, &cons, &params, &mut u0).unwrap();
    let norm0 = u0.iter().map(|v| v * v).sum::<f64>().sqrt();
    let pos = ho.node_positions();
    let mut iters = Vec::new();
    for k in [1, 2, 4] {
        let lay = layout(&ho, k, Partitioner::Metis);
        let op = operator(&ho, &lay);
        let lc = scatter_constraints(&lay, &cons);
        let lf = lay.scatter(&f, 3);
        let amg = DomainAmg::setup(
            &op,
            &lc.fixed,
            &lay.owned_positions(&pos),
            &AmgParams::default(),
        )
        .unwrap();
        let mut us = Vec::new();
        let rep = pcg_with(&op, &amg, &lf, &lc, &params, &mut us, &mut |_, _| {}).unwrap();
        let u = lay.gather(&us, 3);
        let diff = u
            .iter()
            .zip(&u0)
            .map(|(a, b)| (a - b) * (a - b))
            .sum::<f64>()
            .sqrt();
        eprintln!(
            "domain AMG k = {k}: {} iterations (global block Jacobi: {})",
            rep.iterations, rep_bj.iterations
        );
        assert!(diff <= 1e-5 * norm0, "k = {k}: {diff:e}");
        iters.push(rep.iterations);
    }
    // one domain is the global AMG: far fewer iterations than block Jacobi
    assert!(
        iters[0] * 3 < rep_bj.iterations,
        "{iters:?} vs {}",
        rep_bj.iterations
    );
    // block Jacobi on the partitioned operator is identical to the global one
    let lay = layout(&ho, 4, Partitioner::Rcb);
    let op = operator(&ho, &lay);
    let bj = BlockJacobi::new(&op, &scatter_constraints(&lay, &cons)).unwrap();
    let bj0 = BlockJacobi::new(&kg, &cons).unwrap();
    assert_eq!(lay.gather(bj.inverses(), 9), bj0.inverses());
}

/// AMG knobs for the small test meshes: domains of a few hundred DOFs still aggregate once,
/// so the coarse space is made of aggregates (with the default 512 DOFs a domain of the test
/// meshes would put all its DOFs on the coarse level).
fn small_amg() -> AmgParams {
    AmgParams {
        coarse_size: 48,
        ..Default::default()
    }
}

/// Partitioned PCG with the one-level (`None`) or two-level domain AMG: iterations and the
/// gathered solution.
fn domain_amg_solve(
    ho: &HoMesh,
    k: usize,
    cons: &Constraints,
    f: &[f64],
    combination: Option<CoarseCombination>,
    params: &PcgParams,
) -> (usize, Vec<f64>, usize) {
    let lay = layout(ho, k, Partitioner::Metis);
    let op = operator(ho, &lay);
    let lc = scatter_constraints(&lay, cons);
    let lf = lay.scatter(f, 3);
    let pos = lay.owned_positions(&ho.node_positions());
    let mut us = Vec::new();
    let (rep, nc) = match combination {
        None => {
            let m = DomainAmg::setup(&op, &lc.fixed, &pos, &small_amg()).unwrap();
            let rep = pcg_with(&op, &m, &lf, &lc, params, &mut us, &mut |_, _| {}).unwrap();
            (rep, 0)
        }
        Some(c) => {
            let m = TwoLevelDomainAmg::setup(&op, &lc.fixed, &pos, &small_amg(), c).unwrap();
            assert_eq!(m.coarse_dofs(), m.stats().coarse_dofs());
            let rep = pcg_with(&op, &m, &lf, &lc, params, &mut us, &mut |_, _| {}).unwrap();
            (rep, m.coarse_dofs())
        }
    };
    (rep.iterations, lay.gather(&us, 3), nc)
}

#[test]
fn partitioned_solve_matches_reference_two_level_amg() {
    let params = PcgParams {
        tolerance: 1e-10,
        ..Default::default()
    };
    for p in [1, 2] {
        let ho = HoMesh::new(tets([12, 3, 3]), p).unwrap();
        let kg = global(&ho);
        let (cons, f) = beam_system(&ho);
        let mut u0 = Vec::new();
        pcg(&kg, &f, &cons, &params, &mut u0).unwrap();
        for k in [1, 2, 4, 8] {
            for c in [CoarseCombination::Hybrid, CoarseCombination::Additive] {
                let (it, u, nc) = domain_amg_solve(&ho, k, &cons, &f, Some(c), &params);
                let e = rel_diff(&u, &u0);
                eprintln!(
                    "two-level ({}) p = {p}, k = {k}: {it} iterations, {nc} coarse DOFs, |u - u0| / |u0| = {e:.1e}",
                    c.name()
                );
                assert!(e <= 1e-7, "p = {p}, k = {k}, {}: {e:e}", c.name());
                assert!(nc > 0 && nc < 3 * ho.num_nodes(), "{nc} coarse DOFs");
            }
        }
    }
}

#[test]
fn two_level_iterations_do_not_grow_with_domains() {
    // a 4:1 beam, 1225 nodes: at k = 8 every domain still forms aggregates
    let params = PcgParams {
        tolerance: 1e-8,
        ..Default::default()
    };
    let ho = HoMesh::new(tets([24, 6, 6]), 1).unwrap();
    let (cons, f) = beam_system(&ho);
    let mut u0 = Vec::new();
    pcg(&global(&ho), &f, &cons, &params, &mut u0).unwrap();
    let mut two = Vec::new();
    let mut one = Vec::new();
    for k in [1, 2, 4, 8] {
        let (it1, u1, _) = domain_amg_solve(&ho, k, &cons, &f, None, &params);
        let (it2, u2, nc) =
            domain_amg_solve(&ho, k, &cons, &f, Some(CoarseCombination::Hybrid), &params);
        let (it3, u3, _) = domain_amg_solve(
            &ho,
            k,
            &cons,
            &f,
            Some(CoarseCombination::Additive),
            &params,
        );
        eprintln!(
            "k = {k}: one-level {it1}, two-level hybrid {it2}, additive {it3} iterations ({nc} coarse DOFs)"
        );
        for u in [&u1, &u2, &u3] {
            assert!(rel_diff(u, &u0) <= 1e-5, "k = {k}");
        }
        one.push(it1);
        two.push((it2, it3));
    }
    // the stated bounds (measured: hybrid 15, 26, 27, 34; additive 23, 38, 40, 51; one-level
    // 19, 83, 132, 184): from one to eight domains the two-level hybrid needs at most 3x + 5
    // the iterations of one domain, and from two to eight domains (four times the interface)
    // at most 1.5x + 5; the additive form at most 3x + 5 from one to eight
    let (h1, a1) = two[0];
    let (h2, _) = two[1];
    let (h8, a8) = two[3];
    assert!(h8 <= 3 * h1 + 5, "hybrid: {two:?}");
    assert!(2 * h8 <= 3 * h2 + 10, "hybrid: {two:?}");
    assert!(a8 <= 3 * a1 + 5, "additive: {two:?}");
    // the coarse correction is what keeps it there: the one-level method breaks the same
    // bound, and needs at least three times the two-level iterations at k = 8
    assert!(one[3] > 3 * one[0] + 5, "one-level {one:?}");
    assert!(one[3] >= 3 * h8, "one-level {one:?} vs two-level {two:?}");
}

#[test]
fn two_level_preconditioner_is_symmetric_positive_definite() {
    let mut rng = ChaCha8Rng::seed_from_u64(2121);
    for p in [1, 2] {
        let ho = HoMesh::new(tets([10, 4, 3]), p).unwrap();
        let (cons, _) = beam_system(&ho);
        for k in [1, 3, 6] {
            let lay = layout(&ho, k, Partitioner::Metis);
            let op = operator(&ho, &lay);
            let lc = scatter_constraints(&lay, &cons);
            let pos = lay.owned_positions(&ho.node_positions());
            let n = op.num_dofs();
            let random = |rng: &mut ChaCha8Rng| -> Vec<f64> {
                (0..n)
                    .map(|i| {
                        if lc.fixed[i] {
                            0.0
                        } else {
                            rng.random_range(-1.0..1.0)
                        }
                    })
                    .collect()
            };
            for c in [CoarseCombination::Hybrid, CoarseCombination::Additive] {
                let m = TwoLevelDomainAmg::setup(&op, &lc.fixed, &pos, &small_amg(), c).unwrap();
                for _ in 0..3 {
                    let (x, y) = (random(&mut rng), random(&mut rng));
                    let (mut mx, mut my) = (vec![0.0; n], vec![0.0; n]);
                    m.apply(&x, &mut mx);
                    m.apply(&y, &mut my);
                    let xmy = tessera_solve::dot(&x, &my);
                    let ymx = tessera_solve::dot(&y, &mx);
                    let scale = (tessera_solve::dot(&x, &mx) * tessera_solve::dot(&y, &my)).sqrt();
                    assert!(
                        (xmy - ymx).abs() <= 1e-10 * scale,
                        "p = {p}, k = {k}, {}: {xmy:e} vs {ymx:e}",
                        c.name()
                    );
                    assert!(tessera_solve::dot(&x, &mx) > 0.0);
                    // constrained DOFs stay zero
                    assert!(mx.iter().zip(&lc.fixed).all(|(v, &f)| !f || *v == 0.0));
                }
                // the same result on a second application (deterministic, scratch reused)
                let x = random(&mut rng);
                let (mut a, mut b) = (vec![0.0; n], vec![0.0; n]);
                m.apply(&x, &mut a);
                m.apply(&x, &mut b);
                assert_eq!(a, b);
            }
        }
    }
}

#[test]
fn domain_count_errors_are_clear() {
    let ho = HoMesh::new(tets([2, 1, 1]), 1).unwrap();
    let n = ho.num_cells();
    for k in [0, n + 1] {
        let e = partition_cells(
            ho.mesh(),
            &PartitionParams {
                domains: k,
                order: 1,
                partitioner: Partitioner::Rcb,
            },
        )
        .unwrap_err();
        assert!(matches!(e, MeshError::DomainCount { .. }));
        assert!(e.to_string().contains("domains"), "{e}");
    }
    let e = partition_cells(
        ho.mesh(),
        &PartitionParams {
            domains: n,
            order: 1,
            partitioner: Partitioner::Metis,
        },
    )
    .unwrap_err();
    assert!(matches!(e, MeshError::EmptyDomain { .. }), "{e}");
    assert!(e.to_string().contains("use fewer domains"), "{e}");
}

/// The owned rows of a domain are ordered by descending length (ties ascending global node)
/// within windows of `ROW_WINDOW` rows of the ascending interior and boundary runs: each
/// window holds the same nodes as the ascending order's window, and the assembled domain
/// matrices carry less bin padding than the same rows in mesh order (p = 2 mixes vertex and
/// edge rows of different lengths).
#[test]
fn owned_rows_are_ordered_by_length_within_windows() {
    use tessera_fem::domain::ROW_WINDOW;
    let ho = HoMesh::new(tets([26, 12, 10]), 2).unwrap();
    let len = tessera_fem::count::row_counts(&ho, Par::Rayon);
    let kg = global(&ho);
    for k in [1, 2, 3] {
        let lay = layout(&ho, k, Partitioner::Metis);
        let mut padding = 0;
        for (d, dm) in lay.domains.iter().enumerate() {
            let owned = dm.owned_global();
            assert!(
                owned.len() > 2 * ROW_WINDOW,
                "k = {k}: several windows per domain"
            );
            for run in [&owned[..dm.num_interior], &owned[dm.num_interior..]] {
                let mut asc = run.to_vec();
                asc.sort_unstable();
                for (w, a) in run.chunks(ROW_WINDOW).zip(asc.chunks(ROW_WINDOW)) {
                    let mut ws = w.to_vec();
                    ws.sort_unstable();
                    assert_eq!(ws, a, "k = {k}, domain {d}: a window keeps its nodes");
                    assert!(
                        w.windows(2).all(|x| {
                            let (a, b) = (len[x[0] as usize], len[x[1] as usize]);
                            a > b || (a == b && x[0] < x[1])
                        }),
                        "k = {k}, domain {d}: descending length, ties ascending"
                    );
                }
            }
        }
        for da in assemble_domains(&ho, &lay, stiffness_op(), Par::Rayon).unwrap() {
            padding += da.stats.padding_blocks;
        }
        assert!(
            4 * padding < kg.pattern().padding_blocks(),
            "k = {k}: {padding} padding blocks in the domains vs {} in mesh order",
            kg.pattern().padding_blocks()
        );
    }
}
