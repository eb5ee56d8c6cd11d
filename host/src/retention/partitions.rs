//! Retention by time partitions. Every table that grows with the event rate is partitioned by
//! UTC day on a UUIDv7 key (migration `…_time_partitions.sql`). A pass, on every host (at
//! start, then every `[retention] interval_secs`; one host at a time), creates the partitions
//! of the next `create_ahead_days` and drops whole the days that expired: a handful of
//! statements whatever the tables hold. A day that still holds unfinished work (events pending
//! or processing, deliveries pending, notices unpublished) is kept until it is finished:
//! nothing acknowledged is dropped before it was processed and delivered.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use sqlx::{Executor as _, PgConnection, PgPool};
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::config::RetentionConfig;
use crate::ingest::Redacted;
use crate::support::clock::SharedClock;
use crate::support::ids;
use crate::support::metrics::Metrics;

/// Held for a pass, so that hosts sharing a database take turns.
const LOCK_KEY: i64 = 0x7768_6172_665f_7274;

/// How long a partition change waits for a lock before the pass gives up until the next one.
const LOCK_TIMEOUT: &str = "5s";

/// A pass never creates more than this many days for one table (a clock set years ahead).
const MAX_CREATED_PER_PASS: usize = 400;

/// A host whose clock is further than this from the database's drops nothing: a clock days
/// ahead would otherwise expire days early.
const MAX_CLOCK_SKEW: time::Duration = time::Duration::minutes(10);

/// Which retention period a table follows.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Period {
    Payloads,
    Events,
}

struct Table {
    name: &'static str,
    period: Period,
    /// The unique index each partition gets beside its parent's (a partitioned table's unique
    /// keys must contain the partition key, so this one is per day).
    unique: Option<&'static str>,
    /// Storage options of each partition (a partitioned table has none of its own).
    with: &'static str,
}

/// In drop order: rows that refer to an event go before it.
const TABLES: [Table; 6] = [
    Table {
        name: "delivery_attempts",
        period: Period::Events,
        unique: None,
        with: "",
    },
    Table {
        name: "deliveries",
        period: Period::Events,
        unique: None,
        with: "",
    },
    Table {
        name: "processed_events",
        period: Period::Events,
        unique: None,
        with: "",
    },
    Table {
        name: "webhook_outbox",
        period: Period::Events,
        unique: None,
        with: "",
    },
    Table {
        name: "webhook_inbox",
        period: Period::Events,
        unique: Some("(provider, endpoint_id, provider_event_id)"),
        with: "",
    },
    Table {
        name: "webhook_payloads",
        period: Period::Payloads,
        unique: None,
        // A sealed payload stays in its row up to a page (migration `…_payloads_inline.sql`).
        with: "WITH (toast_tuple_target = 8160)",
    },
];

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Pass {
    /// Another host was running a pass: this one did nothing.
    pub skipped: bool,
    /// This host's clock was too far from the database's to drop anything.
    pub clock_skewed: bool,
    pub created: Vec<String>,
    pub dropped: Vec<String>,
    /// Expired partitions kept because their day still holds unfinished work.
    pub kept: Vec<String>,
    /// Rows of `ingest_stats` (per-minute request counts) deleted for being older than
    /// `event_days`.
    pub stats_deleted: u64,
}

pub struct Retention {
    pool: PgPool,
    settings: RetentionConfig,
    metrics: Arc<Metrics>,
    /// Drop by the given clock even when it disagrees with the database's (tests that move
    /// time).
    any_clock: bool,
}

impl Retention {
    pub fn new(pool: PgPool, settings: RetentionConfig, metrics: Arc<Metrics>) -> Self {
        Self {
            pool,
            settings,
            metrics,
            any_clock: false,
        }
    }

    /// Expires by `now` whatever the database's clock says (for tests that inject time).
    pub fn trusting_any_clock(mut self) -> Self {
        self.any_clock = true;
        self
    }

    /// A pass every `interval_secs` on `clock` (the host's, injectable in tests), until
    /// cancelled.
    pub async fn run(self, clock: SharedClock, cancel: CancellationToken) -> anyhow::Result<()> {
        let mut every = tokio::time::interval(Duration::from_secs(self.settings.interval_secs));
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        every.reset();
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return Ok(()),
                _ = every.tick() => self.logged_pass(clock.now()).await,
            }
        }
    }

    /// One pass as of `now`, its outcome logged (a failure is retried by the next pass; the
    /// partitions ahead leave `create_ahead_days` to fix it).
    pub async fn logged_pass(&self, now: OffsetDateTime) {
        match self.try_execute(now).await {
            Ok(pass) => {
                if !pass.kept.is_empty() {
                    tracing::warn!(kept = ?pass.kept,
                        "expired partitions kept: their day still holds unfinished events or deliveries");
                }
                if !pass.created.is_empty() || !pass.dropped.is_empty() {
                    tracing::info!(created = ?pass.created, dropped = ?pass.dropped,
                        "retention pass");
                }
            }
            Err(e) => tracing::warn!(error = %format!("{e:#}"), "retention pass failed"),
        }
    }

    /// One pass as of `now`: partitions created up to `now + create_ahead_days`, expired ones
    /// dropped. Skipped (and says so) while another host runs one.
    pub async fn try_execute(&self, now: OffsetDateTime) -> anyhow::Result<Pass> {
        let mut conn = self.pool.acquire().await.redacted()?;
        let locked: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
            .bind(LOCK_KEY)
            .fetch_one(&mut *conn)
            .await
            .redacted()?;
        if !locked {
            return Ok(Pass {
                skipped: true,
                ..Pass::default()
            });
        }
        let result = self.pass(&mut conn, now).await;
        let released = (&mut *conn).execute("RESET lock_timeout").await.and(
            sqlx::query("SELECT pg_advisory_unlock($1)")
                .bind(LOCK_KEY)
                .execute(&mut *conn)
                .await,
        );
        if released.is_err() {
            // The lock and the setting end with the session.
            conn.close_on_drop();
        }
        result
    }

    async fn pass(&self, conn: &mut PgConnection, now: OffsetDateTime) -> anyhow::Result<Pass> {
        simple(conn, &format!("SET lock_timeout = '{LOCK_TIMEOUT}'")).await?;
        let version: i32 = sqlx::query_scalar("SELECT current_setting('server_version_num')::int")
            .fetch_one(&mut *conn)
            .await
            .redacted()?;
        // Detaching without blocking the table's readers and writers needs Postgres 14.
        let concurrently = version >= 140_000;
        let db_now: OffsetDateTime = sqlx::query_scalar("SELECT now()")
            .fetch_one(&mut *conn)
            .await
            .redacted()?;
        let mut pass = Pass {
            clock_skewed: !self.any_clock && (now - db_now).abs() > MAX_CLOCK_SKEW,
            ..Pass::default()
        };
        if pass.clock_skewed {
            tracing::warn!(
                skew_secs = (now - db_now).whole_seconds(),
                "this host's clock is far from the database's: creating partitions, dropping none"
            );
        }
        let mut ready_until = i64::MAX;
        let mut unfinished: HashMap<Uuid, bool> = HashMap::new();
        let mut kept: Vec<(&str, i64)> = Vec::new();
        let mut dropped: Vec<&str> = Vec::new();
        for table in &TABLES {
            let partitions = partitions(conn, table.name).await?;
            // A plain loop: an iterator adapter held across these awaits would make the future
            // not provably Send (rustc's higher-ranked lifetime limits).
            for p in &partitions {
                if !p.detach_pending {
                    continue;
                }
                // A detach interrupted by a crash: finish it, then the drop below.
                let sql = format!(
                    "ALTER TABLE {} DETACH PARTITION {} FINALIZE",
                    table.name, p.name
                );
                simple(conn, &sql).await?;
                drop_table(conn, &p.name).await?;
                pass.dropped.push(p.name.clone());
                dropped.push(table.name);
            }

            // Detached but not dropped (the drop failed after a detach): drop it now.
            let orphans: Vec<String> = sqlx::query_scalar(
                "SELECT relname::text FROM pg_class
                 WHERE relkind = 'r' AND NOT relispartition
                   AND relname ~ ('^' || $1 || '_(p[0-9]{8}|legacy)$')",
            )
            .bind(table.name)
            .fetch_all(&mut *conn)
            .await
            .redacted()?;
            for orphan in orphans {
                drop_table(conn, &orphan).await?;
                pass.dropped.push(orphan);
                dropped.push(table.name);
            }

            // Ahead: one partition a day, from the end of the last one.
            let last = partitions.iter().filter_map(|p| p.upper).max();
            let mut day = last
                .and_then(ids::time_of)
                .unwrap_or(now)
                .date()
                .midnight()
                .assume_utc();
            let until = now + time::Duration::days(i64::from(self.settings.create_ahead_days));
            let mut made = 0;
            while day <= until && made < MAX_CREATED_PER_PASS {
                let next = day + time::Duration::DAY;
                let name = create(conn, table, day, next).await?;
                pass.created.push(name);
                day = next;
                made += 1;
            }
            ready_until = ready_until.min(day.unix_timestamp());

            // Expired: every row of the partition older than the table's period.
            let days = match table.period {
                Period::Payloads => self.settings.payload_days,
                Period::Events => self.settings.event_days,
            };
            let cutoff = ids::floor_at(now - time::Duration::days(i64::from(days)));
            let mut kept_here = 0;
            for p in partitions
                .iter()
                .take(if pass.clock_skewed { 0 } else { usize::MAX })
            {
                let Some(upper) = p.upper.filter(|u| *u <= cutoff) else {
                    continue;
                };
                if p.detach_pending {
                    continue;
                }
                let lower = p.lower.unwrap_or(Uuid::nil());
                let busy = match unfinished.get(&upper) {
                    Some(&busy) => busy,
                    None => {
                        let busy = day_unfinished(conn, lower, upper).await?;
                        unfinished.insert(upper, busy);
                        busy
                    }
                };
                if busy {
                    kept_here += 1;
                    pass.kept.push(p.name.clone());
                    continue;
                }
                detach(conn, table.name, &p.name, concurrently).await?;
                drop_table(conn, &p.name).await?;
                pass.dropped.push(p.name.clone());
                dropped.push(table.name);
            }
            kept.push((table.name, kept_here));
        }
        if !pass.clock_skewed {
            // The console's request counts follow the events they describe; a small table,
            // deleted by its key's leading minute.
            let cutoff = now - time::Duration::days(i64::from(self.settings.event_days));
            pass.stats_deleted = sqlx::query("DELETE FROM ingest_stats WHERE minute < $1")
                .bind(cutoff)
                .execute(&mut *conn)
                .await
                .redacted()?
                .rows_affected();
        }
        self.metrics.retention(&dropped, &kept, ready_until);
        Ok(pass)
    }
}

/// One partition: its name and range (`None`: MINVALUE or MAXVALUE).
struct Partition {
    name: String,
    lower: Option<Uuid>,
    upper: Option<Uuid>,
    detach_pending: bool,
}

async fn partitions(conn: &mut PgConnection, table: &str) -> anyhow::Result<Vec<Partition>> {
    let rows: Vec<(String, String, bool)> = sqlx::query_as(
        // inhdetachpending is Postgres 14's (DETACH CONCURRENTLY); read so that 13 has none.
        "SELECT c.relname::text, pg_get_expr(c.relpartbound, c.oid),
                coalesce((to_jsonb(i) ->> 'inhdetachpending')::bool, false)
         FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
         WHERE i.inhparent = $1::regclass",
    )
    .bind(table)
    .fetch_all(&mut *conn)
    .await
    .redacted()?;
    rows.into_iter()
        .map(|(name, bound, detach_pending)| {
            let (lower, upper) =
                parse_bound(&bound).with_context(|| format!("partition {name}: bound {bound}"))?;
            Ok(Partition {
                name,
                lower,
                upper,
                detach_pending,
            })
        })
        .collect()
}

/// `FOR VALUES FROM ('<uuid>' | MINVALUE) TO ('<uuid>' | MAXVALUE)`.
fn parse_bound(bound: &str) -> anyhow::Result<(Option<Uuid>, Option<Uuid>)> {
    let rest = bound
        .strip_prefix("FOR VALUES FROM (")
        .context("not a range")?;
    let (from, rest) = rest.split_once(") TO (").context("no upper bound")?;
    let to = rest.strip_suffix(')').context("unterminated")?;
    let value = |v: &str| -> anyhow::Result<Option<Uuid>> {
        match v {
            "MINVALUE" | "MAXVALUE" => Ok(None),
            quoted => {
                let inner = quoted
                    .strip_prefix('\'')
                    .and_then(|v| v.strip_suffix('\''))
                    .context("not a quoted value")?;
                Ok(Some(Uuid::parse_str(inner)?))
            }
        }
    };
    Ok((value(from)?, value(to)?))
}

/// Creates and attaches `table`'s partition for [`from`, `to`), with the parent's indexes and
/// storage settings, in one implicit transaction. Attaching an empty table takes no lock that
/// stops readers or writers of the parent.
async fn create(
    conn: &mut PgConnection,
    table: &Table,
    from: OffsetDateTime,
    to: OffsetDateTime,
) -> anyhow::Result<String> {
    let date = from.date();
    let name = format!(
        "{}_p{:04}{:02}{:02}",
        table.name,
        date.year(),
        u8::from(date.month()),
        date.day()
    );
    let unique = table.unique.map_or(String::new(), |columns| {
        format!("CREATE UNIQUE INDEX {name}_logical_event ON {name} {columns};")
    });
    let sql = format!(
        "CREATE TABLE {name} (LIKE {parent} INCLUDING ALL) {with};
         {unique}
         ALTER TABLE {parent} ATTACH PARTITION {name}
             FOR VALUES FROM ('{lo}') TO ('{hi}');",
        parent = table.name,
        with = table.with,
        lo = ids::floor_at(from),
        hi = ids::floor_at(to),
    );
    simple(conn, &sql).await?;
    Ok(name)
}

/// Whether the day [`lower`, `upper`) still has work to do: events pending or processing,
/// deliveries pending, accepted-event notices unpublished. Each through its partial index.
async fn day_unfinished(conn: &mut PgConnection, lower: Uuid, upper: Uuid) -> anyhow::Result<bool> {
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM webhook_inbox
                        WHERE inbox_id >= $1 AND inbox_id < $2
                          AND status IN ('PENDING', 'PROCESSING'))
             OR EXISTS (SELECT 1 FROM deliveries
                        WHERE inbox_id >= $1 AND inbox_id < $2 AND status = 'PENDING')
             OR EXISTS (SELECT 1 FROM webhook_outbox
                        WHERE outbox_id >= $1 AND outbox_id < $2 AND published_at IS NULL)",
    )
    .bind(lower)
    .bind(upper)
    .fetch_one(&mut *conn)
    .await
    .redacted()
    .map_err(Into::into)
}

async fn detach(
    conn: &mut PgConnection,
    table: &str,
    partition: &str,
    concurrently: bool,
) -> anyhow::Result<()> {
    let how = if concurrently { " CONCURRENTLY" } else { "" };
    simple(
        conn,
        &format!("ALTER TABLE {table} DETACH PARTITION {partition}{how}"),
    )
    .await
}

async fn drop_table(conn: &mut PgConnection, name: &str) -> anyhow::Result<()> {
    simple(conn, &format!("DROP TABLE {name}")).await
}

/// Statements without parameters, sent as one simple query: several run as one implicit
/// transaction, and `DETACH … CONCURRENTLY` is allowed (it is not in a transaction block).
async fn simple(conn: &mut PgConnection, sql: &str) -> anyhow::Result<()> {
    conn.execute(sql).await.redacted()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_parse() {
        let (lo, hi) =
            parse_bound("FOR VALUES FROM (MINVALUE) TO ('01a23933-6800-7000-8000-000000000000')")
                .unwrap();
        assert_eq!(lo, None);
        assert_eq!(
            hi.unwrap().to_string(),
            "01a23933-6800-7000-8000-000000000000"
        );
        let (lo, hi) = parse_bound(
            "FOR VALUES FROM ('01a23933-6800-7000-8000-000000000000') TO \
             ('01a23e59-c400-7000-8000-000000000000')",
        )
        .unwrap();
        assert!(lo.is_some() && hi.is_some());
        assert!(parse_bound("FOR VALUES IN ('x')").is_err());
    }
}
