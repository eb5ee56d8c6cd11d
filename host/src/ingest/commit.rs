//! Group commit: requests that arrive together are accepted in one transaction.
//!
//! A dispatcher hands whatever is queued to the next free writer (at most `writers` commit at
//! once, each batch at most `max_batch_events`, optionally waiting `max_wait` for companions);
//! while a batch is in flight, the next one gathers companions until that commit ends or it
//! holds a quarter of `max_batch_events`, and only then takes a second writer: so batches grow
//! with load, a lone request goes at once, and more writers run only when one cannot keep up
//! (a slow flush, a checkpoint). Each request is answered from its own part of the result,
//! only after the commit.
//!
//! Why not every free writer at once: each transaction costs Postgres about as much again as
//! its rows, so at 2,000 requests/s four writers taking turns committed three events each and
//! spent the CPU the requests then queued for (docs/performance.md, "Fewer, fuller acceptance
//! transactions").
//!
//! Duplicates inside a batch are resolved here, before the database sees them: one row per
//! logical event, owned by its first occurrence, whose payload (and span of it) backs it.
//! Duplicates of rows already stored are found across the day partitions of the endpoint's
//! redelivery window, under a transaction lock on each key (a partition's unique index cannot
//! see its neighbours): two batches holding the same new key, even on either side of midnight,
//! take turns, and the second sees the first's row. Keys are locked, and rows go, in key
//! order, so concurrent batches cannot deadlock.
//! A batch the database refuses (a trigger, a constraint) is split in halves until the request
//! at fault fails alone: one bad row never fails its neighbours.
//!
//! Where this host runs workers, the batch's new events are leased to them in the same
//! statement while they have room, and handed over after the commit (`handoff`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use futures::future::BoxFuture;
use sha2::{Digest, Sha256};
use sqlx::PgPool;
use time::OffsetDateTime;
use tokio::sync::{Notify, Semaphore, mpsc};
use uuid::Uuid;

use super::handoff::{Claim, Handoff, Reservation};
use super::pending::Pending;
use super::rows::{Acceptance, NewEvent, StoreError, StoredVersion, redact_db};
use crate::support::columns::column;
use crate::support::ids;
use crate::support::metrics::Metrics;

/// How acceptance transactions are formed (`[database] accept_*`).
#[derive(Debug, Clone, Copy)]
pub struct CommitSettings {
    pub writers: usize,
    pub max_batch_events: usize,
    pub max_wait: Duration,
    /// While a batch is in flight, longest the next one gathers companions (up to a quarter
    /// of `max_batch_events`) before taking a writer of its own; zero: it goes at once.
    pub gather: Duration,
    /// Longest a batch may take in the database (`commit_timeout_ms`): past it the statement
    /// is abandoned with its connection, so a database that hangs does not hold a writer.
    pub timeout: Duration,
    /// The outbox rows are written already published: set when nothing publishes the
    /// accepted-event notices (no `[nats]`), instead of the relay marking each row after the
    /// commit (migration 20261203100001).
    pub notices_published: bool,
}

impl Default for CommitSettings {
    fn default() -> Self {
        Self {
            writers: 4,
            max_batch_events: 64,
            max_wait: Duration::ZERO,
            gather: Duration::from_millis(5),
            timeout: Duration::from_millis(1500),
            notices_published: false,
        }
    }
}

/// The queue in front of the acceptance writers. Its depth is bounded by admission (requests
/// in flight) and the body budget, not here.
pub(super) struct GroupCommit {
    queue: mpsc::UnboundedSender<Pending>,
}

impl GroupCommit {
    /// Starts the dispatcher on the current runtime; it ends when the last sender is dropped.
    pub(super) fn start(
        pool: PgPool,
        settings: CommitSettings,
        handoff: Option<Arc<Handoff>>,
        metrics: Arc<Metrics>,
    ) -> Self {
        let (queue, rx) = mpsc::unbounded_channel();
        tokio::spawn(dispatch(pool, settings, handoff, metrics, rx));
        Self { queue }
    }

    pub(super) fn submit(&self, pending: Pending) -> Result<(), StoreError> {
        self.queue
            .send(pending)
            .map_err(|_| StoreError::WriterStopped)
    }
}

async fn dispatch(
    pool: PgPool,
    settings: CommitSettings,
    handoff: Option<Arc<Handoff>>,
    metrics: Arc<Metrics>,
    mut rx: mpsc::UnboundedReceiver<Pending>,
) {
    let count = settings.writers.max(1);
    let writers = Arc::new(Semaphore::new(count));
    // Signalled when a batch's commit ends and its writer is free again.
    let finished = Arc::new(Notify::new());
    let spread_at = (settings.max_batch_events / 4).max(1);
    // A request taken from the queue that would have overfilled the previous batch.
    let mut carried: Option<Pending> = None;
    loop {
        let Ok(writer) = Arc::clone(&writers).acquire_owned().await else {
            return;
        };
        let first = match carried.take() {
            Some(p) => p,
            None => match rx.recv().await {
                Some(p) => p,
                None => return,
            },
        };
        let mut events = first.events();
        let mut batch = vec![first];
        let deadline = Instant::now() + settings.max_wait;
        while events < settings.max_batch_events {
            let next = match rx.try_recv() {
                Ok(p) => p,
                Err(_) if settings.max_wait.is_zero() => break,
                Err(_) => match tokio::time::timeout_at(deadline.into(), rx.recv()).await {
                    Ok(Some(p)) => p,
                    _ => break,
                },
            };
            if !join(&mut batch, &mut events, next, settings, &mut carried) {
                break;
            }
        }
        // Another batch in flight: this one would mostly wait for that commit's flush anyway,
        // so it gathers what arrives meanwhile rather than start a second transaction; but
        // not behind a commit that takes unusually long (a lock, a stalled flush).
        let gather_until = tokio::time::Instant::now() + settings.gather;
        while carried.is_none() && events < spread_at && !settings.gather.is_zero() {
            let ended = finished.notified();
            tokio::pin!(ended);
            // Registered before looking, so a commit ending in between is not missed.
            ended.as_mut().enable();
            if writers.available_permits() + 1 >= count {
                break;
            }
            let next = tokio::select! {
                biased;
                _ = &mut ended => break,
                _ = tokio::time::sleep_until(gather_until) => break,
                next = rx.recv() => match next {
                    Some(p) => p,
                    None => break,
                },
            };
            if !join(&mut batch, &mut events, next, settings, &mut carried) {
                break;
            }
        }
        let (pool, metrics, finished) = (pool.clone(), Arc::clone(&metrics), Arc::clone(&finished));
        let handoff = handoff.clone();
        tokio::spawn(async move {
            commit(&pool, batch, settings, handoff.as_deref(), Some(&metrics)).await;
            drop(writer);
            finished.notify_waiters();
        });
    }
}

/// Adds `next` to the batch, or keeps it for the next batch (false) when it would overfill
/// this one.
fn join(
    batch: &mut Vec<Pending>,
    events: &mut usize,
    next: Pending,
    settings: CommitSettings,
    carried: &mut Option<Pending>,
) -> bool {
    if *events + next.events() > settings.max_batch_events {
        *carried = Some(next);
        return false;
    }
    *events += next.events();
    batch.push(next);
    true
}

/// Commits the batch and answers every request in it; splits it when the database refuses it.
pub(super) fn commit<'a>(
    pool: &'a PgPool,
    mut batch: Vec<Pending>,
    settings: CommitSettings,
    handoff: Option<&'a Handoff>,
    metrics: Option<&'a Metrics>,
) -> BoxFuture<'a, ()> {
    Box::pin(async move {
        // A request that has already answered 503 (its commit timeout passed) is not written:
        // under overload the database's time goes to requests still waiting.
        batch.retain(|p| !p.reply.is_closed());
        if batch.is_empty() {
            return;
        }
        let started = Instant::now();
        let timeout = settings.timeout;
        let inserted = insert(pool, &batch, settings.notices_published, handoff);
        let Ok(result) = tokio::time::timeout(timeout, inserted).await else {
            for pending in batch {
                let _ = pending.reply.send(Err(StoreError::Timeout(timeout)));
            }
            return;
        };
        match result {
            Ok(results) => {
                if let Some(m) = metrics {
                    let events = batch.iter().map(Pending::events).sum::<usize>();
                    m.accept_batch(events, started.elapsed().as_secs_f64());
                }
                for (pending, result) in batch.into_iter().zip(results) {
                    let _ = pending.reply.send(Ok(result));
                }
            }
            // The server refused something in the batch: find the request at fault.
            Err(e @ sqlx::Error::Database(_)) if batch.len() > 1 => {
                tracing::warn!(
                    requests = batch.len(),
                    cause = %redact_db(&e),
                    "acceptance batch refused; retrying it in halves"
                );
                if let Some(m) = metrics {
                    m.accept_batch_split();
                }
                let right = batch.split_off(batch.len() / 2);
                commit(pool, batch, settings, handoff, metrics).await;
                commit(pool, right, settings, handoff, metrics).await;
            }
            Err(e) => {
                let e = Arc::new(e);
                for pending in batch {
                    let _ = pending
                        .reply
                        .send(Err(StoreError::Database(Arc::clone(&e))));
                }
            }
        }
    })
}

/// One distinct logical event of a batch, owned by the request where it first appears (its
/// `index`th event).
struct Row<'a> {
    inbox_id: Uuid,
    owner: usize,
    index: usize,
    event: &'a NewEvent,
}

/// What each event of a request resolved to: its row, and whether the request owns it.
type Slot = (usize, bool);

/// Inserts every distinct event of the batch with its outbox row, and the payloads of the
/// requests that own an inserted row, in one transaction: the keys' locks, then one query
/// that finds the copies already stored and inserts the rest.
async fn insert(
    pool: &PgPool,
    batch: &[Pending],
    notices_published: bool,
    handoff: Option<&Handoff>,
) -> Result<Vec<Vec<Acceptance>>, sqlx::Error> {
    let mut index: HashMap<(&str, &str, &str), usize> = HashMap::new();
    let mut rows: Vec<Row<'_>> = Vec::new();
    let mut slots: Vec<Vec<Slot>> = Vec::with_capacity(batch.len());
    for (owner, pending) in batch.iter().enumerate() {
        let mut mine = Vec::with_capacity(pending.events());
        for (nth, event) in pending.submission.events.iter().enumerate() {
            let key = (
                event.provider.as_str(),
                event.endpoint_id.as_str(),
                event.event_id.as_str(),
            );
            let next = rows.len();
            let row = *index.entry(key).or_insert(next);
            if row == next {
                rows.push(Row {
                    inbox_id: pending.rows[nth].0,
                    owner,
                    index: nth,
                    event,
                });
            }
            mine.push((row, row == next));
        }
        slots.push(mine);
    }
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_unstable_by_key(|&r| {
        let e = rows[r].event;
        (&e.provider, &e.endpoint_id, &e.event_id)
    });

    let columns = Columns::new(&rows, &order, batch);
    // The first rows, as far as there is room, are leased to this host's workers. A claim
    // token only has to be new (a worker's own are `gen_random_uuid()`): version 7 ids never
    // repeat within a process, and their random bits keep hosts apart.
    let reservation = handoff.map(|h| h.reserve(rows.len()));
    let leased = reservation.as_ref().map_or(0, Reservation::granted);
    let claim_ids: Vec<Option<Uuid>> = (0..order.len())
        .map(|i| (i < leased).then(Uuid::now_v7))
        .collect();
    let lease_secs = handoff.map_or(0.0, |h| h.lease().as_secs_f64());
    let mut locks: Vec<i64> = rows.iter().map(|r| lock_key(r.event)).collect();
    locks.sort_unstable();
    locks.dedup();
    // One round trip: the locks, then the lookup and inserts, in one transaction
    // (`wharf_accept`, migration 20261203000002, says how its two queries keep the locks'
    // guarantee; 20261203100001 added three arguments, 20261204090001 the rows' links).
    let resolved: Vec<(Uuid, Uuid, bool)> = sqlx::query_as(
        "SELECT row_id, stored_id, fresh FROM wharf_accept($25, $1, $2, $3, $4, $5, $6, $7,
            $8, $9, $10, $11, $12, $13, $14, $15, $16, $20, $21, $24, $22, $17, $18, $19, $23,
            $26, $27, $28, $29, $30)",
    )
    .bind(columns.inbox_ids)
    .bind(columns.providers)
    .bind(columns.endpoint_ids)
    .bind(columns.event_ids)
    .bind(columns.event_types)
    .bind(columns.object_ids)
    .bind(columns.version_kinds)
    .bind(columns.versions)
    .bind(columns.created_at)
    .bind(columns.payload_refs)
    .bind(columns.payload_hashes)
    .bind(columns.secret_versions)
    .bind(columns.outbox_ids)
    .bind(columns.topics)
    .bind(columns.payload_starts)
    .bind(columns.payload_ends)
    .bind(column(batch, |p| p.payload_ref))
    .bind(column(batch, |p| p.sealed.key_id.as_str()))
    .bind(column(batch, |p| p.sealed.bytes.as_slice()))
    .bind(&columns.received_at)
    .bind(&columns.dedup_floors)
    .bind(
        columns
            .dedup_floors
            .iter()
            .min()
            .copied()
            .unwrap_or_default(),
    )
    .bind(column(batch, |p| p.submission.received_at))
    .bind(columns.trace_contexts)
    .bind(&locks)
    .bind(notices_published)
    .bind(&claim_ids)
    .bind(lease_secs)
    .bind(columns.link_keys)
    .bind(columns.links)
    .fetch_all(pool)
    .await?;

    let by_row: HashMap<Uuid, usize> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| (r.inbox_id, i))
        .collect();
    let mut found: Vec<Option<Uuid>> = vec![None; rows.len()];
    let mut inserted: HashSet<Uuid> = HashSet::new();
    for (row_id, id, fresh) in resolved {
        if let Some(&r) = by_row.get(&row_id) {
            found[r] = Some(id);
            if fresh {
                inserted.insert(id);
            }
        }
    }

    if let Some(reservation) = reservation {
        let claimed_at = SystemTime::now();
        let claims = order
            .iter()
            .zip(&claim_ids)
            .filter_map(|(&r, claim_id)| {
                let row = &rows[r];
                let claim_id = (*claim_id).filter(|_| inserted.contains(&row.inbox_id))?;
                Some(leased_claim(row, &batch[row.owner], claim_id, claimed_at))
            })
            .collect();
        reservation.hand_over(claims);
    }

    slots
        .into_iter()
        .map(|mine| {
            mine.into_iter()
                .map(|(row, owns)| {
                    // Skipped by the partition's unique key yet not found in the window: a
                    // copy outside the window in the same day, or a purge. Outcome unknown.
                    let id = found[row].ok_or(sqlx::Error::RowNotFound)?;
                    Ok(if owns && inserted.contains(&id) {
                        Acceptance::Accepted(id)
                    } else {
                        Acceptance::Duplicate(id)
                    })
                })
                .collect()
        })
        .collect()
}

/// What a worker's claim would have read back for a row leased at acceptance.
fn leased_claim(row: &Row<'_>, pending: &Pending, claim_id: Uuid, claimed_at: SystemTime) -> Claim {
    let e = row.event;
    let (version_kind, version) = version_columns(e.object_version);
    Claim {
        inbox_id: row.inbox_id,
        provider: e.provider.clone(),
        endpoint_id: e.endpoint_id.clone(),
        event_id: e.event_id.clone(),
        event_type: e.event_type.clone(),
        object_id: e.object_id.clone(),
        version_kind: version_kind.map(str::to_owned),
        version,
        payload_ref: pending.payload_ref,
        payload_span: e.payload_span,
        payload_hash: pending.payload_hash.to_vec(),
        payload_link: Some(pending.rows[row.index].1.clone()),
        attempt: 1,
        claim_id,
        trace_context: pending.submission.trace_context.clone(),
        claimed_at,
        payload_committed: true,
    }
}

/// `object_version_kind` and `object_version` of an event's row.
fn version_columns(version: Option<StoredVersion>) -> (Option<&'static str>, Option<i64>) {
    match version {
        Some(StoredVersion::Sequence(v)) => (Some("sequence"), Some(v)),
        Some(StoredVersion::CreatedAt(v)) => (Some("created_at"), Some(v)),
        None => (None, None),
    }
}

/// The transaction lock that serialises acceptances of one logical event: 64 bits of a hash
/// of its key, the same on every host.
fn lock_key(e: &NewEvent) -> i64 {
    let mut h = Sha256::new();
    for part in [&e.provider, &e.endpoint_id, &e.event_id] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part.as_bytes());
    }
    let digest = h.finalize();
    i64::from_be_bytes(digest[..8].try_into().expect("8 bytes"))
}

/// The batch's distinct rows as one array per column, in key order.
struct Columns<'a> {
    inbox_ids: Vec<Uuid>,
    providers: Vec<&'a str>,
    endpoint_ids: Vec<&'a str>,
    event_ids: Vec<&'a str>,
    event_types: Vec<&'a str>,
    object_ids: Vec<Option<&'a str>>,
    version_kinds: Vec<Option<&'static str>>,
    versions: Vec<Option<i64>>,
    created_at: Vec<Option<OffsetDateTime>>,
    payload_refs: Vec<Uuid>,
    payload_hashes: Vec<&'a [u8]>,
    secret_versions: Vec<&'a str>,
    outbox_ids: Vec<Uuid>,
    topics: Vec<String>,
    /// The owning occurrence's span: a copy of the event in a later request is answered
    /// `duplicate`, and the row points into the owner's payload.
    payload_starts: Vec<Option<i64>>,
    payload_ends: Vec<Option<i64>>,
    received_at: Vec<OffsetDateTime>,
    /// The smallest id a stored copy may have to make this event a duplicate.
    dedup_floors: Vec<Uuid>,
    /// The owning request's span (`traceparent`), when tracing is on.
    trace_contexts: Vec<Option<&'a str>>,
    /// Each row's link to its payload: the key id and the tag (`pending`).
    link_keys: Vec<&'a str>,
    links: Vec<&'a [u8]>,
}

impl<'a> Columns<'a> {
    fn new(rows: &[Row<'a>], order: &[usize], batch: &'a [Pending]) -> Self {
        let n = order.len();
        let mut c = Columns {
            inbox_ids: Vec::with_capacity(n),
            providers: Vec::with_capacity(n),
            endpoint_ids: Vec::with_capacity(n),
            event_ids: Vec::with_capacity(n),
            event_types: Vec::with_capacity(n),
            object_ids: Vec::with_capacity(n),
            version_kinds: Vec::with_capacity(n),
            versions: Vec::with_capacity(n),
            created_at: Vec::with_capacity(n),
            payload_refs: Vec::with_capacity(n),
            payload_hashes: Vec::with_capacity(n),
            secret_versions: Vec::with_capacity(n),
            outbox_ids: Vec::with_capacity(n),
            topics: Vec::with_capacity(n),
            payload_starts: Vec::with_capacity(n),
            payload_ends: Vec::with_capacity(n),
            received_at: Vec::with_capacity(n),
            dedup_floors: Vec::with_capacity(n),
            trace_contexts: Vec::with_capacity(n),
            link_keys: Vec::with_capacity(n),
            links: Vec::with_capacity(n),
        };
        for &r in order {
            let Row {
                inbox_id,
                owner,
                index,
                event,
            } = rows[r];
            let pending = &batch[owner];
            let link = &pending.rows[index].1;
            c.link_keys.push(&link.key_id);
            c.links.push(&link.tag);
            let (kind, version) = version_columns(event.object_version);
            c.inbox_ids.push(inbox_id);
            c.providers.push(&event.provider);
            c.endpoint_ids.push(&event.endpoint_id);
            c.event_ids.push(&event.event_id);
            c.event_types.push(&event.event_type);
            c.object_ids.push(event.object_id.as_deref());
            c.version_kinds.push(kind);
            c.versions.push(version);
            c.created_at.push(event.created_at);
            c.payload_refs.push(pending.payload_ref);
            c.payload_hashes.push(&pending.payload_hash);
            c.secret_versions
                .push(&pending.submission.matched_secret_version);
            c.outbox_ids
                .push(ids::id_at(pending.submission.received_at));
            c.received_at.push(pending.submission.received_at);
            c.dedup_floors.push(ids::floor_at(
                pending.submission.received_at - pending.submission.redelivery_window,
            ));
            c.topics.push(crate::support::subjects::accepted_topic(
                &event.endpoint_id,
                &event.event_type,
            ));
            c.payload_starts
                .push(event.payload_span.map(|(start, _)| start));
            c.payload_ends.push(event.payload_span.map(|(_, end)| end));
            c.trace_contexts
                .push(pending.submission.trace_context.as_deref());
        }
        c
    }
}
