//! Leases taken at acceptance. When this host's own workers have room, the events it accepts
//! are written already claimed for them (`PROCESSING`, attempt 1, a fresh claim token, the
//! lease) and handed over in memory after the commit. A worker's claim would otherwise write
//! every inbox row a second time, with its five index entries (docs/performance.md, "Writes
//! processing no longer makes").
//!
//! Nothing is lost with the memory: a leased row that no worker of this host commits (the
//! host stops or crashes first, or the commit's outcome was unknown) is claimed by any worker
//! once its lease runs out, as after a worker's crash.
//!
//! Events are handed over only while the workers keep up. Once an accepted event finds no
//! room, it is written `PENDING` and the handoff stops until a worker's claim from the
//! database comes back short of a full batch. So a backlog is worked off in the database's
//! order (oldest due first), and newer events never overtake it through memory.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use uuid::Uuid;

use crate::support::payload_link::LinkTag;

/// One claimed inbox row. `claim_id` is the lease token, fresh for every claim and never
/// reused (replay and giving a claim back leave it unmatched): every later update of the row
/// requires it unchanged. `attempt` is the attempt count after claiming, for backoff only.
#[derive(Debug, Clone)]
pub struct Claim {
    pub inbox_id: Uuid,
    pub provider: String,
    pub endpoint_id: String,
    pub event_id: String,
    pub event_type: String,
    pub object_id: Option<String>,
    pub version_kind: Option<String>,
    pub version: Option<i64>,
    pub payload_ref: Uuid,
    /// The event's byte range of the payload (`payload_start`, `payload_end`); `None`: all of it.
    pub payload_span: Option<(i64, i64)>,
    /// The whole payload's SHA-256 (`payload_hash`) and the row's link tag (`None`: a row
    /// from before links): what `processing::payloads` checks before using the body.
    pub payload_hash: Vec<u8>,
    pub payload_link: Option<LinkTag>,
    pub attempt: i32,
    pub claim_id: Uuid,
    /// The accepting request's `traceparent` (`[tracing]` on where it was accepted).
    pub trace_context: Option<String>,
    /// When it was claimed: the start of its processing span.
    pub claimed_at: SystemTime,
    /// Leased at acceptance: its payload was committed with the lease, from the bytes this
    /// host verified, and its span was cut from them, so a worker that needs nothing of the
    /// body need not read it back to know it is there.
    pub payload_committed: bool,
}

/// The events leased at acceptance, waiting for this host's workers.
pub struct Handoff {
    capacity: usize,
    lease: Duration,
    state: Mutex<State>,
}

struct State {
    waiting: VecDeque<Claim>,
    /// Promised to acceptance transactions still in flight.
    reserved: usize,
    /// An accepted event found no room and waits in the database: hand nothing over until
    /// the workers have claimed the database's due rows.
    backlog: bool,
    /// The workers stopped: nothing more is leased to them.
    closed: bool,
}

impl Handoff {
    /// `capacity`: events waiting or promised at most; `lease`: the workers' lease. It starts
    /// as if behind, so rows left due by an earlier run are claimed before anything is handed
    /// over.
    pub fn new(capacity: usize, lease: Duration) -> Self {
        Self {
            capacity,
            lease,
            state: Mutex::new(State {
                waiting: VecDeque::new(),
                reserved: 0,
                backlog: true,
                closed: false,
            }),
        }
    }

    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// Room for up to `wanted` of a transaction's new events; any it cannot have are written
    /// `PENDING`, and from then on nothing is handed over until the workers catch up.
    pub(super) fn reserve(&self, wanted: usize) -> Reservation<'_> {
        let mut state = self.state.lock().expect("handoff lock");
        let free = self.capacity - state.waiting.len() - state.reserved;
        let granted = if state.backlog || state.closed {
            0
        } else {
            wanted.min(free)
        };
        if granted < wanted {
            state.backlog = true;
        }
        state.reserved += granted;
        Reservation {
            handoff: self,
            granted,
        }
    }

    /// Up to `max` events, oldest first.
    pub fn take(&self, max: usize) -> Vec<Claim> {
        let mut state = self.state.lock().expect("handoff lock");
        let n = max.min(state.waiting.len());
        state.waiting.drain(..n).collect()
    }

    /// A worker's claim from the database found less than a full batch: whatever waited
    /// there is claimed, so new events may be handed over again.
    pub fn caught_up(&self) {
        self.state.lock().expect("handoff lock").backlog = false;
    }

    /// The workers are stopping: acceptances still in flight write their events `PENDING`
    /// from now on, and what waits is returned, for the workers to give back.
    pub fn close(&self) -> Vec<Claim> {
        let mut state = self.state.lock().expect("handoff lock");
        state.closed = true;
        state.waiting.drain(..).collect()
    }
}

/// Room promised to one acceptance transaction; what is not handed over is given back when
/// this is dropped (the transaction failed, timed out, or found duplicates).
pub(super) struct Reservation<'a> {
    handoff: &'a Handoff,
    granted: usize,
}

impl Reservation<'_> {
    pub(super) fn granted(&self) -> usize {
        self.granted
    }

    /// After the commit: the leased events that were inserted (at most `granted`).
    pub(super) fn hand_over(mut self, claims: Vec<Claim>) {
        let mut state = self.handoff.state.lock().expect("handoff lock");
        debug_assert!(claims.len() <= self.granted);
        state.reserved -= self.granted;
        self.granted = 0;
        state.waiting.extend(claims);
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if self.granted > 0 {
            self.handoff.state.lock().expect("handoff lock").reserved -= self.granted;
        }
    }
}

/// A claim for unit tests: inbox id, claim token and payload ref all `n`, event `evt_{n}`,
/// naming no object.
#[cfg(test)]
impl Claim {
    pub(crate) fn example(n: u128) -> Self {
        Claim {
            inbox_id: Uuid::from_u128(n),
            provider: "stripe".into(),
            endpoint_id: "stripe".into(),
            event_id: format!("evt_{n}"),
            event_type: "t".into(),
            object_id: None,
            version_kind: None,
            version: None,
            payload_ref: Uuid::from_u128(n),
            payload_span: None,
            payload_hash: vec![0; 32],
            payload_link: None,
            attempt: 1,
            claim_id: Uuid::from_u128(n),
            trace_context: None,
            claimed_at: SystemTime::now(),
            payload_committed: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(claims: &[Claim]) -> Vec<u128> {
        claims.iter().map(|c| c.inbox_id.as_u128()).collect()
    }

    #[test]
    fn nothing_is_handed_over_before_the_database_backlog_is_claimed() {
        let h = Handoff::new(4, Duration::from_secs(30));
        assert_eq!(
            h.reserve(2).granted(),
            0,
            "rows of an earlier run may be due"
        );
        h.caught_up();
        let r = h.reserve(2);
        assert_eq!(r.granted(), 2);
        r.hand_over(vec![Claim::example(1), Claim::example(2)]);
        assert_eq!(ids(&h.take(8)), [1, 2]);
    }

    #[test]
    fn an_event_without_room_stops_the_handoff_until_the_workers_catch_up() {
        let h = Handoff::new(3, Duration::from_secs(30));
        h.caught_up();
        let first = h.reserve(2);
        // One of these two fits: the other waits in the database, so a backlog starts.
        let second = h.reserve(2);
        assert_eq!((first.granted(), second.granted()), (2, 1));
        first.hand_over(vec![Claim::example(1), Claim::example(2)]);
        second.hand_over(vec![Claim::example(3)]);
        assert_eq!(ids(&h.take(1)), [1]);
        assert_eq!(
            h.reserve(1).granted(),
            0,
            "room again, but the backlog comes first"
        );
        assert_eq!(ids(&h.take(8)), [2, 3]);
        h.caught_up();
        assert_eq!(h.reserve(5).granted(), 3);
    }

    #[test]
    fn once_closed_nothing_more_is_leased_and_what_waited_is_returned() {
        let h = Handoff::new(4, Duration::from_secs(30));
        h.caught_up();
        let in_flight = h.reserve(1);
        h.reserve(1).hand_over(vec![Claim::example(1)]);
        assert_eq!(ids(&h.close()), [1]);
        assert_eq!(h.reserve(1).granted(), 0);
        h.caught_up();
        assert_eq!(h.reserve(1).granted(), 0, "closed for good");
        // An acceptance that reserved before the close hands over into it; a second
        // worker's close returns that too.
        in_flight.hand_over(vec![Claim::example(2)]);
        assert_eq!(ids(&h.close()), [2]);
    }

    #[test]
    fn room_not_handed_over_is_given_back() {
        let h = Handoff::new(2, Duration::from_secs(30));
        h.caught_up();
        // A failed or timed-out transaction drops its reservation.
        drop(h.reserve(2));
        // Two leased, one of them a duplicate that was not inserted.
        h.reserve(2).hand_over(vec![Claim::example(1)]);
        let r = h.reserve(1);
        assert_eq!(r.granted(), 1);
        r.hand_over(vec![Claim::example(2)]);
        assert_eq!(ids(&h.take(8)), [1, 2]);
        assert!(h.take(8).is_empty());
    }
}
