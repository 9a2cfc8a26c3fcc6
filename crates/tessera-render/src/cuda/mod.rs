//! The CUDA compute rasterizer and rixel encoder (dissertation §6.3.5: "we additionally
//! perform mask computation, stream compaction (removal of invalid viewport pixels), and
//! minimum/maximum reductions on the GPU ... to additionally reduce PCIe bandwidth costs to a
//! minimum").
//!
//! One frame is, on the device's stream: `rx_transform` (vertex stage) -> `rx_clear` ->
//! `rx_raster` (one thread per small triangle, 64-bit `atomicMin` on `depth_bits << 32 | id`)
//! -> `rx_raster_large` (one block per queued large or clipped triangle) -> `rx_resolve`
//! (depth, id and the perspective-correct value per pixel) -> `rx_count` (visible count per
//! 256 pixels, value min/max) -> `rx_scan` -> `rx_write` (header, compacted depths and
//! values, mask). The host then reads the 4-byte visible count and copies exactly the frame's
//! bytes into pinned memory. No OpenGL is needed on the server.
//!
//! The kernels (`render.cu`) mirror [`crate::raster`] and [`crate::rixel`] operation by
//! operation and are compiled without floating-point contraction, so the GPU's raster and
//! frame are bit-identical to the CPU reference's (tests `rasterize_matches_reference`,
//! `rixel_encode_matches_reference`).

use std::sync::Arc;

use tessera_gpu::runtime::PinnedBuffer;
use tessera_gpu::{CompileOptions, DeviceBuffer, Gpu, Kernel, LaunchConfig, Module};

use crate::camera::Camera;
use crate::raster::{check_viewport, Raster};
use crate::rixel::{frame_bytes, DepthBits, EncodeParams, FrameHeader, FLAG_DEPTH16, HEADER_BYTES};
use crate::{RenderError, Surface};

/// CUDA source of the rasterizer and encoder.
pub const SOURCE: &str = include_str!("render.cu");

const BLOCK: u32 = 256;
/// Blocks of the large-triangle pass (grid-stride over the queue).
const LARGE_BLOCKS: u32 = 1024;

fn compile_options() -> CompileOptions {
    let mut o = CompileOptions::named("tessera_render.cu");
    // bit-identical results with the CPU reference: no contraction of a*b+c into FMAs
    o.extra.push("--fmad=false".into());
    o
}

struct Kernels {
    transform: Kernel,
    clear: Kernel,
    raster: Kernel,
    raster_large: Kernel,
    resolve: Kernel,
    heightfield: Kernel,
    range_init: Kernel,
    count: Kernel,
    scan: Kernel,
    write: Kernel,
}

impl Kernels {
    fn load(m: &Module) -> Result<Kernels, RenderError> {
        Ok(Kernels {
            transform: m.function("rx_transform")?,
            clear: m.function("rx_clear")?,
            raster: m.function("rx_raster")?,
            raster_large: m.function("rx_raster_large")?,
            resolve: m.function("rx_resolve")?,
            heightfield: m.function("rx_heightfield")?,
            range_init: m.function("rx_range_init")?,
            count: m.function("rx_count")?,
            scan: m.function("rx_scan")?,
            write: m.function("rx_write")?,
        })
    }
}

/// A surface in device memory: `(x, y, z, value)` per vertex and 3 indices per triangle.
pub struct GpuSurface {
    /// 4 floats per vertex.
    pub verts: DeviceBuffer<f32>,
    /// 3 indices per triangle.
    pub indices: DeviceBuffer<u32>,
}

impl GpuSurface {
    /// Uploads a (validated) surface.
    pub fn upload(gpu: &Gpu, s: &Surface) -> Result<GpuSurface, RenderError> {
        s.validate()?;
        let mut v = Vec::with_capacity(4 * s.positions.len());
        for (p, val) in s.positions.iter().zip(&s.values) {
            v.extend_from_slice(&[p[0], p[1], p[2], *val]);
        }
        let idx: Vec<u32> = s.triangles.iter().flatten().copied().collect();
        Ok(GpuSurface {
            verts: gpu.upload(&v)?,
            indices: gpu.upload(&idx)?,
        })
    }

    /// Device buffers for an `nx x ny` height field whose vertices [`GpuRenderer::heightfield`]
    /// fills from device fields; the triangles are those of [`crate::surface::grid_triangles`].
    pub fn heightfield(gpu: &Gpu, nx: usize, ny: usize) -> Result<GpuSurface, RenderError> {
        if nx < 2 || ny < 2 || nx > u32::MAX as usize / ny {
            return Err(RenderError::Invalid(format!(
                "height field {nx}x{ny}: need at least 2x2 points within the 32-bit range"
            )));
        }
        let tris = crate::surface::grid_triangles(nx as u32, ny as u32);
        let idx: Vec<u32> = tris.iter().flatten().copied().collect();
        Ok(GpuSurface {
            verts: gpu.zeros::<f32>(4 * nx * ny)?,
            indices: gpu.upload(&idx)?,
        })
    }

    pub fn num_vertices(&self) -> usize {
        self.verts.len() / 4
    }
    pub fn num_triangles(&self) -> usize {
        self.indices.len() / 3
    }
}

/// Where a height field's vertices come from on the device (see [`GpuRenderer::heightfield`]).
pub struct HeightfieldSource<'a> {
    pub nx: usize,
    pub ny: usize,
    pub spacing: f64,
    pub origin: [f64; 2],
    /// Vertical scale applied to `z`.
    pub z_scale: f32,
    /// Heights, `nx * ny`.
    pub z: &'a DeviceBuffer<f32>,
    /// Values, `nx * ny`.
    pub value: &'a DeviceBuffer<f32>,
    /// `Some((field, min))`: the value is `NaN` ("no value") where `field <= min` (for
    /// example dry terrain: water depth not above a threshold).
    pub wet: Option<(&'a DeviceBuffer<f32>, f32)>,
}

/// Timings of one frame's stages in milliseconds (CUDA events; host clock for the copy).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FrameTimes {
    pub rasterize_ms: f64,
    pub encode_ms: f64,
    pub copy_ms: f64,
}

/// The GPU rasterizer and encoder for one viewport size, with its device buffers and the
/// pinned host buffer frames are copied into (allocated once, reused every frame).
pub struct GpuRenderer {
    gpu: Arc<Gpu>,
    _module: Arc<Module>,
    k: Kernels,
    width: u32,
    height: u32,
    keys: DeviceBuffer<u64>,
    depth: DeviceBuffer<f32>,
    value: DeviceBuffer<f32>,
    tri: DeviceBuffer<u32>,
    clip: DeviceBuffer<f32>,
    large: DeviceBuffer<u32>,
    large_count: DeviceBuffer<u32>,
    mvp: DeviceBuffer<f32>,
    block_counts: DeviceBuffer<u32>,
    total: DeviceBuffer<u32>,
    range: DeviceBuffer<u32>,
    header: DeviceBuffer<u32>,
    frame: DeviceBuffer<u8>,
    pinned: PinnedBuffer<u8>,
    frame_len: usize,
    encoded_depth: DepthBits,
}

impl GpuRenderer {
    /// Compiles (or loads from the kernel cache) the module and allocates the buffers of a
    /// `width x height` viewport.
    pub fn new(gpu: Arc<Gpu>, width: u32, height: u32) -> Result<GpuRenderer, RenderError> {
        check_viewport(width, height)?;
        let module = gpu.compile(SOURCE, &compile_options())?;
        let k = Kernels::load(&module)?;
        let n = width as usize * height as usize;
        let nb = n.div_ceil(BLOCK as usize);
        let max_frame = frame_bytes(width, height, n, DepthBits::B32);
        Ok(GpuRenderer {
            keys: gpu.alloc::<u64>(n)?,
            depth: gpu.alloc::<f32>(n)?,
            value: gpu.alloc::<f32>(n)?,
            tri: gpu.alloc::<u32>(n)?,
            clip: gpu.alloc::<f32>(4)?,
            large: gpu.alloc::<u32>(1)?,
            large_count: gpu.zeros::<u32>(1)?,
            mvp: gpu.zeros::<f32>(16)?,
            block_counts: gpu.zeros::<u32>(nb)?,
            total: gpu.zeros::<u32>(1)?,
            range: gpu.zeros::<u32>(2)?,
            header: gpu.zeros::<u32>(HEADER_BYTES / 4)?,
            frame: gpu.zeros::<u8>(max_frame)?,
            pinned: gpu.alloc_pinned::<u8>(max_frame)?,
            frame_len: 0,
            encoded_depth: DepthBits::B32,
            gpu,
            _module: module,
            k,
            width,
            height,
        })
    }

    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }
    pub fn size(&self) -> (u32, u32) {
        (self.width, self.height)
    }

    fn pixels(&self) -> usize {
        self.width as usize * self.height as usize
    }

    /// Fills a height field's vertices from device fields (no host copy: the simulation's
    /// results feed the rasterizer directly, §6.3.5).
    pub fn heightfield(
        &self,
        src: &HeightfieldSource<'_>,
        out: &mut GpuSurface,
    ) -> Result<(), RenderError> {
        let n = src.nx * src.ny;
        if src.z.len() != n || src.value.len() != n || out.verts.len() != 4 * n {
            return Err(RenderError::Invalid(format!(
                "height field {}x{}: fields of {} and {} values, vertex buffer of {}",
                src.nx,
                src.ny,
                src.z.len(),
                src.value.len(),
                out.verts.len() / 4
            )));
        }
        let (wet, use_wet, wet_min) = match src.wet {
            Some((w, m)) => {
                if w.len() != n {
                    return Err(RenderError::Invalid(format!(
                        "height field mask of {} values for {n} points",
                        w.len()
                    )));
                }
                (w, 1i32, m)
            }
            None => (src.z, 0i32, 0.0f32),
        };
        let (nx, ny) = (src.nx as u32, src.ny as u32);
        let (h, x0, y0) = (src.spacing, src.origin[0], src.origin[1]);
        self.gpu
            .launch(&self.k.heightfield, LaunchConfig::for_items(n, BLOCK)?)
            .arg(src.z)
            .arg(src.value)
            .arg(wet)
            .arg(&use_wet)
            .arg(&wet_min)
            .arg(&nx)
            .arg(&ny)
            .arg(&h)
            .arg(&x0)
            .arg(&y0)
            .arg(&src.z_scale)
            .arg(&out.verts)
            .run()?;
        Ok(())
    }

    /// Enqueues the rasterization of `surf` seen by `camera` (no host synchronisation).
    pub fn rasterize(&mut self, surf: &GpuSurface, camera: &Camera) -> Result<(), RenderError> {
        camera.validate()?;
        let nv = surf.num_vertices();
        let nt = surf.num_triangles();
        if nt > crate::surface::MAX_TRIANGLES || nv > u32::MAX as usize {
            return Err(RenderError::Invalid(format!(
                "{nt} triangles / {nv} vertices exceed the 32-bit range"
            )));
        }
        if self.clip.len() < 4 * nv {
            self.clip = self.gpu.alloc::<f32>(4 * nv)?;
        }
        if self.large.len() < nt {
            self.large = self.gpu.alloc::<u32>(nt)?;
        }
        let g = &self.gpu;
        g.copy_to_device(&camera.view_proj().0, &mut self.mvp)?;
        let (w, h) = (self.width as i32, self.height as i32);
        let (nv32, nt32, npx) = (nv as u32, nt as u32, self.pixels() as u32);
        g.launch(&self.k.transform, LaunchConfig::for_items(nv, BLOCK)?)
            .arg(&surf.verts)
            .arg(&nv32)
            .arg(&self.mvp)
            .arg(&self.clip)
            .run()?;
        g.launch(
            &self.k.clear,
            LaunchConfig::for_items(self.pixels(), BLOCK)?,
        )
        .arg(&self.keys)
        .arg(&npx)
        .arg(&self.large_count)
        .run()?;
        g.launch(&self.k.raster, LaunchConfig::for_items(nt, BLOCK)?)
            .arg(&self.clip)
            .arg(&surf.indices)
            .arg(&nt32)
            .arg(&w)
            .arg(&h)
            .arg(&self.keys)
            .arg(&self.large)
            .arg(&self.large_count)
            .run()?;
        if nt > 0 {
            g.launch(
                &self.k.raster_large,
                LaunchConfig::blocks(LARGE_BLOCKS, BLOCK),
            )
            .arg(&self.clip)
            .arg(&surf.indices)
            .arg(&w)
            .arg(&h)
            .arg(&self.keys)
            .arg(&self.large)
            .arg(&self.large_count)
            .run()?;
        }
        g.launch(
            &self.k.resolve,
            LaunchConfig::for_items(self.pixels(), BLOCK)?,
        )
        .arg(&self.keys)
        .arg(&self.clip)
        .arg(&surf.verts)
        .arg(&surf.indices)
        .arg(&w)
        .arg(&h)
        .arg(&self.depth)
        .arg(&self.value)
        .arg(&self.tri)
        .run()?;
        Ok(())
    }

    /// The last rasterization, copied to the host (for tests and the CPU encoder).
    pub fn download_raster(&self) -> Result<Raster, RenderError> {
        Ok(Raster {
            width: self.width,
            height: self.height,
            depth: self.gpu.download(&self.depth)?,
            value: self.gpu.download(&self.value)?,
            triangle: self.gpu.download(&self.tri)?,
        })
    }

    /// Enqueues the encoder's three passes over the last rasterization (no synchronisation).
    pub fn encode_kernels(
        &mut self,
        camera: &Camera,
        params: &EncodeParams,
    ) -> Result<(), RenderError> {
        params.validate()?;
        let g = &self.gpu;
        let header = FrameHeader {
            flags: if params.depth == DepthBits::B16 {
                FLAG_DEPTH16
            } else {
                0
            },
            frame_id: params.frame_id,
            width: self.width,
            height: self.height,
            visible: 0,
            value_min: 0.0,
            value_max: 0.0,
            view: camera.view,
            proj: camera.proj,
        }
        .to_bytes();
        let words: Vec<u32> = header
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        g.copy_to_device(&words, &mut self.header)?;
        let n = self.pixels();
        let nb = n.div_ceil(BLOCK as usize);
        let n32 = n as u32;
        let nb32 = nb as u32;
        let auto = params.value_range.is_none() as i32;
        let (fmin, fmax) = params.value_range.unwrap_or((0.0, 0.0));
        let d16 = (params.depth == DepthBits::B16) as i32;
        g.launch(&self.k.range_init, LaunchConfig::blocks(1, 1))
            .arg(&self.range)
            .run()?;
        g.launch(&self.k.count, LaunchConfig::blocks(nb32, BLOCK))
            .arg(&self.tri)
            .arg(&self.value)
            .arg(&n32)
            .arg(&self.block_counts)
            .arg(&self.range)
            .arg(&auto)
            .run()?;
        g.launch(&self.k.scan, LaunchConfig::blocks(1, 1024))
            .arg(&self.block_counts)
            .arg(&nb32)
            .arg(&self.total)
            .run()?;
        g.launch(&self.k.write, LaunchConfig::blocks(nb32, BLOCK))
            .arg(&self.tri)
            .arg(&self.depth)
            .arg(&self.value)
            .arg(&n32)
            .arg(&self.block_counts)
            .arg(&self.total)
            .arg(&self.range)
            .arg(&auto)
            .arg(&fmin)
            .arg(&fmax)
            .arg(&d16)
            .arg(&self.header)
            .arg(&self.frame)
            .run()?;
        self.encoded_depth = params.depth;
        Ok(())
    }

    /// Reads the visible count and copies exactly the encoded frame's bytes into the pinned
    /// host buffer; returns the frame length.
    pub fn copy_frame(&mut self) -> Result<usize, RenderError> {
        let visible = self.gpu.download_at(&self.total, 0)? as usize;
        let len = frame_bytes(self.width, self.height, visible, self.encoded_depth);
        self.gpu
            .download_prefix_pinned(&self.frame, len, &mut self.pinned)?;
        self.frame_len = len;
        Ok(len)
    }

    /// The last copied frame.
    pub fn frame(&self) -> Result<&[u8], RenderError> {
        Ok(&self.pinned.as_slice()?[..self.frame_len])
    }

    /// Rasterize, encode and copy one frame; returns its bytes (in pinned memory).
    pub fn render(
        &mut self,
        surf: &GpuSurface,
        camera: &Camera,
        params: &EncodeParams,
    ) -> Result<&[u8], RenderError> {
        self.rasterize(surf, camera)?;
        self.encode_kernels(camera, params)?;
        self.copy_frame()?;
        self.frame()
    }

    /// [`GpuRenderer::render`] with per-stage timings: CUDA events around the rasterizer
    /// and the encoder, the host clock around the count read and the copy.
    pub fn render_timed(
        &mut self,
        surf: &GpuSurface,
        camera: &Camera,
        params: &EncodeParams,
    ) -> Result<FrameTimes, RenderError> {
        let gpu = self.gpu.clone();
        let t = tessera_gpu::EventTimer::new(&gpu)?;
        t.start()?;
        self.rasterize(surf, camera)?;
        let rasterize_ms = t.stop()? as f64;
        t.start()?;
        self.encode_kernels(camera, params)?;
        let encode_ms = t.stop()? as f64;
        let c0 = std::time::Instant::now();
        self.copy_frame()?;
        let copy_ms = c0.elapsed().as_secs_f64() * 1e3;
        Ok(FrameTimes {
            rasterize_ms,
            encode_ms,
            copy_ms,
        })
    }
}
