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
