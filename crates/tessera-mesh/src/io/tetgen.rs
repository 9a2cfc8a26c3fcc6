//! TetGen `.node` / `.ele` file pairs (ASCII). Either path may be given; the other is the
//! same name with the other extension (both optionally `.gz`). Numbering may start at 0
//! or 1 (taken from the first node, as TetGen does). 10-node tetrahedra are read by their
//! corners; the first region attribute of `.ele` becomes a dim-3 group.

use super::text::Cursor;
use super::{fmt_f64, read_bytes, stage, Build, Built, Collected, ReadOptions};
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

/// Read a TetGen mesh from `name.node` and `name.ele` into the representation `build`
/// asks for.
pub(crate) fn read_as(path: &Path, build: Build, opts: &ReadOptions) -> Result<Built, MeshError> {
    let (node_path, ele_path) = pair(path);
    let node_data = read_bytes(&node_path)?;
    let ele_data = read_bytes(&ele_path)?;
    read_pair(
        (&node_path, &node_data),
        (&ele_path, &ele_data),
        build,
        opts,
    )
}

/// Parse a `.node` + `.ele` pair. Both files must hold exactly the announced records,
/// and the last record of each must end with a line end (else it may be cut).
pub(crate) fn read_pair(
    (node_path, node_data): (&Path, &[u8]),
    (ele_path, ele_data): (&Path, &[u8]),
    build: Build,
    opts: &ReadOptions,
) -> Result<Built, MeshError> {
    if let (Some(a), Some(b)) = (pair_token(node_data), pair_token(ele_data)) {
        if a != b {
            return Err(MeshError::parse_line(
                ele_path,
                1,
                format!(
                    "this file and {} come from different writes (pair tokens differ); one of them was replaced on its own or a write was interrupted between them",
                    node_path.display()
                ),
            ));
        }
    }
    let mut col = Collected::new(opts);

    let mut c = Cursor::new(node_path, node_data);
    c.comment = Some(b'#');
    let n = c.count("the number of points", MAX_COUNT)?;
    let dim = c.uint("the dimension")?;
    if dim != 3 {
        return Err(c.err(format!("the dimension must be 3, found {dim}")));
    }
    let nattr = c.count("the number of attributes", 1 << 16)?;
    let nmark = c.count("the boundary marker flag", 1)?;
    let n = c.check_count(
        n as u64,
        Cursor::text_record(4 + nattr as u64 + nmark as u64),
        "the number of points",
    )?;
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
            c.coord("a point attribute")?;
        }
        for _ in 0..nmark {
            c.int("a boundary marker")?;
        }
        col.nodes.push(p);
    }
    c.expect_terminated(if n > 0 {
        "the last point"
    } else {
        "the header"
    })?;
    if let Some(_t) = c.token() {
        return Err(c.err(format!(
            "extra data after the {n} points announced in the header (wrong count?)"
        )));
    }

    let mut c = Cursor::new(ele_path, ele_data);
    c.comment = Some(b'#');
    let nt = c.count("the number of tetrahedra", MAX_COUNT)?;
    let npt = c.uint("the number of nodes per tetrahedron")?;
    if npt != 4 && npt != 10 {
        return Err(c.err(format!(
            "nodes per tetrahedron must be 4 or 10, found {npt}"
        )));
    }
    let nattr = c.count("the number of attributes", 1 << 16)?;
    let nt = c.check_count(
        nt as u64,
        Cursor::text_record(1 + npt + nattr as u64),
        "the number of tetrahedra",
    )?;
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
                return Err(c.err(if nv == 0 {
                    format!("node number {x}: the .node file has no points")
                } else {
                    format!("node number {x} out of range {base}..={}", base + nv - 1)
                }));
            }
            if k < 4 {
                v[k] = (x - base) as u32;
            }
        }
        let ci = col.add_cell(CellType::Tetrahedron, &v, loc);
        for k in 0..nattr {
            let a = c.coord("a region attribute")?;
            if k == 0 && a.fract() == 0.0 && a.abs() < i32::MAX as f64 {
                col.cell_groups.push((a as i32, ci));
            }
        }
    }
    c.expect_terminated(if nt > 0 {
        "the last tetrahedron"
    } else {
        "the header"
    })?;
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
    let token = pair_token_new();
    let node = stage(&node_path, |w| {
        writeln!(w, "{PAIR_MARK}{token}")?;
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
    let ele = stage(&ele_path, |w| {
        writeln!(w, "{PAIR_MARK}{token}")?;
        writeln!(w, "{nc} 4 0")?;
        for (i, t) in conn.chunks(4).enumerate() {
            writeln!(w, "{i} {} {} {} {}", t[0], t[1], t[2], t[3])?;
        }
        Ok(())
    })?;
    // both written and synced before either replaces an old file
    tessera_core::atomic::publish(vec![node, ele])?;
    Ok(())
}

/// The first line of both files of a pair Tessera writes: a comment with a token shared by
/// the two files, so a reader can tell a `.node` and an `.ele` of different writes apart.
const PAIR_MARK: &str = "# tessera pair ";

fn pair_token_new() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{:x}-{t:x}", std::process::id())
}

/// The pair token of a file written by Tessera.
fn pair_token(data: &[u8]) -> Option<&[u8]> {
    let rest = data.strip_prefix(PAIR_MARK.as_bytes())?;
    let end = rest.iter().position(|&c| c == b'\n' || c == b'\r')?;
    Some(&rest[..end])
}
