//! Admission: past capacity, refuse at once what could not be answered within the budget,
//! before the adapter and verification spend CPU on it, so goodput stays at capacity.
//!
//! By Little's law, requests in flight divided by requests answered per second is how long
//! each waits. Admission keeps in flight at most the recent answer rate times half the answer
//! budget (half, so the tail too fits the budget), never fewer than `min_in_flight` (so a
//! receiver that was quiet takes a burst: the rate it measured then was low) nor more than
//! `max_in_flight`. When the receiver is not saturated
//! the rate follows the offered load and nothing is refused; when it is, the rate is its
//! capacity, whatever limits it (CPU, the database), and the excess is refused.
//!
//! `max_in_flight` is what the acceptance writers can take: two rounds of full batches (one
//! committing, one queued behind it). More in flight would not commit faster, only wait
//! longer, and would hold connections that the answers to refused requests need: past
//! capacity every connection is either carrying an admitted request or a refusal, and when
//! admitted ones held them all, refusals queued behind them in the clients (measured at 3x:
//! answers 2 to 3 s late with 925 admitted; within about 1 s at 512).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Requests never exceeded in flight, whatever the configuration.
pub const MAX_IN_FLIGHT: usize = 8192;
/// How often the answer rate is re-measured.
const WINDOW: Duration = Duration::from_millis(100);
/// Weight of the newest window in the smoothed rate.
const SMOOTHING: f64 = 0.3;
/// At most one "shedding" warning per this long.
const WARN_EVERY: Duration = Duration::from_secs(10);

pub struct Admission {
    budget: Duration,
    min_in_flight: usize,
    max_in_flight: usize,
    in_flight: AtomicUsize,
    limit: AtomicUsize,
    answered: AtomicU64,
    rate: Mutex<Rate>,
    /// Milliseconds after `started` of the last shedding warning (0: none yet).
    warned_at_ms: AtomicU64,
    started: Instant,
}

struct Rate {
    since: Instant,
    answered_then: u64,
    per_second: f64,
}

/// Held from admission to the answer; dropping it counts the request as answered.
pub struct Ticket<'a> {
    admission: &'a Admission,
}

impl Admission {
    /// `max_in_flight` also bounds `min_in_flight`.
    pub fn new(answer_budget: Duration, min_in_flight: usize, max_in_flight: usize) -> Self {
        let max_in_flight = max_in_flight.clamp(1, MAX_IN_FLIGHT);
        let min_in_flight = min_in_flight.clamp(1, max_in_flight);
        Self {
            budget: answer_budget,
            min_in_flight,
            max_in_flight,
            in_flight: AtomicUsize::new(0),
            limit: AtomicUsize::new(min_in_flight),
            answered: AtomicU64::new(0),
            rate: Mutex::new(Rate {
                since: Instant::now(),
                answered_then: 0,
                per_second: 0.0,
            }),
            warned_at_ms: AtomicU64::new(0),
            started: Instant::now(),
        }
    }

    /// Whether a refusal now should be logged: the first, then one per `WARN_EVERY`.
    pub fn should_warn(&self) -> bool {
        let now = self.started.elapsed().as_millis() as u64 + 1;
        let last = self.warned_at_ms.load(Ordering::Relaxed);
        (last == 0 || now.saturating_sub(last) >= WARN_EVERY.as_millis() as u64)
            && self
                .warned_at_ms
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    /// A ticket, or `None` when admitting one more would overrun the budget.
    pub fn try_admit(&self) -> Option<Ticket<'_>> {
        self.measure();
        let limit = self.limit.load(Ordering::Relaxed);
        let mut current = self.in_flight.load(Ordering::Relaxed);
        loop {
            if current >= limit {
                return None;
            }
            match self.in_flight.compare_exchange_weak(
                current,
                current + 1,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(Ticket { admission: self }),
                Err(now) => current = now,
            }
        }
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    pub fn limit(&self) -> usize {
        self.limit.load(Ordering::Relaxed)
    }

    /// Once per window, on whichever request comes first: the smoothed answer rate, and the
    /// limit it allows. A contended lock means another request is doing it.
    fn measure(&self) {
        let Ok(mut rate) = self.rate.try_lock() else {
            return;
        };
        let elapsed = rate.since.elapsed();
        if elapsed < WINDOW {
            return;
        }
        let answered = self.answered.load(Ordering::Relaxed);
        let newest = (answered - rate.answered_then) as f64 / elapsed.as_secs_f64();
        // After a quiet spell (several windows without a request) start afresh.
        rate.per_second = if elapsed > WINDOW * 10 {
            newest
        } else {
            SMOOTHING * newest + (1.0 - SMOOTHING) * rate.per_second
        };
        rate.since = Instant::now();
        rate.answered_then = answered;
        let allowed = (rate.per_second * self.budget.as_secs_f64() / 2.0) as usize;
        self.limit.store(
            allowed.clamp(self.min_in_flight, self.max_in_flight),
            Ordering::Relaxed,
        );
    }
}

impl Default for Admission {
    /// The defaults of `[server] answer_budget_ms` and `min_in_flight`, and what the default
    /// acceptance writers take.
    fn default() -> Self {
        Self::new(Duration::from_millis(500), 512, 512)
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        self.admission.in_flight.fetch_sub(1, Ordering::AcqRel);
        self.admission.answered.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_up_to_the_floor_then_refuses_until_one_is_answered() {
        let admission = Admission::new(Duration::from_millis(500), 8, MAX_IN_FLIGHT);
        let tickets: Vec<_> = (0..8)
            .map(|_| admission.try_admit().expect("under the floor"))
            .collect();
        assert!(admission.try_admit().is_none());
        drop(tickets);
        assert_eq!(admission.in_flight(), 0);
        assert!(admission.try_admit().is_some());
    }

    #[test]
    fn shedding_is_logged_once_per_period() {
        let admission = Admission::new(Duration::from_millis(500), 8, MAX_IN_FLIGHT);
        assert!(admission.should_warn());
        assert!(!admission.should_warn());
    }

    #[test]
    fn the_limit_follows_the_answer_rate_times_half_the_budget() {
        let admission = Admission::new(Duration::from_millis(1000), 8, MAX_IN_FLIGHT);
        // 5,000 answers in about one window: a rate of tens of thousands per second.
        for _ in 0..5000 {
            drop(admission.try_admit().expect("admitted"));
        }
        std::thread::sleep(WINDOW);
        admission.measure();
        let limit = admission.limit();
        assert!(limit > 8, "limit {limit}");
        assert!(limit <= MAX_IN_FLIGHT);
    }

    #[test]
    fn the_limit_never_passes_what_the_writers_take_and_bounds_the_floor() {
        let admission = Admission::new(Duration::from_millis(1000), 512, 64);
        assert_eq!(admission.limit(), 64, "the floor is bounded by the ceiling");
        for _ in 0..5000 {
            drop(admission.try_admit().expect("admitted"));
        }
        std::thread::sleep(WINDOW);
        admission.measure();
        assert_eq!(admission.limit(), 64);
    }
}
