//! Square: the published vectors (the signed notification URL is the endpoint's `public_url`
//! plus the request's own query string), one mutation of each signed element (body,
//! signature, URL), the URL never taken from the Host header, an endpoint with no
//! `public_url`, a rolled and an expired key (verified with no database), and duplicates and
//! what is stored, over HTTP.

use crate::support::offline::INVALID_SIGNATURE;
use crate::support::secrets::{Rotations, rotations, value};
use crate::support::{mutate::*, signing::*, stored::*, vectors::*};
use base64::Engine as _;
use serde_json::Value;

const SIG: &str = "x-square-hmacsha256-signature";
const KEY: &str = "Nz1aXq9v_VdM0oPp3kR8wA";
const PUBLIC_URL: &str = "https://hooks.example.com/wharf/square";

fn sign(key: &str, url: &str, body: &str) -> String {
    let mac = hmac_sha256(key.as_bytes(), format!("{url}{body}").as_bytes());
    base64::engine::general_purpose::STANDARD.encode(mac)
}

#[tokio::test]
async fn square_published_vectors() {
    let file = vector_file("square.json");
    let published = Published::new(&file.vectors, "square", "sq", value);
    let app = published.start("square.wasm").await;
    let answers = published
        .run(
            &app,
            |_| vec![],
            |_, v| {
                let has_event =
                    serde_json::from_str::<Value>(&v.body).is_ok_and(|b| b["event_id"].is_string());
                match (v.valid(), has_event) {
                    (true, true) => (200, "accepted"),
                    // The SDK tests sign bodies that are no Square event (no event_id): they
                    // verify, so the answer is the 400 that comes only after verification.
                    (true, false) => (400, "malformed"),
                    _ => (401, "invalid_signature"),
                }
            },
        )
        .await;
    let accepted = answers.iter().filter(|a| a.status == 200).count() as i64;
    assert_eq!(app.count("webhook_inbox").await, accepted);
    let (event_type, created): (String, Option<time::OffsetDateTime>) = sqlx::query_as(
        "SELECT event_type, provider_created_at FROM webhook_inbox WHERE provider_event_id = 'ac3ac95b-f97d-458c-a6e6-18981597e05f'",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(event_type, "webhooks.test_notification");
    assert_eq!(created.map(|t| t.unix_timestamp()), Some(1_657_744_259));
}

fn payment_event(event_id: &str) -> String {
    format!(
        r#"{{"merchant_id":"6SSW7HV8K2ST5","type":"payment.updated","event_id":"{event_id}","created_at":"2026-11-02T09:15:04.308Z","data":{{"type":"payment","id":"KkAkhdMsgzn59SM8A89WgKwekxLZY","object":{{"payment":{{"id":"KkAkhdMsgzn59SM8A89WgKwekxLZY","status":"COMPLETED","note":"Caf\u00e9 <b>&</b>"}}}}}}}}"#
    )
}

fn rotation() -> Rotations {
    rotations(
        "square",
        "square",
        PUBLIC_URL,
        KEY,
        "another-key-entirely-x",
    )
}

/// A payment event signed for `PUBLIC_URL?tenant=acme`, as Square sends it first.
fn signed_payment() -> (Headers, String) {
    let body = payment_event("0e948795-1ab0-484f-a9dc-2b12ae397cdd");
    let sig = sign(KEY, &format!("{PUBLIC_URL}?tenant=acme"), &body);
    let headers = pairs(&[
        ("content-type", "application/json"),
        (SIG, &sig),
        ("square-retry-number", "0"),
    ]);
    (headers, body)
}

#[tokio::test]
async fn square_mutations_and_keys() {
    let v = rotation().verifier("square.wasm").await;
    let (headers, body) = signed_payment();
    let at = "square?tenant=acme";
    let sig = header(&headers, SIG).to_owned();
    let b = || body.clone().into_bytes();

    // The Host header is never the URL: a signature over the URL a Host-trusting receiver
    // would rebuild, with that Host sent, is refused.
    let forged_url = "http://attacker.example/webhooks/square?tenant=acme";
    let forged = plus(
        &with(&headers, SIG, &sign(KEY, forged_url, &body)),
        "host",
        "attacker.example",
    );
    // The legacy SHA1 header alone is ignored, as Square's SDKs do.
    let legacy = pairs(&[("x-square-signature", "9t271vapUXX6l58etzbxXGR/pJo=")]);
    for (what, target, h, b) in [
        ("body byte", at, headers.clone(), flip_body_byte(&body)),
        (
            "signature",
            at,
            with(&headers, SIG, &flip_char(&sig, 5)),
            b(),
        ),
        ("other query", "square?tenant=other", headers.clone(), b()),
        ("no query", "square", headers.clone(), b()),
        ("more query", "square?tenant=acme&x=1", headers.clone(), b()),
        ("forged host", at, forged, b()),
        ("legacy", at, legacy, b()),
        ("repeated", at, twice(&headers, SIG), b()),
        // No public_url: the adapter refuses with 401 rather than the host's 503.
        (
            "no public_url",
            "square-no-url?tenant=acme",
            headers.clone(),
            b(),
        ),
        // The only matching key version has expired.
        (
            "expired key",
            "square-expired?tenant=acme",
            headers.clone(),
            b(),
        ),
    ] {
        v.expect(target, &h, b, INVALID_SIGNATURE, what).await;
    }
}

#[tokio::test]
async fn square_duplicates_and_a_rolled_key() {
    let app = rotation().app("square.wasm").await;
    let (headers, body) = signed_payment();
    let first = expect_answer(
        &app,
        "square?tenant=acme",
        &headers,
        body.clone(),
        (200, "accepted"),
    )
    .await;
    // Square's retry: same body and signature, its unsigned retry counter moved on.
    let retry = with(&headers, "square-retry-number", "1");
    let again = expect_answer(
        &app,
        "square?tenant=acme",
        &retry,
        body.clone(),
        (200, "duplicate"),
    )
    .await;
    assert_eq!(again.json["inbox_id"], first.json["inbox_id"]);
    assert_eq!(app.count("webhook_inbox").await, 1);

    expect_answer(
        &app,
        "square-rolled?tenant=acme",
        &headers,
        body.clone(),
        (200, "accepted"),
    )
    .await;
    assert_eq!(matched_version(&app, "square-rolled").await, "previous");
    assert_eq!(app.count("webhook_inbox").await, 2);
}
