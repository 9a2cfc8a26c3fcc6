//! Reading Wavefront `.obj` polygon surfaces: `v x y z [w]` and `f i j k ...` lines (index
//! forms `i`, `i/t`, `i//n`, `i/t/n`; negative indices count back from the last vertex read);
//! every other statement (`vt`, `vn`, `g`, `o`, `s`, `usemtl`, `mtllib`, `l`, `p`, ...) is
//! skipped. Errors name the file and line.

use super::text::show;
use crate::{MeshError, Point};
use std::path::Path;

/// Positions and the face table `(offsets, vertices)` of an OBJ file.
pub(crate) struct ObjData {
    pub positions: Vec<Point>,
    pub offsets: Vec<u32>,
    pub verts: Vec<u32>,
}

fn parse_f64(path: &Path, line: usize, t: &[u8], what: &str) -> Result<f64, MeshError> {
    let v = std::str::from_utf8(t)
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .ok_or_else(|| {
            MeshError::parse_line(
                path,
                line,
                format!("expected {what} (a number), found `{}`", show(t)),
            )
        })?;
    if !v.is_finite() {
        return Err(MeshError::parse_line(
            path,
            line,
            format!("{what} is not finite (`{}`)", show(t)),
        ));
    }
    Ok(v)
}

/// Parse an OBJ file's bytes.
pub(crate) fn read(path: &Path, data: &[u8]) -> Result<ObjData, MeshError> {
    let mut positions: Vec<Point> = Vec::new();
    let mut offsets: Vec<u32> = vec![0];
    let mut verts: Vec<u32> = Vec::new();
    // the line of each face, for index range errors found at the end
    let mut face_lines: Vec<u32> = Vec::new();
    let mut lineno = 0usize;
    for raw in data.split(|&b| b == b'\n') {
        lineno += 1;
        let line = match raw.iter().position(|&b| b == b'#') {
            Some(i) => &raw[..i],
            None => raw,
        };
        let mut toks = line
            .split(|&b| b == b' ' || b == b'\t' || b == b'\r' || b == 0x0c)
            .filter(|t| !t.is_empty());
        let Some(kw) = toks.next() else { continue };
        match kw {
            b"v" => {
                let mut p = [0.0; 3];
                for (k, name) in ["x", "y", "z"].iter().enumerate() {
                    let t = toks.next().ok_or_else(|| {
                        MeshError::parse_line(
                            path,
                            lineno,
                            format!("a vertex needs 3 coordinates (missing {name})"),
                        )
                    })?;
                    p[k] = parse_f64(path, lineno, t, &format!("the {name} coordinate"))?;
                }
                positions.push(p);
                if positions.len() >= u32::MAX as usize {
                    return Err(MeshError::parse_line(path, lineno, "too many vertices"));
                }
            }
            b"f" | b"fo" => {
                let start = verts.len();
                for t in toks {
                    let idx = t.split(|&b| b == b'/').next().unwrap_or(t);
                    let v: i64 = std::str::from_utf8(idx)
                        .ok()
                        .and_then(|s| s.parse::<i64>().ok())
                        .ok_or_else(|| {
                            MeshError::parse_line(
                                path,
                                lineno,
                                format!("expected a vertex index, found `{}`", show(t)),
                            )
                        })?;
                    let abs = if v > 0 {
                        v - 1
                    } else if v < 0 {
                        let a = positions.len() as i64 + v;
                        if a < 0 {
                            return Err(MeshError::parse_line(
                                path,
                                lineno,
                                format!(
                                    "relative vertex index {v} reaches before the first vertex \
                                     ({} read so far)",
                                    positions.len()
                                ),
                            ));
                        }
                        a
                    } else {
                        return Err(MeshError::parse_line(
                            path,
                            lineno,
                            "vertex index 0 (OBJ indices start at 1)",
                        ));
                    };
                    if abs >= u32::MAX as i64 {
                        return Err(MeshError::parse_line(
                            path,
                            lineno,
                            format!("vertex index {v} is too large"),
                        ));
                    }
                    verts.push(abs as u32);
                }
                let n = verts.len() - start;
                if n < 3 {
                    return Err(MeshError::parse_line(
                        path,
                        lineno,
                        format!("a face needs at least 3 vertices, this one has {n}"),
                    ));
                }
                if verts.len() >= u32::MAX as usize {
                    return Err(MeshError::parse_line(
                        path,
                        lineno,
                        "too many face vertices",
                    ));
                }
                face_lines.push(lineno as u32);
                offsets.push(verts.len() as u32);
            }
            _ => {}
        }
    }
    // positive indices may refer to vertices defined later in the file: check at the end
    let nv = positions.len();
    if let Some(bad) = (0..offsets.len() - 1).find(|&f| {
        verts[offsets[f] as usize..offsets[f + 1] as usize]
            .iter()
            .any(|&v| v as usize >= nv)
    }) {
        let line = face_lines[bad];
        let v = verts[offsets[bad] as usize..offsets[bad + 1] as usize]
            .iter()
            .find(|&&v| v as usize >= nv)
            .unwrap();
        return Err(MeshError::parse_line(
            path,
            line as usize,
            format!(
                "vertex index {} is beyond the {nv} vertices of the file",
                v + 1
            ),
        ));
    }
    if offsets.len() == 1 {
        return Err(MeshError::Parse {
            path: path.to_path_buf(),
            location: "whole file".into(),
            msg: "the file has no faces (`f` lines)".into(),
        });
    }
    Ok(ObjData {
        positions,
        offsets,
        verts,
    })
}
