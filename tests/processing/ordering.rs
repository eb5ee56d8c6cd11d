//! The projection follows object versions, never arrival order.

use std::time::Duration;

use crate::support::{app::*, database::*, http::*, signing::*};

const BASE: i64 = 1_764_000_000;

/// Sends one version of one object and returns nothing; the answer must be 2xx.
async fn send_version(app: &TestApp, object: &str, version: i64) {
    let (headers, body) =
        signed_stripe_object_event(&format!("evt_{object}_v{version}"), object, BASE + version);
    let answer = app.post("stripe", &refs(&headers), body).await;
    assert_eq!(answer.status, 200, "{:?}", answer.json);
}

async fn all_processed(app: &TestApp) {
    app.wait_count("webhook_inbox", "status <> 'PROCESSED'", 0)
        .await;
}

async fn projected(app: &TestApp, object: &str) -> (i64, String) {
    sqlx::query_as("SELECT object_version, event_id FROM object_state WHERE object_id = $1")
        .bind(object)
        .fetch_one(&app.db)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versions_three_one_two_end_at_three() {
    let app = TestApp::builder().workers(2).start().await;
    for version in [3, 1, 2] {
        send_version(&app, "cus_312", version).await;
        // Each arrives after the previous one was applied: arrival order is 3, 1, 2.
        all_processed(&app).await;
    }
    assert_eq!(
        projected(&app, "cus_312").await,
        (BASE + 3, "evt_cus_312_v3".into())
    );
    let outcomes: Vec<(String, String)> = all_rows(
        &app.db,
        "SELECT provider_event_id, outcome FROM webhook_inbox ORDER BY provider_event_id",
    )
    .await;
    assert_eq!(
        outcomes,
        vec![
            ("evt_cus_312_v1".into(), "stale".into()),
            ("evt_cus_312_v2".into(), "stale".into()),
            ("evt_cus_312_v3".into(), "applied".into()),
        ]
    );
    assert_eq!(app.count("processed_events").await, 3);
    app.shutdown().await;
}

fn permutations(items: &[i64]) -> Vec<Vec<i64>> {
    if items.len() <= 1 {
        return vec![items.to_vec()];
    }
    let mut out = Vec::new();
    for (i, first) in items.iter().enumerate() {
        let mut rest = items.to_vec();
        rest.remove(i);
        for mut tail in permutations(&rest) {
            tail.insert(0, *first);
            out.push(tail);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_permutation_of_five_versions_converges_on_the_highest() {
    let app = TestApp::builder().workers(2).start().await;
    let orders = permutations(&[1, 2, 3, 4, 5]);
    assert_eq!(orders.len(), 120);
    // Step k sends the k-th version of every permutation (one object each) and waits until
    // it is processed, so each object sees its versions arrive in its permutation's order.
    for step in 0..5 {
        let sends = orders.iter().enumerate().map(|(n, order)| {
            let app = &app;
            async move { send_version(app, &format!("cus_perm_{n}"), order[step]).await }
        });
        futures::future::join_all(sends).await;
        all_processed(&app).await;
    }
    for (n, order) in orders.iter().enumerate() {
        let object = format!("cus_perm_{n}");
        assert_eq!(
            projected(&app, &object).await,
            (BASE + 5, format!("evt_{object}_v5")),
            "permutation {order:?}"
        );
    }
    assert_eq!(app.count("processed_events").await, 600);
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_second_versions_order_by_event_id() {
    // Stripe reports `created` in seconds: two updates in one second tie, and the event id
    // decides, whatever the arrival order. The limit is documented.
    let app = TestApp::builder().workers(2).start().await;
    for id in ["evt_b", "evt_a"] {
        let (headers, body) = signed_stripe_object_event(id, "cus_tie", BASE);
        app.post("stripe", &refs(&headers), body)
            .await
            .assert_status(200);
        all_processed(&app).await;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(projected(&app, "cus_tie").await, (BASE, "evt_b".into()));
    app.shutdown().await;
}
