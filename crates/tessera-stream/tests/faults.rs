//! Faults, bounded in time, on loopback: clients that stop reading, disconnect mid-frame,
//! send garbage or oversized messages are dropped while a well-behaved client keeps
//! receiving frames; a token keeps everyone without it out; requests beyond the limit are
//! refused; malformed server messages are errors, never panics.

use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use tessera_flow::AnalyticSource;
use tessera_stream::client::{Client, Event};
use tessera_stream::pb::{error::Code, Encoding};
use tessera_stream::wire::decode_server;
use tessera_stream::{serve, RunningServer, ServerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const T: Duration = Duration::from_secs(20);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

async fn start(nx: usize, ny: usize, config: ServerConfig) -> RunningServer {
    let config = ServerConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        rate_hz: Some(100.0),
        ..config
    };
    serve(config, Box::new(AnalyticSource::new(nx, ny, 0.01).unwrap()))
        .await
        .unwrap()
}

/// A client that keeps two requests outstanding and counts frames until told to stop.
fn good_client(
    url: String,
) -> (
    tokio::task::JoinHandle<(u64, Duration)>,
    tokio::sync::watch::Sender<bool>,
) {
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let h = tokio::spawn(async move {
        let mut c = Client::connect(&url).await.unwrap();
        c.subscribe(&["Pressure"], "", Encoding::F32, 1)
            .await
            .unwrap();
        c.subscribed(T).await.unwrap();
        c.request(2).await.unwrap();
        let (mut frames, mut last, mut worst_gap) = (0u64, None::<u64>, Duration::ZERO);
        let mut t_last = Instant::now();
        while !*stop_rx.borrow() {
            if let Some(Event::Frame(f)) = c
                .next_event_within(Duration::from_millis(100))
                .await
                .unwrap()
            {
                assert!(
                    last.is_none_or(|l| f.frame.frame_id > l),
                    "frame ids increase"
                );
                last = Some(f.frame.frame_id);
                frames += 1;
                worst_gap = worst_gap.max(t_last.elapsed());
                t_last = Instant::now();
                c.request(1).await.unwrap();
            }
        }
        c.close().await;
        (frames, worst_gap)
    });
    (h, stop_tx)
}

async fn wait_clients(server: &RunningServer, n: usize) {
    let end = Instant::now() + T;
    while server.clients() != n {
        assert!(
            Instant::now() < end,
            "{} clients connected, expected {n}",
            server.clients()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Raw WebSocket handshake on a TCP stream (for clients that misbehave below the
/// WebSocket library).
async fn raw_ws(addr: std::net::SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "GET /ws HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = [0u8; 1];
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut buf).await.unwrap();
        head.push(buf[0]);
    }
    assert!(
        head.starts_with(b"HTTP/1.1 101"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    s
}

/// A masked binary WebSocket frame (client to server) with a zero mask key.
fn masked_frame(payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x82];
    if payload.len() < 126 {
        f.push(0x80 | payload.len() as u8);
    } else if payload.len() < 65536 {
        f.push(0x80 | 126);
        f.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    } else {
        f.push(0x80 | 127);
        f.extend_from_slice(&(payload.len() as u64).to_be_bytes());
    }
    f.extend_from_slice(&[0, 0, 0, 0]);
    f.extend_from_slice(payload);
    f
}

fn subscribe_bytes(fields: &[&str]) -> Vec<u8> {
    use prost::Message;
    use tessera_stream::pb::{client_message::Kind, ClientMessage, Subscribe};
    ClientMessage {
        kind: Some(Kind::Subscribe(Subscribe {
            fields: fields.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        })),
    }
    .encode_to_vec()
}

fn request_bytes(n: u32) -> Vec<u8> {
    use prost::Message;
    use tessera_stream::pb::{client_message::Kind, ClientMessage, FrameRequest};
    ClientMessage {
        kind: Some(Kind::Request(FrameRequest {
            count: n,
            ..Default::default()
        })),
    }
    .encode_to_vec()
}

#[test]
fn a_client_that_stops_reading_is_dropped_without_affecting_others() {
    runtime().block_on(async {
        // 2 MiB frames; a stalled client can buffer a few in the kernel, then its send blocks
        let server = start(
            1024,
            512,
            ServerConfig {
                send_timeout: Duration::from_millis(800),
                ..Default::default()
            },
        )
        .await;
        let (good, stop) = good_client(server.ws_url());
        wait_clients(&server, 1).await;
        let mut stalled = Client::connect(&server.ws_url()).await.unwrap();
        stalled
            .subscribe(
                &["VelocityX", "VelocityY", "Pressure"],
                "",
                Encoding::F32,
                1,
            )
            .await
            .unwrap();
        stalled.request(16).await.unwrap();
        wait_clients(&server, 2).await;
        // never read again: the server must drop it after its send timeout
        let end = Instant::now() + T;
        while server.clients() != 1 {
            assert!(Instant::now() < end, "the stalled client was not dropped");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        stop.send(true).unwrap();
        let (frames, worst_gap) = good.await.unwrap();
        assert!(frames >= 5, "the good client received {frames} frames");
        assert!(
            worst_gap < Duration::from_secs(2),
            "the good client waited {worst_gap:?} for a frame"
        );
        drop(stalled);
        server.shutdown().await;
    });
}

#[test]
fn disconnects_mid_frame_garbage_and_oversized_messages_are_dropped() {
    runtime().block_on(async {
        let server = start(256, 256, ServerConfig::default()).await;
        let addr = server.local_addr();
        let (good, stop) = good_client(server.ws_url());
        wait_clients(&server, 1).await;

        // 1. disconnect in the middle of a 256 KiB frame
        for _ in 0..5 {
            let mut s = raw_ws(addr).await;
            s.write_all(&masked_frame(&subscribe_bytes(&["Pressure"])))
                .await
                .unwrap();
            s.write_all(&masked_frame(&request_bytes(2))).await.unwrap();
            let mut got = 0;
            let mut buf = vec![0u8; 64 * 1024];
            while got < 150_000 {
                let n = s.read(&mut buf).await.unwrap();
                assert!(n > 0, "server closed before sending a frame");
                got += n;
            }
            drop(s); // abrupt close mid-frame
        }

        // 2. garbage: bytes that are no ClientMessage, a text message, a non-WebSocket request
        let mut c = Client::connect(&server.ws_url()).await.unwrap();
        c.send_raw(vec![0xff, 0xff, 0xff, 0x01, 0x02])
            .await
            .unwrap();
        match c.next_event_within(T).await {
            Ok(Some(Event::Error(e))) => {
                assert_eq!(e.code, Code::BadRequest as i32, "{}", e.message)
            }
            other => panic!("expected a bad-request error, got {other:?}"),
        }
        assert!(
            c.next_event_within(T).await.is_err(),
            "the connection is closed after garbage"
        );
        let mut c = Client::connect(&server.ws_url()).await.unwrap();
        c.send_text("{\"subscribe\": \"Pressure\"}").await.unwrap();
        assert!(matches!(
            c.next_event_within(T).await,
            Ok(Some(Event::Error(_)))
        ));
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"\x16\x03\x01garbage that is not HTTP\r\n\r\n")
            .await
            .unwrap();
        let mut sink = Vec::new();
        let _ = tokio::time::timeout(T, s.read_to_end(&mut sink)).await;

        // 3. an oversized message (beyond the 64 KiB limit): the connection is closed
        let mut c = Client::connect(&server.ws_url()).await.unwrap();
        let _ = c.send_raw(vec![0u8; 200 * 1024]).await;
        let mut closed = false;
        for _ in 0..10 {
            match c.next_event_within(T).await {
                Err(_) => {
                    closed = true;
                    break;
                }
                Ok(None) => break,
                Ok(Some(_)) => continue,
            }
        }
        assert!(closed, "an oversized message closes the connection");

        // 4. a random-bytes storm over fresh connections (bounded: 40 connections)
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(14);
        for _ in 0..40 {
            let mut c = Client::connect(&server.ws_url()).await.unwrap();
            let n = rng.random_range(1..512);
            let junk: Vec<u8> = (0..n).map(|_| rng.random()).collect();
            let _ = c.send_raw(junk).await;
            let _ = c.next_event_within(Duration::from_millis(200)).await;
        }

        wait_clients(&server, 1).await;
        stop.send(true).unwrap();
        let (frames, worst_gap) = good.await.unwrap();
        assert!(frames >= 5, "the good client received {frames} frames");
        assert!(
            worst_gap < Duration::from_secs(3),
            "the good client waited {worst_gap:?}"
        );
        server.shutdown().await;
    });
}

#[test]
fn requests_beyond_the_limit_are_refused() {
    runtime().block_on(async {
        let server = start(32, 32, ServerConfig::default()).await;
        let mut c = Client::connect(&server.ws_url()).await.unwrap();
        let max = c.hello.max_outstanding;
        c.subscribe(&["Pressure"], "", Encoding::F32, 1)
            .await
            .unwrap();
        c.subscribed(T).await.unwrap();
        c.request(1000).await.unwrap();
        let (mut frames, mut limit_errors) = (0, 0);
        // wait (generously, the machine may be loaded) for the granted frames, then make
        // sure no further frame follows
        let end = Instant::now() + Duration::from_secs(30);
        let mut quiet_until = None;
        loop {
            let until = quiet_until.unwrap_or(end);
            let Some(ev) = c
                .next_event_within(until.saturating_duration_since(Instant::now()))
                .await
                .unwrap()
            else {
                break;
            };
            match ev {
                Event::Frame(_) => frames += 1,
                Event::Error(e) if e.code == Code::Limit as i32 => limit_errors += 1,
                _ => {}
            }
            if frames >= max && limit_errors >= 1 && quiet_until.is_none() {
                quiet_until = Some(Instant::now() + Duration::from_secs(1));
            }
        }
        assert_eq!(limit_errors, 1);
        assert_eq!(
            frames, max,
            "at most max_outstanding frames for an excessive request"
        );
        c.request(0).await.unwrap();
        assert!(matches!(
            c.next_event_within(T).await.unwrap(),
            Some(Event::Error(e)) if e.code == Code::BadRequest as i32
        ));
        server.shutdown().await;
    });
}

#[test]
fn without_the_token_a_client_gets_nothing() {
    runtime().block_on(async {
        let server = start(
            32,
            32,
            ServerConfig {
                token: Some("s3cret".into()),
                ..Default::default()
            },
        )
        .await;
        let ws = server.ws_url();
        assert!(Client::connect(&ws).await.is_err(), "no token");
        assert!(
            Client::connect(&format!("{ws}?token=wrong")).await.is_err(),
            "wrong token"
        );
        assert!(
            Client::connect(&format!("{ws}?token=s3cre")).await.is_err(),
            "prefix of the token"
        );
        let c = Client::connect(&format!("{ws}?token=s3cret"))
            .await
            .unwrap();
        assert_eq!(c.hello.simulation, "analytic");
        // the page too
        let page = |path: &str| {
            let addr = server.local_addr();
            let path = path.to_string();
            async move {
                let mut s = TcpStream::connect(addr).await.unwrap();
                s.write_all(
                    format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                        .as_bytes(),
                )
                .await
                .unwrap();
                let mut out = Vec::new();
                s.read_to_end(&mut out).await.unwrap();
                String::from_utf8_lossy(&out).to_string()
            }
        };
        let r = page("/").await;
        assert!(r.starts_with("HTTP/1.1 401"), "{r}");
        assert!(!r.contains("<canvas"));
        let r = page("/?token=s3cret").await;
        assert!(
            r.starts_with("HTTP/1.1 200") && r.contains("<canvas"),
            "{r}"
        );
        c.close().await;
        server.shutdown().await;
    });
}

#[test]
fn binds_loopback_by_default() {
    let c = ServerConfig::default();
    assert!(c.bind.ip().is_loopback(), "{}", c.bind);
    assert!(c.max_clients > 0 && c.max_outstanding > 0 && c.max_expression_bytes > 0);
}

#[test]
fn malformed_server_messages_are_errors_not_panics() {
    // bounded-time fuzzing of the client-side decoder: random bytes and mutations of real frames
    let rt = runtime();
    let frame = rt.block_on(async {
        let server = start(16, 8, ServerConfig::default()).await;
        let mut c = Client::connect(&server.ws_url()).await.unwrap();
        c.subscribe(&["Pressure"], "Pressure+1", Encoding::F32, 1)
            .await
            .unwrap();
        c.request(1).await.unwrap();
        let f = c.next_frame(T).await.unwrap();
        server.shutdown().await;
        f.received.bytes.to_vec()
    });
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(6);
    let start = Instant::now();
    let mut n = 0;
    while start.elapsed() < Duration::from_secs(2) && n < 200_000 {
        let mut m = frame.clone();
        match n % 3 {
            0 => {
                for _ in 0..rng.random_range(1..8) {
                    let i = rng.random_range(0..m.len());
                    m[i] = rng.random();
                }
            }
            1 => m.truncate(rng.random_range(0..m.len())),
            _ => {
                m = (0..rng.random_range(0..256))
                    .map(|_| rng.random())
                    .collect();
            }
        }
        if let Ok(r) = decode_server(bytes::Bytes::from(m)) {
            // a decoded frame's arrays can be read
            if let Some(tessera_stream::pb::server_message::Kind::Frame(f)) = &r.header.kind {
                for p in tessera_stream::wire::payloads(f) {
                    let _ = r.values(p).len();
                }
            }
        }
        n += 1;
    }
    assert!(n > 1000);
}
