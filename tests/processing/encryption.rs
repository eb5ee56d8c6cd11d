//! Payloads at rest: sealed before they reach Postgres, bound to their row, and readable
//! across a key rotation until `wharf payloads reencrypt` has moved them to the new key.

use std::process::Command;
use std::sync::Arc;

use uuid::Uuid;
use wharf::processing::Worker;
use wharf::support::sealing::PayloadKeys;

use crate::support::{app::*, database::*, http::*, process::*, signing::*};

/// A string that appears nowhere but in the bodies these tests send.
const MARKER: &str = "Zephyrine-Quokka-4242-plaintext-marker";

/// A signed Stripe event whose body carries [`MARKER`]: (headers, body).
fn marked_event(id: &str) -> (Vec<(String, String)>, String) {
    let body = format!(
        r#"{{"id":"{id}","object":"event","type":"customer.updated","created":1764480000,"data":{{"object":{{"id":"cus_{id}","object":"customer","name":"{MARKER}","notes":"{}"}}}}}}"#,
        "lorem ipsum ".repeat(200)
    );
    let header = stripe_header(STRIPE_SECRET, now(), body.as_bytes());
    (vec![("stripe-signature".into(), header)], body)
}

async fn accept(app: &TestApp, id: &str) -> Uuid {
    let (headers, body) = marked_event(id);
    let answer = app.post("stripe", &refs(&headers), body).await;
    answer.assert_accepted("");
    answer.json["inbox_id"].as_str().unwrap().parse().unwrap()
}

async fn payload_ref(app: &TestApp, inbox_id: Uuid) -> Uuid {
    sqlx::query_scalar("SELECT raw_payload_ref FROM webhook_inbox WHERE inbox_id = $1")
        .bind(inbox_id)
        .fetch_one(&app.db)
        .await
        .unwrap()
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// `wharf events show --payload` as an operator runs it: (stdout, stderr).
fn show_payload(config: &std::path::Path, id: Uuid) -> (String, String) {
    let out = run_wharf(&[
        "events",
        "--config",
        config.to_str().unwrap(),
        "show",
        "--payload",
        &id.to_string(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    (String::from_utf8_lossy(&out.stdout).into_owned(), stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_holds_no_plaintext_of_a_stored_body() {
    let app = TestApp::builder().workers(0).start().await;
    let id = accept(&app, "evt_sealed").await;
    let url = &app.config.database_url;

    // The table's raw bytes, as psql copies them out.
    let copy = Command::new("psql")
        .args(["-X", "-q", url, "-c"])
        // Every day partition's rows (COPY of a partitioned table needs the query form).
        .arg("\\copy (SELECT * FROM webhook_payloads) TO STDOUT WITH (FORMAT binary)")
        .output()
        .expect("psql runs");
    assert_ran(&copy, "");
    assert!(copy.stdout.len() > 100, "the row was copied");
    // A whole logical dump, where bytea is written as hex.
    let dump = Command::new("pg_dump")
        .args(["--data-only", url])
        .output()
        .expect("pg_dump runs");
    assert_ran(&dump, "");
    let hex_marker = hex::encode(MARKER);
    for (what, bytes) in [("psql copy", &copy.stdout), ("pg_dump", &dump.stdout)] {
        assert!(!contains(bytes, MARKER.as_bytes()), "{what} shows the body");
        assert!(
            !contains(bytes, hex_marker.as_bytes()),
            "{what} shows it as hex"
        );
        assert!(!contains(bytes, b"lorem ipsum"), "{what} shows the body");
    }
    // Compressed before it was sealed: the stored row is smaller than the body.
    let (stored, key_id): (i32, String) = one_row(
        &app.db,
        "SELECT octet_length(body), key_id FROM webhook_payloads",
    )
    .await;
    assert_eq!(key_id, "test-1");
    assert!(stored < 1000, "{stored} bytes stored for a 2.5 KB body");

    // And yet it is all there: an operator reads it back, and that is logged.
    let (shown, log) = show_payload(&app.config.config_path, id);
    assert!(shown.contains(MARKER), "{shown}");
    assert!(log.contains("payload decrypted for an operator"), "{log}");
    assert!(log.contains(&id.to_string()), "{log}");
    assert!(!log.contains(MARKER), "the log never holds the body");
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ciphertext_moved_to_another_row_does_not_open() {
    let app = TestApp::builder().workers(0).start().await;
    let a = accept(&app, "evt_a").await;
    let b = accept(&app, "evt_b").await;
    let (ref_a, ref_b) = (payload_ref(&app, a).await, payload_ref(&app, b).await);
    // Someone with write access to the table swaps a body into another event's row.
    sqlx::query(
        "UPDATE webhook_payloads SET body = a.body, key_id = a.key_id
         FROM (SELECT body, key_id FROM webhook_payloads WHERE payload_ref = $1) a
         WHERE payload_ref = $2",
    )
    .bind(ref_a)
    .bind(ref_b)
    .execute(&app.db)
    .await
    .unwrap();

    let shown = wharf::operator::events::show(&app.db, b, Some(&test_payload_keys()))
        .await
        .unwrap()
        .unwrap();
    let error = shown["payload"]["error"].as_str().unwrap_or_default();
    assert!(error.contains("does not open"), "{shown}");

    // Processing never sees a's body as b's: b fails for good, a is processed.
    let worker = app.worker();
    worker.try_execute().await.unwrap();
    let rows: Vec<(String, String, Option<String>)> = all_rows(
        &app.db,
        "SELECT provider_event_id, status, last_error FROM webhook_inbox ORDER BY 1",
    )
    .await;
    assert_eq!(rows[0].0, "evt_a");
    assert_eq!(rows[0].1, "PROCESSED");
    assert_eq!(rows[1].0, "evt_b");
    assert_eq!(rows[1].1, "FAILED", "{rows:?}");
    assert!(
        rows[1]
            .2
            .as_deref()
            .unwrap_or_default()
            .contains("does not open under key \"test-1\""),
        "{rows:?}"
    );
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_rotation_old_payloads_open_and_reencryption_moves_every_one() {
    let key2 = "a2V5LXR3by1mb3Itcm90YXRpb24tdGVzdHMtMzJiISE=";
    let old = TestApp::builder().workers(0).start().await;
    let first = accept(&old, "evt_before_rotation").await;
    // A row from before encryption existed: plaintext, no key id.
    let legacy = accept(&old, "evt_legacy").await;
    let (_, legacy_body) = marked_event("evt_legacy");
    sqlx::query("UPDATE webhook_payloads SET key_id = NULL, body = $1 WHERE payload_ref = $2")
        .bind(legacy_body.as_bytes())
        .bind(payload_ref(&old, legacy).await)
        .execute(&old.db)
        .await
        .unwrap();

    // The rotation: a second receiver on the same database seals with k2 and still holds
    // test-1 to open older rows; it reads the unsealed one under the upgrade setting
    // (`tests/processing/payload_links.rs` shows it refused without).
    let rotated = TestApp::builder()
        .database_url(old.config.database_url.clone())
        .payloads_toml("upgrade_legacy_rows = true")
        .payload_key_file(format!(
            "current = \"k2\"\n[keys]\ntest-1 = \"{TEST_PAYLOAD_KEY}\"\nk2 = \"{key2}\"\n"
        ))
        .workers(0)
        .start()
        .await;
    let after = accept(&rotated, "evt_after_rotation").await;
    let keys_of = |db: sqlx::PgPool| async move {
        sqlx::query_as::<_, (String, Option<String>)>(
            "SELECT i.provider_event_id, p.key_id FROM webhook_inbox i
             JOIN webhook_payloads p ON p.payload_ref = i.raw_payload_ref ORDER BY 1",
        )
        .fetch_all(&db)
        .await
        .unwrap()
    };
    assert_eq!(
        keys_of(rotated.db.clone()).await,
        [
            ("evt_after_rotation".into(), Some("k2".into())),
            ("evt_before_rotation".into(), Some("test-1".into())),
            ("evt_legacy".into(), None),
        ]
    );
    for id in [first, legacy, after] {
        let (shown, _) = show_payload(&rotated.config.config_path, id);
        assert!(shown.contains(MARKER), "{id}: {shown}");
    }

    // Re-encryption, two rows per batch: every row ends under k2.
    let out = run_wharf(&[
        "payloads",
        "--config",
        rotated.config.config_path.to_str().unwrap(),
        "reencrypt",
        "--batch",
        "2",
    ]);
    assert_ran(&out, "");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["found"], 2, "{report}");
    assert_eq!(report["resealed"], 2, "{report}");
    assert_eq!(report["unreadable"], serde_json::json!([]));
    assert!(
        keys_of(rotated.db.clone())
            .await
            .iter()
            .all(|(_, key)| key.as_deref() == Some("k2"))
    );

    // Now k2 alone opens everything, and test-1 can be retired: nothing is under it.
    let dir = tempfile::tempdir().unwrap();
    let only = |name: &str, text: String| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        PayloadKeys::load(Some(&path), None).unwrap()
    };
    let k2_only = only(
        "k2.toml",
        format!("current = \"k2\"\n[keys]\nk2 = \"{key2}\"\n"),
    );
    let old_only = only(
        "old.toml",
        format!("current = \"test-1\"\n[keys]\ntest-1 = \"{TEST_PAYLOAD_KEY}\"\n"),
    );
    for id in [first, legacy, after] {
        let opened = wharf::operator::events::show(&rotated.db, id, Some(&k2_only))
            .await
            .unwrap()
            .unwrap();
        assert!(opened["payload"]["utf8"].as_str().unwrap().contains(MARKER));
        let refused = wharf::operator::events::show(&rotated.db, id, Some(&old_only))
            .await
            .unwrap()
            .unwrap();
        assert!(
            refused["payload"]["error"]
                .as_str()
                .unwrap()
                .contains("not configured on this host")
        );
    }
    // A second pass finds nothing to do, and processing reads every event.
    let again = run_wharf(&[
        "payloads",
        "--config",
        rotated.config.config_path.to_str().unwrap(),
        "reencrypt",
    ]);
    let report: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(report["found"], 0, "{report}");
    let worker = Worker::new(Arc::clone(&rotated.server.as_ref().unwrap().processing));
    assert_eq!(worker.try_execute().await.unwrap(), 3);
    assert_eq!(
        scalar_i64(
            &rotated.db,
            "SELECT count(*) FROM webhook_inbox WHERE status = 'PROCESSED'"
        )
        .await,
        3
    );
    rotated.shutdown().await;
    old.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_whose_key_is_missing_here_waits_instead_of_failing() {
    // A host the rotation has not reached: it cannot open k2's rows, so it retries them
    // (with backoff) instead of marking them FAILED; the host that has k2 processes them.
    let key2 = "a2V5LXR3by1mb3Itcm90YXRpb24tdGVzdHMtMzJiISE=";
    let rotated = TestApp::builder()
        .payload_key_file(format!("current = \"k2\"\n[keys]\nk2 = \"{key2}\"\n"))
        .workers(0)
        .start()
        .await;
    let id = accept(&rotated, "evt_k2").await;
    let behind = TestApp::builder()
        .database_url(rotated.config.database_url.clone())
        .workers(0)
        .start()
        .await;
    let worker = Worker::new(Arc::clone(&behind.server.as_ref().unwrap().processing));
    worker.try_execute().await.unwrap();
    let (status, error): (String, Option<String>) =
        sqlx::query_as("SELECT status, last_error FROM webhook_inbox WHERE inbox_id = $1")
            .bind(id)
            .fetch_one(&behind.db)
            .await
            .unwrap();
    assert_eq!(status, "PENDING");
    assert!(
        error
            .as_deref()
            .unwrap_or_default()
            .contains("\"k2\" is not configured"),
        "{error:?}"
    );
    behind.shutdown().await;
    rotated.shutdown().await;
}

#[tokio::test]
async fn without_a_usable_payload_key_the_receiver_does_not_start() {
    let short = "c2hvcnQ="; // "short": 5 bytes, not 32
    for (keys, expected) in [
        (
            "current = \"gone\"\n[keys]\n".to_owned(),
            "is not one of its [keys]",
        ),
        (
            format!("current = \"k\"\n[keys]\nk = \"{short}\"\n"),
            "must be 32 bytes",
        ),
    ] {
        let written = TestApp::builder()
            .payload_key_file(keys)
            .write_config()
            .await;
        let out = run_wharf(&["serve", "--config", written.config_path.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(stderr.contains(expected), "{stderr}");
        assert!(!stderr.contains(short), "a key is never printed: {stderr}");
    }
    // No key file named and none in the environment.
    let written = TestApp::builder().write_config().await;
    let text = std::fs::read_to_string(&written.config_path).unwrap();
    let text = text.replace("[payloads]\nkey_file = \"payload-keys.toml\"\n", "");
    std::fs::write(&written.config_path, text).unwrap();
    let out = run_wharf(&["serve", "--config", written.config_path.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("no payload key"), "{stderr}");
}
