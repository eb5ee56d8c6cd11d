//! `wharf adapter new demo`, then the documented build and test commands, on a fresh copy of
//! the repository's adapters workspace; then the built adapter is dropped into a running
//! receiver's folder and serves signed traffic after the hot reload.

use std::path::Path;
use std::process::Command;

use hmac::Mac as _;

use crate::support::{app::*, files::*, signing::*};

/// The guest workspace and the WIT world, as a fresh checkout has them (no target, no dist).
fn fresh_checkout(to: &Path) {
    let root = repo_root();
    copy_tree(&root.join("wit"), &to.join("wit"));
    for entry in std::fs::read_dir(root.join("adapters")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        let dest = to.join("adapters").join(&name);
        if path.is_dir() {
            if name != "target" && name != "dist" {
                copy_tree(&path, &dest);
            }
        } else {
            std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
            std::fs::copy(&path, &dest).unwrap();
        }
    }
}

fn run(command: &mut Command) -> String {
    let out = command.output().expect("command runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{command:?} failed:\n{text}");
    text
}

#[tokio::test]
async fn a_new_adapter_builds_passes_its_fixtures_and_serves_after_a_hot_reload() {
    let checkout = tempfile::tempdir().unwrap();
    fresh_checkout(checkout.path());
    let wharf = env!("CARGO_BIN_EXE_wharf");

    // The commands from docs/writing-an-adapter.md, run from the checkout's root.
    let printed = run(Command::new(wharf)
        .args(["adapter", "new", "demo"])
        .current_dir(checkout.path()));
    assert!(printed.contains("wharf adapter test"), "{printed}");
    // CI checks formatting of the adapters workspace: a fresh skeleton must already pass.
    run(
        Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args([
                "fmt",
                "--manifest-path",
                "adapters/Cargo.toml",
                "-p",
                "demo",
                "--check",
            ])
            .current_dir(checkout.path()),
    );
    // Reuse the repository's guest build cache so dependencies are not compiled again.
    let target = repo_root().join("adapters/target");
    run(
        Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args([
                "build",
                "--release",
                "--target",
                "wasm32-wasip2",
                "--manifest-path",
                "adapters/Cargo.toml",
                "-p",
                "demo",
            ])
            .env("CARGO_TARGET_DIR", &target)
            .current_dir(checkout.path()),
    );
    let built = target.join("wasm32-wasip2/release/demo.wasm");
    let tested = run(Command::new(wharf)
        .args(["adapter", "test"])
        .arg(&built)
        .arg("adapters/demo/fixtures")
        .current_dir(checkout.path()));
    assert!(tested.contains("4 passed, 0 failed"), "{tested}");
    let checked = run(Command::new(wharf).args(["adapter", "check"]).arg(&built));
    assert!(checked.contains("\"name\": \"demo\""), "{checked}");

    // Deploy into a running receiver: fixtures first, then the component (what
    // `cargo xtask adapters` does), and the endpoint starts answering.
    let secrets = format!(
        "{}\n[[demo]]\nversion = \"v1\"\nvalue = \"change-me-demo-secret\"\n",
        default_secrets()
    );
    let app = TestApp::builder()
        .secrets_file(secrets)
        .add_endpoints("\n[[endpoint]]\nid = \"demo\"\nadapter = \"demo\"\nsecret = \"demo\"\n")
        .start()
        .await;
    let body = br#"{"id":"evt_demo_1","type":"order.created","data":{"id":"ord_1"}}"#.to_vec();
    let ts = now().to_string();
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(b"change-me-demo-secret").unwrap();
    mac.update(format!("{ts}.").as_bytes());
    mac.update(&body);
    let signature = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
    let headers = [
        ("x-webhook-timestamp", ts.as_str()),
        ("x-webhook-signature", signature.as_str()),
        ("content-type", "application/json"),
    ];
    let answer = app.post("demo", &headers, body.clone()).await;
    answer.assert_is(503, "adapter_unavailable", "");

    let adapters = app.config.adapters_dir();
    copy_tree(
        &checkout.path().join("adapters/demo/fixtures"),
        &adapters.join("demo.fixtures"),
    );
    install_atomically(&adapters.join("demo.wasm"), &std::fs::read(&built).unwrap());
    app.post_until_served("demo", &headers, &body, std::time::Duration::from_secs(30))
        .await;
    let event_type: String =
        sqlx::query_scalar("SELECT event_type FROM webhook_inbox WHERE provider = 'demo'")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(event_type, "order.created");
}
