//! The 3D view's frames: hybrid remote rendering with rixels (dissertation §6.3.5, sizes in
//! §6.4.4). A subscription with a `RixelView` gets, instead of the grid fields, the
//! simulation's surface rendered for the camera the client sent with its frame request
//! (`FrameRequest.camera`): per pixel whether the surface is visible, its depth and the
//! subscribed value (a field or the query expression), encoded as one rixel frame (layout
//! byte by byte in `docs/rixel-frame.md`). When the simulation lives on the GPU, the height
//! field is filled from the device fields, rasterized, encoded and stream-compacted there,
//! so only the compacted frame crosses PCIe; otherwise the CPU reference renders the same
//! bits. The client rebuilds world positions from the depths with the frame's matrices
//! (Eqs. 6.5-6.6), reprojects them for its current camera while the user orbits (Eq. 6.4),
//! and color-maps the values itself.
//!
//! Message: the protobuf header names the frame's byte range (`RixelFrame.offset`, 8-byte
//! aligned, and `length`); the rixel frame follows the header as one array.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use prost::Message as _;
use tessera_flow::{FieldData, Simulation};
use tessera_gpu::{DeviceBuffer, Gpu};
use tessera_query::gpu::GpuKernel;
use tessera_query::{Backend, Par, Precision, Query};
use tessera_render::camera::Mat4;
use tessera_render::compress::{compress, CompressParams};
use tessera_render::cuda::{GpuRenderer, GpuSurface};
use tessera_render::raster::rasterize_cpu;
use tessera_render::rixel::{encode_cpu, DepthBits, EncodeParams};
use tessera_render::{scene, Camera, Orbit, Surface};

use crate::frame::Subscription;
use crate::pb::{self, server_message::Kind, ServerMessage};
use crate::StreamError;

/// Largest viewport side a client may ask for.
pub const MAX_VIEWPORT: u32 = 4096;
/// Viewport of frames rendered before the client sent a camera.
pub const DEFAULT_VIEWPORT: (u32, u32) = (640, 480);
/// Renderers (one per viewport size, with their device buffers) kept between frames.
const MAX_RENDERERS: usize = 4;

/// How a simulation is drawn in 3D.
#[derive(Clone, Debug, PartialEq)]
pub enum Scene3D {
    /// A 2D grid simulation as a height field: the point of cell `(i, j)` at the cell centre
    /// at height `z_scale * elevation`; where the field `wet.0` is not above `wet.1` the
    /// surface has no value (drawn as plain terrain, e.g. dry land under a flood).
    HeightField {
        elevation: String,
        wet: Option<(String, f32)>,
        z_scale: f32,
    },
    /// A fixed triangle surface with named fields per vertex, for example the boundary of a
    /// finished `fem solve` ([`crate::results::boundary_scene`]); rendered on the CPU.
    Mesh(Arc<MeshScene>),
}

/// A surface with named per-vertex fields (the value of a frame is one of them, or a query
/// expression over them).
#[derive(Debug, PartialEq)]
pub struct MeshScene {
    /// Triangles and vertex positions (its `values` are not used).
    pub surface: Surface,
    /// Field names, as the 2D view of the same result names them.
    pub fields: Vec<String>,
    /// Per field, one value per vertex.
    pub values: Vec<Vec<f32>>,
}

impl MeshScene {
    /// The values of field `name` per vertex.
    pub fn field(&self, name: &str) -> Result<&[f32], StreamError> {
        self.fields
            .iter()
            .position(|f| f == name)
            .map(|k| self.values[k].as_slice())
            .ok_or_else(|| {
                StreamError::Invalid(format!(
                    "the 3D surface has no field `{name}` (it has: {})",
                    self.fields.join(", ")
                ))
            })
    }
}

/// Water thinner than this (m) is drawn as dry terrain.
pub const DRY_DEPTH: f32 = 1e-3;

impl Scene3D {
    /// The flood of the shallow-water scenes: the water surface (the terrain where dry),
    /// heights exaggerated 8 times, cells with less than 1 mm of water without a value.
    pub fn flood() -> Scene3D {
        Scene3D::HeightField {
            elevation: "Surface".into(),
            wet: Some(("Depth".into(), DRY_DEPTH)),
            z_scale: 8.0,
        }
    }

    /// Checks the scene against the simulation and returns its bounding sphere (from the
    /// current fields; water may rise a little above it).
    pub fn bounds(&self, sim: &dyn Simulation) -> Result<([f64; 3], f64), StreamError> {
        match self {
            Scene3D::Mesh(m) => Ok(m.surface.bounding_sphere()),
            Scene3D::HeightField {
                elevation,
                wet,
                z_scale,
            } => {
                let grid = sim.grid();
                if grid.dimension() != 2 {
                    return Err(StreamError::Invalid(format!(
                        "a height-field 3D view needs a 2D simulation, `{}` is {}D",
                        sim.name(),
                        grid.dimension()
                    )));
                }
                if let Some((w, _)) = wet {
                    sim.field(w)?;
                }
                let z = host_copy(sim, elevation)?;
                let (lo, hi) = z
                    .iter()
                    .filter(|v| v.is_finite())
                    .fold((f64::MAX, f64::MIN), |(a, b), &v| {
                        (a.min(v as f64), b.max(v as f64))
                    });
                let (lo, hi) = if lo > hi { (0.0, 0.0) } else { (lo, hi) };
                let zs = *z_scale as f64;
                Ok(scene::grid_bounds(&grid, zs * lo, zs * hi))
            }
        }
    }
}

/// What the server tells clients about the 3D view (`Hello.scene3d`).
#[derive(Clone, Debug, PartialEq)]
pub struct Scene3DInfo {
    pub scene: Scene3D,
    pub center: [f64; 3],
    pub radius: f64,
}

impl Scene3DInfo {
    pub fn to_pb(&self) -> pb::SceneBounds {
        pb::SceneBounds {
            center: self.center.to_vec(),
            radius: self.radius,
        }
    }

    /// The camera of frames rendered before the client sent one: the bounding sphere framed
    /// from yaw 225, pitch 35 (as `tessera render rixels` and the browser's first view).
    pub fn default_camera(&self) -> CameraKey {
        let (w, h) = DEFAULT_VIEWPORT;
        let o = Orbit::framing(self.center, self.radius, 225.0, 35.0);
        let cam = Camera::orbit(&o, w as f64 / h as f64).expect("framing gives a valid orbit");
        CameraKey {
            id: 0,
            width: w,
            height: h,
            view: cam.view.0.map(f32::to_bits),
            proj: cam.proj.0.map(f32::to_bits),
        }
    }
}

/// A client's camera as part of a subscription key (matrices as bit patterns, so keys hash).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CameraKey {
    /// The client's `Camera.id`, echoed in the rixel frame's header.
    pub id: u32,
    pub width: u32,
    pub height: u32,
    pub view: [u32; 16],
    pub proj: [u32; 16],
}

impl CameraKey {
    /// Checks a camera from a frame request: viewport within `1..=MAX_VIEWPORT`, 16 finite
    /// numbers per matrix, `P V` invertible.
    pub fn from_pb(c: &pb::Camera) -> Result<CameraKey, String> {
        if !(1..=MAX_VIEWPORT).contains(&c.width) || !(1..=MAX_VIEWPORT).contains(&c.height) {
            return Err(format!(
                "camera viewport {}x{}: each side must be in 1..={MAX_VIEWPORT}",
                c.width, c.height
            ));
        }
        let m = |v: &[f32], what: &str| -> Result<[f32; 16], String> {
            <[f32; 16]>::try_from(v)
                .map_err(|_| format!("camera {what} matrix has {} numbers, not 16", v.len()))
        };
        let cam = Camera {
            view: Mat4(m(&c.view, "view")?),
            proj: Mat4(m(&c.proj, "projection")?),
        };
        cam.validate().map_err(|e| e.to_string())?;
        Ok(CameraKey {
            id: c.id,
            width: c.width,
            height: c.height,
            view: cam.view.0.map(f32::to_bits),
            proj: cam.proj.0.map(f32::to_bits),
        })
    }

    /// The same view (ignoring the id): no new frame is needed for it.
    pub fn same_view(&self, o: &CameraKey) -> bool {
        self.width == o.width
            && self.height == o.height
            && self.view == o.view
            && self.proj == o.proj
    }

    pub fn camera(&self) -> Camera {
        Camera {
            view: Mat4(self.view.map(f32::from_bits)),
            proj: Mat4(self.proj.map(f32::from_bits)),
        }
    }
}

/// The 3D part of a subscription key: encoding and the camera frames are rendered for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RixelKey {
    /// 16 or 32.
    pub depth_bits: u32,
    pub compress: bool,
    pub camera: CameraKey,
}

impl RixelKey {
    /// The key of a `RixelView` (depth bits 0 means 16).
    pub fn from_pb(v: &pb::RixelView, camera: CameraKey) -> Result<RixelKey, String> {
        let depth_bits = match v.depth_bits {
            0 | 16 => 16,
            32 => 32,
            b => return Err(format!("depth bits {b}: 16 or 32")),
        };
        Ok(RixelKey {
            depth_bits,
            compress: v.compress,
            camera,
        })
    }
}

fn device<'a>(sim: &'a dyn Simulation, name: &str) -> Result<&'a DeviceBuffer<f32>, StreamError> {
    match sim.field(name)? {
        FieldData::Device(b) => Ok(b),
        FieldData::Host(_) => Err(StreamError::Invalid(format!(
            "field {name} is not on the GPU"
        ))),
    }
}

fn host_copy(sim: &dyn Simulation, name: &str) -> Result<Vec<f32>, StreamError> {
    Ok(match sim.field(name)? {
        FieldData::Host(h) => h.to_vec(),
        FieldData::Device(d) => sim
            .gpu()
            .ok_or_else(|| StreamError::Invalid("a device field without a GPU".into()))?
            .download(d)
            .map_err(gerr)?,
    })
}

fn gerr(e: tessera_gpu::GpuError) -> StreamError {
    StreamError::Flow(tessera_flow::FlowError::Gpu(e))
}

fn rerr(e: tessera_render::RenderError) -> StreamError {
    StreamError::Invalid(format!("rendering: {e}"))
}

fn qerr(e: tessera_query::QueryError) -> StreamError {
    StreamError::Invalid(format!("query: {e}"))
}

/// Renders rixel frames on the simulation thread; keeps renderers, the height-field vertex
/// buffer and loaded query kernels between frames.
#[derive(Default)]
pub struct RixelBuilder {
    renderers: HashMap<(u32, u32), GpuRenderer>,
    surface: Option<GpuSurface>,
    value: Option<DeviceBuffer<f32>>,
    kernels: HashMap<String, GpuKernel>,
}

impl RixelBuilder {
    /// The rixel frame of `sub` (whose key has `rk`) for the simulation's current step, as a
    /// server message.
    pub fn build(
        &mut self,
        sim: &dyn Simulation,
        scene: &Scene3D,
        sub: &Subscription,
        rk: &RixelKey,
    ) -> Result<Bytes, StreamError> {
        let (name, derived) = match &sub.query {
            Some(_) => (sub.key.expression.clone(), true),
            None => (
                sub.key
                    .fields
                    .last()
                    .cloned()
                    .ok_or_else(|| StreamError::Invalid("a 3D view needs a value".into()))?,
                false,
            ),
        };
        let frame = self.render(sim, scene, sub, rk, &name)?;
        let frame = if rk.compress {
            compress(&frame, &CompressParams::default()).map_err(rerr)?
        } else {
            frame
        };
        let visible = tessera_render::FrameHeader::parse(&frame).map_or(0, |h| h.visible);
        let mut header = ServerMessage {
            kind: Some(Kind::Frame(pb::Frame {
                frame_id: sim.steps(),
                time: sim.time(),
                subscription: sub.key.subscription,
                kind: Some(pb::frame::Kind::Rixel(pb::RixelFrame {
                    offset: u32::MAX,
                    length: frame.len() as u32,
                    name,
                    derived,
                    camera_id: rk.camera.id,
                    visible,
                    compressed: rk.compress,
                })),
            })),
        };
        Ok(frame_message(&mut header, &frame))
    }

    fn render(
        &mut self,
        sim: &dyn Simulation,
        scene: &Scene3D,
        sub: &Subscription,
        rk: &RixelKey,
        value_name: &str,
    ) -> Result<Vec<u8>, StreamError> {
        let cam = rk.camera.camera();
        let depth = if rk.depth_bits == 32 {
            DepthBits::B32
        } else {
            DepthBits::B16
        };
        let params = EncodeParams::new(rk.camera.id, depth);
        let (w, h) = (rk.camera.width, rk.camera.height);
        let (elevation, wet, z_scale) = match scene {
            Scene3D::HeightField {
                elevation,
                wet,
                z_scale,
            } => (elevation, wet, z_scale),
            Scene3D::Mesh(m) => {
                // a fixed surface: the value per vertex (or the query over the vertex fields)
                let values = match &sub.query {
                    Some(q) => {
                        let inputs: Vec<&[f32]> = q
                            .fields()
                            .iter()
                            .map(|f| m.field(f))
                            .collect::<Result<_, _>>()?;
                        let mut out = vec![0.0f32; m.surface.positions.len()];
                        q.eval_cpu_with(Backend::CpuJit, Par::Rayon, &inputs, &mut out)
                            .map_err(qerr)?;
                        out
                    }
                    None => m.field(value_name)?.to_vec(),
                };
                let surface = Surface {
                    positions: m.surface.positions.clone(),
                    triangles: m.surface.triangles.clone(),
                    values,
                };
                let raster = rasterize_cpu(&surface, &cam, w, h).map_err(rerr)?;
                return encode_cpu(&raster, &cam, &params).map_err(rerr);
            }
        };
        let grid = sim.grid();
        let on_device = |n: &str| matches!(sim.field(n), Ok(FieldData::Device(_)));
        let value_on_device = match &sub.query {
            Some(q) => q.fields().iter().all(|f| on_device(f.as_str())),
            None => on_device(value_name),
        };
        let gpu = sim.gpu().cloned();
        if let (Some(gpu), true) = (
            gpu,
            value_on_device
                && on_device(elevation.as_str())
                && wet.as_ref().is_none_or(|(n, _)| on_device(n.as_str())),
        ) {
            // GPU: height field filled from the device fields, rasterized, encoded and
            // compacted there; only the frame's bytes are copied to the host.
            let dev = |n: &str| device(sim, n);
            if let Some(q) = &sub.query {
                self.eval_query_gpu(&gpu, sim, q)?;
            }
            if self.renderers.len() >= MAX_RENDERERS && !self.renderers.contains_key(&(w, h)) {
                self.renderers.clear();
            }
            if !self.renderers.contains_key(&(w, h)) {
                let r = GpuRenderer::new(gpu.clone(), w, h).map_err(rerr)?;
                self.renderers.insert((w, h), r);
            }
            let [nx, ny, _] = grid.dims;
            if self
                .surface
                .as_ref()
                .is_none_or(|s| s.num_vertices() != nx * ny)
            {
                self.surface = Some(GpuSurface::heightfield(&gpu, nx, ny).map_err(rerr)?);
            }
            let r = self.renderers.get_mut(&(w, h)).expect("inserted above");
            let surf = self.surface.as_mut().expect("allocated above");
            let value = match &sub.query {
                Some(_) => self.value.as_ref().expect("evaluated above"),
                None => dev(value_name)?,
            };
            let wet = match wet {
                Some((n, min)) => Some((dev(n)?, *min)),
                None => None,
            };
            scene::grid_surface_gpu(r, &grid, dev(elevation)?, value, wet, *z_scale, surf)
                .map_err(rerr)?;
            return Ok(r.render(surf, &cam, &params).map_err(rerr)?.to_vec());
        }
        // CPU reference: the same surface, coverage rules and bits.
        let z = host_copy(sim, elevation)?;
        let values = match &sub.query {
            Some(q) => {
                let inputs: Vec<Vec<f32>> = q
                    .fields()
                    .iter()
                    .map(|f| host_copy(sim, f))
                    .collect::<Result<_, _>>()?;
                let refs: Vec<&[f32]> = inputs.iter().map(|v| v.as_slice()).collect();
                let mut out = vec![0.0f32; grid.num_cells()];
                q.eval_cpu_with(Backend::CpuJit, Par::Rayon, &refs, &mut out)
                    .map_err(qerr)?;
                out
            }
            None => host_copy(sim, value_name)?,
        };
        let wet_host = match wet {
            Some((n, min)) => Some((host_copy(sim, n)?, *min)),
            None => None,
        };
        let surface = scene::grid_surface(
            &grid,
            &z,
            &values,
            wet_host.as_ref().map(|(v, m)| (v.as_slice(), *m)),
            *z_scale,
        )
        .map_err(rerr)?;
        let raster = rasterize_cpu(&surface, &cam, w, h).map_err(rerr)?;
        encode_cpu(&raster, &cam, &params).map_err(rerr)
    }

    fn eval_query_gpu(
        &mut self,
        gpu: &Arc<Gpu>,
        sim: &dyn Simulation,
        q: &Query,
    ) -> Result<(), StreamError> {
        let n = sim.grid().num_cells();
        let mut inputs = Vec::with_capacity(q.fields().len());
        for f in q.fields() {
            match sim.field(f)? {
                FieldData::Device(b) => inputs.push(b),
                FieldData::Host(_) => {
                    return Err(StreamError::Invalid(format!("field {f} is not on the GPU")))
                }
            }
        }
        if !self.kernels.contains_key(q.source()) {
            if self.kernels.len() >= 64 {
                self.kernels.clear();
            }
            let k = q.gpu_kernel(gpu, Precision::F32).map_err(qerr)?;
            self.kernels.insert(q.source().to_string(), k);
        }
        if self.value.as_ref().is_none_or(|b| b.len() != n) {
            self.value = Some(gpu.alloc::<f32>(n).map_err(gerr)?);
        }
        let out = self.value.as_mut().expect("allocated above");
        q.launch(gpu, &self.kernels[q.source()], &inputs, out)
            .map_err(qerr)
    }
}

/// `[u32 header length][header][zero padding][frame at an 8-byte aligned offset]`, with the
/// header's `RixelFrame.offset` set to where the frame lands.
fn frame_message(header: &mut ServerMessage, frame: &[u8]) -> Bytes {
    // the offset is a varint: encode with the largest one for a bound, then the real one
    let bound = header.encoded_len();
    let offset = (4 + bound).div_ceil(8) * 8;
    if let Some(Kind::Frame(f)) = &mut header.kind {
        if let Some(pb::frame::Kind::Rixel(r)) = &mut f.kind {
            r.offset = offset as u32;
        }
    }
    let h = header.encoded_len();
    let mut out = Vec::with_capacity(offset + frame.len());
    out.extend_from_slice(&(h as u32).to_le_bytes());
    header.encode(&mut out).expect("a Vec grows as needed");
    out.resize(offset, 0);
    out.extend_from_slice(frame);
    Bytes::from(out)
}

/// The rixel frame's bytes inside a received message (validated by `wire::decode_server`).
pub fn frame_bytes<'a>(bytes: &'a [u8], r: &pb::RixelFrame) -> &'a [u8] {
    &bytes[r.offset as usize..r.offset as usize + r.length as usize]
}
