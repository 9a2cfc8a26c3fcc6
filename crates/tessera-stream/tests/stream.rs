//! The server on a loopback port with the analytic source: hello, subscriptions with a derived
//! field, frame ids, flow control (never more frames in flight than requests), query errors
//! with spans, unknown fields (dissertation §6.3.3).

use std::time::Duration;

use tessera_flow::AnalyticSource;
use tessera_stream::client::{Client, Event};
use tessera_stream::pb::{error::Code, Encoding};
use tessera_stream::{serve, RunningServer, ServerConfig, StreamError};

const NX: usize = 96;
const NY: usize = 64;
const T: Duration = Duration::from_secs(20);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

async fn start(rate_hz: f64) -> RunningServer {
    let config = ServerConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        rate_hz: Some(rate_hz),
        ..Default::default()
    };
    serve(config, Box::new(AnalyticSource::new(NX, NY, 0.01).unwrap()))
        .await
        .unwrap()
}

#[test]
fn hello_lists_the_fields() {
    runtime().block_on(async {
        let server = start(100.0).await;
        let c = Client::connect(&server.ws_url()).await.unwrap();
        let h = &c.hello;
        assert_eq!(h.simulation, "analytic");
        assert_eq!(h.protocol_version, 1);
        assert_eq!(h.grid.as_ref().unwrap().dims, [NX as u32, NY as u32, 1]);
        let names: Vec<(&str, &str)> = h
            .fields
            .iter()
            .map(|f| (f.name.as_str(), f.unit.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("VelocityX", "m/s"),
                ("VelocityY", "m/s"),
                ("Pressure", "Pa"),
                ("Vorticity", "1/s")
            ]
        );
        assert!(h.max_outstanding >= 4);
        c.close().await;
        server.shutdown().await;
    });
}

#[test]
fn derived_field_equals_the_expression_on_the_same_frame() {
    runtime().block_on(async {
        let server = start(200.0).await;
        let mut c = Client::connect(&server.ws_url()).await.unwrap();
        let expr = "sqrt(VelocityX^2+VelocityY^2)";
        c.subscribe(&["VelocityX", "VelocityY"], expr, Encoding::F32, 7)
            .await
            .unwrap();
        let ack = c.subscribed(T).await.unwrap();
        assert_eq!(ack.names, ["VelocityX", "VelocityY", expr]);
        c.request(2).await.unwrap();
        let reference = AnalyticSource::new(NX, NY, 0.01).unwrap();
        let h = 2.0 * std::f64::consts::PI / NX.max(NY) as f64;
        let mut last_id = None;
        let mut times = Vec::new();
        for _ in 0..12 {
            let f = c.next_frame(T).await.unwrap();
            c.request(1).await.unwrap();
            assert_eq!(f.frame.subscription, 7);
            if let Some(l) = last_id {
                assert!(
                    f.frame.frame_id > l,
                    "frame ids increase: {l} then {}",
                    f.frame.frame_id
                );
            }
            last_id = Some(f.frame.frame_id);
            times.push(f.frame.time);
            let blocks = f.blocks();
            assert_eq!(blocks.len(), 3);
            assert!(blocks[2].derived && !blocks[0].derived);
            assert_eq!(blocks[2].name, expr);
            let (vx, vy, speed) = (f.values(0), f.values(1), f.values(2));
            assert_eq!(speed.len(), NX * NY);
            let (mut lo, mut hi) = (f32::INFINITY, f32::NEG_INFINITY);
            for k in 0..NX * NY {
                let want = (vx[k] * vx[k] + vy[k] * vy[k]).sqrt();
                assert!(
                    (speed[k] - want).abs() <= 2.0 * f32::EPSILON * want.abs().max(1.0),
                    "cell {k}: derived {} but sqrt(vx^2+vy^2) = {want}",
                    speed[k]
                );
                lo = lo.min(speed[k]);
                hi = hi.max(speed[k]);
            }
            assert_eq!((blocks[2].min, blocks[2].max), (lo, hi));
            // the raw fields are the simulation's values at the frame's time
            for k in [0, 17, NX * NY / 2 + 5, NX * NY - 1] {
                let (i, j) = (k % NX, k / NX);
                let e = reference.exact((i as f64 + 0.5) * h, (j as f64 + 0.5) * h, f.frame.time);
                assert!((vx[k] as f64 - e[0]).abs() < 1e-5, "VelocityX[{k}]");
                assert!((vy[k] as f64 - e[1]).abs() < 1e-5, "VelocityY[{k}]");
            }
        }
        assert!(
            times.windows(2).all(|w| w[1] > w[0]),
            "simulated time advances"
        );
        c.close().await;
        server.shutdown().await;
    });
}

#[test]
fn never_more_frames_in_flight_than_requests() {
    runtime().block_on(async {
        // 500 steps per second: far more steps than requests during the observation windows.
        let server = start(500.0).await;
        for n in 1..=4u32 {
            let mut c = Client::connect(&server.ws_url()).await.unwrap();
            c.subscribe(&["Pressure"], "", Encoding::F32, n)
                .await
                .unwrap();
            c.subscribed(T).await.unwrap();
            c.request(n).await.unwrap();
            let mut frames = 0;
            let mut last = None::<u64>;
            // the n frames (a generous deadline: the machine may be loaded), then 700 ms of
            // silence while the simulation keeps stepping
            let end = tokio::time::Instant::now() + Duration::from_secs(20);
            let mut quiet_until = None;
            while let Some(ev) = c
                .next_event_within(
                    quiet_until
                        .unwrap_or(end)
                        .saturating_duration_since(tokio::time::Instant::now()),
                )
                .await
                .unwrap()
            {
                if let Event::Frame(f) = ev {
                    frames += 1;
                    assert!(last.is_none_or(|l| f.frame.frame_id > l));
                    last = Some(f.frame.frame_id);
                }
                if frames >= n && quiet_until.is_none() {
                    quiet_until = Some(tokio::time::Instant::now() + Duration::from_millis(700));
                }
            }
            assert_eq!(
                frames, n,
                "{n} requests outstanding: exactly {n} frames, then silence"
            );
            let steps_before = server.steps();
            // one more request: exactly one more frame, of a newer step than the last one
            c.request(1).await.unwrap();
            let f = c.next_frame(T).await.unwrap();
            assert!(f.frame.frame_id > last.unwrap());
            assert!(
                f.frame.frame_id >= steps_before,
                "the newest step, not a stale one"
            );
            assert!(
                !matches!(
                    c.next_event_within(Duration::from_millis(300))
                        .await
                        .unwrap(),
                    Some(Event::Frame(_))
                ),
                "no frame without a request"
            );
            // the server's own count of this connection's outstanding requests
            let stats = loop {
                if let Some(Event::Stats(s)) = c.next_event_within(T).await.unwrap() {
                    break s;
                }
            };
            assert_eq!(stats.outstanding, 0);
            assert_eq!(stats.frames_sent, n as u64 + 1);
            c.close().await;
        }
        server.shutdown().await;
    });
}

#[test]
fn bad_expression_returns_its_span() {
    runtime().block_on(async {
        let server = start(100.0).await;
        let mut c = Client::connect(&server.ws_url()).await.unwrap();
        let cases: [(&str, (u32, u32)); 3] = [
            ("VelocityX + * 2", (12, 13)),
            ("sqrt(Velocity^2)", (5, 13)),
            ("sqrt(VelocityX, 2)", (0, 18)),
        ];
        for (expr, _) in cases {
            c.subscribe(&[], expr, Encoding::F32, 3).await.unwrap();
            match c.subscribed(T).await {
                Err(StreamError::Query {
                    expression,
                    span: Some((s, e)),
                    message,
                }) => {
                    assert_eq!(expression, expr);
                    assert!(s <= e && e as usize <= expr.len(), "{message}");
                    let _ = message;
                }
                other => panic!("{expr}: expected a query error with a span, got {other:?}"),
            }
        }
        // the spans point at the offending text
        c.subscribe(&[], "sqrt(Velocity^2)", Encoding::F32, 3)
            .await
            .unwrap();
        let Err(StreamError::Query { span, message, .. }) = c.subscribed(T).await else {
            panic!()
        };
        assert_eq!(span, Some((5, 13)), "{message}");
        assert!(
            message.contains("Velocity") && message.contains("VelocityX"),
            "{message}"
        );
        // too long: the span covers the excess
        let long = format!("VelocityX{}", "+1".repeat(600));
        c.subscribe(&[], &long, Encoding::F32, 3).await.unwrap();
        let Err(StreamError::Query {
            span: Some((s, e)), ..
        }) = c.subscribed(T).await
        else {
            panic!("a too long expression is a query error")
        };
        assert_eq!((s, e), (1024, long.len() as u32));
        // the connection still works
        c.subscribe(&["Vorticity"], "", Encoding::F32, 4)
            .await
            .unwrap();
        c.subscribed(T).await.unwrap();
        c.request(1).await.unwrap();
        assert_eq!(c.next_frame(T).await.unwrap().frame.subscription, 4);
        c.close().await;
        server.shutdown().await;
    });
}

#[test]
fn unknown_field_is_a_clear_error() {
    runtime().block_on(async {
        let server = start(100.0).await;
        let mut c = Client::connect(&server.ws_url()).await.unwrap();
        c.subscribe(&["VelocityX", "Speed"], "", Encoding::F32, 1)
            .await
            .unwrap();
        let ev = c.next_event_within(T).await.unwrap();
        let Some(Event::Error(e)) = ev else {
            panic!("expected an error, got {ev:?}")
        };
        assert_eq!(e.code, Code::UnknownField as i32);
        assert!(
            e.message.contains("`Speed`")
                && e.message
                    .contains("VelocityX, VelocityY, Pressure, Vorticity"),
            "{}",
            e.message
        );
        c.close().await;
        server.shutdown().await;
    });
}

#[test]
fn half_precision_frames_are_within_half_an_ulp() {
    runtime().block_on(async {
        let server = start(100.0).await;
        let mut c = Client::connect(&server.ws_url()).await.unwrap();
        c.subscribe(&["Pressure"], "Pressure*2", Encoding::F16, 1)
            .await
            .unwrap();
        c.subscribed(T).await.unwrap();
        c.request(1).await.unwrap();
        let f = c.next_frame(T).await.unwrap();
        assert!(f.len() < 2 * NX * NY * 4, "f16 halves the payload");
        let (p, p2) = (f.values(0), f.values(1));
        for k in 0..NX * NY {
            assert!(
                (p2[k] - 2.0 * p[k]).abs() <= 2.0 * p[k].abs() / 1024.0 + 1e-7,
                "{k}"
            );
        }
        c.close().await;
        server.shutdown().await;
    });
}

#[test]
fn fluid_scene_streams_its_fields_and_a_derived_field() {
    runtime().block_on(async {
        let sim = tessera_stream::source::open("cylinder2d", Some([64, 16]), None).unwrap();
        let config = ServerConfig {
            bind: "127.0.0.1:0".parse().unwrap(),
            ..Default::default()
        };
        let server = serve(config, sim).await.unwrap();
        let mut c = Client::connect(&server.ws_url()).await.unwrap();
        assert_eq!(c.hello.simulation, "cylinder2d");
        let names: Vec<&str> = c.hello.fields.iter().map(|f| f.name.as_str()).collect();
        assert!(
            names.starts_with(&["Pressure", "VelocityX", "VelocityY"]),
            "{names:?}"
        );
        let expr = "sqrt(VelocityX^2+VelocityY^2)";
        c.subscribe(&["VelocityX", "VelocityY"], expr, Encoding::F32, 1)
            .await
            .unwrap();
        c.subscribed(T).await.unwrap();
        c.request(2).await.unwrap();
        let mut last = None;
        for _ in 0..4 {
            let f = c.next_frame(T).await.unwrap();
            c.request(1).await.unwrap();
            assert!(last.is_none_or(|l| f.frame.frame_id > l));
            last = Some(f.frame.frame_id);
            let (vx, vy, s) = (f.values(0), f.values(1), f.values(2));
            assert_eq!(s.len(), 64 * 16);
            for k in 0..s.len() {
                let want = (vx[k] * vx[k] + vy[k] * vy[k]).sqrt();
                assert!(
                    (s[k] - want).abs() <= 2.0 * f32::EPSILON * want.max(1.0),
                    "{k}"
                );
            }
        }
        assert!(
            f32::max(0.0, c.next_frame(T).await.unwrap().blocks()[0].max) > 0.0,
            "the inflow moves the fluid"
        );
        c.close().await;
        server.shutdown().await;
    });
}
