//! Grundmann-Möller quadrature on simplices (Grundmann & Möller 1978), used by the test suite
//! as an element integration independent of the closed-form Bernstein-Bézier rules of
//! [`crate::element`].
//!
//! The rule of index `s` on the `d`-simplex is exact for polynomials of degree `2s + 1`:
//!
//! ```text
//! ∫_{S_d} f ≈ Σ_{i=0}^{s} (-1)^i 2^{-2s} (d+2s+1-2i)^{2s+1} / (i! (d+2s+1-i)!)
//!               Σ_{β ∈ N^{d+1}, |β| = s-i} f( (2β_0+1)/(d+2s+1-2i), …, (2β_d+1)/(d+2s+1-2i) )
//! ```
//!
//! over the unit simplex `S_d` of volume `1/d!`, the points given in barycentric coordinates.
//! [`grundmann_moeller`] returns the weights scaled to sum to 1, so `∫_T f ≈ |T| Σ w_q f(ξ_q)`.
//! Some weights are negative; that is inherent to the rule and harmless for exact polynomials.

/// A quadrature point: barycentric coordinates (`d + 1` used) and weight (weights sum to 1).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QuadPoint {
    pub bary: [f64; 4],
    pub weight: f64,
}

fn factorial(n: usize) -> f64 {
    (1..=n).map(|k| k as f64).product()
}

/// All `β ∈ N^{n}` with `|β| = total` (any order).
fn compositions(n: usize, total: usize, out: &mut Vec<[usize; 4]>) {
    fn rec(i: usize, n: usize, rem: usize, cur: &mut [usize; 4], out: &mut Vec<[usize; 4]>) {
        if i + 1 == n {
            cur[i] = rem;
            out.push(*cur);
            return;
        }
        for v in 0..=rem {
            cur[i] = v;
            rec(i + 1, n, rem - v, cur, out);
        }
    }
    let mut cur = [0usize; 4];
    rec(0, n, total, &mut cur, out);
}

/// The Grundmann-Möller rule of index `s` (exact for degree `2s + 1`) on the `d`-simplex
/// (`d` in 1..=3), weights normalized to sum to 1.
pub fn grundmann_moeller(d: usize, s: usize) -> Vec<QuadPoint> {
    assert!((1..=3).contains(&d), "simplex dimension 1..=3");
    let mut pts = Vec::new();
    let mut betas = Vec::new();
    for i in 0..=s {
        let denom = (d + 2 * s + 1 - 2 * i) as f64;
        let sign = if i % 2 == 0 { 1.0 } else { -1.0 };
        let w = sign * 2f64.powi(-(2 * s as i32)) * denom.powi(2 * s as i32 + 1)
            / (factorial(i) * factorial(d + 2 * s + 1 - i))
            * factorial(d); // normalize: the unit simplex has volume 1/d!
        betas.clear();
        compositions(d + 1, s - i, &mut betas);
        for b in &betas {
            let mut bary = [0.0; 4];
            for k in 0..=d {
                bary[k] = (2 * b[k] + 1) as f64 / denom;
            }
            pts.push(QuadPoint { bary, weight: w });
        }
    }
    pts
}

/// Smallest Grundmann-Möller index exact for polynomials of degree `deg`.
pub fn index_for_degree(deg: usize) -> usize {
    deg.saturating_sub(1).div_ceil(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `∫_{S} ξ^γ / |S| = d! γ! / (|γ| + d)!`.
    fn exact_monomial(d: usize, g: &[usize; 4]) -> f64 {
        let n: usize = g.iter().sum();
        factorial(d) * g.iter().map(|&x| factorial(x)).product::<f64>() / factorial(n + d)
    }

    #[test]
    fn exact_for_monomials_up_to_degree() {
        for d in 1..=3 {
            for s in 0..=4 {
                let q = grundmann_moeller(d, s);
                let wsum: f64 = q.iter().map(|p| p.weight).sum();
                assert!((wsum - 1.0).abs() < 1e-12, "d={d} s={s} weights sum {wsum}");
                for deg in 0..=2 * s + 1 {
                    let mut gs = Vec::new();
                    compositions(d + 1, deg, &mut gs);
                    for g in gs {
                        let num: f64 = q
                            .iter()
                            .map(|p| {
                                p.weight
                                    * (0..=d)
                                        .map(|k| p.bary[k].powi(g[k] as i32))
                                        .product::<f64>()
                            })
                            .sum();
                        let ex = exact_monomial(d, &g);
                        assert!(
                            (num - ex).abs() < 1e-12 * ex.max(1e-3),
                            "d={d} s={s} g={g:?}: {num} vs {ex}"
                        );
                    }
                }
            }
        }
        assert_eq!(index_for_degree(4), 2);
        assert_eq!(index_for_degree(5), 2);
        assert_eq!(index_for_degree(6), 3);
    }
}
