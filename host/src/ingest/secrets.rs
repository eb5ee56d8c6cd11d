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

use crate::adapter::{KeyEncoding, PublicKeyEncoding};
use crate::support::toml_lines::{KeyPath, Problem};

/// How often the file is re-read even without a change notification (network filesystems and
/// some container mounts do not deliver inotify events); `WHARF_WATCH_POLL_MS` overrides it.
const POLL_INTERVAL: Duration = Duration::from_secs(5);
/// How long a new text must stay unchanged before it is applied. A writer that pauses longer
/// than this mid-file is indistinguishable from one that finished: write a temporary file and
/// rename it over the secrets file instead (atomic).
pub const SECRETS_QUIET: Duration = Duration::from_millis(200);
/// At start, how many quiet spells to wait for a file that keeps changing before giving up.
const START_ATTEMPTS: u32 = 50;

/// A decoded secret (an HMAC key or a shared token) with the version it came from. Never
/// printed.
pub struct TrustedKey {
    pub version: String,
    pub key: Vec<u8>,
}

/// A parsed public key (Ed25519 or P-256) with the version it came from.
#[derive(Debug)]
pub struct TrustedPublicKey {
    pub version: String,
    pub key: PublicKey,
}

#[derive(Debug, Clone)]
pub enum PublicKey {
    Ed25519(ed25519_dalek::VerifyingKey),
    P256(p256::ecdsa::VerifyingKey),
}

/// A set's unexpired versions, newest first: its secret `value`s and its `public_key`s.
#[derive(Debug, Default)]
pub struct KeySet {
    pub secrets: Vec<TrustedKey>,
    pub public_keys: Vec<TrustedPublicKey>,
}

/// How an adapter reads a set's versions (it declares both in `describe`).
#[derive(Debug, Clone, Copy, Default)]
pub struct KeyEncodings {
    pub secret: KeyEncoding,
    pub public_key: Option<PublicKeyEncoding>,
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
        "secret set {set:?} version {version:?} has a `public_key` this endpoint's adapter cannot read (it declares no public-key encoding, or the key is not Ed25519 or P-256 in that encoding)"
    )]
    BadPublicKey { set: String, version: String },
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
    public_key: Option<String>,
    expires_at: Option<OffsetDateTime>,
}

/// One parsed secrets file.
pub struct Secrets {
    sets: HashMap<String, Vec<SecretVersion>>,
}

impl Secrets {
    pub fn parse(text: &str) -> Result<Self, String> {
        Self::parse_checked(text).map_err(|problems| {
            problems
                .into_iter()
                .map(|p| p.message)
                .collect::<Vec<_>>()
                .join("; ")
        })
    }

    /// Parses the file, or names every problem found, each at the key it is about (`wharf
    /// config check` prints their lines). No message quotes a value.
    pub fn parse_checked(text: &str) -> Result<Self, Vec<Problem>> {
        let raw: HashMap<String, Vec<RawVersion>> = toml::from_str(text).map_err(|e| {
            let mut problem = Problem::from_toml(&e);
            problem.message = without_values(&problem.message);
            vec![problem]
        })?;
        let mut raw: Vec<(String, Vec<RawVersion>)> = raw.into_iter().collect();
        raw.sort_by(|a, b| a.0.cmp(&b.0));
        let mut problems = Vec::new();
        let mut sets = HashMap::new();
        for (name, versions) in raw {
            let set = KeyPath::root(&name);
            if versions.is_empty() {
                problems.push(Problem::at_key(
                    set,
                    format!("set {name:?} has no versions"),
                ));
                continue;
            }
            let mut seen = std::collections::HashSet::new();
            let mut parsed = Vec::with_capacity(versions.len());
            for (i, v) in versions.into_iter().enumerate() {
                let at = |key: &str| set.clone().index(i).key(key);
                if v.version.is_empty() || !seen.insert(v.version.clone()) {
                    problems.push(Problem::at_key(
                        at("version"),
                        format!("set {name:?}: every version needs a unique, non-empty `version`"),
                    ));
                    continue;
                }
                if v.value.is_some() == v.public_key.is_some() {
                    problems.push(Problem::at_key(
                        set.clone().index(i),
                        format!(
                            "set {name:?} version {:?}: give exactly one of `value` and `public_key`",
                            v.version
                        ),
                    ));
                    continue;
                }
                let expires_at = match v.expires_at.map(|e| parse_instant(&e)).transpose() {
                    Ok(at) => at,
                    Err(e) => {
                        problems.push(Problem::at_key(
                            at("expires_at"),
                            format!("set {name:?} version {:?}: expires_at: {e}", v.version),
                        ));
                        continue;
                    }
                };
                parsed.push(SecretVersion {
                    version: v.version,
                    value: v.value,
                    public_key: v.public_key,
                    expires_at,
                });
            }
            sets.insert(name, parsed);
        }
        if problems.is_empty() {
            Ok(Self { sets })
        } else {
            Err(problems)
        }
    }

    /// Where version `version` of set `set` is in the file (its position in the set).
    pub fn version_index(&self, set: &str, version: &str) -> Option<usize> {
        self.sets
            .get(set)?
            .iter()
            .position(|v| v.version == version)
    }

    pub fn set_names(&self) -> impl Iterator<Item = &str> {
        self.sets.keys().map(String::as_str)
    }
}

/// A TOML type error without the value it quotes (`invalid type: integer `5`, expected a
/// string`): in this file the value may be a secret.
fn without_values(message: &str) -> String {
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some(rest) = message.strip_prefix(prefix) {
            let kind = rest.split([' ', ',']).next().unwrap_or_default();
            let expected = rest.split_once(", expected").map_or("", |(_, e)| e);
            return format!("{prefix}{kind} (value withheld), expected{expected}");
        }
    }
    message.to_owned()
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

/// A public key as written in the secrets file, in the adapter's declared encoding: Ed25519 as
/// 32 raw bytes, P-256 as a SEC1 point, or either as a DER SubjectPublicKeyInfo (PEM armour
/// accepted).
pub fn decode_public_key(value: &str, encoding: PublicKeyEncoding) -> Option<PublicKey> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
    use ed25519_dalek::pkcs8::DecodePublicKey as _;
    let b64 = |s: &str| {
        STANDARD
            .decode(s)
            .or_else(|_| STANDARD_NO_PAD.decode(s))
            .ok()
    };
    let raw = |bytes: Vec<u8>| match bytes.len() {
        32 => ed25519_dalek::VerifyingKey::from_bytes(&bytes.try_into().ok()?)
            .ok()
            .map(PublicKey::Ed25519),
        33 | 65 => p256::ecdsa::VerifyingKey::from_sec1_bytes(&bytes)
            .ok()
            .map(PublicKey::P256),
        _ => None,
    };
    match encoding {
        PublicKeyEncoding::WhpkBase64 => {
            let bytes = b64(value.strip_prefix("whpk_")?)?;
            ed25519_dalek::VerifyingKey::from_bytes(&bytes.try_into().ok()?)
                .ok()
                .map(PublicKey::Ed25519)
        }
        PublicKeyEncoding::Hex => raw(hex::decode(value.trim()).ok()?),
        PublicKeyEncoding::Base64 => raw(b64(value.trim())?),
        PublicKeyEncoding::SpkiDerBase64 => {
            let armoured: String = value
                .lines()
                .filter(|l| !l.starts_with("-----"))
                .flat_map(|l| l.chars().filter(|c| !c.is_whitespace()))
                .collect();
            let der = b64(&armoured)?;
            ed25519_dalek::VerifyingKey::from_public_key_der(&der)
                .map(PublicKey::Ed25519)
                .ok()
                .or_else(|| {
                    p256::ecdsa::VerifyingKey::from_public_key_der(&der)
                        .ok()
                        .map(PublicKey::P256)
                })
        }
    }
}

/// One read of the file: its text, or why it could not be read.
type Read = Result<String, String>;

fn read(path: &Path) -> Read {
    std::fs::read_to_string(path).map_err(|e| e.to_string())
}

/// How a host-side use of a secret set (not a provider's: admin tokens, delivery signing) is
/// named in its errors, and what its values must be.
pub struct HostSecretUse<'a> {
    /// "admin token secret set", "signing secret set".
    pub noun: &'a str,
    /// What a value that does not decode is not ("is empty").
    pub undecodable: &'a str,
    /// Why a `public_key` is wrong here.
    pub public_key: &'a str,
    /// What the set has none of when every version is expired or absent ("value").
    pub value: &'a str,
}

/// The set's unexpired values at `now`, newest first, or one message saying why there are none
/// (the set and version named, never a value), for the host's own uses of a secret set.
pub fn host_secret_values(
    source: &dyn KeySource,
    set: &str,
    encodings: KeyEncodings,
    now: OffsetDateTime,
    usage: &HostSecretUse<'_>,
) -> Result<Vec<TrustedKey>, String> {
    let noun = usage.noun;
    let keys = source.keys(set, encodings, now).map_err(|e| match e {
        SecretsError::UnknownSet(_) => format!("{noun} {set:?} is not in the secrets file"),
        SecretsError::AllExpired(_) => format!("every version of {noun} {set:?} has expired"),
        SecretsError::Undecodable { version, .. } => {
            format!("{noun} {set:?} version {version:?} {}", usage.undecodable)
        }
        SecretsError::BadPublicKey { version, .. } => format!(
            "{noun} {set:?} version {version:?} has a public_key; {}",
            usage.public_key
        ),
        // The file's own error may quote its text: the secrets watcher logs it.
        SecretsError::FileUnreadable(_) => {
            format!("the secrets file cannot be read or parsed, so {noun} {set:?} is unavailable")
        }
    })?;
    if keys.secrets.is_empty() {
        return Err(format!("{noun} {set:?} has no unexpired {}", usage.value));
    }
    Ok(keys.secrets)
}

/// Where verification gets an endpoint's trusted keys: the live secrets file when serving, a
/// fixture's own secret set under `wharf adapter test`.
pub trait KeySource: Send + Sync {
    /// The set's unexpired versions, newest first, decoded for the adapter's encodings.
    fn keys(
        &self,
        set: &str,
        encodings: KeyEncodings,
        now: OffsetDateTime,
    ) -> Result<KeySet, SecretsError>;
}

impl KeySource for Secrets {
    fn keys(
        &self,
        set: &str,
        encodings: KeyEncodings,
        now: OffsetDateTime,
    ) -> Result<KeySet, SecretsError> {
        let versions = self
            .sets
            .get(set)
            .ok_or_else(|| SecretsError::UnknownSet(set.to_owned()))?;
        let mut keys = KeySet::default();
        // Any version that cannot be read fails the whole set closed: skipping it could drop
        // the one version an operator meant to trust, or keep one meant to be replaced.
        for v in versions
            .iter()
            .filter(|v| v.expires_at.is_none_or(|at| at > now))
        {
            let version = v.version.clone();
            if let Some(value) = &v.value {
                let key = decode_key(value, encodings.secret).ok_or_else(|| {
                    SecretsError::Undecodable {
                        set: set.to_owned(),
                        version: version.clone(),
                        encoding: encodings.secret,
                    }
                })?;
                keys.secrets.push(TrustedKey { version, key });
            } else if let Some(public_key) = &v.public_key {
                let key = encodings
                    .public_key
                    .and_then(|e| decode_public_key(public_key, e))
                    .ok_or_else(|| SecretsError::BadPublicKey {
                        set: set.to_owned(),
                        version: version.clone(),
                    })?;
                keys.public_keys.push(TrustedPublicKey { version, key });
            }
        }
        if keys.secrets.is_empty() && keys.public_keys.is_empty() {
            return Err(SecretsError::AllExpired(set.to_owned()));
        }
        Ok(keys)
    }
}

impl KeySource for SecretStore {
    fn keys(
        &self,
        set: &str,
        encodings: KeyEncodings,
        now: OffsetDateTime,
    ) -> Result<KeySet, SecretsError> {
        match &**self.current.load() {
            Ok(secrets) => secrets.keys(set, encodings, now),
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

    fn enc(secret: KeyEncoding) -> KeyEncodings {
        KeyEncodings {
            secret,
            public_key: None,
        }
    }

    #[test]
    fn public_keys_in_every_declared_encoding() {
        use base64::engine::general_purpose::STANDARD;
        use ed25519_dalek::pkcs8::EncodePublicKey as _;
        let ed = ed25519_dalek::SigningKey::from_bytes(&[7; 32]).verifying_key();
        let p = p256::ecdsa::SigningKey::from_slice(&[9; 32])
            .unwrap()
            .verifying_key()
            .to_owned();
        let ed_der = STANDARD.encode(ed.to_public_key_der().unwrap().as_bytes());
        let p_der = STANDARD.encode(
            p256::pkcs8::EncodePublicKey::to_public_key_der(&p256::PublicKey::from(&p))
                .unwrap()
                .as_bytes(),
        );
        let p_sec1 = p.to_encoded_point(false);
        let cases = [
            (
                format!("whpk_{}", STANDARD.encode(ed.as_bytes())),
                PublicKeyEncoding::WhpkBase64,
                true,
            ),
            (hex::encode(ed.as_bytes()), PublicKeyEncoding::Hex, true),
            (
                STANDARD.encode(ed.as_bytes()),
                PublicKeyEncoding::Base64,
                true,
            ),
            (ed_der.clone(), PublicKeyEncoding::SpkiDerBase64, true),
            (
                hex::encode(p_sec1.as_bytes()),
                PublicKeyEncoding::Hex,
                false,
            ),
            (p_der.clone(), PublicKeyEncoding::SpkiDerBase64, false),
            (
                format!("-----BEGIN PUBLIC KEY-----\n{p_der}\n-----END PUBLIC KEY-----\n"),
                PublicKeyEncoding::SpkiDerBase64,
                false,
            ),
        ];
        for (text, encoding, is_ed) in cases {
            match decode_public_key(&text, encoding) {
                Some(PublicKey::Ed25519(k)) if is_ed => assert_eq!(k, ed),
                Some(PublicKey::P256(k)) if !is_ed => assert_eq!(k, p),
                other => panic!("{text} as {encoding:?}: {other:?}"),
            }
        }
        for (text, encoding) in [
            (
                STANDARD.encode(ed.as_bytes()),
                PublicKeyEncoding::WhpkBase64,
            ),
            ("whpk_AAAA".to_owned(), PublicKeyEncoding::WhpkBase64),
            (hex::encode([1u8; 31]), PublicKeyEncoding::Hex),
            (ed_der[4..].to_owned(), PublicKeyEncoding::SpkiDerBase64),
        ] {
            assert!(decode_public_key(&text, encoding).is_none(), "{text}");
        }

        // A set with a public key: read with a declared encoding, refused (closed) without.
        let file = format!(
            "[[pk]]\nversion = \"a\"\npublic_key = \"whpk_{}\"\n",
            STANDARD.encode(ed.as_bytes())
        );
        let s = Secrets::parse(&file).unwrap();
        let now = OffsetDateTime::UNIX_EPOCH;
        let with = KeyEncodings {
            secret: KeyEncoding::Raw,
            public_key: Some(PublicKeyEncoding::WhpkBase64),
        };
        let keys = s.keys("pk", with, now).unwrap();
        assert_eq!((keys.secrets.len(), keys.public_keys.len()), (0, 1));
        assert!(matches!(
            s.keys("pk", enc(KeyEncoding::Raw), now),
            Err(SecretsError::BadPublicKey { .. })
        ));
    }

    #[test]
    fn versions_newest_first_and_expiry() {
        let s = Secrets::parse(FILE).unwrap();
        let before = OffsetDateTime::parse(
            "2026-11-30T00:00:00Z",
            &time::format_description::well_known::Rfc3339,
        )
        .unwrap();
        let keys = s.keys("s", enc(KeyEncoding::WhsecBase64), before).unwrap();
        assert_eq!(
            keys.secrets
                .iter()
                .map(|k| k.version.as_str())
                .collect::<Vec<_>>(),
            ["new", "old"]
        );
        let after = before + time::Duration::days(2);
        assert_eq!(
            s.keys("s", enc(KeyEncoding::WhsecBase64), after)
                .unwrap()
                .secrets
                .len(),
            1
        );
        assert_eq!(
            s.keys("gone", enc(KeyEncoding::Raw), before).unwrap_err(),
            SecretsError::AllExpired("gone".into())
        );
        assert!(matches!(
            s.keys("s", enc(KeyEncoding::Hex), before),
            Err(SecretsError::Undecodable { .. })
        ));
        assert_eq!(
            s.keys("nope", enc(KeyEncoding::Raw), before).unwrap_err(),
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
