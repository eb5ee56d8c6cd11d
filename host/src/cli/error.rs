//! What the command line itself can fail on, beside the errors of the layers it calls (those
//! reach `main` as they are). Each message already quotes its cause, so the cause is no
//! `source`: `main` prints the chain, and it would be said twice.

use std::path::PathBuf;

use crate::support::sealing::KeyError;

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("{cause} (name the config that has them with --config)")]
    PayloadKeys { cause: KeyError },
    #[error("database: {cause}")]
    Database { cause: sqlx::Error },
    #[error("secrets file {}: {cause}", file.display())]
    SecretsFile {
        file: PathBuf,
        cause: SecretsFileError,
    },
    #[error("admin listener {base}: {cause}")]
    AdminListener { base: String, cause: reqwest::Error },
    /// The dev cluster's URL file holds no database URL.
    #[error("{file}: not a database URL: {cause}")]
    NotADatabaseUrl {
        file: &'static str,
        cause: sqlx::Error,
    },
    /// A program the dev cluster runs did not start; `command` as `Command`'s `Debug`.
    #[error("{command}: {cause}")]
    Spawn {
        command: String,
        cause: std::io::Error,
    },
    #[error("--before {text:?}: {cause} (RFC 3339)")]
    Before {
        text: String,
        cause: time::error::Parse,
    },
}

/// Why the secrets file gave no token: not read, or not parsed.
#[derive(Debug, thiserror::Error)]
pub enum SecretsFileError {
    #[error("{0}")]
    Read(std::io::Error),
    #[error(transparent)]
    Parse(crate::ingest::InvalidSecrets),
}

/// An instant on the command line (`--since`, `--until`) that is not RFC 3339.
#[derive(Debug, thiserror::Error)]
#[error("{0} (RFC 3339, e.g. 2026-12-01T00:00:00Z)")]
pub struct InstantError(pub time::error::Parse);
