//! In-process wake-ups, raised by ingest after a commit and by processing stages for the next
//! one. Never a database `NOTIFY`: a lost hint only delays work until the next poll.

use tokio::sync::{Notify, watch};

/// In-process wake-ups. Each is only a hint: every loop also polls with a capped backoff, so
/// work committed by another process (or a missed signal) is found anyway.
pub struct Signals {
    /// New inbox rows are committed.
    pub work: Notify,
    /// New accepted-event notices are committed.
    pub outbox: Notify,
    /// New deliveries are committed: a broadcast, since each delivery target has its relay.
    pub deliveries: watch::Sender<u64>,
}

impl Default for Signals {
    fn default() -> Self {
        Self {
            work: Notify::new(),
            outbox: Notify::new(),
            deliveries: watch::Sender::new(0),
        }
    }
}

impl Signals {
    pub fn deliveries_committed(&self) {
        self.deliveries.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Called by ingest after a commit that accepted something; never inside the transaction.
    pub fn accepted(&self) {
        self.work.notify_one();
        self.outbox.notify_one();
    }
}
