//! `wharf dev`: a throwaway Postgres cluster in `.wharf-dev/pg` (unless a database URL is
//! set), then the example config served until Ctrl-C, then the cluster stopped. While it runs,
//! its URL is in `.wharf-dev/database-url`, where every other command run in the same folder
//! finds it when nothing else names a database.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::error::CliError;
use crate::config::Config;

const DEV_DIR: &str = ".wharf-dev";
/// The running dev cluster's URL, relative to the folder `wharf dev` runs in. A file rather
/// than a fixed port: any free port works, and `psql "$(cat .wharf-dev/database-url)"` too.
pub const URL_FILE: &str = ".wharf-dev/database-url";
/// What `wharf dev` serves when no config is named.
pub const DEFAULT_CONFIG: &str = "examples/wharf.toml";
/// How long a state file's cluster may take to accept a connection before it counts as gone.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The config to serve, with a throwaway cluster started for it when it names no database;
/// the caller serves it, then stops the cluster.
pub fn prepare(config_path: &Path) -> anyhow::Result<(Config, Option<DevCluster>)> {
    let mut config = Config::load_unvalidated(config_path)?;
    let cluster = if config.database.url.is_none() {
        let cluster = DevCluster::start(Path::new(DEV_DIR))?;
        println!(
            "wharf dev: database {} (saved in {URL_FILE}; wharf commands run in this folder use it)",
            cluster.url()
        );
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

/// Fills in the running dev cluster's URL when the config names no database.
pub fn fill_database(config: &mut Config) -> anyhow::Result<()> {
    if config.database.url.is_none() {
        config.database.url = running_cluster_url()?;
    }
    Ok(())
}

/// The URL of the dev cluster that `wharf dev` runs from the current folder, if its state file
/// is here (said on stderr, since nothing the user typed named it). A state file whose cluster
/// does not answer (stopped without removing the file, or the machine restarted) is an error
/// naming the file, not a hang on connect.
pub fn running_cluster_url() -> anyhow::Result<Option<String>> {
    let text = match std::fs::read_to_string(URL_FILE) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => anyhow::bail!("{URL_FILE}: {e}"),
    };
    let url = text.trim().to_owned();
    let options: sqlx::postgres::PgConnectOptions =
        url.parse().map_err(|cause| CliError::NotADatabaseUrl {
            file: URL_FILE,
            cause,
        })?;
    let answers =
        std::net::ToSocketAddrs::to_socket_addrs(&(options.get_host(), options.get_port()))
            .ok()
            .and_then(|mut addrs| addrs.next())
            .is_some_and(|addr| std::net::TcpStream::connect_timeout(&addr, PROBE_TIMEOUT).is_ok());
    anyhow::ensure!(
        answers,
        "{URL_FILE} names the dev cluster at {url}, but nothing answers there: it is not \
         running. Start it with `cargo xtask dev` (or `wharf dev`) in this folder, or name a \
         database with WHARF_DATABASE_URL"
    );
    eprintln!("wharf: using the dev cluster at {url} (from {URL_FILE})");
    Ok(Some(url))
}

pub struct DevCluster {
    data: PathBuf,
    port: u16,
    bin: PathBuf,
    url_file: PathBuf,
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
        let cluster = Self {
            data,
            port,
            bin,
            url_file: dir.join("database-url"),
        };
        if let Err(e) = std::fs::write(&cluster.url_file, format!("{}\n", cluster.url())) {
            cluster.stop();
            anyhow::bail!("{URL_FILE}: {e}");
        }
        Ok(cluster)
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Stops the cluster; its URL goes first, so no command picks it up meanwhile.
    pub fn stop(self) {
        let _ = std::fs::remove_file(&self.url_file);
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
    // initdb's and pg_ctl's chatter goes with the logs: stdout is the URL and the addresses.
    let status = command
        .stdout(std::io::stderr())
        .status()
        .map_err(|cause| CliError::Spawn {
            command: format!("{command:?}"),
            cause,
        })?;
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
