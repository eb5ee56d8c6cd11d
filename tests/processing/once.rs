//! Hundreds of concurrent copies of one event: one row, one mutation, one idempotency key.

use crate::support::{database::*, http::*, receiver::*, signing::*, wait::*};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_hundred_copies_apply_once_and_deliver_one_key() {
    let (receiver, app) = start_app_delivering_to(Behaviour::ok(), "").await;
    let (headers, body) = signed_stripe_event("evt_300_copies");
    let requests = (0..300).map(|_| {
        let (client, base, headers, body) = (
            app.client.clone(),
            app.base.clone(),
            headers.clone(),
            body.clone(),
        );
        async move { post(&client, &base, "stripe", &refs(&headers), body.into_bytes()).await }
    });
    let answers = futures::future::join_all(requests).await;
    let mut ids = std::collections::HashSet::new();
    for answer in &answers {
        assert_eq!(answer.status, 200, "{:?}", answer.json);
        ids.insert(answer.json["inbox_id"].as_str().unwrap().to_owned());
    }
    assert_eq!(ids.len(), 1, "every copy answers with the one inbox id");
    let inbox_id = ids.into_iter().next().unwrap();

    wait_until_converged(&app.db).await;
    assert_eq!(app.count("webhook_inbox").await, 1);
    assert_eq!(app.count("processed_events").await, 1);
    assert_eq!(app.count("object_state").await, 1);
    assert_eq!(app.count("deliveries").await, 1);
    let (event_id, state_inbox): (String, uuid::Uuid) = one_row(
        &app.db,
        "SELECT event_id, inbox_id FROM object_state WHERE object_id = 'pi_123'",
    )
    .await;
    assert_eq!(event_id, "evt_300_copies");
    assert_eq!(state_inbox.to_string(), inbox_id);

    // The mutation ran once: the worker counted one application and nothing else.
    let metrics = app.metrics().await;
    assert!(
        metrics.contains(r#"wharf_worker_events_total{outcome="applied"} 1"#),
        "{metrics}"
    );
    assert!(!metrics.contains(r#"outcome="stale""#), "{metrics}");

    let received = receiver.received();
    assert!(!received.is_empty());
    for r in &received {
        assert_eq!(r.idempotency_key, inbox_id);
        assert_eq!(r.event_id, "evt_300_copies");
        assert_eq!(r.body, body.as_bytes(), "the verified event as received");
    }
    app.shutdown().await;
}
