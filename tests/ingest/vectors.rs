//! Published provider vectors, byte for byte, and one mutation of each signed element.

use crate::support::{app::*, files::*, http::*, signing::*};
use serde_json::Value;

fn headers_of(vector: &Value) -> Vec<(String, String)> {
    vector["headers"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
        .collect()
}

fn with(headers: &[(String, String)], name: &str, value: String) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                if k.eq_ignore_ascii_case(name) {
                    value.clone()
                } else {
                    v.clone()
                },
            )
        })
        .collect()
}

/// Changes one character of a signature value in place, keeping its length and alphabet.
fn flip_char(s: &str, at: usize) -> String {
    let mut bytes = s.as_bytes().to_vec();
    bytes[at] = if bytes[at] == b'a' { b'b' } else { b'a' };
    String::from_utf8(bytes).unwrap()
}

fn flip_body_byte(body: &str) -> Vec<u8> {
    let mut bytes = body.as_bytes().to_vec();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x01;
    bytes
}

async fn assert_rejected(
    app: &TestApp,
    endpoint: &str,
    headers: &[(String, String)],
    body: impl Into<Vec<u8>>,
    code: &str,
    what: &str,
) {
    let answer = app.post(endpoint, &refs(headers), body).await;
    assert_eq!(
        (answer.status, answer.code()),
        (401, code),
        "{what}: {answer:?}"
    );
}

/// Without the signature header, or with it twice (even when one copy is right: ambiguous),
/// the request is refused.
async fn assert_missing_and_duplicated_refused(
    app: &TestApp,
    endpoint: &str,
    headers: &[(String, String)],
    body: &str,
    signature_header: &str,
) {
    let missing: Vec<_> = headers
        .iter()
        .filter(|(k, _)| !k.eq_ignore_ascii_case(signature_header))
        .cloned()
        .collect();
    assert_rejected(
        app,
        endpoint,
        &missing,
        body,
        "invalid_signature",
        "missing",
    )
    .await;
    let mut duplicated = headers.to_vec();
    duplicated.extend(
        headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(signature_header))
            .cloned(),
    );
    assert_rejected(
        app,
        endpoint,
        &duplicated,
        body,
        "invalid_signature",
        "duplicated",
    )
    .await;
}

#[tokio::test]
async fn standard_webhooks_vectors_and_mutations() {
    let file = vectors("standard-webhooks.json");
    for (i, vector) in file["vectors"].as_array().unwrap().iter().enumerate() {
        let ts: i64 = vector["headers"]["webhook-timestamp"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        // The vectors are old: pin the clock to the vector's own timestamp.
        let app = TestApp::builder().fixed_clock(ts).start().await;
        let headers = headers_of(vector);
        let body = vector["body"].as_str().unwrap();

        assert_rejected(
            &app,
            "std",
            &headers,
            flip_body_byte(body),
            "invalid_signature",
            "body byte",
        )
        .await;
        assert_rejected(
            &app,
            "std",
            &headers,
            format!("{body} "),
            "invalid_signature",
            "whitespace",
        )
        .await;
        let id = headers_of(vector)
            .into_iter()
            .find(|(k, _)| k == "webhook-id")
            .unwrap()
            .1;
        assert_rejected(
            &app,
            "std",
            &with(&headers, "webhook-id", format!("{id}x")),
            body,
            "invalid_signature",
            "id",
        )
        .await;
        assert_rejected(
            &app,
            "std",
            &with(&headers, "webhook-timestamp", (ts + 1).to_string()),
            body,
            "invalid_signature",
            "timestamp",
        )
        .await;
        let sig = vector["headers"]["webhook-signature"].as_str().unwrap();
        assert_rejected(
            &app,
            "std",
            &with(&headers, "webhook-signature", flip_char(sig, 5)),
            body,
            "invalid_signature",
            "signature",
        )
        .await;
        assert_eq!(
            app.count("webhook_inbox").await,
            0,
            "no mutation is accepted"
        );

        let answer = app.post("std", &refs(&headers), body).await;
        assert_eq!(
            (answer.status, answer.code()),
            (200, "accepted"),
            "vector {i}: {answer:?}"
        );
        let version: String =
            sqlx::query_scalar("SELECT matched_secret_version FROM webhook_inbox")
                .fetch_one(&app.db)
                .await
                .unwrap();
        assert_eq!(version, format!("vec-{}", i + 1));

        // The same vector is stale once the clock moves past the tolerance, in either direction.
        let later = app_with_clock(ts + 301).await;
        assert_rejected(&later, "std", &headers, body, "stale_timestamp", "too old").await;
        let earlier = app_with_clock(ts - 301).await;
        assert_rejected(
            &earlier,
            "std",
            &headers,
            body,
            "stale_timestamp",
            "too new",
        )
        .await;
    }
}

#[tokio::test]
async fn svix_headers_use_the_same_scheme() {
    let vector = &vectors("standard-webhooks.json")["vectors"][0];
    let ts: i64 = vector["headers"]["webhook-timestamp"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let app = TestApp::builder().fixed_clock(ts).start().await;
    let headers: Vec<(String, String)> = headers_of(vector)
        .into_iter()
        .map(|(k, v)| (k.replace("webhook-", "svix-"), v))
        .collect();
    let answer = app
        .post("std", &refs(&headers), vector["body"].as_str().unwrap())
        .await;
    assert_eq!(
        (answer.status, answer.code()),
        (200, "accepted"),
        "{answer:?}"
    );
}

#[tokio::test]
async fn standard_webhooks_signature_header_edge_cases() {
    let vector = &vectors("standard-webhooks.json")["vectors"][0];
    let ts: i64 = vector["headers"]["webhook-timestamp"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let app = TestApp::builder().fixed_clock(ts).start().await;
    let headers = headers_of(vector);
    let body = vector["body"].as_str().unwrap();
    let sig = vector["headers"]["webhook-signature"]
        .as_str()
        .unwrap()
        .to_owned();

    // An empty `v1,` (a real bug in a reference library once), alone or beside a wrong one.
    assert_rejected(
        &app,
        "std",
        &with(&headers, "webhook-signature", "v1,".into()),
        body,
        "invalid_signature",
        "empty v1",
    )
    .await;
    assert_rejected(
        &app,
        "std",
        &with(&headers, "webhook-signature", "v1, v1,AAAA".into()),
        body,
        "invalid_signature",
        "empty list",
    )
    .await;
    // A signature of the wrong length: a valid prefix of the right one.
    let short = format!("v1,{}", &sig[3..sig.len() - 8]);
    assert_rejected(
        &app,
        "std",
        &with(&headers, "webhook-signature", short),
        body,
        "invalid_signature",
        "short",
    )
    .await;
    // Missing headers.
    for name in ["webhook-id", "webhook-timestamp"] {
        let missing: Vec<_> = headers.iter().filter(|(k, _)| k != name).cloned().collect();
        assert_rejected(&app, "std", &missing, body, "invalid_signature", name).await;
    }
    assert_missing_and_duplicated_refused(&app, "std", &headers, body, "webhook-signature").await;
    assert_eq!(app.count("webhook_inbox").await, 0);

    // A list with an unknown version and a wrong v1 before the right one still verifies.
    let list = format!("v1a,xxxx v1,{} {sig}", "A".repeat(44));
    let answer = app
        .post(
            "std",
            &refs(&with(&headers, "webhook-signature", list)),
            body,
        )
        .await;
    assert_eq!(
        (answer.status, answer.code()),
        (200, "accepted"),
        "{answer:?}"
    );
}

#[tokio::test]
async fn github_vector_and_mutations() {
    let file = vectors("github.json");
    let vector = &file["vectors"][0];
    let app = TestApp::builder().start().await;
    let body = vector["body"].as_str().unwrap();
    let sig = vector["headers"]["X-Hub-Signature-256"]
        .as_str()
        .unwrap()
        .to_owned();
    let headers = vec![
        ("X-Hub-Signature-256".to_owned(), sig.clone()),
        (
            "X-GitHub-Delivery".to_owned(),
            "72d3162e-cc78-11e3-81ab-4c9367dc0958".to_owned(),
        ),
        ("X-GitHub-Event".to_owned(), "issues".to_owned()),
    ];
    assert_rejected(
        &app,
        "github",
        &headers,
        flip_body_byte(body),
        "invalid_signature",
        "body byte",
    )
    .await;
    assert_rejected(
        &app,
        "github",
        &headers,
        format!("{body}\n"),
        "invalid_signature",
        "whitespace",
    )
    .await;
    let last = sig.len() - 1;
    assert_rejected(
        &app,
        "github",
        &with(&headers, "X-Hub-Signature-256", flip_char(&sig, last)),
        body,
        "invalid_signature",
        "signature",
    )
    .await;
    assert_rejected(
        &app,
        "github",
        &with(
            &headers,
            "X-Hub-Signature-256",
            sig.replace("sha256=", "sha1="),
        ),
        body,
        "invalid_signature",
        "prefix",
    )
    .await;
    assert_rejected(
        &app,
        "github",
        &with(&headers, "X-Hub-Signature-256", sig[..sig.len() - 2].into()),
        body,
        "invalid_signature",
        "length",
    )
    .await;
    assert_missing_and_duplicated_refused(&app, "github", &headers, body, "X-Hub-Signature-256")
        .await;
    assert_eq!(app.count("webhook_inbox").await, 0);

    let answer = app.post("github", &refs(&headers), body).await;
    assert_eq!(
        (answer.status, answer.code()),
        (200, "accepted"),
        "{answer:?}"
    );
    let again = app.post("github", &refs(&headers), body).await;
    assert_eq!((again.status, again.code()), (200, "duplicate"));
    assert_eq!(again.json["inbox_id"], answer.json["inbox_id"]);

    // GitHub signs neither the delivery id nor a timestamp: a changed id is a new delivery
    // to GitHub's scheme, so it is accepted as one. Dedup is by the id GitHub keeps on
    // redelivery; this is the provider's limit, documented in docs/providers.md.
    let renamed = with(&headers, "X-GitHub-Delivery", "another-delivery".into());
    let answer = app.post("github", &refs(&renamed), body).await;
    assert_eq!((answer.status, answer.code()), (200, "accepted"));
    assert_eq!(app.count("webhook_inbox").await, 2);
}

#[tokio::test]
async fn stripe_signatures_and_mutations() {
    let t = 1_764_480_000;
    let app = TestApp::builder().fixed_clock(t + 10).start().await;
    let body = stripe_event("evt_1Q");
    let header = stripe_header(STRIPE_SECRET, t, body.as_bytes());
    let headers = vec![("Stripe-Signature".to_owned(), header.clone())];

    assert_rejected(
        &app,
        "stripe",
        &headers,
        flip_body_byte(&body),
        "invalid_signature",
        "body byte",
    )
    .await;
    assert_rejected(
        &app,
        "stripe",
        &headers,
        body.replacen(':', ": ", 1),
        "invalid_signature",
        "whitespace",
    )
    .await;
    assert_rejected(
        &app,
        "stripe",
        &headers,
        body.replace("evt_1Q", "evt_2Q"),
        "invalid_signature",
        "id",
    )
    .await;
    let shifted = header.replacen(&format!("t={t}"), &format!("t={}", t + 1), 1);
    assert_rejected(
        &app,
        "stripe",
        &with(&headers, "Stripe-Signature", shifted),
        body.as_str(),
        "invalid_signature",
        "timestamp",
    )
    .await;
    let last = header.len() - 1;
    assert_rejected(
        &app,
        "stripe",
        &with(&headers, "Stripe-Signature", flip_char(&header, last)),
        body.as_str(),
        "invalid_signature",
        "signature",
    )
    .await;
    assert_rejected(
        &app,
        "stripe",
        &with(&headers, "Stripe-Signature", format!("t={t},v1=")),
        body.as_str(),
        "invalid_signature",
        "empty v1",
    )
    .await;
    assert_rejected(
        &app,
        "stripe",
        &with(
            &headers,
            "Stripe-Signature",
            header[..header.len() - 2].into(),
        ),
        body.as_str(),
        "invalid_signature",
        "length",
    )
    .await;
    assert_missing_and_duplicated_refused(&app, "stripe", &headers, &body, "Stripe-Signature")
        .await;
    assert_eq!(app.count("webhook_inbox").await, 0);

    // During a secret roll Stripe sends one v1 per active secret; any may match.
    let v1 = |h: String| h.split_once(",v1=").unwrap().1.to_owned();
    let old = v1(stripe_header(STRIPE_OLD_SECRET, t, body.as_bytes()));
    let rolled = format!(
        "t={t},v1={},v1={old},v1={},v0=ignored",
        "0".repeat(64),
        v1(header.clone())
    );
    let answer = app
        .post(
            "stripe",
            &[("Stripe-Signature", rolled.as_str())],
            body.as_str(),
        )
        .await;
    assert_eq!(
        (answer.status, answer.code()),
        (200, "accepted"),
        "{answer:?}"
    );
    let row: (String, String, Option<String>, Option<String>, Option<i64>) = sqlx::query_as(
        "SELECT provider_event_id, event_type, object_id, object_version_kind, object_version FROM webhook_inbox",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(
        row,
        (
            "evt_1Q".into(),
            "payment_intent.succeeded".into(),
            Some("pi_123".into()),
            Some("created_at".into()),
            Some(1_764_480_000)
        )
    );

    // Stale by 301 s; and the 300 s tolerance is inclusive.
    let at = |now| async move { app_with_clock(now).await };
    let edge = at(t + 300).await;
    assert_eq!(
        edge.post("stripe", &refs(&headers), body.as_str())
            .await
            .status,
        200
    );
    let late = at(t + 301).await;
    assert_rejected(
        &late,
        "stripe",
        &headers,
        body.as_str(),
        "stale_timestamp",
        "stale",
    )
    .await;
}

async fn app_with_clock(now: i64) -> TestApp {
    TestApp::builder().fixed_clock(now).start().await
}

#[tokio::test]
async fn host_verifies_raw_bytes_not_reserialised_json() {
    let app = TestApp::builder().start().await;
    // Spacing, key order, an escaped character and a float: a JSON library's round trip
    // changes all of them.
    let body = "{\n  \"type\": \"charge.succeeded\",\n  \"id\": \"evt_raw\",\n  \"created\": 1764480000,\n  \"data\": {\"object\": {\"id\": \"ch_1\", \"amount\": 10.50, \"note\": \"caf\\u00e9\"}}\n}";
    let reserialised =
        serde_json::to_string(&serde_json::from_str::<serde_json::Value>(body).unwrap()).unwrap();
    assert_ne!(
        reserialised.as_bytes(),
        body.as_bytes(),
        "the round trip must change the bytes"
    );

    let header = stripe_header(STRIPE_SECRET, now(), body.as_bytes());
    let rejected = app
        .post(
            "stripe",
            &[("stripe-signature", header.as_str())],
            reserialised.as_bytes().to_vec(),
        )
        .await;
    assert_eq!(
        (rejected.status, rejected.code()),
        (401, "invalid_signature")
    );
    let accepted = app
        .post("stripe", &[("stripe-signature", header.as_str())], body)
        .await;
    assert_eq!(
        (accepted.status, accepted.code()),
        (200, "accepted"),
        "{accepted:?}"
    );
    // The stored payload is the exact raw bytes, hashed as received.
    let (payload_ref, hash): (uuid::Uuid, Vec<u8>) = sqlx::query_as(
        "SELECT p.payload_ref, i.payload_hash FROM webhook_inbox i JOIN webhook_payloads p ON p.payload_ref = i.raw_payload_ref",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    let stored = crate::support::app::opened_payload(&app.db, payload_ref).await;
    assert_eq!(stored, body.as_bytes());
    use sha2::Digest;
    assert_eq!(hash, sha2::Sha256::digest(body.as_bytes()).to_vec());
}

#[tokio::test]
async fn verified_but_unparseable_body_is_malformed() {
    let app = TestApp::builder().start().await;
    let body = "not json";
    let header = stripe_header(STRIPE_SECRET, now(), body.as_bytes());
    let answer = app
        .post("stripe", &[("stripe-signature", header.as_str())], body)
        .await;
    assert_eq!((answer.status, answer.code()), (400, "malformed"));
    assert_eq!(app.count("webhook_inbox").await, 0);
}

#[tokio::test]
async fn an_endpoint_may_tighten_the_tolerance() {
    let t = 1_764_480_000;
    let strict = "\n[[endpoint]]\nid = \"stripe-strict\"\nadapter = \"stripe\"\nsecret = \"stripe\"\ntolerance_secs = 10\nfuture_tolerance_secs = 0\n";
    let app = TestApp::builder()
        .add_endpoints(strict)
        .fixed_clock(t + 20)
        .start()
        .await;
    let body = stripe_event("evt_tolerance");
    let header = stripe_header(STRIPE_SECRET, t, body.as_bytes());
    let answer = app
        .post(
            "stripe-strict",
            &[("stripe-signature", header.as_str())],
            body.as_str(),
        )
        .await;
    assert_eq!((answer.status, answer.code()), (401, "stale_timestamp"));
    // The adapter's own 300 s applies on the default endpoint.
    let answer = app
        .post(
            "stripe",
            &[("stripe-signature", header.as_str())],
            body.as_str(),
        )
        .await;
    assert_eq!(answer.status, 200);
    // No future skew at all on the strict endpoint.
    let ahead = stripe_header(STRIPE_SECRET, t + 21, body.as_bytes());
    let answer = app
        .post(
            "stripe-strict",
            &[("stripe-signature", ahead.as_str())],
            body.as_str(),
        )
        .await;
    assert_eq!((answer.status, answer.code()), (401, "stale_timestamp"));
}

#[tokio::test]
async fn slack_vector_handshake_and_mutations() {
    let file = vectors("slack.json");
    let vector = &file["vectors"][0];
    let secret = vector["secret"].as_str().unwrap();
    let signed_at: i64 = vector["headers"]["X-Slack-Request-Timestamp"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let app = TestApp::builder()
        .add_adapter("slack.wasm")
        .secrets_file(format!(
            "{}\n[[slack]]\nversion = \"v1\"\nvalue = \"{secret}\"\n",
            default_secrets()
        ))
        .add_endpoints("[[endpoint]]\nid = \"slack\"\nadapter = \"slack\"\nsecret = \"slack\"\n")
        .fixed_clock(signed_at + 5)
        .start()
        .await;
    let body = vector["body"].as_str().unwrap();
    let mut headers = headers_of(vector);
    headers.push((
        "content-type".into(),
        "application/x-www-form-urlencoded".into(),
    ));

    let flipped = flip_body_byte(body);
    assert_rejected(
        &app,
        "slack",
        &headers,
        flipped,
        "invalid_signature",
        "body",
    )
    .await;
    let later = with(
        &headers,
        "X-Slack-Request-Timestamp",
        (signed_at + 1).to_string(),
    );
    assert_rejected(
        &app,
        "slack",
        &later,
        body,
        "invalid_signature",
        "timestamp",
    )
    .await;
    let signature = vector["headers"]["X-Slack-Signature"].as_str().unwrap();
    let wrong = with(&headers, "X-Slack-Signature", flip_char(signature, 10));
    assert_rejected(
        &app,
        "slack",
        &wrong,
        body,
        "invalid_signature",
        "signature",
    )
    .await;
    assert_missing_and_duplicated_refused(&app, "slack", &headers, body, "X-Slack-Signature").await;

    let answer = app.post("slack", &refs(&headers), body).await;
    assert_eq!(
        (answer.status, answer.code()),
        (200, "accepted"),
        "{answer:?}"
    );
    let again = app.post("slack", &refs(&headers), body).await;
    assert_eq!(again.code(), "duplicate");
    let (id, kind): (String, String) =
        sqlx::query_as("SELECT provider_event_id, event_type FROM webhook_inbox")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(kind, "/webhook-collect");
    assert_eq!(
        id,
        "398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
    );

    // The Events API's url_verification: answered with its challenge, nothing stored.
    let challenge = r#"{"token":"t","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#;
    let mut message = format!("v0:{signed_at}:").into_bytes();
    message.extend_from_slice(challenge.as_bytes());
    let handshake = vec![
        (
            "X-Slack-Request-Timestamp".to_owned(),
            signed_at.to_string(),
        ),
        (
            "X-Slack-Signature".to_owned(),
            format!(
                "v0={}",
                hex::encode(hmac_sha256(secret.as_bytes(), &message))
            ),
        ),
        ("content-type".to_owned(), "application/json".to_owned()),
    ];
    let answer = app.post("slack", &refs(&handshake), challenge).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        answer.json["challenge"],
        "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
    );
    assert_eq!(app.count("webhook_inbox").await, 1);
    app.shutdown().await;
}
