//! Events accepted while this host's workers keep up are leased to them in the acceptance
//! statement and handed over in memory: after its insert, an event's inbox row is written
//! once (its completion), not twice (a claim, then the completion). A leased event whose host
//! goes away before processing it is claimed by any worker once its lease runs out.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use wharf::ingest::{CommitSettings, Handoff, NewEvent, Store, Submission};
use wharf::support::metrics::Metrics;

use crate::support::{app::*, database::*, wait::*};

async fn post(app: &TestApp, id: &str) {
    let answer = app.post_stripe(id).await;
    assert_eq!(answer.status, 200, "{:?}", answer.json);
}

/// Rows inserted into and updated in the inbox's partitions, as Postgres counts them.
async fn inbox_writes(db: &sqlx::PgPool) -> (i64, i64) {
    one_row(
        db,
        "SELECT coalesce(sum(n_tup_ins), 0)::bigint, coalesce(sum(n_tup_upd), 0)::bigint
         FROM pg_stat_user_tables WHERE relname LIKE 'webhook_inbox%'",
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_accepted_while_the_workers_keep_up_are_leased_at_acceptance() {
    let app = TestApp::builder().workers(1).start().await;
    // By the time the first event is processed, the worker has claimed from the database
    // and found less than a full batch: nothing waits there, so the handoff is open.
    post(&app, "evt_handoff_0").await;
    wait_until_converged(&app.db).await;
    let n = 12_i64;
    let ids: Vec<String> = (1..=n).map(|i| format!("evt_handoff_{i}")).collect();
    futures::future::join_all(ids.iter().map(|id| post(&app, id))).await;
    wait_until_converged(&app.db).await;
    assert_eq!(
        scalar_i64(
            &app.db,
            "SELECT count(*) FROM webhook_inbox WHERE status = 'PROCESSED' AND attempt_count = 1"
        )
        .await,
        n + 1
    );
    assert_eq!(
        scalar_i64(&app.db, "SELECT count(*) FROM processed_events").await,
        n + 1
    );

    // The server's connections close, and publish their statistics.
    let db = app.db.clone();
    app.shutdown().await;
    table_activity(&db, "webhook_inbox%", 2 * (n + 1)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (inserted, updated) = inbox_writes(&db).await;
    assert_eq!(inserted, n + 1);
    // A completion each, and a claim's update at most for the first event; claimed from
    // the database, the twelve would have been updated twice each.
    assert!(
        (n + 1..=n + 2).contains(&updated),
        "{updated} updates for {} events",
        n + 1
    );
    // Nothing keeps their documents (`projection_document = "none"`): the worker reads back
    // no payload it was handed with its lease, only the first event's if that one was
    // claimed from the database. Each read used to fetch one row.
    let payloads = table_activity(&db, "webhook_payloads%", n + 1).await;
    assert_eq!(payloads.written, n + 1);
    assert!(
        payloads.index_read + payloads.seq_read <= 1,
        "payload rows read for {} events: {payloads:?}",
        n + 1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_leased_to_a_host_that_went_away_is_claimed_once_its_lease_runs_out() {
    // Processing without workers: the test drives one.
    let app = TestApp::builder().workers(0).start().await;
    // Another host's acceptance, whose workers never take what it leased them.
    // Long enough that the first look below comes before it ends on a loaded machine.
    let handoff = Arc::new(Handoff::new(8, Duration::from_secs(3)));
    handoff.caught_up();
    let store = Store::connect_lazy(
        &app.config.database_url,
        2,
        Duration::from_secs(2),
        test_payload_keys(),
    )
    .unwrap()
    .with_group_commit(
        CommitSettings::default(),
        Some(Arc::clone(&handoff)),
        Arc::new(Metrics::default()),
    );
    let event = NewEvent {
        provider: "stripe".into(),
        endpoint_id: "stripe".into(),
        event_id: "evt_leased".into(),
        event_type: "charge.succeeded".into(),
        object_id: None,
        object_version: None,
        created_at: None,
        payload_span: None,
    };
    let submission = || Submission {
        payload: Bytes::from_static(b"{\"id\":\"evt_leased\"}"),
        matched_secret_version: "v1".into(),
        events: vec![event.clone()],
        received_at: time::OffsetDateTime::now_utc(),
        redelivery_window: time::Duration::days(7),
        trace_context: None,
    };
    let accepted = store.accept(submission()).await.unwrap();
    // A resend is a duplicate and leases nothing.
    store.accept(submission()).await.unwrap();
    let leased = handoff.take(8);
    assert_eq!(leased.len(), 1);
    assert_eq!(leased[0].inbox_id, accepted[0].inbox_id());
    let (status, attempts, claim_id, lease_left): (String, i32, Option<uuid::Uuid>, f64) = one_row(
        &app.db,
        "SELECT status, attempt_count, claim_id,
                    extract(epoch FROM lease_until - now())::float8
             FROM webhook_inbox",
    )
    .await;
    assert_eq!(
        (status.as_str(), attempts, claim_id),
        ("PROCESSING", 1, Some(leased[0].claim_id))
    );
    assert!(lease_left > 0.0 && lease_left <= 3.0, "{lease_left}");

    // While the lease holds, no other worker takes the event; after it, one does.
    let worker = app.worker();
    assert_eq!(worker.try_execute().await.unwrap(), 0);
    tokio::time::sleep(Duration::from_secs_f64(lease_left + 0.2)).await;
    assert_eq!(worker.try_execute().await.unwrap(), 1);
    let (status, attempts): (String, i32) =
        one_row(&app.db, "SELECT status, attempt_count FROM webhook_inbox").await;
    assert_eq!((status.as_str(), attempts), ("PROCESSED", 2));
}
