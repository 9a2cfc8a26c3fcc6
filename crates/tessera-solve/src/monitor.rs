//! A process-wide observer of iterative solves: `tessera fem solve` shows the PCG iteration
//! and the relative residual `‖S r‖ / ‖S r₀‖` on a terminal and prints the residual history
//! with `-v`, whichever solver (block Jacobi, AMG, p-multigrid; CPU or GPU) runs inside the
//! FEM pipeline. The CPU PCG reports every iteration; the GPU PCG, which polls its status
//! every few iterations, reports at the polls at most every [`GPU_REPORT_INTERVAL`] (each
//! report reads one residual back), and always its last iteration.
//!
//! Without an observer set, a report costs one uncontended read lock.

use std::sync::{Arc, RwLock};
use std::time::Duration;

/// An observer: `(iteration, relative residual)`.
pub type Monitor = Arc<dyn Fn(usize, f64) + Send + Sync>;

/// Least time between two reports of the GPU PCG.
pub const GPU_REPORT_INTERVAL: Duration = Duration::from_millis(100);

static MONITOR: RwLock<Option<Monitor>> = RwLock::new(None);

/// Set (or with `None` clear) the observer of every following solve in this process.
pub fn set_monitor(m: Option<Monitor>) {
    *MONITOR.write().unwrap_or_else(|e| e.into_inner()) = m;
}

/// Whether an observer is set.
pub fn is_monitored() -> bool {
    MONITOR.read().unwrap_or_else(|e| e.into_inner()).is_some()
}

/// Tell the observer, if any, that `iteration` reached `relative_residual`.
pub fn report(iteration: usize, relative_residual: f64) {
    let m = MONITOR.read().unwrap_or_else(|e| e.into_inner()).clone();
    if let Some(m) = m {
        m(iteration, relative_residual);
    }
}

/// Clears the observer when dropped (set one for the duration of a scope).
pub struct MonitorGuard;

impl MonitorGuard {
    /// Set `m` until the guard is dropped.
    pub fn set(m: Monitor) -> Self {
        set_monitor(Some(m));
        MonitorGuard
    }
}

impl Drop for MonitorGuard {
    fn drop(&mut self) {
        set_monitor(None);
    }
}
