//! Memory estimates before work: sizes derived from user parameters (a generated box of
//! `cells`, a bracket resolution, subdivision `--levels`, the FEM order) are estimated
//! from the counting formulas first, and refused with one clear message when they would
//! not fit, instead of aborting on a failed allocation halfway through.
//!
//! The budget is, in this order: the value set by [`set_max_memory`] (the CLI's
//! `--max-memory`), the environment variable `TESSERA_MAX_MEMORY`, or the memory available
//! to this process: the smallest of `MemAvailable` in `/proc/meminfo`, the headroom of the
//! process's cgroup (v2 `memory.max - memory.current` up the hierarchy, or v1
//! `memory.limit_in_bytes - memory.usage_in_bytes`) and the address-space limit
//! (`ulimit -v`) less what is mapped already.
//!
//! ```
//! use tessera_core::memory;
//! assert_eq!(memory::parse_size("1.5G").unwrap(), 1_500_000_000);
//! assert_eq!(memory::parse_size("512MiB").unwrap(), 512 << 20);
//! let b = memory::budget();
//! assert!(memory::check("a tiny job", 1000).is_ok() || b.bytes < 1000);
//! let e = memory::check_against("a huge job", 96_000_000_000, 8_000_000_000, "test").unwrap_err();
//! assert!(e.to_string().starts_with("a huge job needs ~96 GB, 8.0 GB available"));
//! ```

use crate::error::CoreError;
use std::sync::atomic::{AtomicU64, Ordering};

/// 0: not set.
static MAX_MEMORY: AtomicU64 = AtomicU64::new(0);

/// How to raise the limit, appended to every refusal.
pub const HINT: &str =
    "to try anyway, raise the limit with --max-memory SIZE (or TESSERA_MAX_MEMORY)";

/// Set (or with `None` clear) the memory budget for this process (`--max-memory`).
pub fn set_max_memory(bytes: Option<u64>) {
    MAX_MEMORY.store(bytes.unwrap_or(0), Ordering::Relaxed);
}

/// The memory budget and where it comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Budget {
    pub bytes: u64,
    /// `--max-memory`, `TESSERA_MAX_MEMORY`, `MemAvailable`, `cgroup limit`, `ulimit -v`, or
    /// `unknown` (no limit could be read: `u64::MAX`).
    pub limit: String,
}

/// The memory this process may use for new work (see the module docs).
pub fn budget() -> Budget {
    let set = MAX_MEMORY.load(Ordering::Relaxed);
    if set > 0 {
        return Budget {
            bytes: set,
            limit: "--max-memory".into(),
        };
    }
    if let Some(b) = std::env::var("TESSERA_MAX_MEMORY")
        .ok()
        .and_then(|v| parse_size(&v).ok())
    {
        return Budget {
            bytes: b,
            limit: "TESSERA_MAX_MEMORY".into(),
        };
    }
    available()
}

/// The memory available to this process right now, and what limits it.
pub fn available() -> Budget {
    let mut best = Budget {
        bytes: u64::MAX,
        limit: "unknown".into(),
    };
    let mut take = |bytes: Option<u64>, what: &str| {
        if let Some(b) = bytes {
            if b < best.bytes {
                best = Budget {
                    bytes: b,
                    limit: what.into(),
                };
            }
        }
    };
    take(meminfo_available(), "MemAvailable");
    take(cgroup_headroom(), "cgroup limit");
    take(address_space_headroom(), "ulimit -v");
    best
}

/// Refuse work needing about `needed` bytes when the budget is smaller.
pub fn check(what: impl Into<String>, needed: u64) -> Result<(), CoreError> {
    let b = budget();
    check_against(what, needed, b.bytes, &b.limit)
}

/// [`check`] against a given budget.
pub fn check_against(
    what: impl Into<String>,
    needed: u64,
    available: u64,
    limit: &str,
) -> Result<(), CoreError> {
    if needed > available {
        return Err(CoreError::OutOfMemory {
            what: what.into(),
            needed,
            available,
            limit: limit.to_string(),
            hint: HINT,
        });
    }
    Ok(())
}

/// Parse a size: a number with an optional unit `K`, `M`, `G`, `T` (powers of 1000, with
/// an optional `B`) or `KiB`, `MiB`, `GiB`, `TiB` (powers of 1024); plain numbers are bytes.
pub fn parse_size(s: &str) -> Result<u64, CoreError> {
    let t = s.trim();
    let bad = || CoreError::BadSize(crate::error::clip(t, 40));
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let x: f64 = num.parse().map_err(|_| bad())?;
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "t" | "tb" => 1e12,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return Err(bad()),
    };
    let v = x * mult;
    if !v.is_finite() || v < 1.0 || v >= u64::MAX as f64 {
        return Err(bad());
    }
    Ok(v as u64)
}

fn meminfo_available() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kb: u64 = s
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

fn read_u64(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn cgroup_headroom() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mut best: Option<u64> = None;
    for line in s.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(ctrl), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        if ctrl.is_empty() {
            // cgroup v2: every ancestor's limit applies
            let mut p = path.trim_end_matches('/').to_string();
            loop {
                let dir = format!("/sys/fs/cgroup{p}");
                if let (Some(max), Some(cur)) = (
                    read_u64(&format!("{dir}/memory.max")),
                    read_u64(&format!("{dir}/memory.current")),
                ) {
                    let h = max.saturating_sub(cur);
                    best = Some(best.map_or(h, |b: u64| b.min(h)));
                }
                match p.rfind('/') {
                    Some(i) if !p.is_empty() => p.truncate(i),
                    _ => break,
                }
            }
        } else if ctrl.split(',').any(|c| c == "memory") {
            let dir = format!("/sys/fs/cgroup/memory{path}");
            if let (Some(max), Some(cur)) = (
                read_u64(&format!("{dir}/memory.limit_in_bytes")),
                read_u64(&format!("{dir}/memory.usage_in_bytes")),
            ) {
                // v1 reports "no limit" as a huge page-aligned number
                if max < (1u64 << 60) {
                    let h = max.saturating_sub(cur);
                    best = Some(best.map_or(h, |b: u64| b.min(h)));
                }
            }
        }
    }
    best
}

fn address_space_headroom() -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut r) } != 0 || r.rlim_cur == libc::RLIM_INFINITY
    {
        return None;
    }
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let vm_kb: u64 = s
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(r.rlim_cur.saturating_sub(vm_kb * 1024))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("12G").unwrap(), 12_000_000_000);
        assert_eq!(parse_size("12gb").unwrap(), 12_000_000_000);
        assert_eq!(parse_size("2GiB").unwrap(), 2 << 30);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size(" 0.5 M ").unwrap(), 500_000);
        for bad in ["", "G", "-1G", "1X", "0", "1e999", "nan"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_machine_reports_some_memory() {
        let a = available();
        assert!(a.bytes > 0);
        // on Linux MemAvailable is always there
        if std::path::Path::new("/proc/meminfo").exists() {
            assert_ne!(a.limit, "unknown");
        }
    }

    #[test]
    fn refusal_says_needed_and_available_once() {
        let e = check_against(
            "box 400x400x400 (p = 2)",
            120_000_000_000,
            20_400_000_000,
            "MemAvailable",
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            format!(
                "box 400x400x400 (p = 2) needs ~120 GB, 20 GB available (MemAvailable); {HINT}"
            )
        );
        assert!(check_against("small", 10, 20, "x").is_ok());
    }
}
