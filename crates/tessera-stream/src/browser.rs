//! A small Chrome DevTools Protocol client that drives the system Chromium headless, for the
//! browser tests and the browser columns of the benchmarks (page loads, `Runtime.evaluate`,
//! mouse input, WebSocket frame events, screenshots). WebGL2 runs on SwiftShader (no GPU).

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::StreamError;

/// The Chromium binary: `$TESSERA_CHROMIUM`, else the first of `chromium`,
/// `chromium-browser`, `google-chrome` on `PATH`.
pub fn find_chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("TESSERA_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser", "google-chrome"] {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// A headless Chromium with one page attached.
pub struct Browser {
    child: Child,
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    session: String,
    next_id: u64,
    events: VecDeque<Value>,
    _profile: tempfile::TempDir,
}

fn berr(m: impl Into<String>) -> StreamError {
    StreamError::Browser(m.into())
}

impl Browser {
    /// Starts Chromium headless with a `width x height` window and attaches to a blank page.
    pub async fn launch(width: u32, height: u32) -> Result<Browser, StreamError> {
        let exe = find_chromium().ok_or_else(|| {
            berr("chromium not found (install Debian's `chromium` or set TESSERA_CHROMIUM)")
        })?;
        let profile = tempfile::tempdir().map_err(|e| StreamError::io("browser profile", e))?;
        let mut child = Command::new(&exe)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--use-angle=swiftshader",
                "--enable-unsafe-swiftshader",
                "--remote-debugging-port=0",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--disable-quic",
                "--disable-extensions",
                "--disable-default-apps",
                "--mute-audio",
                "--hide-scrollbars",
                "--disable-background-timer-throttling",
                "--disable-renderer-backgrounding",
                "--disable-backgrounding-occluded-windows",
                &format!("--window-size={width},{height}"),
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| berr(format!("starting {}: {e}", exe.display())))?;
        // The DevTools URL is printed on stderr.
        let stderr = child.stderr.take().expect("piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if !sent {
                    if let Some(u) = line.split("DevTools listening on ").nth(1) {
                        let _ = tx.send(u.trim().to_string());
                        sent = true;
                    }
                }
            }
        });
        let url = tokio::task::spawn_blocking(move || rx.recv_timeout(Duration::from_secs(30)))
            .await
            .map_err(|e| berr(e.to_string()))?
            .map_err(|_| {
                let _ = child.kill();
                berr("chromium printed no DevTools URL within 30 s")
            });
        let url = match url {
            Ok(u) => u,
            Err(e) => return Err(e),
        };
        let (ws, _) = tokio_tungstenite::connect_async(url.as_str())
            .await
            .map_err(|e| berr(format!("DevTools connection: {e}")))?;
        let mut b = Browser {
            child,
            ws,
            session: String::new(),
            next_id: 0,
            events: VecDeque::new(),
            _profile: profile,
        };
        let t = b
            .call_browser("Target.createTarget", json!({"url": "about:blank"}))
            .await?;
        let target = t["targetId"]
            .as_str()
            .ok_or_else(|| berr("no targetId"))?
            .to_string();
        let s = b
            .call_browser(
                "Target.attachToTarget",
                json!({"targetId": target, "flatten": true}),
            )
            .await?;
        b.session = s["sessionId"]
            .as_str()
            .ok_or_else(|| berr("no sessionId"))?
            .to_string();
        b.call("Page.enable", json!({})).await?;
        b.call("Runtime.enable", json!({})).await?;
        b.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}),
        )
        .await?;
        Ok(b)
    }

    async fn send(
        &mut self,
        method: &str,
        params: Value,
        session: bool,
    ) -> Result<Value, StreamError> {
        self.next_id += 1;
        let id = self.next_id;
        let mut m = json!({"id": id, "method": method, "params": params});
        if session {
            m["sessionId"] = json!(self.session);
        }
        self.ws
            .send(Message::Text(m.to_string().into()))
            .await
            .map_err(|e| berr(format!("{method}: {e}")))?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let msg = tokio::time::timeout(left, self.ws.next())
                .await
                .map_err(|_| berr(format!("{method}: no answer within 60 s")))?
                .ok_or_else(|| berr("DevTools connection closed"))?
                .map_err(|e| berr(e.to_string()))?;
            let Message::Text(t) = msg else { continue };
            let v: Value = serde_json::from_str(&t).map_err(|e| berr(e.to_string()))?;
            if v["id"].as_u64() == Some(id) {
                if let Some(e) = v.get("error") {
                    return Err(berr(format!("{method}: {e}")));
                }
                return Ok(v["result"].clone());
            }
            if v.get("method").is_some() {
                if self.events.len() >= 10_000 {
                    self.events.pop_front();
                }
                self.events.push_back(v);
            }
        }
    }

    async fn call_browser(&mut self, method: &str, params: Value) -> Result<Value, StreamError> {
        self.send(method, params, false).await
    }

    /// A DevTools command on the page.
    pub async fn call(&mut self, method: &str, params: Value) -> Result<Value, StreamError> {
        self.send(method, params, true).await
    }

    /// Evaluates a JavaScript expression in the page (awaiting promises) and returns its
    /// value; a thrown exception is an error.
    pub async fn eval(&mut self, expr: &str) -> Result<Value, StreamError> {
        let r = self
            .call(
                "Runtime.evaluate",
                json!({"expression": expr, "returnByValue": true, "awaitPromise": true}),
            )
            .await?;
        if let Some(ex) = r.get("exceptionDetails") {
            return Err(berr(format!(
                "`{expr}` threw: {}",
                ex["exception"]["description"]
                    .as_str()
                    .unwrap_or(&ex.to_string())
            )));
        }
        Ok(r["result"]["value"].clone())
    }

    /// Polls `expr` until it is truthy (or `timeout`); returns its value.
    pub async fn wait_for(&mut self, expr: &str, timeout: Duration) -> Result<Value, StreamError> {
        let deadline = Instant::now() + timeout;
        loop {
            let v = self.eval(expr).await?;
            let truthy = !(v.is_null() || v == json!(false) || v == json!(0) || v == json!(""));
            if truthy {
                return Ok(v);
            }
            if Instant::now() > deadline {
                return Err(berr(format!("`{expr}` not true within {timeout:?}")));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Loads `url` and waits for the load event.
    pub async fn navigate(&mut self, url: &str) -> Result<(), StreamError> {
        self.events.clear();
        let r = self.call("Page.navigate", json!({"url": url})).await?;
        if let Some(e) = r.get("errorText") {
            return Err(berr(format!("loading {url}: {e}")));
        }
        self.wait_for(
            "document.readyState === 'complete'",
            Duration::from_secs(30),
        )
        .await?;
        Ok(())
    }

    /// A mouse event at page coordinates (CSS pixels): `mouseMoved`, `mousePressed`,
    /// `mouseReleased`.
    pub async fn mouse(
        &mut self,
        kind: &str,
        x: f64,
        y: f64,
        pressed: bool,
    ) -> Result<(), StreamError> {
        self.call(
            "Input.dispatchMouseEvent",
            json!({"type": kind, "x": x, "y": y, "button": if pressed || kind != "mouseMoved" { "left" } else { "none" },
                   "buttons": if pressed { 1 } else { 0 }, "clickCount": 1}),
        )
        .await?;
        Ok(())
    }

    /// A PNG screenshot of the page.
    pub async fn screenshot(&mut self) -> Result<Vec<u8>, StreamError> {
        let r = self
            .call("Page.captureScreenshot", json!({"format": "png"}))
            .await?;
        let b64 = r["data"]
            .as_str()
            .ok_or_else(|| berr("no screenshot data"))?;
        decode_base64(b64).ok_or_else(|| berr("bad base64 in the screenshot"))
    }

    /// Takes the buffered DevTools events named `method` (others stay buffered).
    pub fn take_events(&mut self, method: &str) -> Vec<Value> {
        let (hit, rest): (Vec<Value>, Vec<Value>) =
            self.events.drain(..).partition(|e| e["method"] == method);
        self.events = rest.into();
        hit
    }

    /// Reads events for `d` (commands answer in between), buffering them.
    pub async fn pump(&mut self, d: Duration) -> Result<(), StreamError> {
        let deadline = Instant::now() + d;
        while Instant::now() < deadline {
            // a cheap round trip; events that arrive meanwhile are buffered by `send`
            self.eval("0").await?;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn decode_base64(s: &str) -> Option<Vec<u8>> {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => (c - b'A') as u32,
            b'a'..=b'z' => (c - b'a') as u32 + 26,
            b'0'..=b'9' => (c - b'0') as u32 + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        })
    };
    let bytes: Vec<u8> = s.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    for chunk in bytes.chunks(4) {
        let pad = chunk.iter().filter(|&&c| c == b'=').count();
        let mut n = 0u32;
        for (k, &c) in chunk.iter().enumerate() {
            n |= if c == b'=' { 0 } else { val(c)? } << (18 - 6 * k);
        }
        let b = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&b[..3 - pad.min(2)]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_decodes() {
        assert_eq!(super::decode_base64("aGVsbG8=").unwrap(), b"hello");
        assert_eq!(super::decode_base64("aGk=").unwrap(), b"hi");
        assert_eq!(super::decode_base64("YWJj").unwrap(), b"abc");
        assert!(super::decode_base64("a$==").is_none());
    }
}
