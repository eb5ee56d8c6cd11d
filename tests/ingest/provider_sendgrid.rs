//! SendGrid's Signed Event Webhook over real HTTP: the published vectors (high-S signatures,
//! CRLFs in the body), one mutation of each signed element, keys, and batches stored one row
//! per event, each row's payload its own element of the array.

use crate::support::{app::*, files::*, http::*};
use base64::Engine as _;
use p256::ecdsa::{Signature, SigningKey, signature::Signer as _};
use serde_json::Value;

const TS: &str = "X-Twilio-Email-Event-Webhook-Timestamp";
const SIG: &str = "X-Twilio-Email-Event-Webhook-Signature";
const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

fn endpoint_toml() -> &'static str {
    "\n[[endpoint]]\nid = \"sg\"\nadapter = \"sendgrid\"\nsecret = \"sg\"\n"
}

/// An app whose `sg` endpoint trusts `keys` (version, base64 SPKI, optional expiry).
async fn app(now: i64, keys: &[(&str, &str, Option<&str>)]) -> TestApp {
    let mut secrets = crate::support::signing::default_secrets();
    for (version, key, expires) in keys {
        secrets.push_str(&format!(
            "[[sg]]\nversion = \"{version}\"\npublic_key = \"{key}\"\n"
        ));
        if let Some(at) = expires {
            secrets.push_str(&format!("expires_at = \"{at}\"\n"));
        }
    }
    TestApp::builder()
        .add_adapter("sendgrid.wasm")
        .secrets_file(secrets)
        .add_endpoints(endpoint_toml())
        .fixed_clock(now)
        .start()
        .await
}

fn headers(ts: &str, sig: &str) -> Vec<(String, String)> {
    vec![
        ("Content-Type".into(), "application/json".into()),
        (TS.into(), ts.into()),
        (SIG.into(), sig.into()),
    ]
}

async fn post(app: &TestApp, h: &[(String, String)], body: impl Into<Vec<u8>>) -> (u16, String) {
    let answer = app.post("sg", &refs(h), body).await;
    (answer.status, answer.code().to_owned())
}

/// The stored rows: event id and the bytes of the body its payload span covers.
async fn stored(app: &TestApp, body: &[u8]) -> Vec<(String, Vec<u8>)> {
    let rows: Vec<(String, i64, i64)> = sqlx::query_as(
        "SELECT provider_event_id, payload_start, payload_end FROM webhook_inbox ORDER BY payload_start",
    )
    .fetch_all(&app.db)
    .await
    .unwrap();
    rows.into_iter()
        .map(|(id, a, z)| (id, body[a as usize..z as usize].to_vec()))
        .collect()
}

/// Each element of the JSON array in `body`, compacted, with its `sg_event_id`.
fn elements(body: &str) -> Vec<(String, Value)> {
    let array: Vec<Value> = serde_json::from_str(body).unwrap();
    array
        .into_iter()
        .map(|e| (e["sg_event_id"].as_str().unwrap().to_owned(), e))
        .collect()
}

#[tokio::test]
async fn published_vectors_verify_and_every_signed_element_matters() {
    let file = vectors("sendgrid.json");
    let valid = file["vectors"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["expect"] == "valid");
    for (n, vector) in valid.enumerate() {
        let ts = vector["headers"][TS].as_str().unwrap();
        let sig = vector["headers"][SIG].as_str().unwrap();
        let body = vector["body"].as_str().unwrap();
        let key = vector["key"].as_str().unwrap();
        let now: i64 = ts.parse::<i64>().unwrap() + 10;
        let app = app(now, &[("sg-1", key, None)]).await;
        let h = headers(ts, sig);

        // One body byte, the CRLF SendGrid signs, the timestamp, the signature.
        let mut flipped = body.as_bytes().to_vec();
        flipped[body.len() / 2] ^= 1;
        let bump = (ts.parse::<i64>().unwrap() + 1).to_string();
        let mut der = B64.decode(sig).unwrap();
        *der.last_mut().unwrap() ^= 1;
        for (what, h, b) in [
            ("body byte", h.clone(), flipped),
            (
                "trimmed CRLF",
                h.clone(),
                body.trim_end().as_bytes().to_vec(),
            ),
            ("timestamp", headers(&bump, sig), body.as_bytes().to_vec()),
            (
                "signature",
                headers(ts, &B64.encode(&der)),
                body.as_bytes().to_vec(),
            ),
            ("no signature", h[..2].to_vec(), body.as_bytes().to_vec()),
        ] {
            assert_eq!(
                post(&app, &h, b).await,
                (401, "invalid_signature".into()),
                "{what}"
            );
        }
        assert_eq!(app.count("webhook_inbox").await, 0, "no mutation is stored");

        assert_eq!(
            post(&app, &h, body).await,
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
        assert_eq!(post(&app, &h, body).await, (200, "duplicate".into()));
        assert_eq!(app.count("webhook_inbox").await, events.len() as i64);
        app.shutdown().await;
    }
}

#[tokio::test]
async fn wrong_and_expired_keys_and_the_tolerance() {
    let file = vectors("sendgrid.json");
    let v = &file["vectors"][0];
    let (ts, sig, body) = (
        v["headers"][TS].as_str().unwrap(),
        v["headers"][SIG].as_str().unwrap(),
        v["body"].as_str().unwrap(),
    );
    let key = v["key"].as_str().unwrap();
    let other = file["vectors"][1]["key"].as_str().unwrap();
    let t: i64 = ts.parse().unwrap();
    let h = headers(ts, sig);

    let wrong = app(t, &[("sg-1", other, None)]).await;
    assert_eq!(
        post(&wrong, &h, body).await,
        (401, "invalid_signature".into())
    );
    // The right key, expired, beside a current other one.
    let expired = app(
        t,
        &[
            ("new", other, None),
            ("old", key, Some("2020-09-01T00:00:00Z")),
        ],
    )
    .await;
    assert_eq!(
        post(&expired, &h, body).await,
        (401, "invalid_signature".into())
    );
    // A retry not re-signed still verifies 24 h later; past 25 h it is stale.
    let late = app(t + 24 * 3600, &[("sg-1", key, None)]).await;
    assert_eq!(post(&late, &h, body).await, (200, "accepted".into()));
    let stale = app(t + 25 * 3600 + 1, &[("sg-1", key, None)]).await;
    assert_eq!(
        post(&stale, &h, body).await,
        (401, "stale_timestamp".into())
    );
    for (a, rows) in [(wrong, 0), (expired, 0), (late, 1), (stale, 0)] {
        assert_eq!(a.count("webhook_inbox").await, rows);
        a.shutdown().await;
    }
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
    let app = app(now, &[("sg-1", &spki, None)]).await;
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
