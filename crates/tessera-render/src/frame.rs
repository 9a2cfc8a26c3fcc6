//! One frame from a surface, on the CPU or the GPU, and the report of its sizes beside the
//! original rixel encoding (what `tessera render rixels` prints).

use std::sync::Arc;

use tessera_gpu::Gpu;

use crate::cuda::{FrameTimes, GpuRenderer, GpuSurface};
use crate::rixel::{
    encode_cpu, original_bytes, EncodeParams, FrameHeader, HEADER_BYTES, ORIGINAL_BYTES_PER_RIXEL,
};
use crate::{raster, Camera, RenderError, Surface};

/// Renders and encodes `surface` seen by `camera`: on `gpu` when given (stage timings
/// returned), else with the CPU reference.
pub fn render_frame(
    surface: &Surface,
    camera: &Camera,
    width: u32,
    height: u32,
    params: &EncodeParams,
    gpu: Option<&Arc<Gpu>>,
) -> Result<(Vec<u8>, Option<FrameTimes>), RenderError> {
    match gpu {
        Some(g) => {
            let mut r = GpuRenderer::new(g.clone(), width, height)?;
            let s = GpuSurface::upload(g, surface)?;
            // the first frame compiles and loads kernels; time the second
            r.render(&s, camera, params)?;
            let t = r.render_timed(&s, camera, params)?;
            Ok((r.frame()?.to_vec(), Some(t)))
        }
        None => {
            let r = raster::rasterize_cpu(surface, camera, width, height)?;
            Ok((encode_cpu(&r, camera, params)?, None))
        }
    }
}

/// Sizes of an (uncompressed) frame by section, and the original encoding's.
#[derive(Clone, Debug, PartialEq)]
pub struct FrameReport {
    pub header: FrameHeader,
    pub bytes: usize,
    pub mask_bytes: usize,
    pub depth_bytes: usize,
    pub value_bytes: usize,
    /// Original rixel encoding's network message (15 B per visible pixel).
    pub original: usize,
    /// Original encoding's PCIe transfer (15 B per viewport pixel).
    pub original_pcie: usize,
    pub compressed: Option<usize>,
    pub times: Option<FrameTimes>,
}

impl FrameReport {
    pub fn new(frame: &[u8]) -> Result<FrameReport, RenderError> {
        let h = FrameHeader::parse(frame)?;
        let n = h.visible as usize;
        Ok(FrameReport {
            header: h,
            bytes: frame.len(),
            mask_bytes: h.mask_bytes(),
            depth_bytes: n * h.depth_bits().bytes(),
            value_bytes: n * 2,
            original: original_bytes(n),
            original_pcie: ORIGINAL_BYTES_PER_RIXEL * h.width as usize * h.height as usize,
            compressed: None,
            times: None,
        })
    }

    pub fn coverage(&self) -> f64 {
        self.header.visible as f64 / (self.header.width as f64 * self.header.height as f64)
    }

    /// Human-readable lines.
    pub fn lines(&self) -> Vec<String> {
        let h = &self.header;
        let mut v = vec![
            format!(
                "frame {}: {}x{}, {} visible pixels ({:.2} % coverage), {}-bit depths, values in [{}, {}]",
                h.frame_id,
                h.width,
                h.height,
                h.visible,
                100.0 * self.coverage(),
                8 * h.depth_bits().bytes(),
                h.value_min,
                h.value_max
            ),
            format!(
                "bytes: {} = header {HEADER_BYTES} + depths {} + values {} + mask {}",
                self.bytes, self.depth_bytes, self.value_bytes, self.mask_bytes
            ),
        ];
        let red = if self.original > 0 {
            format!(
                "{:+.1} %",
                100.0 * (self.bytes as f64 / self.original as f64 - 1.0)
            )
        } else {
            "-".into()
        };
        v.push(format!(
            "original rixel encoding (96-bit position + 24-bit color): {} bytes; ours {red}; PCIe: ours {} vs {}",
            self.original, self.bytes, self.original_pcie
        ));
        if let Some(c) = self.compressed {
            v.push(format!(
                "compressed: {c} bytes ({:.1} % of the frame)",
                100.0 * c as f64 / self.bytes as f64
            ));
        }
        if let Some(t) = self.times {
            v.push(format!(
                "GPU: rasterize {:.3} ms, encode {:.3} ms, copy {:.3} ms (second frame)",
                t.rasterize_ms, t.encode_ms, t.copy_ms
            ));
        }
        v
    }

    /// One JSON object.
    pub fn to_json(&self) -> String {
        let h = &self.header;
        let num = |x: f64| {
            if x.is_finite() {
                format!("{x}")
            } else {
                "null".into()
            }
        };
        let mut s = format!(
            "{{\"frame_id\":{},\"width\":{},\"height\":{},\"visible\":{},\"coverage\":{},\"depth_bits\":{},\
             \"value_min\":{},\"value_max\":{},\"bytes\":{},\"header_bytes\":{HEADER_BYTES},\"depth_bytes\":{},\
             \"value_bytes\":{},\"mask_bytes\":{},\"original_bytes\":{},\"original_pcie_bytes\":{}",
            h.frame_id,
            h.width,
            h.height,
            h.visible,
            num(self.coverage()),
            8 * h.depth_bits().bytes(),
            num(h.value_min as f64),
            num(h.value_max as f64),
            self.bytes,
            self.depth_bytes,
            self.value_bytes,
            self.mask_bytes,
            self.original,
            self.original_pcie
        );
        if let Some(c) = self.compressed {
            s.push_str(&format!(",\"compressed_bytes\":{c}"));
        }
        if let Some(t) = self.times {
            s.push_str(&format!(
                ",\"rasterize_ms\":{},\"encode_ms\":{},\"copy_ms\":{}",
                num(t.rasterize_ms),
                num(t.encode_ms),
                num(t.copy_ms)
            ));
        }
        s.push('}');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::camera::Orbit;
    use crate::rixel::DepthBits;

    #[test]
    fn report_adds_up() {
        let s = Surface::sphere([0.0; 3], 1.0, 12, 24).unwrap();
        let cam = Camera::orbit(&Orbit::framing([0.0; 3], 1.0, 0.0, 10.0), 1.0).unwrap();
        let (f, t) = render_frame(
            &s,
            &cam,
            50,
            40,
            &EncodeParams::new(9, DepthBits::B16),
            None,
        )
        .unwrap();
        assert!(t.is_none());
        let r = FrameReport::new(&f).unwrap();
        assert_eq!(
            r.bytes,
            HEADER_BYTES + r.depth_bytes + r.value_bytes + r.mask_bytes
        );
        assert_eq!(r.mask_bytes, 250);
        assert!(r.to_json().contains("\"frame_id\":9"));
        assert!(r.lines()[1].starts_with(&format!("bytes: {}", r.bytes)));
    }
}
