//! `tessera`: the command-line program. `tessera demo` runs the main job.
//!
//! Each command family lives in its own module (`cmd_*.rs`); benchmarks live under
//! `tessera bench` (`bench_*.rs`).

mod bench_fem;
mod bench_fem_solve;
mod bench_flow;
mod bench_mesh;
mod bench_meshmatrix;
mod bench_shallow_water;
mod cmd_bench;
mod cmd_demo;
mod cmd_fem;
mod cmd_flow;
mod cmd_mesh;
mod cmd_mesh_matrix;
mod cmd_query;
mod cmd_render;
mod cmd_serve;
mod cmd_spmv;
mod cmd_stream;
mod device;
mod util;

use clap::{Parser, Subcommand};

/// Tessera: GPU data structures for modeling, simulation and visualization.
#[derive(Parser, Debug)]
#[command(name = "tessera", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// The main job: generate a bracket, process it and write results into ./tessera-demo/.
    Demo(cmd_demo::DemoArgs),
    /// Volumetric mesh commands (info, convert, boundary, smooth, generate, ...).
    Mesh(cmd_mesh::MeshArgs),
    /// Higher-order simplex FEM: assembly into Bin-BCSR* (dissertation Chapter 4).
    Fem(cmd_fem::FemArgs),
    /// Benchmarks that print the dissertation's figures beside ours and the hardware floor.
    Bench(cmd_bench::BenchArgs),
    /// SpMV code generator and joint schedule/layout autotuner for compound entries (dissertation Chapter 5).
    Spmv(cmd_spmv::SpmvArgs),
    /// Cut-cell fluid with Galerkin-consistent multigrid (dissertation §6.3.2): run scenes, manufactured Poisson problems.
    Flow(cmd_flow::FlowArgs),
    /// Derived-field queries: evaluate expressions (interp | cpu-jit | gpu) and benchmark them.
    Query(cmd_query::QueryArgs),
    /// The streaming server: a simulation streamed to browsers with pull flow control (dissertation §6.3).
    Serve(cmd_serve::ServeArgs),
    /// Streaming clients and benchmarks (dissertation §6.4.1-6.4.2).
    Stream(cmd_stream::StreamArgs),
    /// Hybrid remote rendering with rixels: encode a frame of a 3D scene, benchmarks (§6.3.5).
    Render(cmd_render::RenderArgs),
}

fn main() {
    let cli = Cli::parse();
    // `--json` output stays machine-readable: no spinners or bars on stderr either
    util::set_quiet(std::env::args().any(|a| a == "--json"));
    let res = match cli.cmd {
        Cmd::Demo(a) => cmd_demo::run(a),
        Cmd::Mesh(a) => cmd_mesh::run(a),
        Cmd::Fem(a) => cmd_fem::run(a),
        Cmd::Bench(a) => cmd_bench::run(a),
        Cmd::Spmv(a) => cmd_spmv::run(a),
        Cmd::Query(a) => cmd_query::run(a),
        Cmd::Flow(a) => cmd_flow::run(a),
        Cmd::Serve(a) => cmd_serve::run(a),
        Cmd::Stream(a) => cmd_stream::run(a),
        Cmd::Render(a) => cmd_render::run(a),
    };
    if let Err(e) = res {
        // one clear line (DESIGN.md principle 6)
        let msg = format!("{e:#}").replace('\n', " ");
        eprintln!("error: {msg}");
        std::process::exit(1);
    }
}
