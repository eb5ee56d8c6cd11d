//! What one admin request may hold, and the audit trail a log filter cannot switch off:
//! statements under a timeout, bodies under a deadline, counts that stop at a cap, and a row in
//! `operator_audit` for every payload shown, purge and replay.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{app::*, database::*, process::*};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_statement_stuck_on_a_lock_is_cut_at_its_timeout() {
    let app = TestApp::builder()
        .with_admin()
        .workers(0)
        .server_toml("admin_statement_timeout_ms = 300")
        .start()
        .await;
    // A migration or a manual query holding the inbox: without a timeout the list waits for
    // it for as long as it is held, and so does one of the API's two connections.
    let mut holder = app.db.begin().await.unwrap();
    sqlx::query("LOCK TABLE webhook_inbox IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *holder)
        .await
        .unwrap();
    let started = Instant::now();
    let answer = admin_client()
        .get(format!("{}/admin/events", app.admin))
        .bearer_auth(TEST_ADMIN_TOKEN)
        .timeout(Duration::from_secs(20))
        .send()
        .await
        .expect("an answer while the lock is held");
    assert_eq!(answer.status(), 503);
    let body: Value = answer.json().await.unwrap();
    assert_eq!(body["error"], "database_unavailable", "{body}");
    assert!(started.elapsed() < Duration::from_secs(15));
    holder.rollback().await.unwrap();

    // The lock gone, the same list answers.
    let answer = app.admin_get("/admin/events").await;
    assert_eq!(answer.status, 200, "{answer:?}");
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_body_that_stalls_is_answered_408_at_the_body_deadline() {
    let app = TestApp::builder()
        .with_admin()
        .workers(0)
        .server_toml("body_timeout_ms = 500")
        .start()
        .await;
    let addr = app.admin.trim_start_matches("http://").to_owned();
    let mut conn = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /admin/events/replay HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer \
         {TEST_ADMIN_TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"ids\":"
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    // Nothing more is sent; the answer must come without it.
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(20), async {
        let mut buf = [0u8; 4096];
        loop {
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    answer.extend_from_slice(&buf[..n]);
                    if answer.windows(4).any(|w| w == b"\r\n\r\n") && answer.ends_with(b"}") {
                        break;
                    }
                }
            }
        }
    })
    .await;
    assert!(read.is_ok(), "no answer to a stalled admin body");
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("\"body_timeout\""), "{text}");
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_count_past_the_cap_says_more_than_and_stops_counting() {
    let app = TestApp::builder().with_admin().workers(0).start().await;
    // 100,002 finished events, written directly: the count stops at 100,001. Their ids are
    // time-ordered, as the receiver makes them: the inbox is partitioned by id.
    let ids: Vec<uuid::Uuid> = (0..100_002).map(|_| uuid::Uuid::now_v7()).collect();
    sqlx::query(
        "INSERT INTO webhook_inbox (inbox_id, provider, endpoint_id, provider_event_id, \
         event_type, raw_payload_ref, payload_hash, matched_secret_version, status) \
         SELECT id, 'stripe', 'stripe', 'evt_' || n, 'x', gen_random_uuid(), '\\x00', '1', \
         'PROCESSED' FROM unnest($1::uuid[]) WITH ORDINALITY AS t(id, n)",
    )
    .bind(&ids)
    .execute(&app.db)
    .await
    .unwrap();
    let answer = app.admin_get("/admin/events?limit=1").await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.json["total"], 100_001, "{:?}", answer.json);
    assert_eq!(answer.json["total_is_lower_bound"], true);
    let note = answer.json["note"].as_str().unwrap();
    assert!(note.contains("of more than 100,000 matching"), "{note}");

    // Below the cap the count is exact and says so.
    let answer = app.admin_get("/admin/events?limit=1&status=PENDING").await;
    assert_eq!(answer.json["total"], 0, "{:?}", answer.json);
    assert_eq!(answer.json["total_is_lower_bound"], false);
    app.shutdown().await;
}

async fn audit_rows(app: &TestApp) -> Vec<(String, String, Value)> {
    sqlx::query_as("SELECT action, actor, detail FROM operator_audit ORDER BY audit_id")
        .fetch_all(&app.db)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payload_reads_purges_and_replays_leave_an_audit_row_even_with_logging_off() {
    let app = TestApp::builder().with_admin().workers(0).start().await;
    let id = app.accept_stripe("evt_audited").await;
    let config = app.config.config_path.to_str().unwrap().to_owned();
    let dir = app.config.config_path.parent().unwrap();
    let id_text = id.to_string();

    // The payload is shown with every log line filtered out; the row is written all the same.
    let shown = run_wharf_in(
        dir,
        &["events", "--config", &config, "show", "--payload", &id_text],
        &[("RUST_LOG", "off")],
    );
    assert_ran(&shown, "events show --payload");
    assert!(String::from_utf8_lossy(&shown.stdout).contains("evt_audited"));

    let replayed = admin_client()
        .post(format!("{}/admin/events/replay", app.admin))
        .bearer_auth(TEST_ADMIN_TOKEN)
        .json(&json!({"ids": [id]}))
        .send()
        .await
        .unwrap();
    assert_eq!(replayed.status(), 200);

    let purged = run_wharf_in(
        dir,
        &[
            "events",
            "--config",
            &config,
            "purge",
            "--before",
            "2999-01-01T00:00:00Z",
            "--include-unfinished",
        ],
        &[("RUST_LOG", "off")],
    );
    assert_ran(&purged, "events purge");

    let rows = audit_rows(&app).await;
    let uid = std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m))
        .unwrap();
    let actions: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(
        actions,
        ["payload shown", "events replayed", "events purged"],
        "{rows:?}"
    );
    assert!(rows[0].1.starts_with(&format!("uid {uid} ")), "{rows:?}");
    assert_eq!(rows[0].2["inbox_id"], id_text);
    assert!(rows[1].1.starts_with("admin-api 127.0.0.1"), "{rows:?}");
    assert_eq!(rows[2].2["events"], 1, "{rows:?}");
    assert_eq!(
        scalar_i64(&app.db, "SELECT count(*) FROM webhook_inbox").await,
        0
    );
    app.shutdown().await;
}
