//! Small helpers shared by commands.

use indicatif::{ProgressBar, ProgressStyle};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Set by commands run with `--json`: no progress is drawn at all.
static QUIET: AtomicBool = AtomicBool::new(false);

/// Silence every spinner and bar of this process (`--json`).
pub fn set_quiet(quiet: bool) {
    if quiet {
        QUIET.store(true, Ordering::Relaxed);
    }
}

fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// A spinner on stderr for a long operation; hidden when stderr is not a terminal or the
/// command runs with `--json`.
pub fn spinner(msg: &str) -> ProgressBar {
    if quiet() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new_spinner();
    pb.set_style(ProgressStyle::with_template("{spinner} {msg} ({elapsed})").unwrap());
    pb.set_message(msg.to_string());
    pb.enable_steady_tick(Duration::from_millis(120));
    pb
}

/// A bar over `len` steps on stderr (cases, meshes, iterations) with a message; hidden with
/// `quiet` (`--json`) or when stderr is not a terminal.
pub fn steps(json: bool, len: u64, msg: &str) -> ProgressBar {
    if json || quiet() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(len);
    pb.set_style(
        ProgressStyle::with_template("{spinner} [{bar:24}] {pos}/{len} {msg} ({elapsed})")
            .unwrap()
            .progress_chars("=> "),
    );
    pb.set_message(msg.to_string());
    pb.enable_steady_tick(Duration::from_millis(120));
    pb
}
