//! The listeners: accept, bound what connections may hold, serve HTTP/1 with hyper, and at the
//! connection cap answer instead of queueing.
//!
//! A listener never stops accepting. A connection that finds every slot taken is not left in
//! the kernel's backlog, where no deadline reaches it: once the backlog is full the kernel
//! drops SYNs, which clients retry 1, 3 and 7 s later, so a stall of a second at a high rate
//! used to turn into answers 10 s late and a generator whose connections never recovered
//! (docs/performance.md, the 3x collapse). Instead, at the cap:
//!
//! - if a connection has been idle for `IDLE_FOR`, it is closed and the new one takes its
//!   slot (waiting at most `SLOT_WAIT` for it);
//! - otherwise the new connection is *shed*: its request head is read, its body read and
//!   dropped (so the close sends a FIN, not a reset that could discard the answer), it is
//!   answered 503 `overloaded` with `Retry-After` and `Connection: close`, all within
//!   `SHED_WITHIN`; at most `overflow_slots` connections are shed at once, one past them
//!   waits unread for a free one (at most `SHED_WITHIN`, and at most `max_connections` wait),
//!   and past that, or when the wait runs out, it is closed unanswered.
//!
//! Shedding reads bytes and writes a fixed answer: no adapter, no MAC, no database, no body
//! buffered, so it costs a small fraction of serving and keeps the wait for every answer
//! bounded however far past capacity the offered load is.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::response::IntoResponse as _;
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_util::either::Either;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

use super::client::TrustedProxies;
use super::connections::{IDLE_FOR, OpenConnections};
use crate::config::ServerConfig;
use crate::ingest::IngestError;
use crate::support::metrics::Metrics;

/// How long a new connection waits for the slot of an idle one being closed for it (that
/// takes microseconds; the bound is for a connection that does not close).
const SLOT_WAIT: Duration = Duration::from_millis(200);
/// The longest a shed connection is kept: its head, its body read and dropped, the answer.
pub const SHED_WITHIN: Duration = Duration::from_secs(1);

/// How a listener bounds its connections, so that slow or idle clients cannot hold the
/// host's memory or connections (README: "What the host enforces").
#[derive(Clone, Copy)]
pub struct ConnLimits {
    /// hyper starts this timer whenever a connection waits for a request head: on accept and
    /// after each answer, so it is the slow-header and the idle keep-alive timeout at once.
    header_timeout: Duration,
    max_connections: usize,
    /// Connections shed at once past the cap; further ones are closed when accepted.
    overflow_slots: usize,
    /// Above `[server] max_headers`, so that our own check answers the JSON 431 first.
    max_headers: usize,
    /// hyper's read buffer per connection (headers must fit in it).
    max_buf_size: usize,
    /// The most body a shed request may send to be read and dropped (`[server] max_body_bytes`).
    max_body_bytes: u64,
}

impl ConnLimits {
    pub fn new(server: &ServerConfig) -> Self {
        Self {
            header_timeout: server.header_timeout(),
            max_connections: server.max_connections,
            overflow_slots: overflow_slots(server.max_connections),
            max_headers: (server.max_headers * 2).max(100),
            max_buf_size: server.max_header_bytes * 2 + (8 << 10),
            max_body_bytes: server.max_body_bytes,
        }
    }
}

impl ConnLimits {
    /// How long a shed connection is kept, never longer than a request head may take.
    fn shed_within(&self) -> Duration {
        SHED_WITHIN.min(self.header_timeout)
    }
}

/// A quarter of the cap, at least 16 and at most 1,024: a shed connection lives for
/// milliseconds, so even a few absorb thousands of connections a second.
pub fn overflow_slots(max_connections: usize) -> usize {
    (max_connections / 4).clamp(16, 1024)
}

/// What one listener speaks, whom it believes, and where it counts what it sheds.
pub struct Listener {
    pub limits: ConnLimits,
    /// HTTPS when set; plain HTTP otherwise.
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    /// Peers whose forwarded-client headers are believed (`ClientInfo` on every request).
    pub proxies: Arc<TrustedProxies>,
    pub metrics: Arc<Metrics>,
}

impl Listener {
    pub fn plain(limits: ConnLimits, proxies: Arc<TrustedProxies>, metrics: Arc<Metrics>) -> Self {
        Self {
            limits,
            tls: None,
            proxies,
            metrics,
        }
    }
}

/// Where a connection just accepted goes.
enum Slot {
    Taken(Taken),
    /// An idle connection was asked to close: its slot, when it comes back soon enough.
    AfterIdleCloses,
    /// Every overflow slot is shedding: the connection waits, unread, for one (a parking
    /// place is held), at most `SHED_WITHIN`, then is shed or closed.
    Parked(OwnedSemaphorePermit),
}

enum Taken {
    /// A free slot: served.
    Serve(OwnedSemaphorePermit),
    /// Answered 503 and closed (an overflow slot is held).
    Shed(OwnedSemaphorePermit),
}

impl Slot {
    /// The slot this connection ends up with after its wait, if any; `None`: close it.
    async fn taken(self, open: &Arc<Semaphore>, overflow: &Arc<Semaphore>) -> Option<Taken> {
        match self {
            Slot::Taken(taken) => Some(taken),
            Slot::AfterIdleCloses => {
                match tokio::time::timeout(SLOT_WAIT, Arc::clone(open).acquire_owned()).await {
                    Ok(Ok(permit)) => Some(Taken::Serve(permit)),
                    _ => Arc::clone(overflow)
                        .try_acquire_owned()
                        .ok()
                        .map(Taken::Shed),
                }
            }
            // Waiting here rather than closing at once keeps clients that open a connection
            // per refusal from reconnecting in a tight loop, which cost more than the refusals
            // (at 3x with 4,096 client connections: 3,800 connections a second closed, goodput
            // down from 3,300/s to 1,300/s).
            Slot::Parked(_parked) => {
                let wait = Arc::clone(overflow).acquire_owned();
                match tokio::time::timeout(SHED_WITHIN, wait).await {
                    Ok(Ok(permit)) => Some(Taken::Shed(permit)),
                    _ => None,
                }
            }
        }
    }
}

/// Binds `addr` and serves `router` on it until `cancel` fires, letting requests in flight
/// finish; returns the bound address (port 0 picks one). Served with hyper directly because
/// `axum::serve` sets no header timeout.
pub async fn serve_on(
    addr: SocketAddr,
    router: axum::Router,
    Listener {
        limits,
        tls,
        proxies,
        metrics,
    }: Listener,
    cancel: &CancellationToken,
    tasks: &mut JoinSet<anyhow::Result<()>>,
) -> anyhow::Result<SocketAddr> {
    let listener = listen(addr, limits.max_connections)?;
    let bound = listener.local_addr()?;
    let token = cancel.clone();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_headers(limits.max_headers)
        .max_buf_size(limits.max_buf_size);
    tasks.spawn(async move {
        let open = Arc::new(Semaphore::new(limits.max_connections));
        let overflow = Arc::new(Semaphore::new(limits.overflow_slots));
        let parking = Arc::new(Semaphore::new(limits.max_connections));
        let connections = Arc::new(OpenConnections::default());
        loop {
            let (stream, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        // Out of file descriptors, for instance: wait instead of spinning.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
                () = token.cancelled() => break,
            };
            // A free slot, an idle connection's, a shedding slot, a place to wait for one.
            let slot = Arc::clone(&open)
                .try_acquire_owned()
                .ok()
                .map(|permit| Slot::Taken(Taken::Serve(permit)))
                .or_else(|| {
                    connections
                        .close_one_idle(IDLE_FOR)
                        .then_some(Slot::AfterIdleCloses)
                })
                .or_else(|| {
                    let permit = Arc::clone(&overflow).try_acquire_owned().ok()?;
                    Some(Slot::Taken(Taken::Shed(permit)))
                })
                .or_else(|| {
                    Arc::clone(&parking)
                        .try_acquire_owned()
                        .ok()
                        .map(Slot::Parked)
                });
            let Some(slot) = slot else {
                // Closed at once: the client learns now, not after a SYN retry.
                metrics.connection_shed("closed");
                drop(stream);
                continue;
            };
            let _ = stream.set_nodelay(true);
            let (router, proxies, connections) = (
                router.clone(),
                Arc::clone(&proxies),
                Arc::clone(&connections),
            );
            let (http, tls, token) = (http.clone(), tls.clone(), token.clone());
            let (open, overflow, metrics) = (
                Arc::clone(&open),
                Arc::clone(&overflow),
                Arc::clone(&metrics),
            );
            tokio::spawn(async move {
                let Some(taken) = slot.taken(&open, &overflow).await else {
                    metrics.connection_shed("closed");
                    return;
                };
                let https = tls.is_some();
                match taken {
                    Taken::Serve(permit) => {
                        let deadline = limits.header_timeout;
                        let Some(stream) = handshake(stream, tls, deadline, peer, &token).await
                        else {
                            return;
                        };
                        let registered = Arc::new(connections.open());
                        let requests = Arc::clone(&registered);
                        let service = router
                            .map_request(move |mut request: hyper::Request<_>| {
                                let client = proxies.client(peer.ip(), https, request.headers());
                                request.extensions_mut().insert(client);
                                request
                            })
                            .map_future(move |response| requests.serving(response));
                        serve(stream, http, service, &registered, &token).await;
                        drop(registered);
                        drop(permit);
                    }
                    Taken::Shed(permit) => {
                        let deadline = limits.shed_within();
                        metrics.connection_shed("answered");
                        if let Some(stream) = handshake(stream, tls, deadline, peer, &token).await {
                            shed(stream, limits, &token).await;
                        }
                        drop(permit);
                    }
                }
            });
        }
        drop(listener);
        // Each connection gives its permit back when it ends: all back, all finished.
        for (slots, all) in [
            (&open, limits.max_connections),
            (&overflow, limits.overflow_slots),
        ] {
            let _ = slots
                .acquire_many(u32::try_from(all).unwrap_or(u32::MAX))
                .await?;
        }
        Ok(())
    });
    Ok(bound)
}

type Stream = Either<TcpStream, tokio_rustls::server::TlsStream<TcpStream>>;

/// The TLS handshake when the listener speaks HTTPS, bounded like a request head, so a slow
/// one costs no more than a slow plain request; `None` when it failed or was too slow.
async fn handshake(
    stream: TcpStream,
    tls: Option<tokio_rustls::TlsAcceptor>,
    deadline: Duration,
    peer: SocketAddr,
    token: &CancellationToken,
) -> Option<Stream> {
    let Some(acceptor) = tls else {
        return Some(Either::Left(stream));
    };
    let handshake = tokio::time::timeout(deadline, acceptor.accept(stream));
    tokio::select! {
        done = handshake => match done {
            Ok(Ok(stream)) => Some(Either::Right(stream)),
            // The client's failure (plain HTTP, an untrusted certificate, too slow): nothing
            // to answer.
            Ok(Err(e)) => {
                tracing::debug!(%peer, error = %e, "TLS handshake failed");
                None
            }
            Err(_) => None,
        },
        () = token.cancelled() => None,
    }
}

/// Serves one connection until the client is done, the listener shuts down (requests in
/// flight finish), or the listener at the cap wants it closed between requests.
async fn serve<S>(
    stream: Stream,
    http: hyper::server::conn::http1::Builder,
    service: S,
    registered: &super::connections::Registered,
    token: &CancellationToken,
) where
    S: tower::Service<hyper::Request<Incoming>, Response = axum::response::Response>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: std::error::Error + Send + Sync + 'static,
{
    let conn = http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(service));
    let mut conn = std::pin::pin!(conn);
    // Errors here are the client's (timeouts, resets, bad framing): nothing to log.
    tokio::select! {
        _ = conn.as_mut() => {}
        () = token.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
        () = registered.close_requested() => {
            conn.as_mut().graceful_shutdown();
            tokio::select! {
                _ = conn.as_mut() => {}
                () = token.cancelled() => {}
            }
        }
    }
}

/// Answers the connection's one request 503 `overloaded` and closes it, all within
/// `SHED_WITHIN`. The body is read and dropped first, up to `max_body_bytes`, so that the
/// close does not reset a connection whose client is still writing (a reset can discard the
/// answer before the client reads it); one larger or slower is answered as it stands.
async fn shed(stream: Stream, limits: ConnLimits, token: &CancellationToken) {
    let deadline = tokio::time::Instant::now() + limits.shed_within();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.shed_within())
        .keep_alive(false)
        .max_headers(limits.max_headers)
        .max_buf_size(limits.max_buf_size);
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let max = limits.max_body_bytes;
        async move {
            let declared = request
                .headers()
                .get(http::header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
            if declared.is_none_or(|len| len <= max) {
                let drain = drain(request.into_body(), max);
                let _ = tokio::time::timeout_at(deadline, drain).await;
            }
            Ok::<_, std::convert::Infallible>(IngestError::AtConnectionCap.into_response())
        }
    });
    let conn = http.serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        _ = tokio::time::timeout_at(deadline, conn) => {}
        () = token.cancelled() => {}
    }
}

/// Reads a body to its end and drops it, stopping past `max` bytes.
async fn drain(mut body: Incoming, max: u64) {
    let mut read = 0u64;
    while let Some(Ok(frame)) = body.frame().await {
        if let Some(data) = frame.data_ref() {
            read += data.len() as u64;
            if read > max {
                return;
            }
        }
    }
}

/// Binds with a listen backlog of at least the connection cap and 4,096 (the kernel clips it
/// to `net.core.somaxconn`), for bursts of connections faster than one accept loop.
fn listen(addr: SocketAddr, max_connections: usize) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    // As `TcpListener::bind` does: a restart need not wait for TIME_WAIT to clear.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(u32::try_from(max_connections.max(4096)).unwrap_or(u32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_is_a_quarter_of_the_cap_within_bounds() {
        assert_eq!(overflow_slots(2), 16);
        assert_eq!(overflow_slots(1024), 256);
        assert_eq!(overflow_slots(100_000), 1024);
    }
}
