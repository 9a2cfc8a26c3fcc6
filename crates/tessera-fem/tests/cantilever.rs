//! Cantilever beam (length / height = 10) against Timoshenko beam theory (issue 6).
//!
//! Beam `[0, L] x [0, h] x [0, h]`, `L = 10`, `h = b = 1`, clamped at `x = 0` (all components
//! of every node on that face fixed), a uniform shear traction `t = (0, 0, -P/A)` on the end
//! face `x = L`, `E = 1000`, `ν = 0` (so the 3D clamp adds no Poisson constraint).
//! Timoshenko's tip deflection with shear correction:
//!
//! ```text
//! δ = P L³ / (3 E I) + P L / (κ G A),   I = b h³ / 12,  A = b h,  G = E / (2 (1 + ν)),
//! κ = 10 (1 + ν) / (12 + 11 ν)  (Cowper, rectangle; = 5/6 at ν = 0)
//! ```
//!
//! = 4.0 + 0.024 = 4.024. The measured deflection is the mean `u_z` of the end-face vertices
//! (vertex BB coefficients are nodal values).

use tessera_fem::problem::Problem;
use tessera_fem::static_solve::{solve_problem, StaticOptions, StaticSolution};

const E: f64 = 1000.0;

fn timoshenko() -> f64 {
    let (l, h, b, p, nu) = (10.0f64, 1.0f64, 1.0f64, 1.0f64, 0.0f64);
    let i = b * h.powi(3) / 12.0;
    let a = b * h;
    let g = E / (2.0 * (1.0 + nu));
    let kappa = 10.0 * (1.0 + nu) / (12.0 + 11.0 * nu);
    p * l.powi(3) / (3.0 * E * i) + p * l / (kappa * g * a)
}

fn solve(order: usize, cells: [usize; 3], method: &str) -> StaticSolution {
    let text = format!(
        r#"
order = {order}
[mesh]
generate = {{ box = {{ cells = [{}, {}, {}], size = [10.0, 1.0, 1.0] }} }}
[material]
youngs = {E}
poisson = 0.0
[[fixed]]
selector = {{ type = "plane", point = [0, 0, 0], normal = [1, 0, 0] }}
[[loads]]
type = "traction"
selector = {{ type = "plane", point = [10, 0, 0], normal = [1, 0, 0] }}
traction = [0.0, 0.0, -1.0]
[solver]
method = "{method}"
tolerance = 1e-10
"#,
        cells[0], cells[1], cells[2]
    );
    let pr = Problem::parse(&text, "cantilever.toml", std::path::Path::new(".")).unwrap();
    solve_problem(&pr, &StaticOptions::default(), &mut |_| {}).unwrap()
}

fn tip(sol: &StaticSolution) -> f64 {
    let pos = sol.ho.mesh().positions();
    let tips: Vec<usize> = (0..pos.len())
        .filter(|&v| (pos[v][0] - 10.0).abs() < 1e-9)
        .collect();
    -tips.iter().map(|&v| sol.u[v * 3 + 2]).sum::<f64>() / tips.len() as f64
}

#[test]
fn quadratic_tip_deflection_within_one_percent_of_timoshenko() {
    let exact = timoshenko();
    assert!((exact - 4.024).abs() < 1e-12);
    let sol = solve(2, [20, 2, 2], "pcg");
    let d = tip(&sol);
    let rel = (d - exact).abs() / exact;
    println!(
        "p = 2, 20x2x2 voxels: tip {d:.5}, Timoshenko {exact:.5}, error {:.3}%",
        rel * 100.0
    );
    assert!(
        rel < 0.01,
        "tip deflection {d} vs Timoshenko {exact}: {:.3}%",
        rel * 100.0
    );
    assert!(sol.report.final_residual <= 1e-10);
}

#[test]
fn linear_elements_lock_and_converge_under_refinement() {
    let exact = timoshenko();
    let mut prev = 0.0;
    let mut ratios = Vec::new();
    for n in [1usize, 2, 4] {
        let d = tip(&solve(1, [10 * n, n, n], "cholesky"));
        let r = d / exact;
        ratios.push(r);
        assert!(
            r > prev,
            "refinement must increase the (locked) deflection: {ratios:?}"
        );
        assert!(r < 1.0, "p = 1 is too stiff (shear locking): {ratios:?}");
        prev = r;
    }
    println!("p = 1 deflection / Timoshenko for 10x1x1, 20x2x2, 40x4x4: {ratios:?}");
    assert!(ratios[0] < 0.5, "coarse linear tetrahedra lock: {ratios:?}");
    // the error shrinks by a clear factor per refinement
    assert!((1.0 - ratios[2]) < 0.6 * (1.0 - ratios[1]), "{ratios:?}");
}

#[test]
fn pcg_equals_cholesky() {
    let a = solve(2, [10, 1, 1], "pcg");
    let b = solve(2, [10, 1, 1], "cholesky");
    let norm = b.u.iter().map(|x| x * x).sum::<f64>().sqrt();
    let diff =
        a.u.iter()
            .zip(&b.u)
            .map(|(x, y)| (x - y).powi(2))
            .sum::<f64>()
            .sqrt();
    println!(
        "PCG {} iterations, ‖u_pcg − u_chol‖ / ‖u_chol‖ = {:.2e}",
        a.report.iterations,
        diff / norm
    );
    // tolerance 1e-10 on the residual; κ(K) ~ 1e5 here
    assert!(diff / norm < 1e-6, "{}", diff / norm);
}
