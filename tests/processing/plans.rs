//! Claims read what they claim. Wharf's connections use generic plans only, made once per
//! connection from the statistics of that moment; a claim written as a join to its due rows
//! was planned, once the tables were analyzed (as autovacuum does), as a hash join over every
//! row of the day's partition, so each claim cost more the more had been accepted that day.
//! The first two tests analyze a table of 800 rows, claim one batch, and count the rows read;
//! the last check that the relays' lanes, one statement each, take what is theirs, and that the
//! lane of targets no route names sends nothing unless the operator opts in.

use wharf::processing::{DeliveryRelay, Lane};

use crate::support::{app::*, database::*, receiver::*};

const EVENTS: i64 = 800;
const BATCH: i64 = 32;

/// Accepts `EVENTS` Stripe events, 16 requests at a time.
async fn accept_events(app: &TestApp, prefix: &str) {
    for chunk in (0..EVENTS).collect::<Vec<_>>().chunks(16) {
        futures::future::join_all(chunk.iter().map(|i| async move {
            let answer = app.post_stripe(&format!("{prefix}_{i}")).await;
            assert_eq!(answer.status, 200, "{:?}", answer.json);
        }))
        .await;
    }
}

/// An app whose server runs no workers or relays, with a route to `url`: the test drives
/// each step.
async fn app_routing_to(url: &str) -> TestApp {
    TestApp::builder()
        .workers(0)
        .append_toml(&http_route_toml(url, ""))
        .start()
        .await
}

async fn analyze(app: &TestApp, table: &str) {
    sqlx::query(&format!("ANALYZE {table}"))
        .execute(&app.db)
        .await
        .unwrap();
}

/// Stops `app` (its connections end, and with them Postgres publishes their table
/// statistics), checks that `written` rows were written to `tables`, and returns how many
/// rows were read from them.
async fn rows_read(app: TestApp, tables: &str, written: i64) -> i64 {
    let db = app.db.clone();
    app.shutdown().await;
    let activity = table_activity(&db, tables, written).await;
    assert_eq!(activity.written, written, "statistics published");
    activity.index_read + activity.seq_read
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_claim_reads_the_due_rows_not_every_row_of_an_analyzed_inbox() {
    let app = TestApp::builder().workers(0).start().await;
    accept_events(&app, "evt_claim").await;
    analyze(&app, "webhook_inbox").await;
    let worker = app.worker();
    assert_eq!(worker.try_execute().await.unwrap(), BATCH as usize);
    drop(worker);
    // Claimed, then processed: two updates of each of the batch's rows.
    let read = rows_read(app, "webhook_inbox%", EVENTS + 2 * BATCH).await;
    // A hash join over the inbox read all 800 rows and more (896).
    assert!(
        read < EVENTS / 2,
        "{read} inbox rows read to claim and process {BATCH} of {EVENTS} events"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_claim_reads_the_due_rows_not_every_pending_delivery_of_its_target() {
    let receiver = Receiver::start(Behaviour::ok()).await;
    let app = app_routing_to(&receiver.url).await;
    accept_events(&app, "evt_delivery_claim").await;
    let worker = app.worker();
    let mut processed = 0;
    while processed < EVENTS as usize {
        processed += worker.try_execute().await.unwrap();
    }
    analyze(&app, "deliveries").await;
    let lane = Lane::Target {
        sink: "http".into(),
        target: receiver.url.clone(),
    };
    let relay = DeliveryRelay::new(app.processing(), lane);
    assert_eq!(relay.try_execute().await.unwrap(), BATCH as usize);
    assert_eq!(receiver.arrived(), BATCH as usize);
    drop((worker, relay));
    // Each planned (an insert), then the batch claimed and marked by the relay.
    let read = rows_read(app, "deliveries%", EVENTS + 2 * BATCH).await;
    // Before: one statement for every lane read and sorted all the lane's pending rows and
    // hash-joined them to the table, and marking the batch hash-joined it to the table
    // again (2,400 rows read in all).
    assert!(
        read < EVENTS / 4,
        "{read} delivery rows read to claim and send {BATCH} of {EVENTS} pending"
    );
}

/// Two events accepted and planned to `routed`; one row then pointed at `former`, a target
/// no configured route names (its route changed, or the row was written by hand).
async fn one_row_unrouted(app: &TestApp, former: &str) {
    for id in ["evt_lane_routed", "evt_lane_former"] {
        app.post_stripe(id).await.assert_status(200);
    }
    assert_eq!(app.worker().try_execute().await.unwrap(), 2);
    sqlx::query(
        "UPDATE deliveries SET target = $1
         WHERE inbox_id = (SELECT inbox_id FROM webhook_inbox
                           WHERE provider_event_id = 'evt_lane_former')",
    )
    .bind(former)
    .execute(&app.db)
    .await
    .unwrap();
}

/// Each delivery's status and `last_error`, the former target's first.
async fn outcomes(app: &TestApp, former: &str) -> Vec<(String, Option<String>)> {
    sqlx::query_as("SELECT status, last_error FROM deliveries ORDER BY target <> $1")
        .bind(former)
        .fetch_all(&app.db)
        .await
        .unwrap()
}

/// Before: the unrouted lane sent the row to `former` (this test asserted that); anyone who
/// can write `deliveries` could make the relay `POST` events to any URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_unrouted_lane_sends_nothing_and_fails_the_row_unless_the_operator_opts_in() {
    let routed = Receiver::start(Behaviour::ok()).await;
    let former = Receiver::start(Behaviour::ok()).await;
    let app = app_routing_to(&routed.url).await;
    one_row_unrouted(&app, &former.url).await;
    let unrouted = DeliveryRelay::new(app.processing(), Lane::Unrouted);
    assert_eq!(unrouted.try_execute().await.unwrap(), 1);
    assert_eq!((former.arrived(), routed.arrived()), (0, 0));
    assert_eq!(
        unrouted.try_execute().await.unwrap(),
        0,
        "failed at its first attempt, and the routed one is not its"
    );
    let lane = Lane::Target {
        sink: "http".into(),
        target: routed.url.clone(),
    };
    let relay = DeliveryRelay::new(app.processing(), lane);
    assert_eq!(relay.try_execute().await.unwrap(), 1);
    assert_eq!((former.arrived(), routed.arrived()), (0, 1));
    let outcomes = outcomes(&app, &former.url).await;
    assert_eq!(outcomes[0].0, "FAILED");
    let error = outcomes[0].1.as_deref().unwrap_or_default();
    assert!(error.starts_with("target not configured"), "{error}");
    assert!(!error.contains(&former.url), "{error}");
    assert_eq!(outcomes[1], ("SENT".into(), None));
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_deliver_to_unrouted_targets_the_unrouted_lane_sends_what_no_route_targets() {
    let routed = Receiver::start(Behaviour::ok()).await;
    let former = Receiver::start(Behaviour::ok()).await;
    let app = TestApp::builder()
        .workers(0)
        .append_toml("deliver_to_unrouted_targets = true\n")
        .append_toml(&http_route_toml(&routed.url, ""))
        .start()
        .await;
    one_row_unrouted(&app, &former.url).await;
    let unrouted = DeliveryRelay::new(app.processing(), Lane::Unrouted);
    assert_eq!(unrouted.try_execute().await.unwrap(), 1);
    assert_eq!((former.arrived(), routed.arrived()), (1, 0));
    assert_eq!(
        unrouted.try_execute().await.unwrap(),
        0,
        "the routed one is not its"
    );
    assert_eq!(outcomes(&app, &former.url).await[0], ("SENT".into(), None));
    app.shutdown().await;
}
