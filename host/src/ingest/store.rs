//! Postgres: the one component through which events are accepted.
//!
//! `accept` takes verified events and answers, for each, accepted or duplicate with the inbox
//! id; it commits before it returns. The pipeline knows nothing else about storage, so a
//! group-commit writer (many requests in one transaction) can replace this inside later.

use std::time::Duration;

use bytes::Bytes;
use sha2::{Digest, Sha256};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Postgres, Transaction};
use time::OffsetDateTime;
use uuid::Uuid;

pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

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
}

/// An object version as the inbox stores it (`object_version_kind`, `object_version`): the
/// adapter's `object-version`, checked to fit Postgres' `bigint`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoredVersion {
    Sequence(i64),
    CreatedAt(i64),
}

/// Events that arrived in one verified request, sharing one raw payload.
#[derive(Debug, Clone)]
pub struct Submission {
    pub payload: Bytes,
    pub matched_secret_version: String,
    pub events: Vec<NewEvent>,
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
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Shown redacted: the server's message can quote row values.
    #[error("{}", redact_db(.0))]
    Database(#[from] sqlx::Error),
    #[error("database did not answer within {0:?}")]
    Timeout(Duration),
}

#[derive(Clone)]
pub struct Store {
    pool: PgPool,
    commit_timeout: Duration,
}

impl Store {
    /// Connects lazily: a database that is down at start makes requests answer 503 until it
    /// returns, rather than keeping the receiver down.
    pub fn connect_lazy(
        url: &str,
        max_connections: u32,
        commit_timeout: Duration,
    ) -> anyhow::Result<Self> {
        let options: PgConnectOptions = url.parse()?;
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            // Shorter than the commit timeout so a starved pool still answers 503 in time.
            .acquire_timeout(commit_timeout.mul_f32(0.7))
            .connect_lazy_with(options.application_name("wharf"));
        Ok(Self {
            pool,
            commit_timeout,
        })
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    pub async fn migrate(&self) -> anyhow::Result<()> {
        MIGRATOR.run(&self.pool).await?;
        Ok(())
    }

    pub async fn ping(&self) -> Result<(), StoreError> {
        tokio::time::timeout(
            self.commit_timeout,
            sqlx::query("SELECT 1").execute(&self.pool),
        )
        .await
        .map_err(|_| StoreError::Timeout(self.commit_timeout))??;
        Ok(())
    }

    /// Accepts every event of the submission in one transaction, or none. Returns only after
    /// the commit is confirmed; any error or timeout means "outcome unknown": answer 503 and
    /// let the provider's retry converge on the unique row.
    pub async fn accept(&self, submission: &Submission) -> Result<Vec<Acceptance>, StoreError> {
        tokio::time::timeout(self.commit_timeout, self.accept_inner(submission))
            .await
            .map_err(|_| StoreError::Timeout(self.commit_timeout))?
    }

    async fn accept_inner(&self, submission: &Submission) -> Result<Vec<Acceptance>, StoreError> {
        let mut tx = self.pool.begin().await?;
        let payload_ref = Uuid::now_v7();
        let payload_hash = Sha256::digest(&submission.payload).to_vec();
        let mut out = Vec::with_capacity(submission.events.len());
        for event in &submission.events {
            out.push(insert_event(&mut tx, event, submission, payload_ref, &payload_hash).await?);
        }
        if out.iter().any(|a| matches!(a, Acceptance::Accepted(_))) {
            store_payload(&mut tx, payload_ref, &submission.payload).await?;
        }
        tx.commit().await?;
        Ok(out)
    }
}

/// Inserts the inbox row and its outbox row in one statement; on a conflict with an accepted
/// copy, returns that copy's id. Never read-then-insert: the unique key decides.
async fn insert_event(
    tx: &mut Transaction<'_, Postgres>,
    event: &NewEvent,
    submission: &Submission,
    payload_ref: Uuid,
    payload_hash: &[u8],
) -> Result<Acceptance, sqlx::Error> {
    let (version_kind, version) = match event.object_version {
        Some(StoredVersion::Sequence(v)) => (Some("sequence"), Some(v)),
        Some(StoredVersion::CreatedAt(v)) => (Some("created_at"), Some(v)),
        None => (None, None),
    };
    let topic = crate::support::subjects::accepted_topic(&event.endpoint_id, &event.event_type);
    let inserted: Option<Uuid> = sqlx::query_scalar(
        "WITH ins AS (
            INSERT INTO webhook_inbox (inbox_id, provider, endpoint_id, provider_event_id, event_type,
                object_id, object_version_kind, object_version, provider_created_at,
                raw_payload_ref, payload_hash, matched_secret_version)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
            ON CONFLICT ON CONSTRAINT webhook_inbox_logical_event DO NOTHING
            RETURNING inbox_id
        ), outbox AS (
            INSERT INTO webhook_outbox (outbox_id, inbox_id, topic)
            SELECT $13, inbox_id, $14 FROM ins
        )
        SELECT inbox_id FROM ins",
    )
    .bind(Uuid::now_v7())
    .bind(&event.provider)
    .bind(&event.endpoint_id)
    .bind(&event.event_id)
    .bind(&event.event_type)
    .bind(&event.object_id)
    .bind(version_kind)
    .bind(version)
    .bind(event.created_at)
    .bind(payload_ref)
    .bind(payload_hash)
    .bind(&submission.matched_secret_version)
    .bind(Uuid::now_v7())
    .bind(topic)
    .fetch_optional(&mut **tx)
    .await?;
    if let Some(id) = inserted {
        return Ok(Acceptance::Accepted(id));
    }
    // The conflicting row is committed (ON CONFLICT waited for it), so a fresh statement sees it.
    let existing: Uuid = sqlx::query_scalar(
        "SELECT inbox_id FROM webhook_inbox WHERE provider = $1 AND endpoint_id = $2 AND provider_event_id = $3",
    )
    .bind(&event.provider)
    .bind(&event.endpoint_id)
    .bind(&event.event_id)
    .fetch_one(&mut **tx)
    .await?;
    Ok(Acceptance::Duplicate(existing))
}

/// The single place raw payloads are written; encryption at rest will change only this.
async fn store_payload(
    tx: &mut Transaction<'_, Postgres>,
    payload_ref: Uuid,
    body: &[u8],
) -> Result<(), sqlx::Error> {
    sqlx::query("INSERT INTO webhook_payloads (payload_ref, body) VALUES ($1, $2)")
        .bind(payload_ref)
        .bind(body)
        .execute(&mut **tx)
        .await?;
    Ok(())
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
