//! Standard Webhooks `v1a` (Ed25519, `whpk_` keys) beside `v1` (HMAC), over real HTTP: the
//! published vectors (Svix's server test and the official repository's unmerged Go and JS PRs;
//! no released library implements v1a), mutations of each signed element, duplicates, key
//! rotation and expiry, and which check the endpoint's keys select.

use crate::support::{app::*, files::*, http::*, signing::default_secrets};
use serde_json::Value;

/// The published vectors' clock (all but the spec-example one, which never verifies).
const PUBLISHED_TS: i64 = 1_614_265_330;
const SVIX_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const V1_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn headers_of(vector: &Value) -> Vec<(String, String)> {
    let headers = vector["headers"].as_object().unwrap();
    headers
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
        .collect()
}

fn with(headers: &[(String, String)], name: &str, value: &str) -> Vec<(String, String)> {
    let pick = |k: &String, v: &String| if k == name { value.into() } else { v.clone() };
    headers
        .iter()
        .map(|(k, v)| (k.clone(), pick(k, v)))
        .collect()
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> &'a str {
    &headers.iter().find(|(k, _)| k == name).unwrap().1
}

/// One character of `s` changed at `at`, keeping its length and alphabet.
fn flip_char(s: &str, at: usize) -> String {
    let mut bytes = s.as_bytes().to_vec();
    bytes[at] = if bytes[at] == b'a' { b'b' } else { b'a' };
    String::from_utf8(bytes).unwrap()
}

fn flip_body_byte(body: &str) -> Vec<u8> {
    let mut bytes = body.as_bytes().to_vec();
    bytes[body.len() / 2] ^= 0x01;
    bytes
}

/// Endpoint `v1a-<i>` holds vector `i`'s `whpk_` key only (one endpoint per vector, since
/// several share an id); `expired` holds the Svix key as an expired version beside another
/// key; `both` the v1 test secret and the Svix key.
async fn app(vectors: &[Value]) -> TestApp {
    let mut secrets = default_secrets();
    let mut endpoints = String::new();
    for (i, v) in vectors.iter().enumerate() {
        let key = v["key"].as_str().unwrap();
        secrets += &format!("\n[[v1a_{i}]]\nversion = \"pk-1\"\npublic_key = \"{key}\"\n");
        endpoints += &format!(
            "\n[[endpoint]]\nid = \"v1a-{i}\"\nadapter = \"standard-webhooks\"\nsecret = \"v1a_{i}\"\n"
        );
    }
    let (svix, other) = (
        vectors[0]["key"].as_str().unwrap(),
        vectors[3]["key"].as_str().unwrap(),
    );
    secrets += &format!(
        "\n[[expired]]\nversion = \"pk-2\"\npublic_key = \"{other}\"\n[[expired]]\nversion = \"pk-1\"\npublic_key = \"{svix}\"\nexpires_at = \"2021-01-01T00:00:00Z\"\n\
         \n[[both]]\nversion = \"hmac-1\"\nvalue = \"{V1_SECRET}\"\n[[both]]\nversion = \"pk-1\"\npublic_key = \"{svix}\"\n"
    );
    for id in ["expired", "both"] {
        endpoints += &format!(
            "\n[[endpoint]]\nid = \"{id}\"\nadapter = \"standard-webhooks\"\nsecret = \"{id}\"\n"
        );
    }
    TestApp::builder()
        .secrets_file(secrets)
        .add_endpoints(endpoints)
        .fixed_clock(PUBLISHED_TS)
        .start()
        .await
}

async fn status(
    app: &TestApp,
    endpoint: &str,
    headers: &[(String, String)],
    body: impl Into<Vec<u8>>,
) -> (u16, String) {
    let answer = app.post(endpoint, &refs(headers), body).await;
    (answer.status, answer.code().to_owned())
}

async fn matched_version(app: &TestApp, endpoint: &str) -> String {
    sqlx::query_scalar("SELECT matched_secret_version FROM webhook_inbox WHERE endpoint_id = $1")
        .bind(endpoint)
        .fetch_one(&app.db)
        .await
        .unwrap()
}

#[tokio::test]
async fn published_vectors_mutations_and_duplicates() {
    let file = vectors("standard-webhooks-v1a.json");
    let vectors = file["vectors"].as_array().unwrap();
    let app = app(vectors).await;
    let unauthorized = (401, "invalid_signature".to_owned());

    for (i, vector) in vectors.iter().enumerate() {
        let endpoint = format!("v1a-{i}");
        let headers = headers_of(vector);
        let body = vector["body"].as_str().unwrap();
        if vector["expect"] == "invalid" {
            let before = app.count("webhook_inbox").await;
            assert_eq!(
                status(&app, &endpoint, &headers, body).await,
                unauthorized,
                "vector {i}"
            );
            assert_eq!(
                app.count("webhook_inbox").await,
                before,
                "vector {i} stored nothing"
            );
            continue;
        }
        let before = app.count("webhook_inbox").await;
        let id = header(&headers, "webhook-id").to_owned();
        let ts: i64 = header(&headers, "webhook-timestamp").parse().unwrap();
        let sig = header(&headers, "webhook-signature").to_owned();
        // Each valid published header has one v1a entry.
        let v1a_at = sig.rfind("v1a,").unwrap() + 10;
        let mutations = [
            (
                with(&headers, "webhook-id", &format!("{id}x")),
                body.as_bytes().to_vec(),
                "id",
            ),
            (
                with(&headers, "webhook-timestamp", &(ts + 1).to_string()),
                body.into(),
                "timestamp",
            ),
            (
                with(&headers, "webhook-signature", &flip_char(&sig, v1a_at)),
                body.into(),
                "signature",
            ),
            (headers.clone(), flip_body_byte(body), "body byte"),
            (
                headers.clone(),
                format!("{body} ").into_bytes(),
                "whitespace",
            ),
        ];
        for (h, b, what) in mutations {
            assert_eq!(
                status(&app, &endpoint, &h, b).await,
                unauthorized,
                "vector {i}: {what}"
            );
        }
        assert_eq!(
            app.count("webhook_inbox").await,
            before,
            "vector {i}: no mutation stored"
        );

        assert_eq!(
            status(&app, &endpoint, &headers, body).await,
            (200, "accepted".into()),
            "vector {i}"
        );
        assert_eq!(matched_version(&app, &endpoint).await, "pk-1");
        // A redelivery keeps the id: it is a duplicate, and nothing more is stored.
        assert_eq!(
            status(&app, &endpoint, &headers, body).await,
            (200, "duplicate".into()),
            "vector {i}"
        );
        assert_eq!(app.count("webhook_inbox").await, before + 1, "vector {i}");
    }
}

#[tokio::test]
async fn keys_decide_which_signatures_are_verified() {
    let file = vectors("standard-webhooks-v1a.json");
    let vectors = file["vectors"].as_array().unwrap();
    let app = app(vectors).await;
    let unauthorized = (401, "invalid_signature".to_owned());
    let svix = &vectors[0];
    let headers = headers_of(svix);
    let body = svix["body"].as_str().unwrap();
    let v1a = header(&headers, "webhook-signature").to_owned();
    // Standard Webhooks vector 1's v1 signature over the same id, timestamp and body.
    let v1 = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    // Only a v1 entry, at an endpoint holding only a public key: no check applies.
    let v1_only = with(&headers, "webhook-signature", v1);
    assert_eq!(
        status(&app, "v1a-0", &v1_only, body).await,
        unauthorized,
        "v1 only"
    );
    // Only a v1a entry, at the default endpoint holding only whsec_ secrets.
    assert_eq!(
        status(&app, "std", &headers, body).await,
        unauthorized,
        "v1a only"
    );
    // A wrong public key (the Go PR's key for the Svix signature).
    assert_eq!(
        status(&app, "v1a-3", &headers, body).await,
        unauthorized,
        "wrong key"
    );
    // The right key, but its version expired before now; the current version is another key.
    assert_eq!(
        status(&app, "expired", &headers, body).await,
        unauthorized,
        "expired"
    );
    // More v1a entries than the adapter takes.
    let many = with(&headers, "webhook-signature", &[v1a.as_str(); 5].join(" "));
    assert_eq!(
        status(&app, "v1a-0", &many, body).await,
        unauthorized,
        "too many"
    );
    // Both kinds of key: both checks apply, and a wrong v1 fails the request.
    let wrong_v1 = with(
        &headers,
        "webhook-signature",
        &format!("{} {v1a}", flip_char(v1, 5)),
    );
    assert_eq!(
        status(&app, "both", &wrong_v1, body).await,
        unauthorized,
        "wrong v1 beside v1a"
    );
    assert_eq!(app.count("webhook_inbox").await, 0, "nothing stored");

    // With both kinds of key, each kind a request carries is verified: v1 alone passes under
    // the secret (a sender moving from v1 to v1a), and then the mixed header and v1a alone are
    // the same event again.
    let v1_only = with(&headers, "webhook-signature", v1);
    assert_eq!(
        status(&app, "both", &v1_only, body).await,
        (200, "accepted".into())
    );
    assert_eq!(matched_version(&app, "both").await, "hmac-1");
    let mixed = with(&headers, "webhook-signature", &format!("{v1} {v1a}"));
    assert_eq!(
        status(&app, "both", &mixed, body).await,
        (200, "duplicate".into())
    );
    assert_eq!(
        status(&app, "both", &headers, body).await,
        (200, "duplicate".into())
    );
    // The same mixed header at the default HMAC endpoint: the v1 check alone applies.
    assert_eq!(
        status(&app, "std", &mixed, body).await,
        (200, "accepted".into())
    );
    // Svix's header names work for v1a too; same id at the same endpoint: a duplicate.
    let svix_named: Vec<_> = headers
        .iter()
        .map(|(k, v)| (k.replace("webhook-", "svix-"), v.clone()))
        .collect();
    assert_eq!(header(&svix_named, "svix-id"), SVIX_ID);
    assert_eq!(
        status(&app, "v1a-0", &svix_named, body).await,
        (200, "accepted".into())
    );
    assert_eq!(
        status(&app, "v1a-0", &headers, body).await,
        (200, "duplicate".into())
    );
    assert_eq!(app.count("webhook_inbox").await, 3);

    // Stale in either direction once the clock is past the 300 s tolerance.
    for (at, what) in [
        (PUBLISHED_TS + 301, "too old"),
        (PUBLISHED_TS - 301, "too new"),
    ] {
        let later = TestApp::builder()
            .secrets_file(format!(
                "{}\n[[late]]\nversion = \"pk\"\npublic_key = \"{}\"\n",
                default_secrets(),
                svix["key"].as_str().unwrap()
            ))
            .add_endpoints(
                "[[endpoint]]\nid = \"late\"\nadapter = \"standard-webhooks\"\nsecret = \"late\"\n",
            )
            .fixed_clock(at)
            .start()
            .await;
        assert_eq!(
            status(&later, "late", &headers, body).await,
            (401, "stale_timestamp".into()),
            "{what}"
        );
    }
}
