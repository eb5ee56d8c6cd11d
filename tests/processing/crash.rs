//! Crash injection: `wharf serve` kills itself with SIGKILL at a failpoint; after a restart
//! and the provider's retry, every event is processed once and delivered, nothing lost. And
//! which commits wait for the WAL flush: acceptance does, processing need not.

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use sqlx::PgPool;

use crate::support::{app::*, database::*, nats::*, process::*, receiver::*, signing::*, wait::*};

/// The provider's attempt: the answer's status, or `None` when the connection died.
async fn provider_attempt(base: &str, event_id: &str) -> Option<(u16, serde_json::Value)> {
    let (headers, body) = signed_stripe_event(event_id);
    let client = reqwest::Client::new();
    let mut request = client.post(format!("{base}/webhooks/stripe")).body(body);
    for (k, v) in &headers {
        request = request.header(k, v);
    }
    let response = request.send().await.ok()?;
    let status = response.status().as_u16();
    let json = response.json().await.ok()?;
    Some((status, json))
}

async fn crash_at(point: &str) {
    let receiver = Receiver::start(Behaviour::ok()).await;
    let nats = NatsScope::new();
    let written = TestApp::builder()
        .workers(2)
        .append_toml(&nats.toml())
        // A short timeout keeps the delivery's lease (timeout + 5 s) short after a crash.
        .append_toml(&http_route_toml(&receiver.url, "timeout_ms = 2000"))
        .write_config()
        .await;
    let db = PgPool::connect(&written.database_url).await.unwrap();
    let event_id = format!("evt_crash_{}", point.replace('.', "_"));

    let serve = ServeProcess::start_with(
        &["serve"],
        &written.config_path,
        None,
        &[("WHARF_FAILPOINTS", point)],
    )
    .await;
    let first = provider_attempt(&serve.base, &event_id).await;
    let exit = serve.wait_exit(Duration::from_secs(30)).await;
    assert_eq!(
        exit.signal(),
        Some(9),
        "{point}: killed by SIGKILL, not a clean exit"
    );
    if let Some((status, json)) = &first {
        assert_eq!(*status, 200, "{point}: {json}");
    }
    if point == "ingest.after_commit" {
        assert!(first.is_none(), "the crash came before the answer");
        assert_eq!(
            scalar_i64(&db, "SELECT count(*) FROM webhook_inbox").await,
            1,
            "committed before the crash"
        );
    }

    // Restart, and the provider retries (it got no answer, or retries anyway).
    let serve = ServeProcess::start(&written.config_path, None).await;
    let (status, json) = provider_attempt(&serve.base, &event_id)
        .await
        .expect("the restarted receiver answers");
    assert_eq!(status, 200, "{json}");
    if point == "ingest.after_commit" {
        assert_eq!(
            json["status"], "duplicate",
            "the retry finds the committed row"
        );
    }
    wait_until_converged(&db).await;
    wait_until_count(
        &db,
        "SELECT count(*) FROM webhook_outbox WHERE published_at IS NULL",
        0,
    )
    .await;

    let inbox_id: uuid::Uuid = sqlx::query_scalar("SELECT inbox_id FROM webhook_inbox")
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(
        scalar_i64(&db, "SELECT count(*) FROM webhook_inbox").await,
        1
    );
    assert_eq!(
        scalar_i64(&db, "SELECT count(*) FROM processed_events").await,
        1
    );
    assert_eq!(scalar_i64(&db, "SELECT count(*) FROM deliveries").await, 1);
    let state: uuid::Uuid = sqlx::query_scalar("SELECT inbox_id FROM object_state")
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(state, inbox_id);
    let received = receiver.received();
    assert!(!received.is_empty(), "{point}: delivered");
    assert!(
        received
            .iter()
            .all(|r| r.idempotency_key == inbox_id.to_string()),
        "{point}: one idempotency key"
    );
    if point == "delivery.after_send" {
        assert!(
            received.len() >= 2,
            "the delivery was taken before the crash and sent again after it"
        );
    }
    // The stream deduplicated the notice published before the crash and again after it.
    assert_eq!(nats.accepted_messages().await, 1, "{point}");
    assert!(serve.stop().await.success());
    nats.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_the_inbox_commit_before_the_answer() {
    crash_at("ingest.after_commit").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_publishing_before_marking_the_outbox_row() {
    crash_at("outbox.after_publish").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_the_business_commit_before_the_worker_acknowledges() {
    crash_at("worker.after_commit").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_a_delivery_succeeded_before_it_was_marked() {
    crash_at("delivery.after_send").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processing_commits_without_waiting_for_the_flush_and_acceptance_waits() {
    // What a database crash loses of processing is redone (docs/performance.md); a lost
    // acceptance would break the 2xx already sent, so it stays durable.
    let app = TestApp::builder().workers(0).start().await;
    let server = app.server.as_ref().unwrap();
    let setting = |pool: sqlx::PgPool| async move {
        sqlx::query_scalar::<_, String>("SHOW synchronous_commit")
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    assert_eq!(setting(server.processing.pool.clone()).await, "off");
    let seqscan = sqlx::query_scalar::<_, String>("SHOW enable_seqscan")
        .fetch_one(&server.processing.pool)
        .await
        .unwrap();
    assert_eq!(seqscan, "off", "processing plans stay on indexes");
    assert_eq!(setting(server.ingest.store().pool().clone()).await, "on");
    app.shutdown().await;
}
