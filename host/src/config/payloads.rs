//! `[payloads]` and `[secrets]`: where the keys that seal raw payloads and the secret sets
//! that verify requests are read from.

use std::path::PathBuf;

use serde::Deserialize;

section! {
    /// Raw payloads at rest (see `support::sealing` and `support::payload_link`).
    #[derive(Debug, Clone)]
    pub struct PayloadsConfig as p: Default {
        /// The payload key file: `current = "<id>"` and `[keys] "<id>" = "<base64 of 32
        /// bytes>"`. `WHARF_PAYLOAD_KEY=<id>:<base64>` adds a key and makes it current. At
        /// least one is required: payloads are never stored in plaintext.
        pub key_file: Option<PathBuf>,
        /// For an upgrade only: read payload rows stored before encryption (no key id,
        /// plaintext) and inbox rows stored before links (no link tag) as they are, and let
        /// `wharf payloads reencrypt` seal and link them. Off, such rows are refused on
        /// every read (`events show --payload`, processing, deliveries, reencrypt): anyone
        /// who can write the database could otherwise make the relay send a forged body,
        /// signed, as a verified event.
        pub upgrade_legacy_rows: bool = false,
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretsConfig {
    pub file: PathBuf,
}
