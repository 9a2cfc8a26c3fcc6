//! Bounded input: reading a user's file never blocks forever, never reads without end and
//! never inflates a gzip stream without limit.
//!
//! - Only regular files are read: a device (`/dev/zero`, `/dev/stdin` of a terminal), a FIFO,
//!   a socket or a directory is refused before any byte is read (the file is opened
//!   non-blocking, so a FIFO cannot hang the open).
//! - A file larger than the memory budget ([`crate::memory::budget`]) is refused by its size.
//! - A gzip stream is inflated incrementally with two limits ([`GzipLimits`]): the output may
//!   not exceed `max_ratio` times the compressed bytes consumed so far (checked once the
//!   output passes 32 MiB, so small files of any ratio pass) nor `max_bytes` in all. A
//!   decompression bomb (DEFLATE reaches ~1030:1) is stopped after ~32 MiB, in milliseconds.
//!   Both limits are configurable (`TESSERA_GZIP_MAX_RATIO`, `TESSERA_GZIP_MAX_BYTES`) and
//!   the error says so.
//!
//! ```
//! use tessera_core::input::{gunzip, GzipLimits};
//! use std::io::Write;
//! let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
//! enc.write_all(&vec![0u8; 64 << 20]).unwrap();
//! let bomb = enc.finish().unwrap(); // 64 MiB of zeros in ~64 KiB
//! let e = gunzip("bomb.gz".as_ref(), &bomb, &GzipLimits::default()).unwrap_err();
//! assert!(e.to_string().contains("TESSERA_GZIP_MAX_RATIO"));
//! ```

use crate::error::CoreError;
use std::io::Read;
use std::path::Path;

/// Limits on inflating a gzip stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GzipLimits {
    /// Largest allowed ratio of inflated to consumed compressed bytes.
    pub max_ratio: u64,
    /// Largest allowed inflated size.
    pub max_bytes: u64,
}

/// The inflated size below which the ratio is not checked.
pub const RATIO_FLOOR: u64 = 32 << 20;

/// Default ratio limit: real meshes and fields compress 3-20 fold; DEFLATE's maximum is ~1030.
pub const DEFAULT_MAX_RATIO: u64 = 250;

impl Default for GzipLimits {
    /// `TESSERA_GZIP_MAX_RATIO` (default 250) and `TESSERA_GZIP_MAX_BYTES` (default: the
    /// memory budget).
    fn default() -> Self {
        let ratio = std::env::var("TESSERA_GZIP_MAX_RATIO")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|&r| r > 0)
            .unwrap_or(DEFAULT_MAX_RATIO);
        let bytes = std::env::var("TESSERA_GZIP_MAX_BYTES")
            .ok()
            .and_then(|v| crate::memory::parse_size(&v).ok())
            .unwrap_or_else(|| crate::memory::budget().bytes);
        GzipLimits {
            max_ratio: ratio,
            max_bytes: bytes,
        }
    }
}

/// What kind of non-regular file a file type is.
fn special_kind(ft: &std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_file() {
        None
    } else if ft.is_dir() {
        Some("a directory")
    } else if ft.is_char_device() {
        Some("a character device")
    } else if ft.is_block_device() {
        Some("a block device")
    } else if ft.is_fifo() {
        Some("a FIFO (named pipe)")
    } else if ft.is_socket() {
        Some("a socket")
    } else {
        Some("a special file")
    }
}

/// Open a regular file for reading; anything else is an error before a byte is read.
pub fn open_regular(path: &Path) -> Result<(std::fs::File, u64), CoreError> {
    // refuse by the path's type first (a FIFO's open would block without O_NONBLOCK)
    let m = std::fs::metadata(path).map_err(|e| CoreError::io(path, "cannot read", e))?;
    if let Some(kind) = special_kind(&m.file_type()) {
        return Err(CoreError::NotRegularFile {
            path: path.to_path_buf(),
            kind,
        });
    }
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| CoreError::io(path, "cannot read", e))?;
    // the file may have been swapped between the two looks: check what was opened
    let m = f
        .metadata()
        .map_err(|e| CoreError::io(path, "cannot read", e))?;
    if let Some(kind) = special_kind(&m.file_type()) {
        return Err(CoreError::NotRegularFile {
            path: path.to_path_buf(),
            kind,
        });
    }
    Ok((f, m.len()))
}

/// Read a whole regular file, refusing files larger than the memory budget.
pub fn read_file(path: &Path) -> Result<Vec<u8>, CoreError> {
    let (f, len) = open_regular(path)?;
    let b = crate::memory::budget();
    if len > b.bytes {
        return Err(CoreError::TooLarge {
            path: path.to_path_buf(),
            msg: format!(
                "the file is {} GB, {} GB of memory available ({}); {}",
                crate::error::gb(len),
                crate::error::gb(b.bytes),
                b.limit,
                crate::memory::HINT
            ),
        });
    }
    let mut out = Vec::with_capacity(len as usize);
    // a file that grows while it is read stops at the budget
    f.take(b.bytes.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| CoreError::io(path, "cannot read", e))?;
    if out.len() as u64 > b.bytes {
        return Err(CoreError::TooLarge {
            path: path.to_path_buf(),
            msg: format!(
                "the file grew past the memory budget while it was read ({} GB)",
                crate::error::gb(b.bytes)
            ),
        });
    }
    Ok(out)
}

/// Whether data starts with the gzip magic bytes.
pub fn is_gzip(data: &[u8]) -> bool {
    data.starts_with(&[0x1f, 0x8b])
}

/// Read a regular file, inflating it when it starts with the gzip magic bytes (with the
/// default [`GzipLimits`]).
pub fn read_maybe_gzip(path: &Path) -> Result<Vec<u8>, CoreError> {
    let raw = read_file(path)?;
    if is_gzip(&raw) {
        gunzip(path, &raw, &GzipLimits::default())
    } else {
        Ok(raw)
    }
}

/// A reader over a slice that counts the bytes taken from it.
struct Counting<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Read for Counting<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(self.data.len() - self.pos);
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// Inflate a (multi-member) gzip stream within `limits`; `path` labels the errors.
pub fn gunzip(path: &Path, data: &[u8], limits: &GzipLimits) -> Result<Vec<u8>, CoreError> {
    let mut src = Counting { data, pos: 0 };
    let mut dec =
        flate2::bufread::MultiGzDecoder::new(std::io::BufReader::with_capacity(64 << 10, &mut src));
    let mut out: Vec<u8> = Vec::with_capacity((data.len() as u64 * 4).min(RATIO_FLOOR) as usize);
    let mut chunk = vec![0u8; 1 << 20];
    loop {
        let n = match dec.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(CoreError::Gzip {
                    path: path.to_path_buf(),
                    msg: crate::error::os_message(&e),
                })
            }
        };
        let total = out.len() as u64 + n as u64;
        let consumed = dec.get_ref().get_ref().pos.max(1) as u64;
        if total > limits.max_bytes {
            return Err(CoreError::TooLarge {
                path: path.to_path_buf(),
                msg: format!(
                    "the gzip stream inflates to more than {} bytes (the limit: {}); if the file is genuine, raise it with TESSERA_GZIP_MAX_BYTES=SIZE",
                    limits.max_bytes,
                    if std::env::var_os("TESSERA_GZIP_MAX_BYTES").is_some() {
                        "TESSERA_GZIP_MAX_BYTES"
                    } else {
                        "the memory budget"
                    }
                ),
            });
        }
        if total > RATIO_FLOOR && total > limits.max_ratio.saturating_mul(consumed) {
            return Err(CoreError::TooLarge {
                path: path.to_path_buf(),
                msg: format!(
                    "the gzip stream inflates more than {}-fold ({} MiB from {} KiB so far), like a decompression bomb; if the file is genuine, raise the limit with TESSERA_GZIP_MAX_RATIO=N",
                    limits.max_ratio,
                    total >> 20,
                    consumed >> 10
                ),
            });
        }
        out.extend_from_slice(&chunk[..n]);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn ordinary_streams_inflate() {
        let text: Vec<u8> = (0..200_000u32)
            .flat_map(|i| format!("{i} {} {}\n", i * 7 % 1013, i % 17).into_bytes())
            .collect();
        let z = gz(&text);
        assert_eq!(
            gunzip(Path::new("x"), &z, &GzipLimits::default()).unwrap(),
            text
        );
        // two members
        let mut two = gz(b"ab");
        two.extend(gz(b"cd"));
        assert_eq!(
            gunzip(Path::new("x"), &two, &GzipLimits::default()).unwrap(),
            b"abcd"
        );
        // small files of any ratio pass
        let zeros = gz(&vec![0u8; 1 << 20]);
        assert_eq!(
            gunzip(Path::new("x"), &zeros, &GzipLimits::default())
                .unwrap()
                .len(),
            1 << 20
        );
    }

    #[test]
    fn bombs_stop_early_with_a_hint() {
        let z = gz(&vec![0u8; 200 << 20]);
        let t = std::time::Instant::now();
        let Err(e) = gunzip(Path::new("b.msh.gz"), &z, &GzipLimits::default()) else {
            panic!("a bomb is refused")
        };
        let e = e.to_string();
        assert!(t.elapsed().as_secs_f64() < 2.0);
        assert!(
            e.starts_with("b.msh.gz: the gzip stream inflates more than 250-fold"),
            "{e}"
        );
        assert!(e.contains("TESSERA_GZIP_MAX_RATIO"), "{e}");
        // the absolute limit
        let lim = GzipLimits {
            max_ratio: 10_000,
            max_bytes: 1 << 20,
        };
        let Err(e) = gunzip(Path::new("b.gz"), &z, &lim) else {
            panic!("over the absolute limit")
        };
        let e = e.to_string();
        assert!(e.contains("TESSERA_GZIP_MAX_BYTES"), "{e}");
        // raised limits let it through
        let lim = GzipLimits {
            max_ratio: 10_000,
            max_bytes: u64::MAX,
        };
        assert_eq!(
            gunzip(Path::new("b.gz"), &z, &lim).unwrap().len(),
            200 << 20
        );
    }

    #[test]
    fn corrupt_and_truncated_streams_are_errors() {
        let z = gz(b"hello world hello world");
        let Err(e) = gunzip(Path::new("t.gz"), &z[..z.len() - 5], &GzipLimits::default()) else {
            panic!("truncated")
        };
        let e = e.to_string();
        assert!(e.starts_with("t.gz: gzip stream: "), "{e}");
        let mut bad = z.clone();
        bad[12] ^= 0xff;
        assert!(gunzip(Path::new("t.gz"), &bad, &GzipLimits::default()).is_err());
    }

    #[test]
    fn special_files_are_refused_before_reading() {
        let e = read_file(Path::new("/dev/zero")).err().unwrap().to_string();
        assert_eq!(e, "/dev/zero: is a character device, not a regular file");
        let d = std::env::temp_dir();
        let e = read_file(&d).err().unwrap().to_string();
        assert!(e.ends_with("is a directory, not a regular file"), "{e}");
        // a FIFO with no writer: refused at once, not blocked on
        let fifo = d.join(format!("tessera-input-fifo-{}", std::process::id()));
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read_file(&fifo).err().unwrap().to_string();
        assert!(
            e.ends_with("is a FIFO (named pipe), not a regular file"),
            "{e}"
        );
        std::fs::remove_file(&fifo).unwrap();
        let e = read_file(Path::new("/nonexistent/x.msh"))
            .err()
            .unwrap()
            .to_string();
        assert_eq!(
            e,
            "/nonexistent/x.msh: cannot read: No such file or directory"
        );
    }
}
