//! The `wharf` binary run as a child process, and what it logs.

use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Runs `wharf <args...>` to its end, with no database in its environment (the fixture
/// runner and the config checks must not need one).
pub fn run_wharf(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wharf"))
        .args(args)
        .env_remove("WHARF_DATABASE_URL")
        .env_remove("DATABASE_URL")
        .env_remove("WHARF_CONFIG")
        .env("RUST_LOG", "warn")
        .output()
        .expect("wharf runs")
}

/// Runs `wharf events --config CONFIG <args...>` (the database from the config alone), asserts
/// it succeeded, and returns its stdout.
pub fn wharf_events(args: &[&str], config: &Path) -> String {
    let mut all = vec!["events", "--config", config.to_str().expect("UTF-8 path")];
    all.extend_from_slice(args);
    let output = run_wharf(&all);
    assert!(
        output.status.success(),
        "wharf events {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Runs `wharf <args...>` to its end in `dir`, with `env` and no database in its environment
/// unless `env` sets one.
pub fn run_wharf_in(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wharf"))
        .args(args)
        .current_dir(dir)
        .env_remove("WHARF_DATABASE_URL")
        .env_remove("DATABASE_URL")
        .env_remove("WHARF_CONFIG")
        .env("RUST_LOG", "warn")
        .envs(env.iter().copied())
        .output()
        .expect("wharf runs")
}

/// Asserts that a command ran to success, showing `what` and its stderr otherwise.
#[track_caller]
pub fn assert_ran(output: &Output, what: &str) {
    assert!(
        output.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `wharf serve` on `config`, which must refuse to start (no database in its environment):
/// its stderr.
pub async fn refused_to_serve(config: &Path) -> String {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_wharf"))
        .arg("serve")
        .arg("--config")
        .arg(config)
        .env_remove("WHARF_DATABASE_URL")
        .env_remove("DATABASE_URL")
        .output()
        .await
        .unwrap();
    assert!(!output.status.success(), "wharf serve started");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A `wharf serve` child process on port 0; killed on drop.
pub struct ServeProcess {
    pub child: tokio::process::Child,
    pub base: String,
    /// The admin listener's base URL, when the config has one.
    pub admin: Option<String>,
}

impl ServeProcess {
    /// Starts `wharf serve`; its log (stderr) goes to `log` at `RUST_LOG=info`, else nowhere.
    pub async fn start(config: &Path, log: Option<&Path>) -> Self {
        Self::start_with(&["serve"], config, log, &[]).await
    }

    /// Starts `wharf serve` with the file-watch poll pushed out of reach (10 min): only an
    /// event from the watcher can make it notice a change within a test's waits.
    pub async fn start_without_poll(config: &Path) -> Self {
        Self::start_with(
            &["serve"],
            config,
            None,
            &[("WHARF_WATCH_POLL_MS", "600000")],
        )
        .await
    }

    /// Starts `wharf <command...> --config CONFIG` with extra environment variables and waits
    /// for its first stdout line (`serve` prints its addresses, `worker` its worker count).
    pub async fn start_with(
        command: &[&str],
        config: &Path,
        log: Option<&Path>,
        env: &[(&str, &str)],
    ) -> Self {
        Self::start_in(Path::new("."), command, config, log, env).await
    }

    /// Starts `wharf <command...> --config CONFIG` in the folder `dir` (`wharf dev` keeps its
    /// state in `.wharf-dev/` there).
    pub async fn start_in(
        dir: &Path,
        command: &[&str],
        config: &Path,
        log: Option<&Path>,
        env: &[(&str, &str)],
    ) -> Self {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_wharf"));
        child.args(command).current_dir(dir);
        Self::spawn(child, config, log, env, 60).await
    }

    /// Starts another copy of the binary (an installed one) as `wharf serve`, from `/` as
    /// systemd starts it, so nothing may depend on the test's working folder. Its cache of
    /// compiled adapters starts empty, so it may take longer to start.
    pub async fn start_installed(
        binary: &Path,
        config: &Path,
        log: Option<&Path>,
        env: &[(&str, &str)],
    ) -> Self {
        let mut child = tokio::process::Command::new(binary);
        child.arg("serve").current_dir("/");
        Self::spawn(child, config, log, env, 180).await
    }

    async fn spawn(
        mut command: tokio::process::Command,
        config: &Path,
        log: Option<&Path>,
        env: &[(&str, &str)],
        start_within_secs: u64,
    ) -> Self {
        use tokio::io::AsyncBufReadExt;
        let stderr = match log {
            Some(path) => Stdio::from(std::fs::File::create(path).expect("log file")),
            None => Stdio::null(),
        };
        let mut child = command
            .arg("--config")
            .arg(config)
            .env_remove("WHARF_DATABASE_URL")
            .env_remove("DATABASE_URL")
            .env_remove("WHARF_FAILPOINTS")
            .env("RUST_LOG", if log.is_some() { "info" } else { "warn" })
            .env("WHARF_LOG_FORMAT", "json")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .expect("wharf binary");
        let stdout = child.stdout.take().unwrap();
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let within = std::time::Duration::from_secs(start_within_secs);
        let line = tokio::time::timeout(within, lines.next_line())
            .await
            .expect("wharf starts in time")
            .unwrap()
            .expect("a first line on stdout");
        let started: serde_json::Value = serde_json::from_str(&line).expect("json line");
        let base = started["listening"]
            .as_str()
            .map(|a| format!("http://{a}"))
            .unwrap_or_default();
        let admin = started["admin"].as_str().map(|a| format!("http://{a}"));
        Self { child, base, admin }
    }

    /// Waits for the process to end on its own (a failpoint) and returns how it ended.
    pub async fn wait_exit(mut self, within: std::time::Duration) -> std::process::ExitStatus {
        tokio::time::timeout(within, self.child.wait())
            .await
            .expect("the process ends in time")
            .unwrap()
    }

    /// SIGTERM, then waits for the graceful exit.
    pub async fn stop(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().expect("running") as i32;
        std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(10), self.child.wait())
            .await
            .expect("exits within 10 s of SIGTERM")
            .unwrap()
    }
}

/// The JSON request lines (message `webhook`) of a `wharf serve` log written with
/// `WHARF_LOG_FORMAT=json`.
pub fn request_lines(log: &str) -> Vec<serde_json::Value> {
    log.lines()
        .filter(|l| l.contains("\"webhook\""))
        .map(|l| serde_json::from_str(l).expect("json log line"))
        .collect()
}
