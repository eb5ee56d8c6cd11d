//! The HMAC providers of issue 33 over HTTP (their published vectors and mutations run as
//! fixtures, `tests/ingest/fixtures.rs` and `vectors.rs`): for each, a request freshly signed
//! as the provider signs it is accepted and stored under the provider's id and type, the same
//! request again is a duplicate, and one flipped body byte is refused with nothing stored.

use crate::support::mutate::{Headers, pairs};
use crate::support::secrets::{SecretsFile, endpoint, endpoints, value};
use crate::support::signing::{hmac_sha256, now};
use crate::support::{app::*, stored::*};
use base64::Engine as _;

/// One provider: its adapter, the secret as the provider shows it, a body, how the provider
/// signs (key, body, now) into headers, and the id and type the event must be stored under.
struct Case {
    adapter: &'static str,
    /// Its file in `adapters/dist`.
    file: &'static str,
    key: &'static str,
    body: &'static str,
    sign: fn(&str, &str, i64) -> Headers,
    id: &'static str,
    event_type: &'static str,
}

fn hex_mac(key: &str, message: &str) -> String {
    hex::encode(hmac_sha256(key.as_bytes(), message.as_bytes()))
}

const CASES: [Case; 6] = [
    Case {
        adapter: "shopify",
        file: "shopify.wasm",
        key: "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",
        body: r#"{"id":820982911946154508,"email":"jon@example.com","updated_at":"2026-12-05T10:00:00-05:00"}"#,
        sign: |key, body, _| {
            let mac = hmac_sha256(key.as_bytes(), body.as_bytes());
            let mac = base64::engine::general_purpose::STANDARD.encode(mac);
            pairs(&[
                ("content-type", "application/json"),
                ("x-shopify-hmac-sha256", &mac),
                ("x-shopify-topic", "orders/updated"),
                ("x-shopify-event-id", "98880550-7158-44d4-b7cd-2c97c8a091b5"),
                (
                    "x-shopify-webhook-id",
                    "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043",
                ),
            ])
        },
        id: "98880550-7158-44d4-b7cd-2c97c8a091b5",
        event_type: "orders/updated",
    },
    Case {
        adapter: "razorpay",
        file: "razorpay.wasm",
        key: "rzp-webhook-secret-9c1d",
        body: r#"{"entity":"event","account_id":"acc_BFQ7uQEaa7j2z7","event":"payment.captured","contains":["payment"],"payload":{"payment":{"entity":{"id":"pay_29QQoUBi66xm2f","amount":50000}}},"created_at":1764928800}"#,
        sign: |key, body, _| {
            pairs(&[
                ("content-type", "application/json"),
                ("x-razorpay-signature", &hex_mac(key, body)),
                ("x-razorpay-event-id", "KRv2Ymxzvbq4ZK"),
            ])
        },
        id: "KRv2Ymxzvbq4ZK",
        event_type: "payment.captured",
    },
    Case {
        adapter: "coinbase-commerce",
        file: "coinbase-commerce.wasm",
        key: "cc-shared-secret-4f2a",
        body: r#"{"attempt_number":1,"event":{"id":"24934862-d980-46cb-9402-43c81b0cdba6","type":"charge:confirmed","created_at":"2026-12-05T10:00:00Z","data":{"code":"66BEOV2A"}}}"#,
        sign: |key, body, _| {
            pairs(&[
                ("content-type", "application/json"),
                ("x-cc-webhook-signature", &hex_mac(key, body)),
            ])
        },
        id: "24934862-d980-46cb-9402-43c81b0cdba6",
        event_type: "charge:confirmed",
    },
    Case {
        adapter: "pagerduty",
        file: "pagerduty.wasm",
        key: "pd-webhook-secret-77aa",
        body: r#"{"event":{"id":"01DEN1HNLBC1VITK192ETXQYOC","event_type":"incident.triggered","occurred_at":"2026-12-05T10:00:00.123Z","data":{"id":"PGR0VU2","type":"incident"}}}"#,
        sign: |key, body, _| {
            let header = format!("v1={}", hex_mac(key, body));
            pairs(&[
                ("content-type", "application/json"),
                ("x-pagerduty-signature", &header),
            ])
        },
        id: "01DEN1HNLBC1VITK192ETXQYOC",
        event_type: "incident.triggered",
    },
    Case {
        adapter: "mux",
        file: "mux.wasm",
        key: "mux-signing-secret-b3c4",
        body: r#"{"id":"3a56ac3d-33da-4366-855b-f592d898409d","type":"video.asset.ready","object":{"type":"asset","id":"0201p02fGKPE7MrbC269XRD7LpcHhrmbu0002"},"created_at":"2026-12-05T10:00:00.000000Z","data":{"id":"0201p02fGKPE7MrbC269XRD7LpcHhrmbu0002"}}"#,
        sign: |key, body, now| {
            let header = format!("t={now},v1={}", hex_mac(key, &format!("{now}.{body}")));
            pairs(&[
                ("content-type", "application/json"),
                ("mux-signature", &header),
            ])
        },
        id: "3a56ac3d-33da-4366-855b-f592d898409d",
        event_type: "video.asset.ready",
    },
    Case {
        adapter: "paddle",
        file: "paddle.wasm",
        key: "pdl_ntfset_01gkpjp8bkm3tm53kdgkx6sms7_6h3qd3uFSi9YCD3OLYAShQI90XTI5vEI",
        body: r#"{"event_id":"evt_01h8441jx8x8q4n3mtzp3jvx6q","event_type":"transaction.completed","occurred_at":"2026-12-05T10:00:00.123456Z","notification_id":"ntf_01h8441jz8v3p2zbxbcqvqe4sf","data":{"id":"txn_01h8441a9khbykm4cq2qgpkqfk"}}"#,
        sign: |key, body, now| {
            let header = format!("ts={now};h1={}", hex_mac(key, &format!("{now}:{body}")));
            pairs(&[
                ("content-type", "application/json"),
                ("paddle-signature", &header),
            ])
        },
        id: "evt_01h8441jx8x8q4n3mtzp3jvx6q",
        event_type: "transaction.completed",
    },
];

#[tokio::test]
async fn each_hmac_provider_accepts_a_signed_request_once_and_refuses_a_changed_body() {
    let mut secrets = SecretsFile::new();
    let mut builder = TestApp::builder();
    for case in &CASES {
        secrets = secrets.set(case.adapter, [value("v1", case.key)]);
        builder = builder.add_adapter(case.file);
    }
    let app = builder
        .secrets_file(secrets)
        .add_endpoints(endpoints(CASES.map(|c| endpoint(c.adapter, c.adapter))))
        .start()
        .await;
    for case in &CASES {
        let headers = (case.sign)(case.key, case.body, now());
        expect_answer(&app, case.adapter, &headers, case.body, (200, "accepted")).await;
        expect_answer(&app, case.adapter, &headers, case.body, (200, "duplicate")).await;
        let mut changed = case.body.as_bytes().to_vec();
        let last = changed.len() - 2;
        changed[last] ^= 0x01;
        expect_answer(
            &app,
            case.adapter,
            &headers,
            changed,
            (401, "invalid_signature"),
        )
        .await;
        let (id, event_type, version): (String, String, String) = sqlx::query_as(
            "SELECT provider_event_id, event_type, matched_secret_version FROM webhook_inbox
             WHERE endpoint_id = $1",
        )
        .bind(case.adapter)
        .fetch_one(&app.db)
        .await
        .unwrap_or_else(|e| panic!("{}: one stored event: {e}", case.adapter));
        assert_eq!(
            (id.as_str(), event_type.as_str(), version.as_str()),
            (case.id, case.event_type, "v1"),
            "{}",
            case.adapter
        );
    }
    app.shutdown().await;
}
