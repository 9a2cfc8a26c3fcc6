//! The state shared between the simulation thread and the connections, and the simulation
//! loop itself (dissertation §6.3.3).
//!
//! Flow control: each connection has `credits`, the frame requests it has outstanding. After
//! every step the simulation thread builds one frame per distinct subscription that some
//! connection with credits is waiting for, and publishes it as that subscription's `latest`
//! frame (replacing the older one: never a queue of stale frames). A connection's writer sends
//! `latest` when it has credits and `latest` is newer than its previous send, and spends one
//! credit. So a connection never has more frames in flight than requests, holds at most one
//! pending frame (the shared `latest`), and the simulation never waits for a client.
//!
//! A request that finds a connection without credits is answered with a frame of the step
//! current when it came, or a newer one: a frame the simulation built while the connection's
//! last credit was being spent (it may still be `latest` when the next request comes, any
//! time later) is not sent then.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tessera_flow::{FieldInfo, Grid, Simulation};
use tokio::sync::Notify;

use crate::frame::{FrameBuilder, SubKey, Subscription};

/// A frame built for one subscription at one step.
#[derive(Clone)]
pub struct Built {
    pub step: u64,
    pub bytes: Bytes,
}

/// What every connection needs to know about the simulation.
#[derive(Clone, Debug)]
pub struct SimInfo {
    pub name: String,
    pub grid: Grid,
    pub fields: Vec<FieldInfo>,
    pub gpu: bool,
    /// The 3D view, if the simulation has one.
    pub scene3d: Option<crate::rixel::Scene3DInfo>,
}

struct ConnEntry {
    sub: Option<Arc<Subscription>>,
    credits: u32,
    last_sent: Option<u64>,
    /// The oldest step a frame sent for the outstanding requests may be of: the simulation's
    /// step when a request came to a connection without credits.
    fresh_from: u64,
    /// The 3D view's camera changed since the last send: a frame of the same step as the
    /// last one may be sent (rendered for the new camera).
    view_changed: bool,
    notify: Arc<Notify>,
}

/// A published frame of a subscription, or the error building it failed with.
enum Latest {
    Frame(Built),
    Failed { step: u64, message: String },
}

#[derive(Default)]
struct State {
    conns: HashMap<u64, ConnEntry>,
    latest: HashMap<SubKey, Latest>,
    next_id: u64,
    /// The simulation stopped with this error.
    failed: Option<String>,
}

/// Simulation counters shown in `Stats`, written by the simulation thread.
#[derive(Default)]
pub struct SimCounters {
    steps: AtomicU64,
    steps_per_second: AtomicU64,
    step_ms: AtomicU64,
    build_ms: AtomicU64,
}

impl SimCounters {
    fn set(a: &AtomicU64, v: f64) {
        a.store(v.to_bits(), Ordering::Relaxed)
    }
    fn get(a: &AtomicU64) -> f64 {
        f64::from_bits(a.load(Ordering::Relaxed))
    }
    pub fn steps(&self) -> u64 {
        self.steps.load(Ordering::Relaxed)
    }
    pub fn steps_per_second(&self) -> f64 {
        Self::get(&self.steps_per_second)
    }
    pub fn step_ms(&self) -> f64 {
        Self::get(&self.step_ms)
    }
    pub fn build_ms(&self) -> f64 {
        Self::get(&self.build_ms)
    }
}

/// What a connection's writer should do next.
pub enum Next {
    /// Send this frame (one credit was spent).
    Send(Built),
    /// Building the frame failed; tell the client.
    Failed(String),
    /// Nothing to send now.
    Wait,
}

/// The shared state (see the module docs).
pub struct Hub {
    state: Mutex<State>,
    wake: Condvar,
    shutdown: AtomicBool,
    pub info: SimInfo,
    pub counters: SimCounters,
}

impl Hub {
    pub fn new(info: SimInfo) -> Self {
        Hub {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            shutdown: AtomicBool::new(false),
            info,
            counters: SimCounters::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a connection unless `max` are connected; returns its id and wake-up handle.
    pub fn register(&self, max: usize) -> Option<(u64, Arc<Notify>)> {
        let mut s = self.lock();
        if s.conns.len() >= max {
            return None;
        }
        s.next_id += 1;
        let id = s.next_id;
        let notify = Arc::new(Notify::new());
        s.conns.insert(
            id,
            ConnEntry {
                sub: None,
                credits: 0,
                last_sent: None,
                fresh_from: 0,
                view_changed: false,
                notify: notify.clone(),
            },
        );
        drop(s);
        self.wake.notify_all();
        Some((id, notify))
    }

    pub fn unregister(&self, id: u64) {
        let mut s = self.lock();
        s.conns.remove(&id);
        Self::drop_unused(&mut s);
    }

    fn drop_unused(s: &mut State) {
        let State { conns, latest, .. } = s;
        latest.retain(|k, _| {
            conns
                .values()
                .any(|c| c.sub.as_ref().is_some_and(|x| &x.key == k))
        });
    }

    pub fn clients(&self) -> usize {
        self.lock().conns.len()
    }

    /// Replaces the connection's subscription.
    pub fn subscribe(&self, id: u64, sub: Arc<Subscription>) {
        let mut s = self.lock();
        if let Some(c) = s.conns.get_mut(&id) {
            c.sub = Some(sub);
            c.notify.notify_one();
        }
        Self::drop_unused(&mut s);
    }

    /// The connection's subscription.
    pub fn subscription(&self, id: u64) -> Option<Arc<Subscription>> {
        self.lock().conns.get(&id).and_then(|c| c.sub.clone())
    }

    /// Replaces the connection's subscription by the same one for a new 3D camera: the next
    /// frame is rendered for it, even at the step of the previous frame.
    pub fn set_view(&self, id: u64, sub: Arc<Subscription>) {
        let mut s = self.lock();
        if let Some(c) = s.conns.get_mut(&id) {
            c.sub = Some(sub);
            c.view_changed = true;
            c.notify.notify_one();
        }
        Self::drop_unused(&mut s);
    }

    /// Adds `n` frame requests, up to `max` outstanding; returns the outstanding count and
    /// whether requests were refused.
    pub fn request(&self, id: u64, n: u32, max: u32) -> (u32, bool) {
        let mut s = self.lock();
        let Some(c) = s.conns.get_mut(&id) else {
            return (0, false);
        };
        if c.credits == 0 && n > 0 {
            c.fresh_from = self.counters.steps();
        }
        let want = c.credits.saturating_add(n);
        c.credits = want.min(max);
        c.notify.notify_one();
        (c.credits, want > max)
    }

    pub fn outstanding(&self, id: u64) -> u32 {
        self.lock().conns.get(&id).map_or(0, |c| c.credits)
    }

    /// The writer of connection `id` asks what to send.
    pub fn next(&self, id: u64) -> Next {
        let mut s = self.lock();
        let State { conns, latest, .. } = &mut *s;
        let Some(c) = conns.get_mut(&id) else {
            return Next::Wait;
        };
        if c.credits == 0 {
            return Next::Wait;
        }
        let Some(sub) = &c.sub else {
            return Next::Wait;
        };
        match latest.get(&sub.key) {
            Some(Latest::Frame(b))
                if b.step >= c.fresh_from
                    && c.last_sent
                        .is_none_or(|l| b.step > l || (c.view_changed && b.step == l)) =>
            {
                c.credits -= 1;
                c.last_sent = Some(b.step);
                c.view_changed = false;
                Next::Send(b.clone())
            }
            Some(Latest::Failed { step, message }) if c.last_sent.is_none_or(|l| *step > l) => {
                c.last_sent = Some(*step);
                Next::Failed(message.clone())
            }
            _ => Next::Wait,
        }
    }

    /// The simulation's error, if it stopped.
    pub fn failed(&self) -> Option<String> {
        self.lock().failed.clone()
    }

    pub fn shut_down(&self) {
        self.shutdown.store(true, Ordering::SeqCst);
        self.wake.notify_all();
    }

    fn is_shut_down(&self) -> bool {
        self.shutdown.load(Ordering::SeqCst)
    }

    /// Subscriptions some connection with credits is waiting for at `step` (their latest
    /// frame is older).
    fn wanted(&self, step: u64) -> Vec<Arc<Subscription>> {
        let s = self.lock();
        let mut out: Vec<Arc<Subscription>> = Vec::new();
        for c in s.conns.values() {
            let Some(sub) = &c.sub else { continue };
            if c.credits == 0 || out.iter().any(|o| o.key == sub.key) {
                continue;
            }
            let fresh = match s.latest.get(&sub.key) {
                Some(Latest::Frame(b)) => b.step >= step,
                Some(Latest::Failed { step: f, .. }) => *f >= step,
                None => false,
            };
            if !fresh {
                out.push(sub.clone());
            }
        }
        out
    }

    fn publish(&self, key: &SubKey, latest: Latest) {
        let mut s = self.lock();
        let State {
            conns, latest: l, ..
        } = &mut *s;
        let subscribed: Vec<&ConnEntry> = conns
            .values()
            .filter(|c| c.sub.as_ref().is_some_and(|x| &x.key == key))
            .collect();
        if subscribed.is_empty() {
            return; // everyone left or resubscribed meanwhile
        }
        for c in subscribed {
            if c.credits > 0 {
                c.notify.notify_one();
            }
        }
        l.insert(key.clone(), latest);
    }

    fn fail(&self, message: String) {
        let mut s = self.lock();
        s.failed = Some(message);
        for c in s.conns.values() {
            c.notify.notify_one();
        }
    }

    /// Waits until a client is connected (or shutdown); returns false on shutdown.
    fn wait_for_clients(&self) -> bool {
        let mut s = self.lock();
        while s.conns.is_empty() && !self.is_shut_down() {
            s = self
                .wake
                .wait_timeout(s, Duration::from_millis(200))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        !self.is_shut_down()
    }
}

/// The simulation loop, run on its own thread until [`Hub::shut_down`]: step (while any client
/// is connected, at most `rate_hz` steps per second if given), then build and publish the
/// frames that connections are waiting for.
pub fn run_simulation(hub: Arc<Hub>, mut sim: Box<dyn Simulation>, rate_hz: Option<f64>) {
    let mut builder = FrameBuilder::default();
    builder.scene3d = hub.info.scene3d.as_ref().map(|s| s.scene.clone());
    let period = rate_hz
        .filter(|r| r.is_finite() && *r > 0.0)
        .map(|r| Duration::from_secs_f64(1.0 / r));
    let mut window = Instant::now();
    let (mut steps_in_window, mut step_ms_sum, mut build_ms_sum, mut builds) =
        (0u64, 0.0, 0.0, 0u64);
    let mut next_tick = Instant::now();
    // Frames of the initial state (step 0) can be sent before the first step.
    let mut first = true;
    while hub.wait_for_clients() {
        if let Some(p) = period {
            let now = Instant::now();
            if next_tick > now {
                std::thread::sleep(next_tick - now);
            }
            next_tick = next_tick.max(now) + p;
        }
        if !first {
            let t0 = Instant::now();
            if let Err(e) = sim.step() {
                hub.fail(format!("simulation step failed: {e}"));
                break;
            }
            step_ms_sum += t0.elapsed().as_secs_f64() * 1e3;
            steps_in_window += 1;
        }
        first = false;
        let step = sim.steps();
        hub.counters.steps.store(step, Ordering::Relaxed);
        for sub in hub.wanted(step) {
            let t0 = Instant::now();
            let latest = match builder.build(sim.as_ref(), &sub) {
                Ok(bytes) => Latest::Frame(Built { step, bytes }),
                Err(e) => Latest::Failed {
                    step,
                    message: e.to_string(),
                },
            };
            build_ms_sum += t0.elapsed().as_secs_f64() * 1e3;
            builds += 1;
            hub.publish(&sub.key, latest);
        }
        let dt = window.elapsed().as_secs_f64();
        if dt >= 1.0 {
            SimCounters::set(&hub.counters.steps_per_second, steps_in_window as f64 / dt);
            if steps_in_window > 0 {
                SimCounters::set(&hub.counters.step_ms, step_ms_sum / steps_in_window as f64);
            }
            if builds > 0 {
                SimCounters::set(&hub.counters.build_ms, build_ms_sum / builds as f64);
            }
            (steps_in_window, step_ms_sum, build_ms_sum, builds) = (0, 0.0, 0.0, 0);
            window = Instant::now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb::Encoding;

    fn hub_with_one_subscriber() -> (Hub, u64, SubKey) {
        let hub = Hub::new(SimInfo {
            name: "test".into(),
            grid: tessera_flow::Grid::new_2d(4, 4, 1.0),
            fields: Vec::new(),
            gpu: false,
            scene3d: None,
        });
        let (id, _) = hub.register(4).unwrap();
        let key = SubKey {
            fields: vec!["Pressure".into()],
            expression: String::new(),
            precision: Encoding::F32,
            subscription: 1,
            rixel: None,
        };
        hub.subscribe(
            id,
            Arc::new(Subscription {
                key: key.clone(),
                query: None,
            }),
        );
        (hub, id, key)
    }

    fn frame(step: u64) -> Latest {
        Latest::Frame(Built {
            step,
            bytes: Bytes::new(),
        })
    }

    fn sent_step(hub: &Hub, id: u64) -> Option<u64> {
        match hub.next(id) {
            Next::Send(b) => Some(b.step),
            _ => None,
        }
    }

    #[test]
    fn a_frame_built_while_the_last_credit_was_spent_is_not_sent_later() {
        let (hub, id, key) = hub_with_one_subscriber();
        hub.counters.steps.store(5, Ordering::Relaxed);
        hub.request(id, 1, 8);
        assert_eq!(sent_step(&hub, id), None, "nothing published yet");
        hub.publish(&key, frame(5));
        assert_eq!(sent_step(&hub, id), Some(5));
        assert_eq!(hub.outstanding(id), 0);
        // the simulation saw the credit before it was spent and built step 6 anyway
        hub.counters.steps.store(6, Ordering::Relaxed);
        hub.publish(&key, frame(6));
        assert_eq!(sent_step(&hub, id), None, "no frame without a request");
        // much later the next request comes: step 6 is stale, the frame waits for step 400
        hub.counters.steps.store(400, Ordering::Relaxed);
        hub.request(id, 1, 8);
        assert_eq!(sent_step(&hub, id), None, "the stale frame is not sent");
        assert_eq!(hub.wanted(400).len(), 1, "the simulation builds a new one");
        hub.publish(&key, frame(400));
        assert_eq!(sent_step(&hub, id), Some(400));
    }

    #[test]
    fn outstanding_requests_take_every_newer_frame() {
        let (hub, id, key) = hub_with_one_subscriber();
        hub.request(id, 3, 8);
        for step in [1u64, 2, 3] {
            // requests added while some are outstanding do not move the freshness bound
            hub.counters.steps.store(step, Ordering::Relaxed);
            if step == 2 {
                hub.request(id, 1, 8);
            }
            hub.publish(&key, frame(step));
            assert_eq!(sent_step(&hub, id), Some(step));
        }
        assert_eq!(hub.outstanding(id), 1);
        // the simulation does not step (a finished playback): its step's frame, sent already,
        // is not sent again
        hub.request(id, 1, 8);
        assert_eq!(hub.outstanding(id), 2);
        hub.publish(&key, frame(3));
        assert_eq!(sent_step(&hub, id), None, "step 3 was sent already");
    }
}
