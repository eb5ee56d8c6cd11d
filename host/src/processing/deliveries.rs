//! The delivery relay: sends the `deliveries` rows workers commit with each processed event
//! to their sinks, and marks them sent. At least once: a row is marked only after the sink
//! took it (HTTP 2xx, or the JetStream acknowledgement), so a crash in between sends it
//! again, with the same idempotency key (the inbox id) for the receiver to deduplicate.
//!
//! - `http`: `POST` of the verified event document as received (the event's own span of a
//!   batch's body, or the whole body), with `Idempotency-Key`,
//!   `Wharf-Event-Id`, `Wharf-Event-Type` and `Wharf-Endpoint` headers. Any answer but 2xx,
//!   a connection error or the route's timeout is a failed attempt. Redirects are never
//!   followed (following one would turn the `POST` into a body-less `GET`, or send the event
//!   somewhere the route does not name): a 3xx is a failed attempt like any other. A route's
//!   fixed `headers` are added, and with `signing_secret` the Standard Webhooks headers
//!   (`signing.rs`), signed afresh for each attempt.
//! - `nats`: a JetStream publish to the route's subject with `Nats-Msg-Id: <inbox_id>`.
//!
//! Failed attempts back off exponentially with full jitter; after the route's `max_attempts`
//! the row is `FAILED` (see `wharf events show`, and `wharf events replay` to retry). A
//! delivery whose `Wharf-*` headers cannot be built (an event id or type with a control
//! character, which only older versions accepted) is `FAILED` at once: retrying cannot change
//! the stored text.
//!
//! A row whose target no configured route names (its route was removed or changed, or the
//! row was written by hand) is `FAILED` at its first attempt, sent nowhere, unless
//! `[worker] deliver_to_unrouted_targets` is on: the relay sends only where the config says.
//!
//! Every update of a claimed row checks its `claim_id`, fresh for each claim, so a relay
//! whose claim expired, or was requeued by `wharf events replay`, changes nothing.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::FutureExt as _;
use sqlx::Row;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::context::{MIN_IDLE, Processing, wait_for_work};
use super::delivery_marks::{Mark, record};
use super::payloads::{LINK_COLUMNS, LinkRow, PayloadError, StoredPayload, event_bytes};
use super::signing;
use crate::config::{RouteConfig, SinkKind};
use crate::ingest::Redacted;
use crate::support::failpoint;
use crate::support::shown::safe_url;
use crate::support::traces::{KeyValue, SpanKind};

/// Sends at once, per relay (one relay per target).
const IN_FLIGHT: usize = 32;
/// A running relay claims again once this many sends have finished (or none is left), so
/// claims come in batches rather than one row per finished send.
const CLAIM_AT_LEAST: usize = IN_FLIGHT / 4;
/// Results recorded in one statement, at most.
const MARK_BATCH: usize = 256;
/// A claimed delivery is hidden from other relays for its timeout plus this margin.
const LEASE_MARGIN: Duration = Duration::from_secs(5);

struct Claimed {
    delivery_id: Uuid,
    /// The lease token every later update of the row requires.
    claim_id: Uuid,
    inbox_id: Uuid,
    sink: String,
    target: String,
    attempt: i32,
    max_attempts: i32,
    endpoint_id: String,
    event_id: String,
    event_type: String,
    /// The event's bytes, or why they cannot be had.
    body: Result<Vec<u8>, PayloadError>,
    /// When the event was accepted: the start of its delivery latency.
    received_at: time::OffsetDateTime,
    /// The accepting request's `traceparent`, the parent of each attempt's span.
    trace_context: Option<String>,
}

/// The `traceparent` (and `tracestate`, if any) of an attempt's span, sent with it.
type TraceHeaders = (String, Option<String>);

/// Which deliveries a relay sends.
#[derive(Debug, Clone)]
pub enum Lane {
    /// One route target: its sink and URL or subject.
    Target { sink: String, target: String },
    /// Rows whose target no configured route has (the route was removed or changed).
    Unrouted,
    /// Every delivery (a one-off drain).
    All,
}

pub struct DeliveryRelay {
    processing: Arc<Processing>,
    lane: Lane,
    http: reqwest::Client,
}

impl DeliveryRelay {
    pub fn new(processing: Arc<Processing>, lane: Lane) -> Self {
        Self {
            processing,
            lane,
            http: reqwest::Client::builder()
                .user_agent(concat!("wharf/", env!("CARGO_PKG_VERSION")))
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("HTTP client with default settings"),
        }
    }

    /// Keeps up to `IN_FLIGHT` sends of its lane going, claiming more as sends finish, so a
    /// slow delivery never waits for a whole batch. Results are recorded by one writer, as
    /// many as have finished in one statement.
    pub async fn run(self, cancel: CancellationToken) -> anyhow::Result<()> {
        let this = Arc::new(self);
        let p = Arc::clone(&this.processing);
        let (results, mut finished) = tokio::sync::mpsc::unbounded_channel::<Mark>();
        let writer = tokio::spawn({
            let this = Arc::clone(&this);
            async move {
                let mut batch = Vec::with_capacity(MARK_BATCH);
                while finished.recv_many(&mut batch, MARK_BATCH).await > 0 {
                    this.mark(&batch).await;
                    batch.clear();
                }
            }
        });
        let mut in_flight = tokio::task::JoinSet::new();
        let mut committed = p.signals.deliveries.subscribe();
        let mut idle = MIN_IDLE;
        while !cancel.is_cancelled() {
            while in_flight.try_join_next().is_some() {}
            let free = IN_FLIGHT - in_flight.len();
            if free < CLAIM_AT_LEAST {
                tokio::select! {
                    _ = cancel.cancelled() => break,
                    _ = in_flight.join_next() => continue,
                }
            }
            match this.claim(free as i64).await {
                Ok(claimed) if !claimed.is_empty() => {
                    idle = MIN_IDLE;
                    for d in claimed {
                        let (this, cancel, results) =
                            (Arc::clone(&this), cancel.clone(), results.clone());
                        in_flight.spawn(async move {
                            if let Some(mark) = this.deliver(d, &cancel).await {
                                // The writer outlives every send.
                                let _ = results.send(mark);
                            }
                        });
                    }
                    continue;
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %format!("{e:#}"), "delivery relay: cannot claim"),
            }
            let woken = async {
                if committed.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            };
            if !wait_for_work(woken, &mut idle, p.idle_poll(), &cancel).await {
                break;
            }
        }
        // Sends in flight see the cancellation and give their claims back; what finished is
        // recorded before the relay stops.
        while in_flight.join_next().await.is_some() {}
        drop(results);
        let _ = writer.await;
        Ok(())
    }

    /// Claims one batch of due deliveries, sends them concurrently and records the results;
    /// returns how many were claimed. Tests drive the relay through this one step.
    pub async fn try_execute(&self) -> anyhow::Result<usize> {
        let claimed = self.claim(IN_FLIGHT as i64).await?;
        let n = claimed.len();
        let cancel = CancellationToken::new();
        let results =
            futures::future::join_all(claimed.into_iter().map(|d| self.deliver(d, &cancel))).await;
        let marks: Vec<Mark> = results.into_iter().flatten().collect();
        self.mark(&marks).await;
        Ok(n)
    }

    async fn claim(&self, limit: i64) -> anyhow::Result<Vec<Claimed>> {
        let p = &self.processing;
        let timeout = match &self.lane {
            Lane::Target { sink, target } => self.timeout_for(sink, target),
            Lane::Unrouted | Lane::All => self.longest_timeout(),
        };
        let lease = timeout + LEASE_MARGIN;
        // One statement text per lane, so a target's generic plan walks its
        // `(sink, target, next_attempt_at)` index in order and stops after the batch; one
        // text for every lane read and sorted all the lane's pending rows on each claim (a
        // target's whole backlog). The update then probes the due rows by key (arrays), as
        // the worker's claim does: joined, the generic plan hash-joined them to a scan of
        // every delivery in the partition.
        let (lane_filter, sink, target) = match &self.lane {
            Lane::Target { sink, target } => {
                ("AND sink = $3 AND target = $4", Some(sink), Some(target))
            }
            Lane::Unrouted => ("AND NOT (sink || ' ' || target = ANY($5))", None, None),
            Lane::All => ("", None, None),
        };
        let routed: Vec<String> = p
            .routes
            .load()
            .targets()
            .into_iter()
            .map(|(sink, target)| format!("{sink} {target}"))
            .collect();
        let statement = format!(
            "WITH due AS (
                 SELECT delivery_id, inbox_id FROM deliveries
                 WHERE status = 'PENDING' AND next_attempt_at <= now() {lane_filter}
                 ORDER BY next_attempt_at
                 LIMIT $1
                 FOR UPDATE SKIP LOCKED
             ), claimed AS (
                 UPDATE deliveries AS d
                 SET attempt_count = d.attempt_count + 1, claim_id = gen_random_uuid(),
                     next_attempt_at = now() + make_interval(secs => $2)
                 WHERE d.delivery_id = ANY (ARRAY(SELECT delivery_id FROM due))
                   AND d.inbox_id = ANY (ARRAY(SELECT inbox_id FROM due))
                 RETURNING d.delivery_id, d.inbox_id, d.sink, d.target, d.attempt_count,
                           d.max_attempts, d.claim_id
             )
             SELECT c.delivery_id, c.inbox_id, c.sink, c.target, c.attempt_count,
                    c.max_attempts, i.endpoint_id, i.provider_event_id, i.event_type,
                    pl.body, c.claim_id, pl.payload_ref, pl.key_id, i.payload_start,
                    i.payload_end, i.received_at, i.trace_context, {LINK_COLUMNS}
             FROM claimed c
             JOIN webhook_inbox i ON i.inbox_id = c.inbox_id
             LEFT JOIN webhook_payloads pl ON pl.payload_ref = i.raw_payload_ref"
        );
        // Every lane binds the same parameters; its text uses those it needs.
        let rows = sqlx::query(&statement)
            .bind(limit)
            .bind(lease.as_secs_f64())
            .bind(sink)
            .bind(target)
            .bind(&routed)
            .fetch_all(&p.pool)
            .await
            .redacted()?;
        let claimed = rows.into_iter().map(|r| {
            Ok(Claimed {
                delivery_id: r.get(0),
                inbox_id: r.get(1),
                sink: r.get(2),
                target: r.get(3),
                attempt: r.get(4),
                max_attempts: r.get(5),
                endpoint_id: r.get(6),
                event_id: r.get(7),
                event_type: r.get(8),
                // Sealed whole; opened here, once the event's link to it checks, and cut to
                // the event's span (`payloads`).
                body: {
                    let stored = r
                        .get::<Option<Uuid>, _>(11)
                        .map(|payload_ref| StoredPayload {
                            payload_ref,
                            key_id: r.get(12),
                            body: r.get(9),
                        });
                    event_bytes(&p.payload_keys, &LinkRow::read(&r, 17)?, stored.as_ref())
                },
                claim_id: r.get(10),
                received_at: r.get(15),
                trace_context: r.get(16),
            })
        });
        Ok(claimed.collect::<Result<_, sqlx::Error>>()?)
    }

    fn longest_timeout(&self) -> Duration {
        self.processing.routes.load().longest_timeout()
    }

    /// The route this delivery came from (routes sharing a target agree on everything a
    /// send uses but the timeout); none when it has since left the config.
    fn route_for(&self, sink: &str, target: &str) -> Option<Arc<RouteConfig>> {
        self.processing
            .routes
            .load()
            .route_for(sink, target)
            .cloned()
    }

    /// The timeout of the route this delivery came from; a route since removed from the
    /// config (sent only with `deliver_to_unrouted_targets`) gets the default timeout.
    fn timeout_for(&self, sink: &str, target: &str) -> Duration {
        Duration::from_millis(
            self.route_for(sink, target)
                .map_or(10_000, |r| r.timeout_ms),
        )
    }

    /// An HTTP route's fixed headers, then its Standard Webhooks headers when it signs: keys
    /// read now from the live secrets file, the timestamp now from the processing clock, and
    /// the MAC over exactly `body`, the bytes sent. A set that cannot sign fails the attempt
    /// (retried: fixing the secrets file fixes it). A route since removed adds nothing.
    fn route_headers(
        &self,
        d: &Claimed,
        id: &str,
        body: &[u8],
    ) -> Result<Vec<(http::HeaderName, http::HeaderValue)>, Failure> {
        let Some(route) = self.route_for(&d.sink, &d.target) else {
            return Ok(Vec::new());
        };
        let mut headers = Vec::with_capacity(route.headers.len() + 3);
        for (name, value) in &route.headers {
            // Validated at start, so this cannot fail; the value may be a credential.
            let name =
                http::HeaderName::from_bytes(name.as_bytes()).map_err(|_| unsendable(name))?;
            let mut value =
                http::HeaderValue::from_str(value).map_err(|_| unsendable(name.as_str()))?;
            value.set_sensitive(true);
            headers.push((name, value));
        }
        if let Some(set) = &route.signing_secret {
            let p = &self.processing;
            let keys = p.signing_keys.as_deref().ok_or_else(|| {
                Failure::Transient(format!(
                    "no secrets file loaded on this host to sign with set {set:?}"
                ))
            })?;
            let signed = signing::sign(keys, set, id, p.clock.now(), body)
                .map_err(|e| Failure::Transient(e.to_string()))?;
            headers.extend(signed);
        }
        Ok(headers)
    }

    /// One attempt; returns its result to record, or none when it was given back (shutdown).
    async fn deliver(&self, d: Claimed, cancel: &CancellationToken) -> Option<Mark> {
        let p = &self.processing;
        // A panic in a send (a bug) is a failed attempt, not a claim retaken forever.
        let started = std::time::Instant::now();
        // A child of the accepting request's span; its context goes out with the attempt.
        let mut span = p.traces.span(
            "wharf.deliver",
            SpanKind::Producer,
            d.trace_context.as_deref(),
            vec![
                KeyValue::new("wharf.delivery_id", d.delivery_id.to_string()),
                KeyValue::new("wharf.inbox_id", d.inbox_id.to_string()),
                KeyValue::new("wharf.sink", d.sink.clone()),
                KeyValue::new("wharf.target", safe_url(&d.target)),
                KeyValue::new("wharf.attempt", i64::from(d.attempt)),
            ],
        );
        let trace = span.as_ref().map(|s| (s.traceparent(), s.tracestate()));
        let mut code = None;
        let send = AssertUnwindSafe(self.send(&d, trace.as_ref(), &mut code)).catch_unwind();
        let result = tokio::select! {
            r = send => r.unwrap_or_else(|_| Err(Failure::Transient("the send panicked".into()))),
            _ = cancel.cancelled() => {
                self.release(&d).await;
                return None;
            }
        };
        let (status, error, delay, outcome) = match result {
            Ok(()) => {
                failpoint::hit(failpoint::DELIVERY_AFTER_SEND);
                ("SENT", None, Duration::ZERO, "sent")
            }
            Err(Failure::Permanent(e)) => ("FAILED", Some(e), Duration::ZERO, "failed"),
            Err(Failure::Transient(e)) if d.attempt >= d.max_attempts => {
                ("FAILED", Some(e), Duration::ZERO, "failed")
            }
            Err(Failure::Transient(e)) => ("PENDING", Some(e), p.backoff(d.attempt), "retry"),
        };
        p.metrics.delivery(&d.sink, outcome);
        if let Some(span) = span.as_mut() {
            span.set("wharf.outcome", outcome);
            if let Some(e) = &error {
                span.fail(e.clone());
            }
        }
        drop(span);
        let since_accepted = (outcome == "sent")
            .then(|| (time::OffsetDateTime::now_utc() - d.received_at).as_seconds_f64());
        p.metrics.delivery_attempt(
            &d.sink,
            outcome,
            started.elapsed().as_secs_f64(),
            since_accepted,
        );
        if outcome != "sent" {
            tracing::warn!(
                delivery_id = %d.delivery_id,
                inbox_id = %d.inbox_id,
                sink = %d.sink,
                target = %safe_url(&d.target),
                attempt = d.attempt,
                outcome,
                "delivery attempt failed"
            );
        }
        Some(Mark {
            delivery_id: d.delivery_id,
            inbox_id: d.inbox_id,
            claim_id: d.claim_id,
            attempt: d.attempt,
            status,
            status_code: code.and_then(|c| i16::try_from(c).ok()),
            error,
            delay,
        })
    }

    /// One attempt; `code` gets the HTTP answer's status, when there is one.
    async fn send(
        &self,
        d: &Claimed,
        trace: Option<&TraceHeaders>,
        code: &mut Option<u16>,
    ) -> Result<(), Failure> {
        if self.route_for(&d.sink, &d.target).is_none()
            && !self.processing.config.worker.deliver_to_unrouted_targets
        {
            // Permanent: once the route is back, `wharf deliveries replay` sends it.
            return Err(Failure::Permanent(format!(
                "target not configured: no route sends to this {} target \
                 ([worker] deliver_to_unrouted_targets is off)",
                d.sink
            )));
        }
        let body = d.body.as_ref().map_err(|why| match why.is_transient() {
            true => Failure::Transient(why.to_string()),
            false => Failure::Permanent(why.to_string()),
        })?;
        let timeout = self.timeout_for(&d.sink, &d.target);
        let key = d.inbox_id.to_string();
        let headers = wharf_headers(d)?;
        match d.sink.as_str() {
            s if s == SinkKind::Http.as_str() => {
                let mut request = self
                    .http
                    .post(&d.target)
                    .timeout(timeout)
                    .header("content-type", "application/json")
                    .header("idempotency-key", &key)
                    .body(body.clone());
                for (name, value) in headers {
                    let value = http::HeaderValue::from_bytes(value.as_bytes())
                        .map_err(|_| unsendable(name))?;
                    request = request.header(name, value);
                }
                for (name, value) in self.route_headers(d, &key, body)? {
                    request = request.header(name, value);
                }
                if let Some((traceparent, tracestate)) = trace {
                    request = request.header("traceparent", traceparent);
                    if let Some(tracestate) = tracestate {
                        request = request.header("tracestate", tracestate);
                    }
                }
                let response = request.send().await.map_err(|e| {
                    Failure::Transient(if e.is_timeout() {
                        format!("no answer within {timeout:?}")
                    } else if e.is_connect() {
                        "connection failed".into()
                    } else {
                        "request failed".into()
                    })
                })?;
                let status = response.status();
                *code = Some(status.as_u16());
                if status.is_success() {
                    Ok(())
                } else if status.is_redirection() {
                    Err(Failure::Transient(format!(
                        "answered HTTP {} (redirects are not followed)",
                        status.as_u16()
                    )))
                } else {
                    Err(Failure::Transient(format!(
                        "answered HTTP {}",
                        status.as_u16()
                    )))
                }
            }
            s if s == SinkKind::Nats.as_str() => {
                let nats = self.processing.nats.as_ref().ok_or_else(|| {
                    Failure::Transient("no [nats] configured on this host".into())
                })?;
                let mut extra = headers.to_vec();
                if let Some((traceparent, tracestate)) = trace {
                    extra.push(("traceparent", traceparent));
                    if let Some(tracestate) = tracestate {
                        extra.push(("tracestate", tracestate));
                    }
                }
                let headers = super::nats::headers(&key, &extra).map_err(|e| unsendable(&e.0))?;
                nats.publish(
                    d.target.clone(),
                    headers,
                    Bytes::from(body.clone()),
                    timeout,
                )
                .await
                .map_err(|e| Failure::Transient(format!("{e:#}")))
            }
            other => Err(Failure::Permanent(format!("unknown sink {other:?}"))),
        }
    }

    async fn mark(&self, marks: &[Mark]) {
        record(&self.processing.pool, marks).await;
    }

    /// Gives back a claim interrupted by shutdown: the attempt is not counted, and the claim
    /// token is cleared rather than restored, so it can never match a later claim.
    async fn release(&self, d: &Claimed) {
        let _ = sqlx::query(
            "UPDATE deliveries
             SET attempt_count = attempt_count - 1, next_attempt_at = now(), claim_id = NULL
             WHERE delivery_id = $1 AND inbox_id = $3 AND claim_id = $2 AND status = 'PENDING'",
        )
        .bind(d.delivery_id)
        .bind(d.claim_id)
        .bind(d.inbox_id)
        .execute(&self.processing.pool)
        .await;
    }
}

enum Failure {
    Transient(String),
    Permanent(String),
}

/// The delivery's `Wharf-*` headers, the same for every sink. Text with a control character
/// (CR, LF, NUL, ...; a tab is allowed) cannot be a header value: the delivery fails for
/// good, naming the header but never quoting the value.
fn wharf_headers(d: &Claimed) -> Result<[(&'static str, &str); 3], Failure> {
    let headers = [
        ("Wharf-Event-Id", d.event_id.as_str()),
        ("Wharf-Event-Type", d.event_type.as_str()),
        ("Wharf-Endpoint", d.endpoint_id.as_str()),
    ];
    for (name, value) in headers {
        if value.chars().any(|c| c.is_control() && c != '\t') {
            return Err(unsendable(name));
        }
    }
    Ok(headers)
}

fn unsendable(header: &str) -> Failure {
    Failure::Permanent(format!(
        "{header} cannot be sent as a header value (it contains control characters)"
    ))
}
