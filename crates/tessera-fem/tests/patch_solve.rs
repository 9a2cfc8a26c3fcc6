//! Patch test of the static solve (issue 6): uniaxial tension `σ_xx = 1` of a unit cube with
//! symmetry constraints (`u_x = 0` on `x = 0`, `u_y = 0` on `y = 0`, `u_z = 0` on `z = 0`)
//! and the traction `(1, 0, 0)` on `x = 1`. The exact solution `u = (x, −ν y, −ν z) / E` is
//! linear, so every order p reproduces it; in the Bernstein-Bézier basis a linear field's
//! coefficients are its values at the nodes (linear precision). Checked for PCG and
//! Cholesky, p = 1..3, and the post-processed stress is the uniform `σ_xx = 1`.

use tessera_fem::problem::Problem;
use tessera_fem::results::compute_results;
use tessera_fem::static_solve::{solve_problem, StaticOptions};

#[test]
fn uniaxial_tension_is_exact_for_p_1_to_3() {
    let (e, nu) = (200.0, 0.3);
    for p in 1..=3 {
        for (method, tol) in [("pcg", 1e-9), ("cholesky", 1e-11)] {
            let text = format!(
                r#"
order = {p}
[mesh]
generate = {{ box = {{ cells = [2, 2, 2], size = [1.0, 1.0, 1.0] }} }}
[material]
youngs = {e}
poisson = {nu}
[[fixed]]
selector = {{ type = "plane", point = [0, 0, 0], normal = [1, 0, 0] }}
components = ["x"]
[[fixed]]
selector = {{ type = "plane", point = [0, 0, 0], normal = [0, 1, 0] }}
components = ["y"]
[[fixed]]
selector = {{ type = "plane", point = [0, 0, 0], normal = [0, 0, 1] }}
components = ["z"]
[[loads]]
type = "traction"
selector = {{ type = "plane", point = [1, 0, 0], normal = [1, 0, 0] }}
traction = [1.0, 0.0, 0.0]
[solver]
method = "{method}"
tolerance = 1e-13
"#
            );
            let pr = Problem::parse(&text, "patch.toml", std::path::Path::new(".")).unwrap();
            let sol = solve_problem(&pr, &StaticOptions::default(), &mut |_| {}).unwrap();
            let x = sol.ho.node_positions();
            let mut err: f64 = 0.0;
            for (i, xi) in x.iter().enumerate() {
                let exact = [xi[0] / e, -nu * xi[1] / e, -nu * xi[2] / e];
                for k in 0..3 {
                    err = err.max((sol.u[i * 3 + k] - exact[k]).abs());
                }
            }
            assert!(err < tol / e * 10.0, "p = {p}, {method}: max error {err:e}");
            let r = compute_results(&sol.ho, &sol.u, pr.material.lame().unwrap()).unwrap();
            for s in r.stress.iter().chain(&r.cell_stress) {
                assert!((s[0] - 1.0).abs() < 1e-6, "σ_xx = {}", s[0]);
                for k in 1..6 {
                    assert!(s[k].abs() < 1e-6, "σ[{k}] = {}", s[k]);
                }
            }
            for v in &r.von_mises {
                assert!((v - 1.0).abs() < 1e-6);
            }
        }
    }
}
