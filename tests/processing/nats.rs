//! The `nats` sink: a JetStream publish with `Nats-Msg-Id: <inbox_id>`, acknowledged by the
//! stream before the delivery is marked sent; resends are dropped by the stream.

use crate::support::{app::*, http::*, nats::*, signing::*, wait::*};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_deliveries_carry_the_inbox_id_and_are_deduplicated() {
    let scope = NatsScope::new();
    let (subject, stream_name) = scope.deliveries_stream().await;
    let js = NatsScope::jetstream().await;

    let route = nats_route_toml("*", r#""payment_intent.*""#, &subject);
    let app = TestApp::builder()
        .workers(2)
        .append_toml(&scope.toml())
        .append_toml(&route)
        .start()
        .await;
    let (headers, body) = signed_stripe_event("evt_nats_1");
    for _ in 0..3 {
        app.post("stripe", &refs(&headers), body.clone())
            .await
            .assert_status(200);
    }
    wait_until_converged(&app.db).await;
    let inbox_id: uuid::Uuid = sqlx::query_scalar("SELECT inbox_id FROM webhook_inbox")
        .fetch_one(&app.db)
        .await
        .unwrap();

    // An operator resends the delivery: the stream drops the copy inside its window.
    let replayed = wharf::operator::events::replay(&app.db, &[inbox_id], true)
        .await
        .unwrap();
    assert_eq!(replayed.deliveries, 1);
    wait_until_converged(&app.db).await;
    let attempts: i32 = sqlx::query_scalar("SELECT attempt_count FROM deliveries")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(attempts, 1, "a fresh attempt after the replay");

    let mut stream = js.get_stream(&stream_name).await.unwrap();
    assert_eq!(stream.info().await.unwrap().state.messages, 1);
    let message = stream.get_raw_message(1).await.unwrap();
    assert_eq!(
        message.headers.get("Nats-Msg-Id").map(|v| v.as_str()),
        Some(inbox_id.to_string().as_str())
    );
    assert_eq!(
        message.headers.get("Wharf-Event-Id").map(|v| v.as_str()),
        Some("evt_nats_1")
    );
    assert_eq!(&message.payload[..], body.as_bytes());

    app.shutdown().await;
    let _ = js.delete_stream(&stream_name).await;
    scope.cleanup().await;
}
