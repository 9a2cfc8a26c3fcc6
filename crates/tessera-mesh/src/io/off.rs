//! Object File Format `.off` polygon surfaces (Geomview; the format of the Princeton shape
//! benchmark): a header `OFF` (or `COFF`, `NOFF`, `CNOFF`, `STOFF`: the extra per-vertex data
//! is skipped), the counts `nv nf ne`, one vertex per line (`x y z`, further values skipped),
//! one face per line (`n i1 ... in`, a trailing colour skipped). `#` starts a comment. Errors
//! name the file and line; counts are checked against the file size before allocating.

use super::obj_read::ObjData;
use super::text::{show, Cursor};
use super::{fmt_f64, write_atomic};
use crate::{MeshError, Point};
use std::path::Path;

/// Parse an OFF file's bytes.
pub(crate) fn read(path: &Path, data: &[u8]) -> Result<ObjData, MeshError> {
    let mut c = Cursor::new(path, data);
    c.comment = Some(b'#');
    let head = c.expect_token("the `OFF` header")?;
    let known = [
        &b"OFF"[..],
        b"COFF",
        b"NOFF",
        b"CNOFF",
        b"STOFF",
        b"STCOFF",
        b"STNOFF",
        b"STCNOFF",
    ];
    if !known.contains(&head) {
        return Err(c.err(format!(
            "not an OFF file: expected the header `OFF`, found `{}`",
            show(head)
        )));
    }
    let nv = c.count("the number of vertices", u32::MAX as u64 - 1)?;
    let nf = c.count("the number of faces", u32::MAX as u64 - 1)?;
    c.count("the number of edges", u64::MAX)?;
    // a vertex line takes at least 6 bytes ("0 0 0\n"), a face line at least 8 ("3 0 1 2\n")
    let rest = data.len() - c.pos;
    if nv.saturating_mul(6).saturating_add(nf.saturating_mul(8)) > rest {
        return Err(c.err(format!(
            "the header announces {nv} vertices and {nf} faces but only {rest} bytes follow"
        )));
    }
    let mut positions: Vec<Point> = Vec::with_capacity(nv);
    for _ in 0..nv {
        positions.push([
            c.coord("x coordinate")?,
            c.coord("y coordinate")?,
            c.coord("z coordinate")?,
        ]);
        c.rest_of_line();
    }
    let mut offsets = Vec::with_capacity(nf + 1);
    offsets.push(0u32);
    let mut verts: Vec<u32> = Vec::with_capacity(3 * nf);
    for f in 0..nf {
        let n = c.count("the number of face vertices", rest as u64)?;
        if n < 3 {
            return Err(c.err(format!(
                "face {f} has {n} vertices (a face needs at least 3)"
            )));
        }
        for _ in 0..n {
            let v = c.count("a vertex index", u32::MAX as u64)?;
            if v >= nv {
                return Err(c.err(format!(
                    "face {f} refers to vertex {v}, beyond the {nv} vertices of the file"
                )));
            }
            verts.push(v as u32);
        }
        if verts.len() >= u32::MAX as usize {
            return Err(c.err("too many face vertices"));
        }
        offsets.push(verts.len() as u32);
        c.rest_of_line();
    }
    if nf == 0 {
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

/// Write a polygon surface as OFF, atomically (the edge count is written as 0, which readers
/// ignore); with normals as `NOFF` (`x y z nx ny nz` per vertex).
pub fn write_off(
    path: &Path,
    positions: &[Point],
    offsets: &[u32],
    verts: &[u32],
    normals: Option<&[Point]>,
) -> Result<(), MeshError> {
    super::vtu::check_polygons(path, positions.len(), offsets, verts)?;
    write_atomic(path, |w| {
        writeln!(w, "{}", if normals.is_some() { "NOFF" } else { "OFF" })?;
        writeln!(
            w,
            "{} {} 0",
            positions.len(),
            offsets.len().saturating_sub(1)
        )?;
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
        Ok(())
    })
}
