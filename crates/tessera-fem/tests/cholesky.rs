//! The direct solvers: faer's sparse Cholesky (what `method = "cholesky"` runs) and the
//! independent envelope Cholesky agree on assembled stiffness matrices, their solutions
//! satisfy the reduced system, and an under-constrained system is an error in both.

use tessera_fem::assemble::assemble_stiffness;
use tessera_fem::material::Material;
use tessera_fem::nodes::HoMesh;
use tessera_mesh::generate::{box_mesh, BoxKind};
use tessera_mesh::simplex::SimplexMesh;
use tessera_solve::cholesky::{solve_constrained, solve_constrained_envelope};
use tessera_solve::{BlockOperator, Constraints, SolveError};

fn case(
    p: usize,
    comps: &[usize],
) -> (tessera_sparse::binbcsr::BinBcsr<f64>, Vec<f64>, Constraints) {
    let sm = SimplexMesh::from_poly(&box_mesh(BoxKind::Tet, [4, 2, 2], [4.0, 1.0, 1.0])).unwrap();
    let ho = HoMesh::new(sm, p).unwrap();
    let k = assemble_stiffness::<f64>(&ho, &Material::new(1000.0, 0.3, 0.0), &Default::default())
        .unwrap()
        .matrix;
    let x = ho.node_positions();
    let mut cons = Constraints::none(x.len() * 3);
    for (i, xi) in x.iter().enumerate() {
        if xi[0].abs() < 1e-12 {
            for &c in comps {
                // a prescribed, non-zero displacement too
                cons.fix(i, 3, c, 1e-3 * (c as f64 + 1.0) * xi[1]);
            }
        }
    }
    let f: Vec<f64> = (0..x.len() * 3)
        .map(|i| ((i * 7919) % 101) as f64 / 101.0 - 0.5)
        .collect();
    (k, f, cons)
}

#[test]
fn faer_and_envelope_cholesky_agree() {
    for p in 1..=3 {
        let (k, f, cons) = case(p, &[0, 1, 2]);
        let a = solve_constrained(&k, &f, &cons).unwrap();
        let b = solve_constrained_envelope(&k, &f, &cons).unwrap();
        let num: f64 = a
            .iter()
            .zip(&b)
            .map(|(x, y)| (x - y).powi(2))
            .sum::<f64>()
            .sqrt();
        let den: f64 = b.iter().map(|y| y * y).sum::<f64>().sqrt();
        assert!(
            num <= 1e-10 * den,
            "p = {p}: relative difference {:e}",
            num / den
        );
        // prescribed values kept, free rows satisfied
        let mut y = vec![0.0; f.len()];
        k.apply(&a, &mut y);
        let mut r = 0.0f64;
        let mut s = 0.0f64;
        for i in 0..f.len() {
            if cons.fixed[i] {
                assert_eq!(a[i], cons.values[i]);
            } else {
                r += (y[i] - f[i]).powi(2);
                s += f[i] * f[i];
            }
        }
        assert!(
            r.sqrt() <= 1e-10 * s.sqrt(),
            "p = {p}: residual {:e}",
            (r / s).sqrt()
        );
    }
}

#[test]
fn under_constrained_systems_are_errors_in_both() {
    // only u_x fixed on x = 0: translations y, z and the rotation about x are free
    let (k, f, cons) = case(1, &[0]);
    assert!(matches!(
        solve_constrained_envelope(&k, &f, &cons),
        Err(SolveError::NotPositiveDefinite { .. })
    ));
    assert!(matches!(
        solve_constrained(&k, &f, &cons),
        Err(SolveError::NotPositiveDefinite { .. })
    ));
    let none = Constraints::none(f.len());
    assert!(matches!(
        solve_constrained(&k, &f, &none),
        Err(SolveError::Unconstrained)
    ));
}
