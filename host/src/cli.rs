//! The `wharf` command line.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::config::Config;
use crate::server::{Server, ServerOptions};
use crate::store::Store;
use crate::wasm::{Sandbox, SandboxLimits};

#[derive(Parser)]
#[command(
    name = "wharf",
    version,
    about = "A webhook receiver with sandboxed provider adapters"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve webhooks.
    Serve {
        #[arg(long, env = "WHARF_CONFIG", default_value = "wharf.toml")]
        config: PathBuf,
    },
    /// Apply database migrations and exit.
    Migrate {
        #[arg(long, env = "WHARF_CONFIG", default_value = "wharf.toml")]
        config: PathBuf,
    },
    /// Serve the example adapters and endpoints against a throwaway local Postgres cluster
    /// (started in `.wharf-dev/` unless a database URL is set).
    Dev {
        #[arg(long, env = "WHARF_CONFIG", default_value = "examples/wharf.toml")]
        config: PathBuf,
    },
    /// Adapter tools.
    Adapter {
        #[command(subcommand)]
        command: AdapterCommand,
    },
}

#[derive(Subcommand)]
enum AdapterCommand {
    /// Load an adapter, validate it against the world and print its description as JSON.
    Check { file: PathBuf },
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("wharf: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli.command)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "wharf stopped");
            eprintln!("wharf: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Logs go to stderr; `WHARF_LOG_FORMAT=json` for one JSON object per line.
fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if std::env::var("WHARF_LOG_FORMAT").as_deref() == Ok("json") {
        builder.json().flatten_event(true).init();
    } else {
        builder.init();
    }
}

async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Serve { config } => serve(Config::load(&config)?).await,
        Command::Migrate { config } => {
            let config = Config::load(&config)?;
            let store =
                Store::connect_lazy(config.database_url(), 2, std::time::Duration::from_secs(30))?;
            store.migrate().await?;
            println!("migrations applied");
            Ok(())
        }
        Command::Dev { config } => crate::dev::run(&config).await,
        Command::Adapter {
            command: AdapterCommand::Check { file },
        } => {
            let sandbox = Sandbox::new(SandboxLimits::default(), None)?;
            let adapter = sandbox.load(&file).await?;
            println!("{}", serde_json::to_string_pretty(&adapter.info)?);
            Ok(())
        }
    }
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

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("signal handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
