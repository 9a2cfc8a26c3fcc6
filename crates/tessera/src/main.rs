//! `tessera`: the command-line program. `tessera demo` runs the main job.
//!
//! Each command family lives in its own module (`cmd_*.rs`); benchmarks live under
//! `tessera bench` (`bench_*.rs`).

mod bench_fem;
mod bench_fem_solve;
mod bench_flow;
mod bench_mesh;
mod bench_meshmatrix;
mod bench_partition;
mod bench_shallow_water;
mod cmd_bench;
mod cmd_demo;
mod cmd_fem;
mod cmd_flow;
mod cmd_mesh;
mod cmd_mesh_matrix;
mod cmd_mesh_partition;
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
    /// Memory budget for size checks before work (e.g. 12G, 512MiB; default: the memory
    /// available: MemAvailable, cgroup and ulimit -v limits). Also TESSERA_MAX_MEMORY.
    #[arg(long, global = true, value_name = "SIZE")]
    max_memory: Option<String>,
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
    // A closed stdout (`tessera mesh info F | head -1`) ends the program quietly by SIGPIPE
    // (status 141 in a shell), as for any Unix filter, instead of a panic in println!.
    // Sockets are unaffected (the standard library sends with MSG_NOSIGNAL).
    // SAFETY: restores the default disposition of one signal before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // Ctrl-C / SIGTERM remove the temporary files of writes in progress.
    tessera_core::atomic::cleanup_on_signals();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => exit_usage(e),
    };
    // `--json` output stays machine-readable: no spinners or bars on stderr either
    util::set_quiet(std::env::args().any(|a| a == "--json"));
    if let Some(m) = &cli.max_memory {
        match tessera_core::memory::parse_size(m) {
            Ok(b) => tessera_core::memory::set_max_memory(Some(b)),
            Err(e) => {
                eprintln!("error: --max-memory: {e}");
                std::process::exit(2);
            }
        }
    }
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
        eprintln!("error: {}", one_line(&e));
        std::process::exit(1);
    }
}

/// Longest error line printed (characters).
const MAX_ERROR_LINE: usize = 1000;

/// A command-line error as clap words it, each line clipped: clap echoes the offending
/// argument, which may be any length (an unknown 100 KB argument is not printed whole).
/// Help and version requests print and exit as usual.
fn exit_usage(e: clap::Error) -> ! {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        e.exit()
    }
    let text = e.render().to_string();
    let mut out = String::new();
    for line in text.lines() {
        out.push_str(&tessera_core::error::clip(line, MAX_ERROR_LINE));
        out.push('\n');
    }
    eprint!("{out}");
    std::process::exit(e.exit_code())
}

/// An error and its causes on one line of bounded length, each fact once: a cause whose
/// text the line already holds (a wrapper that repeats its source) is left out, and so is
/// the `(os error N)` suffix of operating-system errors.
fn one_line(e: &anyhow::Error) -> String {
    let mut msg = String::new();
    for cause in e.chain() {
        let s = tessera_core::error::os_message_str(&cause.to_string())
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        if s.is_empty() || msg.contains(&s) {
            continue;
        }
        if !msg.is_empty() {
            msg.push_str(": ");
        }
        msg.push_str(&s);
    }
    tessera_core::error::clip(&msg, MAX_ERROR_LINE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("mesh: {0}")]
    struct Wrap(#[source] std::io::Error);

    #[test]
    fn each_fact_once_on_one_bounded_line() {
        let io = std::io::Error::from_raw_os_error(21);
        let e = anyhow::Error::new(Wrap(io)).context("cannot write out/x.vtu");
        let s = one_line(&e);
        assert_eq!(s, "cannot write out/x.vtu: mesh: Is a directory");
        let long = anyhow::anyhow!("{}", "x\ny ".repeat(5000));
        let s = one_line(&long);
        assert!(
            s.chars().count() < MAX_ERROR_LINE + 40 && !s.contains('\n'),
            "{s}"
        );
    }
}
