//! `tessera render ...`: hybrid remote rendering with rixels (dissertation §6.3.5, §6.4.4).
//!
//! - `tessera render rixels --scene sphere|terrain|shallow-water|mesh FILE [--field F]
//!   [--size WxH] [--camera SPEC] [--depth-bits 16|32] --out frame.rix [--compress] [--json]`:
//!   renders one scene, writes one encoded frame (atomically) and prints its sizes beside
//!   the original rixel encoding.
//! - `tessera render bench`: Fig. 6.10 (frame size vs coverage), the GPU frame pipeline's
//!   timing (rasterize + encode + copy) on a 2M-triangle surface, and frame compression.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, bail};
use clap::{Args, Subcommand};
use tessera_core::DeviceChoice;
use tessera_flow::shallow_water::{Scene as SwScene, ShallowWater, FIELDS};
use tessera_flow::{FieldData, Simulation};
use tessera_gpu::{DeviceBuffer, Gpu};
use tessera_query::Query;
use tessera_render::bench as rb;
use tessera_render::compress::{compress, CompressParams};
use tessera_render::cuda::{GpuRenderer, GpuSurface};
use tessera_render::frame::{render_frame, FrameReport};
use tessera_render::rixel::{DepthBits, EncodeParams};
use tessera_render::{io, scene, Surface};

use crate::device::{resolve, Backend};

#[derive(Args, Debug)]
pub struct RenderArgs {
    #[command(subcommand)]
    cmd: RenderCmd,
}

#[derive(Subcommand, Debug)]
enum RenderCmd {
    /// Render one scene into one encoded rixel frame and print its sizes.
    Rixels(RixelsArgs),
    /// Fig. 6.10, the GPU frame pipeline's timing, and frame compression.
    Bench(BenchArgs),
}

#[derive(Args, Debug)]
struct RixelsArgs {
    /// sphere | terrain | shallow-water | mesh FILE (.obj or .vtu)
    #[arg(long, num_args = 1..=2, value_names = ["KIND", "FILE"], default_value = "sphere")]
    scene: Vec<String>,
    /// The value: sphere x|y|z|wave; terrain height; shallow water a field (Depth, Speed, ...)
    /// or an expression over them; mesh: a .vtu point-data array, or x|y|z for .obj.
    #[arg(long)]
    field: Option<String>,
    /// Viewport WIDTHxHEIGHT.
    #[arg(long, default_value = "1024x1024")]
    size: String,
    /// Camera: comma-separated yaw=DEG, pitch=DEG, dist=D, fov=DEG, near=, far=, target=x:y:z,
    /// ortho[=HEIGHT]; unnamed keys frame the scene.
    #[arg(long, default_value = "")]
    camera: String,
    /// 16 or 32.
    #[arg(long, default_value_t = 32)]
    depth_bits: u32,
    /// Output frame.
    #[arg(long)]
    out: PathBuf,
    /// Also write the losslessly compressed frame (OUT with .rixz) and report its size.
    #[arg(long)]
    compress: bool,
    /// Fixed value range MIN:MAX (default: the visible pixels' range).
    #[arg(long)]
    range: Option<String>,
    /// Frame id stored in the header.
    #[arg(long, default_value_t = 1)]
    frame_id: u32,
    /// auto, cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto")]
    device: DeviceChoice,
    /// Grid side of the terrain and shallow-water scenes.
    #[arg(long, default_value_t = 512)]
    grid: usize,
    /// Shallow water: steps before the frame.
    #[arg(long, default_value_t = 300)]
    steps: usize,
    /// Shallow water: dam-break | rain.
    #[arg(long, default_value = "dam-break")]
    sim_scene: String,
    /// Vertical exaggeration of terrain and water (default 8 for the terrain scenes).
    #[arg(long)]
    z_scale: Option<f32>,
    /// Mesh (.vtu): displace points by SCALE times the point array NAME (NAME=SCALE).
    #[arg(long, value_name = "NAME=SCALE")]
    displace: Option<String>,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct BenchArgs {
    /// Viewport WIDTHxHEIGHT.
    #[arg(long, default_value = "1024x1024")]
    size: String,
    /// Rings of the bench sphere (about 4 rings^2 triangles: 708 gives 2.0 M).
    #[arg(long, default_value_t = 708)]
    rings: u32,
    /// Timed frames per measurement (median).
    #[arg(long, default_value_t = 50)]
    runs: usize,
    /// auto, cpu, cuda or cuda:N (cpu: Fig. 6.10 and compression only).
    #[arg(long, default_value = "auto")]
    device: DeviceChoice,
    /// Write the compressed sample frames into this folder (for the browser decode bench).
    #[arg(long)]
    frames_out: Option<PathBuf>,
}

pub fn run(a: RenderArgs) -> anyhow::Result<()> {
    match a.cmd {
        RenderCmd::Rixels(r) => rixels(r),
        RenderCmd::Bench(b) => bench(b),
    }
}

fn parse_size(s: &str) -> anyhow::Result<(u32, u32)> {
    let (w, h) = s
        .split_once(['x', 'X'])
        .ok_or_else(|| anyhow!("--size {s}: expected WIDTHxHEIGHT"))?;
    let w: u32 = w.parse().map_err(|_| anyhow!("--size {s}: bad width"))?;
    let h: u32 = h.parse().map_err(|_| anyhow!("--size {s}: bad height"))?;
    tessera_render::raster::check_viewport(w, h)?;
    Ok((w, h))
}

fn parse_range(s: &str) -> anyhow::Result<(f32, f32)> {
    let (a, b) = s
        .split_once(':')
        .ok_or_else(|| anyhow!("--range {s}: expected MIN:MAX"))?;
    Ok((
        a.parse().map_err(|_| anyhow!("--range {s}: bad minimum"))?,
        b.parse().map_err(|_| anyhow!("--range {s}: bad maximum"))?,
    ))
}

/// Writes `bytes` to `path` atomically and privately ([`tessera_core::atomic`]).
fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    Ok(tessera_core::atomic::write_bytes(path, bytes)?)
}

/// The shallow-water simulation advanced `steps`, with its value field evaluated (a field
/// name or a query over the fields) where the simulation lives.
struct SwFrame {
    sim: ShallowWater,
    value_host: Option<Vec<f32>>,
    value_dev: Option<DeviceBuffer<f32>>,
}

fn shallow_water(a: &RixelsArgs, gpu: Option<&Arc<Gpu>>, field: &str) -> anyhow::Result<SwFrame> {
    let scene: SwScene = a.sim_scene.parse()?;
    let mut sim = ShallowWater::scene(scene, a.grid, 1)?;
    if let Some(g) = gpu {
        sim = sim.on_gpu(g.clone())?;
    }
    let pb = (!a.json).then(|| crate::util::spinner(&format!("shallow water: {} steps", a.steps)));
    sim.advance(a.steps)?;
    if let Some(p) = pb {
        p.finish_and_clear();
    }
    let (value_host, value_dev) = if FIELDS.contains(&field) {
        (None, None)
    } else {
        let q = Query::compile(field, &FIELDS).map_err(|e| anyhow!("--field: {e}"))?;
        match sim.gpu().cloned() {
            Some(g) => {
                let bufs: Vec<&DeviceBuffer<f32>> = FIELDS
                    .iter()
                    .map(|f| match sim.field(f) {
                        Ok(FieldData::Device(b)) => Ok(b),
                        _ => Err(anyhow!("field {f} is not on the device")),
                    })
                    .collect::<anyhow::Result<_>>()?;
                let mut out = g.zeros::<f32>(sim.grid().num_cells())?;
                q.eval_gpu(&g, &bufs, &mut out)
                    .map_err(|e| anyhow!("--field: {e}"))?;
                (None, Some(out))
            }
            None => {
                let host: Vec<&[f32]> = FIELDS
                    .iter()
                    .map(|f| match sim.field(f) {
                        Ok(FieldData::Host(h)) => Ok(h),
                        _ => Err(anyhow!("field {f} is not on the host")),
                    })
                    .collect::<anyhow::Result<_>>()?;
                let mut out = vec![0.0f32; sim.grid().num_cells()];
                q.eval_cpu(&host, &mut out)
                    .map_err(|e| anyhow!("--field: {e}"))?;
                (Some(out), None)
            }
        }
    };
    Ok(SwFrame {
        sim,
        value_host,
        value_dev,
    })
}

fn host_field(sim: &ShallowWater, name: &str) -> anyhow::Result<Vec<f32>> {
    Ok(match sim.field(name)? {
        FieldData::Host(h) => h.to_vec(),
        FieldData::Device(d) => sim
            .gpu()
            .ok_or_else(|| anyhow!("device field without a GPU"))?
            .download(d)?,
    })
}

/// Water thinner than this is drawn as dry terrain (no value).
const DRY_DEPTH: f32 = 1e-3;

fn rixels(a: RixelsArgs) -> anyhow::Result<()> {
    let (w, h) = parse_size(&a.size)?;
    let depth = DepthBits::from_bits(a.depth_bits)?;
    let backend = resolve(a.device)?;
    let gpu = backend.gpu().cloned();
    if !a.json {
        eprintln!("device: {}", backend.describe());
    }
    let mut params = EncodeParams::new(a.frame_id, depth);
    if let Some(r) = &a.range {
        params.value_range = Some(parse_range(r)?);
    }
    let aspect = w as f64 / h as f64;
    let kind = a.scene[0].as_str();
    let (frame, times, what) = match kind {
        "sphere" | "terrain" | "mesh" => {
            let (surface, what): (Surface, String) = match kind {
                "sphere" => {
                    let f = a.field.as_deref().unwrap_or("wave");
                    let mut s = rb::bench_sphere(256)?;
                    match f {
                        "wave" => {}
                        "x" | "y" | "z" => {
                            let k = io::coordinate_index(f).unwrap_or(2);
                            s.set_values(|p| p[k]);
                        }
                        _ => bail!("--field {f}: the sphere has x, y, z, wave"),
                    }
                    (
                        s,
                        format!("sphere ({} triangles), field {f}", 2 * 256 * 511),
                    )
                }
                "terrain" => {
                    if a.field.as_deref().is_some_and(|f| f != "height") {
                        bail!("--field: the terrain has only `height`");
                    }
                    let s = scene::terrain_surface(a.grid, 1, a.z_scale.unwrap_or(8.0))?;
                    let n = s.num_triangles();
                    (
                        s,
                        format!("terrain {0}x{0} ({n} triangles), field height", a.grid),
                    )
                }
                _ => {
                    let file = a
                        .scene
                        .get(1)
                        .ok_or_else(|| anyhow!("--scene mesh needs a FILE (.obj or .vtu)"))?;
                    let path = Path::new(file);
                    let is_obj = path.extension().is_some_and(|e| e == "obj");
                    let f = a.field.clone().unwrap_or_else(|| {
                        if is_obj {
                            "z".into()
                        } else {
                            "von_mises".into()
                        }
                    });
                    let disp = match &a.displace {
                        Some(d) => {
                            let (n, s) = d
                                .split_once('=')
                                .ok_or_else(|| anyhow!("--displace {d}: expected NAME=SCALE"))?;
                            Some((
                                n.to_string(),
                                s.parse::<f64>()
                                    .map_err(|_| anyhow!("--displace {d}: bad scale"))?,
                            ))
                        }
                        None => None,
                    };
                    let s =
                        io::read_surface(path, &f, disp.as_ref().map(|(n, s)| (n.as_str(), *s)))?;
                    let n = s.num_triangles();
                    (s, format!("{file} ({n} triangles), field {f}"))
                }
            };
            let (c, r) = surface.bounding_sphere();
            let (cam, _) = scene::camera_for(c, r, aspect, &a.camera)?;
            let (f, t) = render_frame(&surface, &cam, w, h, &params, gpu.as_ref())?;
            (f, t, what)
        }
        "shallow-water" => {
            let field = a.field.clone().unwrap_or_else(|| "Depth".into());
            let sw = shallow_water(&a, gpu.as_ref(), &field)?;
            let grid = sw.sim.grid();
            let zs = a.z_scale.unwrap_or(8.0);
            let bc = sw.sim.bathymetry();
            let (zmin, zmax) = bc
                .iter()
                .fold((f64::MAX, f64::MIN), |(a, b), &v| (a.min(v), b.max(v)));
            let (c, r) = scene::grid_bounds(&grid, zs as f64 * zmin, zs as f64 * (zmax + 5.0));
            let (cam, _) = scene::camera_for(c, r, aspect, &a.camera)?;
            let what = format!(
                "shallow water {} {}x{}, {} steps (t = {:.1} s, {} of {} tiles active), field {field}",
                a.sim_scene,
                grid.dims[0],
                grid.dims[1],
                sw.sim.steps(),
                sw.sim.time(),
                sw.sim.active_tiles(),
                sw.sim.total_tiles()
            );
            match &gpu {
                Some(g) => {
                    let mut r = GpuRenderer::new(g.clone(), w, h)?;
                    let mut surf = GpuSurface::heightfield(g, grid.dims[0], grid.dims[1])?;
                    let dev = |n: &str| match sw.sim.field(n) {
                        Ok(FieldData::Device(b)) => Ok(b),
                        _ => Err(anyhow!("field {n} is not on the device")),
                    };
                    let value = match &sw.value_dev {
                        Some(v) => v,
                        None => dev(&field)?,
                    };
                    scene::grid_surface_gpu(
                        &r,
                        &grid,
                        dev("Surface")?,
                        value,
                        Some((dev("Depth")?, DRY_DEPTH)),
                        zs,
                        &mut surf,
                    )?;
                    r.render(&surf, &cam, &params)?;
                    let t = r.render_timed(&surf, &cam, &params)?;
                    (r.frame()?.to_vec(), Some(t), what)
                }
                None => {
                    let z = host_field(&sw.sim, "Surface")?;
                    let d = host_field(&sw.sim, "Depth")?;
                    let v = match &sw.value_host {
                        Some(v) => v.clone(),
                        None => host_field(&sw.sim, &field)?,
                    };
                    let s = scene::grid_surface(&grid, &z, &v, Some((&d, DRY_DEPTH)), zs)?;
                    let (f, t) = render_frame(&s, &cam, w, h, &params, None)?;
                    (f, t, what)
                }
            }
        }
        k => bail!("--scene {k}: expected sphere, terrain, shallow-water or mesh FILE"),
    };
    write_atomic(&a.out, &frame)?;
    let mut report = FrameReport::new(&frame)?;
    report.times = times;
    if a.compress {
        let z = compress(&frame, &CompressParams::default())?;
        write_atomic(&a.out.with_extension("rixz"), &z)?;
        report.compressed = Some(z.len());
    }
    if a.json {
        let mut j = report.to_json();
        j.pop();
        println!(
            "{j},\"scene\":{},\"out\":{}}}",
            serde_json::to_string(&what)?,
            serde_json::to_string(&a.out.display().to_string())?
        );
    } else {
        println!("scene: {what}");
        for l in report.lines() {
            println!("{l}");
        }
        println!("wrote {}", a.out.display());
    }
    Ok(())
}

fn bench(a: BenchArgs) -> anyhow::Result<()> {
    let (w, h) = parse_size(&a.size)?;
    let backend = resolve(a.device)?;
    println!("device: {}", backend.describe());
    println!();
    print!("{}", rb::fig_6_10_table(w, h, &rb::SWEEP).render());
    println!("{}", rb::break_even_lines(w, h));
    // the encoders produce exactly the modelled sizes
    let mut checked = 0;
    for &c in &rb::SWEEP {
        let n = (c * (w as f64 * h as f64)).round() as usize;
        let raster = rb::disc_raster(w, h, n);
        for d in [DepthBits::B16, DepthBits::B32] {
            let cam = rb::camera_for_coverage(0.5, 1.0)?;
            let f = tessera_render::rixel::encode_cpu(&raster, &cam, &EncodeParams::new(0, d))?;
            if f.len() != tessera_render::rixel::frame_bytes(w, h, n, d) {
                bail!(
                    "encoded size {} differs from the layout's at coverage {c}",
                    f.len()
                );
            }
            checked += 1;
        }
    }
    println!("measured: {checked} encoded frames of the sweep have exactly the layout's size\n");

    let sphere = rb::bench_sphere(a.rings)?;
    let (nv, nt) = (sphere.positions.len(), sphere.num_triangles());
    let mut samples: Vec<(f64, DepthBits, Vec<u8>)> = Vec::new();
    if let Backend::Cuda(g) = &backend {
        let mut t = rb::Table::new(
            &format!(
                "GPU frame pipeline, {w}x{h}, sphere of {nt} triangles ({nv} vertices); median of {} frames",
                a.runs
            ),
            &[
                "coverage",
                "depth",
                "frame bytes",
                "rasterize ms",
                "encode ms",
                "copy ms",
                "total ms",
                "copy GB/s",
                "device floor ms",
            ],
        );
        let mut r = GpuRenderer::new(g.clone(), w, h)?;
        let gs = GpuSurface::upload(g, &sphere)?;
        for c in [0.1, 0.5, 1.0] {
            let cam = rb::camera_for_coverage(c, w as f64 / h as f64)?;
            for d in [DepthBits::B16, DepthBits::B32] {
                let ft = rb::gpu_frame_timing(&mut r, &gs, &cam, d, 5, a.runs)?;
                let floor = rb::frame_floor_bytes(nv, nt, (w * h) as usize, ft.frame_bytes) as f64
                    / 3.0e12
                    * 1e3;
                t.row(vec![
                    format!("{:.1}%", 100.0 * ft.coverage),
                    format!("{}-bit", 8 * d.bytes()),
                    ft.frame_bytes.to_string(),
                    format!("{:.3}", ft.rasterize_ms),
                    format!("{:.3}", ft.encode_ms),
                    format!("{:.3}", ft.copy_ms),
                    format!("{:.3}", ft.total_ms),
                    format!("{:.1}", ft.frame_bytes as f64 / (ft.copy_ms * 1e-3) / 1e9),
                    format!("{floor:.3}"),
                ]);
                samples.push((ft.coverage, d, r.frame()?.to_vec()));
            }
        }
        // the terrain of the flood scenes, 2.09 M triangles
        let terrain = scene::terrain_surface(1024, 1, 8.0)?;
        let tg = GpuSurface::upload(g, &terrain)?;
        let (c, rad) = terrain.bounding_sphere();
        let (cam, _) = scene::camera_for(c, rad, w as f64 / h as f64, "")?;
        for d in [DepthBits::B16, DepthBits::B32] {
            let ft = rb::gpu_frame_timing(&mut r, &tg, &cam, d, 5, a.runs)?;
            let floor = rb::frame_floor_bytes(
                terrain.positions.len(),
                terrain.num_triangles(),
                (w * h) as usize,
                ft.frame_bytes,
            ) as f64
                / 3.0e12
                * 1e3;
            t.row(vec![
                format!("terrain {:.1}%", 100.0 * ft.coverage),
                format!("{}-bit", 8 * d.bytes()),
                ft.frame_bytes.to_string(),
                format!("{:.3}", ft.rasterize_ms),
                format!("{:.3}", ft.encode_ms),
                format!("{:.3}", ft.copy_ms),
                format!("{:.3}", ft.total_ms),
                format!("{:.1}", ft.frame_bytes as f64 / (ft.copy_ms * 1e-3) / 1e9),
                format!("{floor:.3}"),
            ]);
        }
        print!("{}", t.render());
        println!("target: rasterize + encode + copy of a 1024x1024 frame of a 2M-triangle surface under 1 ms; \
                  the copy moves only the frame's bytes (its length is read from the device first)\n");
    } else {
        // CPU frames for the compression table (a smaller sphere: the reference is serial per pixel)
        let small = rb::bench_sphere(a.rings.min(256))?;
        for c in [0.1, 0.5, 1.0] {
            for d in [DepthBits::B16, DepthBits::B32] {
                let (f, cov) = rb::cpu_frame(&small, w, h, c, d)?;
                samples.push((cov, d, f));
            }
        }
    }
    let mut t = rb::Table::new(
        "Lossless compression (mask runs + predictive byte planes + raw DEFLATE); Rust decode",
        &[
            "coverage",
            "depth",
            "raw bytes",
            "level 6 bytes",
            "ratio",
            "compress ms",
            "decode ms",
            "level 1 bytes",
            "compress ms",
            "<= 1 MiB",
        ],
    );
    for (cov, d, f) in &samples {
        let r1 = rb::measure_compression(f, *cov, *d, &CompressParams::default(), 5)?;
        let p1 = CompressParams {
            level: 1,
            ..CompressParams::default()
        };
        let r6 = rb::measure_compression(f, *cov, *d, &p1, 3)?;
        t.row(vec![
            format!("{:.1}%", 100.0 * cov),
            format!("{}-bit", 8 * d.bytes()),
            r1.raw.to_string(),
            r1.compressed.to_string(),
            format!("{:.2}", r1.raw as f64 / r1.compressed as f64),
            format!("{:.2}", r1.compress_ms),
            format!("{:.2}", r1.decompress_ms),
            r6.compressed.to_string(),
            format!("{:.2}", r6.compress_ms),
            (r1.compressed <= 1 << 20).to_string(),
        ]);
        if let Some(dir) = &a.frames_out {
            std::fs::create_dir_all(dir)?;
            let name = format!("frame-{:03.0}-{}.rixz", 100.0 * cov, 8 * d.bytes());
            write_atomic(&dir.join(name), &compress(f, &CompressParams::default())?)?;
            let raw = format!("frame-{:03.0}-{}.rix", 100.0 * cov, 8 * d.bytes());
            write_atomic(&dir.join(raw), f)?;
        }
    }
    print!("{}", t.render());
    println!("goal: <= 1 MiB per 1024x1024 frame at 50 % coverage, browser decode under 5 ms (web/bench)");
    Ok(())
}
