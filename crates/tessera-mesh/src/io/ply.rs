//! Stanford `.ply` polygon surfaces, ASCII and binary (little and big endian).
//!
//! Reading: the `vertex` element's `x`, `y`, `z` properties (any numeric type; other vertex
//! properties are skipped) and the `face` element's list property `vertex_indices` (or
//! `vertex_index`); other elements are skipped. Header counts are checked against the size of
//! the file before anything is allocated. Errors name the file and the line (header, ASCII
//! data) or the byte offset (binary data).
//!
//! Writing: `format binary_little_endian 1.0` (or ASCII), `double` coordinates (exact), faces
//! as `list uchar int vertex_indices` (`list int int` when a face has more than 255 vertices).

use super::obj_read::ObjData;
use super::text::{show, Cursor};
use super::{fmt_f64, write_atomic};
use crate::{MeshError, Point};
use std::path::Path;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scalar {
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    F32,
    F64,
}

impl Scalar {
    fn parse(t: &[u8]) -> Option<Scalar> {
        Some(match t {
            b"char" | b"int8" => Scalar::I8,
            b"uchar" | b"uint8" => Scalar::U8,
            b"short" | b"int16" => Scalar::I16,
            b"ushort" | b"uint16" => Scalar::U16,
            b"int" | b"int32" => Scalar::I32,
            b"uint" | b"uint32" => Scalar::U32,
            b"float" | b"float32" => Scalar::F32,
            b"double" | b"float64" => Scalar::F64,
            _ => return None,
        })
    }
    fn size(self) -> usize {
        match self {
            Scalar::I8 | Scalar::U8 => 1,
            Scalar::I16 | Scalar::U16 => 2,
            Scalar::I32 | Scalar::U32 | Scalar::F32 => 4,
            Scalar::F64 => 8,
        }
    }
    fn is_int(self) -> bool {
        !matches!(self, Scalar::F32 | Scalar::F64)
    }
}

#[derive(Clone, Debug)]
enum Property {
    Scalar(Scalar, Vec<u8>),
    List(Scalar, Scalar, Vec<u8>),
}

#[derive(Clone, Debug)]
struct Element {
    name: Vec<u8>,
    count: usize,
    props: Vec<Property>,
    line: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Encoding {
    Ascii,
    Little,
    Big,
}

/// Read one scalar as f64 (ASCII token or binary value).
fn read_value(c: &mut Cursor, enc: Encoding, ty: Scalar, what: &str) -> Result<f64, MeshError> {
    if enc == Encoding::Ascii {
        return if ty.is_int() {
            Ok(c.int(what)? as f64)
        } else {
            c.num::<f64>(what)
        };
    }
    let b = c.bytes(ty.size(), what)?;
    let le = enc == Encoding::Little;
    macro_rules! get {
        ($t:ty, $n:expr) => {{
            let a: [u8; $n] = b.try_into().expect("size");
            if le {
                <$t>::from_le_bytes(a)
            } else {
                <$t>::from_be_bytes(a)
            }
        }};
    }
    Ok(match ty {
        Scalar::I8 => b[0] as i8 as f64,
        Scalar::U8 => b[0] as f64,
        Scalar::I16 => get!(i16, 2) as f64,
        Scalar::U16 => get!(u16, 2) as f64,
        Scalar::I32 => get!(i32, 4) as f64,
        Scalar::U32 => get!(u32, 4) as f64,
        Scalar::F32 => get!(f32, 4) as f64,
        Scalar::F64 => get!(f64, 8),
    })
}

/// Parse a PLY file's bytes into positions and a face table.
pub(crate) fn read(path: &Path, data: &[u8]) -> Result<ObjData, MeshError> {
    let mut c = Cursor::new(path, data);
    let magic = c.rest_of_line();
    if magic != b"ply" {
        return Err(c.err_here(format!(
            "not a PLY file: the first line is `{}`, expected `ply`",
            show(magic)
        )));
    }
    let mut enc = None;
    let mut elements: Vec<Element> = Vec::new();
    // header: one statement per line
    loop {
        c.end_of_line();
        if c.pos >= data.len() {
            return Err(c.err_here("the header has no `end_header` (the file is truncated)"));
        }
        let line_no = c.line;
        let line = c.rest_of_line();
        let toks: Vec<&[u8]> = line
            .split(|&b| b == b' ' || b == b'\t' || b == b'\r')
            .filter(|t| !t.is_empty())
            .collect();
        let herr = |msg: String| MeshError::parse_line(path, line_no, msg);
        match toks.first().copied() {
            None => continue,
            Some(b"comment") | Some(b"obj_info") => continue,
            Some(b"end_header") => break,
            Some(b"format") => {
                enc = Some(match (toks.get(1).copied(), toks.get(2).copied()) {
                    (Some(b"ascii"), Some(b"1.0")) => Encoding::Ascii,
                    (Some(b"binary_little_endian"), Some(b"1.0")) => Encoding::Little,
                    (Some(b"binary_big_endian"), Some(b"1.0")) => Encoding::Big,
                    _ => {
                        return Err(herr(format!(
                            "unsupported format line `{}` (ascii, binary_little_endian or \
                             binary_big_endian 1.0)",
                            show(line)
                        )))
                    }
                });
            }
            Some(b"element") => {
                if toks.len() != 3 {
                    return Err(herr("expected `element NAME COUNT`".into()));
                }
                let count = std::str::from_utf8(toks[2])
                    .ok()
                    .and_then(|s| s.parse::<u64>().ok())
                    .ok_or_else(|| {
                        herr(format!(
                            "expected an element count, found `{}`",
                            show(toks[2])
                        ))
                    })?;
                // every item takes at least one byte of the file
                if count > data.len() as u64 {
                    return Err(herr(format!(
                        "the header announces {count} `{}` elements but the file has only {} \
                         bytes",
                        show(toks[1]),
                        data.len()
                    )));
                }
                elements.push(Element {
                    name: toks[1].to_vec(),
                    count: count as usize,
                    props: Vec::new(),
                    line: line_no,
                });
            }
            Some(b"property") => {
                let el = elements
                    .last_mut()
                    .ok_or_else(|| herr("a property before any element".into()))?;
                let ty = |t: &[u8]| {
                    Scalar::parse(t)
                        .ok_or_else(|| herr(format!("unknown property type `{}`", show(t))))
                };
                match toks.get(1).copied() {
                    Some(b"list") if toks.len() == 5 => {
                        let (ct, it) = (ty(toks[2])?, ty(toks[3])?);
                        if !ct.is_int() || !it.is_int() {
                            return Err(herr("list counts and indices must be integers".into()));
                        }
                        el.props.push(Property::List(ct, it, toks[4].to_vec()));
                    }
                    Some(t) if toks.len() == 3 => {
                        el.props.push(Property::Scalar(ty(t)?, toks[2].to_vec()))
                    }
                    _ => return Err(herr(format!("malformed property line `{}`", show(line)))),
                }
            }
            Some(t) => {
                return Err(herr(format!("unknown header keyword `{}`", show(t))));
            }
        }
    }
    c.end_of_line();
    let enc = enc.ok_or_else(|| MeshError::parse_line(path, 2, "the header has no format line"))?;
    if enc != Encoding::Ascii {
        c.binary = true;
        c.swap = enc == Encoding::Big;
    }
    let vi = elements
        .iter()
        .position(|e| e.name == b"vertex")
        .ok_or_else(|| MeshError::parse_line(path, 1, "the header has no `vertex` element"))?;
    let coord = |name: &[u8]| {
        elements[vi]
            .props
            .iter()
            .position(|p| matches!(p, Property::Scalar(_, n) if n == name))
    };
    let (xi, yi, zi) = match (coord(b"x"), coord(b"y"), coord(b"z")) {
        (Some(x), Some(y), Some(z)) => (x, y, z),
        _ => {
            return Err(MeshError::parse_line(
                path,
                elements[vi].line,
                "the `vertex` element lacks an x, y or z property",
            ))
        }
    };
    let fi = elements.iter().position(|e| e.name == b"face");
    let list_i = match fi {
        Some(fi) => Some(
            elements[fi]
                .props
                .iter()
                .position(|p| {
                    matches!(p, Property::List(_, _, n) if n == b"vertex_indices" || n == b"vertex_index")
                })
                .ok_or_else(|| {
                    MeshError::parse_line(
                        path,
                        elements[fi].line,
                        "the `face` element has no list property `vertex_indices`",
                    )
                })?,
        ),
        None => None,
    };
    // binary: fixed-size items let the announced counts be checked exactly
    let remaining = data.len() - c.pos;
    for el in &elements {
        let min: usize = el
            .props
            .iter()
            .map(|p| match (p, enc) {
                (Property::Scalar(..), Encoding::Ascii) => 2,
                (Property::Scalar(t, _), _) => t.size(),
                (Property::List(..), Encoding::Ascii) => 2,
                (Property::List(ct, _, _), _) => ct.size(),
            })
            .sum::<usize>()
            .max(1);
        if el.count.saturating_mul(min) > remaining {
            return Err(MeshError::parse_line(
                path,
                el.line,
                format!(
                    "the header announces {} `{}` elements (at least {min} bytes each) but only \
                     {remaining} bytes follow it",
                    el.count,
                    show(&el.name)
                ),
            ));
        }
    }
    let mut positions: Vec<Point> = Vec::new();
    let mut offsets: Vec<u32> = vec![0];
    let mut verts: Vec<u32> = Vec::new();
    let mut face_loc: Vec<u64> = Vec::new();
    for (ei, el) in elements.iter().enumerate() {
        if ei == vi {
            positions.reserve(el.count);
        }
        let ascii = enc == Encoding::Ascii;
        for item in 0..el.count {
            let mut xyz = [0.0f64; 3];
            // ASCII: one item per line
            let mut item_line = 0;
            let line_check = |c: &Cursor, item_line: &mut usize| -> Result<(), MeshError> {
                if !ascii {
                    return Ok(());
                }
                if *item_line == 0 {
                    *item_line = c.tok_line;
                } else if c.tok_line != *item_line {
                    return Err(MeshError::parse_line(
                        path,
                        *item_line,
                        format!("{} {item} has too few values on its line", show(&el.name)),
                    ));
                }
                Ok(())
            };
            for (pi, p) in el.props.iter().enumerate() {
                match p {
                    Property::Scalar(t, name) => {
                        let is_coord = ei == vi && (pi == xi || pi == yi || pi == zi);
                        let v = if is_coord {
                            let v = read_value(&mut c, enc, *t, "a vertex coordinate")?;
                            line_check(&c, &mut item_line)?;
                            if !v.is_finite() {
                                return Err(c.err(format!(
                                    "property `{}` of vertex {item} is not finite",
                                    show(name)
                                )));
                            }
                            v
                        } else {
                            let v = read_value(&mut c, enc, *t, "a property value")?;
                            line_check(&c, &mut item_line)?;
                            v
                        };
                        if is_coord {
                            xyz[if pi == xi {
                                0
                            } else if pi == yi {
                                1
                            } else {
                                2
                            }] = v;
                        }
                    }
                    Property::List(ct, it, name) => {
                        let n = read_value(&mut c, enc, *ct, "a list length")?;
                        line_check(&c, &mut item_line)?;
                        if n < 0.0 || n as usize > remaining {
                            return Err(c.err(format!(
                                "list `{}` of {} {item} has length {n}",
                                show(name),
                                show(&el.name)
                            )));
                        }
                        let n = n as usize;
                        let is_face = Some(ei) == fi && Some(pi) == list_i;
                        if is_face {
                            if n < 3 {
                                return Err(c.err(format!(
                                    "face {item} has {n} vertices (a face needs at least 3)"
                                )));
                            }
                            face_loc.push(c.location());
                        }
                        for _ in 0..n {
                            let v = read_value(&mut c, enc, *it, "a list index")?;
                            line_check(&c, &mut item_line)?;
                            if is_face {
                                if v < 0.0 || v >= u32::MAX as f64 {
                                    return Err(
                                        c.err(format!("face {item} has the vertex index {v}"))
                                    );
                                }
                                verts.push(v as u32);
                            }
                        }
                        if is_face {
                            if verts.len() >= u32::MAX as usize {
                                return Err(c.err("too many face vertices"));
                            }
                            offsets.push(verts.len() as u32);
                        }
                    }
                }
            }
            if ascii && item_line != 0 {
                let rest = c.rest_of_line();
                if !rest.is_empty() {
                    return Err(MeshError::parse_line(
                        path,
                        item_line,
                        format!(
                            "{} {item} has more values than its properties (`{}`)",
                            show(&el.name),
                            show(rest)
                        ),
                    ));
                }
            }
            if ei == vi {
                positions.push(xyz);
            }
        }
    }
    let nv = positions.len();
    if let Some(f) = (0..offsets.len() - 1).find(|&f| {
        verts[offsets[f] as usize..offsets[f + 1] as usize]
            .iter()
            .any(|&v| v as usize >= nv)
    }) {
        return Err(c.err_at(
            face_loc[f],
            format!("face {f} refers to a vertex beyond the {nv} vertices of the file"),
        ));
    }
    if offsets.len() == 1 {
        return Err(MeshError::Parse {
            path: path.to_path_buf(),
            location: "whole file".into(),
            msg: "the file has no faces".into(),
        });
    }
    Ok(ObjData {
        positions,
        offsets,
        verts,
    })
}

/// Write a polygon surface as PLY (`binary`: little endian, else ASCII), atomically, with
/// optional vertex normals (`nx ny nz` vertex properties).
pub fn write_ply(
    path: &Path,
    positions: &[Point],
    offsets: &[u32],
    verts: &[u32],
    normals: Option<&[Point]>,
    binary: bool,
) -> Result<(), MeshError> {
    super::vtu::check_polygons(path, positions.len(), offsets, verts)?;
    if normals.is_some_and(|n| n.len() != positions.len()) {
        return Err(MeshError::InvalidTopology(format!(
            "{}: normals for {} of {} vertices",
            path.display(),
            normals.map_or(0, |n| n.len()),
            positions.len()
        )));
    }
    let nf = offsets.len().saturating_sub(1);
    let big = offsets.windows(2).any(|w| w[1] - w[0] > 255);
    write_atomic(path, |w| {
        writeln!(w, "ply")?;
        writeln!(
            w,
            "format {} 1.0",
            if binary {
                "binary_little_endian"
            } else {
                "ascii"
            }
        )?;
        writeln!(w, "comment tessera surface")?;
        writeln!(w, "element vertex {}", positions.len())?;
        writeln!(w, "property double x\nproperty double y\nproperty double z")?;
        if normals.is_some() {
            writeln!(
                w,
                "property double nx\nproperty double ny\nproperty double nz"
            )?;
        }
        writeln!(w, "element face {nf}")?;
        writeln!(
            w,
            "property list {} int vertex_indices",
            if big { "int" } else { "uchar" }
        )?;
        writeln!(w, "end_header")?;
        if binary {
            for (i, p) in positions.iter().enumerate() {
                for x in p {
                    w.write_all(&x.to_le_bytes())?;
                }
                if let Some(n) = normals {
                    for x in n[i] {
                        w.write_all(&x.to_le_bytes())?;
                    }
                }
            }
            for win in offsets.windows(2) {
                let n = win[1] - win[0];
                if big {
                    w.write_all(&(n as i32).to_le_bytes())?;
                } else {
                    w.write_all(&[n as u8])?;
                }
                for &v in &verts[win[0] as usize..win[1] as usize] {
                    w.write_all(&(v as i32).to_le_bytes())?;
                }
            }
        } else {
            for (i, p) in positions.iter().enumerate() {
                write!(w, "{} {} {}", fmt_f64(p[0]), fmt_f64(p[1]), fmt_f64(p[2]))?;
                if let Some(n) = normals {
                    let n = n[i];
                    write!(w, " {} {} {}", fmt_f64(n[0]), fmt_f64(n[1]), fmt_f64(n[2]))?;
                }
                writeln!(w)?;
            }
            let mut line = String::new();
            for win in offsets.windows(2) {
                use std::fmt::Write as _;
                line.clear();
                let _ = write!(line, "{}", win[1] - win[0]);
                for &v in &verts[win[0] as usize..win[1] as usize] {
                    let _ = write!(line, " {v}");
                }
                writeln!(w, "{line}")?;
            }
        }
        Ok(())
    })
}
