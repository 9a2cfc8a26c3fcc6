//! OpenVolumeMesh text files (`.ovm`, "OVM ASCII").
//!
//! OVM stores what a [`PolyMesh`] stores (dissertation §3.4): vertices, edges as vertex
//! pairs (∂1), faces as lists of half-edges (∂2) and polyhedra as lists of half-faces
//! (∂3). Half-edge `2i` is edge `i` from its first to its second vertex and `2i + 1` the
//! reverse, so it maps to the TCSR entry `+i` or `-i-1`. Half-face `2i` is face `i` in
//! its stored orientation and `2i + 1` the opposite one. OVM lists a polyhedron by the
//! half-faces whose normals point into it (the convention of OpenVolumeMesh's own
//! writers and of meshio), while ∂3 stores +1 where the face is outward; so half-face
//! `2i` is ∂3 entry `-i-1` and `2i + 1` is `+i`. On reading, cells whose signed volume
//! comes out negative are flipped (files written with the opposite convention), and zero
//! volumes are reported with their line. Edges and faces keep the file's numbering, so
//! read -> write -> read is exact.
//!
//! The reader is strict: every face is a closed loop of half-edges through at least three
//! distinct vertices, no two faces have the same vertex set, every polyhedron is closed
//! and consistently oriented (each of its edges is used by exactly two of its half-faces,
//! once in each direction), the file has at least one polyhedron, and its last record ends
//! with a line end.

use super::text::{show, Cursor};
use super::{fmt_f64, write_atomic, MeshFile};
use crate::{MeshError, PolyMesh};
use std::path::Path;
use tessera_sparse::tcsr::{decode, encode, negate};
use tessera_sparse::Tcsr;

const MAX_COUNT: u64 = i32::MAX as u64 / 2;

/// A section header and its count, checked against the bytes left (`k` numbers at least
/// per record).
fn header(c: &mut Cursor, name: &str, k: u64) -> Result<usize, MeshError> {
    let t = c.expect_token(&format!("`{name}`"))?;
    if !t.eq_ignore_ascii_case(name.as_bytes()) {
        return Err(c.err(format!(
            "expected the `{name}` section, found `{}`",
            show(t)
        )));
    }
    let what = format!("the number of {}", name.to_ascii_lowercase());
    let n = c.count(&what, MAX_COUNT)?;
    c.check_count(n as u64, Cursor::text_record(k), &what)
}

/// Read an OVM ASCII file.
pub fn read(path: &Path, data: &[u8]) -> Result<MeshFile, MeshError> {
    let mut c = Cursor::new(path, data);
    c.comment = Some(b'#');
    let t = c.expect_token("`OVM`")?;
    if t != b"OVM" {
        return Err(c.err(format!(
            "not an OVM file: expected `OVM ASCII`, found `{}`",
            show(t)
        )));
    }
    let t = c.expect_token("`ASCII`")?;
    if !t.eq_ignore_ascii_case(b"ASCII") {
        return Err(c.err(format!(
            "only `OVM ASCII` files are supported, found `OVM {}`",
            show(t)
        )));
    }
    let nv = header(&mut c, "Vertices", 3)?;
    let mut positions = Vec::with_capacity(nv);
    for _ in 0..nv {
        positions.push([
            c.coord("x coordinate")?,
            c.coord("y coordinate")?,
            c.coord("z coordinate")?,
        ]);
    }
    let ne = header(&mut c, "Edges", 2)?;
    let mut edges = Vec::with_capacity(ne);
    for _ in 0..ne {
        let a = c.uint("an edge vertex")?;
        if a >= nv as u64 {
            return Err(c.err(format!(
                "vertex index {a} out of range (there are {nv} vertices)"
            )));
        }
        let b = c.uint("an edge vertex")?;
        if b >= nv as u64 {
            return Err(c.err(format!(
                "vertex index {b} out of range (there are {nv} vertices)"
            )));
        }
        if a == b {
            return Err(c.err(format!("edge from vertex {a} to itself")));
        }
        edges.push([a as u32, b as u32]);
    }
    let nf = header(&mut c, "Faces", 4)?;
    let mut f_off = Vec::with_capacity(nf + 1);
    f_off.push(0u32);
    let mut f_cols: Vec<i32> = Vec::with_capacity(nf * 3);
    let mut f_line = Vec::with_capacity(nf);
    // sorted vertex set -> face, for duplicate faces
    let mut face_of: std::collections::HashMap<Vec<u32>, usize> =
        std::collections::HashMap::with_capacity(nf);
    for f in 0..nf {
        let k = c.count("the number of half-edges", 1 << 20)?;
        f_line.push(c.tok_line);
        if k < 3 {
            return Err(c.err(format!(
                "face {f} has {k} half-edges; a face needs at least 3"
            )));
        }
        let start = f_cols.len();
        for _ in 0..k {
            let he = c.uint("a half-edge index")?;
            if he >= 2 * ne as u64 {
                return Err(c.err(format!(
                    "half-edge {he} out of range (there are {} half-edges)",
                    2 * ne
                )));
            }
            f_cols.push(encode((he / 2) as u32, he % 2 == 1));
        }
        // the half-edges must form a closed loop in the order given
        let ends = |v: i32| {
            let (e, s) = decode(v);
            let [a, b] = edges[e as usize];
            if s > 0 {
                (a, b)
            } else {
                (b, a)
            }
        };
        let row = &f_cols[start..];
        for i in 0..k {
            if ends(row[i]).1 != ends(row[(i + 1) % k]).0 {
                return Err(c.err_at(
                    f_line[f] as u64,
                    format!(
                        "the half-edges of face {f} do not form a closed loop (at position {i})"
                    ),
                ));
            }
        }
        // a simple loop: each vertex once, at least three of them
        let mut vs: Vec<u32> = row.iter().map(|&v| ends(v).0).collect();
        vs.sort_unstable();
        vs.dedup();
        if vs.len() < 3 {
            return Err(c.err_at(
                f_line[f] as u64,
                format!(
                    "face {f} has {} distinct vertices; a face needs at least 3",
                    vs.len()
                ),
            ));
        }
        if vs.len() < k {
            return Err(c.err_at(
                f_line[f] as u64,
                format!("face {f} passes through a vertex more than once"),
            ));
        }
        if let Some(&g) = face_of.get(&vs) {
            return Err(c.err_at(
                f_line[f] as u64,
                format!("face {f} has the same vertices as face {g} (a duplicate face)"),
            ));
        }
        face_of.insert(vs, f);
        f_off.push(f_cols.len() as u32);
    }
    drop(face_of);
    let nc = header(&mut c, "Polyhedra", 5)?;
    if nc == 0 {
        return Err(
            c.err("the file has no polyhedra (`Polyhedra 0`): a volume mesh needs at least one")
        );
    }
    let mut c_off = Vec::with_capacity(nc + 1);
    c_off.push(0u32);
    let mut c_cols: Vec<i32> = Vec::with_capacity(nc * 4);
    let mut c_line = Vec::with_capacity(nc);
    for p in 0..nc {
        let k = c.count("the number of half-faces", 1 << 20)?;
        c_line.push(c.tok_line);
        if k < 4 {
            return Err(c.err(format!(
                "polyhedron {p} has {k} half-faces; a polyhedron needs at least 4"
            )));
        }
        let start = c_cols.len();
        for _ in 0..k {
            let hf = c.uint("a half-face index")?;
            if hf >= 2 * nf as u64 {
                return Err(c.err(format!(
                    "half-face {hf} out of range (there are {} half-faces)",
                    2 * nf
                )));
            }
            c_cols.push(encode((hf / 2) as u32, hf % 2 == 0));
        }
        if p + 1 == nc {
            // a cut last number would still be a valid half-face index
            c.expect_terminated("the last polyhedron")?;
        }
        let mut fs: Vec<u32> = c_cols[start..].iter().map(|&v| decode(v).0).collect();
        fs.sort_unstable();
        if fs.windows(2).any(|w| w[0] == w[1]) {
            return Err(c.err(format!("polyhedron {p} uses a face twice")));
        }
        // closed and consistently oriented: each edge used twice, once in each direction
        let mut uses: Vec<(u32, bool)> = Vec::new();
        for &v in &c_cols[start..] {
            let (f, outward) = decode(v);
            let fr = f_off[f as usize] as usize..f_off[f as usize + 1] as usize;
            for &he in &f_cols[fr] {
                let (e, s) = decode(he);
                uses.push((e, (s > 0) == (outward > 0)));
            }
        }
        uses.sort_unstable();
        let mut i = 0;
        while i < uses.len() {
            let e = uses[i].0;
            let mut j = i;
            while j < uses.len() && uses[j].0 == e {
                j += 1;
            }
            let msg = match j - i {
                1 => Some(format!(
                    "polyhedron {p} is not closed: edge {e} belongs to only one of its faces"
                )),
                2 if uses[i].1 == uses[i + 1].1 => Some(format!(
                    "the half-faces of polyhedron {p} are not consistently oriented at edge {e} (a half-face is flipped)"
                )),
                2 => None,
                k => Some(format!(
                    "polyhedron {p} is not a closed manifold: edge {e} belongs to {k} of its faces"
                )),
            };
            if let Some(m) = msg {
                return Err(c.err_at(c_line[p] as u64, m));
            }
            i = j;
        }
        c_off.push(c_cols.len() as u32);
    }
    // anything after the polyhedra (OVM property sections) is not geometry: ignored
    let fe = Tcsr::new(ne, f_off, f_cols).map_err(|e| c.err(e.to_string()))?;
    let cf = Tcsr::new(nf, c_off, c_cols).map_err(|e| c.err(e.to_string()))?;
    let mut mesh =
        PolyMesh::from_operators(positions, edges, fe, cf).map_err(|e| c.err(e.to_string()))?;
    // orient every cell outward by its signed volume
    let mut flip = Vec::new();
    for cell in 0..nc {
        let (vol, scale) = super::cells::cell_signed_volume(&mesh, cell);
        if !(vol.abs() > 1e-12 * scale * scale * scale) || !vol.is_finite() {
            return Err(c.err_at(
                c_line[cell] as u64,
                format!("degenerate polyhedron {cell}: signed volume {vol:e} is zero relative to its size {scale:e}"),
            ));
        }
        if vol < 0.0 {
            flip.push(cell);
        }
    }
    if !flip.is_empty() {
        let (_, _, cf) = mesh.operators_mut();
        let (ncols, offsets, mut cols) = std::mem::replace(cf, Tcsr::empty(0, 0)).into_raw();
        for &cell in &flip {
            for v in &mut cols[offsets[cell] as usize..offsets[cell + 1] as usize] {
                *v = negate(*v);
            }
        }
        *cf = Tcsr::from_raw_unchecked(ncols, offsets, cols);
    }
    Ok(MeshFile {
        mesh,
        groups: Vec::new(),
    })
}

/// Write an OVM ASCII file with the mesh's own edge and face numbering.
pub fn write(mesh: &PolyMesh, path: &Path) -> Result<(), MeshError> {
    write_atomic(path, |w| {
        writeln!(w, "OVM ASCII\nVertices\n{}", mesh.num_vertices())?;
        for p in mesh.positions() {
            writeln!(w, "{} {} {}", fmt_f64(p[0]), fmt_f64(p[1]), fmt_f64(p[2]))?;
        }
        writeln!(w, "Edges\n{}", mesh.num_edges())?;
        for e in mesh.edge_vertices() {
            writeln!(w, "{} {}", e[0], e[1])?;
        }
        let fe = mesh.face_edges();
        writeln!(w, "Faces\n{}", fe.nrows())?;
        let mut line = String::with_capacity(64);
        use std::fmt::Write as _;
        for f in 0..fe.nrows() {
            line.clear();
            let row = fe.row(f);
            let _ = write!(line, "{}", row.len());
            for &v in row {
                let (e, s) = decode(v);
                let _ = write!(line, " {}", 2 * e as u64 + (s < 0) as u64);
            }
            writeln!(w, "{line}")?;
        }
        let cf = mesh.cell_faces();
        writeln!(w, "Polyhedra\n{}", cf.nrows())?;
        for cell in 0..cf.nrows() {
            line.clear();
            let row = cf.row(cell);
            let _ = write!(line, "{}", row.len());
            for &v in row {
                let (f, s) = decode(v);
                let _ = write!(line, " {}", 2 * f as u64 + (s > 0) as u64);
            }
            writeln!(w, "{line}")?;
        }
        Ok(())
    })
}
