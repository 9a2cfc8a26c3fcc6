//! Recovering the vertex order of standard cells from the boundary operators.
//!
//! A [`PolyMesh`] stores a cell only as its signed faces (∂3, dissertation §3.4); formats
//! such as MSH, Medit and VTK list tetrahedra, hexahedra, prisms and pyramids by their
//! vertices in a fixed order. [`typed_cell_vertices`] finds that order: first by matching
//! the cell's faces, in ∂3 row order, against the local faces of
//! [`CellType::local_faces`] (this reproduces the exact vertex order of cells that came
//! from [`crate::PolyMeshBuilder::add_typed_cell`], so read -> write -> read keeps ∂3
//! identical), otherwise by walking the faces from a base face.

use crate::{CellType, PolyMesh};
use tessera_sparse::tcsr::{col, decode};

/// The vertices of cell `cell` in Gmsh/VTK order when the cell is a tetrahedron,
/// hexahedron, prism or pyramid (prisms in Gmsh order: triangle `0,1,2` has its normal
/// toward `3,4,5`), positively oriented. Writes into `out` and returns the type, or
/// `None` for general polyhedra (including cells with 4-6 faces whose combinatorics are
/// not those of a standard cell).
pub fn typed_cell_vertices(mesh: &PolyMesh, cell: usize, out: &mut [u32; 8]) -> Option<CellType> {
    let row = mesh.cell_faces().row(cell);
    let nf = row.len();
    if !(4..=6).contains(&nf) {
        return None;
    }
    let fv = mesh.face_vertices();
    let mut loops = [[0u32; 4]; 6];
    let mut sizes = [0usize; 6];
    for (i, &e) in row.iter().enumerate() {
        let (f, s) = decode(e);
        let l = fv.row(f as usize);
        if l.len() > 4 || l.len() < 3 {
            return None;
        }
        sizes[i] = l.len();
        for (k, &v) in l.iter().enumerate() {
            loops[i][k] = col(v);
        }
        if s < 0 {
            loops[i][..l.len()].reverse();
        }
    }
    let ty = CellType::classify(&sizes[..nf]);
    if ty == CellType::Polyhedron {
        return None;
    }
    if by_layout(ty, &loops, &sizes, out) || by_walk(ty, &loops, &sizes, nf, out) {
        Some(ty)
    } else {
        None
    }
}

/// Whether `a` (a mapped local loop) equals the outward loop `b` up to rotation.
fn same_cycle(a: &[u32], b: &[u32]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let Some(s) = b.iter().position(|&v| v == a[0]) else {
        return false;
    };
    (0..n).all(|k| a[k] == b[(s + k) % n])
}

fn by_layout(ty: CellType, loops: &[[u32; 4]; 6], sizes: &[usize; 6], out: &mut [u32; 8]) -> bool {
    let lf = ty.local_faces();
    if lf.iter().enumerate().any(|(k, f)| f.len() != sizes[k]) {
        return false;
    }
    let n = ty.num_vertices().expect("standard");
    for i in 0..n {
        let containing: Vec<usize> = (0..lf.len()).filter(|&k| lf[k].contains(&i)).collect();
        let first = containing[0];
        let mut found = None;
        for &v in &loops[first][..sizes[first]] {
            if containing
                .iter()
                .all(|&k| loops[k][..sizes[k]].contains(&v))
                && (0..lf.len())
                    .filter(|k| !containing.contains(k))
                    .all(|k| !loops[k][..sizes[k]].contains(&v))
            {
                if found.is_some() {
                    return false;
                }
                found = Some(v);
            }
        }
        match found {
            Some(v) => out[i] = v,
            None => return false,
        }
    }
    let mut buf = [0u32; 4];
    for (k, f) in lf.iter().enumerate() {
        for (j, &l) in f.iter().enumerate() {
            buf[j] = out[l];
        }
        if !same_cycle(&buf[..f.len()], &loops[k][..sizes[k]]) {
            return false;
        }
    }
    true
}

fn by_walk(
    ty: CellType,
    loops: &[[u32; 4]; 6],
    sizes: &[usize; 6],
    nf: usize,
    out: &mut [u32; 8],
) -> bool {
    let base_size = match ty {
        CellType::Tetrahedron | CellType::Prism => 3,
        _ => 4,
    };
    let Some(bi) = (0..nf).find(|&k| sizes[k] == base_size) else {
        return false;
    };
    let b = &loops[bi][..base_size];
    // local face 0 of every type is the base, listed as [0, last.., 1]: reverse the loop
    out[0] = b[0];
    for k in 1..base_size {
        out[k] = b[base_size - k];
    }
    let in_base = |v: u32| b.contains(&v);
    let n = ty.num_vertices().expect("standard");
    match ty {
        CellType::Tetrahedron | CellType::Pyramid => {
            let mut apex = None;
            for k in 0..nf {
                for &v in &loops[k][..sizes[k]] {
                    if !in_base(v) {
                        if apex.is_some_and(|a| a != v) {
                            return false;
                        }
                        apex = Some(v);
                    }
                }
            }
            let Some(a) = apex else { return false };
            out[base_size] = a;
        }
        CellType::Prism | CellType::Hexahedron => {
            for i in 0..base_size {
                let v = out[i];
                let mut top = None;
                for k in 0..nf {
                    let l = &loops[k][..sizes[k]];
                    for j in 0..l.len() {
                        let (p, q) = (l[j], l[(j + 1) % l.len()]);
                        let w = if p == v {
                            q
                        } else if q == v {
                            p
                        } else {
                            continue;
                        };
                        if !in_base(w) {
                            if top.is_some_and(|t| t != w) {
                                return false;
                            }
                            top = Some(w);
                        }
                    }
                }
                let Some(t) = top else { return false };
                out[base_size + i] = t;
            }
        }
        CellType::Polyhedron => return false,
    }
    // distinct vertices and the same face sets
    let mut vs = out[..n].to_vec();
    vs.sort_unstable();
    if vs.windows(2).any(|w| w[0] == w[1]) {
        return false;
    }
    let lf = ty.local_faces();
    let key = |l: &[u32]| {
        let mut k = [u32::MAX; 4];
        k[..l.len()].copy_from_slice(l);
        k[..l.len()].sort_unstable();
        k
    };
    let mut want: Vec<[u32; 4]> = (0..nf).map(|k| key(&loops[k][..sizes[k]])).collect();
    let mut got: Vec<[u32; 4]> = lf
        .iter()
        .map(|f| {
            let m: Vec<u32> = f.iter().map(|&l| out[l]).collect();
            key(&m)
        })
        .collect();
    want.sort_unstable();
    got.sort_unstable();
    if want != got {
        return false;
    }
    // orientation of the base: local face 0 mapped must equal the outward base loop
    let m: Vec<u32> = lf[0].iter().map(|&l| out[l]).collect();
    same_cycle(&m, b)
}

/// The signed volume of a cell from its outward face loops (divergence theorem), used by
/// readers that take faces as given (OVM).
pub(crate) fn cell_signed_volume(mesh: &PolyMesh, cell: usize) -> (f64, f64) {
    let fv = mesh.face_vertices();
    let pos = mesh.positions();
    let mut lv: Vec<u32> = Vec::new();
    let mut offs: Vec<u32> = vec![0];
    for &e in mesh.cell_faces().row(cell) {
        let (f, s) = decode(e);
        let start = lv.len();
        lv.extend(fv.row(f as usize).iter().map(|&v| col(v)));
        if s < 0 {
            lv[start..].reverse();
        }
        offs.push(lv.len() as u32);
    }
    if lv.is_empty() {
        return (0.0, 0.0);
    }
    crate::builder::signed_volume(pos, &lv, &offs)
}
