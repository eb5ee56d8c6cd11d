//! Prometheus metrics, served as OpenMetrics text on the admin listener's `/metrics`. One registry per
//! server (no global state), so several servers in one process, as in tests, stay apart.

use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::shown::safe_url;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// A configured endpoint id, or `_unknown`: request paths never become label values, so a
    /// scan of random URLs cannot grow the series without bound.
    pub endpoint: String,
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RateLimitLabels {
    /// A configured endpoint id (only those reach a rate limit).
    pub endpoint: String,
    /// The bucket that refused: `endpoint` or `provider`.
    pub scope: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DeliveryLabels {
    pub sink: String,
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SinkLabels {
    pub sink: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TableLabels {
    pub table: String,
}

/// One delivery target: a route's URL or subject (bounded by the routes configured, and by the
/// targets of rows planned before a route was removed). Exported through `safe_url`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TargetLabels {
    pub sink: String,
    pub target: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    pub version: String,
}

/// The deliveries gauges of one target, as the reconciler read them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TargetBacklog {
    pub pending: i64,
    pub oldest_pending_seconds: f64,
    pub failed: i64,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReloadLabels {
    pub adapter: String,
    /// `loaded`, `failed` or `removed`.
    pub result: String,
}

pub struct Metrics {
    registry: Mutex<Registry>,
    requests: Family<RequestLabels, Counter>,
    rate_limited: Family<RateLimitLabels, Counter>,
    reloads: Family<ReloadLabels, Counter>,
    ack_seconds: Family<RequestLabels, Histogram>,
    db_commit_seconds: Histogram,
    delivery_attempt_seconds: Family<DeliveryLabels, Histogram>,
    delivery_latency_seconds: Family<SinkLabels, Histogram>,
    /// The per-target and failure gauges exist only where a reconciler runs (it reads them).
    backlog_gauges: Mutex<Option<BacklogGauges>>,
    worker_events: Family<OutcomeLabels, Counter>,
    deliveries: Family<DeliveryLabels, Counter>,
    oldest_pending: Gauge<f64, std::sync::atomic::AtomicU64>,
    outbox_unpublished: Gauge,
    body_bytes_reserved: Gauge,
    accept_batch_events: Histogram,
    accept_transaction_seconds: Histogram,
    accept_batch_splits: Counter,
    admission_in_flight: Gauge,
    admission_limit: Gauge,
    connections_shed: Family<OutcomeLabels, Counter>,
    tls_reloads: Family<OutcomeLabels, Counter>,
    config_reloads: Family<OutcomeLabels, Counter>,
    tls_cert_expiry: Gauge,
    /// The TLS series are registered only by a receiver serving HTTPS, so an alert on the
    /// expiry never reads a zero from a plain-HTTP host.
    tls_registered: std::sync::Once,
    retention_dropped: Family<TableLabels, Counter>,
    retention_kept: Family<TableLabels, Gauge>,
    retention_ready_until: Gauge,
    /// Registered by the first retention pass, so only hosts that run one export them.
    retention_registered: std::sync::Once,
}

/// Gauges refreshed by each reconciler pass.
struct BacklogGauges {
    pending: Family<TargetLabels, Gauge>,
    oldest_pending: Family<TargetLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    failed: Family<TargetLabels, Gauge>,
    inbox_failed: Gauge,
    /// Every target reported once, so one whose rows are gone reads 0, not its last value.
    seen: std::collections::HashSet<TargetLabels>,
}

impl Default for Metrics {
    fn default() -> Self {
        let requests = Family::<RequestLabels, Counter>::default();
        // 0.5 ms to about 4 s: providers time out at 2 to 10 s.
        let ack_seconds = Family::<RequestLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0005, 2.0, 14))
        });
        let db_commit_seconds = Histogram::new(exponential_buckets(0.0005, 2.0, 14));
        let mut registry = Registry::default();
        registry.register(
            "wharf_requests",
            "Webhook requests by endpoint and outcome (accepted, duplicate, or the error code)",
            requests.clone(),
        );
        let rate_limited = Family::<RateLimitLabels, Counter>::default();
        registry.register(
            "wharf_rate_limited",
            "Requests refused with 429 rate_limited, by endpoint and the bucket that was empty \
             (client: the address's, before the body; endpoint, or provider: shared by the \
             adapter's endpoints; endpoint when both were)",
            rate_limited.clone(),
        );
        registry.register(
            "wharf_ack_seconds",
            "Time from the request's headers to its answer, by endpoint and outcome",
            ack_seconds.clone(),
        );
        let build = Family::<BuildLabels, Gauge>::default();
        build
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION").to_owned(),
            })
            .set(1);
        registry.register(
            "wharf_build_info",
            "The running Wharf's version (always 1)",
            build,
        );
        // 1 ms to about 65 s: a delivery attempt is bounded by its route's timeout.
        let delivery_attempt_seconds =
            Family::<DeliveryLabels, Histogram>::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.001, 2.0, 17))
            });
        registry.register(
            "wharf_delivery_attempt_seconds",
            "Time one delivery attempt took, by sink and outcome (sent, retry, failed)",
            delivery_attempt_seconds.clone(),
        );
        // 5 ms to about 23 h: from acceptance to the downstream's acknowledgement, retries
        // and backlogs included.
        let delivery_latency_seconds =
            Family::<SinkLabels, Histogram>::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.005, 2.0, 25))
            });
        registry.register(
            "wharf_delivery_latency_seconds",
            "Time from an event's acceptance to its delivery's acknowledgement, by sink",
            delivery_latency_seconds.clone(),
        );
        registry.register(
            "wharf_db_commit_seconds",
            "Time from a request's submission to the commit of its acceptance transaction \
             (the wait for a writer included), failures included",
            db_commit_seconds.clone(),
        );
        let worker_events = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "wharf_worker_events",
            "Events processed by workers here, by outcome (applied, stale, unversioned, \
             no_object, retry, failed)",
            worker_events.clone(),
        );
        let deliveries = Family::<DeliveryLabels, Counter>::default();
        registry.register(
            "wharf_deliveries",
            "Delivery attempts by sink and outcome (sent, retry, failed)",
            deliveries.clone(),
        );
        let oldest_pending = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
        registry.register(
            "wharf_inbox_oldest_pending_seconds",
            "Age of the oldest accepted event not yet processed (read by the reconciler)",
            oldest_pending.clone(),
        );
        let outbox_unpublished = Gauge::default();
        registry.register(
            "wharf_outbox_unpublished",
            "Accepted-event notices not yet published (read by the reconciler)",
            outbox_unpublished.clone(),
        );
        let reloads = Family::<ReloadLabels, Counter>::default();
        registry.register(
            "wharf_adapter_reloads",
            "Adapter files loaded, refused (kept the previous version) or removed",
            reloads.clone(),
        );
        let config_reloads = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "wharf_config_reloads",
            "Changes of the config file applied live, or refused (the previous config kept)",
            config_reloads.clone(),
        );
        let body_bytes_reserved = Gauge::default();
        registry.register(
            "wharf_http_body_bytes_reserved",
            "Body bytes reserved by requests in flight, out of [server] max_buffered_bytes",
            body_bytes_reserved.clone(),
        );
        let accept_batch_events = Histogram::new(exponential_buckets(1.0, 2.0, 11));
        registry.register(
            "wharf_accept_batch_events",
            "Events committed per acceptance transaction (group commit)",
            accept_batch_events.clone(),
        );
        let accept_transaction_seconds = Histogram::new(exponential_buckets(0.0005, 2.0, 14));
        registry.register(
            "wharf_accept_transaction_seconds",
            "Time one acceptance transaction took in the database, per batch",
            accept_transaction_seconds.clone(),
        );
        let accept_batch_splits = Counter::default();
        registry.register(
            "wharf_accept_batch_splits",
            "Acceptance batches the database refused and that were retried in halves",
            accept_batch_splits.clone(),
        );
        let admission_in_flight = Gauge::default();
        registry.register(
            "wharf_admission_in_flight",
            "Requests admitted past the body read and not yet answered",
            admission_in_flight.clone(),
        );
        let admission_limit = Gauge::default();
        registry.register(
            "wharf_admission_limit",
            "Requests that may be in flight now: the answer rate times half the answer budget",
            admission_limit.clone(),
        );
        let connections_shed = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "wharf_connections_shed",
            "Connections that found every slot serving a request: answered 503 overloaded and closed, or (past the overflow slots) closed when accepted",
            connections_shed.clone(),
        );
        Self {
            registry: Mutex::new(registry),
            requests,
            rate_limited,
            reloads,
            ack_seconds,
            db_commit_seconds,
            delivery_attempt_seconds,
            delivery_latency_seconds,
            backlog_gauges: Mutex::new(None),
            worker_events,
            deliveries,
            oldest_pending,
            outbox_unpublished,
            body_bytes_reserved,
            accept_batch_events,
            accept_transaction_seconds,
            accept_batch_splits,
            admission_in_flight,
            admission_limit,
            connections_shed,
            tls_reloads: Family::default(),
            config_reloads,
            tls_cert_expiry: Gauge::default(),
            tls_registered: std::sync::Once::new(),
            retention_dropped: Family::default(),
            retention_kept: Family::default(),
            retention_ready_until: Gauge::default(),
            retention_registered: std::sync::Once::new(),
        }
    }
}

impl Metrics {
    pub fn request(&self, endpoint: &str, outcome: &str, seconds: f64) {
        let labels = RequestLabels {
            endpoint: endpoint.to_owned(),
            outcome: outcome.to_owned(),
        };
        self.requests.get_or_create(&labels).inc();
        self.ack_seconds.get_or_create(&labels).observe(seconds);
    }

    /// A request refused by a rate limit (also counted in `wharf_requests_total`).
    pub fn rate_limited(&self, endpoint: &str, scope: &str) {
        let labels = RateLimitLabels {
            endpoint: endpoint.to_owned(),
            scope: scope.to_owned(),
        };
        self.rate_limited.get_or_create(&labels).inc();
    }

    pub fn adapter_reload(&self, adapter: &str, result: &str) {
        let labels = ReloadLabels {
            adapter: adapter.to_owned(),
            result: result.to_owned(),
        };
        self.reloads.get_or_create(&labels).inc();
    }

    /// A change of the config file: `applied` or `refused`.
    pub fn config_reload(&self, outcome: &str) {
        let labels = OutcomeLabels {
            outcome: outcome.to_owned(),
        };
        self.config_reloads.get_or_create(&labels).inc();
    }

    pub fn db_commit(&self, seconds: f64) {
        self.db_commit_seconds.observe(seconds);
    }

    pub fn worker_event(&self, outcome: &str) {
        let labels = OutcomeLabels {
            outcome: outcome.to_owned(),
        };
        self.worker_events.get_or_create(&labels).inc();
    }

    pub fn delivery(&self, sink: &str, outcome: &str) {
        let labels = DeliveryLabels {
            sink: sink.to_owned(),
            outcome: outcome.to_owned(),
        };
        self.deliveries.get_or_create(&labels).inc();
    }

    /// One delivery attempt ended: how long it took and, when sent, how long since acceptance.
    pub fn delivery_attempt(
        &self,
        sink: &str,
        outcome: &str,
        seconds: f64,
        since_accepted: Option<f64>,
    ) {
        let labels = DeliveryLabels {
            sink: sink.to_owned(),
            outcome: outcome.to_owned(),
        };
        self.delivery_attempt_seconds
            .get_or_create(&labels)
            .observe(seconds);
        if let Some(latency) = since_accepted {
            let sink = SinkLabels {
                sink: sink.to_owned(),
            };
            self.delivery_latency_seconds
                .get_or_create(&sink)
                .observe(latency.max(0.0));
        }
    }

    /// What a reconciler pass read: each target's pending and failed deliveries, and the
    /// `FAILED` events. Registers these gauges on first use, so only hosts running a
    /// reconciler export them.
    pub fn delivery_backlog(&self, targets: &[(TargetLabels, TargetBacklog)], inbox_failed: i64) {
        let mut slot = self.backlog_gauges.lock().expect("metrics lock");
        let gauges = slot.get_or_insert_with(|| {
            let gauges = BacklogGauges {
                pending: Family::default(),
                oldest_pending: Family::default(),
                failed: Family::default(),
                inbox_failed: Gauge::default(),
                seen: Default::default(),
            };
            let mut registry = self.registry.lock().expect("metrics lock");
            registry.register(
                "wharf_deliveries_pending",
                "Deliveries not yet sent, by target (read by the reconciler)",
                gauges.pending.clone(),
            );
            registry.register(
                "wharf_deliveries_oldest_pending_seconds",
                "Age of the oldest delivery not yet sent, by target (read by the reconciler)",
                gauges.oldest_pending.clone(),
            );
            registry.register(
                "wharf_deliveries_failed",
                "Deliveries that ended FAILED and wait for an operator, by target (read by the \
                 reconciler)",
                gauges.failed.clone(),
            );
            registry.register(
                "wharf_inbox_failed",
                "Events that ended FAILED and wait for an operator (read by the reconciler)",
                gauges.inbox_failed.clone(),
            );
            gauges
        });
        // Labels show a target without its credentials; targets that differ only there
        // share one series, summed.
        let mut shown: std::collections::HashMap<TargetLabels, TargetBacklog> = Default::default();
        for (target, backlog) in targets {
            let label = TargetLabels {
                sink: target.sink.clone(),
                target: safe_url(&target.target),
            };
            let sum = shown.entry(label).or_default();
            sum.pending += backlog.pending;
            sum.failed += backlog.failed;
            sum.oldest_pending_seconds = sum
                .oldest_pending_seconds
                .max(backlog.oldest_pending_seconds);
        }
        let targets: Vec<(TargetLabels, TargetBacklog)> = shown.into_iter().collect();
        let now: std::collections::HashSet<&TargetLabels> =
            targets.iter().map(|(t, _)| t).collect();
        let gone: Vec<TargetLabels> = gauges
            .seen
            .iter()
            .filter(|t| !now.contains(t))
            .cloned()
            .collect();
        for target in gone.iter() {
            gauges.pending.get_or_create(target).set(0);
            gauges.oldest_pending.get_or_create(target).set(0.0);
            gauges.failed.get_or_create(target).set(0);
        }
        for (target, backlog) in &targets {
            gauges.pending.get_or_create(target).set(backlog.pending);
            gauges
                .oldest_pending
                .get_or_create(target)
                .set(backlog.oldest_pending_seconds);
            gauges.failed.get_or_create(target).set(backlog.failed);
            gauges.seen.insert(target.clone());
        }
        gauges.inbox_failed.set(inbox_failed);
    }

    pub fn backlog(&self, oldest_pending_seconds: f64, outbox_unpublished: i64) {
        self.oldest_pending.set(oldest_pending_seconds);
        self.outbox_unpublished.set(outbox_unpublished);
    }

    /// A request reserved (positive) or gave back (negative) body bytes.
    pub fn body_bytes_reserved(&self, delta: i64) {
        self.body_bytes_reserved.inc_by(delta);
    }

    /// One acceptance transaction committed this many events in this long.
    pub fn accept_batch(&self, events: usize, seconds: f64) {
        self.accept_batch_events.observe(events as f64);
        self.accept_transaction_seconds.observe(seconds);
    }

    pub fn accept_batch_split(&self) {
        self.accept_batch_splits.inc();
    }

    pub fn admission(&self, in_flight: usize, limit: usize) {
        self.admission_in_flight.set(in_flight as i64);
        self.admission_limit.set(limit as i64);
    }

    /// A connection at the cap was `answered` 503 and closed, or `closed` unanswered.
    pub fn connection_shed(&self, outcome: &str) {
        let labels = OutcomeLabels {
            outcome: outcome.to_owned(),
        };
        self.connections_shed.get_or_create(&labels).inc();
    }

    /// The certificate serving HTTPS now expires at this Unix time.
    pub fn tls_cert_expiry(&self, unix_seconds: i64) {
        self.register_tls();
        self.tls_cert_expiry.set(unix_seconds);
    }

    /// A changed certificate or key file was loaded (`loaded`) or refused (`failed`).
    pub fn tls_reload(&self, outcome: &str) {
        self.register_tls();
        let labels = OutcomeLabels {
            outcome: outcome.to_owned(),
        };
        self.tls_reloads.get_or_create(&labels).inc();
    }

    fn register_tls(&self) {
        self.tls_registered.call_once(|| {
            let mut registry = self.registry.lock().expect("not poisoned");
            registry.register(
                "wharf_tls_reloads",
                "Changed TLS certificate/key files loaded, or refused (the previous pair kept \
                 serving), by outcome (loaded, failed)",
                self.tls_reloads.clone(),
            );
            registry.register(
                "wharf_tls_cert_expiry_timestamp_seconds",
                "When the certificate serving HTTPS expires (its notAfter), as a Unix time",
                self.tls_cert_expiry.clone(),
            );
        });
    }

    /// What a retention pass found: expired partitions dropped and kept (they still hold
    /// unfinished work), by table, and until when every table has partitions ready.
    pub fn retention(&self, dropped: &[&str], kept: &[(&str, i64)], ready_until_unix: i64) {
        self.retention_registered.call_once(|| {
            let mut registry = self.registry.lock().expect("not poisoned");
            registry.register(
                "wharf_retention_partitions_dropped",
                "Expired day partitions dropped, by table",
                self.retention_dropped.clone(),
            );
            registry.register(
                "wharf_retention_partitions_kept",
                "Expired day partitions kept because they still hold unfinished work (pending \
                 events, deliveries or notices), by table, at the last pass",
                self.retention_kept.clone(),
            );
            registry.register(
                "wharf_retention_ready_until_timestamp_seconds",
                "Until when every partitioned table has a partition for new rows, as a Unix time \
                 (acceptance fails past it)",
                self.retention_ready_until.clone(),
            );
        });
        let labels = |table: &str| TableLabels {
            table: table.to_owned(),
        };
        for table in dropped {
            self.retention_dropped.get_or_create(&labels(table)).inc();
        }
        for (table, count) in kept {
            self.retention_kept
                .get_or_create(&labels(table))
                .set(*count);
        }
        self.retention_ready_until.set(ready_until_unix);
    }

    /// The OpenMetrics text format (served as `http::METRICS_CONTENT_TYPE`).
    pub fn render(&self) -> String {
        let mut out = String::new();
        let registry = self.registry.lock().expect("not poisoned");
        prometheus_client::encoding::text::encode(&mut out, &registry)
            .expect("writing to a String");
        out
    }
}
