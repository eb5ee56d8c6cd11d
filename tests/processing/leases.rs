//! Leases: a claim whose worker died is taken over once it expires, and not before.

use std::time::Duration;

use crate::support::{app::*, database::*};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_lease_is_claimed_again_and_a_live_one_is_not() {
    // No workers in the server: the test drives one step at a time.
    let app = TestApp::builder().workers(0).start().await;
    for id in ["evt_lease_expired", "evt_lease_live"] {
        app.post_stripe(id).await.assert_status(200);
    }
    // Both claimed by a worker that then died: one lease is over, the other runs 3 s more.
    execute(
        &app.db,
        "UPDATE webhook_inbox SET status = 'PROCESSING', attempt_count = 1,
             lease_until = now() + CASE WHEN provider_event_id = 'evt_lease_live'
                                        THEN interval '3 seconds' ELSE interval '-1 second' END,
             next_attempt_at = now() + CASE WHEN provider_event_id = 'evt_lease_live'
                                        THEN interval '3 seconds' ELSE interval '-1 second' END",
    )
    .await;

    let worker = app.worker();
    assert_eq!(
        worker.try_execute().await.unwrap(),
        1,
        "only the expired lease"
    );
    let status = |id: &'static str| {
        let db = app.db.clone();
        async move {
            sqlx::query_as::<_, (String, i32)>(
                "SELECT status, attempt_count FROM webhook_inbox WHERE provider_event_id = $1",
            )
            .bind(id)
            .fetch_one(&db)
            .await
            .unwrap()
        }
    };
    assert_eq!(status("evt_lease_expired").await, ("PROCESSED".into(), 2));
    assert_eq!(status("evt_lease_live").await, ("PROCESSING".into(), 1));
    assert_eq!(
        worker.try_execute().await.unwrap(),
        0,
        "the live lease is left alone"
    );

    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        worker.try_execute().await.unwrap(),
        1,
        "taken over once expired"
    );
    assert_eq!(status("evt_lease_live").await, ("PROCESSED".into(), 2));
    assert_eq!(app.count("processed_events").await, 2);
    app.shutdown().await;
}
