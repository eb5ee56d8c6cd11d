//! A route's URL may carry credentials (user info, a query token): the delivery is sent to
//! the full URL, but `/metrics` (served without a token) and exported spans show the URL
//! without them.

use std::sync::Arc;

use wharf::processing::Reconciler;

use crate::support::collector::Collector;
use crate::support::{app::*, receiver::*, wait::*};

const PASSWORD: &str = "pw-leak-7x";
const TOKEN: &str = "tok-leak-3q";

/// `url` (`http://host/path`) with user info and a query token.
fn with_credentials(url: &str) -> String {
    let rest = url.strip_prefix("http://").unwrap();
    format!("http://user:{PASSWORD}@{rest}?token={TOKEN}#frag")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivery_urls_are_shown_without_their_credentials() {
    let collector = Collector::start().await;
    let receiver = Receiver::start(Behaviour::ok()).await;
    let down = "http://127.0.0.1:9/down";
    let app = TestApp::builder()
        .workers(1)
        .append_toml(&http_route_toml(&with_credentials(&receiver.url), ""))
        .append_toml(&http_route_toml(
            &with_credentials(down),
            "max_attempts = 1",
        ))
        .append_toml(&collector.toml())
        .start()
        .await;

    app.post_stripe("evt_credentials").await.assert_status(200);
    // One delivery reaches the receiver; the other ends FAILED, so its target has a series.
    app.wait_count("deliveries", "status = 'SENT'", 1).await;
    app.wait_count("deliveries", "status = 'FAILED'", 1).await;
    assert_eq!(receiver.received().len(), 1, "sent to the full URL");
    Reconciler::new(Arc::clone(&app.processing()))
        .try_execute()
        .await
        .unwrap();

    let metrics = app.metrics().await;
    assert!(
        metrics.contains(&format!(
            "wharf_deliveries_failed{{sink=\"http\",target=\"{down}\"}} 1"
        )),
        "{metrics}"
    );
    for secret in [PASSWORD, TOKEN, "user:", "frag"] {
        assert!(!metrics.contains(secret), "{secret} in {metrics}");
    }

    eventually("both delivery spans exported", || async {
        collector
            .spans()
            .iter()
            .filter(|s| s.name == "wharf.deliver")
            .count()
            == 2
    })
    .await;
    let spans = collector.spans();
    let mut targets: Vec<&str> = spans
        .iter()
        .filter(|s| s.name == "wharf.deliver")
        .map(|s| s.attributes["wharf.target"].as_str())
        .collect();
    targets.sort();
    let mut expected = [down, receiver.url.as_str()];
    expected.sort();
    assert_eq!(targets, expected);
    for span in &spans {
        for value in span.attributes.values() {
            for secret in [PASSWORD, TOKEN] {
                assert!(!value.contains(secret), "{span:#?}");
            }
        }
    }
    app.shutdown().await;
}
