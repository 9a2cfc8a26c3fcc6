//! Accuracy of the cut-cell discretization (dissertation Eq. 6.3) on manufactured problems
//! with known solutions (potential flow around a disc / ball plus a radial term, zero normal
//! derivative on the obstacle): at least first order in the max norm and second order in L2
//! away from the obstacle, observed between successive grids.

use tessera_core::Par;
use tessera_flow::poisson::manufactured::{solve_case, Case};
use tessera_flow::poisson::MgParams;

fn orders(case: Case, sizes: &[usize]) {
    let params = MgParams {
        tolerance: 1e-11,
        max_iterations: 60,
        ..Default::default()
    };
    let r: Vec<_> = sizes
        .iter()
        .map(|&n| solve_case(case, n, params, Par::auto()).unwrap())
        .collect();
    for w in r.windows(2).zip(sizes.windows(2)) {
        let (ab, n) = w;
        let (a, b) = (&ab[0], &ab[1]);
        assert!(a.report.converged && b.report.converged);
        let om = (a.errors.max / b.errors.max).log2();
        let ol = (a.errors.l2_interior / b.errors.l2_interior).log2();
        eprintln!(
            "{} {}->{}: max {:.3e}->{:.3e} (order {om:.2}), L2 interior {:.3e}->{:.3e} (order {ol:.2})",
            case.name(),
            n[0],
            n[1],
            a.errors.max,
            b.errors.max,
            a.errors.l2_interior,
            b.errors.l2_interior
        );
        assert!(om >= 0.95, "{}: max-norm order {om:.2}", case.name());
        assert!(ol >= 1.9, "{}: interior L2 order {ol:.2}", case.name());
    }
}

#[test]
fn circle_converges_first_order_max_second_order_l2() {
    orders(Case::Circle, &[32, 64, 128]);
}

#[test]
fn sphere_converges_first_order_max_second_order_l2() {
    orders(Case::Sphere, &[16, 32]);
}
