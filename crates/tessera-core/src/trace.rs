//! Sub-stage timings for diagnosing where a pipeline spends its time: with the environment
//! variable `TESSERA_TRACE` set (to anything), [`Tracer::mark`] prints
//! `trace <scope>: <stage> <ms>` to stderr; otherwise it does nothing.

use std::sync::OnceLock;
use std::time::Instant;

/// Whether `TESSERA_TRACE` is set (read once): for per-thread timings a caller prints itself.
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("TESSERA_TRACE").is_some())
}

/// Times consecutive stages of one scope.
pub struct Tracer {
    scope: &'static str,
    last: Instant,
}

impl Tracer {
    pub fn new(scope: &'static str) -> Self {
        Tracer {
            scope,
            last: Instant::now(),
        }
    }
    /// End the current stage (named `stage`) and start the next.
    pub fn mark(&mut self, stage: &str) {
        if enabled() {
            let now = Instant::now();
            eprintln!(
                "trace {}: {stage} {:.1} ms",
                self.scope,
                (now - self.last).as_secs_f64() * 1e3
            );
            self.last = now;
        }
    }
}

/// CPU time in ns of one clock of `clock_gettime` (None if the clock is not available).
fn clock_ns(clock: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable `timespec`; `clock_gettime` writes only it and
    // reports an unknown clock by its return value.
    let r = unsafe { libc::clock_gettime(clock, &mut ts) };
    (r == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// CPU time the calling thread has run, in ns (`CLOCK_THREAD_CPUTIME_ID`: nanosecond
/// resolution, unlike `/proc/thread-self/schedstat`, which some kernels leave at 0, or the
/// scheduler tick). A timing that a busy shared machine disturbs much less than the wall
/// clock.
pub fn thread_cpu_ns() -> Option<u64> {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time all threads of the process have run, in ns (`CLOCK_PROCESS_CPUTIME_ID`): for
/// parallel work, the work the threads did together (spinning idle workers included).
pub fn process_cpu_ns() -> Option<u64> {
    clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// Where a benchmark's timed runs get their memory from (glibc's allocator; elsewhere only
/// [`MemoryRegime::Default`] can be entered).
///
/// A timing of one thread against several is only a ratio of the code when both runs get
/// their memory in one regime. Left to itself, glibc serves each thread from an arena of its
/// own, maps large arrays fresh (up to its dynamic 32 MiB ceiling) and gives freed memory
/// back to the kernel by thresholds, so one run may get pages the kernel zeroes inside its
/// timed region while the other reuses memory: bracket-1.69M's δ3 read 1.8-1.9x on two
/// threads that way where, on the same machine instance, both regimes below gave about
/// 1.3-1.5x (BENCHMARKS.md, session 39).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryRegime {
    /// Freed memory is kept and reused: one arena for all threads, no array mapped on its
    /// own, nothing trimmed (the regime of a long-running process calling an operation
    /// again and again). Set once for the process by [`MemoryRegime::enter`].
    Reuse,
    /// Every timed run starts with freed memory given back to the kernel
    /// ([`MemoryRegime::before_run`]), so each run's arrays are fresh pages, faulted in and
    /// zeroed on first touch (the regime of a first call).
    Fresh,
    /// The allocator's own defaults (the two runs may not be in one regime).
    Default,
}

impl MemoryRegime {
    /// Parse `reuse`, `fresh` or `default` ([`MemoryRegime::name`]).
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Reuse, Self::Fresh, Self::Default]
            .into_iter()
            .find(|r| r.name() == s)
    }

    /// The value of a `--regime` option: `reuse`, `fresh` or `default`, or a one-line error.
    pub fn from_arg(arg: Option<String>) -> Result<Self, String> {
        let r = arg.ok_or("--regime needs reuse, fresh or default")?;
        Self::parse(&r).ok_or(format!("--regime {r}: not reuse, fresh or default"))
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Reuse => "reuse",
            Self::Fresh => "fresh",
            Self::Default => "default",
        }
    }

    /// Set the process's allocator for this regime; call once, before any thread is
    /// started. A one-line error where the allocator could not be set (not glibc, or a
    /// `mallopt` refused): then the regime is the allocator's default.
    pub fn enter(self) -> Result<(), String> {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        let set = self != Self::Reuse
            // SAFETY: mallopt only changes glibc's allocator parameters; it is called before
            // the process starts other threads (documented precondition).
            || unsafe {
                libc::mallopt(libc::M_ARENA_MAX, 1) == 1
                    && libc::mallopt(libc::M_MMAP_MAX, 0) == 1
                    && libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX) == 1
            };
        #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
        let set = self == Self::Default;
        if set {
            Ok(())
        } else {
            Err(format!(
                "could not set the allocator for --regime {}",
                self.name()
            ))
        }
    }

    /// Call before every timed run (outside the timer): in [`MemoryRegime::Fresh`], gives
    /// freed memory back to the kernel.
    pub fn before_run(self) {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        if self == Self::Fresh {
            // SAFETY: malloc_trim only returns free memory of the heaps to the kernel.
            unsafe { libc::malloc_trim(0) };
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn cpu_clocks_advance_with_work() {
        let (t0, p0) = (
            super::thread_cpu_ns().unwrap(),
            super::process_cpu_ns().unwrap(),
        );
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        std::hint::black_box(x);
        let (t1, p1) = (
            super::thread_cpu_ns().unwrap(),
            super::process_cpu_ns().unwrap(),
        );
        assert!(t1 > t0 && p1 > p0, "{t0} {t1} {p0} {p1}");
    }

    #[test]
    fn memory_regimes_parse_by_name() {
        use super::MemoryRegime;
        for r in [
            MemoryRegime::Reuse,
            MemoryRegime::Fresh,
            MemoryRegime::Default,
        ] {
            assert_eq!(MemoryRegime::parse(r.name()), Some(r));
        }
        assert_eq!(MemoryRegime::parse("fast"), None);
        assert_eq!(
            MemoryRegime::from_arg(Some("fresh".into())),
            Ok(MemoryRegime::Fresh)
        );
        assert!(MemoryRegime::from_arg(Some("fast".into()))
            .unwrap_err()
            .contains("fast"));
        assert!(MemoryRegime::from_arg(None).is_err());
        // a fresh regime's call before a run only trims: allocations work after it
        MemoryRegime::Fresh.before_run();
        let v = vec![1u8; 1 << 20];
        assert_eq!(v.iter().map(|&b| b as usize).sum::<usize>(), 1 << 20);
    }
}
