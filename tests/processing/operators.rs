//! The reconciler requeues accepted events whose processing marker or deliveries went
//! missing; replay by filter; graceful shutdown releases nothing half-done; the backlog gauge
//! follows the backlog between passes.

use wharf::processing::Reconciler;

use crate::support::{database::*, receiver::*, wait::*};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reconciler_requeues_events_missing_processing_or_deliveries() {
    let (receiver, app) = start_app_delivering_to(Behaviour::ok(), "").await;
    for id in ["evt_rec_1", "evt_rec_2"] {
        app.post_stripe(id).await.assert_status(200);
    }
    wait_until_converged(&app.db).await;
    assert_eq!(receiver.received().len(), 2);

    // Lost by hand: one event's marker, the other's delivery row.
    execute(
        &app.db,
        "DELETE FROM processed_events WHERE provider_event_id = 'evt_rec_1'",
    )
    .await;
    execute(
        &app.db,
        "DELETE FROM deliveries WHERE inbox_id =
           (SELECT inbox_id FROM webhook_inbox WHERE provider_event_id = 'evt_rec_2')",
    )
    .await;

    let processing = app.processing();
    let report = Reconciler::new(processing).try_execute().await.unwrap();
    assert_eq!(report.missing_marker, 1);
    assert_eq!(report.missing_deliveries, 1);

    wait_until_converged(&app.db).await;
    assert_eq!(app.count("processed_events").await, 2);
    assert_eq!(app.count("deliveries").await, 2);
    let keys: Vec<String> = receiver
        .received()
        .into_iter()
        .map(|r| r.event_id)
        .collect();
    assert_eq!(
        keys.iter().filter(|k| *k == "evt_rec_2").count(),
        2,
        "the lost delivery was planned and sent again"
    );
    // The re-run found the projection already at this version: nothing changed twice.
    let outcome: String = sqlx::query_scalar(
        "SELECT outcome FROM processed_events WHERE provider_event_id = 'evt_rec_1'",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(outcome, "stale");
    let again = Reconciler::new(app.processing())
        .try_execute()
        .await
        .unwrap();
    assert_eq!((again.missing_marker, again.missing_deliveries), (0, 0));
    assert_eq!(
        again.outbox_unpublished, 0,
        "notices published (no NATS: marked)"
    );
    app.shutdown().await;
}

/// The value of `wharf_inbox_oldest_pending_seconds` in a metrics page.
fn oldest_pending(metrics: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("wharf_inbox_oldest_pending_seconds "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no oldest-pending gauge in {metrics}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_oldest_pending_gauge_follows_the_backlog_between_reconciler_passes() {
    // Processing without workers: the relays and the reconciler (one pass an hour) only.
    let app = crate::support::app::TestApp::builder()
        .workers(0)
        .start()
        .await;
    app.post_stripe("evt_gauge").await.assert_status(200);
    let config = wharf::config::Config::load(&app.config.config_path).unwrap();
    let host = wharf::server::ProcessingHost::start(config, 0, None)
        .await
        .unwrap();
    let gauge = || oldest_pending(&host.processing.metrics.render());
    eventually("the first pass saw the event waiting", || async {
        gauge() > 0.0
    })
    .await;
    let first = gauge();
    eventually("the gauge grows while the event waits", || async {
        gauge() > first + 0.5
    })
    .await;
    let worker = wharf::processing::Worker::new(std::sync::Arc::clone(&host.processing));
    assert_eq!(worker.try_execute().await.unwrap(), 1);
    eventually("the gauge is back to zero", || async { gauge() == 0.0 }).await;
    host.shutdown().await.unwrap();
    app.shutdown().await;
}
