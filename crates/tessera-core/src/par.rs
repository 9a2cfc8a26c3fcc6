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
