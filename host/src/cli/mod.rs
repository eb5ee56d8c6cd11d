//! The `wharf` command line.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

mod check;
mod deliveries;
mod dev;
mod scaffold;

use clap::{Parser, Subcommand};
use time::OffsetDateTime;

use crate::adapter::{Sandbox, SandboxLimits};
use crate::config::Config;
use crate::events;
use crate::retention;
use crate::server::{ProcessingHost, Server, ServerOptions};
use crate::support::sealing::PayloadKeys;

/// The admin API's bearer token for `wharf adapter status`, when the config is not at hand.
const ADMIN_TOKEN_ENV: &str = "WHARF_ADMIN_TOKEN";

/// The config file when none is named (`wharf dev` has its own).
const DEFAULT_CONFIG: &str = "wharf.toml";

#[derive(Parser)]
#[command(
    name = "wharf",
    version,
    about = "A webhook receiver with sandboxed provider adapters"
)]
struct Cli {
    /// The config file [default: wharf.toml; for `dev`, examples/wharf.toml]
    ///
    /// Accepted before or after the subcommand. `events` and `migrate` need only a database:
    /// without a config file they use WHARF_DATABASE_URL (else DATABASE_URL), else the
    /// `wharf dev` cluster running from this folder.
    #[arg(long, global = true, env = "WHARF_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve webhooks.
    Serve,
    /// Apply database migrations and exit.
    Migrate,
    /// Serve the example adapters and endpoints against a throwaway local Postgres cluster
    /// (started in `.wharf-dev/` unless a database URL is set; its URL is printed and kept in
    /// `.wharf-dev/database-url` for the other commands while it runs).
    Dev,
    /// Process accepted events without serving HTTP: workers, relays and the reconciler.
    Worker {
        /// Workers in this process (default: `[worker] count`, at least 1).
        #[arg(long)]
        count: Option<usize>,
        /// Serve `/healthz`, `/readyz` and `/metrics` here (port 0: any free port).
        #[arg(long, env = "WHARF_WORKER_ADMIN_LISTEN")]
        admin_listen: Option<std::net::SocketAddr>,
    },
    /// Inspect and replay accepted events.
    Events {
        #[command(subcommand)]
        command: EventsCommand,
    },
    /// Inspect and replay deliveries to route targets.
    Deliveries {
        #[command(subcommand)]
        command: deliveries::DeliveriesCommand,
    },
    /// Adapter tools.
    Adapter {
        #[command(subcommand)]
        command: AdapterCommand,
    },
    /// Config tools.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Payload keys: make one, re-encrypt stored payloads under the current one.
    Payloads {
        #[command(subcommand)]
        command: PayloadsCommand,
    },
}

#[derive(Subcommand)]
enum PayloadsCommand {
    /// Print a new random payload key, as a key file line and as `WHARF_PAYLOAD_KEY`.
    NewKey {
        /// The key's id (stored beside every payload it seals): for example the month.
        #[arg(long)]
        id: String,
    },
    /// Seal every stored payload not under the current key with it, in bounded batches
    /// (safe beside serving; run it again after an interruption).
    Reencrypt {
        #[arg(long, default_value_t = 500)]
        batch: i64,
    },
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Validate the config and the secrets file it names as `serve` would at start, without
    /// the database: print each problem as FILE:LINE: message and exit non-zero if any.
    Check,
}

#[derive(Subcommand)]
enum EventsCommand {
    /// Newest first: id, status, attempts, endpoint, type, provider event id, last error.
    List {
        /// PENDING, PROCESSING, PROCESSED or FAILED.
        #[arg(long)]
        status: Option<String>,
        #[arg(long)]
        endpoint: Option<String>,
        #[arg(long, default_value_t = 50)]
        limit: i64,
        /// One JSON object per line instead of columns.
        #[arg(long)]
        json: bool,
    },
    /// One event as JSON: metadata, redacted diagnostic, attempts, deliveries.
    Show {
        id: uuid::Uuid,
        /// Include the raw payload (it may hold personal data).
        #[arg(long)]
        payload: bool,
    },
    /// Requeue events (by id, or every event a filter selects) and their failed deliveries.
    Replay {
        ids: Vec<uuid::Uuid>,
        #[arg(long)]
        status: Option<String>,
        #[arg(long)]
        endpoint: Option<String>,
        #[arg(long, default_value_t = 1000)]
        limit: i64,
        /// Also send again deliveries that were already sent.
        #[arg(long)]
        resend: bool,
        /// Count what would be requeued and change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Delete events received before a moment, with their markers, notices, deliveries and
    /// payloads (retention does this by itself after `[retention]` days; this is for an
    /// investigation or an erasure request). Prints what it deleted as JSON.
    Purge {
        /// RFC 3339, for example 2026-11-01T00:00:00Z.
        #[arg(long)]
        before: String,
        #[arg(long)]
        endpoint: Option<String>,
        /// Count what would go, delete nothing.
        #[arg(long)]
        dry_run: bool,
        /// Also events not finished (pending, processing, or with a pending delivery): what
        /// was acknowledged and not yet delivered is then lost.
        #[arg(long)]
        include_unfinished: bool,
        /// Events per transaction.
        #[arg(long, default_value_t = 500)]
        batch: i64,
    },
}

#[derive(Subcommand)]
enum AdapterCommand {
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

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    // A check's report is its output; the adapters' load lines would only repeat it.
    let quiet = matches!(cli.command, Command::Config { .. });
    init_tracing(if quiet { "error" } else { "info" });
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("wharf: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        // Its output said what is wrong.
        Err(e) if e.is::<check::Reported>() => ExitCode::FAILURE,
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "wharf stopped");
            eprintln!("wharf: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The real user id of this process (the owner of `/proc/self`), for the audit line; -1 when
/// unknown.
fn process_uid() -> i64 {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata("/proc/self").map_or(-1, |m| i64::from(m.uid()))
}

/// Logs go to stderr, at `default` unless `RUST_LOG` says otherwise; `WHARF_LOG_FORMAT=json`
/// for one JSON object per line.
fn init_tracing(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if std::env::var("WHARF_LOG_FORMAT").as_deref() == Ok("json") {
        builder.json().flatten_event(true).init();
    } else {
        builder.init();
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let named = cli.config;
    let file = |default: &str| named.clone().unwrap_or_else(|| PathBuf::from(default));
    match cli.command {
        Command::Serve => serve(load_config(&file(DEFAULT_CONFIG))?).await,
        Command::Migrate => {
            let url = database_url(named.as_deref())?;
            let pool = sqlx::postgres::PgPoolOptions::new()
                .max_connections(1)
                .connect(&url)
                .await?;
            crate::ingest::MIGRATOR.run(&pool).await?;
            println!("migrations applied");
            Ok(())
        }
        Command::Dev => {
            let (config, cluster) = dev::prepare(&file(dev::DEFAULT_CONFIG))?;
            let result = serve(config).await;
            if let Some(cluster) = cluster {
                cluster.stop();
            }
            result
        }
        Command::Worker {
            count,
            admin_listen,
        } => {
            let config = load_config(&file(DEFAULT_CONFIG))?;
            let count = count.unwrap_or(config.worker.count).max(1);
            work(config, count, admin_listen).await
        }
        Command::Events { command } => {
            // Only `show --payload` needs the payload keys (from the config, or the environment).
            let keys = matches!(command, EventsCommand::Show { payload: true, .. })
                .then(|| payload_keys(named.as_deref()))
                .transpose()?;
            events(&database_url(named.as_deref())?, keys.as_ref(), command).await
        }
        Command::Deliveries { command } => {
            let pool = operator_pool(&database_url(named.as_deref())?).await?;
            deliveries::run(&pool, command).await
        }
        Command::Adapter { command } => adapter(command, &file(DEFAULT_CONFIG)).await,
        Command::Config {
            command: ConfigCommand::Check,
        } => check::run(&file(DEFAULT_CONFIG)).await,
        Command::Payloads {
            command: PayloadsCommand::NewKey { id },
        } => {
            let (line, env) = crate::support::sealing::new_key(&id);
            println!("# in the key file's [keys] table (set current = {id:?} to seal with it):");
            println!("{line}");
            println!("# or in the environment:");
            println!("{}={env}", crate::support::sealing::KEY_ENV);
            Ok(())
        }
        Command::Payloads {
            command: PayloadsCommand::Reencrypt { batch },
        } => reencrypt(&load_config(&file(DEFAULT_CONFIG))?, batch).await,
    }
}

/// The config file a command that can do without one reads: the one named, else `wharf.toml`
/// when it is here.
fn config_here(named: Option<&Path>) -> Option<&Path> {
    let default = Path::new(DEFAULT_CONFIG);
    named.or(default.exists().then_some(default))
}

/// The payload keys of a command that reads payloads: the config's when a file is named or
/// `wharf.toml` is here, else `WHARF_PAYLOAD_KEY` alone.
fn payload_keys(named: Option<&Path>) -> anyhow::Result<PayloadKeys> {
    match config_here(named) {
        Some(path) => load_config(path)?.payload_keys(),
        None => {
            let env = std::env::var(crate::support::sealing::KEY_ENV).ok();
            PayloadKeys::load(None, env.as_deref())
                .map_err(|e| anyhow::anyhow!("{e} (name the config that has them with --config)"))
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
    let done = crate::payloads::reencrypt(&pool, &keys, batch, |so_far| {
        eprintln!("resealed {} of {} found", so_far.resealed, so_far.found);
    })
    .await?;
    println!("{}", serde_json::to_string(&done)?);
    anyhow::ensure!(
        done.unreadable.is_empty(),
        "{} payloads did not open with the configured keys (listed above); they keep their \
         old key",
        done.unreadable.len()
    );
    Ok(())
}

/// The config a command runs with: the file, environment overrides, then, when neither names
/// a database, the dev cluster run from this folder.
fn load_config(path: &Path) -> anyhow::Result<Config> {
    let mut config = Config::load_unvalidated(path)?;
    dev::fill_database(&mut config)?;
    config.validate()?;
    Ok(config)
}

/// The database of a command that needs nothing else (`events`, `migrate`): the config's when
/// a file is named or `wharf.toml` is here; else `WHARF_DATABASE_URL` (or `DATABASE_URL`);
/// else the dev cluster run from this folder.
fn database_url(named: Option<&Path>) -> anyhow::Result<String> {
    if let Some(path) = config_here(named) {
        return Ok(load_config(path)?.database_url().to_owned());
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

async fn adapter(command: AdapterCommand, config: &Path) -> anyhow::Result<()> {
    match command {
        AdapterCommand::Check { file } => {
            let sandbox = Sandbox::new(SandboxLimits::default(), None)?;
            let adapter = std::sync::Arc::new(sandbox.load(&file).await?);
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
            let adapter = std::sync::Arc::new(sandbox.load(&file).await?);
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
        AdapterCommand::Status { admin } => {
            // The bearer token: `WHARF_ADMIN_TOKEN` (never a flag, which `ps` would show), else
            // the newest of the set `[server] admin_token_secret` names, from the secrets file.
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
            let files: Vec<crate::adapter::FileStatus> =
                admin_get(&admin, "/admin/adapters", &token).await?;
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
        AdapterCommand::New { name, dir } => {
            let created = scaffold::new_adapter(&dir, &name)?;
            println!("created {}", created.display());
            print!("{}", scaffold::next_steps(&dir, &name));
            Ok(())
        }
    }
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
    let text = std::fs::read_to_string(file)
        .map_err(|e| anyhow::anyhow!("secrets file {}: {e}", file.display()))?;
    let secrets = crate::ingest::Secrets::parse(&text)
        .map_err(|e| anyhow::anyhow!("secrets file {}: {e}", file.display()))?;
    crate::http::client_token(&secrets, set, time::OffsetDateTime::now_utc())
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
        .map_err(|e| anyhow::anyhow!("admin listener {base}: {e}"))?;
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

/// Runs the receiver until SIGINT or SIGTERM, then shuts down gracefully. Prints one line
/// of JSON to stdout with the bound addresses (useful with port 0).
pub async fn serve(config: Config) -> anyhow::Result<()> {
    let server = Server::start(config, ServerOptions::default()).await?;
    println!(
        "{}",
        serde_json::json!({"listening": server.addr.to_string(),
            "admin": server.admin_addr.map(|a| a.to_string())})
    );
    tracing::info!(listen = %server.addr, admin = ?server.admin_addr, "wharf serving");
    let token = server.cancel_token();
    tokio::spawn(async move {
        shutdown_signal().await;
        tracing::info!("shutting down");
        token.cancel();
    });
    server.run_until_cancelled().await
}

/// Runs processing alone until SIGINT or SIGTERM. Prints one line of JSON to stdout once
/// started.
async fn work(
    config: Config,
    count: usize,
    admin: Option<std::net::SocketAddr>,
) -> anyhow::Result<()> {
    let host = ProcessingHost::start(config, count, admin).await?;
    println!(
        "{}",
        serde_json::json!({ "workers": count, "admin": host.admin_addr.map(|a| a.to_string()) })
    );
    tracing::info!(workers = count, "wharf worker processing");
    let token = host.cancel_token();
    tokio::spawn(async move {
        shutdown_signal().await;
        tracing::info!("shutting down");
        token.cancel();
    });
    host.run_until_cancelled().await
}

/// One connection for an operator command.
async fn operator_pool(database_url: &str) -> anyhow::Result<sqlx::PgPool> {
    sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        // A database that does not answer is an error within seconds, not a long wait.
        .acquire_timeout(std::time::Duration::from_secs(5))
        .connect(database_url)
        .await
        .map_err(|e| anyhow::anyhow!("database: {e}"))
}

async fn events(
    database_url: &str,
    payload_keys: Option<&PayloadKeys>,
    command: EventsCommand,
) -> anyhow::Result<()> {
    let pool = operator_pool(database_url).await?;
    let filter = |status: Option<String>, endpoint, limit| -> anyhow::Result<events::Filter> {
        Ok(events::Filter {
            status: status.as_deref().map(events::check_status).transpose()?,
            endpoint,
            limit,
        })
    };
    match command {
        EventsCommand::List {
            status,
            endpoint,
            limit,
            json,
        } => {
            let filter = filter(status, endpoint, limit)?;
            let rows = events::list(&pool, &filter).await?;
            // No silent cap: a list the limit cut short says so (after the rows).
            let total = events::count(&pool, &filter).await?;
            let note = (total > rows.len() as i64).then(|| {
                format!(
                    "showing the newest {} of {} matching (--limit {limit})",
                    crate::deliveries::thousands(rows.len() as i64),
                    crate::deliveries::thousands(total)
                )
            });
            if !json {
                println!(
                    "INBOX_ID\tSTATUS\tATTEMPTS\tENDPOINT\tTYPE\tEVENT_ID\tRECEIVED\tLAST_ERROR"
                );
            }
            for r in rows {
                if json {
                    println!("{}", serde_json::to_string(&r)?);
                } else {
                    let received = r
                        .received_at
                        .format(&time::format_description::well_known::Rfc3339)?;
                    println!(
                        "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
                        r.inbox_id,
                        r.status,
                        r.attempt_count,
                        r.endpoint_id,
                        r.event_type,
                        r.provider_event_id,
                        received,
                        r.last_error.unwrap_or_default()
                    );
                }
            }
            if let Some(note) = note {
                if json {
                    eprintln!("{note}");
                } else {
                    println!("{note}");
                }
            }
        }
        EventsCommand::Show { id, .. } => {
            let Some(event) = events::show(&pool, id, payload_keys).await? else {
                anyhow::bail!("no event {id}");
            };
            if payload_keys.is_some() {
                // The audit trail of who read a payload: the operating-system account that
                // ran this command (Wharf has no users of its own), on stderr with the logs.
                tracing::warn!(
                    target: "wharf::audit",
                    inbox_id = %id,
                    uid = process_uid(),
                    user = std::env::var("USER").unwrap_or_default(),
                    "payload decrypted for an operator"
                );
            }
            println!("{}", serde_json::to_string_pretty(&event)?);
        }
        EventsCommand::Replay {
            mut ids,
            status,
            endpoint,
            limit,
            resend,
            dry_run,
        } => {
            if status.is_some() || endpoint.is_some() {
                ids.extend(events::ids(&pool, &filter(status, endpoint, limit)?).await?);
            }
            anyhow::ensure!(
                !ids.is_empty(),
                "name event ids, or select with --status/--endpoint"
            );
            let replayed = events::replay_or_count(&pool, &ids, resend, dry_run).await?;
            let mut report = serde_json::to_value(&replayed)?;
            if dry_run {
                report["dry_run"] = true.into();
            }
            println!("{report}");
        }
        EventsCommand::Purge {
            before,
            endpoint,
            dry_run,
            include_unfinished,
            batch,
        } => {
            let before =
                OffsetDateTime::parse(&before, &time::format_description::well_known::Rfc3339)
                    .map_err(|e| anyhow::anyhow!("--before {before:?}: {e} (RFC 3339)"))?;
            anyhow::ensure!((1..=10_000).contains(&batch), "--batch must be 1-10000");
            let what = retention::Purge {
                before,
                endpoint,
                include_unfinished,
                dry_run,
                batch,
            };
            let purged = retention::purge(&pool, &what, |so_far| {
                tracing::info!(events = so_far.events, "purging");
            })
            .await?;
            if !dry_run {
                tracing::warn!(target: "wharf::audit", uid = process_uid(),
                    user = std::env::var("USER").unwrap_or_default(),
                    events = purged.events, "events purged by an operator");
            }
            println!("{}", serde_json::to_string(&purged)?);
        }
    }
    Ok(())
}

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("signal handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
