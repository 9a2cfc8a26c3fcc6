//! Action maps (seed 004 §5): the multiplication by a nonzero of the mesh matrix is replaced
//! by a lookup `Q(k)` of its value `k`.
//!
//! - [`ActionMap`] acts on vectors (SpMV, seed §5.1): "i) a compact stencil which encodes
//!   interaction between face summits, ii) a vector of the same length as the nonzero values of
//!   the matrix which associates values with summits, e.g. angles, iii) a combination of both",
//!   plus weights per face (`Q : (1,2,3)_{f_i} -> (w_i, w_i, w_i)`). The entry `e` (value `k`)
//!   of face `i` acts as `stencil[k-1] · entry_values[e] · face_weights[i] · scale`.
//! - [`PairMap`] acts on the collisions of a mapped SpGEMM `C = M Q Mᵀ` (seed §5.2,
//!   Algorithm 2): the collision of value `a` (first factor) with value `b` (second factor)
//!   contributes `Q(a, b)`, optionally times a value per face entry (cotangents, seed §6).
//!   `Q` is a table (uniform face size) or a combination of the circulant powers `Q_n^p`
//!   (seed Eq. 5), which serves faces of any size.

/// The stencil of an [`ActionMap`]: `Q(k)` for the 1-based entry value `k`.
#[derive(Clone, Debug, PartialEq)]
pub enum Stencil {
    /// `Q(k) = 1` for every `k`: the binary form `M̄` (`(1,2,3) -> (1,1,1)`).
    Ones,
    /// `Q(k) = table[k - 1]` (0 beyond the table): e.g. `(-1, 1, 0)` for the edge vectors
    /// `P1P2` of seed Eq. 2.
    Table(Vec<f64>),
}

/// An action map on the entries of `M` for the mapped SpMV (seed §5.1, Algorithm 1).
#[derive(Clone, Debug, PartialEq)]
pub struct ActionMap<'a> {
    pub stencil: Stencil,
    /// One value per nonzero of `M` (same order as `rowind`).
    pub entry_values: Option<&'a [f64]>,
    /// One weight per face (column).
    pub face_weights: Option<&'a [f64]>,
    /// A constant factor (e.g. 1/3 for barycentres).
    pub scale: f64,
}

impl<'a> ActionMap<'a> {
    /// `(1, 2, ..., n) -> (1, 1, ..., 1)`: multiply by `M̄`.
    pub fn binary() -> Self {
        ActionMap {
            stencil: Stencil::Ones,
            entry_values: None,
            face_weights: None,
            scale: 1.0,
        }
    }
    /// `k -> table[k - 1]`.
    pub fn stencil(table: &[f64]) -> Self {
        ActionMap {
            stencil: Stencil::Table(table.to_vec()),
            ..Self::binary()
        }
    }
    /// `M` itself: `k -> k`.
    pub fn identity(max_face_size: usize) -> Self {
        Self::stencil(&(1..=max_face_size).map(|k| k as f64).collect::<Vec<_>>())
    }
    /// Multiply by a value per nonzero.
    pub fn with_entry_values(mut self, v: &'a [f64]) -> Self {
        self.entry_values = Some(v);
        self
    }
    /// Multiply by a weight per face.
    pub fn with_face_weights(mut self, w: &'a [f64]) -> Self {
        self.face_weights = Some(w);
        self
    }
    /// Multiply by a constant.
    pub fn with_scale(mut self, s: f64) -> Self {
        self.scale = s;
        self
    }
    /// The stencil value of the 1-based entry value `k`.
    #[inline]
    pub fn q(&self, k: usize) -> f64 {
        match &self.stencil {
            Stencil::Ones => 1.0,
            Stencil::Table(t) => t.get(k - 1).copied().unwrap_or(0.0),
        }
    }
    /// The action on nonzero `e` (value `k`) of face `face`.
    #[inline]
    pub fn value(&self, e: usize, k: usize, face: usize) -> f64 {
        let mut v = self.q(k) * self.scale;
        if let Some(ev) = self.entry_values {
            v *= ev[e];
        }
        if let Some(fw) = self.face_weights {
            v *= fw[face];
        }
        v
    }
    /// The stencil as a table of `len` entries (for the GPU).
    pub fn table(&self, len: usize) -> Vec<f64> {
        (1..=len).map(|k| self.q(k) * self.scale).collect()
    }
    /// Check the vector lengths against a matrix with `nnz` nonzeros and `nf` faces.
    pub fn check(&self, nnz: usize, nf: usize) -> Result<(), crate::MeshError> {
        if let Some(v) = self.entry_values {
            if v.len() != nnz {
                return Err(crate::MeshError::InvalidTopology(format!(
                    "action map: {} entry values for {nnz} nonzeros",
                    v.len()
                )));
            }
        }
        if let Some(w) = self.face_weights {
            if w.len() != nf {
                return Err(crate::MeshError::InvalidTopology(format!(
                    "action map: {} face weights for {nf} faces",
                    w.len()
                )));
            }
        }
        Ok(())
    }
}

/// The map `Q` of a mapped SpGEMM: `Q(a, b)` for entry values `a` (row factor) and `b`.
#[derive(Clone, Debug, PartialEq)]
pub enum PairStencil {
    /// `Q(a, b) = 1`: `M̄ M̄ᵀ`, the generalized vertex adjacency (seed §5.2).
    Ones,
    /// A table for faces of `n` vertices: `Q(a, b) = q[(a-1) n + (b-1)]`.
    Table { n: usize, q: Vec<f64> },
    /// `Σ_t coef_t Q_n^{shift_t}` for faces of any size `n` (seed Eq. 5: `Q_n` is the cyclic
    /// permutation `Q_n(a, a+1) = 1`, so `Q_n^p(a, b) = 1` when `b ≡ a + p (mod n)`). A
    /// negative shift counts from `n`: `-1` is `Q_n^{n-1}`, the predecessor.
    Circulant(Vec<(i32, f64)>),
}

/// How the collisions of one output entry are combined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Combine {
    /// Added (the ordinary product).
    Sum,
    /// The logical OR of seed §5.2 (`A ∨ Aᵀ`): the entry takes the value of its first
    /// contributing collision (all collisions of the maps used with it have one value).
    Or,
}

/// How the diagonal of the product is formed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Diagonal {
    /// From the map, like every other entry.
    FromMap,
    /// Minus the sum of the row's off-diagonal entries (Laplacians: zero row sums; seed §6:
    /// "Σ_i infers the sum of non-diagonal entries in row i multiplied by -1"). Collisions of
    /// a vertex with itself are not evaluated.
    NegRowSum,
}

/// Values per face entry pair for a [`PairMap`] (seed §6: "the entry from the action map can
/// be simply multiplied by the corresponding cotangent value using the index obtained from the
/// mesh matrix"): `values[f m + index[(a-1) n + (b-1)]]` multiplies collision `(a, b)` of face
/// `f`; an index of 255 means no value (factor 1). Faces must have `n` vertices.
#[derive(Clone, Debug, PartialEq)]
pub struct PairValues {
    pub n: usize,
    /// Values per face.
    pub m: usize,
    pub index: Vec<u8>,
    pub values: Vec<f64>,
}

/// An action map on the collisions of a mapped SpGEMM (seed §5.2, Algorithm 2).
#[derive(Clone, Debug, PartialEq)]
pub struct PairMap {
    pub stencil: PairStencil,
    pub values: Option<PairValues>,
    pub diagonal: Diagonal,
    pub combine: Combine,
}

/// The edges of a tetrahedron in local vertex pairs (the order of the 6 values per cell of
/// the P1 Laplacian).
pub const TET_EDGES: [[usize; 2]; 6] = [[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]];

impl PairMap {
    fn new(stencil: PairStencil) -> Self {
        PairMap {
            stencil,
            values: None,
            diagonal: Diagonal::FromMap,
            combine: Combine::Sum,
        }
    }
    /// `M̄ M̄ᵀ`: entry `(i, j)` counts the faces shared by vertices `i` and `j` (seed §5.2).
    pub fn generalized_adjacency() -> Self {
        Self::new(PairStencil::Ones)
    }
    /// `Q_n`: the oriented adjacency (an entry `(i, j)` per face in which `j` follows `i`).
    pub fn oriented_adjacency() -> Self {
        Self::new(PairStencil::Circulant(vec![(1, 1.0)]))
    }
    /// `Q_n - Q_n^{n-1}`: the boundary adjacency; nonzero entries are the boundary edges,
    /// `+1` along the counter-clockwise boundary loops (seed §5.2).
    pub fn boundary() -> Self {
        Self::new(PairStencil::Circulant(vec![(1, 1.0), (-1, -1.0)]))
    }
    /// `Q_4^2`: the diagonally opposite vertices of quads (seed §5.2).
    pub fn quad_diagonals() -> Self {
        let mut q = vec![0.0; 16];
        for a in 0..4 {
            q[a * 4 + (a + 2) % 4] = 1.0;
        }
        Self::new(PairStencil::Table { n: 4, q })
    }
    /// The uniform (graph) Laplacian `D - (A ∨ Aᵀ)` (seed §5.2, `Q = Q_3^0 - (Q_3^2 + Q_3)`),
    /// for faces of any size: `-1` for each pair of vertices joined by a face edge, the degree
    /// on the diagonal.
    pub fn graph_laplacian() -> Self {
        PairMap {
            stencil: PairStencil::Circulant(vec![(1, -1.0), (-1, -1.0)]),
            values: None,
            diagonal: Diagonal::NegRowSum,
            combine: Combine::Or,
        }
    }
    /// `Q_tet = Q_4^4 - (Q_4^3 + Q_4^2 + Q_4)` (seed Eq. 6): `1` on the diagonal, `-1` off it.
    pub fn q_tet() -> Self {
        let mut q = vec![-1.0; 16];
        for a in 0..4 {
            q[a * 4 + a] = 1.0;
        }
        Self::new(PairStencil::Table { n: 4, q })
    }
    /// With values per face entry pair.
    pub fn with_values(mut self, v: PairValues) -> Self {
        self.values = Some(v);
        self
    }
    /// With the diagonal formed as minus the off-diagonal row sum.
    pub fn with_neg_row_sum(mut self) -> Self {
        self.diagonal = Diagonal::NegRowSum;
        self
    }

    /// `Q(a, b)` (1-based values) for a face of `n` vertices.
    #[inline]
    pub fn q(&self, n: usize, a: usize, b: usize) -> f64 {
        match &self.stencil {
            PairStencil::Ones => 1.0,
            PairStencil::Table { n: tn, q } => {
                if *tn == n {
                    q[(a - 1) * n + (b - 1)]
                } else {
                    0.0
                }
            }
            PairStencil::Circulant(terms) => {
                let d = (b + n - a) % n;
                let mut s = 0.0;
                for &(shift, coef) in terms {
                    if shift.rem_euclid(n as i32) as usize == d {
                        s += coef;
                    }
                }
                s
            }
        }
    }
    /// The contribution of the collision `(a, b)` in face `f` (1-based values).
    #[inline]
    pub fn value(&self, f: usize, n: usize, a: usize, b: usize) -> f64 {
        let q = self.q(n, a, b);
        match &self.values {
            Some(pv) if q != 0.0 => {
                let i = pv.index[(a - 1) * pv.n + (b - 1)];
                if i == 255 {
                    q
                } else {
                    q * pv.values[f * pv.m + i as usize]
                }
            }
            _ => q,
        }
    }
    /// The map as a dense table for faces of `n` vertices (for the GPU).
    pub fn table(&self, n: usize) -> Vec<f64> {
        let mut t = vec![0.0; n * n];
        for a in 1..=n {
            for b in 1..=n {
                t[(a - 1) * n + (b - 1)] = self.q(n, a, b);
            }
        }
        t
    }
    /// Check the map against a mesh matrix.
    pub fn check(&self, m: &super::MeshMatrix) -> Result<(), crate::MeshError> {
        let err = |s: String| Err(crate::MeshError::InvalidTopology(s));
        if let PairStencil::Table { n, q } = &self.stencil {
            if q.len() != n * n {
                return err(format!("a {n} x {n} action map with {} entries", q.len()));
            }
            if m.uniform_size() != Some(*n) && m.num_faces() > 0 {
                return err(format!(
                    "a {n} x {n} action map needs faces of {n} vertices (this mesh has {})",
                    match m.uniform_size() {
                        Some(k) => format!("faces of {k}"),
                        None => "faces of several sizes".into(),
                    }
                ));
            }
        }
        if let Some(pv) = &self.values {
            if m.uniform_size() != Some(pv.n) && m.num_faces() > 0 {
                return err(format!(
                    "values per face entry for faces of {} vertices on a mesh with other faces",
                    pv.n
                ));
            }
            if pv.index.len() != pv.n * pv.n || pv.values.len() != pv.m * m.num_faces() {
                return err(format!(
                    "values per face entry: index of {} (want {}), {} values (want {} x {})",
                    pv.index.len(),
                    pv.n * pv.n,
                    pv.values.len(),
                    m.num_faces(),
                    pv.m
                ));
            }
            if pv.index.iter().any(|&i| i != 255 && i as usize >= pv.m) {
                return err("values per face entry: an index beyond the values of a face".into());
            }
        }
        Ok(())
    }
}
