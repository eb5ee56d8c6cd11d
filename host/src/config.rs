//! Configuration: a TOML file, then environment overrides, validated once at start.
//! Relative paths in the file are relative to the file's own folder.

use std::collections::HashSet;
use std::fmt::Display;
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use zeroize::Zeroizing;

use crate::support::sealing::{self, PayloadKeys};

pub use crate::support::toml_lines::{KeyPath, Problem};

pub const DEFAULT_MAX_BODY_BYTES: u64 = 1 << 20;
/// The largest body limit anywhere (server, endpoint): bodies are buffered whole.
pub const MAX_BODY_BYTES: u64 = 64 << 20;
/// The promise is an answer within 2 s; a commit that may take longer could not keep it.
pub const MAX_COMMIT_TIMEOUT_MS: u64 = 1900;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub server: ServerConfig,
    #[serde(default)]
    pub database: DatabaseConfig,
    pub adapters: AdaptersConfig,
    pub secrets: SecretsConfig,
    /// Raw payloads at rest: the keys that encrypt them.
    #[serde(default)]
    pub payloads: PayloadsConfig,
    #[serde(default, rename = "endpoint")]
    pub endpoints: Vec<EndpointConfig>,
    #[serde(default)]
    pub worker: WorkerConfig,
    /// The NATS server for `nats` routes and the accepted-events feed; none: neither.
    pub nats: Option<NatsConfig>,
    /// Deliveries: which processed events go to which sink.
    #[serde(default, rename = "route")]
    pub routes: Vec<RouteConfig>,
    /// Limits shared by every endpoint of one adapter (`[[provider]]`).
    #[serde(default, rename = "provider")]
    pub providers: Vec<ProviderConfig>,
    /// How long what is stored is kept.
    #[serde(default)]
    pub retention: RetentionConfig,
    /// OpenTelemetry traces to an OTLP collector; none: no spans, no exporter.
    pub tracing: Option<TracingConfig>,
}

/// `[tracing]`: where spans go and how many traces are kept (docs/operations.md, "Traces").
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TracingConfig {
    /// The collector's OTLP/HTTP (protobuf) base URL, such as `http://collector:4318`; spans
    /// are posted to `<otlp_endpoint>/v1/traces`.
    pub otlp_endpoint: String,
    #[serde(default = "default_service_name")]
    pub service_name: String,
    /// The share of requests whose trace is recorded; processing and deliveries follow the
    /// request's decision.
    #[serde(default = "default_sampling_ratio")]
    pub sampling_ratio: f64,
    /// How often finished spans are sent to the collector.
    #[serde(default = "default_export_interval_ms")]
    pub export_interval_ms: u64,
}

impl TracingConfig {
    pub fn settings(&self) -> crate::support::traces::TraceSettings {
        crate::support::traces::TraceSettings {
            endpoint: self.otlp_endpoint.clone(),
            service_name: self.service_name.clone(),
            sampling_ratio: self.sampling_ratio,
            export_interval: Duration::from_millis(self.export_interval_ms),
        }
    }
}

/// How long what is stored is kept (`host/src/retention.rs`). Whole UTC days: a day's
/// partitions go once all of that day is older than its period.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetentionConfig {
    /// Raw payloads (`webhook_payloads`).
    #[serde(default = "default_retention_days")]
    pub payload_days: u32,
    /// Events: inbox rows, their processing markers, outbox notices and deliveries. At least
    /// `payload_days` and every endpoint's redelivery window.
    #[serde(default = "default_retention_days")]
    pub event_days: u32,
    /// How long a provider may send an event again and have it answered `duplicate`, unless
    /// an endpoint sets its own `redelivery_window_days`.
    #[serde(default = "default_redelivery_window_days")]
    pub redelivery_window_days: u32,
    /// Days of partitions kept ready ahead of the clock.
    #[serde(default = "default_create_ahead_days")]
    pub create_ahead_days: u32,
    /// How often a host checks partitions (creates ahead, drops expired).
    #[serde(default = "default_retention_interval_secs")]
    pub interval_secs: u64,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        Self {
            payload_days: default_retention_days(),
            event_days: default_retention_days(),
            redelivery_window_days: default_redelivery_window_days(),
            create_ahead_days: default_create_ahead_days(),
            interval_secs: default_retention_interval_secs(),
        }
    }
}

fn default_retention_days() -> u32 {
    30
}
pub const DEFAULT_REDELIVERY_WINDOW_DAYS: u32 = 7;
fn default_redelivery_window_days() -> u32 {
    DEFAULT_REDELIVERY_WINDOW_DAYS
}
fn default_create_ahead_days() -> u32 {
    3
}
fn default_retention_interval_secs() -> u64 {
    3600
}

/// Raw payloads at rest (see `support::sealing`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PayloadsConfig {
    /// The payload key file: `current = "<id>"` and `[keys] "<id>" = "<base64 of 32 bytes>"`.
    /// `WHARF_PAYLOAD_KEY=<id>:<base64>` adds a key and makes it current. At least one is
    /// required: payloads are never stored in plaintext.
    pub key_file: Option<PathBuf>,
}

/// Processing: workers, relays and the reconciler (in `wharf serve` and `wharf worker`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerConfig {
    /// Workers in `wharf serve`; 0 leaves processing to `wharf worker` processes.
    #[serde(default = "default_workers")]
    pub count: usize,
    /// Inbox rows claimed per lease.
    #[serde(default = "default_batch")]
    pub batch_size: u32,
    /// How long a claim stays with a worker before another may take it over.
    #[serde(default = "default_lease_secs")]
    pub lease_secs: u64,
    /// Attempts before an event is `FAILED` (an endpoint may override it).
    #[serde(default = "default_max_attempts")]
    pub max_attempts: u32,
    /// Exponential backoff with full jitter: a random wait up to base * 2^attempt, capped.
    #[serde(default = "default_backoff_base_ms")]
    pub backoff_base_ms: u64,
    #[serde(default = "default_backoff_max_ms")]
    pub backoff_max_ms: u64,
    /// Longest an idle worker waits before looking again when nothing woke it.
    #[serde(default = "default_idle_poll_ms")]
    pub idle_poll_ms: u64,
    /// How long a worker that found less than a full batch lets the next one gather before
    /// claiming again (a full batch claims again at once).
    #[serde(default = "default_linger_ms")]
    pub linger_ms: u64,
    /// What `object_state.state` keeps (an endpoint may override it).
    #[serde(default)]
    pub projection_document: ProjectionDocument,
    #[serde(default = "default_reconcile_secs")]
    pub reconcile_interval_secs: u64,
    /// Connections for processing, apart from the ingest pool, so a backlog never delays
    /// acknowledgements.
    #[serde(default = "default_worker_connections")]
    pub db_connections: u32,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        toml::from_str("").expect("defaults")
    }
}

impl WorkerConfig {
    pub fn lease(&self) -> Duration {
        Duration::from_secs(self.lease_secs)
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NatsConfig {
    pub url: String,
    /// The JetStream stream that keeps accepted-event notices; created when missing.
    #[serde(default = "default_accepted_stream")]
    pub accepted_stream: String,
    /// Notices go to `<prefix>.<endpoint>.<event type>`; the stream captures `<prefix>.>`.
    #[serde(default = "default_accepted_prefix")]
    pub accepted_prefix: String,
    /// Longest wait for a JetStream acknowledgement.
    #[serde(default = "default_nats_timeout_ms")]
    pub ack_timeout_ms: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SinkKind {
    Http,
    Nats,
}

impl SinkKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SinkKind::Http => "http",
            SinkKind::Nats => "nats",
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// An endpoint id or `*`.
    #[serde(default = "star")]
    pub endpoint: String,
    /// Globs over event types.
    #[serde(default = "stars")]
    pub events: Vec<String>,
    pub sink: SinkKind,
    pub url: Option<String>,
    pub subject: Option<String>,
    /// Per attempt: the whole HTTP exchange, or the wait for the JetStream acknowledgement.
    #[serde(default = "default_delivery_timeout_ms")]
    pub timeout_ms: u64,
    #[serde(default = "default_delivery_attempts")]
    pub max_attempts: u32,
    /// HTTP only: the secret set whose unexpired versions sign every delivery, the Standard
    /// Webhooks way (`webhook-id`, `webhook-timestamp`, `webhook-signature`).
    pub signing_secret: Option<String>,
    /// HTTP only: fixed headers added to every delivery (never one Wharf sets itself).
    #[serde(default)]
    pub headers: std::collections::BTreeMap<String, String>,
}

/// Headers Wharf sets on a delivery (or that frame the request), which a route's `headers`
/// may not replace; names starting with `wharf-` are reserved too.
pub const RESERVED_DELIVERY_HEADERS: [&str; 15] = [
    "content-type",
    "content-length",
    "host",
    "idempotency-key",
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
    "traceparent",
    "tracestate",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "upgrade",
];
/// Most `headers` one route may add, and the longest value.
pub const MAX_ROUTE_HEADERS: usize = 32;
pub const MAX_ROUTE_HEADER_VALUE: usize = 4096;

impl RouteConfig {
    /// The URL or subject: with the sink, what identifies a delivery of one event.
    pub fn target(&self) -> &str {
        match self.sink {
            SinkKind::Http => self.url.as_deref().unwrap_or_default(),
            SinkKind::Nats => self.subject.as_deref().unwrap_or_default(),
        }
    }

    pub fn matches(&self, endpoint_id: &str, event_type: &str) -> bool {
        (self.endpoint == "*" || self.endpoint == endpoint_id)
            && self.events.iter().any(|g| glob_match(g, event_type))
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    #[serde(default = "default_listen")]
    pub listen: SocketAddr,
    pub admin_listen: Option<SocketAddr>,
    /// The secret set (in the secrets file) whose unexpired `value`s are the admin API's
    /// bearer tokens. Unset: the admin listeners serve only `/healthz`, `/readyz` and
    /// `/metrics`, and every `/admin/*` path is 404.
    pub admin_token_secret: Option<String>,
    #[serde(default = "default_max_body")]
    pub max_body_bytes: u64,
    /// At most this many header lines (431 past it).
    #[serde(default = "default_max_headers")]
    pub max_headers: usize,
    /// At most this many bytes of header names and values together (431 past it).
    #[serde(default = "default_max_header_bytes")]
    pub max_header_bytes: usize,
    /// Serve plain HTTP on `listen`: only when set explicitly (local use, or behind a proxy
    /// that terminates TLS). Without it the listener needs `[server.tls]`.
    #[serde(default)]
    pub plain_http: bool,
    /// HTTPS on `listen` from these PEM files, reloaded when they change.
    pub tls: Option<TlsConfig>,
    /// Peers (addresses or CIDR networks) whose `X-Forwarded-For`/`X-Forwarded-Proto` and
    /// `Forwarded` headers are believed; from any other peer they are ignored.
    #[serde(default)]
    pub trusted_proxies: Vec<String>,
    /// Longest wait for a complete request head, from accept or from the end of the previous
    /// answer on a kept-alive connection: also the idle keep-alive timeout.
    #[serde(default = "default_header_timeout_ms")]
    pub header_timeout_ms: u64,
    /// Longest time to receive a whole body once its head is in; then 408 and close.
    #[serde(default = "default_body_timeout_ms")]
    pub body_timeout_ms: u64,
    /// Connections open at once per listener; past it, new ones wait in the kernel's backlog.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// Body bytes that requests in flight may hold together. Each request reserves its
    /// declared length (or its body limit when chunked) before reading; when that does not
    /// fit, 503 `overloaded` without reading the body.
    #[serde(default = "default_max_buffered_bytes")]
    pub max_buffered_bytes: u64,
    /// Longest a request admitted past the body read should wait for its answer under
    /// overload. Admission keeps in flight what the receiver answered per second times half
    /// this, so whatever cannot be answered in time is refused at once (503 `overloaded`)
    /// before the adapter runs.
    #[serde(default = "default_answer_budget_ms")]
    pub answer_budget_ms: u64,
    /// Requests admitted at once whatever the measured rate, so a burst after a quiet spell
    /// is taken (the rate measured then was low).
    #[serde(default = "default_min_in_flight")]
    pub min_in_flight: usize,
}

/// `[server.tls]`: the public listener's certificate chain and private key, PEM.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// The server certificate first, then any intermediates.
    pub cert_file: PathBuf,
    /// Its private key: PKCS#8, PKCS#1 (RSA) or SEC1 (EC).
    pub key_file: PathBuf,
}

/// The most `trusted_proxies` entries: each request from a proxy walks the list per hop.
pub const MAX_TRUSTED_PROXIES: usize = 256;

impl ServerConfig {
    /// `trusted_proxies` parsed: a bare address is a network of one.
    pub fn trusted_proxies(&self) -> anyhow::Result<Vec<ipnet::IpNet>> {
        in_range(
            "[server] trusted_proxies (entries)",
            self.trusted_proxies.len(),
            0..=MAX_TRUSTED_PROXIES,
        )?;
        self.trusted_proxies
            .iter()
            .map(|entry| {
                let text = entry.trim();
                text.parse::<ipnet::IpNet>()
                    .or_else(|_| text.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                    .map_err(|_| {
                        anyhow::anyhow!(
                            "[server] trusted_proxies: {entry:?} is not an IP address or a CIDR \
                             network (such as \"10.0.0.0/8\" or \"::1\")"
                        )
                    })
            })
            .collect()
    }
    pub fn answer_budget(&self) -> Duration {
        Duration::from_millis(self.answer_budget_ms)
    }
    pub fn header_timeout(&self) -> Duration {
        Duration::from_millis(self.header_timeout_ms)
    }
    pub fn body_timeout(&self) -> Duration {
        Duration::from_millis(self.body_timeout_ms)
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        toml::from_str("").expect("defaults")
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseConfig {
    pub url: Option<String>,
    #[serde(default = "default_pool")]
    pub max_connections: u32,
    /// Longest an acceptance may wait on the database before answering 503.
    #[serde(default = "default_commit_timeout_ms")]
    pub commit_timeout_ms: u64,
    #[serde(default = "yes")]
    pub migrate_on_start: bool,
    /// Acceptance transactions that may run at once; requests arriving while all are busy
    /// wait and share the next one (group commit). A second one starts only when the queue
    /// holds a quarter of `accept_batch_max` or `accept_gather_us` has passed.
    #[serde(default = "default_accept_writers")]
    pub accept_writers: usize,
    /// Most events one acceptance transaction carries.
    #[serde(default = "default_accept_batch_max")]
    pub accept_batch_max: usize,
    /// Longest a transaction waits for more requests to join it after the first (0: it takes
    /// what is queued and goes, so a lone request is never delayed).
    #[serde(default)]
    pub accept_batch_wait_us: u64,
    /// While a transaction is in flight, longest the next one gathers requests (up to a
    /// quarter of `accept_batch_max`) before taking a writer of its own; 0: every free writer
    /// takes what is queued at once.
    #[serde(default = "default_accept_gather_us")]
    pub accept_gather_us: u64,
}

impl DatabaseConfig {
    pub fn commit_timeout(&self) -> Duration {
        Duration::from_millis(self.commit_timeout_ms)
    }
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        toml::from_str("").expect("defaults")
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdaptersConfig {
    pub dir: PathBuf,
    /// Where compiled components are cached (keyed by content hash and engine); none: no cache.
    pub cache_dir: Option<PathBuf>,
    #[serde(default = "default_memory_mib")]
    pub memory_mib: usize,
    #[serde(default = "default_call_timeout_ms")]
    pub call_timeout_ms: u64,
    #[serde(default = "default_concurrency")]
    pub max_concurrency: u32,
    /// Threads that run adapter code (default: one per core), apart from those serving HTTP.
    pub threads: Option<usize>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretsConfig {
    pub file: PathBuf,
}

/// What the built-in projection keeps of each object's newest event besides its version, id,
/// type and inbox id (which it always keeps: they order the events).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProjectionDocument {
    /// `state` stays NULL. The event's body is the sealed payload of the row's `inbox_id`
    /// (`wharf events show --payload`): no plaintext copy of any body in the database, and
    /// processing writes no second copy of every body (docs/performance.md).
    #[default]
    None,
    /// `state` holds the event's document as JSON, in plaintext, for queries.
    Event,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UnsupportedTypes {
    #[default]
    Reject,
    Ignore,
}

/// A token bucket: `burst` requests at once, refilled at `per_second` (fractions allowed:
/// 0.5 is one every 2 s). Per process.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    pub per_second: f64,
    pub burst: u32,
}

/// The largest `per_second` and `burst`: far above what one receiver serves (about 2,000
/// requests/s), so anything larger could only be a typo.
pub const MAX_RATE_LIMIT: u32 = 1_000_000;
/// The smallest `per_second`: one token every 1,000 s.
pub const MIN_RATE_PER_SECOND: f64 = 0.001;

/// What one provider's endpoints share: `[[provider]] adapter = "stripe"`, `rate_limit = {..}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// The adapter's name (from `describe`), as endpoints name it in `adapter`.
    pub adapter: String,
    pub rate_limit: RateLimit,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointConfig {
    pub id: String,
    pub adapter: String,
    pub secret: String,
    pub public_url: Option<String>,
    pub tolerance_secs: Option<u64>,
    pub future_tolerance_secs: Option<u64>,
    pub max_body_bytes: Option<u64>,
    #[serde(default)]
    pub unsupported_types: UnsupportedTypes,
    pub rate_limit: Option<RateLimit>,
    /// Processing attempts before `FAILED` (default: `[worker] max_attempts`).
    pub max_attempts: Option<u32>,
    /// What the projection keeps of this endpoint's events (default: `[worker]
    /// projection_document`).
    pub projection_document: Option<ProjectionDocument>,
    /// Further secret sets a WIT 0.2 adapter's checks may name, by slot (Meta:
    /// `secrets = { verify-token = "meta-verify" }` beside `secret` for the app secret).
    #[serde(default)]
    pub secrets: std::collections::BTreeMap<String, String>,
    /// Non-secret values the endpoint's adapter may read (`request.setting(name)`).
    #[serde(default)]
    pub settings: std::sync::Arc<std::collections::BTreeMap<String, String>>,
    /// Days a copy of an accepted event is answered `duplicate` (default: `[retention]
    /// redelivery_window_days`, filled in when the config is read).
    pub redelivery_window_days: Option<u32>,
}

impl EndpointConfig {
    pub fn redelivery_window_days(&self) -> u32 {
        self.redelivery_window_days
            .unwrap_or(DEFAULT_REDELIVERY_WINDOW_DAYS)
    }

    /// The secret set a check's `key` names: `secret` for none, else `secrets.<slot>`.
    pub fn secret_set(&self, slot: Option<&str>) -> Option<&str> {
        match slot {
            None => Some(&self.secret),
            Some(slot) => self.secrets.get(slot).map(String::as_str),
        }
    }
}

fn default_listen() -> SocketAddr {
    "127.0.0.1:8080".parse().expect("literal")
}
fn default_max_body() -> u64 {
    DEFAULT_MAX_BODY_BYTES
}
fn default_max_headers() -> usize {
    64
}
fn default_max_header_bytes() -> usize {
    16 << 10
}
fn default_header_timeout_ms() -> u64 {
    10_000
}
fn default_body_timeout_ms() -> u64 {
    30_000
}
fn default_max_connections() -> usize {
    1024
}
fn default_max_buffered_bytes() -> u64 {
    64 << 20
}
fn default_pool() -> u32 {
    16
}
fn default_accept_writers() -> usize {
    4
}
fn default_accept_batch_max() -> usize {
    64
}
fn default_accept_gather_us() -> u64 {
    5_000
}
fn default_answer_budget_ms() -> u64 {
    500
}
fn default_min_in_flight() -> usize {
    512
}
fn default_commit_timeout_ms() -> u64 {
    1500
}
fn default_memory_mib() -> usize {
    64
}
fn default_call_timeout_ms() -> u64 {
    100
}
fn default_concurrency() -> u32 {
    64
}
fn default_workers() -> usize {
    2
}
fn default_batch() -> u32 {
    32
}
fn default_lease_secs() -> u64 {
    30
}
fn default_max_attempts() -> u32 {
    8
}
fn default_backoff_base_ms() -> u64 {
    1000
}
fn default_backoff_max_ms() -> u64 {
    300_000
}
fn default_idle_poll_ms() -> u64 {
    500
}
fn default_linger_ms() -> u64 {
    10
}
fn default_reconcile_secs() -> u64 {
    60
}
fn default_worker_connections() -> u32 {
    4
}
fn default_accepted_stream() -> String {
    "WHARF_ACCEPTED".into()
}
fn default_accepted_prefix() -> String {
    "wharf.accepted".into()
}
fn default_nats_timeout_ms() -> u64 {
    5000
}
fn default_delivery_timeout_ms() -> u64 {
    10_000
}
fn default_delivery_attempts() -> u32 {
    12
}
fn star() -> String {
    "*".into()
}
fn stars() -> Vec<String> {
    vec!["*".into()]
}
fn yes() -> bool {
    true
}
fn default_service_name() -> String {
    "wharf".into()
}
fn default_sampling_ratio() -> f64 {
    1.0
}
fn default_export_interval_ms() -> u64 {
    5000
}

impl Config {
    /// Requests admission lets in flight at most: two rounds of full acceptance batches (one
    /// committing, one queued), and never more than half the connection cap, so that refusals
    /// always have connections to be answered on (`ingest/admission.rs`).
    pub fn max_in_flight(&self) -> usize {
        let writers = 2 * self.database.accept_writers * self.database.accept_batch_max;
        writers.min(self.server.max_connections / 2).max(1)
    }

    /// Reads the file, applies `WHARF_*` overrides from the environment, resolves paths and
    /// validates.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let config = Self::load_unvalidated(path)?;
        config.validate()?;
        Ok(config)
    }

    /// Like `load` but leaves validation to the caller (`wharf dev` fills in the database).
    pub fn load_unvalidated(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("config {}: {e}", path.display()))?;
        let mut config = Self::parse(&text, path.parent().unwrap_or(Path::new(".")))
            .map_err(|e| anyhow::anyhow!("config {}: {e}", path.display()))?;
        config.apply_env(|k| std::env::var(k).ok())?;
        Ok(config)
    }

    pub fn parse(text: &str, base: &Path) -> anyhow::Result<Self> {
        let mut config: Config = toml::from_str(text)?;
        let resolve = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        resolve(&mut config.adapters.dir);
        if let Some(dir) = config.adapters.cache_dir.as_mut() {
            resolve(dir);
        }
        resolve(&mut config.secrets.file);
        if let Some(file) = config.payloads.key_file.as_mut() {
            resolve(file);
        }
        if let Some(tls) = config.server.tls.as_mut() {
            resolve(&mut tls.cert_file);
            resolve(&mut tls.key_file);
        }
        let window = config.retention.redelivery_window_days;
        for e in &mut config.endpoints {
            e.redelivery_window_days.get_or_insert(window);
        }
        Ok(config)
    }

    pub fn apply_env(&mut self, var: impl Fn(&str) -> Option<String>) -> anyhow::Result<()> {
        if let Some(url) = env_database_url(&var) {
            self.database.url = Some(url);
        }
        if let Some(listen) = var("WHARF_LISTEN") {
            self.server.listen = listen
                .parse()
                .map_err(|e| anyhow::anyhow!("WHARF_LISTEN: {e}"))?;
        }
        if let Some(listen) = var("WHARF_ADMIN_LISTEN") {
            self.server.admin_listen = Some(
                listen
                    .parse()
                    .map_err(|e| anyhow::anyhow!("WHARF_ADMIN_LISTEN: {e}"))?,
            );
        }
        Ok(())
    }

    /// Every start-time check that needs neither the database, the secrets file nor the
    /// adapters. The error names every problem found, one a line.
    pub fn validate(&self) -> anyhow::Result<()> {
        match self.problems().as_slice() {
            [] => Ok(()),
            [one] => anyhow::bail!("{}", one.message),
            many => anyhow::bail!(
                "{} problems:\n{}",
                many.len(),
                many.iter()
                    .map(|p| format!("  {}", p.message))
                    .collect::<Vec<_>>()
                    .join("\n")
            ),
        }
    }

    /// What `validate` refuses, each problem with the key it is about (`wharf config check`
    /// prints its line).
    pub fn problems(&self) -> Vec<Problem> {
        let mut p = Problems::default();
        match (&self.server.tls, self.server.plain_http) {
            (None, false) => p.ensure(false, KeyPath::section("server", "plain_http"), || {
                "[server]: the ingest listener serves HTTPS or, only when asked, plain HTTP: add \
                 [server.tls] with cert_file and key_file (PEM) for HTTPS, or set \
                 plain_http = true to serve plain HTTP (local use, or behind a proxy that \
                 terminates TLS)"
                    .into()
            }),
            (Some(_), true) => p.ensure(false, KeyPath::section("server", "tls"), || {
                "[server]: both [server.tls] and plain_http = true are set; the ingest listener \
                 serves one or the other: remove plain_http for HTTPS, or [server.tls] for plain \
                 HTTP"
                    .into()
            }),
            _ => {}
        }
        if let Some(set) = &self.server.admin_token_secret {
            p.ensure(
                !set.is_empty(),
                KeyPath::section("server", "admin_token_secret"),
                || "[server] admin_token_secret must name a secret set".into(),
            );
        }
        let proxies = self.server.trusted_proxies().err();
        p.ensure(
            proxies.is_none(),
            KeyPath::section("server", "trusted_proxies"),
            || proxies.map(|e| e.to_string()).unwrap_or_default(),
        );
        self.validate_ranges(&mut p);
        // The keys are read now so a config check names a missing or unreadable key file.
        let keys = self.payload_keys().err();
        p.ensure(
            keys.is_none(),
            KeyPath::section("payloads", "key_file"),
            || keys.map(|e| e.to_string()).unwrap_or_default(),
        );
        p.ensure(
            self.database.url.is_some(),
            KeyPath::section("database", "url"),
            || "no database url: set [database] url or WHARF_DATABASE_URL".into(),
        );
        let mut ids = HashSet::new();
        for (i, e) in self.endpoints.iter().enumerate() {
            let key = |k: &str| KeyPath::root("endpoint").index(i).key(k);
            let url_safe = !e.id.is_empty()
                && e.id.len() <= 128
                && e.id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
            p.ensure(url_safe, key("id"), || {
                format!("endpoint id {:?} must be 1-128 of [A-Za-z0-9._-]", e.id)
            });
            p.ensure(ids.insert(&e.id), key("id"), || {
                format!("endpoint id {:?} is used twice", e.id)
            });
            p.ensure(
                e.secrets.len() <= 8 && e.secrets.keys().all(|k| !k.is_empty() && k.len() <= 64),
                key("secrets"),
                || {
                    format!(
                        "endpoint {:?}: at most 8 secrets slots, each named by 1-64 bytes",
                        e.id
                    )
                },
            );
            // Settings reach the adapter; bounded so a typo cannot cost every request.
            p.ensure(
                e.settings.len() <= 64
                    && e.settings
                        .iter()
                        .all(|(k, v)| !k.is_empty() && k.len() <= 64 && v.len() <= 4096),
                key("settings"),
                || format!(
                    "endpoint {:?}: at most 64 settings, names of 1-64 bytes, values of at most 4096",
                    e.id
                ),
            );
        }
        let mut providers = HashSet::new();
        for (i, pr) in self.providers.iter().enumerate() {
            let key = KeyPath::root("provider").index(i).key("adapter");
            p.ensure(providers.insert(&pr.adapter), key.clone(), || {
                format!("provider {:?} is configured twice", pr.adapter)
            });
            // A name no endpoint uses is a typo that would leave the provider unlimited.
            p.ensure(
                self.endpoints.iter().any(|e| e.adapter == pr.adapter),
                key,
                || {
                    format!(
                        "provider {:?}: no endpoint uses adapter {:?} (adapter names: {})",
                        pr.adapter,
                        pr.adapter,
                        self.endpoints
                            .iter()
                            .map(|e| e.adapter.as_str())
                            .collect::<std::collections::BTreeSet<_>>()
                            .into_iter()
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                },
            );
        }
        p.ensure(
            self.worker.backoff_base_ms <= self.worker.backoff_max_ms,
            KeyPath::section("worker", "backoff_base_ms"),
            || "[worker] backoff_base_ms must be at most backoff_max_ms".into(),
        );
        for (i, r) in self.routes.iter().enumerate() {
            let key = |k: &str| KeyPath::root("route").index(i).key(k);
            let name = format!("route {} ({} -> {})", i + 1, r.endpoint, r.sink.as_str());
            p.ensure(
                r.endpoint == "*" || ids.contains(&r.endpoint),
                key("endpoint"),
                || format!("{name}: no endpoint {:?}", r.endpoint),
            );
            p.ensure(!r.events.is_empty(), key("events"), || {
                format!("{name}: events is empty")
            });
            p.range(
                key("timeout_ms"),
                &format!("{name}: timeout_ms"),
                r.timeout_ms,
                1..=300_000,
            );
            p.range(
                key("max_attempts"),
                &format!("{name}: max_attempts"),
                r.max_attempts,
                1..=100,
            );
            match r.sink {
                SinkKind::Http => {
                    let url = r.url.as_deref().unwrap_or_default();
                    p.ensure(
                        r.subject.is_none()
                            && (url.starts_with("http://") || url.starts_with("https://")),
                        key(if r.subject.is_some() {
                            "subject"
                        } else {
                            "url"
                        }),
                        || {
                            format!(
                                "{name}: an http route needs url = \"http(s)://...\" and no subject"
                            )
                        },
                    );
                }
                SinkKind::Nats => {
                    let subject = r.subject.as_deref().unwrap_or_default();
                    p.ensure(
                        r.url.is_none() && crate::support::subjects::valid_subject(subject),
                        key(if r.url.is_some() { "url" } else { "subject" }),
                        || format!("{name}: a nats route needs a valid subject (no wildcards) and no url"),
                    );
                    p.ensure(self.nats.is_some(), key("sink"), || {
                        format!("{name}: a nats route needs a [nats] url")
                    });
                    p.ensure(r.signing_secret.is_none(), key("signing_secret"), || {
                        format!(
                            "{name}: signing_secret applies to http routes only (JetStream \
                             messages are not signed)"
                        )
                    });
                    p.ensure(r.headers.is_empty(), key("headers"), || {
                        format!("{name}: headers applies to http routes only")
                    });
                }
            }
            if let Some(set) = &r.signing_secret {
                p.ensure(!set.is_empty(), key("signing_secret"), || {
                    format!("{name}: signing_secret must name a secret set")
                });
            }
            let headers = validate_route_headers(&name, &r.headers).err();
            p.ensure(headers.is_none(), key("headers"), || {
                headers.map(|e| e.to_string()).unwrap_or_default()
            });
        }
        // A delivery is one row per (sink, target), whichever routes planned it, so the
        // routes sharing a target must sign and add headers alike.
        for (i, r) in self.routes.iter().enumerate() {
            if let Some(other) = self.routes[..i]
                .iter()
                .position(|o| o.sink == r.sink && o.target() == r.target())
            {
                let o = &self.routes[other];
                let key = KeyPath::root("route").index(i).key("signing_secret");
                p.ensure(
                    o.signing_secret == r.signing_secret && o.headers == r.headers,
                    key,
                    || {
                        format!(
                            "routes {} and {} send to the same {} target {:?} but differ in \
                             signing_secret or headers: they share one delivery per event, so \
                             give them the same",
                            other + 1,
                            i + 1,
                            r.sink.as_str(),
                            r.target()
                        )
                    },
                );
            }
        }
        if let Some(t) = &self.tracing {
            let endpoint = t.otlp_endpoint.as_str();
            p.ensure(
                (endpoint.starts_with("http://") || endpoint.starts_with("https://"))
                    && endpoint
                        .parse::<http::Uri>()
                        .is_ok_and(|u| u.host().is_some())
                    && !endpoint.contains(['?', '#']),
                KeyPath::section("tracing", "otlp_endpoint"),
                || {
                    "[tracing] otlp_endpoint must be the collector's OTLP/HTTP base URL, \
                     http(s)://host:port (spans go to its /v1/traces)"
                        .into()
                },
            );
            p.ensure(
                (1..=128).contains(&t.service_name.len())
                    && t.service_name.bytes().all(|b| b.is_ascii_graphic()),
                KeyPath::section("tracing", "service_name"),
                || "[tracing] service_name must be 1-128 visible ASCII characters".into(),
            );
        }
        if let Some(nats) = &self.nats {
            p.ensure(
                crate::support::subjects::valid_subject(&nats.accepted_prefix),
                KeyPath::section("nats", "accepted_prefix"),
                || "[nats] accepted_prefix must be a subject without wildcards".into(),
            );
        }
        p.0
    }

    /// Endpoints naming a secret set that `sets` (the secrets file's) lacks: each one stops
    /// the receiver at start.
    pub fn missing_secret_sets(&self, sets: &[&str], file: &Path) -> Vec<Problem> {
        let mut p = Problems::default();
        for (i, e) in self.endpoints.iter().enumerate() {
            let slots = std::iter::once(("secret".to_owned(), e.secret.as_str())).chain(
                e.secrets
                    .iter()
                    .map(|(slot, set)| (format!("secrets.{slot}"), set.as_str())),
            );
            for (key, set) in slots {
                let mut path = KeyPath::root("endpoint").index(i);
                for k in key.splitn(2, '.') {
                    path = path.key(k);
                }
                p.ensure(sets.contains(&set), path, || {
                    format!(
                        "endpoint {:?}: secret set {:?} is not in {}",
                        e.id,
                        set,
                        file.display()
                    )
                });
            }
        }
        p.0
    }

    /// Every numeric knob within a range that keeps the receiver's promises: a value outside
    /// would silently weaken one (replay protection, the 2 s answer, bounded memory) or
    /// overflow. Each message names the key and the allowed range.
    fn validate_ranges(&self, p: &mut Problems) {
        let s = &self.server;
        p.knob(
            "server",
            "max_body_bytes",
            s.max_body_bytes,
            1..=MAX_BODY_BYTES,
        );
        p.knob("server", "max_headers", s.max_headers, 1..=1024);
        p.knob(
            "server",
            "max_header_bytes",
            s.max_header_bytes,
            1024..=1 << 20,
        );
        p.knob(
            "server",
            "header_timeout_ms",
            s.header_timeout_ms,
            100..=300_000,
        );
        p.knob(
            "server",
            "body_timeout_ms",
            s.body_timeout_ms,
            100..=600_000,
        );
        p.knob("server", "max_connections", s.max_connections, 1..=100_000);
        // At least one largest body must fit, or no request could ever be read.
        p.range(
            KeyPath::section("server", "max_buffered_bytes"),
            "[server] max_buffered_bytes (at least max_body_bytes)",
            s.max_buffered_bytes,
            s.max_body_bytes..=16 << 30,
        );
        // Above the commit timeout it would admit requests that can only end in a 503.
        p.knob(
            "server",
            "answer_budget_ms",
            s.answer_budget_ms,
            10..=MAX_COMMIT_TIMEOUT_MS,
        );
        p.knob("server", "min_in_flight", s.min_in_flight, 1..=8192);
        let d = &self.database;
        p.knob("database", "max_connections", d.max_connections, 1..=1000);
        // Each writer holds a pooled connection while it commits.
        p.range(
            KeyPath::section("database", "accept_writers"),
            "[database] accept_writers (at most max_connections)",
            d.accept_writers,
            1..=d.max_connections as usize,
        );
        p.knob("database", "accept_batch_max", d.accept_batch_max, 1..=1000);
        p.knob(
            "database",
            "accept_batch_wait_us",
            d.accept_batch_wait_us,
            0..=100_000,
        );
        p.knob(
            "database",
            "accept_gather_us",
            d.accept_gather_us,
            0..=1_000_000,
        );
        p.knob(
            "database",
            "commit_timeout_ms",
            d.commit_timeout_ms,
            1..=MAX_COMMIT_TIMEOUT_MS,
        );
        let a = &self.adapters;
        p.knob("adapters", "memory_mib", a.memory_mib, 1..=4096);
        p.knob("adapters", "call_timeout_ms", a.call_timeout_ms, 1..=1000);
        p.knob("adapters", "max_concurrency", a.max_concurrency, 1..=1024);
        if let Some(threads) = a.threads {
            p.knob("adapters", "threads", threads, 1..=256);
        }
        let w = &self.worker;
        p.knob("worker", "count", w.count, 0..=256);
        p.knob("worker", "batch_size", w.batch_size, 1..=1000);
        p.knob("worker", "lease_secs", w.lease_secs, 1..=3600);
        p.knob("worker", "max_attempts", w.max_attempts, 1..=100);
        p.knob(
            "worker",
            "backoff_base_ms",
            w.backoff_base_ms,
            1..=3_600_000,
        );
        p.knob("worker", "backoff_max_ms", w.backoff_max_ms, 1..=86_400_000);
        p.knob("worker", "idle_poll_ms", w.idle_poll_ms, 1..=60_000);
        p.knob("worker", "linger_ms", w.linger_ms, 0..=1000);
        p.knob(
            "worker",
            "reconcile_interval_secs",
            w.reconcile_interval_secs,
            1..=86_400,
        );
        p.knob("worker", "db_connections", w.db_connections, 1..=1000);
        if let Some(nats) = &self.nats {
            p.knob("nats", "ack_timeout_ms", nats.ack_timeout_ms, 1..=60_000);
        }
        let r = &self.retention;
        p.knob("retention", "payload_days", r.payload_days, 1..=3650);
        // Events outliving their payloads is fine; payloads outliving their events are
        // unreachable.
        p.range(
            KeyPath::section("retention", "event_days"),
            "[retention] event_days (at least payload_days)",
            r.event_days,
            r.payload_days..=3650,
        );
        // Idempotency records must live as long as a provider may redeliver.
        p.range(
            KeyPath::section("retention", "redelivery_window_days"),
            "[retention] redelivery_window_days (at most event_days)",
            r.redelivery_window_days,
            1..=r.event_days,
        );
        p.knob(
            "retention",
            "create_ahead_days",
            r.create_ahead_days,
            1..=90,
        );
        p.knob("retention", "interval_secs", r.interval_secs, 60..=86_400);
        if let Some(t) = &self.tracing {
            p.knob("tracing", "sampling_ratio", t.sampling_ratio, 0.0..=1.0);
            p.knob(
                "tracing",
                "export_interval_ms",
                t.export_interval_ms,
                10..=60_000,
            );
        }
        for (i, e) in self.endpoints.iter().enumerate() {
            let key = |k: &str| KeyPath::root("endpoint").index(i).key(k);
            let label = |k: &str| format!("endpoint {:?}: {k}", e.id);
            if let Some(v) = e.tolerance_secs {
                let k = "tolerance_secs";
                p.range(key(k), &label(k), v, 1..=MAX_TOLERANCE_SECS);
            }
            if let Some(v) = e.future_tolerance_secs {
                let k = "future_tolerance_secs";
                p.range(key(k), &label(k), v, 0..=MAX_TOLERANCE_SECS);
            }
            if let Some(v) = e.max_body_bytes {
                let k = "max_body_bytes";
                p.range(key(k), &label(k), v, 1..=MAX_BODY_BYTES);
            }
            if let Some(v) = e.redelivery_window_days {
                let k = "redelivery_window_days";
                let what = format!("{} (at most [retention] event_days)", label(k));
                p.range(key(k), &what, v, 1..=self.retention.event_days);
            }
            if let Some(v) = e.max_attempts {
                let k = "max_attempts";
                p.range(key(k), &label(k), v, 1..=100);
            }
            if let Some(limit) = &e.rate_limit {
                rate_limit_in_range(p, key("rate_limit"), &format!("endpoint {:?}", e.id), limit);
            }
        }
        for (i, pr) in self.providers.iter().enumerate() {
            let key = KeyPath::root("provider").index(i).key("rate_limit");
            let owner = format!("provider {:?}", pr.adapter);
            rate_limit_in_range(p, key, &owner, &pr.rate_limit);
        }
    }

    /// An endpoint's own value of a setting `[worker]` also has, if it sets one.
    fn endpoint_override<T>(
        &self,
        endpoint_id: &str,
        value: impl FnOnce(&EndpointConfig) -> Option<T>,
    ) -> Option<T> {
        self.endpoints
            .iter()
            .find(|e| e.id == endpoint_id)
            .and_then(value)
    }

    /// What the projection keeps of one endpoint's events.
    pub fn projection_document(&self, endpoint_id: &str) -> ProjectionDocument {
        self.endpoint_override(endpoint_id, |e| e.projection_document)
            .unwrap_or(self.worker.projection_document)
    }

    /// Attempts allowed for one endpoint's events.
    pub fn max_attempts(&self, endpoint_id: &str) -> u32 {
        self.endpoint_override(endpoint_id, |e| e.max_attempts)
            .unwrap_or(self.worker.max_attempts)
    }

    /// The payload keys: the key file, then `WHARF_PAYLOAD_KEY` (read now, never stored in
    /// the config, which is cloned and may be printed).
    pub fn payload_keys(&self) -> anyhow::Result<PayloadKeys> {
        let env = std::env::var(sealing::KEY_ENV).ok().map(Zeroizing::new);
        Ok(PayloadKeys::load(
            self.payloads.key_file.as_deref(),
            env.as_ref().map(|v| v.as_str()),
        )?)
    }

    pub fn database_url(&self) -> &str {
        self.database.url.as_deref().unwrap_or_default()
    }
}

/// The database URL the environment sets: `WHARF_DATABASE_URL`, else `DATABASE_URL`.
pub fn env_database_url(var: impl Fn(&str) -> Option<String>) -> Option<String> {
    var("WHARF_DATABASE_URL").or_else(|| var("DATABASE_URL"))
}

/// A route's fixed `headers`: legal names and values, none Wharf sets itself, bounded.
fn validate_route_headers(
    route: &str,
    headers: &std::collections::BTreeMap<String, String>,
) -> anyhow::Result<()> {
    anyhow::ensure!(
        headers.len() <= MAX_ROUTE_HEADERS,
        "{route}: headers has {} entries, at most {MAX_ROUTE_HEADERS} allowed",
        headers.len()
    );
    let mut seen = HashSet::new();
    for (name, value) in headers {
        let parsed = http::HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
            anyhow::anyhow!("{route}: headers: {name:?} is not a legal header name")
        })?;
        let lower = parsed.as_str();
        anyhow::ensure!(
            !RESERVED_DELIVERY_HEADERS.contains(&lower) && !lower.starts_with("wharf-"),
            "{route}: headers: {name:?} is set by Wharf itself and cannot be configured \
             (reserved: {}, wharf-*)",
            RESERVED_DELIVERY_HEADERS.join(", ")
        );
        // Names are case-insensitive: "X-Env" and "x-env" would be one header twice.
        anyhow::ensure!(
            seen.insert(lower.to_owned()),
            "{route}: headers: {name:?} is given twice (names are case-insensitive)"
        );
        // Visible ASCII, spaces and tabs only: no CR/LF or other control characters.
        anyhow::ensure!(
            value.len() <= MAX_ROUTE_HEADER_VALUE && http::HeaderValue::from_str(value).is_ok(),
            "{route}: headers: the value of {name:?} must be at most {MAX_ROUTE_HEADER_VALUE} \
             bytes of visible ASCII, spaces and tabs"
        );
    }
    Ok(())
}

/// The widest replay window an endpoint may configure, either way.
pub const MAX_TOLERANCE_SECS: u64 = 3600;

fn rate_limit_in_range(p: &mut Problems, key: KeyPath, owner: &str, limit: &RateLimit) {
    p.range(
        key.clone(),
        &format!("{owner}: rate_limit.per_second"),
        limit.per_second,
        MIN_RATE_PER_SECOND..=f64::from(MAX_RATE_LIMIT),
    );
    p.range(
        key,
        &format!("{owner}: rate_limit.burst"),
        limit.burst,
        1..=MAX_RATE_LIMIT,
    );
}

/// Refuses `value` outside `range`, naming the key and the range.
fn in_range<T: PartialOrd + Display>(
    key: &str,
    value: T,
    range: RangeInclusive<T>,
) -> anyhow::Result<()> {
    anyhow::ensure!(
        range.contains(&value),
        "{key} = {value} is out of range: allowed {}..={}",
        range.start(),
        range.end()
    );
    Ok(())
}

/// Problems found so far, each with its key.
#[derive(Default)]
struct Problems(Vec<Problem>);

impl Problems {
    fn ensure(&mut self, ok: bool, key: KeyPath, message: impl FnOnce() -> String) {
        if !ok {
            self.0.push(Problem::at_key(key, message()));
        }
    }

    /// `value` within `range`, or a problem naming `label` and the range.
    fn range<T: PartialOrd + Display>(
        &mut self,
        key: KeyPath,
        label: &str,
        value: T,
        range: RangeInclusive<T>,
    ) {
        if let Err(e) = in_range(label, value, range) {
            self.0.push(Problem::at_key(key, e.to_string()));
        }
    }

    /// `[section] name` within `range`.
    fn knob<T: PartialOrd + Display>(
        &mut self,
        section: &str,
        name: &str,
        value: T,
        range: RangeInclusive<T>,
    ) {
        let label = format!("[{section}] {name}");
        self.range(KeyPath::section(section, name), &label, value, range);
    }
}

/// An endpoint that sets a freshness window although its adapter signs no timestamp: every
/// request would fail (no timestamp to check) while the operator believes replays are bounded.
pub fn tolerance_without_timestamp(
    endpoint: &EndpointConfig,
    adapter_signs_timestamp: bool,
) -> Option<String> {
    let sets = endpoint.tolerance_secs.is_some() || endpoint.future_tolerance_secs.is_some();
    (sets && !adapter_signs_timestamp).then(|| {
        format!(
            "endpoint {:?}: tolerance_secs/future_tolerance_secs set, but adapter {:?} signs no \
             timestamp; remove them (replay protection then rests on the event id)",
            endpoint.id, endpoint.adapter
        )
    })
}

/// Matches an event type against a glob in which `*` stands for any run of characters.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let Some((head, rest)) = pattern.split_once('*') else {
        return pattern == text;
    };
    let Some(mut remaining) = text.strip_prefix(head) else {
        return false;
    };
    let mut pieces: Vec<&str> = rest.split('*').collect();
    let tail = pieces.pop().unwrap_or_default();
    for piece in pieces {
        match remaining.find(piece) {
            Some(i) => remaining = &remaining[i + piece.len()..],
            None => return false,
        }
    }
    remaining.len() >= tail.len() && remaining.ends_with(tail)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `[payloads]` table naming a key file that exists for the whole test run.
    fn payloads_table() -> String {
        static FILE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
        let file = FILE.get_or_init(|| {
            let dir = tempfile::tempdir().unwrap().keep();
            let path = dir.join("keys.toml");
            let key = "A".repeat(43) + "=";
            std::fs::write(&path, format!("current = \"k\"\n[keys]\nk = \"{key}\"\n")).unwrap();
            path
        });
        format!(
            "\n[payloads]\nkey_file = {:?}\n",
            file.display().to_string()
        )
    }

    /// A valid config with `line` added to `table` (`server`, `database`, ..., `endpoint`).
    fn config_with(table: &str, line: &str) -> anyhow::Result<Config> {
        let mut tables = [
            ("server", "plain_http = true\n".to_owned()),
            ("database", "url = \"postgres://x/y\"\n".to_owned()),
            ("adapters", "dir = \"a\"\n".to_owned()),
            ("secrets", "file = \"s.toml\"\n".to_owned()),
            ("worker", String::new()),
        ];
        let mut endpoint = "id = \"e\"\nadapter = \"stripe\"\nsecret = \"e\"\n".to_owned();
        match tables.iter_mut().find(|(name, _)| *name == table) {
            Some((_, body)) => body.push_str(line),
            None if table == "endpoint" => endpoint.push_str(line),
            None => panic!("no table {table}"),
        }
        let mut text: String = tables
            .iter()
            .map(|(name, body)| format!("[{name}]\n{body}\n"))
            .collect();
        text.push_str(&format!("[[endpoint]]\n{endpoint}"));
        let dir = tempfile::tempdir()?;
        let keys = dir.path().join("keys.toml");
        std::fs::write(
            &keys,
            format!(
                "current = \"k\"\n[keys]\nk = \"{}\"\n",
                "A".repeat(43) + "="
            ),
        )?;
        text.push_str(&format!(
            "\n[payloads]\nkey_file = {:?}\n",
            keys.display().to_string()
        ));
        let config = Config::parse(&text, Path::new("/"))?;
        config.validate()?;
        Ok(config)
    }

    #[test]
    fn defaults_are_valid() {
        let config = config_with("server", "").unwrap();
        assert_eq!(config.server.header_timeout_ms, 10_000);
        assert_eq!(config.server.body_timeout_ms, 30_000);
        assert_eq!(config.server.max_connections, 1024);
        assert_eq!(config.server.max_buffered_bytes, 64 << 20);
    }

    #[test]
    fn the_projection_keeps_no_document_unless_the_worker_or_the_endpoint_says_so() {
        let by_default = config_with("server", "").unwrap();
        assert_eq!(
            by_default.projection_document("e"),
            ProjectionDocument::None
        );
        let all = config_with("worker", "projection_document = \"event\"\n").unwrap();
        assert_eq!(all.projection_document("e"), ProjectionDocument::Event);
        let one = config_with("endpoint", "projection_document = \"event\"\n").unwrap();
        assert_eq!(one.projection_document("e"), ProjectionDocument::Event);
        assert_eq!(one.projection_document("other"), ProjectionDocument::None);
        let error = config_with("worker", "projection_document = \"body\"\n").unwrap_err();
        assert!(
            format!("{error:#}").contains("unknown variant `body`"),
            "{error:#}"
        );
    }

    #[test]
    fn numeric_knobs_out_of_range_are_refused_naming_key_and_range() {
        for (table, line, message) in [
            (
                "endpoint",
                "tolerance_secs = 0",
                "tolerance_secs = 0 is out of range: allowed 1..=3600",
            ),
            (
                "endpoint",
                "tolerance_secs = 100000000",
                "tolerance_secs = 100000000 is out of range: allowed 1..=3600",
            ),
            (
                "endpoint",
                "future_tolerance_secs = 3601",
                "future_tolerance_secs = 3601 is out of range: allowed 0..=3600",
            ),
            (
                "endpoint",
                "max_body_bytes = 0",
                "max_body_bytes = 0 is out of range: allowed 1..=67108864",
            ),
            (
                "endpoint",
                "max_attempts = 0",
                "max_attempts = 0 is out of range: allowed 1..=100",
            ),
            (
                "endpoint",
                "rate_limit = { per_second = 0, burst = 1 }",
                "endpoint \"e\": rate_limit.per_second = 0 is out of range: allowed 0.001..=1000000",
            ),
            (
                "endpoint",
                "rate_limit = { per_second = -1, burst = 1 }",
                "endpoint \"e\": rate_limit.per_second = -1 is out of range",
            ),
            (
                "endpoint",
                "rate_limit = { per_second = inf, burst = 1 }",
                "endpoint \"e\": rate_limit.per_second = inf is out of range",
            ),
            (
                "endpoint",
                "rate_limit = { per_second = 10, burst = 0 }",
                "endpoint \"e\": rate_limit.burst = 0 is out of range: allowed 1..=1000000",
            ),
            (
                "endpoint",
                "rate_limit = { per_second = 10, burst = 1000001 }",
                "endpoint \"e\": rate_limit.burst = 1000001 is out of range: allowed 1..=1000000",
            ),
            (
                "database",
                "commit_timeout_ms = 2000",
                "[database] commit_timeout_ms = 2000 is out of range: allowed 1..=1900",
            ),
            (
                "database",
                "commit_timeout_ms = 0",
                "[database] commit_timeout_ms = 0 is out of range: allowed 1..=1900",
            ),
            (
                "server",
                "max_body_bytes = 0",
                "[server] max_body_bytes = 0 is out of range: allowed 1..=67108864",
            ),
            (
                "server",
                "max_body_bytes = 1099511627776",
                "[server] max_body_bytes = 1099511627776 is out of range",
            ),
            (
                "server",
                "header_timeout_ms = 0",
                "[server] header_timeout_ms = 0 is out of range: allowed 100..=300000",
            ),
            (
                "server",
                "body_timeout_ms = 50",
                "[server] body_timeout_ms = 50 is out of range: allowed 100..=600000",
            ),
            (
                "server",
                "max_connections = 0",
                "[server] max_connections = 0 is out of range: allowed 1..=100000",
            ),
            (
                "server",
                "max_buffered_bytes = 1000",
                "[server] max_buffered_bytes (at least max_body_bytes) = 1000 is out of range: allowed 1048576..=",
            ),
            (
                "server",
                "max_headers = 0",
                "[server] max_headers = 0 is out of range",
            ),
            (
                "adapters",
                "memory_mib = 0",
                "[adapters] memory_mib = 0 is out of range: allowed 1..=4096",
            ),
            (
                "adapters",
                "memory_mib = 17592186044416",
                "[adapters] memory_mib = 17592186044416 is out of range: allowed 1..=4096",
            ),
            (
                "adapters",
                "call_timeout_ms = 0",
                "[adapters] call_timeout_ms = 0 is out of range: allowed 1..=1000",
            ),
            (
                "adapters",
                "max_concurrency = 0",
                "[adapters] max_concurrency = 0 is out of range: allowed 1..=1024",
            ),
            (
                "adapters",
                "threads = 0",
                "[adapters] threads = 0 is out of range: allowed 1..=256",
            ),
            (
                "worker",
                "lease_secs = 0",
                "[worker] lease_secs = 0 is out of range: allowed 1..=3600",
            ),
            (
                "worker",
                "batch_size = 0",
                "[worker] batch_size = 0 is out of range: allowed 1..=1000",
            ),
            (
                "worker",
                "idle_poll_ms = 0",
                "[worker] idle_poll_ms = 0 is out of range: allowed 1..=60000",
            ),
            (
                "worker",
                "backoff_max_ms = 100000000000",
                "[worker] backoff_max_ms = 100000000000 is out of range",
            ),
        ] {
            let error = config_with(table, &format!("{line}\n"))
                .unwrap_err()
                .to_string();
            assert!(error.contains(message), "[{table}] {line}: {error}");
        }
    }

    #[test]
    fn boundary_values_are_accepted() {
        for (table, line) in [
            (
                "endpoint",
                "tolerance_secs = 3600\nfuture_tolerance_secs = 0",
            ),
            ("endpoint", "max_body_bytes = 1"),
            (
                "endpoint",
                "rate_limit = { per_second = 1000000, burst = 1000000 }",
            ),
            ("endpoint", "rate_limit = { per_second = 0.001, burst = 1 }"),
            ("database", "commit_timeout_ms = 1900"),
            (
                "server",
                "max_body_bytes = 67108864\nmax_buffered_bytes = 67108864",
            ),
            ("adapters", "memory_mib = 4096"),
        ] {
            config_with(table, &format!("{line}\n")).unwrap_or_else(|e| panic!("{line}: {e}"));
        }
    }

    #[test]
    fn providers_name_an_adapter_some_endpoint_uses_once_each() {
        let provider = |adapter: &str| {
            format!(
                "[[provider]]\nadapter = \"{adapter}\"\nrate_limit = {{ per_second = 5, burst = 10 }}\n"
            )
        };
        let parse = |extra: &str| {
            let text = format!(
                "[server]\nplain_http = true\n[database]\nurl = \"postgres://x/y\"\n[adapters]\ndir = \"a\"\n[secrets]\nfile = \"s\"\n\
                 [[endpoint]]\nid = \"e\"\nadapter = \"stripe\"\nsecret = \"e\"\n{extra}{}",
                payloads_table()
            );
            Config::parse(&text, Path::new("/")).and_then(|c| c.validate().map(|()| c))
        };
        let config = parse(&provider("stripe")).unwrap();
        assert_eq!(config.providers[0].adapter, "stripe");
        assert_eq!(config.providers[0].rate_limit.burst, 10);
        let error = parse(&provider("github")).unwrap_err().to_string();
        assert!(
            error.contains("provider \"github\": no endpoint uses adapter \"github\""),
            "{error}"
        );
        let twice = format!("{}{}", provider("stripe"), provider("stripe"));
        let error = parse(&twice).unwrap_err().to_string();
        assert!(error.contains("configured twice"), "{error}");
        let error = parse("[[provider]]\nadapter = \"stripe\"\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("missing field `rate_limit`"), "{error}");
    }

    #[test]
    fn a_tolerance_on_an_adapter_without_a_timestamp_is_named() {
        let config = config_with("endpoint", "tolerance_secs = 300\n").unwrap();
        let endpoint = &config.endpoints[0];
        assert!(tolerance_without_timestamp(endpoint, true).is_none());
        let message = tolerance_without_timestamp(endpoint, false).unwrap();
        assert!(message.contains("signs no timestamp"), "{message}");
        let plain = config_with("endpoint", "").unwrap();
        assert!(tolerance_without_timestamp(&plain.endpoints[0], false).is_none());
    }

    /// A valid config with one route (`route`: its keys) and a `[nats]` table.
    fn config_with_route(route: &str) -> anyhow::Result<Config> {
        let text = format!(
            "[server]\nplain_http = true\n[database]\nurl = \"postgres://x/y\"\n[adapters]\ndir = \"a\"\n\
             [secrets]\nfile = \"s.toml\"\n[nats]\nurl = \"nats://127.0.0.1:4222\"\n\
             [[endpoint]]\nid = \"e\"\nadapter = \"stripe\"\nsecret = \"e\"\n\
             [[route]]\n{route}\n{}",
            payloads_table()
        );
        let config = Config::parse(&text, Path::new("/"))?;
        config.validate()?;
        Ok(config)
    }

    #[test]
    fn route_headers_and_signing_are_checked_naming_the_problem() {
        const HTTP: &str = "sink = \"http\"\nurl = \"http://127.0.0.1:9/x\"\n";
        const NATS: &str = "sink = \"nats\"\nsubject = \"a.b\"\n";
        let ok = config_with_route(&format!(
            "{HTTP}signing_secret = \"down\"\nheaders = {{ \"X-Env\" = \"prod\", Authorization = \"Bearer a b\" }}"
        ))
        .unwrap();
        assert_eq!(ok.routes[0].signing_secret.as_deref(), Some("down"));
        assert_eq!(ok.routes[0].headers["X-Env"], "prod");
        for (route, message) in [
            (
                format!("{NATS}signing_secret = \"down\""),
                "route 1 (* -> nats): signing_secret applies to http routes only",
            ),
            (
                format!("{NATS}headers = {{ x-env = \"prod\" }}"),
                "route 1 (* -> nats): headers applies to http routes only",
            ),
            (
                format!("{HTTP}signing_secret = \"\""),
                "signing_secret must name a secret set",
            ),
            (
                format!("{HTTP}headers = {{ Webhook-Signature = \"v1,x\" }}"),
                "headers: \"Webhook-Signature\" is set by Wharf itself",
            ),
            (
                format!("{HTTP}headers = {{ Wharf-Event-Id = \"x\" }}"),
                "headers: \"Wharf-Event-Id\" is set by Wharf itself",
            ),
            (
                format!("{HTTP}headers = {{ Content-Length = \"1\" }}"),
                "headers: \"Content-Length\" is set by Wharf itself",
            ),
            (
                format!("{HTTP}headers = {{ \"X Env\" = \"prod\" }}"),
                "headers: \"X Env\" is not a legal header name",
            ),
            (
                format!("{HTTP}headers = {{ X-Env = \"prod\\r\\nInjected: 1\" }}"),
                "headers: the value of \"X-Env\" must be at most 4096 bytes of visible ASCII",
            ),
            (
                format!("{HTTP}headers = {{ X-Env = \"a\", x-env = \"b\" }}"),
                "is given twice (names are case-insensitive)",
            ),
            (
                format!("{HTTP}signing_secret = \"a\"\n[[route]]\n{HTTP}signing_secret = \"b\""),
                "routes 1 and 2 send to the same http target \"http://127.0.0.1:9/x\" but differ",
            ),
        ] {
            let error = config_with_route(&route).unwrap_err().to_string();
            assert!(error.contains(message), "{route}: {error}");
            assert!(
                !error.contains("Injected"),
                "a value is never quoted: {error}"
            );
        }
    }

    #[test]
    fn the_listener_serves_https_or_plain_http_only_when_asked() {
        let tls = "[server.tls]\ncert_file = \"tls/cert.pem\"\nkey_file = \"/etc/key.pem\"\n";
        let base = "[adapters]\ndir = \"a\"\n[secrets]\nfile = \"s.toml\"\n\
                    [database]\nurl = \"postgres://x/y\"\n";
        let load = |server: &str| {
            let text = format!("{server}{base}{}", payloads_table());
            let config = Config::parse(&text, Path::new("/conf"))?;
            config.validate().map(|()| config)
        };
        let config = load(&format!("[server]\n{tls}")).unwrap();
        let files = config.server.tls.unwrap();
        assert_eq!(files.cert_file, Path::new("/conf/tls/cert.pem"));
        assert_eq!(files.key_file, Path::new("/etc/key.pem"));

        let neither = load("[server]\n").unwrap_err().to_string();
        assert!(
            neither.contains("[server.tls]") && neither.contains("plain_http = true"),
            "{neither}"
        );
        let explicit_no = load("[server]\nplain_http = false\n").unwrap_err();
        assert_eq!(explicit_no.to_string(), neither);
        let both = load(&format!("[server]\nplain_http = true\n{tls}"))
            .unwrap_err()
            .to_string();
        assert!(both.contains("both"), "{both}");
        let unknown = load(&format!("[server]\n{tls}ca_file = \"x\"\n")).unwrap_err();
        assert!(unknown.to_string().contains("ca_file"), "{unknown}");
    }

    #[test]
    fn trusted_proxies_are_addresses_or_networks() {
        let config = config_with(
            "server",
            "trusted_proxies = [\"127.0.0.1\", \"10.0.0.0/8\", \"::1\", \"fd00::/8\"]\n",
        )
        .unwrap();
        let nets = config.server.trusted_proxies().unwrap();
        let shown: Vec<String> = nets.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["127.0.0.1/32", "10.0.0.0/8", "::1/128", "fd00::/8"]);
        for bad in ["\"proxy.internal\"", "\"10.0.0.0/33\"", "\"\""] {
            let error = config_with("server", &format!("trusted_proxies = [{bad}]\n"))
                .unwrap_err()
                .to_string();
            assert!(
                error.contains("[server] trusted_proxies") && error.contains("not an IP address"),
                "{bad}: {error}"
            );
        }
        let many: Vec<String> = (0..=MAX_TRUSTED_PROXIES)
            .map(|i| format!("\"10.0.{}.{}\"", i / 256, i % 256))
            .collect();
        let error = config_with(
            "server",
            &format!("trusted_proxies = [{}]\n", many.join(",")),
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("allowed 0..=256"), "{error}");
    }

    #[test]
    fn globs() {
        assert!(glob_match("*", "anything"));
        assert!(glob_match("payment_intent.*", "payment_intent.succeeded"));
        assert!(!glob_match("payment_intent.*", "charge.succeeded"));
        assert!(glob_match("a*b*c", "aXXbYYc"));
        assert!(!glob_match("a*b*c", "aXXcYYb"));
        assert!(glob_match("exact", "exact"));
        assert!(!glob_match("ab*ba", "aba"));
    }

    #[test]
    fn tracing_is_off_unless_configured_and_its_settings_are_checked() {
        assert!(config_with("server", "").unwrap().tracing.is_none());
        let table = |lines: &str| config_with("worker", &format!("\n[tracing]\n{lines}\n"));
        let on = table("otlp_endpoint = \"http://collector:4318\"").unwrap();
        let t = on.tracing.expect("configured");
        assert_eq!(
            (
                t.service_name.as_str(),
                t.sampling_ratio,
                t.export_interval_ms
            ),
            ("wharf", 1.0, 5000)
        );
        for (lines, message) in [
            ("", "missing field `otlp_endpoint`"),
            (
                "otlp_endpoint = \"collector:4318\"",
                "[tracing] otlp_endpoint must be the collector's OTLP/HTTP base URL",
            ),
            (
                "otlp_endpoint = \"http://c:4318\"\nsampling_ratio = 1.5",
                "[tracing] sampling_ratio = 1.5 is out of range: allowed 0..=1",
            ),
            (
                "otlp_endpoint = \"http://c:4318\"\nexport_interval_ms = 0",
                "[tracing] export_interval_ms = 0 is out of range: allowed 10..=60000",
            ),
            (
                "otlp_endpoint = \"http://c:4318\"\nservice_name = \"\"",
                "[tracing] service_name must be 1-128 visible ASCII characters",
            ),
        ] {
            let error = format!("{:#}", table(lines).unwrap_err());
            assert!(error.contains(message), "{lines:?}: {error}");
        }
    }
}
