//! Quaternionic matrices of triangle meshes: the discrete conformal Dirac operator of Crane,
//! Pinkall and Schröder, "Spin Transformations of Discrete Surfaces" (SIGGRAPH 2011), used for
//! the "surface/*" matrices of dissertation §5.4.2; plus small OBJ / PLY readers and generated
//! sphere and torus meshes for tests.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use crate::error::{Result, SpmvError};
use crate::layout::CsrMatrix;
use crate::matrices::csr_from_triplets;

/// A triangle mesh: vertex positions and counter-clockwise triangles.
#[derive(Clone, Debug, Default)]
pub struct TriMesh {
    pub positions: Vec<[f64; 3]>,
    pub triangles: Vec<[u32; 3]>,
}

fn sub(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}
fn cross(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}
fn norm(a: [f64; 3]) -> f64 {
    (a[0] * a[0] + a[1] * a[1] + a[2] * a[2]).sqrt()
}

/// Hamilton product of quaternions (w, x, y, z).
pub fn qmul(a: [f64; 4], b: [f64; 4]) -> [f64; 4] {
    [
        a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3],
        a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2],
        a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1],
        a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0],
    ]
}

impl TriMesh {
    /// Checks indices and non-degenerate triangles.
    pub fn validate(&self) -> Result<()> {
        let n = self.positions.len();
        for (f, t) in self.triangles.iter().enumerate() {
            if t.iter().any(|&v| v as usize >= n) {
                return Err(SpmvError::BadMesh(format!(
                    "triangle {f} {t:?} references a vertex >= {n}"
                )));
            }
            if self.area(f) <= 0.0 {
                return Err(SpmvError::BadMesh(format!(
                    "triangle {f} {t:?} has zero area"
                )));
            }
        }
        if self.positions.iter().flatten().any(|c| !c.is_finite()) {
            return Err(SpmvError::BadMesh("non-finite vertex position".into()));
        }
        Ok(())
    }

    /// Area of triangle `f`.
    pub fn area(&self, f: usize) -> f64 {
        let [a, b, c] = self.triangles[f].map(|v| self.positions[v as usize]);
        0.5 * norm(cross(sub(b, a), sub(c, a)))
    }

    /// Icosphere: the icosahedron subdivided `level` times, projected to the unit sphere
    /// (10 * 4^level + 2 vertices).
    pub fn icosphere(level: u32) -> Self {
        let t = (1.0 + 5f64.sqrt()) / 2.0;
        let mut p: Vec<[f64; 3]> = vec![
            [-1.0, t, 0.0],
            [1.0, t, 0.0],
            [-1.0, -t, 0.0],
            [1.0, -t, 0.0],
            [0.0, -1.0, t],
            [0.0, 1.0, t],
            [0.0, -1.0, -t],
            [0.0, 1.0, -t],
            [t, 0.0, -1.0],
            [t, 0.0, 1.0],
            [-t, 0.0, -1.0],
            [-t, 0.0, 1.0],
        ];
        let unit = |v: [f64; 3]| {
            let l = norm(v);
            [v[0] / l, v[1] / l, v[2] / l]
        };
        for v in p.iter_mut() {
            *v = unit(*v);
        }
        let mut tris: Vec<[u32; 3]> = vec![
            [0, 11, 5],
            [0, 5, 1],
            [0, 1, 7],
            [0, 7, 10],
            [0, 10, 11],
            [1, 5, 9],
            [5, 11, 4],
            [11, 10, 2],
            [10, 7, 6],
            [7, 1, 8],
            [3, 9, 4],
            [3, 4, 2],
            [3, 2, 6],
            [3, 6, 8],
            [3, 8, 9],
            [4, 9, 5],
            [2, 4, 11],
            [6, 2, 10],
            [8, 6, 7],
            [9, 8, 1],
        ];
        for _ in 0..level {
            let mut mid: HashMap<(u32, u32), u32> = HashMap::new();
            let mut next = Vec::with_capacity(tris.len() * 4);
            let mut m = |a: u32, b: u32, p: &mut Vec<[f64; 3]>| -> u32 {
                let key = (a.min(b), a.max(b));
                *mid.entry(key).or_insert_with(|| {
                    let (x, y) = (p[a as usize], p[b as usize]);
                    p.push(unit([
                        (x[0] + y[0]) / 2.0,
                        (x[1] + y[1]) / 2.0,
                        (x[2] + y[2]) / 2.0,
                    ]));
                    (p.len() - 1) as u32
                })
            };
            for &[a, b, c] in &tris {
                let ab = m(a, b, &mut p);
                let bc = m(b, c, &mut p);
                let ca = m(c, a, &mut p);
                next.extend_from_slice(&[[a, ab, ca], [b, bc, ab], [c, ca, bc], [ab, bc, ca]]);
            }
            tris = next;
        }
        TriMesh {
            positions: p,
            triangles: tris,
        }
    }

    /// Torus with `n` x `m` vertices (major radius 1, minor radius 0.35).
    pub fn torus(n: u32, m: u32) -> Self {
        let (n, m) = (n.max(3), m.max(3));
        let mut p = Vec::with_capacity((n * m) as usize);
        for i in 0..n {
            let u = 2.0 * std::f64::consts::PI * i as f64 / n as f64;
            for j in 0..m {
                let v = 2.0 * std::f64::consts::PI * j as f64 / m as f64;
                let r = 1.0 + 0.35 * v.cos();
                p.push([r * u.cos(), r * u.sin(), 0.35 * v.sin()]);
            }
        }
        let id = |i: u32, j: u32| (i % n) * m + (j % m);
        let mut t = Vec::with_capacity((2 * n * m) as usize);
        for i in 0..n {
            for j in 0..m {
                t.push([id(i, j), id(i + 1, j), id(i + 1, j + 1)]);
                t.push([id(i, j), id(i + 1, j + 1), id(i, j + 1)]);
            }
        }
        TriMesh {
            positions: p,
            triangles: t,
        }
    }

    /// The quaternionic matrix `D - rho` of Crane et al. (2011), Sec. 5: for each face f with
    /// area A and edge vectors e_i opposite corner i (as imaginary quaternions),
    /// `D_ij += -1/(4A) e_i e_j + rho/6 (e_j - e_i) + A rho^2 / 9` for all corners i, j of f.
    /// `rho` is the curvature change per face (0 gives the plain Dirac operator). The result is
    /// quaternion-Hermitian (`D_ji = conj(D_ij)`). Entries are (w, x, y, z).
    pub fn dirac_operator(&self, rho: impl Fn(usize) -> f64) -> Result<CsrMatrix<f64>> {
        self.validate()?;
        let nf = self.triangles.len();
        let (mut r, mut c, mut v) = (
            Vec::with_capacity(9 * nf),
            Vec::with_capacity(9 * nf),
            Vec::with_capacity(36 * nf),
        );
        for f in 0..nf {
            let t = self.triangles[f];
            let a = self.area(f);
            let rf = rho(f);
            let (ca, cb, cc) = (-1.0 / (4.0 * a), rf / 6.0, a * rf * rf / 9.0);
            let e: [[f64; 4]; 3] = std::array::from_fn(|i| {
                let d = sub(
                    self.positions[t[(i + 2) % 3] as usize],
                    self.positions[t[(i + 1) % 3] as usize],
                );
                [0.0, d[0], d[1], d[2]]
            });
            for i in 0..3 {
                for j in 0..3 {
                    let p = qmul(e[i], e[j]);
                    let q: [f64; 4] = std::array::from_fn(|k| {
                        ca * p[k] + cb * (e[j][k] - e[i][k]) + if k == 0 { cc } else { 0.0 }
                    });
                    r.push(t[i]);
                    c.push(t[j]);
                    v.extend_from_slice(&q);
                }
            }
        }
        let n = self.positions.len();
        csr_from_triplets(n, n, 4, &r, &c, &v)
    }
}

/// Reads an OBJ (`v` and `f` lines; polygons are fan-triangulated; `v/vt/vn` and negative
/// indices are accepted) or PLY (ASCII or binary little/big endian; `vertex` x, y, z and
/// `face` vertex index lists) triangle mesh.
pub fn read_mesh(path: &Path) -> Result<TriMesh> {
    let data = super::read_input(path)?;
    let name = path.display().to_string();
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    let mesh = match ext.as_str() {
        "obj" => parse_obj(BufReader::new(&data[..]), &name)?,
        "ply" => parse_ply(&data, &name)?,
        _ => {
            return Err(SpmvError::BadOption {
                what: "mesh file",
                value: name,
                expected: ".obj or .ply".into(),
            })
        }
    };
    mesh.validate()?;
    Ok(mesh)
}

/// Parses OBJ text.
pub fn parse_obj<R: Read>(r: BufReader<R>, file: &str) -> Result<TriMesh> {
    let perr = |line: usize, msg: String| SpmvError::Parse {
        file: file.to_string(),
        line,
        msg,
    };
    let mut m = TriMesh::default();
    for (k, line) in r.lines().enumerate() {
        let ln = k + 1;
        let line = line.map_err(|e| perr(ln, e.to_string()))?;
        let mut tok = line.split_whitespace();
        match tok.next() {
            Some("v") => {
                let c: Vec<f64> = tok
                    .take(3)
                    .map(|s| {
                        s.parse::<f64>()
                            .map_err(|_| perr(ln, format!("bad coordinate `{s}`")))
                    })
                    .collect::<Result<_>>()?;
                if c.len() != 3 {
                    return Err(perr(ln, "vertex needs 3 coordinates".into()));
                }
                m.positions.push([c[0], c[1], c[2]]);
            }
            Some("f") => {
                let n = m.positions.len() as i64;
                let idx: Vec<u32> = tok
                    .map(|s| {
                        let first = s.split('/').next().unwrap_or("");
                        let i: i64 = first
                            .parse()
                            .map_err(|_| perr(ln, format!("bad face index `{s}`")))?;
                        let i = if i < 0 { n + i } else { i - 1 };
                        if i < 0 || i >= n {
                            return Err(perr(
                                ln,
                                format!("face index `{s}` outside the {n} vertices read so far"),
                            ));
                        }
                        Ok(i as u32)
                    })
                    .collect::<Result<_>>()?;
                if idx.len() < 3 {
                    return Err(perr(ln, "face needs at least 3 vertices".into()));
                }
                for k in 1..idx.len() - 1 {
                    m.triangles.push([idx[0], idx[k], idx[k + 1]]);
                }
            }
            _ => {}
        }
    }
    Ok(m)
}

#[derive(Clone, Copy, PartialEq)]
enum PlyFmt {
    Ascii,
    Le,
    Be,
}

fn ply_size(t: &str) -> Option<usize> {
    Some(match t {
        "char" | "uchar" | "int8" | "uint8" => 1,
        "short" | "ushort" | "int16" | "uint16" => 2,
        "int" | "uint" | "float" | "int32" | "uint32" | "float32" => 4,
        "double" | "float64" => 8,
        _ => return None,
    })
}

/// Parses PLY data (header lines are counted for errors; binary bodies report byte offsets).
pub fn parse_ply(data: &[u8], file: &str) -> Result<TriMesh> {
    let perr = |line: usize, msg: String| SpmvError::Parse {
        file: file.to_string(),
        line,
        msg,
    };
    // header
    let mut pos = 0;
    let mut line_no = 0;
    let mut fmt = None;
    // (element name, count, properties: (name, type, Option<list count type>))
    type Prop = (String, String, Option<String>);
    let mut elems: Vec<(String, usize, Vec<Prop>)> = Vec::new();
    loop {
        let end = data[pos..]
            .iter()
            .position(|&b| b == b'\n')
            .ok_or_else(|| perr(line_no + 1, "unterminated header".into()))?;
        let line = String::from_utf8_lossy(&data[pos..pos + end])
            .trim()
            .to_string();
        pos += end + 1;
        line_no += 1;
        let t: Vec<&str> = line.split_whitespace().collect();
        if line_no == 1 {
            if line != "ply" {
                return Err(perr(1, "missing `ply` magic".into()));
            }
            continue;
        }
        match t.first().copied() {
            Some("format") => {
                fmt = Some(match t.get(1).copied() {
                    Some("ascii") => PlyFmt::Ascii,
                    Some("binary_little_endian") => PlyFmt::Le,
                    Some("binary_big_endian") => PlyFmt::Be,
                    _ => return Err(perr(line_no, format!("unknown format `{line}`"))),
                })
            }
            Some("element") => {
                let n = t
                    .get(2)
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| perr(line_no, "bad element line".into()))?;
                elems.push((t.get(1).unwrap_or(&"").to_string(), n, Vec::new()));
            }
            Some("property") => {
                let e = elems
                    .last_mut()
                    .ok_or_else(|| perr(line_no, "property before element".into()))?;
                let p = if t.get(1) == Some(&"list") {
                    if t.len() != 5 || ply_size(t[2]).is_none() || ply_size(t[3]).is_none() {
                        return Err(perr(line_no, "bad list property".into()));
                    }
                    (t[4].to_string(), t[3].to_string(), Some(t[2].to_string()))
                } else {
                    if t.len() != 3 || ply_size(t[1]).is_none() {
                        return Err(perr(line_no, format!("bad property `{line}`")));
                    }
                    (t[2].to_string(), t[1].to_string(), None)
                };
                e.2.push(p);
            }
            Some("end_header") => break,
            _ => {}
        }
    }
    let fmt = fmt.ok_or_else(|| perr(line_no, "missing format line".into()))?;
    let mut m = TriMesh::default();
    // body reader
    let mut ascii_tokens: Vec<(usize, &str)> = Vec::new();
    let mut at = 0usize;
    if fmt == PlyFmt::Ascii {
        let body = std::str::from_utf8(&data[pos..])
            .map_err(|_| perr(line_no + 1, "body is not text".into()))?;
        for (k, l) in body.lines().enumerate() {
            for tok in l.split_whitespace() {
                ascii_tokens.push((line_no + 1 + k, tok));
            }
        }
    }
    let mut read = |ty: &str| -> Result<f64> {
        if fmt == PlyFmt::Ascii {
            let (ln, tok) = *ascii_tokens
                .get(at)
                .ok_or_else(|| perr(line_no + 1, "unexpected end of data".into()))?;
            at += 1;
            return tok
                .parse::<f64>()
                .map_err(|_| perr(ln, format!("bad number `{tok}`")));
        }
        let n = ply_size(ty).unwrap_or(4);
        if pos + n > data.len() {
            return Err(SpmvError::ParseBinary {
                file: file.to_string(),
                offset: pos,
                msg: "unexpected end of data".into(),
            });
        }
        let mut b = [0u8; 8];
        b[..n].copy_from_slice(&data[pos..pos + n]);
        if fmt == PlyFmt::Be {
            b[..n].reverse();
        }
        pos += n;
        Ok(match ty {
            "char" | "int8" => b[0] as i8 as f64,
            "uchar" | "uint8" => b[0] as f64,
            "short" | "int16" => i16::from_le_bytes([b[0], b[1]]) as f64,
            "ushort" | "uint16" => u16::from_le_bytes([b[0], b[1]]) as f64,
            "int" | "int32" => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
            "uint" | "uint32" => u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
            "float" | "float32" => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
            _ => f64::from_le_bytes(b),
        })
    };
    for (name, count, props) in &elems {
        if props.is_empty() && *count > 0 {
            return Err(perr(
                line_no,
                format!("element `{name}` has no properties but a count of {count}"),
            ));
        }
        for _ in 0..*count {
            let mut xyz = [f64::NAN; 3];
            let mut face: Vec<u32> = Vec::new();
            for (pname, ty, list) in props {
                if let Some(ct) = list {
                    let k = read(ct)?;
                    if !(0.0..=1e6).contains(&k) {
                        return Err(perr(
                            line_no,
                            format!("bad list length {k} in element `{name}`"),
                        ));
                    }
                    for _ in 0..k as usize {
                        let v = read(ty)?;
                        if name == "face" && (pname == "vertex_indices" || pname == "vertex_index")
                        {
                            face.push(v as u32);
                        }
                    }
                } else {
                    let v = read(ty)?;
                    if name == "vertex" {
                        match pname.as_str() {
                            "x" => xyz[0] = v,
                            "y" => xyz[1] = v,
                            "z" => xyz[2] = v,
                            _ => {}
                        }
                    }
                }
            }
            if name == "vertex" {
                m.positions.push(xyz);
            } else if name == "face" {
                if face.len() < 3 {
                    return Err(perr(line_no, "face with fewer than 3 vertices".into()));
                }
                for k in 1..face.len() - 1 {
                    m.triangles.push([face[0], face[k], face[k + 1]]);
                }
            }
        }
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn icosphere_counts_and_dirac_is_hermitian() {
        let m = TriMesh::icosphere(2);
        assert_eq!(m.positions.len(), 10 * 16 + 2);
        assert_eq!(m.triangles.len(), 20 * 16);
        let d = m.dirac_operator(|_| 0.3).unwrap();
        d.validate().unwrap();
        // vertex + neighbours: nnz = n + 2 * edges = n + 2 * (3 f / 2)
        assert_eq!(d.nnz(), m.positions.len() + 3 * m.triangles.len());
        for i in 0..d.n_rows {
            for p in d.row_ptr[i] as usize..d.row_ptr[i + 1] as usize {
                let j = d.col_idx[p] as usize;
                let q = d.row_ptr[j] as usize
                    + d.col_idx[d.row_ptr[j] as usize..d.row_ptr[j + 1] as usize]
                        .iter()
                        .position(|&c| c as usize == i)
                        .unwrap();
                let (a, b) = (&d.values[4 * p..4 * p + 4], &d.values[4 * q..4 * q + 4]);
                let s = a.iter().map(|v| v.abs()).sum::<f64>();
                assert!((a[0] - b[0]).abs() <= 1e-12 * s);
                for k in 1..4 {
                    assert!((a[k] + b[k]).abs() <= 1e-12 * s, "D_ji != conj(D_ij)");
                }
            }
        }
    }

    #[test]
    fn obj_and_ply_read_the_same_square() {
        let obj = "# square\nv 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nf 1/1 2/2 3/3 4/4\n";
        let a = parse_obj(BufReader::new(obj.as_bytes()), "s.obj").unwrap();
        let ply = "ply\nformat ascii 1.0\nelement vertex 4\nproperty float x\nproperty float y\nproperty float z\nelement face 1\nproperty list uchar int vertex_indices\nend_header\n0 0 0\n1 0 0\n1 1 0\n0 1 0\n4 0 1 2 3\n";
        let b = parse_ply(ply.as_bytes(), "s.ply").unwrap();
        assert_eq!(a.triangles, vec![[0, 1, 2], [0, 2, 3]]);
        assert_eq!(a.triangles, b.triangles);
        assert_eq!(a.positions, b.positions);
        // binary little endian
        let mut bin = b"ply\nformat binary_little_endian 1.0\nelement vertex 3\nproperty double x\nproperty double y\nproperty double z\nelement face 1\nproperty list uchar uint vertex_indices\nend_header\n".to_vec();
        for v in [[0.0f64, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]] {
            for c in v {
                bin.extend_from_slice(&c.to_le_bytes());
            }
        }
        bin.push(3);
        for i in [0u32, 1, 2] {
            bin.extend_from_slice(&i.to_le_bytes());
        }
        let c = parse_ply(&bin, "b.ply").unwrap();
        assert_eq!(c.triangles, vec![[0, 1, 2]]);
        assert_eq!(c.positions[1], [1.0, 0.0, 0.0]);
        let e = parse_ply(&bin[..bin.len() - 2], "b.ply")
            .unwrap_err()
            .to_string();
        assert!(e.contains("b.ply: byte"), "{e}");
        let e = parse_obj(BufReader::new("v 0 0 0\nf 1 2 3\n".as_bytes()), "bad.obj")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("bad.obj:2:"), "{e}");
    }
}
