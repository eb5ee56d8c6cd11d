//! `[[route]]` entries reload live with the config file, as endpoints do: a route added sends
//! the next events to its target without a restart (a relay starts for the new target), a
//! route removed sends new events nowhere, and an invalid route (an unknown endpoint, a
//! signing secret set the secrets file lacks) is refused while the old routes keep delivering.

use std::time::Duration;

use crate::live_config::rewrite;
use crate::support::{app::*, database::*, http::*, receiver::*, wait::*};

/// Posts fresh events (`PREFIX_1`, ...) until `receiver` gets one of them; returns its id.
async fn delivered_eventually(app: &TestApp, receiver: &Receiver, prefix: &str) -> String {
    let mut n = 0;
    let mut sent = Vec::new();
    eventually(
        &format!("{prefix}: an event reaches the new target"),
        || {
            n += 1;
            let id = format!("{prefix}_{n}");
            sent.push(id.clone());
            let got: Vec<String> = receiver
                .received()
                .into_iter()
                .map(|r| r.event_id)
                .collect();
            let done = sent.iter().any(|s| got.contains(s));
            async move {
                if !done {
                    assert_eq!(app.post_stripe(&id).await.status, 200);
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
                done
            }
        },
    )
    .await;
    let got: Vec<String> = receiver
        .received()
        .into_iter()
        .map(|r| r.event_id)
        .collect();
    sent.into_iter().find(|s| got.contains(s)).unwrap()
}

/// Posts `id`, waits until it is processed, then until `receiver` has it.
async fn post_and_wait(app: &TestApp, receiver: &Receiver, id: &str) {
    assert_eq!(app.post_stripe(id).await.status, 200);
    eventually(&format!("{id} is delivered"), || {
        let got = receiver.received().iter().any(|r| r.event_id == id);
        async move { got }
    })
    .await;
}

async fn processed(app: &TestApp, id: &str) {
    wait_until_count(
        &app.db,
        &format!(
            "SELECT count(*) FROM webhook_inbox WHERE provider_event_id = '{id}' AND status = 'PROCESSED'"
        ),
        1,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_added_delivers_without_a_restart_and_one_removed_gets_nothing_new() {
    let old = Receiver::start(Behaviour::ok()).await;
    let new = Receiver::start(Behaviour::ok()).await;
    let app = TestApp::builder()
        .append_toml(&http_route_toml(&old.url, ""))
        .start()
        .await;
    post_and_wait(&app, &old, "evt_before").await;
    assert!(new.received().is_empty());

    // A route to a target no relay serves yet.
    let added = http_route_toml(&new.url, "");
    rewrite(&app.config.config_path, |t| t + &added);
    let first = delivered_eventually(&app, &new, "evt_added").await;
    // The old route still delivers too.
    eventually("the old route delivers the same event", || {
        let got = old.received().iter().any(|r| r.event_id == first);
        async move { got }
    })
    .await;

    // Removed: new events get no delivery to it.
    rewrite(&app.config.config_path, |t| t.replace(&added, ""));
    let mut n = 0;
    eventually("the removed route stops getting new events", || {
        n += 1;
        let id = format!("evt_removed_{n}");
        let app = &app;
        let new = &new;
        async move {
            assert_eq!(app.post_stripe(&id).await.status, 200);
            processed(app, &id).await;
            let rows = scalar_i64(
                &app.db,
                &format!(
                    "SELECT count(*) FROM deliveries d JOIN webhook_inbox i USING (inbox_id)
                     WHERE i.provider_event_id = '{id}'"
                ),
            )
            .await;
            rows == 1 && !new.received().iter().any(|r| r.event_id == id)
        }
    })
    .await;
    post_and_wait(&app, &old, "evt_after_removal").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !new.received()
            .iter()
            .any(|r| r.event_id == "evt_after_removal"),
        "a removed route got a new event"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_route_is_refused_and_the_old_routes_keep_delivering() {
    let old = Receiver::start(Behaviour::ok()).await;
    let other = Receiver::start(Behaviour::ok()).await;
    let app = TestApp::builder()
        .append_toml(&http_route_toml(&old.url, ""))
        .start()
        .await;
    post_and_wait(&app, &old, "evt_before").await;

    // A valid route beside one naming an endpoint that does not exist, then a route signing
    // with a set the secrets file lacks: each file refused whole.
    let unknown = format!(
        "{}\n[[route]]\nendpoint = \"no-such-endpoint\"\nevents = [\"*\"]\nsink = \"http\"\nurl = \"{}\"\n",
        http_route_toml(&other.url, ""),
        other.url
    );
    let unsigned = http_route_toml(&other.url, "signing_secret = \"no-such-set\"");
    for (n, bad) in [unknown, unsigned].into_iter().enumerate() {
        let original = std::fs::read_to_string(&app.config.config_path).unwrap();
        rewrite(&app.config.config_path, |t| t + &bad);
        eventually("the change is refused", || async {
            let metrics = app.get_admin("/metrics").await.body;
            metric(&metrics, "wharf_config_reloads_total{outcome=\"refused\"}") >= (n + 1) as f64
        })
        .await;
        let id = format!("evt_refused_{}", bad.len());
        post_and_wait(&app, &old, &id).await;
        processed(&app, &id).await;
        let rows = scalar_i64(
            &app.db,
            &format!(
                "SELECT count(*) FROM deliveries d JOIN webhook_inbox i USING (inbox_id)
                 WHERE i.provider_event_id = '{id}'"
            ),
        )
        .await;
        assert_eq!(rows, 1, "the refused route planned a delivery");
        assert!(other.received().is_empty());
        rewrite(&app.config.config_path, |_| original);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_separate_worker_starts_delivering_to_a_route_added_live() {
    // Ingest here, processing and deliveries in a `wharf worker` process on the same file.
    let old = Receiver::start(Behaviour::ok()).await;
    let new = Receiver::start(Behaviour::ok()).await;
    let app = TestApp::builder()
        .workers(0)
        .append_toml(&http_route_toml(&old.url, ""))
        .start()
        .await;
    let log = app.config.dir.path().join("worker.log");
    let worker = crate::support::process::ServeProcess::start_with(
        &["worker", "--count", "1"],
        &app.config.config_path,
        Some(&log),
        &[],
    )
    .await;
    post_and_wait(&app, &old, "evt_before").await;
    rewrite(&app.config.config_path, |t| {
        t + &http_route_toml(&new.url, "")
    });
    delivered_eventually(&app, &new, "evt_worker_added").await;
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(text.contains("route added"), "{text}");
    worker.stop().await;
}
