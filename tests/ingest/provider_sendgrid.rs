//! SendGrid's Signed Event Webhook: the published vectors (high-S signatures, CRLFs in the
//! body), one mutation of each signed element, keys and the tolerance, verified with no
//! database; over HTTP, batches stored one row per event, each row's payload its own element
//! of the array.

use crate::support::offline::{INVALID_SIGNATURE, STALE_TIMESTAMP, Verdict, Verifier};
use crate::support::secrets::{SecretsFile, Version, endpoint, public_key};
use crate::support::{app::*, mutate::*, stored::*, vectors::*};
use base64::Engine as _;
use p256::ecdsa::{Signature, SigningKey, signature::Signer as _};
use serde_json::Value;

const TS: &str = "X-Twilio-Email-Event-Webhook-Timestamp";
const SIG: &str = "X-Twilio-Email-Event-Webhook-Signature";
const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

fn secrets(keys: impl IntoIterator<Item = Version>) -> SecretsFile {
    SecretsFile::new().set("sg", keys)
}

/// An app whose `sg` endpoint trusts `keys`.
async fn app(now: i64, keys: impl IntoIterator<Item = Version>) -> TestApp {
    TestApp::builder()
        .add_adapter("sendgrid.wasm")
        .secrets_file(secrets(keys))
        .add_endpoints(endpoint("sg", "sendgrid").toml())
        .fixed_clock(now)
        .start()
        .await
}

/// The same, verified with no database.
async fn verifier(now: i64, keys: impl IntoIterator<Item = Version>) -> Verifier {
    let tables = endpoint("sg", "sendgrid").toml();
    Verifier::of("sendgrid.wasm", &tables, secrets(keys), now).await
}

fn headers(ts: &str, sig: &str) -> Headers {
    pairs(&[("Content-Type", "application/json"), (TS, ts), (SIG, sig)])
}

async fn post(app: &TestApp, h: &[(String, String)], body: impl Into<Vec<u8>>) -> (u16, String) {
    status_code(app, "sg", h, body).await
}

/// The stored rows: event id and the bytes of the body its payload span covers.
async fn stored(app: &TestApp, body: &[u8]) -> Vec<(String, Vec<u8>)> {
    let spans = spans(app, body).await.into_iter();
    spans.map(|(id, span)| (id, span.to_vec())).collect()
}

/// Each element of the JSON array in `body`, compacted, with its `sg_event_id`.
fn elements(body: &str) -> Vec<(String, Value)> {
    let array: Vec<Value> = serde_json::from_str(body).unwrap();
    array
        .into_iter()
        .map(|e| (e["sg_event_id"].as_str().unwrap().to_owned(), e))
        .collect()
}

/// The single-event vector's timestamp, which the invalid vectors reuse.
const DROPPED_TS: i64 = 1_600_112_502;

/// A vector's clock: ten seconds after it was signed (the vector whose timestamp is no number
/// is verified at the others').
fn signed_at(v: &Vector) -> i64 {
    v.header(TS).parse().unwrap_or(DROPPED_TS) + 10
}

#[tokio::test]
async fn published_vectors_verify() {
    let file = vector_file("sendgrid.json");
    let published = Published::new(&file.vectors, "sendgrid", "sg", public_key);
    let verifier = published.verifier("sendgrid.wasm", 0).await;
    let want = |_: usize, v: &Vector| match v.valid() {
        true => Verdict::Accepted("v1".into()),
        false => INVALID_SIGNATURE,
    };
    published.verify(verifier, signed_at, want).await;
}

/// The published vectors that verify, each with the headers that carry its signature.
fn valid_vectors() -> Vec<(Vector, Headers)> {
    let file = vector_file("sendgrid.json");
    let valid = file.vectors.into_iter().filter(Vector::valid);
    valid
        .map(|v| {
            let h = headers(v.header(TS), v.header(SIG));
            (v, h)
        })
        .collect()
}

#[tokio::test]
async fn every_signed_element_matters() {
    for (n, (vector, h)) in valid_vectors().iter().enumerate() {
        let (ts, sig, body) = (vector.header(TS), vector.header(SIG), vector.body.as_str());
        let v = verifier(signed_at(vector), [public_key("sg-1", &vector.key)]).await;

        // One body byte, the CRLF SendGrid signs, the timestamp, the signature.
        let bump = (vector.timestamp(TS) + 1).to_string();
        let mut der = B64.decode(sig).unwrap();
        *der.last_mut().unwrap() ^= 1;
        let b = || body.as_bytes().to_vec();
        for (what, h, b) in [
            ("body byte", h.clone(), flip_body_byte(body)),
            (
                "trimmed CRLF",
                h.clone(),
                body.trim_end().as_bytes().to_vec(),
            ),
            ("timestamp", headers(&bump, sig), b()),
            ("signature", headers(ts, &B64.encode(&der)), b()),
            ("no signature", without(h, SIG), b()),
        ] {
            v.expect(
                "sg",
                &h,
                b,
                INVALID_SIGNATURE,
                &format!("vector {n}: {what}"),
            )
            .await;
        }
    }
}

#[tokio::test]
async fn published_batches_are_stored_one_row_per_event() {
    for (n, (vector, h)) in valid_vectors().iter().enumerate() {
        let app = app(signed_at(vector), [public_key("sg-1", &vector.key)]).await;
        let body = vector.body.as_str();
        assert_eq!(
            post(&app, h, body).await,
            (200, "accepted".into()),
            "vector {n}"
        );
        let rows = stored(&app, body.as_bytes()).await;
        let events = elements(body);
        assert_eq!(rows.len(), events.len(), "one row per array element");
        for ((id, payload), (want_id, want)) in rows.iter().zip(&events) {
            assert_eq!(id, want_id);
            // Each payload is exactly its own element: an object that is that event.
            let got: Value = serde_json::from_slice(payload).unwrap();
            assert_eq!(&got, want);
            assert!(payload.starts_with(b"{") && payload.ends_with(b"}"));
        }
        // SendGrid's retries repeat the batch: answered duplicate, nothing added.
        assert_eq!(post(&app, h, body).await, (200, "duplicate".into()));
        assert_eq!(app.count("webhook_inbox").await, events.len() as i64);
        app.shutdown().await;
    }
}

#[tokio::test]
async fn wrong_and_expired_keys_and_the_tolerance() {
    let file = vector_file("sendgrid.json");
    let vector = &file.vectors[0];
    let (key, other) = (&vector.key, &file.vectors[1].key);
    let (t, body) = (vector.timestamp(TS), vector.body.as_str());
    let h = headers(vector.header(TS), vector.header(SIG));

    let wrong = verifier(t, [public_key("sg-1", other)]).await;
    wrong
        .expect("sg", &h, body, INVALID_SIGNATURE, "wrong")
        .await;
    // The right key, expired, beside a current other one.
    let expired = [
        public_key("new", other),
        public_key("old", key).expires("2020-09-01T00:00:00Z"),
    ];
    let expired = verifier(t, expired).await;
    expired
        .expect("sg", &h, body, INVALID_SIGNATURE, "expired")
        .await;
    // A retry not re-signed still verifies 24 h later; past 25 h it is stale.
    let late = verifier(t + 24 * 3600, [public_key("sg-1", key)]).await;
    let accepted = Verdict::Accepted("sg-1".into());
    late.expect("sg", &h, body, accepted, "late").await;
    assert_eq!(late.event_ids("sg", &h, body).await.len(), 1, "one row");
    let stale = late.at(t + 25 * 3600 + 1);
    stale.expect("sg", &h, body, STALE_TIMESTAMP, "stale").await;
}

/// Signs `body` as SendGrid does: DER ECDSA P-256 over `ts || body`.
fn sign(key: &SigningKey, ts: &str, body: &str) -> String {
    let message = [ts.as_bytes(), body.as_bytes()].concat();
    let signature: Signature = key.sign(&message);
    B64.encode(signature.to_der().as_bytes())
}

fn item(id: &str, kind: &str, t: i64) -> String {
    format!(
        r#"{{"email":"ada@example.com","event":"{kind}","sg_event_id":"{id}","sg_message_id":"m1","timestamp":{t}}}"#
    )
}

#[tokio::test]
async fn batches_dedup_inside_and_across_requests_and_fail_whole() {
    let key = SigningKey::from_slice(&[7; 32]).unwrap();
    // SubjectPublicKeyInfo {id-ecPublicKey, prime256v1} around the uncompressed point.
    let mut der = hex::decode("3059301306072a8648ce3d020106082a8648ce3d030107034200").unwrap();
    der.extend_from_slice(key.verifying_key().to_encoded_point(false).as_bytes());
    let spki = B64.encode(der);
    // In the past: rows take the clock's day, and the days before partitioning are one table.
    let now = 1_700_000_000;
    let app = app(now, [public_key("sg-1", &spki)]).await;
    let ts = now.to_string();

    // The same event twice in one batch: one row, the request accepted.
    let (a, b) = (
        item("ev-a", "processed", now - 5),
        item("ev-b", "delivered", now - 3),
    );
    let body = format!("[{a},\r\n{b},\r\n{a}]\r\n");
    let h = headers(&ts, &sign(&key, &ts, &body));
    assert_eq!(
        post(&app, &h, body.as_str()).await,
        (200, "accepted".into())
    );
    let rows = stored(&app, body.as_bytes()).await;
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0], ("ev-a".into(), a.clone().into_bytes()));
    assert_eq!(rows[1], ("ev-b".into(), b.clone().into_bytes()));

    // A later batch repeating ev-b beside a new event: accepted, one row added.
    let c = item("ev-c", "open", now - 1);
    let body2 = format!("[{b},\r\n{c}]\r\n");
    let h2 = headers(&ts, &sign(&key, &ts, &body2));
    assert_eq!(
        post(&app, &h2, body2.as_str()).await,
        (200, "accepted".into())
    );
    assert_eq!(app.count("webhook_inbox").await, 3);
    // The same items only: duplicate.
    let body3 = format!("[{c},\r\n{a}]\r\n");
    let h3 = headers(&ts, &sign(&key, &ts, &body3));
    assert_eq!(
        post(&app, &h3, body3.as_str()).await,
        (200, "duplicate".into())
    );

    // Signed, but one element lacks its id: the whole batch is refused, nothing stored.
    let body4 = format!(
        r#"[{},{{"event":"open","timestamp":1}}]"#,
        item("ev-d", "open", 1)
    );
    let h4 = headers(&ts, &sign(&key, &ts, &body4));
    assert_eq!(
        post(&app, &h4, body4.as_str()).await,
        (400, "malformed".into())
    );
    assert_eq!(app.count("webhook_inbox").await, 3);
    app.shutdown().await;
}
