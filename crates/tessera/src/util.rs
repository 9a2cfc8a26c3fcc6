//! Small helpers shared by commands.

use indicatif::{ProgressBar, ProgressStyle};
use std::time::Duration;

/// A spinner on stderr for a long operation; hidden when stderr is not a terminal.
pub fn spinner(msg: &str) -> ProgressBar {
    let pb = ProgressBar::new_spinner();
    pb.set_style(ProgressStyle::with_template("{spinner} {msg} ({elapsed})").unwrap());
    pb.set_message(msg.to_string());
    pb.enable_steady_tick(Duration::from_millis(120));
    pb
}
