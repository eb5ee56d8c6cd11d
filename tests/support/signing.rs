//! Provider secrets, and requests signed the way Stripe and GitHub sign them.

use hmac::{Hmac, Mac};

pub const STRIPE_SECRET: &str = "whsec_test_stripe_2026_11";
pub const STRIPE_OLD_SECRET: &str = "whsec_test_stripe_2026_10";
pub const GITHUB_SECRET: &str = "It's a Secret to Everybody";

/// The default secrets file: the published vectors' secrets plus test ones.
pub fn default_secrets() -> String {
    format!(
        r#"[[std]]
version = "vec-1"
value = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
[[std]]
version = "vec-2"
value = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"

[[stripe]]
version = "2026-11"
value = "{STRIPE_SECRET}"
[[stripe]]
version = "2026-10"
value = "{STRIPE_OLD_SECRET}"
expires_at = "2999-01-01T00:00:00Z"

[[github]]
version = "gh-1"
value = "{GITHUB_SECRET}"
"#
    )
}

pub fn hmac_sha256(key: &[u8], message: &[u8]) -> Vec<u8> {
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(key).unwrap();
    mac.update(message);
    mac.finalize().into_bytes().to_vec()
}

/// The current Unix time, in seconds: what a provider signs as its timestamp.
pub fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// A Stripe-style `Stripe-Signature` header for `body` at `t` under `secret`.
pub fn stripe_header(secret: &str, t: i64, body: &[u8]) -> String {
    let mut message = format!("{t}.").into_bytes();
    message.extend_from_slice(body);
    format!(
        "t={t},v1={}",
        hex::encode(hmac_sha256(secret.as_bytes(), &message))
    )
}

/// The body of a Stripe `payment_intent.succeeded` event, unsigned.
pub fn stripe_event(id: &str) -> String {
    format!(
        r#"{{"id":"{id}","object":"event","type":"payment_intent.succeeded","created":1764480000,"data":{{"object":{{"id":"pi_123","object":"payment_intent","amount":2000}}}}}}"#
    )
}

/// A Stripe event freshly signed with [`STRIPE_SECRET`]: (headers, body).
pub fn signed_stripe_event(id: &str) -> (Vec<(String, String)>, String) {
    signed_stripe_request(stripe_event(id))
}

/// A Stripe event about one object, created at `created` (the version Stripe's adapter
/// reports), freshly signed: (headers, body).
pub fn signed_stripe_object_event(
    event_id: &str,
    object_id: &str,
    created: i64,
) -> (Vec<(String, String)>, String) {
    signed_stripe_request(format!(
        r#"{{"id":"{event_id}","object":"event","type":"customer.updated","created":{created},"data":{{"object":{{"id":"{object_id}","object":"customer","version_note":"{created}"}}}}}}"#
    ))
}

fn signed_stripe_request(body: String) -> (Vec<(String, String)>, String) {
    let header = stripe_header(STRIPE_SECRET, now(), body.as_bytes());
    (
        vec![
            ("stripe-signature".into(), header),
            ("content-type".into(), "application/json".into()),
        ],
        body,
    )
}

/// The headers of a GitHub `push` delivery, signed with [`GITHUB_SECRET`].
pub fn signed_github_headers(body: &[u8], delivery: &str) -> Vec<(String, String)> {
    vec![
        (
            "x-hub-signature-256".into(),
            format!(
                "sha256={}",
                hex::encode(hmac_sha256(GITHUB_SECRET.as_bytes(), body))
            ),
        ),
        ("x-github-delivery".into(), delivery.into()),
        ("x-github-event".into(), "push".into()),
    ]
}
