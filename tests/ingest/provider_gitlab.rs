//! GitLab: the secret token (`X-Gitlab-Token`, compared by the host), dedup on
//! `Idempotency-Key`, and GitLab's signing tokens verified by the standard-webhooks adapter.
//! Refusals are verified with no database; what is stored, over HTTP.

use base64::Engine as _;

use crate::support::offline::{INVALID_SIGNATURE, Verdict, Verifier};
use crate::support::secrets::{SecretsFile, Version, endpoint, endpoints, value};
use crate::support::{app::*, mutate::*, signing::*, stored::*, vectors::*};

const TOKEN: &str = "glwt-dqWIOjhWeehmdVAMU47vQ2T4";
/// A GitLab signing token (`whsec_` + base64 of 32 bytes), from research/gitlab/generated.json.
const SIGNING_TOKEN: &str = "whsec_AVA1b/7vDRd0lVdTUN2TVYCAARmn+TiSc2nwzDyYRio=";
const BODY: &str = r#"{"object_kind":"push","event_name":"push","before":"95790bf891e76fee5e1747ab589903a6a1f80f22","after":"da1560886d4f094c3e6c9ef40349f7d38b5d27d7","ref":"refs/heads/master","project_id":15}"#;
const NEW_TOKEN: &str = "glwt-the-new-token";

fn secrets() -> SecretsFile {
    SecretsFile::new()
        .set("gitlab", [value("t2", NEW_TOKEN), value("t1", TOKEN)])
        .set(
            "gitlab-expired",
            [
                value("t2", NEW_TOKEN),
                value("t1", TOKEN).expires("2020-01-01T00:00:00Z"),
            ],
        )
        .set("gitlab-signing", [value("s1", SIGNING_TOKEN)])
}

fn endpoint_tables() -> String {
    endpoints([
        endpoint("gitlab", "gitlab"),
        endpoint("gitlab-expired", "gitlab"),
        endpoint("gitlab-signed", "standard-webhooks").secret("gitlab-signing"),
    ])
}

async fn app() -> TestApp {
    TestApp::builder()
        .add_adapter("gitlab.wasm")
        .secrets_file(secrets())
        .add_endpoints(endpoint_tables())
        .start()
        .await
}

async fn verifier(now: i64) -> Verifier {
    let adapters = ["gitlab.wasm", "standard-webhooks.wasm"];
    Verifier::new(&adapters, &endpoint_tables(), secrets(), now).await
}

/// The headers GitLab sends with a secret token; `request` differs per attempt.
fn headers(token: &str, idempotency_key: &str, request: &str) -> Headers {
    pairs(&[
        ("content-type", "application/json"),
        ("x-gitlab-event", "Push Hook"),
        ("x-gitlab-instance", "https://gitlab.example.com"),
        ("x-gitlab-webhook-uuid", request),
        ("x-gitlab-event-uuid", request),
        ("idempotency-key", idempotency_key),
        ("x-gitlab-token", token),
    ])
}

/// POSTs `body` with the right token, and asserts the answer.
async fn post_token(
    app: &TestApp,
    key: &str,
    request: &str,
    body: impl Into<Vec<u8>>,
    want: (u16, &str),
) {
    expect_answer(app, "gitlab", &headers(TOKEN, key, request), body, want).await;
}

const KEY: &str = "74997067-f704-4612-8d2e-877eecc5c5b5";

#[tokio::test]
async fn gitlab_token_refusals() {
    let v = verifier(now()).await;
    // Refused: wrong, changed, missing and repeated tokens.
    let right = headers(TOKEN, KEY, "r0");
    let wrong = headers(&format!("{TOKEN}x"), KEY, "r0");
    let changed = headers(&format!("{}X", &TOKEN[..TOKEN.len() - 1]), KEY, "r0");
    let missing = without(&right, "x-gitlab-token");
    let repeated = twice(&right, "x-gitlab-token");
    for (what, h) in [
        ("wrong", &wrong),
        ("changed", &changed),
        ("missing", &missing),
        ("repeated", &repeated),
    ] {
        v.expect("gitlab", h, BODY, INVALID_SIGNATURE, what).await;
    }
    // A version that expired no longer authenticates, even though a newer one is configured.
    v.expect("gitlab-expired", &right, BODY, INVALID_SIGNATURE, "expired")
        .await;
}

#[tokio::test]
async fn gitlab_token_dedup() {
    let app = app().await;
    // The right token (the set's previous version): accepted under Idempotency-Key.
    post_token(&app, KEY, "r1", BODY, (200, "accepted")).await;
    let (id, kind, version) = only_event(&app).await;
    assert_eq!(
        (id.as_str(), kind.as_str(), version.as_str()),
        (KEY, "Push Hook", "t1")
    );

    // A retry or a manual resend keeps Idempotency-Key (the per-request UUIDs change).
    post_token(&app, KEY, "r2", BODY, (200, "duplicate")).await;
    assert_eq!(app.count("webhook_inbox").await, 1);

    // The documented limit: a token signs nothing, so a changed body under the right token and
    // a new key is accepted. Body integrity needs a signing token (next test).
    let tampered = flip_byte(BODY, 20);
    post_token(&app, "other-key", "r3", tampered, (200, "accepted")).await;
    assert_eq!(app.count("webhook_inbox").await, 2);
}

/// The Standard Webhooks signature GitLab computes with a signing token.
fn signed(id: &str, ts: i64, body: &str) -> Headers {
    let key = base64::engine::general_purpose::STANDARD
        .decode(SIGNING_TOKEN.trim_start_matches("whsec_"))
        .unwrap();
    let mac = hmac_sha256(&key, format!("{id}.{ts}.{body}").as_bytes());
    let signature = base64::engine::general_purpose::STANDARD.encode(mac);
    pairs(&[
        ("content-type", "application/json"),
        ("x-gitlab-event", "Push Hook"),
        ("idempotency-key", id),
        ("webhook-id", id),
        ("webhook-timestamp", &ts.to_string()),
        ("webhook-signature", &format!("v1,{signature}")),
    ])
}

const SIGNED_ID: &str = "f6365f2c-20b5-4ea3-8eab-624d6f5bdac8";

#[tokio::test]
async fn gitlab_signing_tokens_verify_with_the_standard_webhooks_adapter() {
    let t = now();
    let v = verifier(t).await;
    let (id, headers) = (SIGNED_ID, signed(SIGNED_ID, t, BODY));

    // The gitlab adapter does not verify a signing token: such a hook belongs on a
    // standard-webhooks endpoint.
    v.expect("gitlab", &headers, BODY, INVALID_SIGNATURE, "gitlab")
        .await;

    // Mutations: a body byte, the timestamp, the id.
    let moved = with(&headers, "webhook-timestamp", &(t + 1).to_string());
    let other = with(&headers, "webhook-id", &format!("{id}x"));
    for (what, h, b) in [
        ("body byte", headers.clone(), flip_byte(BODY, 30)),
        ("timestamp", moved, BODY.into()),
        ("id", other, BODY.into()),
    ] {
        v.expect("gitlab-signed", &h, b, INVALID_SIGNATURE, what)
            .await;
    }
    let accepted = Verdict::Accepted("s1".into());
    v.expect("gitlab-signed", &headers, BODY, accepted, "signed")
        .await;
}

#[tokio::test]
async fn gitlab_signed_retries_are_duplicates() {
    let app = app().await;
    let (id, t) = (SIGNED_ID, now());
    expect_answer(
        &app,
        "gitlab-signed",
        &signed(id, t, BODY),
        BODY,
        (200, "accepted"),
    )
    .await;
    // A retry is signed again at a later time under the same webhook-id (= Idempotency-Key).
    expect_answer(
        &app,
        "gitlab-signed",
        &signed(id, t + 60, BODY),
        BODY,
        (200, "duplicate"),
    )
    .await;
    let stored: String = sqlx::query_scalar("SELECT provider_event_id FROM webhook_inbox")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(stored, id);
}

/// The reference libraries accept a key with or without `whsec_`; the secrets file takes the
/// `whsec_` form GitLab hands out.
fn whsec(version: &str, key: &str) -> Version {
    match key.starts_with("whsec_") {
        true => value(version, key),
        false => value(version, &format!("whsec_{key}")),
    }
}

/// The published vectors GitLab's signing tokens follow (Standard Webhooks reference library),
/// through the standard-webhooks adapter with the vector's key, each at its own timestamp.
#[tokio::test]
async fn gitlab_signing_token_vectors() {
    let file = vector_file("gitlab.json");
    let published = Published::new(&file.vectors, "standard-webhooks", "gl", whsec);
    let verifier = published.verifier("standard-webhooks.wasm", 0).await;
    let at = |v: &Vector| v.timestamp("webhook-timestamp");
    published
        .verify(verifier, at, |_, v| match v.valid() {
            true => Verdict::Accepted("v1".into()),
            false => INVALID_SIGNATURE,
        })
        .await;
}
