//! Misbehaving adapters are contained: 503 `adapter_unavailable`, the host keeps serving.

use std::time::{Duration, Instant};

use crate::common::*;

const EVIL: &str = r#"
[[endpoint]]
id = "spin"
adapter = "test-spin"
secret = "github"

[[endpoint]]
id = "hog"
adapter = "test-hog"
secret = "github"

[[endpoint]]
id = "trap"
adapter = "test-trap"
secret = "github"

[[endpoint]]
id = "missing"
adapter = "not-installed"
secret = "github"
"#;

#[tokio::test]
async fn looping_allocating_and_trapping_adapters_are_503_and_the_host_stays_up() {
    let app = app()
        .adapter("testing/test-spin.wasm")
        .adapter("testing/test-hog.wasm")
        .adapter("testing/test-trap.wasm")
        .endpoints(EVIL)
        .spawn()
        .await;
    for (round, endpoint) in ["spin", "hog", "trap", "missing", "spin", "hog", "trap"]
        .into_iter()
        .enumerate()
    {
        let started = Instant::now();
        let answer = app
            .post(endpoint, &[("content-type", "application/json")], "{}")
            .await;
        assert_eq!(
            (answer.status, answer.code()),
            (503, "adapter_unavailable"),
            "{endpoint}: {answer:?}"
        );
        assert!(answer.headers.contains_key("retry-after"));
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{endpoint} took {:?}",
            started.elapsed()
        );

        // The next valid request is served.
        let body = format!("{{\"round\":{round}}}").into_bytes();
        let answer = app
            .post(
                "github",
                &refs(&github_headers(&body, &format!("after-{round}"))),
                body,
            )
            .await;
        assert_eq!(
            (answer.status, answer.code()),
            (200, "accepted"),
            "after {endpoint}: {answer:?}"
        );
    }
    // Many at once: the concurrency permit keeps the pool from being exhausted.
    let mut tasks = Vec::new();
    for i in 0..40 {
        let (client, base) = (app.client.clone(), app.base.clone());
        let endpoint = ["spin", "hog", "trap", "github"][i % 4];
        tasks.push(tokio::spawn(async move {
            let body = format!("{{\"n\":{i}}}").into_bytes();
            let headers = github_headers(&body, &format!("burst-{i}"));
            (
                endpoint,
                post(&client, &base, endpoint, &refs(&headers), body).await,
            )
        }));
    }
    for task in tasks {
        let (endpoint, answer) = task.await.unwrap();
        let expected = if endpoint == "github" { 200 } else { 503 };
        assert_eq!(answer.status, expected, "{endpoint}: {answer:?}");
    }
    assert_eq!(app.count("webhook_inbox").await, 7 + 10);
}
