//! The wall clock used for freshness checks and secret expiry, injectable so tests can pin it
//! to a published vector's timestamp.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use time::OffsetDateTime;

pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> OffsetDateTime;
}

pub type SharedClock = Arc<dyn Clock>;

pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }
}

/// A clock that stays where it is set (Unix seconds).
pub struct FixedClock(AtomicI64);

impl FixedClock {
    pub fn new(unix_secs: i64) -> Arc<Self> {
        Arc::new(Self(AtomicI64::new(unix_secs)))
    }

    pub fn set(&self, unix_secs: i64) {
        self.0.store(unix_secs, Ordering::SeqCst);
    }
}

impl Clock for FixedClock {
    fn now(&self) -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(self.0.load(Ordering::SeqCst))
            .unwrap_or(OffsetDateTime::UNIX_EPOCH)
    }
}
