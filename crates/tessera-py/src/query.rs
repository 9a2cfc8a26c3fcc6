//! `tessera.query`: derived-field expressions (dissertation §6.3.4) compiled once and
//! evaluated on NumPy arrays by the CPU JIT (Cranelift) or on a GPU (PTX).

use crate::device;
use crate::errors::{query_err, raise};
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use tessera_gpu::Gpu;

/// A compiled query: the expression, checked against its field names and lowered for both
/// precisions; the machine code is built on first evaluation and cached per process.
#[pyclass(module = "tessera._tessera", name = "NativeQuery", frozen)]
pub struct Query {
    q: tessera_query::Query,
}

fn on_gpu<T: tessera_query::Real + tessera_gpu::Element>(
    q: &tessera_query::Query,
    g: &Gpu,
    fields: &[&[T]],
    n: usize,
) -> Result<Vec<T>, PyErr> {
    let derr = |e: tessera_gpu::GpuError| raise("DeviceError", e.to_string());
    let bufs = fields
        .iter()
        .map(|f| g.upload(f))
        .collect::<Result<Vec<_>, _>>()
        .map_err(derr)?;
    let refs: Vec<_> = bufs.iter().collect();
    let mut out = g.alloc::<T>(n).map_err(derr)?;
    q.eval_gpu(g, &refs, &mut out).map_err(query_err)?;
    g.download(&out).map_err(derr)
}

/// Evaluate on the CPU JIT or the GPU, without the GIL; the result vector is handed to
/// NumPy without a copy.
fn eval_any<'py, T>(
    q: &tessera_query::Query,
    py: Python<'py>,
    fields: &[PyReadonlyArray1<'py, T>],
    device: &str,
) -> PyResult<(Bound<'py, PyArray1<T>>, String)>
where
    T: tessera_query::Real + tessera_gpu::Element + numpy::Element + Default,
{
    let gpu = device::open(py, device)?;
    let slices = fields
        .iter()
        .map(|a| a.as_slice())
        .collect::<Result<Vec<&[T]>, _>>()
        .map_err(|e| crate::errors::value_error(e.to_string()))?;
    let n = slices.first().map_or(0, |s| s.len());
    let out = py.allow_threads(|| match gpu.as_deref() {
        Some(g) => on_gpu::<T>(q, g, &slices, n),
        None => {
            let mut out = vec![T::default(); n];
            q.eval_cpu(&slices, &mut out).map_err(query_err)?;
            Ok(out)
        }
    })?;
    Ok((PyArray1::from_vec(py, out), device::name_of(&gpu)))
}

#[pymethods]
impl Query {
    /// Compile `expr` over the named fields; syntax and name errors raise `QueryError`
    /// with the byte span.
    #[new]
    fn new(py: Python<'_>, expr: &str, fields: Vec<String>) -> PyResult<Self> {
        let names: Vec<&str> = fields.iter().map(|s| s.as_str()).collect();
        let q = py
            .allow_threads(|| tessera_query::Query::compile(expr, &names))
            .map_err(query_err)?;
        Ok(Query { q })
    }

    /// The expression text.
    #[getter]
    fn source(&self) -> &str {
        self.q.source()
    }

    /// The field names, in the order `eval` takes the arrays.
    #[getter]
    fn fields(&self) -> Vec<String> {
        self.q.fields().to_vec()
    }

    /// The CUDA C the GPU back end's kernel corresponds to (for inspection).
    #[pyo3(signature = (precision = "f32"))]
    fn cuda_c(&self, precision: &str) -> PyResult<String> {
        Ok(self.q.cuda_c(parse_precision(precision)?))
    }

    /// Evaluate on contiguous float64 arrays in field order.
    fn _eval_f64<'py>(
        &self,
        py: Python<'py>,
        fields: Vec<PyReadonlyArray1<'py, f64>>,
        device: &str,
    ) -> PyResult<(Bound<'py, PyArray1<f64>>, String)> {
        eval_any(&self.q, py, &fields, device)
    }

    /// Evaluate on contiguous float32 arrays in field order.
    fn _eval_f32<'py>(
        &self,
        py: Python<'py>,
        fields: Vec<PyReadonlyArray1<'py, f32>>,
        device: &str,
    ) -> PyResult<(Bound<'py, PyArray1<f32>>, String)> {
        eval_any(&self.q, py, &fields, device)
    }

    fn __repr__(&self) -> String {
        format!(
            "tessera.query.Query({:?}, fields={:?})",
            self.q.source(),
            self.q.fields()
        )
    }
}

fn parse_precision(p: &str) -> PyResult<tessera_query::Precision> {
    p.parse().map_err(|e: String| crate::errors::value_error(e))
}
