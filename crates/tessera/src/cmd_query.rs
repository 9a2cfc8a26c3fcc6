//! `tessera query ...`: the query compiler for derived fields (dissertation §6.3.4, §6.4.3).
//!
//! - `tessera query eval EXPR (--input FILE.vtu | --field NAME=PATH...) -o OUT
//!   [--backend interp|cpu-jit|gpu] [--precision f32|f64]`: fields are the point or cell
//!   arrays of a `.vtu` (`DisplacementX`, `StressXX`, `VonMises`, ...), or `.npy` files, or
//!   raw little-endian arrays of a stated precision; the result is added to the `.vtu` as a
//!   new array, or written as `.npy` or raw values (atomically).
//! - `tessera query bench`: Tables 6.2-6.4 on 1024² and 4096² grids.

use anyhow::{anyhow, bail};
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
    /// Evaluate an expression over the fields of a result file (.vtu) or of .npy/raw arrays.
    Eval(EvalArgs),
    /// Reproduce dissertation §6.4.3 (Tables 6.2-6.4) for interpreter, CPU JIT and GPU JIT.
    Bench(BenchArgs),
}

#[derive(Args, Debug)]
struct EvalArgs {
    /// The expression, e.g. 'sqrt(DisplacementX^2+DisplacementY^2+DisplacementZ^2)'
    /// (it may start with a minus sign: '-p + 1').
    #[arg(allow_hyphen_values = true)]
    expr: String,
    /// A .vtu file (such as `fem solve` results) whose point or cell arrays are the fields:
    /// scalar arrays by name (VonMises), components as name + component (DisplacementX,
    /// StressXX).
    #[arg(long, short = 'i', value_name = "FILE.vtu")]
    input: Option<PathBuf>,
    /// A field as NAME=PATH (repeatable): a .npy file (typed), or raw little-endian values
    /// (then --precision says their type).
    #[arg(long = "field", value_name = "NAME=PATH")]
    fields: Vec<String>,
    /// Output: .vtu (the --input file with the result added as an array), .npy, or any
    /// other name for raw little-endian values.
    #[arg(long, short = 'o', visible_alias = "out")]
    output: PathBuf,
    /// Name of the result array in a .vtu output.
    #[arg(long, default_value = "Result")]
    name: String,
    /// Evaluate over point or cell data of the --input (default: where the expression's
    /// fields are).
    #[arg(long, value_enum)]
    at: Option<At>,
    /// interp | cpu-jit | gpu
    #[arg(long, default_value = "cpu-jit")]
    backend: Backend,
    /// Evaluation precision f32 | f64 (default: f64 for .vtu, the files' own type for .npy);
    /// the type of raw field files, which have no header.
    #[arg(long)]
    precision: Option<Precision>,
    /// Write a .vtu output's arrays as ASCII text.
    #[arg(long)]
    ascii: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum At {
    Point,
    Cell,
}

#[derive(Args, Debug)]
struct BenchArgs {
    /// Grid edge lengths.
    #[arg(long, value_delimiter = ',', default_value = "1024,4096")]
    sizes: Vec<usize>,
    /// Timed repetitions per measurement (median).
    #[arg(long, default_value_t = 21)]
    reps: usize,
    /// auto (the GPU columns when a CUDA device is usable), cpu (CPU backends only) or
    /// cuda[:N].
    #[arg(long, default_value = "auto")]
    device: tessera_core::DeviceChoice,
    /// Skip the GPU even if one is present (the same as --device cpu).
    #[arg(long, hide = true)]
    no_gpu: bool,
}

pub fn run(a: QueryArgs) -> anyhow::Result<()> {
    match a.cmd {
        QueryCmd::Eval(e) => eval(e),
        QueryCmd::Bench(b) => {
            let opts = tessera_query::bench::BenchOptions {
                sizes: b.sizes,
                reps: b.reps,
                gpu: !b.no_gpu && b.device != tessera_core::DeviceChoice::Cpu,
            };
            let report =
                tessera_query::bench::run(&opts).map_err(|e| anyhow!("query bench: {e}"))?;
            print!("{report}");
            Ok(())
        }
    }
}

/// Where the output goes (checked before any work).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OutKind {
    Vtu,
    Npy,
    Raw,
}

fn ext_is(p: &Path, e: &str) -> bool {
    p.extension()
        .map(|x| x.to_string_lossy().eq_ignore_ascii_case(e))
        .unwrap_or(false)
}

fn out_kind(a: &EvalArgs) -> anyhow::Result<OutKind> {
    let k = if ext_is(&a.output, "vtu") {
        OutKind::Vtu
    } else if ext_is(&a.output, "npy") {
        OutKind::Npy
    } else {
        OutKind::Raw
    };
    if k == OutKind::Vtu && a.input.is_none() {
        bail!(
            "{}: a .vtu output adds the result to the --input .vtu; give --input or write .npy",
            a.output.display()
        );
    }
    if ext_is(&a.output, "gz") {
        bail!(
            "{}: outputs are not gzip-compressed (.vtu files are compressed inside)",
            a.output.display()
        );
    }
    crate::cmd_mesh::check_output_dir(&a.output)?;
    if a.output.is_dir() {
        bail!("{}: is a folder; give a file name", a.output.display());
    }
    Ok(k)
}

/// The fields of an evaluation: names and values (f64; converted to the precision later).
struct Inputs {
    names: Vec<String>,
    values: Vec<Vec<f64>>,
    /// the precision the inputs carry (None: mixed or unknown)
    native: Option<Precision>,
    /// the .vtu grid and the location evaluated over
    grid: Option<(tessera_mesh::io::VtuGrid, tessera_mesh::io::DataLocation)>,
}

/// Fields from a .vtu: compile against every identifier, then keep the used ones, all at
/// one location.
fn vtu_inputs(path: &Path, expr: &str, at: Option<At>) -> anyhow::Result<Inputs> {
    use tessera_mesh::io::DataLocation;
    let pb = crate::util::spinner(&format!("reading {}", path.display()));
    let g = tessera_mesh::io::read_vtu_grid(path);
    pb.finish_and_clear();
    let g = g?;
    let all = g.query_fields();
    let want_loc = at.map(|a| match a {
        At::Point => DataLocation::Point,
        At::Cell => DataLocation::Cell,
    });
    // names visible to the compiler: every identifier (point data first on a clash)
    let mut names: Vec<&str> = Vec::new();
    let mut chosen: Vec<&tessera_mesh::io::vtu::QueryField> = Vec::new();
    for f in &all {
        if want_loc.is_some_and(|l| l != f.location) {
            continue;
        }
        if !names.contains(&f.name.as_str()) {
            names.push(&f.name);
            chosen.push(f);
        }
    }
    let q = Query::compile(expr, &names).map_err(|e| {
        anyhow!(
            "query {} on {}: {e}",
            excerpt(expr, e.span()),
            path.display()
        )
    })?;
    let used: Vec<&tessera_mesh::io::vtu::QueryField> =
        q.used_fields().into_iter().map(|i| chosen[i]).collect();
    let loc = match (want_loc, used.first()) {
        (Some(l), _) => l,
        (None, Some(f)) => f.location,
        (None, None) => DataLocation::Point,
    };
    if let Some(f) = used.iter().find(|f| f.location != loc) {
        let side = |l: DataLocation| {
            if l == DataLocation::Point {
                "point"
            } else {
                "cell"
            }
        };
        bail!(
            "query {} mixes {} data ({}) with {} data ({}); one expression runs over points or over cells",
            excerpt(expr, None),
            side(loc),
            used[0].name,
            side(f.location),
            f.name
        );
    }
    Ok(Inputs {
        names: used.iter().map(|f| f.name.clone()).collect(),
        values: used.iter().map(|f| g.query_values(f)).collect(),
        native: Some(Precision::F64),
        grid: Some((g, loc)),
    })
}

/// Fields from NAME=PATH arguments: .npy typed, raw only with an explicit precision.
fn file_inputs(fields: &[String], precision: Option<Precision>) -> anyhow::Result<Inputs> {
    use tessera_query::fields::decode_field;
    use tessera_query::npy;
    let mut names = Vec::new();
    let mut values = Vec::new();
    let mut types = Vec::new();
    for f in fields {
        let (n, p) = f
            .split_once('=')
            .ok_or_else(|| anyhow!("--field `{f}`: expected NAME=PATH"))?;
        let path = Path::new(p);
        // a regular file within the memory budget (tessera_core::input)
        let bytes = tessera_core::input::read_file(path)?;
        let (v, t) = if npy::is_npy(&bytes) {
            let a = npy::parse_npy(path, &bytes)?;
            let t = match a.ty {
                npy::NpyType::F32 => Some(Precision::F32),
                npy::NpyType::F64 => Some(Precision::F64),
                _ => None,
            };
            (a.values, t)
        } else {
            let Some(prec) = precision else {
                bail!(
                    "{}: a raw file has no type; give --precision f32|f64, or use a .npy file (numpy.save)",
                    path.display()
                );
            };
            let v: Vec<f64> = match prec {
                Precision::F32 => decode_field::<f32>(path, &bytes)?
                    .into_iter()
                    .map(f64::from)
                    .collect(),
                Precision::F64 => decode_field::<f64>(path, &bytes)?,
            };
            (v, Some(prec))
        };
        names.push(n.to_string());
        values.push(v);
        types.push(t);
    }
    let native = match types.first() {
        Some(&t) if types.iter().all(|&x| x == t) => t,
        _ => None,
    };
    Ok(Inputs {
        names,
        values,
        native,
        grid: None,
    })
}

fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    Ok(tessera_core::atomic::write_bytes(path, bytes)?)
}

/// A clipped excerpt of an expression for an error line: the whole text when short, else
/// about 60 characters around the error's span with `...` where text was left out.
fn excerpt(expr: &str, span: Option<tessera_query::Span>) -> String {
    const WIDTH: usize = 60;
    let chars: Vec<(usize, char)> = expr.char_indices().collect();
    let clean = |s: &[(usize, char)]| -> String {
        s.iter()
            .map(|&(_, c)| if c.is_control() { ' ' } else { c })
            .collect()
    };
    if chars.len() <= WIDTH {
        return format!("`{}`", clean(&chars));
    }
    let at = span.map_or(0, |s| s.start);
    let centre = chars.partition_point(|&(i, _)| i < at);
    let start = centre.saturating_sub(WIDTH / 3).min(chars.len() - WIDTH);
    let end = start + WIDTH;
    format!(
        "`{}{}{}` ({} characters)",
        if start > 0 { "..." } else { "" },
        clean(&chars[start..end]),
        if end < chars.len() { "..." } else { "" },
        chars.len()
    )
}

fn eval(a: EvalArgs) -> anyhow::Result<()> {
    let kind = out_kind(&a)?;
    if a.input.is_some() && !a.fields.is_empty() {
        bail!("give either --input FILE.vtu or --field NAME=PATH, not both");
    }
    let inputs = match &a.input {
        Some(p) => {
            if !ext_is(p, "vtu") {
                bail!(
                    "{}: --input reads .vtu files (VTK unstructured grids)",
                    p.display()
                );
            }
            vtu_inputs(p, &a.expr, a.at)?
        }
        None => {
            if a.at.is_some() {
                bail!("--at chooses point or cell data of an --input .vtu");
            }
            file_inputs(&a.fields, a.precision)?
        }
    };
    let name_refs: Vec<&str> = inputs.names.iter().map(|s| s.as_str()).collect();
    let q = Query::compile(&a.expr, &name_refs)
        .map_err(|e| anyhow!("query {}: {e}", excerpt(&a.expr, e.span())))?;
    if !q.used_fields().is_empty() && inputs.values.is_empty() {
        bail!("no fields given: use --input FILE.vtu or --field NAME=PATH");
    }
    let n = match &inputs.grid {
        Some((g, loc)) => match loc {
            tessera_mesh::io::DataLocation::Point => g.num_points(),
            _ => g.num_cells(),
        },
        None => inputs.values.first().map_or(0, |v| v.len()),
    };
    for (v, name) in inputs.values.iter().zip(&inputs.names) {
        if v.len() != n {
            bail!(
                "field `{name}` has {} values, `{}` has {n}: fields must have equal length",
                v.len(),
                inputs.names[0]
            );
        }
    }
    let precision = a.precision.or(inputs.native).unwrap_or(Precision::F64);
    let result: Vec<f64> = match precision {
        Precision::F32 => {
            let cols: Vec<Vec<f32>> = inputs
                .values
                .iter()
                .map(|v| v.iter().map(|&x| x as f32).collect())
                .collect();
            run_typed::<f32>(&q, &cols, n, a.backend)?
                .into_iter()
                .map(|x| x as f64)
                .collect()
        }
        Precision::F64 => run_typed::<f64>(&q, &inputs.values, n, a.backend)?,
    };
    match kind {
        OutKind::Vtu => {
            let (mut g, loc) = inputs.grid.expect("checked: a .vtu output needs --input");
            let mut arr = tessera_mesh::io::DataArray::new(&a.name, loc, 1, result);
            if precision == Precision::F32 {
                arr = arr.with_type(tessera_mesh::io::NumType::Float32);
            }
            g.set_array(arr);
            let enc = if a.ascii {
                tessera_mesh::io::VtuEncoding::Ascii
            } else {
                tessera_mesh::io::VtuEncoding::default()
            };
            tessera_mesh::io::write_vtu_grid(&a.output, &g, enc)?;
        }
        OutKind::Npy => {
            let ty = match precision {
                Precision::F32 => tessera_query::npy::NpyType::F32,
                Precision::F64 => tessera_query::npy::NpyType::F64,
            };
            write_atomic(&a.output, &tessera_query::npy::npy_bytes(&result, ty))?;
        }
        OutKind::Raw => {
            let bytes: Vec<u8> = match precision {
                Precision::F32 => result
                    .iter()
                    .flat_map(|&x| (x as f32).to_le_bytes())
                    .collect(),
                Precision::F64 => result.iter().flat_map(|&x| x.to_le_bytes()).collect(),
            };
            write_atomic(&a.output, &bytes)?;
        }
    }
    Ok(())
}

fn run_typed<T: tessera_query::Real + tessera_gpu::Element>(
    q: &Query,
    cols: &[Vec<T>],
    n: usize,
    backend: Backend,
) -> anyhow::Result<Vec<T>> {
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
