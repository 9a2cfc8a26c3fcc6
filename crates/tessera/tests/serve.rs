//! `tessera serve` as a user runs it: 100 concurrent headless clients on loopback all receive
//! frames for a bounded time while the server's memory stays bounded (peak reported), and
//! `tessera stream bench` measures a short run against it. `TESSERA_LOAD_SECONDS` sets the load
//! duration (default 10; the recorded figure in BENCHMARKS.md uses 30).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tessera_render::rixel::decode;
use tessera_render::{Camera, Orbit};
use tessera_stream::client::{Client, Event};
use tessera_stream::pb::{self, Encoding};

fn bin() -> std::ffi::OsString {
    std::env::var_os("TESSERA_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_tessera").into())
}

/// Starts `tessera serve ARGS --bind 127.0.0.1:0` and returns the child and its stream URL.
fn start_server(args: &[&str]) -> (Child, String) {
    let mut child = Command::new(bin())
        .arg("serve")
        .args(args)
        .args(["--bind", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run tessera serve");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(rest) = line.split("(stream: ").nth(1) {
                let _ = tx.send(rest.split(';').next().unwrap().to_string());
            }
        }
    });
    let url = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("tessera serve printed its address");
    (child, url)
}

/// Resident set size of a process in bytes (Linux).
fn rss(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: u64 = s
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kb * 1024)
}

#[test]
fn hundred_clients_receive_frames_and_server_memory_stays_bounded() {
    let secs: f64 = std::env::var("TESSERA_LOAD_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10.0);
    let (mut child, url) = start_server(&[
        "--sim", "analytic", "--grid", "128x128", "--device", "cpu", "--rate", "30",
    ]);
    let pid = child.id();
    // sample the server's memory every 100 ms
    let done = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (done, peak) = (done.clone(), peak.clone());
        std::thread::spawn(move || {
            let mut series = Vec::new();
            while !done.load(Ordering::Relaxed) {
                if let Some(r) = rss(pid) {
                    peak.fetch_max(r, Ordering::Relaxed);
                    series.push((Instant::now(), r));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            series
        })
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let counts: Vec<u64> = rt.block_on(async {
        let mut tasks = Vec::new();
        for k in 0..100u32 {
            let url = url.clone();
            tasks.push(tokio::spawn(async move {
                let mut c = Client::connect(&url).await.expect("connect");
                // most clients share one subscription, every fifth one has its own query
                if k % 5 == 0 {
                    c.subscribe(
                        &[],
                        &format!("sqrt(VelocityX^2+VelocityY^2)*{}", k + 1),
                        Encoding::F32,
                        1,
                    )
                    .await
                    .unwrap();
                } else {
                    c.subscribe(&["Pressure"], "", Encoding::F32, 1)
                        .await
                        .unwrap();
                }
                c.request(2).await.unwrap();
                let end = Instant::now() + Duration::from_secs_f64(secs);
                let mut frames = 0u64;
                while Instant::now() < end {
                    let left = end.saturating_duration_since(Instant::now());
                    match c.next_event_within(left).await.expect("stream") {
                        Some(Event::Frame(f)) => {
                            assert_eq!(f.values(0).len(), 128 * 128);
                            frames += 1;
                            c.request(1).await.unwrap();
                        }
                        Some(Event::Error(e)) => panic!("client {k}: {}", e.message),
                        Some(Event::QueryError(q)) => panic!("client {k}: {}", q.message),
                        _ => {}
                    }
                }
                c.close().await;
                frames
            }));
        }
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.unwrap());
        }
        out
    });
    // the server is still alive and serves a new client after the load
    let alive = rt.block_on(async {
        let mut c = Client::connect(&url).await.ok()?;
        c.subscribe(&["VelocityX"], "", Encoding::F32, 1)
            .await
            .ok()?;
        c.request(1).await.ok()?;
        c.next_frame(Duration::from_secs(20))
            .await
            .ok()
            .map(|f| f.frame.frame_id)
    });
    done.store(true, Ordering::Relaxed);
    let series = sampler.join().unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        alive.is_some(),
        "the server serves a new client after the load"
    );
    let min = *counts.iter().min().unwrap();
    let total: u64 = counts.iter().sum();
    let peak_mb = peak.load(Ordering::Relaxed) as f64 / 1e6;
    // growth from the first third of the run to its end: bounded, not a leak
    let t0 = series.first().map(|s| s.0).unwrap();
    let third = series
        .iter()
        .find(|s| s.0 - t0 >= Duration::from_secs_f64(secs / 3.0))
        .map_or(0, |s| s.1);
    let last = series.last().map_or(0, |s| s.1);
    eprintln!(
        "load: 100 clients x {secs} s: {total} frames (min {min} per client), server peak RSS {peak_mb:.1} MB, \
         RSS at 1/3 {:.1} MB, at the end {:.1} MB",
        third as f64 / 1e6,
        last as f64 / 1e6
    );
    assert!(min > 0, "every client received frames: {counts:?}");
    assert!(peak_mb < 400.0, "server peak RSS {peak_mb:.1} MB");
    assert!(
        (last as f64) < third as f64 * 1.5 + 32e6,
        "server memory keeps growing: {third} -> {last} bytes"
    );
}

#[test]
fn serve_binds_loopback_by_default_and_stream_bench_runs() {
    let help = Command::new(bin())
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("[default: 127.0.0.1:8080]"), "{help}");
    let (mut child, url) =
        start_server(&["--sim", "analytic", "--grid", "64x64", "--device", "cpu"]);
    let out = Command::new(bin())
        .args([
            "stream",
            "bench",
            "--url",
            &url,
            "--fields",
            "1,2",
            "--outstanding",
            "1,2",
        ])
        .args([
            "--seconds",
            "0.5",
            "--warmup",
            "0.2",
            "--limit-mbit",
            "0,50",
            "--json",
        ])
        .output()
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = v["stream"].as_array().unwrap();
    assert_eq!(runs.len(), 8);
    for r in runs {
        assert!(r["frames"].as_u64().unwrap() > 0, "{r}");
    }
    // a bad option is one clear line
    let bad = Command::new(bin())
        .args(["stream", "bench", "--url", &url, "--fields", "4"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert_eq!(
        String::from_utf8_lossy(&bad.stderr).trim(),
        "error: --fields 4: 1, 2 or 3"
    );
}

#[test]
fn serve_results_streams_a_slice_of_a_finished_fem_solve() {
    // the cantilever of examples/ (10 x 1 x 1, clamped at x = 0, tip load in -z; quadratic
    // tetrahedra), solved on the CPU
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("serve-results");
    let _ = std::fs::remove_dir_all(&out);
    // a packed test binary runs where its build's target folder may not exist
    std::fs::create_dir_all(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let root = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/cantilever.toml"
    );
    let solve = Command::new(bin())
        .args(["fem", "solve", root, "--device", "cpu", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        solve.status.success(),
        "{}",
        String::from_utf8_lossy(&solve.stderr)
    );
    // the plane y = 0.5 lies on element faces (two layers of cells): points on it belong to
    // both neighbours
    let dir = out.to_str().unwrap();
    let (mut child, url) =
        start_server(&["--results", dir, "--slice", "y:0.5", "--resolution", "200"]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let got = rt.block_on(async {
        let mut c = Client::connect(&url).await.expect("connect");
        let names: Vec<String> = c.hello.fields.iter().map(|f| f.name.clone()).collect();
        let dims = c.hello.grid.as_ref().expect("grid").dims.clone();
        c.subscribe(
            &["DisplacementZ", "VonMises"],
            "-1000*DisplacementZ",
            Encoding::F32,
            1,
        )
        .await
        .unwrap();
        c.request(2).await.unwrap();
        let a = c.next_frame(Duration::from_secs(20)).await.expect("frame");
        let b = c.next_frame(Duration::from_secs(20)).await.expect("frame");
        // a misspelt result array is a clear error
        c.subscribe(&["Displacement"], "", Encoding::F32, 2)
            .await
            .unwrap();
        let err = loop {
            match c.next_event().await.expect("stream") {
                Event::Error(e) => break e.message,
                Event::QueryError(q) => break q.message,
                _ => {}
            }
        };
        c.close().await;
        // the 3D view: the beam's boundary surface, von Mises stress per visible pixel
        let mut c = Client::connect(&url).await.expect("connect");
        let s3 = c.hello.scene3d.clone().expect("a result has a 3D view");
        let view = pb::RixelView {
            depth_bits: 32,
            compress: false,
        };
        c.subscribe_rixel(&["VonMises"], "", view, 3).await.unwrap();
        c.subscribed(Duration::from_secs(20)).await.unwrap();
        let (w, h) = (240u32, 180u32);
        let center = [s3.center[0], s3.center[1], s3.center[2]];
        let cam = Camera::orbit(
            &Orbit::framing(center, s3.radius, 235.0, 30.0),
            w as f64 / h as f64,
        )
        .unwrap();
        let camera = pb::Camera {
            id: 3,
            width: w,
            height: h,
            view: cam.view.0.to_vec(),
            proj: cam.proj.0.to_vec(),
        };
        c.request_camera(1, camera).await.unwrap();
        let f = loop {
            let f = c
                .next_frame(Duration::from_secs(20))
                .await
                .expect("rixel frame");
            if f.rixel().is_some() {
                break f;
            }
        };
        let (r, bytes) = f.rixel().unwrap();
        assert_eq!((r.name.as_str(), r.camera_id), ("VonMises", 3));
        let rixels = decode(bytes).expect("a valid rixel frame");
        c.close().await;
        (names, dims, a, b, err, s3, rixels)
    });
    let _ = child.kill();
    let _ = child.wait();
    let (names, dims, a, b, err, s3, rixels) = got;
    // the bounding sphere of the 10 x 1 x 1 beam
    assert!((s3.center[0] - 5.0).abs() < 1e-6 && (s3.radius - 102f64.sqrt() / 2.0).abs() < 1e-6);
    assert_eq!(rixels.header.frame_id, 3);
    assert!(
        rixels.header.visible > 1000,
        "{} visible",
        rixels.header.visible
    );
    // every rebuilt point (Eqs. 6.5-6.6) lies on the surface of the box [0,10]x[0,1]x[0,1]
    let points = rixels.world_positions().unwrap();
    let (mut near_clamp, mut near_tip) = ((0.0, 0), (0.0, 0));
    for (k, p) in points.iter().enumerate() {
        let hi = [10.0, 1.0, 1.0];
        let inside = (0..3).all(|i| p[i] > -2e-3 && p[i] < hi[i] + 2e-3);
        let on_face = (0..3).any(|i| p[i].abs() < 2e-3 || (p[i] - hi[i]).abs() < 2e-3);
        assert!(
            inside && on_face,
            "pixel {k}: {p:?} is not on the beam's surface"
        );
        let v = rixels.value(k).expect("every boundary point has a stress");
        if p[0] < 2.0 {
            near_clamp = (near_clamp.0 + v, near_clamp.1 + 1);
        } else if p[0] > 8.0 {
            near_tip = (near_tip.0 + v, near_tip.1 + 1);
        }
    }
    // bending: the stress falls from the clamp (M = P L, sigma = 60 at the surface) to the tip
    let (clamp, tip) = (
        near_clamp.0 / near_clamp.1.max(1) as f64,
        near_tip.0 / near_tip.1.max(1) as f64,
    );
    assert!(
        near_clamp.1 > 50 && near_tip.1 > 50,
        "{near_clamp:?} {near_tip:?}"
    );
    assert!(
        clamp > 3.0 * tip,
        "von Mises near the clamp {clamp} vs near the tip {tip}"
    );
    assert!(
        rixels.header.value_max > 30.0,
        "{}",
        rixels.header.value_max
    );
    eprintln!(
        "3D view of the result: {} visible pixels on the beam's surface, von Mises {:.3}..{:.3}, mean {clamp:.2} near the clamp vs {tip:.2} near the tip",
        rixels.header.visible, rixels.header.value_min, rixels.header.value_max
    );
    for want in [
        "DisplacementX",
        "DisplacementZ",
        "DisplacementMagnitude",
        "StressXX",
        "StressXZ",
        "VonMises",
        "CellVonMises",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
    }
    assert_eq!(dims[..2], [200, 20], "x along the beam, z across");
    assert!(b.frame.frame_id > a.frame.frame_id);
    assert!(err.contains("unknown field `Displacement`"), "{err}");
    let w = a.field("DisplacementZ").unwrap();
    let q = a.values(2);
    assert_eq!(w.len(), 200 * 20);
    for (k, (&w, &q)) in w.iter().zip(q.iter()).enumerate() {
        assert!(w.is_finite(), "cell {k} of the slice is inside the body");
        assert!(
            (q + 1000.0 * w).abs() <= 1e-3 * (1.0 + q.abs()),
            "{k}: {q} vs {w}"
        );
    }
    // Timoshenko beam: tip deflection 4.024 (the solve reports 4.03), zero at the clamp,
    // growing monotonically along the beam (sampled at cell centres x = 0.025 .. 9.975)
    let row = 10;
    let line: Vec<f32> = (0..200).map(|i| w[i + 200 * row]).collect();
    assert!(line[0].abs() < 0.01, "at the clamp: {}", line[0]);
    assert!((line[199] + 4.02).abs() < 0.05, "at the tip: {}", line[199]);
    assert!(line.windows(2).all(|p| p[1] < p[0]), "{line:?}");
    // von Mises is largest at the clamp, on the beam's top and bottom faces
    let vm = a.field("VonMises").unwrap();
    let max = vm.iter().cloned().fold(f32::MIN, f32::max);
    let at = vm.iter().position(|&v| v == max).unwrap();
    assert!(at % 200 < 20, "largest von Mises at column {}", at % 200);

    // a folder without a result is one clear line
    let empty = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("serve-results-empty");
    let _ = std::fs::create_dir_all(&empty);
    let bad = Command::new(bin())
        .args(["serve", "--bind", "127.0.0.1:0", "--results"])
        .arg(&empty)
        .output()
        .unwrap();
    assert!(!bad.status.success());
    let msg = String::from_utf8_lossy(&bad.stderr);
    assert!(msg.contains("no .vtu result file"), "{msg}");
}
