//! Reveal: an admin's click shows the payload and writes the `operator_audit` row first; a
//! viewer sees no reveal form, and a viewer's POST to reveal is refused, unaudited.

use crate::support::app::TEST_ADMIN_TOKEN;
use crate::support::database::scalar_i64;

use super::session::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reveal_writes_the_audit_record_and_is_refused_to_a_viewer() {
    let app = console_app().start().await;
    let inbox_id = app.accept_stripe("evt_console_reveal").await;
    let audited =
        format!("SELECT count(*) FROM operator_audit WHERE detail::text LIKE '%{inbox_id}%'");
    assert_eq!(scalar_i64(&app.db, &audited).await, 0);
    let page = console_url(&app, &format!("/events/{inbox_id}"));

    let admin = admin_browser(&app).await;
    admin.goto(&page).await;
    assert!(!admin.has("pre#payload").await);
    admin.click("form#reveal button#reveal-submit").await;
    let payload = admin.text("pre#payload").await;
    assert!(
        payload.contains("evt_console_reveal") && payload.contains("pi_123"),
        "{payload}"
    );
    admin.screenshot("event-revealed").await;
    assert_eq!(scalar_i64(&app.db, &audited).await, 1, "one audit row");
    let (action, actor, detail): (String, String, String) = sqlx::query_as(
        "SELECT action, actor, detail::text FROM operator_audit WHERE detail::text LIKE $1",
    )
    .bind(format!("%{inbox_id}%"))
    .fetch_one(&app.db)
    .await
    .unwrap();
    let row = format!("{action} {actor} {detail}");
    assert!(
        !row.contains(TEST_ADMIN_TOKEN),
        "no token in the audit trail: {row}"
    );
    assert!(
        !row.contains("pi_123"),
        "no payload in the audit trail: {row}"
    );
    admin.close().await;

    let viewer = viewer_browser(&app).await;
    viewer.goto(&page).await;
    assert_eq!(
        viewer.text("#provider-event-id").await,
        "evt_console_reveal"
    );
    assert!(!viewer.has("form#reveal").await, "no reveal for a viewer");
    assert!(!viewer.has("pre#payload").await);
    viewer.screenshot("event-as-viewer").await;
    let (cookie, csrf) = (session_cookie(&viewer).await, csrf_token(&viewer).await);
    let refused = raw_post(
        &app,
        &format!("/events/{inbox_id}/reveal"),
        &cookie,
        &[("csrf", &csrf)],
    )
    .await;
    assert_eq!(refused.status, 403, "{refused:?}");
    assert!(has_id(&refused.body, "error"), "{}", refused.body);
    assert!(!refused.body.contains("pi_123"), "{}", refused.body);
    assert_eq!(
        scalar_i64(&app.db, &audited).await,
        1,
        "a refusal is not a read"
    );
    viewer.close().await;
    app.shutdown().await;
}
