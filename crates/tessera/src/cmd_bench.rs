//! `tessera bench ...`: benchmarks. Each prints the dissertation's figure, ours, and the floor.

use clap::{Args, Subcommand};

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    cmd: BenchCmd,
}

#[derive(Subcommand, Debug)]
enum BenchCmd {
    /// Mesh operations (dissertation Tables 3.1-3.4).
    Mesh(crate::bench_mesh::BenchMeshArgs),
    /// FEM assembly (dissertation Tables 4.1-4.3).
    Fem(crate::bench_fem::BenchFemArgs),
    /// The mesh matrix with action maps (seed 004 Tables 2-5): SpMV, normals, slicing, surface Catmull-Clark, Laplacians.
    Meshmatrix(crate::bench_meshmatrix::BenchMeshMatrixArgs),
    /// The static solve end to end: load, preprocess, assemble, PCG (dissertation §4.1).
    FemSolve(crate::bench_fem_solve::BenchFemSolveArgs),
    /// Shallow water on active tiles: cell updates/s against the bandwidth floor (§6.3.5).
    ShallowWater(crate::bench_shallow_water::BenchSwArgs),
    /// Cut-cell fluid: time per step (2D/3D) and the multigrid pressure solve vs its floor.
    Flow(crate::bench_flow::BenchFlowArgs),
    /// Domain decomposition: edge cut, imbalance and halo DOFs per domain (§7.1.2).
    Partition(crate::bench_partition::BenchPartitionArgs),
}

pub fn run(a: BenchArgs) -> anyhow::Result<()> {
    match a.cmd {
        BenchCmd::Mesh(a) => crate::bench_mesh::run(a),
        BenchCmd::Fem(a) => crate::bench_fem::run(a),
        BenchCmd::FemSolve(a) => crate::bench_fem_solve::run(a),
        BenchCmd::ShallowWater(a) => crate::bench_shallow_water::run(a),
        BenchCmd::Meshmatrix(a) => crate::bench_meshmatrix::run(a),
        BenchCmd::Flow(a) => crate::bench_flow::run(a),
        BenchCmd::Partition(a) => crate::bench_partition::run(a),
    }
}
