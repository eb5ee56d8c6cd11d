//! Claim tokens never repeat: a relay or worker still holding a claim from before an
//! operator's replay (which restarts attempt counts at zero) changes nothing, even when a new
//! claim has the same attempt count.

use uuid::Uuid;

use crate::support::{app::*, database::*, receiver::*, wait::*};

async fn delivery(db: &sqlx::PgPool) -> (String, i32, bool) {
    one_row(
        db,
        "SELECT status, attempt_count, sent_at IS NOT NULL FROM deliveries",
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_holding_a_claim_from_before_a_resend_marks_nothing() {
    let receiver = Receiver::start(Behaviour::ok()).await;
    // No workers or relays in the server: the test drives each step.
    let app = TestApp::builder()
        .workers(0)
        .append_toml(&http_route_toml(&receiver.url, "timeout_ms = 30000"))
        .start()
        .await;
    let answer = app.post_stripe("evt_claim_resend").await;
    assert_eq!(answer.status, 200);
    let inbox_id: Uuid = answer.json["inbox_id"].as_str().unwrap().parse().unwrap();
    assert_eq!(app.work_once().await, 1);

    // The first relay's request hangs at the receiver, and so will the third's.
    let first_answer = receiver.hold(0);
    let third_answer = receiver.hold(2);
    let first = app.spawn_relay();
    eventually("the first send arrived", || async {
        receiver.arrived() == 1
    })
    .await;
    assert_eq!(delivery(&app.db).await, ("PENDING".into(), 1, false));

    // Its lease runs out (as if 35 s had passed); a second relay sends and marks it sent.
    execute(&app.db, "UPDATE deliveries SET next_attempt_at = now()").await;
    assert_eq!(app.relay().try_execute().await.unwrap(), 1);
    assert_eq!(delivery(&app.db).await, ("SENT".into(), 2, true));

    // An operator resends it; a third relay claims it, with attempt count 1 again.
    let replayed = wharf::operator::events::replay(&app.db, &[inbox_id], true)
        .await
        .unwrap();
    assert_eq!(replayed.deliveries, 1);
    let third = app.spawn_relay();
    eventually("the third send arrived", || async {
        receiver.arrived() == 3
    })
    .await;
    assert_eq!(delivery(&app.db).await, ("PENDING".into(), 1, false));

    // The first send is answered now: its relay must leave the third claim alone.
    first_answer.notify_one();
    assert_eq!(first.await.unwrap(), 1);
    assert_eq!(
        delivery(&app.db).await,
        ("PENDING".into(), 1, false),
        "an old claim marked the resent delivery"
    );

    // The third claim still decides.
    third_answer.notify_one();
    assert_eq!(third.await.unwrap(), 1);
    assert_eq!(delivery(&app.db).await, ("SENT".into(), 1, true));
    assert_eq!(receiver.received().len(), 3);
    app.shutdown().await;
}

/// Sessions of this test's database that wait for a lock, from the processing pool.
async fn workers_waiting_for_a_lock(db: &sqlx::PgPool) -> i64 {
    scalar_i64(
        db,
        "SELECT count(*) FROM pg_stat_activity
         WHERE datname = current_database() AND application_name = 'wharf-worker'
           AND wait_event_type = 'Lock'",
    )
    .await
}

async fn inbox(db: &sqlx::PgPool, id: Uuid) -> (String, i32) {
    sqlx::query_as("SELECT status, attempt_count FROM webhook_inbox WHERE inbox_id = $1")
        .bind(id)
        .fetch_one(db)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_holding_a_claim_from_before_a_replay_changes_nothing() {
    let app = TestApp::builder().workers(0).start().await;
    let mut ids = Vec::new();
    for id in ["evt_claim_a", "evt_claim_b"] {
        let answer = app.post_stripe(id).await;
        assert_eq!(answer.status, 200);
        ids.push(
            answer.json["inbox_id"]
                .as_str()
                .unwrap()
                .parse::<Uuid>()
                .unwrap(),
        );
    }
    ids.sort();
    // Workers lock a batch's rows in id order: holding `first` stops the old worker before
    // it locks `event`, the row under test.
    let (first, event) = (ids[0], ids[1]);

    // The old worker claims both and is held up reading their payloads...
    let payloads = holding(
        &app.db,
        "LOCK TABLE webhook_payloads IN ACCESS EXCLUSIVE MODE",
    )
    .await;
    let old = app.spawn_worker();
    app.wait_count(
        "webhook_inbox",
        "status = 'PROCESSING' AND attempt_count = 1",
        2,
    )
    .await;
    // ...then at the lock of `first`, before it looks at `event`.
    let mut first_row = app.db.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM webhook_inbox WHERE inbox_id = $1 FOR UPDATE")
        .bind(first)
        .execute(&mut *first_row)
        .await
        .unwrap();
    payloads.commit().await.unwrap();
    eventually("the old worker waits for the row lock", || async {
        workers_waiting_for_a_lock(&app.db).await == 1
    })
    .await;

    // Its lease on `event` runs out; another worker processes it.
    sqlx::query("UPDATE webhook_inbox SET next_attempt_at = now() WHERE inbox_id = $1")
        .bind(event)
        .execute(&app.db)
        .await
        .unwrap();
    assert_eq!(app.work_once().await, 1);
    assert_eq!(inbox(&app.db, event).await, ("PROCESSED".into(), 2));

    // An operator replays it; a third worker claims it (attempt count 1, as the old claim)
    // and is held up reading the payload.
    let replayed = wharf::operator::events::replay(&app.db, &[event], false)
        .await
        .unwrap();
    assert_eq!(replayed.events, 1);
    let payloads = holding(
        &app.db,
        "LOCK TABLE webhook_payloads IN ACCESS EXCLUSIVE MODE",
    )
    .await;
    let third = app.spawn_worker();
    eventually("the third worker claimed the event", || async {
        inbox(&app.db, event).await == ("PROCESSING".into(), 1)
    })
    .await;

    // The old worker goes on: it finishes `first`, and must leave `event` to the third.
    first_row.commit().await.unwrap();
    assert_eq!(old.await.unwrap(), 2);
    assert_eq!(inbox(&app.db, first).await.0, "PROCESSED");
    assert_eq!(
        inbox(&app.db, event).await,
        ("PROCESSING".into(), 1),
        "an old claim finished the replayed event"
    );

    payloads.commit().await.unwrap();
    assert_eq!(third.await.unwrap(), 1);
    assert_eq!(inbox(&app.db, event).await, ("PROCESSED".into(), 1));
    assert_eq!(app.count("processed_events").await, 2);
    app.shutdown().await;
}
