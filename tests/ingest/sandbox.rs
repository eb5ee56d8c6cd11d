//! Misbehaving adapters are contained: 503 `adapter_unavailable`, the host keeps serving.

use std::time::{Duration, Instant};

use crate::support::{app::*, http::*, signing::*};

const ENDPOINTS: &str = r#"
[[endpoint]]
id = "evil"
adapter = "test-misbehave"
secret = "github"

[[endpoint]]
id = "missing"
adapter = "not-installed"
secret = "github"
"#;

/// Each way `test-misbehave` can fail: loop forever, allocate without bound, panic, recurse
/// without bound, return a result over the bound, try to return 100 MiB.
const MODES: [&str; 6] = ["spin", "hog", "trap", "recurse", "bloat", "bloat100"];

async fn misbehave(app: &TestApp, mode: &str) -> Answer {
    let endpoint = if mode == "missing" { "missing" } else { "evil" };
    app.post(
        endpoint,
        &[("x-misbehave", mode), ("content-type", "application/json")],
        "{}",
    )
    .await
}

#[tokio::test]
async fn looping_allocating_trapping_recursing_and_bloated_adapters_are_503_and_the_host_stays_up()
{
    let app = TestApp::builder()
        .add_adapter_for("testing/test-misbehave.wasm", ENDPOINTS)
        .start()
        .await;
    for (round, mode) in MODES.iter().chain(&["missing"]).chain(&MODES).enumerate() {
        let started = Instant::now();
        let answer = misbehave(&app, mode).await;
        answer.assert_is(503, "adapter_unavailable", mode);
        assert!(answer.headers.contains_key("retry-after"));
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{mode} took {:?}",
            started.elapsed()
        );

        // The next valid request is served.
        let body = format!("{{\"round\":{round}}}").into_bytes();
        let answer = app
            .post(
                "github",
                &refs(&signed_github_headers(&body, &format!("after-{round}"))),
                body,
            )
            .await;
        answer.assert_accepted(format!("after {mode}"));
    }
    // Many at once beside valid traffic: the concurrency permit keeps the pool from being
    // exhausted, and guest CPU stays off the threads that acknowledge and commit.
    let mut tasks = Vec::new();
    for i in 0..60 {
        let (client, base) = (app.client.clone(), app.base.clone());
        let mode = ["spin", "hog", "trap", "recurse", "bloat", "valid"][i % 6];
        tasks.push(tokio::spawn(async move {
            let body = format!("{{\"n\":{i}}}").into_bytes();
            let answer = if mode == "valid" {
                post(
                    &client,
                    &base,
                    "github",
                    &refs(&signed_github_headers(&body, &format!("burst-{i}"))),
                    body,
                )
                .await
            } else {
                post(&client, &base, "evil", &[("x-misbehave", mode)], body).await
            };
            (mode, answer)
        }));
    }
    for task in tasks {
        let (mode, answer) = task.await.unwrap();
        let expected = if mode == "valid" { 200 } else { 503 };
        assert_eq!(answer.status, expected, "{mode}: {answer:?}");
    }
    assert_eq!(app.count("webhook_inbox").await, 13 + 10);
}

/// Each request gets an instance of its own: its `prepare` and `parse` share it, and nothing a
/// guest keeps in memory reaches the next request (`test-misbehave` counts the calls its
/// instance served into the event id).
#[tokio::test]
async fn an_instance_serves_one_request_only() {
    let app = TestApp::builder()
        .add_adapter_for("testing/test-misbehave.wasm", ENDPOINTS)
        .start()
        .await;
    let ts = now();
    for i in 0..3 {
        let body = format!("{{\"n\":{i}}}").into_bytes();
        let signed = [format!("{ts}.").as_bytes(), &body].concat();
        let sig = hex::encode(hmac_sha256(GITHUB_SECRET.as_bytes(), &signed));
        let answer = app
            .post(
                "evil",
                &[
                    ("x-misbehave", "ok"),
                    ("x-ts", &ts.to_string()),
                    ("x-sig", &sig),
                    ("x-event-id", &format!("evt_{i}")),
                    ("x-count-calls", "1"),
                ],
                body,
            )
            .await;
        answer.assert_accepted("");
    }
    let ids: Vec<String> =
        sqlx::query_scalar("SELECT provider_event_id FROM webhook_inbox ORDER BY 1")
            .fetch_all(&app.db)
            .await
            .unwrap();
    assert_eq!(ids, ["evt_0-calls-2", "evt_1-calls-2", "evt_2-calls-2"]);
    app.shutdown().await;
}
