//! Downstream failures and poison events: retried with backoff, `FAILED` with a redacted
//! diagnostic when retrying cannot help, replayable after a fix.

use std::time::Duration;

use wharf::config::Config;
use wharf::server::ProcessingHost;

use crate::support::process::wharf_events;
use crate::support::{app::*, database::*, http::*, receiver::*, signing::*, wait::*};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_downstream_answering_500_then_200_gets_the_event_twice_with_one_key() {
    let (receiver, app) = start_app_delivering_to(Behaviour::fails_once(), "").await;
    app.post_stripe("evt_500_then_200").await.assert_status(200);
    wait_until_converged(&app.db).await;
    let (attempts, error): (i32, Option<String>) =
        one_row(&app.db, "SELECT attempt_count, last_error FROM deliveries").await;
    assert_eq!(attempts, 2);
    assert_eq!(error, None);
    let received = receiver.received();
    assert_eq!(received.len(), 2);
    assert_eq!(received[0].idempotency_key, received[1].idempotency_key);
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_downstream_that_never_answers_in_time_ends_failed() {
    let (_receiver, app) = start_app_delivering_to(
        always(200, Duration::from_secs(5)),
        "timeout_ms = 200\nmax_attempts = 3",
    )
    .await;
    app.post_stripe("evt_timeout").await.assert_status(200);
    app.wait_count("deliveries", "status = 'FAILED'", 1).await;
    let (attempts, error): (i32, String) =
        one_row(&app.db, "SELECT attempt_count, last_error FROM deliveries").await;
    assert_eq!(attempts, 3);
    assert_eq!(error, "no answer within 200ms");
    // The event itself was processed; only its delivery failed.
    assert_eq!(
        scalar_i64(
            &app.db,
            "SELECT count(*) FROM webhook_inbox WHERE status = 'PROCESSED'"
        )
        .await,
        1
    );
    app.shutdown().await;
}

/// The stripe endpoint removed from a copy of the config: a worker there cannot process it.
fn without_stripe_endpoint(config: &std::path::Path) -> std::path::PathBuf {
    let text = std::fs::read_to_string(config).unwrap();
    let block = "[[endpoint]]\nid = \"stripe\"\nadapter = \"stripe\"\nsecret = \"stripe\"\n";
    assert!(text.contains(block));
    let broken = config.with_file_name("broken.toml");
    std::fs::write(&broken, text.replace(block, "")).unwrap();
    broken
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_event_ends_failed_and_is_replayed_after_the_fix() {
    let app = TestApp::builder().workers(0).start().await;
    let config = app.config.config_path.clone();
    let broken = ProcessingHost::start(
        Config::load(&without_stripe_endpoint(&config)).unwrap(),
        1,
        None,
    )
    .await
    .unwrap();
    let (headers, body) = signed_stripe_event("evt_poison");
    let answer = app.post("stripe", &refs(&headers), body.clone()).await;
    assert_eq!(answer.status, 200);
    let inbox_id = answer.json["inbox_id"].as_str().unwrap().to_owned();
    app.wait_count("webhook_inbox", "status = 'FAILED'", 1)
        .await;
    broken.shutdown().await.unwrap();

    // The operator finds it, with a diagnostic and no payload.
    let listed = wharf_events(&["list", "--status", "failed"], &config);
    assert!(listed.contains(&inbox_id), "{listed}");
    let shown: serde_json::Value =
        serde_json::from_str(&wharf_events(&["show", &inbox_id], &config)).unwrap();
    assert_eq!(shown["status"], "FAILED");
    assert_eq!(shown["attempt_count"], 1, "poison: no retries");
    assert_eq!(
        shown["last_error"],
        "endpoint \"stripe\" is not configured on this worker"
    );
    assert!(shown.get("payload").is_none());
    assert!(
        !shown.to_string().contains("amount"),
        "no payload unless asked"
    );
    let with_payload: serde_json::Value =
        serde_json::from_str(&wharf_events(&["show", &inbox_id, "--payload"], &config)).unwrap();
    // A JSON body is shown as JSON (indented), not as an escaped string.
    let body_json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(with_payload["payload"]["json"], body_json);

    // After the fix (a worker with the right config), a replay processes it.
    let fixed = ProcessingHost::start(Config::load(&config).unwrap(), 1, None)
        .await
        .unwrap();
    let replayed: serde_json::Value =
        serde_json::from_str(&wharf_events(&["replay", &inbox_id], &config)).unwrap();
    assert_eq!(replayed["events"], 1);
    wait_until_converged(&app.db).await;
    assert_eq!(app.count("processed_events").await, 1);
    assert_eq!(app.count("object_state").await, 1);
    fixed.shutdown().await.unwrap();
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_failures_back_off_until_the_endpoint_attempts_run_out() {
    let app = TestApp::builder()
        .add_endpoints(
            "[[endpoint]]\nid = \"stripe-strict\"\nadapter = \"stripe\"\nsecret = \"stripe\"\nmax_attempts = 3\n",
        )
        .workers(1)
        .start()
        .await;
    // The business mutation fails inside the database, with a message quoting row data.
    sqlx::raw_sql(
        "CREATE FUNCTION fail_projection() RETURNS trigger AS $$
         BEGIN RAISE EXCEPTION 'refused state %', NEW.state; END $$ LANGUAGE plpgsql;
         CREATE TRIGGER fail_projection BEFORE INSERT OR UPDATE ON object_state
         FOR EACH ROW EXECUTE FUNCTION fail_projection();",
    )
    .execute(&app.db)
    .await
    .unwrap();
    let (headers, body) = signed_stripe_event("evt_transient");
    let answer = app.post("stripe-strict", &refs(&headers), body).await;
    assert_eq!(answer.status, 200);
    app.wait_count("webhook_inbox", "status = 'FAILED'", 1)
        .await;
    let (attempts, error): (i32, String) = one_row(
        &app.db,
        "SELECT attempt_count, last_error FROM webhook_inbox",
    )
    .await;
    assert_eq!(attempts, 3, "the endpoint's max_attempts");
    assert_eq!(error, "database error P0001", "redacted: no row data");
    assert_eq!(
        app.count("processed_events").await,
        0,
        "rolled back each time"
    );

    sqlx::raw_sql("DROP TRIGGER fail_projection ON object_state")
        .execute(&app.db)
        .await
        .unwrap();
    let id: uuid::Uuid = answer.json["inbox_id"].as_str().unwrap().parse().unwrap();
    let replayed = wharf::operator::events::replay(&app.db, &[id], false)
        .await
        .unwrap();
    assert_eq!(replayed.events, 1);
    wait_until_converged(&app.db).await;
    assert_eq!(app.count("object_state").await, 1);
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_that_never_answers_does_not_hold_up_the_others() {
    let dead = Receiver::start(always(200, Duration::from_secs(60))).await;
    let healthy = Receiver::start(Behaviour::ok()).await;
    let app = TestApp::builder()
        .workers(2)
        .append_toml(&http_route_toml(&dead.url, "timeout_ms = 30000"))
        .append_toml(&http_route_toml(&healthy.url, ""))
        .start()
        .await;
    // More events than one relay sends at once.
    const EVENTS: usize = 60;
    for n in 0..EVENTS {
        app.post_stripe(&format!("evt_lanes_{n}"))
            .await
            .assert_status(200);
    }
    eventually("the healthy target has every event", || async {
        healthy.received().len() >= EVENTS
    })
    .await;
    let unresolved: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM deliveries WHERE target = $1 AND status = 'PENDING'",
    )
    .bind(&dead.url)
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(
        unresolved, EVENTS as i64,
        "the dead target's deliveries are still hanging"
    );
    // A graceful stop gives the hanging claims back rather than waiting out the timeout.
    let stopped = std::time::Instant::now();
    app.shutdown().await;
    assert!(stopped.elapsed() < Duration::from_secs(10));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_are_failed_attempts_and_never_followed() {
    const REDIRECTS: [u16; 5] = [301, 302, 303, 307, 308];
    let mut receivers = Vec::new();
    let mut app = TestApp::builder().workers(2);
    for status in REDIRECTS {
        let receiver = Receiver::start(always(status, Duration::ZERO)).await;
        app = app.append_toml(&http_route_toml(&receiver.url, "max_attempts = 2"));
        receivers.push(receiver);
    }
    let app = app.start().await;
    let answer = app.post_stripe("evt_redirected").await;
    assert_eq!(answer.status, 200);
    wait_until_count(
        &app.db,
        "SELECT count(*) FROM deliveries WHERE status = 'FAILED'",
        REDIRECTS.len() as i64,
    )
    .await;

    let id: uuid::Uuid = answer.json["inbox_id"].as_str().unwrap().parse().unwrap();
    let shown = wharf::operator::events::show(&app.db, id, None)
        .await
        .unwrap()
        .unwrap();
    for (status, receiver) in REDIRECTS.iter().zip(&receivers) {
        let delivery = shown["deliveries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["target"] == receiver.url.as_str())
            .unwrap();
        assert_eq!(delivery["status"], "FAILED");
        assert_eq!(delivery["sent_at"], serde_json::Value::Null);
        assert_eq!(delivery["attempt_count"], 2, "retried like any failure");
        assert_eq!(
            delivery["last_error"],
            format!("answered HTTP {status} (redirects are not followed)")
        );
        assert_eq!(receiver.received().len(), 2);
        assert_eq!(
            receiver.landed(),
            0,
            "the redirect to /landing was followed"
        );
    }
    app.shutdown().await;
}
