//! Signed deliveries: HTTP deliveries signed the Standard Webhooks way, so the downstream
//! service verifies Wharf as Wharf verifies providers (and with the same libraries).
//!
//! - `webhook-id`: the inbox id, the same on every attempt (as `Idempotency-Key`);
//! - `webhook-timestamp`: the attempt's Unix seconds;
//! - `webhook-signature`: `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">` under every
//!   unexpired version of the route's `signing_secret` set, newest first, separated by spaces,
//!   so a downstream holding either the old or the new secret verifies during a rotation.
//!
//! Keys are read from the live secrets file at each attempt, so a rotation applies without a
//! restart. Versions are `whsec_` + base64 (the key is the decoded bytes). A set that cannot
//! sign (unknown, all expired, a version that is not such a secret) fails the attempt, which
//! is retried: the operator can fix the file. Diagnostics name the set and version, never a
//! value; no secret or signature is ever logged.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use http::{HeaderName, HeaderValue};
use sha2::Sha256;
use time::OffsetDateTime;

use crate::adapter::KeyEncoding;
use crate::config::Config;
use crate::ingest::{
    HostSecretError, HostSecretUse, KeyEncodings, KeySource, TrustedKey, host_secret_values,
};

pub const WEBHOOK_ID: HeaderName = HeaderName::from_static("webhook-id");
pub const WEBHOOK_TIMESTAMP: HeaderName = HeaderName::from_static("webhook-timestamp");
pub const WEBHOOK_SIGNATURE: HeaderName = HeaderName::from_static("webhook-signature");

/// The `whsec_` encoding, and no public keys: a delivery is signed with a shared secret.
const ENCODINGS: KeyEncodings = KeyEncodings {
    secret: KeyEncoding::WhsecBase64,
    public_key: None,
};

/// Why an attempt cannot be signed (the set and version named, never a value).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SigningError {
    #[error(transparent)]
    Keys(#[from] HostSecretError),
    #[error("webhook-id cannot be a header value")]
    NotAHeaderValue,
}

/// The set's unexpired versions at `now`, newest first, or why it cannot sign (the set and
/// version named, never a value).
pub fn signing_keys(
    source: &dyn KeySource,
    set: &str,
    now: OffsetDateTime,
) -> Result<Vec<TrustedKey>, HostSecretError> {
    host_secret_values(
        source,
        set,
        ENCODINGS,
        now,
        &HostSecretUse {
            noun: "signing secret set",
            undecodable: "is not a whsec_ base64 secret",
            public_key: "deliveries are signed with a `value` (whsec_ base64)",
            value: "secret value",
        },
    )
}

/// At start: every set a route signs with is in the secrets file and can sign now (it has an
/// unexpired version, and every unexpired version is a `whsec_` secret). Later failures (a
/// rotation gone wrong) fail attempts instead, which are retried.
pub fn check_signing_sets(
    config: &Config,
    source: &dyn KeySource,
    now: OffsetDateTime,
) -> anyhow::Result<()> {
    for (i, r) in config.routes.iter().enumerate() {
        if let Some(set) = &r.signing_secret {
            signing_keys(source, set, now).map_err(|e| {
                anyhow::anyhow!(
                    "route {} ({} -> {}): signing_secret: {e} ({})",
                    i + 1,
                    r.endpoint,
                    r.sink.as_str(),
                    config.secrets.file.display()
                )
            })?;
        }
    }
    Ok(())
}

/// `webhook-id`, `webhook-timestamp` and `webhook-signature` for one attempt sending `body`.
pub fn sign(
    source: &dyn KeySource,
    set: &str,
    id: &str,
    now: OffsetDateTime,
    body: &[u8],
) -> Result<[(HeaderName, HeaderValue); 3], SigningError> {
    let keys = signing_keys(source, set, now)?;
    let timestamp = now.unix_timestamp();
    let value =
        |text: String| HeaderValue::try_from(text).map_err(|_| SigningError::NotAHeaderValue);
    let mut signature = value(signature(&keys, id, timestamp, body))?;
    signature.set_sensitive(true);
    Ok([
        (WEBHOOK_ID, value(id.to_owned())?),
        (WEBHOOK_TIMESTAMP, HeaderValue::from(timestamp)),
        (WEBHOOK_SIGNATURE, signature),
    ])
}

/// `v1,<base64 MAC>` per key, in the keys' order, separated by spaces.
pub fn signature(keys: &[TrustedKey], id: &str, timestamp: i64, body: &[u8]) -> String {
    let prefix = format!("{id}.{timestamp}.");
    let signatures: Vec<String> = keys
        .iter()
        .map(|k| {
            let mut mac =
                Hmac::<Sha256>::new_from_slice(&k.key).expect("HMAC takes keys of any length");
            mac.update(prefix.as_bytes());
            mac.update(body);
            format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
        })
        .collect();
    signatures.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::Secrets;

    /// The Standard Webhooks specification's own example (its libraries test the same).
    #[test]
    fn the_published_example_signs_as_published() {
        let key = crate::ingest::decode_key(
            "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD",
            KeyEncoding::WhsecBase64,
        )
        .unwrap();
        let keys = [TrustedKey {
            version: "v".into(),
            key,
        }];
        assert_eq!(
            signature(
                &keys,
                "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk",
                1649367553,
                br#"{"email":"test@example.com","username":"test_user"}"#
            ),
            "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw="
        );
    }

    #[test]
    fn unusable_sets_are_named_without_their_values() {
        let file = "[[expired]]\nversion = \"a\"\nvalue = \"whsec_c2VjcmV0LXNlY3JldA==\"\n\
                    expires_at = \"2020-01-01T00:00:00Z\"\n\
                    [[plain]]\nversion = \"b\"\nvalue = \"not base64 at all!\"\n";
        let secrets = Secrets::parse(file).unwrap();
        let now = OffsetDateTime::now_utc();
        for (set, expected) in [
            (
                "missing",
                "signing secret set \"missing\" is not in the secrets file",
            ),
            (
                "expired",
                "every version of signing secret set \"expired\" has expired",
            ),
            (
                "plain",
                "signing secret set \"plain\" version \"b\" is not a whsec_ base64 secret",
            ),
        ] {
            let error = sign(&secrets, set, "id", now, b"{}")
                .unwrap_err()
                .to_string();
            assert_eq!(error, expected);
            assert!(!error.contains("whsec_c2") && !error.contains("not base64"));
        }
    }
}
