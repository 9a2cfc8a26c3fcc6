//! TetGen `.node` / `.ele` file pairs (ASCII). Either path may be given; the other is the
//! same name with the other extension (both optionally `.gz`). Numbering may start at 0
//! or 1 (taken from the first node, as TetGen does). 10-node tetrahedra are read by their
//! corners; the first region attribute of `.ele` becomes a dim-3 group.

use super::text::Cursor;
use super::{fmt_f64, read_bytes, write_atomic, Build, Built, Collected, MeshFile};
use crate::{CellType, MeshError, PolyMesh};
use std::path::{Path, PathBuf};

const MAX_COUNT: u64 = u32::MAX as u64 - 1;

/// `(name.node, name.ele)` for a path to either, keeping a `.gz` suffix when that file exists.
fn pair(path: &Path) -> (PathBuf, PathBuf) {
    let s = path.to_string_lossy().into_owned();
    let (stem, gz) = match s.strip_suffix(".gz") {
        Some(t) => (t.to_string(), ".gz"),
        None => (s.clone(), ""),
    };
    let base = stem
        .rsplit_once('.')
        .map(|(b, _)| b.to_string())
        .unwrap_or(stem);
    let pick = |ext: &str| {
        let with = PathBuf::from(format!("{base}.{ext}{gz}"));
        if with.exists() {
            return with;
        }
        let other = if gz.is_empty() {
            format!("{base}.{ext}.gz")
        } else {
            format!("{base}.{ext}")
        };
        let other = PathBuf::from(other);
        if other.exists() {
            other
        } else {
            with
        }
    };
    (pick("node"), pick("ele"))
}

/// Read a TetGen mesh from `name.node` and `name.ele`.
pub fn read(path: &Path) -> Result<MeshFile, MeshError> {
    read_as(path, Build::Poly)?.into_poly()
}

/// Read a TetGen mesh into the representation `build` asks for.
pub(crate) fn read_as(path: &Path, build: Build) -> Result<Built, MeshError> {
    let (node_path, ele_path) = pair(path);
    let node_data = read_bytes(&node_path)?;
    let ele_data = read_bytes(&ele_path)?;
    let mut col = Collected::default();

    let mut c = Cursor::new(&node_path, &node_data);
    c.comment = Some(b'#');
    let n = c.count("the number of points", MAX_COUNT)?;
    let dim = c.uint("the dimension")?;
    if dim != 3 {
        return Err(c.err(format!("the dimension must be 3, found {dim}")));
    }
    let nattr = c.count("the number of attributes", 1 << 16)?;
    let nmark = c.count("the boundary marker flag", 1)?;
    col.nodes.reserve(n);
    let mut base = 0u64;
    for i in 0..n {
        let id = c.uint("a point number")?;
        if i == 0 {
            if id > 1 {
                return Err(c.err(format!(
                    "the first point must be numbered 0 or 1, found {id}"
                )));
            }
            base = id;
        } else if id != base + i as u64 {
            return Err(c.err(format!(
                "points must be numbered consecutively: expected {}, found {id}",
                base + i as u64
            )));
        }
        let p = [
            c.coord("x coordinate")?,
            c.coord("y coordinate")?,
            c.coord("z coordinate")?,
        ];
        for _ in 0..nattr {
            c.num::<f64>("a point attribute")?;
        }
        for _ in 0..nmark {
            c.int("a boundary marker")?;
        }
        col.nodes.push(p);
    }
    if let Some(_t) = c.token() {
        return Err(c.err(format!(
            "extra data after the {n} points announced in the header (wrong count?)"
        )));
    }

    let mut c = Cursor::new(&ele_path, &ele_data);
    c.comment = Some(b'#');
    let nt = c.count("the number of tetrahedra", MAX_COUNT)?;
    let npt = c.uint("the number of nodes per tetrahedron")?;
    if npt != 4 && npt != 10 {
        return Err(c.err(format!(
            "nodes per tetrahedron must be 4 or 10, found {npt}"
        )));
    }
    let nattr = c.count("the number of attributes", 1 << 16)?;
    let nv = col.nodes.len() as u64;
    let mut v = [0u32; 4];
    for i in 0..nt {
        let id = c.uint("a tetrahedron number")?;
        let loc = c.location();
        if id != base + i as u64 {
            return Err(c.err(format!(
                "tetrahedra must be numbered consecutively: expected {}, found {id}",
                base + i as u64
            )));
        }
        for k in 0..npt as usize {
            let x = c.uint("a node number")?;
            if x < base || x - base >= nv {
                return Err(c.err(format!(
                    "node number {x} out of range {base}..={}",
                    base + nv - 1
                )));
            }
            if k < 4 {
                v[k] = (x - base) as u32;
            }
        }
        let ci = col.add_cell(CellType::Tetrahedron, &v, loc);
        for k in 0..nattr {
            let a = c.num::<f64>("a region attribute")?;
            if k == 0 && a.fract() == 0.0 && a.abs() < i32::MAX as f64 {
                col.cell_groups.push((a as i32, ci));
            }
        }
    }
    if let Some(_t) = c.token() {
        return Err(c.err(format!(
            "extra data after the {nt} tetrahedra announced in the header (wrong count?)"
        )));
    }
    col.finish_as(&c, build)
}

/// Write `name.node` and `name.ele` (0-based numbering). TetGen stores tetrahedra only.
pub fn write(mesh: &PolyMesh, path: &Path) -> Result<(), MeshError> {
    let (node_path, ele_path) = pair(path);
    let nc = mesh.num_cells();
    let mut conn = Vec::with_capacity(nc * 4);
    let mut buf = [0u32; 8];
    for c in 0..nc {
        match super::typed_cell_vertices(mesh, c, &mut buf) {
            Some(CellType::Tetrahedron) => conn.extend_from_slice(&buf[..4]),
            _ => {
                return Err(MeshError::Unsupported(format!(
                    "{}: cell {c} is not a tetrahedron; TetGen files hold tetrahedra only",
                    path.display()
                )))
            }
        }
    }
    write_atomic(&node_path, |w| {
        writeln!(w, "{} 3 0 0", mesh.num_vertices())?;
        for (i, p) in mesh.positions().iter().enumerate() {
            writeln!(
                w,
                "{i} {} {} {}",
                fmt_f64(p[0]),
                fmt_f64(p[1]),
                fmt_f64(p[2])
            )?;
        }
        Ok(())
    })?;
    write_atomic(&ele_path, |w| {
        writeln!(w, "{nc} 4 0")?;
        for (i, t) in conn.chunks(4).enumerate() {
            writeln!(w, "{i} {} {} {} {}", t[0], t[1], t[2], t[3])?;
        }
        Ok(())
    })
}
