//! Sub-stage timings for diagnosing where a pipeline spends its time: with the environment
//! variable `TESSERA_TRACE` set (to anything), [`Tracer::mark`] prints
//! `trace <scope>: <stage> <ms>` to stderr; otherwise it does nothing.

use std::sync::OnceLock;
use std::time::Instant;

fn enabled() -> bool {
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
}
