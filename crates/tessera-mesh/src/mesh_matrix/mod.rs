//! The mesh matrix with action maps (seed 004: Zayer, Steinberger and Seidel, "A GPU-Adapted
//! Structure for Unstructured Grids", Eurographics 2017), the structure the dissertation
//! compares its ternary CSR (TCSR, dissertation §3.4) with.
//!
//! A face table `F = {f_1 … f_nf}` is laid out as the sparse `nv × nf` matrix `M` with
//! `M(f_i(k), i) = k` (seed Eq. 1): faces are columns, a face's vertices are the rows of its
//! nonzeros and each value is the vertex's position in the face (1-based, as in the seed).
//! Storing each column's row indices in face order makes the values redundant (seed §4), so
//! [`MeshMatrix`] keeps only `rowind` (+ `colptr` when faces have different sizes): 12 bytes
//! per triangle, 16 with `colptr`. `M̄` is the binary form (every value 1), the face-vertex
//! incidence matrix.
//!
//! Operations are sparse products whose multiplications are replaced by **action maps**
//! ([`action`]): small tables `Q` indexed by the entry values, optionally scaled by a vector
//! per entry or per face. The intermediate matrices (`M̄`, transposes, element matrices) are
//! never built:
//!
//! | operation | seed | module |
//! |---|---|---|
//! | mapped SpMV `M v`, `Mᵀ v` (scalars or rows of 3) | Algorithm 1, §5.1 | [`spmv`] |
//! | mapped SpGEMM `C = M Q Mᵀ` (adjacency, graph/cotangent/P1-tet Laplacians) | Algorithm 2, §5.2, §6 | [`spgemm`] |
//! | area-, angle- and Max-weighted vertex normals | §5.1 (Eqs. 2-3), §9 Table 3 | [`normals`] |
//! | plane slicing (triangles and quads along the cut, cut polylines) | §9 Table 4 | [`slice`] |
//! | one step of surface Catmull-Clark | §9 Table 5 | [`subdivide`] |
//! | edge collapse, face collapse, vertex removal by K-matrix products | §8, Table 1 | [`collapse`] |
//! | reverse Cuthill-McKee ordering | §9 (Fig. 5) | [`rcm`] |
//!
//! The GPU implementations live in [`crate::cuda::mesh_matrix`] and are tested against these
//! CPU references (`*_matches_reference`).
//!
//! ```
//! use tessera_mesh::mesh_matrix::{spmv, ActionMap, MeshMatrix, StorageForm};
//! // two triangles sharing the edge 1-2
//! let m = MeshMatrix::from_uniform(4, 3, vec![0, 1, 2, 2, 1, 3]).unwrap();
//! assert_eq!(m.form(), StorageForm::RowindOnly);
//! assert_eq!(m.bytes(), 12 * 2); // 12 bytes per triangle
//! assert_eq!(m.value(4), 2); // M(1, 2nd face) = 2: vertex 1 is the face's 2nd summit
//! // barycentres B = 1/3 Mᵀ_(1,2,3)->(1,1,1) P (seed §5.1), one coordinate
//! let x = [0.0, 3.0, 0.0, 3.0];
//! let b = spmv::mtv(&m, &ActionMap::binary().with_scale(1.0 / 3.0), &x, 1).unwrap();
//! assert_eq!(b, vec![1.0, 2.0]);
//! ```

pub mod action;
pub mod bench;
pub mod collapse;
pub mod edges;
pub mod normals;
pub mod rcm;
pub mod shapes;
pub mod slice;
pub mod spgemm;
pub mod spmv;
pub mod subdivide;

pub use action::{ActionMap, Combine, Diagonal, PairMap, PairStencil};
pub use spgemm::Csr;

use crate::{MeshError, Point};
use rayon::prelude::*;
use std::ops::Range;
use std::sync::OnceLock;

/// Marks "no corner / no edge" in index arrays.
pub const NONE: u32 = u32::MAX;

/// Which of the seed's §4 storage forms a [`MeshMatrix`] uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StorageForm {
    /// Only `rowind` (all faces have the same number of vertices): 4 n bytes per n-gon.
    RowindOnly,
    /// `rowind` + `colptr`: 4 n + 4 bytes per n-gon (+ 4 for the final offset).
    RowindColptr,
}

/// The mesh matrix `M` (seed Eq. 1) of a face or cell table: `nv` rows (vertices), one column
/// per face, `M(f_i(k), i) = k`.
///
/// `rowind[colptr[i] + k - 1] = f_i(k)`: the nonzeros of a column are stored in face order, so
/// the value of nonzero `e` of column `i` is `e - colptr[i] + 1` and needs no storage. When
/// every face has `n` vertices `colptr[i] = n i` is implied and not stored
/// ([`StorageForm::RowindOnly`]). Faces may be polygons (n >= 3, vertices distinct within a
/// face) or the cells of a simplex mesh (tetrahedra: n = 4).
///
/// The transpose (vertex -> corners) is derived on request and cached ([`MeshMatrix::transpose`]).
#[derive(Debug)]
pub struct MeshMatrix {
    nv: usize,
    rowind: Vec<u32>,
    colptr: Option<Vec<u32>>,
    /// uniform face size (0 when `colptr` is stored)
    n: u32,
    nf: usize,
    transpose: OnceLock<Transpose>,
    corner_face: OnceLock<Vec<u32>>,
}

impl Clone for MeshMatrix {
    fn clone(&self) -> Self {
        MeshMatrix {
            nv: self.nv,
            rowind: self.rowind.clone(),
            colptr: self.colptr.clone(),
            n: self.n,
            nf: self.nf,
            transpose: OnceLock::new(),
            corner_face: OnceLock::new(),
        }
    }
}

impl PartialEq for MeshMatrix {
    /// Equal as matrices: same size and the same face table (whatever the storage form).
    fn eq(&self, o: &Self) -> bool {
        self.nv == o.nv
            && self.nf == o.nf
            && self.rowind == o.rowind
            && (0..self.nf).all(|i| self.face_range(i) == o.face_range(i))
    }
}

/// The transpose of `M` as vertex -> corners (a corner is a nonzero index `e`, i.e. the
/// position of a vertex in the `rowind` array): row `v` lists the corners of `v` in increasing
/// order, which is increasing face order. This is the "cached transpose" of the gather
/// alternative to the atomic `M v` (seed §7) and the vertex fans of §3.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transpose {
    /// `nv + 1` offsets.
    pub offsets: Vec<u32>,
    /// Corner indices, sorted within each row.
    pub corners: Vec<u32>,
}

impl Transpose {
    /// Corners of vertex `v`.
    pub fn row(&self, v: usize) -> &[u32] {
        &self.corners[self.offsets[v] as usize..self.offsets[v + 1] as usize]
    }
    /// Bytes of the two arrays.
    pub fn bytes(&self) -> usize {
        4 * (self.offsets.len() + self.corners.len())
    }
}

fn check_u32(what: &str, n: usize) -> Result<(), MeshError> {
    if n >= u32::MAX as usize {
        return Err(MeshError::Unsupported(format!(
            "{n} {what} exceed the 32-bit indices of the mesh matrix"
        )));
    }
    Ok(())
}

impl MeshMatrix {
    /// From a face table: `offsets[i]..offsets[i + 1]` delimits face `i` in `verts`. Faces must
    /// have at least 3 distinct vertices (2 for [`Self::from_uniform`] with `n = 2` is not a
    /// mesh), every index must be below `nv`. The storage form is chosen by the data: rowind
    /// only when all faces have the same size.
    pub fn from_faces(nv: usize, offsets: &[u32], verts: &[u32]) -> Result<Self, MeshError> {
        if offsets.is_empty() || offsets[0] != 0 {
            return Err(MeshError::InvalidTopology(
                "face offsets must start with 0".into(),
            ));
        }
        if *offsets.last().unwrap() as usize != verts.len() {
            return Err(MeshError::InvalidTopology(format!(
                "face offsets end at {} but there are {} face vertices",
                offsets.last().unwrap(),
                verts.len()
            )));
        }
        check_u32("face vertices", verts.len())?;
        let nf = offsets.len() - 1;
        let mut n0 = None;
        let mut uniform = true;
        for (i, w) in offsets.windows(2).enumerate() {
            if w[1] < w[0] {
                return Err(MeshError::InvalidTopology(format!(
                    "face offsets decrease at face {i}"
                )));
            }
            let n = w[1] - w[0];
            if n < 3 {
                return Err(MeshError::InvalidTopology(format!(
                    "face {i} has {n} vertices (a face needs at least 3)"
                )));
            }
            match n0 {
                None => n0 = Some(n),
                Some(m) if m != n => uniform = false,
                _ => {}
            }
        }
        let mut m = MeshMatrix {
            nv,
            rowind: verts.to_vec(),
            colptr: None,
            n: 0,
            nf,
            transpose: OnceLock::new(),
            corner_face: OnceLock::new(),
        };
        if uniform && nf > 0 {
            m.n = n0.unwrap();
        } else if uniform {
            m.n = 3;
        } else {
            m.colptr = Some(offsets.to_vec());
        }
        m.check_entries()?;
        Ok(m)
    }

    /// From a table of faces that all have `n` vertices (`verts.len() = n nf`): the
    /// rowind-only form of seed §4. `n = 4` also serves the cells of a tetrahedral mesh.
    pub fn from_uniform(nv: usize, n: usize, verts: Vec<u32>) -> Result<Self, MeshError> {
        if n < 3 {
            return Err(MeshError::InvalidTopology(format!(
                "faces of {n} vertices (a face needs at least 3)"
            )));
        }
        if verts.len() % n != 0 {
            return Err(MeshError::InvalidTopology(format!(
                "{} face vertices are not a multiple of the face size {n}",
                verts.len()
            )));
        }
        check_u32("face vertices", verts.len())?;
        let m = MeshMatrix {
            nv,
            nf: verts.len() / n,
            rowind: verts,
            colptr: None,
            n: n as u32,
            transpose: OnceLock::new(),
            corner_face: OnceLock::new(),
        };
        m.check_entries()?;
        Ok(m)
    }

    /// The cells of a simplex mesh as a mesh matrix (tetrahedra: `n = 4`, triangles: `n = 3`),
    /// the input of the P1 Laplacian assembly of seed §6.
    pub fn from_simplex_cells(mesh: &crate::simplex::SimplexMesh) -> Result<Self, MeshError> {
        Self::from_uniform(
            mesh.num_vertices(),
            mesh.vertices_per_cell(),
            mesh.cell_vertices().to_vec(),
        )
    }

    /// Recover the mesh matrix from an explicit CSC `(colptr, rowind, values)` whose columns
    /// may list their rows in any order (seed §4: "the full face table can be directly
    /// recovered from the matrix by simply scanning the columns of the matrix and permuting
    /// the nonzeros values"): each column's values must be a permutation of `1..=n`.
    pub fn from_csc(
        nv: usize,
        colptr: &[u32],
        rowind: &[u32],
        values: &[u32],
    ) -> Result<Self, MeshError> {
        if rowind.len() != values.len() {
            return Err(MeshError::InvalidTopology(format!(
                "{} row indices but {} values",
                rowind.len(),
                values.len()
            )));
        }
        if colptr.is_empty() || *colptr.last().unwrap() as usize != rowind.len() {
            return Err(MeshError::InvalidTopology(
                "colptr does not end at the number of nonzeros".into(),
            ));
        }
        let mut verts = vec![NONE; rowind.len()];
        for (i, w) in colptr.windows(2).enumerate() {
            if w[1] < w[0] {
                return Err(MeshError::InvalidTopology(format!(
                    "colptr decreases at column {i}"
                )));
            }
            let (s, n) = (w[0] as usize, (w[1] - w[0]) as usize);
            for e in s..s + n {
                let k = values[e] as usize;
                if k == 0 || k > n || verts[s + k - 1] != NONE {
                    return Err(MeshError::InvalidTopology(format!(
                        "column {i}: the values are not a permutation of 1..={n} (value {k})"
                    )));
                }
                verts[s + k - 1] = rowind[e];
            }
        }
        Self::from_faces(nv, colptr, &verts)
    }

    fn check_entries(&self) -> Result<(), MeshError> {
        let nv = self.nv;
        if let Some(e) = self.rowind.par_iter().position_first(|&v| v as usize >= nv) {
            return Err(MeshError::IndexOutOfRange {
                what: "vertex",
                index: self.rowind[e] as u64,
                len: nv,
            });
        }
        // distinct vertices within a face: M(f_i(k), i) = k has one value per entry
        let bad = (0..self.nf)
            .into_par_iter()
            .with_min_len(4096)
            .find_first(|&i| {
                let f = self.face(i);
                (1..f.len()).any(|a| f[..a].contains(&f[a]))
            });
        if let Some(i) = bad {
            return Err(MeshError::InvalidTopology(format!(
                "face {i} lists a vertex twice ({:?})",
                self.face(i)
            )));
        }
        Ok(())
    }

    /// Number of rows `nv` (vertices).
    pub fn num_vertices(&self) -> usize {
        self.nv
    }
    /// Number of columns `nf` (faces or cells).
    pub fn num_faces(&self) -> usize {
        self.nf
    }
    /// Number of nonzeros (corners).
    pub fn nnz(&self) -> usize {
        self.rowind.len()
    }
    /// `Some(n)` when every face has `n` vertices (rowind-only form).
    pub fn uniform_size(&self) -> Option<usize> {
        (self.colptr.is_none()).then_some(self.n as usize)
    }
    /// The largest face size.
    pub fn max_face_size(&self) -> usize {
        match &self.colptr {
            None => self.n as usize,
            Some(c) => c
                .windows(2)
                .map(|w| (w[1] - w[0]) as usize)
                .max()
                .unwrap_or(0),
        }
    }
    /// The storage form (seed §4).
    pub fn form(&self) -> StorageForm {
        if self.colptr.is_some() {
            StorageForm::RowindColptr
        } else {
            StorageForm::RowindOnly
        }
    }
    /// `rowind`: face vertices in face order, face after face.
    pub fn rowind(&self) -> &[u32] {
        &self.rowind
    }
    /// `colptr` when stored.
    pub fn colptr(&self) -> Option<&[u32]> {
        self.colptr.as_deref()
    }
    /// Column offsets, stored or implied (`nf + 1` entries).
    pub fn offsets(&self) -> Vec<u32> {
        match &self.colptr {
            Some(c) => c.clone(),
            None => (0..=self.nf as u32).map(|i| i * self.n).collect(),
        }
    }
    /// The corners (nonzero indices) of face `i`.
    #[inline]
    pub fn face_range(&self, i: usize) -> Range<usize> {
        match &self.colptr {
            Some(c) => c[i] as usize..c[i + 1] as usize,
            None => {
                let n = self.n as usize;
                i * n..(i + 1) * n
            }
        }
    }
    /// The vertices of face `i` in order.
    #[inline]
    pub fn face(&self, i: usize) -> &[u32] {
        &self.rowind[self.face_range(i)]
    }
    /// The face of corner `c`.
    #[inline]
    pub fn corner_face(&self, c: usize) -> usize {
        match &self.colptr {
            None => c / self.n as usize,
            Some(_) => self.corner_faces()[c] as usize,
        }
    }
    /// Face of every corner (built once for mixed meshes, cached).
    pub fn corner_faces(&self) -> &[u32] {
        crate::relations::cached_vec(&self.corner_face, || {
            let mut out = vec![0u32; self.rowind.len()];
            let offs = self.offsets();
            out.par_chunks_mut(1 << 14)
                .enumerate()
                .for_each(|(chunk, o)| {
                    let base = chunk << 14;
                    // first face whose range holds corner `base`
                    let mut f = offs.partition_point(|&x| x as usize <= base) - 1;
                    for (i, slot) in o.iter_mut().enumerate() {
                        let c = base + i;
                        while offs[f + 1] as usize <= c {
                            f += 1;
                        }
                        *slot = f as u32;
                    }
                });
            out
        })
    }
    /// The value `k` (1-based position in its face) of nonzero `e` (seed Eq. 1).
    #[inline]
    pub fn value(&self, e: usize) -> u32 {
        (e - self.face_range(self.corner_face(e)).start) as u32 + 1
    }
    /// The corner after `c` in its face (cyclically).
    #[inline]
    pub fn next(&self, c: usize) -> usize {
        let r = self.face_range(self.corner_face(c));
        if c + 1 == r.end {
            r.start
        } else {
            c + 1
        }
    }
    /// The corner before `c` in its face (cyclically).
    #[inline]
    pub fn prev(&self, c: usize) -> usize {
        let r = self.face_range(self.corner_face(c));
        if c == r.start {
            r.end - 1
        } else {
            c - 1
        }
    }

    /// Bytes of the stored arrays (`rowind`, and `colptr` when stored): the memory of the form
    /// (seed §4: 12 bytes per triangle rowind-only, 16 with colptr).
    pub fn bytes(&self) -> usize {
        4 * self.rowind.len() + self.colptr.as_ref().map_or(0, |c| 4 * c.len())
    }
    /// Bytes per face of the stored form, without the final `colptr` entry.
    pub fn bytes_per_face(&self) -> f64 {
        if self.nf == 0 {
            return 0.0;
        }
        let extra = if self.colptr.is_some() { 4 } else { 0 };
        (self.bytes() - extra) as f64 / self.nf as f64
    }
    /// Bytes of the cached derived data (transpose, corner faces).
    pub fn cached_bytes(&self) -> usize {
        self.transpose.get().map_or(0, |t| t.bytes())
            + self.corner_face.get().map_or(0, |c| 4 * c.len())
    }

    /// The same matrix with `colptr` stored even when the faces are uniform (the
    /// rowind + colptr form of seed §4, for comparing the forms).
    pub fn with_colptr(&self) -> MeshMatrix {
        MeshMatrix {
            nv: self.nv,
            rowind: self.rowind.clone(),
            colptr: Some(self.offsets()),
            n: 0,
            nf: self.nf,
            transpose: OnceLock::new(),
            corner_face: OnceLock::new(),
        }
    }

    /// The face table `(offsets, vertices)` (recovered by scanning the columns).
    pub fn to_face_table(&self) -> (Vec<u32>, Vec<u32>) {
        (self.offsets(), self.rowind.clone())
    }

    /// The explicit CSC of `M` with rows sorted within each column and the values
    /// `k` stored (the "reference CSC" of seed §4 and Fig. 3: 28 bytes per triangle with
    /// 32-bit values). Returns `(colptr, rowind, values)`.
    pub fn to_csc(&self) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
        let colptr = self.offsets();
        let mut rowind = self.rowind.clone();
        let mut values = vec![0u32; rowind.len()];
        let mut buf: Vec<(u32, u32)> = Vec::new();
        for i in 0..self.nf {
            let r = self.face_range(i);
            buf.clear();
            buf.extend(
                self.rowind[r.clone()]
                    .iter()
                    .enumerate()
                    .map(|(k, &v)| (v, k as u32 + 1)),
            );
            buf.sort_unstable();
            for (j, &(v, k)) in buf.iter().enumerate() {
                rowind[r.start + j] = v;
                values[r.start + j] = k;
            }
        }
        (colptr, rowind, values)
    }

    /// `M` as an explicit `nv × nf` CSR with the values `k` (vertex rows, faces sorted): the
    /// matrix a general sparse library multiplies (`M v` with cuSPARSE's CSR).
    pub fn to_csr(&self) -> Csr {
        self.explicit_csr(|k| k as f64)
    }
    /// The binary form `M̄` (every nonzero 1) as an explicit `nv × nf` CSR.
    pub fn binary(&self) -> Csr {
        self.explicit_csr(|_| 1.0)
    }
    fn explicit_csr(&self, val: impl Fn(u32) -> f64 + Sync) -> Csr {
        let t = self.transpose();
        let colind: Vec<u32> = t
            .corners
            .par_iter()
            .with_min_len(4096)
            .map(|&c| self.corner_face(c as usize) as u32)
            .collect();
        let values = t
            .corners
            .par_iter()
            .with_min_len(4096)
            .map(|&c| val(self.value(c as usize)))
            .collect();
        Csr {
            nrows: self.nv,
            ncols: self.nf,
            rowptr: t.offsets.clone(),
            colind,
            values,
        }
    }

    /// The transpose vertex -> corners, computed once (count -> scan -> fill; rows in
    /// increasing corner order) and cached.
    pub fn transpose(&self) -> &Transpose {
        crate::relations::cached(&self.transpose, || {
            let mut counts = vec![0u32; self.nv];
            for &v in &self.rowind {
                counts[v as usize] += 1;
            }
            let offsets = tessera_core::scan::offsets_from_counts(tessera_core::Par::Seq, &counts)
                .expect("nnz fits in u32 (checked at construction)");
            let mut cursor: Vec<u32> = offsets[..self.nv].to_vec();
            let mut corners = vec![0u32; self.rowind.len()];
            for (c, &v) in self.rowind.iter().enumerate() {
                let slot = &mut cursor[v as usize];
                corners[*slot as usize] = c as u32;
                *slot += 1;
            }
            Transpose { offsets, corners }
        })
    }

    /// Drop the cached transpose and corner faces.
    pub fn purge_caches(&mut self) {
        self.transpose = OnceLock::new();
        self.corner_face = OnceLock::new();
    }

    /// Number of faces each vertex belongs to (the diagonal of `M̄ M̄ᵀ`).
    pub fn vertex_face_counts(&self) -> Vec<u32> {
        let t = self.transpose();
        t.offsets.windows(2).map(|w| w[1] - w[0]).collect()
    }

    /// Renumber the vertices: `new_of_old[v]` is the new index of vertex `v` (a permutation of
    /// `0..nv`). Face order and orientation are kept.
    pub fn renumber_vertices(&self, new_of_old: &[u32]) -> Result<MeshMatrix, MeshError> {
        if new_of_old.len() != self.nv {
            return Err(MeshError::InvalidTopology(format!(
                "a vertex permutation of length {} for {} vertices",
                new_of_old.len(),
                self.nv
            )));
        }
        let rowind = self
            .rowind
            .par_iter()
            .with_min_len(4096)
            .map(|&v| new_of_old[v as usize])
            .collect();
        Ok(MeshMatrix {
            nv: self.nv,
            rowind,
            colptr: self.colptr.clone(),
            n: self.n,
            nf: self.nf,
            transpose: OnceLock::new(),
            corner_face: OnceLock::new(),
        })
    }

    /// Reorder the faces (columns): face `j` of the result is face `order[j]` of `self`.
    pub fn permute_faces(&self, order: &[u32]) -> Result<MeshMatrix, MeshError> {
        if order.len() != self.nf {
            return Err(MeshError::InvalidTopology(format!(
                "a face order of length {} for {} faces",
                order.len(),
                self.nf
            )));
        }
        let mut offsets = Vec::with_capacity(self.nf + 1);
        let mut verts = Vec::with_capacity(self.rowind.len());
        offsets.push(0u32);
        for &f in order {
            verts.extend_from_slice(self.face(f as usize));
            offsets.push(verts.len() as u32);
        }
        Self::from_faces(self.nv, &offsets, &verts)
    }
}

/// A polygon surface (or any face table) with vertex positions: the mesh matrix `M` and the
/// array `P` of seed §3 (positions are kept apart from the connectivity).
#[derive(Clone, Debug, PartialEq)]
pub struct PolygonMesh {
    pub positions: Vec<Point>,
    pub matrix: MeshMatrix,
}

impl PolygonMesh {
    /// From positions and a face table (see [`MeshMatrix::from_faces`]); positions must be
    /// finite.
    pub fn new(positions: Vec<Point>, offsets: &[u32], verts: &[u32]) -> Result<Self, MeshError> {
        let matrix = MeshMatrix::from_faces(positions.len(), offsets, verts)?;
        Self::from_matrix(positions, matrix)
    }
    /// From positions and a mesh matrix with as many rows.
    pub fn from_matrix(positions: Vec<Point>, matrix: MeshMatrix) -> Result<Self, MeshError> {
        if matrix.num_vertices() != positions.len() {
            return Err(MeshError::InvalidTopology(format!(
                "{} positions for a mesh matrix of {} rows",
                positions.len(),
                matrix.num_vertices()
            )));
        }
        if let Some(v) = positions
            .iter()
            .position(|p| !p.iter().all(|x| x.is_finite()))
        {
            return Err(MeshError::NonFinitePosition { vertex: v });
        }
        Ok(PolygonMesh { positions, matrix })
    }
    /// The boundary surface of a volumetric mesh ([`crate::boundary::Boundary::surface`]).
    pub fn from_surface(s: &crate::boundary::SurfaceMesh) -> Result<Self, MeshError> {
        Self::new(s.positions.clone(), &s.polygon_offsets, &s.polygon_vertices)
    }
    pub fn num_vertices(&self) -> usize {
        self.positions.len()
    }
    pub fn num_faces(&self) -> usize {
        self.matrix.num_faces()
    }
    /// Number of distinct undirected edges.
    pub fn num_edges(&self) -> usize {
        let m = &self.matrix;
        let mut keys: Vec<u64> = (0..m.nnz())
            .into_par_iter()
            .with_min_len(4096)
            .map(|c| {
                let (a, b) = (m.rowind[c], m.rowind[m.next(c)]);
                ((a.min(b) as u64) << 32) | a.max(b) as u64
            })
            .collect();
        keys.par_sort_unstable();
        keys.dedup();
        keys.len()
    }
    /// Euler characteristic `V - E + F` over the vertices used by faces (unused vertices are
    /// not counted).
    pub fn euler_characteristic(&self) -> i64 {
        let used = self.matrix.vertex_face_counts();
        let v = used.iter().filter(|&&c| c > 0).count() as i64;
        v - self.num_edges() as i64 + self.num_faces() as i64
    }
    /// Axis-aligned bounding box `(min, max)`; zeros when empty.
    pub fn bounds(&self) -> (Point, Point) {
        if self.positions.is_empty() {
            return ([0.0; 3], [0.0; 3]);
        }
        let mut lo = [f64::INFINITY; 3];
        let mut hi = [f64::NEG_INFINITY; 3];
        for p in &self.positions {
            for k in 0..3 {
                lo[k] = lo[k].min(p[k]);
                hi[k] = hi[k].max(p[k]);
            }
        }
        (lo, hi)
    }
    /// Length of the bounding-box diagonal.
    pub fn extent(&self) -> f64 {
        let (lo, hi) = self.bounds();
        ((hi[0] - lo[0]).powi(2) + (hi[1] - lo[1]).powi(2) + (hi[2] - lo[2]).powi(2)).sqrt()
    }
    /// Renumber vertices (`new_of_old`, a permutation), moving the positions along.
    pub fn renumber_vertices(&self, new_of_old: &[u32]) -> Result<PolygonMesh, MeshError> {
        let matrix = self.matrix.renumber_vertices(new_of_old)?;
        let mut positions = vec![[0.0; 3]; self.positions.len()];
        let mut seen = vec![false; self.positions.len()];
        for (old, &new) in new_of_old.iter().enumerate() {
            let n = new as usize;
            if n >= positions.len() || seen[n] {
                return Err(MeshError::InvalidTopology(
                    "the vertex renumbering is not a permutation".into(),
                ));
            }
            seen[n] = true;
            positions[n] = self.positions[old];
        }
        Ok(PolygonMesh { positions, matrix })
    }
    /// Drop vertices that no face uses (faces are renumbered; the kept vertices keep their order).
    pub fn remove_unused_vertices(&self) -> PolygonMesh {
        let counts = self.matrix.vertex_face_counts();
        let mut new_index = vec![NONE; counts.len()];
        let mut positions = Vec::with_capacity(counts.len());
        for (v, &c) in counts.iter().enumerate() {
            if c > 0 {
                new_index[v] = positions.len() as u32;
                positions.push(self.positions[v]);
            }
        }
        let rowind: Vec<u32> = self
            .matrix
            .rowind
            .iter()
            .map(|&v| new_index[v as usize])
            .collect();
        let matrix = MeshMatrix {
            nv: positions.len(),
            rowind,
            colptr: self.matrix.colptr.clone(),
            n: self.matrix.n,
            nf: self.matrix.nf,
            transpose: OnceLock::new(),
            corner_face: OnceLock::new(),
        };
        PolygonMesh { positions, matrix }
    }
}
