//! A real HTTP receiver for deliveries, NATS helpers, signed Stripe events for one object,
//! and waiting for convergence.

#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{any, post};
use sqlx::PgPool;
use tokio::sync::Notify;

use crate::common::{STRIPE_SECRET, now, stripe_header};

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Received {
    pub idempotency_key: String,
    pub event_id: String,
    pub body: Vec<u8>,
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
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr: SocketAddr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self {
            url: format!("http://{addr}/events"),
            state,
            task,
        }
    }

    pub fn received(&self) -> Vec<Received> {
        self.state.received.lock().unwrap().clone()
    }

    pub fn set(&self, behaviour: Behaviour) {
        *self.state.behaviour.lock().unwrap() = behaviour;
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

/// A Stripe event about one object, created at `created` (the version Stripe's adapter
/// reports): (headers, body).
pub fn stripe_object_event(
    event_id: &str,
    object_id: &str,
    created: i64,
) -> (Vec<(String, String)>, String) {
    let body = format!(
        r#"{{"id":"{event_id}","object":"event","type":"customer.updated","created":{created},"data":{{"object":{{"id":"{object_id}","object":"customer","version_note":"{created}"}}}}}}"#
    );
    let header = stripe_header(STRIPE_SECRET, now(), body.as_bytes());
    (
        vec![
            ("stripe-signature".into(), header),
            ("content-type".into(), "application/json".into()),
        ],
        body,
    )
}

/// Polls `check` until it holds (30 s at most): convergence, not timing, is under test.
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while tokio::time::Instant::now() < deadline {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("not converged within 30 s: {what}");
}

pub async fn scalar_i64(db: &PgPool, sql: &str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(db).await.unwrap()
}

/// Waits until the count `sql` selects is `n`.
pub async fn count_becomes(db: &PgPool, sql: &str, n: i64) {
    eventually(&format!("{sql} = {n}"), || async {
        scalar_i64(db, sql).await == n
    })
    .await;
}

/// Waits until every inbox row is processed and every delivery sent.
pub async fn converged(db: &PgPool) {
    count_becomes(
        db,
        "SELECT (SELECT count(*) FROM webhook_inbox WHERE status <> 'PROCESSED')
                  + (SELECT count(*) FROM deliveries WHERE status <> 'SENT')",
        0,
    )
    .await;
}

/// Fast retries for tests; processing settings otherwise default.
pub fn worker_toml(count: usize) -> String {
    format!(
        "[worker]\ncount = {count}\nlease_secs = 3\nbackoff_base_ms = 20\nbackoff_max_ms = 200\nidle_poll_ms = 100\nreconcile_interval_secs = 3600\n"
    )
}

pub fn http_route(url: &str, extra: &str) -> String {
    format!(
        "[[route]]\nendpoint = \"stripe\"\nevents = [\"*\"]\nsink = \"http\"\nurl = \"{url}\"\n{extra}\n"
    )
}

/// A receiver behaving as told, and a server with two workers whose stripe endpoint routes
/// every event to it (`route_extra`: more keys for the route, such as `timeout_ms`).
pub async fn app_delivering_to(
    behaviour: Behaviour,
    route_extra: &str,
) -> (Receiver, crate::common::TestApp) {
    let receiver = Receiver::start(behaviour).await;
    let app = crate::common::app()
        .toml(&worker_toml(2))
        .toml(&http_route(&receiver.url, route_extra))
        .spawn()
        .await;
    (receiver, app)
}

/// Answers `status` after `delay`, every time.
pub fn always(status: u16, delay: Duration) -> Behaviour {
    Behaviour {
        script: VecDeque::new(),
        then: (status, delay),
    }
}

/// A NATS config private to one test: its own accepted-events stream and subject prefix.
pub struct NatsScope {
    pub prefix: String,
    pub stream: String,
}

impl NatsScope {
    pub fn new() -> Self {
        let id = uuid::Uuid::now_v7().simple().to_string();
        Self {
            prefix: format!("wharf_test_{id}.accepted"),
            stream: format!("WHARF_TEST_{id}"),
        }
    }

    pub fn toml(&self) -> String {
        format!(
            "[nats]\nurl = \"nats://127.0.0.1:4222\"\naccepted_stream = \"{}\"\naccepted_prefix = \"{}\"\n",
            self.stream, self.prefix
        )
    }

    pub async fn jetstream() -> async_nats::jetstream::Context {
        let client = async_nats::connect("127.0.0.1:4222")
            .await
            .expect("NATS on 127.0.0.1:4222: see README (cargo xtask test starts it)");
        async_nats::jetstream::new(client)
    }

    /// Messages the accepted-events stream holds.
    pub async fn accepted_messages(&self) -> u64 {
        let js = Self::jetstream().await;
        let mut stream = js.get_stream(&self.stream).await.expect("stream exists");
        stream.info().await.unwrap().state.messages
    }

    pub async fn cleanup(&self) {
        let js = Self::jetstream().await;
        let _ = js.delete_stream(&self.stream).await;
    }
}
