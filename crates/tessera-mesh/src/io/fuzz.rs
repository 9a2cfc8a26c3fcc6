//! The properties every reader must have on arbitrary bytes, shared by the cargo-fuzz
//! targets (`fuzz/`) and the bounded-time fuzz test of `cargo test` (`tests/fuzz_ci.rs`):
//! no panic; an error is one line of bounded length naming the file; an accepted mesh
//! passes [`PolyMesh::validate`](crate::PolyMesh::validate) (polyhedral build) or has
//! positively oriented tetrahedra with in-range vertices and groups (simplex build).
//! Each input goes through both builds.

use super::{
    medit, msh, obj_read, off, ovm, ply, tetgen, vtu, Build, Built, Format, ReadOptions,
    SurfaceFormat,
};
use crate::MeshError;
use std::path::Path;

/// Longest acceptable error message.
pub const MAX_MESSAGE: usize = 600;

fn check_error(label: &str, e: &MeshError) {
    let m = e.to_string();
    assert!(
        !m.contains('\n') && m.len() <= MAX_MESSAGE && m.starts_with(label),
        "bad error message: {m}"
    );
}

fn check_built(label: &str, r: Result<Built, MeshError>) {
    match r {
        Err(e) => check_error(label, &e),
        Ok(Built::Poly(mf)) => {
            if let Err(e) = mf.mesh.validate() {
                panic!("{label}: accepted an invalid mesh: {e}");
            }
            for g in &mf.groups {
                let n = match g.dim {
                    3 => mf.mesh.num_cells(),
                    2 => mf.mesh.num_faces(),
                    1 => mf.mesh.num_edges(),
                    _ => mf.mesh.num_vertices(),
                };
                assert!(
                    g.entities.iter().all(|&x| (x as usize) < n),
                    "group out of range"
                );
            }
        }
        Ok(Built::Simplex(sf)) => {
            let m = &sf.mesh;
            let nv = m.num_vertices();
            let p = m.positions();
            for t in m.cell_vertices().chunks(4) {
                assert!(t.iter().all(|&v| (v as usize) < nv), "vertex out of range");
                let d = |i: usize| {
                    let (a, b) = (p[t[i] as usize], p[t[0] as usize]);
                    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
                };
                let (a, b, c) = (d(1), d(2), d(3));
                let vol = a[0] * (b[1] * c[2] - b[2] * c[1]) - a[1] * (b[0] * c[2] - b[2] * c[0])
                    + a[2] * (b[0] * c[1] - b[1] * c[0]);
                assert!(vol > 0.0, "{label}: accepted a tetrahedron of volume {vol}");
            }
            for g in &sf.groups {
                assert!(g.cells.iter().all(|&c| (c as usize) < m.num_cells()));
                assert!(g.vertices.iter().all(|&v| (v as usize) < nv));
                assert!(g.faces.iter().flatten().all(|&v| (v as usize) < nv));
                assert!(g.edges.iter().flatten().all(|&v| (v as usize) < nv));
            }
        }
    }
}

/// Check one input of a single-file format (`label` is the file name in messages).
pub fn check_reader(fmt: Format, label: &str, data: &[u8]) {
    let path = Path::new(label);
    let opts = ReadOptions::default();
    for build in [Build::Poly, Build::Simplex] {
        let r = match fmt {
            Format::Msh => msh::read_as(path, data, build, &opts),
            Format::Medit => medit::read_as(path, data, build, &opts),
            Format::Ovm => ovm::read(path, data).map(Built::Poly),
            Format::Vtu => vtu::read_as(path, data, build),
            _ => panic!("check_reader: {fmt:?} is not a single-file reader"),
        };
        check_built(label, r);
        if fmt == Format::Ovm {
            break;
        }
    }
}

/// Check one TetGen input: `data` split at its first NUL byte into `.node` and `.ele`.
pub fn check_tetgen(data: &[u8]) {
    let (node, ele) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &data[..0]),
    };
    let opts = ReadOptions::default();
    for build in [Build::Poly, Build::Simplex] {
        let r = tetgen::read_pair(
            (Path::new("fuzz.node"), node),
            (Path::new("fuzz.ele"), ele),
            build,
            &opts,
        );
        if let Err(e) = &r {
            let m = e.to_string();
            assert!(
                !m.contains('\n') && m.len() <= MAX_MESSAGE && m.starts_with("fuzz."),
                "bad error message: {m}"
            );
        } else {
            check_built("fuzz.", r);
        }
    }
}

/// Check one input of a polygon-surface reader (OBJ, PLY, OFF; `label` is the file name in
/// messages): an error line naming the file, or finite positions and a face table of faces
/// with >= 3 in-range vertices, which the mesh-matrix build then takes or refuses with an
/// error.
pub fn check_surface(fmt: SurfaceFormat, label: &str, data: &[u8]) {
    let path = Path::new(label);
    let r = match fmt {
        SurfaceFormat::Obj => obj_read::read(path, data),
        SurfaceFormat::Ply => ply::read(path, data),
        SurfaceFormat::Off => off::read(path, data),
        _ => panic!("check_surface: {fmt:?} is not a polygon-surface reader"),
    };
    match r {
        Err(e) => check_error(label, &e),
        Ok(d) => {
            let nv = d.positions.len();
            assert!(
                d.positions.iter().flatten().all(|x| x.is_finite()),
                "{label}: accepted a non-finite position"
            );
            assert_eq!(d.offsets.first(), Some(&0), "{label}: offsets start at 0");
            assert!(
                d.offsets.windows(2).all(|w| w[1] >= w[0] + 3),
                "{label}: accepted a face of fewer than 3 vertices"
            );
            assert_eq!(
                d.offsets.last().map(|&o| o as usize),
                Some(d.verts.len()),
                "{label}: offsets end at the vertex count"
            );
            assert!(
                d.verts.iter().all(|&v| (v as usize) < nv),
                "{label}: accepted a vertex index out of range"
            );
            let _ = crate::mesh_matrix::PolygonMesh::new(d.positions, &d.offsets, &d.verts);
        }
    }
}
