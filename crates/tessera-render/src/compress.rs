//! Lossless compression of rixel frames (beyond the dissertation, after its §7.1.3:
//! "compression algorithms ... can be added to further reduce bandwidth requirements", and
//! "our rixel encoding could be improved by applying run length encoding to the bitmap").
//!
//! The payload is transformed so that a general-purpose coder finds its redundancy, then
//! deflated (raw DEFLATE, RFC 1951, which every browser inflates natively through
//! `DecompressionStream("deflate-raw")`):
//!
//! 1. the mask becomes run lengths (alternating hidden/visible runs, the first one hidden,
//!    LEB128 varints);
//! 2. depth codes (u16 fixed point, or the f32 bits as u32) and value codes (u16) are
//!    replaced by the wrapping difference to a prediction from the previous visible pixels
//!    in pixel order (order 1: the previous code; order 2: `2 c[i-1] - c[i-2]`, exact on
//!    planes), zig-zag mapped so small residuals of either sign are small numbers;
//! 3. residuals are split into byte planes (all low bytes, then the next bytes, ...), so the
//!    mostly-zero high bytes form long runs.
//!
//! # Layout (flag bit 1 of the header set; documented in `docs/rixel-frame.md`)
//!
//! | offset | bytes | field |
//! |---:|---:|---|
//! | 0 | 160 | the frame header (flags include `COMPRESSED`) |
//! | 160 | 1 | depth predictor order (1 or 2) |
//! | 161 | 1 | value predictor order (1 or 2) |
//! | 162 | 2 | reserved, 0 |
//! | 164 | 4 | `r`, bytes of the mask run lengths |
//! | 168 | 4 | `L = r + n (depth bytes + 2)`, the inflated length |
//! | 172 | ... | raw DEFLATE of: run lengths (`r`), depth residual planes, value residual planes |
//!
//! [`decompress`] restores the uncompressed frame byte for byte.

use std::io::{Read, Write};

use crate::rixel::{mask_bytes, DepthBits, FrameHeader, FLAG_COMPRESSED, HEADER_BYTES};
use crate::RenderError;

/// Bytes before the DEFLATE stream.
pub const PREFIX_BYTES: usize = HEADER_BYTES + 12;

/// Knobs of [`compress`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompressParams {
    /// DEFLATE level 0-9.
    pub level: u32,
    /// Predictor order for depths (1 or 2).
    pub depth_order: u8,
    /// Predictor order for values (1 or 2).
    pub value_order: u8,
}

impl Default for CompressParams {
    fn default() -> Self {
        CompressParams {
            level: 6,
            depth_order: 2,
            value_order: 1,
        }
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Run lengths of the mask bits over `npx` pixels, hidden run first.
pub fn mask_runs(mask: &[u8], npx: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut cur = false;
    let mut run = 0u64;
    let mut p = 0usize;
    while p < npx {
        // whole bytes equal to the current state in one step
        if p.is_multiple_of(8) && p + 8 <= npx {
            let b = mask[p / 8];
            if (cur && b == 0xff) || (!cur && b == 0) {
                run += 8;
                p += 8;
                continue;
            }
        }
        let bit = mask[p / 8] >> (p % 8) & 1 == 1;
        if bit != cur {
            put_varint(&mut out, run);
            cur = bit;
            run = 0;
        }
        run += 1;
        p += 1;
    }
    put_varint(&mut out, run);
    out
}

/// Zig-zag map of a `bits`-wide wrapping residual (16 or 32): 0, -1, 1, -2, ... -> 0, 1, 2, 3.
#[inline]
fn zigzag(r: u32, bits: u32) -> u32 {
    let s = if bits == 16 {
        r as u16 as i16 as i32
    } else {
        r as i32
    };
    (((s << 1) ^ (s >> 31)) as u32) & width_mask(bits)
}
#[inline]
fn unzigzag(z: u32, bits: u32) -> u32 {
    ((z >> 1) ^ (z & 1).wrapping_neg()) & width_mask(bits)
}
#[inline]
fn width_mask(bits: u32) -> u32 {
    if bits >= 32 {
        u32::MAX
    } else {
        (1u32 << bits) - 1
    }
}

fn predict(c: &[u32], i: usize, order: u8) -> u32 {
    match (order, i) {
        (_, 0) => 0,
        (1, _) | (_, 1) => c[i - 1],
        _ => c[i - 1].wrapping_mul(2).wrapping_sub(c[i - 2]),
    }
}

/// Residual planes of `codes` of `bytes` bytes each (wrapping arithmetic in that width).
fn residual_planes(codes: &[u32], bytes: usize, order: u8, out: &mut Vec<u8>) {
    let n = codes.len();
    let base = out.len();
    out.resize(base + n * bytes, 0);
    let bits = 8 * bytes as u32;
    for i in 0..n {
        let r = codes[i].wrapping_sub(predict(codes, i, order));
        let z = zigzag(r, bits);
        for b in 0..bytes {
            out[base + b * n + i] = (z >> (8 * b)) as u8;
        }
    }
}

fn undo_planes(planes: &[u8], n: usize, bytes: usize, order: u8) -> Vec<u32> {
    let bits = 8 * bytes as u32;
    let mut c = vec![0u32; n];
    for i in 0..n {
        let mut z = 0u32;
        for b in 0..bytes {
            z |= (planes[b * n + i] as u32) << (8 * b);
        }
        c[i] = predict(&c, i, order).wrapping_add(unzigzag(z, bits)) & width_mask(bits);
    }
    c
}

/// Compresses an uncompressed frame (see the module docs); `frame` is checked first.
pub fn compress(frame: &[u8], params: &CompressParams) -> Result<Vec<u8>, RenderError> {
    for (name, o) in [("depth", params.depth_order), ("value", params.value_order)] {
        if !(o == 1 || o == 2) {
            return Err(RenderError::Invalid(format!(
                "{name} predictor order {o}: must be 1 or 2"
            )));
        }
    }
    if params.level > 9 {
        return Err(RenderError::Invalid(format!(
            "deflate level {}: must be 0..=9",
            params.level
        )));
    }
    let d = crate::rixel::decode(frame)?;
    let h = d.header;
    let n = h.visible as usize;
    let db = h.depth_bits().bytes();
    let npx = h.width as usize * h.height as usize;
    let mask_off = HEADER_BYTES + n * (db + 2);
    let runs = mask_runs(&frame[mask_off..], npx);
    let mut body = Vec::with_capacity(runs.len() + n * (db + 2));
    body.extend_from_slice(&runs);
    let dep = &frame[HEADER_BYTES..HEADER_BYTES + n * db];
    let codes: Vec<u32> = match h.depth_bits() {
        DepthBits::B16 => dep
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]) as u32)
            .collect(),
        DepthBits::B32 => dep
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    };
    residual_planes(&codes, db, params.depth_order, &mut body);
    let vals: Vec<u32> = d.code.iter().map(|&q| q as u32).collect();
    residual_planes(&vals, 2, params.value_order, &mut body);
    let mut hdr = h;
    hdr.flags |= FLAG_COMPRESSED;
    let mut out = Vec::with_capacity(PREFIX_BYTES + body.len() / 2);
    out.extend_from_slice(&hdr.to_bytes());
    out.push(params.depth_order);
    out.push(params.value_order);
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&(runs.len() as u32).to_le_bytes());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    let mut enc = flate2::write::DeflateEncoder::new(out, flate2::Compression::new(params.level));
    enc.write_all(&body)
        .and_then(|_| enc.finish())
        .map_err(|e| RenderError::Invalid(format!("deflate: {e}")))
}

fn varint(b: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*pos)?;
        *pos += 1;
        v |= ((byte & 0x7f) as u64) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// Restores the uncompressed frame of a compressed one (an uncompressed frame is returned
/// as is). Every length is checked against the header before anything is allocated.
pub fn decompress(bytes: &[u8]) -> Result<Vec<u8>, RenderError> {
    let h = FrameHeader::parse(bytes)?;
    if h.flags & FLAG_COMPRESSED == 0 {
        return Ok(bytes.to_vec());
    }
    if bytes.len() < PREFIX_BYTES {
        return Err(RenderError::frame(
            bytes.len(),
            "compressed frame without its prefix",
        ));
    }
    let (dord, vord) = (bytes[160], bytes[161]);
    if !matches!(dord, 1 | 2) || !matches!(vord, 1 | 2) {
        return Err(RenderError::frame(
            160,
            format!("predictor orders {dord}/{vord}"),
        ));
    }
    let u32_at =
        |o: usize| u32::from_le_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]]);
    let (r, l) = (u32_at(164) as usize, u32_at(168) as usize);
    let n = h.visible as usize;
    let db = h.depth_bits().bytes();
    let npx = h.width as usize * h.height as usize;
    // each run is at least one varint byte; there are at most npx + 1 runs
    if r == 0 || r > 10 * (npx + 1) || l != r + n * (db + 2) {
        return Err(RenderError::frame(
            164,
            format!("run bytes {r} / inflated length {l} do not fit a frame of {n} visible pixels"),
        ));
    }
    let mut body = Vec::with_capacity(l);
    flate2::read::DeflateDecoder::new(&bytes[PREFIX_BYTES..])
        .take(l as u64 + 1)
        .read_to_end(&mut body)
        .map_err(|e| RenderError::frame(PREFIX_BYTES, format!("inflate: {e}")))?;
    if body.len() != l {
        return Err(RenderError::frame(
            PREFIX_BYTES,
            format!("inflated {} bytes, the prefix says {l}", body.len()),
        ));
    }
    // mask from runs
    let mut mask = vec![0u8; mask_bytes(h.width, h.height)];
    let (mut pos, mut p, mut vis) = (0usize, 0usize, false);
    let mut count = 0usize;
    while pos < r {
        let run = varint(&body[..r], &mut pos)
            .ok_or_else(|| RenderError::frame(PREFIX_BYTES, "truncated run length"))?
            as usize;
        if run > npx - p {
            return Err(RenderError::frame(
                PREFIX_BYTES,
                format!("runs cover more than the {npx} pixels"),
            ));
        }
        if vis {
            for q in p..p + run {
                mask[q >> 3] |= 1 << (q & 7);
            }
            count += run;
        }
        p += run;
        vis = !vis;
    }
    if p != npx || count != n {
        return Err(RenderError::frame(
            PREFIX_BYTES,
            format!("runs cover {p} of {npx} pixels with {count} visible (header: {n})"),
        ));
    }
    let depths = undo_planes(&body[r..r + n * db], n, db, dord);
    let values = undo_planes(&body[r + n * db..], n, 2, vord);
    let mut hdr = h;
    hdr.flags &= !FLAG_COMPRESSED;
    let mut out = Vec::with_capacity(hdr.frame_bytes());
    out.extend_from_slice(&hdr.to_bytes());
    for c in depths {
        match db {
            2 => out.extend_from_slice(&(c as u16).to_le_bytes()),
            _ => out.extend_from_slice(&c.to_le_bytes()),
        }
    }
    for c in values {
        out.extend_from_slice(&(c as u16).to_le_bytes());
    }
    out.extend_from_slice(&mask);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn residual_planes_round_trip_in_every_width() {
        let codes16: Vec<u32> = [0u32, 65535, 3, 65534, 100, 101, 102, 0, 65535]
            .into_iter()
            .collect();
        let codes32: Vec<u32> = vec![0, u32::MAX, 0x3f80_0000, 0x3f7f_ffff, 7, 1 << 31];
        for order in [1, 2] {
            let mut b = Vec::new();
            residual_planes(&codes16, 2, order, &mut b);
            assert_eq!(undo_planes(&b, codes16.len(), 2, order), codes16);
            let mut b = Vec::new();
            residual_planes(&codes32, 4, order, &mut b);
            assert_eq!(undo_planes(&b, codes32.len(), 4, order), codes32);
        }
        // a linear ramp has zero second-order residuals after the first two
        let ramp: Vec<u32> = (0..10).map(|i| 1000 + 7 * i).collect();
        let mut b = Vec::new();
        residual_planes(&ramp, 2, 2, &mut b);
        assert!(b[2..10].iter().all(|&x| x == 0) && b[12..].iter().all(|&x| x == 0));
    }

    #[test]
    fn mask_runs_count_alternating_runs() {
        // pixels 0..20: visible 3..5 and 9..20
        let mut mask = vec![0u8; 3];
        for p in (3..5).chain(9..20) {
            mask[p / 8] |= 1 << (p % 8);
        }
        assert_eq!(mask_runs(&mask, 20), vec![3, 2, 4, 11]);
        assert_eq!(mask_runs(&[0xff, 0xff], 16), vec![0, 16]);
    }
}
