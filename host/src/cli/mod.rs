//! The `wharf` command line: the command tree and where each command goes. Every command has
//! its file, with its own clap types.
//!
//! - `serve`: `serve`, `worker`, `migrate`: run until a signal; apply the migrations
//! - `dev`: `dev`: the example config against a throwaway local Postgres cluster
//! - `dev_adapters`: `dev --adapters DIR`: out-of-tree adapters merged beside the bundled ones
//! - `dev_sink`: the local delivery target `dev` runs for the example route
//! - `ready`: the banner `dev` prints once it serves: URLs, console, next commands
//! - `install`: files put into a watched adapters folder, staged then renamed
//! - `events`: `events list|show|replay|purge`
//! - `deliveries`: `deliveries list|show|replay`
//! - `adapter`: `adapter check|test|status|new|build|watch|keygen|sign`
//! - `signing`: `adapter keygen|sign`: the key pair and the `.sig` beside an adapter file
//! - `scaffold`: the adapter crate `adapter new` writes in the adapters workspace
//! - `project`: standalone adapter projects in Rust, JavaScript or Python
//! - `check`: `config check`
//! - `published`: the demo values of `examples/`, refused outside `wharf dev`
//! - `payloads`: `payloads new-key|reencrypt`
//! - `pretty_json`: a JSON payload indented for a person, in its provider's own tokens
//! - `listing`: how a list prints: columns or JSON lines, then what its limit left out
//! - `resolve`: what a command runs with: the config, the database, the payload keys
//! - `error`: what the command line itself fails on

use std::path::PathBuf;
use std::process::ExitCode;

mod adapter;
mod check;
mod deliveries;
mod dev;
mod dev_adapters;
mod dev_sink;
mod error;
mod events;
mod install;
mod listing;
mod payloads;
mod pretty_json;
mod project;
mod published;
mod ready;
mod resolve;
mod scaffold;
mod serve;
mod signing;

use clap::{Parser, Subcommand};

use resolve::{
    DEFAULT_CONFIG, config_file, database_url, load_config, operator_pool, optional_config,
    payload_keys,
};

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
    Dev {
        /// Also serve the adapters in this folder (repeatable; a later folder wins a file name
        /// it shares): merged with the config's into `.wharf-dev/adapters/`, and kept in step,
        /// so a file that lands there (`wharf adapter watch --into DIR`) is hot-reloaded.
        #[arg(long = "adapters", value_name = "DIR")]
        adapters: Vec<PathBuf>,
    },
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
        command: events::EventsCommand,
    },
    /// Inspect and replay deliveries to route targets.
    Deliveries {
        #[command(subcommand)]
        command: deliveries::DeliveriesCommand,
    },
    /// Adapter tools.
    Adapter {
        #[command(subcommand)]
        command: adapter::AdapterCommand,
    },
    /// Config tools.
    Config {
        #[command(subcommand)]
        command: check::ConfigCommand,
    },
    /// Payload keys: make one, re-encrypt stored payloads under the current one.
    Payloads {
        #[command(subcommand)]
        command: payloads::PayloadsCommand,
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
            // Said once, for a person; a JSON log also gets it as a record, for its pipeline.
            if json_logs() {
                tracing::error!(error = %format!("{e:#}"), "wharf stopped");
            }
            eprintln!("wharf: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `dev --adapters`: the receiver serves the merge of the config's folder and `extra`; the
/// returned task keeps it in step (none without `extra`).
fn merge_adapters(
    config: &mut crate::config::Config,
    extra: Vec<PathBuf>,
) -> anyhow::Result<Option<tokio::task::JoinHandle<()>>> {
    if extra.is_empty() {
        return Ok(None);
    }
    let sources = std::iter::once(config.adapters.dir.clone())
        .chain(extra)
        .collect();
    let merged = std::path::Path::new(dev_adapters::MERGED);
    let merge = dev_adapters::Merge::start(sources, merged)?;
    // On stderr: stdout's first line is the addresses' JSON.
    tracing::info!(
        dir = %merged.display(),
        "wharf dev: serving the adapters folders merged here, kept in step with them"
    );
    config.adapters.dir = merged.canonicalize()?;
    Ok(Some(merge.spawn()))
}

fn json_logs() -> bool {
    std::env::var("WHARF_LOG_FORMAT").as_deref() == Ok("json")
}

/// Logs go to stderr, at `default` unless `RUST_LOG` says otherwise; `WHARF_LOG_FORMAT=json`
/// for one JSON object per line. Colours only on a terminal: in a file or a pipe they are
/// escape codes in the text.
fn init_tracing(default: &str) {
    use std::io::IsTerminal as _;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    if json_logs() {
        builder.json().flatten_event(true).init();
    } else {
        builder.init();
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let named = cli.config;
    let file = |default: &str| named.clone().unwrap_or_else(|| PathBuf::from(default));
    match cli.command {
        Command::Serve => {
            let config = load_config(&file(DEFAULT_CONFIG))?;
            published::refuse_published(&config)?;
            serve::serve(config, None).await
        }
        Command::Migrate => {
            let config = optional_config(named.as_deref())?;
            serve::migrate(&database_url(config.as_ref())?).await
        }
        Command::Dev { adapters } => {
            let (mut config, session) = dev::prepare(&file(dev::DEFAULT_CONFIG))?;
            let result = async {
                let _merging = merge_adapters(&mut config, adapters)?;
                let sink = dev_sink::start_for(&config).await?;
                let ready = ready::Ready::dev(&config, sink);
                serve::serve(config, Some(ready)).await
            }
            .await;
            session.stop();
            result
        }
        Command::Worker {
            count,
            admin_listen,
        } => {
            let config = load_config(&file(DEFAULT_CONFIG))?;
            published::refuse_published(&config)?;
            let count = count.unwrap_or(config.worker.count).max(1);
            serve::work(config, count, admin_listen).await
        }
        Command::Events { command } => {
            let config = optional_config(named.as_deref())?;
            // Only `show --payload` needs the payload keys (from the config, or the environment).
            let keys = command
                .reads_payloads()
                .then(|| payload_keys(config.as_ref()))
                .transpose()?;
            let pool = operator_pool(&database_url(config.as_ref())?).await?;
            events::run(&pool, keys.as_ref(), command).await
        }
        Command::Deliveries { command } => {
            let config = optional_config(named.as_deref())?;
            let pool = operator_pool(&database_url(config.as_ref())?).await?;
            deliveries::run(&pool, command).await
        }
        // Found only by the commands that read it: `adapter check` needs no config.
        Command::Adapter { command } => {
            adapter::run(command, || config_file(named.as_deref())).await
        }
        Command::Config {
            command: check::ConfigCommand::Check,
        } => check::run(&config_file(named.as_deref())).await,
        Command::Payloads { command } => {
            payloads::run(command, || config_file(named.as_deref())).await
        }
    }
}
