//! The host's own uses of a secret set (admin tokens, delivery signing): its unexpired values,
//! or why there are none, in that use's words.

use std::fmt;

use time::OffsetDateTime;

use super::error::SecretsError;
use super::keys::{KeyEncodings, KeySource, TrustedKey};

/// How a host-side use of a secret set (not a provider's: admin tokens, delivery signing) is
/// named in its errors, and what its values must be.
#[derive(Debug, PartialEq, Eq)]
pub struct HostSecretUse {
    /// "admin token secret set", "signing secret set".
    pub noun: &'static str,
    /// What a value that does not decode is not ("is empty").
    pub undecodable: &'static str,
    /// Why a `public_key` is wrong here.
    pub public_key: &'static str,
    /// What the set has none of when every version is expired or absent ("value").
    pub value: &'static str,
}

/// Why a host-side use of a set has no value: the set and version named, never a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSecretError {
    usage: &'static HostSecretUse,
    set: String,
    /// `None`: the set has versions, but no unexpired `value`.
    cause: Option<SecretsError>,
}

impl fmt::Display for HostSecretError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (usage, set) = (self.usage, &self.set);
        let noun = usage.noun;
        match &self.cause {
            Some(SecretsError::UnknownSet(_)) => {
                write!(f, "{noun} {set:?} is not in the secrets file")
            }
            Some(SecretsError::AllExpired(_)) => {
                write!(f, "every version of {noun} {set:?} has expired")
            }
            Some(SecretsError::Undecodable { version, .. }) => {
                write!(
                    f,
                    "{noun} {set:?} version {version:?} {}",
                    usage.undecodable
                )
            }
            Some(SecretsError::BadPublicKey { version, .. }) => write!(
                f,
                "{noun} {set:?} version {version:?} has a public_key; {}",
                usage.public_key
            ),
            // The file's own error may quote its text: the secrets watcher logs it.
            Some(SecretsError::FileUnreadable(_)) => write!(
                f,
                "the secrets file cannot be read or parsed, so {noun} {set:?} is unavailable"
            ),
            None => write!(f, "{noun} {set:?} has no unexpired {}", usage.value),
        }
    }
}

impl std::error::Error for HostSecretError {}

/// The set's unexpired values at `now`, newest first, or why there are none, for the host's
/// own uses of a secret set.
pub fn host_secret_values(
    source: &dyn KeySource,
    set: &str,
    encodings: KeyEncodings,
    now: OffsetDateTime,
    usage: &'static HostSecretUse,
) -> Result<Vec<TrustedKey>, HostSecretError> {
    let error = |cause| HostSecretError {
        usage,
        set: set.to_owned(),
        cause,
    };
    let keys = source
        .keys(set, encodings, now)
        .map_err(|e| error(Some(e)))?;
    if keys.secrets.is_empty() {
        return Err(error(None));
    }
    Ok(keys.secrets)
}
