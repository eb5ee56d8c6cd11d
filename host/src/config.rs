//! Configuration: a TOML file, then environment overrides, validated once at start.
//! Relative paths in the file are relative to the file's own folder.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::wasm::SandboxLimits;

pub const DEFAULT_MAX_BODY_BYTES: u64 = 1 << 20;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub server: ServerConfig,
    #[serde(default)]
    pub database: DatabaseConfig,
    pub adapters: AdaptersConfig,
    pub secrets: SecretsConfig,
    #[serde(default, rename = "endpoint")]
    pub endpoints: Vec<EndpointConfig>,
    /// Delivery routes, read by the processing stage.
    #[serde(default, rename = "route")]
    pub routes: Vec<toml::Table>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    #[serde(default = "default_listen")]
    pub listen: SocketAddr,
    pub admin_listen: Option<SocketAddr>,
    #[serde(default = "default_max_body")]
    pub max_body_bytes: u64,
    /// At most this many header lines (431 past it).
    #[serde(default = "default_max_headers")]
    pub max_headers: usize,
    /// At most this many bytes of header names and values together (431 past it).
    #[serde(default = "default_max_header_bytes")]
    pub max_header_bytes: usize,
    #[serde(default = "yes")]
    pub plain_http: bool,
    pub tls: Option<toml::Table>,
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

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UnsupportedTypes {
    #[default]
    Reject,
    Ignore,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    pub per_second: u32,
    pub burst: u32,
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
fn default_pool() -> u32 {
    16
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
fn yes() -> bool {
    true
}

impl Config {
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
        Ok(config)
    }

    pub fn apply_env(&mut self, var: impl Fn(&str) -> Option<String>) -> anyhow::Result<()> {
        if let Some(url) = var("WHARF_DATABASE_URL").or_else(|| var("DATABASE_URL")) {
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

    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.server.tls.is_none() && self.server.plain_http,
            "[server.tls] is not supported yet: set plain_http = true and terminate TLS at a proxy"
        );
        anyhow::ensure!(
            self.server.max_body_bytes > 0,
            "server.max_body_bytes must be positive"
        );
        anyhow::ensure!(
            self.database.url.is_some(),
            "no database url: set [database] url or WHARF_DATABASE_URL"
        );
        let mut ids = HashSet::new();
        for e in &self.endpoints {
            let url_safe = !e.id.is_empty()
                && e.id.len() <= 128
                && e.id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
            anyhow::ensure!(
                url_safe,
                "endpoint id {:?} must be 1-128 of [A-Za-z0-9._-]",
                e.id
            );
            anyhow::ensure!(ids.insert(&e.id), "endpoint id {:?} is used twice", e.id);
            anyhow::ensure!(
                e.rate_limit.is_none(),
                "endpoint {:?}: rate_limit is not supported yet",
                e.id
            );
        }
        Ok(())
    }

    pub fn sandbox_limits(&self) -> SandboxLimits {
        let defaults = SandboxLimits::default();
        SandboxLimits {
            memory_bytes: self.adapters.memory_mib << 20,
            call_timeout: Duration::from_millis(self.adapters.call_timeout_ms),
            max_concurrency: self.adapters.max_concurrency,
            threads: self.adapters.threads.unwrap_or(defaults.threads),
            ..defaults
        }
    }

    pub fn database_url(&self) -> &str {
        self.database.url.as_deref().unwrap_or_default()
    }
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
    use super::glob_match;

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
}
