//! What a command runs with, found where it is: the config file, the database, the payload
//! keys, one database connection for an operator command.

use std::path::{Path, PathBuf};

use super::dev;
use super::error::CliError;
use crate::config::Config;
use crate::support::sealing::{self, PayloadKeys};

/// The config file when none is named (`wharf dev` has its own).
pub const DEFAULT_CONFIG: &str = "wharf.toml";

/// The config file a command that can do without one reads: the one named, else `wharf.toml`
/// when it is here, else the one the `wharf dev` running from this folder serves.
fn config_here(named: Option<&Path>) -> Option<PathBuf> {
    let default = Path::new(DEFAULT_CONFIG);
    match named {
        Some(named) => Some(named.to_owned()),
        None if default.exists() => Some(default.to_owned()),
        None => dev::running_config(),
    }
}

/// The config file of a command that needs one (`config check`, `adapter status`, `payloads`):
/// as [`config_here`], else `wharf.toml` (whose absence its load reports).
pub fn config_file(named: Option<&Path>) -> PathBuf {
    config_here(named).unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG))
}

/// The config of a command that can do without one (`events`, `deliveries`, `migrate`),
/// loaded once: the one named, `wharf.toml` when it is here, or the one `wharf dev` serves
/// here; none otherwise.
pub fn optional_config(named: Option<&Path>) -> anyhow::Result<Option<Config>> {
    config_here(named)
        .map(|path| load_config(&path))
        .transpose()
}

/// The payload keys of a command that reads payloads: the config's, else `WHARF_PAYLOAD_KEY`
/// alone.
pub fn payload_keys(config: Option<&Config>) -> anyhow::Result<PayloadKeys> {
    match config {
        Some(config) => config.payload_keys(),
        None => {
            let env = std::env::var(sealing::KEY_ENV).ok();
            Ok(PayloadKeys::load(None, env.as_deref())
                .map_err(|cause| CliError::PayloadKeys { cause })?)
        }
    }
}

/// The config a command runs with: the file, environment overrides, then, when neither names
/// a database, the dev cluster run from this folder.
pub fn load_config(path: &Path) -> anyhow::Result<Config> {
    let mut config = Config::load_unvalidated(path)?;
    dev::fill_database(&mut config)?;
    config.validate()?;
    Ok(config)
}

/// The database of a command that needs nothing else: the config's (see [`optional_config`]);
/// else `WHARF_DATABASE_URL` (or `DATABASE_URL`); else the dev cluster run from this folder.
pub fn database_url(config: Option<&Config>) -> anyhow::Result<String> {
    if let Some(config) = config {
        return Ok(config.database_url().to_owned());
    }
    if let Some(url) = crate::config::env_database_url(|k| std::env::var(k).ok()) {
        return Ok(url);
    }
    if let Some(url) = dev::running_cluster_url()? {
        return Ok(url);
    }
    anyhow::bail!(
        "no database url: set WHARF_DATABASE_URL, name a config with --config, or run \
         `cargo xtask dev` (or `wharf dev`) in this folder"
    )
}

/// One connection for an operator command.
pub async fn operator_pool(database_url: &str) -> Result<sqlx::PgPool, CliError> {
    sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        // A database that does not answer is an error within seconds, not a long wait.
        .acquire_timeout(std::time::Duration::from_secs(5))
        .connect(database_url)
        .await
        .map_err(|cause| CliError::Database { cause })
}
