//! The config file, watched like the secrets file: a change to `[[endpoint]]` or `[[route]]`
//! applies live (the endpoint table and its rate limits, and the route table, swap atomically;
//! processing shares both, and starts or stops a target's relay as routes come and go), and
//! any other change is refused with its reason while the configuration that was serving keeps
//! serving. A file that does not parse or validate is refused the same way. A refused text is
//! judged again at each pass (what it lacked, such as a secret set, may arrive), and each
//! refusal is reported once.
//!
//! Which keys reload live is written down in `docs/operations.md` ("Reloading the config
//! file"): `[[endpoint]]` and `[[route]]` entries, added, removed or changed, here; the secrets file's contents
//! (`ingest::SecretStore`), the adapters folder (`Reloader`) and the TLS files on their own
//! watches. Every other key is compared as written in the file (a key added with its default
//! value is still a change) and needs a restart.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::config::{
    Config, EndpointConfig, LiveEndpoints, LiveRoutes, tolerance_without_timestamp,
};
use crate::ingest::{Ingest, SECRETS_QUIET, SecretStore};
use crate::support::metrics::Metrics;
use crate::support::shown::safe_url;

use super::route_changes::RouteChanges;
use crate::support::toml_lines::TomlError;

/// How often the file is re-read without a change notification; `WHARF_WATCH_POLL_MS`
/// overrides it.
const POLL_INTERVAL: Duration = Duration::from_secs(5);

/// The top-level keys whose entries reload live.
const LIVE_KEYS: [&str; 2] = ["endpoint", "route"];

/// Why a changed config file was not applied.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error("cannot read it: {0}")]
    Unreadable(std::io::Error),
    #[error("invalid TOML{}: {}", .0.line.map(|l| format!(" at line {l}")).unwrap_or_default(),
        .0.problem.message)]
    Invalid(TomlError),
    #[error("{} changed, which applies only at a restart (only [[endpoint]] and [[route]] entries reload live)",
        .0.join(", "))]
    RestartOnly(Vec<String>),
    #[error("{}", .0.join("; "))]
    Problems(Vec<String>),
}

/// What a reload changed, by endpoint id, and the routes by target.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct EndpointChanges {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub changed: Vec<String>,
    pub routes: RouteChanges,
}

impl EndpointChanges {
    pub fn between(old: &[EndpointConfig], new: &[EndpointConfig]) -> Self {
        let find = |list: &[EndpointConfig], id: &str| list.iter().find(|e| e.id == id).cloned();
        let mut changes = Self::default();
        for e in new {
            match find(old, &e.id) {
                None => changes.added.push(e.id.clone()),
                // Every field is plain data; its debug form is a faithful comparison.
                Some(o) if format!("{o:?}") != format!("{e:?}") => {
                    changes.changed.push(e.id.clone())
                }
                Some(_) => {}
            }
        }
        for o in old {
            if find(new, &o.id).is_none() {
                changes.removed.push(o.id.clone());
            }
        }
        changes
    }

    pub fn is_empty(&self) -> bool {
        self.added.is_empty()
            && self.removed.is_empty()
            && self.changed.is_empty()
            && self.routes.is_empty()
    }
}

/// The keys outside `[[endpoint]]` and `[[route]]` that differ between two parsed files, named as an operator
/// writes them: `[server] listen`, `[database]`, `[[provider]]`. Values are never named (a
/// database URL holds a password).
pub fn restart_only_changes(old: &toml::Table, new: &toml::Table) -> Vec<String> {
    let keys: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    let mut changed = Vec::new();
    for key in keys
        .into_iter()
        .filter(|k| !LIVE_KEYS.contains(&k.as_str()))
    {
        match (old.get(key), new.get(key)) {
            (a, b) if a == b => {}
            (Some(toml::Value::Table(a)), Some(toml::Value::Table(b))) => {
                let inner: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
                for k in inner.into_iter().filter(|k| a.get(*k) != b.get(*k)) {
                    changed.push(format!("[{key}] {k}"));
                }
            }
            (Some(toml::Value::Array(_)), _) | (_, Some(toml::Value::Array(_))) => {
                changed.push(format!("[[{key}]]"))
            }
            _ => changed.push(format!("[{key}]")),
        }
    }
    changed
}

/// The serving configuration and the file it was read from, kept between passes.
struct Applied {
    /// The configuration serving: the start's, with the endpoints and routes of the last
    /// applied file.
    config: Config,
    /// The last applied file, parsed: restart-only keys are compared with it.
    table: toml::Table,
    /// The last applied file's text: reading it again changes nothing.
    text: Option<String>,
    /// The text last refused (`None`: unreadable) and the reason said. It is judged again at
    /// every pass, since what it lacked may arrive (a secret set added to the secrets file
    /// after the endpoint naming it), but the same refusal is reported once.
    refused: Option<(Option<String>, String)>,
}

/// A refusal to report, unless it is the one last reported for the same text.
fn refuse(
    applied: &mut Applied,
    text: Option<String>,
    refusal: Refusal,
) -> Option<Result<EndpointChanges, Refusal>> {
    let said = (text, refusal.to_string());
    if applied.refused.as_ref() == Some(&said) {
        return None;
    }
    applied.refused = Some(said);
    Some(Err(refusal))
}

/// What a reload applies to: a receiver (its ingest, whose endpoint table processing shares,
/// checked against its secrets file and adapters), or processing alone (`wharf worker`).
enum Target {
    Receiver {
        ingest: Arc<Ingest>,
        secrets: Arc<SecretStore>,
    },
    Processing {
        endpoints: Arc<LiveEndpoints>,
        /// The secrets file a worker whose routes sign reads; none when none signed at its
        /// start (a route that signs then needs a restart).
        signing: Option<Arc<SecretStore>>,
    },
}

/// Watches the config file and applies its endpoints to a running receiver or worker.
pub struct ConfigReloader {
    path: PathBuf,
    target: Target,
    /// The routes processing reads, swapped with the endpoints.
    routes: Arc<LiveRoutes>,
    metrics: Arc<Metrics>,
    applied: Mutex<Applied>,
}

impl ConfigReloader {
    /// For a receiver whose config was read from a file (`Config::load`); `None` for one
    /// built in memory.
    pub fn new(
        config: &Config,
        ingest: Arc<Ingest>,
        secrets: Arc<SecretStore>,
        routes: Arc<LiveRoutes>,
        metrics: Arc<Metrics>,
    ) -> Option<Arc<Self>> {
        Self::with_target(
            config,
            Target::Receiver { ingest, secrets },
            routes,
            metrics,
        )
    }

    /// For `wharf worker`: the endpoints and routes its workers and relays look up
    /// (`Processing::endpoints`, `Processing::routes`), and the secrets file it signs with.
    pub fn for_processing(
        config: &Config,
        endpoints: Arc<LiveEndpoints>,
        routes: Arc<LiveRoutes>,
        signing: Option<Arc<SecretStore>>,
        metrics: Arc<Metrics>,
    ) -> Option<Arc<Self>> {
        let target = Target::Processing { endpoints, signing };
        Self::with_target(config, target, routes, metrics)
    }

    fn with_target(
        config: &Config,
        target: Target,
        routes: Arc<LiveRoutes>,
        metrics: Arc<Metrics>,
    ) -> Option<Arc<Self>> {
        let path = config.source.clone()?;
        // The file as it is now; had it changed since the start read it, the difference shows
        // at the first pass only if it touches restart-only keys, as it should.
        let text = std::fs::read_to_string(&path).ok();
        let table = text
            .as_deref()
            .and_then(|t| toml::from_str(t).ok())
            .unwrap_or_default();
        Some(Arc::new(Self {
            path,
            target,
            routes,
            metrics,
            applied: Mutex::new(Applied {
                config: config.clone(),
                table,
                text,
                refused: None,
            }),
        }))
    }

    fn applied(&self) -> std::sync::MutexGuard<'_, Applied> {
        self.applied.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Handles one settled text of the file: applied, refused, or already handled (`None`).
    pub fn consider(
        &self,
        read: Result<String, std::io::Error>,
    ) -> Option<Result<EndpointChanges, Refusal>> {
        let mut applied = self.applied();
        let text = match read {
            Ok(text) => text,
            Err(e) => return refuse(&mut applied, None, Refusal::Unreadable(e)),
        };
        if applied.text.as_ref() == Some(&text) {
            if applied.refused.take().is_some() {
                tracing::info!(file = %self.path.display(),
                    "config file back to the configuration serving");
            }
            return None;
        }
        match self.evaluate(&applied, &text) {
            Ok((config, table)) => {
                let mut changes =
                    EndpointChanges::between(&applied.config.endpoints, &config.endpoints);
                changes.routes = RouteChanges::between(&applied.config.routes, &config.routes);
                // Endpoints first: a new route's endpoint is then known when a worker
                // matches an event against it.
                match &self.target {
                    Target::Receiver { ingest, .. } => ingest.replace_endpoints(&config.endpoints),
                    Target::Processing { endpoints, .. } => endpoints.replace(&config.endpoints),
                }
                if !changes.routes.is_empty() {
                    self.routes.replace(&config.routes);
                }
                applied.config = config;
                applied.table = table;
                applied.text = Some(text);
                applied.refused = None;
                Some(Ok(changes))
            }
            Err(refusal) => refuse(&mut applied, Some(text), refusal),
        }
    }

    /// The configuration `text` would serve, or why it may not.
    fn evaluate(&self, applied: &Applied, text: &str) -> Result<(Config, toml::Table), Refusal> {
        let table: toml::Table =
            toml::from_str(text).map_err(|e| Refusal::Invalid(TomlError::new(&e, text)))?;
        let restart = restart_only_changes(&applied.table, &table);
        if !restart.is_empty() {
            return Err(Refusal::RestartOnly(restart));
        }
        let base = self.path.parent().unwrap_or(Path::new("."));
        let read = Config::parse(text, base).map_err(|e| match e.downcast::<TomlError>() {
            Ok(e) => Refusal::Invalid(e),
            Err(e) => Refusal::Problems(vec![e.to_string()]),
        })?;
        // Everything but the endpoints and routes is the running configuration's, which the
        // file still says (checked above): environment overrides and `wharf dev`'s database
        // included.
        let mut config = applied.config.clone();
        config.endpoints = read.endpoints;
        config.routes = read.routes;
        let mut problems: Vec<String> = config.problems().into_iter().map(|p| p.message).collect();
        problems.extend(self.signing_problems(&config));
        // A worker reads neither the providers' secrets nor the adapters: those checks are
        // the receivers'.
        if let Target::Receiver { ingest, secrets } = &self.target {
            if let Ok(secrets) = &*secrets.current() {
                let names: Vec<&str> = secrets.set_names().collect();
                let missing = config.missing_secret_sets(&names, &config.secrets.file);
                problems.extend(missing.into_iter().map(|p| p.message));
            }
            let adapters = ingest.adapters();
            for e in &config.endpoints {
                if let Some(a) = adapters.get(&e.adapter) {
                    let signs_timestamp = a.info.tolerance_past_secs.is_some();
                    problems.extend(tolerance_without_timestamp(e, signs_timestamp));
                }
            }
        }
        if !problems.is_empty() {
            return Err(Refusal::Problems(problems));
        }
        Ok((config, table))
    }

    /// Every route's `signing_secret` names a set in the secrets file as it is now (whether
    /// its versions can sign is checked at each attempt, as after a rotation).
    fn signing_problems(&self, config: &Config) -> Vec<String> {
        let store = match &self.target {
            Target::Receiver { secrets, .. } => Some(secrets),
            Target::Processing { signing, .. } => signing.as_ref(),
        };
        let file = config.secrets.file.display();
        let mut problems = Vec::new();
        for (i, r) in config.routes.iter().enumerate() {
            let Some(set) = &r.signing_secret else {
                continue;
            };
            let name = format!("route {} ({} -> {})", i + 1, r.endpoint, r.sink.as_str());
            match store.map(|s| s.current()) {
                None => problems.push(format!(
                    "{name}: signing_secret: this worker started with no signing route and \
                     reads no secrets file; restart it to sign"
                )),
                Some(current) => match &*current {
                    Ok(secrets) if secrets.set_names().any(|n| n == set) => {}
                    Ok(_) => problems.push(format!(
                        "{name}: signing_secret: signing secret set {set:?} is not in {file}"
                    )),
                    Err(_) => problems.push(format!(
                        "{name}: signing_secret: the secrets file {file} cannot be read"
                    )),
                },
            }
        }
        problems
    }

    /// Logs and counts what a pass did.
    fn report(&self, result: &Result<EndpointChanges, Refusal>) {
        let file = self.path.display();
        match result {
            Ok(changes) => {
                self.metrics.config_reload("applied");
                let (endpoints, adapters) = match &self.target {
                    Target::Receiver { ingest, .. } => {
                        (ingest.endpoints(), Some(ingest.adapters()))
                    }
                    Target::Processing { endpoints, .. } => (Arc::clone(endpoints), None),
                };
                for (ids, what) in [
                    (&changes.added, "endpoint added"),
                    (&changes.changed, "endpoint changed"),
                ] {
                    for id in ids {
                        let adapter = endpoints.get(id).map(|e| e.adapter.clone());
                        tracing::info!(%file, endpoint = %id, adapter = ?adapter, "{what}");
                        let loaded =
                            |a: &String| adapters.as_ref().is_none_or(|s| s.get(a).is_some());
                        if let Some(name) = adapter.filter(|a| !loaded(a)) {
                            tracing::warn!(endpoint = %id, adapter = %name,
                                "adapter not loaded: the endpoint answers 503 adapter_unavailable until it is");
                        }
                    }
                }
                for id in &changes.removed {
                    tracing::info!(%file, endpoint = %id, "endpoint removed");
                }
                let routes = &changes.routes;
                for (targets, what) in [
                    (&routes.added, "route added"),
                    (&routes.changed, "route changed"),
                    (&routes.removed, "route removed"),
                ] {
                    for (sink, target) in targets {
                        tracing::info!(%file, %sink, target = %safe_url(target), "{what}");
                    }
                }
                tracing::info!(%file, added = changes.added.len(), removed = changes.removed.len(),
                    changed = changes.changed.len(), routes_added = routes.added.len(),
                    routes_removed = routes.removed.len(), routes_changed = routes.changed.len(),
                    "config reloaded");
            }
            Err(refusal) => {
                self.metrics.config_reload("refused");
                tracing::error!(%file, reason = %refusal,
                    "config change refused: the previous configuration keeps serving");
            }
        }
    }

    /// Re-reads the file until two reads a quiet spell apart agree, then handles that text.
    async fn refresh(&self, cancel: &CancellationToken) {
        let read_now = || {
            let path = self.path.clone();
            async move {
                tokio::task::spawn_blocking(move || std::fs::read_to_string(&path))
                    .await
                    .unwrap_or_else(|e| Err(std::io::Error::other(e)))
            }
        };
        let mut seen = read_now().await;
        loop {
            let serving = {
                let applied = self.applied();
                matches!((&seen, &applied.text), (Ok(t), Some(s)) if t == s)
                    && applied.refused.is_none()
            };
            if serving {
                return;
            }
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(SECRETS_QUIET) => {}
            }
            let again = read_now().await;
            let settled = match (&seen, &again) {
                (Ok(a), Ok(b)) => a == b,
                (Err(a), Err(b)) => a.kind() == b.kind(),
                _ => false,
            };
            if settled {
                if let Some(result) = self.consider(again) {
                    self.report(&result);
                }
                return;
            }
            seen = again;
        }
    }

    /// Watches the file's folder (rename-over saves are seen) and polls as a fallback.
    pub fn watch(
        self: &Arc<Self>,
        cancel: CancellationToken,
    ) -> anyhow::Result<tokio::task::JoinHandle<()>> {
        let this = Arc::clone(self);
        let stop = cancel.clone();
        crate::support::watch::on_file_changes(&self.path, POLL_INTERVAL, cancel, move || {
            let (this, stop) = (Arc::clone(&this), stop.clone());
            async move { this.refresh(&stop).await }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> toml::Table {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn restart_only_keys_are_named_and_endpoints_ignored() {
        let old = table(
            "[server]\nlisten = \"127.0.0.1:1\"\nmax_body_bytes = 10\n[database]\nurl = \"postgres://u:pw@h/db\"\n[[endpoint]]\nid = \"a\"\n[[route]]\nendpoint = \"a\"\n",
        );
        let endpoints_only = table(
            "[server]\nlisten = \"127.0.0.1:1\"\nmax_body_bytes = 10\n[database]\nurl = \"postgres://u:pw@h/db\"\n[[endpoint]]\nid = \"b\"\n[[route]]\nendpoint = \"a\"\n",
        );
        assert!(restart_only_changes(&old, &endpoints_only).is_empty());
        let moved = table(
            "[server]\nlisten = \"127.0.0.1:2\"\nmax_body_bytes = 10\n[database]\nurl = \"postgres://u:other@h/db\"\n[[route]]\nendpoint = \"b\"\n[worker]\ncount = 1\n",
        );
        let changed = restart_only_changes(&old, &moved);
        assert_eq!(changed, ["[database] url", "[server] listen", "[worker]"]);
        let said = Refusal::RestartOnly(changed).to_string();
        assert!(
            !said.contains("other") && !said.contains("127.0.0.1"),
            "{said}"
        );
    }

    #[test]
    fn endpoint_changes_are_named_by_id() {
        let parse = |text: &str| -> Vec<EndpointConfig> {
            #[derive(serde::Deserialize)]
            struct File {
                endpoint: Vec<EndpointConfig>,
            }
            toml::from_str::<File>(text).unwrap().endpoint
        };
        let old = parse(
            "[[endpoint]]\nid = \"kept\"\nadapter = \"a\"\nsecret = \"s\"\n[[endpoint]]\nid = \"gone\"\nadapter = \"a\"\nsecret = \"s\"\n[[endpoint]]\nid = \"edited\"\nadapter = \"a\"\nsecret = \"s\"\n",
        );
        let new = parse(
            "[[endpoint]]\nid = \"kept\"\nadapter = \"a\"\nsecret = \"s\"\n[[endpoint]]\nid = \"edited\"\nadapter = \"a\"\nsecret = \"t\"\n[[endpoint]]\nid = \"new\"\nadapter = \"a\"\nsecret = \"s\"\n",
        );
        let changes = EndpointChanges::between(&old, &new);
        assert_eq!(changes.added, ["new"]);
        assert_eq!(changes.removed, ["gone"]);
        assert_eq!(changes.changed, ["edited"]);
        assert!(EndpointChanges::between(&new, &new).is_empty());
    }
}
