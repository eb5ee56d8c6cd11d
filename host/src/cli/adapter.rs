//! `wharf adapter check|test|status|new`: load and vet an adapter, run its fixtures, ask a
//! running receiver what became of its adapter files, scaffold a new one.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Subcommand;

use super::error::{CliError, SecretsFileError};
use super::scaffold;
use crate::adapter::{FileStatus, Sandbox, SandboxLimits};
use crate::config::Config;

/// The admin API's bearer token for `wharf adapter status`, when the config is not at hand.
const ADMIN_TOKEN_ENV: &str = "WHARF_ADMIN_TOKEN";

#[derive(Subcommand)]
pub enum AdapterCommand {
    /// Load an adapter, validate it against the world and print its description as JSON;
    /// when its fixtures ship beside it (`NAME.fixtures/`), run them too, as reload does.
    Check { file: PathBuf },
    /// Run an adapter's fixtures through the host's verification path, without a database.
    /// Prints a diff for each failing case and exits non-zero if any fails.
    Test { file: PathBuf, fixtures: PathBuf },
    /// Show every adapter file a running receiver has seen (from its admin API, with the
    /// token of `[server] admin_token_secret` from the secrets file, or WHARF_ADMIN_TOKEN).
    Status {
        /// The admin listener, `host:port`; defaults to `admin_listen` in the config.
        #[arg(long, env = "WHARF_ADMIN_LISTEN")]
        admin: Option<String>,
    },
    /// Create a working adapter crate, with passing fixtures, in the adapters workspace.
    New {
        name: String,
        /// The adapters workspace (its Cargo.toml gains the new member).
        #[arg(long, default_value = "adapters")]
        dir: PathBuf,
    },
}

pub async fn run(command: AdapterCommand, config: &Path) -> anyhow::Result<()> {
    match command {
        AdapterCommand::Check { file } => {
            let sandbox = Sandbox::new(SandboxLimits::default(), None)?;
            let adapter = Arc::new(sandbox.load(&file).await?);
            println!("{}", serde_json::to_string_pretty(&adapter.info)?);
            // The same vetting as a hot reload: a file whose fixtures fail (or that breaks the
            // verification contract on one) would be refused there.
            let fixtures = crate::reload::fixtures_dir(&file);
            if fixtures.is_dir() {
                let report = crate::reload::run_dir(&adapter, &fixtures).await?;
                anyhow::ensure!(report.failed() == 0, "{}", report.summary());
            }
            Ok(())
        }
        AdapterCommand::Test { file, fixtures } => {
            let sandbox = Sandbox::new(SandboxLimits::default(), None)?;
            let adapter = Arc::new(sandbox.load(&file).await?);
            println!(
                "{} {} ({})",
                adapter.info.name,
                adapter.info.version,
                fixtures.display()
            );
            let report = crate::reload::run_dir(&adapter, &fixtures).await?;
            print!("{}", report.render());
            anyhow::ensure!(report.failed() == 0, "{} fixtures failed", report.failed());
            Ok(())
        }
        AdapterCommand::Status { admin } => status(admin, config).await,
        AdapterCommand::New { name, dir } => {
            let created = scaffold::new_adapter(&dir, &name)?;
            println!("created {}", created.display());
            print!("{}", scaffold::next_steps(&dir, &name));
            Ok(())
        }
    }
}

/// Every adapter file a running receiver has seen, one line each.
async fn status(admin: Option<String>, config: &Path) -> anyhow::Result<()> {
    // The bearer token: `WHARF_ADMIN_TOKEN` (never a flag, which `ps` would show), else the
    // newest of the set `[server] admin_token_secret` names, from the secrets file.
    let token = std::env::var(ADMIN_TOKEN_ENV)
        .ok()
        .filter(|t| !t.is_empty());
    // The config only for what the command line does not say.
    let loaded = match (&admin, &token) {
        (Some(_), Some(_)) => None,
        _ => Some(Config::load_unvalidated(config)?),
    };
    let admin = match (admin, &loaded) {
        (Some(a), _) => a,
        (None, loaded) => loaded
            .as_ref()
            .and_then(|c| c.server.admin_listen)
            .ok_or_else(|| anyhow::anyhow!("no admin_listen in the config: use --admin"))?
            .to_string(),
    };
    let token = match (token, &loaded) {
        (Some(t), _) => t,
        (None, Some(c)) => admin_token(c)?,
        (None, None) => unreachable!("the config is loaded without a token"),
    };
    let files: Vec<FileStatus> = admin_get(&admin, "/admin/adapters", &token).await?;
    println!(
        "{:<28} {:<9} {:<20} {:<14} {:<12} error",
        "file", "state", "adapter", "version", "sha256"
    );
    for f in files {
        println!(
            "{:<28} {:<9} {:<20} {:<14} {:<12} {}",
            f.file,
            f.state,
            f.adapter.unwrap_or_default(),
            f.version.unwrap_or_default(),
            f.sha256.as_deref().map_or("", |h| &h[..h.len().min(12)]),
            // The first line: a fixture's whole diff is in the log and the JSON.
            f.last_error
                .as_deref()
                .and_then(|e| e.lines().next())
                .unwrap_or_default()
        );
    }
    Ok(())
}

/// The admin API's bearer token: the newest unexpired version of the set `[server]
/// admin_token_secret` names, from the config's secrets file.
fn admin_token(config: &Config) -> anyhow::Result<String> {
    let set = config.server.admin_token_secret.as_deref().ok_or_else(|| {
        anyhow::anyhow!(
            "no [server] admin_token_secret in the config: the admin API is off (see \
             docs/operations.md, \"Admin API\")"
        )
    })?;
    let file = &config.secrets.file;
    let unusable = |cause| CliError::SecretsFile {
        file: file.clone(),
        cause,
    };
    let text = std::fs::read_to_string(file).map_err(|e| unusable(SecretsFileError::Read(e)))?;
    let secrets =
        crate::ingest::Secrets::parse(&text).map_err(|e| unusable(SecretsFileError::Parse(e)))?;
    Ok(crate::http::client_token(
        &secrets,
        set,
        time::OffsetDateTime::now_utc(),
    )?)
}

/// The admin API's JSON at `path`; its error body's message when it refuses.
async fn admin_get<T: serde::de::DeserializeOwned>(
    addr: &str,
    path: &str,
    token: &str,
) -> anyhow::Result<T> {
    let base = addr.trim_start_matches("http://").trim_end_matches('/');
    let url = format!("http://{base}{path}");
    let response = reqwest::Client::new()
        .get(&url)
        .bearer_auth(token)
        .send()
        .await
        .map_err(|cause| CliError::AdminListener {
            base: base.to_owned(),
            cause,
        })?;
    let status = response.status();
    if !status.is_success() {
        let body: serde_json::Value = response.json().await.unwrap_or_default();
        anyhow::bail!(
            "admin listener {base}: {path} answered {status}: {}",
            body["message"].as_str().unwrap_or("(no message)")
        );
    }
    Ok(response.json().await?)
}
