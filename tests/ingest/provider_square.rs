//! Square over real HTTP: the published vectors (the signed notification URL is the
//! endpoint's `public_url` plus the request's own query string), one mutation of each signed
//! element (body, signature, URL), the URL never taken from the Host header, an endpoint with
//! no `public_url`, duplicates, a rolled and an expired key.

use crate::support::{app::*, files::*, http::*, signing::*};
use base64::Engine as _;
use serde_json::Value;

const SIG: &str = "x-square-hmacsha256-signature";
const KEY: &str = "Nz1aXq9v_VdM0oPp3kR8wA";
const PUBLIC_URL: &str = "https://hooks.example.com/wharf/square";

fn square_app() -> TestAppBuilder {
    TestApp::builder().add_adapter("square.wasm")
}

fn sign(key: &str, url: &str, body: &str) -> String {
    let mac = hmac_sha256(key.as_bytes(), format!("{url}{body}").as_bytes());
    base64::engine::general_purpose::STANDARD.encode(mac)
}

fn split_url(url: &str) -> (&str, Option<&str>) {
    match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    }
}

/// `endpoint` with the request's query string, as the post helper takes it.
fn path(endpoint: &str, query: Option<&str>) -> String {
    match query {
        Some(q) => format!("{endpoint}?{q}"),
        None => endpoint.to_owned(),
    }
}

async fn status_of(
    app: &TestApp,
    path: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> (u16, String) {
    let answer = app.post(path, &refs(headers), body.to_vec()).await;
    (answer.status, answer.code().to_owned())
}

#[tokio::test]
async fn square_published_vectors() {
    let file = vectors("square.json");
    let vectors = file["vectors"].as_array().unwrap();
    // One endpoint per (URL, key) the vectors use, each with that URL as its public_url.
    let mut endpoints: Vec<(String, String)> = Vec::new();
    for v in vectors {
        let pair = (
            split_url(v["url"].as_str().unwrap()).0.to_owned(),
            v["key"].as_str().unwrap().to_owned(),
        );
        if !endpoints.contains(&pair) {
            endpoints.push(pair);
        }
    }
    let (mut toml, mut secrets) = (String::new(), String::new());
    for (n, (url, key)) in endpoints.iter().enumerate() {
        toml.push_str(&format!(
            "[[endpoint]]\nid = \"sq-{n}\"\nadapter = \"square\"\nsecret = \"sq-{n}\"\npublic_url = \"{url}\"\n"
        ));
        secrets.push_str(&format!(
            "[[sq-{n}]]\nversion = \"v1\"\nvalue = \"{key}\"\n"
        ));
    }
    let app = square_app()
        .add_endpoints(toml)
        .secrets_file(default_secrets() + &secrets)
        .start()
        .await;

    let mut accepted = 0;
    for (i, v) in vectors.iter().enumerate() {
        let (url, query) = split_url(v["url"].as_str().unwrap());
        let n = endpoints
            .iter()
            .position(|(u, k)| u == url && k == v["key"].as_str().unwrap())
            .unwrap();
        let headers: Vec<(String, String)> = v["headers"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
            .collect();
        let body = v["body"].as_str().unwrap();
        let got = status_of(
            &app,
            &path(&format!("sq-{n}"), query),
            &headers,
            body.as_bytes(),
        )
        .await;
        let has_event =
            serde_json::from_str::<Value>(body).is_ok_and(|b| b["event_id"].is_string());
        let want = match (v["expect"].as_str().unwrap(), has_event) {
            ("valid", true) => (200, "accepted"),
            // The SDK tests sign bodies that are no Square event (no event_id): they verify,
            // so the answer is the 400 that comes only after verification.
            ("valid", false) => (400, "malformed"),
            _ => (401, "invalid_signature"),
        };
        assert_eq!((got.0, got.1.as_str()), want, "vector {i}: {}", v["why"]);
        accepted += i64::from(want.0 == 200);
    }
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

#[tokio::test]
async fn square_mutations_duplicates_and_keys() {
    let endpoints = format!(
        r#"
[[endpoint]]
id = "square"
adapter = "square"
secret = "square"
public_url = "{PUBLIC_URL}"

[[endpoint]]
id = "square-rolled"
adapter = "square"
secret = "square-rolled"
public_url = "{PUBLIC_URL}"

[[endpoint]]
id = "square-expired"
adapter = "square"
secret = "square-expired"
public_url = "{PUBLIC_URL}"

[[endpoint]]
id = "square-no-url"
adapter = "square"
secret = "square"
"#
    );
    let secrets = format!(
        r#"[[square]]
version = "v1"
value = "{KEY}"

[[square-rolled]]
version = "current"
value = "another-key-entirely-x"
[[square-rolled]]
version = "previous"
value = "{KEY}"

[[square-expired]]
version = "current"
value = "another-key-entirely-x"
[[square-expired]]
version = "previous"
value = "{KEY}"
expires_at = "2001-01-01T00:00:00Z"
"#
    );
    let app = square_app()
        .add_endpoints(endpoints)
        .secrets_file(default_secrets() + &secrets)
        .start()
        .await;
    let body = payment_event("0e948795-1ab0-484f-a9dc-2b12ae397cdd");
    let signed_url = format!("{PUBLIC_URL}?tenant=acme");
    let sig = sign(KEY, &signed_url, &body);
    let headers = vec![
        ("content-type".to_owned(), "application/json".to_owned()),
        (SIG.to_owned(), sig.clone()),
        ("square-retry-number".to_owned(), "0".to_owned()),
    ];
    let with_sig = |value: String| {
        let mut h = headers.clone();
        h[1].1 = value;
        h
    };
    let rejected = (401, "invalid_signature".to_owned());

    let mut flipped = body.clone().into_bytes();
    flipped[body.len() / 2] ^= 0x01;
    assert_eq!(
        status_of(&app, "square?tenant=acme", &headers, &flipped).await,
        rejected,
        "body byte"
    );
    let mut bad = sig.clone().into_bytes();
    bad[5] = if bad[5] == b'a' { b'b' } else { b'a' };
    let bad = String::from_utf8(bad).unwrap();
    assert_eq!(
        status_of(&app, "square?tenant=acme", &with_sig(bad), body.as_bytes()).await,
        rejected,
        "signature"
    );
    for query in ["square?tenant=other", "square", "square?tenant=acme&x=1"] {
        assert_eq!(
            status_of(&app, query, &headers, body.as_bytes()).await,
            rejected,
            "{query}"
        );
    }
    // The Host header is never the URL: a signature over the URL a Host-trusting receiver
    // would rebuild, with that Host sent, is refused.
    let forged_url = "http://attacker.example/webhooks/square?tenant=acme";
    let mut forged = with_sig(sign(KEY, forged_url, &body));
    forged.push(("host".to_owned(), "attacker.example".to_owned()));
    assert_eq!(
        status_of(&app, "square?tenant=acme", &forged, body.as_bytes()).await,
        rejected,
        "forged host"
    );
    // The legacy SHA1 header alone is ignored, as Square's SDKs do.
    let legacy: Vec<_> = vec![(
        "x-square-signature".to_owned(),
        "9t271vapUXX6l58etzbxXGR/pJo=".to_owned(),
    )];
    assert_eq!(
        status_of(&app, "square?tenant=acme", &legacy, body.as_bytes()).await,
        rejected,
        "legacy"
    );
    let mut twice = headers.clone();
    twice.push((SIG.to_owned(), sig.clone()));
    assert_eq!(
        status_of(&app, "square?tenant=acme", &twice, body.as_bytes()).await,
        rejected,
        "repeated"
    );
    // No public_url: the adapter refuses with 401 rather than the host's 503.
    assert_eq!(
        status_of(&app, "square-no-url?tenant=acme", &headers, body.as_bytes()).await,
        rejected,
        "no public_url"
    );
    // The only matching key version has expired.
    assert_eq!(
        status_of(
            &app,
            "square-expired?tenant=acme",
            &headers,
            body.as_bytes()
        )
        .await,
        rejected,
        "expired key"
    );
    assert_eq!(app.count("webhook_inbox").await, 0, "no mutation is stored");

    let first = app
        .post("square?tenant=acme", &refs(&headers), body.clone())
        .await;
    assert_eq!((first.status, first.code()), (200, "accepted"), "{first:?}");
    // Square's retry: same body and signature, its unsigned retry counter moved on.
    let mut retry = headers.clone();
    retry[2].1 = "1".into();
    let again = app
        .post("square?tenant=acme", &refs(&retry), body.clone())
        .await;
    assert_eq!(
        (again.status, again.code()),
        (200, "duplicate"),
        "{again:?}"
    );
    assert_eq!(again.json["inbox_id"], first.json["inbox_id"]);
    assert_eq!(app.count("webhook_inbox").await, 1);

    let rolled = app
        .post("square-rolled?tenant=acme", &refs(&headers), body.clone())
        .await;
    assert_eq!(
        (rolled.status, rolled.code()),
        (200, "accepted"),
        "{rolled:?}"
    );
    let version: String = sqlx::query_scalar(
        "SELECT matched_secret_version FROM webhook_inbox WHERE endpoint_id = 'square-rolled'",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(version, "previous");
    assert_eq!(app.count("webhook_inbox").await, 2);
}
