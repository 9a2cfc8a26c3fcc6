//! Execution choice for CPU algorithms.

/// How a CPU algorithm runs: sequentially, or on the rayon thread pool.
///
/// Results are required to be identical for both (the rayon paths only split work into
/// independent, deterministic pieces).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Par {
    /// Run on the calling thread.
    Seq,
    /// Run on the global rayon pool.
    #[default]
    Rayon,
}

impl Par {
    /// `Par::Rayon` when more than one thread is available, else `Par::Seq`.
    pub fn auto() -> Self {
        if rayon::current_num_threads() > 1 {
            Par::Rayon
        } else {
            Par::Seq
        }
    }

    /// Whether this is the parallel variant.
    pub fn is_parallel(self) -> bool {
        matches!(self, Par::Rayon)
    }

    /// Minimum chunk length for splitting `n` items into parallel chunks.
    pub fn chunk_len(self, n: usize) -> usize {
        match self {
            Par::Seq => n.max(1),
            Par::Rayon => (n / (4 * rayon::current_num_threads()).max(1)).max(4096),
        }
    }
}

/// A vector of `n` copies of `value`, written by the threads of the current rayon pool in
/// chunks with `Par::Rayon`. (`vec![0; n]` zeroes reused memory on the calling thread
/// alone: a serial pass in front of the parallel work that fills the vector.)
pub fn filled_vec<T: Copy + Send + Sync>(par: Par, n: usize, value: T) -> Vec<T> {
    use rayon::prelude::*;
    use std::mem::MaybeUninit;
    if par == Par::Seq || n < 1 << 16 {
        return vec![value; n];
    }
    let mut v: Vec<T> = Vec::with_capacity(n);
    v.spare_capacity_mut()[..n]
        .par_chunks_mut(1 << 14)
        .for_each(|c| c.fill(MaybeUninit::new(value)));
    // SAFETY: the capacity is at least `n`, and the chunks above cover the first `n`
    // elements of it and wrote every one of them (`for_each` runs every chunk).
    unsafe { v.set_len(n) };
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filled_vec_equals_vec_macro() {
        for n in [0usize, 1, 1000, (1 << 16) + 17, 300_001] {
            for par in [Par::Seq, Par::Rayon] {
                assert_eq!(filled_vec(par, n, 7u32), vec![7u32; n]);
                assert_eq!(filled_vec(par, n, -1i32), vec![-1i32; n]);
            }
        }
    }
}
