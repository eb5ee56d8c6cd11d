//! Meta: `X-Hub-Signature-256` over the raw body (refusals verified with no database), the GET
//! `hub.challenge` verification under the `verify-token` slot, and batches as one event per
//! item, over HTTP.

use crate::support::offline::{INVALID_SIGNATURE, Verdict, Verifier};
use crate::support::secrets::{SecretsFile, endpoint, endpoints, value};
use crate::support::{app::*, get::*, http::*, mutate::*, signing::*, stored::*, vectors::*};

const APP_SECRET: &str = "742a30f3225d4664d2a7bfdcb11ba27d";
const VERIFY_TOKEN: &str = "wharf-verify-624016035f08";
const NEWER_SECRET: &str = "0123456789abcdef0123456789abcdef";
const EXPIRED: &str = "2020-01-01T00:00:00Z";

fn secrets() -> SecretsFile {
    SecretsFile::new()
        .set(
            "meta-app",
            [value("a2", NEWER_SECRET), value("a1", APP_SECRET)],
        )
        .set("meta-verify", [value("v1", VERIFY_TOKEN)])
        .set(
            "meta-expired",
            [
                value("a2", NEWER_SECRET),
                value("a1", APP_SECRET).expires(EXPIRED),
            ],
        )
        .set(
            "meta-verify-expired",
            [
                value("v2", "a-newer-verify-token"),
                value("v1", VERIFY_TOKEN).expires(EXPIRED),
            ],
        )
        .set("meta-vector", [value("p1", "TEST_APP_SECRET")])
        .set("meta-docs-verify", [value("d1", "meatyhamhock")])
}

/// Each endpoint: its id, the app secret's set, and the verify token's.
fn endpoint_tables() -> String {
    endpoints(
        [
            ("meta", "meta-app", "meta-verify"),
            ("meta-expired", "meta-expired", "meta-verify-expired"),
            ("meta-docs", "meta-vector", "meta-docs-verify"),
        ]
        .map(|(id, secret, verify)| {
            endpoint(id, "meta")
                .secret(secret)
                .line(&format!("secrets = {{ verify-token = \"{verify}\" }}"))
        }),
    )
}

async fn app() -> TestApp {
    TestApp::builder()
        .add_adapter("meta.wasm")
        .secrets_file(secrets())
        .add_endpoints(endpoint_tables())
        .start()
        .await
}

async fn verifier() -> Verifier {
    Verifier::of("meta.wasm", &endpoint_tables(), secrets(), now()).await
}

fn signed(secret: &str, body: &str) -> Headers {
    let mac = hex::encode(hmac_sha256(secret.as_bytes(), body.as_bytes()));
    pairs(&[
        ("content-type", "application/json"),
        ("x-hub-signature-256", &format!("sha256={mac}")),
    ])
}

/// POSTs `body` signed with the app secret to `meta`, and asserts the answer.
async fn post_signed(app: &TestApp, body: &str, want: (u16, &str)) {
    expect_answer(app, "meta", &signed(APP_SECRET, body), body, want).await;
}

/// A WhatsApp batch: inbound messages by id, then status updates as (wamid, status).
fn whatsapp(messages: &[&str], statuses: &[(&str, &str)]) -> String {
    let messages: Vec<String> = messages
        .iter()
        .map(|id| format!(r#"{{"from":"16505551234","id":"{id}","timestamp":"1764522000","type":"text","text":{{"body":"hi \ud83d\ude00"}}}}"#))
        .collect();
    let statuses: Vec<String> = statuses
        .iter()
        .map(|(id, s)| format!(r#"{{"id":"{id}","status":"{s}","timestamp":"1764522001","recipient_id":"16505551234"}}"#))
        .collect();
    format!(
        r#"{{"object":"whatsapp_business_account","entry":[{{"id":"102290129340398","changes":[{{"value":{{"messaging_product":"whatsapp","metadata":{{"display_phone_number":"15550783881","phone_number_id":"106540352242922"}},"messages":[{}],"statuses":[{}]}},"field":"messages"}}]}}]}}"#,
        messages.join(","),
        statuses.join(",")
    )
}

async fn event_ids(app: &TestApp) -> Vec<String> {
    sqlx::query_scalar("SELECT provider_event_id FROM webhook_inbox ORDER BY provider_event_id")
        .fetch_all(&app.db)
        .await
        .unwrap()
}

#[tokio::test]
async fn meta_published_signature_vector() {
    let v = verifier().await;
    let vector = &vector_file("meta.json").vectors[0];
    let signature = pairs(&[("x-hub-signature-256", vector.header("X-Hub-Signature-256"))]);
    // The SDK's vector signs "test", which is not a Graph batch: it verifies (so 400, not 401)
    // and nothing is stored.
    let malformed = Verdict::Rejected(400, "malformed");
    let body = vector.body.as_str();
    v.expect("meta-docs", &signature, body, malformed, "vector")
        .await;
    v.expect(
        "meta-docs",
        &signature,
        "tesu",
        INVALID_SIGNATURE,
        "changed",
    )
    .await;
}

#[tokio::test]
async fn meta_get_verification() {
    let app = app().await;
    // The docs' sample verification request, answered with its challenge as plain text.
    let handshake = &vector_file("meta.json").vectors[1];
    let query = handshake.query.as_deref().unwrap();
    let answer = get(&app.client, &app.base, "meta-docs", query).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.content_type.as_deref(), Some("text/plain"));
    let expected = handshake.expect_response.as_ref().unwrap();
    assert_eq!(
        (answer.status, answer.body.as_str()),
        (expected.status, expected.body.as_str())
    );

    let good =
        format!("hub.mode=subscribe&hub.challenge=1089785435&hub.verify_token={VERIFY_TOKEN}");
    let answer = get(&app.client, &app.base, "meta", &good).await;
    assert_eq!(
        (answer.status, answer.body.as_str()),
        (200, "1089785435"),
        "{answer:?}"
    );

    for (what, endpoint, query, status) in [
        (
            "wrong token",
            "meta",
            good.replace(VERIFY_TOKEN, "wrong-token"),
            401,
        ),
        (
            "no token",
            "meta",
            "hub.mode=subscribe&hub.challenge=1089785435".to_owned(),
            401,
        ),
        (
            "mode",
            "meta",
            good.replace("subscribe", "unsubscribe"),
            401,
        ),
        (
            "repeated token",
            "meta",
            format!("{good}&hub.verify_token={VERIFY_TOKEN}"),
            401,
        ),
        ("expired token", "meta-expired", good.clone(), 401),
        (
            "markup challenge",
            "meta",
            good.replace("1089785435", "%3Cscript%3E"),
            400,
        ),
        (
            "long challenge",
            "meta",
            good.replace("1089785435", &"1".repeat(129)),
            400,
        ),
    ] {
        let answer = get(&app.client, &app.base, endpoint, &query).await;
        assert_eq!(answer.status, status, "{what}: {answer:?}");
        assert!(
            !answer.body.contains("1089785435") && !answer.body.contains("script"),
            "{what}"
        );
    }

    // An adapter that does not serve GET keeps answering 405.
    let answer = get(&app.client, &app.base, "github", &good).await;
    assert_eq!(answer.status, 405, "{answer:?}");
    assert_eq!(app.count("webhook_inbox").await, 0);
}

#[tokio::test]
async fn meta_mutations_and_keys() {
    let v = verifier().await;
    let body = whatsapp(&["wamid.A", "wamid.B"], &[("wamid.OUT", "delivered")]);
    let headers = signed(APP_SECRET, &body);
    let name = "x-hub-signature-256";
    let bad = with(&headers, name, &flip_last_hex(header(&headers, name)));
    let b = || body.clone().into_bytes();
    for (what, endpoint, headers, body) in [
        ("body byte", "meta", headers.clone(), flip_body_byte(&body)),
        ("signature", "meta", bad, b()),
        (
            "wrong secret",
            "meta",
            signed("not-the-app-secret", &body),
            b(),
        ),
        ("expired", "meta-expired", headers.clone(), b()),
    ] {
        v.expect(endpoint, &headers, body, INVALID_SIGNATURE, what)
            .await;
    }
}

#[tokio::test]
async fn meta_batches_and_dedup() {
    let app = app().await;
    let body = whatsapp(&["wamid.A", "wamid.B"], &[("wamid.OUT", "delivered")]);

    // One event per item, under the set's previous version.
    post_signed(&app, &body, (200, "accepted")).await;
    assert_eq!(
        event_ids(&app).await,
        ["wamid.A", "wamid.B", "wamid.OUT:delivered"]
    );
    let version: String =
        sqlx::query_scalar("SELECT DISTINCT matched_secret_version FROM webhook_inbox")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(version, "a1");

    // Meta's retry: the same batch again is a duplicate.
    post_signed(&app, &body, (200, "duplicate")).await;
    assert_eq!(app.count("webhook_inbox").await, 3);

    // Across requests: a batch repeating a stored item stores only its new ones, and a status
    // moving on is a new event for the same message.
    let next = whatsapp(&["wamid.B", "wamid.C"], &[("wamid.OUT", "read")]);
    let answer = app
        .post("meta", &refs(&signed(APP_SECRET, &next)), next)
        .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        event_ids(&app).await,
        [
            "wamid.A",
            "wamid.B",
            "wamid.C",
            "wamid.OUT:delivered",
            "wamid.OUT:read"
        ]
    );

    // Inside one request: the same item twice is stored once.
    let twice = whatsapp(&["wamid.D", "wamid.D"], &[]);
    let answer = app
        .post("meta", &refs(&signed(APP_SECRET, &twice)), twice)
        .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(app.count("webhook_inbox").await, 6);

    // A change without an id of its own is not keyed on a hash of the payload: unsupported.
    let feed = r#"{"object":"page","entry":[{"id":"1234567890123456","time":1764522020,"changes":[{"field":"feed","value":{"item":"comment","verb":"add","comment_id":"98_11","message":"\u00e4\u00f6\u00e5 http:\/\/x"}}]}]}"#;
    post_signed(&app, feed, (422, "unsupported_event_type")).await;
    assert_eq!(app.count("webhook_inbox").await, 6);
}
