//! The config file reloads live like the secrets file: `[[endpoint]]` entries added, removed
//! or changed apply without a restart (ingest and this host's workers alike); an invalid file
//! or a change to a key that needs a restart is refused with its reason in the log while the
//! configuration that was serving keeps serving.

use std::path::Path;

use crate::support::{app::*, http::*, process::*, signing::*, wait::*};

/// Rewrites the config the way editors and config tools save: a temporary file renamed over it.
pub fn rewrite(config: &Path, change: impl FnOnce(String) -> String) {
    let text = change(std::fs::read_to_string(config).unwrap());
    let tmp = config.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, config).unwrap();
}

const EXTRA_ENDPOINT: &str =
    "\n[[endpoint]]\nid = \"stripe-eu\"\nadapter = \"stripe\"\nsecret = \"stripe\"\n";

/// POSTs a Stripe event signed with the current secret to `endpoint`.
async fn send(client: &reqwest::Client, base: &str, endpoint: &str, id: &str) -> Answer {
    let (headers, body) = signed_stripe_event(id);
    post(client, base, endpoint, &refs(&headers), body).await
}

/// Sends fresh events (`PREFIX_1`, `PREFIX_2`, ...) to `endpoint` until one is accepted.
async fn served_eventually(app: &TestApp, endpoint: &str, prefix: &str, what: &str) {
    let mut n = 0;
    eventually(what, || {
        n += 1;
        let id = format!("{prefix}_{n}");
        let (client, base) = (app.client.clone(), app.base.clone());
        async move { send(&client, &base, endpoint, &id).await.status == 200 }
    })
    .await;
}

#[tokio::test]
async fn an_endpoint_added_to_the_file_serves_without_a_restart_and_one_removed_is_gone() {
    let app = TestApp::builder().start().await;
    send(&app.client, &app.base, "stripe-eu", "evt_before")
        .await
        .assert_is(404, "unknown_endpoint", "not configured yet");

    rewrite(&app.config.config_path, |t| t + EXTRA_ENDPOINT);
    served_eventually(&app, "stripe-eu", "evt_added", "the added endpoint serves").await;
    // This host's workers know it too: its events are processed, not failed as unknown.
    wait_until_count(
        &app.db,
        "SELECT count(*) FROM webhook_inbox WHERE endpoint_id = 'stripe-eu' AND status = 'PROCESSED'",
        1,
    )
    .await;
    send(&app.client, &app.base, "stripe", "evt_old_endpoint")
        .await
        .assert_status(200);

    rewrite(&app.config.config_path, |t| t.replace(EXTRA_ENDPOINT, ""));
    eventually("the removed endpoint is gone", || {
        let (client, base) = (app.client.clone(), app.base.clone());
        async move { send(&client, &base, "stripe-eu", "evt_gone").await.status == 404 }
    })
    .await;
    send(&app.client, &app.base, "stripe", "evt_still_served")
        .await
        .assert_status(200);
}

/// Waits until the log holds `needle`, and returns the log.
async fn log_with(log: &Path, needle: &str) -> String {
    let mut text = String::new();
    eventually(&format!("the log says {needle:?}"), || {
        text = std::fs::read_to_string(log).unwrap_or_default();
        let found = text.contains(needle);
        async move { found }
    })
    .await;
    text
}

#[tokio::test]
async fn an_invalid_file_and_a_restart_only_change_are_refused_and_the_old_config_serves() {
    let written = TestApp::builder().write_config().await;
    let config = written.config_path.clone();
    let log = written.dir.path().join("wharf.log");
    let server = ServeProcess::start(&config, Some(&log)).await;
    let client = reqwest::Client::new();
    let original = std::fs::read_to_string(&config).unwrap();

    // Not TOML at all (and a new endpoint with it, which must not apply either).
    rewrite(&config, |t| format!("{t}{EXTRA_ENDPOINT}\n[[endpoint\n"));
    let text = log_with(&log, "config change refused").await;
    assert!(text.contains("invalid TOML"), "{text}");
    send(&client, &server.base, "stripe", "evt_after_invalid")
        .await
        .assert_status(200);
    send(&client, &server.base, "stripe-eu", "evt_not_applied")
        .await
        .assert_is(404, "unknown_endpoint", "an invalid file applies nothing");

    // Valid TOML that fails validation: an endpoint naming a secret set the file lacks.
    rewrite(&config, |_| {
        format!(
            "{original}\n[[endpoint]]\nid = \"orphan\"\nadapter = \"stripe\"\nsecret = \"no-such-set\"\n"
        )
    });
    log_with(&log, "no-such-set").await;

    // A key that applies only at a restart, beside a new endpoint: all of it is refused.
    rewrite(&config, |_| {
        original.replacen("listen = \"127.0.0.1:0\"", "listen = \"127.0.0.1:1\"", 1)
            + EXTRA_ENDPOINT
    });
    let text = log_with(&log, "[server] listen changed").await;
    assert!(text.contains("applies only at a restart"), "{text}");
    send(&client, &server.base, "stripe", "evt_after_listen")
        .await
        .assert_status(200);
    send(
        &client,
        &server.base,
        "stripe-eu",
        "evt_refused_with_listen",
    )
    .await
    .assert_is(404, "unknown_endpoint", "refused whole");

    // Back to the file that serves plus the endpoint: now it applies.
    rewrite(&config, |_| original.clone() + EXTRA_ENDPOINT);
    let text = log_with(&log, "endpoint added").await;
    assert!(text.contains("stripe-eu"), "{text}");
    send(&client, &server.base, "stripe-eu", "evt_applied")
        .await
        .assert_status(200);
    let metrics = get_text(
        &client,
        &format!("{}/metrics", server.admin.as_ref().unwrap()),
    )
    .await;
    assert!(
        metric(&metrics, "wharf_config_reloads_total{outcome=\"refused\"}") >= 3.0,
        "{metrics}"
    );
    assert_eq!(
        metric(&metrics, "wharf_config_reloads_total{outcome=\"applied\"}"),
        1.0
    );
    // Never a value from the file in the log: the database URL holds credentials.
    let db = written.database_url.clone();
    assert!(!text.contains(&db), "the database URL was logged");
    server.stop().await;
}

#[tokio::test]
async fn an_endpoint_refused_for_a_missing_secret_set_applies_once_the_set_arrives() {
    let app = TestApp::builder().start().await;
    // The endpoint first, naming a set the secrets file does not have yet: refused.
    rewrite(&app.config.config_path, |t| {
        t + "\n[[endpoint]]\nid = \"stripe-eu\"\nadapter = \"stripe\"\nsecret = \"stripe-eu\"\n"
    });
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    send(&app.client, &app.base, "stripe-eu", "evt_refused")
        .await
        .assert_is(404, "unknown_endpoint", "refused while its set is missing");
    // Then the set: the refused file is judged again and applies.
    rewrite(&app.config.secrets_path, |t| {
        format!("{t}\n[[stripe-eu]]\nversion = \"eu-1\"\nvalue = \"{STRIPE_SECRET}\"\n")
    });
    served_eventually(
        &app,
        "stripe-eu",
        "evt_eu",
        "the endpoint applies once its secret set exists",
    )
    .await;
}

#[tokio::test]
async fn a_separate_worker_reloads_endpoints_too_and_processes_the_new_ones_events() {
    // Ingest here, processing in a `wharf worker` process on the same config file.
    let app = TestApp::builder().workers(0).start().await;
    let log = app.config.dir.path().join("worker.log");
    let worker = ServeProcess::start_with(
        &["worker", "--count", "1"],
        &app.config.config_path,
        Some(&log),
        &[],
    )
    .await;
    rewrite(&app.config.config_path, |t| t + EXTRA_ENDPOINT);
    log_with(&log, "endpoint added").await;
    served_eventually(
        &app,
        "stripe-eu",
        "evt_worker",
        "the receiver serves the added endpoint",
    )
    .await;
    wait_until_count(
        &app.db,
        "SELECT count(*) FROM webhook_inbox WHERE endpoint_id = 'stripe-eu' AND status = 'PROCESSED'",
        1,
    )
    .await;
    let failed: i64 =
        sqlx::query_scalar("SELECT count(*) FROM webhook_inbox WHERE status = 'FAILED'")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(failed, 0);
    worker.stop().await;
}
