//! The code generator (dissertation §5.3.2): a minijinja template renders the CUDA source of
//! the SpMV for one entry specification, precision and layout, with one kernel per requested
//! schedule. Rendering is deterministic (DESIGN.md principle 4), so the source can be hashed
//! for the kernel cache and snapshot-tested without a GPU.

use minijinja::{context, Environment};
use serde::Serialize;

use crate::entry::{aos_alignment, EntrySpec};
use crate::error::{Result, SpmvError};
use crate::layout::{Aos, Layout, Outer};
use crate::scalar::Precision;
use crate::schedule::Schedule;

const TEMPLATE: &str = include_str!("../templates/spmv.cu.j2");

#[derive(Serialize)]
struct TermCtx {
    op: &'static str,
    coef: String,
    a: String,
    x: String,
}
#[derive(Serialize)]
struct OutCtx {
    name: String,
    zero: String,
    terms: Vec<TermCtx>,
}
#[derive(Serialize)]
struct SchedCtx {
    kind: String,
    n_b: u32,
    n_t: u32,
    name: String,
}

/// A CUDA literal for `v` in `precision` (shortest round-trip decimal, `f` suffix for f32).
fn literal(v: f64, p: Precision) -> String {
    let mut s = format!("{v:?}");
    if !s.contains('.') && !s.contains('e') && !s.contains("inf") && !s.contains("NaN") {
        s.push_str(".0");
    }
    if p == Precision::F32 {
        s.push('f');
    }
    s
}

/// Renders the CUDA source for `spec` in `precision` and `layout` with one
/// `extern "C"` kernel per schedule, named [`Schedule::kernel_name`].
pub fn generate(
    spec: &EntrySpec,
    precision: Precision,
    layout: Layout,
    schedules: &[Schedule],
) -> Result<String> {
    let mut env = Environment::new();
    env.set_keep_trailing_newline(true);
    env.add_template("spmv.cu", TEMPLATE)
        .map_err(|e| SpmvError::Template(e.to_string()))?;
    let tmpl = env
        .get_template("spmv.cu")
        .map_err(|e| SpmvError::Template(e.to_string()))?;
    let out: Vec<OutCtx> = spec
        .vector_fields
        .iter()
        .enumerate()
        .map(|(o, name)| OutCtx {
            name: name.clone(),
            zero: literal(spec.zero[o], precision),
            terms: spec.multiply[o]
                .iter()
                .map(|t| {
                    let (op, coef) = if t.coef == 1.0 {
                        ("+=", String::new())
                    } else if t.coef == -1.0 {
                        ("-=", String::new())
                    } else {
                        ("+=", format!("(real){} * ", literal(t.coef, precision)))
                    };
                    TermCtx {
                        op,
                        coef,
                        a: spec.matrix_fields[t.a].clone(),
                        x: spec.vector_fields[t.x].clone(),
                    }
                })
                .collect(),
        })
        .collect();
    let scheds: Vec<SchedCtx> = schedules
        .iter()
        .map(|s| SchedCtx {
            kind: s.kind.to_string(),
            n_b: s.n_b,
            n_t: s.n_t,
            name: s.kernel_name(),
        })
        .collect();
    let (outer, k) = match layout.outer {
        Outer::Csr => ("csr", 0),
        Outer::Ell => ("ell", 0),
        Outer::Sell(k) => ("sell", k),
    };
    let aos = |a: Aos| if a == Aos::Aos { "aos" } else { "soa" };
    let mbytes = spec.matrix_bytes(precision);
    let vbytes = spec.vector_bytes(precision);
    tmpl.render(context! {
        entry => spec.name,
        precision => precision.name(),
        real => precision.cuda_type(),
        layout => layout.to_string(),
        paper_layout => layout.paper_name(),
        mfields => spec.matrix_fields,
        vfields => spec.vector_fields,
        mbytes => mbytes,
        vbytes => vbytes,
        malign => aos_alignment(mbytes),
        valign => aos_alignment(vbytes),
        outer => outer,
        k => k,
        inner => aos(layout.inner),
        vector => aos(layout.vector),
        out => out,
        schedules => scheds,
    })
    .map_err(|e| SpmvError::Template(e.to_string()))
}
