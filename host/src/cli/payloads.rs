//! `wharf payloads new-key|reencrypt`: make a payload key, and seal the stored payloads (and
//! link the inbox rows to them) under the current one after a rotation or an upgrade (the
//! pass is `crate::operator::payloads`).

use std::path::PathBuf;

use clap::Subcommand;

use super::resolve::load_config;
use crate::config::Config;
use crate::support::sealing;

#[derive(Subcommand)]
pub enum PayloadsCommand {
    /// Print a new random payload key, as a key file line and as `WHARF_PAYLOAD_KEY`.
    NewKey {
        /// The key's id (stored beside every payload it seals): for example the month.
        #[arg(long)]
        id: String,
    },
    /// Seal every stored payload not under the current key with it, then carry every inbox
    /// row's link to its payload over to that key, in bounded batches (safe beside serving;
    /// run it again after an interruption). Rows from before encryption or before links are
    /// sealed and linked only with `[payloads] upgrade_legacy_rows`.
    Reencrypt {
        #[arg(long, default_value_t = 500)]
        batch: i64,
    },
}

/// `config_file` finds the config file, for the one command that reads it (`reencrypt`).
pub async fn run(
    command: PayloadsCommand,
    config_file: impl FnOnce() -> PathBuf,
) -> anyhow::Result<()> {
    match command {
        PayloadsCommand::NewKey { id } => {
            let (line, env) = sealing::new_key(&id);
            println!("# in the key file's [keys] table (set current = {id:?} to seal with it):");
            println!("{line}");
            println!("# or in the environment:");
            println!("{}={env}", sealing::KEY_ENV);
            Ok(())
        }
        PayloadsCommand::Reencrypt { batch } => {
            reencrypt(&load_config(&config_file())?, batch).await
        }
    }
}

async fn reencrypt(config: &Config, batch: i64) -> anyhow::Result<()> {
    anyhow::ensure!((1..=10_000).contains(&batch), "--batch must be 1..=10000");
    let keys = config.payload_keys()?;
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(config.database_url())
        .await?;
    let done = crate::operator::payloads::reencrypt(&pool, &keys, batch, |so_far| {
        eprintln!(
            "resealed {} of {} payloads found; relinked {} of {} events found",
            so_far.resealed, so_far.found, so_far.relinked, so_far.links_found
        );
    })
    .await?;
    println!("{}", serde_json::to_string(&done)?);
    let legacy = match keys.accepts_legacy_rows() {
        true => "",
        false => {
            " (rows from before encryption or before links are refused unless [payloads] \
             upgrade_legacy_rows is on)"
        }
    };
    anyhow::ensure!(
        done.unreadable.is_empty(),
        "{} payloads did not open with the configured keys (listed above){legacy}; they keep \
         their old key",
        done.unreadable.len()
    );
    anyhow::ensure!(
        done.refused_links_total == 0,
        "{} events' links to their payloads did not verify (listed above, at most 1000){legacy}; \
         they are refused on every read",
        done.refused_links_total
    );
    Ok(())
}
