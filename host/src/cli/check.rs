//! `wharf config check`: what `serve` would refuse at start, found without the database or
//! the network, each problem printed as `FILE:LINE: message` (the line of the key it is
//! about), every problem at once where one does not hide the next.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::adapter::{AdapterSet, FileState, Sandbox, SandboxLimits};
use crate::config::{self, Config, KeyPath, Problem};
use crate::http::CertStore;
use crate::ingest::{KeyEncodings, KeySource as _, Secrets, SecretsError};
use crate::reload::Reloader;
use crate::support::file_modes::{Trusted, loose_access};
use crate::support::metrics::Metrics;
use crate::support::toml_lines::{Lines, TomlError};

#[derive(clap::Subcommand)]
pub enum ConfigCommand {
    /// Validate the config and the secrets file it names as `serve` would at start, without
    /// the database: print each problem as FILE:LINE: message and exit non-zero if any.
    Check,
}

/// One line of the report.
struct Finding {
    file: PathBuf,
    line: Option<usize>,
    warning: bool,
    message: String,
}

/// The findings of one run, and the texts their lines are counted in.
#[derive(Default)]
struct Report {
    findings: Vec<Finding>,
}

impl Report {
    fn add(&mut self, file: &Path, text: &str, problems: Vec<Problem>, warning: bool) {
        let lines = Lines::new(text);
        for p in problems {
            self.findings.push(Finding {
                file: file.to_owned(),
                line: lines.of(&p.at),
                warning,
                message: p.message,
            });
        }
    }

    fn errors(&self) -> usize {
        self.findings.iter().filter(|f| !f.warning).count()
    }

    /// Prints every finding in file and line order, each once.
    fn print(&mut self) {
        self.findings
            .sort_by(|a, b| (&a.file, a.line, &a.message).cmp(&(&b.file, b.line, &b.message)));
        self.findings.dedup_by(|a, b| {
            (&a.file, a.line, &a.message, a.warning) == (&b.file, b.line, &b.message, b.warning)
        });
        for f in &self.findings {
            let line = f.line.map(|l| format!("{l}:")).unwrap_or_default();
            let kind = if f.warning { "warning: " } else { "" };
            println!("{}:{line} {kind}{}", f.file.display(), f.message);
        }
    }
}

/// The check found errors, and printed them.
#[derive(Debug, thiserror::Error)]
#[error("problems found")]
pub struct Reported;

/// Prints the report; [`Reported`] when it holds an error (warnings alone pass).
pub async fn run(path: &Path) -> anyhow::Result<()> {
    let mut report = Report::default();
    let summary = check(path, &mut report).await;
    report.print();
    let errors = report.errors();
    if errors > 0 {
        eprintln!(
            "wharf: {}: {errors} problem{}",
            path.display(),
            if errors == 1 { "" } else { "s" }
        );
        return Err(Reported.into());
    }
    if let Some(summary) = summary {
        let dev = match super::dev::is_running_config(path) {
            true => " (served by `wharf dev` here: its demo values are allowed)",
            false => "",
        };
        println!("{}: ok: {summary}{dev}", path.display());
    }
    Ok(())
}

/// Checks everything it can reach, adding to `report`; the summary when the config parsed.
async fn check(path: &Path, report: &mut Report) -> Option<String> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => {
            report.add(path, "", vec![Problem::nowhere(e.to_string())], false);
            return None;
        }
    };
    // Every syntax error, not only the first; nothing below can run without a document.
    let (_, syntax) = toml::de::DeTable::parse_recoverable(&text);
    if !syntax.is_empty() {
        let problems = syntax
            .iter()
            .map(|e| Problem::from_toml(e, &text))
            .collect();
        report.add(path, &text, problems, false);
        return None;
    }
    let base = path.parent().unwrap_or(Path::new("."));
    let mut config = match Config::parse(&text, base) {
        Ok(config) => config,
        Err(e) => {
            let problem = match e.downcast_ref::<TomlError>() {
                Some(e) => e.problem.clone(),
                None => Problem::nowhere(format!("{e:#}")),
            };
            report.add(path, &text, vec![problem], false);
            return None;
        }
    };
    let mut problems = Vec::new();
    if let Err(e) = config.apply_env(|k| std::env::var(k).ok()) {
        problems.push(Problem::nowhere(format!("{e:#}")));
    }
    if let Err(e) = super::dev::fill_database(&mut config) {
        problems.push(Problem::nowhere(format!("{e:#}")));
    }
    problems.extend(config.problems());
    let adapters_dir = config.adapters.dir.is_dir();
    if !adapters_dir {
        problems.push(Problem::at_key(
            KeyPath::section("adapters", "dir"),
            format!(
                "adapters dir {} is not a folder",
                config.adapters.dir.display()
            ),
        ));
    }
    // The pair as `serve` loads it at start: a problem names the file, not a line.
    if let Some(tls) = &config.server.tls
        && let Err(e) = CertStore::open(tls, Arc::new(Metrics::default())).await
    {
        problems.push(Problem::nowhere(e.to_string()));
    }
    report.add(path, &text, loose_permissions(&config), true);
    // The demo values are what `wharf dev` serves: refused everywhere but in its own config.
    let dev = super::dev::is_running_config(path);
    let env_key = std::env::var(crate::support::sealing::KEY_ENV).ok();
    if !dev {
        problems.extend(super::published::published_keys(
            &config,
            env_key.as_deref(),
        ));
    }
    let secrets_file = config.secrets.file.clone();
    let secrets = match std::fs::read_to_string(&secrets_file) {
        Err(e) => {
            problems.push(Problem::at_key(
                KeyPath::section("secrets", "file"),
                format!("secrets file {}: {e}", secrets_file.display()),
            ));
            None
        }
        Ok(secrets_text) => match Secrets::parse_checked(&secrets_text) {
            Err(found) => {
                report.add(&secrets_file, &secrets_text, found, false);
                None
            }
            Ok(secrets) => {
                let names: Vec<&str> = secrets.set_names().collect();
                problems.extend(config.missing_secret_sets(&names, &secrets_file));
                // The admin API's tokens, as a start would check them.
                if let Some(set) = &config.server.admin_token_secret {
                    let now = time::OffsetDateTime::now_utc();
                    if let Err(e) = crate::http::admin_tokens(&secrets, set, now) {
                        problems.push(Problem::at_key(
                            KeyPath::section("server", "admin_token_secret"),
                            format!("[server] admin_token_secret: {e}"),
                        ));
                    }
                }
                if !dev {
                    let published = super::published::published_secrets(&config, &secrets_text);
                    report.add(&secrets_file, &secrets_text, published, false);
                }
                Some((secrets, secrets_text))
            }
        },
    };
    let adapters = if adapters_dir {
        match load_adapters(&config).await {
            Ok(set) => Some(set),
            Err(e) => {
                problems.push(Problem::at_key(
                    KeyPath::section("adapters", "dir"),
                    format!("adapters: {e:#}"),
                ));
                None
            }
        }
    } else {
        None
    };
    if let Some(adapters) = &adapters {
        let (errors, warnings) = adapter_problems(&config, adapters);
        problems.extend(errors);
        report.add(path, &text, warnings, true);
        if let Some((secrets, secrets_text)) = &secrets {
            report.add(
                &secrets_file,
                secrets_text,
                key_problems(&config, adapters, secrets),
                false,
            );
        }
    }
    report.add(path, &text, problems, false);
    let sets = secrets.as_ref().map_or(0, |(s, _)| s.set_names().count());
    Some(format!(
        "{} endpoints, {} routes, {sets} secret sets in {}, {} adapters loaded",
        config.endpoints.len(),
        config.routes.len(),
        secrets_file.display(),
        adapters.as_ref().map_or(0, |a| a.names().count()),
    ))
}

/// Key files open to group or others, and a compiled-adapter cache others may write: warnings
/// (`serve` and `worker` log them at start), each at the key that names the path.
pub(super) fn loose_permissions(config: &Config) -> Vec<Problem> {
    let tls_key = config.server.tls.as_ref().map(|t| &t.key_file);
    let paths = [
        (
            Some(&config.secrets.file),
            KeyPath::section("secrets", "file"),
            Trusted::KeyFile,
        ),
        (
            config.payloads.key_file.as_ref(),
            KeyPath::section("payloads", "key_file"),
            Trusted::KeyFile,
        ),
        (
            tls_key,
            KeyPath::section("server", "tls").key("key_file"),
            Trusted::KeyFile,
        ),
        (
            config.adapters.cache_dir.as_ref(),
            KeyPath::section("adapters", "cache_dir"),
            Trusted::CodeFolder,
        ),
    ];
    paths
        .into_iter()
        .filter_map(|(path, key, what)| Some(Problem::at_key(key, loose_access(path?, what)?)))
        .collect()
}

/// The adapters folder loaded and vetted as `serve` loads it at start (fixtures included).
async fn load_adapters(config: &Config) -> anyhow::Result<AdapterSet> {
    let sandbox = Sandbox::new(
        SandboxLimits::from_config(&config.adapters),
        config.adapters.cache_dir.clone(),
    )?;
    let reloader = Reloader::new(Arc::clone(&sandbox), config.adapters.dir.clone())
        .trusting(config.adapters.trusted_keys.clone());
    reloader.initial(&Metrics::default()).await
}

/// What `serve` refuses about endpoints given the loaded adapters (errors), and what it only
/// warns about: an endpoint whose adapter is not there, a refused adapter file.
fn adapter_problems(config: &Config, adapters: &AdapterSet) -> (Vec<Problem>, Vec<Problem>) {
    let (mut errors, mut warnings) = (Vec::new(), Vec::new());
    for status in adapters.files().values() {
        if status.state == FileState::Refused {
            let reason = status.last_error.as_deref().unwrap_or_default();
            warnings.push(Problem::at_key(
                KeyPath::section("adapters", "dir"),
                format!(
                    "adapter file {} is refused: {}",
                    status.file,
                    reason.lines().next().unwrap_or_default()
                ),
            ));
        }
    }
    for (i, e) in config.endpoints.iter().enumerate() {
        let key = |k: &str| KeyPath::root("endpoint").index(i).key(k);
        match adapters.get(&e.adapter) {
            None => warnings.push(Problem::at_key(
                key("adapter"),
                format!(
                    "endpoint {:?}: adapter {:?} is not loaded: the endpoint answers 503 \
                     adapter_unavailable until it is",
                    e.id, e.adapter
                ),
            )),
            Some(a) => {
                let signs_timestamp = a.info.tolerance_past_secs.is_some();
                if let Some(problem) = config::tolerance_without_timestamp(e, signs_timestamp) {
                    let k = if e.tolerance_secs.is_some() {
                        "tolerance_secs"
                    } else {
                        "future_tolerance_secs"
                    };
                    errors.push(Problem::at_key(key(k), problem));
                }
            }
        }
    }
    (errors, warnings)
}

/// Secret sets whose versions the endpoint's adapter cannot read, or that have all expired:
/// `serve` starts, but every request to such an endpoint fails (503 secrets_unavailable).
/// Located in the secrets file; messages name sets and versions, never values.
fn key_problems(config: &Config, adapters: &AdapterSet, secrets: &Secrets) -> Vec<Problem> {
    let now = time::OffsetDateTime::now_utc();
    let mut problems = Vec::new();
    for e in &config.endpoints {
        let Some(adapter) = adapters.get(&e.adapter) else {
            continue;
        };
        let encodings = KeyEncodings {
            secret: adapter.info.encoding,
            public_key: adapter.info.public_keys,
        };
        let sets = std::iter::once(e.secret.as_str()).chain(e.secrets.values().map(String::as_str));
        for set in sets {
            let Err(error) = secrets.keys(set, encodings, now) else {
                continue;
            };
            let at = match &error {
                // Reported above, as the config's problem.
                SecretsError::UnknownSet(_) | SecretsError::FileUnreadable(_) => continue,
                SecretsError::AllExpired(_) => KeyPath::root(set),
                SecretsError::Undecodable { version, .. } => {
                    version_key(secrets, set, version, "value")
                }
                SecretsError::BadPublicKey { version, .. } => {
                    version_key(secrets, set, version, "public_key")
                }
            };
            problems.push(Problem::at_key(
                at,
                format!("{error} (endpoint {:?}, adapter {:?})", e.id, e.adapter),
            ));
        }
    }
    problems
}

/// `key` of version `version` in set `set`, for the line of a value that does not decode.
fn version_key(secrets: &Secrets, set: &str, version: &str, key: &str) -> KeyPath {
    match secrets.version_index(set, version) {
        Some(i) => KeyPath::root(set).index(i).key(key),
        None => KeyPath::root(set),
    }
}
