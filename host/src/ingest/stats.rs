//! Per-minute counts of the public route's answers for the console's overview (accepted,
//! duplicate, each rejection code, acknowledgement latency), which the inbox cannot tell:
//! duplicates and refusals leave no row. Counted in memory on the answer's path (a short
//! lock and an add), written by one task every `FLUSH_EVERY` as an upsert that adds, so
//! every receiver sharing a database adds its own counts to the same rows.
//!
//! Statistics only: a receiver that crashes loses at most its last `FLUSH_EVERY` of counts,
//! never an event (acceptance never waits for them). The flush has its own connection, so it
//! never takes one acceptance is waiting for; a flush that fails keeps its counts for the
//! next one, up to `MAX_KEPT` keys.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use tokio_util::sync::CancellationToken;

use super::redacted::Redacted;

/// Upper bounds of the latency buckets, in milliseconds; one more bucket counts what is
/// slower than the last. Fixed: the rows of every receiver add up bucket by bucket.
pub const BUCKET_BOUNDS_MS: [f64; 14] = [
    0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0, 10000.0,
];

/// Buckets per row: one per bound, and one past the last.
pub const BUCKETS: usize = BUCKET_BOUNDS_MS.len() + 1;

/// Where requests to endpoints that are not configured are counted: not an endpoint id
/// (those are `[A-Za-z0-9._-]`), so it cannot be mistaken for one.
pub const UNKNOWN_ENDPOINT: &str = "(unknown)";

/// How often the counts are written.
pub const FLUSH_EVERY: Duration = Duration::from_secs(10);

/// Keys held across failed flushes at most (minutes x endpoints x outcomes): past it, a
/// database down for hours costs its counts rather than the receiver's memory.
const MAX_KEPT: usize = 100_000;

/// How long a flush may take before it gives up until the next one.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cell {
    pub count: i64,
    pub buckets: [i64; BUCKETS],
}

impl Cell {
    fn add(&mut self, other: &Cell) {
        self.count += other.count;
        for (a, b) in self.buckets.iter_mut().zip(other.buckets) {
            *a += b;
        }
    }
}

/// Counts by endpoint, then by (minute since the epoch, outcome): looked up by the endpoint's
/// `&str`, so counting allocates only for an endpoint's first request.
type Counts = HashMap<String, HashMap<(i64, &'static str), Cell>>;

/// One receiver's counts not yet written.
#[derive(Debug, Default)]
pub struct IngestStats {
    counts: Mutex<Counts>,
}

/// The bucket of a latency.
pub fn bucket_of(elapsed: Duration) -> usize {
    let ms = elapsed.as_secs_f64() * 1000.0;
    BUCKET_BOUNDS_MS
        .iter()
        .position(|bound| ms <= *bound)
        .unwrap_or(BUCKET_BOUNDS_MS.len())
}

/// The `q` quantile (0..=1) of summed buckets, interpolated within its bucket, in ms; `None`
/// without a count. Past the last bound it says the last bound (a floor: slower than it).
pub fn quantile_ms(buckets: &[i64], q: f64) -> Option<f64> {
    let total: i64 = buckets.iter().sum();
    if total <= 0 {
        return None;
    }
    let rank = (q.clamp(0.0, 1.0) * total as f64).max(1.0);
    let mut seen = 0i64;
    for (i, &n) in buckets.iter().enumerate() {
        if n > 0 && (seen + n) as f64 >= rank {
            let Some(&upper) = BUCKET_BOUNDS_MS.get(i) else {
                return BUCKET_BOUNDS_MS.last().copied();
            };
            let lower = if i == 0 { 0.0 } else { BUCKET_BOUNDS_MS[i - 1] };
            let within = (rank - seen as f64) / n as f64;
            return Some(lower + (upper - lower) * within);
        }
        seen += n;
    }
    BUCKET_BOUNDS_MS.last().copied()
}

impl IngestStats {
    /// Counts one answer: `endpoint` is a configured endpoint's id, `None` for any other path.
    pub fn record(&self, endpoint: Option<&str>, outcome: &'static str, elapsed: Duration) {
        let minute = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| (d.as_secs() / 60) as i64);
        let endpoint = endpoint.unwrap_or(UNKNOWN_ENDPOINT);
        let bucket = bucket_of(elapsed);
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let cells = match counts.get_mut(endpoint) {
            Some(cells) => cells,
            None => counts.entry(endpoint.to_owned()).or_default(),
        };
        let cell = cells.entry((minute, outcome)).or_default();
        cell.count += 1;
        cell.buckets[bucket] += 1;
    }

    /// Everything counted since the last take, sorted (concurrent flushes of several
    /// receivers then lock shared rows in one order), leaving nothing.
    fn take(&self) -> Vec<(i64, String, &'static str, Cell)> {
        let counts = std::mem::take(&mut *self.counts.lock().unwrap_or_else(|p| p.into_inner()));
        let mut rows: Vec<_> = counts
            .into_iter()
            .flat_map(|(endpoint, cells)| {
                cells
                    .into_iter()
                    .map(move |((minute, outcome), cell)| (minute, endpoint.clone(), outcome, cell))
            })
            .collect();
        rows.sort_by(|a, b| (a.0, &a.1, a.2).cmp(&(b.0, &b.1, b.2)));
        rows
    }

    /// Puts back what a failed flush took, added to what was counted meanwhile.
    fn put_back(&self, rows: Vec<(i64, String, &'static str, Cell)>) {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let held: usize = counts.values().map(HashMap::len).sum();
        if held + rows.len() > MAX_KEPT {
            tracing::warn!(
                dropped = rows.len(),
                "request statistics dropped: the database has refused them for too long"
            );
            return;
        }
        for (minute, endpoint, outcome, cell) in rows {
            counts
                .entry(endpoint)
                .or_default()
                .entry((minute, outcome))
                .or_default()
                .add(&cell);
        }
    }

    /// Writes what was counted since the last flush, adding it to the rows already there
    /// (other receivers', earlier flushes'); on failure keeps it for the next flush. Gives how
    /// many rows it wrote.
    pub async fn flush(&self, pool: &PgPool) -> anyhow::Result<usize> {
        let rows = self.take();
        if rows.is_empty() {
            return Ok(0);
        }
        let written = tokio::time::timeout(FLUSH_TIMEOUT, write(pool, &rows)).await;
        match written {
            Ok(Ok(())) => Ok(rows.len()),
            Ok(Err(e)) => {
                self.put_back(rows);
                Err(e)
            }
            Err(_) => {
                self.put_back(rows);
                anyhow::bail!("writing request statistics took longer than {FLUSH_TIMEOUT:?}")
            }
        }
    }

    /// Flushes every `FLUSH_EVERY` on a connection of its own to `database_url`, and once more
    /// when cancelled.
    pub async fn run(
        self: std::sync::Arc<Self>,
        database_url: String,
        cancel: CancellationToken,
    ) -> anyhow::Result<()> {
        let options: PgConnectOptions = database_url.parse()?;
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .acquire_timeout(FLUSH_TIMEOUT)
            .connect_lazy_with(options.application_name("wharf-stats"));
        let mut every = tokio::time::interval(FLUSH_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        every.reset();
        loop {
            let last = tokio::select! {
                _ = cancel.cancelled() => true,
                _ = every.tick() => false,
            };
            if let Err(e) = self.flush(&pool).await {
                tracing::warn!(error = %format!("{e:#}"), "request statistics not written");
            }
            if last {
                pool.close().await;
                return Ok(());
            }
        }
    }
}

async fn write(pool: &PgPool, rows: &[(i64, String, &'static str, Cell)]) -> anyhow::Result<()> {
    let minutes: Vec<i64> = rows.iter().map(|r| r.0).collect();
    let endpoints: Vec<&str> = rows.iter().map(|r| r.1.as_str()).collect();
    let outcomes: Vec<&str> = rows.iter().map(|r| r.2).collect();
    let counts: Vec<i64> = rows.iter().map(|r| r.3.count).collect();
    // A flat array, sliced per row: unnest would flatten a two-dimensional one.
    let buckets: Vec<i64> = rows.iter().flat_map(|r| r.3.buckets).collect();
    sqlx::query(
        "INSERT INTO ingest_stats AS s (minute, endpoint_id, outcome, count, latency_buckets)
         SELECT to_timestamp(r.minute * 60), r.endpoint_id, r.outcome, r.count,
                ($5::bigint[])[(r.n - 1) * $6 + 1 : r.n * $6]
         FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bigint[]) WITH ORDINALITY
             AS r(minute, endpoint_id, outcome, count, n)
         ON CONFLICT (minute, endpoint_id, outcome) DO UPDATE
         SET count = s.count + excluded.count,
             latency_buckets = ARRAY(
                 SELECT coalesce(a, 0) + coalesce(b, 0)
                 FROM unnest(s.latency_buckets, excluded.latency_buckets) WITH ORDINALITY
                     AS t(a, b, i)
                 ORDER BY i)",
    )
    .bind(&minutes)
    .bind(&endpoints)
    .bind(&outcomes)
    .bind(&counts)
    .bind(&buckets)
    .bind(BUCKETS as i64)
    .execute(pool)
    .await
    .redacted()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_fall_in_their_buckets() {
        assert_eq!(bucket_of(Duration::from_micros(400)), 0);
        assert_eq!(bucket_of(Duration::from_micros(500)), 0);
        assert_eq!(bucket_of(Duration::from_micros(501)), 1);
        assert_eq!(bucket_of(Duration::from_millis(3)), 3);
        assert_eq!(bucket_of(Duration::from_secs(60)), BUCKETS - 1);
    }

    #[test]
    fn quantiles_interpolate_within_their_bucket() {
        let mut buckets = [0i64; BUCKETS];
        assert_eq!(quantile_ms(&buckets, 0.5), None);
        // 100 answers between 2 and 5 ms: the median halfway.
        buckets[3] = 100;
        assert_eq!(quantile_ms(&buckets, 0.5), Some(3.5));
        assert_eq!(quantile_ms(&buckets, 1.0), Some(5.0));
        // One slow answer past every bound: p99 stays in the 2-5 ms bucket, max is the floor.
        buckets[BUCKETS - 1] = 1;
        assert!(quantile_ms(&buckets, 0.99).unwrap() <= 5.0);
        assert_eq!(quantile_ms(&buckets, 1.0), Some(10000.0));
    }

    #[test]
    fn counts_are_taken_once_and_put_back_whole() {
        let stats = IngestStats::default();
        stats.record(Some("a"), "accepted", Duration::from_millis(1));
        stats.record(Some("a"), "accepted", Duration::from_millis(1));
        stats.record(None, "unknown_endpoint", Duration::from_millis(1));
        let rows = stats.take();
        assert_eq!(rows.len(), 2);
        assert!(stats.take().is_empty());
        stats.put_back(rows);
        stats.record(Some("a"), "accepted", Duration::from_millis(1));
        let rows = stats.take();
        let accepted = rows.iter().find(|r| r.1 == "a").unwrap();
        // Unless the minute turned between the records.
        assert!(accepted.3.count == 3 || rows.len() == 3);
        assert!(rows.iter().any(|r| r.1 == UNKNOWN_ENDPOINT));
    }
}
