//! Why there are no keys: the secrets file as a whole, or one set of it.

use std::sync::Arc;

use crate::adapter::KeyEncoding;
use crate::support::toml_lines::Problem;

/// Why an endpoint has no keys to verify with (answered 503 `secrets_unavailable`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretsError {
    #[error("the secrets file could not be read: {0}")]
    FileUnreadable(SecretsFileError),
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

/// Why the secrets file serves no set: the last read failed, or its text is invalid. Every
/// endpoint fails closed until it is fixed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretsFileError {
    #[error(transparent)]
    Unreadable(#[from] ReadError),
    #[error(transparent)]
    Invalid(#[from] InvalidSecrets),
}

/// Why one read of the file failed. Two failures are the same when they say the same: a read
/// that fails again as the last one did changes nothing.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ReadError {
    #[error(transparent)]
    Io(Arc<std::io::Error>),
    /// The blocking read's task did not finish (it panicked or the runtime is stopping).
    #[error(transparent)]
    Task(Arc<tokio::task::JoinError>),
}

impl PartialEq for ReadError {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

impl Eq for ReadError {}

/// Every problem of an invalid secrets file, each at the key it is about; shown as their
/// messages joined by "; ". No message quotes a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", messages(.0))]
pub struct InvalidSecrets(pub Vec<Problem>);

fn messages(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|p| p.message.as_str())
        .collect::<Vec<_>>()
        .join("; ")
}
