//! Direct sparse Cholesky reference solvers on the CPU, for tests and small problems (the
//! iterative solver of the dissertation's §4.1 is [`crate::pcg::pcg`]).
//!
//! Dirichlet constraints are applied by **elimination**: with free DOFs `f` and constrained
//! DOFs `c` (values `z`), solve `K_ff u_f = b_f − K_fc z` and set `u_c = z`.
//!
//! - [`solve_constrained`] (what `method = "cholesky"` runs): faer's sparse `L Lᵀ`
//!   (`SparseColMat::sp_cholesky`, fill-reducing AMD ordering, simplicial or supernodal
//!   by faer's heuristic) on the lower triangle of `K_ff`.
//! - [`solve_constrained_envelope`]: an independent, self-contained **envelope (profile)
//!   Cholesky** after a reverse Cuthill-McKee ordering (row `i` of `L` stored densely from
//!   its first non-zero column to the diagonal). The tests check the two against each other.
//!
//! Both report a non-positive pivot as [`SolveError::NotPositiveDefinite`] (an
//! under-constrained system).

use tessera_sparse::binbcsr::{BinBcsr, Csr};

use crate::constraints::Constraints;
use crate::error::SolveError;

/// Reverse Cuthill-McKee ordering of a symmetric graph given as adjacency lists (CSR).
/// Returns `perm` with `perm[new] = old`.
pub fn reverse_cuthill_mckee(ptr: &[usize], adj: &[usize]) -> Vec<usize> {
    let n = ptr.len() - 1;
    let deg = |i: usize| ptr[i + 1] - ptr[i];
    let mut order = Vec::with_capacity(n);
    let mut seen = vec![false; n];
    let bfs = |start: usize, seen: &mut Vec<bool>, out: &mut Vec<usize>| -> usize {
        // returns the last node visited (deepest level), appending in Cuthill-McKee order
        let s0 = out.len();
        seen[start] = true;
        out.push(start);
        let mut head = s0;
        let mut nb = Vec::new();
        while head < out.len() {
            let v = out[head];
            head += 1;
            nb.clear();
            nb.extend(
                adj[ptr[v]..ptr[v + 1]]
                    .iter()
                    .copied()
                    .filter(|&w| !seen[w]),
            );
            nb.sort_unstable_by_key(|&w| (deg(w), w));
            for &w in &nb {
                if !seen[w] {
                    seen[w] = true;
                    out.push(w);
                }
            }
        }
        *out.last().unwrap()
    };
    for s in 0..n {
        if seen[s] {
            continue;
        }
        // pseudo-peripheral start: the last node of a BFS from `s`
        let mut tmp = Vec::new();
        let mut seen2 = seen.clone();
        let far = bfs(s, &mut seen2, &mut tmp);
        bfs(far, &mut seen, &mut order);
    }
    order.reverse();
    order
}

/// `K_ff u_f = b_f − K_fc z` of [`solve_constrained`] and [`solve_constrained_envelope`]:
/// the free DOFs, their right-hand side, and row access to `K_ff` in free numbering.
struct Reduced {
    csr: Csr<f64>,
    fixed: Vec<bool>,
    /// the solution so far: prescribed values, zeros on the free DOFs
    u: Vec<f64>,
    /// free DOFs in ascending order, and their index among the free DOFs (`usize::MAX` if fixed)
    free: Vec<usize>,
    fidx: Vec<usize>,
    rhs: Vec<f64>,
}

impl Reduced {
    /// Dimension and constraint checks, then the reduced right-hand side.
    fn new(k: &BinBcsr<f64>, b: &[f64], cons: &Constraints) -> Result<Self, SolveError> {
        let csr = k.to_csr();
        let n = csr.nrows;
        for len in [b.len(), cons.fixed.len(), cons.values.len()] {
            if len != n {
                return Err(SolveError::Dimension {
                    expected: n,
                    found: len,
                });
            }
        }
        if cons.num_fixed() == 0 {
            return Err(SolveError::Unconstrained);
        }
        let u: Vec<f64> = (0..n)
            .map(|i| if cons.fixed[i] { cons.values[i] } else { 0.0 })
            .collect();
        let free: Vec<usize> = (0..n).filter(|&i| !cons.fixed[i]).collect();
        let mut fidx = vec![usize::MAX; n];
        for (f, &i) in free.iter().enumerate() {
            fidx[i] = f;
        }
        let mut rhs: Vec<f64> = free.iter().map(|&r| b[r]).collect();
        for (f, &r) in free.iter().enumerate() {
            for p in csr.row_ptr[r] as usize..csr.row_ptr[r + 1] as usize {
                let c = csr.col_idx[p] as usize;
                if cons.fixed[c] {
                    rhs[f] -= csr.values[p] * cons.values[c];
                }
            }
        }
        Ok(Reduced {
            csr,
            fixed: cons.fixed.clone(),
            u,
            free,
            fidx,
            rhs,
        })
    }

    fn num_free(&self) -> usize {
        self.free.len()
    }

    /// Row `f` of `K_ff`: `(free column, value)`, stored zeros off the diagonal left out.
    fn row(&self, f: usize) -> impl Iterator<Item = (usize, f64)> + '_ {
        let r = self.free[f];
        let (a, b) = (
            self.csr.row_ptr[r] as usize,
            self.csr.row_ptr[r + 1] as usize,
        );
        (a..b).filter_map(move |p| {
            let c = self.csr.col_idx[p] as usize;
            let v = self.csr.values[p];
            (!self.fixed[c] && (v != 0.0 || c == r)).then(|| (self.fidx[c], v))
        })
    }

    /// The full solution from the free values `x_f` (in free numbering).
    fn finish(mut self, x: impl Iterator<Item = f64>) -> Result<Vec<f64>, SolveError> {
        for (f, v) in x.enumerate() {
            if !v.is_finite() {
                return Err(SolveError::NonFinite {
                    what: "Cholesky solution",
                    iteration: 0,
                });
            }
            self.u[self.free[f]] = v;
        }
        Ok(self.u)
    }
}

/// Solve `K u = b` with constraints by elimination and faer's sparse Cholesky. Errors:
/// dimension mismatches, [`SolveError::Unconstrained`] without constraints, and
/// [`SolveError::NotPositiveDefinite`] when `K_ff` is singular (under-constrained).
pub fn solve_constrained(
    k: &BinBcsr<f64>,
    b: &[f64],
    cons: &Constraints,
) -> Result<Vec<f64>, SolveError> {
    use faer::linalg::solvers::Solve;
    use faer::sparse::{SparseColMat, Triplet};
    let red = Reduced::new(k, b, cons)?;
    let nf = red.num_free();
    if nf == 0 {
        return red.finish(std::iter::empty());
    }
    // lower triangle of K_ff (row >= column)
    let trip: Vec<Triplet<usize, usize, f64>> = (0..nf)
        .flat_map(|f| {
            red.row(f)
                .filter(move |&(j, _)| j <= f)
                .map(move |(j, v)| Triplet::new(f, j, v))
        })
        .collect();
    let a = SparseColMat::<usize, f64>::try_new_from_triplets(nf, nf, &trip).map_err(|_| {
        SolveError::NonFinite {
            what: "sparse matrix construction (faer)",
            iteration: 0,
        }
    })?;
    drop(trip);
    let llt = a.sp_cholesky(faer::Side::Lower).map_err(|e| match e {
        faer::sparse::linalg::LltError::Numeric(
            faer::linalg::cholesky::llt::factor::LltError::NonPositivePivot { index },
        ) => SolveError::NotPositiveDefinite { index },
        _ => SolveError::NotPositiveDefinite { index: 0 },
    })?;
    let x = llt.solve(faer::Mat::from_fn(nf, 1, |i, _| red.rhs[i]));
    // a pivot that is tiny but positive (a numerically singular K_ff) passes the
    // factorization: check the residual of the reduced system instead
    let (mut r2, mut b2) = (0.0f64, 0.0f64);
    for f in 0..nf {
        let ax: f64 = red.row(f).map(|(j, v)| v * x[(j, 0)]).sum();
        r2 += (ax - red.rhs[f]).powi(2);
        b2 += red.rhs[f] * red.rhs[f];
    }
    if !(r2.sqrt() <= 1e-6 * b2.sqrt().max(f64::MIN_POSITIVE)) {
        return Err(SolveError::NotPositiveDefinite { index: 0 });
    }
    red.finish((0..nf).map(|f| x[(f, 0)]))
}

/// Solve `K u = b` with constraints by elimination and the envelope Cholesky (see the
/// module docs); the same errors as [`solve_constrained`].
pub fn solve_constrained_envelope(
    k: &BinBcsr<f64>,
    b: &[f64],
    cons: &Constraints,
) -> Result<Vec<f64>, SolveError> {
    let red = Reduced::new(k, b, cons)?;
    let nf = red.num_free();
    if nf == 0 {
        return red.finish(std::iter::empty());
    }
    // graph of K_ff
    let mut ptr = vec![0usize; nf + 1];
    let mut adj = Vec::new();
    for f in 0..nf {
        adj.extend(red.row(f).filter(|&(j, _)| j != f).map(|(j, _)| j));
        ptr[f + 1] = adj.len();
    }
    let perm = reverse_cuthill_mckee(&ptr, &adj);
    let mut inv = vec![0usize; nf];
    for (new, &old) in perm.iter().enumerate() {
        inv[old] = new;
    }
    // envelope: first column of each (permuted) row
    let mut first: Vec<usize> = (0..nf).collect();
    for old in 0..nf {
        let i = inv[old];
        for &w in &adj[ptr[old]..ptr[old + 1]] {
            let j = inv[w];
            if j < first[i] {
                first[i] = j;
            }
        }
    }
    let mut start = vec![0usize; nf + 1];
    for i in 0..nf {
        start[i + 1] = start[i] + (i - first[i] + 1);
    }
    let mut l = vec![0.0f64; start[nf]];
    for f in 0..nf {
        let i = inv[f];
        for (jf, v) in red.row(f) {
            let j = inv[jf];
            if j <= i {
                l[start[i] + (j - first[i])] += v;
            }
        }
    }
    // factor row by row: L_ij = (A_ij − Σ_k L_ik L_jk) / L_jj, L_ii = sqrt(A_ii − Σ_k L_ik²)
    for i in 0..nf {
        let fi = first[i];
        for j in fi..i {
            let fj = first[j];
            let k0 = fi.max(fj);
            let mut s = l[start[i] + (j - fi)];
            let ri = &l[start[i] + (k0 - fi)..start[i] + (j - fi)];
            let rj = &l[start[j] + (k0 - fj)..start[j] + (j - fj)];
            s -= ri.iter().zip(rj).map(|(a, b)| a * b).sum::<f64>();
            l[start[i] + (j - fi)] = s / l[start[j] + (j - fj)];
        }
        let row = &l[start[i]..start[i] + (i - fi)];
        let d = l[start[i] + (i - fi)] - row.iter().map(|x| x * x).sum::<f64>();
        let scale = l[start[i] + (i - fi)].abs().max(f64::MIN_POSITIVE);
        if !(d > 1e-12 * scale) || !d.is_finite() {
            return Err(SolveError::NotPositiveDefinite { index: i });
        }
        l[start[i] + (i - fi)] = d.sqrt();
    }
    // L y = P b ; Lᵀ x = y
    let mut y: Vec<f64> = (0..nf).map(|i| red.rhs[perm[i]]).collect();
    for i in 0..nf {
        let fi = first[i];
        let row = &l[start[i]..start[i] + (i - fi)];
        let s: f64 = row.iter().zip(&y[fi..i]).map(|(a, b)| a * b).sum();
        y[i] = (y[i] - s) / l[start[i] + (i - fi)];
    }
    for i in (0..nf).rev() {
        let fi = first[i];
        y[i] /= l[start[i] + (i - fi)];
        let yi = y[i];
        for j in fi..i {
            y[j] -= l[start[i] + (j - fi)] * yi;
        }
    }
    // back to free numbering
    red.finish((0..nf).map(|f| y[inv[f]]))
}
