//! The secrets file: versioned secret sets, hot-reloaded when the file changes.
//!
//! Keys come only from here, chosen by the endpoint's configuration, never by the request.
//! An unreadable or invalid file fails closed: every endpoint answers 503
//! `secrets_unavailable` until the file is fixed, because a half-read file could silently drop
//! a revocation. For the same reason a new text is applied only once it has settled: two reads
//! [`SECRETS_QUIET`] apart must agree, so an in-place edit is never trusted half-written (a prefix
//! that parses, such as a version without its `expires_at` line, would otherwise serve until
//! the next pass).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use base64::Engine as _;
use serde::Deserialize;
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use crate::adapter::KeyEncoding;

/// How often the file is re-read even without a change notification (network filesystems and
/// some container mounts do not deliver inotify events); `WHARF_WATCH_POLL_MS` overrides it.
const POLL_INTERVAL: Duration = Duration::from_secs(5);
/// How long a new text must stay unchanged before it is applied. A writer that pauses longer
/// than this mid-file is indistinguishable from one that finished: write a temporary file and
/// rename it over the secrets file instead (atomic).
pub const SECRETS_QUIET: Duration = Duration::from_millis(200);
/// At start, how many quiet spells to wait for a file that keeps changing before giving up.
const START_ATTEMPTS: u32 = 50;

/// A decoded key with the version it came from. Never printed.
pub struct TrustedKey {
    pub version: String,
    pub key: Vec<u8>,
}

impl std::fmt::Debug for TrustedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrustedKey")
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretsError {
    #[error("the secrets file could not be read: {0}")]
    FileUnreadable(String),
    #[error("secret set {0:?} is not in the secrets file")]
    UnknownSet(String),
    #[error("every version of secret set {0:?} has expired")]
    AllExpired(String),
    #[error("secret set {set:?} version {version:?} cannot be decoded as {encoding:?}")]
    Undecodable {
        set: String,
        version: String,
        encoding: KeyEncoding,
    },
    #[error(
        "secret set {set:?} version {version:?} has no `value` (public keys are not verified yet)"
    )]
    NoValue { set: String, version: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawVersion {
    version: String,
    value: Option<String>,
    public_key: Option<String>,
    expires_at: Option<toml::Value>,
}

struct SecretVersion {
    version: String,
    value: Option<String>,
    expires_at: Option<OffsetDateTime>,
}

/// One parsed secrets file.
pub struct Secrets {
    sets: HashMap<String, Vec<SecretVersion>>,
}

impl Secrets {
    pub fn parse(text: &str) -> Result<Self, String> {
        let raw: HashMap<String, Vec<RawVersion>> =
            toml::from_str(text).map_err(|e| e.message().to_owned())?;
        let mut sets = HashMap::new();
        for (name, versions) in raw {
            let mut seen = std::collections::HashSet::new();
            let mut parsed = Vec::with_capacity(versions.len());
            for v in versions {
                if v.version.is_empty() || !seen.insert(v.version.clone()) {
                    return Err(format!(
                        "set {name:?}: every version needs a unique, non-empty `version`"
                    ));
                }
                if v.value.is_some() == v.public_key.is_some() {
                    return Err(format!(
                        "set {name:?} version {:?}: give exactly one of `value` and `public_key`",
                        v.version
                    ));
                }
                let expires_at = v
                    .expires_at
                    .map(|e| parse_instant(&e))
                    .transpose()
                    .map_err(|e| {
                        format!("set {name:?} version {:?}: expires_at: {e}", v.version)
                    })?;
                parsed.push(SecretVersion {
                    version: v.version,
                    value: v.value,
                    expires_at,
                });
            }
            if parsed.is_empty() {
                return Err(format!("set {name:?} has no versions"));
            }
            sets.insert(name, parsed);
        }
        Ok(Self { sets })
    }

    pub fn set_names(&self) -> impl Iterator<Item = &str> {
        self.sets.keys().map(String::as_str)
    }
}

fn parse_instant(value: &toml::Value) -> Result<OffsetDateTime, String> {
    let text = match value {
        toml::Value::String(s) => s.clone(),
        toml::Value::Datetime(d) => d.to_string(),
        _ => return Err("expected an RFC 3339 date-time".into()),
    };
    OffsetDateTime::parse(&text, &time::format_description::well_known::Rfc3339)
        .map_err(|e| e.to_string())
}

pub fn decode_key(value: &str, encoding: KeyEncoding) -> Option<Vec<u8>> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
    let b64 = |s: &str| {
        STANDARD
            .decode(s)
            .or_else(|_| STANDARD_NO_PAD.decode(s))
            .ok()
    };
    let key = match encoding {
        KeyEncoding::Raw => Some(value.as_bytes().to_vec()),
        KeyEncoding::WhsecBase64 => b64(value.strip_prefix("whsec_").unwrap_or(value)),
        KeyEncoding::Base64 => b64(value),
        KeyEncoding::Hex => hex::decode(value).ok(),
    }?;
    (!key.is_empty()).then_some(key)
}

/// One read of the file: its text, or why it could not be read.
type Read = Result<String, String>;

fn read(path: &Path) -> Read {
    std::fs::read_to_string(path).map_err(|e| e.to_string())
}

/// Where verification gets an endpoint's trusted keys: the live secrets file when serving, a
/// fixture's own secret set under `wharf adapter test`.
pub trait KeySource: Send + Sync {
    /// The set's unexpired versions, newest first, decoded for the adapter's encoding.
    fn keys(
        &self,
        set: &str,
        encoding: KeyEncoding,
        now: OffsetDateTime,
    ) -> Result<Vec<TrustedKey>, SecretsError>;
}

impl KeySource for Secrets {
    fn keys(
        &self,
        set: &str,
        encoding: KeyEncoding,
        now: OffsetDateTime,
    ) -> Result<Vec<TrustedKey>, SecretsError> {
        let versions = self
            .sets
            .get(set)
            .ok_or_else(|| SecretsError::UnknownSet(set.to_owned()))?;
        let keys: Vec<TrustedKey> = versions
            .iter()
            .filter(|v| v.expires_at.is_none_or(|at| at > now))
            .map(|v| {
                let value = v.value.as_deref().ok_or_else(|| SecretsError::NoValue {
                    set: set.to_owned(),
                    version: v.version.clone(),
                })?;
                let key = decode_key(value, encoding).ok_or_else(|| SecretsError::Undecodable {
                    set: set.to_owned(),
                    version: v.version.clone(),
                    encoding,
                })?;
                Ok(TrustedKey {
                    version: v.version.clone(),
                    key,
                })
            })
            .collect::<Result<_, _>>()?;
        if keys.is_empty() {
            return Err(SecretsError::AllExpired(set.to_owned()));
        }
        Ok(keys)
    }
}

impl KeySource for SecretStore {
    fn keys(
        &self,
        set: &str,
        encoding: KeyEncoding,
        now: OffsetDateTime,
    ) -> Result<Vec<TrustedKey>, SecretsError> {
        match &**self.current.load() {
            Ok(secrets) => secrets.keys(set, encoding, now),
            Err(e) => Err(SecretsError::FileUnreadable(e.clone())),
        }
    }
}

/// The live secrets, swapped atomically on reload.
pub struct SecretStore {
    path: PathBuf,
    current: ArcSwap<Result<Secrets, String>>,
    /// The read `current` was made from; a read equal to it changes nothing.
    applied: std::sync::Mutex<Read>,
}

impl SecretStore {
    /// Reads the file once it has settled; an unreadable file is an error at start-up (fail
    /// fast), and a 503 later (fail closed).
    pub fn open(path: &Path) -> anyhow::Result<Arc<Self>> {
        let mut seen = read(path);
        let mut attempts = 0;
        let text = loop {
            let text = seen.map_err(|e| anyhow::anyhow!("secrets file {}: {e}", path.display()))?;
            // Nothing serves yet, so blocking this thread for a quiet spell holds up nothing.
            std::thread::sleep(SECRETS_QUIET);
            seen = read(path);
            if seen.as_ref() == Ok(&text) {
                break text;
            }
            attempts += 1;
            anyhow::ensure!(
                attempts < START_ATTEMPTS,
                "secrets file {}: still changing after {} attempts to read it whole",
                path.display(),
                START_ATTEMPTS
            );
        };
        let secrets = Secrets::parse(&text)
            .map_err(|e| anyhow::anyhow!("secrets file {}: {e}", path.display()))?;
        Ok(Arc::new(Self {
            path: path.to_owned(),
            current: ArcSwap::from_pointee(Ok(secrets)),
            applied: std::sync::Mutex::new(Ok(text)),
        }))
    }

    pub fn current(&self) -> Arc<Result<Secrets, String>> {
        self.current.load_full()
    }

    fn is_applied(&self, read: &Read) -> bool {
        *self.applied.lock().expect("not poisoned") == *read
    }

    /// Applies a settled read. Logs set names and version counts, never values.
    fn apply(&self, read: Read) {
        let next = match &read {
            Ok(t) => Secrets::parse(t),
            Err(e) => Err(e.clone()),
        };
        *self.applied.lock().expect("not poisoned") = read;
        match &next {
            Ok(s) => {
                let mut sets: Vec<String> = s
                    .sets
                    .iter()
                    .map(|(name, v)| format!("{name}({})", v.len()))
                    .collect();
                sets.sort();
                tracing::info!(file = %self.path.display(), sets = %sets.join(","), "secrets reloaded");
            }
            Err(e) => tracing::error!(file = %self.path.display(), error = %e,
                "secrets file unreadable: failing closed until it is fixed"),
        }
        self.current.store(Arc::new(next));
    }

    /// Re-reads the file until two reads a quiet spell apart agree, then applies that text
    /// if it differs from the one serving. Returns early only when cancelled.
    async fn refresh(&self, cancel: &CancellationToken) {
        let path = self.path.clone();
        let read_now = || {
            let path = path.clone();
            async move {
                tokio::task::spawn_blocking(move || read(&path))
                    .await
                    .unwrap_or_else(|e| Err(e.to_string()))
            }
        };
        let mut seen = read_now().await;
        loop {
            if self.is_applied(&seen) {
                return;
            }
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(SECRETS_QUIET) => {}
            }
            let again = read_now().await;
            if again == seen {
                self.apply(again);
                return;
            }
            // Still being written: the old secrets keep serving until the text settles.
            tracing::debug!(file = %self.path.display(), "secrets file still changing");
            seen = again;
        }
    }

    /// Watches the file's folder (so rename-over saves are seen) and polls as a fallback.
    pub fn watch(
        self: &Arc<Self>,
        cancel: CancellationToken,
    ) -> anyhow::Result<tokio::task::JoinHandle<()>> {
        let dir = self
            .path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_owned();
        let mut watch = crate::support::watch::watch_folder(&dir)?;
        let poll = crate::support::watch::poll_interval(POLL_INTERVAL);
        let this = Arc::clone(self);
        Ok(tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = cancel.cancelled() => break,
                    () = watch.changed() => {}
                    _ = tokio::time::sleep(poll) => {}
                }
                // The read below sees every change signalled so far.
                watch.clear();
                this.refresh(&cancel).await;
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
[[s]]
version = "new"
value = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
[[s]]
version = "old"
value = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
expires_at = "2026-12-01T00:00:00Z"
[[gone]]
version = "v1"
value = "abc"
expires_at = 2020-01-01T00:00:00Z
"#;

    #[test]
    fn versions_newest_first_and_expiry() {
        let s = Secrets::parse(FILE).unwrap();
        let before = OffsetDateTime::parse(
            "2026-11-30T00:00:00Z",
            &time::format_description::well_known::Rfc3339,
        )
        .unwrap();
        let keys = s.keys("s", KeyEncoding::WhsecBase64, before).unwrap();
        assert_eq!(
            keys.iter().map(|k| k.version.as_str()).collect::<Vec<_>>(),
            ["new", "old"]
        );
        let after = before + time::Duration::days(2);
        assert_eq!(
            s.keys("s", KeyEncoding::WhsecBase64, after).unwrap().len(),
            1
        );
        assert_eq!(
            s.keys("gone", KeyEncoding::Raw, before).unwrap_err(),
            SecretsError::AllExpired("gone".into())
        );
        assert!(matches!(
            s.keys("s", KeyEncoding::Hex, before),
            Err(SecretsError::Undecodable { .. })
        ));
        assert_eq!(
            s.keys("nope", KeyEncoding::Raw, before).unwrap_err(),
            SecretsError::UnknownSet("nope".into())
        );
    }

    #[test]
    fn invalid_files_are_refused() {
        assert!(Secrets::parse("[[s]]\nversion = \"a\"\n").is_err());
        assert!(
            Secrets::parse(
                "[[s]]\nversion = \"a\"\nvalue = \"x\"\n[[s]]\nversion = \"a\"\nvalue = \"y\"\n"
            )
            .is_err()
        );
        assert!(Secrets::parse("not toml [").is_err());
    }
}
