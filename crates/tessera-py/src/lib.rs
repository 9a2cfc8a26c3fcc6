//! Python bindings of Tessera (`import tessera`): the native module `tessera._tessera`.
//!
//! Pipeline: NumPy arrays come in through read-only borrows (any strides; one copy into the
//! mesh's own storage, converted on the fly, never a second one) -> the Rust mesh, FEM and
//! query crates run with the GIL released -> results go back as NumPy arrays that either
//! view the mesh's storage (points, connectivity, cached relations: read-only views kept
//! alive by the mesh) or own a vector handed over without copying (matrices, fields). The
//! Python package `tessera` (python/tessera) wraps these in SciPy matrices, meshio and
//! PyVista objects; the exceptions are defined there and raised from here.
//!
//! Devices follow the command line: `device="auto"|"cpu"|"cuda"|"cuda:N"` on every call that
//! computes; one GPU context per device is opened on first use and kept for the process.

use pyo3::prelude::*;

mod arrays;
mod device;
mod errors;
mod fem;
mod mesh;
mod query;

#[pymodule]
fn _tessera(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<mesh::Mesh>()?;
    m.add_class::<query::Query>()?;
    m.add_function(wrap_pyfunction!(mesh::read, m)?)?;
    m.add_function(wrap_pyfunction!(mesh::from_arrays, m)?)?;
    m.add_function(wrap_pyfunction!(mesh::generate_box, m)?)?;
    m.add_function(wrap_pyfunction!(fem::assemble, m)?)?;
    m.add_function(wrap_pyfunction!(fem::solve, m)?)?;
    m.add_function(wrap_pyfunction!(fem::rigid_body_modes, m)?)?;
    m.add_function(wrap_pyfunction!(device::describe_device, m)?)?;
    Ok(())
}
