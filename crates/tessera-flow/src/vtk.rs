//! VTK XML image data (`.vti`) snapshots of cell fields for ParaView, and the `.pvd`
//! collection that lists them with their simulated times. Arrays are raw little-endian
//! f32 in an appended block (`header_type="UInt64"`); files are written atomically
//! (temporary file, then rename).

use std::io::Write;
use std::path::Path;

use crate::{FlowError, Grid};

fn io_err(path: &Path, e: impl std::fmt::Display) -> FlowError {
    FlowError::Io {
        path: path.display().to_string(),
        msg: e.to_string(),
    }
}

/// Write `fields` (name, one value per cell) on `grid` to `path`.
pub fn write_vti(path: &Path, grid: &Grid, fields: &[(&str, &[f32])]) -> Result<(), FlowError> {
    let n = grid.num_cells();
    if let Some((name, v)) = fields.iter().find(|(_, v)| v.len() != n) {
        return Err(FlowError::Invalid(format!(
            "field `{name}` has {} values for {n} cells",
            v.len()
        )));
    }
    let [nx, ny, nz] = grid.dims;
    let z_ext = if nz > 1 { nz } else { 0 };
    let h = grid.spacing;
    let o = grid.origin;
    tessera_mesh::io::write_atomic(path, |w: &mut dyn Write| {
        writeln!(w, "<?xml version=\"1.0\"?>")?;
        writeln!(
            w,
            "<VTKFile type=\"ImageData\" version=\"1.0\" byte_order=\"LittleEndian\" header_type=\"UInt64\">"
        )?;
        writeln!(
            w,
            "  <ImageData WholeExtent=\"0 {nx} 0 {ny} 0 {z_ext}\" Origin=\"{} {} {}\" Spacing=\"{h} {h} {h}\">",
            o[0], o[1], o[2]
        )?;
        writeln!(w, "    <Piece Extent=\"0 {nx} 0 {ny} 0 {z_ext}\">")?;
        let first = fields.first().map(|f| f.0).unwrap_or("");
        writeln!(w, "      <CellData Scalars=\"{first}\">")?;
        let mut offset = 0u64;
        for (name, _) in fields {
            writeln!(
                w,
                "        <DataArray type=\"Float32\" Name=\"{name}\" format=\"appended\" offset=\"{offset}\"/>"
            )?;
            offset += 8 + 4 * n as u64;
        }
        writeln!(w, "      </CellData>")?;
        writeln!(w, "    </Piece>")?;
        writeln!(w, "  </ImageData>")?;
        write!(w, "  <AppendedData encoding=\"raw\">\n   _")?;
        let mut buf = Vec::with_capacity(4 * n.min(1 << 20));
        for (_, v) in fields {
            w.write_all(&(4 * n as u64).to_le_bytes())?;
            for chunk in v.chunks(1 << 20) {
                buf.clear();
                for x in chunk {
                    buf.extend_from_slice(&x.to_le_bytes());
                }
                w.write_all(&buf)?;
            }
        }
        writeln!(w, "\n  </AppendedData>")?;
        writeln!(w, "</VTKFile>")?;
        Ok(())
    })
    .map_err(|e| io_err(path, e))
}

/// Write a ParaView collection listing `(time, file name)` snapshots.
pub fn write_pvd(path: &Path, entries: &[(f64, String)]) -> Result<(), FlowError> {
    tessera_mesh::io::write_atomic(path, |w: &mut dyn Write| {
        writeln!(w, "<?xml version=\"1.0\"?>")?;
        writeln!(w, "<VTKFile type=\"Collection\" version=\"1.0\">")?;
        writeln!(w, "  <Collection>")?;
        for (t, f) in entries {
            writeln!(w, "    <DataSet timestep=\"{t}\" file=\"{f}\"/>")?;
        }
        writeln!(w, "  </Collection>")?;
        writeln!(w, "</VTKFile>")?;
        Ok(())
    })
    .map_err(|e| io_err(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vti_layout_is_readable_back() {
        let dir = std::env::temp_dir().join(format!("tessera-vti-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("a.vti");
        let g = Grid::new_2d(3, 2, 0.5);
        let a: Vec<f32> = (0..6).map(|i| i as f32).collect();
        let b: Vec<f32> = (0..6).map(|i| -(i as f32)).collect();
        write_vti(&p, &g, &[("A", &a), ("B", &b)]).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.contains("WholeExtent=\"0 3 0 2 0 0\""));
        assert!(text.contains("Name=\"B\" format=\"appended\" offset=\"32\""));
        let start = bytes
            .windows(2)
            .position(|w| w == b"\n   _".split_at(3).1)
            .unwrap()
            + 2;
        let blk = &bytes[start..];
        assert_eq!(u64::from_le_bytes(blk[..8].try_into().unwrap()), 24);
        let v1 = f32::from_le_bytes(blk[8 + 4..8 + 8].try_into().unwrap());
        assert_eq!(v1, 1.0);
        let v = f32::from_le_bytes(blk[32 + 8 + 8..32 + 8 + 12].try_into().unwrap());
        assert_eq!(v, -2.0);
        let e = write_vti(&p, &g, &[("A", &a[..5])])
            .unwrap_err()
            .to_string();
        assert!(e.contains("5 values for 6 cells"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
