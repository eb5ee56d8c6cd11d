//! Postgres: the one component through which events are accepted.
//!
//! `accept` takes verified events and answers, for each, accepted or duplicate with the inbox
//! id; it commits before it returns. The pipeline knows nothing else about storage; behind
//! `accept`, requests that arrive together share one transaction (`commit`).

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use tokio::sync::oneshot;

use super::commit::{self, CommitSettings, GroupCommit};
use super::handoff::Handoff;
use super::pending::Pending;
use super::rows::{Acceptance, StoreError, Submission};
use crate::support::metrics::Metrics;
use crate::support::sealing::PayloadKeys;

pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

#[derive(Clone)]
pub struct Store {
    pool: PgPool,
    commit_timeout: Duration,
    /// Absent in commands that only read (`wharf events`): `accept` then commits alone.
    group_commit: Option<Arc<GroupCommit>>,
    /// What seals each raw body before it is stored.
    payload_keys: Arc<PayloadKeys>,
}

impl Store {
    /// Connects lazily: a database that is down at start makes requests answer 503 until it
    /// returns, rather than keeping the receiver down.
    pub fn connect_lazy(
        url: &str,
        max_connections: u32,
        commit_timeout: Duration,
        payload_keys: Arc<PayloadKeys>,
    ) -> anyhow::Result<Self> {
        let options: PgConnectOptions = url.parse()?;
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            // Shorter than the commit timeout so a starved pool still answers 503 in time.
            .acquire_timeout(commit_timeout.mul_f32(0.7))
            // The tables are partitioned by day: left to choose, Postgres plans each execution
            // of a prepared statement again (a custom plan prunes partitions at plan time),
            // which cost a third of acceptance's throughput (pgbench, bench/pgbench/accept.sql:
            // 2,085 against 3,182 transactions/s). A generic plan prunes when it runs.
            .connect_lazy_with(
                options
                    .application_name("wharf")
                    .options([("plan_cache_mode", "force_generic_plan")]),
            );
        Ok(Self {
            pool,
            commit_timeout,
            group_commit: None,
            payload_keys,
        })
    }

    /// From now on, requests that arrive together share acceptance transactions (see
    /// `commit`), and with `handoff` the events accepted while this host's workers have room
    /// are leased to them (see `handoff`). Needs a running tokio runtime.
    pub fn with_group_commit(
        mut self,
        settings: CommitSettings,
        handoff: Option<Arc<Handoff>>,
        metrics: Arc<Metrics>,
    ) -> Self {
        self.group_commit = Some(Arc::new(GroupCommit::start(
            self.pool.clone(),
            settings,
            handoff,
            metrics,
        )));
        self
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

    /// Accepts every event of the submission in one transaction, or none, answering for each
    /// accepted or duplicate with its inbox id. Returns only after the commit is confirmed;
    /// any error or timeout means "outcome unknown": answer 503 and let the provider's retry
    /// converge on the unique row.
    pub async fn accept(&self, submission: Submission) -> Result<Vec<Acceptance>, StoreError> {
        let (reply, answer) = oneshot::channel();
        let pending = Pending::new(submission, &self.payload_keys, reply);
        let wait = async {
            match &self.group_commit {
                Some(group) => group.submit(pending)?,
                None => {
                    let alone = CommitSettings {
                        timeout: self.commit_timeout,
                        ..CommitSettings::default()
                    };
                    commit::commit(&self.pool, vec![pending], alone, None, None).await
                }
            }
            answer.await.map_err(|_| StoreError::WriterStopped)?
        };
        tokio::time::timeout(self.commit_timeout, wait)
            .await
            .map_err(|_| StoreError::Timeout(self.commit_timeout))?
    }
}
