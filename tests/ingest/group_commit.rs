//! Group commit and admission, from HTTP inward: requests that arrive together share one
//! acceptance transaction yet each gets its own answer after the commit; duplicates inside a
//! batch resolve to one row; a row the database refuses fails only its own request; past
//! capacity a request is refused with 503 `overloaded` before its signature is even checked.

use crate::support::{app::*, database::*, http::*, signing::*};
use std::collections::HashMap;

/// One writer that waits 100 ms for companions: requests sent together share a transaction.
const ONE_SLOW_WRITER: &str = "accept_writers = 1\naccept_batch_wait_us = 100000\n";

/// An app with one writer that gathers for 100 ms: requests sent together share a batch.
async fn one_slow_writer() -> TestApp {
    let builder = TestApp::builder().append_database_toml(ONE_SLOW_WRITER);
    builder.start().await
}

/// Sends a freshly signed Stripe event with this id, without waiting for its answer.
fn post_later(app: &TestApp, id: &str) -> tokio::task::JoinHandle<Answer> {
    let (headers, body) = signed_stripe_event(id);
    let (client, base) = (app.client.clone(), app.base.clone());
    tokio::spawn(
        async move { post(&client, &base, "stripe", &refs(&headers), body.into_bytes()).await },
    )
}

/// Sends every event at once and returns the answers in the same order.
async fn send_together(app: &TestApp, events: &[&str]) -> Vec<Answer> {
    let requests = events.iter().map(|id| post_later(app, id));
    let mut answers = Vec::new();
    for r in requests.collect::<Vec<_>>() {
        answers.push(r.await.unwrap());
    }
    answers
}

#[tokio::test]
async fn requests_sent_together_share_a_transaction_and_each_gets_its_own_answer() {
    let app = one_slow_writer().await;
    // Twelve distinct events, four of them sent twice in the same burst.
    let ids: Vec<String> = (0..12).map(|i| format!("evt_group_{i}")).collect();
    let mut burst: Vec<&str> = ids.iter().map(String::as_str).collect();
    burst.extend(&["evt_group_0", "evt_group_3", "evt_group_7", "evt_group_11"]);
    let answers = send_together(&app, &burst).await;

    let mut by_event: HashMap<&str, Vec<&Answer>> = HashMap::new();
    for (id, answer) in burst.iter().zip(&answers) {
        assert_eq!(answer.status, 200, "{answer:?}");
        by_event.entry(id).or_default().push(answer);
    }
    for (id, copies) in &by_event {
        let accepted = copies.iter().filter(|a| a.code() == "accepted").count();
        assert_eq!(accepted, 1, "{id}: exactly one copy is the accepted one");
        let inbox_ids: std::collections::HashSet<_> =
            copies.iter().map(|a| a.json["inbox_id"].clone()).collect();
        assert_eq!(inbox_ids.len(), 1, "{id}: every copy names the same row");
        let stored: uuid::Uuid =
            sqlx::query_scalar("SELECT inbox_id FROM webhook_inbox WHERE provider_event_id = $1")
                .bind(id)
                .fetch_one(&app.db)
                .await
                .unwrap();
        assert_eq!(copies[0].json["inbox_id"], stored.to_string());
    }
    assert_eq!(app.count("webhook_inbox").await, 12);
    assert_eq!(app.count("webhook_outbox").await, 12);
    // One payload per accepted request; a duplicate's body is not stored again.
    assert_eq!(app.count("webhook_payloads").await, 12);
    let unpaid = scalar_i64(
        &app.db,
        "SELECT count(*) FROM webhook_inbox i
         WHERE NOT EXISTS (SELECT 1 FROM webhook_payloads p WHERE p.payload_ref = i.raw_payload_ref)",
    )
    .await;
    assert_eq!(
        unpaid, 0,
        "every row's payload is the one it was accepted with"
    );

    // Sixteen requests took fewer transactions than requests.
    let text = app.metrics().await;
    let transactions = metric(&text, "wharf_accept_batch_events_count");
    let events = metric(&text, "wharf_accept_batch_events_sum");
    assert_eq!(events, 16.0, "{text}");
    assert!(
        transactions < 16.0,
        "{transactions} transactions for 16 requests"
    );

    // A later copy of a batched event is a duplicate of the same row.
    let again = send_together(&app, &["evt_group_5"]).await;
    assert_eq!(again[0].code(), "duplicate");
    assert_eq!(
        again[0].json["inbox_id"],
        by_event["evt_group_5"][0].json["inbox_id"]
    );
}

#[tokio::test]
async fn a_request_the_database_refuses_fails_alone_and_its_neighbours_commit() {
    let app = one_slow_writer().await;
    sqlx::raw_sql(
        "CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
           IF NEW.provider_event_id = 'evt_poison' THEN
             RAISE EXCEPTION 'refused by a test trigger';
           END IF;
           RETURN NEW;
         END $$;
         CREATE TRIGGER refuse_poison BEFORE INSERT ON webhook_inbox
           FOR EACH ROW EXECUTE FUNCTION refuse_poison();",
    )
    .execute(&app.db)
    .await
    .unwrap();

    let mut burst: Vec<String> = (0..10).map(|i| format!("evt_neighbour_{i}")).collect();
    burst.insert(4, "evt_poison".into());
    let burst: Vec<&str> = burst.iter().map(String::as_str).collect();
    let answers = send_together(&app, &burst).await;
    for (id, answer) in burst.iter().zip(&answers) {
        if *id == "evt_poison" {
            assert_eq!(answer.status, 503, "{answer:?}");
            assert_eq!(answer.code(), "storage_unavailable");
        } else {
            assert_eq!(answer.status, 200, "{id}: {answer:?}");
            assert_eq!(answer.code(), "accepted");
        }
    }
    assert_eq!(app.count("webhook_inbox").await, 10);
    assert_eq!(app.count("webhook_payloads").await, 10);
    let text = app.metrics().await;
    assert!(
        metric(&text, "wharf_accept_batch_splits_total") >= 1.0,
        "the refused batch was split: {text}"
    );
}

#[tokio::test]
async fn past_capacity_a_request_is_refused_before_its_signature_is_checked() {
    let app = TestApp::builder()
        .append_database_toml("commit_timeout_ms = 1900\n")
        .server_toml("min_in_flight = 2")
        .start()
        .await;
    // Hold the inbox so the two admitted requests wait on their commit.
    let lock = holding(&app.db, "LOCK TABLE webhook_inbox IN EXCLUSIVE MODE").await;
    let waiting = [
        post_later(&app, "evt_wait_1"),
        post_later(&app, "evt_wait_2"),
    ];
    crate::support::wait::eventually("two requests in flight", || async {
        metric(&app.metrics().await, "wharf_admission_in_flight") == 2.0
    })
    .await;

    // A third, with a signature that would be a 401 if anything looked at it.
    let (mut headers, body) = signed_stripe_event("evt_refused");
    for (name, value) in &mut headers {
        if name.eq_ignore_ascii_case("stripe-signature") {
            *value = "t=1,v1=00".into();
        }
    }
    let refused = app.post("stripe", &refs(&headers), body).await;
    assert_eq!(refused.status, 503, "{refused:?}");
    assert_eq!(refused.code(), "overloaded");
    assert!(refused.headers.contains_key("retry-after"));

    lock.rollback().await.unwrap();
    for w in waiting {
        let answer = w.await.unwrap();
        assert_eq!(answer.status, 200, "{answer:?}");
    }
    // Capacity is back: the next request is admitted and verified as usual.
    app.post_stripe("evt_after").await.assert_status(200);
    assert_eq!(app.count("webhook_inbox").await, 3);
    let text = app.metrics().await;
    assert!(
        text.contains(r#"wharf_requests_total{endpoint="stripe",outcome="overloaded"} 1"#),
        "{text}"
    );
}

#[tokio::test]
async fn events_of_one_batch_keep_their_spans_and_a_shared_event_keeps_its_owners() {
    use bytes::Bytes;
    use std::sync::Arc;
    use wharf::ingest::{Acceptance, CommitSettings, NewEvent, Store, Submission};
    use wharf::support::metrics::Metrics;

    let url = fresh_database().await;
    let metrics = Arc::new(Metrics::default());
    let keys = crate::support::app::test_payload_keys();
    let store = Store::connect_lazy(&url, 4, std::time::Duration::from_secs(2), keys)
        .unwrap()
        .with_group_commit(
            CommitSettings {
                writers: 1,
                max_wait: std::time::Duration::from_millis(200),
                ..CommitSettings::default()
            },
            None,
            Arc::clone(&metrics),
        );
    store.migrate().await.unwrap();
    let event = |id: &str, span: Option<(i64, i64)>| NewEvent {
        provider: "stripe".into(),
        endpoint_id: "stripe".into(),
        event_id: id.into(),
        event_type: "charge.succeeded".into(),
        object_id: None,
        object_version: None,
        created_at: None,
        payload_span: span,
    };
    let submission = |body: &'static str, events| Submission {
        payload: Bytes::from_static(body.as_bytes()),
        matched_secret_version: "v1".into(),
        events,
        received_at: time::OffsetDateTime::now_utc(),
        redelivery_window: time::Duration::days(7),
        trace_context: None,
    };
    // Two requests queued together; "evt_shared" is in both, with different spans.
    let (first, second) = tokio::join!(
        store.accept(submission(
            "[{\"a\":1},{\"s\":1}]",
            vec![
                event("evt_first", Some((1, 8))),
                event("evt_shared", Some((9, 16)))
            ],
        )),
        store.accept(submission(
            "[{\"s\":1},{\"b\":2}]",
            vec![event("evt_shared", Some((1, 8))), event("evt_second", None)],
        )),
    );
    let (first, second) = (first.unwrap(), second.unwrap());
    assert!(
        metrics
            .render()
            .contains("wharf_accept_batch_events_count 1"),
        "one transaction"
    );
    assert!(matches!(first[1], Acceptance::Accepted(_)));
    assert_eq!(second[0], Acceptance::Duplicate(first[1].inbox_id()));

    let db = sqlx::PgPool::connect(&url).await.unwrap();
    // Each row's span, and the body it points into: the shared event keeps its first
    // request's span and payload.
    type Stored = (String, Option<i64>, Option<i64>, uuid::Uuid);
    let refs: Vec<Stored> = all_rows(
        &db,
        "SELECT i.provider_event_id, i.payload_start, i.payload_end, p.payload_ref
         FROM webhook_inbox i JOIN webhook_payloads p ON p.payload_ref = i.raw_payload_ref
         ORDER BY i.provider_event_id",
    )
    .await;
    let mut rows = Vec::new();
    for (id, start, end, payload_ref) in refs {
        let body = crate::support::app::opened_payload(&db, payload_ref).await;
        rows.push((id, start, end, body));
    }
    let first_body = b"[{\"a\":1},{\"s\":1}]".to_vec();
    let second_body = b"[{\"s\":1},{\"b\":2}]".to_vec();
    assert_eq!(
        rows,
        vec![
            ("evt_first".into(), Some(1), Some(8), first_body.clone()),
            ("evt_second".into(), None, None, second_body),
            ("evt_shared".into(), Some(9), Some(16), first_body),
        ]
    );
    assert_eq!(
        scalar_i64(&db, "SELECT count(*) FROM webhook_payloads").await,
        2,
        "each body once"
    );
}

/// Acceptance finds stored copies by index, whatever the statistics were when its connection
/// prepared the statement. On a fresh database (no statistics yet) a join planned once had
/// Postgres read every inbox partition whole on each acceptance, so its cost grew with the
/// table: here 200 requests one after another would have read about 20,000 rows.
#[tokio::test]
async fn acceptance_reads_stored_events_by_index_not_by_scanning_the_inbox() {
    let app = TestApp::builder().workers(0).start().await;
    let n = 200_i64;
    for i in 0..n {
        let (headers, body) = signed_stripe_event(&format!("evt_scan_{i}"));
        let answer = post(
            &app.client,
            &app.base,
            "stripe",
            &refs(&headers),
            body.into_bytes(),
        )
        .await;
        assert_eq!(answer.status, 200, "{answer:?}");
    }
    let db = app.db.clone();
    // Its connections end, and with them Postgres publishes their table statistics.
    app.shutdown().await;
    let inbox = table_activity(&db, "webhook_inbox%", n).await;
    assert_eq!(inbox.written, n, "the inserts' statistics were published");
    assert!(
        inbox.seq_read < n,
        "{} inbox rows read by sequential scans for {n} acceptances",
        inbox.seq_read
    );
}

/// Acceptance statements of this database waiting for a lock (the test's inbox lock).
async fn acceptances_waiting(app: &TestApp) -> i64 {
    scalar_i64(
        &app.db,
        "SELECT count(*) FROM pg_stat_activity
         WHERE datname = current_database() AND pid <> pg_backend_pid()
           AND wait_event_type = 'Lock' AND query LIKE '%wharf_accept(%'",
    )
    .await
}

async fn until_waiting(app: &TestApp, transactions: i64, what: &str) {
    crate::support::wait::eventually(what, || async {
        acceptances_waiting(app).await == transactions
    })
    .await;
}

/// Locks the inbox, then sends `id`: its acceptance transaction stays in flight until the
/// returned lock is released.
async fn one_transaction_held(
    app: &TestApp,
    id: &str,
) -> (
    sqlx::Transaction<'static, sqlx::Postgres>,
    tokio::task::JoinHandle<Answer>,
) {
    let lock = holding(&app.db, "LOCK TABLE webhook_inbox IN EXCLUSIVE MODE").await;
    let first = post_later(app, id);
    until_waiting(app, 1, "the first transaction in flight").await;
    (lock, first)
}

#[tokio::test]
async fn while_a_transaction_is_in_flight_the_next_gathers_requests_before_taking_a_writer() {
    // Four writers; a quarter of a batch is two events; a gathering batch may wait a second.
    let app = TestApp::builder()
        .append_database_toml(
            "accept_writers = 4\naccept_batch_max = 8\naccept_gather_us = 1000000\n\
             commit_timeout_ms = 1900\n",
        )
        .start()
        .await;
    let (lock, first) = one_transaction_held(&app, "evt_in_flight").await;

    // A lone request does not take a second writer while the first commit is in flight...
    let second = post_later(&app, "evt_gathered_1");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(
        acceptances_waiting(&app).await,
        1,
        "the second request took a writer"
    );
    // ...until its batch holds a quarter of accept_batch_max: then it goes, first or not.
    let third = post_later(&app, "evt_gathered_2");
    until_waiting(&app, 2, "the gathered batch in flight").await;

    lock.rollback().await.unwrap();
    for answer in [first, second, third] {
        let answer = answer.await.unwrap();
        assert_eq!(answer.status, 200, "{answer:?}");
        assert_eq!(answer.code(), "accepted");
    }
    let text = app.metrics().await;
    assert_eq!(
        metric(&text, "wharf_accept_batch_events_sum"),
        3.0,
        "{text}"
    );
    assert_eq!(
        metric(&text, "wharf_accept_batch_events_count"),
        2.0,
        "three requests, two transactions: {text}"
    );
}

#[tokio::test]
async fn a_request_behind_a_transaction_that_hangs_takes_a_writer_of_its_own() {
    // The default gathering bound (5 ms): a commit held far longer does not hold the next.
    let app = TestApp::builder()
        .append_database_toml("commit_timeout_ms = 1900\n")
        .start()
        .await;
    let (lock, first) = one_transaction_held(&app, "evt_held").await;
    let second = post_later(&app, "evt_not_held");
    until_waiting(&app, 2, "the second transaction in flight").await;
    lock.rollback().await.unwrap();
    for answer in [first, second] {
        assert_eq!(answer.await.unwrap().status, 200);
    }
    assert_eq!(app.count("webhook_inbox").await, 2);
}
