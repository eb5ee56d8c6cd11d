//! What a test app answered and stored, as the provider tests compare it: status and code,
//! the matched secret version, the event rows and their payload spans.

use super::app::TestApp;
use super::http::{Answer, refs};

/// POSTs and returns the status and code.
pub async fn status_code(
    app: &TestApp,
    endpoint: &str,
    headers: &[(String, String)],
    body: impl Into<Vec<u8>>,
) -> (u16, String) {
    let answer = app.post(endpoint, &refs(headers), body).await;
    (answer.status, answer.code().to_owned())
}

/// POSTs and asserts the status and code; the answer.
pub async fn expect_answer(
    app: &TestApp,
    endpoint: &str,
    headers: &[(String, String)],
    body: impl Into<Vec<u8>>,
    want: (u16, &str),
) -> Answer {
    let answer = app.post(endpoint, &refs(headers), body).await;
    assert_eq!((answer.status, answer.code()), want, "{answer:?}");
    answer
}

/// The secret version that verified `endpoint`'s one stored event.
pub async fn matched_version(app: &TestApp, endpoint: &str) -> String {
    sqlx::query_scalar("SELECT matched_secret_version FROM webhook_inbox WHERE endpoint_id = $1")
        .bind(endpoint)
        .fetch_one(&app.db)
        .await
        .unwrap()
}

/// The one stored event's id, type and matched secret version.
pub async fn only_event(app: &TestApp) -> (String, String, String) {
    sqlx::query_as(
        "SELECT provider_event_id, event_type, matched_secret_version FROM webhook_inbox",
    )
    .fetch_one(&app.db)
    .await
    .unwrap()
}

/// Every stored event's id and the bytes of `body` its payload span covers, in body order.
pub async fn spans<'a>(app: &TestApp, body: &'a [u8]) -> Vec<(String, &'a [u8])> {
    let rows: Vec<(String, i64, i64)> = sqlx::query_as(
        "SELECT provider_event_id, payload_start, payload_end FROM webhook_inbox ORDER BY payload_start",
    )
    .fetch_all(&app.db)
    .await
    .unwrap();
    rows.into_iter()
        .map(|(id, a, z)| (id, &body[a as usize..z as usize]))
        .collect()
}
