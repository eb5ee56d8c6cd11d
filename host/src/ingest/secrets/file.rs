//! The secrets file's text: versioned sets, each version a secret `value` or a `public_key`,
//! with an optional `expires_at`.

use std::collections::HashMap;

use serde::Deserialize;
use time::OffsetDateTime;

use super::error::{InvalidSecrets, SecretsError};
use super::keys::{
    KeyEncodings, KeySet, KeySource, TrustedKey, TrustedPublicKey, decode_key, decode_public_key,
};
use crate::support::toml_lines::{KeyPath, Problem};

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

/// One version of a set as an operator may see it: no value.
#[derive(Debug, Clone)]
pub struct VersionInfo {
    pub version: String,
    pub expires_at: Option<OffsetDateTime>,
    /// A public key (`public_key`) rather than a shared secret (`value`).
    pub public_key: bool,
}

/// One parsed secrets file.
pub struct Secrets {
    sets: HashMap<String, Vec<SecretVersion>>,
}

impl Secrets {
    pub fn parse(text: &str) -> Result<Self, InvalidSecrets> {
        Self::parse_checked(text).map_err(InvalidSecrets)
    }

    /// Parses the file, or names every problem found, each at the key it is about (`wharf
    /// config check` prints their lines). No message quotes a value.
    pub fn parse_checked(text: &str) -> Result<Self, Vec<Problem>> {
        let raw: HashMap<String, Vec<RawVersion>> =
            toml::from_str(text).map_err(|e| vec![Problem::from_toml(&e, text)])?;
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

    /// A set's versions in file order, each with its expiry and kind: what an operator may
    /// see of a set (the console's endpoints page), never a value.
    pub fn versions(&self, set: &str) -> Vec<VersionInfo> {
        self.sets.get(set).map_or_else(Vec::new, |versions| {
            versions
                .iter()
                .map(|v| VersionInfo {
                    version: v.version.clone(),
                    expires_at: v.expires_at,
                    public_key: v.public_key.is_some(),
                })
                .collect()
        })
    }

    pub fn set_names(&self) -> impl Iterator<Item = &str> {
        self.sets.keys().map(String::as_str)
    }

    /// Each set with its number of versions, sorted (what a reload logs: never a value).
    pub(super) fn summary(&self) -> String {
        let mut sets: Vec<String> = self
            .sets
            .iter()
            .map(|(name, v)| format!("{name}({})", v.len()))
            .collect();
        sets.sort();
        sets.join(",")
    }
}

/// Why an `expires_at` is not an instant.
#[derive(Debug, thiserror::Error)]
enum InstantError {
    #[error("expected an RFC 3339 date-time")]
    NotADateTime,
    #[error(transparent)]
    Rfc3339(#[from] time::error::Parse),
}

fn parse_instant(value: &toml::Value) -> Result<OffsetDateTime, InstantError> {
    let text = match value {
        toml::Value::String(s) => s.clone(),
        toml::Value::Datetime(d) => d.to_string(),
        _ => return Err(InstantError::NotADateTime),
    };
    Ok(OffsetDateTime::parse(
        &text,
        &time::format_description::well_known::Rfc3339,
    )?)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::{KeyEncoding, PublicKeyEncoding};

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
    fn a_public_key_is_read_only_with_a_declared_encoding() {
        use base64::Engine as _;
        use base64::engine::general_purpose::STANDARD;
        let ed = ed25519_dalek::SigningKey::from_bytes(&[7; 32]).verifying_key();
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
