//! CPU references of the GPU primitives (sequential, obviously correct; the conformance
//! tests compare the GPU results with these).

/// Exclusive prefix sum with wrapping addition.
pub fn exclusive_scan_u32(v: &[u32]) -> Vec<u32> {
    let mut acc = 0u32;
    v.iter()
        .map(|&x| {
            let r = acc;
            acc = acc.wrapping_add(x);
            r
        })
        .collect()
}
/// Inclusive prefix sum with wrapping addition.
pub fn inclusive_scan_u32(v: &[u32]) -> Vec<u32> {
    let mut acc = 0u32;
    v.iter()
        .map(|&x| {
            acc = acc.wrapping_add(x);
            acc
        })
        .collect()
}
pub fn exclusive_scan_u64(v: &[u64]) -> Vec<u64> {
    let mut acc = 0u64;
    v.iter()
        .map(|&x| {
            let r = acc;
            acc = acc.wrapping_add(x);
            r
        })
        .collect()
}
pub fn inclusive_scan_u64(v: &[u64]) -> Vec<u64> {
    let mut acc = 0u64;
    v.iter()
        .map(|&x| {
            acc = acc.wrapping_add(x);
            acc
        })
        .collect()
}
/// CSR offsets (n + 1 entries) of row lengths; `None` on 32-bit overflow.
pub fn offsets_from_counts(v: &[u32]) -> Option<Vec<u32>> {
    let mut out = Vec::with_capacity(v.len() + 1);
    let mut acc = 0u64;
    out.push(0);
    for &x in v {
        acc += x as u64;
        if acc > u32::MAX as u64 {
            return None;
        }
        out.push(acc as u32);
    }
    Some(out)
}
/// Sum of u32 values, exact in u64.
pub fn reduce_sum_u32(v: &[u32]) -> u64 {
    v.iter().map(|&x| x as u64).sum()
}
/// Sum of u64 values, wrapping.
pub fn reduce_sum_u64(v: &[u64]) -> u64 {
    v.iter().fold(0u64, |a, &x| a.wrapping_add(x))
}
/// Sum of f64 values (compensated, as the accurate reference).
pub fn reduce_sum_f64(v: &[f64]) -> f64 {
    let (mut s, mut c) = (0.0f64, 0.0f64);
    for &x in v {
        let y = x - c;
        let t = s + y;
        c = (t - s) - y;
        s = t;
    }
    s
}
/// Maximum (0 for an empty slice).
pub fn reduce_max_u32(v: &[u32]) -> u32 {
    v.iter().copied().max().unwrap_or(0)
}
/// Stable compaction: the values whose flag is non-zero, in order.
pub fn compact<T: Copy>(v: &[T], flags: &[u32]) -> Vec<T> {
    v.iter()
        .zip(flags)
        .filter(|(_, &f)| f != 0)
        .map(|(&x, _)| x)
        .collect()
}
/// Indices whose flag is non-zero.
pub fn compact_indices(flags: &[u32]) -> Vec<u32> {
    flags
        .iter()
        .enumerate()
        .filter(|(_, &f)| f != 0)
        .map(|(i, _)| i as u32)
        .collect()
}
/// Count of each key below `nbins` (larger keys are ignored).
pub fn histogram(keys: &[u32], nbins: u32) -> Vec<u32> {
    let mut h = vec![0u32; nbins as usize];
    for &k in keys {
        if k < nbins {
            h[k as usize] += 1;
        }
    }
    h
}
/// Order of [`crate::primitives::SegOrder`] as a sort key.
pub fn seg_key(v: u32, order: super::SegOrder) -> u32 {
    match order {
        super::SegOrder::Unsigned => v,
        super::SegOrder::Signed => v ^ 0x8000_0000,
        super::SegOrder::TcsrColumn => {
            let s = ((v as i32) >> 31) as u32;
            let c = v ^ s;
            (c << 1) | (s == 0) as u32
        }
    }
}
/// Sort every row `offsets[r]..offsets[r+1]` of `vals` by `order`.
pub fn segmented_sort(vals: &mut [u32], offsets: &[u32], order: super::SegOrder) {
    for w in offsets.windows(2) {
        vals[w[0] as usize..w[1] as usize].sort_by_key(|&v| seg_key(v, order));
    }
}
/// Stable sort of `(key, value)` pairs by key.
pub fn sort_pairs<K: Ord + Copy>(keys: &[K], vals: &[u32]) -> (Vec<K>, Vec<u32>) {
    let mut idx: Vec<usize> = (0..keys.len()).collect();
    idx.sort_by_key(|&i| keys[i]);
    (
        idx.iter().map(|&i| keys[i]).collect(),
        idx.iter().map(|&i| vals[i]).collect(),
    )
}
/// Unique values of a sorted slice, and for each input element the index of its run.
pub fn unique_with_ids<K: PartialEq + Copy>(sorted: &[K]) -> (Vec<K>, Vec<u32>) {
    let mut u: Vec<K> = Vec::new();
    let mut ids = Vec::with_capacity(sorted.len());
    for (i, &k) in sorted.iter().enumerate() {
        if i == 0 || k != sorted[i - 1] {
            u.push(k);
        }
        ids.push((u.len() - 1) as u32);
    }
    (u, ids)
}
