//! Events of a batch (one body, several events) each have their own byte span of the body:
//! the body is stored once, and the projection, the deliveries and `wharf events show
//! --payload` see only the event's span; an event without one sees the whole body.
//!
//! No adapter declares spans yet (WIT 0.2 will), so the submissions here go straight to
//! `Store::accept`, the interface the pipeline calls after verification.

use std::time::Duration;

use bytes::Bytes;
use uuid::Uuid;
use wharf::ingest::{Acceptance, NewEvent, Store, StoredVersion, Submission};
use wharf::processing::{DeliveryRelay, Lane, Worker};

use crate::support::process::wharf_events;
use crate::support::{app::*, database::*, receiver::*};

const ITEM_A: &str = r#"{"id":"evt_span_a","type":"charge.succeeded","object":"ch_a","amount":1}"#;
const ITEM_B: &str = r#"{"id":"evt_span_b","type":"charge.failed","object":"ch_b","amount":2}"#;

/// A SendGrid-style batch: a JSON array of the two items, with whitespace around them so a
/// span that were off by one would not be valid JSON.
fn batch_body() -> String {
    format!("[ {ITEM_A} ,\n  {ITEM_B} ]")
}

/// The byte span of `item` in `body`.
fn span_of(body: &str, item: &str) -> (i64, i64) {
    let start = body.find(item).unwrap();
    (start as i64, (start + item.len()) as i64)
}

fn event(id: &str, object: &str, span: Option<(i64, i64)>) -> NewEvent {
    NewEvent {
        provider: "stripe".into(),
        endpoint_id: "stripe".into(),
        event_id: id.into(),
        event_type: "charge.succeeded".into(),
        object_id: Some(object.into()),
        object_version: Some(StoredVersion::Sequence(1)),
        created_at: None,
        payload_span: span,
    }
}

fn store(app: &TestApp) -> Store {
    Store::connect_lazy(
        &app.config.database_url,
        2,
        Duration::from_secs(2),
        test_payload_keys(),
    )
    .unwrap()
}

async fn accept(store: &Store, body: &str, events: Vec<NewEvent>) -> Vec<Acceptance> {
    store
        .accept(Submission {
            payload: Bytes::from(body.to_owned()),
            matched_secret_version: "v1".into(),
            events,
            received_at: time::OffsetDateTime::now_utc(),
            redelivery_window: time::Duration::days(7),
            trace_context: None,
        })
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_event_of_a_batch_is_processed_delivered_and_shown_as_its_own_span() {
    let receiver = Receiver::start(Behaviour::ok()).await;
    let app = TestApp::builder()
        .workers(0)
        .append_toml("projection_document = \"event\"\n")
        .append_toml(&http_route_toml(&receiver.url, ""))
        .start()
        .await;
    let body = batch_body();
    let (a, b) = (span_of(&body, ITEM_A), span_of(&body, ITEM_B));
    let accepted = accept(
        &store(&app),
        &body,
        vec![
            event("evt_span_a", "ch_a", Some(a)),
            event("evt_span_b", "ch_b", Some(b)),
            // Without a span: the whole body, as every event was before spans.
            event("evt_whole", "ch_whole", None),
        ],
    )
    .await;
    assert!(
        accepted
            .iter()
            .all(|a| matches!(a, Acceptance::Accepted(_))),
        "{accepted:?}"
    );
    let ids: Vec<Uuid> = accepted.iter().map(|a| a.inbox_id()).collect();

    // Stored: one payload, three rows pointing into it, each with its span.
    assert_eq!(app.count("webhook_payloads").await, 1);
    let rows: Vec<(String, Option<i64>, Option<i64>)> = all_rows(
        &app.db,
        "SELECT provider_event_id, payload_start, payload_end FROM webhook_inbox
         ORDER BY provider_event_id",
    )
    .await;
    assert_eq!(
        rows,
        vec![
            ("evt_span_a".into(), Some(a.0), Some(a.1)),
            ("evt_span_b".into(), Some(b.0), Some(b.1)),
            ("evt_whole".into(), None, None),
        ]
    );
    assert_eq!(
        scalar_i64(
            &app.db,
            "SELECT count(DISTINCT raw_payload_ref) FROM webhook_inbox"
        )
        .await,
        1
    );

    // Processed: each projection row holds its own item's document.
    assert_eq!(app.work_once().await, 3);
    let processing = app.processing();
    let states: Vec<(String, serde_json::Value)> = all_rows(
        &app.db,
        "SELECT object_id, state FROM object_state ORDER BY object_id",
    )
    .await;
    let json = |s: &str| serde_json::from_str::<serde_json::Value>(s).unwrap();
    assert_eq!(
        states,
        vec![
            ("ch_a".into(), json(ITEM_A)),
            ("ch_b".into(), json(ITEM_B)),
            ("ch_whole".into(), json(&body)),
        ]
    );

    // Delivered: each POST carries exactly the event's bytes.
    let relay = DeliveryRelay::new(processing, Lane::All);
    assert_eq!(relay.try_execute().await.unwrap(), 3);
    let mut received: Vec<(String, Vec<u8>)> = receiver
        .received()
        .into_iter()
        .map(|r| (r.event_id, r.body))
        .collect();
    received.sort();
    assert_eq!(
        received,
        vec![
            ("evt_span_a".into(), ITEM_A.as_bytes().to_vec()),
            ("evt_span_b".into(), ITEM_B.as_bytes().to_vec()),
            ("evt_whole".into(), body.as_bytes().to_vec()),
        ]
    );

    // Shown: the operator sees the event's span, and where it lies in the request's body.
    let config = &app.config.config_path;
    for (id, expected, span) in [
        (ids[0], ITEM_A, Some(a)),
        (ids[1], ITEM_B, Some(b)),
        (ids[2], body.as_str(), None),
    ] {
        let shown: serde_json::Value = serde_json::from_str(&wharf_events(
            &["show", &id.to_string(), "--payload"],
            config,
        ))
        .unwrap();
        let expected: serde_json::Value = serde_json::from_str(expected).unwrap();
        assert_eq!(shown["payload"]["json"], expected, "{shown}");
        assert_eq!(shown["payload_start"], serde_json::json!(span.map(|s| s.0)));
        assert_eq!(shown["payload_end"], serde_json::json!(span.map(|s| s.1)));
    }
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_span_past_the_stored_body_is_poison_and_an_inverted_one_is_refused() {
    let app = TestApp::builder().workers(0).start().await;
    let store = store(&app);
    // The pipeline validates spans against the body; a row that escaped it (or a body
    // rewritten since) fails for good rather than being retried or sent truncated.
    let body = batch_body();
    let past = (2, body.len() as i64 + 1);
    let accepted = accept(
        &store,
        &body,
        vec![event("evt_past", "ch_past", Some(past))],
    )
    .await;
    let id = accepted[0].inbox_id();
    let processing = app.processing();
    assert_eq!(Worker::new(processing).try_execute().await.unwrap(), 1);
    let (status, attempts, error): (String, i32, Option<String>) = sqlx::query_as(
        "SELECT status, attempt_count, last_error FROM webhook_inbox WHERE inbox_id = $1",
    )
    .bind(id)
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(status, "FAILED");
    assert_eq!(attempts, 1, "poison: not retried");
    assert_eq!(
        error.as_deref(),
        Some("event span lies outside the stored payload")
    );
    assert_eq!(app.count("object_state").await, 0);
    let shown = wharf::operator::events::show(&app.db, id, Some(&test_payload_keys()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        shown["payload"],
        serde_json::json!({ "error": "event span lies outside the stored payload" }),
        "never truncated"
    );

    // The table refuses a span that ends before it starts (or half a span).
    let inverted = store
        .accept(Submission {
            payload: Bytes::from(body.clone()),
            matched_secret_version: "v1".into(),
            events: vec![event("evt_inverted", "ch_inverted", Some((5, 3)))],
            received_at: time::OffsetDateTime::now_utc(),
            redelivery_window: time::Duration::days(7),
            trace_context: None,
        })
        .await;
    let error = inverted.unwrap_err().to_string();
    assert!(
        error.contains("webhook_inbox_payload_span"),
        "refused by the CHECK: {error}"
    );
    assert_eq!(app.count("webhook_inbox").await, 1);
    app.shutdown().await;
}
