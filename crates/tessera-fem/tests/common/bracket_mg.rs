//! The bracket problem of the demo and its multigrid hierarchies, shared by the CPU and GPU
//! multigrid tests.

use std::path::Path;
use tessera_fem::multigrid::degree_elevation;
use tessera_fem::problem::Problem;
use tessera_fem::static_solve::{assemble_cpu, load_stage, preprocess, Prepared, StaticOptions};
use tessera_solve::amg::AmgParams;
use tessera_solve::blockcsr::BlockCsr;
use tessera_solve::pmg::{PMultigrid, PmgParams};
use tessera_solve::Amg;
use tessera_sparse::binbcsr::BinBcsr;

/// The demo's bracket problem (bolt holes fixed, traction on the load hole) at resolution
/// `r` and order `p`, without a `[solver]` table.
pub fn bracket_text(r: usize, p: usize) -> String {
    let g = tessera_mesh::generate::bracket_geometry(r);
    let h = g.voxel_size;
    let mut t = format!(
        "order = {p}\n[mesh]\ngenerate = {{ bracket = {r} }}\n[material]\npreset = \"Ti-6Al-4V\"\n"
    );
    for c in g.bolt_hole_centres {
        t += &format!(
            "[[fixed]]\nselector = {{ type = \"cylinder\", point = [{:?}, {:?}, 0.0], axis = [0, 0, 1], radius = {:?}, tolerance = {h:?} }}\n",
            c[0], c[1], g.bolt_hole_radius
        );
    }
    let c = g.load_hole_centre;
    t += &format!(
        "[[loads]]\ntype = \"traction\"\nselector = {{ type = \"cylinder\", point = [{:?}, {:?}, {:?}], axis = [0, 1, 0], radius = {:?}, tolerance = {h:?} }}\ntraction = [0.0, 0.0, -20.0]\n",
        c[0], c[1], c[2], g.load_hole_radius
    );
    t
}

pub fn bracket(r: usize, p: usize) -> Problem {
    Problem::parse(&bracket_text(r, p), "bracket.toml", Path::new(".")).unwrap()
}

/// The discrete problem and its stiffness matrix.
pub fn discretize(pr: &Problem) -> (Prepared, BinBcsr<f64>) {
    let opts = StaticOptions {
        device: tessera_core::DeviceChoice::Cpu,
        ..Default::default()
    };
    let loaded = load_stage(pr, &opts).unwrap();
    let prep = preprocess(pr, loaded.mesh).unwrap();
    let k = assemble_cpu(pr, &prep.ho, &opts).unwrap().matrix;
    (prep, k)
}

pub fn amg_of(prep: &Prepared, k: &BinBcsr<f64>, params: &AmgParams) -> Amg {
    let abar = BlockCsr::from_binbcsr_filtered(k, &prep.constraints.fixed).unwrap();
    Amg::setup(
        abar,
        &prep.constraints.fixed,
        &prep.ho.node_positions(),
        params,
    )
    .unwrap()
}

pub fn pmg_of<'a>(
    prep: &'a Prepared,
    k: &'a BinBcsr<f64>,
    params: &PmgParams,
) -> PMultigrid<'a, BinBcsr<f64>> {
    let abar = BlockCsr::from_binbcsr_filtered(k, &prep.constraints.fixed).unwrap();
    let prol = degree_elevation(&prep.ho).unwrap();
    let nv = prol.ncols;
    PMultigrid::setup(
        k,
        &prep.constraints,
        &abar,
        &prol,
        &prep.constraints.fixed[..3 * nv],
        &prep.ho.mesh().positions()[..nv],
        params,
    )
    .unwrap()
}
