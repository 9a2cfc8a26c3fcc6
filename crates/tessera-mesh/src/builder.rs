//! Building a [`PolyMesh`] from cells given as vertex loops (file readers, generators).
//!
//! Entities are numbered canonically, so equal input gives equal meshes:
//! - **edges** are the unique vertex pairs, sorted lexicographically and oriented from
//!   the smaller to the larger vertex index (as in dissertation Fig. 3.5);
//! - **faces** are the unique vertex sets, sorted lexicographically by their sorted vertex
//!   tuple; each face's loop starts at its smallest vertex and runs toward the smaller of
//!   that vertex's two neighbours (for a triangle `a < b < c`: `a -> b -> c`, as in
//!   Fig. 3.5); ∂2 rows list the face's edges in that loop order;
//! - **cells** keep the input order; ∂3 rows list the cell's faces in input order with
//!   +1 where the cell's (outward) loop runs like the face's canonical loop.
//!
//! With `orient_by_volume` (default) each cell's signed volume is computed from its face
//! loops (divergence theorem); a negative volume flips all its loops, so cells come out
//! outward whatever the vertex-order convention of the source. A (numerically) zero
//! volume is an error naming the cell.

use crate::cell_type::CellType;
use crate::{MeshError, Point, PolyMesh};
use rayon::prelude::*;
use tessera_core::Par;
use tessera_sparse::tcsr::encode;
use tessera_sparse::Tcsr;

/// Collects cells as face loops and builds a [`PolyMesh`].
#[derive(Clone, Debug, Default)]
pub struct PolyMeshBuilder {
    positions: Vec<Point>,
    /// flattened loop vertices of every face use
    loop_verts: Vec<u32>,
    /// offsets into `loop_verts`, one per face use (+1)
    loop_offsets: Vec<u32>,
    /// offsets into the face uses, one per cell (+1); uses after the last cell are free faces
    cell_offsets: Vec<u32>,
    /// uses that belong to no cell (free faces of non-manifold meshes)
    free_faces: Vec<u32>,
    orient_by_volume: bool,
    /// Every cell so far came from [`PolyMeshBuilder::add_typed_cell`] as a tetrahedron:
    /// the built mesh's cells are then closed by construction (four distinct vertices,
    /// faces identified by their vertex sets), see [`PolyMesh::cells_known_closed`].
    only_tetrahedra: bool,
}

impl PolyMeshBuilder {
    pub fn new(positions: Vec<Point>) -> Self {
        PolyMeshBuilder {
            positions,
            loop_verts: Vec::new(),
            loop_offsets: vec![0],
            cell_offsets: vec![0],
            free_faces: Vec::new(),
            orient_by_volume: true,
            only_tetrahedra: true,
        }
    }

    /// Whether cells with negative signed volume get their loops flipped (default true).
    /// With `false`, loops are taken as given and degenerate cells are not detected.
    pub fn orient_by_volume(mut self, yes: bool) -> Self {
        self.orient_by_volume = yes;
        self
    }

    /// Reserve space for `cells` cells with `uses` face uses of `verts` loop vertices.
    pub fn reserve(&mut self, cells: usize, uses: usize, verts: usize) {
        self.cell_offsets.reserve(cells);
        self.loop_offsets.reserve(uses);
        self.loop_verts.reserve(verts);
    }

    pub fn num_cells(&self) -> usize {
        self.cell_offsets.len() - 1
    }

    fn check_vertex(&self, v: u32) -> Result<(), MeshError> {
        if v as usize >= self.positions.len() {
            return Err(MeshError::IndexOutOfRange {
                what: "vertex",
                index: v as u64,
                len: self.positions.len(),
            });
        }
        Ok(())
    }

    fn push_loop(&mut self, lp: &[u32]) -> Result<(), MeshError> {
        if lp.len() < 3 {
            return Err(MeshError::InvalidTopology(format!(
                "a face needs at least 3 vertices, got {lp:?}"
            )));
        }
        for (i, &v) in lp.iter().enumerate() {
            self.check_vertex(v)?;
            if lp[..i].contains(&v) {
                return Err(MeshError::InvalidTopology(format!(
                    "face loop {lp:?} repeats vertex {v}"
                )));
            }
        }
        self.loop_verts.extend_from_slice(lp);
        self.loop_offsets.push(self.loop_verts.len() as u32);
        Ok(())
    }

    /// Add a general polyhedral cell given by its face loops (any orientation convention
    /// when `orient_by_volume` is on, else outward loops).
    pub fn add_cell(&mut self, faces: &[&[u32]]) -> Result<(), MeshError> {
        // loops given by the caller need not close the cell
        self.only_tetrahedra = false;
        self.push_cell(faces)
    }

    fn push_cell(&mut self, faces: &[&[u32]]) -> Result<(), MeshError> {
        if !self.free_faces.is_empty() {
            return Err(MeshError::InvalidTopology(
                "add cells before free faces".into(),
            ));
        }
        if faces.len() < 4 {
            return Err(MeshError::InvalidTopology(format!(
                "cell {} has {} faces; a polyhedron needs at least 4",
                self.num_cells(),
                faces.len()
            )));
        }
        let mark_v = self.loop_verts.len();
        let mark_u = self.loop_offsets.len();
        for f in faces {
            if let Err(e) = self.push_loop(f) {
                self.loop_verts.truncate(mark_v);
                self.loop_offsets.truncate(mark_u);
                return Err(e);
            }
        }
        self.cell_offsets.push((self.loop_offsets.len() - 1) as u32);
        Ok(())
    }

    /// Add a standard cell (tet, hex, prism, pyramid) by its vertices in VTK/Gmsh order.
    pub fn add_typed_cell(&mut self, ty: CellType, verts: &[u32]) -> Result<(), MeshError> {
        let Some(n) = ty.num_vertices() else {
            return Err(MeshError::Unsupported(
                "add_typed_cell needs a standard cell type".into(),
            ));
        };
        if verts.len() != n {
            return Err(MeshError::InvalidTopology(format!(
                "a {} needs {n} vertices, got {}",
                ty.name(),
                verts.len()
            )));
        }
        let mut buf = [[0u32; 4]; 6];
        let lf = ty.local_faces();
        let mut refs: [&[u32]; 6] = [&[]; 6];
        for (i, f) in lf.iter().enumerate() {
            for (k, &l) in f.iter().enumerate() {
                buf[i][k] = verts[l];
            }
        }
        for (i, f) in lf.iter().enumerate() {
            refs[i] = &buf[i][..f.len()];
        }
        // a quadrilateral's cyclic order can differ between two cells that share its
        // vertex set (a twisted hexahedron): only tetrahedra are closed by construction
        if ty != CellType::Tetrahedron {
            self.only_tetrahedra = false;
        }
        self.push_cell(&refs[..lf.len()])
    }

    /// Add a face that belongs to no cell (non-manifold meshes, surface patches).
    pub fn add_free_face(&mut self, lp: &[u32]) -> Result<(), MeshError> {
        self.push_loop(lp)?;
        self.free_faces.push((self.loop_offsets.len() - 2) as u32);
        Ok(())
    }

    /// Build the mesh.
    pub fn build(mut self, par: Par) -> Result<PolyMesh, MeshError> {
        for (v, p) in self.positions.iter().enumerate() {
            if !p.iter().all(|x| x.is_finite()) {
                return Err(MeshError::NonFinitePosition { vertex: v });
            }
        }
        let ncells = self.num_cells();
        let lo = std::mem::take(&mut self.loop_offsets);
        let mut lv = std::mem::take(&mut self.loop_verts);

        // 1. orientation by signed volume
        if self.orient_by_volume {
            let pos = &self.positions;
            let co = &self.cell_offsets;
            let flips: Vec<Result<bool, MeshError>> = maybe_par_map(par, ncells, |c| {
                let (u0, u1) = (co[c] as usize, co[c + 1] as usize);
                let (vol, scale) = signed_volume(pos, &lv, &lo[u0..=u1]);
                if !(vol.abs() > 1e-12 * scale * scale * scale) || !vol.is_finite() {
                    return Err(MeshError::DegenerateCell {
                        cell: c,
                        reason: format!(
                            "signed volume {vol:e} is zero relative to its size {scale:e}"
                        ),
                    });
                }
                Ok(vol < 0.0)
            });
            for (c, f) in flips.into_iter().enumerate() {
                if f? {
                    for u in self.cell_offsets[c] as usize..self.cell_offsets[c + 1] as usize {
                        lv[lo[u] as usize..lo[u + 1] as usize].reverse();
                    }
                }
            }
        }

        // 2. faces: sort uses by (sorted vertex tuple, use index); equal tuples are one face
        let (face_of_use, first_use) = group_uses(par, &lv, &lo, self.positions.len());
        let nfaces = first_use.len();
        // canonical loops and use signs
        let loop_of = |u: usize| &lv[lo[u] as usize..lo[u + 1] as usize];
        let use_sign = |u: usize| -> i32 {
            let l = loop_of(u);
            let n = l.len();
            let i = (0..n).min_by_key(|&i| l[i]).unwrap();
            if l[(i + 1) % n] < l[(i + n - 1) % n] {
                1
            } else {
                -1
            }
        };
        let mut canon_offsets = vec![0u32; nfaces + 1];
        for f in 0..nfaces {
            canon_offsets[f + 1] = canon_offsets[f] + loop_of(first_use[f] as usize).len() as u32;
        }
        let mut canon = vec![0u32; canon_offsets[nfaces] as usize];
        for f in 0..nfaces {
            let l = loop_of(first_use[f] as usize);
            let n = l.len();
            let i = (0..n).min_by_key(|&i| l[i]).unwrap();
            let fwd = l[(i + 1) % n] < l[(i + n - 1) % n];
            let out = &mut canon[canon_offsets[f] as usize..canon_offsets[f + 1] as usize];
            for k in 0..n {
                out[k] = if fwd {
                    l[(i + k) % n]
                } else {
                    l[(i + n - k) % n]
                };
            }
        }

        // 3. edges: unique sorted vertex pairs
        let pair = |a: u32, b: u32| -> u64 { ((a.min(b) as u64) << 32) | a.max(b) as u64 };
        let mut keys: Vec<u64> = Vec::with_capacity(canon.len());
        for f in 0..nfaces {
            let l = &canon[canon_offsets[f] as usize..canon_offsets[f + 1] as usize];
            for k in 0..l.len() {
                keys.push(pair(l[k], l[(k + 1) % l.len()]));
            }
        }
        let mut edge_keys = keys.clone();
        match par {
            Par::Seq => edge_keys.sort_unstable(),
            Par::Rayon => edge_keys.par_sort_unstable(),
        }
        edge_keys.dedup();
        let edge_vertices: Vec<[u32; 2]> = edge_keys
            .iter()
            .map(|&k| [(k >> 32) as u32, k as u32])
            .collect();
        let face_edge_cols: Vec<i32> = maybe_par_map(par, keys.len(), |i| {
            let e = edge_keys.binary_search(&keys[i]).expect("edge key present") as u32;
            e as i32
        });
        let mut fe_cols = face_edge_cols;
        for f in 0..nfaces {
            let (a, b) = (canon_offsets[f] as usize, canon_offsets[f + 1] as usize);
            let l = &canon[a..b];
            for k in 0..l.len() {
                let neg = l[k] > l[(k + 1) % l.len()];
                fe_cols[a + k] = encode(fe_cols[a + k] as u32, neg);
            }
        }
        let face_edges = Tcsr::new(edge_vertices.len(), canon_offsets, fe_cols)?;

        // 4. cells
        let mut cf_offsets = Vec::with_capacity(ncells + 1);
        cf_offsets.push(0u32);
        let mut cf_cols = Vec::with_capacity(self.cell_offsets[ncells] as usize);
        for c in 0..ncells {
            for u in self.cell_offsets[c] as usize..self.cell_offsets[c + 1] as usize {
                cf_cols.push(encode(face_of_use[u], use_sign(u) < 0));
            }
            cf_offsets.push(cf_cols.len() as u32);
        }
        // a cell must not use the same face twice
        let twice = maybe_par_map(par, ncells, |c| {
            let row = &cf_cols[cf_offsets[c] as usize..cf_offsets[c + 1] as usize];
            let col = tessera_sparse::tcsr::col;
            (1..row.len()).any(|i| row[..i].iter().any(|&v| col(v) == col(row[i])))
        });
        if let Some(c) = twice.iter().position(|&t| t) {
            return Err(MeshError::InvalidTopology(format!(
                "cell {c} uses a face twice"
            )));
        }
        let cell_faces = Tcsr::new(nfaces, cf_offsets, cf_cols)?;
        let mut mesh =
            PolyMesh::from_operators(self.positions, edge_vertices, face_edges, cell_faces)?;
        mesh.set_par(par);
        // a tetrahedron's four loops (local faces of four vertices, none repeated in a loop,
        // so four distinct vertices) are four distinct triangles whose six edges each bound
        // two of them: closed whatever the loops' orientation
        if self.only_tetrahedra {
            mesh.mark_cells_closed();
        }
        Ok(mesh)
    }
}

/// Group face uses into faces: returns the face of every use and the first use of every
/// face, faces numbered by their sorted vertex tuple (ties by use index, so the result
/// is the same for `Par::Seq` and `Par::Rayon`). When every loop has at most 4 vertices
/// and the tuple plus the use index fit in 128 bits, the tuples are packed into `u128`
/// keys (a sorted tuple padded with 0 compares like the shorter slice, since every entry
/// after the first is at least 1) and sorted directly; otherwise uses are sorted by slice.
fn group_uses(par: Par, lv: &[u32], lo: &[u32], nvertices: usize) -> (Vec<u32>, Vec<u32>) {
    let nuses = lo.len() - 1;
    let bits = |n: usize| (usize::BITS - n.leading_zeros()).max(1);
    let (vb, ub) = (bits(nvertices), bits(nuses));
    let short = (0..nuses).all(|u| lo[u + 1] - lo[u] <= 4);
    let mut face_of_use = vec![0u32; nuses];
    let mut first_use: Vec<u32> = Vec::new();
    if short && 4 * vb + ub <= 128 {
        let mut keys: Vec<u128> = maybe_par_map(par, nuses, |u| {
            let l = &lv[lo[u] as usize..lo[u + 1] as usize];
            let mut t = [0u32; 4];
            t[..l.len()].copy_from_slice(l);
            t[..l.len()].sort_unstable();
            let k = t.iter().fold(0u128, |k, &v| (k << vb) | v as u128);
            (k << ub) | u as u128
        });
        match par {
            Par::Seq => keys.sort_unstable(),
            Par::Rayon => keys.par_sort_unstable(),
        }
        let umask = (1u128 << ub) - 1;
        for (i, &k) in keys.iter().enumerate() {
            let u = (k & umask) as u32;
            if i == 0 || (k >> ub) != (keys[i - 1] >> ub) {
                first_use.push(u);
            }
            face_of_use[u as usize] = (first_use.len() - 1) as u32;
        }
        return (face_of_use, first_use);
    }
    let mut sorted = lv.to_vec();
    for u in 0..nuses {
        sorted[lo[u] as usize..lo[u + 1] as usize].sort_unstable();
    }
    let key = |u: u32| &sorted[lo[u as usize] as usize..lo[u as usize + 1] as usize];
    let mut order: Vec<u32> = (0..nuses as u32).collect();
    match par {
        Par::Seq => order.sort_by(|&a, &b| key(a).cmp(key(b)).then(a.cmp(&b))),
        Par::Rayon => order.par_sort_by(|&a, &b| key(a).cmp(key(b)).then(a.cmp(&b))),
    }
    for (i, &u) in order.iter().enumerate() {
        if i == 0 || key(order[i - 1]) != key(u) {
            first_use.push(u);
        }
        face_of_use[u as usize] = (first_use.len() - 1) as u32;
    }
    (face_of_use, first_use)
}

fn maybe_par_map<T: Send, F: Fn(usize) -> T + Sync + Send>(par: Par, n: usize, f: F) -> Vec<T> {
    match par {
        Par::Seq => (0..n).map(f).collect(),
        Par::Rayon => (0..n).into_par_iter().with_min_len(4096).map(f).collect(),
    }
}

/// Signed volume of a cell given by face loops (outward loops give a positive volume),
/// and its size (bounding-box diagonal). `offs` are the loop offsets of the cell's uses.
pub fn signed_volume(pos: &[Point], lv: &[u32], offs: &[u32]) -> (f64, f64) {
    // reference point: first vertex, for accuracy
    let p0 = pos[lv[offs[0] as usize] as usize];
    let mut lo = p0;
    let mut hi = p0;
    let mut vol = 0.0;
    let sub = |a: Point| [a[0] - p0[0], a[1] - p0[1], a[2] - p0[2]];
    for w in offs.windows(2) {
        let l = &lv[w[0] as usize..w[1] as usize];
        let a = sub(pos[l[0] as usize]);
        for k in 1..l.len() - 1 {
            let b = sub(pos[l[k] as usize]);
            let c = sub(pos[l[k + 1] as usize]);
            vol += a[0] * (b[1] * c[2] - b[2] * c[1]) - a[1] * (b[0] * c[2] - b[2] * c[0])
                + a[2] * (b[0] * c[1] - b[1] * c[0]);
        }
        for &v in l {
            let p = pos[v as usize];
            for d in 0..3 {
                lo[d] = lo[d].min(p[d]);
                hi[d] = hi[d].max(p[d]);
            }
        }
    }
    let scale =
        ((hi[0] - lo[0]).powi(2) + (hi[1] - lo[1]).powi(2) + (hi[2] - lo[2]).powi(2)).sqrt();
    (vol / 6.0, scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Dissertation Fig. 3.5: two tetrahedra sharing face f0 = (v0, v1, v2).
    pub fn fig_3_5_positions() -> Vec<Point> {
        vec![
            [0.0, 0.0, 0.0],
            [1.0, 0.0, 0.0],
            [0.0, 1.0, 0.0],
            [0.0, 0.0, -1.0],
            [0.3, 0.3, 1.0],
        ]
    }

    #[test]
    fn fig_3_5_from_tets() {
        let mut b = PolyMeshBuilder::new(fig_3_5_positions());
        b.add_typed_cell(CellType::Tetrahedron, &[0, 1, 2, 3])
            .unwrap();
        b.add_typed_cell(CellType::Tetrahedron, &[0, 1, 2, 4])
            .unwrap();
        let m = b.build(Par::Seq).unwrap();
        assert_eq!(
            (
                m.num_vertices(),
                m.num_edges(),
                m.num_faces(),
                m.num_cells()
            ),
            (5, 9, 7, 2)
        );
        let d1: Vec<[u32; 2]> = vec![
            [0, 1],
            [0, 2],
            [0, 3],
            [0, 4],
            [1, 2],
            [1, 3],
            [1, 4],
            [2, 3],
            [2, 4],
        ];
        assert_eq!(m.edge_vertices(), &d1[..]);
        let d2 = m.face_edges().to_dense();
        let want_d2: Vec<Vec<i8>> = vec![
            vec![1, -1, 0, 0, 1, 0, 0, 0, 0],
            vec![1, 0, -1, 0, 0, 1, 0, 0, 0],
            vec![1, 0, 0, -1, 0, 0, 1, 0, 0],
            vec![0, 1, -1, 0, 0, 0, 0, 1, 0],
            vec![0, 1, 0, -1, 0, 0, 0, 0, 1],
            vec![0, 0, 0, 0, 1, -1, 0, 1, 0],
            vec![0, 0, 0, 0, 1, 0, -1, 0, 1],
        ];
        assert_eq!(d2, want_d2);
        let d3 = m.cell_faces().to_dense();
        assert_eq!(
            d3,
            vec![vec![1, -1, 0, 1, 0, -1, 0], vec![-1, 0, 1, 0, -1, 0, 1]]
        );
    }

    #[test]
    fn degenerate_cell_is_an_error() {
        let pos = vec![
            [0.0, 0.0, 0.0],
            [1.0, 0.0, 0.0],
            [0.0, 1.0, 0.0],
            [1.0, 1.0, 0.0],
        ];
        let mut b = PolyMeshBuilder::new(pos);
        b.add_typed_cell(CellType::Tetrahedron, &[0, 1, 2, 3])
            .unwrap();
        assert!(matches!(
            b.build(Par::Seq),
            Err(MeshError::DegenerateCell { cell: 0, .. })
        ));
    }

    #[test]
    fn inverted_tet_is_flipped() {
        let mut b = PolyMeshBuilder::new(fig_3_5_positions());
        b.add_typed_cell(CellType::Tetrahedron, &[0, 2, 1, 3])
            .unwrap();
        let m = b.build(Par::Seq).unwrap();
        let mut b2 = PolyMeshBuilder::new(fig_3_5_positions());
        b2.add_typed_cell(CellType::Tetrahedron, &[0, 1, 2, 3])
            .unwrap();
        let m2 = b2.build(Par::Seq).unwrap();
        assert_eq!(m.face_edges(), m2.face_edges());
        assert_eq!(m.cell_faces().to_dense(), m2.cell_faces().to_dense());
    }

    #[test]
    fn out_of_range_and_nan_are_errors() {
        let mut b = PolyMeshBuilder::new(fig_3_5_positions());
        assert!(b
            .add_typed_cell(CellType::Tetrahedron, &[0, 1, 2, 9])
            .is_err());
        let mut pos = fig_3_5_positions();
        pos[3][1] = f64::NAN;
        let mut b = PolyMeshBuilder::new(pos);
        b.add_typed_cell(CellType::Tetrahedron, &[0, 1, 2, 3])
            .unwrap();
        assert!(matches!(
            b.build(Par::Seq),
            Err(MeshError::NonFinitePosition { vertex: 3 })
        ));
    }
}
