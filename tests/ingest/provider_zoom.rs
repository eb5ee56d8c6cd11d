//! Zoom: `x-zm-signature` (HMAC-SHA256 of `v0:<ts>:<body>`) and freshness, verified with no
//! database; over HTTP, the `endpoint.url_validation` handshake answered with a host-computed
//! MAC, and dedup on the adapter's id (`<event>:<event_ts>:<sha256 of the body>`).

use crate::support::offline::{INVALID_SIGNATURE, STALE_TIMESTAMP, Verifier};
use crate::support::secrets::{SecretsFile, endpoints_on, value};
use crate::support::{app::*, http::*, mutate::*, signing::*, stored::*, vectors::*};

const SECRET: &str = "9KrsKHJKM7_tcK3nhbwFUg";
const NEWER_SECRET: &str = "a-newer-zoom-secret";
const CRC: &str = r#"{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}"#;

fn joined(participant: &str) -> String {
    format!(
        r#"{{"event":"meeting.participant_joined","event_ts":1764522065123,"payload":{{"account_id":"AAAAAABBBBBCCCCCDDDDD1","object":{{"uuid":"4444AAAiAAAAAiAiAiiAii==","id":"85746065432","participant":{{"user_id":"{participant}","user_name":"Jill"}}}}}}}}"#
    )
}

fn signed(secret: &str, ts: i64, body: &str) -> Headers {
    let mac = hmac_sha256(secret.as_bytes(), format!("v0:{ts}:{body}").as_bytes());
    pairs(&[
        ("content-type", "application/json; charset=utf-8"),
        ("x-zm-request-timestamp", &ts.to_string()),
        ("x-zm-signature", &format!("v0={}", hex::encode(mac))),
    ])
}

/// POSTs `body` signed with `SECRET` at `ts` to `zoom`, and asserts the answer.
async fn post_signed(app: &TestApp, ts: i64, body: &str, want: (u16, &str)) {
    expect_answer(app, "zoom", &signed(SECRET, ts, body), body, want).await;
}

fn secrets() -> SecretsFile {
    let expired = value("z1", SECRET).expires("2020-01-01T00:00:00Z");
    SecretsFile::new()
        .set("zoom", [value("z2", NEWER_SECRET), value("z1", SECRET)])
        .set("zoom-expired", [value("z2", NEWER_SECRET), expired])
        .set("zoom-beats", [value("b1", "secretValueTest")])
}

fn endpoint_tables() -> String {
    endpoints_on("zoom", &["zoom", "zoom-expired", "zoom-beats"])
}

async fn app() -> TestApp {
    TestApp::builder()
        .add_adapter("zoom.wasm")
        .secrets_file(secrets())
        .add_endpoints(endpoint_tables())
        .start()
        .await
}

#[tokio::test]
async fn zoom_url_validation_is_verified_then_answered() {
    let app = app().await;
    let t = now();

    let answer = app.post("zoom", &refs(&signed(SECRET, t, CRC)), CRC).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let expected = hex::encode(hmac_sha256(SECRET.as_bytes(), b"qgg8vlvZRS6UYooatFL8Aw"));
    assert_eq!(
        answer.json,
        serde_json::json!({"plainToken": "qgg8vlvZRS6UYooatFL8Aw", "encryptedToken": expected})
    );

    // The third-party cross-check (elastic/beats): this secret and token give this MAC.
    let cross = vector_file("zoom.json").crosscheck.unwrap();
    let crc = CRC.replace("qgg8vlvZRS6UYooatFL8Aw", &cross.plain_token);
    let answer = app
        .post("zoom-beats", &refs(&signed(&cross.secret, t, &crc)), crc)
        .await;
    assert_eq!(
        answer.json["encryptedToken"], cross.encrypted_token,
        "{answer:?}"
    );

    // A bad signature, a signed token changed, a stale timestamp: 401 and no challenge.
    for (what, headers, body, code) in [
        (
            "bad signature",
            signed("not-the-secret", t, CRC),
            CRC.to_owned(),
            "invalid_signature",
        ),
        (
            "changed token",
            signed(SECRET, t, CRC),
            CRC.replace("qgg8", "qgg9"),
            "invalid_signature",
        ),
        (
            "stale",
            signed(SECRET, t - 301, CRC),
            CRC.to_owned(),
            "stale_timestamp",
        ),
    ] {
        let answer = app.post("zoom", &refs(&headers), body).await;
        assert_eq!((answer.status, answer.code()), (401, code), "{what}");
        assert!(
            answer.json.get("plainToken").is_none() && answer.json.get("encryptedToken").is_none()
        );
    }

    // An absurd token, even signed, is not echoed.
    let absurd = CRC.replace("qgg8vlvZRS6UYooatFL8Aw", &"x".repeat(129));
    post_signed(&app, t, &absurd, (400, "malformed")).await;
    assert_eq!(
        app.count("webhook_inbox").await,
        0,
        "a handshake stores nothing"
    );
}

#[tokio::test]
async fn zoom_event_mutations_and_keys() {
    let t = now();
    let v = Verifier::of("zoom.wasm", &endpoint_tables(), secrets(), t).await;
    let body = joined("u1");
    let headers = signed(SECRET, t, &body);
    let moved = with(&headers, "x-zm-request-timestamp", &(t + 1).to_string());
    let name = "x-zm-signature";
    let resigned = with(&headers, name, &flip_last_hex(header(&headers, name)));
    let b = || body.clone().into_bytes();
    for (what, endpoint, headers, body, want) in [
        (
            "body byte",
            "zoom",
            headers.clone(),
            flip_body_byte(&body),
            INVALID_SIGNATURE,
        ),
        ("timestamp", "zoom", moved, b(), INVALID_SIGNATURE),
        ("signature", "zoom", resigned, b(), INVALID_SIGNATURE),
        (
            "too old",
            "zoom",
            signed(SECRET, t - 301, &body),
            b(),
            STALE_TIMESTAMP,
        ),
        (
            "too new",
            "zoom",
            signed(SECRET, t + 301, &body),
            b(),
            STALE_TIMESTAMP,
        ),
        // Only an expired version of the set holds the signing secret.
        (
            "expired",
            "zoom-expired",
            headers.clone(),
            b(),
            INVALID_SIGNATURE,
        ),
    ] {
        v.expect(endpoint, &headers, body, want, what).await;
    }
}

#[tokio::test]
async fn zoom_events_dedup() {
    let app = app().await;
    let t = now();
    let body = joined("u1");

    // Accepted under the set's previous version.
    post_signed(&app, t, &body, (200, "accepted")).await;
    // Zoom's retry resends the body with a new timestamp and signature: a duplicate.
    post_signed(&app, t + 5, &body, (200, "duplicate")).await;
    // Another participant joining the same meeting in the same millisecond is another event.
    let other = joined("u2");
    post_signed(&app, t, &other, (200, "accepted")).await;

    let rows: Vec<(String, String, Option<String>, String)> = sqlx::query_as(
        "SELECT provider_event_id, event_type, object_id, matched_secret_version
         FROM webhook_inbox ORDER BY received_at, inbox_id",
    )
    .fetch_all(&app.db)
    .await
    .unwrap();
    assert_eq!(rows.len(), 2);
    assert!(
        rows[0]
            .0
            .starts_with("meeting.participant_joined:1764522065123:"),
        "{rows:?}"
    );
    assert_ne!(rows[0].0, rows[1].0);
    assert_eq!(rows[0].1, "meeting.participant_joined");
    assert_eq!(rows[0].2.as_deref(), Some("4444AAAiAAAAAiAiAiiAii=="));
    assert_eq!(rows[0].3, "z1");
}
