//! NumPy `.npy` files: the typed field files of `tessera query eval` (a header names the
//! number type and the shape, so an `f64` file is never read as `f32`).
//!
//! Format (NumPy's `format.py`, versions 1.0-3.0): the magic `\x93NUMPY`, a version
//! `major, minor`, the header length (`u16` little-endian for 1.0, `u32` for 2.0/3.0),
//! then an ASCII Python dict `{'descr': '<f8', 'fortran_order': False, 'shape': (N,), }`
//! padded with spaces to a multiple of 64 bytes and ended by `\n`, then the raw values.
//! Read: `descr` `<f4 <f8 >f4 >f8 <i4 <i8 <u4 <u8 |u1 |i1` (and `=`), any shape (the values
//! are taken in storage order; `fortran_order` only matters for more than one dimension and
//! is refused there). The data must be exactly `prod(shape) * itemsize` bytes: the header
//! never sizes an allocation the file cannot fill. Written: version 1.0, `<f4` or `<f8`,
//! shape `(N,)`.

use crate::QueryError;
use std::path::Path;

/// The number type of a `.npy` file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NpyType {
    F32,
    F64,
    I8,
    U8,
    I32,
    U32,
    I64,
    U64,
}

impl NpyType {
    fn size(self) -> usize {
        match self {
            NpyType::I8 | NpyType::U8 => 1,
            NpyType::F32 | NpyType::I32 | NpyType::U32 => 4,
            NpyType::F64 | NpyType::I64 | NpyType::U64 => 8,
        }
    }
    /// The `descr` string written for little-endian data.
    pub fn descr(self) -> &'static str {
        match self {
            NpyType::F32 => "<f4",
            NpyType::F64 => "<f8",
            NpyType::I8 => "|i1",
            NpyType::U8 => "|u1",
            NpyType::I32 => "<i4",
            NpyType::U32 => "<u4",
            NpyType::I64 => "<i8",
            NpyType::U64 => "<u8",
        }
    }
}

/// A `.npy` array: its type, shape and values (as `f64`, exact for every type read).
#[derive(Clone, Debug, PartialEq)]
pub struct NpyArray {
    pub ty: NpyType,
    pub shape: Vec<usize>,
    pub values: Vec<f64>,
}

fn err(path: &Path, msg: impl Into<String>) -> QueryError {
    QueryError::FieldFile {
        path: path.to_path_buf(),
        // header text in messages is the file's: one bounded line
        msg: tessera_core::error::clip(&msg.into(), 300),
    }
}

/// Whether a file starts with the `.npy` magic.
pub fn is_npy(bytes: &[u8]) -> bool {
    bytes.starts_with(b"\x93NUMPY")
}

/// Read a `.npy` file.
pub fn read_npy(path: &Path) -> Result<NpyArray, QueryError> {
    // a regular file within the memory budget (tessera_core::input)
    let bytes = tessera_core::input::read_file(path).map_err(|e| err(path, e.reason()))?;
    parse_npy(path, &bytes)
}

/// The header must be exactly a dict of the three keys `descr` (a quoted string),
/// `fortran_order` (`True` / `False`) and `shape` (a tuple), each once, in any order, with
/// an optional trailing comma: anything else is a damaged header, not a variant.
fn check_dict(header: &str) -> Result<(), String> {
    let h = header.trim_end_matches([' ', '\n']);
    let inner = h
        .strip_prefix('{')
        .and_then(|h| h.strip_suffix('}'))
        .ok_or("the header is not one {...} dict")?;
    let mut rest = inner.trim_start();
    let mut seen: Vec<&str> = Vec::new();
    while !rest.is_empty() {
        let r = rest
            .strip_prefix('\'')
            .ok_or("a key is not a quoted string")?;
        let end = r.find('\'').ok_or("an unterminated key")?;
        let key = &r[..end];
        if !["descr", "fortran_order", "shape"].contains(&key) || seen.contains(&key) {
            return Err(format!("unexpected or repeated key `{key}`"));
        }
        seen.push(key);
        let r = r[end + 1..]
            .trim_start()
            .strip_prefix(':')
            .ok_or("no `:` after a key")?;
        let r = r.trim_start();
        let vlen = match key {
            "descr" => r
                .strip_prefix('\'')
                .and_then(|v| v.find('\''))
                .map(|e| e + 2),
            "shape" => r.strip_prefix('(').and_then(|v| v.find(')')).map(|e| e + 2),
            _ => ["True", "False"]
                .iter()
                .find(|w| r.starts_with(**w))
                .map(|w| w.len()),
        }
        .ok_or_else(|| format!("a malformed value of `{key}`"))?;
        let r = r[vlen..].trim_start();
        rest = match r.strip_prefix(',') {
            Some(r) => r.trim_start(),
            None if r.is_empty() => r,
            None => return Err(format!("unexpected text after the value of `{key}`")),
        };
    }
    if seen.len() != 3 {
        return Err("the header lacks one of 'descr', 'fortran_order', 'shape'".into());
    }
    Ok(())
}

/// The value of `key` in the header dict (the text after `'key':`).
fn dict_value<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let k = format!("'{key}'");
    let i = header.find(&k)? + k.len();
    let rest = header[i..].trim_start().strip_prefix(':')?.trim_start();
    Some(rest)
}

/// Parse the bytes of a `.npy` file.
pub fn parse_npy(path: &Path, bytes: &[u8]) -> Result<NpyArray, QueryError> {
    if !is_npy(bytes) {
        return Err(err(
            path,
            "not a .npy file (no \\x93NUMPY magic); raw files need --precision",
        ));
    }
    if bytes.len() < 10 {
        return Err(err(path, "truncated .npy header"));
    }
    let (major, minor) = (bytes[6], bytes[7]);
    let (hlen, start) = match major {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10usize),
        2 | 3 => {
            if bytes.len() < 12 {
                return Err(err(path, "truncated .npy header"));
            }
            (
                u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
                12,
            )
        }
        _ => {
            return Err(err(
                path,
                format!(".npy version {major}.{minor} is not supported (1.0-3.0 are)"),
            ))
        }
    };
    let end = start
        .checked_add(hlen)
        .filter(|&e| e <= bytes.len())
        .ok_or_else(|| {
            err(
                path,
                format!("header of {hlen} bytes runs past the end of the file"),
            )
        })?;
    let header =
        std::str::from_utf8(&bytes[start..end]).map_err(|_| err(path, "the header is not text"))?;
    // descr
    let descr = dict_value(header, "descr")
        .and_then(|v| v.strip_prefix('\''))
        .and_then(|v| v.split('\'').next())
        .ok_or_else(|| err(path, format!("no 'descr' in the header {header:?}")))?;
    // the byte-order character (a non-ASCII one is no byte order: split at its char boundary)
    let (order, code) = descr.split_at(descr.chars().next().map_or(0, char::len_utf8));
    let big = match order {
        "<" | "|" | "=" => false,
        ">" => true,
        _ => return Err(err(path, format!("dtype {descr:?} has no byte order"))),
    };
    let ty = match code {
        "f4" => NpyType::F32,
        "f8" => NpyType::F64,
        "i1" => NpyType::I8,
        "u1" => NpyType::U8,
        "i4" => NpyType::I32,
        "u4" => NpyType::U32,
        "i8" => NpyType::I64,
        "u8" => NpyType::U64,
        _ => {
            return Err(err(
                path,
                format!("dtype {descr:?} is not a number type Tessera reads (f4, f8, i1, u1, i4, u4, i8, u8)"),
            ))
        }
    };
    check_dict(header).map_err(|m| err(path, format!("damaged header dict: {m}")))?;
    // shape
    let shape_txt = dict_value(header, "shape")
        .and_then(|v| v.strip_prefix('('))
        .and_then(|v| v.split(')').next())
        .ok_or_else(|| err(path, format!("no 'shape' in the header {header:?}")))?;
    let mut shape = Vec::new();
    for t in shape_txt
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        shape.push(
            t.parse::<usize>()
                .map_err(|_| err(path, format!("shape entry `{t}` is not a size")))?,
        );
    }
    let fortran = dict_value(header, "fortran_order")
        .map(|v| v.starts_with("True"))
        .unwrap_or(false);
    if fortran && shape.iter().filter(|&&d| d > 1).count() > 1 {
        return Err(err(
            path,
            "a Fortran-ordered array of more than one dimension; save it C-ordered (np.ascontiguousarray)",
        ));
    }
    let count = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| err(path, "the shape's size overflows"))?;
    let data = &bytes[end..];
    let need = count.checked_mul(ty.size());
    if need != Some(data.len()) {
        return Err(err(
            path,
            format!(
                "the header says {count} {} values ({} bytes), the file holds {} bytes of data",
                ty.descr(),
                need.map_or("too many".to_string(), |n| n.to_string()),
                data.len()
            ),
        ));
    }
    let sz = ty.size();
    let values = data
        .chunks_exact(sz)
        .map(|c| {
            let mut b = [0u8; 8];
            b[..sz].copy_from_slice(c);
            if big {
                b[..sz].reverse();
            }
            match ty {
                NpyType::F32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
                NpyType::F64 => f64::from_le_bytes(b),
                NpyType::I8 => b[0] as i8 as f64,
                NpyType::U8 => b[0] as f64,
                NpyType::I32 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
                NpyType::U32 => u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
                NpyType::I64 => i64::from_le_bytes(b) as f64,
                NpyType::U64 => u64::from_le_bytes(b) as f64,
            }
        })
        .collect();
    Ok(NpyArray { ty, shape, values })
}

/// The bytes of a version-1.0 `.npy` file holding `values` as `<f4` or `<f8`, shape `(N,)`.
pub fn npy_bytes(values: &[f64], ty: NpyType) -> Vec<u8> {
    let ty = match ty {
        NpyType::F32 => NpyType::F32,
        _ => NpyType::F64,
    };
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': ({},), }}",
        ty.descr(),
        values.len()
    );
    // magic (6) + version (2) + length (2) + header + '\n' is a multiple of 64
    let total = 10 + header.len() + 1;
    header.push_str(&" ".repeat(total.div_ceil(64) * 64 - total));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + values.len() * ty.size());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for &v in values {
        match ty {
            NpyType::F32 => out.extend_from_slice(&(v as f32).to_le_bytes()),
            _ => out.extend_from_slice(&v.to_le_bytes()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by `cargo fuzz` (target `query_fields`): a dtype whose first character is not
    /// ASCII (`'Ě9'`) panicked splitting off the byte order inside the character; now an error.
    #[test]
    fn non_ascii_dtype_is_an_error() {
        let mut b = npy_bytes(&[1.0, 2.0, 3.0], NpyType::F64);
        let hl = u16::from_le_bytes([b[8], b[9]]) as usize;
        let h = std::str::from_utf8(&b[10..10 + hl]).expect("an ASCII header");
        let at = h.find("'<f8'").expect("descr in the header") + 10;
        // same length in bytes: "'<f8'" (5 bytes) -> "'Ě9'" (5 bytes)
        b[at..at + 5].copy_from_slice("'\u{11a}9'".as_bytes());
        let e = parse_npy(Path::new("x.npy"), &b).unwrap_err().to_string();
        assert!(e.contains("byte order") && !e.contains('\n'), "{e}");
    }

    #[test]
    fn round_trip_and_header_layout() {
        let v = vec![1.5, -2.0, 3.25, 1e300];
        for ty in [NpyType::F64, NpyType::F32] {
            let b = npy_bytes(&v, ty);
            let hl = u16::from_le_bytes([b[8], b[9]]) as usize;
            assert_eq!((10 + hl) % 64, 0, "header padded to 64 bytes");
            assert_eq!(b[10 + hl - 1], b'\n');
            let a = parse_npy(Path::new("x.npy"), &b).unwrap();
            assert_eq!(a.ty, ty);
            assert_eq!(a.shape, vec![4]);
            if ty == NpyType::F64 {
                assert_eq!(a.values, v);
            } else {
                assert_eq!(a.values[..3], v[..3]);
                assert!(a.values[3].is_infinite(), "1e300 does not fit f32");
            }
        }
    }

    #[test]
    fn numpy_headers_of_other_versions_and_orders() {
        // as numpy 2 writes a 2-D float64 array and a big-endian int32 vector
        let mut b = b"\x93NUMPY\x02\x00".to_vec();
        let h = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }      \n";
        b.extend_from_slice(&(h.len() as u32).to_le_bytes());
        b.extend_from_slice(h.as_bytes());
        for x in [1.0f64, 2.0, 3.0, 4.0] {
            b.extend_from_slice(&x.to_le_bytes());
        }
        let a = parse_npy(Path::new("m.npy"), &b).unwrap();
        assert_eq!(
            (a.shape.clone(), a.values.clone()),
            (vec![2, 2], vec![1., 2., 3., 4.])
        );
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        let h = "{'descr': '>i4', 'fortran_order': False, 'shape': (3,), }\n";
        b.extend_from_slice(&(h.len() as u16).to_le_bytes());
        b.extend_from_slice(h.as_bytes());
        for x in [7i32, -1, 65536] {
            b.extend_from_slice(&x.to_be_bytes());
        }
        assert_eq!(
            parse_npy(Path::new("i.npy"), &b).unwrap().values,
            vec![7.0, -1.0, 65536.0]
        );
    }

    #[test]
    fn bad_files_name_the_problem() {
        let p = Path::new("bad.npy");
        let good = npy_bytes(&[1.0, 2.0], NpyType::F64);
        let e = parse_npy(p, &good[..good.len() - 3])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("2 <f8 values (16 bytes)") && e.contains("13 bytes"),
            "{e}"
        );
        let e = parse_npy(p, b"hello").unwrap_err().to_string();
        assert!(e.contains("magic"), "{e}");
        let mut huge = good.clone();
        let s = String::from_utf8_lossy(&huge).replace("(2,)", "(9,)");
        huge = s.into_bytes();
        assert!(parse_npy(p, &huge).is_err());
        let e = parse_npy(p, &b"\x93NUMPY\x01\x00\xff\xff{"[..])
            .unwrap_err()
            .to_string();
        assert!(e.contains("runs past the end"), "{e}");
        let mut c = b"\x93NUMPY\x01\x00".to_vec();
        let h = "{'descr': '<c16', 'fortran_order': False, 'shape': (1,), }\n";
        c.extend_from_slice(&(h.len() as u16).to_le_bytes());
        c.extend_from_slice(h.as_bytes());
        c.extend_from_slice(&[0u8; 16]);
        let e = parse_npy(p, &c).unwrap_err().to_string();
        assert!(e.contains("not a number type"), "{e}");
    }
}
