//! One Wharf under test: a fresh database, a temporary copy of `examples/wharf.toml` pointing
//! at it, `wharf serve` as a child process, and what it costs (CPU, memory, backlog) sampled
//! every second while the load runs.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Serialize;
use sqlx::{Connection, Executor, PgConnection};

use crate::machine::{
    PostgresCpu, clock_ticks, cpu_ticks, dirty_kib, machine_ticks, page_kib, status_kib,
    written_pages,
};

/// Where Postgres is and how to make and drop databases on it.
#[derive(Debug, Clone)]
pub struct Postgres {
    /// A URL whose database exists, for `CREATE DATABASE` (e.g. `.../postgres`).
    pub admin_url: String,
}

impl Postgres {
    pub fn url_for(&self, database: &str) -> String {
        let base = self.admin_url.split('?').next().unwrap_or(&self.admin_url);
        let cut = base.rfind('/').filter(|&i| i > "postgres://".len());
        match cut {
            Some(i) => format!("{}/{database}", &base[..i]),
            None => format!("{}/{database}", base.trim_end_matches('/')),
        }
    }

    pub async fn create(&self, database: &str) -> anyhow::Result<String> {
        let mut admin = PgConnection::connect(&self.admin_url)
            .await
            .with_context(|| format!("cannot connect to Postgres at {}", self.admin_url))?;
        admin
            .execute(format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)").as_str())
            .await?;
        admin
            .execute(format!("CREATE DATABASE {database}").as_str())
            .await?;
        Ok(self.url_for(database))
    }

    pub async fn drop(&self, database: &str) -> anyhow::Result<()> {
        let mut admin = PgConnection::connect(&self.admin_url).await?;
        admin
            .execute(format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)").as_str())
            .await?;
        Ok(())
    }

    pub async fn version(&self) -> anyhow::Result<String> {
        let mut admin = PgConnection::connect(&self.admin_url).await?;
        let (version,): (String,) = sqlx::query_as("SELECT version()")
            .fetch_one(&mut admin)
            .await?;
        Ok(version)
    }

    /// The settings that decide what a commit costs.
    pub async fn settings(&self) -> anyhow::Result<String> {
        let mut admin = PgConnection::connect(&self.admin_url).await?;
        let mut shown = Vec::new();
        for name in [
            "synchronous_commit",
            "fsync",
            "wal_sync_method",
            "shared_buffers",
            "max_wal_size",
        ] {
            let (value,): (String,) = sqlx::query_as(&format!("SHOW {name}"))
                .fetch_one(&mut admin)
                .await?;
            shown.push(format!("`{name}` {value}"));
        }
        Ok(shown.join(", "))
    }
}

/// What the temporary configuration changes in `examples/wharf.toml`.
#[derive(Debug, Clone)]
pub struct Setup {
    pub repo: PathBuf,
    pub binary: PathBuf,
    pub workers: u32,
}

pub struct Running {
    child: Child,
    pub pid: u32,
    pub url: String,
    pub admin_url: String,
    pub database_url: String,
}

/// The configuration Wharf runs with: `examples/wharf.toml` with free ports, absolute paths
/// and `workers` in-process workers, written into `dir` beside a copy of the secrets.
pub struct Written {
    pub config: PathBuf,
    pub listen: u16,
    pub admin: u16,
}

pub fn write_config(setup: &Setup, dir: &Path) -> anyhow::Result<Written> {
    std::fs::create_dir_all(dir)?;
    let (listen, admin) = (free_port()?, free_port()?);
    let example = setup.repo.join("examples");
    let toml = std::fs::read_to_string(example.join("wharf.toml"))
        .context("reading examples/wharf.toml")?;
    let adapters = setup.repo.join("adapters/dist");
    if !adapters.is_dir() {
        bail!(
            "{} is missing: build the adapters first (cargo xtask adapters)",
            adapters.display()
        );
    }
    let cache = setup.repo.join("target/bench-cache");
    let toml = rewrite(
        &toml,
        &[
            ("server", "listen", format!("\"127.0.0.1:{listen}\"")),
            ("server", "admin_listen", format!("\"127.0.0.1:{admin}\"")),
            ("adapters", "dir", format!("\"{}\"", adapters.display())),
            ("adapters", "cache_dir", format!("\"{}\"", cache.display())),
            ("worker", "count", setup.workers.to_string()),
        ],
    )?;
    let config = dir.join("wharf.toml");
    std::fs::write(&config, without_routes(&toml))?;
    std::fs::copy(example.join("secrets.toml"), dir.join("secrets.toml"))?;
    std::fs::copy(
        example.join("payload-keys.toml"),
        dir.join("payload-keys.toml"),
    )?;
    Ok(Written {
        config,
        listen,
        admin,
    })
}

/// `wharf migrate` against `database_url`.
pub fn migrate(setup: &Setup, dir: &Path, database_url: &str) -> anyhow::Result<()> {
    let written = write_config(setup, dir)?;
    let output = Command::new(&setup.binary)
        .arg("migrate")
        .arg("--config")
        .arg(&written.config)
        .env("WHARF_DATABASE_URL", database_url)
        .env("RUST_LOG", "warn")
        .output()
        .with_context(|| format!("cannot run {}", setup.binary.display()))?;
    if !output.status.success() {
        bail!(
            "wharf migrate failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

/// Writes the configuration into `dir` and starts `wharf serve` against `database_url`;
/// returns once `/readyz` answers 200.
pub async fn start(setup: &Setup, dir: &Path, database_url: &str) -> anyhow::Result<Running> {
    let Written {
        config,
        listen,
        admin,
    } = write_config(setup, dir)?;
    let log = std::fs::File::create(dir.join("wharf.log"))?;
    // `dev`, not `serve`: the examples' secrets and payload key are Wharf's published demo
    // values, which `serve` refuses. With a database named, `dev` is `serve` without that
    // check (no cluster of its own).
    let child = Command::new(&setup.binary)
        .arg("dev")
        .arg("--config")
        .arg(&config)
        .env("WHARF_DATABASE_URL", database_url)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .with_context(|| format!("cannot start {}", setup.binary.display()))?;
    let mut running = Running {
        pid: child.id(),
        child,
        url: format!("http://127.0.0.1:{listen}"),
        admin_url: format!("http://127.0.0.1:{admin}"),
        database_url: database_url.to_owned(),
    };
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        if let Some(status) = running.child.try_wait()? {
            bail!(
                "wharf exited ({status}) before it was ready; see {}",
                dir.join("wharf.log").display()
            );
        }
        let ready = client
            .get(format!("{}/readyz", running.admin_url))
            .timeout(Duration::from_secs(2))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        if ready {
            return Ok(running);
        }
        if Instant::now() > deadline {
            running.stop();
            bail!("wharf was not ready within 180 s");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

impl Running {
    /// SIGTERM, then SIGKILL if it has not stopped within 10 s.
    pub fn stop(&mut self) {
        if self.child.try_wait().ok().flatten().is_some() {
            return;
        }
        // SAFETY: kill(2) on our own child's pid, which has not been reaped yet.
        unsafe {
            libc::kill(self.pid as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Replaces `key = value` in `[section]`, keeping the line's comment; every key must exist,
/// so a change to the example file is noticed here rather than benchmarked by mistake.
fn rewrite(toml: &str, edits: &[(&str, &str, String)]) -> anyhow::Result<String> {
    let mut section = String::new();
    let mut done = vec![false; edits.len()];
    let mut out = String::with_capacity(toml.len());
    for line in toml.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with('[') {
            section = trimmed
                .trim_start_matches('[')
                .split(']')
                .next()
                .unwrap_or_default()
                .to_owned();
        }
        let mut replaced = None;
        for (i, (s, key, value)) in edits.iter().enumerate() {
            let Some(rest) = trimmed.strip_prefix(key) else {
                continue;
            };
            if section == *s && rest.trim_start().starts_with('=') {
                let comment = line
                    .find(" #")
                    .map(|c| &line[line[..c].trim_end().len()..])
                    .unwrap_or_default();
                replaced = Some(format!("{key} = {value}{comment}"));
                done[i] = true;
            }
        }
        out.push_str(replaced.as_deref().unwrap_or(line));
        out.push('\n');
    }
    if let Some(i) = done.iter().position(|d| !d) {
        bail!(
            "examples/wharf.toml has no `{}` in [{}]",
            edits[i].1,
            edits[i].0
        );
    }
    Ok(out)
}

/// `toml` without its `[[route]]` tables: the example's route feeds the sink `wharf dev` runs
/// for a new user, and the benchmark measures receiving and processing, not deliveries (its
/// numbers before the route was added are comparable only so).
fn without_routes(toml: &str) -> String {
    let mut out = String::with_capacity(toml.len());
    let mut in_route = false;
    for line in toml.lines() {
        let text = line.trim();
        if text.starts_with('[') {
            in_route = text == "[[route]]";
        } else if text.is_empty() {
            in_route = false;
        }
        if !in_route {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// One second of the receiver's and the machine's state.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Sample {
    pub t: f64,
    /// Cores Wharf used over the last interval (utime + stime).
    pub wharf_cores: f64,
    pub wharf_rss_mib: f64,
    /// The whole machine: 1 - idle share over the last interval, in cores.
    pub machine_busy_cores: f64,
    /// This process: the load generator (and this sampler).
    pub generator_cores: f64,
    /// Every process named `postgres` on the machine.
    pub postgres_cores: f64,
    /// The kernel's dirty page cache (`Dirty` + `Writeback`) at the sample.
    pub dirty_mib: f64,
    /// What the kernel wrote to disk over the last interval (`nr_written`).
    pub written_mib: f64,
    /// WAL flushes (`pg_stat_wal.wal_sync`, the whole cluster) over the last interval.
    pub wal_syncs: Option<u64>,
    /// `wharf_inbox_oldest_pending_seconds` from `/metrics` (refreshed by the reconciler).
    pub oldest_pending_gauge_s: Option<f64>,
    /// The same age read from the database now.
    pub oldest_pending_db_s: Option<f64>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Usage {
    pub wharf_cpu_cores_mean: f64,
    pub wharf_cpu_cores_max: f64,
    pub machine_busy_cores_mean: f64,
    pub generator_cores_mean: f64,
    pub postgres_cores_mean: f64,
    pub peak_rss_mib: f64,
    pub oldest_pending_gauge_max_s: Option<f64>,
    pub oldest_pending_db_max_s: Option<f64>,
    /// Accepted events not yet processed when the load ended.
    pub backlog_at_end: Option<i64>,
    pub samples: Vec<Sample>,
}

/// Samples every second until `stop` fires, then reads the peak (`VmHWM`).
pub async fn sample(running: &Running, stop: tokio::sync::oneshot::Receiver<()>) -> Usage {
    let pid = running.pid;
    let client = reqwest::Client::new();
    let mut db = PgConnection::connect(&running.database_url).await.ok();
    let tick = clock_ticks();
    let started = Instant::now();
    let me = std::process::id();
    let mut postgres = PostgresCpu::default();
    postgres.ticks_since_last();
    let page = page_kib();
    let mut last = (
        Instant::now(),
        cpu_ticks(pid),
        machine_ticks(),
        cpu_ticks(me),
        written_pages(),
    );
    let mut last_wal_syncs = match db.as_mut() {
        Some(conn) => wal_syncs(conn).await,
        None => None,
    };
    let mut usage = Usage::default();
    let mut interval = tokio::time::interval(Duration::from_secs(1));
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    interval.tick().await;
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => break,
            _ = interval.tick() => {}
        }
        let now = (
            Instant::now(),
            cpu_ticks(pid),
            machine_ticks(),
            cpu_ticks(me),
            written_pages(),
        );
        let postgres_ticks = postgres.ticks_since_last();
        let secs = (now.0 - last.0).as_secs_f64().max(1e-3);
        let wharf_cores = match (now.1, last.1) {
            (Some(a), Some(b)) => a.saturating_sub(b) as f64 / tick / secs,
            _ => 0.0,
        };
        let machine_busy_cores = match (now.2, last.2) {
            (Some((busy_a, _)), Some((busy_b, _))) => {
                busy_a.saturating_sub(busy_b) as f64 / tick / secs
            }
            _ => 0.0,
        };
        let generator_cores = match (now.3, last.3) {
            (Some(a), Some(b)) => a.saturating_sub(b) as f64 / tick / secs,
            _ => 0.0,
        };
        let written_mib = match (now.4, last.4) {
            (Some(a), Some(b)) => a.saturating_sub(b) as f64 * page / 1024.0,
            _ => 0.0,
        };
        let postgres_cores = postgres_ticks as f64 / tick / secs;
        last = now;
        let gauge = client
            .get(format!("{}/metrics", running.admin_url))
            .timeout(Duration::from_millis(800))
            .send()
            .await
            .ok();
        let gauge = match gauge {
            Some(r) => r.text().await.ok().and_then(|text| {
                text.lines()
                    .find_map(|l| l.strip_prefix("wharf_inbox_oldest_pending_seconds "))
                    .and_then(|v| v.trim().parse::<f64>().ok())
            }),
            None => None,
        };
        // Bounded, so a busy database delays a sample, not the next ones.
        let db_age = match db.as_mut() {
            Some(conn) => tokio::time::timeout(Duration::from_millis(500), oldest_pending(conn))
                .await
                .ok()
                .and_then(Result::ok),
            None => None,
        };
        let syncs = match db.as_mut() {
            Some(conn) => wal_syncs(conn).await,
            None => None,
        };
        let wal_syncs = syncs.zip(last_wal_syncs).map(|(a, b)| a.saturating_sub(b));
        last_wal_syncs = syncs.or(last_wal_syncs);
        usage.samples.push(Sample {
            t: started.elapsed().as_secs_f64(),
            wharf_cores,
            wharf_rss_mib: status_kib(pid, "VmRSS:").unwrap_or(0) as f64 / 1024.0,
            machine_busy_cores,
            generator_cores,
            postgres_cores,
            dirty_mib: dirty_kib().unwrap_or(0) as f64 / 1024.0,
            written_mib,
            wal_syncs,
            oldest_pending_gauge_s: gauge,
            oldest_pending_db_s: db_age,
        });
    }
    let samples = &usage.samples;
    let n = samples.len().max(1) as f64;
    usage.wharf_cpu_cores_mean = samples.iter().map(|s| s.wharf_cores).sum::<f64>() / n;
    usage.wharf_cpu_cores_max = samples.iter().map(|s| s.wharf_cores).fold(0.0, f64::max);
    usage.machine_busy_cores_mean = samples.iter().map(|s| s.machine_busy_cores).sum::<f64>() / n;
    usage.generator_cores_mean = samples.iter().map(|s| s.generator_cores).sum::<f64>() / n;
    usage.postgres_cores_mean = samples.iter().map(|s| s.postgres_cores).sum::<f64>() / n;
    let hwm = status_kib(pid, "VmHWM:").unwrap_or(0) as f64 / 1024.0;
    let rss_max = samples.iter().map(|s| s.wharf_rss_mib).fold(0.0, f64::max);
    usage.peak_rss_mib = hwm.max(rss_max);
    let max_opt = |values: Vec<f64>| values.into_iter().reduce(f64::max);
    usage.oldest_pending_gauge_max_s = max_opt(
        samples
            .iter()
            .filter_map(|s| s.oldest_pending_gauge_s)
            .collect(),
    );
    usage.oldest_pending_db_max_s = max_opt(
        samples
            .iter()
            .filter_map(|s| s.oldest_pending_db_s)
            .collect(),
    );
    if let Some(conn) = db.as_mut() {
        usage.backlog_at_end = sqlx::query_as::<_, (i64,)>(
            "SELECT count(*) FROM webhook_inbox WHERE status IN ('PENDING', 'PROCESSING')",
        )
        .fetch_one(conn)
        .await
        .ok()
        .map(|(n,)| n);
    }
    usage
}

/// WAL flushes of the whole cluster since its statistics were reset; bounded like the age
/// probe, though reading them waits on no lock.
async fn wal_syncs(conn: &mut PgConnection) -> Option<u64> {
    let read = sqlx::query_as::<_, (i64,)>("SELECT wal_sync FROM pg_stat_wal").fetch_one(conn);
    match tokio::time::timeout(Duration::from_millis(500), read).await {
        Ok(Ok((n,))) => u64::try_from(n).ok(),
        _ => None,
    }
}

/// Two index probes (`webhook_inbox_by_status`), cheap enough to run every second.
async fn oldest_pending(conn: &mut PgConnection) -> anyhow::Result<f64> {
    let (age,): (Option<f64>,) = sqlx::query_as(
        "SELECT extract(epoch FROM now() - LEAST(
             (SELECT min(received_at) FROM webhook_inbox WHERE status = 'PENDING'),
             (SELECT min(received_at) FROM webhook_inbox WHERE status = 'PROCESSING')))::float8",
    )
    .fetch_one(conn)
    .await?;
    Ok(age.unwrap_or(0.0).max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrite_replaces_keys_in_their_section_and_keeps_comments() {
        let toml = "[server]\nlisten = \"a\"   # public\nadmin_listen = \"b\"\n[worker]\ncount = 2                         # [0..=256]\nbatch_size = 32\n";
        let out = rewrite(
            toml,
            &[
                ("server", "listen", "\"x\"".into()),
                ("server", "admin_listen", "\"y\"".into()),
                ("worker", "count", "0".into()),
            ],
        )
        .unwrap();
        assert_eq!(
            out,
            "[server]\nlisten = \"x\"   # public\nadmin_listen = \"y\"\n[worker]\ncount = 0                         # [0..=256]\nbatch_size = 32\n"
        );
        assert!(rewrite(toml, &[("worker", "listen", "1".into())]).is_err());
    }

    #[test]
    fn the_example_configuration_has_every_key_the_benchmark_changes() {
        let toml = include_str!("../../examples/wharf.toml");
        let edits = [
            ("server", "listen", "\"127.0.0.1:1\"".to_owned()),
            ("server", "admin_listen", "\"127.0.0.1:2\"".into()),
            ("adapters", "dir", "\"/a\"".into()),
            ("adapters", "cache_dir", "\"/c\"".into()),
            ("worker", "count", "2".into()),
        ];
        let out = rewrite(toml, &edits).unwrap();
        assert!(out.contains("listen = \"127.0.0.1:1\""));
        assert!(out.contains("dir = \"/a\""));
    }

    #[test]
    fn the_benchmark_serves_the_example_without_its_route() {
        let toml = include_str!("../../examples/wharf.toml");
        let routes = |t: &str| t.lines().filter(|l| l.trim() == "[[route]]").count();
        assert_eq!(routes(toml), 1, "the example has its route");
        let out = without_routes(toml);
        assert_eq!(routes(&out), 0);
        assert!(!out.contains("url = \"http://127.0.0.1:8090"));
        // Everything else is kept: the tables after it and the commented template.
        assert!(out.contains("# [[route]]") && out.contains("[worker]"));
        assert_eq!(toml.lines().count() - out.lines().count(), 5);
    }

    #[test]
    fn database_urls_swap_only_the_database_name() {
        let pg = Postgres {
            admin_url: "postgres://postgres@127.0.0.1:5432/postgres".into(),
        };
        assert_eq!(pg.url_for("x"), "postgres://postgres@127.0.0.1:5432/x");
        let bare = Postgres {
            admin_url: "postgres://postgres@127.0.0.1:5432".into(),
        };
        assert_eq!(bare.url_for("x"), "postgres://postgres@127.0.0.1:5432/x");
    }
}
