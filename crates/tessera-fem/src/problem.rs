//! Static linear-elasticity problem description in TOML (dissertation §4.1: "the static
//! simulation to convergence").
//!
//! A problem file names a mesh, the polynomial order `p`, a material, fixed regions
//! (Dirichlet constraints) and loads. It is validated completely by [`Problem::parse`]
//! before any work is done: unknown keys are rejected, values are range-checked, and every
//! message names the key path (for example `loads[1].selector.radius`). Selections that
//! depend on the mesh (group names and tags, geometric selectors that select nothing) are
//! checked by [`crate::static_solve`] right after the mesh is loaded, before assembly.
//!
//! ```toml
//! title = "bracket"            # optional
//! order = 2                    # 1..=3
//! units = "mm"                 # "mm" (N, mm, MPa, t/mm³; default) or "m" (N, m, Pa, kg/m³)
//!
//! [mesh]
//! file = "part.msh"            # any format read_mesh reads, relative to this file
//! # generate = { bracket = 24 }
//! # generate = { box = { cells = [20, 2, 2], size = [10.0, 1.0, 1.0] } }
//!
//! [material]
//! preset = "Ti-6Al-4V"         # or youngs = .., poisson = ..  or  lambda = .., mu = ..
//! # density = 4.43e-9         # optional, overrides the preset's
//!
//! [[fixed]]
//! selector = { type = "group", name = "bolts" }     # or tag = 3
//! components = ["x", "y", "z"]                      # default: all
//! displacement = [0.0, 0.0, 0.0]                    # default: 0
//!
//! [[loads]]
//! type = "traction"            # traction (force/area), pressure (along -n), gravity
//! selector = { type = "plane", point = [10, 0, 0], normal = [1, 0, 0], tolerance = 1e-6 }
//! traction = [0.0, 0.0, -1.0]
//!
//! [solver]
//! method = "pcg"               # or "cholesky" (direct, CPU: faer sparse Cholesky)
//! preconditioner = "amg"       # "block-jacobi", "amg" or "pmg" (default: amg for p = 1, pmg for p >= 2)
//! tolerance = 1e-8
//! max_iterations = 10000
//!
//! [solver.amg]                 # smoothed aggregation (all keys optional, defaults shown)
//! strength = 0.08              # strength-of-connection threshold θ
//! smoother = "chebyshev"       # or "jacobi" (damped block Jacobi)
//! degree = 2                   # Chebyshev degree (AMG levels)
//! fine_degree = 3              # Chebyshev degree on the order-p level of pmg
//! sweeps = 2                   # Jacobi sweeps
//! omega = 0.6                  # Jacobi damping
//! coarse_size = 512            # DOFs of the coarsest level (dense solve)
//! max_levels = 16
//! cycle = "v"                  # or "w"
//! near_null_space = "rigid-body"  # or "translations"
//! ```
//!
//! Selectors (`type`): `group` (`name` or `tag` of a Gmsh physical surface group),
//! `boundary` (every boundary face), `plane` (`point`, `normal`, `tolerance`), `box`
//! (`min`, `max`), `sphere` (`center`, `radius`), `cylinder` (`point`, `axis`, `radius`,
//! `tolerance`: points within `radius + tolerance` of the axis). A boundary face is
//! selected by a geometric selector when all three of its vertices satisfy it.

use std::path::{Path, PathBuf};
use toml::{Table, Value};

use crate::material::Material;

/// Errors of reading and validating a problem file.
#[derive(Debug, thiserror::Error)]
pub enum ProblemError {
    #[error("{}: cannot read: {}", file.display(), tessera_core::error::os_message(source))]
    Io {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{file}: {message}")]
    Syntax { file: String, message: String },
    #[error("{file}: `{key}`: {message}")]
    Key {
        file: String,
        key: String,
        message: String,
    },
}

/// Where the mesh comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum MeshSource {
    /// A mesh file (resolved against the problem file's directory).
    File(PathBuf),
    /// The generated bracket ([`tessera_mesh::generate::bracket`]) at a resolution.
    Bracket(usize),
    /// A box `[0, size]` of `cells` voxels, six Kuhn tetrahedra each.
    Box { cells: [usize; 3], size: [f64; 3] },
}

/// Selection of boundary faces.
#[derive(Clone, Debug, PartialEq)]
pub enum Selector {
    GroupName(String),
    GroupTag(i32),
    Boundary,
    Plane {
        point: [f64; 3],
        normal: [f64; 3],
        tolerance: f64,
    },
    Box {
        min: [f64; 3],
        max: [f64; 3],
    },
    Sphere {
        center: [f64; 3],
        radius: f64,
    },
    Cylinder {
        point: [f64; 3],
        axis: [f64; 3],
        radius: f64,
        tolerance: f64,
    },
}

impl Selector {
    /// Whether a point satisfies a geometric selector (`None` for group selectors).
    pub fn contains(&self, x: [f64; 3]) -> Option<bool> {
        let sub = |a: [f64; 3], b: [f64; 3]| [a[0] - b[0], a[1] - b[1], a[2] - b[2]];
        let dot = |a: [f64; 3], b: [f64; 3]| a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
        Some(match self {
            Selector::GroupName(_) | Selector::GroupTag(_) => return None,
            Selector::Boundary => true,
            Selector::Plane {
                point,
                normal,
                tolerance,
            } => {
                let n = dot(*normal, *normal).sqrt();
                (dot(sub(x, *point), *normal) / n).abs() <= *tolerance
            }
            Selector::Box { min, max } => (0..3).all(|k| x[k] >= min[k] && x[k] <= max[k]),
            Selector::Sphere { center, radius } => {
                dot(sub(x, *center), sub(x, *center)).sqrt() <= *radius
            }
            Selector::Cylinder {
                point,
                axis,
                radius,
                tolerance,
            } => {
                let a2 = dot(*axis, *axis);
                let v = sub(x, *point);
                let t = dot(v, *axis) / a2;
                let r = sub(v, [axis[0] * t, axis[1] * t, axis[2] * t]);
                dot(r, r).sqrt() <= radius + tolerance
            }
        })
    }
}

/// A fixed region (Dirichlet constraint on every node of the selected faces).
#[derive(Clone, Debug, PartialEq)]
pub struct FixedRegion {
    pub selector: Selector,
    /// Which displacement components are prescribed.
    pub components: [bool; 3],
    /// Prescribed displacement (a constant: in the Bernstein-Bézier basis every coefficient
    /// of the face equals it, by the partition of unity).
    pub displacement: [f64; 3],
}

/// A load.
#[derive(Clone, Debug, PartialEq)]
pub enum Load {
    /// Surface traction (force per area) on the selected faces.
    Traction {
        selector: Selector,
        traction: [f64; 3],
    },
    /// Pressure (force per area along the inward normal, `t = -p n`).
    Pressure { selector: Selector, pressure: f64 },
    /// Body force `ρ a` over the whole volume.
    Gravity { acceleration: [f64; 3] },
}

/// Preconditioner of the PCG.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PreconditionerKind {
    /// Block Jacobi: the inverted `3 × 3` diagonal blocks (dissertation §4.4.2).
    BlockJacobi,
    /// Smoothed-aggregation AMG with the rigid-body modes (`tessera_solve::amg`).
    Amg,
    /// p-multigrid: order-`p` smoothing, AMG on the order-1 level (`tessera_solve::pmg`).
    Pmg,
}

impl PreconditionerKind {
    /// Name as in the problem file.
    pub fn name(self) -> &'static str {
        match self {
            PreconditionerKind::BlockJacobi => "block-jacobi",
            PreconditionerKind::Amg => "amg",
            PreconditionerKind::Pmg => "pmg",
        }
    }
    /// Parse a problem-file name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "block-jacobi" => Some(PreconditionerKind::BlockJacobi),
            "amg" => Some(PreconditionerKind::Amg),
            "pmg" => Some(PreconditionerKind::Pmg),
            _ => None,
        }
    }
    /// The default for order `p`: the fastest we have, AMG for p = 1 and p-multigrid above.
    pub fn default_for(order: usize) -> Self {
        if order >= 2 {
            PreconditionerKind::Pmg
        } else {
            PreconditionerKind::Amg
        }
    }
}

/// Linear solver choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SolverMethod {
    /// Filtered block-Jacobi PCG on Bin-BCSR* (`tessera_solve::pcg`).
    Pcg,
    /// Direct sparse Cholesky on the CPU (`tessera_solve::cholesky`).
    Cholesky,
}

/// Solver settings.
#[derive(Clone, Debug, PartialEq)]
pub struct SolverSpec {
    pub method: SolverMethod,
    /// The PCG's preconditioner; `None`: [`PreconditionerKind::default_for`] the order.
    pub preconditioner: Option<PreconditionerKind>,
    pub tolerance: f64,
    pub max_iterations: usize,
    /// `[solver.amg]`: the multigrid knobs (AMG levels, and the order-`p` smoother of pmg).
    pub multigrid: tessera_solve::PmgParams,
}

impl SolverSpec {
    /// The preconditioner that runs for order `p`.
    pub fn preconditioner_for(&self, order: usize) -> PreconditionerKind {
        self.preconditioner
            .unwrap_or(PreconditionerKind::default_for(order))
    }
}

/// A validated problem.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub title: String,
    pub mesh: MeshSource,
    pub order: usize,
    /// `true` for the mm system (N, mm, MPa, t/mm³), `false` for SI (N, m, Pa, kg/m³).
    pub units_mm: bool,
    pub material: Material,
    pub fixed: Vec<FixedRegion>,
    pub loads: Vec<Load>,
    pub solver: SolverSpec,
    /// Key path of every selector (`fixed[0].selector`, `loads[1].selector`) for messages.
    pub selector_keys: Vec<(String, Selector)>,
}

/// A named material preset: Young's modulus (MPa), Poisson's ratio, density (t/mm³).
#[derive(Clone, Copy, Debug)]
pub struct Preset {
    pub name: &'static str,
    pub youngs_mpa: f64,
    pub poisson: f64,
    pub density_t_mm3: f64,
}

/// Material presets (typical handbook values).
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "Ti-6Al-4V",
        youngs_mpa: 113_800.0,
        poisson: 0.342,
        density_t_mm3: 4.43e-9,
    },
    Preset {
        name: "steel",
        youngs_mpa: 200_000.0,
        poisson: 0.30,
        density_t_mm3: 7.85e-9,
    },
    Preset {
        name: "aluminium-6061",
        youngs_mpa: 68_900.0,
        poisson: 0.33,
        density_t_mm3: 2.70e-9,
    },
    Preset {
        name: "PLA",
        youngs_mpa: 3_500.0,
        poisson: 0.36,
        density_t_mm3: 1.24e-9,
    },
];

/// Field access with key paths.
struct Ctx<'a> {
    file: &'a str,
}

impl Ctx<'_> {
    /// An error at a key path (user text in it is clipped: one bounded line).
    fn err(&self, key: &str, message: impl Into<String>) -> ProblemError {
        ProblemError::Key {
            file: self.file.to_string(),
            key: tessera_core::error::clip(key, 120),
            message: tessera_core::error::clip(&message.into(), 300),
        }
    }
    fn keys(&self, t: &Table, path: &str, allowed: &[&str]) -> Result<(), ProblemError> {
        for k in t.keys() {
            if !allowed.contains(&k.as_str()) {
                let full = join(path, k);
                return Err(self.err(
                    &full,
                    format!("unknown key; allowed here: {}", allowed.join(", ")),
                ));
            }
        }
        Ok(())
    }
    fn table<'t>(
        &self,
        t: &'t Table,
        path: &str,
        key: &str,
    ) -> Result<Option<&'t Table>, ProblemError> {
        match t.get(key) {
            None => Ok(None),
            Some(Value::Table(x)) => Ok(Some(x)),
            Some(v) => Err(self.err(
                &join(path, key),
                format!("expected a table, found {}", v.type_str()),
            )),
        }
    }
    fn num(&self, t: &Table, path: &str, key: &str) -> Result<Option<f64>, ProblemError> {
        match t.get(key) {
            None => Ok(None),
            Some(Value::Float(f)) if f.is_finite() => Ok(Some(*f)),
            Some(Value::Integer(i)) => Ok(Some(*i as f64)),
            Some(v) => Err(self.err(
                &join(path, key),
                format!("expected a finite number, found {}", v.type_str()),
            )),
        }
    }
    fn req_num(&self, t: &Table, path: &str, key: &str) -> Result<f64, ProblemError> {
        self.num(t, path, key)?
            .ok_or_else(|| self.err(&join(path, key), "missing"))
    }
    fn positive(&self, t: &Table, path: &str, key: &str) -> Result<f64, ProblemError> {
        let v = self.req_num(t, path, key)?;
        if v <= 0.0 {
            return Err(self.err(&join(path, key), format!("must be positive, got {v}")));
        }
        Ok(v)
    }
    fn int(&self, t: &Table, path: &str, key: &str) -> Result<Option<i64>, ProblemError> {
        match t.get(key) {
            None => Ok(None),
            Some(Value::Integer(i)) => Ok(Some(*i)),
            Some(v) => Err(self.err(
                &join(path, key),
                format!("expected an integer, found {}", v.type_str()),
            )),
        }
    }
    fn string<'t>(
        &self,
        t: &'t Table,
        path: &str,
        key: &str,
    ) -> Result<Option<&'t str>, ProblemError> {
        match t.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(self.err(
                &join(path, key),
                format!("expected a string, found {}", v.type_str()),
            )),
        }
    }
    fn vec3(&self, t: &Table, path: &str, key: &str) -> Result<Option<[f64; 3]>, ProblemError> {
        let k = join(path, key);
        match t.get(key) {
            None => Ok(None),
            Some(Value::Array(a)) if a.len() == 3 => {
                let mut out = [0.0; 3];
                for (i, v) in a.iter().enumerate() {
                    out[i] = match v {
                        Value::Float(f) if f.is_finite() => *f,
                        Value::Integer(n) => *n as f64,
                        other => {
                            return Err(self.err(
                                &format!("{k}[{i}]"),
                                format!("expected a finite number, found {}", other.type_str()),
                            ))
                        }
                    };
                }
                Ok(Some(out))
            }
            Some(v) => Err(self.err(
                &k,
                format!("expected an array of 3 numbers, found {}", describe(v)),
            )),
        }
    }
    fn req_vec3(&self, t: &Table, path: &str, key: &str) -> Result<[f64; 3], ProblemError> {
        self.vec3(t, path, key)?
            .ok_or_else(|| self.err(&join(path, key), "missing"))
    }
    fn array_of_tables<'t>(&self, t: &'t Table, key: &str) -> Result<Vec<&'t Table>, ProblemError> {
        match t.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(a)) => a
                .iter()
                .enumerate()
                .map(|(i, v)| match v {
                    Value::Table(x) => Ok(x),
                    v => Err(self.err(
                        &format!("{key}[{i}]"),
                        format!("expected a table, found {}", v.type_str()),
                    )),
                })
                .collect(),
            Some(v) => Err(self.err(
                key,
                format!(
                    "expected an array of tables ([[{key}]]), found {}",
                    v.type_str()
                ),
            )),
        }
    }
}

/// A TOML syntax error on one line: `line L, column C: message` (the parser's own text
/// repeats the offending line with a caret under it; a long line is not echoed).
fn syntax_message(text: &str, e: &toml::de::Error) -> String {
    let msg = e.message().split_whitespace().collect::<Vec<_>>().join(" ");
    let msg = tessera_core::error::clip(&msg, 200);
    match e.span() {
        Some(s) => {
            let at = s.start.min(text.len());
            let before = &text.as_bytes()[..at];
            let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
            let col = at
                - before
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |i| i + 1)
                + 1;
            format!("line {line}, column {col}: {msg}")
        }
        None => msg,
    }
}

/// The fuzzing property of problem files (cargo-fuzz target `problem_toml` and the
/// bounded-time test): any text gives a problem or one error line of bounded length
/// naming the file.
#[doc(hidden)]
pub fn fuzz_check(text: &str) {
    match Problem::parse(text, "fuzz.toml", Path::new(".")) {
        Ok(_) => {}
        Err(e) => {
            let m = e.to_string();
            assert!(
                m.starts_with("fuzz.toml: ") && !m.contains('\n') && m.len() <= 600,
                "bad error message: {m}"
            );
        }
    }
}

fn describe(v: &Value) -> String {
    match v {
        Value::Array(a) => format!("an array of {} elements", a.len()),
        v => v.type_str().to_string(),
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn nonzero(c: &Ctx, v: [f64; 3], key: &str) -> Result<(), ProblemError> {
    if v.iter().all(|x| *x == 0.0) {
        return Err(c.err(key, "must not be the zero vector"));
    }
    Ok(())
}

fn parse_selector(c: &Ctx, parent: &Table, ppath: &str) -> Result<Selector, ProblemError> {
    let path = join(ppath, "selector");
    let t = c
        .table(parent, ppath, "selector")?
        .ok_or_else(|| c.err(&path, "missing (a table such as { type = \"plane\", ... })"))?;
    let ty = c.string(t, &path, "type")?.ok_or_else(|| {
        c.err(
            &join(&path, "type"),
            "missing (group, boundary, plane, box, sphere or cylinder)",
        )
    })?;
    let k = |key: &str| join(&path, key);
    Ok(match ty {
        "group" => {
            c.keys(t, &path, &["type", "name", "tag"])?;
            match (c.string(t, &path, "name")?, c.int(t, &path, "tag")?) {
                (Some(n), None) => Selector::GroupName(n.to_string()),
                (None, Some(g)) => Selector::GroupTag(
                    i32::try_from(g).map_err(|_| c.err(&k("tag"), "out of range"))?,
                ),
                _ => {
                    return Err(c.err(
                        &path,
                        "a group selector needs exactly one of `name` and `tag`",
                    ))
                }
            }
        }
        "boundary" => {
            c.keys(t, &path, &["type"])?;
            Selector::Boundary
        }
        "plane" => {
            c.keys(t, &path, &["type", "point", "normal", "tolerance"])?;
            let normal = c.req_vec3(t, &path, "normal")?;
            nonzero(c, normal, &k("normal"))?;
            let tolerance = c.num(t, &path, "tolerance")?.unwrap_or(1e-6);
            if tolerance < 0.0 {
                return Err(c.err(
                    &k("tolerance"),
                    format!("must be non-negative, got {tolerance}"),
                ));
            }
            Selector::Plane {
                point: c.req_vec3(t, &path, "point")?,
                normal,
                tolerance,
            }
        }
        "box" => {
            c.keys(t, &path, &["type", "min", "max"])?;
            let (min, max) = (c.req_vec3(t, &path, "min")?, c.req_vec3(t, &path, "max")?);
            if (0..3).any(|i| min[i] > max[i]) {
                return Err(c.err(&k("max"), "must be >= `min` in every component"));
            }
            Selector::Box { min, max }
        }
        "sphere" => {
            c.keys(t, &path, &["type", "center", "radius"])?;
            Selector::Sphere {
                center: c.req_vec3(t, &path, "center")?,
                radius: c.positive(t, &path, "radius")?,
            }
        }
        "cylinder" => {
            c.keys(t, &path, &["type", "point", "axis", "radius", "tolerance"])?;
            let axis = c.req_vec3(t, &path, "axis")?;
            nonzero(c, axis, &k("axis"))?;
            let tolerance = c.num(t, &path, "tolerance")?.unwrap_or(1e-6);
            if tolerance < 0.0 {
                return Err(c.err(
                    &k("tolerance"),
                    format!("must be non-negative, got {tolerance}"),
                ));
            }
            Selector::Cylinder {
                point: c.req_vec3(t, &path, "point")?,
                axis,
                radius: c.positive(t, &path, "radius")?,
                tolerance,
            }
        }
        other => {
            return Err(c.err(
                &k("type"),
                format!(
                    "unknown selector `{other}` (group, boundary, plane, box, sphere or cylinder)"
                ),
            ))
        }
    })
}

/// `[solver.amg]` (see the module docs).
fn parse_multigrid(c: &Ctx<'_>, t: &Table) -> Result<tessera_solve::PmgParams, ProblemError> {
    use tessera_solve::{Cycle, NearNullSpace, Smoother};
    let path = "solver.amg";
    c.keys(
        t,
        path,
        &[
            "strength",
            "smoother",
            "degree",
            "fine_degree",
            "sweeps",
            "omega",
            "coarse_size",
            "max_levels",
            "cycle",
            "near_null_space",
        ],
    )?;
    let mut p = tessera_solve::PmgParams::default();
    let a = &mut p.amg;
    if let Some(v) = c.num(t, path, "strength")? {
        if !(0.0..1.0).contains(&v) {
            return Err(c.err("solver.amg.strength", format!("must be in [0, 1), got {v}")));
        }
        a.strength = v;
    }
    let int_in = |key: &str, lo: i64, hi: i64| -> Result<Option<usize>, ProblemError> {
        match c.int(t, path, key)? {
            Some(v) if !(lo..=hi).contains(&v) => Err(c.err(
                &format!("solver.amg.{key}"),
                format!("must be in {lo}..={hi}, got {v}"),
            )),
            v => Ok(v.map(|v| v as usize)),
        }
    };
    let degree = int_in("degree", 1, 16)?;
    let fine_degree = int_in("fine_degree", 1, 16)?;
    let sweeps = int_in("sweeps", 1, 16)?;
    let omega = c.num(t, path, "omega")?;
    if let Some(w) = omega {
        if !(w > 0.0 && w < 2.0) {
            return Err(c.err("solver.amg.omega", format!("must be in (0, 2), got {w}")));
        }
    }
    match c.string(t, path, "smoother")?.unwrap_or("chebyshev") {
        "chebyshev" => {
            a.smoother = Smoother::Chebyshev {
                degree: degree.unwrap_or(2),
            };
            p.smoother = Smoother::Chebyshev {
                degree: fine_degree.unwrap_or(3),
            };
        }
        "jacobi" => {
            let j = Smoother::Jacobi {
                sweeps: sweeps.unwrap_or(2),
                omega: omega.unwrap_or(0.6),
            };
            a.smoother = j;
            p.smoother = j;
        }
        o => {
            return Err(c.err(
                "solver.amg.smoother",
                format!("unknown smoother `{o}` (chebyshev or jacobi)"),
            ))
        }
    }
    if let Some(v) = int_in("coarse_size", 6, 20_000)? {
        a.coarse_size = v;
    }
    if let Some(v) = int_in("max_levels", 1, 40)? {
        a.max_levels = v;
    }
    if let Some(v) = c.string(t, path, "cycle")? {
        a.cycle = match v {
            "v" | "V" => Cycle::V,
            "w" | "W" => Cycle::W,
            o => return Err(c.err("solver.amg.cycle", format!("unknown cycle `{o}` (v or w)"))),
        };
    }
    if let Some(v) = c.string(t, path, "near_null_space")? {
        a.near_null_space = match v {
            "rigid-body" => NearNullSpace::RigidBody,
            "translations" => NearNullSpace::Translations,
            o => {
                return Err(c.err(
                    "solver.amg.near_null_space",
                    format!("unknown near-null space `{o}` (rigid-body or translations)"),
                ))
            }
        };
    }
    Ok(p)
}

impl Problem {
    /// Read and validate a problem file; a relative mesh path is resolved against the
    /// file's directory.
    pub fn from_file(path: &Path) -> Result<Problem, ProblemError> {
        // a regular file within the memory budget (not a device, FIFO or directory)
        let bytes = tessera_core::input::read_file(path).map_err(|e| match e {
            tessera_core::CoreError::Io { err, .. } => ProblemError::Io {
                file: path.to_path_buf(),
                source: err,
            },
            other => ProblemError::Syntax {
                file: path.display().to_string(),
                message: other.reason(),
            },
        })?;
        let text = String::from_utf8(bytes).map_err(|e| ProblemError::Syntax {
            file: path.display().to_string(),
            message: format!(
                "not UTF-8 text (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            ),
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        Problem::parse(&text, &path.display().to_string(), base)
    }

    /// Parse and validate problem text (`file` labels messages, `base` resolves mesh paths).
    pub fn parse(text: &str, file: &str, base: &Path) -> Result<Problem, ProblemError> {
        let c = Ctx { file };
        let root: Table = text.parse::<Table>().map_err(|e| ProblemError::Syntax {
            file: file.to_string(),
            message: syntax_message(text, &e),
        })?;
        c.keys(
            &root,
            "",
            &[
                "title", "order", "units", "mesh", "material", "fixed", "loads", "solver",
            ],
        )?;
        let title = c
            .string(&root, "", "title")?
            .unwrap_or("tessera")
            .to_string();
        let order = c
            .int(&root, "", "order")?
            .ok_or_else(|| c.err("order", "missing (polynomial order 1, 2 or 3)"))?;
        if !(1..=3).contains(&order) {
            return Err(c.err(
                "order",
                format!("must be 1, 2 or 3 (VTK output supports p <= 3), got {order}"),
            ));
        }
        let units_mm = match c.string(&root, "", "units")?.unwrap_or("mm") {
            "mm" => true,
            "m" => false,
            u => return Err(c.err("units", format!("unknown unit system `{u}` (mm or m)"))),
        };

        // mesh
        let mt = c
            .table(&root, "", "mesh")?
            .ok_or_else(|| c.err("mesh", "missing ([mesh] with `file` or `generate`)"))?;
        c.keys(mt, "mesh", &["file", "generate"])?;
        let mesh = match (
            c.string(mt, "mesh", "file")?,
            c.table(mt, "mesh", "generate")?,
        ) {
            (Some(f), None) => {
                let p = Path::new(f);
                MeshSource::File(if p.is_absolute() {
                    p.to_path_buf()
                } else {
                    base.join(p)
                })
            }
            (None, Some(g)) => {
                c.keys(g, "mesh.generate", &["bracket", "box"])?;
                match (
                    c.int(g, "mesh.generate", "bracket")?,
                    c.table(g, "mesh.generate", "box")?,
                ) {
                    (Some(r), None) => {
                        let range = tessera_mesh::generate::BRACKET_RESOLUTION;
                        if r < *range.start() as i64 || r > *range.end() as i64 {
                            return Err(c.err(
                                "mesh.generate.bracket",
                                format!(
                                    "resolution must be in {}..={}, got {r}",
                                    range.start(),
                                    range.end()
                                ),
                            ));
                        }
                        MeshSource::Bracket(r as usize)
                    }
                    (None, Some(b)) => {
                        let path = "mesh.generate.box";
                        c.keys(b, path, &["cells", "size"])?;
                        let cells = c.req_vec3(b, path, "cells")?;
                        let size = c.req_vec3(b, path, "size")?;
                        if cells
                            .iter()
                            .any(|&n| n < 1.0 || n > 400.0 || n.fract() != 0.0)
                        {
                            return Err(
                                c.err("mesh.generate.box.cells", "must be integers in 1..=400")
                            );
                        }
                        if size.iter().any(|&s| s <= 0.0) {
                            return Err(c.err("mesh.generate.box.size", "must be positive"));
                        }
                        MeshSource::Box {
                            cells: cells.map(|n| n as usize),
                            size,
                        }
                    }
                    _ => {
                        return Err(
                            c.err("mesh.generate", "needs exactly one of `bracket` and `box`")
                        )
                    }
                }
            }
            _ => return Err(c.err("mesh", "needs exactly one of `file` and `generate`")),
        };

        // material
        let mat = c.table(&root, "", "material")?.ok_or_else(|| {
            c.err(
                "material",
                "missing ([material] with `preset`, `youngs`/`poisson` or `lambda`/`mu`)",
            )
        })?;
        c.keys(
            mat,
            "material",
            &["preset", "youngs", "poisson", "lambda", "mu", "density"],
        )?;
        let scale_e = if units_mm { 1.0 } else { 1e6 }; // MPa -> Pa
        let scale_rho = if units_mm { 1.0 } else { 1e12 }; // t/mm³ -> kg/m³
        let preset = c.string(mat, "material", "preset")?;
        let (ey, en) = (
            c.num(mat, "material", "youngs")?,
            c.num(mat, "material", "poisson")?,
        );
        let (ll, lm) = (
            c.num(mat, "material", "lambda")?,
            c.num(mat, "material", "mu")?,
        );
        let density = c.num(mat, "material", "density")?;
        if let Some(d) = density {
            if d < 0.0 {
                return Err(c.err("material.density", format!("must be non-negative, got {d}")));
            }
        }
        let given = preset.is_some() as u8
            + (ey.is_some() || en.is_some()) as u8
            + (ll.is_some() || lm.is_some()) as u8;
        if given != 1 {
            return Err(c.err(
                "material",
                "give exactly one of `preset`, `youngs` + `poisson`, or `lambda` + `mu`",
            ));
        }
        let material = if let Some(name) = preset {
            let pr = PRESETS
                .iter()
                .find(|p| p.name.eq_ignore_ascii_case(name))
                .ok_or_else(|| {
                    c.err(
                        "material.preset",
                        format!(
                            "unknown preset `{name}`; known: {}",
                            PRESETS
                                .iter()
                                .map(|p| p.name)
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    )
                })?;
            Material::new(
                pr.youngs_mpa * scale_e,
                pr.poisson,
                density.unwrap_or(pr.density_t_mm3 * scale_rho),
            )
        } else if ey.is_some() || en.is_some() {
            let e = ey.ok_or_else(|| c.err("material.youngs", "missing (given with `poisson`)"))?;
            let nu =
                en.ok_or_else(|| c.err("material.poisson", "missing (given with `youngs`)"))?;
            if e <= 0.0 {
                return Err(c.err("material.youngs", format!("must be positive, got {e}")));
            }
            if !(nu > -1.0 && nu < 0.5) {
                return Err(c.err(
                    "material.poisson",
                    format!("must be in (-1, 0.5), got {nu}"),
                ));
            }
            Material::new(e, nu, density.unwrap_or(0.0))
        } else {
            let l = ll.ok_or_else(|| c.err("material.lambda", "missing (given with `mu`)"))?;
            let m = lm.ok_or_else(|| c.err("material.mu", "missing (given with `lambda`)"))?;
            if m <= 0.0 {
                return Err(c.err("material.mu", format!("must be positive, got {m}")));
            }
            if !(3.0 * l + 2.0 * m > 0.0) {
                return Err(c.err(
                    "material.lambda",
                    format!("needs 3λ + 2μ > 0 (positive bulk modulus), got λ = {l}"),
                ));
            }
            // E = μ(3λ + 2μ)/(λ + μ), ν = λ / (2(λ + μ))
            Material::new(
                m * (3.0 * l + 2.0 * m) / (l + m),
                l / (2.0 * (l + m)),
                density.unwrap_or(0.0),
            )
        };

        // fixed regions
        let mut selector_keys = Vec::new();
        let mut fixed = Vec::new();
        for (i, t) in c.array_of_tables(&root, "fixed")?.into_iter().enumerate() {
            let path = format!("fixed[{i}]");
            c.keys(t, &path, &["selector", "components", "displacement"])?;
            let selector = parse_selector(&c, t, &path)?;
            let mut components = [true; 3];
            if let Some(v) = t.get("components") {
                let key = join(&path, "components");
                let arr = v.as_array().ok_or_else(|| {
                    c.err(
                        &key,
                        format!(
                            "expected an array such as [\"x\", \"z\"], found {}",
                            v.type_str()
                        ),
                    )
                })?;
                if arr.is_empty() {
                    return Err(c.err(&key, "must name at least one component"));
                }
                components = [false; 3];
                for (j, s) in arr.iter().enumerate() {
                    let k = match s.as_str() {
                        Some("x") => 0,
                        Some("y") => 1,
                        Some("z") => 2,
                        _ => {
                            return Err(
                                c.err(&format!("{key}[{j}]"), "expected \"x\", \"y\" or \"z\"")
                            )
                        }
                    };
                    components[k] = true;
                }
            }
            let displacement = c.vec3(t, &path, "displacement")?.unwrap_or([0.0; 3]);
            selector_keys.push((join(&path, "selector"), selector.clone()));
            fixed.push(FixedRegion {
                selector,
                components,
                displacement,
            });
        }
        if fixed.is_empty() {
            return Err(c.err("fixed", "missing: at least one [[fixed]] region is needed, otherwise the problem is singular (rigid-body modes)"));
        }

        // loads
        let mut loads = Vec::new();
        for (i, t) in c.array_of_tables(&root, "loads")?.into_iter().enumerate() {
            let path = format!("loads[{i}]");
            let ty = c.string(t, &path, "type")?.ok_or_else(|| {
                c.err(
                    &join(&path, "type"),
                    "missing (traction, pressure or gravity)",
                )
            })?;
            let load = match ty {
                "traction" => {
                    c.keys(t, &path, &["type", "selector", "traction"])?;
                    Load::Traction {
                        selector: parse_selector(&c, t, &path)?,
                        traction: c.req_vec3(t, &path, "traction")?,
                    }
                }
                "pressure" => {
                    c.keys(t, &path, &["type", "selector", "pressure"])?;
                    Load::Pressure {
                        selector: parse_selector(&c, t, &path)?,
                        pressure: c.req_num(t, &path, "pressure")?,
                    }
                }
                "gravity" => {
                    c.keys(t, &path, &["type", "acceleration"])?;
                    let g = if units_mm { 9810.0 } else { 9.81 };
                    Load::Gravity {
                        acceleration: c.vec3(t, &path, "acceleration")?.unwrap_or([0.0, 0.0, -g]),
                    }
                }
                other => {
                    return Err(c.err(
                        &join(&path, "type"),
                        format!("unknown load type `{other}` (traction, pressure or gravity)"),
                    ))
                }
            };
            match &load {
                Load::Traction { selector, .. } | Load::Pressure { selector, .. } => {
                    selector_keys.push((join(&path, "selector"), selector.clone()))
                }
                Load::Gravity { .. } => {
                    if material.density <= 0.0 {
                        return Err(c.err(&path, "gravity needs a positive `material.density`"));
                    }
                }
            }
            loads.push(load);
        }

        // solver
        let mut solver = SolverSpec {
            method: SolverMethod::Pcg,
            preconditioner: None,
            tolerance: 1e-8,
            max_iterations: 20_000,
            multigrid: tessera_solve::PmgParams::default(),
        };
        if let Some(s) = c.table(&root, "", "solver")? {
            c.keys(
                s,
                "solver",
                &[
                    "method",
                    "preconditioner",
                    "tolerance",
                    "max_iterations",
                    "amg",
                ],
            )?;
            if let Some(pk) = c.string(s, "solver", "preconditioner")? {
                solver.preconditioner = Some(PreconditionerKind::parse(pk).ok_or_else(|| {
                    c.err(
                        "solver.preconditioner",
                        format!("unknown preconditioner `{pk}` (block-jacobi, amg or pmg)"),
                    )
                })?);
            }
            if let Some(t) = c.table(s, "solver", "amg")? {
                solver.multigrid = parse_multigrid(&c, t)?;
            }
            if let Some(m) = c.string(s, "solver", "method")? {
                solver.method = match m {
                    "pcg" => SolverMethod::Pcg,
                    "cholesky" => SolverMethod::Cholesky,
                    o => {
                        return Err(c.err(
                            "solver.method",
                            format!("unknown method `{o}` (pcg or cholesky)"),
                        ))
                    }
                };
            }
            if let Some(tol) = c.num(s, "solver", "tolerance")? {
                if !(tol > 0.0 && tol < 1.0) {
                    return Err(c.err("solver.tolerance", format!("must be in (0, 1), got {tol}")));
                }
                solver.tolerance = tol;
            }
            if let Some(n) = c.int(s, "solver", "max_iterations")? {
                if n < 1 {
                    return Err(c.err(
                        "solver.max_iterations",
                        format!("must be at least 1, got {n}"),
                    ));
                }
                solver.max_iterations = n as usize;
            }
        }
        Ok(Problem {
            title,
            mesh,
            order: order as usize,
            units_mm,
            material,
            fixed,
            loads,
            solver,
            selector_keys,
        })
    }
}
