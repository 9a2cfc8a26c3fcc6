//! `tessera query ...`: the query compiler for derived fields (dissertation §6.3.4, §6.4.3).
//!
//! - `tessera query eval EXPR --field NAME=PATH... --out PATH [--backend interp|cpu-jit|gpu]
//!   [--precision f32|f64]`: fields are raw little-endian arrays of equal length; the result
//!   is written in the same format (atomically: temporary file, then rename).
//! - `tessera query bench`: Tables 6.2-6.4 on 1024² and 4096² grids.

use anyhow::{anyhow, bail, Context};
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};
use tessera_query::{Backend, Par, Precision, Query};

#[derive(Args, Debug)]
pub struct QueryArgs {
    #[command(subcommand)]
    cmd: QueryCmd,
}

#[derive(Subcommand, Debug)]
enum QueryCmd {
    /// Evaluate an expression over fields stored as raw little-endian arrays.
    Eval(EvalArgs),
    /// Reproduce dissertation §6.4.3 (Tables 6.2-6.4) for interpreter, CPU JIT and GPU JIT.
    Bench(BenchArgs),
}

#[derive(Args, Debug)]
struct EvalArgs {
    /// The expression, e.g. 'sqrt(VelocityX^2+VelocityY^2)'.
    expr: String,
    /// A field as NAME=PATH (repeatable); the file holds raw little-endian f32 or f64 values.
    #[arg(long = "field", value_name = "NAME=PATH")]
    fields: Vec<String>,
    /// Output file (raw little-endian, same precision).
    #[arg(long)]
    out: PathBuf,
    /// interp | cpu-jit | gpu
    #[arg(long, default_value = "cpu-jit")]
    backend: Backend,
    /// f32 | f64
    #[arg(long, default_value = "f32")]
    precision: Precision,
}

#[derive(Args, Debug)]
struct BenchArgs {
    /// Grid edge lengths.
    #[arg(long, value_delimiter = ',', default_value = "1024,4096")]
    sizes: Vec<usize>,
    /// Timed repetitions per measurement (median).
    #[arg(long, default_value_t = 21)]
    reps: usize,
    /// Skip the GPU even if one is present.
    #[arg(long)]
    no_gpu: bool,
}

pub fn run(a: QueryArgs) -> anyhow::Result<()> {
    match a.cmd {
        QueryCmd::Eval(e) => eval(e),
        QueryCmd::Bench(b) => {
            let opts = tessera_query::bench::BenchOptions {
                sizes: b.sizes,
                reps: b.reps,
                gpu: !b.no_gpu,
            };
            let report =
                tessera_query::bench::run(&opts).map_err(|e| anyhow!("query bench: {e}"))?;
            print!("{report}");
            Ok(())
        }
    }
}

fn read_raw(path: &Path, size: usize) -> anyhow::Result<Vec<u8>> {
    let b = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    if b.len() % size != 0 {
        bail!(
            "{}: {} bytes is not a whole number of {}-byte values",
            path.display(),
            b.len(),
            size
        );
    }
    Ok(b)
}

fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| anyhow!("--out {} has no file name", path.display()))?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        anyhow!("renaming {} to {}: {e}", tmp.display(), path.display())
    })
}

fn eval(a: EvalArgs) -> anyhow::Result<()> {
    let mut names = Vec::new();
    let mut paths = Vec::new();
    for f in &a.fields {
        let (n, p) = f
            .split_once('=')
            .ok_or_else(|| anyhow!("--field `{f}`: expected NAME=PATH"))?;
        names.push(n.to_string());
        paths.push(PathBuf::from(p));
    }
    let name_refs: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
    let q = Query::compile(&a.expr, &name_refs).map_err(|e| anyhow!("query `{}`: {e}", a.expr))?;
    let size = a.precision.bytes();
    let raw: Vec<Vec<u8>> = paths
        .iter()
        .map(|p| read_raw(p, size))
        .collect::<anyhow::Result<_>>()?;
    let n = raw.first().map_or(0, |r| r.len() / size);
    for (r, p) in raw.iter().zip(&paths) {
        if r.len() / size != n {
            bail!(
                "{} has {} values, {} has {n}: fields must have equal length",
                p.display(),
                r.len() / size,
                paths[0].display()
            );
        }
    }
    if raw.is_empty() && !q.used_fields().is_empty() {
        bail!("no --field given");
    }
    let bytes = match a.precision {
        Precision::F32 => to_bytes(
            &run_typed::<f32>(&q, &raw, n, a.backend, |b| {
                f32::from_le_bytes(b.try_into().unwrap())
            })?,
            |v| v.to_le_bytes().to_vec(),
        ),
        Precision::F64 => to_bytes(
            &run_typed::<f64>(&q, &raw, n, a.backend, |b| {
                f64::from_le_bytes(b.try_into().unwrap())
            })?,
            |v| v.to_le_bytes().to_vec(),
        ),
    };
    write_atomic(&a.out, &bytes)
}

fn to_bytes<T: Copy>(v: &[T], f: impl Fn(T) -> Vec<u8>) -> Vec<u8> {
    v.iter().flat_map(|&x| f(x)).collect()
}

fn run_typed<T: tessera_query::Real + tessera_gpu::Element>(
    q: &Query,
    raw: &[Vec<u8>],
    n: usize,
    backend: Backend,
    conv: impl Fn(&[u8]) -> T,
) -> anyhow::Result<Vec<T>> {
    let size = std::mem::size_of::<T>();
    let cols: Vec<Vec<T>> = raw
        .iter()
        .map(|r| r.chunks_exact(size).map(&conv).collect())
        .collect();
    let refs: Vec<&[T]> = cols.iter().map(|c| c.as_slice()).collect();
    let mut out = vec![T::zero(); n];
    match backend {
        Backend::Gpu => {
            let g = tessera_gpu::Gpu::probe().map_err(|e| anyhow!("--backend gpu: {e}"))?;
            let dev = cols
                .iter()
                .map(|c| g.upload(c))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| anyhow!("{e}"))?;
            let drefs: Vec<_> = dev.iter().collect();
            let mut dout = g.alloc::<T>(n).map_err(|e| anyhow!("{e}"))?;
            q.eval_gpu(&g, &drefs, &mut dout)
                .map_err(|e| anyhow!("{e}"))?;
            out = g.download(&dout).map_err(|e| anyhow!("{e}"))?;
        }
        b => q
            .eval_cpu_with(b, Par::auto(), &refs, &mut out)
            .map_err(|e| anyhow!("{e}"))?,
    }
    Ok(out)
}
