//! The body budget (`[server] max_buffered_bytes`): the bytes that request bodies hold together
//! from their arrival to their answer, and how one body is read under it.
//!
//! Bytes are reserved as they arrive, never on a declared length: a client that declares 1 MiB
//! and sends one byte holds one byte (64 such clients used to fill 64 MiB and turn every other
//! request away for the whole body deadline). Each body is read under three bounds:
//!
//! - the body deadline (`body_timeout_ms`) from its head: 408 `body_timeout`;
//! - once its grace period (`body_grace_ms`) is over, a minimum rate
//!   (`body_min_bytes_per_second`): by `grace + t` it must have sent `rate × t` bytes (as
//!   Apache's `MinRate`), or it is cut, 408 `body_timeout`;
//! - when the budget is full, the uploads past their grace period that send slowest (fewest
//!   bytes per second since their head) give way to the request that needs the room. They are
//!   answered 503 `overloaded` with `Retry-After`: the receiver ran out of room, the client
//!   was not late, and it should retry. With nothing to give way, the newcomer is the one
//!   answered 503 `overloaded`.
//!
//! A request whose first bytes could not fit when its head comes, with nothing to give way, is
//! refused before its body is read. A body read whole no longer gives way: it holds its bytes
//! until its answer.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::body::Body;
use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt as _;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::config::ServerConfig;
use crate::ingest::IngestError;
use crate::support::metrics::Metrics;

/// What must fit, or be freed, when a head comes for its body to be read at all: its declared
/// length up to about one read of the socket.
const FIRST_BYTES: u64 = 16 << 10;
/// How long a request waits for the bytes of the uploads that gave way to it (they free them
/// within microseconds; the bound is for one that does not).
const GIVE_WAY_WAIT: Duration = Duration::from_millis(500);

pub struct BodyBudget {
    bytes: Arc<Semaphore>,
    /// Bodies being read, which may be asked to give way.
    uploads: Mutex<HashMap<u64, Arc<Upload>>>,
    next_id: AtomicU64,
    timeout: Duration,
    grace: Duration,
    min_rate: u64,
}

/// One body being read.
struct Upload {
    started: Instant,
    /// Bytes received, all reserved.
    held: AtomicU64,
    giving_way: AtomicBool,
    give_way: Notify,
}

impl Upload {
    /// Bytes per second since its head.
    fn rate(&self, now: Instant) -> f64 {
        let elapsed = now.duration_since(self.started).as_secs_f64().max(1e-3);
        self.held.load(Ordering::Acquire) as f64 / elapsed
    }
}

/// Body bytes held from the budget until the request is answered, shown as a gauge.
pub struct Held<'a> {
    permit: Option<OwnedSemaphorePermit>,
    bytes: u64,
    metrics: &'a Metrics,
}

impl Held<'_> {
    fn add(&mut self, permit: OwnedSemaphorePermit) {
        let bytes = permit.num_permits() as u64;
        self.bytes += bytes;
        self.metrics.body_bytes_reserved(bytes as i64);
        match &mut self.permit {
            Some(held) => held.merge(permit),
            None => self.permit = Some(permit),
        }
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.metrics.body_bytes_reserved(-(self.bytes as i64));
    }
}

/// An upload's place in `BodyBudget::uploads`, left when the read ends however it ends.
struct Registered<'a> {
    budget: &'a BodyBudget,
    id: u64,
    upload: Arc<Upload>,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.budget.lock().remove(&self.id);
    }
}

impl BodyBudget {
    pub fn new(server: &ServerConfig) -> Self {
        Self {
            bytes: Arc::new(Semaphore::new(
                usize::try_from(server.max_buffered_bytes)
                    .unwrap_or(usize::MAX)
                    .min(Semaphore::MAX_PERMITS),
            )),
            uploads: Mutex::default(),
            next_id: AtomicU64::new(0),
            timeout: server.body_timeout(),
            grace: server.body_grace(),
            min_rate: server.body_min_bytes_per_second.max(1),
        }
    }

    /// Reads `body` whole (at most `limit` bytes; `declared` is its `Content-Length`) with its
    /// bytes reserved, which stay held until the returned `Held` drops.
    pub async fn read<'a>(
        &'a self,
        mut body: Body,
        declared: Option<u64>,
        limit: u64,
        metrics: &'a Metrics,
    ) -> Result<(Bytes, Held<'a>), IngestError> {
        let mut held = Held {
            permit: None,
            bytes: 0,
            metrics,
        };
        let first = declared.unwrap_or(limit).min(limit).min(FIRST_BYTES);
        if (self.bytes.available_permits() as u64) < first && self.victims(None, first).is_none() {
            return Err(IngestError::Overloaded);
        }
        let me = self.register();
        let deadline = me.upload.started + self.timeout;
        let mut frames = Vec::new();
        let mut received = 0u64;
        loop {
            // By `grace + t` at least `min_rate × t` bytes.
            let credit = Duration::from_millis(received.saturating_mul(1000) / self.min_rate);
            let slow_at = me.upload.started + self.grace + credit;
            let frame = tokio::select! {
                frame = body.frame() => frame,
                () = tokio::time::sleep_until(slow_at.min(deadline)) => {
                    return Err(if slow_at < deadline {
                        IngestError::TooSlow
                    } else {
                        IngestError::BodyTimeout
                    });
                }
                () = me.upload.give_way.notified() => return Err(IngestError::GaveWay),
            };
            let data = match frame {
                None => break,
                Some(Err(_)) => return Err(IngestError::IncompleteBody),
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => data,
                    Err(_trailers) => continue,
                },
            };
            received += data.len() as u64;
            if received > limit {
                return Err(IngestError::PayloadTooLarge(limit));
            }
            if !data.is_empty() {
                held.add(self.reserve(&me, data.len()).await?);
                me.upload.held.store(received, Ordering::Release);
                frames.push(data);
            }
        }
        // Read whole: no longer one that could give way.
        drop(me);
        Ok((concat(frames, received), held))
    }

    /// `n` more bytes for `me`, from what is free or from uploads that give way.
    async fn reserve(
        &self,
        me: &Registered<'_>,
        n: usize,
    ) -> Result<OwnedSemaphorePermit, IngestError> {
        let n32 = u32::try_from(n).map_err(|_| IngestError::Overloaded)?;
        if let Ok(permit) = Arc::clone(&self.bytes).try_acquire_many_owned(n32) {
            return Ok(permit);
        }
        let victims = self
            .victims(Some(me.id), n as u64)
            .ok_or(IngestError::Overloaded)?;
        for victim in victims {
            victim.giving_way.store(true, Ordering::Release);
            // Kept if the victim is not waiting at this instant.
            victim.give_way.notify_one();
        }
        let freed = Arc::clone(&self.bytes).acquire_many_owned(n32);
        match tokio::time::timeout(GIVE_WAY_WAIT, freed).await {
            Ok(Ok(permit)) => Ok(permit),
            _ => Err(IngestError::Overloaded),
        }
    }

    /// The slowest uploads past their grace period (other than `me`) whose bytes, with what is
    /// free, make `need`; `None` when all of them would not.
    fn victims(&self, me: Option<u64>, need: u64) -> Option<Vec<Arc<Upload>>> {
        let now = Instant::now();
        let mut candidates: Vec<(f64, Arc<Upload>)> = self
            .lock()
            .iter()
            .filter(|(id, u)| {
                Some(**id) != me
                    && !u.giving_way.load(Ordering::Acquire)
                    && now.duration_since(u.started) >= self.grace
                    && u.held.load(Ordering::Acquire) > 0
            })
            .map(|(_, u)| (u.rate(now), Arc::clone(u)))
            .collect();
        candidates.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut room = self.bytes.available_permits() as u64;
        let mut chosen = Vec::new();
        for (_, upload) in candidates {
            if room >= need {
                break;
            }
            room += upload.held.load(Ordering::Acquire);
            chosen.push(upload);
        }
        (room >= need).then_some(chosen)
    }

    fn register(&self) -> Registered<'_> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let upload = Arc::new(Upload {
            started: Instant::now(),
            held: AtomicU64::new(0),
            giving_way: AtomicBool::new(false),
            give_way: Notify::new(),
        });
        self.lock().insert(id, Arc::clone(&upload));
        Registered {
            budget: self,
            id,
            upload,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Arc<Upload>>> {
        // The map holds no invariant a panicking holder could break.
        self.uploads.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The body as one buffer (a single frame as it is).
fn concat(mut frames: Vec<Bytes>, len: u64) -> Bytes {
    if frames.len() == 1 {
        return frames.pop().expect("one frame");
    }
    let mut body = BytesMut::with_capacity(len as usize);
    for frame in frames {
        body.extend_from_slice(&frame);
    }
    body.freeze()
}
