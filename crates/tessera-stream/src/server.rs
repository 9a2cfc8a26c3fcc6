//! The streaming server (dissertation §6.3.1-6.3.3): HTTP for the browser client's page and
//! files, a WebSocket per client for the stream, one simulation thread ([`crate::hub`]).
//!
//! Every resource is bounded: clients ([`ServerConfig::max_clients`]), client message size,
//! outstanding frame requests, expression length and compile time, and the time one send may
//! take (a client that stops reading is dropped after [`ServerConfig::send_timeout`]). The
//! server binds 127.0.0.1 unless told otherwise; with a token, the page and the stream need
//! `?token=T` (or `Authorization: Bearer T`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query as UrlQuery, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use prost::Message as _;
use tessera_flow::Simulation;
use tokio::sync::{mpsc, Notify};

use crate::frame::{compile_query, SubKey, Subscription};
use crate::hub::{run_simulation, Hub, Next, SimInfo};
use crate::pb::{self, client_message, error::Code, server_message::Kind, Encoding, ServerMessage};
use crate::wire::{encode_plain, MAX_CLIENT_MESSAGE_BYTES, PROTOCOL_VERSION};
use crate::{web, StreamError};

/// Settings of [`serve`].
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Address to listen on (default 127.0.0.1:8080; port 0 picks a free port).
    pub bind: SocketAddr,
    /// Required token for the page and the stream, if any.
    pub token: Option<String>,
    /// Most clients connected at once (further upgrades get 503).
    pub max_clients: usize,
    /// Most frame requests one client may have outstanding.
    pub max_outstanding: u32,
    /// Longest query expression in bytes.
    pub max_expression_bytes: usize,
    /// Longest a query may take to compile.
    pub compile_timeout: Duration,
    /// Longest one message may take to send before the client is dropped.
    pub send_timeout: Duration,
    /// Cap on simulation steps per second (None: as fast as it runs).
    pub rate_hz: Option<f64>,
    /// Interval of `Stats` messages.
    pub stats_interval: Duration,
    /// Serve the web client from this folder instead of the copy embedded in the binary
    /// (for development of the client).
    pub web_dir: Option<PathBuf>,
    /// How the simulation is drawn in the 3D view (rixel frames), if it has one.
    pub scene3d: Option<crate::rixel::Scene3D>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bind: SocketAddr::from(([127, 0, 0, 1], 8080)),
            token: None,
            max_clients: 128,
            max_outstanding: 16,
            max_expression_bytes: 1024,
            compile_timeout: Duration::from_secs(2),
            send_timeout: Duration::from_secs(30),
            rate_hz: None,
            stats_interval: Duration::from_secs(1),
            web_dir: None,
            scene3d: None,
        }
    }
}

struct App {
    hub: Arc<Hub>,
    config: ServerConfig,
}

/// A running server; dropping it does not stop it, call [`RunningServer::shutdown`].
pub struct RunningServer {
    addr: SocketAddr,
    hub: Arc<Hub>,
    stop: Arc<Notify>,
    http: tokio::task::JoinHandle<()>,
    sim: Option<std::thread::JoinHandle<()>>,
}

impl RunningServer {
    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
    /// The page's URL (with the token if one is needed).
    pub fn url(&self, token: Option<&str>) -> String {
        match token {
            Some(t) => format!("http://{}/?token={t}", self.addr),
            None => format!("http://{}/", self.addr),
        }
    }
    /// The stream's URL.
    pub fn ws_url(&self) -> String {
        format!("ws://{}/ws", self.addr)
    }
    /// Connected clients.
    pub fn clients(&self) -> usize {
        self.hub.clients()
    }
    /// Simulation steps taken so far.
    pub fn steps(&self) -> u64 {
        self.hub.counters.steps()
    }
    /// The simulation's counters.
    pub fn counters(&self) -> &crate::hub::SimCounters {
        &self.hub.counters
    }
    /// Waits until the server stops (it stops only through [`RunningServer::shutdown`]).
    pub async fn wait(mut self) {
        let _ = (&mut self.http).await;
    }
    /// Stops accepting, closes connections and joins the simulation thread.
    pub async fn shutdown(mut self) {
        self.stop.notify_one();
        self.hub.shut_down();
        let _ = tokio::time::timeout(Duration::from_secs(5), &mut self.http).await;
        self.http.abort();
        if let Some(t) = self.sim.take() {
            let _ = tokio::task::spawn_blocking(move || t.join()).await;
        }
    }
}

/// Starts the server for `sim` on the current tokio runtime.
pub async fn serve(
    config: ServerConfig,
    sim: Box<dyn Simulation>,
) -> Result<RunningServer, StreamError> {
    let scene3d = match &config.scene3d {
        Some(s) => {
            let (center, radius) = s.bounds(sim.as_ref())?;
            Some(crate::rixel::Scene3DInfo {
                scene: s.clone(),
                center,
                radius,
            })
        }
        None => None,
    };
    let info = SimInfo {
        name: sim.name().to_string(),
        grid: sim.grid(),
        fields: sim.fields().to_vec(),
        gpu: sim.gpu().is_some(),
        scene3d,
    };
    let hub = Arc::new(Hub::new(info));
    let listener = tokio::net::TcpListener::bind(config.bind)
        .await
        .map_err(|e| StreamError::io(format!("binding {}", config.bind), e))?;
    let addr = listener
        .local_addr()
        .map_err(|e| StreamError::io("local address", e))?;
    let rate = config.rate_hz;
    let sim_hub = hub.clone();
    let sim_thread = std::thread::Builder::new()
        .name("tessera-simulation".into())
        .spawn(move || run_simulation(sim_hub, sim, rate))
        .map_err(|e| StreamError::io("starting the simulation thread", e))?;
    let app = Arc::new(App {
        hub: hub.clone(),
        config,
    });
    let router = Router::new()
        .route("/", get(index))
        .route("/ws", get(ws_upgrade))
        .route("/tessera_stream.proto", get(proto_file))
        .route("/static/{file}", get(static_file))
        .with_state(app);
    let stop = Arc::new(Notify::new());
    let stopped = stop.clone();
    let http = tokio::spawn(async move {
        let _ = axum::serve(listener, router)
            .with_graceful_shutdown(async move { stopped.notified().await })
            .await;
    });
    Ok(RunningServer {
        addr,
        hub,
        stop,
        http,
        sim: Some(sim_thread),
    })
}

/// Compares in time independent of where the strings differ.
fn same_token(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

fn authorized(
    app: &App,
    query: &std::collections::HashMap<String, String>,
    headers: &HeaderMap,
) -> bool {
    let Some(t) = &app.config.token else {
        return true;
    };
    if query.get("token").is_some_and(|q| same_token(q, t)) {
        return true;
    }
    headers
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "))
        .is_some_and(|h| same_token(h, t))
}

type Params = UrlQuery<std::collections::HashMap<String, String>>;

async fn index(State(app): State<Arc<App>>, UrlQuery(q): Params, headers: HeaderMap) -> Response {
    if !authorized(&app, &q, &headers) {
        return (
            StatusCode::UNAUTHORIZED,
            "a token is required: open /?token=T\n",
        )
            .into_response();
    }
    serve_web(&app, "index.html").await
}

async fn static_file(State(app): State<Arc<App>>, Path(file): Path<String>) -> Response {
    serve_web(&app, &file).await
}

async fn proto_file() -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        crate::PROTO_SOURCE,
    )
        .into_response()
}

async fn serve_web(app: &App, name: &str) -> Response {
    let Some((mime, embedded)) = web::asset(name) else {
        return (StatusCode::NOT_FOUND, "not found\n").into_response();
    };
    let body: Bytes = match &app.config.web_dir {
        Some(dir) => match std::fs::read(dir.join(name)) {
            Ok(b) => b.into(),
            Err(e) => {
                return (StatusCode::INTERNAL_SERVER_ERROR, format!("{name}: {e}\n"))
                    .into_response()
            }
        },
        None => Bytes::from_static(embedded),
    };
    (
        [
            (header::CONTENT_TYPE, mime),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

async fn ws_upgrade(
    State(app): State<Arc<App>>,
    UrlQuery(q): Params,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    if !authorized(&app, &q, &headers) {
        return (StatusCode::UNAUTHORIZED, "a token is required\n").into_response();
    }
    let Some((id, notify)) = app.hub.register(app.config.max_clients) else {
        return (StatusCode::SERVICE_UNAVAILABLE, "too many clients\n").into_response();
    };
    let guard = Registration {
        hub: app.hub.clone(),
        id,
    };
    ws.max_message_size(MAX_CLIENT_MESSAGE_BYTES)
        .max_frame_size(MAX_CLIENT_MESSAGE_BYTES)
        .on_upgrade(move |socket| connection(app, socket, guard, notify))
}

/// Unregisters the connection however it ends (also when the upgrade never completes).
struct Registration {
    hub: Arc<Hub>,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.hub.unregister(self.id);
    }
}

fn msg(kind: Kind) -> Bytes {
    encode_plain(&ServerMessage { kind: Some(kind) })
}

fn error_msg(code: Code, message: impl Into<String>, subscription: u32) -> Bytes {
    msg(Kind::Error(pb::Error {
        code: code as i32,
        message: message.into(),
        subscription,
    }))
}

/// Control messages from the reader to the writer; `Close` ends the connection after the
/// messages before it were sent.
enum Out {
    Send(Bytes),
    Close,
}

async fn connection(app: Arc<App>, socket: WebSocket, reg: Registration, notify: Arc<Notify>) {
    let id = reg.id;
    let (sink, stream) = socket.split();
    let (tx, rx) = mpsc::channel::<Out>(8);
    let hello = hello(&app);
    if tx.send(Out::Send(hello)).await.is_err() {
        return;
    }
    let mut writer = tokio::spawn(writer(app.clone(), id, sink, rx, notify));
    let mut reader = tokio::spawn(reader(app.clone(), id, stream, tx));
    // Whichever side ends first ends the connection.
    tokio::select! {
        _ = &mut writer => reader.abort(),
        _ = &mut reader => {
            // let the writer flush what the reader queued (an error, a close) for a moment
            if tokio::time::timeout(Duration::from_secs(1), &mut writer).await.is_err() {
                writer.abort();
            }
        }
    }
    drop(reg);
}

fn hello(app: &App) -> Bytes {
    let info = &app.hub.info;
    msg(Kind::Hello(pb::Hello {
        server: format!("tessera-stream {}", env!("CARGO_PKG_VERSION")),
        protocol_version: PROTOCOL_VERSION,
        simulation: info.name.clone(),
        grid: Some(pb::Grid {
            dims: info.grid.dims.iter().map(|&d| d as u32).collect(),
            spacing: info.grid.spacing,
            origin: info.grid.origin.to_vec(),
        }),
        fields: info
            .fields
            .iter()
            .map(|f| pb::FieldInfo {
                name: f.name.clone(),
                unit: f.unit.clone(),
            })
            .collect(),
        max_outstanding: app.config.max_outstanding,
        max_client_message_bytes: MAX_CLIENT_MESSAGE_BYTES as u32,
        max_expression_bytes: app.config.max_expression_bytes as u32,
        gpu: info.gpu,
        scene3d: info.scene3d.as_ref().map(|s| s.to_pb()),
    }))
}

async fn writer(
    app: Arc<App>,
    id: u64,
    mut sink: SplitSink<WebSocket, Message>,
    mut rx: mpsc::Receiver<Out>,
    notify: Arc<Notify>,
) {
    let timeout = app.config.send_timeout;
    let mut stats = tokio::time::interval(app.config.stats_interval);
    stats.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    stats.tick().await;
    let (mut frames, mut bytes) = (0u64, 0u64);
    let mut sim_failed = false;
    loop {
        let out = tokio::select! {
            biased;
            c = rx.recv() => match c {
                Some(Out::Send(b)) => Some(b),
                Some(Out::Close) | None => break,
            },
            _ = notify.notified() => {
                if !sim_failed {
                    if let Some(e) = app.hub.failed() {
                        sim_failed = true;
                        Some(error_msg(Code::Simulation, e, 0))
                    } else {
                        match app.hub.next(id) {
                            Next::Send(b) => {
                                frames += 1;
                                Some(b.bytes)
                            }
                            Next::Failed(e) => Some(error_msg(Code::Simulation, format!("building a frame: {e}"), 0)),
                            Next::Wait => None,
                        }
                    }
                } else {
                    None
                }
            }
            _ = stats.tick() => {
                let c = &app.hub.counters;
                Some(msg(Kind::Stats(pb::Stats {
                    steps_per_second: c.steps_per_second(),
                    step_ms: c.step_ms(),
                    build_ms: c.build_ms(),
                    steps: c.steps(),
                    frames_sent: frames,
                    bytes_sent: bytes,
                    clients: app.hub.clients() as u32,
                    outstanding: app.hub.outstanding(id),
                })))
            }
        };
        let Some(b) = out else { continue };
        bytes += b.len() as u64;
        match tokio::time::timeout(timeout, sink.send(Message::Binary(b))).await {
            Ok(Ok(())) => {}
            _ => return, // closed, failed, or the client stopped reading: drop it
        }
        // After a frame, another may already be waiting (credits left and a newer step).
        notify.notify_one();
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), sink.close()).await;
}

async fn reader(app: Arc<App>, id: u64, mut stream: SplitStream<WebSocket>, tx: mpsc::Sender<Out>) {
    while let Some(m) = stream.next().await {
        let data = match m {
            Ok(Message::Binary(b)) => b,
            Ok(Message::Close(_)) => break,
            Ok(Message::Ping(_)) | Ok(Message::Pong(_)) => continue,
            Ok(Message::Text(_)) => {
                let _ = tx
                    .send(Out::Send(error_msg(
                        Code::BadRequest,
                        "text messages are not part of the protocol (send binary ClientMessage); closing",
                        0,
                    )))
                    .await;
                let _ = tx.send(Out::Close).await;
                return;
            }
            Err(_) => return, // oversized, malformed framing, or the connection broke
        };
        let cm = match pb::ClientMessage::decode(&data[..]) {
            Ok(cm) => cm,
            Err(e) => {
                let _ = tx
                    .send(Out::Send(error_msg(
                        Code::BadRequest,
                        format!("not a ClientMessage ({e}); closing"),
                        0,
                    )))
                    .await;
                let _ = tx.send(Out::Close).await;
                return;
            }
        };
        let reply = match cm.kind {
            Some(client_message::Kind::Subscribe(s)) => match subscribe(&app, s).await {
                Ok((ack, sub)) => {
                    // The acknowledgement is queued before frames of the new subscription
                    // can exist (the writer serves queued messages first).
                    if tx.send(Out::Send(ack)).await.is_err() {
                        return;
                    }
                    app.hub.subscribe(id, sub);
                    None
                }
                Err(reply) => Some(reply),
            },
            Some(client_message::Kind::Request(r)) => {
                let camera_reply = match &r.camera {
                    Some(c) => set_camera(&app, id, c),
                    None => None,
                };
                if camera_reply.is_some() {
                    camera_reply
                } else if r.count == 0 && r.camera.is_some() {
                    None
                } else if r.count == 0 {
                    Some(error_msg(
                        Code::BadRequest,
                        "a frame request must ask for at least 1 frame",
                        0,
                    ))
                } else {
                    let (_, refused) = app.hub.request(id, r.count, app.config.max_outstanding);
                    refused.then(|| {
                        error_msg(
                            Code::Limit,
                            format!(
                                "at most {} frame requests may be outstanding; the excess was ignored",
                                app.config.max_outstanding
                            ),
                            0,
                        )
                    })
                }
            }
            None => Some(error_msg(Code::BadRequest, "empty ClientMessage", 0)),
        };
        if let Some(r) = reply {
            if tx.send(Out::Send(r)).await.is_err() {
                return;
            }
        }
    }
}

/// A frame request's 3D camera: when the connection's 3D subscription was rendered for
/// another view, it is replaced by the same subscription for this camera (the next frame is
/// rendered for it). Returns the error reply of a bad camera.
fn set_camera(app: &App, id: u64, c: &pb::Camera) -> Option<Bytes> {
    let camera = match crate::rixel::CameraKey::from_pb(c) {
        Ok(k) => k,
        Err(e) => return Some(error_msg(Code::BadRequest, e, 0)),
    };
    let sub = app.hub.subscription(id)?;
    let rk = sub.key.rixel.as_ref()?;
    if rk.camera.same_view(&camera) {
        return None;
    }
    let mut key = sub.key.clone();
    key.rixel = Some(crate::rixel::RixelKey {
        camera,
        ..rk.clone()
    });
    app.hub.set_view(
        id,
        Arc::new(Subscription {
            key,
            query: sub.query.clone(),
        }),
    );
    None
}

/// Checks and compiles a subscription; returns the acknowledgement and the subscription, or
/// the error reply.
async fn subscribe(app: &Arc<App>, s: pb::Subscribe) -> Result<(Bytes, Arc<Subscription>), Bytes> {
    let info = &app.hub.info;
    let sid = s.subscription;
    let Ok(precision) = Encoding::try_from(s.precision) else {
        return Err(error_msg(
            Code::BadRequest,
            format!("unknown precision {} (0 = f32, 1 = f16)", s.precision),
            sid,
        ));
    };
    let names: Vec<&str> = info.fields.iter().map(|f| f.name.as_str()).collect();
    if s.fields.len() > 64 {
        return Err(error_msg(
            Code::Limit,
            "at most 64 fields per subscription",
            sid,
        ));
    }
    let unknown: Vec<&str> = s
        .fields
        .iter()
        .filter(|f| !names.contains(&f.as_str()))
        .map(|f| f.as_str())
        .collect();
    if !unknown.is_empty() {
        return Err(error_msg(
            Code::UnknownField,
            format!(
                "unknown field{} {} (this simulation has: {})",
                if unknown.len() > 1 { "s" } else { "" },
                unknown
                    .iter()
                    .map(|u| format!("`{}`", u.chars().take(64).collect::<String>()))
                    .collect::<Vec<_>>()
                    .join(", "),
                names.join(", ")
            ),
            sid,
        ));
    }
    let rixel = match &s.rixel {
        None => None,
        Some(v) => {
            let Some(scene) = &info.scene3d else {
                return Err(error_msg(
                    Code::BadRequest,
                    format!("`{}` has no 3D view (Hello.scene3d is not set)", info.name),
                    sid,
                ));
            };
            match crate::rixel::RixelKey::from_pb(v, scene.default_camera()) {
                Ok(k) => Some(k),
                Err(e) => return Err(error_msg(Code::BadRequest, e, sid)),
            }
        }
    };
    let expression = s.expression.trim().to_string();
    if s.fields.is_empty() && expression.is_empty() {
        return Err(error_msg(
            Code::BadRequest,
            "a subscription needs a field or an expression",
            sid,
        ));
    }
    let query = if expression.is_empty() {
        None
    } else {
        let max = app.config.max_expression_bytes;
        if expression.len() > max {
            return Err(query_error(
                sid,
                &expression,
                format!(
                    "expression too long: {} bytes (limit {max})",
                    expression.len()
                ),
                Some((max as u32, expression.len() as u32)),
            ));
        }
        let owned: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        let expr = expression.clone();
        let cpu_jit = !info.gpu;
        let job = tokio::task::spawn_blocking(move || {
            let refs: Vec<&str> = owned.iter().map(|s| s.as_str()).collect();
            compile_query(&expr, &refs, cpu_jit)
        });
        match tokio::time::timeout(app.config.compile_timeout, job).await {
            Err(_) => {
                return Err(query_error(
                    sid,
                    &expression,
                    format!(
                        "compiling took longer than {:.1} s",
                        app.config.compile_timeout.as_secs_f64()
                    ),
                    None,
                ))
            }
            Ok(Err(e)) => {
                return Err(query_error(
                    sid,
                    &expression,
                    format!("compiler failed: {e}"),
                    None,
                ))
            }
            Ok(Ok(Err(e))) => {
                let span = e.span().map(|s| (s.start as u32, s.end as u32));
                return Err(query_error(sid, &expression, e.to_string(), span));
            }
            Ok(Ok(Ok(q))) => Some(Arc::new(q)),
        }
    };
    let mut names_out = s.fields.clone();
    if query.is_some() {
        names_out.push(expression.clone());
    }
    let on_gpu = query.is_some() && info.gpu;
    let sub = Arc::new(Subscription {
        key: SubKey {
            fields: s.fields,
            expression,
            precision,
            subscription: sid,
            rixel,
        },
        query,
    });
    let ack = msg(Kind::Subscribed(pb::Subscribed {
        subscription: sid,
        names: names_out,
        precision: precision as i32,
        query_on_gpu: on_gpu,
    }));
    Ok((ack, sub))
}

fn query_error(sid: u32, expression: &str, message: String, span: Option<(u32, u32)>) -> Bytes {
    msg(Kind::QueryError(pb::QueryError {
        subscription: sid,
        expression: expression.to_string(),
        message,
        has_span: span.is_some(),
        start: span.map_or(0, |s| s.0),
        end: span.map_or(0, |s| s.1),
    }))
}
