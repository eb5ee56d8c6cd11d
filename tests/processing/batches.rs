//! A claimed batch is applied together, with the same results as one event at a time:
//! version order within the batch, requeued events not applied twice, a failing event
//! retried alone while its neighbours commit, and a new object's row appearing from another
//! worker mid-batch never overwritten with an older version.

use uuid::Uuid;

use crate::support::{app::*, database::*, http::*, signing::*, wait::*};

const BASE: i64 = 1_764_000_000;

/// Appended right after `worker_toml`: the projection keeps each object's newest document.
const KEEP_DOCUMENTS: &str = "projection_document = \"event\"\n";

/// An app whose server runs no workers or relays: the test drives one batch at a time.
async fn app_without_workers(extra: &str) -> TestApp {
    TestApp::builder()
        .workers(0)
        .append_toml(extra)
        .start()
        .await
}

/// Sends event `id` about `object` at version `BASE + version`; returns its inbox id.
async fn send(app: &TestApp, id: &str, object: &str, version: i64) -> Uuid {
    let (headers, body) = signed_stripe_object_event(id, object, BASE + version);
    let answer = app.post("stripe", &refs(&headers), body).await;
    assert_eq!(answer.status, 200, "{:?}", answer.json);
    answer.json["inbox_id"].as_str().unwrap().parse().unwrap()
}

async fn projected(app: &TestApp, object: &str) -> (i64, String) {
    sqlx::query_as("SELECT object_version - $2, event_id FROM object_state WHERE object_id = $1")
        .bind(object)
        .bind(BASE)
        .fetch_one(&app.db)
        .await
        .unwrap()
}

/// (event id, status, outcome) of every event, by event id.
async fn events(app: &TestApp) -> Vec<(String, String, Option<String>)> {
    all_rows(
        &app.db,
        "SELECT provider_event_id, status, outcome FROM webhook_inbox ORDER BY provider_event_id",
    )
    .await
}

fn processed(id: &str, outcome: &str) -> (String, String, Option<String>) {
    (id.into(), "PROCESSED".into(), Some(outcome.into()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_batch_of_several_objects_and_versions_applies_each_in_version_order() {
    let app = app_without_workers(KEEP_DOCUMENTS).await;
    // Arrival order is not version order.
    for (id, object, version) in [
        ("evt_a3", "cus_a", 3),
        ("evt_b5", "cus_b", 5),
        ("evt_a1", "cus_a", 1),
        ("evt_b2", "cus_b", 2),
        ("evt_a2", "cus_a", 2),
        // Stripe versions are seconds: a tie goes to the greater event id.
        ("evt_c_y", "cus_c", 7),
        ("evt_c_x", "cus_c", 7),
    ] {
        send(&app, id, object, version).await;
    }
    assert_eq!(app.work_once().await, 7, "one batch");
    // As if applied one at a time in version order: each moved the projection.
    assert_eq!(
        events(&app).await,
        vec![
            processed("evt_a1", "applied"),
            processed("evt_a2", "applied"),
            processed("evt_a3", "applied"),
            processed("evt_b2", "applied"),
            processed("evt_b5", "applied"),
            processed("evt_c_x", "applied"),
            processed("evt_c_y", "applied"),
        ]
    );
    assert_eq!(projected(&app, "cus_a").await, (3, "evt_a3".into()));
    assert_eq!(projected(&app, "cus_b").await, (5, "evt_b5".into()));
    assert_eq!(projected(&app, "cus_c").await, (7, "evt_c_y".into()));
    let state: serde_json::Value =
        sqlx::query_scalar("SELECT state FROM object_state WHERE object_id = 'cus_a'")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(state["id"], "evt_a3", "the newest event's document");

    // A second batch against the stored rows: older, tied and newer versions together.
    for (id, object, version) in [
        ("evt_a2b", "cus_a", 2),
        ("evt_a4", "cus_a", 4),
        ("evt_b5a", "cus_b", 5),
        ("evt_b4", "cus_b", 4),
        ("evt_c_a", "cus_c", 7),
    ] {
        send(&app, id, object, version).await;
    }
    assert_eq!(app.work_once().await, 5);
    let outcomes: Vec<_> = events(&app)
        .await
        .into_iter()
        .filter(|(id, ..)| ["evt_a2b", "evt_a4", "evt_b5a", "evt_b4", "evt_c_a"].contains(&&**id))
        .collect();
    assert_eq!(
        outcomes,
        vec![
            processed("evt_a2b", "stale"),
            processed("evt_a4", "applied"),
            processed("evt_b4", "stale"),
            processed("evt_b5a", "applied"),
            processed("evt_c_a", "stale"),
        ]
    );
    assert_eq!(projected(&app, "cus_a").await, (4, "evt_a4".into()));
    assert_eq!(projected(&app, "cus_b").await, (5, "evt_b5a".into()));
    assert_eq!(projected(&app, "cus_c").await, (7, "evt_c_y".into()));
    assert_eq!(app.count("processed_events").await, 12);
    let metrics = app.metrics().await;
    assert!(
        metrics.contains(r#"wharf_worker_events_total{outcome="applied"} 9"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"wharf_worker_events_total{outcome="stale"} 3"#),
        "{metrics}"
    );
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requeued_event_in_a_batch_plans_its_deliveries_again_and_is_not_applied_twice() {
    // The route's target is never called: no relay runs in this app.
    let app = app_without_workers(&http_route_toml("http://127.0.0.1:9/unused", "")).await;
    let first = send(&app, "evt_r2", "cus_r", 2).await;
    assert_eq!(app.work_once().await, 1);
    assert_eq!(projected(&app, "cus_r").await, (2, "evt_r2".into()));
    // Its deliveries row goes missing; an operator requeues it along with two new events.
    execute(&app.db, "DELETE FROM deliveries").await;
    assert_eq!(
        wharf::operator::events::replay(&app.db, &[first], false)
            .await
            .unwrap()
            .events,
        1
    );
    send(&app, "evt_r1", "cus_r", 1).await;
    send(&app, "evt_r3", "cus_r", 3).await;
    assert_eq!(app.work_once().await, 3, "one batch");
    assert_eq!(
        events(&app).await,
        vec![
            processed("evt_r1", "stale"),
            processed("evt_r2", "applied"),
            processed("evt_r3", "applied"),
        ]
    );
    assert_eq!(projected(&app, "cus_r").await, (3, "evt_r3".into()));
    assert_eq!(app.count("processed_events").await, 3);
    assert_eq!(app.count("deliveries").await, 3, "one per event, again");
    let metrics = app.metrics().await;
    // The first pass applied evt_r2; the requeue reports its recorded outcome again.
    assert!(
        metrics.contains(r#"wharf_worker_events_total{outcome="applied"} 3"#),
        "{metrics}"
    );
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_failing_event_is_retried_alone_while_its_batch_neighbours_commit() {
    let app = app_without_workers("").await;
    // The business mutation fails for one object only.
    sqlx::raw_sql(
        "CREATE FUNCTION fail_one() RETURNS trigger AS $$
         BEGIN
             IF NEW.object_id = 'cus_bad' THEN RAISE EXCEPTION 'refused %', NEW.state; END IF;
             RETURN NEW;
         END $$ LANGUAGE plpgsql;
         CREATE TRIGGER fail_one BEFORE INSERT OR UPDATE ON object_state
         FOR EACH ROW EXECUTE FUNCTION fail_one();",
    )
    .execute(&app.db)
    .await
    .unwrap();
    for (id, object) in [
        ("evt_ok_1", "cus_ok_1"),
        ("evt_bad", "cus_bad"),
        ("evt_ok_2", "cus_ok_2"),
        ("evt_ok_3", "cus_ok_1"),
    ] {
        send(&app, id, object, 1).await;
    }
    // A neighbour's payload is gone too: it fails for good, on its own.
    execute(
        &app.db,
        "DELETE FROM webhook_payloads WHERE payload_ref =
           (SELECT raw_payload_ref FROM webhook_inbox WHERE provider_event_id = 'evt_ok_2')",
    )
    .await;
    assert_eq!(app.work_once().await, 4, "one batch");

    let rows: Vec<(String, String, i32, Option<String>)> = all_rows(
        &app.db,
        "SELECT provider_event_id, status, attempt_count, last_error FROM webhook_inbox
         ORDER BY provider_event_id",
    )
    .await;
    assert_eq!(
        rows,
        vec![
            (
                "evt_bad".into(),
                "PENDING".into(),
                1,
                Some("database error P0001".into())
            ),
            ("evt_ok_1".into(), "PROCESSED".into(), 1, None),
            (
                "evt_ok_2".into(),
                "FAILED".into(),
                1,
                Some("payload no longer stored (past retention)".into())
            ),
            ("evt_ok_3".into(), "PROCESSED".into(), 1, None),
        ]
    );
    assert_eq!(app.count("processed_events").await, 2);
    assert_eq!(projected(&app, "cus_ok_1").await, (1, "evt_ok_3".into()));

    // Fixed: the retry (due after its backoff) applies it.
    sqlx::raw_sql("DROP TRIGGER fail_one ON object_state")
        .execute(&app.db)
        .await
        .unwrap();
    execute(
        &app.db,
        "UPDATE webhook_inbox SET next_attempt_at = now() WHERE status = 'PENDING'",
    )
    .await;
    assert_eq!(app.work_once().await, 1);
    assert_eq!(projected(&app, "cus_bad").await, (1, "evt_bad".into()));
    assert_eq!(app.count("processed_events").await, 3);
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_objects_row_written_by_another_worker_mid_batch_is_not_overwritten() {
    let app = app_without_workers("").await;
    send(&app, "evt_n1", "cus_new", 1).await;
    send(&app, "evt_n3", "cus_new", 3).await;
    // Hold the worker after it has looked at the projection and found no row, just before
    // its writing statement (which inserts markers): SHARE lets reads through, not inserts.
    let markers = holding(&app.db, "LOCK TABLE processed_events IN SHARE MODE").await;
    let batch = app.spawn_worker();
    eventually("the worker waits to write", || async {
        scalar_i64(
            &app.db,
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = current_database() AND application_name = 'wharf-worker'
               AND wait_event_type = 'Lock'",
        )
        .await
            == 1
    })
    .await;
    // Meanwhile another worker commits the object's first row, at version 2.
    sqlx::query(
        "INSERT INTO object_state (provider, endpoint_id, object_id, version_kind,
             object_version, event_id, event_type, inbox_id)
         SELECT provider, endpoint_id, object_id, object_version_kind, $1, 'evt_n2',
                event_type, gen_random_uuid()
         FROM webhook_inbox WHERE provider_event_id = 'evt_n1'",
    )
    .bind(BASE + 2)
    .execute(&app.db)
    .await
    .unwrap();
    markers.commit().await.unwrap();
    assert_eq!(batch.await.unwrap(), 2);

    // Version 1 lost to the row that appeared; version 3 moved it. The batch was decided
    // again at once, not retried later.
    assert_eq!(
        events(&app).await,
        vec![processed("evt_n1", "stale"), processed("evt_n3", "applied"),]
    );
    assert_eq!(projected(&app, "cus_new").await, (3, "evt_n3".into()));
    let metrics = app.metrics().await;
    assert!(!metrics.contains(r#"outcome="retry""#), "{metrics}");
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_workers_draining_one_hot_object_converge_on_its_newest_version() {
    let app = app_without_workers(&http_route_toml("http://127.0.0.1:9/unused", "")).await;
    // Versions 1..=60 of one object, each next to an event about an object of its own,
    // arriving newest first.
    for version in (1..=60).rev() {
        send(&app, &format!("evt_hot_{version:02}"), "cus_hot", version).await;
        let cold = format!("cus_cold_{version}");
        send(&app, &format!("evt_cold_{version:02}"), &cold, version).await;
    }
    let pending = || {
        scalar_i64(
            &app.db,
            "SELECT count(*) FROM webhook_inbox WHERE status <> 'PROCESSED'",
        )
    };
    let workers = [app.worker(), app.worker(), app.worker()];
    // Batches of 32 race for the same projection row; one that loses a race is retried
    // after its backoff, so each worker goes on until nothing is left.
    let drained = workers.iter().map(|worker| async move {
        while worker.try_execute().await.unwrap() > 0 || pending().await > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    });
    futures::future::join_all(drained).await;
    assert_eq!(projected(&app, "cus_hot").await, (60, "evt_hot_60".into()));
    assert_eq!(app.count("object_state").await, 61);
    assert_eq!(app.count("processed_events").await, 120);
    assert_eq!(app.count("deliveries").await, 120);
    let applied = scalar_i64(
        &app.db,
        "SELECT count(*) FROM webhook_inbox
         WHERE object_id = 'cus_hot' AND outcome = 'applied'",
    )
    .await;
    assert!(applied >= 1, "the newest version at least");
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_projection_holds_each_document_as_sent_and_none_that_jsonb_cannot_store() {
    let app = app_without_workers(KEEP_DOCUMENTS).await;
    // An integer past 2^64 (a tree of f64s rounded it) and escapes; then a string with
    // U+0000, which jsonb refuses: its object still moves, with no document.
    let exact = format!(
        r#"{{"id":"evt_big","object":"event","type":"customer.updated","created":{},"data":{{"object":{{"id":"cus_big","object":"customer","amount":123456789012345678901234567890,"note":"caf\u00e9 \ud83d\ude00"}}}}}}"#,
        BASE + 1
    );
    let nul = format!(
        r#"{{"id":"evt_nul","object":"event","type":"customer.updated","created":{},"data":{{"object":{{"id":"cus_nul","object":"customer","note":"a\u0000b"}}}}}}"#,
        BASE + 1
    );
    for body in [&exact, &nul] {
        let header = stripe_header(STRIPE_SECRET, now(), body.as_bytes());
        let headers = [
            ("stripe-signature", header.as_str()),
            ("content-type", "application/json"),
        ];
        let answer = app.post("stripe", &headers, body.clone()).await;
        assert_eq!(answer.status, 200, "{:?}", answer.json);
    }
    assert_eq!(app.work_once().await, 2, "one batch");
    assert_eq!(
        events(&app).await,
        vec![
            processed("evt_big", "applied"),
            processed("evt_nul", "applied")
        ]
    );
    let (same, amount, note): (bool, String, String) = sqlx::query_as(
        "SELECT state = $1::jsonb, state->'data'->'object'->>'amount',
                state->'data'->'object'->>'note'
         FROM object_state WHERE object_id = 'cus_big'",
    )
    .bind(&exact)
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert!(same, "the document is the event as sent");
    assert_eq!(amount, "123456789012345678901234567890");
    assert_eq!(note, "café 😀");
    let (version, state): (i64, Option<serde_json::Value>) = sqlx::query_as(
        "SELECT object_version - $1, state FROM object_state WHERE object_id = 'cus_nul'",
    )
    .bind(BASE)
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!((version, state), (1, None));
    app.shutdown().await;
}

/// Sends event `id` about `cus_1` at version `BASE + version` to `endpoint`.
async fn send_to(app: &TestApp, endpoint: &str, id: &str, version: i64) -> Uuid {
    let (headers, body) = signed_stripe_object_event(id, "cus_1", BASE + version);
    let answer = app.post(endpoint, &refs(&headers), body).await;
    assert_eq!(answer.status, 200, "{:?}", answer.json);
    answer.json["inbox_id"].as_str().unwrap().parse().unwrap()
}

/// `cus_1`'s projection row at `endpoint`: (version, event id, inbox id, document).
async fn projection_row(
    app: &TestApp,
    endpoint: &str,
) -> (i64, String, Uuid, Option<serde_json::Value>) {
    sqlx::query_as(
        "SELECT object_version - $2, event_id, inbox_id, state FROM object_state
         WHERE endpoint_id = $1 AND object_id = 'cus_1'",
    )
    .bind(endpoint)
    .bind(BASE)
    .fetch_one(&app.db)
    .await
    .unwrap()
}

const DOCS_ENDPOINT: &str =
    "[[endpoint]]\nid = \"stripe-docs\"\nadapter = \"stripe\"\nsecret = \"stripe\"\n";

/// By default the projection orders events and keeps no copy of their bodies: `state` stays
/// NULL and the row's inbox id leads to the sealed payload. An endpoint may keep documents,
/// and one that stops keeping them clears each object's document as the object moves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_the_projection_keeps_no_copy_of_the_bodies_and_an_endpoint_may_keep_them() {
    let app = TestApp::builder()
        .workers(0)
        .add_endpoints(format!("{DOCS_ENDPOINT}projection_document = \"event\"\n"))
        .start()
        .await;
    // Version 3 to each endpoint, then 1 and 2: both stay at 3, only one keeps its document.
    let mut newest = Vec::new();
    for endpoint in ["stripe", "stripe-docs"] {
        newest.push(send_to(&app, endpoint, "evt_3", 3).await);
    }
    assert_eq!(app.work_once().await, 2);
    for endpoint in ["stripe", "stripe-docs"] {
        for (id, version) in [("evt_1", 1), ("evt_2", 2)] {
            send_to(&app, endpoint, id, version).await;
        }
    }
    assert_eq!(app.work_once().await, 4);
    assert_eq!(
        projection_row(&app, "stripe").await,
        (3, "evt_3".into(), newest[0], None),
        "ordered, without a copy of the body"
    );
    let (version, event, inbox_id, document) = projection_row(&app, "stripe-docs").await;
    assert_eq!((version, event.as_str(), inbox_id), (3, "evt_3", newest[1]));
    assert_eq!(document.expect("kept")["id"], "evt_3");
    let outcomes: Vec<(Option<String>, i64)> = all_rows(
        &app.db,
        "SELECT outcome, count(*) FROM webhook_inbox GROUP BY outcome ORDER BY outcome",
    )
    .await;
    assert_eq!(
        outcomes,
        vec![(Some("applied".into()), 2), (Some("stale".into()), 4)],
        "the ordering is the same either way"
    );
    // What the projection does not copy is still there, sealed, behind its inbox id.
    let payload_ref: Uuid =
        sqlx::query_scalar("SELECT raw_payload_ref FROM webhook_inbox WHERE inbox_id = $1")
            .bind(newest[0])
            .fetch_one(&app.db)
            .await
            .unwrap();
    let body = opened_payload(&app.db, payload_ref).await;
    assert!(String::from_utf8(body).unwrap().contains("\"evt_3\""));
    let url = app.config.database_url.clone();
    app.shutdown().await;

    // The endpoint stops keeping documents: its object's document goes with the next move.
    let app = TestApp::builder()
        .database_url(url)
        .workers(0)
        .add_endpoints(DOCS_ENDPOINT)
        .start()
        .await;
    let inbox_id = send_to(&app, "stripe-docs", "evt_4", 4).await;
    assert_eq!(app.work_once().await, 1);
    assert_eq!(
        projection_row(&app, "stripe-docs").await,
        (4, "evt_4".into(), inbox_id, None)
    );
    app.shutdown().await;
}
