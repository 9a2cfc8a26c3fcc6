//! Dirichlet constraints applied by a filter (dissertation §4.4.2; Baraff and Witkin [BW98]).

use rayon::prelude::*;

/// Dirichlet constraints: a mask per scalar DOF and the prescribed values. The solvers apply
/// them by the filter `S` that zeroes constrained components, so the matrix and its pattern
/// stay unchanged (dissertation §4.4.2).
#[derive(Clone, Debug, Default)]
pub struct Constraints {
    /// `true` where the DOF is prescribed.
    pub fixed: Vec<bool>,
    /// Prescribed values (ignored where `fixed` is false).
    pub values: Vec<f64>,
}

impl Constraints {
    /// No constraints on `n` DOFs.
    pub fn none(n: usize) -> Self {
        Constraints {
            fixed: vec![false; n],
            values: vec![0.0; n],
        }
    }
    /// Fix component `comp` of node `node` (block size `e`) to `value`.
    pub fn fix(&mut self, node: usize, e: usize, comp: usize, value: f64) {
        self.fixed[node * e + comp] = true;
        self.values[node * e + comp] = value;
    }
    /// Number of fixed DOFs.
    pub fn num_fixed(&self) -> usize {
        self.fixed.iter().filter(|&&f| f).count()
    }
    /// The start vector of the filtered iteration: prescribed values, zeros elsewhere.
    pub fn start_vector(&self) -> Vec<f64> {
        self.fixed
            .iter()
            .zip(&self.values)
            .map(|(&f, &v)| if f { v } else { 0.0 })
            .collect()
    }
}

/// `v = S v`: zero the constrained components.
pub fn filter(v: &mut [f64], fixed: &[bool]) {
    v.par_iter_mut()
        .with_min_len(4096)
        .zip(fixed.par_iter())
        .for_each(|(x, &f)| {
            if f {
                *x = 0.0
            }
        });
}
