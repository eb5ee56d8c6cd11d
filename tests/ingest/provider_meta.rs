//! Meta over real HTTP: `X-Hub-Signature-256` over the raw body, the GET `hub.challenge`
//! verification under the `verify-token` slot, and batches as one event per item.

use crate::support::{app::*, files::*, get::*, http::*, signing::*};

const APP_SECRET: &str = "742a30f3225d4664d2a7bfdcb11ba27d";
const VERIFY_TOKEN: &str = "wharf-verify-624016035f08";

async fn app() -> TestApp {
    let secrets = format!(
        r#"{}
[[meta-app]]
version = "a2"
value = "0123456789abcdef0123456789abcdef"
[[meta-app]]
version = "a1"
value = "{APP_SECRET}"

[[meta-verify]]
version = "v1"
value = "{VERIFY_TOKEN}"

[[meta-expired]]
version = "a2"
value = "0123456789abcdef0123456789abcdef"
[[meta-expired]]
version = "a1"
value = "{APP_SECRET}"
expires_at = "2020-01-01T00:00:00Z"

[[meta-verify-expired]]
version = "v2"
value = "a-newer-verify-token"
[[meta-verify-expired]]
version = "v1"
value = "{VERIFY_TOKEN}"
expires_at = "2020-01-01T00:00:00Z"

[[meta-vector]]
version = "p1"
value = "TEST_APP_SECRET"

[[meta-docs-verify]]
version = "d1"
value = "meatyhamhock"
"#,
        default_secrets()
    );
    TestApp::builder()
        .add_adapter("meta.wasm")
        .secrets_file(secrets)
        .add_endpoints(
            r#"
[[endpoint]]
id = "meta"
adapter = "meta"
secret = "meta-app"
secrets = { verify-token = "meta-verify" }

[[endpoint]]
id = "meta-expired"
adapter = "meta"
secret = "meta-expired"
secrets = { verify-token = "meta-verify-expired" }

[[endpoint]]
id = "meta-docs"
adapter = "meta"
secret = "meta-vector"
secrets = { verify-token = "meta-docs-verify" }
"#,
        )
        .start()
        .await
}

fn signed(secret: &str, body: &str) -> Vec<(String, String)> {
    vec![
        ("content-type".into(), "application/json".into()),
        (
            "x-hub-signature-256".into(),
            format!(
                "sha256={}",
                hex::encode(hmac_sha256(secret.as_bytes(), body.as_bytes()))
            ),
        ),
    ]
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
async fn meta_published_vectors() {
    let app = app().await;
    let file = vectors("meta.json");
    let post = &file["vectors"][0];
    let body = post["body"].as_str().unwrap();
    let signature = post["headers"]["X-Hub-Signature-256"].as_str().unwrap();
    // The SDK's vector signs "test", which is not a Graph batch: it verifies (so 400, not 401)
    // and nothing is stored.
    let answer = app
        .post("meta-docs", &[("x-hub-signature-256", signature)], body)
        .await;
    assert_eq!(
        (answer.status, answer.code()),
        (400, "malformed"),
        "{answer:?}"
    );
    let answer = app
        .post("meta-docs", &[("x-hub-signature-256", signature)], "tesu")
        .await;
    assert_eq!((answer.status, answer.code()), (401, "invalid_signature"));

    let handshake = &file["vectors"][1];
    let query = handshake["query"].as_str().unwrap();
    let answer = get(&app.client, &app.base, "meta-docs", query).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.content_type.as_deref(), Some("text/plain"));
    assert_eq!(
        answer.body,
        handshake["expect_response"]["body"].as_str().unwrap()
    );
    assert_eq!(app.count("webhook_inbox").await, 0);
}

#[tokio::test]
async fn meta_get_verification() {
    let app = app().await;
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
async fn meta_batches_mutations_and_dedup() {
    let app = app().await;
    let body = whatsapp(&["wamid.A", "wamid.B"], &[("wamid.OUT", "delivered")]);

    let mut tampered = body.as_bytes().to_vec();
    tampered[body.len() / 2] ^= 1;
    let mut bad = signed(APP_SECRET, &body);
    let sig = bad[1].1.clone();
    bad[1].1 = format!(
        "{}{}",
        &sig[..sig.len() - 1],
        if sig.ends_with('0') { '1' } else { '0' }
    );
    for (what, endpoint, headers, body) in [
        ("body byte", "meta", signed(APP_SECRET, &body), tampered),
        ("signature", "meta", bad, body.clone().into_bytes()),
        (
            "wrong secret",
            "meta",
            signed("not-the-app-secret", &body),
            body.clone().into_bytes(),
        ),
        (
            "expired",
            "meta-expired",
            signed(APP_SECRET, &body),
            body.clone().into_bytes(),
        ),
    ] {
        let answer = app.post(endpoint, &refs(&headers), body).await;
        assert_eq!(
            (answer.status, answer.code()),
            (401, "invalid_signature"),
            "{what}"
        );
    }
    assert_eq!(app.count("webhook_inbox").await, 0);

    // One event per item, under the set's previous version.
    let answer = app
        .post("meta", &refs(&signed(APP_SECRET, &body)), body.clone())
        .await;
    assert_eq!(
        (answer.status, answer.code()),
        (200, "accepted"),
        "{answer:?}"
    );
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
    let answer = app
        .post("meta", &refs(&signed(APP_SECRET, &body)), body.clone())
        .await;
    assert_eq!(
        (answer.status, answer.code()),
        (200, "duplicate"),
        "{answer:?}"
    );
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
    let answer = app
        .post("meta", &refs(&signed(APP_SECRET, feed)), feed)
        .await;
    assert_eq!(
        (answer.status, answer.code()),
        (422, "unsupported_event_type"),
        "{answer:?}"
    );
    assert_eq!(app.count("webhook_inbox").await, 6);
}
