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

/// The CPUs the calling thread may run on, ascending (Linux; `None` where the call fails).
#[cfg(target_os = "linux")]
fn allowed_cpus() -> Option<Vec<usize>> {
    // SAFETY: `cpu_set_t` is plain data, valid zeroed; the call writes the calling thread's
    // set into it, of the size passed
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        Some(
            (0..libc::CPU_SETSIZE as usize)
                .filter(|&c| libc::CPU_ISSET(c, &set))
                .collect(),
        )
    }
}

/// Pin the calling thread to the `index`-th CPU (modulo their count) of those the process
/// may run on, and return whether it was pinned (Linux only; elsewhere, or where the calls
/// fail, the thread stays unpinned).
///
/// For the start handler of a benchmark's rayon pool ([`thread_pool`] with `pin`): worker
/// `i` on CPU `i`. On the 2-vCPU machine the scheduler otherwise often ran both workers of a
/// 2-thread pool on one CPU for a whole transpose of a few milliseconds (process CPU time
/// equal to the wall clock, the run slower than one thread; BENCHMARKS.md, session 34).
pub fn pin_to_cpu(index: usize) -> bool {
    #[cfg(target_os = "linux")]
    {
        let Some(cpus) = allowed_cpus().filter(|c| !c.is_empty()) else {
            return false;
        };
        let cpu = cpus[index % cpus.len()];
        // SAFETY: `cpu_set_t` is plain data, valid zeroed; the call reads the set owned
        // here, of the size passed, and concerns the calling thread (pid 0)
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = index;
        false
    }
}

/// A rayon pool of `threads` threads (0: one per CPU), each worker `i` pinned to CPU `i`
/// ([`pin_to_cpu`]) when `pin` is set: the pools of the CPU benchmarks' `--pin`.
pub fn thread_pool(
    threads: usize,
    pin: bool,
) -> Result<rayon::ThreadPool, rayon::ThreadPoolBuildError> {
    let mut builder = rayon::ThreadPoolBuilder::new().num_threads(threads);
    if pin {
        builder = builder.start_handler(|i| {
            pin_to_cpu(i);
        });
    }
    builder.build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_os = "linux")]
    fn pinned_threads_run_on_the_cpu_asked_for() {
        let cpus = allowed_cpus().unwrap();
        let n = cpus.len();
        for i in [0, 1, n, 3 * n + 1] {
            // each in a thread of its own, which starts with the process's CPUs
            let got = std::thread::spawn(move || {
                assert!(pin_to_cpu(i), "pinning to CPU index {i}");
                allowed_cpus().unwrap()
            })
            .join()
            .unwrap();
            assert_eq!(got, vec![cpus[i % n]], "CPU index {i} of {cpus:?}");
        }
    }
}
