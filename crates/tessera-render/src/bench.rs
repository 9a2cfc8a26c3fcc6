//! Measuring code and tables of `tessera render bench` (dissertation §6.4.4, Fig. 6.10, and
//! the frame pipeline's timing on the GPU).

use std::time::Instant;

use crate::camera::{Camera, Orbit};
use crate::compress::{compress, decompress, CompressParams};
use crate::raster::{Raster, NO_TRIANGLE};
use crate::rixel::{
    break_even_coverage, encode_cpu, frame_bytes, original_bytes, DepthBits, EncodeParams,
    ORIGINAL_BYTES_PER_RIXEL,
};
use crate::{RenderError, Surface};

/// A plain text table: a header row and rows of cells, right-aligned numbers.
#[derive(Clone, Debug, Default)]
pub struct Table {
    pub title: String,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(title: &str, header: &[&str]) -> Table {
        Table {
            title: title.to_string(),
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }
    /// Markdown-style text with aligned columns.
    pub fn render(&self) -> String {
        let n = self.header.len();
        let mut w: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate().take(n) {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let mut s = String::from("|");
            for (i, width) in w.iter().enumerate() {
                let c = cells.get(i).map(String::as_str).unwrap_or("");
                let pad = width - c.chars().count();
                if i == 0 {
                    s.push_str(&format!(" {c}{} |", " ".repeat(pad)));
                } else {
                    s.push_str(&format!(" {}{c} |", " ".repeat(pad)));
                }
            }
            s
        };
        let mut out = String::new();
        if !self.title.is_empty() {
            out.push_str(&self.title);
            out.push('\n');
        }
        out.push_str(&line(&self.header));
        out.push('\n');
        let mut sep = String::from("|");
        for (i, width) in w.iter().enumerate() {
            sep.push_str(&if i == 0 {
                format!("{}|", "-".repeat(width + 2))
            } else {
                format!("{}:|", "-".repeat(width + 1))
            });
        }
        out.push_str(&sep);
        out.push('\n');
        for r in &self.rows {
            out.push_str(&line(r));
            out.push('\n');
        }
        out
    }
}

/// Bytes with a binary unit (`1.23 MiB`).
pub fn human_bytes(b: usize) -> String {
    let b = b as f64;
    if b >= 1024.0 * 1024.0 {
        format!("{:.2} MiB", b / (1024.0 * 1024.0))
    } else if b >= 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{b} B")
    }
}

/// One row of Fig. 6.10: sizes at a coverage.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SizeRow {
    pub coverage: f64,
    pub visible: usize,
    /// The original encoding's network message (15 bytes per visible pixel).
    pub original: usize,
    /// The original encoding's PCIe transfer (15 bytes per viewport pixel).
    pub original_pcie: usize,
    pub ours32: usize,
    pub ours16: usize,
}

impl SizeRow {
    /// `1 - ours / original` for 32-bit and 16-bit depths.
    pub fn reductions(&self) -> (f64, f64) {
        let o = self.original as f64;
        (1.0 - self.ours32 as f64 / o, 1.0 - self.ours16 as f64 / o)
    }
}

/// Fig. 6.10's coverage sweep for a `w x h` viewport (sizes by the layout's formula; the
/// encoders are tested to produce exactly these sizes).
pub fn fig_6_10(width: u32, height: u32, coverages: &[f64]) -> Vec<SizeRow> {
    let n = width as usize * height as usize;
    coverages
        .iter()
        .map(|&c| {
            let visible = ((c * n as f64).round() as usize).min(n);
            SizeRow {
                coverage: c,
                visible,
                original: original_bytes(visible),
                original_pcie: ORIGINAL_BYTES_PER_RIXEL * n,
                ours32: frame_bytes(width, height, visible, DepthBits::B32),
                ours16: frame_bytes(width, height, visible, DepthBits::B16),
            }
        })
        .collect()
}

/// The default coverages of the sweep (fractions).
pub const SWEEP: [f64; 14] = [
    0.001, 0.005, 0.01, 0.0113, 0.012, 0.0139, 0.014, 0.02, 0.05, 0.10, 0.25, 0.50, 0.75, 1.0,
];

/// Fig. 6.10 as a table, with the break-even coverages below it.
pub fn fig_6_10_table(width: u32, height: u32, coverages: &[f64]) -> Table {
    let mut t = Table::new(
        &format!(
            "Fig. 6.10: frame size vs coverage, {width}x{height} (network message; ours = PCIe transfer too)"
        ),
        &[
            "coverage",
            "visible",
            "original (15 B/rixel)",
            "original PCIe",
            "ours 32-bit",
            "ours 16-bit",
            "reduction 32",
            "reduction 16",
        ],
    );
    for r in fig_6_10(width, height, coverages) {
        let (r32, r16) = r.reductions();
        let pct = |x: f64| {
            if x.is_finite() {
                format!("{:.1}%", 100.0 * x)
            } else {
                "-".into()
            }
        };
        t.row(vec![
            format!("{:.2}%", 100.0 * r.coverage),
            r.visible.to_string(),
            human_bytes(r.original),
            human_bytes(r.original_pcie),
            human_bytes(r.ours32),
            human_bytes(r.ours16),
            pct(r32),
            pct(r16),
        ]);
    }
    t
}

/// Break-even lines beside the dissertation's figures.
pub fn break_even_lines(width: u32, height: u32) -> String {
    let full = fig_6_10(width, height, &[1.0])[0];
    let (r32, r16) = full.reductions();
    format!(
        "reduction at full coverage: 32-bit {:.2}% (dissertation: up to 59%), 16-bit {:.2}% (dissertation: 73%; \
         without our 160-byte header 72.50%)\n\
         break-even coverage: 32-bit {:.3}% (dissertation: < 1.4%), 16-bit {:.3}% (dissertation: < 1.2%)",
        100.0 * r32,
        100.0 * r16,
        100.0 * break_even_coverage(width, height, DepthBits::B32),
        100.0 * break_even_coverage(width, height, DepthBits::B16),
    )
}

/// The test scene of the timing and compression benchmarks: a UV sphere of `rings` bands
/// and `2 rings` segments (`4 rings (rings - 1)` triangles) with a smooth field.
pub fn bench_sphere(rings: u32) -> Result<Surface, RenderError> {
    let mut s = Surface::sphere([0.0; 3], 1.0, rings, 2 * rings)?;
    s.set_values(|p| (3.0 * p[0]).sin() * (2.0 * p[1]).cos() + p[2]);
    Ok(s)
}

/// A camera looking at the unit sphere from a distance that gives about `coverage` of a
/// square viewport (the silhouette's angular radius `asin(1/D)` against the half field of
/// view); `coverage >= 1` moves close enough to fill the viewport.
pub fn camera_for_coverage(coverage: f64, aspect: f64) -> Result<Camera, RenderError> {
    let fovy = 40.0f64;
    let tan_half = (fovy.to_radians() / 2.0).tan();
    // silhouette radius in NDC: tan(asin(1/D)) / tan_half; coverage = pi r^2 / 4 (square)
    let r_ndc = if coverage >= 1.0 {
        1.5
    } else {
        (4.0 * coverage / std::f64::consts::PI).sqrt()
    };
    let alpha = (r_ndc * tan_half).atan();
    let d = 1.0 / alpha.sin();
    let o = Orbit {
        target: [0.0; 3],
        distance: d,
        yaw: 30.0,
        pitch: 20.0,
        fovy,
        near: (d - 1.2).max(0.01),
        far: d + 1.5,
        ortho_height: None,
    };
    Camera::orbit(&o, aspect)
}

/// A synthetic raster of exactly `visible` visible pixels (the first ones in a disc order
/// around the centre), for the size test's coverage sweep.
pub fn disc_raster(width: u32, height: u32, visible: usize) -> Raster {
    let n = width as usize * height as usize;
    let (cx, cy) = (width as f64 / 2.0, height as f64 / 2.0);
    let mut order: Vec<(u64, u32)> = (0..n as u32)
        .map(|p| {
            let (x, y) = ((p % width) as f64 + 0.5 - cx, (p / width) as f64 + 0.5 - cy);
            (((x * x + y * y) * 1024.0) as u64, p)
        })
        .collect();
    order.sort_unstable();
    let mut r = Raster {
        width,
        height,
        depth: vec![1.0; n],
        value: vec![f32::NAN; n],
        triangle: vec![NO_TRIANGLE; n],
    };
    for &(d2, p) in order.iter().take(visible.min(n)) {
        let p = p as usize;
        r.triangle[p] = 0;
        r.depth[p] = 0.5 + (d2 as f64 / 1024.0 / (cx * cx + cy * cy)) as f32 * 0.25;
        r.value[p] = ((p % width as usize) as f32 * 0.01).sin();
    }
    r
}

/// Bytes and times of lossless compression of one frame.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CompressRow {
    pub coverage: f64,
    pub depth: DepthBits,
    pub raw: usize,
    pub compressed: usize,
    pub compress_ms: f64,
    pub decompress_ms: f64,
}

/// Compresses `frame` with `params` (median of `runs` timings for each direction) and checks
/// the round trip.
pub fn measure_compression(
    frame: &[u8],
    coverage: f64,
    depth: DepthBits,
    params: &CompressParams,
    runs: usize,
) -> Result<CompressRow, RenderError> {
    let mut tc = Vec::new();
    let mut td = Vec::new();
    let mut packed = Vec::new();
    for _ in 0..runs.max(1) {
        let t0 = Instant::now();
        packed = compress(frame, params)?;
        tc.push(t0.elapsed().as_secs_f64() * 1e3);
        let t1 = Instant::now();
        let back = decompress(&packed)?;
        td.push(t1.elapsed().as_secs_f64() * 1e3);
        if back != frame {
            return Err(RenderError::Invalid(
                "compression round trip changed the frame".into(),
            ));
        }
    }
    Ok(CompressRow {
        coverage,
        depth,
        raw: frame.len(),
        compressed: packed.len(),
        compress_ms: tessera_gpu::median(&mut tc),
        decompress_ms: tessera_gpu::median(&mut td),
    })
}

/// A frame of the bench sphere at `coverage` on the CPU (for the compression table when no
/// GPU is present).
pub fn cpu_frame(
    surface: &Surface,
    width: u32,
    height: u32,
    coverage: f64,
    depth: DepthBits,
) -> Result<(Vec<u8>, f64), RenderError> {
    let cam = camera_for_coverage(coverage, width as f64 / height as f64)?;
    let r = crate::raster::rasterize_cpu(surface, &cam, width, height)?;
    let f = encode_cpu(&r, &cam, &EncodeParams::new(0, depth))?;
    Ok((f, r.coverage()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_renders_aligned() {
        let mut t = Table::new("T", &["a", "bb"]);
        t.row(vec!["x".into(), "1".into()]);
        t.row(vec!["yyy".into(), "22".into()]);
        let s = t.render();
        assert!(s.contains("| yyy | 22 |"), "{s}");
        assert!(s.contains("| x   |  1 |"), "{s}");
    }

    #[test]
    fn disc_raster_has_the_requested_count() {
        let r = disc_raster(40, 30, 500);
        assert_eq!(r.visible(), 500);
        assert_eq!(disc_raster(8, 8, 1000).visible(), 64);
    }
}

/// Median stage timings of the GPU frame pipeline.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FrameTiming {
    pub depth: DepthBits,
    pub visible: usize,
    pub coverage: f64,
    pub frame_bytes: usize,
    pub rasterize_ms: f64,
    pub encode_ms: f64,
    pub copy_ms: f64,
    /// Host wall clock around one whole `render` call (rasterize + encode + count read +
    /// copy into pinned memory), median.
    pub total_ms: f64,
}

/// Times `runs` frames (after `warmup`) of `surf` seen by `cam` on the GPU.
pub fn gpu_frame_timing(
    r: &mut crate::cuda::GpuRenderer,
    surf: &crate::cuda::GpuSurface,
    cam: &Camera,
    depth: DepthBits,
    warmup: usize,
    runs: usize,
) -> Result<FrameTiming, RenderError> {
    let params = EncodeParams::new(0, depth);
    for _ in 0..warmup {
        r.render(surf, cam, &params)?;
    }
    let (mut ra, mut en, mut co, mut to) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs.max(1) {
        let t = r.render_timed(surf, cam, &params)?;
        ra.push(t.rasterize_ms);
        en.push(t.encode_ms);
        co.push(t.copy_ms);
        let t0 = Instant::now();
        r.render(surf, cam, &params)?;
        to.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    let frame = r.frame()?;
    let h = crate::rixel::FrameHeader::parse(frame)?;
    let (w, hh) = r.size();
    Ok(FrameTiming {
        depth,
        visible: h.visible as usize,
        coverage: h.visible as f64 / (w as f64 * hh as f64),
        frame_bytes: frame.len(),
        rasterize_ms: tessera_gpu::median(&mut ra),
        encode_ms: tessera_gpu::median(&mut en),
        copy_ms: tessera_gpu::median(&mut co),
        total_ms: tessera_gpu::median(&mut to),
    })
}

/// Bytes the frame pipeline must move through device memory at least: vertices and
/// indices read once, clip positions written and read, the depth keys cleared, written and
/// read, the resolved depth/value/id written and read by the encoder, the frame written.
pub fn frame_floor_bytes(vertices: usize, triangles: usize, pixels: usize, frame: usize) -> usize {
    vertices * 16 + triangles * 12 + vertices * 32 + pixels * 24 + pixels * 24 + frame
}
