//! A bandwidth-limited TCP relay on loopback for the network benchmark of dissertation
//! §6.4.1 (Figs. 6.8/6.9), which limited the server's outgoing bandwidth with Linux `tc`.
//!
//! This is an application-level token bucket, not `tc`: the client connects to the relay, the
//! relay forwards client -> server bytes unchanged and server -> client bytes at `mbit`
//! Mbit/s. It reads the next chunk from the server only when the previous one has "left the
//! link" (a virtual clock advanced by `bytes / rate`), so the server sees a slow link as a
//! full TCP send buffer, as behind a `tc` qdisc. The measured bandwidth includes WebSocket
//! and protobuf overheads, as the dissertation's limit applied at the TCP level.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

use crate::StreamError;

/// Most bytes forwarded per step of the token bucket.
const CHUNK: usize = 64 * 1024;

/// A running relay; dropping it stops accepting (open relays end with their connections).
pub struct Throttle {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Throttle {
    /// Starts a relay on 127.0.0.1 to `upstream` limited to `mbit` Mbit/s (10^6 bit/s)
    /// downstream.
    pub async fn start(upstream: SocketAddr, mbit: f64) -> Result<Throttle, StreamError> {
        if !(mbit.is_finite() && mbit > 0.0) {
            return Err(StreamError::Invalid(format!(
                "bandwidth limit {mbit} Mbit/s: must be positive"
            )));
        }
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| StreamError::io("binding the relay", e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| StreamError::io("relay address", e))?;
        let rate = mbit * 1e6 / 8.0; // bytes per second
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(upstream).await {
                        relay(client, server, rate).await;
                    }
                });
            }
        });
        Ok(Throttle { addr, task })
    }

    /// The address clients connect to instead of the server's.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Throttle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn relay(client: TcpStream, server: TcpStream, rate: f64) {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    let up = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut cr, &mut sw).await;
        let _ = sw.shutdown().await;
    });
    let mut buf = vec![0u8; CHUNK];
    // When the link becomes free: the virtual clock of the token bucket.
    let mut clock = Instant::now();
    loop {
        let n = match sr.try_read(&mut buf) {
            Ok(0) => break,
            // Data was already waiting: the link never idled, so the clock keeps its lag when
            // a timer woke late (resetting it to now there lost up to a timer tick per chunk,
            // which capped the relay near 16 MB/s whatever the limit).
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                // The server has nothing to send: the link idles until it does, and idle time
                // earns no credit.
                let n = match sr.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                let now = Instant::now();
                if clock < now {
                    clock = now;
                }
                n
            }
            Err(_) => break,
        };
        // the chunk leaves the link n / rate seconds after the link became free
        clock += Duration::from_secs_f64(n as f64 / rate);
        if clock > Instant::now() {
            tokio::time::sleep_until(clock).await;
        }
        if cw.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = cw.shutdown().await;
    up.abort();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The relay neither exceeds its limit nor loses most of it to late timers: 6 MB through
    /// 400 Mbit/s (50 MB/s, 120 ms at the limit). The old clock reset reached about 16 MB/s.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn relay_forwards_at_its_limit() {
        const BYTES: usize = 6_000_000;
        let server = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let up = server.local_addr().unwrap();
        let sender = tokio::spawn(async move {
            let (mut s, _) = server.accept().await.unwrap();
            s.write_all(&vec![7u8; BYTES]).await.unwrap();
            s.shutdown().await.unwrap();
        });
        let relay = Throttle::start(up, 400.0).await.unwrap();
        let mut c = TcpStream::connect(relay.local_addr()).await.unwrap();
        let mut first = [0u8; 1];
        c.read_exact(&mut first).await.unwrap();
        let t0 = Instant::now();
        let mut rest = Vec::new();
        c.read_to_end(&mut rest).await.unwrap();
        let secs = t0.elapsed().as_secs_f64();
        sender.await.unwrap();
        assert_eq!(rest.len() + 1, BYTES);
        assert!(rest.iter().all(|&b| b == 7));
        let rate = rest.len() as f64 / secs / 1e6;
        // upper bound: the limit plus one chunk of credit; lower bound loose for busy machines
        assert!(
            rate <= 50.0 * 1.05 + CHUNK as f64 / 1e6 / secs,
            "{rate:.1} MB/s over the 50 MB/s limit"
        );
        assert!(
            rate >= 25.0,
            "{rate:.1} MB/s: the relay loses most of its 50 MB/s limit"
        );
        assert!(Throttle::start(up, 0.0).await.is_err());
    }
}
