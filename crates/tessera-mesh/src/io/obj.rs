//! Wavefront `.obj` for polygon surfaces (boundary surfaces of dissertation §3.4.2).

use super::{fmt_f64, write_atomic};
use crate::{MeshError, Point};
use std::path::Path;

/// Write a polygon surface as `.obj`: `v x y z` lines, then one `f` line per polygon
/// (1-based indices, loops as given: counter-clockwise seen from outside for a boundary
/// from `Boundary::surface`). `polygon_offsets[i]..polygon_offsets[i + 1]` delimits
/// polygon `i` in `polygon_vertices`. A name ending in `.gz` is compressed.
pub fn write_obj(
    path: &Path,
    positions: &[Point],
    polygon_offsets: &[u32],
    polygon_vertices: &[u32],
) -> Result<(), MeshError> {
    super::vtu::check_polygons(path, positions.len(), polygon_offsets, polygon_vertices)?;
    write_atomic(path, |w| {
        writeln!(
            w,
            "# tessera surface: {} vertices, {} polygons",
            positions.len(),
            polygon_offsets.len().saturating_sub(1)
        )?;
        for p in positions {
            writeln!(w, "v {} {} {}", fmt_f64(p[0]), fmt_f64(p[1]), fmt_f64(p[2]))?;
        }
        let mut line = String::with_capacity(64);
        for win in polygon_offsets.windows(2) {
            use std::fmt::Write as _;
            line.clear();
            line.push('f');
            for &v in &polygon_vertices[win[0] as usize..win[1] as usize] {
                let _ = write!(line, " {}", v + 1);
            }
            writeln!(w, "{line}")?;
        }
        Ok(())
    })
}
