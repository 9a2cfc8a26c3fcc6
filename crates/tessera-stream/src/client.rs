//! The headless Rust client: connect, subscribe, keep N frame requests outstanding
//! (dissertation §6.3.3), decode frames. Used by the tests, the load test and
//! `tessera stream bench`.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use prost::Message as _;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::pb::{self, client_message, server_message::Kind, Encoding};
use crate::wire::{decode_server, payloads, Received, MAX_SERVER_MESSAGE_BYTES};
use crate::StreamError;

/// A connected client; `hello` is the server's first message.
pub struct Client {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    pub hello: pb::Hello,
}

/// A received frame: its header, the message bytes, and when and how fast it was decoded.
#[derive(Clone, Debug)]
pub struct FrameMsg {
    pub frame: pb::Frame,
    pub received: Received,
    /// Wall time of decoding the header and validating the payload (ms).
    pub decode_ms: f64,
    pub received_at: Instant,
}

impl FrameMsg {
    /// The grid part of the frame.
    pub fn grid(&self) -> Option<&pb::GridFrame> {
        match &self.frame.kind {
            Some(pb::frame::Kind::Grid(g)) => Some(g),
            _ => None,
        }
    }
    /// The 3D part of a rixel frame and the rixel frame's bytes (docs/rixel-frame.md).
    pub fn rixel(&self) -> Option<(&pb::RixelFrame, &[u8])> {
        match &self.frame.kind {
            Some(pb::frame::Kind::Rixel(r)) => {
                Some((r, crate::rixel::frame_bytes(&self.received.bytes, r)))
            }
            _ => None,
        }
    }
    /// The blocks of the frame's fields, in subscription order.
    pub fn blocks(&self) -> &[pb::FieldBlock] {
        self.grid().map_or(&[], |g| &g.fields)
    }
    /// The values of the `i`-th field (see [`Received::values`]).
    pub fn values(&self, i: usize) -> Cow<'_, [f32]> {
        self.received.values(payloads(&self.frame)[i])
    }
    /// The values of a field by name.
    pub fn field(&self, name: &str) -> Option<Cow<'_, [f32]>> {
        let i = self.blocks().iter().position(|b| b.name == name)?;
        Some(self.values(i))
    }
    /// Bytes of the whole message.
    pub fn len(&self) -> usize {
        self.received.bytes.len()
    }
    pub fn is_empty(&self) -> bool {
        self.received.bytes.is_empty()
    }
}

/// A message from the server after the hello.
#[derive(Clone, Debug)]
pub enum Event {
    Frame(Box<FrameMsg>),
    Subscribed(pb::Subscribed),
    QueryError(pb::QueryError),
    Error(pb::Error),
    Stats(pb::Stats),
}

impl Client {
    /// Connects to `url` (`ws://host:port/ws`, with `?token=T` if needed) and reads the hello.
    pub async fn connect(url: &str) -> Result<Client, StreamError> {
        let mut config = WebSocketConfig::default();
        config.max_message_size = Some(MAX_SERVER_MESSAGE_BYTES);
        config.max_frame_size = Some(MAX_SERVER_MESSAGE_BYTES);
        let (ws, _) = tokio_tungstenite::connect_async_with_config(url, Some(config), true)
            .await
            .map_err(|e| StreamError::WebSocket(format!("connecting to {url}: {e}")))?;
        let mut c = Client {
            ws,
            hello: pb::Hello::default(),
        };
        match c.next_raw().await? {
            Kind::Hello(h) => c.hello = h,
            other => {
                return Err(StreamError::Protocol(format!(
                    "expected hello first, got {other:?}"
                )))
            }
        }
        Ok(c)
    }

    /// Sends a subscription (see `Subscribe` in the .proto).
    pub async fn subscribe(
        &mut self,
        fields: &[&str],
        expression: &str,
        precision: Encoding,
        subscription: u32,
    ) -> Result<(), StreamError> {
        self.send(client_message::Kind::Subscribe(pb::Subscribe {
            fields: fields.iter().map(|s| s.to_string()).collect(),
            expression: expression.to_string(),
            precision: precision as i32,
            subscription,
            rixel: None,
        }))
        .await
    }

    /// Subscribes to the 3D view: rixel frames of the surface with the value of `expression`
    /// (or of the last of `fields`), rendered for the camera of the frame requests.
    pub async fn subscribe_rixel(
        &mut self,
        fields: &[&str],
        expression: &str,
        view: pb::RixelView,
        subscription: u32,
    ) -> Result<(), StreamError> {
        self.send(client_message::Kind::Subscribe(pb::Subscribe {
            fields: fields.iter().map(|s| s.to_string()).collect(),
            expression: expression.to_string(),
            precision: Encoding::F32 as i32,
            subscription,
            rixel: Some(view),
        }))
        .await
    }

    /// Asks for `count` more frames (0 allowed) rendered for `camera` (3D view).
    pub async fn request_camera(
        &mut self,
        count: u32,
        camera: pb::Camera,
    ) -> Result<(), StreamError> {
        self.send(client_message::Kind::Request(pb::FrameRequest {
            count,
            camera: Some(camera),
        }))
        .await
    }

    /// Asks for `count` more frames.
    pub async fn request(&mut self, count: u32) -> Result<(), StreamError> {
        self.send(client_message::Kind::Request(pb::FrameRequest {
            count,
            camera: None,
        }))
        .await
    }

    async fn send(&mut self, kind: client_message::Kind) -> Result<(), StreamError> {
        let m = pb::ClientMessage { kind: Some(kind) };
        self.send_raw(m.encode_to_vec()).await
    }

    /// Sends arbitrary bytes as a binary message (tests of malformed input use this).
    pub async fn send_raw(&mut self, bytes: Vec<u8>) -> Result<(), StreamError> {
        self.ws.send(Message::Binary(bytes.into())).await?;
        Ok(())
    }

    /// Sends a text message (not part of the protocol; for tests).
    pub async fn send_text(&mut self, text: &str) -> Result<(), StreamError> {
        self.ws.send(Message::Text(text.into())).await?;
        Ok(())
    }

    async fn next_received(&mut self) -> Result<(Received, f64, Instant), StreamError> {
        loop {
            let m = self
                .ws
                .next()
                .await
                .ok_or_else(|| StreamError::WebSocket("connection closed".into()))??;
            match m {
                Message::Binary(b) => {
                    let at = Instant::now();
                    let r = decode_server(b)?;
                    return Ok((r, at.elapsed().as_secs_f64() * 1e3, at));
                }
                Message::Close(f) => {
                    return Err(StreamError::WebSocket(format!(
                        "connection closed by the server{}",
                        f.map(|f| format!(": {}", f.reason)).unwrap_or_default()
                    )))
                }
                Message::Text(_) => {
                    return Err(StreamError::Protocol(
                        "the server sent a text message".into(),
                    ))
                }
                _ => continue,
            }
        }
    }

    async fn next_raw(&mut self) -> Result<Kind, StreamError> {
        let (r, _, _) = self.next_received().await?;
        r.header
            .kind
            .ok_or_else(|| StreamError::Protocol("empty server message".into()))
    }

    /// The next message from the server.
    pub async fn next_event(&mut self) -> Result<Event, StreamError> {
        let (r, decode_ms, at) = self.next_received().await?;
        Ok(match r.header.kind.clone() {
            Some(Kind::Frame(frame)) => Event::Frame(Box::new(FrameMsg {
                frame,
                received: r,
                decode_ms,
                received_at: at,
            })),
            Some(Kind::Subscribed(s)) => Event::Subscribed(s),
            Some(Kind::QueryError(q)) => Event::QueryError(q),
            Some(Kind::Error(e)) => Event::Error(e),
            Some(Kind::Stats(s)) => Event::Stats(s),
            Some(Kind::Hello(_)) => return Err(StreamError::Protocol("a second hello".into())),
            None => return Err(StreamError::Protocol("empty server message".into())),
        })
    }

    /// The next message, or `None` if none arrives within `d`.
    pub async fn next_event_within(&mut self, d: Duration) -> Result<Option<Event>, StreamError> {
        match tokio::time::timeout(d, self.next_event()).await {
            Ok(r) => r.map(Some),
            Err(_) => Ok(None),
        }
    }

    /// The next frame, skipping stats; errors and query errors become `Err`.
    pub async fn next_frame(&mut self, d: Duration) -> Result<Box<FrameMsg>, StreamError> {
        let deadline = Instant::now() + d;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next_event_within(left).await? {
                Some(Event::Frame(f)) => return Ok(f),
                Some(Event::Error(e)) => return Err(server_error(&e)),
                Some(Event::QueryError(q)) => return Err(query_error(&q)),
                Some(_) => continue,
                None => return Err(StreamError::Timeout(format!("no frame within {d:?}"))),
            }
        }
    }

    /// Waits for the acknowledgement of a subscription (skipping frames of an older one and
    /// stats); errors and query errors become `Err`.
    pub async fn subscribed(&mut self, d: Duration) -> Result<pb::Subscribed, StreamError> {
        let deadline = Instant::now() + d;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next_event_within(left).await? {
                Some(Event::Subscribed(s)) => return Ok(s),
                Some(Event::Error(e)) => return Err(server_error(&e)),
                Some(Event::QueryError(q)) => return Err(query_error(&q)),
                Some(_) => continue,
                None => {
                    return Err(StreamError::Timeout(format!(
                        "no subscription acknowledgement within {d:?}"
                    )))
                }
            }
        }
    }

    /// Closes the connection.
    pub async fn close(mut self) {
        let _ = self.ws.close(None).await;
    }
}

/// The error of a server `Error` message.
pub fn server_error(e: &pb::Error) -> StreamError {
    StreamError::Server {
        code: pb::error::Code::try_from(e.code)
            .map(|c| c.as_str_name().to_string())
            .unwrap_or_else(|_| e.code.to_string()),
        message: e.message.clone(),
    }
}

/// The error of a server `QueryError` message.
pub fn query_error(q: &pb::QueryError) -> StreamError {
    StreamError::Query {
        expression: q.expression.clone(),
        message: q.message.clone(),
        span: q.has_span.then_some((q.start, q.end)),
    }
}
