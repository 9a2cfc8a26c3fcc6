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
