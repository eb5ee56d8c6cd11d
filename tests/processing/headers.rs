//! Event ids and types that cannot be header values (stored by older versions, which accepted
//! any text): their deliveries fail for good at once, on every sink, instead of panicking
//! and being retaken after every lease.

use wharf::processing::{DeliveryRelay, Lane};

use crate::support::{app::*, database::*, nats::*, receiver::*};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_whose_headers_cannot_be_built_fail_without_a_panic() {
    let scope = NatsScope::new();
    let subject = format!("{}.deliveries", scope.prefix.trim_end_matches(".accepted"));
    let receiver = Receiver::start(Behaviour::ok()).await;
    let nats_route = nats_route_toml("*", r#""*""#, &subject);
    let app = TestApp::builder()
        .workers(0)
        // Such rows come from before links: read only under the upgrade setting.
        .payloads_toml("upgrade_legacy_rows = true")
        .append_toml(&scope.toml())
        .append_toml(&http_route_toml(&receiver.url, ""))
        .append_toml(&nats_route)
        .start()
        .await;
    let answer = app.post_stripe("evt_crlf").await;
    assert_eq!(answer.status, 200);
    let inbox_id: uuid::Uuid = answer.json["inbox_id"].as_str().unwrap().parse().unwrap();
    // As an earlier version could have stored it.
    execute(
        &app.db,
        "UPDATE webhook_inbox SET event_type = event_type || E'\\r\\nInjected: 1',
                                  provider_event_id = E'evt_crlf\\r\\nInjected: 1',
                                  payload_link_key = NULL, payload_link = NULL",
    )
    .await;

    assert_eq!(app.work_once().await, 1);
    let processing = app.processing();
    assert_eq!(app.count("deliveries").await, 2);
    let relay = DeliveryRelay::new(processing, Lane::All);
    assert_eq!(relay.try_execute().await.unwrap(), 2);
    assert_eq!(
        relay.try_execute().await.unwrap(),
        0,
        "nothing left to retake"
    );

    let shown = wharf::operator::events::show(&app.db, inbox_id, None)
        .await
        .unwrap()
        .unwrap();
    let deliveries = shown["deliveries"].as_array().unwrap();
    assert_eq!(deliveries.len(), 2);
    for d in deliveries {
        assert_eq!(d["status"], "FAILED", "{d}");
        assert_eq!(d["attempt_count"], 1, "not retried: {d}");
        assert_eq!(
            d["last_error"],
            "Wharf-Event-Id cannot be sent as a header value (it contains control characters)"
        );
    }
    assert_eq!(receiver.arrived(), 0);
    app.shutdown().await;
    scope.cleanup().await;
}
