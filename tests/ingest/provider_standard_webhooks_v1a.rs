//! Standard Webhooks `v1a` (Ed25519, `whpk_` keys) beside `v1` (HMAC): the published vectors
//! (Svix's server test and the official repository's unmerged Go and JS PRs; no released
//! library implements v1a), mutations of each signed element, key rotation and expiry, and
//! which check the endpoint's keys select, verified with no database; duplicates over HTTP.

use crate::support::offline::{INVALID_SIGNATURE, STALE_TIMESTAMP, Verdict, Verifier};
use crate::support::secrets::{Version, endpoint, endpoints_on, public_key, value};
use crate::support::{app::*, mutate::*, stored::*, vectors::*};

/// The published vectors' clock (all but the spec-example one, which never verifies).
const PUBLISHED_TS: i64 = 1_614_265_330;
const SVIX_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const V1_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// Standard Webhooks vector 1's v1 signature over the Svix vector's id, timestamp and body.
const V1: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

fn pk1(_: &str, key: &str) -> Version {
    public_key("pk-1", key)
}

/// Endpoint `v1a-<i>` holds vector `i`'s `whpk_` key only (one endpoint per vector, since
/// several share an id); `expired` holds the Svix key as an expired version beside another
/// key; `both` the v1 test secret and the Svix key; `std` the default HMAC secrets.
fn published() -> Published {
    let file = vector_file("standard-webhooks-v1a.json");
    let mut published = Published::new(&file.vectors, "standard-webhooks", "v1a", pk1);
    let (svix, other) = (&file.vectors[0].key, &file.vectors[3].key);
    published.secrets = published
        .secrets
        .set(
            "expired",
            [
                public_key("pk-2", other),
                public_key("pk-1", svix).expires("2021-01-01T00:00:00Z"),
            ],
        )
        .set(
            "both",
            [value("hmac-1", V1_SECRET), public_key("pk-1", svix)],
        );
    published.endpoints += &endpoints_on("standard-webhooks", &["expired", "both"]);
    published.endpoints += &endpoint("std", "standard-webhooks").toml();
    published
}

/// The vectors' endpoints with no database, at the published vectors' clock.
async fn verifier() -> (Published, Verifier) {
    let published = published();
    let v = published.verifier("standard-webhooks.wasm", PUBLISHED_TS);
    let v = v.await;
    (published, v)
}

async fn app(published: &Published) -> TestApp {
    let builder = TestApp::builder().fixed_clock(PUBLISHED_TS);
    // The default endpoints include `std`.
    let own = published
        .endpoints
        .replace(&endpoint("std", "standard-webhooks").toml(), "");
    builder
        .add_endpoints(own)
        .secrets_file(published.secrets.clone())
        .start()
        .await
}

#[tokio::test]
async fn published_vectors_and_mutations() {
    let (published, v) = verifier().await;
    for (i, vector) in published.vectors.iter().enumerate() {
        let target = published.path(i);
        let (headers, body) = (&vector.headers, vector.body.as_str());
        if !vector.valid() {
            v.expect(
                &target,
                headers,
                body,
                INVALID_SIGNATURE,
                &format!("vector {i}"),
            )
            .await;
            continue;
        }
        let id = vector.header("webhook-id");
        let ts = vector.timestamp("webhook-timestamp");
        let sig = vector.header("webhook-signature");
        // Each valid published header has one v1a entry.
        let v1a_at = sig.rfind("v1a,").unwrap() + 10;
        let mutations = [
            (
                with(headers, "webhook-id", &format!("{id}x")),
                body.as_bytes().to_vec(),
                "id",
            ),
            (
                with(headers, "webhook-timestamp", &(ts + 1).to_string()),
                body.into(),
                "timestamp",
            ),
            (
                with(headers, "webhook-signature", &flip_char(sig, v1a_at)),
                body.into(),
                "signature",
            ),
            (headers.clone(), flip_body_byte(body), "body byte"),
            (
                headers.clone(),
                format!("{body} ").into_bytes(),
                "whitespace",
            ),
        ];
        for (h, b, what) in mutations {
            let what = format!("vector {i}: {what}");
            v.expect(&target, &h, b, INVALID_SIGNATURE, &what).await;
        }
        let accepted = Verdict::Accepted("pk-1".into());
        v.expect(&target, headers, body, accepted, &format!("vector {i}"))
            .await;
    }
}

#[tokio::test]
async fn published_vectors_are_stored_once() {
    let published = published();
    let app = app(&published).await;
    for (i, vector) in published.vectors.iter().enumerate() {
        let (endpoint, headers, body) = (published.path(i), &vector.headers, &vector.body);
        let before = app.count("webhook_inbox").await;
        if !vector.valid() {
            assert_eq!(
                status_code(&app, &endpoint, headers, body.as_str()).await,
                (401, "invalid_signature".to_owned()),
                "vector {i}"
            );
            assert_eq!(app.count("webhook_inbox").await, before, "vector {i}");
            continue;
        }
        assert_eq!(
            status_code(&app, &endpoint, headers, body.as_str()).await,
            (200, "accepted".into()),
            "vector {i}"
        );
        assert_eq!(matched_version(&app, &endpoint).await, "pk-1");
        // A redelivery keeps the id: it is a duplicate, and nothing more is stored.
        assert_eq!(
            status_code(&app, &endpoint, headers, body.as_str()).await,
            (200, "duplicate".into()),
            "vector {i}"
        );
        assert_eq!(app.count("webhook_inbox").await, before + 1, "vector {i}");
    }
}

#[tokio::test]
async fn keys_decide_which_signatures_are_verified() {
    let (published, v) = verifier().await;
    let svix = &published.vectors[0];
    let (headers, body) = (&svix.headers, svix.body.as_str());
    let v1a = svix.header("webhook-signature");
    let signature = |value: &str| with(headers, "webhook-signature", value);
    let many = [v1a; 5].join(" ");
    let wrong_v1 = format!("{} {v1a}", flip_char(V1, 5));
    for (what, endpoint, h) in [
        // Only a v1 entry, at an endpoint holding only a public key: no check applies.
        ("v1 only", "v1a-0", signature(V1)),
        // Only a v1a entry, at the default endpoint holding only whsec_ secrets.
        ("v1a only", "std", headers.clone()),
        // A wrong public key (the Go PR's key for the Svix signature).
        ("wrong key", "v1a-3", headers.clone()),
        // The right key, but its version expired before now; the current version is another.
        ("expired", "expired", headers.clone()),
        // More v1a entries than the adapter takes.
        ("too many", "v1a-0", signature(&many)),
        // Both kinds of key: both checks apply, and a wrong v1 fails the request.
        ("wrong v1 beside v1a", "both", signature(&wrong_v1)),
    ] {
        v.expect(endpoint, &h, body, INVALID_SIGNATURE, what).await;
    }

    // Stale in either direction once the clock is past the 300 s tolerance.
    let v = v.at(PUBLISHED_TS + 301);
    v.expect("v1a-0", headers, body, STALE_TIMESTAMP, "too old")
        .await;
    let v = v.at(PUBLISHED_TS - 301);
    v.expect("v1a-0", headers, body, STALE_TIMESTAMP, "too new")
        .await;
}

#[tokio::test]
async fn both_kinds_of_signature_name_one_event() {
    let published = published();
    let app = app(&published).await;
    let svix = &published.vectors[0];
    let (headers, body) = (&svix.headers, svix.body.as_str());
    let v1a = svix.header("webhook-signature");

    // With both kinds of key, each kind a request carries is verified: v1 alone passes under
    // the secret (a sender moving from v1 to v1a), and then the mixed header and v1a alone are
    // the same event again.
    let v1_only = with(headers, "webhook-signature", V1);
    assert_eq!(
        status_code(&app, "both", &v1_only, body).await,
        (200, "accepted".into())
    );
    assert_eq!(matched_version(&app, "both").await, "hmac-1");
    let mixed = with(headers, "webhook-signature", &format!("{V1} {v1a}"));
    // Svix's header names work for v1a too; same id at the same endpoint: a duplicate.
    let svix_named: Vec<_> = headers
        .iter()
        .map(|(k, v)| (k.replace("webhook-", "svix-"), v.clone()))
        .collect();
    assert_eq!(header(&svix_named, "svix-id"), SVIX_ID);
    for (what, endpoint, h, want) in [
        ("mixed", "both", &mixed, "duplicate"),
        ("v1a alone", "both", headers, "duplicate"),
        // The same mixed header at the default HMAC endpoint: the v1 check alone applies.
        ("mixed at std", "std", &mixed, "accepted"),
        ("svix names", "v1a-0", &svix_named, "accepted"),
        ("webhook names", "v1a-0", headers, "duplicate"),
    ] {
        let got = status_code(&app, endpoint, h, body).await;
        assert_eq!(got, (200, want.into()), "{what}");
    }
    assert_eq!(app.count("webhook_inbox").await, 3);
}
