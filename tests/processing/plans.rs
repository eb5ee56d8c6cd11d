//! Claims read what they claim. Wharf's connections use generic plans only, made once per
//! connection from the statistics of that moment; a claim written as a join to its due rows
//! was planned, once the tables were analyzed (as autovacuum does), as a hash join over every
//! row of the day's partition, so each claim cost more the more had been accepted that day.
//! Each test here analyzes a table of `n` rows, claims one batch, and counts the rows read.

use std::sync::Arc;

use wharf::processing::{DeliveryRelay, Lane, Worker};

use crate::support::{app::*, database::*, http::*, receiver::*, signing::*};

const EVENTS: i64 = 800;
const BATCH: i64 = 32;

/// Accepts `EVENTS` Stripe events, 16 requests at a time.
async fn accept_events(app: &TestApp, prefix: &str) {
    for chunk in (0..EVENTS).collect::<Vec<_>>().chunks(16) {
        futures::future::join_all(chunk.iter().map(|i| async move {
            let (headers, body) = signed_stripe_event(&format!("{prefix}_{i}"));
            let answer = app.post("stripe", &refs(&headers), body).await;
            assert_eq!(answer.status, 200, "{:?}", answer.json);
        }))
        .await;
    }
}

async fn analyze(app: &TestApp, table: &str) {
    sqlx::query(&format!("ANALYZE {table}"))
        .execute(&app.db)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_claim_reads_the_due_rows_not_every_row_of_an_analyzed_inbox() {
    let app = TestApp::builder()
        .append_toml(&worker_toml(0))
        .start()
        .await;
    accept_events(&app, "evt_claim").await;
    analyze(&app, "webhook_inbox").await;
    let processing = Arc::clone(&app.server.as_ref().unwrap().processing);
    let worker = Worker::new(processing);
    assert_eq!(worker.try_execute().await.unwrap(), BATCH as usize);
    drop(worker);
    let db = app.db.clone();
    // Its connections end, and with them Postgres publishes their table statistics.
    app.shutdown().await;
    // Claimed, then processed: two updates of each of the batch's rows.
    let inbox = table_activity(&db, "webhook_inbox%", EVENTS + 2 * BATCH).await;
    assert_eq!(inbox.written, EVENTS + 2 * BATCH, "statistics published");
    let read = inbox.index_read + inbox.seq_read;
    // A hash join over the inbox read all 800 rows and more (896).
    assert!(
        read < EVENTS / 2,
        "{read} inbox rows read to claim and process {BATCH} of {EVENTS} events"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_claim_reads_the_pending_rows_not_every_delivery_of_the_day() {
    let receiver = Receiver::start(Behaviour::ok()).await;
    let app = TestApp::builder()
        .append_toml(&worker_toml(0))
        .append_toml(&http_route_toml(&receiver.url, ""))
        .start()
        .await;
    accept_events(&app, "evt_delivery_claim").await;
    let processing = Arc::clone(&app.server.as_ref().unwrap().processing);
    let worker = Worker::new(Arc::clone(&processing));
    let mut processed = 0;
    while processed < EVENTS as usize {
        processed += worker.try_execute().await.unwrap();
    }
    analyze(&app, "deliveries").await;
    let relay = DeliveryRelay::new(processing, Lane::All);
    assert_eq!(relay.try_execute().await.unwrap(), BATCH as usize);
    assert_eq!(receiver.arrived(), BATCH as usize);
    drop((worker, relay));
    let db = app.db.clone();
    app.shutdown().await;
    // Each planned (an insert), then the batch claimed and marked by the relay.
    let written = EVENTS + 2 * BATCH;
    let deliveries = table_activity(&db, "deliveries%", written).await;
    assert_eq!(deliveries.written, written, "statistics published");
    let read = deliveries.index_read + deliveries.seq_read;
    // Finding the due rows still reads every pending one of the lane (its generic plan
    // cannot walk the lane's index in order): 1,632 fetches in all here. Hash-joining them to
    // the table read every delivery of the day once more (2,400).
    assert!(
        read < 2 * EVENTS + EVENTS / 2,
        "{read} delivery rows read to claim and send {BATCH} of {EVENTS} pending"
    );
}
