//! Count -> scan -> fill helpers (dissertation §3.4.1: "the count-scan-fill pattern that
//! underlies many of the procedures outlined in this thesis").

use crate::Par;
use rayon::prelude::*;

/// Exclusive prefix sum of `counts` with a trailing total: returns `offsets` of length
/// `counts.len() + 1` with `offsets[0] = 0` and `offsets[i + 1] = offsets[i] + counts[i]`.
/// This is the CSR offsets array for rows with the given lengths.
///
/// Returns `None` on 32-bit overflow.
pub fn offsets_from_counts(par: Par, counts: &[u32]) -> Option<Vec<u32>> {
    let mut out = vec![0u32; counts.len() + 1];
    if par.is_parallel() && counts.len() > 1 << 16 {
        let chunk = par.chunk_len(counts.len());
        // pass 1: chunk sums
        let sums: Vec<u64> = counts
            .par_chunks(chunk)
            .map(|c| c.iter().map(|&x| x as u64).sum())
            .collect();
        let mut bases = Vec::with_capacity(sums.len());
        let mut acc = 0u64;
        for s in &sums {
            bases.push(acc);
            acc += s;
        }
        if acc > u32::MAX as u64 {
            return None;
        }
        // pass 2: local scans
        out[1..]
            .par_chunks_mut(chunk)
            .zip(counts.par_chunks(chunk))
            .zip(bases.par_iter())
            .for_each(|((o, c), &b)| {
                let mut a = b as u32;
                for (oi, &ci) in o.iter_mut().zip(c) {
                    a += ci;
                    *oi = a;
                }
            });
    } else {
        let mut acc = 0u64;
        for (i, &c) in counts.iter().enumerate() {
            acc += c as u64;
            if acc > u32::MAX as u64 {
                return None;
            }
            out[i + 1] = acc as u32;
        }
    }
    Some(out)
}

/// Exclusive scan of `u64` values (no overflow check beyond wrapping arithmetic).
pub fn exclusive_scan_u64(values: &[u64]) -> Vec<u64> {
    let mut out = Vec::with_capacity(values.len());
    let mut acc = 0u64;
    for &v in values {
        out.push(acc);
        acc = acc.wrapping_add(v);
    }
    out
}

/// Exclusive scan of `u32` values (wrapping).
pub fn exclusive_scan_u32(values: &[u32]) -> Vec<u32> {
    let mut out = Vec::with_capacity(values.len());
    let mut acc = 0u32;
    for &v in values {
        out.push(acc);
        acc = acc.wrapping_add(v);
    }
    out
}

/// Inclusive scan of `u32` values (wrapping).
pub fn inclusive_scan_u32(values: &[u32]) -> Vec<u32> {
    let mut out = Vec::with_capacity(values.len());
    let mut acc = 0u32;
    for &v in values {
        acc = acc.wrapping_add(v);
        out.push(acc);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_seq_and_rayon_agree() {
        let counts: Vec<u32> = (0..300_000u32).map(|i| (i * 7919) % 13).collect();
        let a = offsets_from_counts(Par::Seq, &counts).unwrap();
        let b = offsets_from_counts(Par::Rayon, &counts).unwrap();
        assert_eq!(a, b);
        assert_eq!(a[0], 0);
        assert_eq!(
            *a.last().unwrap() as u64,
            counts.iter().map(|&c| c as u64).sum::<u64>()
        );
    }

    #[test]
    fn offsets_overflow_is_none() {
        let counts = vec![u32::MAX, 1];
        assert!(offsets_from_counts(Par::Seq, &counts).is_none());
    }

    #[test]
    fn scans_hand_checked() {
        assert_eq!(inclusive_scan_u32(&[3, 1, 0, 2]), vec![3, 4, 4, 6]);
        assert_eq!(exclusive_scan_u32(&[3, 1, 0, 2]), vec![0, 3, 4, 4]);
        assert_eq!(exclusive_scan_u64(&[3, 1, 0, 2]), vec![0, 3, 4, 4]);
    }
}
