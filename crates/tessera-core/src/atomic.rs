//! Atomic, private file writes: every file Tessera writes goes through here.
//!
//! [`write_atomic`] creates a temporary file next to the destination under a unique name
//! (`.NAME.tessera-tmp.PID.N`), with `O_CREAT | O_EXCL | O_NOFOLLOW` and mode `0600`, so a
//! planted file or symlink at that name is never opened or followed and nobody else can
//! write into it. The body is written and `fsync`ed, the file gets the permissions a plain
//! create would have given (or those of the file it replaces), and it is renamed over the
//! destination; the directory is `fsync`ed after the rename. A reader therefore sees either
//! the old file or the complete new one. On an error (or a panic) the temporary file is
//! removed; with [`cleanup_on_signals`] (the command-line program turns it on) it is also
//! removed on Ctrl-C, `SIGTERM` and `SIGHUP` before the process ends by that signal.
//! Temporary files left by a process that was killed outright (`SIGKILL`) are recognized
//! by their name and removed by the next write to the same destination once their process
//! is gone.
//!
//! Outputs made of several files (a TetGen `.node` + `.ele` pair, a result `.vtu` with its
//! `summary.json`) are [`stage`]d one by one and [`publish`]ed together: all are written
//! and synced before the first rename, and the renames run under an exclusive lock on the
//! directory, so concurrent writers into one directory publish whole sets one after the
//! other and never interleave.
//!
//! No file system renames two files at once, so a process killed outright between the
//! renames of a set leaves it half published (the first file new, the second old). Before
//! its first rename, [`publish`] therefore writes a journal of the set's renames beside the
//! files (`.tessera-publish.PID.N`, synced), and removes it after the last. A journal whose
//! process is gone marks an interrupted set: the next [`stage`] into that directory (every
//! Tessera write) first completes it from the temporary files the journal names, which were
//! complete and synced before it was written ([`complete_interrupted`]). A set is whole
//! again when the next Tessera output is written into its directory. `SIGINT`, `SIGTERM`
//! and `SIGHUP` never interrupt a set: their cleanup waits for the renames to finish.
//!
//! ```
//! let dir = std::env::temp_dir().join(format!("tessera-atomic-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let out = dir.join("hello.txt");
//! tessera_core::atomic::write_bytes(&out, b"hello\n").unwrap();
//! assert_eq!(std::fs::read(&out).unwrap(), b"hello\n");
//! let a = tessera_core::atomic::stage(&dir.join("a.node"), |w| w.write_all(b"1\n")).unwrap();
//! let b = tessera_core::atomic::stage(&dir.join("a.ele"), |w| w.write_all(b"2\n")).unwrap();
//! tessera_core::atomic::publish(vec![a, b]).unwrap();
//! assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 3); // no temporary file is left
//! std::fs::remove_dir_all(&dir).unwrap();
//! ```

use crate::error::CoreError;
use std::ffi::OsStr;
use std::fs::File;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Once};

/// The marker in every temporary name: `.NAME` + `TEMP_MARK` + `PID.N`.
pub const TEMP_MARK: &str = ".tessera-tmp.";

/// The name of a publish journal: `JOURNAL_MARK` + `PID.N`.
pub const JOURNAL_MARK: &str = ".tessera-publish.";

/// The longest journal read back (a set of a few files needs under 1 KiB).
const JOURNAL_MAX: u64 = 1 << 20;

/// Longest part of the destination name kept in a temporary name (names stay < 255 bytes).
const NAME_KEEP: usize = 120;

/// A written and synced temporary file waiting to be renamed over its destination by
/// [`publish`]. Dropping it unpublished removes the temporary file.
#[derive(Debug)]
pub struct Staged {
    tmp: PathBuf,
    dest: PathBuf,
    id: u64,
    done: bool,
}

impl Staged {
    /// The destination this file will replace.
    pub fn dest(&self) -> &Path {
        &self.dest
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.done {
            discard(&self.tmp, self.id);
        }
    }
}

/// Write `dest` atomically: `body` writes the content into a private temporary file,
/// which replaces `dest` only when everything was written and synced.
pub fn write_atomic<F>(dest: &Path, body: F) -> Result<(), CoreError>
where
    F: FnOnce(&mut dyn Write) -> std::io::Result<()>,
{
    publish(vec![stage(dest, body)?])
}

/// [`write_atomic`] of a byte slice.
pub fn write_bytes(dest: &Path, bytes: &[u8]) -> Result<(), CoreError> {
    write_atomic(dest, |w| w.write_all(bytes))
}

/// Write the content of `dest` into a private temporary file beside it (see the module
/// docs); [`publish`] renames it over `dest`.
pub fn stage<F>(dest: &Path, body: F) -> Result<Staged, CoreError>
where
    F: FnOnce(&mut dyn Write) -> std::io::Result<()>,
{
    let name = dest
        .file_name()
        .ok_or_else(|| CoreError::io(dest, "writing", std::io::Error::other("no file name")))?;
    if let Ok(m) = std::fs::symlink_metadata(dest) {
        if m.is_dir() {
            return Err(CoreError::io(
                dest,
                "writing",
                std::io::Error::other("is a directory"),
            ));
        }
    }
    let dir = parent_dir(dest);
    tidy(&dir, Some(name));
    // the mode a plain create would give, or the mode of the file being replaced
    let mode = match std::fs::metadata(dest) {
        Ok(m) if m.is_file() => m.permissions().mode() & 0o7777,
        _ => 0o666 & !umask(),
    };
    let (file, tmp, id) = create_temp(&dir, name, dest)?;
    let mut staged = Staged {
        tmp,
        dest: dest.to_path_buf(),
        id,
        done: false,
    };
    let res = (|| -> std::io::Result<()> {
        let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
        body(&mut w)?;
        let file = w.into_inner().map_err(|e| e.into_error())?;
        file.set_permissions(std::fs::Permissions::from_mode(mode))?;
        file.sync_all()
    })();
    match res {
        Ok(()) => Ok(staged),
        Err(e) => {
            discard(&staged.tmp, staged.id);
            staged.done = true;
            Err(CoreError::io(dest, "writing", e))
        }
    }
}

/// Rename staged files over their destinations, in the given order, under an exclusive
/// lock on each directory involved (concurrent publishers into one directory take turns,
/// so a set of files always comes from one publisher). A set of more than one file is
/// journaled first (see the module docs), so that a process killed between the renames
/// leaves a set that the next write into the directory completes. On a failed rename the
/// remaining temporary files are removed and the error names the destination.
pub fn publish(mut files: Vec<Staged>) -> Result<(), CoreError> {
    let mut dirs: Vec<PathBuf> = files.iter().map(|s| parent_dir(&s.dest)).collect();
    dirs.sort();
    dirs.dedup();
    // held until the end of this function (closing the descriptors releases the locks)
    let _locks: Vec<Option<File>> = dirs.iter().map(|d| lock_dir(d)).collect();
    let journals: Vec<(PathBuf, u64)> = if files.len() > 1 {
        dirs.iter()
            .filter_map(|d| write_journal(d, &files))
            .collect()
    } else {
        Vec::new()
    };
    // Only the renames run under the live-temporaries lock, which the signal cleanup waits
    // for: a SIGTERM never removes the temporary files of a set whose renames have begun
    // (the set is published whole, then the process ends by the signal), and the journal's
    // and the directories' syncs do not hold up other threads' writes. A SIGTERM before the
    // renames removes the journal with the temporaries.
    let mut result = Ok(());
    {
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        for s in files.iter_mut() {
            if let Err(e) = std::fs::rename(&s.tmp, &s.dest) {
                result = Err(CoreError::io(&s.dest, "replacing", e));
                break;
            }
            s.done = true;
            live.unregister(s.id);
        }
    }
    for d in &dirs {
        if let Ok(f) = File::open(d) {
            let _ = f.sync_all();
        }
    }
    for (j, id) in journals {
        discard(&j, id);
    }
    // on an error, `files` drops here: the unpublished temporary files are removed
    result
}

/// Write and sync the journal of the renames of `files` that fall in `dir` (one line each,
/// the temporary's and the destination's names in hex, then `end`); its path and its id
/// among the live temporaries (so that the signal cleanup removes it too), or `None` when
/// `dir` holds none of them or the journal cannot be written (the renames then run without
/// one, each still atomic).
fn write_journal(dir: &Path, files: &[Staged]) -> Option<(PathBuf, u64)> {
    let mut body = Vec::new();
    for s in files.iter().filter(|s| parent_dir(&s.dest) == dir) {
        let (t, d) = (s.tmp.file_name()?, s.dest.file_name()?);
        body.extend_from_slice(hex(t.as_bytes()).as_bytes());
        body.push(b'\t');
        body.extend_from_slice(hex(d.as_bytes()).as_bytes());
        body.push(b'\n');
    }
    if body.is_empty() {
        return None;
    }
    body.extend_from_slice(b"end\n");
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    let path = dir.join(format!("{JOURNAL_MARK}{}.{n}", std::process::id()));
    // nothing is removed when the name is taken: the file there is not ours
    let (mut f, id) = create_registered(&path).ok()?;
    let written = (|| -> std::io::Result<()> {
        f.write_all(&body)?;
        f.sync_all()?;
        File::open(dir)?.sync_all()
    })();
    if written.is_ok() {
        return Some((path, id));
    }
    discard(&path, id);
    None
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &[u8]) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    s.chunks(2)
        .map(|c| u8::from_str_radix(std::str::from_utf8(c).ok()?, 16).ok())
        .collect()
}

/// Complete the sets in `dir` whose publishing process was killed between its renames:
/// for every journal of a process that no longer exists, rename each temporary file it
/// names that is still there over its destination, unless the destination was written
/// after the journal (then the temporary is left to [`stage`]'s cleanup), and remove the
/// journal. A journal without its last line was cut off before any rename: it is removed.
/// [`stage`] calls this first; a reader that wants the directory whole may call it too.
pub fn complete_interrupted(dir: &Path) {
    tidy(dir, None);
}

/// One pass over `dir` for what processes killed outright left there: the journals of their
/// interrupted sets are replayed ([`complete_interrupted`]), then their temporary files of
/// `name` are removed. Files of live processes and anything that is not a regular file are
/// left alone.
fn tidy(dir: &Path, name: Option<&OsStr>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let prefix = name.map(temp_prefix);
    let (mut journals, mut stale) = (Vec::new(), Vec::new());
    for ent in rd.flatten() {
        let fname = ent.file_name();
        let b = fname.as_bytes();
        let (rest, journal) = if let Some(r) = b.strip_prefix(JOURNAL_MARK.as_bytes()) {
            (r, true)
        } else if let Some(r) = prefix.as_ref().and_then(|p| b.strip_prefix(p.as_slice())) {
            (r, false)
        } else {
            continue;
        };
        let pid: Option<u32> = rest
            .split(|&c| c == b'.')
            .next()
            .and_then(|p| std::str::from_utf8(p).ok())
            .and_then(|p| p.parse().ok());
        let dead = matches!(pid, Some(pid) if pid != std::process::id() && !process_alive(pid));
        if dead && ent.file_type().map(|t| t.is_file()).unwrap_or(false) {
            if journal {
                journals.push(ent.path());
            } else {
                stale.push(ent.path());
            }
        }
    }
    if !journals.is_empty() {
        let _lock = lock_dir(dir);
        for j in journals {
            let Ok(meta) = std::fs::symlink_metadata(&j) else {
                continue; // completed by another process meanwhile
            };
            if meta.len() <= JOURNAL_MAX {
                if let Ok(body) = std::fs::read(&j) {
                    replay_journal(dir, &body, meta.modified().ok());
                }
            }
            let _ = std::fs::remove_file(&j);
        }
        if let Ok(f) = File::open(dir) {
            let _ = f.sync_all();
        }
    }
    // a temporary that a journal put in place is gone already
    for t in stale {
        let _ = std::fs::remove_file(t);
    }
}

fn replay_journal(dir: &Path, body: &[u8], written: Option<std::time::SystemTime>) {
    let lines: Vec<&[u8]> = body.split(|&c| c == b'\n').collect();
    // complete journals end with "end\n" (the split leaves an empty last piece)
    if lines.len() < 3 || lines[lines.len() - 2] != b"end" || !lines[lines.len() - 1].is_empty() {
        return;
    }
    for line in &lines[..lines.len() - 2] {
        let mut parts = line.split(|&c| c == b'\t');
        let (Some(t), Some(d), None) = (parts.next(), parts.next(), parts.next()) else {
            return;
        };
        let (Some(t), Some(d)) = (unhex(t), unhex(d)) else {
            return;
        };
        // plain names only: a journal never moves files out of its directory, and only a
        // temporary of the very destination (stage's naming) over it
        let plain = |n: &[u8]| !n.is_empty() && !n.contains(&b'/') && n != b"." && n != b"..";
        if !plain(&t) || !plain(&d) || !t.starts_with(&temp_prefix(OsStr::from_bytes(&d))) {
            return;
        }
        let (tmp, dest) = (
            dir.join(OsStr::from_bytes(&t)),
            dir.join(OsStr::from_bytes(&d)),
        );
        let tmp_is_file = std::fs::symlink_metadata(&tmp)
            .map(|m| m.file_type().is_file())
            .unwrap_or(false);
        let dest_newer = match (
            std::fs::symlink_metadata(&dest).and_then(|m| m.modified()),
            written,
        ) {
            (Ok(m), Some(w)) => m > w,
            _ => false,
        };
        if tmp_is_file && !dest_newer {
            let _ = std::fs::rename(&tmp, &dest);
        }
    }
}

fn parent_dir(p: &Path) -> PathBuf {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// `.NAME.tessera-tmp.` for a destination name (long names shortened).
fn temp_prefix(name: &OsStr) -> Vec<u8> {
    let b = name.as_bytes();
    let mut keep = b.len().min(NAME_KEEP);
    // do not split a UTF-8 sequence (names stay valid where they were)
    while keep < b.len() && keep > 0 && (b[keep] & 0xC0) == 0x80 {
        keep -= 1;
    }
    let mut s = Vec::with_capacity(keep + 32);
    s.push(b'.');
    s.extend_from_slice(&b[..keep]);
    s.extend_from_slice(TEMP_MARK.as_bytes());
    s
}

static SEQ: AtomicU64 = AtomicU64::new(0);

fn create_temp(dir: &Path, name: &OsStr, dest: &Path) -> Result<(File, PathBuf, u64), CoreError> {
    let prefix = temp_prefix(name);
    let pid = std::process::id();
    let mut last = None;
    for _ in 0..64 {
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let salt = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let mut tname = prefix.clone();
        tname.extend_from_slice(format!("{pid}.{n}{salt:08x}").as_bytes());
        let tmp = dir.join(OsStr::from_bytes(&tname));
        match create_registered(&tmp) {
            Ok((f, id)) => return Ok((f, tmp, id)),
            Err(e) => {
                if e.kind() != std::io::ErrorKind::AlreadyExists {
                    return Err(CoreError::io(
                        dest,
                        "creating a temporary file beside it",
                        e,
                    ));
                }
                last = Some(e);
            }
        }
    }
    Err(CoreError::io(
        dest,
        "creating a temporary file beside it",
        last.unwrap_or_else(|| std::io::Error::other("no free temporary name")),
    ))
}

/// Create a new file readable and writable by its owner only; fails (`AlreadyExists`) when
/// anything, including a symlink, is at `path` (`O_EXCL`; `O_NOFOLLOW` as well).
fn open_private_new(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

fn process_alive(pid: u32) -> bool {
    // SAFETY: kill with signal 0 only checks whether the process exists; no signal is sent.
    let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// The process umask, read from `/proc/self/status` (no change to the process state);
/// `022` when it cannot be read.
fn umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}

/// An exclusive advisory lock on a directory (released when the file is closed); `None`
/// when the directory cannot be opened or locked (the renames are still atomic one by one).
fn lock_dir(dir: &Path) -> Option<File> {
    let f = File::open(dir).ok()?;
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor we own; it blocks until the lock is granted.
    let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
    (r == 0).then_some(f)
}

// ---------------------------------------------------------------------------------------
// Live temporary files, removed on SIGINT / SIGTERM / SIGHUP

struct Live {
    next: u64,
    paths: Vec<(u64, PathBuf)>,
}

static LIVE: Mutex<Live> = Mutex::new(Live {
    next: 1,
    paths: Vec::new(),
});

/// Create the temporary file and register it under one lock. The signal cleanup takes the
/// lock and keeps it until the process ends, so it either sees the file or runs before the
/// file exists and then blocks its creation: a signal at any moment leaves nothing behind.
/// (Registering first and creating after the lock was released let a cleanup in between
/// remove a path that did not exist yet, and the file created next stayed.)
fn create_registered(p: &Path) -> std::io::Result<(File, u64)> {
    let mut l = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let f = open_private_new(p)?;
    let id = l.next;
    l.next += 1;
    l.paths.push((id, p.to_path_buf()));
    Ok((f, id))
}

impl Live {
    fn unregister(&mut self, id: u64) {
        if let Some(i) = self.paths.iter().position(|(k, _)| *k == id) {
            self.paths.swap_remove(i);
        }
    }
}

fn unregister(id: u64) {
    LIVE.lock()
        .unwrap_or_else(|e| e.into_inner())
        .unregister(id);
}

/// Remove a file of ours that was registered as live (`create_registered`), then forget it.
fn discard(path: &Path, id: u64) {
    let _ = std::fs::remove_file(path);
    unregister(id);
}

/// The temporary files being written right now (for tests and diagnostics).
pub fn live_temporaries() -> Vec<PathBuf> {
    let l = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    l.paths.iter().map(|(_, p)| p.clone()).collect()
}

static PIPE_W: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

extern "C" fn on_signal(sig: libc::c_int) {
    let fd = PIPE_W.load(Ordering::Relaxed);
    let b = sig as u8;
    // SAFETY: write(2) is async-signal-safe; the pipe and the byte outlive the call.
    unsafe {
        libc::write(fd, &b as *const u8 as *const libc::c_void, 1);
    }
}

/// Remove the temporary files being written when the process gets `SIGINT`, `SIGTERM` or
/// `SIGHUP`, then end it by that signal (exit status 128 + signal, as without a handler).
/// Installed once per process; programs that handle these signals themselves (a Python
/// interpreter, a server with its own shutdown) do not call it.
pub fn cleanup_on_signals() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2 fills two descriptors that this process then owns for its lifetime.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return;
        }
        PIPE_W.store(fds[1], Ordering::Relaxed);
        let rfd = fds[0];
        let spawned = std::thread::Builder::new()
            .name("tessera-signal-cleanup".into())
            .spawn(move || loop {
                let mut b = 0u8;
                // SAFETY: reading one byte into a local from the pipe's read end.
                let n = unsafe { libc::read(rfd, &mut b as *mut u8 as *mut libc::c_void, 1) };
                if n == 1 {
                    let sig = b as libc::c_int;
                    // The lock stays held until the process ends: no temporary file can be
                    // created after the ones seen here are removed.
                    let live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
                    for (_, p) in &live.paths {
                        let _ = std::fs::remove_file(p);
                    }
                    // SAFETY: restoring the default disposition and re-raising ends the
                    // process by the signal, as if no handler had been installed.
                    unsafe {
                        libc::signal(sig, libc::SIG_DFL);
                        libc::raise(sig);
                    }
                    std::process::exit(128 + sig);
                } else if n == 0 {
                    return;
                }
            });
        if spawned.is_err() {
            return;
        }
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            // SAFETY: installs an async-signal-safe handler (it only writes one byte to a pipe).
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_signal as *const () as usize;
                sa.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut sa.sa_mask);
                libc::sigaction(sig, &sa, std::ptr::null_mut());
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "tessera-atomic-{tag}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn names(d: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn replaces_and_leaves_no_temporary() {
        let d = tmpdir("replace");
        let p = d.join("out.txt");
        std::fs::write(&p, b"old").unwrap();
        write_bytes(&p, b"new").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        assert_eq!(names(&d), ["out.txt"]);
        assert!(live_temporaries().iter().all(|t| !t.starts_with(&d)));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn failed_body_keeps_old_file_and_removes_temporary() {
        let d = tmpdir("fail");
        let p = d.join("out.txt");
        std::fs::write(&p, b"old").unwrap();
        let e = write_atomic(&p, |w| {
            w.write_all(b"partial")?;
            Err(std::io::Error::other("disk full"))
        })
        .unwrap_err();
        assert!(e.to_string().contains("disk full"), "{e}");
        assert_eq!(std::fs::read(&p).unwrap(), b"old");
        assert_eq!(names(&d), ["out.txt"]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn planted_symlink_at_a_temporary_name_is_never_followed() {
        let d = tmpdir("symlink");
        let victim = d.join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        // a symlink (live or dangling) planted at a temporary name is not opened
        let planted = d.join(".out.txt.tessera-tmp.1.0");
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        let e = open_private_new(&planted).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
        let dangling = d.join(".out.txt.tessera-tmp.1.1");
        std::os::unix::fs::symlink(d.join("nowhere"), &dangling).unwrap();
        assert!(open_private_new(&dangling).is_err());
        assert!(!d.join("nowhere").exists());
        // a symlink at the destination itself is replaced, not followed
        let p = d.join("out.txt");
        std::os::unix::fs::symlink(&victim, &p).unwrap();
        write_bytes(&p, b"new").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert!(!std::fs::symlink_metadata(&p)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn stale_temporaries_of_dead_processes_are_removed() {
        let d = tmpdir("stale");
        let p = d.join("out.txt");
        // a pid that cannot exist (above the kernel's pid_max limit of 2^22)
        let stale = d.join(format!(".out.txt{TEMP_MARK}{}.0", 9_999_999));
        std::fs::write(&stale, b"left by SIGKILL").unwrap();
        // one of a live process (ours, another name) and an unrelated file stay
        let other = d.join(format!(".other.txt{TEMP_MARK}{}.0", 9_999_999));
        std::fs::write(&other, b"x").unwrap();
        write_bytes(&p, b"new").unwrap();
        assert_eq!(
            names(&d),
            [format!(".other.txt{TEMP_MARK}9999999.0"), "out.txt".into()]
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn published_file_gets_a_plain_mode() {
        let d = tmpdir("mode");
        let p = d.join("out.txt");
        write_bytes(&p, b"x").unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o666 & !umask());
        // replacing keeps the mode of the replaced file
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_bytes(&p, b"y").unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn temporary_is_created_private() {
        let d = tmpdir("private");
        let p = d.join("out.txt");
        let seen = std::cell::Cell::new(0u32);
        write_atomic(&p, |w| {
            w.write_all(b"x")?;
            let t = live_temporaries()
                .into_iter()
                .find(|t| t.starts_with(&d))
                .expect("a live temporary");
            seen.set(std::fs::metadata(t)?.permissions().mode() & 0o777);
            Ok(())
        })
        .unwrap();
        assert_eq!(seen.get(), 0o600);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn directory_destination_is_an_error_on_one_line() {
        let d = tmpdir("dir");
        let e = write_bytes(&d, b"x").unwrap_err().to_string();
        assert!(e.ends_with("writing: is a directory"), "{e}");
        assert!(!e.contains("os error"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn publish_of_a_set_renames_all_and_drops_clean_up() {
        let d = tmpdir("set");
        let a = stage(&d.join("m.node"), |w| w.write_all(b"n")).unwrap();
        let b = stage(&d.join("m.ele"), |w| w.write_all(b"e")).unwrap();
        assert_eq!(names(&d).len(), 2); // two temporaries, nothing published yet
        publish(vec![a, b]).unwrap();
        assert_eq!(names(&d), ["m.ele", "m.node"]); // and no journal left
        let c = stage(&d.join("x"), |w| w.write_all(b"x")).unwrap();
        drop(c);
        assert_eq!(names(&d), ["m.ele", "m.node"]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// What a process killed between the renames of a set leaves (its pid is a dead
    /// one): the first file published, the second's temporary, and the journal.
    fn interrupted_set(d: &Path, journal_end: &str) -> PathBuf {
        let pid = 9_999_999; // above the kernel's pid_max limit of 2^22: never alive
        std::fs::write(d.join("r.vtu"), b"old vtu").unwrap();
        std::fs::write(d.join("summary.json"), b"old summary").unwrap();
        let tv = format!(".r.vtu{TEMP_MARK}{pid}.0");
        let ts = format!(".summary.json{TEMP_MARK}{pid}.1");
        std::fs::write(d.join(&tv), b"new vtu").unwrap();
        std::fs::write(d.join(&ts), b"new summary").unwrap();
        let journal = d.join(format!("{JOURNAL_MARK}{pid}.2"));
        let line = |t: &str, n: &str| format!("{}\t{}\n", hex(t.as_bytes()), hex(n.as_bytes()));
        std::fs::write(
            &journal,
            format!(
                "{}{}{journal_end}",
                line(&tv, "r.vtu"),
                line(&ts, "summary.json")
            ),
        )
        .unwrap();
        // the kill came after the first rename
        std::fs::rename(d.join(&tv), d.join("r.vtu")).unwrap();
        journal
    }

    #[test]
    fn a_set_cut_off_between_its_renames_is_completed_by_the_next_write() {
        let d = tmpdir("interrupted");
        interrupted_set(&d, "end\n");
        assert_eq!(
            std::fs::read(d.join("summary.json")).unwrap(),
            b"old summary"
        );
        // any write into the directory completes the set first
        write_bytes(&d.join("other.txt"), b"x").unwrap();
        assert_eq!(std::fs::read(d.join("r.vtu")).unwrap(), b"new vtu");
        assert_eq!(
            std::fs::read(d.join("summary.json")).unwrap(),
            b"new summary"
        );
        assert_eq!(names(&d), ["other.txt", "r.vtu", "summary.json"]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_cut_off_journal_or_a_newer_destination_is_not_replayed() {
        // a journal without its last line was cut off before any rename
        let d = tmpdir("cutjournal");
        interrupted_set(&d, "");
        complete_interrupted(&d);
        assert_eq!(
            std::fs::read(d.join("summary.json")).unwrap(),
            b"old summary"
        );
        assert!(names(&d).iter().all(|n| !n.starts_with(JOURNAL_MARK)));
        std::fs::remove_dir_all(&d).unwrap();
        // a destination written after the journal is not overwritten
        let d = tmpdir("newerdest");
        let j = interrupted_set(&d, "end\n");
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        File::options()
            .write(true)
            .open(&j)
            .unwrap()
            .set_modified(old)
            .unwrap();
        std::fs::write(d.join("summary.json"), b"written since").unwrap();
        complete_interrupted(&d);
        assert_eq!(
            std::fs::read(d.join("summary.json")).unwrap(),
            b"written since"
        );
        assert!(!j.exists());
        std::fs::remove_dir_all(&d).unwrap();
        // a journal naming a path outside its directory is ignored
        let d = tmpdir("badjournal");
        std::fs::create_dir_all(d.join("sub")).unwrap();
        std::fs::write(d.join("sub/keep"), b"keep").unwrap();
        let j = d.join(format!("{JOURNAL_MARK}9999999.0"));
        std::fs::write(
            &j,
            format!("{}\t{}\nend\n", hex(b"sub/keep"), hex(b"stolen")),
        )
        .unwrap();
        complete_interrupted(&d);
        assert_eq!(std::fs::read(d.join("sub/keep")).unwrap(), b"keep");
        assert_eq!(names(&d), ["sub"]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn concurrent_writers_never_mix_a_set() {
        let d = tmpdir("concurrent");
        let threads: Vec<_> = (0..4u8)
            .map(|t| {
                let d = d.clone();
                std::thread::spawn(move || {
                    for _ in 0..25 {
                        let body = vec![b'a' + t; 100_000];
                        let a = stage(&d.join("r.vtu"), |w| w.write_all(&body)).unwrap();
                        let b =
                            stage(&d.join("summary.json"), |w| w.write_all(&[b'a' + t])).unwrap();
                        publish(vec![a, b]).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let v = std::fs::read(d.join("r.vtu")).unwrap();
        let s = std::fs::read(d.join("summary.json")).unwrap();
        assert_eq!(v.len(), 100_000);
        assert!(v.iter().all(|&c| c == s[0]));
        assert_eq!(names(&d), ["r.vtu", "summary.json"]);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
