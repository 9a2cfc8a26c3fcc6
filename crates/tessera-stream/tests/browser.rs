//! The browser client in real headless Chromium (Debian's `chromium`, driven over the DevTools
//! protocol): it loads the page from the running server, receives frames, re-colors without
//! sending a WebSocket message, probes the right value, shows query errors under their span,
//! and works on a phone-sized viewport. Skips with a message when Chromium is not installed
//! (CI installs it: `.ci/run`).

use std::time::Duration;

use serde_json::Value;
use tessera_flow::AnalyticSource;
use tessera_stream::browser::{find_chromium, Browser};
use tessera_stream::{serve, ServerConfig};

const NX: usize = 160;
const NY: usize = 96;
const T: Duration = Duration::from_secs(60);

fn chromium_or_skip() -> bool {
    if find_chromium().is_none() {
        if std::env::var_os("CI").is_some() {
            panic!("chromium is missing on CI (.ci/run installs Debian's `chromium`)");
        }
        eprintln!(
            "skipping the browser test: chromium is not installed (apt-get install chromium)"
        );
        return false;
    }
    true
}

async fn pixels(b: &mut Browser, pts: &[(f64, f64)]) -> Vec<Value> {
    let js = serde_json::to_string(pts).unwrap();
    b.eval(&format!(
        "{js}.map(([x, y]) => tessera.view2d.readPixel(x, y))"
    ))
    .await
    .unwrap()
    .as_array()
    .unwrap()
    .clone()
}

#[test]
fn browser_client_recolors_locally_probes_and_shows_query_errors() {
    if !chromium_or_skip() {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let config = ServerConfig {
            bind: "127.0.0.1:0".parse().unwrap(),
            rate_hz: Some(30.0),
            ..Default::default()
        };
        let server = serve(config, Box::new(AnalyticSource::new(NX, NY, 0.01).unwrap()))
            .await
            .unwrap();
        let mut b = Browser::launch(900, 700).await.unwrap();
        b.call("Network.enable", serde_json::json!({})).await.unwrap();
        b.navigate(&format!("{}?field=Pressure", server.url(None)))
            .await
            .unwrap();
        // frames arrive and are drawn through WebGL2
        b.wait_for(
            "window.tessera && tessera.state.frame && tessera.state.frame.frameId >= 3",
            T,
        )
        .await
        .expect("the page receives frames");
        let hello = b.eval("tessera.conn.hello.fields.map(f => f.name)").await.unwrap();
        assert_eq!(hello, serde_json::json!(["VelocityX", "VelocityY", "Pressure", "Vorticity"]));
        let rect = b
            .eval("(() => { const c = document.getElementById('view2d'); const r = c.getBoundingClientRect(); \
                   return [r.left, r.top, c.clientWidth, c.clientHeight, window.devicePixelRatio]; })()")
            .await
            .unwrap();
        let r: Vec<f64> = rect.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        let (left, top, w, h) = (r[0], r[1], r[2], r[3]);
        assert_eq!(r[4], 1.0);
        assert!(w > 300.0 && h > 200.0, "canvas {w}x{h}");

        // --- 1. the color map changes the pixels and sends nothing --------------------------
        b.eval("tessera.conn.setPaused(true)").await.unwrap();
        b.pump(Duration::from_millis(800)).await.unwrap(); // frames in flight land
        let _ = b.take_events("Network.webSocketFrameSent");
        let _ = b.take_events("Network.webSocketFrameReceived");
        let sent_before = b.eval("tessera.conn.messagesSent").await.unwrap();
        let pts: Vec<(f64, f64)> = (0..9)
            .map(|k| (w * (0.1 + 0.1 * k as f64), h * (0.15 + 0.08 * k as f64)))
            .collect();
        let before = pixels(&mut b, &pts).await;
        assert!(
            before.iter().any(|p| p != &before[0]),
            "the field is drawn (WebGL2 renders): {before:?}"
        );
        // a preset change through the UI ...
        b.eval("(() => { const s = document.getElementById('preset'); s.value = 'grayscale'; \
                s.dispatchEvent(new Event('change')); return s.value; })()")
            .await
            .unwrap();
        let gray = pixels(&mut b, &pts).await;
        assert_ne!(before, gray, "changing the preset changes the pixels");
        for p in &gray {
            let p = p.as_array().unwrap();
            assert!(p[0] == p[1] && p[1] == p[2], "grayscale pixels: {p:?}");
        }
        // ... and a drag of a ramp control point with the mouse
        b.eval("(() => { const s = document.getElementById('preset'); s.value = 'viridis'; \
                s.dispatchEvent(new Event('change')); return 1; })()")
            .await
            .unwrap();
        let ramp = b
            .eval("(() => { const r = document.getElementById('ramp').getBoundingClientRect(); \
                   return [r.left, r.top, r.width, r.height, tessera.ramp.points[4][0]]; })()")
            .await
            .unwrap();
        let rr: Vec<f64> = ramp.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        let (x0, y0) = (rr[0] + rr[2] * rr[4], rr[1] + rr[3] * 0.8);
        let viridis = pixels(&mut b, &pts).await;
        b.mouse("mouseMoved", x0, y0, false).await.unwrap();
        b.mouse("mousePressed", x0, y0, true).await.unwrap();
        for k in 1..=10 {
            b.mouse("mouseMoved", x0 + rr[2] * 0.03 * k as f64, y0, true).await.unwrap();
        }
        b.mouse("mouseReleased", x0 + rr[2] * 0.3, y0, false).await.unwrap();
        let moved = b.eval("tessera.ramp.points[4][0]").await.unwrap().as_f64().unwrap();
        assert!(moved > rr[4] + 0.05, "the dragged control point moved: {} -> {moved}", rr[4]);
        let dragged = pixels(&mut b, &pts).await;
        assert_ne!(viridis, dragged, "dragging a ramp point changes the pixels");
        b.pump(Duration::from_millis(500)).await.unwrap();
        let sent = b.take_events("Network.webSocketFrameSent");
        assert!(sent.is_empty(), "color-map changes sent WebSocket messages: {sent:?}");
        assert_eq!(b.eval("tessera.conn.messagesSent").await.unwrap(), sent_before);

        // --- 2. the probe shows the value of the cell under the cursor ----------------------
        let (px, py) = (w * 0.31, h * 0.42);
        b.mouse("mouseMoved", left + px, top + py, false).await.unwrap();
        let probe = b
            .wait_for("document.getElementById('probe').dataset.value", T)
            .await
            .unwrap();
        let text = b.eval("document.getElementById('probe').textContent").await.unwrap();
        let t = b.eval("tessera.state.frame.time").await.unwrap().as_f64().unwrap();
        // the cell under (px, py) when the grid is fitted into the canvas (y up)
        let scale = (w / NX as f64).min(h / NY as f64);
        let gx = (px + 0.5 - w / 2.0) / scale + NX as f64 / 2.0;
        let gy = ((h - (py + 0.5)) - h / 2.0) / scale + NY as f64 / 2.0;
        let (i, j) = (gx.floor() as usize, gy.floor() as usize);
        let src = AnalyticSource::new(NX, NY, 0.01).unwrap();
        let hh = 2.0 * std::f64::consts::PI / NX.max(NY) as f64;
        let want = src.exact((i as f64 + 0.5) * hh, (j as f64 + 0.5) * hh, t)[2] as f32;
        let got: f64 = probe.as_str().unwrap().parse().unwrap();
        assert!(
            (got - want as f64).abs() < 1e-6,
            "probe at pixel ({px}, {py}) = cell ({i}, {j}): shows {got}, Pressure there is {want} ({text})"
        );
        assert!(
            text.as_str().unwrap().contains(&format!("cell ({i}, {j})"))
                && text.as_str().unwrap().starts_with("Pressure = "),
            "{text}"
        );

        // --- 3. a query error is shown under the offending span ------------------------------
        b.eval("tessera.conn.setPaused(false)").await.unwrap();
        b.eval("(() => { document.getElementById('expr').value = 'sqrt(VelocityX^2 + Presure)'; \
                document.getElementById('apply').click(); return 1; })()")
            .await
            .unwrap();
        b.wait_for("!document.getElementById('expr-error').hidden", T)
            .await
            .expect("the query error is shown");
        let marked = b
            .eval("document.querySelector('#expr-error mark').textContent")
            .await
            .unwrap();
        assert_eq!(marked, "Presure");
        let msg = b.eval("document.getElementById('expr-error-text').textContent").await.unwrap();
        assert!(msg.as_str().unwrap().contains("unknown field"), "{msg}");
        // a valid expression streams its derived field
        b.eval("(() => { document.getElementById('expr').value = 'sqrt(VelocityX^2+VelocityY^2)'; \
                document.getElementById('apply').click(); return 1; })()")
            .await
            .unwrap();
        b.wait_for(
            "tessera.state.frame.body.fields.some(f => f.derived && f.name === 'sqrt(VelocityX^2+VelocityY^2)') \
             && document.getElementById('expr-error').hidden",
            T,
        )
        .await
        .expect("the derived field is shown");
        b.wait_for("tessera.conn.rates().fps > 5", T).await.expect("frames keep arriving");
        b.mouse("mouseMoved", left + w * 0.6, top + h * 0.5, false).await.unwrap();
        tokio::time::sleep(Duration::from_millis(600)).await;
        let png = b.screenshot().await.unwrap();
        assert!(png.starts_with(b"\x89PNG"));
        let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("stream-browser.png");
        std::fs::write(&out, &png).unwrap();
        if let Some(p) = std::env::var_os("TESSERA_SCREENSHOT") {
            std::fs::write(p, &png).unwrap();
        }
        eprintln!("screenshot: {}", out.display());

        // --- 4. a phone-sized viewport -------------------------------------------------------
        b.call(
            "Emulation.setDeviceMetricsOverride",
            serde_json::json!({"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": true}),
        )
        .await
        .unwrap();
        b.navigate(&format!("{}?field=Vorticity", server.url(None))).await.unwrap();
        b.wait_for("window.tessera && tessera.state.frame && tessera.state.frame.frameId > 0", T)
            .await
            .expect("frames on a phone-sized viewport");
        let fit = b
            .eval("(() => { const c = document.getElementById('view2d'); \
                   return [c.clientWidth, c.clientHeight, document.documentElement.scrollWidth]; })()")
            .await
            .unwrap();
        let fit: Vec<f64> = fit.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        assert!(fit[0] >= 300.0 && fit[1] >= 150.0, "canvas {fit:?} on a 390x844 viewport");
        assert!(fit[2] <= 390.0, "no horizontal scrolling: {fit:?}");
        drop(b);
        server.shutdown().await;
    });
}
