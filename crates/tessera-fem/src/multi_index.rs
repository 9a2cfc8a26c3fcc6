//! Bernstein-Bézier multi-indices (dissertation §4.3).
//!
//! The local nodes of an order-`p` simplex of dimension `d` correspond one-to-one to the
//! multi-indices `α ∈ N^{d+1}` with `|α| = p`. **Local node order** everywhere in Tessera
//! (element matrices, cell node lists) is the order of [`multi_indices`]: descending
//! lexicographic order of `α`. For `p = 1` that is the vertex order
//! `(1,0,0,0), (0,1,0,0), (0,0,1,0), (0,0,0,1)`.

/// Number of nodes of an order-`p` simplex of dimension `d`: `C(p + d, d)`.
pub fn num_local_nodes(d: usize, p: usize) -> usize {
    binomial(p + d, d)
}

/// Binomial coefficient `C(n, k)` (0 when `k > n`).
pub fn binomial(n: usize, k: usize) -> usize {
    if k > n {
        return 0;
    }
    let k = k.min(n - k);
    let mut r: usize = 1;
    for i in 0..k {
        r = r * (n - i) / (i + 1);
    }
    r
}

/// All multi-indices `α` with `d + 1` components (the unused components of the `[u8; 4]`
/// are 0) and `|α| = p`, in descending lexicographic order.
pub fn multi_indices(d: usize, p: usize) -> Vec<[u8; 4]> {
    assert!((1..=3).contains(&d), "simplex dimension must be 1, 2 or 3");
    let mut out = Vec::with_capacity(num_local_nodes(d, p));
    let mut a = [0u8; 4];
    fn rec(d: usize, i: usize, rem: usize, a: &mut [u8; 4], out: &mut Vec<[u8; 4]>) {
        if i == d {
            a[i] = rem as u8;
            out.push(*a);
            return;
        }
        for v in (0..=rem).rev() {
            a[i] = v as u8;
            rec(d, i + 1, rem - v, a, out);
        }
        a[i] = 0;
    }
    rec(d, 0, p, &mut a, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn counts_and_order() {
        for d in 1..=3 {
            for p in 0..=5 {
                let m = multi_indices(d, p);
                assert_eq!(m.len(), num_local_nodes(d, p));
                for w in m.windows(2) {
                    assert!(w[0] > w[1], "descending lexicographic");
                }
                for a in &m {
                    assert_eq!(a.iter().map(|&x| x as usize).sum::<usize>(), p);
                }
            }
        }
        assert_eq!(
            multi_indices(3, 1),
            vec![[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
        );
        assert_eq!(
            multi_indices(2, 2)[..3],
            [[2, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0]]
        );
    }
}
