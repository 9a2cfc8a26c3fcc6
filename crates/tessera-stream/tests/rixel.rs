//! The 3D view over the stream (dissertation §6.3.5): rixel frames of the shallow-water flood
//! rendered for the camera sent with each frame request, byte-identical to the CPU reference
//! renderer; camera changes, queries as the value, compression and bad requests; and the
//! browser's 3D view in headless Chromium (orbiting reprojects the last frame without a
//! WebSocket message, the canvas shows the frame's visible pixels). The browser part skips
//! with a message when Chromium is not installed (CI installs it: `.ci/run`).

use std::time::{Duration, Instant};

use serde_json::json;
use tessera_flow::shallow_water::{Scene, ShallowWater};
use tessera_flow::{FieldData, Simulation};
use tessera_query::{Backend, Par, Query};
use tessera_render::raster::rasterize_cpu;
use tessera_render::rixel::{decode, encode_cpu, frame_bytes, DepthBits, EncodeParams};
use tessera_render::{compress, scene, Camera, Orbit};
use tessera_stream::browser::{find_chromium, Browser};
use tessera_stream::client::{Client, Event, FrameMsg};
use tessera_stream::pb::{self, Encoding};
use tessera_stream::rixel::{Scene3D, DRY_DEPTH};
use tessera_stream::{serve, ServerConfig};

const N: usize = 48;
const T: Duration = Duration::from_secs(60);

fn flood() -> Box<dyn Simulation> {
    Box::new(ShallowWater::scene(Scene::DamBreak, N, 1).unwrap())
}

fn config() -> ServerConfig {
    ServerConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        rate_hz: Some(40.0),
        scene3d: Some(Scene3D::flood()),
        ..Default::default()
    }
}

fn camera(hello: &pb::Hello, id: u32, w: u32, h: u32, yaw: f64) -> (pb::Camera, Camera) {
    let s = hello.scene3d.as_ref().expect("the flood has a 3D view");
    let c = [s.center[0], s.center[1], s.center[2]];
    let cam = Camera::orbit(&Orbit::framing(c, s.radius, yaw, 35.0), w as f64 / h as f64).unwrap();
    (
        pb::Camera {
            id,
            width: w,
            height: h,
            view: cam.view.0.to_vec(),
            proj: cam.proj.0.to_vec(),
        },
        cam,
    )
}

fn host(sim: &ShallowWater, name: &str) -> Vec<f32> {
    match sim.field(name).unwrap() {
        FieldData::Host(h) => h.to_vec(),
        FieldData::Device(_) => unreachable!("CPU simulation"),
    }
}

/// The frame the CPU reference renders for the flood at `steps` with `value` per cell.
fn reference(
    steps: u64,
    cam: &Camera,
    id: u32,
    (w, h): (u32, u32),
    value: impl Fn(&ShallowWater) -> Vec<f32>,
) -> Vec<u8> {
    let mut sim = ShallowWater::scene(Scene::DamBreak, N, 1).unwrap();
    sim.advance(steps as usize).unwrap();
    let z = host(&sim, "Surface");
    let d = host(&sim, "Depth");
    let s = scene::grid_surface(&sim.grid(), &z, &value(&sim), Some((&d, DRY_DEPTH)), 8.0).unwrap();
    let r = rasterize_cpu(&s, cam, w, h).unwrap();
    encode_cpu(&r, cam, &EncodeParams::new(id, DepthBits::B16)).unwrap()
}

async fn rixel_frame(c: &mut Client) -> Box<FrameMsg> {
    loop {
        let f = c.next_frame(T).await.unwrap();
        if f.rixel().is_some() {
            return f;
        }
    }
}

#[test]
fn rixel_frames_follow_the_camera_and_match_the_reference() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let server = serve(config(), flood()).await.unwrap();
        let mut c = Client::connect(&server.ws_url()).await.unwrap();
        let s3 = c.hello.scene3d.clone().expect("Hello.scene3d");
        assert_eq!(s3.center.len(), 3);
        assert!(s3.radius > 2000.0, "the 4096 m valley: {s3:?}");

        // --- Depth as the value, 16-bit depths, the camera sent with the requests ----------
        let view = pb::RixelView {
            depth_bits: 16,
            compress: false,
        };
        c.subscribe_rixel(&["Depth"], "", view, 1).await.unwrap();
        c.subscribed(T).await.unwrap();
        let (w, h) = (160, 120);
        let (pc, cam) = camera(&c.hello, 7, w, h, 225.0);
        c.request_camera(1, pc).await.unwrap();
        let f = rixel_frame(&mut c).await;
        let (r, bytes) = f.rixel().unwrap();
        assert_eq!(
            (r.camera_id, r.name.as_str(), r.derived),
            (7, "Depth", false)
        );
        assert_eq!(r.offset % 8, 0);
        let d = decode(bytes).unwrap();
        assert_eq!(
            (d.header.frame_id, d.header.width, d.header.height),
            (7, w, h)
        );
        assert_eq!(d.header.visible, r.visible);
        assert!(
            r.visible > (w * h / 10),
            "the valley fills part of the view: {}",
            r.visible
        );
        // the layout: header + n (depth bytes + 2) + ceil(w h / 8) bytes, nothing else
        assert_eq!(
            bytes.len(),
            frame_bytes(w, h, r.visible as usize, DepthBits::B16)
        );
        assert_eq!(
            bytes.len(),
            160 + 4 * r.visible as usize + (w * h).div_ceil(8) as usize
        );
        let want = reference(f.frame.frame_id, &cam, 7, (w, h), |s| host(s, "Depth"));
        assert!(
            bytes == want.as_slice(),
            "the streamed frame of step {} equals the CPU reference's",
            f.frame.frame_id
        );
        // flow control as in 2D: one request, one frame; none without a request while the
        // simulation keeps stepping
        let idle = Instant::now();
        while idle.elapsed() < Duration::from_millis(500) {
            if let Some(Event::Frame(x)) = c
                .next_event_within(Duration::from_millis(100))
                .await
                .unwrap()
            {
                panic!("frame {} sent without a request", x.frame.frame_id);
            }
        }
        assert!(
            server.steps() > f.frame.frame_id,
            "the simulation runs on meanwhile"
        );

        // --- a new camera (count 0: no new request) re-renders, frames follow it ------------
        let (pc2, cam2) = camera(&c.hello, 8, w, h, 120.0);
        c.request_camera(0, pc2.clone()).await.unwrap();
        c.request(1).await.unwrap();
        let f2 = rixel_frame(&mut c).await;
        let (r2, b2) = f2.rixel().unwrap();
        assert_eq!(r2.camera_id, 8, "rendered for the new camera");
        let d2 = decode(b2).unwrap();
        assert_eq!(d2.header.camera(), cam2);
        let want = reference(f2.frame.frame_id, &cam2, 8, (w, h), |s| host(s, "Depth"));
        assert!(b2 == want.as_slice());
        // the same view again (new id) is no new camera: frames keep the old id
        let mut same = pc2.clone();
        same.id = 9;
        c.request_camera(1, same).await.unwrap();
        let f3 = rixel_frame(&mut c).await;
        assert_eq!(f3.rixel().unwrap().0.camera_id, 8);
        assert!(f3.frame.frame_id > f2.frame.frame_id, "frame ids increase");
        // two requests outstanding (double buffering): two frames of increasing steps
        c.request(2).await.unwrap();
        let (g1, g2) = (rixel_frame(&mut c).await, rixel_frame(&mut c).await);
        assert!(f3.frame.frame_id < g1.frame.frame_id && g1.frame.frame_id < g2.frame.frame_id);

        // --- the speed query as the value, 32-bit depths, compressed -------------------------
        let q = "sqrt(MomentumX^2+MomentumY^2)/max(Depth,1e-3)";
        let view = pb::RixelView {
            depth_bits: 32,
            compress: true,
        };
        c.subscribe_rixel(&[], q, view, 2).await.unwrap();
        c.subscribed(T).await.unwrap();
        let (pc, cam) = camera(&c.hello, 10, w, h, 225.0);
        c.request_camera(1, pc).await.unwrap();
        let f = loop {
            let f = rixel_frame(&mut c).await;
            if f.frame.subscription == 2 {
                break f;
            }
        };
        let (r, z) = f.rixel().unwrap();
        assert!(r.derived && r.compressed && r.name == q);
        let raw = compress::decompress(z).unwrap();
        assert!(z.len() < raw.len());
        let d = decode(&raw).unwrap();
        assert_eq!(d.header.depth_bits(), DepthBits::B32);
        assert!(d.header.value_max > 0.0, "water moves");
        let mut sim = ShallowWater::scene(Scene::DamBreak, N, 1).unwrap();
        sim.advance(f.frame.frame_id as usize).unwrap();
        let speed: Vec<f32> = {
            let (hu, hv, dep) = (
                host(&sim, "MomentumX"),
                host(&sim, "MomentumY"),
                host(&sim, "Depth"),
            );
            let query = Query::compile(q, &["MomentumX", "MomentumY", "Depth"]).unwrap();
            assert_eq!(query.fields(), ["MomentumX", "MomentumY", "Depth"]);
            let mut out = vec![0.0f32; hu.len()];
            query
                .eval_cpu_with(Backend::CpuJit, Par::Rayon, &[&hu, &hv, &dep], &mut out)
                .unwrap();
            out
        };
        let z_ = host(&sim, "Surface");
        let dep = host(&sim, "Depth");
        let s =
            scene::grid_surface(&sim.grid(), &z_, &speed, Some((&dep, DRY_DEPTH)), 8.0).unwrap();
        let rr = rasterize_cpu(&s, &cam, w, h).unwrap();
        let want = encode_cpu(&rr, &cam, &EncodeParams::new(10, DepthBits::B32)).unwrap();
        assert!(raw == want, "the query's frame equals the reference");

        // --- bad requests ---------------------------------------------------------------------
        let (mut bad, _) = camera(&c.hello, 11, w, h, 225.0);
        bad.view.pop();
        c.request_camera(1, bad).await.unwrap();
        let e = loop {
            match c.next_frame(T).await {
                Err(e) => break e.to_string(),
                Ok(_) => continue, // frames still in flight
            }
        };
        assert!(e.contains("15 numbers"), "{e}");
        let mut c2 = Client::connect(&server.ws_url()).await.unwrap();
        let view = pb::RixelView {
            depth_bits: 24,
            compress: false,
        };
        c2.subscribe_rixel(&["Depth"], "", view, 1).await.unwrap();
        let e = c2.subscribed(T).await.unwrap_err().to_string();
        assert!(e.contains("depth bits 24"), "{e}");
        server.shutdown().await;

        // a simulation without a 3D view refuses rixel subscriptions
        let cfg = ServerConfig {
            scene3d: None,
            ..config()
        };
        let server = serve(cfg, flood()).await.unwrap();
        let mut c = Client::connect(&server.ws_url()).await.unwrap();
        assert!(c.hello.scene3d.is_none());
        c.subscribe(&["Depth"], "", Encoding::F32, 1).await.unwrap();
        c.subscribed(T).await.unwrap();
        let view = pb::RixelView::default();
        c.subscribe_rixel(&["Depth"], "", view, 2).await.unwrap();
        let e = c.subscribed(T).await.unwrap_err().to_string();
        assert!(e.contains("no 3D view"), "{e}");
        server.shutdown().await;
    });
}

/// [non-background pixels, the frame's visible pixels, canvas w, h, frame w, h]
async fn covered(b: &mut Browser) -> Vec<f64> {
    b.eval(
        "(() => { const v = tessera.view3d; v.draw(); \
         return [v.coveredPixels(), v.frame.header.visible, v.canvas.width, v.canvas.height, \
                 v.frame.header.width, v.frame.header.height]; })()",
    )
    .await
    .unwrap()
    .as_array()
    .unwrap()
    .iter()
    .map(|x| x.as_f64().unwrap())
    .collect()
}

fn chromium_or_skip() -> bool {
    if find_chromium().is_none() {
        if std::env::var_os("CI").is_some() {
            panic!("chromium is missing on CI (.ci/run installs Debian's `chromium`)");
        }
        eprintln!(
            "skipping the 3D browser test: chromium is not installed (apt-get install chromium)"
        );
        return false;
    }
    true
}

#[test]
fn browser_3d_view_reprojects_while_dragging() {
    if !chromium_or_skip() {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let server = serve(config(), flood()).await.unwrap();
        let mut b = Browser::launch(800, 640).await.unwrap();
        b.call("Network.enable", json!({})).await.unwrap();
        b.navigate(&format!("{}?field=Depth", server.url(None)))
            .await
            .unwrap();
        // the 3D view is the default for a simulation with one; a frame for this camera
        b.wait_for(
            "window.tessera && tessera.state.view === '3d' && tessera.view3d.frame \
             && tessera.view3d.frameMatchesCamera()",
            T,
        )
        .await
        .expect("a rixel frame rendered for the page's camera is drawn");
        b.wait_for("tessera.state.rixelShown >= 3", T)
            .await
            .expect("frames keep coming");
        let hidden = b
            .eval("document.getElementById('view2d').hidden")
            .await
            .unwrap();
        assert_eq!(hidden, json!(true));

        // --- the canvas shows the surface: covered pixels vs the frame's visible count -------
        let c0 = covered(&mut b).await;
        assert_eq!(
            (c0[2], c0[3]),
            (c0[4], c0[5]),
            "frames are rendered at the canvas size"
        );
        assert!(
            c0[1] > 0.1 * c0[2] * c0[3],
            "the valley fills part of the view: {c0:?}"
        );
        assert!(
            (c0[0] - c0[1]).abs() <= 0.1 * c0[1],
            "non-background pixels {} vs visible {} (within 10 %)",
            c0[0],
            c0[1]
        );

        // --- orbit with the mouse: reprojection only, no WebSocket message ------------------
        let rect: Vec<f64> = b
            .eval(
                "(() => { const r = tessera.view3d.canvas.getBoundingClientRect(); \
                   return [r.left, r.top, r.width, r.height]; })()",
            )
            .await
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        let (x0, y0) = (rect[0] + rect[2] * 0.5, rect[1] + rect[3] * 0.5);
        let yaw0 = b
            .eval("tessera.view3d.camera.yaw")
            .await
            .unwrap()
            .as_f64()
            .unwrap();
        let before_px = b.eval("tessera.view3d.coveredPixels()").await.unwrap();
        b.mouse("mouseMoved", x0, y0, false).await.unwrap();
        b.mouse("mousePressed", x0, y0, true).await.unwrap();
        b.pump(Duration::from_millis(300)).await.unwrap(); // frames in flight land
        let _ = b.take_events("Network.webSocketFrameSent");
        let sent_before = b.eval("tessera.conn.messagesSent").await.unwrap();
        let shown_before = b
            .eval("tessera.state.rixelShown")
            .await
            .unwrap()
            .as_u64()
            .unwrap();
        for k in 1..=12 {
            b.mouse(
                "mouseMoved",
                x0 + 12.0 * k as f64,
                y0 + 2.0 * k as f64,
                true,
            )
            .await
            .unwrap();
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
        b.pump(Duration::from_millis(600)).await.unwrap();
        let sent = b.take_events("Network.webSocketFrameSent");
        assert!(sent.is_empty(), "messages sent during the drag: {sent:?}");
        assert_eq!(
            b.eval("tessera.conn.messagesSent").await.unwrap(),
            sent_before
        );
        let yaw1 = b
            .eval("tessera.view3d.camera.yaw")
            .await
            .unwrap()
            .as_f64()
            .unwrap();
        assert!(
            (yaw1 - yaw0).abs() > 20.0,
            "the drag orbits the camera: yaw {yaw0} -> {yaw1}"
        );
        let mid = b
            .eval("[tessera.view3d.frameMatchesCamera(), tessera.view3d.coveredPixels()]")
            .await
            .unwrap();
        assert_eq!(
            mid[0],
            json!(false),
            "the last frame is reprojected for the new camera"
        );
        assert_ne!(mid[1], before_px, "the reprojected view differs");
        let shown_during = b
            .eval("tessera.state.rixelShown")
            .await
            .unwrap()
            .as_u64()
            .unwrap();
        assert!(
            shown_during <= shown_before + 2,
            "at most the frames in flight arrive"
        );
        let png_drag = b.screenshot().await.unwrap();

        // --- release: the camera rests, a frame for it is requested and drawn ----------------
        b.mouse("mouseReleased", x0 + 144.0, y0 + 24.0, false)
            .await
            .unwrap();
        b.wait_for("tessera.view3d.frameMatchesCamera()", T)
            .await
            .expect("a frame for the rested camera arrives");
        let sent = b.take_events("Network.webSocketFrameSent");
        assert!(!sent.is_empty(), "the rested camera is sent");
        let c1 = covered(&mut b).await;
        assert!(
            (c1[0] - c1[1]).abs() <= 0.1 * c1[1],
            "after orbiting: non-background pixels {} vs visible {}",
            c1[0],
            c1[1]
        );
        // the wheel zooms (reprojection), then a frame for the zoomed camera follows
        let dist0 = b
            .eval("tessera.view3d.camera.distance")
            .await
            .unwrap()
            .as_f64()
            .unwrap();
        b.call(
            "Input.dispatchMouseEvent",
            json!({"type": "mouseWheel", "x": x0, "y": y0, "deltaX": 0, "deltaY": -300}),
        )
        .await
        .unwrap();
        let zoomed = format!("tessera.view3d.camera.distance < 0.9 * {dist0}");
        b.wait_for(&zoomed, T).await.expect("the wheel zooms in");
        b.wait_for("tessera.view3d.frameMatchesCamera()", T)
            .await
            .unwrap();
        // at rest, frames of the running flood keep coming (the requests are topped up again)
        let shown = b
            .eval("tessera.state.rixelShown")
            .await
            .unwrap()
            .as_u64()
            .unwrap();
        b.wait_for(&format!("tessera.state.rixelShown >= {}", shown + 3), T)
            .await
            .expect("frames keep coming once the camera rests");
        b.wait_for("tessera.conn.rates().fps > 0", T).await.unwrap();
        tokio::time::sleep(Duration::from_millis(600)).await;
        let png = b.screenshot().await.unwrap();
        assert!(png.starts_with(b"\x89PNG"));
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
        std::fs::write(dir.join("rixel-3d.png"), &png).unwrap();
        std::fs::write(dir.join("rixel-3d-drag.png"), &png_drag).unwrap();
        if let Some(p) = std::env::var_os("TESSERA_SCREENSHOT_3D") {
            std::fs::write(p, &png).unwrap();
        }
        eprintln!("screenshots: {}", dir.display());
        drop(b);
        server.shutdown().await;
    });
}
