//! The metrics alerts need, with the counts a test caused: acknowledgements by endpoint and
//! outcome, delivery attempt and end-to-end latency, each target's pending and failed
//! deliveries, failed events, and the build.

use std::sync::Arc;
use std::time::Duration;

use wharf::processing::{DeliveryRelay, Lane, Reconciler, Worker};

use crate::support::{app::*, database::*, receiver::*};

/// The value of the series whose line starts with `series` (labels included), if present.
fn value(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alerting_metrics_count_what_happened() {
    let ok = Receiver::start(Behaviour::ok()).await;
    let refusing = Receiver::start(always(500, Duration::ZERO)).await;
    let down = "http://127.0.0.1:9/down";
    let app = TestApp::builder()
        .workers(0)
        .append_toml(&http_route_toml(&ok.url, ""))
        .append_toml(&http_route_toml(&refusing.url, "max_attempts = 1"))
        .append_toml(&http_route_toml(down, "max_attempts = 50"))
        .start()
        .await;
    let processing = app.processing();

    app.post_stripe("evt_delivered").await.assert_status(200);
    // An event whose payload is gone ends FAILED.
    app.post_stripe("evt_lost").await.assert_status(200);
    app.post_stripe("evt_delivered").await.assert_status(200);
    execute(
        &app.db,
        "DELETE FROM webhook_payloads WHERE payload_ref =
           (SELECT raw_payload_ref FROM webhook_inbox WHERE provider_event_id = 'evt_lost')",
    )
    .await;

    assert_eq!(
        Worker::new(Arc::clone(&processing))
            .try_execute()
            .await
            .unwrap(),
        2
    );
    let relay = DeliveryRelay::new(Arc::clone(&processing), Lane::All);
    relay.try_execute().await.unwrap();
    Reconciler::new(Arc::clone(&processing))
        .try_execute()
        .await
        .unwrap();

    let metrics = app.metrics().await;
    let has = |series: &str| value(&metrics, series);
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        has(&format!("wharf_build_info{{version=\"{version}\"}}")),
        Some(1.0),
        "{metrics}"
    );
    assert_eq!(
        has(r#"wharf_ack_seconds_count{endpoint="stripe",outcome="accepted"}"#),
        Some(2.0),
        "{metrics}"
    );
    assert_eq!(
        has(r#"wharf_ack_seconds_count{endpoint="stripe",outcome="duplicate"}"#),
        Some(1.0)
    );
    for (outcome, count) in [("sent", 1.0), ("failed", 1.0), ("retry", 1.0)] {
        let series =
            format!("wharf_delivery_attempt_seconds_count{{sink=\"http\",outcome=\"{outcome}\"}}");
        assert_eq!(has(&series), Some(count), "{series}\n{metrics}");
    }
    assert_eq!(
        has(r#"wharf_delivery_latency_seconds_count{sink="http"}"#),
        Some(1.0),
        "only the sent delivery has a latency"
    );
    let target = |name: &str, url: &str| format!("{name}{{sink=\"http\",target=\"{url}\"}}");
    assert_eq!(
        has(&target("wharf_deliveries_failed", &refusing.url)),
        Some(1.0),
        "{metrics}"
    );
    assert_eq!(
        has(&target("wharf_deliveries_pending", &refusing.url)),
        Some(0.0)
    );
    assert_eq!(has(&target("wharf_deliveries_pending", down)), Some(1.0));
    assert_eq!(has(&target("wharf_deliveries_failed", down)), Some(0.0));
    let oldest = has(&target("wharf_deliveries_oldest_pending_seconds", down)).unwrap();
    assert!((0.0..60.0).contains(&oldest), "{oldest}");
    assert_eq!(has("wharf_inbox_failed"), Some(1.0), "{metrics}");

    // Once the pending delivery is gone, its target reads 0, not its last value.
    sqlx::query("UPDATE deliveries SET status = 'SENT', sent_at = now() WHERE target = $1")
        .bind(down)
        .execute(&app.db)
        .await
        .unwrap();
    Reconciler::new(Arc::clone(&processing))
        .try_execute()
        .await
        .unwrap();
    let metrics = app.metrics().await;
    assert_eq!(
        value(&metrics, &target("wharf_deliveries_pending", down)),
        Some(0.0)
    );
    app.shutdown().await;
}
