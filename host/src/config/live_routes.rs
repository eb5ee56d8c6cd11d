//! The routes serving now: read at start from `[[route]]`, swapped whole when the watched
//! config file changes (`reload::ConfigReloader`), together with the endpoints. Workers pick
//! an event's deliveries from the current table; the relays send where it says, and a
//! supervisor starts and stops the per-target relays as targets come and go.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::sync::watch;

use super::routes::RouteConfig;

/// A delivery target: the sink's name (`http`, `nats`) and the URL or subject.
pub type TargetKey = (String, String);

/// The routes, in the order the file lists them, as one consistent table.
#[derive(Debug, Default)]
pub struct RouteTable {
    routes: Vec<Arc<RouteConfig>>,
}

impl RouteTable {
    pub fn new(routes: &[RouteConfig]) -> Self {
        Self {
            routes: routes.iter().cloned().map(Arc::new).collect(),
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<RouteConfig>> {
        self.routes.iter()
    }

    /// The first route sending to this target (routes sharing a target agree on everything a
    /// send uses but the timeout); none when no route names it.
    pub fn route_for(&self, sink: &str, target: &str) -> Option<&Arc<RouteConfig>> {
        self.routes
            .iter()
            .find(|r| r.sink.as_str() == sink && r.target() == target)
    }

    /// Every target some route sends to, sorted, each once.
    pub fn targets(&self) -> Vec<TargetKey> {
        let mut targets: Vec<TargetKey> = self
            .routes
            .iter()
            .map(|r| (r.sink.as_str().to_owned(), r.target().to_owned()))
            .collect();
        targets.sort();
        targets.dedup();
        targets
    }

    /// The longest route timeout (10 s with no route).
    pub fn longest_timeout(&self) -> Duration {
        Duration::from_millis(
            self.routes
                .iter()
                .map(|r| r.timeout_ms)
                .max()
                .unwrap_or(10_000),
        )
    }
}

/// The live route table: every reader sees the old table or the new one, never a mix; a
/// subscriber is told each time it is swapped.
#[derive(Debug)]
pub struct LiveRoutes {
    current: ArcSwap<RouteTable>,
    swapped: watch::Sender<u64>,
}

impl LiveRoutes {
    pub fn new(routes: &[RouteConfig]) -> Self {
        Self {
            current: ArcSwap::from_pointee(RouteTable::new(routes)),
            swapped: watch::Sender::new(0),
        }
    }

    /// The table serving now; a batch keeps the one it started with.
    pub fn load(&self) -> Arc<RouteTable> {
        self.current.load_full()
    }

    /// Swaps the whole table atomically and tells the subscribers.
    pub fn replace(&self, routes: &[RouteConfig]) {
        self.current.store(Arc::new(RouteTable::new(routes)));
        self.swapped.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Changes each time the table is swapped.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.swapped.subscribe()
    }
}
