//! `wharf dev`: a throwaway Postgres cluster in `.wharf-dev/pg` (unless a database URL is
//! set), then the example config served until Ctrl-C, then the cluster stopped.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::config::Config;

const DEV_DIR: &str = ".wharf-dev";

/// The config to serve, with a throwaway cluster started for it when it names no database;
/// the caller serves it, then stops the cluster.
pub fn prepare(config_path: &Path) -> anyhow::Result<(Config, Option<DevCluster>)> {
    let mut config = Config::load_unvalidated(config_path)?;
    let cluster = if config.database.url.is_none() {
        let cluster = DevCluster::start(Path::new(DEV_DIR))?;
        config.database.url = Some(cluster.url());
        Some(cluster)
    } else {
        None
    };
    if let Err(e) = config.validate() {
        if let Some(cluster) = cluster {
            cluster.stop();
        }
        return Err(e);
    }
    Ok((config, cluster))
}

pub struct DevCluster {
    data: PathBuf,
    port: u16,
    bin: PathBuf,
}

impl DevCluster {
    fn start(dir: &Path) -> anyhow::Result<Self> {
        let bin = find_pg_bin().ok_or_else(|| {
            anyhow::anyhow!("no initdb found: install Postgres (`apt-get install postgresql`) or set WHARF_DATABASE_URL")
        })?;
        std::fs::create_dir_all(dir)?;
        let dir = dir.canonicalize()?;
        let data = dir.join("pg");
        let port = free_port()?;
        // Postgres refuses to run as root; run it as the `postgres` user then.
        let as_root = running_as_root();
        if as_root {
            exec(
                Command::new("chown")
                    .args(["-R", "postgres:postgres"])
                    .arg(&dir),
            )?;
        }
        if !data.join("PG_VERSION").exists() {
            tracing::info!(dir = %data.display(), "creating a local Postgres cluster");
            exec(
                pg_command(as_root, &bin.join("initdb"))
                    .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "-D"])
                    .arg(&data),
            )?;
        }
        let options = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1",
            dir.display()
        );
        exec(
            pg_command(as_root, &bin.join("pg_ctl"))
                .arg("-D")
                .arg(&data)
                .args(["-o", &options, "-l"])
                .arg(dir.join("pg.log"))
                .args(["-w", "start"]),
        )?;
        tracing::info!(port, "local Postgres started");
        Ok(Self { data, port, bin })
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    pub fn stop(self) {
        let as_root = running_as_root();
        let _ = exec(
            pg_command(as_root, &self.bin.join("pg_ctl"))
                .arg("-D")
                .arg(&self.data)
                .args(["-m", "fast", "stop"]),
        );
    }
}

fn pg_command(as_root: bool, program: &Path) -> Command {
    if as_root {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

fn exec(command: &mut Command) -> anyhow::Result<()> {
    let status = command
        .status()
        .map_err(|e| anyhow::anyhow!("{command:?}: {e}"))?;
    anyhow::ensure!(status.success(), "{command:?} failed with {status}");
    Ok(())
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// `initdb` on PATH, else the newest `/usr/lib/postgresql/<version>/bin`.
fn find_pg_bin() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("PATH")
        .and_then(|path| std::env::split_paths(&path).find(|d| d.join("initdb").is_file()))
    {
        return Some(dir);
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| Some(e.ok()?.path().join("bin")))
        .filter(|bin| bin.join("initdb").is_file())
        .collect();
    versions.sort_by_key(|p| {
        p.parent()
            .and_then(|v| v.file_name()?.to_str()?.parse::<u32>().ok())
    });
    versions.pop()
}
