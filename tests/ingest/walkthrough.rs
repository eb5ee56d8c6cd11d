//! The README's first minutes, followed as a new user would: `wharf dev` (what `cargo xtask
//! dev` runs once it has built the adapters; the test runs the built binary itself), then
//! `examples/send.sh all` twice, then `wharf events list` with no flags and with `--config`
//! after the subcommand. `wharf dev` starts its own private Postgres cluster (initdb) in the
//! test's folder, exactly as it does for a user; only the listen addresses are moved to free
//! ports, through the documented environment overrides.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{database::fresh_database, files::*, process::*};

/// `wharf dev` as a child process; stopped (SIGTERM, so its cluster stops too) on drop.
struct Dev {
    child: Child,
}

impl Dev {
    fn stop(&mut self) -> std::process::ExitStatus {
        if let Ok(Some(status)) = self.child.try_wait() {
            return status;
        }
        Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "wharf dev stops within 30 s");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Dev {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let _ = self.stop();
    }
}

fn send_all(base: &str) -> String {
    let out = Command::new(repo_root().join("examples/send.sh"))
        .arg("all")
        .env("WHARF_URL", base)
        .output()
        .expect("send.sh runs");
    assert_ran(&out, "send.sh");
    String::from_utf8(out.stdout).unwrap()
}

fn text(out: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_readme_walkthrough_holds_line_by_line() {
    let dir = tempfile::tempdir().unwrap();
    // Run as root, `wharf dev` runs Postgres as the `postgres` user, who must reach the folder.
    let open = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755);
    std::fs::set_permissions(dir.path(), open).unwrap();
    copy_examples(dir.path());
    let log = dir.path().join("dev.log");

    // `cargo xtask dev`
    let mut dev = Dev {
        child: Command::new(env!("CARGO_BIN_EXE_wharf"))
            .arg("dev")
            .current_dir(dir.path())
            .env_remove("WHARF_DATABASE_URL")
            .env_remove("DATABASE_URL")
            .env_remove("WHARF_CONFIG")
            .env("WHARF_LISTEN", "127.0.0.1:0")
            .env("WHARF_ADMIN_LISTEN", "127.0.0.1:0")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
            .spawn()
            .expect("wharf dev"),
    };
    let mut stdout = BufReader::new(dev.child.stdout.take().unwrap());
    let mut next_line = || {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert!(
            !line.is_empty(),
            "wharf dev ended early: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        line
    };
    // The database's URL, printed at start and kept where the other commands look.
    let line = next_line();
    let url = line
        .strip_prefix("wharf dev: database ")
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("the database URL first: {line}"))
        .to_owned();
    assert!(url.starts_with("postgres://postgres@127.0.0.1:"), "{url}");
    let state = dir.path().join(".wharf-dev/database-url");
    assert_eq!(std::fs::read_to_string(&state).unwrap().trim(), url);
    let started: serde_json::Value = serde_json::from_str(&next_line()).expect("json line");
    let base = format!("http://{}", started["listening"].as_str().unwrap());

    // `examples/send.sh all`, then again: accepted, then duplicate, for each of the three.
    let first = send_all(&base);
    assert_eq!(
        first.matches(r#""status":"accepted""#).count(),
        3,
        "{first}"
    );
    let second = send_all(&base);
    assert_eq!(
        second.matches(r#""status":"duplicate""#).count(),
        3,
        "{second}"
    );

    // `wharf events list`, no flags: the dev cluster is found through its state file.
    let listed = run_wharf_in(dir.path(), &["events", "list"], &[]);
    let (out, err) = text(&listed);
    assert!(listed.status.success(), "{err}");
    assert!(
        err.contains(&format!("using the dev cluster at {url}")),
        "{err}"
    );
    for id in ["evt_demo_1", "demo-delivery-1", "msg_demo_1"] {
        assert_eq!(out.matches(id).count(), 1, "{id} listed once:\n{out}");
    }
    // `--config` after the subcommand (the examples name no database: the dev cluster's).
    let listed = run_wharf_in(
        dir.path(),
        &["events", "list", "--config", "examples/wharf.toml"],
        &[],
    );
    let (with_config, err) = text(&listed);
    assert!(listed.status.success(), "{err}");
    assert_eq!(
        with_config.lines().count(),
        out.lines().count(),
        "{with_config}"
    );

    // Ctrl-C stops the receiver and the cluster; its URL is no longer offered.
    assert!(
        dev.stop().success(),
        "{}",
        std::fs::read_to_string(&log).unwrap()
    );
    assert!(!state.exists(), "the state file goes with the cluster");
    let listed = run_wharf_in(dir.path(), &["events", "list"], &[]);
    let (_, err) = text(&listed);
    assert!(!listed.status.success());
    assert!(err.contains("no database url"), "{err}");
}

/// Writes `.wharf-dev/database-url` in `dir` as a running `wharf dev` would.
fn write_state(dir: &Path, url: &str) {
    std::fs::create_dir_all(dir.join(".wharf-dev")).unwrap();
    std::fs::write(dir.join(".wharf-dev/database-url"), format!("{url}\n")).unwrap();
}

#[tokio::test]
async fn commands_without_a_database_use_the_dev_state_file_and_say_so() {
    let url = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    write_state(dir.path(), &url);
    for args in [&["migrate"][..], &["events", "list"]] {
        let out = run_wharf_in(dir.path(), args, &[]);
        let (_, err) = text(&out);
        assert!(out.status.success(), "{args:?}: {err}");
        assert!(
            err.contains(&format!("using the dev cluster at {url}")),
            "{args:?}: {err}"
        );
    }
    // A database named explicitly wins over the state file, silently.
    write_state(dir.path(), "postgres://postgres@127.0.0.1:1/nowhere");
    let out = run_wharf_in(
        dir.path(),
        &["events", "list"],
        &[("WHARF_DATABASE_URL", &url)],
    );
    let (_, err) = text(&out);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("dev cluster"), "{err}");
}

#[test]
fn a_stale_dev_state_file_is_a_clear_error_at_once() {
    let dir = tempfile::tempdir().unwrap();
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://postgres@127.0.0.1:{port}/postgres");
    write_state(dir.path(), &url);
    for args in [&["events", "list"][..], &["migrate"]] {
        let started = Instant::now();
        let out = run_wharf_in(dir.path(), args, &[]);
        let (_, err) = text(&out);
        assert!(!out.status.success(), "{args:?}");
        assert!(
            err.contains(".wharf-dev/database-url") && err.contains("not running"),
            "{args:?}: {err}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{args:?} took {:?}",
            started.elapsed()
        );
    }
}
