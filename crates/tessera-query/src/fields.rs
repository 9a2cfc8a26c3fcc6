//! Raw field files of `tessera query eval`: a flat file of little-endian `f32` or `f64`
//! values, one per element (the fields of dissertation §6.3.4 as plain arrays; typed files
//! are `.npy`, [`crate::npy`]), read with [`tessera_core::input`] (regular files only,
//! within the memory budget).
//!
//! ```
//! use tessera_query::fields::decode_field;
//! let p = std::path::Path::new("p.bin");
//! let bytes: Vec<u8> = [1.5f32, -2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
//! assert_eq!(decode_field::<f32>(p, &bytes).unwrap(), vec![1.5, -2.0]);
//! assert!(decode_field::<f64>(p, &bytes[..7]).is_err());
//! ```

use crate::{QueryError, Real};
use std::path::Path;

/// A value type of field files (little-endian bytes).
pub trait FieldValue: Real {
    fn from_le(b: &[u8]) -> Self;
}

impl FieldValue for f32 {
    fn from_le(b: &[u8]) -> Self {
        f32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }
}

impl FieldValue for f64 {
    fn from_le(b: &[u8]) -> Self {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[..8]);
        f64::from_le_bytes(a)
    }
}

/// Decode the bytes of a raw field file; `path` labels the error (a whole number of values
/// is required: a length that is not is a truncated or foreign file).
pub fn decode_field<T: FieldValue>(path: &Path, bytes: &[u8]) -> Result<Vec<T>, QueryError> {
    let size = std::mem::size_of::<T>();
    if !bytes.len().is_multiple_of(size) {
        return Err(QueryError::FieldFile {
            path: path.to_path_buf(),
            msg: format!(
                "{} bytes is not a whole number of {size}-byte ({}) values (truncated, or another precision?)",
                bytes.len(),
                T::PRECISION.name()
            ),
        });
    }
    Ok(bytes.chunks_exact(size).map(T::from_le).collect())
}

/// Read and decode a raw field file.
pub fn read_field<T: FieldValue>(path: &Path) -> Result<Vec<T>, QueryError> {
    let bytes = tessera_core::input::read_file(path).map_err(|e| QueryError::FieldFile {
        path: path.to_path_buf(),
        msg: e.reason(),
    })?;
    decode_field(path, &bytes)
}
