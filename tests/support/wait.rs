//! Polling until the system converges.

use std::time::Duration;

use sqlx::PgPool;

use super::database::scalar_i64;

/// Polls `check` until it holds (30 s at most): convergence, not timing, is under test.
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while tokio::time::Instant::now() < deadline {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("not converged within 30 s: {what}");
}

/// Waits until the count `sql` selects is `n`.
pub async fn wait_until_count(db: &PgPool, sql: &str, n: i64) {
    eventually(&format!("{sql} = {n}"), || async {
        scalar_i64(db, sql).await == n
    })
    .await;
}

/// Waits until every inbox row is processed and every delivery sent.
pub async fn wait_until_converged(db: &PgPool) {
    wait_until_count(
        db,
        "SELECT (SELECT count(*) FROM webhook_inbox WHERE status <> 'PROCESSED')
                  + (SELECT count(*) FROM deliveries WHERE status <> 'SENT')",
        0,
    )
    .await;
}
