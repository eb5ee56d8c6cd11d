//! `[payloads]` and `[secrets]`: where the keys that seal raw payloads and the secret sets
//! that verify requests are read from.

use std::path::PathBuf;

use serde::Deserialize;

/// Raw payloads at rest (see `support::sealing`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PayloadsConfig {
    /// The payload key file: `current = "<id>"` and `[keys] "<id>" = "<base64 of 32 bytes>"`.
    /// `WHARF_PAYLOAD_KEY=<id>:<base64>` adds a key and makes it current. At least one is
    /// required: payloads are never stored in plaintext.
    pub key_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretsConfig {
    pub file: PathBuf,
}
