//! Hundreds of concurrent copies of one event across two `wharf serve` processes sharing one
//! database: every answer 2xx, exactly one inbox row and one outbox row.

use crate::support::{app::*, http::*, process::*, signing::*};

#[tokio::test]
async fn three_hundred_copies_across_two_processes_make_one_row() {
    let written = TestApp::builder().write_config().await;
    let db = sqlx::PgPool::connect(&written.database_url).await.unwrap();
    let first = ServeProcess::start(&written.config_path, None).await;
    let second = ServeProcess::start(&written.config_path, None).await;

    let (headers, body) = signed_stripe_event("evt_storm");
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let mut requests = Vec::new();
    for i in 0..300 {
        let base = if i % 2 == 0 {
            first.base.clone()
        } else {
            second.base.clone()
        };
        let (client, headers, body) = (client.clone(), headers.clone(), body.clone());
        requests.push(tokio::spawn(async move {
            post(&client, &base, "stripe", &refs(&headers), body.into_bytes()).await
        }));
    }
    let mut ids = std::collections::HashSet::new();
    let mut accepted = 0;
    for request in requests {
        let answer = request.await.unwrap();
        assert_eq!(answer.status, 200, "{answer:?}");
        accepted += usize::from(answer.code() == "accepted");
        ids.insert(answer.json["inbox_id"].as_str().unwrap().to_owned());
    }
    assert_eq!(accepted, 1, "exactly one copy is the accepted one");
    assert_eq!(ids.len(), 1, "every copy names the same inbox row");
    let count = |t: &'static str| {
        let db = db.clone();
        async move {
            sqlx::query_scalar::<_, i64>(&format!("SELECT count(*) FROM {t}"))
                .fetch_one(&db)
                .await
                .unwrap()
        }
    };
    assert_eq!(count("webhook_inbox").await, 1);
    assert_eq!(count("webhook_outbox").await, 1);
    assert_eq!(count("webhook_payloads").await, 1);
}
