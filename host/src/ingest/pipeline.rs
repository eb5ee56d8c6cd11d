//! The generic ingest pipeline, after the HTTP layer has read the exact raw bytes:
//! adapter `prepare` → verification under every trusted secret version → freshness →
//! adapter `parse` → one acceptance transaction. Provider specifics live only in adapters.

use std::sync::Arc;

use arc_swap::ArcSwap;
use bytes::Bytes;
use time::OffsetDateTime;
use uuid::Uuid;

use super::admission::Admission;
use super::error::IngestError;
use super::handshake::{Verification, answer};
use super::rate_limit::RateLimits;
use super::rows::{Acceptance, NewEvent, StoredVersion, Submission};
use super::secrets::{
    KeyEncodings, KeySet, KeySource, SecretStore, SecretsError, SecretsFileError,
};
use super::store::Store;
use super::verify::{self, Inputs, VerifyError};
use crate::adapter::{self, AdapterSet, LoadedAdapter, Parsed, RejectionKind, RequestView};
use crate::config::{EndpointConfig, LiveEndpoints, UnsupportedTypes, glob_match};
use crate::support::clock::SharedClock;
use crate::support::failpoint;
use crate::support::metrics::Metrics;
use crate::support::redact;
use crate::support::signals::Signals;
use crate::support::traces::Traces;

/// Longest provider event id or event type kept; longer is a malformed envelope.
const MAX_ID_BYTES: usize = 255;

/// What a request achieved.
#[derive(Debug)]
pub enum Outcome {
    /// Every event committed (some may be duplicates of earlier accepted copies).
    Stored(Vec<Acceptance>),
    /// Verified, but of a type this endpoint ignores; nothing stored.
    Ignored(String),
    /// Verified handshake (Slack `url_verification`, Discord PING, Meta's GET); nothing
    /// stored. The answer as sent, any MAC it asked for computed.
    Handshake(adapter::Answer),
}

impl Outcome {
    /// The outcome's name in answers, log lines and metrics.
    pub fn code(&self) -> &'static str {
        match self {
            Outcome::Stored(a) if a.iter().any(|a| matches!(a, Acceptance::Accepted(_))) => {
                "accepted"
            }
            Outcome::Stored(_) => "duplicate",
            Outcome::Ignored(_) => "ignored",
            Outcome::Handshake(_) => "handshake",
        }
    }
}

/// What the log line for a request carries besides its outcome.
#[derive(Debug, Default)]
pub struct RequestFacts {
    pub adapter: Option<String>,
    pub adapter_version: Option<String>,
    pub secret_version: Option<String>,
    pub event_id: Option<String>,
}

/// What steps 4 to 7 decided: answer now, or accept these events.
#[derive(Debug)]
pub enum Verified {
    Done(Outcome),
    Accept(Submission),
}

/// An endpoint resolved for one request: its settings, adapter and body limit.
#[derive(Clone)]
pub struct Admitted {
    pub endpoint: Arc<EndpointConfig>,
    pub adapter: Arc<LoadedAdapter>,
    pub max_body_bytes: u64,
}

pub struct Ingest {
    /// Shared with processing; swapped whole by a live config reload.
    endpoints: Arc<LiveEndpoints>,
    adapters: ArcSwap<AdapterSet>,
    secrets: Arc<SecretStore>,
    store: Store,
    clock: SharedClock,
    max_body_bytes: u64,
    metrics: Arc<Metrics>,
    signals: Arc<Signals>,
    admission: Admission,
    rate_limits: ArcSwap<RateLimits>,
    traces: Traces,
}

impl Ingest {
    pub fn new(
        endpoints: Vec<EndpointConfig>,
        adapters: AdapterSet,
        secrets: Arc<SecretStore>,
        store: Store,
        clock: SharedClock,
        max_body_bytes: u64,
        metrics: Arc<Metrics>,
    ) -> Self {
        let rate_limits = RateLimits::new(&endpoints, &[]);
        Self {
            endpoints: Arc::new(LiveEndpoints::new(&endpoints)),
            adapters: ArcSwap::from_pointee(adapters),
            secrets,
            store,
            clock,
            max_body_bytes,
            metrics,
            signals: Arc::default(),
            admission: Admission::default(),
            rate_limits: ArcSwap::from_pointee(rate_limits),
            traces: Traces::off(),
        }
    }

    /// Rate limits with the providers' buckets too (`[[provider]]`); the endpoints' own come
    /// with them.
    pub fn with_rate_limits(self, rate_limits: RateLimits) -> Self {
        self.rate_limits.store(Arc::new(rate_limits));
        self
    }

    /// The endpoint table this ingest serves, for processing to share.
    pub fn endpoints(&self) -> Arc<LiveEndpoints> {
        Arc::clone(&self.endpoints)
    }

    /// Swaps in a new endpoint list (a live config reload): the table and the endpoints' rate
    /// limits, each bucket kept whose endpoint's limit did not change. Requests in flight keep
    /// the endpoint they were admitted with.
    pub fn replace_endpoints(&self, endpoints: &[EndpointConfig]) {
        let limits = self.rate_limits.load().with_endpoints(endpoints);
        self.rate_limits.store(Arc::new(limits));
        self.endpoints.replace(endpoints);
    }

    /// Admission with the configured answer budget (`[server] answer_budget_ms`).
    pub fn with_admission(mut self, admission: Admission) -> Self {
        self.admission = admission;
        self
    }

    /// Requests traced with this tracer (`[tracing]`); off by default.
    pub fn with_traces(mut self, traces: Traces) -> Self {
        self.traces = traces;
        self
    }

    pub fn traces(&self) -> &Traces {
        &self.traces
    }

    pub fn admission(&self) -> &Admission {
        &self.admission
    }

    /// Raised after each commit that accepted an event, to wake processing in this process.
    pub fn signals(&self) -> Arc<Signals> {
        Arc::clone(&self.signals)
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    pub fn has_endpoint(&self, id: &str) -> bool {
        self.endpoints.get(id).is_some()
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Whether the secrets file was last read successfully.
    pub fn secrets_readable(&self) -> Result<(), SecretsFileError> {
        match &*self.secrets.current() {
            Ok(_) => Ok(()),
            Err(e) => Err(e.clone()),
        }
    }

    pub fn adapters(&self) -> Arc<AdapterSet> {
        self.adapters.load_full()
    }

    /// Swaps the adapter set atomically; requests in flight keep the version they started with.
    pub fn replace_adapters(&self, adapters: AdapterSet) {
        self.adapters.store(Arc::new(adapters));
    }

    /// Changes one entry without losing a concurrent change to another (read-copy-update).
    pub fn update_adapters(&self, change: impl Fn(&mut AdapterSet)) {
        self.adapters.rcu(|current| {
            let mut next = AdapterSet::clone(current);
            change(&mut next);
            next
        });
    }

    /// Whether a GET to this endpoint reaches its adapter (Meta's `hub.challenge`); takes no
    /// token, so the GET that follows is limited once, like a POST.
    pub fn serves_get(&self, endpoint_id: &str) -> bool {
        self.endpoints.get(endpoint_id).is_some_and(|e| {
            self.adapters
                .load()
                .get(&e.adapter)
                .is_some_and(|a| a.info.serves_get)
        })
    }

    /// Steps before the body is read: the endpoint, its adapter, and the body limit. Takes no
    /// token: the client's bucket is the edge's, and only a verified request spends the
    /// endpoint's and provider's (`process`).
    pub fn admit(&self, endpoint_id: &str) -> Result<Admitted, IngestError> {
        let endpoint = self
            .endpoints
            .get(endpoint_id)
            .ok_or(IngestError::UnknownEndpoint)?;
        let adapter = self
            .adapters
            .load()
            .get(&endpoint.adapter)
            .cloned()
            .ok_or_else(|| {
                IngestError::AdapterUnavailable(format!(
                    "adapter {:?} is not loaded",
                    endpoint.adapter
                ))
            })?;
        let max_body_bytes = [
            Some(self.max_body_bytes),
            endpoint.max_body_bytes,
            adapter.info.max_body_bytes,
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(self.max_body_bytes);
        Ok(Admitted {
            endpoint,
            adapter,
            max_body_bytes,
        })
    }

    /// Steps 4 to 8 on the exact raw bytes (a GET, for adapters that serve one, has none).
    /// `trace_context`: the request span's `traceparent`, stored with its events.
    #[allow(clippy::too_many_arguments)]
    pub async fn process(
        self: &Arc<Self>,
        admitted: &Admitted,
        method: http::Method,
        headers: Arc<http::HeaderMap>,
        query: Option<String>,
        body: Bytes,
        facts: &mut RequestFacts,
        trace_context: Option<String>,
    ) -> Result<Outcome, IngestError> {
        // Past capacity the request is refused here, before any guest call or MAC; the ticket
        // is held until the answer.
        let ticket = self.admission.try_admit();
        let (in_flight, limit) = (self.admission.in_flight(), self.admission.limit());
        self.metrics.admission(in_flight, limit);
        let Some(_ticket) = ticket else {
            if self.admission.should_warn() {
                tracing::warn!(
                    in_flight,
                    limit,
                    "at capacity: refusing requests with 503 overloaded (wharf_requests_total counts them)"
                );
            }
            return Err(IngestError::AtCapacity);
        };
        // Steps 4 to 7 are CPU work (guest calls, MACs): one hop to the sandbox's threads runs
        // them all, off the runtime that serves HTTP and commits.
        let this = Arc::clone(self);
        let job = admitted.clone();
        let (verified, job_facts) = admitted
            .adapter
            .on_sandbox(async move {
                let mut facts = RequestFacts::default();
                let now = this.clock.now();
                let verified = verify_and_parse(
                    &job,
                    this.secrets.as_ref(),
                    now,
                    method,
                    headers,
                    query.as_deref(),
                    body,
                    &mut facts,
                )
                .await;
                (verified, facts)
            })
            .await
            .map_err(IngestError::from)?;
        *facts = job_facts;
        let verified = verified?;
        // Verified: only now may it spend the endpoint's and provider's buckets, before a commit.
        self.rate_limits
            .load()
            .charge_verified(&admitted.endpoint, &self.metrics)
            .map_err(IngestError::RateLimited)?;
        match verified {
            Verified::Done(outcome) => Ok(outcome),
            // 8. One transaction; the answer waits for the commit.
            Verified::Accept(mut submission) => {
                submission.trace_context = trace_context;
                let started = std::time::Instant::now();
                let stored = self.store.accept(submission).await;
                self.metrics.db_commit(started.elapsed().as_secs_f64());
                let stored = stored?;
                failpoint::hit(failpoint::INGEST_AFTER_COMMIT);
                if stored.iter().any(|a| matches!(a, Acceptance::Accepted(_))) {
                    self.signals.accepted();
                }
                Ok(Outcome::Stored(stored))
            }
        }
    }
}

/// Steps 4 to 7: what is signed, verification, freshness, and what the verified body means.
/// Needs no database: the HTTP path and the fixture runner (`wharf adapter test`) both run
/// exactly this, so a fixture that passes tells how the receiver will answer.
#[allow(clippy::too_many_arguments)]
pub async fn verify_and_parse(
    admitted: &Admitted,
    secrets: &dyn KeySource,
    now: OffsetDateTime,
    method: http::Method,
    headers: Arc<http::HeaderMap>,
    query: Option<&str>,
    body: Bytes,
    facts: &mut RequestFacts,
) -> Result<Verified, IngestError> {
    let Admitted {
        endpoint, adapter, ..
    } = admitted;
    facts.adapter = Some(adapter.info.name.clone());
    facts.adapter_version = Some(adapter.info.version.clone());
    // Whatever an adapter writes for the log is bounded, printable and never echoes the request.
    let echoes = redact::Echoes {
        body: &body,
        headers: &headers,
        query: query.unwrap_or(""),
    };
    let loggable = |detail: String| redact::adapter_text(&detail, &echoes);
    let url = endpoint.public_url.as_ref().map(|u| match query {
        Some(q) => format!("{u}?{q}"),
        None => u.clone(),
    });
    // One fresh instance serves this request's `prepare` and `parse`, and no other request.
    let mut instance = adapter.instance_for(RequestView {
        endpoint_id: endpoint.id.clone(),
        method: method.clone(),
        url: url.clone(),
        query: query.map(str::to_owned),
        headers: Arc::clone(&headers),
        body: body.clone(),
        settings: Arc::clone(&endpoint.settings),
    });

    // 4. The adapter describes what is signed. Its rejection here is always a 401.
    let prepared = instance
        .prepare()
        .await
        .map_err(|e| IngestError::from_prepare_failure(e, body.len()))?
        .map_err(|r| IngestError::InvalidSignature(loggable(r.detail)))?;

    // 5. Verify under every trusted version of the keys the checks name, once the host has
    // checked that what the adapter describes is worth verifying.
    let tolerance = endpoint
        .tolerance_secs
        .or(adapter.info.tolerance_past_secs)
        .map(|past| {
            let future = endpoint
                .future_tolerance_secs
                .or(adapter.info.tolerance_future_secs)
                .unwrap_or(past);
            (past, future)
        });
    let inputs = Inputs {
        body: &body,
        url: url.as_deref(),
        query,
    };
    // What the adapter described is judged before any key is looked up for it.
    verify::validate(
        &prepared,
        &adapter.info.verifiers,
        &inputs,
        tolerance.is_some(),
    )
    .map_err(IngestError::AdapterContract)?;
    let encodings = KeyEncodings {
        secret: adapter.info.encoding,
        public_key: adapter.info.public_keys,
    };
    // Each slot the checks name, read once; a slot the endpoint does not configure fails
    // closed like an unknown set.
    let mut slots: Vec<(Option<&str>, KeySet)> = Vec::with_capacity(1);
    for check in &prepared.checks {
        let slot = check.key.as_deref();
        if slots.iter().any(|(s, _)| *s == slot) {
            continue;
        }
        let set = endpoint.secret_set(slot).ok_or_else(|| {
            SecretsError::UnknownSet(format!(
                "secrets.{}",
                redact::printable(slot.unwrap_or(""), 64)
            ))
        })?;
        slots.push((slot, secrets.keys(set, encodings, now)?));
    }
    let empty = KeySet::default();
    let keys = |slot: Option<&str>| {
        slots
            .iter()
            .find(|(s, _)| *s == slot)
            .map_or(&empty, |(_, k)| k)
    };
    let passed = verify::verify(
        &adapter.info.verifiers,
        &keys,
        &prepared,
        &inputs,
        tolerance.is_some(),
    )
    .map_err(IngestError::from)?;
    facts.secret_version = Some(passed.version.clone());

    // 6. Freshness of the signed timestamp, when the provider signs one.
    if let Some((past, future)) = tolerance {
        verify::check_freshness(prepared.timestamp, now.unix_timestamp(), past, future).map_err(
            |e| match e {
                VerifyError::MissingTimestamp => IngestError::InvalidSignature(e.to_string()),
                e => IngestError::StaleTimestamp(e),
            },
        )?;
    }

    // 7. Only now may anything interpret the body.
    let parsed = match instance.parse().await? {
        Ok(parsed) => parsed,
        Err(r) => {
            return match r.kind {
                RejectionKind::UnsupportedEventType => unsupported(endpoint, loggable(r.detail)),
                RejectionKind::Malformed => Err(IngestError::Malformed(loggable(r.detail))),
                // After a successful verification this is an adapter contract breach.
                RejectionKind::InvalidSignature => {
                    Err(IngestError::InvalidSignature(loggable(r.detail)))
                }
            };
        }
    };
    let envelopes = match parsed {
        Parsed::Handshake(h) => {
            let verified = Verification {
                passed: &passed,
                prepared: &prepared,
                freshness_checked: tolerance.is_some(),
                body: &body,
            };
            return Ok(Verified::Done(Outcome::Handshake(answer(h, &verified)?)));
        }
        // A GET reaches an adapter only to be answered; it never stores anything.
        Parsed::Events(_) if method == http::Method::GET => {
            return Err(IngestError::AdapterUnavailable(
                "adapter answered a GET with events instead of a handshake".into(),
            ));
        }
        Parsed::Events(envelopes) if envelopes.is_empty() => {
            return Err(IngestError::Malformed("no events in the body".into()));
        }
        Parsed::Events(envelopes) => envelopes,
    };
    verify::check_items(&passed, &prepared, &envelopes, body.len())
        .map_err(IngestError::AdapterContract)?;
    let allowed = &adapter.info.event_types;
    if let Some(e) = envelopes
        .iter()
        .find(|e| !allowed.is_empty() && !allowed.iter().any(|g| glob_match(g, &e.event_type)))
    {
        return unsupported(
            endpoint,
            format!(
                "event type {:?}",
                redact::printable(&e.event_type, MAX_ID_BYTES)
            ),
        );
    }
    let events = envelopes
        .into_iter()
        .map(|e| to_event(&adapter.info.name, &endpoint.id, e))
        .collect::<Result<Vec<_>, _>>()?;
    // Only a validated id reaches the log line.
    facts.event_id = events.first().map(|e| e.event_id.clone());

    Ok(Verified::Accept(Submission {
        payload: body.clone(),
        matched_secret_version: passed.version,
        events,
        received_at: now,
        redelivery_window: time::Duration::days(i64::from(endpoint.redelivery_window_days())),
        trace_context: None,
    }))
}

fn unsupported(endpoint: &EndpointConfig, detail: String) -> Result<Verified, IngestError> {
    match endpoint.unsupported_types {
        UnsupportedTypes::Reject => Err(IngestError::UnsupportedEventType(detail)),
        UnsupportedTypes::Ignore => Ok(Verified::Done(Outcome::Ignored(detail))),
    }
}

fn to_event(
    provider: &str,
    endpoint_id: &str,
    e: adapter::Envelope,
) -> Result<NewEvent, IngestError> {
    let bad = |what: &str| IngestError::Malformed(what.to_owned());
    if e.event_id.is_empty() || e.event_id.len() > MAX_ID_BYTES {
        return Err(bad("event id must be 1-255 bytes"));
    }
    if e.event_type.is_empty() || e.event_type.len() > MAX_ID_BYTES {
        return Err(bad("event type must be 1-255 bytes"));
    }
    // Ids travel on as header values (Wharf-Event-Id, NATS subjects) and Postgres text, which
    // take no CR, LF or NUL: refuse every control character here, once, after verification.
    let fields = [
        ("event id", Some(&e.event_id)),
        ("event type", Some(&e.event_type)),
        ("object id", e.object_id.as_ref()),
        ("route", e.route.as_ref()),
    ];
    if let Some((name, _)) = fields
        .iter()
        .find(|(_, v)| v.is_some_and(|v| v.chars().any(char::is_control)))
    {
        return Err(bad(&format!("{name} contains a control character")));
    }
    if e.object_id.as_ref().is_some_and(|o| o.len() > MAX_ID_BYTES)
        || e.route.as_ref().is_some_and(|r| r.len() > MAX_ID_BYTES)
    {
        return Err(bad("object id and route must be at most 255 bytes"));
    }
    let object_version = match e.object_version {
        Some(adapter::ObjectVersion::Sequence(v)) => Some(StoredVersion::Sequence(
            i64::try_from(v).map_err(|_| bad("object version too large"))?,
        )),
        Some(adapter::ObjectVersion::CreatedAt(v)) => Some(StoredVersion::CreatedAt(v)),
        None => None,
    };
    let created_at = e
        .created_at
        .map(|t| OffsetDateTime::from_unix_timestamp(t).map_err(|_| bad("created-at out of range")))
        .transpose()?;
    Ok(NewEvent {
        provider: provider.to_owned(),
        endpoint_id: endpoint_id.to_owned(),
        event_id: e.event_id,
        event_type: e.event_type,
        object_id: e.object_id,
        object_version,
        created_at,
        payload_span: e.span.map(|s| (s.start as i64, s.end as i64)),
    })
}

/// The inbox ids of a stored outcome, for the answer and the log.
pub fn inbox_ids(acceptances: &[Acceptance]) -> Vec<Uuid> {
    acceptances.iter().map(|a| a.inbox_id()).collect()
}
