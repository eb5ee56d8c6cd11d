//! Zoom over real HTTP: `x-zm-signature` (HMAC-SHA256 of `v0:<ts>:<body>`), freshness, the
//! `endpoint.url_validation` handshake answered with a host-computed MAC, and dedup on the
//! adapter's id (`<event>:<event_ts>:<sha256 of the body>`).

use crate::support::{app::*, files::*, http::*, signing::*};

const SECRET: &str = "9KrsKHJKM7_tcK3nhbwFUg";
const CRC: &str = r#"{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}"#;

fn joined(participant: &str) -> String {
    format!(
        r#"{{"event":"meeting.participant_joined","event_ts":1764522065123,"payload":{{"account_id":"AAAAAABBBBBCCCCCDDDDD1","object":{{"uuid":"4444AAAiAAAAAiAiAiiAii==","id":"85746065432","participant":{{"user_id":"{participant}","user_name":"Jill"}}}}}}}}"#
    )
}

fn signed(secret: &str, ts: i64, body: &str) -> Vec<(String, String)> {
    let mac = hmac_sha256(secret.as_bytes(), format!("v0:{ts}:{body}").as_bytes());
    vec![
        (
            "content-type".into(),
            "application/json; charset=utf-8".into(),
        ),
        ("x-zm-request-timestamp".into(), ts.to_string()),
        ("x-zm-signature".into(), format!("v0={}", hex::encode(mac))),
    ]
}

async fn app() -> TestApp {
    let secrets = format!(
        r#"{}
[[zoom]]
version = "z2"
value = "a-newer-zoom-secret"
[[zoom]]
version = "z1"
value = "{SECRET}"

[[zoom-expired]]
version = "z2"
value = "a-newer-zoom-secret"
[[zoom-expired]]
version = "z1"
value = "{SECRET}"
expires_at = "2020-01-01T00:00:00Z"

[[zoom-beats]]
version = "b1"
value = "secretValueTest"
"#,
        default_secrets()
    );
    let endpoints: String = ["zoom", "zoom-expired", "zoom-beats"]
        .iter()
        .map(|id| format!("[[endpoint]]\nid = \"{id}\"\nadapter = \"zoom\"\nsecret = \"{id}\"\n"))
        .collect();
    TestApp::builder()
        .add_adapter("zoom.wasm")
        .secrets_file(secrets)
        .add_endpoints(endpoints)
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
    let file = vectors("zoom.json");
    let cross = &file["crosscheck"];
    let answer = app
        .post("zoom-beats", &refs(&signed("secretValueTest", t, CRC)), CRC)
        .await;
    assert_eq!(
        answer.json["encryptedToken"], cross["encryptedToken"],
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
    let answer = app
        .post("zoom", &refs(&signed(SECRET, t, &absurd)), absurd)
        .await;
    assert_eq!((answer.status, answer.code()), (400, "malformed"));
    assert_eq!(
        app.count("webhook_inbox").await,
        0,
        "a handshake stores nothing"
    );
}

#[tokio::test]
async fn zoom_events_mutations_and_dedup() {
    let app = app().await;
    let t = now();
    let body = joined("u1");

    let mut tampered = body.as_bytes().to_vec();
    tampered[body.len() / 2] ^= 1;
    let mut moved = signed(SECRET, t, &body);
    moved[1].1 = (t + 1).to_string();
    let mut resigned = signed(SECRET, t, &body);
    let sig = resigned[2].1.clone();
    resigned[2].1 = format!(
        "{}{}",
        &sig[..sig.len() - 1],
        if sig.ends_with('0') { '1' } else { '0' }
    );
    for (what, headers, body, code) in [
        (
            "body byte",
            signed(SECRET, t, &body),
            tampered,
            "invalid_signature",
        ),
        (
            "timestamp",
            moved,
            body.clone().into_bytes(),
            "invalid_signature",
        ),
        (
            "signature",
            resigned,
            body.clone().into_bytes(),
            "invalid_signature",
        ),
        (
            "too old",
            signed(SECRET, t - 301, &body),
            body.clone().into_bytes(),
            "stale_timestamp",
        ),
        (
            "too new",
            // Past the 300 s tolerance by more than this test can take on a loaded host: `t`
            // is read once, and the clock moves on while the cases above are sent.
            signed(SECRET, t + 360, &body),
            body.clone().into_bytes(),
            "stale_timestamp",
        ),
    ] {
        let answer = app.post("zoom", &refs(&headers), body).await;
        assert_eq!((answer.status, answer.code()), (401, code), "{what}");
    }
    // Only an expired version of the set holds the signing secret.
    let answer = app
        .post(
            "zoom-expired",
            &refs(&signed(SECRET, t, &body)),
            body.clone(),
        )
        .await;
    assert_eq!(
        (answer.status, answer.code()),
        (401, "invalid_signature"),
        "expired"
    );
    assert_eq!(app.count("webhook_inbox").await, 0);

    // Accepted under the set's previous version.
    let answer = app
        .post("zoom", &refs(&signed(SECRET, t, &body)), body.clone())
        .await;
    assert_eq!(
        (answer.status, answer.code()),
        (200, "accepted"),
        "{answer:?}"
    );
    // Zoom's retry resends the body with a new timestamp and signature: a duplicate.
    let answer = app
        .post("zoom", &refs(&signed(SECRET, t + 5, &body)), body.clone())
        .await;
    assert_eq!(
        (answer.status, answer.code()),
        (200, "duplicate"),
        "{answer:?}"
    );
    // Another participant joining the same meeting in the same millisecond is another event.
    let other = joined("u2");
    let answer = app
        .post("zoom", &refs(&signed(SECRET, t, &other)), other)
        .await;
    assert_eq!(
        (answer.status, answer.code()),
        (200, "accepted"),
        "{answer:?}"
    );

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
