//! Medit `.mesh` files (INRIA/ISCD, ASCII): `Vertices`, `Tetrahedra`, `Hexahedra`,
//! `Prisms`, `Pyramids` (cells, `TetrahedraP2`/`HexahedraQ2` by their corners), and
//! `Triangles`, `Quadrilaterals`, `Edges`, `Corners` (groups by reference number).

use super::text::{show, Cursor};
use super::{fmt_f64, write_atomic, Build, Built, Collected, GroupElement, ReadOptions};
use crate::{CellType, MeshError, PolyMesh};
use std::path::Path;

const MAX_COUNT: u64 = u32::MAX as u64 - 1;

/// Read a Medit `.mesh` file into the representation `build` asks for. Every keyword
/// section may appear once, and the file must end with `End` (a file without it is
/// truncated).
pub(crate) fn read_as(
    path: &Path,
    data: &[u8],
    build: Build,
    opts: &ReadOptions,
) -> Result<Built, MeshError> {
    let mut c = Cursor::new(path, data);
    c.comment = Some(b'#');
    let mut col = Collected::new(opts);
    // sections read so far: (lowercase keyword, line)
    let mut seen: Vec<(String, usize)> = Vec::new();
    let mut ended = false;
    let mut have_vertices = false;
    let mut dim = 3;
    let first = c.expect_token("`MeshVersionFormatted`")?;
    if !first.eq_ignore_ascii_case(b"MeshVersionFormatted") {
        return Err(c.err(format!(
            "not a Medit file: expected `MeshVersionFormatted`, found `{}`",
            show(first)
        )));
    }
    let ver = c.uint("the mesh version")?;
    if !(1..=4).contains(&ver) {
        return Err(c.err(format!("unsupported Medit version {ver}")));
    }
    let mut nodes = [0u32; 8];
    loop {
        let Some(kw) = c.token() else {
            break;
        };
        let kw_s = String::from_utf8_lossy(kw).to_ascii_lowercase();
        if let Some((_, first)) = seen.iter().find(|(k, _)| *k == kw_s) {
            return Err(c.err(format!(
                "repeated `{}` section (the first one is at line {first})",
                show(kw)
            )));
        }
        seen.push((kw_s.clone(), c.tok_line));
        // (cell type, nodes per element, corners) or (group dim, nodes)
        let cell: Option<(CellType, usize)> = match kw_s.as_str() {
            "tetrahedra" => Some((CellType::Tetrahedron, 4)),
            "tetrahedrap2" => Some((CellType::Tetrahedron, 10)),
            "hexahedra" => Some((CellType::Hexahedron, 8)),
            "hexahedraq2" => Some((CellType::Hexahedron, 27)),
            "prisms" => Some((CellType::Prism, 6)),
            "pyramids" => Some((CellType::Pyramid, 5)),
            _ => None,
        };
        // (dimension, nodes per element, corners)
        let group: Option<(u8, usize, usize)> = match kw_s.as_str() {
            "triangles" => Some((2, 3, 3)),
            "trianglesp2" => Some((2, 6, 3)),
            "quadrilaterals" => Some((2, 4, 4)),
            "quadrilateralsq2" => Some((2, 9, 4)),
            "edges" => Some((1, 2, 2)),
            "edgesp2" => Some((1, 3, 2)),
            _ => None,
        };
        match kw_s.as_str() {
            "end" => {
                ended = true;
                break;
            }
            "dimension" => {
                dim = c.uint("the dimension")?;
                if dim != 3 {
                    return Err(c.err(format!(
                        "only 3D meshes are supported, the file has dimension {dim}"
                    )));
                }
            }
            "vertices" => {
                let n = c.count("the number of vertices", MAX_COUNT)?;
                // x y z and a reference each
                let n =
                    c.check_count(n as u64, Cursor::text_record(4), "the number of vertices")?;
                col.nodes.reserve(n);
                for _ in 0..n {
                    let p = [
                        c.coord("x coordinate")?,
                        c.coord("y coordinate")?,
                        c.coord("z coordinate")?,
                    ];
                    c.int32("a vertex reference")?;
                    col.nodes.push(p);
                }
                have_vertices = true;
            }
            _ if cell.is_some() || group.is_some() => {
                if !have_vertices {
                    return Err(c.err(format!("`{}` before `Vertices`", show(kw))));
                }
                let what = format!("the number of {kw_s}");
                let n = c.count(&what, MAX_COUNT)?;
                let (nn, corners) = match (cell, group) {
                    (Some((t, nn)), _) => (nn, t.num_vertices().expect("standard")),
                    (_, Some((_, nn, corners))) => (nn, corners),
                    _ => unreachable!(),
                };
                // `nn` vertex indices and a reference each
                let n = c.check_count(n as u64, Cursor::text_record(nn as u64 + 1), &what)?;
                let nv = col.nodes.len() as u64;
                for _ in 0..n {
                    let mut first_loc = None;
                    for k in 0..nn {
                        let v = c.uint("a vertex index")?;
                        if first_loc.is_none() {
                            first_loc = Some(c.location());
                        }
                        if v == 0 || v > nv {
                            return Err(c.err(format!("vertex index {v} out of range 1..={nv}")));
                        }
                        if k < corners {
                            nodes[k] = (v - 1) as u32;
                        }
                    }
                    let loc = first_loc.unwrap_or(c.location());
                    let r = c.int32("an element reference")?;
                    if let Some((t, _)) = cell {
                        let ci = col.add_cell(t, &nodes[..corners], loc);
                        col.cell_groups.push((r, ci));
                    } else if let Some((d, _, _)) = group {
                        let mut verts = [0u32; 4];
                        verts[..corners].copy_from_slice(&nodes[..corners]);
                        col.group_elems.push(GroupElement {
                            dim: d,
                            tag: r,
                            verts,
                            n: corners as u8,
                            loc,
                        });
                    }
                }
            }
            "corners" | "requiredvertices" | "ridges" | "requirededges" | "requiredtriangles" => {
                let n = c.count("a count", MAX_COUNT)?;
                let n = c.check_count(n as u64, Cursor::text_record(1), "a count")?;
                for _ in 0..n {
                    c.uint("an index")?;
                }
            }
            "normals" | "tangents" => {
                let n = c.count("a count", MAX_COUNT)?;
                for _ in 0..3 * n {
                    c.coord("a component")?;
                }
            }
            "normalatvertices" | "tangentatvertices" | "tangentatedges" => {
                let n = c.count("a count", MAX_COUNT)?;
                let per = if kw_s == "tangentatedges" { 3 } else { 2 };
                for _ in 0..per * n {
                    c.uint("an index")?;
                }
            }
            _ => {
                return Err(c.err(format!("unknown Medit keyword `{}`", show(kw))));
            }
        }
    }
    let _ = dim;
    if !ended {
        return Err(c.err_here("missing `End` at the end of the file (the file is truncated)"));
    }
    col.finish_as(&c, build)
}

/// Write a Medit `.mesh` file (version 2, double precision). Medit lists cells by type
/// and has no general polyhedra; the type sections are written in the order in which
/// each type first appears, so a mesh whose cells come in one run per type (such as any
/// mesh read from a Medit file) is re-read with the same cell order.
pub fn write(mesh: &PolyMesh, path: &Path) -> Result<(), MeshError> {
    let nc = mesh.num_cells();
    // per type: (type, connectivity)
    let mut per: Vec<(CellType, Vec<u32>)> = Vec::new();
    let mut buf = [0u32; 8];
    for c in 0..nc {
        let ty = super::typed_cell_vertices(mesh, c, &mut buf).ok_or_else(|| {
            MeshError::Unsupported(format!(
                "{}: cell {c} is a general polyhedron, which Medit cannot store (write .vtu or .ovm instead)",
                path.display()
            ))
        })?;
        let k = match per.iter().position(|(t, _)| *t == ty) {
            Some(k) => k,
            None => {
                per.push((ty, Vec::new()));
                per.len() - 1
            }
        };
        per[k]
            .1
            .extend_from_slice(&buf[..ty.num_vertices().expect("standard")]);
    }
    write_atomic(path, |w| {
        writeln!(
            w,
            "MeshVersionFormatted 2\n\nDimension 3\n\nVertices\n{}",
            mesh.num_vertices()
        )?;
        for p in mesh.positions() {
            writeln!(w, "{} {} {} 0", fmt_f64(p[0]), fmt_f64(p[1]), fmt_f64(p[2]))?;
        }
        for (ty, conn) in &per {
            let name = match ty {
                CellType::Tetrahedron => "Tetrahedra",
                CellType::Hexahedron => "Hexahedra",
                CellType::Prism => "Prisms",
                CellType::Pyramid => "Pyramids",
                CellType::Polyhedron => unreachable!("typed cells are standard"),
            };
            let n = ty.num_vertices().expect("standard");
            writeln!(w, "\n{name}\n{}", conn.len() / n)?;
            for cell in conn.chunks(n) {
                for v in cell {
                    write!(w, "{} ", v + 1)?;
                }
                writeln!(w, "1")?;
            }
        }
        writeln!(w, "\nEnd")?;
        Ok(())
    })
}
