//! Errors of the core crate's file and memory services ([`crate::atomic`], [`crate::input`],
//! [`crate::memory`]).

use std::path::PathBuf;

/// One error type for the core crate's file and memory services. Every variant says its
/// fact once, on one line: the path, what was being done and the operating-system reason
/// (the `source` is kept for callers that inspect it, but it is not a separate cause in
/// the chain, so reporters that print causes do not repeat it).
#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    /// An operating-system error on a path, with the operation that failed.
    #[error("{}: {op}: {}", path.display(), crate::error::os_message(err))]
    Io {
        path: PathBuf,
        op: &'static str,
        err: std::io::Error,
    },
    /// An input that is not a regular file (a device such as `/dev/zero`, a FIFO, a socket
    /// or a directory): it could be endless or block forever.
    #[error("{}: is {kind}, not a regular file", path.display())]
    NotRegularFile { path: PathBuf, kind: &'static str },
    /// A file or a gzip stream larger than a configured limit.
    #[error("{}: {msg}", path.display())]
    TooLarge { path: PathBuf, msg: String },
    /// A corrupt gzip stream.
    #[error("{}: gzip stream: {msg}", path.display())]
    Gzip { path: PathBuf, msg: String },
    /// Work whose memory estimate exceeds the memory available.
    #[error("{what} needs ~{} GB, {} GB available ({limit}); {hint}", gb(*needed), gb(*available))]
    OutOfMemory {
        what: String,
        needed: u64,
        available: u64,
        /// Where the available figure comes from (`MemAvailable`, a cgroup limit, `--max-memory`).
        limit: String,
        hint: &'static str,
    },
    /// A `--max-memory` (or `TESSERA_MAX_MEMORY`) value that is not a size.
    #[error(
        "invalid memory size `{0}`: expected a number with an optional unit (K, M, G, T; e.g. 12G)"
    )]
    BadSize(String),
}

/// Bytes as gigabytes with 1-3 significant decimals (`0.003`, `1.2`, `96`).
pub(crate) fn gb(b: u64) -> String {
    let g = b as f64 / 1e9;
    if g >= 10.0 {
        format!("{g:.0}")
    } else if g >= 1.0 {
        format!("{g:.1}")
    } else if g >= 0.01 {
        format!("{g:.2}")
    } else {
        format!("{g:.3}")
    }
}

/// The reason of an OS error without the `(os error N)` suffix (the kind's text says it).
pub fn os_message(e: &std::io::Error) -> String {
    os_message_str(&e.to_string())
}

/// A message with every ` (os error N)` removed.
pub fn os_message_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find(" (os error ") {
        out.push_str(&rest[..i]);
        let tail = &rest[i + " (os error ".len()..];
        match tail.find(')') {
            Some(j) if tail[..j].chars().all(|c| c.is_ascii_digit() || c == '-') => {
                rest = &tail[j + 1..];
            }
            _ => {
                out.push_str(" (os error ");
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    out
}

impl CoreError {
    pub(crate) fn io(path: impl Into<PathBuf>, op: &'static str, err: std::io::Error) -> Self {
        CoreError::Io {
            path: path.into(),
            op,
            err,
        }
    }
    /// The message without the leading path (for callers whose own error names the path).
    pub fn reason(&self) -> String {
        match self {
            CoreError::Io { op, err, .. } => format!("{op}: {}", os_message(err)),
            CoreError::NotRegularFile { kind, .. } => format!("is {kind}, not a regular file"),
            CoreError::TooLarge { msg, .. } => msg.clone(),
            CoreError::Gzip { msg, .. } => format!("gzip stream: {msg}"),
            other => other.to_string(),
        }
    }
    /// The operating-system error, when this is one.
    pub fn io_error(&self) -> Option<&std::io::Error> {
        match self {
            CoreError::Io { err, .. } => Some(err),
            _ => None,
        }
    }
}

/// A printable excerpt of user text for an error message: at most `max` bytes of whole
/// characters (so a line of multi-byte characters stays as bounded as an ASCII one), control
/// characters shown as `?`, and `...` with the number of characters left out when it was
/// longer.
pub fn clip(s: &str, max: usize) -> String {
    let mut out = String::new();
    let mut taken = 0usize;
    for c in s.chars() {
        let c = if c.is_control() { '?' } else { c };
        if out.len() + c.len_utf8() > max {
            break;
        }
        out.push(c);
        taken += 1;
    }
    let n = s.chars().count();
    if n > taken {
        out.push_str(&format!("... ({} more characters)", n - taken));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::clip;

    /// Found by `cargo fuzz` (target `vtu`): an excerpt of 400 replacement characters was
    /// 1,200 bytes. The bound is in bytes, on character boundaries.
    #[test]
    fn clip_bounds_bytes_on_char_boundaries() {
        assert_eq!(clip("abc", 10), "abc");
        assert_eq!(clip("a\nb", 10), "a?b");
        assert_eq!(clip("abcdef", 3), "abc... (3 more characters)");
        let wide = "\u{fffd}".repeat(1000);
        let c = clip(&wide, 400);
        let kept = c.split("...").next().unwrap();
        assert!(kept.len() <= 400 && kept.len() > 390, "{}", kept.len());
        assert!(c.ends_with(&format!(
            "({} more characters)",
            1000 - kept.chars().count()
        )));
        assert_eq!(clip("\u{e9}\u{e9}", 3), "\u{e9}... (1 more characters)");
    }
}
