//! Frames from a simulation whose fields live on the GPU: the raw fields are downloaded and
//! the query expression runs on the GPU (PTX JIT) next to them, so only the derived field
//! crosses PCIe (dissertation §6.3.4); the frame must match the same frame built from the
//! CPU copy of the simulation. Run on a CUDA machine with `--include-ignored`.
//!
//! Tolerances: raw fields bit-identical (the same f32 values are copied); min/max identical;
//! `sqrt(VelocityX^2+VelocityY^2)` and `(VelocityX^2+VelocityY^2)/2+Pressure` bit-identical
//! (only + * / sqrt, which PTX rounds as the CPU does); `sin(Pressure)*Vorticity` relative or
//! absolute 2e-4 (PTX sin.approx range reduction, bounds of tessera-query's ptx.rs).

use std::sync::Arc;

use tessera_flow::{AnalyticSource, Simulation};
use tessera_gpu::Gpu;
use tessera_stream::frame::{compile_query, FrameBuilder, QueryPlace, SubKey, Subscription};
use tessera_stream::pb::{server_message::Kind, Encoding};
use tessera_stream::wire::{decode_server, payloads};

fn frame_values(
    sim: &dyn Simulation,
    expr: &str,
    cpu_jit: bool,
) -> (Vec<Vec<f32>>, Vec<(f32, f32)>) {
    let names: Vec<&str> = sim.fields().iter().map(|f| f.name.as_str()).collect();
    let q = compile_query(expr, &names, cpu_jit).unwrap();
    let sub = Subscription {
        key: SubKey {
            fields: vec!["VelocityX".into(), "Pressure".into()],
            expression: expr.into(),
            precision: Encoding::F32,
            subscription: 1,
            rixel: None,
        },
        query: Some(Arc::new(q)),
    };
    let bytes = FrameBuilder::default().build(sim, &sub).unwrap();
    let r = decode_server(bytes).unwrap();
    let Some(Kind::Frame(f)) = &r.header.kind else {
        panic!()
    };
    let vals = payloads(f).iter().map(|p| r.values(p).to_vec()).collect();
    let Some(tessera_stream::pb::frame::Kind::Grid(g)) = &f.kind else {
        panic!()
    };
    (vals, g.fields.iter().map(|b| (b.min, b.max)).collect())
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn frame_query_on_gpu_matches_reference() {
    let gpu = match Gpu::probe() {
        Ok(g) => Arc::new(g),
        Err(e) => {
            eprintln!("skipping: no CUDA GPU ({e})");
            return;
        }
    };
    // uneven sizes, well above a warp
    let (nx, ny) = (333, 197);
    let mut cpu = AnalyticSource::new(nx, ny, 0.013).unwrap();
    let mut dev = AnalyticSource::new(nx, ny, 0.013)
        .unwrap()
        .on_gpu(gpu.clone())
        .unwrap();
    for _ in 0..3 {
        cpu.step().unwrap();
        dev.step().unwrap();
    }
    for (expr, exact) in [
        ("sqrt(VelocityX^2+VelocityY^2)", true),
        ("(VelocityX^2+VelocityY^2)/2+Pressure", true),
        ("sin(Pressure)*Vorticity", false),
    ] {
        let names: Vec<&str> = dev.fields().iter().map(|f| f.name.as_str()).collect();
        let q = compile_query(expr, &names, false).unwrap();
        assert_eq!(
            FrameBuilder::query_place(&dev, &q),
            QueryPlace::Gpu,
            "{expr} runs on the GPU"
        );
        let (a, ra) = frame_values(&cpu, expr, true);
        let (b, rb) = frame_values(&dev, expr, false);
        assert_eq!(a[0], b[0], "VelocityX copied bit-identically");
        assert_eq!(a[1], b[1], "Pressure copied bit-identically");
        assert_eq!(ra[..2], rb[..2]);
        let mut bad = 0;
        for (k, (x, y)) in a[2].iter().zip(&b[2]).enumerate() {
            let ok = if exact {
                x == y
            } else {
                (x - y).abs() <= 2e-4 * x.abs().max(1.0)
            };
            if !ok {
                bad += 1;
                if bad < 5 {
                    eprintln!("{expr}[{k}]: cpu {x} gpu {y}");
                }
            }
        }
        assert_eq!(
            bad,
            0,
            "{expr}: {bad} of {} values outside tolerance",
            a[2].len()
        );
    }
}

/// The 3D view's frame of a flood on the GPU (height field filled from the device fields,
/// rasterized, encoded and compacted there; only the frame crosses PCIe) equals the CPU
/// reference's for the same step: byte-identical for a raw field as the value; for the speed
/// query (GPU JIT vs CPU JIT, + * / sqrt max: bit-identical per cell as in
/// `frame_query_on_gpu_matches_reference`) the same mask and depths and values within one
/// 16-bit quantum of the range.
#[test]
#[ignore = "needs a CUDA GPU"]
fn rixel_frame_on_gpu_matches_reference() {
    use tessera_flow::shallow_water::{Scene, ShallowWater};
    use tessera_flow::FieldData;
    use tessera_render::raster::rasterize_cpu;
    use tessera_render::rixel::{decode, encode_cpu, DepthBits, EncodeParams};
    use tessera_render::{scene, Camera, Orbit};
    use tessera_stream::pb;
    use tessera_stream::rixel::{frame_bytes, CameraKey, RixelKey, Scene3D, DRY_DEPTH};

    let gpu = match Gpu::probe() {
        Ok(g) => Arc::new(g),
        Err(e) => {
            eprintln!("skipping: no CUDA GPU ({e})");
            return;
        }
    };
    let n = 203; // uneven, rows well above a warp
    let mut sim = ShallowWater::scene(Scene::DamBreak, n, 1)
        .unwrap()
        .on_gpu(gpu.clone())
        .unwrap();
    sim.advance(40).unwrap();
    let (center, radius) = Scene3D::flood().bounds(&sim).unwrap();
    let (w, h) = (333u32, 217u32);
    let cam = Camera::orbit(
        &Orbit::framing(center, radius, 215.0, 40.0),
        w as f64 / h as f64,
    )
    .unwrap();
    let camera = CameraKey::from_pb(&pb::Camera {
        id: 5,
        width: w,
        height: h,
        view: cam.view.0.to_vec(),
        proj: cam.proj.0.to_vec(),
    })
    .unwrap();
    let host = |name: &str| match sim.field(name).unwrap() {
        FieldData::Device(d) => gpu.download(d).unwrap(),
        FieldData::Host(_) => panic!("{name} is not on the GPU"),
    };
    let (z, depth) = (host("Surface"), host("Depth"));
    let mut builder = FrameBuilder::default();
    builder.scene3d = Some(Scene3D::flood());
    let names: Vec<&str> = sim.fields().iter().map(|f| f.name.as_str()).collect();
    let q = "sqrt(MomentumX^2+MomentumY^2)/max(Depth,1e-3)";
    for (field, expr) in [("Depth", ""), ("", q)] {
        let sub = Subscription {
            key: SubKey {
                fields: if field.is_empty() {
                    vec![]
                } else {
                    vec![field.into()]
                },
                expression: expr.into(),
                precision: Encoding::F32,
                subscription: 1,
                rixel: Some(RixelKey {
                    depth_bits: 16,
                    compress: false,
                    camera: camera.clone(),
                }),
            },
            query: (!expr.is_empty())
                .then(|| Arc::new(compile_query(expr, &names, false).unwrap())),
        };
        let msg = decode_server(builder.build(&sim, &sub).unwrap()).unwrap();
        let Some(Kind::Frame(f)) = &msg.header.kind else {
            panic!("not a frame")
        };
        let Some(pb::frame::Kind::Rixel(r)) = &f.kind else {
            panic!("not a rixel frame")
        };
        let got = frame_bytes(&msg.bytes, r).to_vec();
        let values: Vec<f32> = if expr.is_empty() {
            depth.clone()
        } else {
            let (hu, hv) = (host("MomentumX"), host("MomentumY"));
            hu.iter()
                .zip(&hv)
                .zip(&depth)
                .map(|((&a, &b), &d)| (a * a + b * b).sqrt() / d.max(1e-3))
                .collect()
        };
        let s =
            scene::grid_surface(&sim.grid(), &z, &values, Some((&depth, DRY_DEPTH)), 8.0).unwrap();
        let raster = rasterize_cpu(&s, &cam, w, h).unwrap();
        let want = encode_cpu(&raster, &cam, &EncodeParams::new(5, DepthBits::B16)).unwrap();
        let (dg, dw) = (decode(&got).unwrap(), decode(&want).unwrap());
        assert!(dw.header.visible > w * h / 10, "the valley fills the view");
        assert_eq!(dg.header.visible, dw.header.visible, "{field}{expr}: mask");
        assert_eq!(dg.pixels, dw.pixels, "{field}{expr}: mask");
        assert_eq!(dg.depth, dw.depth, "{field}{expr}: depths");
        if expr.is_empty() {
            assert!(got == want, "Depth: the GPU frame is byte-identical");
        } else {
            let quantum = dw.value_quantum();
            for k in 0..dw.header.visible as usize {
                match (dg.value(k), dw.value(k)) {
                    (None, None) => {}
                    (Some(a), Some(b)) => assert!(
                        (a - b).abs() <= 1.01 * quantum,
                        "{expr}: pixel {k}: {a} vs {b} (quantum {quantum})"
                    ),
                    (a, b) => panic!("{expr}: pixel {k}: {a:?} vs {b:?}"),
                }
            }
        }
        eprintln!(
            "rixel_frame_on_gpu_matches_reference {field}{expr}: {w}x{h}, {} visible, {} bytes",
            dw.header.visible,
            got.len()
        );
    }
}
