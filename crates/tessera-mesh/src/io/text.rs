//! A cursor over a file's bytes that reads whitespace-separated tokens (tracking the
//! line for error messages) and little/big-endian binary values (tracking the byte offset).
//!
//! Every reader in [`crate::io`] parses through this cursor, so every parse error names
//! the file and the line (text) or byte offset (binary) where it was found.

use crate::MeshError;
use std::path::Path;
use std::str::FromStr;

pub(crate) struct Cursor<'a> {
    pub data: &'a [u8],
    pub pos: usize,
    /// 1-based line of `pos`
    pub line: usize,
    /// line where the last token started
    pub tok_line: usize,
    /// offset where the last token or binary value started
    pub tok_pos: usize,
    pub path: &'a Path,
    /// comment character (rest of the line is skipped), e.g. `#`
    pub comment: Option<u8>,
    /// report byte offsets instead of lines (binary sections)
    pub binary: bool,
    /// binary values are big-endian
    pub swap: bool,
    /// remembered locations are cell indices (formats without lines, such as VTU)
    pub cells: bool,
}

impl<'a> Cursor<'a> {
    pub fn new(path: &'a Path, data: &'a [u8]) -> Self {
        Cursor {
            data,
            pos: 0,
            line: 1,
            tok_line: 1,
            tok_pos: 0,
            path,
            comment: None,
            binary: false,
            swap: false,
            cells: false,
        }
    }

    /// A parse error at the last token (line) or binary value (offset).
    pub fn err(&self, msg: impl Into<String>) -> MeshError {
        if self.binary {
            MeshError::parse_offset(self.path, self.tok_pos as u64, msg)
        } else {
            MeshError::parse_line(self.path, self.tok_line, msg)
        }
    }

    /// A parse error at the current position (used for unexpected end of file).
    pub fn err_here(&self, msg: impl Into<String>) -> MeshError {
        if self.binary {
            MeshError::parse_offset(self.path, self.pos as u64, msg)
        } else {
            MeshError::parse_line(self.path, self.line, msg)
        }
    }

    fn skip_ws(&mut self) {
        while self.pos < self.data.len() {
            let c = self.data[self.pos];
            if c == b'\n' {
                self.line += 1;
                self.pos += 1;
            } else if c == b' ' || c == b'\t' || c == b'\r' || c == 0x0c {
                self.pos += 1;
            } else if Some(c) == self.comment {
                while self.pos < self.data.len() && self.data[self.pos] != b'\n' {
                    self.pos += 1;
                }
            } else {
                break;
            }
        }
    }

    /// The next whitespace-separated token, or None at the end of the data.
    pub fn token(&mut self) -> Option<&'a [u8]> {
        self.skip_ws();
        if self.pos >= self.data.len() {
            self.tok_line = self.line;
            self.tok_pos = self.pos;
            return None;
        }
        let start = self.pos;
        self.tok_line = self.line;
        self.tok_pos = start;
        while self.pos < self.data.len() {
            let c = self.data[self.pos];
            if c == b' '
                || c == b'\n'
                || c == b'\t'
                || c == b'\r'
                || c == 0x0c
                || Some(c) == self.comment
            {
                break;
            }
            self.pos += 1;
        }
        Some(&self.data[start..self.pos])
    }

    /// The next token; an error naming `what` at the end of the data.
    pub fn expect_token(&mut self, what: &str) -> Result<&'a [u8], MeshError> {
        match self.token() {
            Some(t) => Ok(t),
            None => Err(self.err_here(format!(
                "unexpected end of file: expected {what} (the file is truncated)"
            ))),
        }
    }

    /// Expect a keyword (exact, case-sensitive).
    pub fn expect_keyword(&mut self, kw: &str) -> Result<(), MeshError> {
        let t = self.expect_token(&format!("`{kw}`"))?;
        if t != kw.as_bytes() {
            return Err(self.err(format!("expected `{kw}`, found `{}`", show(t))));
        }
        Ok(())
    }

    /// Parse the next token as a number of type `T`.
    pub fn num<T: FromStr>(&mut self, what: &str) -> Result<T, MeshError> {
        let t = self.expect_token(what)?;
        std::str::from_utf8(t)
            .ok()
            .and_then(|s| s.parse::<T>().ok())
            .ok_or_else(|| self.err(format!("expected {what}, found `{}`", show(t))))
    }

    /// A non-negative integer (fast path).
    pub fn uint(&mut self, what: &str) -> Result<u64, MeshError> {
        let t = self.expect_token(what)?;
        let mut v: u64 = 0;
        let digits = if t.first() == Some(&b'+') { &t[1..] } else { t };
        if digits.is_empty() || digits.len() > 19 {
            return Err(self.err(format!(
                "expected {what} (a non-negative integer), found `{}`",
                show(t)
            )));
        }
        for &c in digits {
            if !c.is_ascii_digit() {
                return Err(self.err(format!(
                    "expected {what} (a non-negative integer), found `{}`",
                    show(t)
                )));
            }
            v = v * 10 + (c - b'0') as u64;
        }
        Ok(v)
    }

    /// A count or index that must fit in `usize` and be at most `max`.
    pub fn count(&mut self, what: &str, max: u64) -> Result<usize, MeshError> {
        let v = self.uint(what)?;
        if v > max {
            return Err(self.err(format!("{what} {v} is too large (at most {max})")));
        }
        Ok(v as usize)
    }

    /// A signed integer.
    pub fn int(&mut self, what: &str) -> Result<i64, MeshError> {
        self.num::<i64>(what)
    }

    /// A signed 32-bit integer (Gmsh's `int` tags): wider values are errors, never truncated.
    pub fn int32(&mut self, what: &str) -> Result<i32, MeshError> {
        let v = self.int(what)?;
        i32::try_from(v).map_err(|_| {
            self.err(format!(
                "{what} {v} is out of range (the format stores it as a 32-bit signed integer)"
            ))
        })
    }

    /// Bytes left after the cursor.
    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    /// Check a count `n` read from a header against the data that is left: each of the `n`
    /// records takes at least `min_bytes` bytes (for text, `2k - 1` for `k` numbers: a digit
    /// and a separator each), so a count the file cannot hold is an error before anything
    /// is allocated for it.
    pub fn check_count(&self, n: u64, min_bytes: u64, what: &str) -> Result<usize, MeshError> {
        let left = self.remaining() as u64;
        let need = n.saturating_mul(min_bytes.max(1));
        if need > left.saturating_add(1) || n > usize::MAX as u64 {
            return Err(self.err(format!(
                "{what} {n} cannot fit in the {left} bytes left in the file (each takes at least {min_bytes}): the count is wrong or the file is truncated"
            )));
        }
        Ok(n as usize)
    }

    /// Minimum bytes of a text record of `k` numbers (`k` digits and `k - 1` separators,
    /// plus the line end).
    pub fn text_record(k: u64) -> u64 {
        2 * k.max(1)
    }

    /// After the last record of a text file: the last token must have been ended by a
    /// separator (a newline, usually), not by the end of the data, or the file was cut in
    /// the middle of its last number.
    pub fn expect_terminated(&self, what: &str) -> Result<(), MeshError> {
        if self.pos >= self.data.len() {
            return Err(self.err(format!(
                "the file ends inside {what} (no line end after its last number): the file is truncated"
            )));
        }
        Ok(())
    }

    /// A finite floating-point coordinate.
    pub fn coord(&mut self, what: &str) -> Result<f64, MeshError> {
        let t = self.expect_token(what)?;
        let v = std::str::from_utf8(t)
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .ok_or_else(|| self.err(format!("expected {what} (a number), found `{}`", show(t))))?;
        if !v.is_finite() {
            return Err(self.err(format!("{what} is not finite (`{}`)", show(t))));
        }
        Ok(v)
    }

    /// Skip to just past the next newline (binary sections start after their header line).
    pub fn end_of_line(&mut self) {
        while self.pos < self.data.len() {
            let c = self.data[self.pos];
            self.pos += 1;
            if c == b'\n' {
                self.line += 1;
                break;
            }
        }
    }

    /// The rest of the current line, trimmed.
    pub fn rest_of_line(&mut self) -> &'a [u8] {
        let start = self.pos;
        while self.pos < self.data.len() && self.data[self.pos] != b'\n' {
            self.pos += 1;
        }
        let s = &self.data[start..self.pos];
        trim(s)
    }

    /// Skip forward past the next occurrence of `needle` (for unknown sections).
    pub fn skip_past(&mut self, needle: &[u8]) -> Result<(), MeshError> {
        let hay = &self.data[self.pos..];
        match hay.windows(needle.len()).position(|w| w == needle) {
            Some(i) => {
                if !self.binary {
                    self.line += hay[..i + needle.len()]
                        .iter()
                        .filter(|&&c| c == b'\n')
                        .count();
                }
                self.pos += i + needle.len();
                Ok(())
            }
            None => Err(self.err(format!(
                "missing `{}` (the file is truncated)",
                show(needle)
            ))),
        }
    }

    // ---- binary values ----

    pub fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8], MeshError> {
        self.tok_pos = self.pos;
        if self.data.len() - self.pos < n {
            return Err(MeshError::parse_offset(
                self.path,
                self.pos as u64,
                format!("unexpected end of data reading {what} (the file is truncated)"),
            ));
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub fn bin_i32(&mut self, what: &str) -> Result<i32, MeshError> {
        let b: [u8; 4] = self.bytes(4, what)?.try_into().expect("4 bytes");
        Ok(if self.swap {
            i32::from_be_bytes(b)
        } else {
            i32::from_le_bytes(b)
        })
    }

    /// An unsigned integer of `size` bytes (4 or 8), e.g. Gmsh's `size_t`.
    pub fn bin_uint(&mut self, size: usize, what: &str) -> Result<u64, MeshError> {
        if size == 4 {
            let b: [u8; 4] = self.bytes(4, what)?.try_into().expect("4 bytes");
            Ok(if self.swap {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            } as u64)
        } else {
            let b: [u8; 8] = self.bytes(8, what)?.try_into().expect("8 bytes");
            Ok(if self.swap {
                u64::from_be_bytes(b)
            } else {
                u64::from_le_bytes(b)
            })
        }
    }

    pub fn bin_f64(&mut self, what: &str) -> Result<f64, MeshError> {
        let b: [u8; 8] = self.bytes(8, what)?.try_into().expect("8 bytes");
        Ok(if self.swap {
            f64::from_be_bytes(b)
        } else {
            f64::from_le_bytes(b)
        })
    }

    /// A finite binary coordinate.
    pub fn bin_coord(&mut self, what: &str) -> Result<f64, MeshError> {
        let v = self.bin_f64(what)?;
        if !v.is_finite() {
            return Err(self.err(format!("{what} is not finite ({v})")));
        }
        Ok(v)
    }

    /// Where the last token/value was, for remembering element locations.
    pub fn location(&self) -> u64 {
        if self.binary {
            self.tok_pos as u64
        } else {
            self.tok_line as u64
        }
    }

    /// A remembered location as text (`line 12`, `byte 340`, `cell 7`).
    pub fn describe_loc(&self, loc: u64) -> String {
        if self.cells {
            format!("cell {loc}")
        } else if self.binary {
            format!("byte {loc}")
        } else {
            format!("line {loc}")
        }
    }

    /// A parse error at a remembered location.
    pub fn err_at(&self, loc: u64, msg: impl Into<String>) -> MeshError {
        if self.cells {
            MeshError::Parse {
                path: self.path.to_path_buf(),
                location: format!("cell {loc}"),
                msg: msg.into(),
            }
        } else if self.binary {
            MeshError::parse_offset(self.path, loc, msg)
        } else {
            MeshError::parse_line(self.path, loc as usize, msg)
        }
    }
}

/// A short printable form of a token for error messages.
pub(crate) fn show(t: &[u8]) -> String {
    let s = String::from_utf8_lossy(&t[..t.len().min(40)]).into_owned();
    let s: String = s
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if t.len() > 40 {
        format!("{s}...")
    } else {
        s
    }
}

pub(crate) fn trim(mut s: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = s {
        if first.is_ascii_whitespace() {
            s = rest
        } else {
            break;
        }
    }
    while let [rest @ .., last] = s {
        if last.is_ascii_whitespace() {
            s = rest
        } else {
            break;
        }
    }
    s
}

/// Map from arbitrary (possibly non-contiguous) node tags to dense indices.
pub(crate) enum TagMap {
    Dense { offset: u64, map: Vec<u32> },
    Sparse(std::collections::HashMap<u64, u32>),
}

impl TagMap {
    /// A map suited to tags in `min..=max` with `n` entries.
    pub fn new(min: u64, max: u64, n: usize) -> Self {
        if max >= min && max - min <= 4 * n as u64 + 1024 {
            TagMap::Dense {
                offset: min,
                map: vec![u32::MAX; (max - min + 1) as usize],
            }
        } else {
            TagMap::Sparse(std::collections::HashMap::with_capacity(n))
        }
    }
    /// Insert; false if the tag was present (or outside the dense range: then convert).
    pub fn insert(&mut self, tag: u64, idx: u32) -> bool {
        match self {
            TagMap::Dense { offset, map } => {
                if tag < *offset || tag - *offset >= map.len() as u64 {
                    // out of the announced range: fall back to a hash map
                    let mut h = std::collections::HashMap::with_capacity(map.len());
                    for (i, &v) in map.iter().enumerate() {
                        if v != u32::MAX {
                            h.insert(*offset + i as u64, v);
                        }
                    }
                    *self = TagMap::Sparse(h);
                    return self.insert(tag, idx);
                }
                let slot = &mut map[(tag - *offset) as usize];
                if *slot != u32::MAX {
                    return false;
                }
                *slot = idx;
                true
            }
            TagMap::Sparse(h) => h.insert(tag, idx).is_none(),
        }
    }
    pub fn get(&self, tag: u64) -> Option<u32> {
        match self {
            TagMap::Dense { offset, map } => {
                if tag < *offset {
                    return None;
                }
                map.get((tag - *offset) as usize)
                    .copied()
                    .filter(|&v| v != u32::MAX)
            }
            TagMap::Sparse(h) => h.get(&tag).copied(),
        }
    }
}
