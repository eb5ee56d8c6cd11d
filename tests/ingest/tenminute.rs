//! The ten-minute paths of `docs/writing-an-adapter.md`, followed as written: each fenced
//! ```` ```sh tenminute-LANG ```` block runs, whole and unchanged, with `sh -eu` in an empty
//! folder outside the repository, `wharf` on `PATH` being the binary under test, against a
//! receiver this test starts (`ADAPTERS` its adapters folder, `WHARF_URL` its address, and the
//! endpoint the docs show: `NAME` from the block's `wharf adapter new NAME`, its secret the
//! skeleton's). The block's last command is its signed request: it must succeed, answer
//! `accepted`, and the event must be in the inbox.
//!
//! One test per language; a language whose block the docs lack fails its test.

use std::process::Command;

use crate::projects::{SKELETON_SECRET, build_env};
use crate::support::{app::*, files::*};

/// The commands of the docs' ```` ```sh tenminute-LANG ```` block, if there is one.
fn block(lang: &str) -> Option<String> {
    let docs = std::fs::read_to_string(repo_root().join("docs/writing-an-adapter.md")).unwrap();
    let fence = format!("```sh tenminute-{lang}");
    let mut lines = docs.lines().skip_while(|l| l.trim() != fence);
    lines.next()?;
    let body: Vec<&str> = lines.take_while(|l| l.trim() != "```").collect();
    Some(body.join("\n") + "\n")
}

/// The adapter name the block creates: `wharf adapter new NAME ...`.
fn adapter_name(block: &str) -> String {
    block
        .split_whitespace()
        .collect::<Vec<_>>()
        .windows(4)
        .find(|w| w[..3] == ["wharf", "adapter", "new"])
        .map(|w| w[3].to_owned())
        .expect("the block runs `wharf adapter new NAME`")
}

async fn follow(lang: &str) {
    let block = block(lang)
        .unwrap_or_else(|| panic!("docs/writing-an-adapter.md has no `sh tenminute-{lang}` block"));
    let name = adapter_name(&block);
    let app = TestApp::builder()
        .add_secrets(format!(
            "[[{name}]]\nversion = \"v1\"\nvalue = \"{SKELETON_SECRET}\"\n"
        ))
        .endpoint(&name, &name, &name, "")
        .start()
        .await;

    // An empty folder outside the repository, and `wharf` on PATH.
    let outside = tempfile::tempdir().unwrap();
    let bin = outside.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_wharf"), bin.join("wharf")).unwrap();
    let work = outside.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let script = outside.path().join("tenminute.sh");
    std::fs::write(&script, &block).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );

    let output = tokio::process::Command::from({
        let mut c = Command::new("sh");
        c.arg("-eu")
            .arg(&script)
            .current_dir(&work)
            .env("PATH", path)
            .env("ADAPTERS", app.config.adapters_dir())
            .env("WHARF_URL", &app.base)
            .env("RUST_LOG", "warn")
            .env_remove("WHARF_DATABASE_URL")
            .env_remove("DATABASE_URL")
            .env_remove("WHARF_CONFIG")
            .envs(build_env());
        c
    })
    .output()
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report = format!(
        "the tenminute-{lang} block:\n{block}\nstdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{report}");
    let last = stdout.lines().rev().find(|l| !l.trim().is_empty());
    assert!(
        last.is_some_and(|l| l.contains("\"accepted\"")),
        "the last answer is not accepted: {report}"
    );
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM webhook_inbox WHERE provider = $1")
        .bind(&name)
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(stored, 1, "{report}");
}

#[tokio::test]
async fn the_rust_ten_minute_path_ends_in_an_accepted_request() {
    follow("rust").await;
}

#[tokio::test]
async fn the_javascript_ten_minute_path_ends_in_an_accepted_request() {
    follow("js").await;
}

#[tokio::test]
async fn the_python_ten_minute_path_ends_in_an_accepted_request() {
    follow("python").await;
}
