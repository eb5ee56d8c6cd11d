//! Configuration: a TOML file, then environment overrides, validated once at start.
//! Relative paths in the file are relative to the file's own folder.
//!
//! One module per table, each struct beside its own checks; a knob's default and range sit on
//! its field (`section!`).

// First: the other modules use its macro.
/// `section!`: a table declared with each field's default and range.
#[macro_use]
mod knobs;

/// `[adapters]`: the components' folder and the sandbox's limits.
mod adapters;
/// `[database]`: the URL, the ingest pool, group commit.
mod database;
/// `[[endpoint]]`: adapter, secret sets, settings, the overrides each endpoint may set.
mod endpoints;
/// The endpoints serving now, swapped whole on a live reload.
mod live;
/// The routes serving now, swapped whole on a live reload with the endpoints.
mod live_routes;
/// `[payloads]` and `[secrets]`: the files keys and secret sets are read from.
mod payloads;
/// The problems a check finds, each at its key, and the range messages.
mod problems;
/// `[[provider]]` and rate limits.
mod providers;
/// `[retention]`: how long what is stored is kept.
mod retention;
/// `[[route]]`: deliveries to HTTP or NATS sinks, event-type globs.
mod routes;
/// `[server]`: listeners, TLS, request bounds, admission, trusted proxies.
mod server;
/// `[tracing]`: OpenTelemetry traces.
mod tracing;
/// `[worker]` and `[nats]`: processing.
mod worker;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use zeroize::Zeroizing;

use crate::support::sealing::{self, PayloadKeys};
use crate::support::toml_lines::TomlError;

pub use adapters::AdaptersConfig;
pub use database::{DatabaseConfig, MAX_COMMIT_TIMEOUT_MS};
pub use endpoints::{
    EndpointConfig, MAX_TOLERANCE_SECS, UnsupportedTypes, tolerance_without_timestamp,
};
pub use live::{EndpointTable, LiveEndpoints};
pub use live_routes::{LiveRoutes, RouteTable, TargetKey};
pub use payloads::{PayloadsConfig, SecretsConfig};
pub use problems::{KeyPath, Problem};
pub use providers::{MAX_RATE_LIMIT, MIN_RATE_PER_SECOND, ProviderConfig, RateLimit};
pub use retention::{DEFAULT_REDELIVERY_WINDOW_DAYS, RetentionConfig};
pub use routes::{
    MAX_ROUTE_HEADER_VALUE, MAX_ROUTE_HEADERS, RESERVED_DELIVERY_HEADERS, RouteConfig, SinkKind,
    glob_match,
};
pub use server::{
    DEFAULT_MAX_BODY_BYTES, MAX_BODY_BYTES, MAX_TRUSTED_PROXIES, ServerConfig, TlsConfig,
};
pub use tracing::TracingConfig;
pub use worker::{NatsConfig, ProjectionDocument, WorkerConfig};

use problems::{Place, Problems};

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
    /// The file this was read from (`load`), which a receiver watches to reload its endpoints.
    #[serde(skip)]
    pub source: Option<PathBuf>,
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
        let base = path.parent().unwrap_or(Path::new("."));
        let mut config = Self::parse(&text, base).map_err(|e| {
            // FILE:LINE, as `config check` prints it.
            match e.downcast_ref::<TomlError>() {
                Some(TomlError {
                    line: Some(line),
                    problem,
                }) => anyhow::anyhow!("config {}:{line}: {}", path.display(), problem.message),
                _ => anyhow::anyhow!("config {}: {e}", path.display()),
            }
        })?;
        config.apply_env(|k| std::env::var(k).ok())?;
        config.source = Some(path.to_owned());
        Ok(config)
    }

    pub fn parse(text: &str, base: &Path) -> anyhow::Result<Self> {
        // Never toml's own text: it quotes the line, which may hold a password.
        let mut config: Config = toml::from_str(text).map_err(|e| TomlError::new(&e, text))?;
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
        for tls in [&mut config.server.tls, &mut config.server.admin_tls]
            .into_iter()
            .flatten()
        {
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
    /// prints its line), in this order.
    pub fn problems(&self) -> Vec<Problem> {
        let mut p = Problems::default();
        self.server.problems(&mut p);
        self.range_problems(&mut p);
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
        let ids = endpoints::problems(&self.endpoints, &mut p);
        let adapters: BTreeSet<&str> = self.endpoints.iter().map(|e| e.adapter.as_str()).collect();
        providers::problems(&self.providers, &adapters, &mut p);
        self.worker.problems(&mut p);
        routes::problems(&self.routes, &ids, self.nats.is_some(), &mut p);
        if let Some(t) = &self.tracing {
            t.problems(&mut p);
        }
        if let Some(nats) = &self.nats {
            nats.problems(&mut p);
        }
        p.into_vec()
    }

    /// Every numeric knob within a range that keeps the receiver's promises: a value outside
    /// would silently weaken one (replay protection, the 2 s answer, bounded memory) or
    /// overflow. Each message names the key and the allowed range.
    fn range_problems(&self, p: &mut Problems) {
        self.server.knob_problems(p, &Place::section("server"));
        self.database.knob_problems(p, &Place::section("database"));
        self.adapters.knob_problems(p, &Place::section("adapters"));
        self.payloads.knob_problems(p, &Place::section("payloads"));
        self.worker.knob_problems(p, &Place::section("worker"));
        if let Some(nats) = &self.nats {
            nats.knob_problems(p, &Place::section("nats"));
        }
        self.retention
            .knob_problems(p, &Place::section("retention"));
        if let Some(t) = &self.tracing {
            t.knob_problems(p, &Place::section("tracing"));
        }
        for (i, e) in self.endpoints.iter().enumerate() {
            e.range_problems(i, self.retention.event_days, p);
        }
        for (i, pr) in self.providers.iter().enumerate() {
            pr.range_problems(i, p);
        }
    }

    /// Endpoints naming a secret set that `sets` (the secrets file's) lacks: each one stops
    /// the receiver at start.
    pub fn missing_secret_sets(&self, sets: &[&str], file: &Path) -> Vec<Problem> {
        endpoints::missing_secret_sets(&self.endpoints, sets, file)
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
    /// the config, which is cloned and may be printed), accepting legacy rows only with
    /// `[payloads] upgrade_legacy_rows`.
    pub fn payload_keys(&self) -> anyhow::Result<PayloadKeys> {
        let env = std::env::var(sealing::KEY_ENV).ok().map(Zeroizing::new);
        Ok(PayloadKeys::load(
            self.payloads.key_file.as_deref(),
            env.as_ref().map(|v| v.as_str()),
        )?
        .accepting_legacy_rows(self.payloads.upgrade_legacy_rows))
    }

    pub fn database_url(&self) -> &str {
        self.database.url.as_deref().unwrap_or_default()
    }
}

/// The database URL the environment sets: `WHARF_DATABASE_URL`, else `DATABASE_URL`.
pub fn env_database_url(var: impl Fn(&str) -> Option<String>) -> Option<String> {
    var("WHARF_DATABASE_URL").or_else(|| var("DATABASE_URL"))
}

// Unit tests last: the layer test reads no further.
/// Valid configs to vary, for the tests of every table.
#[cfg(test)]
mod testing;
/// Ranges across tables: refused naming key and range, boundaries accepted.
#[cfg(test)]
mod tests;
