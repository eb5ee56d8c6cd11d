//! `[database]`: the URL, the ingest pool and the acceptance transactions (group commit).

use std::time::Duration;

/// The promise is an answer within 2 s; a commit that may take longer could not keep it.
pub const MAX_COMMIT_TIMEOUT_MS: u64 = 1900;

section! {
    #[derive(Debug, Clone)]
    pub struct DatabaseConfig as d: Default {
        pub url: Option<String>,
        pub max_connections: u32 = 16; 1..=1000,
        /// Longest an acceptance may wait on the database before answering 503.
        pub commit_timeout_ms: u64 = 1500; 1..=MAX_COMMIT_TIMEOUT_MS,
        pub migrate_on_start: bool = true,
        /// Acceptance transactions that may run at once; requests arriving while all are busy
        /// wait and share the next one (group commit). A second one starts only when the queue
        /// holds a quarter of `accept_batch_max` or `accept_gather_us` has passed. Each writer
        /// holds a pooled connection while it commits.
        pub accept_writers: usize = 4;
            1..=d.max_connections as usize; "at most max_connections",
        /// Most events one acceptance transaction carries.
        pub accept_batch_max: usize = 64; 1..=1000,
        /// Longest a transaction waits for more requests to join it after the first (0: it takes
        /// what is queued and goes, so a lone request is never delayed).
        pub accept_batch_wait_us: u64 = 0; 0..=100_000,
        /// While a transaction is in flight, longest the next one gathers requests (up to a
        /// quarter of `accept_batch_max`) before taking a writer of its own; 0: every free writer
        /// takes what is queued at once.
        pub accept_gather_us: u64 = 5_000; 0..=1_000_000,
    }
}

impl DatabaseConfig {
    pub fn commit_timeout(&self) -> Duration {
        Duration::from_millis(self.commit_timeout_ms)
    }
}
