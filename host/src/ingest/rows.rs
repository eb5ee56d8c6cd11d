//! What acceptance writes and answers: the verified events of a request, each event's
//! outcome, and the one error type of storage (redacted, since a database message can quote
//! row values).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use time::OffsetDateTime;
use uuid::Uuid;

/// One verified logical event to accept.
#[derive(Debug, Clone)]
pub struct NewEvent {
    pub provider: String,
    pub endpoint_id: String,
    pub event_id: String,
    pub event_type: String,
    pub object_id: Option<String>,
    pub object_version: Option<StoredVersion>,
    pub created_at: Option<OffsetDateTime>,
    /// This event's bytes within the submission's payload, `(start, end)`: offsets from the
    /// body's first byte, start inclusive, end exclusive, `0 <= start <= end <= len`. A batch
    /// (one body, several events) names each event's item so processing and deliveries see
    /// only that item; `None` means the whole body. The pipeline validates it.
    pub payload_span: Option<(i64, i64)>,
}

/// An object version as the inbox stores it (`object_version_kind`, `object_version`): the
/// adapter's `object-version`, checked to fit Postgres' `bigint`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoredVersion {
    Sequence(i64),
    CreatedAt(i64),
}

/// Events that arrived in one verified request, sharing one raw payload (stored once; each
/// event may name its own span of it).
#[derive(Debug, Clone)]
pub struct Submission {
    pub payload: Bytes,
    pub matched_secret_version: String,
    pub events: Vec<NewEvent>,
    /// When the request was verified (the pipeline's clock): the rows' `received_at` and the
    /// time in their ids, which decides their partition.
    pub received_at: OffsetDateTime,
    /// How far back a copy of one of these events is a duplicate (the endpoint's
    /// `redelivery_window_days`); older rows of the same key do not count.
    pub redelivery_window: time::Duration,
    /// The W3C `traceparent` of the request's span, stored with each event so processing
    /// (later, maybe on another host) continues its trace; none when tracing is off.
    pub trace_context: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acceptance {
    Accepted(Uuid),
    Duplicate(Uuid),
}

impl Acceptance {
    pub fn inbox_id(self) -> Uuid {
        match self {
            Acceptance::Accepted(id) | Acceptance::Duplicate(id) => id,
        }
    }
}

/// The database could not confirm the commit; the caller must not acknowledge.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// Shown redacted: the server's message can quote row values. Shared by every request of
    /// a group-commit batch that failed together.
    #[error("{}", redact_db(.0))]
    Database(Arc<sqlx::Error>),
    #[error("database did not answer within {0:?}")]
    Timeout(Duration),
    #[error("the acceptance writer has stopped")]
    WriterStopped,
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        StoreError::Database(Arc::new(e))
    }
}

/// A diagnostic safe to store and show: database errors keep their SQLSTATE and constraint
/// but not the server's message, which can quote row values.
pub fn redact_db(e: &sqlx::Error) -> String {
    match e {
        sqlx::Error::Database(db) => format!(
            "database error {}{}",
            db.code().unwrap_or_default(),
            db.constraint()
                .map(|c| format!(" on {c}"))
                .unwrap_or_default()
        ),
        sqlx::Error::PoolTimedOut => "database pool timed out".into(),
        sqlx::Error::Io(_) | sqlx::Error::Tls(_) | sqlx::Error::PoolClosed => {
            "database connection failed".into()
        }
        other => format!("database error: {}", error_kind(other)),
    }
}

fn error_kind(e: &sqlx::Error) -> &'static str {
    match e {
        sqlx::Error::RowNotFound => "row not found",
        sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_) => "decode",
        sqlx::Error::Protocol(_) => "protocol",
        _ => "other",
    }
}
