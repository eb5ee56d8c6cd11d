//! Issue 30, finding 9: someone who can write the database cannot make Wharf send a forged
//! delivery, signed, as a verified event. An unsealed payload row (no key id, plaintext) is
//! refused unless `[payloads] upgrade_legacy_rows` is on; each inbox row's link to its payload
//! (inbox id, fields, payload ref, span, hash) is authenticated at acceptance and checked on
//! every read: `wharf events show --payload`, the worker, the relay, `wharf payloads
//! reencrypt` (which carries valid links over to a new key and refuses forged ones).

use uuid::Uuid;
use wharf::support::sealing::PayloadKeys;

use crate::support::{app::*, database::*, process::*, receiver::*, signing::*};

const UPGRADE: &str = "upgrade_legacy_rows = true";
const UNSEALED: &str = "stored unsealed (no key id): refused unless [payloads] upgrade_legacy_rows";
const FORGED_LINK: &str = "link to its payload does not verify";

/// A receiver-bound app on `database` (else a fresh one), driven one step at a time, with
/// `payloads` lines in its `[payloads]` table.
async fn start(receiver: &Receiver, database: Option<&TestApp>, payloads: &str) -> TestApp {
    let mut builder = TestApp::builder()
        .workers(0)
        .append_toml(&http_route_toml(&receiver.url, ""))
        .payloads_toml(payloads);
    if let Some(app) = database {
        builder = builder.database_url(app.config.database_url.clone());
    }
    builder.start().await
}

/// The JSON text `body` as `wharf events show --payload` shows a JSON body: as JSON.
fn as_shown(body: String) -> serde_json::Value {
    serde_json::from_str(&body).unwrap()
}

/// `wharf events show --payload ID` with the app's config: its `payload` member.
fn shown(app: &TestApp, id: Uuid) -> serde_json::Value {
    let out = wharf_events(
        &["show", "--payload", &id.to_string()],
        &app.config.config_path,
    );
    serde_json::from_str::<serde_json::Value>(&out).expect("JSON")["payload"].clone()
}

#[track_caller]
fn assert_refused(payload: &serde_json::Value, why: &str) {
    let error = payload["error"].as_str().unwrap_or_default();
    assert!(error.contains(why), "{payload}");
    assert!(payload.get("utf8").is_none(), "{payload}");
    assert!(payload.get("json").is_none(), "{payload}");
}

async fn payload_ref(app: &TestApp, id: Uuid) -> Uuid {
    sqlx::query_scalar("SELECT raw_payload_ref FROM webhook_inbox WHERE inbox_id = $1")
        .bind(id)
        .fetch_one(&app.db)
        .await
        .unwrap()
}

/// An inbox row's status and last error.
async fn event_status(app: &TestApp, id: Uuid) -> (String, String) {
    let (status, error): (String, Option<String>) =
        sqlx::query_as("SELECT status, last_error FROM webhook_inbox WHERE inbox_id = $1")
            .bind(id)
            .fetch_one(&app.db)
            .await
            .unwrap();
    (status, error.unwrap_or_default())
}

/// The status and last error of the event's one delivery.
async fn delivery_status(app: &TestApp, id: Uuid) -> (String, String) {
    let (status, error): (String, Option<String>) =
        sqlx::query_as("SELECT status, last_error FROM deliveries WHERE inbox_id = $1")
            .bind(id)
            .fetch_one(&app.db)
            .await
            .unwrap();
    (status, error.unwrap_or_default())
}

/// `wharf payloads reencrypt` with the app's config: (succeeded, report, stderr).
fn reencrypt(app: &TestApp) -> (bool, serde_json::Value, String) {
    let out = run_wharf(&[
        "payloads",
        "--config",
        app.config.config_path.to_str().unwrap(),
        "reencrypt",
    ]);
    let report = serde_json::from_slice(&out.stdout).unwrap_or_default();
    (
        out.status.success(),
        report,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Stores `body` in plaintext in the event's payload row, as before encryption.
async fn unseal(app: &TestApp, id: Uuid, body: &str) {
    sqlx::query("UPDATE webhook_payloads SET key_id = NULL, body = $1 WHERE payload_ref = $2")
        .bind(body.as_bytes())
        .bind(payload_ref(app, id).await)
        .execute(&app.db)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsealed_payload_row_is_refused_by_show_delivery_replay_and_reencrypt_unless_upgrading()
{
    let receiver = Receiver::start(Behaviour::ok()).await;
    let app = start(&receiver, None, "").await;
    // Processed, its delivery planned, then its body put back in plaintext.
    let delivered = app.accept_stripe("evt_unsealed_delivered").await;
    assert_eq!(app.work_once().await, 1);
    unseal(&app, delivered, &stripe_event("evt_unsealed_delivered")).await;
    // Unsealed before it was processed.
    let pending = app.accept_stripe("evt_unsealed_pending").await;
    unseal(&app, pending, &stripe_event("evt_unsealed_pending")).await;

    assert_refused(&shown(&app, delivered), UNSEALED);
    assert_refused(&shown(&app, pending), UNSEALED);
    // The worker fails the event for good; the relay fails the delivery, sending nothing.
    assert_eq!(app.work_once().await, 1);
    let (status, error) = event_status(&app, pending).await;
    assert_eq!(status, "FAILED");
    assert!(error.contains(UNSEALED), "{error}");
    assert_eq!(app.relay().try_execute().await.unwrap(), 1);
    let (status, error) = delivery_status(&app, delivered).await;
    assert_eq!(status, "FAILED");
    assert!(error.contains(UNSEALED), "{error}");
    // Replayed, it is refused again.
    wharf::operator::events::replay(&app.db, &[delivered], true)
        .await
        .unwrap();
    assert_eq!(app.work_once().await, 1);
    assert_eq!(app.relay().try_execute().await.unwrap(), 1);
    assert_eq!(delivery_status(&app, delivered).await.0, "FAILED");
    assert_eq!(receiver.arrived(), 0, "nothing unsealed is ever sent");
    // Re-encryption does not seal what it cannot vouch for.
    let (ok, report, stderr) = reencrypt(&app);
    assert!(!ok, "{report}");
    assert_eq!(report["resealed"], 0, "{report}");
    assert_eq!(
        report["unreadable"].as_array().unwrap().len(),
        2,
        "{report}"
    );
    assert!(stderr.contains("upgrade_legacy_rows"), "{stderr}");
    assert_eq!(
        scalar_i64(
            &app.db,
            "SELECT count(*) FROM webhook_payloads WHERE key_id IS NULL"
        )
        .await,
        2
    );

    // With the upgrade setting, such rows are read as they are, and re-encryption seals them.
    let upgrading = start(&receiver, Some(&app), UPGRADE).await;
    assert_eq!(
        shown(&upgrading, delivered)["json"],
        as_shown(stripe_event("evt_unsealed_delivered"))
    );
    let (ok, report, stderr) = reencrypt(&upgrading);
    assert!(ok, "{report} {stderr}");
    assert_eq!(report["resealed"], 2, "{report}");
    // Sealed now: the host without the setting reads and delivers them.
    assert_eq!(
        shown(&app, pending)["json"],
        as_shown(stripe_event("evt_unsealed_pending"))
    );
    wharf::operator::events::replay(&app.db, &[delivered, pending], true)
        .await
        .unwrap();
    assert_eq!(app.work_once().await, 2);
    assert_eq!(app.relay().try_execute().await.unwrap(), 2);
    let mut sent: Vec<String> = receiver
        .received()
        .into_iter()
        .map(|r| r.event_id)
        .collect();
    sent.sort();
    assert_eq!(sent, ["evt_unsealed_delivered", "evt_unsealed_pending"]);
    upgrading.shutdown().await;
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_pointed_at_another_events_payload_is_refused_on_show_and_never_delivered() {
    let receiver = Receiver::start(Behaviour::ok()).await;
    let app = start(&receiver, None, "").await;
    let victim = app.accept_stripe("evt_victim").await;
    let attacker = app.accept_stripe("evt_attacker").await;
    assert_eq!(app.work_once().await, 2);
    let unprocessed = app.accept_stripe("evt_unprocessed").await;
    // The victim's row (its id, type and endpoint go out as headers, its inbox id as the
    // idempotency key) now names the attacker's body; so does one not processed yet.
    let attackers = payload_ref(&app, attacker).await;
    for id in [victim, unprocessed] {
        sqlx::query("UPDATE webhook_inbox SET raw_payload_ref = $1 WHERE inbox_id = $2")
            .bind(attackers)
            .bind(id)
            .execute(&app.db)
            .await
            .unwrap();
    }

    assert_refused(&shown(&app, victim), FORGED_LINK);
    assert_eq!(
        shown(&app, attacker)["json"],
        as_shown(stripe_event("evt_attacker"))
    );
    assert_eq!(app.work_once().await, 1);
    let (status, error) = event_status(&app, unprocessed).await;
    assert_eq!(status, "FAILED");
    assert!(error.contains(FORGED_LINK), "{error}");
    assert_eq!(app.relay().try_execute().await.unwrap(), 2);
    let (status, error) = delivery_status(&app, victim).await;
    assert_eq!(status, "FAILED");
    assert!(error.contains(FORGED_LINK), "{error}");
    let received = receiver.received();
    assert_eq!(received.len(), 1, "only the attacker's own event");
    assert_eq!(received[0].event_id, "evt_attacker");
    assert_eq!(received[0].body, stripe_event("evt_attacker").into_bytes());

    // The upgrade setting does not excuse a row that has a link.
    let upgrading = start(&receiver, Some(&app), UPGRADE).await;
    assert_refused(&shown(&upgrading, victim), FORGED_LINK);
    upgrading.shutdown().await;
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tampered_link_tag_hash_span_or_header_field_is_refused() {
    let receiver = Receiver::start(Behaviour::ok()).await;
    let app = start(&receiver, None, UPGRADE).await;
    let mut tampered = Vec::new();
    for (id, change) in [
        (
            "evt_tag",
            "payload_link = set_byte(payload_link, 0, get_byte(payload_link, 0) # 1)",
        ),
        ("evt_hash", "payload_hash = sha256('forged'::bytea)"),
        ("evt_span", "payload_start = 0, payload_end = 10"),
        ("evt_type", "event_type = 'customer.deleted'"),
        ("evt_id", "provider_event_id = 'evt_someone_else'"),
    ] {
        let inbox_id = app.accept_stripe(id).await;
        execute(
            &app.db,
            &format!("UPDATE webhook_inbox SET {change} WHERE inbox_id = '{inbox_id}'"),
        )
        .await;
        tampered.push(inbox_id);
    }
    // A forged body stored in plaintext under an intact link: its hash is not the one the
    // link vouches for, so even the upgrade setting does not read it.
    let plain = app.accept_stripe("evt_plain").await;
    unseal(&app, plain, &stripe_event("evt_forged")).await;

    for &id in &tampered {
        assert_refused(&shown(&app, id), FORGED_LINK);
    }
    assert_refused(
        &shown(&app, plain),
        "does not match the event's payload_hash",
    );
    assert_eq!(app.work_once().await, 6);
    assert_eq!(
        scalar_i64(
            &app.db,
            "SELECT count(*) FROM webhook_inbox WHERE status = 'FAILED'"
        )
        .await,
        6
    );
    assert_eq!(
        app.count("deliveries").await,
        0,
        "nothing planned, nothing sent"
    );
    assert_eq!(receiver.arrived(), 0);
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reencrypt_carries_a_valid_link_over_to_the_new_key_and_refuses_a_forged_one() {
    let key2 = "a2V5LXR3by1mb3Itcm90YXRpb24tdGVzdHMtMzJiISE=";
    let receiver = Receiver::start(Behaviour::ok()).await;
    let old = start(&receiver, None, "").await;
    let good = old.accept_stripe("evt_good").await;
    let forged = old.accept_stripe("evt_forged").await;
    let goods = payload_ref(&old, good).await;
    sqlx::query("UPDATE webhook_inbox SET raw_payload_ref = $1 WHERE inbox_id = $2")
        .bind(goods)
        .bind(forged)
        .execute(&old.db)
        .await
        .unwrap();

    let rotated = TestApp::builder()
        .database_url(old.config.database_url.clone())
        .workers(0)
        .payload_key_file(format!(
            "current = \"k2\"\n[keys]\ntest-1 = \"{TEST_PAYLOAD_KEY}\"\nk2 = \"{key2}\"\n"
        ))
        .start()
        .await;
    let (ok, report, stderr) = reencrypt(&rotated);
    assert!(!ok, "{report}");
    assert!(
        stderr.contains("links to their payloads did not verify"),
        "{stderr}"
    );
    assert_eq!(report["resealed"], 2, "{report}");
    assert_eq!(report["links_found"], 2, "{report}");
    assert_eq!(report["relinked"], 1, "{report}");
    assert_eq!(
        report["refused_links"],
        serde_json::json!([forged]),
        "{report}"
    );
    let link_keys: Vec<(String, String)> = all_rows(
        &old.db,
        "SELECT provider_event_id, payload_link_key FROM webhook_inbox ORDER BY 1",
    )
    .await;
    assert_eq!(
        link_keys,
        [
            ("evt_forged".to_owned(), "test-1".to_owned()),
            ("evt_good".to_owned(), "k2".to_owned())
        ]
    );

    // k2 alone reads the good event; the forged one stays refused.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k2.toml");
    std::fs::write(
        &path,
        format!("current = \"k2\"\n[keys]\nk2 = \"{key2}\"\n"),
    )
    .unwrap();
    let k2_only = PayloadKeys::load(Some(&path), None).unwrap();
    let show = |id| wharf::operator::events::show(&old.db, id, Some(&k2_only));
    let opened = show(good).await.unwrap().unwrap();
    assert_eq!(opened["payload"]["utf8"], stripe_event("evt_good"));
    let refused = show(forged).await.unwrap().unwrap();
    assert!(refused["payload"].get("utf8").is_none(), "{refused}");
    assert_refused(&shown(&rotated, forged), FORGED_LINK);
    // A second pass reseals nothing and refuses the forged link again.
    let (ok, report, _) = reencrypt(&rotated);
    assert!(!ok);
    assert_eq!(report["found"], 0, "{report}");
    assert_eq!(report["relinked"], 0, "{report}");
    assert_eq!(
        report["refused_links"],
        serde_json::json!([forged]),
        "{report}"
    );
    rotated.shutdown().await;
    old.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_from_before_links_are_refused_until_an_upgrade_pass_links_them() {
    let receiver = Receiver::start(Behaviour::ok()).await;
    let app = start(&receiver, None, "").await;
    let id = app.accept_stripe("evt_before_links").await;
    // As the release before links wrote it.
    execute(
        &app.db,
        "UPDATE webhook_inbox SET payload_link_key = NULL, payload_link = NULL",
    )
    .await;
    let unlinked = "no link tag to its payload: refused unless [payloads] upgrade_legacy_rows";
    assert_refused(&shown(&app, id), unlinked);
    let (ok, report, stderr) = reencrypt(&app);
    assert!(!ok, "{report}");
    assert_eq!(report["refused_links"], serde_json::json!([id]), "{report}");
    assert!(stderr.contains("upgrade_legacy_rows is on"), "{stderr}");

    // The upgrade pass links it; from then on the setting is not needed.
    let upgrading = start(&receiver, Some(&app), UPGRADE).await;
    let (ok, report, stderr) = reencrypt(&upgrading);
    assert!(ok, "{report} {stderr}");
    assert_eq!(report["relinked"], 1, "{report}");
    assert_eq!(
        shown(&app, id)["json"],
        as_shown(stripe_event("evt_before_links"))
    );
    assert_eq!(app.work_once().await, 1);
    assert_eq!(app.relay().try_execute().await.unwrap(), 1);
    assert_eq!(receiver.received()[0].event_id, "evt_before_links");
    upgrading.shutdown().await;
    app.shutdown().await;
}
