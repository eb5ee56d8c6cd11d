//! GitLab over real HTTP: the secret token (`X-Gitlab-Token`, compared by the host), dedup on
//! `Idempotency-Key`, and GitLab's signing tokens verified by the standard-webhooks adapter.

use base64::Engine as _;

use crate::support::{app::*, files::*, http::*, signing::*};

const TOKEN: &str = "glwt-dqWIOjhWeehmdVAMU47vQ2T4";
/// A GitLab signing token (`whsec_` + base64 of 32 bytes), from research/gitlab/generated.json.
const SIGNING_TOKEN: &str = "whsec_AVA1b/7vDRd0lVdTUN2TVYCAARmn+TiSc2nwzDyYRio=";
const BODY: &str = r#"{"object_kind":"push","event_name":"push","before":"95790bf891e76fee5e1747ab589903a6a1f80f22","after":"da1560886d4f094c3e6c9ef40349f7d38b5d27d7","ref":"refs/heads/master","project_id":15}"#;

async fn app() -> TestApp {
    let secrets = format!(
        r#"{}
[[gitlab]]
version = "t2"
value = "glwt-the-new-token"
[[gitlab]]
version = "t1"
value = "{TOKEN}"

[[gitlab-expired]]
version = "t2"
value = "glwt-the-new-token"
[[gitlab-expired]]
version = "t1"
value = "{TOKEN}"
expires_at = "2020-01-01T00:00:00Z"

[[gitlab-signing]]
version = "s1"
value = "{SIGNING_TOKEN}"
"#,
        default_secrets()
    );
    TestApp::builder()
        .add_adapter("gitlab.wasm")
        .secrets_file(secrets)
        .add_endpoints(
            r#"
[[endpoint]]
id = "gitlab"
adapter = "gitlab"
secret = "gitlab"

[[endpoint]]
id = "gitlab-expired"
adapter = "gitlab"
secret = "gitlab-expired"

[[endpoint]]
id = "gitlab-signed"
adapter = "standard-webhooks"
secret = "gitlab-signing"
"#,
        )
        .start()
        .await
}

/// The headers GitLab sends with a secret token; `request` differs per attempt.
fn headers(token: &str, idempotency_key: &str, request: &str) -> Vec<(String, String)> {
    [
        ("content-type", "application/json"),
        ("x-gitlab-event", "Push Hook"),
        ("x-gitlab-instance", "https://gitlab.example.com"),
        ("x-gitlab-webhook-uuid", request),
        ("x-gitlab-event-uuid", request),
        ("idempotency-key", idempotency_key),
        ("x-gitlab-token", token),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

#[tokio::test]
async fn gitlab_token_dedup_and_refusals() {
    let app = app().await;
    let key = "74997067-f704-4612-8d2e-877eecc5c5b5";

    // Refused before anything is stored: wrong, changed, missing and repeated tokens.
    let wrong = headers(&format!("{TOKEN}x"), key, "r0");
    let changed = headers(&format!("{}X", &TOKEN[..TOKEN.len() - 1]), key, "r0");
    let missing: Vec<_> = headers(TOKEN, key, "r0")
        .into_iter()
        .filter(|(k, _)| k != "x-gitlab-token")
        .collect();
    let mut repeated = headers(TOKEN, key, "r0");
    repeated.push(("x-gitlab-token".into(), TOKEN.into()));
    for (what, h) in [
        ("wrong", &wrong),
        ("changed", &changed),
        ("missing", &missing),
        ("repeated", &repeated),
    ] {
        let answer = app.post("gitlab", &refs(h), BODY).await;
        assert_eq!(
            (answer.status, answer.code()),
            (401, "invalid_signature"),
            "{what}"
        );
    }
    // A version that expired no longer authenticates, even though a newer one is configured.
    let answer = app
        .post("gitlab-expired", &refs(&headers(TOKEN, key, "r0")), BODY)
        .await;
    assert_eq!(
        (answer.status, answer.code()),
        (401, "invalid_signature"),
        "expired"
    );
    assert_eq!(app.count("webhook_inbox").await, 0);

    // The right token (the set's previous version): accepted under Idempotency-Key.
    let answer = app
        .post("gitlab", &refs(&headers(TOKEN, key, "r1")), BODY)
        .await;
    assert_eq!(
        (answer.status, answer.code()),
        (200, "accepted"),
        "{answer:?}"
    );
    let (id, kind, version): (String, String, String) = sqlx::query_as(
        "SELECT provider_event_id, event_type, matched_secret_version FROM webhook_inbox",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(
        (id.as_str(), kind.as_str(), version.as_str()),
        (key, "Push Hook", "t1")
    );

    // A retry or a manual resend keeps Idempotency-Key (the per-request UUIDs change).
    let answer = app
        .post("gitlab", &refs(&headers(TOKEN, key, "r2")), BODY)
        .await;
    assert_eq!(
        (answer.status, answer.code()),
        (200, "duplicate"),
        "{answer:?}"
    );
    assert_eq!(app.count("webhook_inbox").await, 1);

    // The documented limit: a token signs nothing, so a changed body under the right token and
    // a new key is accepted. Body integrity needs a signing token (next test).
    let mut tampered = BODY.as_bytes().to_vec();
    tampered[20] ^= 1;
    let answer = app
        .post(
            "gitlab",
            &refs(&headers(TOKEN, "other-key", "r3")),
            tampered,
        )
        .await;
    assert_eq!(
        (answer.status, answer.code()),
        (200, "accepted"),
        "{answer:?}"
    );
    assert_eq!(app.count("webhook_inbox").await, 2);
}

/// The Standard Webhooks signature GitLab computes with a signing token.
fn signed(id: &str, ts: i64, body: &str) -> Vec<(String, String)> {
    let key = base64::engine::general_purpose::STANDARD
        .decode(SIGNING_TOKEN.trim_start_matches("whsec_"))
        .unwrap();
    let mac = hmac_sha256(&key, format!("{id}.{ts}.{body}").as_bytes());
    let signature = base64::engine::general_purpose::STANDARD.encode(mac);
    [
        ("content-type", "application/json"),
        ("x-gitlab-event", "Push Hook"),
        ("idempotency-key", id),
        ("webhook-id", id),
        ("webhook-timestamp", &ts.to_string()),
        ("webhook-signature", &format!("v1,{signature}")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

#[tokio::test]
async fn gitlab_signing_tokens_verify_with_the_standard_webhooks_adapter() {
    let app = app().await;
    let id = "f6365f2c-20b5-4ea3-8eab-624d6f5bdac8";
    let t = now();

    // The gitlab adapter does not verify a signing token: such a hook belongs on a
    // standard-webhooks endpoint.
    let answer = app.post("gitlab", &refs(&signed(id, t, BODY)), BODY).await;
    assert_eq!((answer.status, answer.code()), (401, "invalid_signature"));

    // Mutations: a body byte, the timestamp, the id.
    let mut tampered = BODY.as_bytes().to_vec();
    tampered[30] ^= 1;
    let answer = app
        .post("gitlab-signed", &refs(&signed(id, t, BODY)), tampered)
        .await;
    assert_eq!(answer.status, 401, "body byte");
    let mut moved = signed(id, t, BODY);
    moved[4].1 = (t + 1).to_string();
    let answer = app.post("gitlab-signed", &refs(&moved), BODY).await;
    assert_eq!(answer.status, 401, "timestamp");
    let mut other = signed(id, t, BODY);
    other[3].1 = format!("{id}x");
    let answer = app.post("gitlab-signed", &refs(&other), BODY).await;
    assert_eq!(answer.status, 401, "id");
    assert_eq!(app.count("webhook_inbox").await, 0);

    let answer = app
        .post("gitlab-signed", &refs(&signed(id, t, BODY)), BODY)
        .await;
    assert_eq!(
        (answer.status, answer.code()),
        (200, "accepted"),
        "{answer:?}"
    );
    // A retry is signed again at a later time under the same webhook-id (= Idempotency-Key).
    let answer = app
        .post("gitlab-signed", &refs(&signed(id, t + 60, BODY)), BODY)
        .await;
    assert_eq!(
        (answer.status, answer.code()),
        (200, "duplicate"),
        "{answer:?}"
    );
    let stored: String = sqlx::query_scalar("SELECT provider_event_id FROM webhook_inbox")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(stored, id);
}

/// The published vectors GitLab's signing tokens follow (Standard Webhooks reference library),
/// through the standard-webhooks adapter with the vector's key.
#[tokio::test]
async fn gitlab_signing_token_vectors() {
    let file = vectors("gitlab.json");
    for (i, vector) in file["vectors"].as_array().unwrap().iter().enumerate() {
        let key = vector["key"].as_str().unwrap();
        // The reference libraries accept the key with or without `whsec_`; the secrets file
        // takes the `whsec_` form GitLab hands out.
        let key = if key.starts_with("whsec_") {
            key.to_owned()
        } else {
            format!("whsec_{key}")
        };
        let headers: Vec<(String, String)> = vector["headers"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
            .collect();
        let ts: i64 = vector["headers"]["webhook-timestamp"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        let app = TestApp::builder()
            .fixed_clock(ts)
            .secrets_file(format!(
                "{}\n[[gl]]\nversion = \"v\"\nvalue = \"{key}\"\n",
                default_secrets()
            ))
            .add_endpoints(
                "[[endpoint]]\nid = \"gl\"\nadapter = \"standard-webhooks\"\nsecret = \"gl\"\n",
            )
            .start()
            .await;
        let body = vector["body"].as_str().unwrap();
        let answer = app.post("gl", &refs(&headers), body).await;
        let expected = match vector["expect"].as_str().unwrap() {
            "valid" => (200, "accepted"),
            _ => (401, "invalid_signature"),
        };
        assert_eq!(
            (answer.status, answer.code()),
            expected,
            "vector {i}: {answer:?}"
        );
    }
}
