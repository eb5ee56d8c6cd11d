//! Discord interactions and Webhook Events. Discord publishes no vector (see
//! tests/vectors/discord.json), so requests are signed here the way its library's test signer
//! does (Ed25519 over timestamp || body, hex) with a fixed test key; the adapter's fixtures
//! hold requests made by that signer itself. Refusals, keys and the clock are verified with
//! no database; answers and what is stored, over HTTP.

use crate::support::offline::{INVALID_SIGNATURE, STALE_TIMESTAMP, Verdict, Verifier};
use crate::support::secrets::{SecretsFile, UNEXPIRED, endpoints_on, public_key};
use crate::support::{app::*, http::*, mutate::*, stored::*};
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

fn signed(seed: u8, ts: i64, body: &str) -> Headers {
    let message = [ts.to_string().as_bytes(), body.as_bytes()].concat();
    let signature = hex::encode(key(seed).sign(&message).to_bytes());
    pairs(&[
        ("content-type", "application/json"),
        ("x-signature-ed25519", &signature),
        ("x-signature-timestamp", &ts.to_string()),
    ])
}

/// Endpoint `discord` holds key 1; `wrong` key 2; `expired` key 1 expired beside key 2;
/// `rotated` key 1 unexpired beside key 2.
fn secrets() -> SecretsFile {
    let (k1, k2) = (public_hex(1), public_hex(2));
    let beside_k2 = |expires: &str| {
        [
            public_key("app-2", &k2),
            public_key("app-1", &k1).expires(expires),
        ]
    };
    SecretsFile::new()
        .set("discord", [public_key("app-1", &k1)])
        .set("wrong", [public_key("app-2", &k2)])
        .set("expired", beside_k2("2026-01-01T00:00:00Z"))
        .set("rotated", beside_k2(UNEXPIRED))
}

fn endpoint_tables() -> String {
    endpoints_on("discord", &["discord", "wrong", "expired", "rotated"])
}

async fn app(now: i64) -> TestApp {
    TestApp::builder()
        .add_adapter("discord.wasm")
        .secrets_file(secrets())
        .add_endpoints(endpoint_tables())
        .fixed_clock(now)
        .start()
        .await
}

async fn verifier(now: i64) -> Verifier {
    Verifier::of("discord.wasm", &endpoint_tables(), secrets(), now).await
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
    assert_eq!(app.count("webhook_inbox").await, 0);
}

#[tokio::test]
async fn pings_with_bad_signatures_are_refused() {
    let v = verifier(NOW).await;
    // Discord's security checks send PINGs with bad signatures: 401, never a PONG.
    let headers = signed(1, NOW, PING);
    let bad = with(&headers, "x-signature-ed25519", &hex::encode([7u8; 64]));
    for (what, endpoint, h) in [
        ("bad PING signature", "discord", bad),
        ("PING, wrong key", "wrong", headers.clone()),
        ("PING, other body", "discord", signed(1, NOW, EVENTS_PING)),
    ] {
        v.expect(endpoint, &h, PING, INVALID_SIGNATURE, what).await;
    }
}

#[tokio::test]
async fn interaction_mutations_and_keys_are_refused() {
    let v = verifier(NOW).await;
    let headers = signed(1, NOW, COMMAND);
    let name = "x-signature-ed25519";
    let sig = header(&headers, name).to_owned();
    let flipped = format!(
        "{}{}",
        if sig.starts_with('a') { "b" } else { "a" },
        &sig[1..]
    );
    let b = || COMMAND.as_bytes().to_vec();
    let moved = with(&headers, "x-signature-timestamp", &(NOW + 1).to_string());
    for (what, endpoint, h, b) in [
        ("signature", "discord", with(&headers, name, &flipped), b()),
        (
            "truncated",
            "discord",
            with(&headers, name, &sig[..126]),
            b(),
        ),
        ("timestamp", "discord", moved, b()),
        (
            "body byte",
            "discord",
            headers.clone(),
            flip_body_byte(COMMAND),
        ),
        (
            "whitespace",
            "discord",
            headers.clone(),
            format!("{COMMAND} ").into_bytes(),
        ),
        ("wrong key", "wrong", headers.clone(), b()),
        ("expired key", "expired", headers.clone(), b()),
    ] {
        v.expect(endpoint, &h, b, INVALID_SIGNATURE, what).await;
    }
}

#[tokio::test]
async fn interactions_and_events_are_stored_once() {
    let app = app(NOW).await;
    let headers = signed(1, NOW, COMMAND);
    let sig = header(&headers, "x-signature-ed25519").to_owned();

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
    let (id, kind, version) = only_event(&app).await;
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
    let mut v = verifier(NOW).await;
    let accepted = Verdict::Accepted("app-1".into());
    // 900 s in the past and 300 s in the future are accepted; one second more is stale.
    for (now, want) in [
        (NOW + 900, accepted.clone()),
        (NOW + 901, STALE_TIMESTAMP),
        (NOW - 300, accepted),
        (NOW - 301, STALE_TIMESTAMP),
    ] {
        v = v.at(now);
        let what = format!("now = ts {:+}", now - NOW);
        v.expect("discord", &headers, COMMAND, want, &what).await;
    }
}
