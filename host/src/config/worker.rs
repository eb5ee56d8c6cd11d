//! `[worker]` and `[nats]`: processing (workers, relays, the reconciler, in `wharf serve` and
//! `wharf worker`) and the NATS server its `nats` routes and the accepted-events feed use.

use std::time::Duration;

use serde::Deserialize;

use super::problems::{KeyPath, Problems};

section! {
    /// Processing: workers, relays and the reconciler (in `wharf serve` and `wharf worker`).
    #[derive(Debug, Clone)]
    pub struct WorkerConfig as w: Default {
        /// Workers in `wharf serve`; 0 leaves processing to `wharf worker` processes.
        pub count: usize = 2; 0..=256,
        /// Inbox rows claimed per lease.
        pub batch_size: u32 = 32; 1..=1000,
        /// How long a claim stays with a worker before another may take it over.
        pub lease_secs: u64 = 30; 1..=3600,
        /// Attempts before an event is `FAILED` (an endpoint may override it).
        pub max_attempts: u32 = 8; 1..=100,
        /// Exponential backoff with full jitter: a random wait up to base * 2^attempt, capped.
        pub backoff_base_ms: u64 = 1000; 1..=3_600_000,
        pub backoff_max_ms: u64 = 300_000; 1..=86_400_000,
        /// Longest an idle worker waits before looking again when nothing woke it.
        pub idle_poll_ms: u64 = 500; 1..=60_000,
        /// How long a worker that found less than a full batch lets the next one gather before
        /// claiming again (a full batch claims again at once).
        pub linger_ms: u64 = 10; 0..=1000,
        /// What `object_state.state` keeps (an endpoint may override it).
        pub projection_document: ProjectionDocument = ProjectionDocument::default(),
        pub reconcile_interval_secs: u64 = 60; 1..=86_400,
        /// Connections for processing, apart from the ingest pool, so a backlog never delays
        /// acknowledgements.
        pub db_connections: u32 = 4; 1..=1000,
        /// Send deliveries whose target no configured route names (a route since removed or
        /// changed). Off: anyone who can write the `deliveries` table could otherwise make
        /// the relay `POST` events to any URL; such a row ends `FAILED` instead.
        pub deliver_to_unrouted_targets: bool = false,
    }
}

impl WorkerConfig {
    pub fn lease(&self) -> Duration {
        Duration::from_secs(self.lease_secs)
    }

    /// What the ranges cannot say: the backoff's base is below its cap.
    pub(super) fn problems(&self, p: &mut Problems) {
        p.ensure(
            self.backoff_base_ms <= self.backoff_max_ms,
            KeyPath::section("worker", "backoff_base_ms"),
            || "[worker] backoff_base_ms must be at most backoff_max_ms".into(),
        );
    }
}

/// What the built-in projection keeps of each object's newest event besides its version, id,
/// type and inbox id (which it always keeps: they order the events).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProjectionDocument {
    /// `state` stays NULL. The event's body is the sealed payload of the row's `inbox_id`
    /// (`wharf events show --payload`): no plaintext copy of any body in the database, and
    /// processing writes no second copy of every body (docs/performance.md).
    #[default]
    None,
    /// `state` holds the event's document as JSON, in plaintext, for queries.
    Event,
}

section! {
    #[derive(Debug, Clone)]
    pub struct NatsConfig as n {
        pub url: String,
        /// The JetStream stream that keeps accepted-event notices; created when missing.
        pub accepted_stream: String = "WHARF_ACCEPTED".into(),
        /// Notices go to `<prefix>.<endpoint>.<event type>`; the stream captures `<prefix>.>`.
        pub accepted_prefix: String = "wharf.accepted".into(),
        /// Longest wait for a JetStream acknowledgement.
        pub ack_timeout_ms: u64 = 5000; 1..=60_000,
    }
}

impl NatsConfig {
    /// The prefix is a subject of its own.
    pub(super) fn problems(&self, p: &mut Problems) {
        p.ensure(
            crate::support::subjects::valid_subject(&self.accepted_prefix),
            KeyPath::section("nats", "accepted_prefix"),
            || "[nats] accepted_prefix must be a subject without wildcards".into(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::config_with;
    use super::*;

    #[test]
    fn the_projection_keeps_no_document_unless_the_worker_or_the_endpoint_says_so() {
        let by_default = config_with("server", "").unwrap();
        assert_eq!(
            by_default.projection_document("e"),
            ProjectionDocument::None
        );
        let all = config_with("worker", "projection_document = \"event\"\n").unwrap();
        assert_eq!(all.projection_document("e"), ProjectionDocument::Event);
        let one = config_with("endpoint", "projection_document = \"event\"\n").unwrap();
        assert_eq!(one.projection_document("e"), ProjectionDocument::Event);
        assert_eq!(one.projection_document("other"), ProjectionDocument::None);
        let error = config_with("worker", "projection_document = \"body\"\n").unwrap_err();
        assert!(
            format!("{error:#}").contains("unknown variant (value withheld), expected `none`"),
            "{error:#}"
        );
    }
}
