//! What a stranger sends is the request's fault, never the adapter's (issue 30, findings 3 and
//! 4): candidates past their count or length, a signed JSON string that does not decode, a
//! batch that would spend the adapter's CPU deadline and public-key work past its budget are
//! answered 4xx with their own code, so no unsigned request makes a healthy adapter count as
//! `adapter_unavailable`; a form body past the pair cap is not a form.

use base64::Engine as _;
use ed25519_dalek::Signer as _;
use hmac::{Hmac, Mac};

use crate::support::secrets::{SecretsFile, endpoint, endpoints, public_key, value};
use crate::support::{app::*, get::*, http::*, signing::*};

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;
const ADYEN_KEY: &str = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056";
const TWILIO_TOKEN: &str = "twilio-auth-token";
const TWILIO_URL: &str = "https://example.com/twilio";

/// Every adapter the tests below send strangers' requests to, each on an endpoint named after
/// it (`evil` for `test-misbehave`).
async fn app() -> TestApp {
    let secrets = SecretsFile::new()
        .set("slack", [value("s1", "slack-signing-secret")])
        .set("gitlab", [value("g1", "gitlab-token")])
        .set("meta", [value("m1", "meta-app-secret")])
        .set("meta-verify", [value("v1", "meta-verify-token")])
        .set("adyen", [value("a1", ADYEN_KEY)])
        .set("twilio", [value("t1", TWILIO_TOKEN)])
        .set(
            "std-keys",
            (1..=3u8).map(|i| public_key(&format!("pk-{i}"), &whpk(i))),
        );
    let tables = endpoints([
        endpoint("slack", "slack"),
        endpoint("gitlab", "gitlab"),
        endpoint("meta", "meta").line("secrets = { verify-token = \"meta-verify\" }"),
        endpoint("adyen", "adyen"),
        endpoint("twilio", "twilio").public_url(TWILIO_URL),
        endpoint("std-keys", "standard-webhooks"),
        endpoint("evil", "test-misbehave").secret("github"),
    ]);
    let mut builder = TestApp::builder();
    for adapter in [
        "slack.wasm",
        "gitlab.wasm",
        "meta.wasm",
        "adyen.wasm",
        "twilio.wasm",
        "testing/test-misbehave.wasm",
    ] {
        builder = builder.add_adapter(adapter);
    }
    builder
        .secrets_file(secrets)
        .add_endpoints(tables)
        // Room for the batch of 60,000 items.
        .max_body_bytes(4 << 20)
        .start()
        .await
}

fn signing_key(i: u8) -> ed25519_dalek::SigningKey {
    ed25519_dalek::SigningKey::from_bytes(&[i; 32])
}

fn whpk(i: u8) -> String {
    format!(
        "whpk_{}",
        B64.encode(signing_key(i).verifying_key().as_bytes())
    )
}

/// No request below may count as the adapter's failure, on any endpoint.
#[track_caller]
fn assert_no_adapter_failure(metrics: &str) {
    assert!(
        !metrics.contains(r#"outcome="adapter_unavailable""#),
        "a stranger's request counted as the adapter's failure:\n{metrics}"
    );
}

#[tokio::test]
async fn candidates_past_their_count_or_length_are_401_not_a_broken_adapter() {
    let app = app().await;
    let t = now().to_string();
    let long_hex = "ab".repeat(513);
    let long_token = "a".repeat(513);
    let many_v1 = (0..17)
        .map(|i| format!("v1={i:064x}"))
        .collect::<Vec<_>>()
        .join(",");
    let json = ("content-type", "application/json");
    let cases: Vec<(&str, Vec<(&str, String)>)> = vec![
        (
            "stripe",
            vec![("stripe-signature", format!("t={t},{many_v1}"))],
        ),
        (
            "stripe",
            vec![("stripe-signature", format!("t={t},v1={long_hex}"))],
        ),
        (
            "github",
            vec![
                ("x-hub-signature-256", format!("sha256={long_hex}")),
                ("x-github-delivery", "d-1".into()),
                ("x-github-event", "push".into()),
            ],
        ),
        (
            "slack",
            vec![
                ("x-slack-request-timestamp", t.clone()),
                ("x-slack-signature", format!("v0={long_hex}")),
            ],
        ),
        ("gitlab", vec![("x-gitlab-token", long_token.clone())]),
        (
            "meta",
            vec![("x-hub-signature-256", format!("sha256={long_hex}"))],
        ),
        // A careless adapter passes every candidate through: the host refuses the request.
        (
            "evil",
            vec![
                ("x-misbehave", "candidates".into()),
                ("x-sig", vec!["00".repeat(32); 17].join(",")),
            ],
        ),
        (
            "evil",
            vec![("x-misbehave", "candidates".into()), ("x-sig", long_hex)],
        ),
    ];
    for (endpoint, headers) in &cases {
        let mut headers: Vec<(&str, &str)> =
            headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        headers.push(json);
        let answer = app.post(endpoint, &headers, "{}").await;
        answer.assert_is(401, "invalid_signature", endpoint);
    }
    // Meta's GET: the verify token travels in the query.
    let query = format!("hub.mode=subscribe&hub.verify_token={long_token}&hub.challenge=12");
    let answer = get(&app.client, &app.base, "meta", &query).await;
    answer.assert_is(401, "invalid_signature", "meta GET");

    let metrics = app.metrics().await;
    assert_no_adapter_failure(&metrics);
    assert_metrics(
        &metrics,
        r#"
        wharf_requests_total{endpoint="stripe",outcome="invalid_signature"} 2
        wharf_requests_total{endpoint="github",outcome="invalid_signature"} 1
        wharf_requests_total{endpoint="slack",outcome="invalid_signature"} 1
        wharf_requests_total{endpoint="gitlab",outcome="invalid_signature"} 1
        wharf_requests_total{endpoint="meta",outcome="invalid_signature"} 2
        wharf_requests_total{endpoint="evil",outcome="invalid_signature"} 2
        "#,
    );
    // The adapters still serve: a signed request is accepted after all of it.
    app.post_stripe("evt_after_strangers")
        .await
        .assert_accepted("stripe");
}

/// An Adyen notification item, its signature over `merchant_reference` (as JSON text) left
/// bogus: the request must be refused before any signature matters.
fn adyen_item(psp: &str, merchant_reference_json: &str) -> String {
    format!(
        r#"{{"NotificationRequestItem":{{"pspReference":"{psp}","merchantAccountCode":"M","merchantReference":{merchant_reference_json},"amount":{{"value":1,"currency":"EUR"}},"eventCode":"AUTHORISATION","success":"true","additionalData":{{"hmacSignature":"{}"}}}}}}"#,
        B64.encode([0u8; 32])
    )
}

#[tokio::test]
async fn an_undecodable_signed_string_is_400_and_a_batch_past_the_cpu_deadline_401() {
    let app = app().await;
    let json = [("content-type", "application/json")];
    // A lone surrogate in a signed field: JSON, but no string to sign.
    let body = format!(
        r#"{{"live":"false","notificationItems":[{}]}}"#,
        adyen_item("psp-1", r#""ref-\ud800""#)
    );
    let answer = app.post("adyen", &json, body).await;
    answer.assert_is(400, "malformed", "adyen \\ud800");

    // 60,000 items: refused for their count, before the adapter reads them.
    let items = vec![r#"{"NotificationRequestItem":{"eventCode":"E"}}"#; 60_000];
    let body = format!(
        r#"{{"live":"false","notificationItems":[{}]}}"#,
        items.join(",")
    );
    let answer = app.post("adyen", &json, body).await;
    answer.assert_is(401, "invalid_signature", "adyen 60,000 items");

    // An adapter whose work grows with the request: out of CPU on a large body is the
    // request's doing; on a small one it serves.
    let ts = now();
    let large = vec![b' '; 64 << 10];
    let mac = |body: &[u8]| {
        let signed = [format!("{ts}.").as_bytes(), body].concat();
        hex::encode(hmac_sha256(GITHUB_SECRET.as_bytes(), &signed))
    };
    let ts_text = ts.to_string();
    let headers = |sig: &str| {
        vec![
            ("x-misbehave", "spin-on-large".to_owned()),
            ("x-ts", ts_text.clone()),
            ("x-sig", sig.to_owned()),
            ("content-type", "application/json".to_owned()),
        ]
    };
    let large_sig = mac(&large);
    let answer = app
        .post("evil", &as_refs(&headers(&large_sig)), large)
        .await;
    answer.assert_is(401, "verification_too_costly", "spin on a large body");
    let small = b"{}".to_vec();
    let small_sig = mac(&small);
    let answer = app
        .post("evil", &as_refs(&headers(&small_sig)), small)
        .await;
    answer.assert_accepted("a small body");

    assert_no_adapter_failure(&app.metrics().await);
}

fn as_refs<'a>(headers: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    headers.iter().map(|(n, v)| (*n, v.as_str())).collect()
}

/// Twilio's signature of a form body: the URL, then every parameter sorted, name then value.
fn twilio_signature(pairs: &[(String, String)]) -> String {
    let mut sorted = pairs.to_vec();
    sorted.sort();
    sorted.dedup();
    let mut signed = TWILIO_URL.to_owned();
    for (name, value) in &sorted {
        signed.push_str(name);
        signed.push_str(value);
    }
    let mut mac = Hmac::<sha1::Sha1>::new_from_slice(TWILIO_TOKEN.as_bytes()).unwrap();
    mac.update(signed.as_bytes());
    B64.encode(mac.finalize().into_bytes())
}

#[tokio::test]
async fn a_form_past_the_pair_cap_is_not_a_form() {
    let app = app().await;
    let form = |n: usize| -> Vec<(String, String)> {
        let mut pairs = vec![("MessageSid".to_owned(), "SM1".to_owned())];
        pairs.extend((1..n).map(|i| (format!("P{i}"), "v".to_owned())));
        pairs
    };
    let post = async |pairs: Vec<(String, String)>, token: &str| {
        let body = pairs
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect::<Vec<_>>()
            .join("&");
        let sig = twilio_signature(&pairs);
        let headers = [
            ("x-twilio-signature", sig.as_str()),
            ("i-twilio-idempotency-token", token),
            ("content-type", "application/x-www-form-urlencoded"),
        ];
        app.post("twilio", &headers, body).await
    };
    // Signed correctly, at the cap and one pair past it.
    assert_eq!(post(form(1024), "at-cap").await.status, 200);
    post(form(1025), "past-cap")
        .await
        .assert_is(401, "invalid_signature", "1,025 pairs");

    // A megabyte of `a&a&...` under a bogus signature: refused without sorting half a
    // million pairs (a generous bound: it took seconds in a debug build when it was sorted).
    let started = std::time::Instant::now();
    let headers = [
        ("x-twilio-signature", "AAAAAAAAAAAAAAAAAAAAAAAAAAA="),
        ("content-type", "application/x-www-form-urlencoded"),
    ];
    let answer = app.post("twilio", &headers, "a&".repeat(512 << 10)).await;
    answer.assert_is(401, "invalid_signature", "a&a&...");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_no_adapter_failure(&app.metrics().await);
}

#[tokio::test]
async fn public_key_work_past_its_budget_is_verification_too_costly() {
    let app = app().await;
    let body = vec![b' '; 100 << 10];
    let ts = now().to_string();
    let message = [format!("msg_1.{ts}.").as_bytes(), &body].concat();
    let candidates = |n: u8| {
        (1..=n)
            .map(|i| {
                format!(
                    "v1a,{}",
                    B64.encode(signing_key(9 + i).sign(&message).to_bytes())
                )
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    let post = async |signature: String| {
        let headers = [
            ("webhook-id", "msg_1"),
            ("webhook-timestamp", ts.as_str()),
            ("webhook-signature", signature.as_str()),
            ("content-type", "application/json"),
        ];
        app.post("std-keys", &headers, body.clone()).await
    };
    // Three key versions: one candidate hashes the body three times, within the budget (and
    // signed by no trusted key); four candidates would hash it twelve times.
    post(candidates(1))
        .await
        .assert_is(401, "invalid_signature", "one candidate");
    post(candidates(4))
        .await
        .assert_is(401, "verification_too_costly", "four candidates");
    assert_no_adapter_failure(&app.metrics().await);
}
