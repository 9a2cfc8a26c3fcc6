//! The fields of a finished `tessera fem solve` as a stream source: a plane through the
//! tetrahedral `.vtu` result, resampled onto a regular grid. Point arrays are interpolated with
//! the cell's shape functions (quadratic on 10-node tetrahedra, linear from the four corners
//! otherwise); cell arrays are constant per cell; points outside the body are NaN, drawn gray
//! by the client.
//! Vector and tensor arrays become one scalar field per component (`DisplacementX`,
//! `StressXY`), as `tessera query eval` names them, so expressions work on them too.

use std::path::{Path, PathBuf};
use std::time::Instant;

use tessera_flow::{FieldData, FieldInfo, FlowError, Grid, Simulation, StepReport};
use tessera_gpu::Gpu;
use tessera_mesh::io::vtu::{read_vtu_grid, vtk_volume_shape, VtuGrid, VTK_QUADRATIC_TETRA};
use tessera_mesh::CellType;

use tessera_render::Surface;

use crate::rixel::{MeshScene, Scene3D};
use crate::StreamError;

/// A slice plane: the axis it is normal to (0 = x, 1 = y, 2 = z) and its position as a
/// fraction of the body's extent along that axis.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SlicePlane {
    pub axis: usize,
    pub fraction: f64,
}

impl std::str::FromStr for SlicePlane {
    type Err = StreamError;
    /// `z:0.5`, `x:0.25`, ...
    fn from_str(s: &str) -> Result<Self, StreamError> {
        let bad =
            || StreamError::Invalid(format!("slice `{s}`: expected AXIS:FRACTION like z:0.5"));
        let (a, f) = s.split_once(':').ok_or_else(bad)?;
        let axis = match a.trim() {
            "x" | "X" => 0,
            "y" | "Y" => 1,
            "z" | "Z" => 2,
            _ => return Err(bad()),
        };
        let fraction: f64 = f.trim().parse().map_err(|_| bad())?;
        if !(0.0..=1.0).contains(&fraction) {
            return Err(bad());
        }
        Ok(SlicePlane { axis, fraction })
    }
}

/// A static source: the resampled slice of one result file.
pub struct ResultsSlice {
    name: String,
    grid: Grid,
    fields: Vec<FieldInfo>,
    values: Vec<Vec<f32>>,
    steps: u64,
}

/// The `.vtu` result in `dir` (the first by name), or `dir` itself if it is a file.
pub fn result_file(dir: &Path) -> Result<PathBuf, StreamError> {
    if dir.is_file() {
        return Ok(dir.to_path_buf());
    }
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| StreamError::io(format!("reading {}", dir.display()), e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "vtu"))
        .collect();
    v.sort();
    v.into_iter().next().ok_or_else(|| {
        StreamError::Invalid(format!(
            "{}: no .vtu result file (run `tessera fem solve ... -o DIR` first)",
            dir.display()
        ))
    })
}

fn identifier(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.chars().next().is_none_or(|c| c.is_ascii_digit()) {
        out.insert(0, 'f');
    }
    out
}

impl ResultsSlice {
    /// Reads the result in `dir` and resamples `plane` onto a grid whose longer side has
    /// `resolution` cells.
    pub fn open(dir: &Path, plane: SlicePlane, resolution: usize) -> Result<Self, StreamError> {
        let path = result_file(dir)?;
        let g = read_vtu_grid(&path).map_err(|e| StreamError::Invalid(e.to_string()))?;
        let file = path.file_name().map_or_else(
            || path.display().to_string(),
            |f| f.to_string_lossy().into_owned(),
        );
        Self::from_grid(&g, plane, resolution, &file)
    }

    /// Resamples an in-memory grid (see [`ResultsSlice::open`]).
    pub fn from_grid(
        g: &VtuGrid,
        plane: SlicePlane,
        resolution: usize,
        name: &str,
    ) -> Result<Self, StreamError> {
        if !(2..=8192).contains(&resolution) {
            return Err(StreamError::Invalid(format!(
                "slice resolution {resolution}: 2..8192"
            )));
        }
        if g.points.is_empty() {
            return Err(StreamError::Invalid(format!("{name}: no points")));
        }
        let (mut lo, mut hi) = ([f64::INFINITY; 3], [f64::NEG_INFINITY; 3]);
        for p in &g.points {
            for k in 0..3 {
                lo[k] = lo[k].min(p[k]);
                hi[k] = hi[k].max(p[k]);
            }
        }
        let (a, u, v) = (plane.axis, (plane.axis + 1) % 3, (plane.axis + 2) % 3);
        let (u, v) = (u.min(v), u.max(v));
        let level = lo[a] + plane.fraction * (hi[a] - lo[a]);
        let (eu, ev) = (hi[u] - lo[u], hi[v] - lo[v]);
        let h = eu.max(ev).max(f64::MIN_POSITIVE) / resolution as f64;
        // (the tolerance keeps 1.0 / (1.0 / 20) = 20.000000000000004 at 20 cells)
        let (nx, ny) = (
            ((eu / h - 1e-9).ceil() as usize).max(1),
            ((ev / h - 1e-9).ceil() as usize).max(1),
        );
        // the scalar fields: components of point arrays, then of cell arrays
        let (fields, sources) = scalar_fields(g);
        if fields.is_empty() {
            return Err(StreamError::Invalid(format!(
                "{name}: no point or cell data arrays to show"
            )));
        }
        let mut values = vec![vec![f32::NAN; nx * ny]; fields.len()];
        let mut covered = vec![false; nx * ny];
        for c in 0..g.num_cells() {
            if vtk_volume_shape(g.types[c]) != Some(CellType::Tetrahedron) {
                continue;
            }
            let ids = g.cell(c);
            if ids.len() < 4
                || ids[..4]
                    .iter()
                    .any(|&i| i < 0 || i as usize >= g.points.len())
            {
                continue;
            }
            let p: [[f64; 3]; 4] = std::array::from_fn(|k| g.points[ids[k] as usize]);
            let (amin, amax) = p
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), q| {
                    (l.min(q[a]), h.max(q[a]))
                });
            if level < amin || level > amax {
                continue;
            }
            let (umin, umax) = p
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), q| {
                    (l.min(q[u]), h.max(q[u]))
                });
            let (vmin, vmax) = p
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), q| {
                    (l.min(q[v]), h.max(q[v]))
                });
            let i0 = (((umin - lo[u]) / h - 0.5).ceil().max(0.0)) as usize;
            let i1 = (((umax - lo[u]) / h - 0.5).floor().min(nx as f64 - 1.0)) as isize;
            let j0 = (((vmin - lo[v]) / h - 0.5).ceil().max(0.0)) as usize;
            let j1 = (((vmax - lo[v]) / h - 0.5).floor().min(ny as f64 - 1.0)) as isize;
            if i1 < 0 || j1 < 0 {
                continue;
            }
            for j in j0..=j1 as usize {
                for i in i0..=i1 as usize {
                    let cell = i + nx * j;
                    if covered[cell] {
                        continue;
                    }
                    let mut x = [0.0; 3];
                    x[a] = level;
                    x[u] = lo[u] + (i as f64 + 0.5) * h;
                    x[v] = lo[v] + (j as f64 + 0.5) * h;
                    let Some(l) = barycentric(&p, x) else {
                        continue;
                    };
                    if l.iter().any(|&w| w < -1e-9) {
                        continue;
                    }
                    covered[cell] = true;
                    let (n, w) = shape(g.types[c], ids, l);
                    for (f, &(ai, point, comp)) in sources.iter().enumerate() {
                        let val = if point {
                            let arr = &g.point_data[ai];
                            (0..n)
                                .map(|k| {
                                    w[k] * arr
                                        .values
                                        .get(ids[k] as usize * arr.components + comp)
                                        .copied()
                                        .unwrap_or(f64::NAN)
                                })
                                .sum::<f64>()
                        } else {
                            let arr = &g.cell_data[ai];
                            arr.values
                                .get(c * arr.components + comp)
                                .copied()
                                .unwrap_or(f64::NAN)
                        };
                        values[f][cell] = val as f32;
                    }
                }
            }
        }
        let mut origin = [0.0; 3];
        origin[0] = lo[u];
        origin[1] = lo[v];
        origin[2] = level;
        Ok(ResultsSlice {
            name: format!("{name} ({} = {level:.4} slice)", ["x", "y", "z"][a]),
            grid: Grid {
                dims: [nx, ny, 1],
                spacing: h,
                origin,
            },
            fields,
            values,
            steps: 0,
        })
    }
}

/// The scalar fields of a result: every component of every point array, then of every cell
/// array (`DisplacementZ`, `StressXY`, `VonMises`), with where each comes from
/// (array index, point array?, component).
fn scalar_fields(g: &VtuGrid) -> (Vec<FieldInfo>, Vec<(usize, bool, usize)>) {
    let mut fields = Vec::new();
    let mut sources = Vec::new();
    for (loc, arrays) in [(true, &g.point_data), (false, &g.cell_data)] {
        for (ai, arr) in arrays.iter().enumerate() {
            for c in 0..arr.components {
                let suffix = match (arr.components, arr.component_names.get(c)) {
                    (1, _) => String::new(),
                    (_, Some(n)) if !n.is_empty() => n.clone(),
                    (3, _) => ["X", "Y", "Z"][c].to_string(),
                    _ => c.to_string(),
                };
                let name = identifier(&format!("{}{suffix}", arr.name));
                if fields.iter().any(|f: &FieldInfo| f.name == name) {
                    continue;
                }
                fields.push(FieldInfo::cell(&name, ""));
                sources.push((ai, loc, c));
            }
        }
    }
    (fields, sources)
}

/// The boundary surface of a result for the 3D view (dissertation §6.3.5 applied to FEM
/// results): the faces of its tetrahedra that no other tetrahedron shares, through their
/// corner points, with every scalar field of [`ResultsSlice`] per vertex (point arrays at
/// the corner; cell arrays as the mean over the tetrahedra around the point). With
/// `displace != 0` the points move by `displace` times the `Displacement` point array (the
/// deformed shape, exaggerated).
pub fn boundary_scene(g: &VtuGrid, displace: f64, name: &str) -> Result<MeshScene, StreamError> {
    let np = g.points.len();
    let (fields, sources) = scalar_fields(g);
    if fields.is_empty() {
        return Err(StreamError::Invalid(format!(
            "{name}: no point or cell data arrays to show"
        )));
    }
    let disp = if displace != 0.0 {
        if !displace.is_finite() {
            return Err(StreamError::Invalid(format!(
                "displacement scale {displace}: must be finite"
            )));
        }
        let d = g
            .point_data
            .iter()
            .find(|a| a.name == "Displacement" && a.components == 3 && a.values.len() == 3 * np)
            .ok_or_else(|| {
                StreamError::Invalid(format!(
                    "{name}: no 3-component point array `Displacement` to displace the surface by"
                ))
            })?;
        Some(&d.values)
    } else {
        None
    };
    // faces by their sorted corners: (how many tetrahedra have it, the face as first seen)
    let mut faces: std::collections::HashMap<[u32; 3], (u32, [u32; 3])> =
        std::collections::HashMap::new();
    let mut cell_sum = vec![vec![0.0f64; np]; sources.len()];
    let mut cell_count = vec![0u32; np];
    for c in 0..g.num_cells() {
        if vtk_volume_shape(g.types[c]) != Some(CellType::Tetrahedron) {
            continue;
        }
        let ids = g.cell(c);
        if ids.len() < 4 || ids[..4].iter().any(|&i| i < 0 || i as usize >= np) {
            continue;
        }
        let v: [u32; 4] = std::array::from_fn(|k| ids[k] as u32);
        for f in [[0, 2, 1], [0, 1, 3], [1, 2, 3], [0, 3, 2]] {
            let tri = [v[f[0]], v[f[1]], v[f[2]]];
            let mut key = tri;
            key.sort_unstable();
            faces.entry(key).or_insert((0, tri)).0 += 1;
        }
        for &p in &v {
            cell_count[p as usize] += 1;
            for (f, &(ai, point, comp)) in sources.iter().enumerate() {
                if !point {
                    let arr = &g.cell_data[ai];
                    cell_sum[f][p as usize] += arr
                        .values
                        .get(c * arr.components + comp)
                        .copied()
                        .unwrap_or(f64::NAN);
                }
            }
        }
    }
    let mut boundary: Vec<[u32; 3]> = faces
        .into_values()
        .filter(|(n, _)| *n == 1)
        .map(|(_, t)| t)
        .collect();
    if boundary.is_empty() {
        return Err(StreamError::Invalid(format!(
            "{name}: no tetrahedra, so no boundary surface for the 3D view"
        )));
    }
    boundary.sort_unstable();
    let mut used = vec![u32::MAX; np];
    let mut points: Vec<usize> = Vec::new();
    let mut surface = Surface::default();
    for t in &mut boundary {
        for v in t.iter_mut() {
            let p = *v as usize;
            if used[p] == u32::MAX {
                used[p] = points.len() as u32;
                points.push(p);
                let q = g.points[p];
                surface.positions.push(std::array::from_fn(|k| {
                    (q[k] + disp.map_or(0.0, |d| displace * d[3 * p + k])) as f32
                }));
            }
            *v = used[p];
        }
    }
    surface.triangles = boundary;
    surface.values = vec![0.0; points.len()];
    surface
        .validate()
        .map_err(|e| StreamError::Invalid(format!("{name}: boundary surface: {e}")))?;
    let values = sources
        .iter()
        .enumerate()
        .map(|(f, &(ai, point, comp))| {
            points
                .iter()
                .map(|&p| {
                    if point {
                        let arr = &g.point_data[ai];
                        arr.values
                            .get(p * arr.components + comp)
                            .map_or(f32::NAN, |&x| x as f32)
                    } else {
                        (cell_sum[f][p] / cell_count[p].max(1) as f64) as f32
                    }
                })
                .collect()
        })
        .collect();
    Ok(MeshScene {
        surface,
        fields: fields.into_iter().map(|f| f.name).collect(),
        values,
    })
}

/// A finished `fem solve` for `tessera serve --results`: the slice (2D view) and the boundary
/// surface (3D view, points moved by `displace` times the displacement), read once.
pub fn open_results(
    dir: &Path,
    plane: SlicePlane,
    resolution: usize,
    displace: f64,
) -> Result<(ResultsSlice, Scene3D), StreamError> {
    let path = result_file(dir)?;
    let g = read_vtu_grid(&path).map_err(|e| StreamError::Invalid(e.to_string()))?;
    let file = path.file_name().map_or_else(
        || path.display().to_string(),
        |f| f.to_string_lossy().into_owned(),
    );
    let slice = ResultsSlice::from_grid(&g, plane, resolution, &file)?;
    let mesh = boundary_scene(&g, displace, &file)?;
    Ok((slice, Scene3D::Mesh(std::sync::Arc::new(mesh))))
}

/// The nodal weights at barycentric point `l` of a tetrahedron of VTK type `ty` with points
/// `ids`: the ten quadratic shape functions of a `VTK_QUADRATIC_TETRA` (edge midpoints in VTK's
/// order (0,1) (1,2) (0,2) (0,3) (1,3) (2,3)), else the four linear ones of the corners.
fn shape(ty: u8, ids: &[i64], l: [f64; 4]) -> (usize, [f64; 10]) {
    let mut w = [0.0; 10];
    if ty == VTK_QUADRATIC_TETRA && ids.len() >= 10 && ids[4..10].iter().all(|&i| i >= 0) {
        for k in 0..4 {
            w[k] = l[k] * (2.0 * l[k] - 1.0);
        }
        for (e, (a, b)) in [(0, 1), (1, 2), (0, 2), (0, 3), (1, 3), (2, 3)]
            .into_iter()
            .enumerate()
        {
            w[4 + e] = 4.0 * l[a] * l[b];
        }
        (10, w)
    } else {
        w[..4].copy_from_slice(&l);
        (4, w)
    }
}

/// Barycentric coordinates of `x` in tetrahedron `p` (None if degenerate).
fn barycentric(p: &[[f64; 3]; 4], x: [f64; 3]) -> Option<[f64; 4]> {
    let d = |a: [f64; 3], b: [f64; 3]| [a[0] - b[0], a[1] - b[1], a[2] - b[2]];
    let det3 = |a: [f64; 3], b: [f64; 3], c: [f64; 3]| {
        a[0] * (b[1] * c[2] - b[2] * c[1]) - a[1] * (b[0] * c[2] - b[2] * c[0])
            + a[2] * (b[0] * c[1] - b[1] * c[0])
    };
    let (e1, e2, e3, r) = (d(p[1], p[0]), d(p[2], p[0]), d(p[3], p[0]), d(x, p[0]));
    let det = det3(e1, e2, e3);
    if det.abs() < 1e-300 {
        return None;
    }
    let l1 = det3(r, e2, e3) / det;
    let l2 = det3(e1, r, e3) / det;
    let l3 = det3(e1, e2, r) / det;
    Some([1.0 - l1 - l2 - l3, l1, l2, l3])
}

impl Simulation for ResultsSlice {
    fn name(&self) -> &str {
        &self.name
    }
    fn grid(&self) -> Grid {
        self.grid
    }
    fn fields(&self) -> &[FieldInfo] {
        &self.fields
    }
    /// The result does not change; a step only advances the counter (so clients can ask for
    /// frames again, for example after subscribing to an expression).
    fn step(&mut self) -> Result<StepReport, FlowError> {
        let t0 = Instant::now();
        self.steps += 1;
        Ok(StepReport {
            dt: 0.0,
            wall_ms: t0.elapsed().as_secs_f64() * 1e3,
            stats: Vec::new(),
        })
    }
    fn time(&self) -> f64 {
        0.0
    }
    fn steps(&self) -> u64 {
        self.steps
    }
    fn field(&self, name: &str) -> Result<FieldData<'_>, FlowError> {
        let k = self
            .fields
            .iter()
            .position(|f| f.name == name)
            .ok_or_else(|| tessera_flow::simulation::unknown_field(self, name))?;
        Ok(FieldData::Host(&self.values[k]))
    }
    fn gpu(&self) -> Option<&std::sync::Arc<Gpu>> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_mesh::io::vtu::DataLocation;
    use tessera_mesh::io::vtu::{DataArray, VTK_TETRA};

    /// Unit cube split into 6 tetrahedra (Kuhn), point data f = 2x + 3y - z and a vector.
    fn cube() -> VtuGrid {
        let mut g = VtuGrid::default();
        for k in 0..8 {
            g.points
                .push([(k & 1) as f64, ((k >> 1) & 1) as f64, ((k >> 2) & 1) as f64]);
        }
        for t in [
            [0, 1, 3, 7],
            [0, 1, 5, 7],
            [0, 2, 3, 7],
            [0, 2, 6, 7],
            [0, 4, 5, 7],
            [0, 4, 6, 7],
        ] {
            g.connectivity.extend(t.iter().map(|&i| i as i64));
            g.offsets.push(g.connectivity.len() as i64);
            g.types.push(VTK_TETRA);
        }
        let f: Vec<f64> = g
            .points
            .iter()
            .map(|p| 2.0 * p[0] + 3.0 * p[1] - p[2])
            .collect();
        let disp: Vec<f64> = g.points.iter().flat_map(|p| [p[0], 0.0, -p[1]]).collect();
        g.point_data = vec![
            DataArray::point_scalars("Temperature", f),
            DataArray::new("Displacement", DataLocation::Point, 3, disp),
        ];
        g
    }

    #[test]
    fn a_linear_field_is_resampled_exactly() {
        let s = ResultsSlice::from_grid(&cube(), "z:0.25".parse().unwrap(), 16, "cube").unwrap();
        assert_eq!(s.grid().dims, [16, 16, 1]);
        let names: Vec<&str> = s.fields().iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "Temperature",
                "DisplacementX",
                "DisplacementY",
                "DisplacementZ"
            ]
        );
        let FieldData::Host(t) = s.field("Temperature").unwrap() else {
            panic!()
        };
        let FieldData::Host(dz) = s.field("DisplacementZ").unwrap() else {
            panic!()
        };
        for j in 0..16 {
            for i in 0..16 {
                let (x, y) = ((i as f64 + 0.5) / 16.0, (j as f64 + 0.5) / 16.0);
                let k = i + 16 * j;
                assert!(
                    (t[k] as f64 - (2.0 * x + 3.0 * y - 0.25)).abs() < 1e-5,
                    "{i},{j}: {}",
                    t[k]
                );
                assert!((dz[k] as f64 + y).abs() < 1e-5);
            }
        }
        assert!("w:0.5".parse::<SlicePlane>().is_err());
        assert!("z:1.5".parse::<SlicePlane>().is_err());
    }

    #[test]
    fn a_quadratic_field_on_a_quadratic_tetrahedron_is_resampled_exactly() {
        // the unit tetrahedron with VTK's edge midpoints, f = x*y + z^2 + 3x (P2 reproduces it)
        let corners = [
            [0.0, 0.0, 0.0],
            [1.0, 0.0, 0.0],
            [0.0, 1.0, 0.0],
            [0.0, 0.0, 1.0],
        ];
        let mut g = VtuGrid::default();
        g.points.extend(corners);
        for (a, b) in [(0, 1), (1, 2), (0, 2), (0, 3), (1, 3), (2, 3)] {
            let (p, q): ([f64; 3], [f64; 3]) = (corners[a], corners[b]);
            g.points.push(std::array::from_fn(|k| 0.5 * (p[k] + q[k])));
        }
        g.connectivity = (0..10).collect();
        g.offsets = vec![10];
        g.types = vec![VTK_QUADRATIC_TETRA];
        let f = |p: &[f64; 3]| p[0] * p[1] + p[2] * p[2] + 3.0 * p[0];
        let vals = g.points.iter().map(f).collect();
        g.point_data = vec![DataArray::point_scalars("F", vals)];
        let s = ResultsSlice::from_grid(&g, "z:0.2".parse().unwrap(), 20, "tet").unwrap();
        let FieldData::Host(v) = s.field("F").unwrap() else {
            panic!()
        };
        let (mut inside, mut outside) = (0, 0);
        for j in 0..20 {
            for i in 0..20 {
                let (x, y) = ((i as f64 + 0.5) / 20.0, (j as f64 + 0.5) / 20.0);
                let k = i + 20 * j;
                if x + y + 0.2 < 1.0 - 1e-9 {
                    inside += 1;
                    let want = f(&[x, y, 0.2]);
                    assert!(
                        (v[k] as f64 - want).abs() < 1e-5,
                        "{i},{j}: {} vs {want}",
                        v[k]
                    );
                } else if x + y + 0.2 > 1.0 + 1e-9 {
                    outside += 1;
                    assert!(v[k].is_nan(), "{i},{j} is outside the body");
                }
            }
        }
        assert!(inside > 100 && outside > 100, "{inside} {outside}");
    }

    #[test]
    fn the_boundary_surface_carries_every_field_per_vertex() {
        let mut g = cube();
        g.cell_data = vec![DataArray::new(
            "Id",
            DataLocation::Cell,
            1,
            (0..6).map(|c| c as f64).collect(),
        )];
        let m = boundary_scene(&g, 0.0, "cube").unwrap();
        // the 6 Kuhn tetrahedra leave 2 triangles on each of the 6 faces of the cube
        assert_eq!(m.surface.num_triangles(), 12);
        assert_eq!(m.surface.positions.len(), 8);
        assert_eq!(
            m.fields,
            [
                "Temperature",
                "DisplacementX",
                "DisplacementY",
                "DisplacementZ",
                "Id"
            ]
        );
        let t = m.field("Temperature").unwrap();
        for (p, &v) in m.surface.positions.iter().zip(t) {
            let want = 2.0 * p[0] + 3.0 * p[1] - p[2];
            assert!((v - want).abs() < 1e-6, "{p:?}: {v}");
        }
        // every boundary triangle lies in a face of the cube
        for tri in &m.surface.triangles {
            let on_face = (0..3).any(|k| {
                let c: Vec<f32> = tri
                    .iter()
                    .map(|&v| m.surface.positions[v as usize][k])
                    .collect();
                c.iter().all(|&x| x == 0.0) || c.iter().all(|&x| x == 1.0)
            });
            assert!(on_face, "{tri:?}");
        }
        // corner 0 and corner 7 belong to all six tetrahedra: the mean of the ids
        let id = m.field("Id").unwrap();
        let k0 = m
            .surface
            .positions
            .iter()
            .position(|p| *p == [0.0; 3])
            .unwrap();
        assert_eq!(id[k0], 2.5);
        // displaced by twice the displacement (x, 0, -y)
        let d = boundary_scene(&g, 2.0, "cube").unwrap();
        assert!(
            d.surface.positions.contains(&[3.0, 1.0, -1.0]),
            "{:?}",
            d.surface.positions
        );
        assert!(m.field("Pressure").is_err());
        let mut none = cube();
        none.point_data.clear();
        assert!(boundary_scene(&none, 0.0, "cube").is_err());
    }
}
