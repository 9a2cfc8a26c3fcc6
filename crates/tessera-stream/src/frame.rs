//! Building one frame from the current simulation step (dissertation §6.3.3, §6.3.4): the
//! requested raw fields are copied out of the simulation where they live, the query
//! expression is evaluated next to the data (GPU JIT when the simulation runs on the GPU, so
//! only the derived field crosses PCIe; CPU JIT otherwise), min/max are taken, and the result
//! is written straight into the aligned message of [`crate::wire`] - the serialization step
//! of Table 6.1 is one copy per array.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use rayon::prelude::*;
use tessera_flow::{FieldData, Simulation};
use tessera_gpu::{DeviceBuffer, Gpu};
use tessera_query::gpu::GpuKernel;
use tessera_query::{Backend, Par, Precision, Query};

use crate::f16::f32_to_f16;
use crate::pb::{self, server_message::Kind, Encoding, FieldBlock, GridFrame, ServerMessage};
use crate::wire::FrameBuf;
use crate::StreamError;

/// What a subscription asks for: raw fields, an optional expression, the encoding. Frames
/// are built once per distinct key and step and shared by every connection with that key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SubKey {
    pub fields: Vec<String>,
    pub expression: String,
    pub precision: Encoding,
    pub subscription: u32,
    /// The 3D view: rixel frames for a camera instead of grid frames.
    pub rixel: Option<crate::rixel::RixelKey>,
}

/// A compiled subscription: the key and, when it has an expression, the query compiled over
/// the fields the expression reads (in that order).
#[derive(Debug)]
pub struct Subscription {
    pub key: SubKey,
    pub query: Option<Arc<Query>>,
}

/// Values per chunk of the parallel copy / min-max loops.
const CHUNK: usize = 1 << 16;

/// Smallest and largest finite value (NaN, NaN when there is none).
pub fn min_max(v: &[f32]) -> (f32, f32) {
    let (lo, hi) = v.par_chunks(CHUNK).map(min_max_seq).reduce(
        || (f32::INFINITY, f32::NEG_INFINITY),
        |a, b| (a.0.min(b.0), a.1.max(b.1)),
    );
    if lo > hi {
        (f32::NAN, f32::NAN)
    } else {
        (lo, hi)
    }
}

fn min_max_seq(v: &[f32]) -> (f32, f32) {
    // Eight independent lanes so the compiler keeps them in SIMD registers; infinities and
    // NaN are excluded by the finiteness test.
    let mut lo = [f32::INFINITY; 8];
    let mut hi = [f32::NEG_INFINITY; 8];
    let mut chunks = v.chunks_exact(8);
    for c in &mut chunks {
        for k in 0..8 {
            let x = if c[k].is_finite() { c[k] } else { lo[k] };
            lo[k] = lo[k].min(x);
            let y = if c[k].is_finite() { c[k] } else { hi[k] };
            hi[k] = hi[k].max(y);
        }
    }
    let (mut l, mut h) = (f32::INFINITY, f32::NEG_INFINITY);
    for k in 0..8 {
        l = l.min(lo[k]);
        h = h.max(hi[k]);
    }
    for &x in chunks.remainder() {
        if x.is_finite() {
            l = l.min(x);
            h = h.max(x);
        }
    }
    (l, h)
}

/// Copies `src` into `dst` (same length) and returns its min/max, in parallel chunks.
fn copy_min_max(src: &[f32], dst: &mut [f32]) -> (f32, f32) {
    let (lo, hi) = dst
        .par_chunks_mut(CHUNK)
        .zip(src.par_chunks(CHUNK))
        .map(|(d, s)| {
            d.copy_from_slice(s);
            min_max_seq(s)
        })
        .reduce(
            || (f32::INFINITY, f32::NEG_INFINITY),
            |a, b| (a.0.min(b.0), a.1.max(b.1)),
        );
    if lo > hi {
        (f32::NAN, f32::NAN)
    } else {
        (lo, hi)
    }
}

/// Converts `src` to binary16 into `dst` and returns the min/max of `src`.
fn convert_min_max(src: &[f32], dst: &mut [u16]) -> (f32, f32) {
    dst.par_chunks_mut(CHUNK)
        .zip(src.par_chunks(CHUNK))
        .for_each(|(d, s)| {
            for (o, &x) in d.iter_mut().zip(s) {
                *o = f32_to_f16(x);
            }
        });
    min_max(src)
}

/// Builds frames on the simulation thread; keeps the scratch buffers and loaded GPU kernels
/// between frames.
#[derive(Default)]
pub struct FrameBuilder {
    kernels: HashMap<String, GpuKernel>,
    device_out: Option<DeviceBuffer<f32>>,
    host_scratch: Vec<f32>,
    host_inputs: Vec<Vec<f32>>,
    /// How the simulation is drawn in 3D (subscriptions with a rixel key need it).
    pub scene3d: Option<crate::rixel::Scene3D>,
    rixel: crate::rixel::RixelBuilder,
    /// Message buffers recycled from frame to frame (see [`crate::wire::BufferPool`]).
    pool: std::sync::Arc<crate::wire::BufferPool>,
}

/// Where the expression of a frame was evaluated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueryPlace {
    Gpu,
    Cpu,
}

impl FrameBuilder {
    /// Where `sub`'s expression runs for `sim`: on the GPU when every field it reads lives
    /// there, on the CPU otherwise.
    pub fn query_place(sim: &dyn Simulation, q: &Query) -> QueryPlace {
        if sim.gpu().is_some()
            && q.fields()
                .iter()
                .all(|f| matches!(sim.field(f), Ok(FieldData::Device(_))))
        {
            QueryPlace::Gpu
        } else {
            QueryPlace::Cpu
        }
    }

    /// The frame of `sub` for the simulation's current step, encoded as a server message.
    pub fn build(
        &mut self,
        sim: &dyn Simulation,
        sub: &Subscription,
    ) -> Result<Bytes, StreamError> {
        if let Some(rk) = &sub.key.rixel {
            let scene = self
                .scene3d
                .as_ref()
                .ok_or_else(|| StreamError::Invalid("this simulation has no 3D view".into()))?;
            return self.rixel.build(sim, scene, sub, rk);
        }
        let n = sim.grid().num_cells();
        let grid = sim.grid();
        let enc = sub.key.precision;
        let mut blocks: Vec<FieldBlock> = sub
            .key
            .fields
            .iter()
            .map(|name| FieldBlock {
                name: name.clone(),
                ..Default::default()
            })
            .collect();
        if sub.query.is_some() {
            blocks.push(FieldBlock {
                name: sub.key.expression.clone(),
                derived: true,
                ..Default::default()
            });
        }
        let mut header = ServerMessage {
            kind: Some(Kind::Frame(pb::Frame {
                frame_id: sim.steps(),
                time: sim.time(),
                subscription: sub.key.subscription,
                kind: Some(pb::frame::Kind::Grid(GridFrame {
                    dims: grid.dims.iter().map(|&d| d as u32).collect(),
                    fields: blocks,
                })),
            })),
        };
        let arrays: Vec<(usize, Encoding)> = (0..sub.key.fields.len()
            + sub.query.is_some() as usize)
            .map(|_| (n, enc))
            .collect();
        let mut fb =
            FrameBuf::new_pooled(&self.pool, FrameBuf::header_bound(header.clone()), &arrays)?;
        let mut ranges = Vec::with_capacity(arrays.len());
        for (i, name) in sub.key.fields.iter().enumerate() {
            let data = sim.field(name)?;
            ranges.push(self.put(sim.gpu(), data, &mut fb, i, enc)?);
        }
        if let Some(q) = &sub.query {
            let i = sub.key.fields.len();
            ranges.push(self.eval_query(sim, q, &mut fb, i, enc)?);
        }
        let Some(Kind::Frame(f)) = &mut header.kind else {
            unreachable!("built above")
        };
        let Some(pb::frame::Kind::Grid(g)) = &mut f.kind else {
            unreachable!("built above")
        };
        for (i, (b, (lo, hi))) in g.fields.iter_mut().zip(ranges).enumerate() {
            b.min = lo;
            b.max = hi;
            b.values = Some(fb.payload(i));
        }
        fb.finish(&header)
    }

    /// Writes one field into array `i` of the message; returns its min/max.
    fn put(
        &mut self,
        gpu: Option<&Arc<Gpu>>,
        data: FieldData<'_>,
        fb: &mut FrameBuf,
        i: usize,
        enc: Encoding,
    ) -> Result<(f32, f32), StreamError> {
        match (data, enc) {
            (FieldData::Host(src), Encoding::F32) => Ok(copy_min_max(src, fb.f32_mut(i))),
            (FieldData::Host(src), Encoding::F16) => Ok(convert_min_max(src, fb.u16_mut(i))),
            (FieldData::Device(buf), Encoding::F32) => {
                let gpu = gpu.ok_or_else(no_gpu)?;
                let dst = fb.f32_mut(i);
                gpu.download_into(buf, dst).map_err(gerr)?;
                Ok(min_max(dst))
            }
            (FieldData::Device(buf), Encoding::F16) => {
                let gpu = gpu.ok_or_else(no_gpu)?;
                self.host_scratch.resize(buf.len(), 0.0);
                gpu.download_into(buf, &mut self.host_scratch)
                    .map_err(gerr)?;
                Ok(convert_min_max(&self.host_scratch, fb.u16_mut(i)))
            }
        }
    }

    /// Evaluates the subscription's expression where the data lives and writes the derived
    /// field into array `i`; returns its min/max.
    fn eval_query(
        &mut self,
        sim: &dyn Simulation,
        q: &Query,
        fb: &mut FrameBuf,
        i: usize,
        enc: Encoding,
    ) -> Result<(f32, f32), StreamError> {
        let n = sim.grid().num_cells();
        match Self::query_place(sim, q) {
            QueryPlace::Gpu => {
                let gpu = sim.gpu().ok_or_else(no_gpu)?.clone();
                let mut inputs = Vec::with_capacity(q.fields().len());
                for f in q.fields() {
                    match sim.field(f)? {
                        FieldData::Device(b) => inputs.push(b),
                        FieldData::Host(_) => unreachable!("checked by query_place"),
                    }
                }
                if !self.kernels.contains_key(q.source()) {
                    if self.kernels.len() >= 64 {
                        self.kernels.clear();
                    }
                    let k = q.gpu_kernel(&gpu, Precision::F32).map_err(qerr)?;
                    self.kernels.insert(q.source().to_string(), k);
                }
                let k = &self.kernels[q.source()];
                if self.device_out.as_ref().is_none_or(|b| b.len() != n) {
                    self.device_out = Some(gpu.alloc::<f32>(n).map_err(gerr)?);
                }
                let out = self.device_out.as_mut().expect("allocated above");
                q.launch(&gpu, k, &inputs, out).map_err(qerr)?;
                let out = self.device_out.take().expect("allocated above");
                let r = self.put(Some(&gpu), FieldData::Device(&out), fb, i, enc);
                self.device_out = Some(out);
                r
            }
            QueryPlace::Cpu => {
                // Host fields are read in place; device fields (a mixed simulation) are
                // downloaded into reusable buffers first.
                let gpu = sim.gpu().cloned();
                let mut host: Vec<&[f32]> = Vec::with_capacity(q.fields().len());
                let datas: Vec<FieldData<'_>> = q
                    .fields()
                    .iter()
                    .map(|f| sim.field(f))
                    .collect::<Result<_, _>>()?;
                let n_dev = datas
                    .iter()
                    .filter(|d| matches!(d, FieldData::Device(_)))
                    .count();
                self.host_inputs.resize_with(n_dev, Vec::new);
                let mut k = 0;
                for d in &datas {
                    if let FieldData::Device(b) = d {
                        let g = gpu.as_ref().ok_or_else(no_gpu)?;
                        self.host_inputs[k].resize(b.len(), 0.0);
                        g.download_into(b, &mut self.host_inputs[k]).map_err(gerr)?;
                        k += 1;
                    }
                }
                let mut k = 0;
                for d in &datas {
                    match d {
                        FieldData::Host(s) => host.push(s),
                        FieldData::Device(_) => {
                            host.push(&self.host_inputs[k]);
                            k += 1;
                        }
                    }
                }
                match enc {
                    Encoding::F32 => {
                        let dst = fb.f32_mut(i);
                        q.eval_cpu_with(Backend::CpuJit, Par::Rayon, &host, dst)
                            .map_err(qerr)?;
                        Ok(min_max(dst))
                    }
                    Encoding::F16 => {
                        self.host_scratch.resize(n, 0.0);
                        q.eval_cpu_with(Backend::CpuJit, Par::Rayon, &host, &mut self.host_scratch)
                            .map_err(qerr)?;
                        Ok(convert_min_max(&self.host_scratch, fb.u16_mut(i)))
                    }
                }
            }
        }
    }
}

fn no_gpu() -> StreamError {
    StreamError::Invalid("a device field without a GPU".into())
}

fn gerr(e: tessera_gpu::GpuError) -> StreamError {
    StreamError::Flow(tessera_flow::FlowError::Gpu(e))
}

fn qerr(e: tessera_query::QueryError) -> StreamError {
    StreamError::Query {
        expression: String::new(),
        span: e.span().map(|s| (s.start as u32, s.end as u32)),
        message: e.to_string(),
    }
}

/// Compiles `expression` over the simulation's fields: first against all names (so an
/// unknown identifier is reported with its span and the list of fields), then over only the
/// fields it reads, in order, which is what frames evaluate. The CPU JIT is compiled here too
/// when `cpu_jit`, so that compile time is paid (and bounded) before the first frame.
pub fn compile_query(
    expression: &str,
    all_fields: &[&str],
    cpu_jit: bool,
) -> Result<Query, tessera_query::QueryError> {
    let full = Query::compile(expression, all_fields)?;
    let used: Vec<&str> = full.used_fields().iter().map(|&i| all_fields[i]).collect();
    let q = Query::compile(expression, &used)?;
    if cpu_jit {
        q.jit(Precision::F32)?;
    }
    Ok(q)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_max_skips_non_finite_values() {
        let mut v: Vec<f32> = (0..100_001).map(|i| (i as f32 * 0.01).sin()).collect();
        v[5] = f32::NAN;
        v[7] = f32::INFINITY;
        v[100_000] = -2.5;
        let (lo, hi) = min_max(&v);
        assert_eq!(lo, -2.5);
        assert!((hi - 1.0).abs() < 1e-4);
        let (lo, hi) = min_max(&[f32::NAN, f32::NEG_INFINITY]);
        assert!(lo.is_nan() && hi.is_nan());
        let mut d = vec![0.0; v.len()];
        assert_eq!(copy_min_max(&v, &mut d).0, -2.5);
        assert_eq!(d[100_000], -2.5);
    }

    #[test]
    fn queries_compile_over_the_fields_they_read() {
        let q = compile_query(
            "sqrt(VelocityY^2)",
            &["VelocityX", "VelocityY", "Pressure"],
            true,
        )
        .unwrap();
        assert_eq!(q.fields(), ["VelocityY"]);
        let e = compile_query("Velocity + 1", &["VelocityX"], false).unwrap_err();
        assert_eq!(e.span().map(|s| (s.start, s.end)), Some((0, 8)));
    }
}
