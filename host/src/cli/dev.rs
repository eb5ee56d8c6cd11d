//! `wharf dev`: a throwaway Postgres cluster in `.wharf-dev/pg` (unless a database URL is
//! set), then the example config served until Ctrl-C, then the cluster stopped. While it runs,
//! its URL is in `.wharf-dev/database-url` and the config's path in `.wharf-dev/config-path`,
//! where every other command run in the same folder finds them when nothing else names a
//! database or a config.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::error::CliError;
use crate::config::Config;

const DEV_DIR: &str = ".wharf-dev";
/// The running dev cluster's URL, relative to the folder `wharf dev` runs in. A file rather
/// than a fixed port: any free port works, and `psql "$(cat .wharf-dev/database-url)"` too.
pub const URL_FILE: &str = ".wharf-dev/database-url";
/// The path of the config the running `wharf dev` serves, for the commands run beside it.
pub const CONFIG_FILE: &str = ".wharf-dev/config-path";
/// What `wharf dev` serves when no config is named.
pub const DEFAULT_CONFIG: &str = "examples/wharf.toml";
/// How long a state file's cluster may take to accept a connection before it counts as gone.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// What `wharf dev` leaves for the commands run beside it while it serves: the cluster, and
/// the file naming its config. [`DevSession::stop`] takes both away.
pub struct DevSession {
    cluster: Option<DevCluster>,
    config_file: Option<PathBuf>,
}

impl DevSession {
    pub fn stop(self) {
        if let Some(file) = self.config_file {
            let _ = std::fs::remove_file(file);
        }
        if let Some(cluster) = self.cluster {
            cluster.stop();
        }
    }
}

/// The config to serve, with a throwaway cluster started for it when it names no database,
/// and its path saved for the commands run beside it; the caller serves it, then stops the
/// session.
pub fn prepare(config_path: &Path) -> anyhow::Result<(Config, DevSession)> {
    let (config, cluster) = prepare_cluster(config_path)?;
    let mut session = DevSession {
        cluster,
        config_file: None,
    };
    let saved = config_path.canonicalize().and_then(|path| {
        std::fs::create_dir_all(DEV_DIR)?;
        // Absolute, so that `wharf dev` stops removing this file whatever folder it is in.
        let file = Path::new(DEV_DIR).canonicalize()?.join("config-path");
        std::fs::write(&file, format!("{}\n", path.display()))?;
        Ok(file)
    });
    match saved {
        Ok(file) => session.config_file = Some(file),
        Err(e) => {
            session.stop();
            anyhow::bail!("{CONFIG_FILE}: {e}");
        }
    }
    Ok((config, session))
}

/// The config `wharf dev` serves from this folder, if its file names one that exists (said on
/// stderr, as the cluster is: nothing the user typed named it).
pub fn running_config() -> Option<PathBuf> {
    let text = std::fs::read_to_string(CONFIG_FILE).ok()?;
    let path = PathBuf::from(text.trim_end_matches(['\n', '\r']));
    if !path.is_file() {
        return None;
    }
    eprintln!(
        "wharf: using {}, the config `wharf dev` serves here (from {CONFIG_FILE})",
        path.display()
    );
    Some(path)
}

/// Whether `path` is the config the `wharf dev` running from this folder serves.
pub fn is_running_config(path: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(CONFIG_FILE) else {
        return false;
    };
    let served = Path::new(text.trim_end_matches(['\n', '\r']));
    match (path.canonicalize(), served.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

fn prepare_cluster(config_path: &Path) -> anyhow::Result<(Config, Option<DevCluster>)> {
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
    // initdb's and pg_ctl's output is shown only when they fail: on success it is chatter, and
    // initdb's "you can now start the database server" reads like an instruction to the user.
    let out = command.output().map_err(|cause| CliError::Spawn {
        command: format!("{command:?}"),
        cause,
    })?;
    anyhow::ensure!(
        out.status.success(),
        "{command:?} failed with {}:\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
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
