//! Postgres's own ceiling for the rows Wharf writes: `pgbench` running
//! `bench/pgbench/accept.sql` on a freshly migrated database, at one and at ten events per
//! transaction, 64 clients.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Serialize;

use crate::fields::field;
use crate::machine::{PostgresCpu, clock_ticks, machine_ticks};
use crate::wharf::{Postgres, Setup, migrate};

#[derive(Debug, Clone, Serialize)]
pub struct Ceiling {
    pub rows_per_transaction: u32,
    /// Each payload row's body, sized to what Wharf stores for the benchmark's bodies.
    pub payload_bytes: usize,
    pub clients: u32,
    pub seconds: u32,
    pub transactions_per_s: f64,
    pub rows_per_s: f64,
    pub latency_avg_ms: Option<f64>,
    /// Cores the whole machine (pgbench and Postgres) and Postgres alone kept busy meanwhile:
    /// what a row costs at the ceiling.
    pub machine_busy_cores: Option<f64>,
    pub postgres_cores: Option<f64>,
    pub command: String,
}

pub async fn measure(
    setup: &Setup,
    postgres: &Postgres,
    dir: &Path,
    rows: u32,
    payload_bytes: usize,
    clients: u32,
    seconds: u32,
) -> anyhow::Result<Ceiling> {
    let database = format!("wharf_bench_pg_{}_{rows}", std::process::id());
    let url = postgres.create(&database).await?;
    let result = run(setup, dir, &url, rows, payload_bytes, clients, seconds);
    postgres.drop(&database).await?;
    result
}

fn run(
    setup: &Setup,
    dir: &Path,
    url: &str,
    rows: u32,
    payload_bytes: usize,
    clients: u32,
    seconds: u32,
) -> anyhow::Result<Ceiling> {
    migrate(setup, &dir.join("pgbench-config"), url)?;
    let scripts = setup.repo.join("bench/pgbench");
    let setup_sql = Command::new("psql")
        .args(["-q", "-v", "ON_ERROR_STOP=1", "-v"])
        // Random bytes in 16-byte steps (md5 digests), which no compression shrinks, as
        // sealing leaves Wharf's.
        .arg(format!("payload_chunks={}", payload_bytes.div_ceil(16)))
        .arg("-f")
        .arg(scripts.join("setup.sql"))
        .arg(url)
        .output()
        .context("cannot run psql (install the PostgreSQL client)")?;
    if !setup_sql.status.success() {
        bail!(
            "bench/pgbench/setup.sql failed: {}",
            String::from_utf8_lossy(&setup_sql.stderr)
        );
    }
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut command = Command::new("pgbench");
    // Wharf's own connections run with generic plans (host/src/ingest/store.rs): with day
    // partitions, custom plans re-plan every statement, so the ceiling is measured the same way.
    command
        .env("PGOPTIONS", "-c plan_cache_mode=force_generic_plan")
        .args(["-n", "-M", "prepared", "-f"])
        .arg(scripts.join("accept.sql"))
        .args(["-D", &format!("rows={rows}")])
        .args(["-c", &clients.to_string()])
        .args(["-j", &threads.min(clients as usize).to_string()])
        .args(["-T", &seconds.to_string()])
        .arg(url);
    let shown = format!(
        "PGOPTIONS='-c plan_cache_mode=force_generic_plan' pgbench -n -M prepared -f bench/pgbench/accept.sql -D rows={rows} -c {clients} -j {} -T {seconds} <fresh migrated database>",
        threads.min(clients as usize)
    );
    let mut postgres = PostgresCpu::default();
    postgres.ticks_since_last();
    let (started, machine_before) = (Instant::now(), machine_ticks());
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot run pgbench (install the PostgreSQL client tools)")?;
    // pgbench's backends exit with it: counted while they live, every 100 ms, they lose at
    // most the last interval each. Its few lines of output fit in the pipes meanwhile.
    let mut postgres_ticks = 0;
    while child.try_wait()?.is_none() {
        std::thread::sleep(Duration::from_millis(100));
        postgres_ticks += postgres.ticks_since_last();
    }
    let output = child.wait_with_output()?;
    let secs = started.elapsed().as_secs_f64().max(1e-3);
    let postgres_cores = Some(postgres_ticks as f64 / clock_ticks() / secs);
    let machine_busy_cores =
        machine_before
            .zip(machine_ticks())
            .map(|((before, _), (after, _))| {
                after.saturating_sub(before) as f64 / clock_ticks() / secs
            });
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        bail!(
            "pgbench failed ({}): {}{}",
            output.status,
            stdout,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let tps = field(&stdout, "tps = ").context("pgbench printed no tps")?;
    Ok(Ceiling {
        rows_per_transaction: rows,
        payload_bytes: payload_bytes.div_ceil(16) * 16,
        clients,
        seconds,
        transactions_per_s: tps,
        rows_per_s: tps * rows as f64,
        latency_avg_ms: field(&stdout, "latency average = "),
        machine_busy_cores,
        postgres_cores,
        command: shown,
    })
}
