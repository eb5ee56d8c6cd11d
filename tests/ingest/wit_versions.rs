//! WIT 0.1 and 0.2 served by one host: a real 0.1 component (`tests/fixtures/wit-0.1/`, built
//! before the SDK moved to 0.2) serves beside 0.2 components, and one adapter file is
//! hot-reloaded from 0.2 to 0.1 and back with signed requests accepted by each version.

use std::time::{Duration, Instant};

use sha2::Digest;

use crate::support::{app::*, files::*, http::*, signing::*};

fn wit_0_1_stripe() -> Vec<u8> {
    std::fs::read(repo_root().join("tests/fixtures/wit-0.1/stripe.wasm")).expect("0.1 fixture")
}

/// `/admin/adapters`' row for `file`.
async fn status_of(app: &TestApp, file: &str) -> Option<serde_json::Value> {
    let files: Vec<serde_json::Value> =
        serde_json::from_value(app.admin_get("/admin/adapters").await.json).ok()?;
    files.into_iter().find(|f| f["file"] == file)
}

async fn wait_for_world(app: &TestApp, file: &str, sha256: &str, world: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(s) = status_of(app, file).await
            && s["sha256"] == sha256
            && s["state"] == "serving"
        {
            assert_eq!(s["world"], world, "{s}");
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{file} never served {sha256}: {:?}",
            status_of(app, file).await
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

async fn accepts_stripe(app: &TestApp, id: &str) {
    let answer = app.post_stripe(id).await;
    answer.assert_accepted("");
    // Verification still means what it did: a changed body is refused.
    let (headers, body) = signed_stripe_event(&format!("{id}-tampered"));
    let answer = app
        .post(
            "stripe",
            &refs(&headers),
            body.replace("payment_intent", "payment_intenT"),
        )
        .await;
    assert_eq!(answer.status, 401, "{answer:?}");
}

#[tokio::test]
async fn a_0_1_component_serves_beside_0_2_components() {
    let written = TestApp::builder()
        .with_admin()
        .add_adapter("slack.wasm")
        .write_config()
        .await;
    // The 0.2 Stripe build is replaced by the checked-in 0.1 one before the host starts.
    std::fs::write(
        written.dir.path().join("adapters/stripe.wasm"),
        wit_0_1_stripe(),
    )
    .unwrap();
    let app = written.start().await;
    let stripe = status_of(&app, "stripe.wasm").await.unwrap();
    assert_eq!(stripe["world"], "wharf:adapter@0.1.0", "{stripe}");
    let github = status_of(&app, "github.wasm").await.unwrap();
    assert_eq!(github["world"], "wharf:adapter@0.2.0", "{github}");

    accepts_stripe(&app, "evt_wit01_side_by_side").await;
    let body = br#"{"action":"opened"}"#;
    let headers = signed_github_headers(body, "wit-versions-1");
    let answer = app.post("github", &refs(&headers), body.to_vec()).await;
    assert_eq!(answer.json["status"], "accepted", "{answer:?}");
    assert_eq!(app.count("webhook_inbox").await, 2);
    app.shutdown().await;
}

#[tokio::test]
async fn one_file_hot_reloads_from_0_2_to_0_1_and_back() {
    let app = TestApp::builder().with_admin().start().await;
    let path = app.config.dir.path().join("adapters/stripe.wasm");
    let v0_2 = std::fs::read(&path).unwrap();
    let v0_1 = wit_0_1_stripe();
    let sha = |b: &[u8]| hex::encode(sha2::Sha256::digest(b));

    wait_for_world(&app, "stripe.wasm", &sha(&v0_2), "wharf:adapter@0.2.0").await;
    accepts_stripe(&app, "evt_wit_reload_a").await;

    install_atomically(&path, &v0_1);
    wait_for_world(&app, "stripe.wasm", &sha(&v0_1), "wharf:adapter@0.1.0").await;
    accepts_stripe(&app, "evt_wit_reload_b").await;

    install_atomically(&path, &v0_2);
    wait_for_world(&app, "stripe.wasm", &sha(&v0_2), "wharf:adapter@0.2.0").await;
    accepts_stripe(&app, "evt_wit_reload_c").await;

    assert_eq!(app.count("webhook_inbox").await, 3);
    app.shutdown().await;
}
