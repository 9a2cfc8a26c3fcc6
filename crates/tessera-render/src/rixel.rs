//! The rixel frame: the improved rich-pixel encoding of dissertation §6.3.5 (evaluated in
//! §6.4.4, Fig. 6.10), its reference encoder and its decoder.
//!
//! Instead of a 96-bit position and a 24-bit color per visible pixel (Altenhofen et al.), a
//! frame carries a one-bit-per-pixel mask, the depth of each visible pixel (16-bit fixed
//! point or 32-bit float) and its physical value as 16-bit fixed point relative to the
//! frame's value range, plus the view and projection matrices with which the client rebuilds
//! world positions (Eqs. 6.5-6.6) and reprojects them (Eq. 6.4).
//!
//! # Layout (version 1, all little-endian; documented in `docs/rixel-frame.md`)
//!
//! | offset | bytes | field |
//! |---:|---:|---|
//! | 0 | 4 | magic `RIX1` |
//! | 4 | 2 | version = 1 |
//! | 6 | 2 | flags: bit 0 = 16-bit depths, bit 1 = compressed body; other bits 0 |
//! | 8 | 4 | frame id (echoes the client's request) |
//! | 12 | 4 | width `w` |
//! | 16 | 4 | height `h` |
//! | 20 | 4 | `n`, the number of visible pixels |
//! | 24 | 4 | value minimum (f32) |
//! | 28 | 4 | value maximum (f32) |
//! | 32 | 64 | view matrix `V_o`, 16 f32, column-major |
//! | 96 | 64 | projection matrix `P_o`, 16 f32, column-major |
//! | 160 | `n * 2` or `n * 4` | depths of the visible pixels in pixel order: u16 `round(d * 65535)` or the f32 window depth `d` |
//! | ... | `n * 2` | values: u16 `round((v - min) * 65534 / (max - min))`, 65535 = no value |
//! | ... | `ceil(w h / 8)` | mask: bit `i % 8` of byte `i / 8` is pixel `i = x + w y` (row 0 at the bottom) |
//!
//! The frame size is exactly `160 + n * (depth bytes + 2) + ceil(w h / 8)`; depths start at
//! a multiple of 4 and values at a multiple of 2, so a browser views them as typed arrays
//! without copying.

use crate::camera::{Camera, Mat4};
use crate::raster::{Raster, NO_TRIANGLE};
use crate::RenderError;

/// Header bytes.
pub const HEADER_BYTES: usize = 160;
/// `RIX1`.
pub const MAGIC: [u8; 4] = *b"RIX1";
/// Layout version.
pub const VERSION: u16 = 1;
/// Flag: depths are 16-bit fixed point.
pub const FLAG_DEPTH16: u16 = 1;
/// Flag: the body after the header is compressed ([`crate::compress`]).
pub const FLAG_COMPRESSED: u16 = 2;
/// Largest value code; values map onto `0..=VALUE_QMAX`.
pub const VALUE_QMAX: u16 = 65534;
/// Value code of a pixel without a value (`NaN` or infinite).
pub const NO_VALUE: u16 = 65535;
/// Bytes per visible pixel of the original rixel encoding (Altenhofen et al.): a 96-bit
/// position and a 24-bit color.
pub const ORIGINAL_BYTES_PER_RIXEL: usize = 15;

/// Depth precision of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DepthBits {
    /// 16-bit fixed point.
    B16,
    /// 32-bit float.
    #[default]
    B32,
}

impl DepthBits {
    pub fn bytes(self) -> usize {
        match self {
            DepthBits::B16 => 2,
            DepthBits::B32 => 4,
        }
    }
    pub fn from_bits(bits: u32) -> Result<Self, RenderError> {
        match bits {
            16 => Ok(DepthBits::B16),
            32 => Ok(DepthBits::B32),
            _ => Err(RenderError::Invalid(format!(
                "--depth-bits {bits}: must be 16 or 32"
            ))),
        }
    }
}

/// Everything of a frame but its per-pixel payload.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FrameHeader {
    pub flags: u16,
    pub frame_id: u32,
    pub width: u32,
    pub height: u32,
    pub visible: u32,
    pub value_min: f32,
    pub value_max: f32,
    pub view: Mat4,
    pub proj: Mat4,
}

impl FrameHeader {
    pub fn depth_bits(&self) -> DepthBits {
        if self.flags & FLAG_DEPTH16 != 0 {
            DepthBits::B16
        } else {
            DepthBits::B32
        }
    }
    pub fn camera(&self) -> Camera {
        Camera {
            view: self.view,
            proj: self.proj,
        }
    }
    /// The 160 header bytes.
    pub fn to_bytes(&self) -> [u8; HEADER_BYTES] {
        let mut b = [0u8; HEADER_BYTES];
        b[0..4].copy_from_slice(&MAGIC);
        b[4..6].copy_from_slice(&VERSION.to_le_bytes());
        b[6..8].copy_from_slice(&self.flags.to_le_bytes());
        b[8..12].copy_from_slice(&self.frame_id.to_le_bytes());
        b[12..16].copy_from_slice(&self.width.to_le_bytes());
        b[16..20].copy_from_slice(&self.height.to_le_bytes());
        b[20..24].copy_from_slice(&self.visible.to_le_bytes());
        b[24..28].copy_from_slice(&self.value_min.to_le_bytes());
        b[28..32].copy_from_slice(&self.value_max.to_le_bytes());
        for k in 0..16 {
            b[32 + 4 * k..36 + 4 * k].copy_from_slice(&self.view.0[k].to_le_bytes());
            b[96 + 4 * k..100 + 4 * k].copy_from_slice(&self.proj.0[k].to_le_bytes());
        }
        b
    }
    /// Parses and checks a header (magic, version, flags, sizes, range, matrices).
    pub fn parse(b: &[u8]) -> Result<FrameHeader, RenderError> {
        if b.len() < HEADER_BYTES {
            return Err(RenderError::frame(
                b.len(),
                format!(
                    "{} bytes, shorter than the {HEADER_BYTES}-byte header",
                    b.len()
                ),
            ));
        }
        if b[0..4] != MAGIC {
            return Err(RenderError::frame(
                0,
                "not a rixel frame (magic is not RIX1)",
            ));
        }
        let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
        let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let f32_at = |o: usize| f32::from_bits(u32_at(o));
        let version = u16_at(4);
        if version != VERSION {
            return Err(RenderError::frame(
                4,
                format!("unsupported version {version}"),
            ));
        }
        let flags = u16_at(6);
        if flags & !(FLAG_DEPTH16 | FLAG_COMPRESSED) != 0 {
            return Err(RenderError::frame(6, format!("unknown flags {flags:#06x}")));
        }
        let (width, height, visible) = (u32_at(12), u32_at(16), u32_at(20));
        crate::raster::check_viewport(width, height)
            .map_err(|e| RenderError::frame(12, e.to_string()))?;
        if visible as u64 > width as u64 * height as u64 {
            return Err(RenderError::frame(
                20,
                format!("{visible} visible pixels in a {width}x{height} frame"),
            ));
        }
        let (value_min, value_max) = (f32_at(24), f32_at(28));
        if !(value_min.is_finite() && value_max.is_finite() && value_min <= value_max) {
            return Err(RenderError::frame(
                24,
                format!("value range [{value_min}, {value_max}] is not finite and ordered"),
            ));
        }
        let mut view = [0.0f32; 16];
        let mut proj = [0.0f32; 16];
        for k in 0..16 {
            view[k] = f32_at(32 + 4 * k);
            proj[k] = f32_at(96 + 4 * k);
        }
        let h = FrameHeader {
            flags,
            frame_id: u32_at(8),
            width,
            height,
            visible,
            value_min,
            value_max,
            view: Mat4(view),
            proj: Mat4(proj),
        };
        if !(h.view.is_finite() && h.proj.is_finite()) {
            return Err(RenderError::frame(
                32,
                "non-finite view or projection matrix",
            ));
        }
        Ok(h)
    }
    /// Mask bytes `ceil(w h / 8)`.
    pub fn mask_bytes(&self) -> usize {
        mask_bytes(self.width, self.height)
    }
    /// Exact size of the uncompressed frame.
    pub fn frame_bytes(&self) -> usize {
        frame_bytes(
            self.width,
            self.height,
            self.visible as usize,
            self.depth_bits(),
        )
    }
}

/// `ceil(w h / 8)`.
pub fn mask_bytes(width: u32, height: u32) -> usize {
    (width as usize * height as usize).div_ceil(8)
}

/// Size of a frame: `160 + n (depth bytes + 2) + ceil(w h / 8)`.
pub fn frame_bytes(width: u32, height: u32, visible: usize, depth: DepthBits) -> usize {
    HEADER_BYTES + visible * (depth.bytes() + 2) + mask_bytes(width, height)
}

/// Size of the original rixel encoding's network message for `visible` pixels (15 bytes
/// each, Altenhofen et al.).
pub fn original_bytes(visible: usize) -> usize {
    visible * ORIGINAL_BYTES_PER_RIXEL
}

/// Coverage at which a frame of ours is as large as the original encoding's message:
/// `15 c N = 160 + N / 8 + c N (d + 2)` (dissertation Fig. 6.10's break-even).
pub fn break_even_coverage(width: u32, height: u32, depth: DepthBits) -> f64 {
    let n = width as f64 * height as f64;
    (HEADER_BYTES as f64 + mask_bytes(width, height) as f64)
        / (n * (ORIGINAL_BYTES_PER_RIXEL as f64 - depth.bytes() as f64 - 2.0))
}

/// What an encoder needs besides the rasterized pixels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EncodeParams {
    pub frame_id: u32,
    pub depth: DepthBits,
    /// A fixed value range (`min <= max`, finite); `None`: the visible pixels' finite
    /// minimum and maximum.
    pub value_range: Option<(f32, f32)>,
}

impl EncodeParams {
    pub fn new(frame_id: u32, depth: DepthBits) -> Self {
        EncodeParams {
            frame_id,
            depth,
            value_range: None,
        }
    }
    pub fn validate(&self) -> Result<(), RenderError> {
        if let Some((a, b)) = self.value_range {
            if !(a.is_finite() && b.is_finite() && a <= b) {
                return Err(RenderError::Invalid(format!(
                    "value range [{a}, {b}] must be finite with min <= max"
                )));
            }
        }
        Ok(())
    }
}

/// The order-preserving map of `f32` bits to `u32` that the GPU's atomic min/max use
/// (`-0.0` sorts below `+0.0`).
#[inline]
pub fn ordered_key(v: f32) -> u32 {
    let u = v.to_bits();
    if u & 0x8000_0000 != 0 {
        !u
    } else {
        u | 0x8000_0000
    }
}

/// Inverse of [`ordered_key`].
#[inline]
pub fn from_ordered_key(k: u32) -> f32 {
    f32::from_bits(if k & 0x8000_0000 != 0 {
        k & 0x7fff_ffff
    } else {
        !k
    })
}

/// The value scale `65534 / (max - min)` in `f32` (0 for an empty range); the GPU computes
/// the same expression.
#[inline]
pub fn value_scale(min: f32, max: f32) -> f32 {
    if max > min {
        VALUE_QMAX as f32 / (max - min)
    } else {
        0.0
    }
}

/// The 16-bit code of value `v` (rounded to nearest even, clamped; non-finite -> no value).
#[inline]
pub fn quantize_value(v: f32, min: f32, scale: f32) -> u16 {
    if !v.is_finite() {
        return NO_VALUE;
    }
    let t = (v - min) * scale;
    let t = if !(t > 0.0) {
        0.0
    } else if t > VALUE_QMAX as f32 {
        VALUE_QMAX as f32
    } else {
        t
    };
    t.round_ties_even() as u16
}

/// The 16-bit code of a window depth in `[0, 1]`.
#[inline]
pub fn quantize_depth(d: f32) -> u16 {
    (d * 65535.0).round_ties_even() as u16
}

/// The value range a frame of `raster` is encoded with (the same rule as the GPU encoder).
pub fn frame_range(raster: &Raster, params: &EncodeParams) -> (f32, f32) {
    if let Some(r) = params.value_range {
        return r;
    }
    let (mut lo, mut hi) = (u32::MAX, 0u32);
    for (v, &t) in raster.value.iter().zip(&raster.triangle) {
        if t != NO_TRIANGLE && v.is_finite() {
            let k = ordered_key(*v);
            lo = lo.min(k);
            hi = hi.max(k);
        }
    }
    if lo == u32::MAX {
        (0.0, 0.0)
    } else {
        (from_ordered_key(lo), from_ordered_key(hi))
    }
}

/// The reference encoder: the frame of `raster` seen with `camera` (byte-identical to the
/// GPU encoder's).
pub fn encode_cpu(
    raster: &Raster,
    camera: &Camera,
    params: &EncodeParams,
) -> Result<Vec<u8>, RenderError> {
    params.validate()?;
    let n_px = raster.width as usize * raster.height as usize;
    if raster.depth.len() != n_px || raster.value.len() != n_px || raster.triangle.len() != n_px {
        return Err(RenderError::Invalid(format!(
            "raster {}x{} with {} depths, {} values, {} ids",
            raster.width,
            raster.height,
            raster.depth.len(),
            raster.value.len(),
            raster.triangle.len()
        )));
    }
    let visible = raster.visible();
    let (vmin, vmax) = frame_range(raster, params);
    let header = FrameHeader {
        flags: if params.depth == DepthBits::B16 {
            FLAG_DEPTH16
        } else {
            0
        },
        frame_id: params.frame_id,
        width: raster.width,
        height: raster.height,
        visible: visible as u32,
        value_min: vmin,
        value_max: vmax,
        view: camera.view,
        proj: camera.proj,
    };
    let size = header.frame_bytes();
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(&header.to_bytes());
    let db = params.depth.bytes();
    out.resize(size, 0);
    let (depths, rest) = out[HEADER_BYTES..].split_at_mut(visible * db);
    let (values, mask) = rest.split_at_mut(visible * 2);
    let scale = value_scale(vmin, vmax);
    let mut k = 0usize;
    for p in 0..n_px {
        if raster.triangle[p] == NO_TRIANGLE {
            continue;
        }
        mask[p >> 3] |= 1 << (p & 7);
        match params.depth {
            DepthBits::B16 => depths[2 * k..2 * k + 2]
                .copy_from_slice(&quantize_depth(raster.depth[p]).to_le_bytes()),
            DepthBits::B32 => {
                depths[4 * k..4 * k + 4].copy_from_slice(&raster.depth[p].to_le_bytes())
            }
        }
        values[2 * k..2 * k + 2]
            .copy_from_slice(&quantize_value(raster.value[p], vmin, scale).to_le_bytes());
        k += 1;
    }
    Ok(out)
}

/// A decoded frame: visible pixels in pixel order with their depth and value.
#[derive(Clone, Debug, PartialEq)]
pub struct DecodedFrame {
    pub header: FrameHeader,
    /// Pixel index `x + w y` of each visible pixel.
    pub pixels: Vec<u32>,
    /// Window depth in `[0, 1]`.
    pub depth: Vec<f32>,
    /// Value code (0..=65534, or [`NO_VALUE`]).
    pub code: Vec<u16>,
}

impl DecodedFrame {
    /// The physical value of visible pixel `k` (`None`: no value), `min + q (max - min) / 65534`.
    pub fn value(&self, k: usize) -> Option<f64> {
        let q = self.code[k];
        if q == NO_VALUE {
            return None;
        }
        let (a, b) = (self.header.value_min as f64, self.header.value_max as f64);
        Some(a + q as f64 * (b - a) / VALUE_QMAX as f64)
    }
    /// One value quantum of this frame, `(max - min) / 65534`.
    pub fn value_quantum(&self) -> f64 {
        (self.header.value_max as f64 - self.header.value_min as f64) / VALUE_QMAX as f64
    }
    /// World positions of the visible pixels by Eqs. 6.5-6.6 (`None` when the frame's
    /// matrices are singular).
    pub fn world_positions(&self) -> Option<Vec<[f64; 3]>> {
        let inv = self.header.camera().unprojector()?;
        let (w, h) = (self.header.width, self.header.height);
        Some(
            self.pixels
                .iter()
                .zip(&self.depth)
                .map(|(&p, &d)| Camera::unproject(&inv, p % w, p / w, w, h, d as f64))
                .collect(),
        )
    }
}

/// Decodes an uncompressed frame (compressed ones go through
/// [`crate::compress::decompress`] first), checking every count against the bytes present.
pub fn decode(bytes: &[u8]) -> Result<DecodedFrame, RenderError> {
    let header = FrameHeader::parse(bytes)?;
    if header.flags & FLAG_COMPRESSED != 0 {
        return Err(RenderError::frame(
            6,
            "compressed frame: decompress it first (tessera_render::compress::decompress)",
        ));
    }
    let size = header.frame_bytes();
    if bytes.len() != size {
        return Err(RenderError::frame(
            bytes.len().min(size),
            format!(
                "{} bytes, the header's {}x{} frame with {} visible pixels needs exactly {size}",
                bytes.len(),
                header.width,
                header.height,
                header.visible
            ),
        ));
    }
    let n = header.visible as usize;
    let db = header.depth_bits().bytes();
    let dep = &bytes[HEADER_BYTES..HEADER_BYTES + n * db];
    let val = &bytes[HEADER_BYTES + n * db..HEADER_BYTES + n * (db + 2)];
    let mask_off = HEADER_BYTES + n * (db + 2);
    let mask = &bytes[mask_off..];
    let n_px = header.width as usize * header.height as usize;
    let mut pixels = Vec::with_capacity(n);
    for (i, &b) in mask.iter().enumerate() {
        let mut m = b;
        while m != 0 {
            let bit = m.trailing_zeros() as usize;
            let p = i * 8 + bit;
            if p >= n_px {
                return Err(RenderError::frame(
                    mask_off + i,
                    format!("mask bit for pixel {p} beyond the {n_px} pixels"),
                ));
            }
            if pixels.len() == n {
                return Err(RenderError::frame(
                    mask_off + i,
                    format!("mask has more set bits than the {n} visible pixels"),
                ));
            }
            pixels.push(p as u32);
            m &= m - 1;
        }
    }
    if pixels.len() != n {
        return Err(RenderError::frame(
            mask_off,
            format!("mask has {} set bits, the header says {n}", pixels.len()),
        ));
    }
    let depth: Vec<f32> = match header.depth_bits() {
        DepthBits::B16 => dep
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]) as f32 / 65535.0)
            .collect(),
        DepthBits::B32 => dep
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    };
    if let Some(k) = depth.iter().position(|d| !(*d >= 0.0 && *d <= 1.0)) {
        return Err(RenderError::frame(
            HEADER_BYTES + k * db,
            format!("depth {} of visible pixel {k} is outside [0, 1]", depth[k]),
        ));
    }
    let code = val
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    Ok(DecodedFrame {
        header,
        pixels,
        depth,
        code,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordered_key_sorts_floats() {
        let v = [-f32::MAX, -3.5, -1e-30, -0.0, 0.0, 1e-30, 2.0, f32::MAX];
        for w in v.windows(2) {
            assert!(ordered_key(w[0]) < ordered_key(w[1]), "{w:?}");
        }
        for x in v {
            assert_eq!(from_ordered_key(ordered_key(x)).to_bits(), x.to_bits());
        }
    }

    #[test]
    fn quantization_clamps_and_marks_missing_values() {
        let s = value_scale(1.0, 3.0);
        assert_eq!(quantize_value(1.0, 1.0, s), 0);
        assert_eq!(quantize_value(3.0, 1.0, s), VALUE_QMAX);
        assert_eq!(quantize_value(2.0, 1.0, s), 32767);
        assert_eq!(quantize_value(-5.0, 1.0, s), 0);
        assert_eq!(quantize_value(7.0, 1.0, s), VALUE_QMAX);
        assert_eq!(quantize_value(f32::NAN, 1.0, s), NO_VALUE);
        assert_eq!(quantize_value(f32::INFINITY, 1.0, s), NO_VALUE);
        assert_eq!(quantize_value(5.0, 5.0, value_scale(5.0, 5.0)), 0);
        assert_eq!(quantize_depth(0.0), 0);
        assert_eq!(quantize_depth(1.0), 65535);
    }

    #[test]
    fn header_round_trips_and_rejects_garbage() {
        let h = FrameHeader {
            flags: FLAG_DEPTH16,
            frame_id: 7,
            width: 33,
            height: 9,
            visible: 12,
            value_min: -1.5,
            value_max: 2.5,
            view: Mat4::IDENTITY,
            proj: Mat4::IDENTITY,
        };
        let b = h.to_bytes();
        assert_eq!(FrameHeader::parse(&b).unwrap(), h);
        assert_eq!(h.frame_bytes(), 160 + 12 * 4 + 38);
        let mut bad = b;
        bad[0] = b'X';
        assert!(FrameHeader::parse(&bad).is_err());
        let mut bad = b;
        bad[6] = 0x80;
        assert!(FrameHeader::parse(&bad)
            .unwrap_err()
            .to_string()
            .contains("flags"));
        let mut bad = b;
        bad[20..24].copy_from_slice(&1000u32.to_le_bytes());
        assert!(FrameHeader::parse(&bad).is_err());
        assert!(FrameHeader::parse(&b[..100]).is_err());
    }

    #[test]
    fn break_even_matches_fig_6_10() {
        let c32 = break_even_coverage(1024, 1024, DepthBits::B32);
        let c16 = break_even_coverage(1024, 1024, DepthBits::B16);
        assert!(c32 > 0.0138 && c32 < 0.014, "{c32}");
        assert!(c16 > 0.0113 && c16 < 0.012, "{c16}");
    }
}
