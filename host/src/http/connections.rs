//! The listener's open connections, so that at the cap an idle one makes room (`listener.rs`
//! decides what a new connection gets when none is idle).
//!
//! Clients (providers, load balancers) keep connections open between requests. Were the cap
//! only a semaphore, a cap's worth of idle keep-alive connections would hold every slot while
//! new connections, carrying requests, waited unserved in the kernel's backlog until a header
//! timeout closed an idle one. As nginx does with its worker connections, a listener at the
//! cap instead closes a connection that has been idle for `IDLE_FOR` (hyper's graceful
//! shutdown: an idle connection closes at once; one that has just started a request finishes
//! it first). A connection serving a request is never taken, and neither is one only briefly
//! between requests: under load every connection is, and closing those would only make their
//! clients reconnect (measured: at 5,000 requests/s, closing any connection between requests
//! cut what was answered from 5,000/s to 1,800/s).

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// How long a connection must have been between requests to be closed for a new one.
pub const IDLE_FOR: Duration = Duration::from_secs(1);

pub struct OpenConnections {
    next_id: AtomicU64,
    all: Mutex<HashMap<u64, Arc<Connection>>>,
    /// The origin of `Connection::idle_since_ms`.
    started: Instant,
}

impl Default for OpenConnections {
    fn default() -> Self {
        Self {
            next_id: AtomicU64::new(0),
            all: Mutex::default(),
            started: Instant::now(),
        }
    }
}

/// One connection's state, shared by its task, its requests and the listener.
#[derive(Default)]
pub struct Connection {
    requests: AtomicUsize,
    /// Milliseconds after `OpenConnections::started` when its last request ended; 0 before
    /// the first (a new connection, whose first request may be on its way, is not idle).
    idle_since_ms: AtomicU64,
    closing: AtomicBool,
    close: Notify,
}

impl OpenConnections {
    /// Registers a new connection; it is forgotten when the returned handle drops.
    pub fn open(self: &Arc<Self>) -> Registered {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let connection = Arc::new(Connection::default());
        self.lock().insert(id, Arc::clone(&connection));
        Registered {
            connections: Arc::clone(self),
            id,
            connection,
        }
    }

    /// Asks one connection idle for `idle_for` to close; false when none is (every one is
    /// serving a request, waiting for its first, or only briefly between two).
    pub fn close_one_idle(&self, idle_for: Duration) -> bool {
        let now = self.now_ms();
        let idle_for = idle_for.as_millis() as u64;
        let all = self.lock();
        let idle = all.values().find(|c| {
            let since = c.idle_since_ms.load(Ordering::Acquire);
            since != 0
                && now.saturating_sub(since) >= idle_for
                && c.requests.load(Ordering::Acquire) == 0
                && !c.closing.load(Ordering::Acquire)
        });
        match idle {
            Some(c) => {
                c.closing.store(true, Ordering::Release);
                // `notify_one` keeps the wake-up if the task is not waiting yet.
                c.close.notify_one();
                true
            }
            None => false,
        }
    }

    fn now_ms(&self) -> u64 {
        // Never 0, which means "no request yet".
        self.started.elapsed().as_millis() as u64 + 1
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Connection>>> {
        // The map holds no invariant a panicking holder could break.
        self.all.lock().unwrap_or_else(|e| e.into_inner())
    }
}

pub struct Registered {
    connections: Arc<OpenConnections>,
    id: u64,
    connection: Arc<Connection>,
}

impl Registered {
    /// Resolves when the listener wants this connection closed to make room.
    pub async fn close_requested(&self) {
        self.connection.close.notified().await;
    }

    /// Wraps one request's handling: while it runs, the connection is busy.
    pub fn serving<F: Future>(&self, request: F) -> impl Future<Output = F::Output> + use<F> {
        self.connection.requests.fetch_add(1, Ordering::AcqRel);
        let busy = Busy {
            connections: Arc::clone(&self.connections),
            connection: Arc::clone(&self.connection),
        };
        async move {
            let output = request.await;
            drop(busy);
            output
        }
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.connections.lock().remove(&self.id);
    }
}

/// A request in progress; also released when the request is dropped unfinished.
struct Busy {
    connections: Arc<OpenConnections>,
    connection: Arc<Connection>,
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.connection
            .idle_since_ms
            .store(self.connections.now_ms(), Ordering::Release);
        self.connection.requests.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_a_connection_between_requests_is_asked_to_close() {
        let connections = Arc::new(OpenConnections::default());
        let first = connections.open();
        let second = connections.open();
        // Neither has answered a request yet: a new connection's first request may be coming.
        assert!(!connections.close_one_idle(Duration::ZERO));
        second.serving(async {}).await;
        // Only just between requests: not idle for long enough.
        assert!(!connections.close_one_idle(Duration::from_secs(60)));
        let (release, held) = tokio::sync::oneshot::channel::<()>();
        let busy = tokio::spawn(first.serving(async move {
            let _ = held.await;
        }));
        tokio::task::yield_now().await;
        // `second` is idle: it is the one asked, once.
        assert!(connections.close_one_idle(Duration::ZERO));
        second.close_requested().await;
        assert!(
            !connections.close_one_idle(Duration::ZERO),
            "the busy one was taken"
        );
        // `first` finishes its request: now it may be taken.
        release.send(()).unwrap();
        busy.await.unwrap();
        assert!(connections.close_one_idle(Duration::ZERO));
        first.close_requested().await;
        drop((first, second));
        assert!(connections.lock().is_empty());
    }
}
