//! Adyen standard notifications: every published item vector and items signed one by one
//! (one bad item refuses the request), each item stored as its own slice, dedup inside and
//! across requests and the `[accepted]` acknowledgement, over HTTP; keys and the merchant
//! setting verified with no database.

use crate::support::mutate::{flip_byte, pairs};
use crate::support::offline::{INVALID_SIGNATURE, Verdict, Verifier};
use crate::support::secrets::{SecretsFile, UNEXPIRED, endpoint, endpoints, value};
use crate::support::{app::*, signing::*, stored::*, vectors::*};
use base64::Engine as _;
use serde_json::{Value, json};

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;
const KEY: &str = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056";

/// Endpoint `adyen` with `KEY` as version `v1`.
async fn app() -> TestApp {
    TestApp::builder()
        .add_adapter("adyen.wasm")
        .secrets_file(SecretsFile::new().set("adyen", [value("v1", KEY)]))
        .add_endpoints(endpoint("adyen", "adyen").toml())
        .start()
        .await
}

async fn post(app: &TestApp, endpoint: &str, body: impl Into<Vec<u8>>) -> (u16, String) {
    let h = [("Content-Type", "application/json")];
    let answer = app.post(endpoint, &h, body).await;
    if answer.status == 200 {
        assert_eq!(
            (answer.content_type.as_deref(), answer.body.as_str()),
            (Some("text/plain"), "[accepted]")
        );
        return (answer.status, answer.body);
    }
    let json: Value = serde_json::from_str(&answer.body).unwrap();
    (
        answer.status,
        json["error"].as_str().unwrap_or_default().to_owned(),
    )
}

fn accepted() -> (u16, String) {
    (200, "[accepted]".into())
}

fn rejected() -> (u16, String) {
    (401, "invalid_signature".into())
}

/// Signs `item` as Adyen does and sets its `additionalData.hmacSignature`.
fn signed(mut item: Value, key_hex: &str) -> Value {
    let f = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    let message = [
        f(&item["pspReference"]),
        f(&item["originalReference"]),
        f(&item["merchantAccountCode"]),
        f(&item["merchantReference"]),
        f(&item["amount"]["value"]),
        f(&item["amount"]["currency"]),
        f(&item["eventCode"]),
        f(&item["success"]),
    ]
    .join(":");
    let mac = hmac_sha256(&hex::decode(key_hex).unwrap(), message.as_bytes());
    item["additionalData"] = json!({ "hmacSignature": B64.encode(mac) });
    item
}

fn item(psp: &str, code: &str, value: i64) -> Value {
    json!({
        "pspReference": psp, "merchantAccountCode": "WharfShop", "merchantReference": "o:1\\x",
        "amount": {"currency": "EUR", "value": value}, "eventCode": code, "success": "true",
        "eventDate": "2026-11-03T09:00:00+01:00"
    })
}

fn body(items: &[Value]) -> String {
    let wrapped: Vec<Value> = items
        .iter()
        .map(|i| json!({ "NotificationRequestItem": i }))
        .collect();
    // Pretty, so every item sits at its own offsets with whitespace between.
    serde_json::to_string_pretty(&json!({"live": "false", "notificationItems": wrapped})).unwrap()
}

/// The stored rows: event id and the JSON its payload span covers.
async fn stored(app: &TestApp, body: &str) -> Vec<(String, Value)> {
    let spans = spans(app, body.as_bytes()).await.into_iter();
    spans
        .map(|(id, span)| (id, serde_json::from_slice(span).unwrap()))
        .collect()
}

#[tokio::test]
async fn published_item_vectors() {
    let file = vector_file("adyen.json");
    let items: Vec<Vector> = file
        .vectors
        .into_iter()
        .filter(|v| v.scheme.as_deref() == Some("standard-item-hmac"))
        .collect();
    assert!(items.len() >= 10);
    let published = Published::new(&items, "adyen", "adyen", value);
    let app = published.start("adyen.wasm").await;
    let mut rows = 0;
    for (i, v) in items.iter().enumerate() {
        let (endpoint, body, why) = (published.path(i), v.body.as_str(), &v.why);
        let answer = post(&app, &endpoint, body).await;
        if v.valid() {
            assert_eq!(answer, accepted(), "{why}");
            let at = body.find("\"pspReference\"").unwrap() + 18;
            let flipped = flip_byte(body, at);
            let answer = post(&app, &endpoint, flipped).await;
            assert_eq!(answer, rejected(), "{why}: signed byte");
        } else {
            assert_eq!(answer, rejected(), "{why}");
        }
        let now = app.count("webhook_inbox").await;
        assert!(now == rows || now == rows + 1, "{why}");
        rows = now;
    }
    app.shutdown().await;
}

#[tokio::test]
async fn items_are_signed_and_stored_one_by_one() {
    let app = app().await;
    let (a, b) = (
        signed(item("PSP_A", "AUTHORISATION", 1130), KEY),
        signed(item("PSP_B", "CAPTURE", 500), KEY),
    );

    // The same item twice in one request: accepted, one row.
    let first = body(&[a.clone(), b.clone(), a.clone()]);
    assert_eq!(post(&app, "adyen", first.as_str()).await, accepted());
    let rows = stored(&app, &first).await;
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0], ("PSP_A:AUTHORISATION:true".into(), a.clone()));
    assert_eq!(rows[1], ("PSP_B:CAPTURE:true".into(), b.clone()));

    // The same item in a second request: a duplicate, still answered `[accepted]`.
    assert_eq!(
        post(&app, "adyen", body(std::slice::from_ref(&b))).await,
        accepted()
    );
    assert_eq!(app.count("webhook_inbox").await, 2);
    // The same payment's outcome with the other `success`: another event.
    let mut failed = item("PSP_A", "AUTHORISATION", 1130);
    failed["success"] = json!("false");
    assert_eq!(
        post(&app, "adyen", body(&[signed(failed, KEY)])).await,
        accepted()
    );
    assert_eq!(app.count("webhook_inbox").await, 3);

    // One item whose signed field changed after signing: the whole request fails.
    let c = signed(item("PSP_C", "AUTHORISATION", 10), KEY);
    let mut tampered = signed(item("PSP_D", "AUTHORISATION", 10), KEY);
    tampered["amount"]["value"] = json!(11);
    assert_eq!(
        post(&app, "adyen", body(&[c.clone(), tampered])).await,
        rejected()
    );
    // Another item's signature: likewise.
    let mut borrowed = item("PSP_E", "AUTHORISATION", 10);
    borrowed["additionalData"] = c["additionalData"].clone();
    assert_eq!(
        post(&app, "adyen", body(&[c.clone(), borrowed])).await,
        rejected()
    );
    // A repeated key: the copy that would be read is not the copy that was signed.
    let dup = body(std::slice::from_ref(&c)).replacen(
        "\"pspReference\"",
        "\"pspReference\": \"PSP_X\",\n\"pspReference\"",
        1,
    );
    assert_eq!(post(&app, "adyen", dup).await, rejected());
    // Unsigned fields are Adyen's to leave out of the MAC: changing one still verifies.
    let mut unsigned = c.clone();
    unsigned["eventDate"] = json!("2000-01-01T00:00:00Z");
    assert_eq!(
        app.count("webhook_inbox").await,
        3,
        "nothing stored by a refused request"
    );
    assert_eq!(post(&app, "adyen", body(&[unsigned])).await, accepted());
    assert_eq!(app.count("webhook_inbox").await, 4);
    app.shutdown().await;
}

#[tokio::test]
async fn keys_and_the_merchant_account_setting() {
    let a = signed(item("PSP_A", "AUTHORISATION", 1130), KEY);
    let other = "11".repeat(32);
    let secrets = SecretsFile::new()
        .set("wrong", [value("v1", &other)])
        .set(
            "expired",
            [
                value("new", &other),
                value("old", KEY).expires("2020-01-01T00:00:00Z"),
            ],
        )
        .set(
            "rotated",
            [value("new", &other), value("old", KEY).expires(UNEXPIRED)],
        )
        .set("adyen", [value("v1", KEY)]);
    let merchant = |id: &str, account: &str| {
        let setting = format!("settings = {{ merchant_account = \"{account}\" }}");
        endpoint(id, "adyen").secret("adyen").line(&setting)
    };
    let tables = endpoints([
        endpoint("wrong", "adyen"),
        endpoint("expired", "adyen"),
        endpoint("rotated", "adyen"),
        merchant("mine", "WharfShop"),
        merchant("theirs", "Elsewhere"),
    ]);
    let v = Verifier::of("adyen.wasm", &tables, secrets, now()).await;
    let json = pairs(&[("Content-Type", "application/json")]);
    let one = body(std::slice::from_ref(&a));
    for (endpoint, want) in [
        ("wrong", INVALID_SIGNATURE),
        ("expired", INVALID_SIGNATURE),
        ("rotated", Verdict::Accepted("old".into())),
        ("mine", Verdict::Accepted("v1".into())),
        ("theirs", Verdict::Rejected(422, "unsupported_event_type")),
    ] {
        v.expect(endpoint, &json, one.as_str(), want.clone(), endpoint)
            .await;
        if want.accepted() {
            let ids = v.event_ids(endpoint, &json, one.as_str()).await;
            assert_eq!(ids, ["PSP_A:AUTHORISATION:true"], "{endpoint}: one row");
        }
    }
}

/// Adyen always sends `pspReference` and `success`, the ends of the signed message; an item
/// without one, even signed over the empty field, is a stranger's (401), never a broken
/// adapter (503, which would make Adyen look down in logs and metrics).
#[tokio::test]
async fn an_item_without_either_end_of_its_message_is_refused_as_unsigned() {
    let secrets = SecretsFile::new().set("adyen", [value("v1", KEY)]);
    let v = Verifier::of(
        "adyen.wasm",
        &endpoints([endpoint("adyen", "adyen")]),
        secrets,
        now(),
    )
    .await;
    let json = pairs(&[("Content-Type", "application/json")]);
    for field in ["success", "pspReference"] {
        let mut unsent = item("PSP_A", "AUTHORISATION", 1130);
        unsent.as_object_mut().unwrap().remove(field);
        let one = body(&[signed(unsent, KEY)]);
        v.expect("adyen", &json, one.as_str(), INVALID_SIGNATURE, field)
            .await;
    }
}

/// Adyen joins the signed fields with an unescaped `:`, so a signature made for one item also
/// fits an item whose fields split the same message another way. The adapter refuses `:` in
/// every signed field but `merchantReference` and anything but digits in `amount.value`, so a
/// message splits one way only.
#[tokio::test]
async fn a_signed_message_splits_into_fields_one_way_only() {
    let app = app().await;
    // The genuine item: pspReference `PSP1`, originalReference `ORIG`.
    let mut genuine = item("PSP1", "REFUND", 500);
    genuine["originalReference"] = json!("ORIG");
    let genuine = signed(genuine, KEY);
    let signature = genuine["additionalData"].clone();
    // The same message, split differently: pspReference `PSP1:ORIG`, no originalReference.
    let mut shifted = item("PSP1:ORIG", "REFUND", 500);
    shifted["additionalData"] = signature;
    assert_eq!(post(&app, "adyen", body(&[shifted])).await, rejected());
    // A `:` moved into the currency, or a sign in the amount: refused even when signed so.
    let mut currency = item("PSP2", "AUTHORISATION", 500);
    currency["amount"]["currency"] = json!("EUR:X");
    assert_eq!(
        post(&app, "adyen", body(&[signed(currency, KEY)])).await,
        rejected()
    );
    let negative = item("PSP3", "AUTHORISATION", -500);
    assert_eq!(
        post(&app, "adyen", body(&[signed(negative, KEY)])).await,
        rejected()
    );
    let mut text_amount = item("PSP4", "AUTHORISATION", 0);
    text_amount["amount"]["value"] = json!("5:00");
    assert_eq!(
        post(&app, "adyen", body(&[signed(text_amount, KEY)])).await,
        rejected()
    );
    // `merchantReference` keeps its `:` (item() writes `o:1\x`), and the genuine item passes.
    assert_eq!(post(&app, "adyen", body(&[genuine])).await, accepted());
    assert_eq!(app.count("webhook_inbox").await, 1);
    app.shutdown().await;
}
