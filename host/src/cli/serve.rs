//! `wharf serve`, `wharf worker` and `wharf migrate`: run the receiver, or processing alone,
//! until SIGINT or SIGTERM; apply the migrations.

use tokio_util::sync::CancellationToken;

use super::ready::Ready;
use crate::config::Config;
use crate::server::{ProcessingHost, Server, ServerOptions};

/// Runs the receiver until SIGINT or SIGTERM, then shuts down gracefully. Prints one line
/// of JSON to stdout with the bound addresses (useful with port 0), then `ready`'s banner on
/// stderr.
pub async fn serve(config: Config, ready: Option<Ready>) -> anyhow::Result<()> {
    warn_loose_permissions(&config);
    let server = Server::start(config, ServerOptions::default()).await?;
    // Installed before the readiness line: a SIGTERM sent right after it must stop gracefully,
    // not kill the process with the default action.
    cancel_on_signal(server.cancel_token())?;
    println!(
        "{}",
        serde_json::json!({"listening": server.addr.to_string(),
            "admin": server.admin_addr.map(|a| a.to_string())})
    );
    tracing::info!(listen = %server.addr, admin = ?server.admin_addr, "wharf serving");
    if let Some(ready) = ready {
        eprint!("{}", ready.text(server.addr, server.admin_addr));
    }
    server.run_until_cancelled().await
}

/// Runs processing alone until SIGINT or SIGTERM. Prints one line of JSON to stdout once
/// started.
pub async fn work(
    config: Config,
    count: usize,
    admin: Option<std::net::SocketAddr>,
) -> anyhow::Result<()> {
    warn_loose_permissions(&config);
    let host = ProcessingHost::start(config, count, admin).await?;
    cancel_on_signal(host.cancel_token())?;
    println!(
        "{}",
        serde_json::json!({ "workers": count, "admin": host.admin_addr.map(|a| a.to_string()) })
    );
    tracing::info!(workers = count, "wharf worker processing");
    host.run_until_cancelled().await
}

/// Warns, as ssh would refuse, of key files others may read and a compiled-adapter cache
/// others may write; starts anyway.
fn warn_loose_permissions(config: &Config) {
    for problem in super::check::loose_permissions(config) {
        tracing::warn!("{}", problem.message);
    }
}

/// Applies the migrations over one connection.
pub async fn migrate(database_url: &str) -> anyhow::Result<()> {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(database_url)
        .await?;
    crate::ingest::MIGRATOR.run(&pool).await?;
    println!("migrations applied");
    Ok(())
}

/// Cancels `token` at the first SIGINT or SIGTERM. Both handlers are installed before this
/// returns.
fn cancel_on_signal(token: CancellationToken) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        tracing::info!("shutting down");
        token.cancel();
    });
    Ok(())
}
