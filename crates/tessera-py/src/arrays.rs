//! NumPy input: dtype, shape and range checks with clear `ValueError`s, and the one copy
//! into Tessera's storage.
//!
//! Arrays are borrowed read-only (no copy by NumPy); any strides are accepted, so a
//! non-contiguous array (a column slice, a transposed view) costs the same single copy as
//! a contiguous one: its elements are gathered while they are converted into the mesh's
//! own vectors. float32 points and any integer index type are converted in that same pass.

use crate::errors::value_error;
use numpy::{
    Element, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::prelude::*;
use tessera_mesh::Point;

/// The array behind `obj`, or a ValueError naming `what` and the Python type it got.
pub fn untyped<'a, 'py>(
    obj: &'a Bound<'py, PyAny>,
    what: &str,
) -> PyResult<&'a Bound<'py, PyUntypedArray>> {
    obj.downcast::<PyUntypedArray>().map_err(|_| {
        let ty = obj
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "?".into());
        value_error(format!("{what} must be a NumPy array, got {ty}"))
    })
}

fn dtype_name(a: &Bound<'_, PyUntypedArray>) -> String {
    a.dtype()
        .str()
        .map(|s| s.to_string())
        .unwrap_or_else(|_| "?".into())
}

fn is<T: Element>(a: &Bound<'_, PyUntypedArray>) -> bool {
    a.dtype().is_equiv_to(&numpy::dtype::<T>(a.py()))
}

/// Points `(N, 3)` of float64 or float32, finite, copied once into mesh positions.
pub fn points(obj: &Bound<'_, PyAny>) -> PyResult<Vec<Point>> {
    let a = untyped(obj, "points")?;
    if a.ndim() != 2 || a.shape()[1] != 3 {
        return Err(value_error(format!(
            "points must have shape (N, 3), got {:?}",
            a.shape()
        )));
    }
    let out = if is::<f64>(a) {
        copy_points::<f64>(a.downcast::<PyArrayDyn<f64>>()?, |x| x)?
    } else if is::<f32>(a) {
        copy_points::<f32>(a.downcast::<PyArrayDyn<f32>>()?, |x| x as f64)?
    } else {
        return Err(value_error(format!(
            "points must be float64 (or float32), got dtype {}",
            dtype_name(a)
        )));
    };
    Ok(out)
}

fn copy_points<T: Element + Copy>(
    a: &Bound<'_, PyArrayDyn<T>>,
    conv: impl Fn(T) -> f64,
) -> PyResult<Vec<Point>> {
    let ro = a.readonly();
    let v = ro.as_array();
    let n = v.shape()[0];
    let mut out: Vec<Point> = Vec::with_capacity(n);
    if let Some(flat) = v.as_slice() {
        // C-contiguous: a straight conversion of rows
        out.extend(
            flat.chunks_exact(3)
                .map(|r| [conv(r[0]), conv(r[1]), conv(r[2])]),
        );
    } else {
        // any strides: gathered in the same single copy
        for i in 0..n {
            out.push([conv(v[[i, 0]]), conv(v[[i, 1]]), conv(v[[i, 2]])]);
        }
    }
    if let Some(i) = out.iter().position(|p| !p.iter().all(|x| x.is_finite())) {
        return Err(value_error(format!(
            "points[{i}] = {:?} has a non-finite coordinate (NaN or infinity)",
            out[i]
        )));
    }
    Ok(out)
}

/// An integer index array (any integer dtype, any strides, any dimension) flattened in C
/// order, each entry checked against `0..limit`, as `u32`. `what` names the array in errors;
/// `ncols` (the row length, for 2-D arrays) lets an error name `cells[row, col]`.
pub fn indices(obj: &Bound<'_, PyAny>, what: &str, limit: usize) -> PyResult<Vec<u32>> {
    let a = untyped(obj, what)?;
    macro_rules! try_int {
        ($($t:ty),*) => {
            $( if is::<$t>(a) {
                return copy_indices::<$t>(a.downcast::<PyArrayDyn<$t>>()?, what, limit);
            } )*
        };
    }
    try_int!(i64, i32, u32, u64, i16, u16, i8, u8);
    Err(value_error(format!(
        "{what} must be an integer array, got dtype {}",
        dtype_name(a)
    )))
}

fn copy_indices<T: Element + Copy + Into<i128>>(
    a: &Bound<'_, PyArrayDyn<T>>,
    what: &str,
    limit: usize,
) -> PyResult<Vec<u32>> {
    let ro = a.readonly();
    let v = ro.as_array();
    let shape = v.shape().to_vec();
    let mut out = Vec::with_capacity(v.len());
    let bad = |k: usize, x: i128| {
        let place = if shape.len() == 2 && shape[1] > 0 {
            format!("{what}[{}, {}]", k / shape[1], k % shape[1])
        } else {
            format!("{what}[{k}]")
        };
        value_error(format!(
            "{place} = {x} is out of range: indices must be in 0..{limit}"
        ))
    };
    let push = |out: &mut Vec<u32>, k: usize, x: T| -> PyResult<()> {
        let x: i128 = x.into();
        if x < 0 || x >= limit as i128 || x > u32::MAX as i128 {
            return Err(bad(k, x));
        }
        out.push(x as u32);
        Ok(())
    };
    if let Some(flat) = v.as_slice() {
        for (k, &x) in flat.iter().enumerate() {
            push(&mut out, k, x)?;
        }
    } else {
        for (k, &x) in v.iter().enumerate() {
            push(&mut out, k, x)?;
        }
    }
    Ok(out)
}

/// The shape of an array argument (for layout decisions before conversion).
pub fn shape(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<usize>> {
    Ok(untyped(obj, what)?.shape().to_vec())
}
