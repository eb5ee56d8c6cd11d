//! Crash injection for the recovery tests: `WHARF_FAILPOINTS=name[,name...]` makes the
//! process kill itself with SIGKILL (no destructors, no flush, like a power cut) the first
//! time it reaches a named point. Unset, every check is one relaxed load.
//!
//! The points, each between a durable step and the next (docs/ARCHITECTURE.md says why each
//! is safe):
//! - `ingest.after_commit`: the inbox row is committed, the answer not yet sent;
//! - `outbox.after_publish`: the accepted notice is in JetStream, the outbox row not marked;
//! - `worker.after_commit`: the business transaction is committed, the worker has not yet
//!   acknowledged it (metrics, waking the relays);
//! - `delivery.after_send`: the sink took the delivery, the row is not yet marked sent.

use std::sync::OnceLock;

pub const INGEST_AFTER_COMMIT: &str = "ingest.after_commit";
pub const OUTBOX_AFTER_PUBLISH: &str = "outbox.after_publish";
pub const WORKER_AFTER_COMMIT: &str = "worker.after_commit";
pub const DELIVERY_AFTER_SEND: &str = "delivery.after_send";

const ALL: [&str; 4] = [
    INGEST_AFTER_COMMIT,
    OUTBOX_AFTER_PUBLISH,
    WORKER_AFTER_COMMIT,
    DELIVERY_AFTER_SEND,
];

fn armed() -> &'static [String] {
    static ARMED: OnceLock<Vec<String>> = OnceLock::new();
    ARMED.get_or_init(|| {
        std::env::var("WHARF_FAILPOINTS")
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    })
}

/// Refuses unknown names at start, so a typo cannot silently disarm a crash test.
pub fn validate() -> anyhow::Result<()> {
    for name in armed() {
        anyhow::ensure!(
            ALL.contains(&name.as_str()),
            "WHARF_FAILPOINTS: unknown failpoint {name:?} (known: {})",
            ALL.join(", ")
        );
    }
    if !armed().is_empty() {
        tracing::warn!(failpoints = ?armed(), "failpoints armed: this process will kill itself");
    }
    Ok(())
}

/// Kills the process here if `name` is armed.
pub fn hit(name: &str) {
    if armed().iter().any(|a| a == name) {
        tracing::error!(failpoint = name, "failpoint reached: SIGKILL");
        // SAFETY: raise only sends a signal to this process; SIGKILL cannot be caught.
        unsafe {
            libc::raise(libc::SIGKILL);
        }
    }
}
