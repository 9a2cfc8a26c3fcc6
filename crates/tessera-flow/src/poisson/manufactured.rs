//! Manufactured cut-cell Poisson problems with known solutions (`tessera flow poisson`).
//!
//! `-lap u = f` on the unit square (cube) outside a disc (ball) of radius `R` at `c`, with
//! the solid wall condition of the fluid solver on the obstacle (`du/dn = 0`, the open face
//! areas of Eq. 6.3 carry it) and `u` prescribed on the outer boundary. With `r = |x - c|`
//! and `x_1` the first coordinate of `x - c`:
//!
//! ```text
//! 2D (circle):  u = (r + R^2 / r) x_1 / r + (r - R)^2,        f = -(4 - 2 R / r)
//! 3D (sphere):  u = (r + R^3 / (2 r^2)) x_1 / r + (r - R)^2,  f = -(6 - 4 R / r)
//! ```
//!
//! The first term is potential flow around the obstacle (harmonic, zero normal derivative at
//! `r = R`), the second a radial term whose derivative also vanishes there. The discrete
//! problem is Eq. 6.3 with `b_c = |C ∩ Ω| f(x_c) / h^(d-2)` and Dirichlet faces on the outer
//! boundary (`u` at the face centre, half a cell from the unknown).

use tessera_core::Par;

use super::multigrid::{MgParams, Multigrid, SolveReport};
use super::{finest_level, Level};
use crate::geometry::{CutCells, Obstacles, Shape};
use crate::FlowError;

/// A manufactured problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Case {
    /// 2D, a disc in the unit square.
    Circle,
    /// 3D, a ball in the unit cube.
    Sphere,
}

impl Case {
    /// The case called `name` (`circle`, `sphere`).
    pub fn from_name(name: &str) -> Result<Case, FlowError> {
        match name {
            "circle" => Ok(Case::Circle),
            "sphere" => Ok(Case::Sphere),
            _ => Err(FlowError::Invalid(format!(
                "unknown Poisson case `{name}` (known: circle, sphere)"
            ))),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Case::Circle => "circle",
            Case::Sphere => "sphere",
        }
    }
    pub fn dim(self) -> usize {
        match self {
            Case::Circle => 2,
            Case::Sphere => 3,
        }
    }
    /// Obstacle centre (off the grid lines of every power-of-two grid) and radius.
    pub fn obstacle(self) -> ([f64; 3], f64) {
        match self {
            Case::Circle => ([0.5123, 0.4871, 0.0], 0.2),
            Case::Sphere => ([0.5123, 0.4871, 0.5061], 0.25),
        }
    }
    /// Exact solution.
    pub fn exact(self, p: [f64; 3]) -> f64 {
        let (c, rr) = self.obstacle();
        let d = [p[0] - c[0], p[1] - c[1], p[2] - c[2]];
        let r = (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt().max(1e-12);
        match self {
            Case::Circle => (r + rr * rr / r) * d[0] / r + (r - rr).powi(2),
            Case::Sphere => (r + rr.powi(3) / (2.0 * r * r)) * d[0] / r + (r - rr).powi(2),
        }
    }
    /// Source `f = -lap u`.
    pub fn source(self, p: [f64; 3]) -> f64 {
        let (c, rr) = self.obstacle();
        let d = [p[0] - c[0], p[1] - c[1], p[2] - c[2]];
        let r = (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt().max(1e-12);
        match self {
            Case::Circle => -(4.0 - 2.0 * rr / r),
            Case::Sphere => -(6.0 - 4.0 * rr / r),
        }
    }
}

/// A discretized manufactured problem.
pub struct Problem {
    pub case: Case,
    pub n: usize,
    pub cut: CutCells,
    pub level: Level<f64>,
    pub rhs: Vec<f64>,
}

impl Problem {
    /// Discretize `case` on an `n^d` grid.
    pub fn new(case: Case, n: usize) -> Result<Problem, FlowError> {
        if n < 4 {
            return Err(FlowError::Invalid(format!(
                "grid size {n}: at least 4 cells per axis"
            )));
        }
        let dim = case.dim();
        if n.checked_pow(dim as u32).is_none_or(|c| c > 1 << 27) {
            return Err(FlowError::Invalid(format!(
                "grid size {n}: more than 2^27 cells"
            )));
        }
        let h = 1.0 / n as f64;
        let dims = [n, n, if dim == 3 { n } else { 1 }];
        let (c, r) = case.obstacle();
        let obs = Obstacles::new(vec![Shape::Sphere {
            center: c,
            radius: r,
        }]);
        let cut = CutCells::measure(dims, dim, h, [0.0; 3], &obs);
        let level: Level<f64> = finest_level(&cut, [true; 6]);
        let scale = h.powi(dim as i32) / h.powi(dim as i32 - 2);
        let nc = level.len();
        let mut rhs = vec![0.0; nc];
        for (cidx, b) in rhs.iter_mut().enumerate() {
            if !level.is_active(cidx) {
                continue;
            }
            let [i, j, k] = level.ijk(cidx);
            let x = centre(i, j, k, h, dim);
            *b = cut.fluid[cidx] * case.source(x) * scale;
            // Dirichlet faces on the outer boundary: + (2 alpha) u(face centre)
            for a in 0..dim {
                let ijk = [i, j, k];
                for side in 0..2 {
                    if (side == 0 && ijk[a] != 0) || (side == 1 && ijk[a] + 1 != dims[a]) {
                        continue;
                    }
                    let mut f = ijk;
                    f[a] += side;
                    let alpha = cut.open[a][cut.face_index(a, f[0], f[1], f[2])];
                    let mut p = x;
                    p[a] = if side == 0 { 0.0 } else { 1.0 };
                    *b += 2.0 * alpha * case.exact(p);
                }
            }
        }
        Ok(Problem {
            case,
            n,
            cut,
            level,
            rhs,
        })
    }
}

fn centre(i: usize, j: usize, k: usize, h: f64, dim: usize) -> [f64; 3] {
    [
        (i as f64 + 0.5) * h,
        (j as f64 + 0.5) * h,
        if dim == 3 { (k as f64 + 0.5) * h } else { 0.0 },
    ]
}

/// Errors of a solution against the exact one.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ErrorNorms {
    /// Max over all fluid cells.
    pub max: f64,
    /// Volume-weighted L2 over all fluid cells.
    pub l2: f64,
    /// Volume-weighted L2 over cells at least `0.1` from the obstacle.
    pub l2_interior: f64,
    /// Max over cells at least `0.1` from the obstacle.
    pub max_interior: f64,
}

impl Problem {
    /// Error norms of `u` (one value per cell).
    pub fn errors(&self, u: &[f64]) -> ErrorNorms {
        let h = 1.0 / self.n as f64;
        let dim = self.case.dim();
        let (c, r) = self.case.obstacle();
        let vol = h.powi(dim as i32);
        let mut e = ErrorNorms::default();
        let (mut s2, mut s2i, mut v, mut vi) = (0.0, 0.0, 0.0, 0.0);
        for (cidx, &uv) in u.iter().enumerate() {
            let th = self.cut.fluid[cidx];
            if th <= 0.0 || !self.level.is_active(cidx) {
                continue;
            }
            let [i, j, k] = self.level.ijk(cidx);
            let x = centre(i, j, k, h, dim);
            let err = (uv - self.case.exact(x)).abs();
            e.max = e.max.max(err);
            s2 += th * vol * err * err;
            v += th * vol;
            let dist =
                ((x[0] - c[0]).powi(2) + (x[1] - c[1]).powi(2) + (x[2] - c[2]).powi(2)).sqrt() - r;
            if dist >= 0.1 {
                e.max_interior = e.max_interior.max(err);
                s2i += vol * err * err;
                vi += vol;
            }
        }
        e.l2 = (s2 / v.max(1e-300)).sqrt();
        e.l2_interior = (s2i / vi.max(1e-300)).sqrt();
        e
    }
}

/// Result of [`solve_case`].
#[derive(Clone, Debug)]
pub struct CaseResult {
    pub errors: ErrorNorms,
    pub report: SolveReport,
    pub levels: usize,
    pub cells: usize,
    pub setup_ms: f64,
    pub solve_ms: f64,
}

/// Discretize and solve `case` on an `n^d` grid with multigrid `params` (f64, CPU).
pub fn solve_case(
    case: Case,
    n: usize,
    params: MgParams,
    par: Par,
) -> Result<CaseResult, FlowError> {
    let t0 = std::time::Instant::now();
    let p = Problem::new(case, n)?;
    let mut mg = Multigrid::new(p.level.clone(), params, par);
    let t1 = std::time::Instant::now();
    let mut u = vec![0.0; p.rhs.len()];
    let report = mg.solve(&mut u, &p.rhs);
    let t2 = std::time::Instant::now();
    Ok(CaseResult {
        errors: p.errors(&u),
        report,
        levels: mg.levels.len(),
        cells: p.rhs.len(),
        setup_ms: (t1 - t0).as_secs_f64() * 1e3,
        solve_ms: (t2 - t1).as_secs_f64() * 1e3,
    })
}
