//! A real HTTP receiver that records the deliveries it gets and answers as scripted.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{any, post};
use tokio::sync::Notify;

use super::app::{TestApp, http_route_toml, worker_toml};

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Received {
    pub idempotency_key: String,
    pub event_id: String,
    pub body: Vec<u8>,
    /// Every header as received (signed deliveries are verified from these).
    pub headers: HeaderMap,
}

/// How the receiver answers: a scripted prefix of answers (status, delay), then `then`.
#[derive(Clone)]
pub struct Behaviour {
    pub script: VecDeque<(u16, Duration)>,
    pub then: (u16, Duration),
}

impl Behaviour {
    pub fn ok() -> Self {
        Self {
            script: VecDeque::new(),
            then: (200, Duration::ZERO),
        }
    }

    /// 500 to the first request, then 200.
    pub fn fails_once() -> Self {
        Self {
            script: [(500, Duration::ZERO)].into(),
            ..Self::ok()
        }
    }
}

#[derive(Clone)]
struct ReceiverState {
    received: Arc<Mutex<Vec<Received>>>,
    behaviour: Arc<Mutex<Behaviour>>,
    /// Requests to `/events` that arrived, answered or not.
    arrived: Arc<AtomicUsize>,
    /// Requests (by arrival number, from 0) that wait for their `Notify` before answering.
    holds: Arc<Mutex<HashMap<usize, Arc<Notify>>>>,
    /// Requests to `/landing`, where every 3xx answer of `/events` points.
    landed: Arc<AtomicUsize>,
}

/// Serves `app` on 127.0.0.1, port 0, on a task of its own: (address, task).
pub async fn serve_on_port_0(app: axum::Router) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (addr, task)
}

/// An HTTP server on port 0 that records every delivery. A 3xx answer redirects to
/// `/landing`, which answers 200 to any method and counts what reaches it.
pub struct Receiver {
    pub url: String,
    state: ReceiverState,
    task: tokio::task::JoinHandle<()>,
}

impl Receiver {
    pub async fn start(behaviour: Behaviour) -> Self {
        let state = ReceiverState {
            received: Arc::default(),
            behaviour: Arc::new(Mutex::new(behaviour)),
            arrived: Arc::default(),
            holds: Arc::default(),
            landed: Arc::default(),
        };
        let app = axum::Router::new()
            .route("/events", post(receive))
            .route("/landing", any(land))
            .with_state(state.clone());
        let (addr, task) = serve_on_port_0(app).await;
        Self {
            url: format!("http://{addr}/events"),
            state,
            task,
        }
    }

    pub fn received(&self) -> Vec<Received> {
        self.state.received.lock().unwrap().clone()
    }

    /// Requests to `/events` so far, including ones not answered yet.
    pub fn arrived(&self) -> usize {
        self.state.arrived.load(Ordering::SeqCst)
    }

    /// Requests that reached the redirect target `/landing`.
    pub fn landed(&self) -> usize {
        self.state.landed.load(Ordering::SeqCst)
    }

    /// Request number `n` (counting from 0) waits, after arriving, until the returned
    /// `Notify` is notified; then it answers as the behaviour says.
    pub fn hold(&self, n: usize) -> Arc<Notify> {
        let gate = Arc::new(Notify::new());
        self.state
            .holds
            .lock()
            .unwrap()
            .insert(n, Arc::clone(&gate));
        gate
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn receive(
    State(state): State<ReceiverState>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> axum::response::Response {
    let n = state.arrived.fetch_add(1, Ordering::SeqCst);
    let gate = state.holds.lock().unwrap().get(&n).cloned();
    if let Some(gate) = gate {
        gate.notified().await;
    }
    let (status, delay) = {
        let mut b = state.behaviour.lock().unwrap();
        let then = b.then;
        b.script.pop_front().unwrap_or(then)
    };
    tokio::time::sleep(delay).await;
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    // Recorded only if the answer is about to go out (a sleeping request may be abandoned).
    state.received.lock().unwrap().push(Received {
        idempotency_key: header("idempotency-key"),
        event_id: header("wharf-event-id"),
        body: body.to_vec(),
        headers: headers.clone(),
    });
    let status = StatusCode::from_u16(status).unwrap();
    if status.is_redirection() {
        (status, [(header::LOCATION, "/landing")]).into_response()
    } else {
        status.into_response()
    }
}

async fn land(State(state): State<ReceiverState>) -> StatusCode {
    state.landed.fetch_add(1, Ordering::SeqCst);
    StatusCode::OK
}

/// Answers `status` after `delay`, every time.
pub fn always(status: u16, delay: Duration) -> Behaviour {
    Behaviour {
        script: VecDeque::new(),
        then: (status, delay),
    }
}

/// A receiver behaving as told, and a server with two workers whose stripe endpoint routes
/// every event to it (`route_extra`: more keys for the route, such as `timeout_ms`).
pub async fn start_app_delivering_to(
    behaviour: Behaviour,
    route_extra: &str,
) -> (Receiver, TestApp) {
    let receiver = Receiver::start(behaviour).await;
    let app = TestApp::builder()
        .append_toml(&worker_toml(2))
        .append_toml(&http_route_toml(&receiver.url, route_extra))
        .start()
        .await;
    (receiver, app)
}
