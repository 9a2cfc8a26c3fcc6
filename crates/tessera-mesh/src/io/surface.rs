//! Polygon surfaces in and out, as [`PolygonMesh`] (the mesh matrix of seed 004 with its
//! positions): OBJ, PLY (ASCII and binary) and OFF, and the boundary surface (dissertation
//! §3.4.2) of every volumetric mesh Tessera reads.
//!
//! | extension | read | write |
//! |---|---|---|
//! | `.obj` | `v`, `f` (polygons, `i/t/n` forms, negative indices) | yes |
//! | `.ply` | ASCII, binary little/big endian | binary little endian (`.ply`), ASCII via [`write_surface_with`] |
//! | `.off` | `OFF` (+ `C`/`N`/`ST` variants) | yes |
//! | `.vtu` | – | polygons |
//! | `.msh`, `.mesh`, `.node`/`.ele`, `.ovm` | the boundary surface of the volume mesh | – |
//!
//! A trailing `.gz` is handled as everywhere in [`crate::io`].

use super::{read_bytes, read_mesh, write_obj, write_vtu_polygons};
use crate::boundary::extract_boundary;
use crate::mesh_matrix::PolygonMesh;
use crate::MeshError;
use std::path::Path;

/// Surface file formats by extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SurfaceFormat {
    Obj,
    Ply,
    Off,
    Vtu,
    /// A volumetric mesh: its boundary surface is read.
    Volume,
}

impl SurfaceFormat {
    /// The format of a path by its extension (a trailing `.gz` is ignored).
    pub fn from_path(path: &Path) -> Option<SurfaceFormat> {
        let name = path.file_name()?.to_string_lossy().to_ascii_lowercase();
        let name = name.strip_suffix(".gz").unwrap_or(&name);
        let ext = name.rsplit_once('.')?.1;
        Some(match ext {
            "obj" => SurfaceFormat::Obj,
            "ply" => SurfaceFormat::Ply,
            "off" => SurfaceFormat::Off,
            "vtu" => SurfaceFormat::Vtu,
            "msh" | "mesh" | "node" | "ele" | "ovm" => SurfaceFormat::Volume,
            _ => return None,
        })
    }
}

const READABLE: &str =
    ".obj, .ply, .off, or a volume mesh (.msh, .mesh, .node/.ele, .ovm) for its boundary";
const WRITABLE: &str = ".obj, .ply, .off, .vtu";

/// Read a polygon surface (see the module docs).
pub fn read_surface(path: &Path) -> Result<PolygonMesh, MeshError> {
    let fmt = SurfaceFormat::from_path(path).ok_or_else(|| {
        MeshError::Unsupported(format!(
            "{}: unknown surface file extension; readable are {READABLE}",
            path.display()
        ))
    })?;
    let d = match fmt {
        SurfaceFormat::Obj => super::obj_read::read(path, &read_bytes(path)?)?,
        SurfaceFormat::Ply => super::ply::read(path, &read_bytes(path)?)?,
        SurfaceFormat::Off => super::off::read(path, &read_bytes(path)?)?,
        SurfaceFormat::Vtu => {
            return Err(MeshError::Unsupported(format!(
                "{}: .vtu is written, not read; readable are {READABLE}",
                path.display()
            )))
        }
        SurfaceFormat::Volume => {
            let mf = read_mesh(path)?;
            let b = extract_boundary(&mf.mesh);
            return PolygonMesh::from_surface(&b.surface(&mf.mesh));
        }
    };
    PolygonMesh::new(d.positions, &d.offsets, &d.verts).map_err(|e| MeshError::Parse {
        path: path.to_path_buf(),
        location: "faces".into(),
        msg: e.to_string(),
    })
}

/// Write a polygon surface, the format chosen by extension (`.ply` binary).
pub fn write_surface(path: &Path, mesh: &PolygonMesh) -> Result<(), MeshError> {
    write_surface_with(path, mesh, None, false)
}

/// Write a polygon surface with optional vertex normals (`.ply`: `nx ny nz`; `.obj`: `vn`
/// lines, faces `f v//v`; `.vtu`: point data `normals`; `.off`: `NOFF`); `ascii_ply` writes
/// `.ply` as ASCII.
pub fn write_surface_with(
    path: &Path,
    mesh: &PolygonMesh,
    normals: Option<&[crate::Point]>,
    ascii_ply: bool,
) -> Result<(), MeshError> {
    let (offsets, verts) = mesh.matrix.to_face_table();
    if normals.is_some_and(|n| n.len() != mesh.num_vertices()) {
        return Err(MeshError::InvalidTopology(format!(
            "{}: normals for {} of {} vertices",
            path.display(),
            normals.map_or(0, |n| n.len()),
            mesh.num_vertices()
        )));
    }
    match (SurfaceFormat::from_path(path), normals) {
        (Some(SurfaceFormat::Obj), None) => write_obj(path, &mesh.positions, &offsets, &verts),
        (Some(SurfaceFormat::Obj), Some(n)) => write_obj_normals(path, mesh, n),
        (Some(SurfaceFormat::Ply), n) => {
            super::ply::write_ply(path, &mesh.positions, &offsets, &verts, n, !ascii_ply)
        }
        (Some(SurfaceFormat::Off), n) => {
            super::off::write_off(path, &mesh.positions, &offsets, &verts, n)
        }
        (Some(SurfaceFormat::Vtu), n) => {
            let data: Vec<super::DataArray> = n
                .map(|n| super::DataArray::point_vectors("normals", n))
                .into_iter()
                .collect();
            write_vtu_polygons(
                path,
                &mesh.positions,
                &offsets,
                &verts,
                &data,
                super::VtuEncoding::default(),
            )
        }
        _ => Err(MeshError::Unsupported(format!(
            "{}: unknown surface file extension; writable are {WRITABLE}",
            path.display()
        ))),
    }
}

/// OBJ with `vn` lines (one normal per vertex) and faces `f v//v`.
fn write_obj_normals(
    path: &Path,
    mesh: &PolygonMesh,
    normals: &[crate::Point],
) -> Result<(), MeshError> {
    use super::fmt_f64;
    super::write_atomic(path, |w| {
        writeln!(
            w,
            "# tessera surface: {} vertices, {} polygons, vertex normals",
            mesh.num_vertices(),
            mesh.num_faces()
        )?;
        for p in &mesh.positions {
            writeln!(w, "v {} {} {}", fmt_f64(p[0]), fmt_f64(p[1]), fmt_f64(p[2]))?;
        }
        for n in normals {
            writeln!(
                w,
                "vn {} {} {}",
                fmt_f64(n[0]),
                fmt_f64(n[1]),
                fmt_f64(n[2])
            )?;
        }
        let mut line = String::with_capacity(64);
        for f in 0..mesh.num_faces() {
            use std::fmt::Write as _;
            line.clear();
            line.push('f');
            for &v in mesh.matrix.face(f) {
                let _ = write!(line, " {0}//{0}", v + 1);
            }
            writeln!(w, "{line}")?;
        }
        Ok(())
    })
}
