//! The adapters page follows hot reloads without a restart: a new version of a file shows its
//! version and hash, and a file that cannot load shows as refused with its reason.

use sha2::Digest;

use crate::support::app::TestApp;
use crate::support::files::{adapter_file, copy_tree, install_atomically};

use super::session::*;

const ENDPOINT: &str =
    "\n[[endpoint]]\nid = \"reload\"\nadapter = \"test-reload\"\nsecret = \"github\"\n";
/// The version string built into `test-reload` (as in tests/ingest/reload.rs).
const BUILT_VERSION: &[u8; 10] = b"reload-v00";

/// `test-reload` with its version string replaced by `version` (same length).
fn patched(version: &str) -> Vec<u8> {
    let mut bytes = std::fs::read(adapter_file("testing/test-reload.wasm")).unwrap();
    let at = bytes
        .windows(BUILT_VERSION.len())
        .position(|w| w == BUILT_VERSION)
        .expect("the built version string");
    bytes[at..at + BUILT_VERSION.len()].copy_from_slice(version.as_bytes());
    bytes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adapter_hot_reloaded_during_the_test_shows_its_new_version() {
    let written = console_app()
        .add_adapter_for("testing/test-reload.wasm", ENDPOINT)
        .write_config()
        .await;
    let adapters = written.adapters_dir();
    copy_tree(
        &adapter_file("testing/test-reload.fixtures"),
        &adapters.join("test-reload.fixtures"),
    );
    let app: TestApp = written.start().await;
    let browser = admin_browser(&app).await;
    let page = console_url(&app, "/adapters");
    let row = "table#adapters tr.adapter[data-file='test-reload.wasm']";

    reload_until(
        &browser,
        &page,
        &format!("{row} td.version"),
        "v00 loaded",
        |v| v.contains("reload-v00"),
    )
    .await;
    assert_eq!(browser.text(&format!("{row} td.name")).await, "test-reload");
    assert!(!browser.text(&format!("{row} td.wit")).await.is_empty());
    assert!(!browser.text(&format!("{row} td.fixtures")).await.is_empty());
    assert!(
        !browser
            .text(&format!("{row} td.loaded-at"))
            .await
            .is_empty()
    );
    let old_hash = browser.text(&format!("{row} td.hash")).await;
    browser
        .find("table#adapters tr.adapter[data-file='stripe.wasm']")
        .await;
    browser.screenshot("adapters-before-reload").await;

    // A new version dropped in: the page shows it, with the new file's hash.
    let new = patched("reload-v01");
    let new_hash = hex::encode(sha2::Sha256::digest(&new));
    install_atomically(&adapters.join("test-reload.wasm"), &new);
    reload_until(
        &browser,
        &page,
        &format!("{row} td.version"),
        "v01 shown",
        |v| v.contains("reload-v01"),
    )
    .await;
    let hash = browser.text(&format!("{row} td.hash")).await;
    assert_ne!(hash, old_hash);
    let shown = hash.trim().trim_end_matches(['…', '.']);
    assert!(
        shown.len() >= 8 && new_hash.contains(shown),
        "the hash shown ({hash}) is the new file's ({new_hash})"
    );

    // A file that is not a component at all: refused, with the reason.
    install_atomically(&adapters.join("not-a-component.wasm"), b"not wasm at all");
    let refused = "tr.refused[data-file='not-a-component.wasm'] td.reason";
    let reason = reload_until(&browser, &page, refused, "the refusal shown", |r| {
        !r.is_empty()
    })
    .await;
    assert!(!reason.trim().is_empty());
    browser.screenshot("adapters-after-reload").await;
    browser.close().await;
    app.shutdown().await;
}
