//! Procedural terrain for the flood scenes: a valley sloping down along `x` with fractal
//! (fBm value-noise) relief, deterministic for a seed.

/// A hash of integer lattice coordinates to `[0, 1)`.
fn lattice(ix: i64, iy: i64, seed: u64) -> f64 {
    let mut h = (ix as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ (iy as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F)
        ^ seed.wrapping_mul(0x1656_67B1_9E37_79F9);
    h ^= h >> 33;
    h = h.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    h ^= h >> 33;
    h = h.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    h ^= h >> 33;
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// Smoothly interpolated value noise in `[0, 1)`.
pub fn value_noise(x: f64, y: f64, seed: u64) -> f64 {
    let (fx, fy) = (x.floor(), y.floor());
    let (ix, iy) = (fx as i64, fy as i64);
    let (tx, ty) = (x - fx, y - fy);
    let s = |t: f64| t * t * (3.0 - 2.0 * t);
    let (sx, sy) = (s(tx), s(ty));
    let a = lattice(ix, iy, seed);
    let b = lattice(ix + 1, iy, seed);
    let c = lattice(ix, iy + 1, seed);
    let d = lattice(ix + 1, iy + 1, seed);
    let top = a + (b - a) * sx;
    let bot = c + (d - c) * sx;
    top + (bot - top) * sy
}

/// Fractional Brownian motion: `octaves` of value noise, in about `[-0.5, 0.5]`.
pub fn fbm(x: f64, y: f64, octaves: u32, seed: u64) -> f64 {
    let (mut sum, mut amp, mut freq, mut norm) = (0.0, 1.0, 1.0, 0.0);
    for o in 0..octaves {
        sum += amp * (value_noise(x * freq, y * freq, seed.wrapping_add(o as u64)) - 0.5);
        norm += amp;
        amp *= 0.5;
        freq *= 2.0;
    }
    sum / norm
}

/// Terrain height (m) at `(x, y)` of an `lx x ly` domain: a valley along `x` (cross-section
/// rising to `relief` at the sides), falling by `relief / 2` from `x = 0` to `x = lx`, plus
/// fBm relief of amplitude `relief / 2` at a feature size of `lx / 8`.
pub fn valley_height(x: f64, y: f64, lx: f64, ly: f64, relief: f64, seed: u64) -> f64 {
    let across = (2.0 * y / ly - 1.0).abs();
    let valley = relief * across.powf(1.5);
    let slope = -0.5 * relief * x / lx;
    let scale = 8.0 / lx;
    valley + slope + relief * fbm(x * scale, y * scale, 5, seed)
}

/// Corner heights of an `nx x ny` cell grid of spacing `dx` (`(nx + 1) x (ny + 1)` values,
/// `x` fastest).
pub fn valley_corners(nx: usize, ny: usize, dx: f64, relief: f64, seed: u64) -> Vec<f32> {
    let (lx, ly) = (nx as f64 * dx, ny as f64 * dx);
    let mut c = Vec::with_capacity((nx + 1) * (ny + 1));
    for j in 0..=ny {
        for i in 0..=nx {
            c.push(valley_height(i as f64 * dx, j as f64 * dx, lx, ly, relief, seed) as f32);
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noise_is_deterministic_bounded_and_continuous() {
        for k in 0..100 {
            let (x, y) = (k as f64 * 0.37, k as f64 * 0.11);
            let v = value_noise(x, y, 3);
            assert!((0.0..1.0).contains(&v));
            assert_eq!(v, value_noise(x, y, 3));
            assert!((value_noise(x + 1e-9, y, 3) - v).abs() < 1e-6);
        }
        assert_ne!(value_noise(0.5, 0.5, 1), value_noise(0.5, 0.5, 2));
        let c = valley_corners(8, 6, 1.0, 10.0, 1);
        assert_eq!(c.len(), 9 * 7);
        // the valley floor is lower than its sides on average
        let mid: f32 = (0..=8).map(|i| c[i + 9 * 3]).sum::<f32>() / 9.0;
        let side: f32 = (0..=8).map(|i| c[i]).sum::<f32>() / 9.0;
        assert!(mid < side);
    }
}
