//! The secrets file: versioned secret sets, hot-reloaded when the file changes.
//!
//! Keys come only from here, chosen by the endpoint's configuration, never by the request.
//! An unreadable or invalid file fails closed: every endpoint answers 503
//! `secrets_unavailable` until the file is fixed, because a half-read file could silently drop
//! a revocation. For the same reason a new text is applied only once it has settled: two reads
//! [`SECRETS_QUIET`] apart must agree, so an in-place edit is never trusted half-written (a prefix
//! that parses, such as a version without its `expires_at` line, would otherwise serve until
//! the next pass).
//!
//! Files:
//! - `file`: `Secrets`, the file's text parsed (each problem at its key, no value quoted)
//! - `keys`: trusted secrets and public keys, decoded; `KeySource`, where verification gets them
//! - `store`: `SecretStore`, the live file: settled, hot-reloaded, failing closed
//! - `host_use`: the host's own uses of a set (admin tokens, delivery signing)
//! - `error`: `SecretsError` (one set) and `SecretsFileError` (the whole file)

mod error;
mod file;
mod host_use;
mod keys;
mod store;

pub use error::{InvalidSecrets, SecretsError, SecretsFileError};
pub use file::{Secrets, VersionInfo};
pub use host_use::{HostSecretError, HostSecretUse, host_secret_values};
pub use keys::{
    KeyEncodings, KeySet, KeySource, PublicKey, TrustedKey, TrustedPublicKey, decode_key,
    decode_public_key,
};
pub use store::{SECRETS_QUIET, SecretStore};
