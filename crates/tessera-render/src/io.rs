//! Surfaces from files: Wavefront OBJ and VTK XML unstructured grids (`.vtu`, as written by
//! `tessera fem solve` and `tessera mesh convert`), whose boundary becomes the rendered
//! surface with a point-data array as the value (dissertation §6.3.5 applied to FEM
//! results: "the stressed bracket in a browser").
//!
//! - OBJ: `v x y z`, `f a b c ...` (polygons fanned, `a/b/c` forms and negative indices
//!   accepted); OBJ carries no scalar, so the value is a coordinate (`--field x|y|z`).
//! - VTU: ASCII or base64-binary (uncompressed) `DataArray`s; cells of types triangle (5),
//!   quad (9), tetrahedron (10, 24, 71: corner vertices) and hexahedron (12). Surface cells
//!   are kept, volume cells contribute their faces that no other cell shares. The value is
//!   a point-data array (the magnitude for vectors); an optional displacement array moves
//!   the points by a scale factor.
//!
//! Errors name the file and line; counts are checked against the data present before any
//! allocation they would size.

use std::collections::HashMap;
use std::path::Path;

use crate::{RenderError, Surface};

fn perr(path: &Path, line: usize, msg: impl Into<String>) -> RenderError {
    RenderError::Parse {
        path: path.display().to_string(),
        line,
        msg: msg.into(),
    }
}

/// A regular file within the input limits ([`tessera_core::input::read_file`]).
fn read_file(path: &Path) -> Result<Vec<u8>, RenderError> {
    Ok(tessera_core::input::read_file(path)?)
}

/// Which coordinate becomes the value of an OBJ surface.
pub fn coordinate_index(field: &str) -> Option<usize> {
    match field {
        "x" => Some(0),
        "y" => Some(1),
        "z" | "height" => Some(2),
        _ => None,
    }
}

/// Reads an OBJ file; the value of each vertex is its coordinate `field` (`x`, `y`, `z`).
pub fn read_obj(path: &Path, field: &str) -> Result<Surface, RenderError> {
    let k = coordinate_index(field).ok_or_else(|| {
        RenderError::Invalid(format!(
            "--field {field}: an OBJ file has no data arrays; use x, y or z"
        ))
    })?;
    let data = read_file(path)?;
    let text = std::str::from_utf8(&data).map_err(|e| {
        let line = data[..e.valid_up_to()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1;
        perr(path, line, "not UTF-8 text")
    })?;
    let mut s = Surface::default();
    for (ln, line) in text.lines().enumerate() {
        let ln = ln + 1;
        let mut it = line.split_whitespace();
        match it.next() {
            Some("v") => {
                let mut p = [0.0f32; 3];
                for c in p.iter_mut() {
                    let t = it
                        .next()
                        .ok_or_else(|| perr(path, ln, "vertex needs x y z"))?;
                    *c = t
                        .parse::<f32>()
                        .ok()
                        .filter(|v| v.is_finite())
                        .ok_or_else(|| perr(path, ln, format!("`{t}` is not a finite number")))?;
                }
                s.positions.push(p);
            }
            Some("f") => {
                let nv = s.positions.len() as i64;
                let mut poly = Vec::new();
                for t in it {
                    let first = t.split('/').next().unwrap_or("");
                    let i: i64 = first
                        .parse()
                        .map_err(|_| perr(path, ln, format!("`{t}` is not a vertex index")))?;
                    let idx = if i > 0 { i - 1 } else { nv + i };
                    if i == 0 || idx < 0 || idx >= nv {
                        return Err(perr(
                            path,
                            ln,
                            format!("vertex index {i} outside the {nv} vertices read so far"),
                        ));
                    }
                    poly.push(idx as u32);
                }
                if poly.len() < 3 {
                    return Err(perr(path, ln, "a face needs at least 3 vertices"));
                }
                for j in 1..poly.len() - 1 {
                    s.triangles.push([poly[0], poly[j], poly[j + 1]]);
                }
            }
            _ => {}
        }
    }
    s.values = s.positions.iter().map(|p| p[k]).collect();
    s.validate()?;
    Ok(s)
}

/// One `DataArray` of a VTU file.
#[derive(Clone, Debug)]
struct Array {
    section: &'static str,
    name: String,
    components: usize,
    values: Vec<f64>,
}

fn attr<'a>(tag: &'a str, key: &str) -> Option<&'a str> {
    let pat = format!("{key}=\"");
    let mut from = 0;
    while let Some(i) = tag[from..].find(&pat) {
        let at = from + i;
        // a whole attribute name: preceded by whitespace
        if at > 0 && tag.as_bytes()[at - 1].is_ascii_whitespace() {
            let rest = &tag[at + pat.len()..];
            return rest.find('"').map(|e| &rest[..e]);
        }
        from = at + pat.len();
    }
    None
}

fn b64_value(c: u8) -> Option<u32> {
    Some(match c {
        b'A'..=b'Z' => (c - b'A') as u32,
        b'a'..=b'z' => (c - b'a' + 26) as u32,
        b'0'..=b'9' => (c - b'0' + 52) as u32,
        b'+' => 62,
        b'/' => 63,
        _ => return None,
    })
}

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for &c in s.as_bytes() {
        if c.is_ascii_whitespace() {
            continue;
        }
        if c == b'=' {
            break;
        }
        acc = (acc << 6) | b64_value(c)?;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

fn scalar_size(ty: &str) -> Option<usize> {
    Some(match ty {
        "Int8" | "UInt8" => 1,
        "Int16" | "UInt16" => 2,
        "Int32" | "UInt32" | "Float32" => 4,
        "Int64" | "UInt64" | "Float64" => 8,
        _ => return None,
    })
}

fn decode_scalar(ty: &str, b: &[u8]) -> f64 {
    match ty {
        "Int8" => b[0] as i8 as f64,
        "UInt8" => b[0] as f64,
        "Int16" => i16::from_le_bytes([b[0], b[1]]) as f64,
        "UInt16" => u16::from_le_bytes([b[0], b[1]]) as f64,
        "Int32" => i32::from_le_bytes(b[..4].try_into().unwrap_or([0; 4])) as f64,
        "UInt32" => u32::from_le_bytes(b[..4].try_into().unwrap_or([0; 4])) as f64,
        "Float32" => f32::from_le_bytes(b[..4].try_into().unwrap_or([0; 4])) as f64,
        "Int64" => i64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8])) as f64,
        "UInt64" => u64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8])) as f64,
        _ => f64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8])),
    }
}

fn parse_vtu_arrays(path: &Path, text: &str) -> Result<Vec<Array>, RenderError> {
    let line_of = |off: usize| text[..off].bytes().filter(|&b| b == b'\n').count() + 1;
    if !text.contains("UnstructuredGrid") {
        return Err(perr(path, 1, "not a VTK UnstructuredGrid (.vtu) file"));
    }
    if text.contains("<AppendedData") {
        return Err(perr(
            path,
            line_of(text.find("<AppendedData").unwrap_or(0)),
            "appended data is not supported (write the file with inline ascii or binary arrays)",
        ));
    }
    if text.contains("compressor=") {
        return Err(perr(path, 1, "compressed VTU data is not supported"));
    }
    let header64 = !text.contains("header_type=\"UInt32\"");
    let mut arrays = Vec::new();
    let mut pos = 0usize;
    while let Some(i) = text[pos..].find("<DataArray") {
        let start = pos + i;
        let tag_end = text[start..]
            .find('>')
            .map(|e| start + e)
            .ok_or_else(|| perr(path, line_of(start), "unterminated DataArray tag"))?;
        let tag = &text[start..tag_end];
        let body_end = text[tag_end..]
            .find("</DataArray>")
            .map(|e| tag_end + e)
            .ok_or_else(|| perr(path, line_of(start), "DataArray without </DataArray>"))?;
        let body = &text[tag_end + 1..body_end];
        let before = &text[..start];
        let section = [
            ("<PointData", "</PointData", "PointData"),
            ("<CellData", "</CellData", "CellData"),
            ("<Points", "</Points", "Points"),
            ("<Cells", "</Cells", "Cells"),
        ]
        .iter()
        .find(|(o, c, _)| {
            before
                .rfind(o)
                .is_some_and(|a| before.rfind(c).is_none_or(|b| b < a))
        })
        .map(|t| t.2)
        .unwrap_or("");
        let ty = attr(tag, "type").unwrap_or("Float32");
        let size = scalar_size(ty)
            .ok_or_else(|| perr(path, line_of(start), format!("unsupported type {ty}")))?;
        let components: usize = attr(tag, "NumberOfComponents")
            .map(|c| {
                c.parse()
                    .map_err(|_| perr(path, line_of(start), "bad NumberOfComponents"))
            })
            .transpose()?
            .unwrap_or(1)
            .max(1);
        let format = attr(tag, "format").unwrap_or("ascii");
        let values: Vec<f64> = match format {
            "ascii" => {
                let mut v = Vec::new();
                for tok in body.split_whitespace() {
                    v.push(tok.parse::<f64>().map_err(|_| {
                        perr(path, line_of(start), format!("`{tok}` is not a number"))
                    })?);
                }
                v
            }
            "binary" => {
                let raw = base64_decode(body).ok_or_else(|| {
                    perr(path, line_of(start), "invalid base64 in binary DataArray")
                })?;
                let hb = if header64 { 8 } else { 4 };
                if raw.len() < hb {
                    return Err(perr(
                        path,
                        line_of(start),
                        "binary DataArray without its length",
                    ));
                }
                let n = if header64 {
                    u64::from_le_bytes(raw[..8].try_into().unwrap_or([0; 8])) as usize
                } else {
                    u32::from_le_bytes(raw[..4].try_into().unwrap_or([0; 4])) as usize
                };
                if n != raw.len() - hb || n % size != 0 {
                    return Err(perr(
                        path,
                        line_of(start),
                        format!("binary DataArray says {n} bytes, holds {}", raw.len() - hb),
                    ));
                }
                raw[hb..]
                    .chunks_exact(size)
                    .map(|c| decode_scalar(ty, c))
                    .collect()
            }
            f => {
                return Err(perr(
                    path,
                    line_of(start),
                    format!("DataArray format `{f}` is not supported (ascii, binary)"),
                ))
            }
        };
        arrays.push(Array {
            section,
            name: attr(tag, "Name").unwrap_or("").to_string(),
            components,
            values,
        });
        pos = body_end;
    }
    Ok(arrays)
}

/// Reads the boundary surface of a `.vtu` file with point-data array `field` as the value
/// (vector arrays give their magnitude) and, with `displace = Some((name, scale))`, points
/// moved by `scale` times the 3-vector point array `name`.
pub fn read_vtu_surface(
    path: &Path,
    field: &str,
    displace: Option<(&str, f64)>,
) -> Result<Surface, RenderError> {
    let data = read_file(path)?;
    let text = std::str::from_utf8(&data).map_err(|_| perr(path, 1, "not UTF-8 text"))?;
    let arrays = parse_vtu_arrays(path, text)?;
    let find = |section: &str, name: Option<&str>| {
        arrays
            .iter()
            .find(|a| a.section == section && name.is_none_or(|n| a.name == n))
    };
    let points = find("Points", None).ok_or_else(|| perr(path, 1, "no <Points> array"))?;
    if points.components != 3 || points.values.len() % 3 != 0 {
        return Err(perr(path, 1, "points must have 3 components"));
    }
    let np = points.values.len() / 3;
    let conn = find("Cells", Some("connectivity"))
        .ok_or_else(|| perr(path, 1, "no connectivity array"))?;
    let offs = find("Cells", Some("offsets")).ok_or_else(|| perr(path, 1, "no offsets array"))?;
    let types = find("Cells", Some("types")).ok_or_else(|| perr(path, 1, "no types array"))?;
    if offs.values.len() != types.values.len() {
        return Err(perr(path, 1, "offsets and types differ in length"));
    }
    let names: Vec<&str> = arrays
        .iter()
        .filter(|a| a.section == "PointData")
        .map(|a| a.name.as_str())
        .collect();
    let val = find("PointData", Some(field)).ok_or_else(|| {
        RenderError::Invalid(format!(
            "{}: no point-data array `{field}` (available: {})",
            path.display(),
            names.join(", ")
        ))
    })?;
    if val.values.len() != np * val.components {
        return Err(perr(
            path,
            1,
            format!("array `{field}` has the wrong length"),
        ));
    }
    let mut positions: Vec<[f32; 3]> = Vec::with_capacity(np);
    let disp = match displace {
        Some((name, scale)) => {
            let d = find("PointData", Some(name)).ok_or_else(|| {
                RenderError::Invalid(format!(
                    "{}: no point-data array `{name}` to displace by (available: {})",
                    path.display(),
                    names.join(", ")
                ))
            })?;
            if d.components != 3 || d.values.len() != 3 * np {
                return Err(perr(
                    path,
                    1,
                    format!("`{name}` is not a 3-vector per point"),
                ));
            }
            Some((d, scale))
        }
        None => None,
    };
    for i in 0..np {
        let mut p = [0.0f32; 3];
        for k in 0..3 {
            let mut x = points.values[3 * i + k];
            if let Some((d, s)) = disp {
                x += s * d.values[3 * i + k];
            }
            p[k] = x as f32;
        }
        positions.push(p);
    }
    let values: Vec<f32> = (0..np)
        .map(|i| {
            let c = val.components;
            if c == 1 {
                val.values[i] as f32
            } else {
                val.values[c * i..c * (i + 1)]
                    .iter()
                    .map(|x| x * x)
                    .sum::<f64>()
                    .sqrt() as f32
            }
        })
        .collect();
    // faces of every cell; a volume cell's face shared by two cells is interior
    let mut tris: Vec<[u32; 3]> = Vec::new();
    let mut faces: HashMap<Vec<u32>, (usize, Vec<u32>)> = HashMap::new();
    let mut start = 0usize;
    // indices are whole numbers in range (a cast would turn -1 or 2.5 into a valid point)
    let index =
        |x: f64, len: usize| (x >= 0.0 && x.fract() == 0.0 && x < len as f64).then_some(x as usize);
    for (c, (&off, &ty)) in offs.values.iter().zip(&types.values).enumerate() {
        let end = index(off, conn.values.len() + 1)
            .filter(|&e| e >= start)
            .ok_or_else(|| perr(path, 1, format!("cell {c}: offset {off} out of range")))?;
        let mut v: Vec<u32> = Vec::with_capacity(end - start);
        for &x in &conn.values[start..end] {
            let i = index(x, np)
                .ok_or_else(|| perr(path, 1, format!("cell {c} refers to point {x} of {np}")))?;
            v.push(i as u32);
        }
        let ty = index(ty, 256).ok_or_else(|| {
            perr(
                path,
                1,
                format!("cell {c}: VTK cell type {ty} is not valid"),
            )
        })?;
        let need = |n: usize| -> Result<(), RenderError> {
            if v.len() < n {
                Err(perr(
                    path,
                    1,
                    format!("cell {c} of type {ty} has {} points", v.len()),
                ))
            } else {
                Ok(())
            }
        };
        let mut add_face = |f: Vec<u32>| {
            let mut key = f.clone();
            key.sort_unstable();
            let e = faces.entry(key).or_insert((0, f));
            e.0 += 1;
        };
        match ty {
            5 => {
                need(3)?;
                tris.push([v[0], v[1], v[2]]);
            }
            9 => {
                need(4)?;
                tris.push([v[0], v[1], v[2]]);
                tris.push([v[0], v[2], v[3]]);
            }
            10 | 24 | 71 => {
                need(4)?;
                for f in [[0, 2, 1], [0, 1, 3], [1, 2, 3], [0, 3, 2]] {
                    add_face(f.iter().map(|&i| v[i]).collect());
                }
            }
            12 => {
                need(8)?;
                for f in [
                    [0, 3, 2, 1],
                    [4, 5, 6, 7],
                    [0, 1, 5, 4],
                    [1, 2, 6, 5],
                    [2, 3, 7, 6],
                    [3, 0, 4, 7],
                ] {
                    add_face(f.iter().map(|&i| v[i]).collect());
                }
            }
            t => {
                return Err(perr(
                    path,
                    1,
                    format!("cell {c}: VTK cell type {t} is not supported (5, 9, 10, 12, 24, 71)"),
                ))
            }
        }
        start = end;
    }
    let mut boundary: Vec<Vec<u32>> = faces
        .into_values()
        .filter(|(n, _)| *n == 1)
        .map(|(_, f)| f)
        .collect();
    boundary.sort_unstable();
    for f in boundary {
        for j in 1..f.len() - 1 {
            tris.push([f[0], f[j], f[j + 1]]);
        }
    }
    // keep only referenced points
    let mut used = vec![u32::MAX; np];
    let mut s = Surface::default();
    for t in &mut tris {
        for v in t.iter_mut() {
            if used[*v as usize] == u32::MAX {
                used[*v as usize] = s.positions.len() as u32;
                s.positions.push(positions[*v as usize]);
                s.values.push(values[*v as usize]);
            }
            *v = used[*v as usize];
        }
    }
    s.triangles = tris;
    s.validate()?;
    Ok(s)
}

/// Reads a surface file by extension: `.obj` or `.vtu`.
pub fn read_surface(
    path: &Path,
    field: &str,
    displace: Option<(&str, f64)>,
) -> Result<Surface, RenderError> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("obj") => read_obj(path, field),
        Some("vtu") => read_vtu_surface(path, field, displace),
        _ => Err(RenderError::Invalid(format!(
            "{}: unknown surface format (.obj or .vtu)",
            path.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str, body: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("tessera-render-io-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, body).unwrap();
        p
    }

    #[test]
    fn obj_faces_are_fanned_and_errors_have_lines() {
        let p = tmp(
            "q.obj",
            "# quad\nv 0 0 0\nv 1 0 0\nv 1 1 2\nv 0 1 0\nf 1/1 2/2 3/3 -1\n",
        );
        let s = read_obj(&p, "z").unwrap();
        assert_eq!(s.triangles, vec![[0, 1, 2], [0, 2, 3]]);
        assert_eq!(s.values, vec![0.0, 0.0, 2.0, 0.0]);
        let p = tmp("bad.obj", "v 0 0 0\nv 1 0 0\nf 1 2 9\n");
        let e = read_obj(&p, "z").unwrap_err().to_string();
        assert!(e.contains("bad.obj:3:"), "{e}");
        assert!(read_obj(&p, "pressure").is_err());
    }

    #[test]
    fn vtu_tetra_boundary_with_point_data() {
        // two tetrahedra sharing face (1,2,3): 6 boundary triangles
        let body = r#"<?xml version="1.0"?>
<VTKFile type="UnstructuredGrid" version="1.0" byte_order="LittleEndian" header_type="UInt64">
<UnstructuredGrid><Piece NumberOfPoints="5" NumberOfCells="2">
<PointData>
<DataArray type="Float64" Name="von_mises" NumberOfComponents="1" format="ascii">1 2 3 4 5</DataArray>
<DataArray type="Float64" Name="displacement" NumberOfComponents="3" format="ascii">0 0 0 0 0 0 0 0 0 0 0 0 3 4 0</DataArray>
</PointData>
<Points><DataArray type="Float64" NumberOfComponents="3" format="ascii">0 0 0 1 0 0 0 1 0 0 0 1 1 1 1</DataArray></Points>
<Cells>
<DataArray type="Int64" Name="connectivity" format="ascii">0 1 2 3 1 2 3 4</DataArray>
<DataArray type="Int64" Name="offsets" format="ascii">4 8</DataArray>
<DataArray type="UInt8" Name="types" format="ascii">10 10</DataArray>
</Cells></Piece></UnstructuredGrid></VTKFile>"#;
        let p = tmp("two.vtu", body);
        let s = read_vtu_surface(&p, "von_mises", None).unwrap();
        assert_eq!(s.num_triangles(), 6);
        assert_eq!(s.positions.len(), 5);
        let d = read_vtu_surface(&p, "displacement", Some(("displacement", 2.0))).unwrap();
        assert!(d.values.contains(&5.0));
        assert!(d.positions.contains(&[7.0, 9.0, 1.0]));
        let e = read_vtu_surface(&p, "stress", None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("von_mises") && e.contains("displacement"), "{e}");
    }

    #[test]
    fn base64_decodes() {
        assert_eq!(base64_decode("TWFu").unwrap(), b"Man");
        assert_eq!(base64_decode("TWE=").unwrap(), b"Ma");
        assert!(base64_decode("T$E=").is_none());
    }
}
