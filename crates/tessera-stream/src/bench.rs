//! The streaming benchmarks of dissertation §6.4.1-6.4.2, printed beside its numbers:
//!
//! - [`table_6_1`]: serialization (server: copy out of the simulation, min/max, header) and
//!   deserialization (Rust client: header decode and the float views) per frame of 1-3
//!   fields of 1024²;
//! - [`stream`]: one streaming run from a server to the headless client, optionally through a
//!   bandwidth-limited relay ([`crate::throttle`]): client frames/s and MB/s, the server's
//!   steps/s, latency, link utilization - a point of Figs. 6.8/6.9;
//! - [`browser_decode`]: decode time and draw rate of the browser client in headless Chromium.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tessera_flow::Simulation;

use crate::client::{Client, Event};
use crate::frame::{FrameBuilder, SubKey, Subscription};
use crate::pb::Encoding;
use crate::throttle::Throttle;
use crate::wire::{decode_server, payloads};
use crate::StreamError;

/// The fields of §6.4.1, in the order they are added (1, 2 or 3 fields).
pub const FIELDS: [&str; 3] = ["Pressure", "VelocityX", "VelocityY"];

/// The first `k` fields a benchmark streams from a server whose hello lists `available`:
/// those of [`FIELDS`] when the server has them (the fluid scenes, the analytic source), else
/// its first `k` fields (for example a `--results` slice).
pub fn bench_fields(available: &[String], k: usize) -> Vec<String> {
    let k = k.clamp(1, 3);
    if FIELDS.iter().all(|f| available.iter().any(|a| a == f)) {
        FIELDS[..k].iter().map(|s| s.to_string()).collect()
    } else {
        available.iter().take(k).cloned().collect()
    }
}

/// Dissertation Table 6.1 (ms per frame of 1, 2, 3 fields of 1024²): serialization (C++
/// server), deserialization native C++, Chrome 47, Firefox 42 (desktop).
pub const TABLE_6_1: [(&str, [f64; 3]); 4] = [
    ("serialization (C++ server)", [8.81, 18.9, 30.0]),
    ("deserialization, native C++", [7.89, 14.5, 20.2]),
    ("deserialization, Chrome 47", [86.5, 174.0, 254.0]),
    ("deserialization, Firefox 42", [115.0, 221.0, 380.0]),
];

/// A plain text table: a header row and rows of cells, columns padded.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let n = header.len();
    let mut w: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (k, c) in r.iter().enumerate().take(n) {
            w[k] = w[k].max(c.chars().count());
        }
    }
    let mut s = String::new();
    let line = |s: &mut String, cells: Vec<&str>| {
        let mut l = String::from("|");
        for (k, c) in cells.iter().enumerate() {
            let pad = w[k] - c.chars().count();
            if k == 0 {
                let _ = write!(l, " {c}{} |", " ".repeat(pad));
            } else {
                let _ = write!(l, " {}{c} |", " ".repeat(pad));
            }
        }
        s.push_str(&l);
        s.push('\n');
    };
    line(&mut s, header.to_vec());
    let sep: Vec<String> = w.iter().map(|&x| "-".repeat(x)).collect();
    line(&mut s, sep.iter().map(|x| x.as_str()).collect());
    for r in rows {
        line(&mut s, r.iter().map(|x| x.as_str()).collect());
    }
    s
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// One column of Table 6.1: median ms per frame of `k` fields.
#[derive(Clone, Copy, Debug)]
pub struct SerdeTimes {
    pub fields: usize,
    pub serialize_ms: f64,
    pub deserialize_ms: f64,
    pub frame_bytes: usize,
}

/// Table 6.1 for `sim` (its fields of [`FIELDS`]): builds `reps` frames of 1, 2, 3 fields
/// (stepping between them) and decodes each as the Rust client does.
pub fn table_6_1(sim: &mut dyn Simulation, reps: usize) -> Result<Vec<SerdeTimes>, StreamError> {
    let mut builder = FrameBuilder::default();
    let mut out = Vec::new();
    for k in 1..=3 {
        let sub = Subscription {
            key: SubKey {
                fields: FIELDS[..k].iter().map(|s| s.to_string()).collect(),
                expression: String::new(),
                precision: Encoding::F32,
                subscription: 1,
                rixel: None,
            },
            query: None,
        };
        let (mut ser, mut de) = (Vec::new(), Vec::new());
        let mut bytes = 0;
        for r in 0..reps + 2 {
            sim.step()?;
            let t0 = Instant::now();
            let msg = builder.build(sim, &sub)?;
            let t1 = Instant::now();
            bytes = msg.len();
            let rec = decode_server(msg)?;
            let mut check = 0.0f32;
            if let Some(crate::pb::server_message::Kind::Frame(f)) = &rec.header.kind {
                for p in payloads(f) {
                    let v = rec.values(p);
                    check += v[v.len() / 2];
                }
            }
            let t2 = Instant::now();
            std::hint::black_box(check);
            if r >= 2 {
                ser.push((t1 - t0).as_secs_f64() * 1e3);
                de.push((t2 - t1).as_secs_f64() * 1e3);
            }
        }
        out.push(SerdeTimes {
            fields: k,
            serialize_ms: median(ser),
            deserialize_ms: median(de),
            frame_bytes: bytes,
        });
    }
    Ok(out)
}

/// Settings of one streaming run.
#[derive(Clone, Debug)]
pub struct StreamRun {
    /// The server's WebSocket URL (`ws://host:port/ws[?token=T]`).
    pub url: String,
    /// Number of fields of [`FIELDS`] (1-3).
    pub fields: usize,
    /// Frame requests kept outstanding (N).
    pub outstanding: u32,
    /// Downstream bandwidth limit through the relay (Mbit/s), if any.
    pub limit_mbit: Option<f64>,
    /// Measured time after warm-up.
    pub seconds: f64,
    /// Warm-up time (frames received then are not counted).
    pub warmup: f64,
}

/// What one streaming run measured.
#[derive(Clone, Copy, Debug, Default)]
pub struct StreamResult {
    pub fields: usize,
    pub outstanding: u32,
    pub limit_mbit: Option<f64>,
    pub frames: u64,
    pub seconds: f64,
    /// Frames per second received by the client.
    pub client_fps: f64,
    /// Float payload received per second (MB/s, 10^6 bytes), as the dissertation's effective bandwidth.
    pub payload_mb_s: f64,
    /// Whole messages received per second (MB/s).
    pub wire_mb_s: f64,
    /// Simulation steps per second on the server during the run.
    pub server_fps: f64,
    /// Mean request-to-frame latency (ms).
    pub latency_ms: f64,
    /// Mean client decode time per frame (ms).
    pub decode_ms: f64,
    /// Wire bytes over the link's capacity (None without a limit).
    pub utilization: Option<f64>,
}

/// One run: connect (through a limited relay if asked), subscribe to the first `fields` of
/// [`FIELDS`], keep `outstanding` requests in flight, count frames after the warm-up.
pub async fn stream(run: &StreamRun) -> Result<StreamResult, StreamError> {
    let (url, _relay) = match run.limit_mbit {
        Some(mbit) => {
            let (host, rest) = split_ws_url(&run.url)?;
            let up: SocketAddr = tokio::net::lookup_host(host.as_str())
                .await
                .map_err(|e| StreamError::io(format!("resolving {host}"), e))?
                .next()
                .ok_or_else(|| StreamError::Invalid(format!("{host}: no address")))?;
            let relay = Throttle::start(up, mbit).await?;
            (format!("ws://{}{rest}", relay.local_addr()), Some(relay))
        }
        None => (run.url.clone(), None),
    };
    let mut c = Client::connect(&url).await?;
    let available: Vec<String> = c.hello.fields.iter().map(|f| f.name.clone()).collect();
    let names = bench_fields(&available, run.fields);
    if names.len() < run.fields.clamp(1, 3) {
        return Err(StreamError::Invalid(format!(
            "the server has only {} field(s)",
            names.len()
        )));
    }
    let names: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
    c.subscribe(&names, "", Encoding::F32, 1).await?;
    c.subscribed(Duration::from_secs(30)).await?;
    c.request(run.outstanding.max(1)).await?;
    let mut sent_at: std::collections::VecDeque<Instant> = (0..run.outstanding.max(1))
        .map(|_| Instant::now())
        .collect();
    let start = Instant::now();
    let warm_end = start + Duration::from_secs_f64(run.warmup);
    let end = warm_end + Duration::from_secs_f64(run.seconds);
    let (mut frames, mut payload, mut wire) = (0u64, 0u64, 0u64);
    let (mut lat, mut dec) = (0.0, 0.0);
    let (mut steps0, mut steps1) = (None, 0u64);
    let mut measured_from = None;
    while Instant::now() < end {
        let left = end.saturating_duration_since(Instant::now());
        let Some(ev) = c.next_event_within(left).await? else {
            break;
        };
        match ev {
            Event::Frame(f) => {
                let t = sent_at.pop_front();
                c.request(1).await?;
                sent_at.push_back(Instant::now());
                if f.received_at >= warm_end {
                    if measured_from.is_none() {
                        measured_from = Some(f.received_at);
                        steps0 = Some(f.frame.frame_id);
                    }
                    frames += 1;
                    wire += f.len() as u64;
                    payload += payloads(&f.frame)
                        .iter()
                        .map(|p| p.count as u64 * 4)
                        .sum::<u64>();
                    lat += t.map_or(0.0, |t| (f.received_at - t).as_secs_f64() * 1e3);
                    dec += f.decode_ms;
                    steps1 = f.frame.frame_id;
                }
            }
            Event::Error(e) => return Err(crate::client::server_error(&e)),
            _ => {}
        }
    }
    let t_end = Instant::now();
    let secs = measured_from
        .map_or(0.0, |m| (t_end - m).as_secs_f64())
        .max(1e-9);
    c.close().await;
    let mb = |b: u64| b as f64 / 1e6 / secs;
    Ok(StreamResult {
        fields: names.len(),
        outstanding: run.outstanding,
        limit_mbit: run.limit_mbit,
        frames,
        seconds: secs,
        client_fps: frames as f64 / secs,
        payload_mb_s: mb(payload),
        wire_mb_s: mb(wire),
        server_fps: steps0.map_or(0.0, |s0| steps1.saturating_sub(s0) as f64 / secs),
        latency_ms: if frames > 0 {
            lat / frames as f64
        } else {
            f64::NAN
        },
        decode_ms: if frames > 0 {
            dec / frames as f64
        } else {
            f64::NAN
        },
        utilization: run.limit_mbit.map(|m| wire as f64 * 8.0 / 1e6 / secs / m),
    })
}

/// `ws://host:port/path?q` -> ("host:port", "/path?q").
fn split_ws_url(url: &str) -> Result<(String, String), StreamError> {
    let rest = url
        .strip_prefix("ws://")
        .ok_or_else(|| StreamError::Invalid(format!("{url}: only ws:// URLs can be limited")))?;
    let cut = rest.find('/').unwrap_or(rest.len());
    Ok((rest[..cut].to_string(), rest[cut..].to_string()))
}

/// Rows of a streaming table (Figs. 6.8/6.9 analogues).
pub fn stream_table(results: &[StreamResult], frame_bytes_per_field: usize) -> String {
    let rows: Vec<Vec<String>> = results
        .iter()
        .map(|r| {
            let link_fps = r
                .limit_mbit
                .map(|m| m * 1e6 / 8.0 / (frame_bytes_per_field * r.fields) as f64);
            vec![
                r.limit_mbit.map_or("none".into(), |m| format!("{m:.0}")),
                r.fields.to_string(),
                r.outstanding.to_string(),
                format!("{:.1}", r.client_fps),
                format!("{:.1}", r.server_fps),
                format!("{:.1}", r.payload_mb_s),
                link_fps.map_or("-".into(), |f| format!("{f:.1}")),
                r.utilization
                    .map_or("-".into(), |u| format!("{:.0} %", u * 100.0)),
                format!("{:.1}", r.latency_ms),
                format!("{:.3}", r.decode_ms),
            ]
        })
        .collect();
    table(
        &[
            "link Mbit/s",
            "fields",
            "N",
            "client frames/s",
            "server steps/s",
            "payload MB/s",
            "link limit frames/s",
            "link use",
            "latency ms",
            "decode ms",
        ],
        &rows,
    )
}

/// What the browser measured for frames of `fields` fields.
#[derive(Clone, Copy, Debug)]
pub struct BrowserResult {
    pub fields: usize,
    /// Median decode time per frame (header + typed-array views) as the client timed it, ms
    /// (`performance.now()` is coarsened to 0.1 ms in Chromium).
    pub decode_ms: f64,
    /// Decode time per frame from decoding the last received frame again in a loop for
    /// 300 ms (the same function, timed over many calls), ms.
    pub decode_loop_ms: f64,
    /// Frames received per second.
    pub fps: f64,
    /// Draws per second of the 2D view.
    pub draws_per_s: f64,
}

/// Opens the page of the server at `page_url` (`http://host:port/`, with `?token=` if
/// needed) in headless Chromium and measures decode time and frame/draw rates for 1-3
/// fields over `seconds` each.
pub async fn browser_decode(
    page_url: &str,
    seconds: f64,
) -> Result<Vec<BrowserResult>, StreamError> {
    let mut b = crate::browser::Browser::launch(1280, 900).await?;
    let sep = if page_url.contains('?') { '&' } else { '?' };
    b.navigate(&format!("{page_url}{sep}field=Pressure"))
        .await?;
    b.wait_for(
        "window.tessera && tessera.state.frame !== null",
        Duration::from_secs(60),
    )
    .await?;
    let mut out = Vec::new();
    for k in 1..=3 {
        let fields = serde_json::to_string(&FIELDS[..k]).expect("json");
        b.eval(&format!(
            "(() => {{ const c = tessera.conn; const have = c.hello.fields.map(f => f.name); \
             let fields = {fields}; \
             if (!fields.every(f => have.includes(f))) fields = have.slice(0, {k}); \
             c.subscribe({{fields}}); \
             if (!c.__kept) {{ c.__kept = true; const o = c.onMessage.bind(c); \
               c.onMessage = (buf) => {{ if (window.__bench) window.__bench.buf = buf; o(buf); }}; }} \
             window.__bench = {{ decode: [], t0: 0 }}; \
             const sub = c.subscription; \
             c.addEventListener('frame', (e) => {{ if (e.detail.subscription === sub && window.__bench.sub === sub) \
               window.__bench.decode.push(e.detail.decodeMs); }}); \
             window.__bench.sub = sub; return sub; }})()"
        ))
        .await?;
        // warm up, then measure
        tokio::time::sleep(Duration::from_millis(800)).await;
        b.eval("(() => { window.__bench.decode = []; window.__bench.t0 = performance.now(); \
                tessera.view2d.renders = []; window.__bench.draws0 = 0; \
                window.__bench.drawCount = 0; const v = tessera.view2d; const r = v.render.bind(v); \
                if (!v.__counted) { v.__counted = true; v.render = () => { window.__bench.drawCount++; r(); }; } \
                return 1; })()")
            .await?;
        tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
        let v = b
            .eval(
                "(() => { const t = performance.now() - window.__bench.t0; \
                   const d = window.__bench.decode.slice().sort((a, b) => a - b); \
                   return [d.length ? d[Math.floor(d.length / 2)] : -1, d.length * 1000 / t, \
                           window.__bench.drawCount * 1000 / t]; })()",
            )
            .await?;
        // the same decode, timed over many calls on the last frame received
        let lp = b
            .eval(
                "(async () => { const p = await import(new URL('static/protocol.js', document.baseURI).href); \
                   const buf = window.__bench.buf; if (!buf) return -1; \
                   const m = p.decodeServerMessage(buf); if (m.kind !== 'frame') return -1; \
                   let n = 0; const t0 = performance.now(); \
                   while (performance.now() - t0 < 300) { for (let i = 0; i < 100; i++) p.decodeServerMessage(buf); n += 100; } \
                   return (performance.now() - t0) / n; })()",
            )
            .await?
            .as_f64()
            .filter(|x| *x >= 0.0)
            .unwrap_or(f64::NAN);
        let a = v.as_array().cloned().unwrap_or_default();
        let g = |i: usize| a.get(i).and_then(|x| x.as_f64()).unwrap_or(f64::NAN);
        out.push(BrowserResult {
            fields: k,
            decode_ms: g(0),
            decode_loop_ms: lp,
            fps: g(1),
            draws_per_s: g(2),
        });
    }
    Ok(out)
}
