//! Discord interactions and Webhook Events over real HTTP. Discord publishes no vector (see
//! tests/vectors/discord.json), so requests are signed here the way its library's test signer
//! does (Ed25519 over timestamp || body, hex) with a fixed test key; the adapter's fixtures
//! hold requests made by that signer itself.

use crate::support::{app::*, http::*, signing::default_secrets};
use ed25519_dalek::{Signer, SigningKey};

const NOW: i64 = 1_796_154_313;
const PING: &str = r#"{"application_id":"1234560123453231555","id":"1329485758492147815","token":"dG9rZW4","type":1,"version":1}"#;
const EVENTS_PING: &str = r#"{"version":1,"application_id":"1234560123453231555","type":0}"#;
const COMMAND: &str = r#"{"application_id":"1234560123453231555","channel_id":"645027906669510667","data":{"id":"771825006014889984","name":"cardsearch","type":1},"guild_id":"290926798626357999","id":"786008729715212338","token":"A_UNIQUE_TOKEN","type":2,"version":1}"#;
const ENTITLEMENT: &str = r#"{"version":1,"application_id":"1234560123453231555","type":1,"event":{"type":"ENTITLEMENT_CREATE","timestamp":"2025-06-01T10:15:00.123456","data":{"id":"1083167266843992064","sku_id":"1158857122189168803","user_id":"771129655544643584","type":8}}}"#;

fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

fn public_hex(seed: u8) -> String {
    hex::encode(key(seed).verifying_key().as_bytes())
}

fn signed(seed: u8, ts: i64, body: &str) -> Vec<(String, String)> {
    let message = [ts.to_string().as_bytes(), body.as_bytes()].concat();
    let signature = hex::encode(key(seed).sign(&message).to_bytes());
    vec![
        ("content-type".into(), "application/json".into()),
        ("x-signature-ed25519".into(), signature),
        ("x-signature-timestamp".into(), ts.to_string()),
    ]
}

fn with(headers: &[(String, String)], name: &str, value: &str) -> Vec<(String, String)> {
    let pick = |k: &String, v: &String| if k == name { value.into() } else { v.clone() };
    headers
        .iter()
        .map(|(k, v)| (k.clone(), pick(k, v)))
        .collect()
}

/// Endpoint `discord` holds key 1; `wrong` key 2; `expired` key 1 expired beside key 2;
/// `rotated` key 1 unexpired beside key 2.
async fn app(now: i64) -> TestApp {
    let (k1, k2) = (public_hex(1), public_hex(2));
    let secrets = format!(
        "{}\n[[discord]]\nversion = \"app-1\"\npublic_key = \"{k1}\"\n\
         [[wrong]]\nversion = \"app-2\"\npublic_key = \"{k2}\"\n\
         [[expired]]\nversion = \"app-2\"\npublic_key = \"{k2}\"\n[[expired]]\nversion = \"app-1\"\npublic_key = \"{k1}\"\nexpires_at = \"2026-01-01T00:00:00Z\"\n\
         [[rotated]]\nversion = \"app-2\"\npublic_key = \"{k2}\"\n[[rotated]]\nversion = \"app-1\"\npublic_key = \"{k1}\"\nexpires_at = \"2999-01-01T00:00:00Z\"\n",
        default_secrets()
    );
    let endpoints: String = ["discord", "wrong", "expired", "rotated"]
        .iter()
        .map(|id| {
            format!("\n[[endpoint]]\nid = \"{id}\"\nadapter = \"discord\"\nsecret = \"{id}\"\n")
        })
        .collect();
    TestApp::builder()
        .add_adapter("discord.wasm")
        .secrets_file(secrets)
        .add_endpoints(endpoints)
        .fixed_clock(now)
        .start()
        .await
}

async fn assert_401(
    app: &TestApp,
    endpoint: &str,
    headers: &[(String, String)],
    body: impl Into<Vec<u8>>,
    code: &str,
    what: &str,
) {
    let before = app.count("webhook_inbox").await;
    let answer = app.post(endpoint, &refs(headers), body).await;
    assert_eq!(
        (answer.status, answer.code()),
        (401, code),
        "{what}: {answer:?}"
    );
    assert_eq!(
        app.count("webhook_inbox").await,
        before,
        "{what}: nothing stored"
    );
}

fn content_type(answer: &Answer) -> &str {
    answer.headers["content-type"].to_str().unwrap()
}

#[tokio::test]
async fn pings_are_answered_after_verification_and_store_nothing() {
    let app = app(NOW).await;
    let answer = app
        .post("discord", &refs(&signed(1, NOW, PING)), PING)
        .await;
    assert_eq!(
        (answer.status, content_type(&answer)),
        (200, "application/json")
    );
    assert_eq!(answer.json, serde_json::json!({"type": 1}));
    let answer = app
        .post("discord", &refs(&signed(1, NOW, EVENTS_PING)), EVENTS_PING)
        .await;
    assert_eq!(answer.status, 204, "{answer:?}");
    assert_eq!(answer.json, serde_json::Value::Null, "empty body");

    // Discord's security checks send PINGs with bad signatures: 401, never a PONG.
    let headers = signed(1, NOW, PING);
    let bad = with(&headers, "x-signature-ed25519", &hex::encode([7u8; 64]));
    assert_401(
        &app,
        "discord",
        &bad,
        PING,
        "invalid_signature",
        "bad PING signature",
    )
    .await;
    assert_401(
        &app,
        "wrong",
        &headers,
        PING,
        "invalid_signature",
        "PING, wrong key",
    )
    .await;
    assert_401(
        &app,
        "discord",
        &signed(1, NOW, EVENTS_PING),
        PING,
        "invalid_signature",
        "PING, other body",
    )
    .await;
    assert_eq!(app.count("webhook_inbox").await, 0);
}

#[tokio::test]
async fn interactions_and_events_are_stored_once_and_mutations_refused() {
    let app = app(NOW).await;
    let headers = signed(1, NOW, COMMAND);
    let sig = headers[1].1.clone();
    let flipped = format!(
        "{}{}",
        if sig.starts_with('a') { "b" } else { "a" },
        &sig[1..]
    );
    let mut body = COMMAND.as_bytes().to_vec();
    body[COMMAND.len() / 2] ^= 0x01;
    let cases = [
        (
            with(&headers, "x-signature-ed25519", &flipped),
            COMMAND.as_bytes().to_vec(),
            "signature",
        ),
        (
            with(&headers, "x-signature-ed25519", &sig[..126]),
            COMMAND.into(),
            "truncated",
        ),
        (
            with(&headers, "x-signature-timestamp", &(NOW + 1).to_string()),
            COMMAND.into(),
            "timestamp",
        ),
        (headers.clone(), body, "body byte"),
        (
            headers.clone(),
            format!("{COMMAND} ").into_bytes(),
            "whitespace",
        ),
    ];
    for (h, b, what) in cases {
        assert_401(&app, "discord", &h, b, "invalid_signature", what).await;
    }
    assert_401(
        &app,
        "wrong",
        &headers,
        COMMAND,
        "invalid_signature",
        "wrong key",
    )
    .await;
    assert_401(
        &app,
        "expired",
        &headers,
        COMMAND,
        "invalid_signature",
        "expired key",
    )
    .await;

    // Accepted with an empty 202 (what Discord takes before a callback answer); uppercase hex
    // as Discord's library accepts it; then a duplicate: still one row.
    let upper = with(&headers, "x-signature-ed25519", &sig.to_uppercase());
    for h in [&upper, &headers] {
        let answer = app.post("discord", &refs(h), COMMAND).await;
        assert_eq!(answer.status, 202, "{answer:?}");
    }
    assert_eq!(
        app.count("webhook_inbox").await,
        1,
        "the redelivery is a duplicate"
    );
    let (id, kind, version): (String, String, String) = sqlx::query_as(
        "SELECT provider_event_id, event_type, matched_secret_version FROM webhook_inbox",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(
        (id.as_str(), kind.as_str(), version.as_str()),
        (
            "786008729715212338",
            "interaction.application_command",
            "app-1"
        )
    );
    // The older, unexpired key version verifies during a rotation.
    let answer = app.post("rotated", &refs(&headers), COMMAND).await;
    assert_eq!(answer.status, 202, "{answer:?}");

    // A Webhook Event, re-signed with a later timestamp as a retry might be: same id, duplicate.
    for ts in [NOW, NOW + 30] {
        let answer = app
            .post("discord", &refs(&signed(1, ts, ENTITLEMENT)), ENTITLEMENT)
            .await;
        assert_eq!(answer.status, 202, "{answer:?}");
    }
    let ids: Vec<String> = sqlx::query_scalar(
        "SELECT provider_event_id FROM webhook_inbox WHERE endpoint_id = 'discord' ORDER BY provider_event_id",
    )
    .fetch_all(&app.db)
    .await
    .unwrap();
    assert_eq!(
        ids,
        [
            "786008729715212338",
            "ENTITLEMENT_CREATE:2025-06-01T10:15:00.123456:1083167266843992064"
        ]
    );
}

#[tokio::test]
async fn signed_timestamps_have_a_tolerance_of_its_own() {
    let headers = signed(1, NOW, COMMAND);
    // 900 s in the past and 300 s in the future are accepted; one second more is stale.
    for (now, status) in [
        (NOW + 900, 202),
        (NOW + 901, 401),
        (NOW - 300, 202),
        (NOW - 301, 401),
    ] {
        let app = app(now).await;
        let answer = app.post("discord", &refs(&headers), COMMAND).await;
        assert_eq!(
            answer.status,
            status,
            "now = ts {:+}: {answer:?}",
            now - NOW
        );
        if status == 401 {
            assert_eq!(answer.code(), "stale_timestamp");
        }
    }
}
