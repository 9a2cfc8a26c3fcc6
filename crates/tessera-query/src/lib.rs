//! Query compiler for derived fields (dissertation §6.3.4, evaluated in §6.4.3).
//!
//! Users type expressions over the named result fields of a running simulation, such as
//! `sqrt(VelocityX^2+VelocityY^2)`; Tessera evaluates them where the data lives, so only the
//! derived field crosses PCIe and the network.
//!
//! Pipeline: [`parser`] (byte spans, limits) -> syntax tree ([`ast`]) -> normalized [`ir`]
//! (constant folding, CSE, `x^n` strength reduction, dead-code removal; hashed for the
//! cache) -> one of three back ends that compute the same function:
//! 1. [`interp`]: chunked register-bytecode interpreter (the baseline of Table 6.2);
//! 2. [`jit`]: Cranelift CPU JIT with a 128-bit SIMD loop;
//! 3. [`ptx`]: PTX text emitted directly from the IR, loaded through `tessera-gpu`
//!    ([`Query::eval_gpu`]); [`cuda_c`] renders the same IR as CUDA C for the NVRTC
//!    cross-check.
//!
//! [`reference`] is the plain recursive evaluator that defines the semantics.
//!
//! ```
//! use tessera_query::Query;
//! let q = Query::compile("sqrt(VelocityX^2+VelocityY^2)", &["VelocityX", "VelocityY"]).unwrap();
//! let (vx, vy) = ([3.0f32, 0.0], [4.0f32, 2.0]);
//! let mut out = [0.0f32; 2];
//! q.eval_cpu(&[&vx, &vy], &mut out).unwrap();
//! assert_eq!(out, [5.0, 2.0]);
//! ```

pub mod ast;
pub mod bench;

pub mod cuda_c;
pub mod error;
pub mod fields;
pub mod gpu;
pub mod interp;
pub mod ir;
pub mod jit;
pub mod limits;
pub mod math;
pub mod npy;
pub mod parser;
pub mod ptx;
pub mod reference;

pub use error::{QueryError, Span};
pub use ir::Ir;
pub use math::{Precision, Real};
pub use tessera_core::Par;

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::{Arc, Mutex, OnceLock};

/// Which back end evaluates a query.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Backend {
    /// The chunked bytecode interpreter.
    Interp,
    /// The Cranelift CPU JIT.
    #[default]
    CpuJit,
    /// The PTX GPU JIT.
    Gpu,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Interp => "interp",
            Backend::CpuJit => "cpu-jit",
            Backend::Gpu => "gpu",
        }
    }
}

impl FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "interp" => Ok(Backend::Interp),
            "cpu-jit" | "jit" | "cpu" => Ok(Backend::CpuJit),
            "gpu" => Ok(Backend::Gpu),
            _ => Err(format!(
                "unknown backend `{s}` (expected interp, cpu-jit or gpu)"
            )),
        }
    }
}

impl FromStr for Precision {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "f32" => Ok(Precision::F32),
            "f64" => Ok(Precision::F64),
            _ => Err(format!("unknown precision `{s}` (expected f32 or f64)")),
        }
    }
}

/// A compiled query: parsed, checked against the field list, lowered to the normalized IR
/// for both precisions; the back-end code (CPU JIT function, GPU module) is built on first
/// use and shared through a process-wide cache keyed by [`Ir::hash64`].
pub struct Query {
    src: String,
    fields: Vec<String>,
    ast: ast::Expr,
    ir32: Ir,
    ir64: Ir,
    prog32: interp::Program,
    prog64: interp::Program,
    jit32: OnceLock<Arc<jit::JitKernel>>,
    jit64: OnceLock<Arc<jit::JitKernel>>,
}

impl std::fmt::Debug for Query {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Query")
            .field("src", &self.src)
            .field("fields", &self.fields)
            .finish()
    }
}

type JitCache = Mutex<HashMap<u64, Vec<(Ir, Arc<jit::JitKernel>)>>>;
fn jit_cache() -> &'static JitCache {
    static C: OnceLock<JitCache> = OnceLock::new();
    C.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Number of CPU JIT kernels in the process-wide cache.
pub fn jit_cache_len() -> usize {
    jit_cache()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .values()
        .map(|v| v.len())
        .sum()
}

/// The CPU JIT kernel for `ir`, from the cache or freshly compiled (and then cached).
pub fn cached_jit(ir: &Ir) -> Result<Arc<jit::JitKernel>, QueryError> {
    let h = ir.hash64();
    if let Some(v) = jit_cache()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&h)
    {
        if let Some((_, k)) = v.iter().find(|(i, _)| i == ir) {
            return Ok(k.clone());
        }
    }
    let k = Arc::new(jit::JitKernel::compile(ir)?);
    jit_cache()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(h)
        .or_default()
        .push((ir.clone(), k.clone()));
    Ok(k)
}

impl Query {
    /// Parses and lowers `expr` over the named fields (their order is the order of the input
    /// arrays at evaluation).
    pub fn compile(expr: &str, fields: &[&str]) -> Result<Query, QueryError> {
        parser::validate_fields(fields)?;
        let ast = parser::parse(expr, fields)?;
        let ir32 = Ir::lower::<f32>(&ast, fields.len());
        let ir64 = Ir::lower::<f64>(&ast, fields.len());
        Ok(Query {
            src: expr.to_string(),
            fields: fields.iter().map(|s| s.to_string()).collect(),
            prog32: interp::Program::new(&ir32),
            prog64: interp::Program::new(&ir64),
            ast,
            ir32,
            ir64,
            jit32: OnceLock::new(),
            jit64: OnceLock::new(),
        })
    }

    /// The expression text.
    pub fn source(&self) -> &str {
        &self.src
    }
    /// The field names, in input order.
    pub fn fields(&self) -> &[String] {
        &self.fields
    }
    /// The syntax tree.
    pub fn ast(&self) -> &ast::Expr {
        &self.ast
    }
    /// The normalized IR in a precision.
    pub fn ir(&self, p: Precision) -> &Ir {
        match p {
            Precision::F32 => &self.ir32,
            Precision::F64 => &self.ir64,
        }
    }
    /// Indices of the fields the expression reads (the GPU and CPU paths only touch these).
    pub fn used_fields(&self) -> Vec<usize> {
        self.ir32
            .used_fields()
            .into_iter()
            .map(|f| f as usize)
            .collect()
    }
    /// Hash of the normalized IR (the cache key) in a precision.
    pub fn hash(&self, p: Precision) -> u64 {
        self.ir(p).hash64()
    }

    /// The CPU JIT kernel for a precision, compiled on first use (through the cache).
    pub fn jit(&self, p: Precision) -> Result<&Arc<jit::JitKernel>, QueryError> {
        let cell = match p {
            Precision::F32 => &self.jit32,
            Precision::F64 => &self.jit64,
        };
        if let Some(k) = cell.get() {
            return Ok(k);
        }
        let k = cached_jit(self.ir(p))?;
        Ok(cell.get_or_init(|| k))
    }

    /// The PTX module text for a precision (deterministic; see [`ptx`]).
    pub fn ptx(&self, p: Precision) -> String {
        ptx::emit(self.ir(p)).text
    }
    /// The CUDA C source for the NVRTC cross-check (see [`cuda_c`]).
    pub fn cuda_c(&self, p: Precision) -> String {
        cuda_c::emit(self.ir(p)).source
    }

    fn check<T>(&self, fields: &[&[T]], out: &[T]) -> Result<(), QueryError> {
        if fields.len() != self.fields.len() {
            return Err(QueryError::FieldCount {
                expected: self.fields.len(),
                got: fields.len(),
            });
        }
        for (f, name) in fields.iter().zip(&self.fields) {
            if f.len() != out.len() {
                return Err(QueryError::LengthMismatch {
                    field: name.clone(),
                    expected: out.len(),
                    got: f.len(),
                });
            }
        }
        Ok(())
    }

    /// Evaluates on the CPU with the Cranelift JIT, sequentially.
    pub fn eval_cpu<T: Real>(&self, fields: &[&[T]], out: &mut [T]) -> Result<(), QueryError> {
        self.eval_cpu_with(Backend::CpuJit, Par::Seq, fields, out)
    }

    /// Evaluates on the CPU with the interpreter or the JIT (`Backend::Gpu` is refused),
    /// on the calling thread (`Par::Seq`) or split into blocks on the rayon pool
    /// (`Par::Rayon`); results are identical (elementwise).
    pub fn eval_cpu_with<T: Real>(
        &self,
        backend: Backend,
        par: Par,
        fields: &[&[T]],
        out: &mut [T],
    ) -> Result<(), QueryError> {
        self.check(fields, out)?;
        let p = T::PRECISION;
        enum K<'a> {
            I(&'a interp::Program),
            J(&'a jit::JitKernel),
        }
        let k = match backend {
            Backend::Interp => K::I(match p {
                Precision::F32 => &self.prog32,
                Precision::F64 => &self.prog64,
            }),
            Backend::CpuJit => K::J(self.jit(p)?),
            Backend::Gpu => {
                return Err(QueryError::Gpu(
                    "eval_cpu cannot run the GPU back end; use eval_gpu".into(),
                ))
            }
        };
        let run = |start: usize, o: &mut [T]| {
            let sub: Vec<&[T]> = fields.iter().map(|f| &f[start..start + o.len()]).collect();
            match &k {
                K::I(prog) => prog.eval(&sub, o),
                K::J(j) => {
                    let ptrs: Vec<*const u8> =
                        sub.iter().map(|s| s.as_ptr() as *const u8).collect();
                    j.run_raw(o.len(), &ptrs, o.as_mut_ptr() as *mut u8)
                }
            }
        };
        let n = out.len();
        match par {
            Par::Seq => run(0, out),
            Par::Rayon => {
                use rayon::prelude::*;
                let block = par.chunk_len(n).max(1);
                out.par_chunks_mut(block)
                    .enumerate()
                    .for_each(|(b, o)| run(b * block, o));
            }
        }
        Ok(())
    }

    /// Evaluates with the reference evaluator (slow; for tests and cross-checks).
    pub fn eval_reference<T: Real>(
        &self,
        fields: &[&[T]],
        out: &mut [T],
    ) -> Result<(), QueryError> {
        self.check(fields, out)?;
        reference::eval_array(&self.ast, fields, out);
        Ok(())
    }
}
