//! Signed deliveries: an HTTP route with `signing_secret` signs each attempt the Standard
//! Webhooks way, checked here with the official library (`standardwebhooks`, the
//! standard-webhooks project's Rust crate), exactly as a downstream service would; plus a
//! route's fixed `headers`, rotation, retries, and what start refuses.

use std::sync::Arc;

use standardwebhooks::Webhook;
use wharf::adapter::KeyEncoding;
use wharf::config::Config;
use wharf::ingest::{KeyEncodings, KeySource, SecretsError};
use wharf::server::ProcessingHost;
use wharf::{Server, ServerOptions};

use crate::support::{app::*, database::*, files::*, http::*, receiver::*, signing::*, wait::*};

const NEW: &str = "whsec_ZG93bnN0cmVhbSBzaWduaW5nIGtleSwgMjAyNi0xMiE=";
const OLD: &str = "whsec_ZG93bnN0cmVhbSBzaWduaW5nIGtleSwgMjAyNi0xMSE=";
const EXPIRED: &str = "whsec_ZG93bnN0cmVhbSBzaWduaW5nIGtleSwgMjAyNS0wMSE=";
const NEXT: &str = "whsec_ZG93bnN0cmVhbSBzaWduaW5nIGtleSwgMjAyNy0wMSE=";

/// The default secrets plus a `downstream` set: (version, value, expires_at), newest first.
fn secrets_with_downstream(versions: &[(&str, &str, Option<&str>)]) -> String {
    let mut text = default_secrets();
    for (version, value, expires_at) in versions {
        text.push_str(&format!(
            "\n[[downstream]]\nversion = \"{version}\"\nvalue = \"{value}\"\n"
        ));
        if let Some(at) = expires_at {
            text.push_str(&format!("expires_at = \"{at}\"\n"));
        }
    }
    text
}

/// A server with two workers routing the stripe endpoint's events to `receiver`, signed with
/// the `downstream` set; `route_extra`: more keys for the route.
async fn start_signed(
    receiver: &Receiver,
    secrets: String,
    route_extra: &str,
    builder: TestAppBuilder,
) -> TestApp {
    builder
        .secrets_file(secrets)
        .workers(2)
        .append_toml(&http_route_toml(
            &receiver.url,
            &format!("signing_secret = \"downstream\"\n{route_extra}"),
        ))
        .start()
        .await
}

/// Posts a freshly signed Stripe event; returns its inbox id and body.
async fn post_event(app: &TestApp, id: &str) -> (String, Vec<u8>) {
    let (headers, body) = signed_stripe_event(id);
    let answer = app.post("stripe", &refs(&headers), body.clone()).await;
    assert_eq!(answer.status, 200, "{}", answer.json);
    (
        answer.json["inbox_id"].as_str().unwrap().to_owned(),
        body.into_bytes(),
    )
}

fn header<'a>(r: &'a Received, name: &str) -> &'a str {
    r.headers
        .get(name)
        .unwrap_or_else(|| panic!("{name} missing"))
        .to_str()
        .unwrap()
}

fn verifies(secret: &str, r: &Received) -> bool {
    Webhook::new(secret)
        .unwrap()
        .verify(&r.body, &r.headers)
        .is_ok()
}

/// Waits until the live secrets file gives the `downstream` set these usable versions, in
/// this order (none: every version expired).
async fn wait_for_downstream_versions(app: &TestApp, versions: &[&str]) {
    let secrets = Arc::clone(&app.server.as_ref().unwrap().secrets);
    let encodings = KeyEncodings {
        secret: KeyEncoding::WhsecBase64,
        public_key: None,
    };
    eventually("the secrets file reloaded", || {
        let secrets = Arc::clone(&secrets);
        async move {
            let now = time::OffsetDateTime::now_utc();
            match secrets.keys("downstream", encodings, now) {
                Ok(keys) => keys
                    .secrets
                    .iter()
                    .map(|k| k.version.as_str())
                    .eq(versions.iter().copied()),
                Err(SecretsError::AllExpired(_)) => versions.is_empty(),
                Err(_) => false,
            }
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_delivery_verifies_with_the_standard_webhooks_library_and_a_flipped_byte_does_not()
{
    let receiver = Receiver::start(Behaviour::ok()).await;
    // The processing clock stamps the attempt: a minute ahead of the wall clock, still within
    // the library's five minutes.
    let clock = now() + 60;
    let app = start_signed(
        &receiver,
        secrets_with_downstream(&[("2026-12", NEW, None)]),
        "",
        TestApp::builder().fixed_clock(clock),
    )
    .await;
    let (inbox_id, body) = post_event(&app, "evt_signed").await;
    wait_until_converged(&app.db).await;
    let received = receiver.received();
    assert_eq!(received.len(), 1);
    let r = &received[0];

    assert_eq!(r.body, body, "the bytes signed are the bytes sent");
    assert_eq!(header(r, "webhook-id"), inbox_id);
    assert_eq!(header(r, "idempotency-key"), inbox_id);
    assert_eq!(header(r, "webhook-timestamp"), clock.to_string());
    assert!(header(r, "webhook-signature").starts_with("v1,"));
    Webhook::new(NEW)
        .unwrap()
        .verify(&r.body, &r.headers)
        .expect("the official library verifies the delivery");

    // One flipped body byte (still UTF-8, as the library requires), another id or another
    // timestamp: each fails, and so does another secret.
    let mut flipped = r.clone();
    flipped.body[12] ^= 0x01;
    assert!(!verifies(NEW, &flipped), "a flipped body byte must fail");
    let mut other_id = r.clone();
    other_id.headers.insert(
        "webhook-id",
        uuid::Uuid::now_v7().to_string().parse().unwrap(),
    );
    assert!(!verifies(NEW, &other_id));
    let mut other_time = r.clone();
    other_time.headers.insert(
        "webhook-timestamp",
        (clock + 1).to_string().parse().unwrap(),
    );
    assert!(!verifies(NEW, &other_time));
    assert!(!verifies(OLD, r));
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotation_signs_with_each_unexpired_version_and_applies_without_a_restart() {
    let receiver = Receiver::start(Behaviour::ok()).await;
    let app = start_signed(
        &receiver,
        secrets_with_downstream(&[
            ("2026-12", NEW, None),
            ("2026-11", OLD, Some("2999-01-01T00:00:00Z")),
            ("2025-01", EXPIRED, Some("2020-01-01T00:00:00Z")),
        ]),
        "",
        TestApp::builder(),
    )
    .await;
    let (inbox_id, _) = post_event(&app, "evt_rotation_1").await;
    wait_until_converged(&app.db).await;
    let r = receiver.received().remove(0);
    let signatures: Vec<&str> = header(&r, "webhook-signature").split(' ').collect();
    assert_eq!(
        signatures.len(),
        2,
        "{signatures:?}: the expired version is not used"
    );
    // Newest first.
    let timestamp: i64 = header(&r, "webhook-timestamp").parse().unwrap();
    for (secret, signature) in [NEW, OLD].iter().zip(&signatures) {
        let expected = Webhook::new(secret)
            .unwrap()
            .sign(&inbox_id, timestamp, &r.body)
            .unwrap();
        assert_eq!(*signature, expected);
    }
    // A downstream holding either secret alone verifies; one holding the expired one does not.
    assert!(verifies(NEW, &r));
    assert!(verifies(OLD, &r));
    assert!(!verifies(EXPIRED, &r));

    // The next step of the rotation, written while running: NEXT added, OLD retired.
    install_atomically(
        &app.config.secrets_path,
        secrets_with_downstream(&[("2027-01", NEXT, None), ("2026-12", NEW, None)]).as_bytes(),
    );
    wait_for_downstream_versions(&app, &["2027-01", "2026-12"]).await;
    post_event(&app, "evt_rotation_2").await;
    wait_until_converged(&app.db).await;
    let r = receiver.received().remove(1);
    assert_eq!(header(&r, "webhook-signature").split(' ').count(), 2);
    assert!(verifies(NEXT, &r));
    assert!(verifies(NEW, &r));
    assert!(!verifies(OLD, &r), "the retired version no longer signs");
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_routes_static_headers_arrive_with_the_delivery() {
    let (receiver, app) = start_app_delivering_to(
        Behaviour::ok(),
        "headers = { \"X-Env\" = \"prod\", x-team = \"billing platform\" }",
    )
    .await;
    post_event(&app, "evt_static_headers").await;
    wait_until_converged(&app.db).await;
    let r = receiver.received().remove(0);
    assert_eq!(header(&r, "x-env"), "prod");
    assert_eq!(header(&r, "x-team"), "billing platform");
    assert_eq!(header(&r, "content-type"), "application/json");
    // A route without signing_secret is not signed.
    for name in ["webhook-id", "webhook-timestamp", "webhook-signature"] {
        assert!(r.headers.get(name).is_none(), "{name} on an unsigned route");
    }
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_delivery_keeps_its_webhook_id_equal_to_the_idempotency_key() {
    let receiver = Receiver::start(Behaviour::fails_once()).await;
    let app = start_signed(
        &receiver,
        secrets_with_downstream(&[("2026-12", NEW, None)]),
        "headers = { X-Env = \"prod\" }",
        TestApp::builder(),
    )
    .await;
    let (inbox_id, _) = post_event(&app, "evt_signed_retry").await;
    wait_until_converged(&app.db).await;
    let received = receiver.received();
    assert_eq!(received.len(), 2, "one 500, then the retry");
    for r in &received {
        assert_eq!(header(r, "webhook-id"), inbox_id);
        assert_eq!(header(r, "idempotency-key"), inbox_id);
        assert_eq!(header(r, "x-env"), "prod");
        assert!(verifies(NEW, r), "each attempt is signed afresh");
    }
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_that_cannot_sign_fails_the_attempt_naming_the_set_and_a_fix_sends_it() {
    let receiver = Receiver::start(Behaviour::ok()).await;
    let app = start_signed(
        &receiver,
        secrets_with_downstream(&[("2026-12", NEW, None)]),
        "max_attempts = 100",
        TestApp::builder(),
    )
    .await;
    // Every version expires while running.
    install_atomically(
        &app.config.secrets_path,
        secrets_with_downstream(&[("2026-12", NEW, Some("2020-01-01T00:00:00Z"))]).as_bytes(),
    );
    wait_for_downstream_versions(&app, &[]).await;
    post_event(&app, "evt_unsigned").await;
    app.wait_count("deliveries", "attempt_count >= 2", 1).await;
    let (status, error): (String, String) =
        one_row(&app.db, "SELECT status, last_error FROM deliveries").await;
    assert_eq!(status, "PENDING", "retried, not failed for good");
    assert_eq!(
        error,
        "every version of signing secret set \"downstream\" has expired"
    );
    assert!(!error.contains(NEW));
    assert_eq!(receiver.arrived(), 0, "nothing is sent unsigned");

    // The operator adds a fresh version: the pending delivery goes out, signed with it.
    install_atomically(
        &app.config.secrets_path,
        secrets_with_downstream(&[("2027-01", NEXT, None)]).as_bytes(),
    );
    wait_until_converged(&app.db).await;
    let r = receiver.received().remove(0);
    assert!(verifies(NEXT, &r));
    assert_eq!(
        scalar_i64(
            &app.db,
            "SELECT count(*) FROM deliveries WHERE last_error IS NULL"
        )
        .await,
        1
    );
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_is_refused_for_an_unknown_signing_set_a_signed_nats_route_or_a_reserved_header() {
    // An unknown set: refused by `wharf serve` and by `wharf worker`.
    let written = TestApp::builder()
        .append_toml(&http_route_toml(
            "http://127.0.0.1:9/events",
            "signing_secret = \"nope\"",
        ))
        .write_config()
        .await;
    let config = Config::load(&written.config_path).expect("the config itself is valid");
    let expected = "route 1 (stripe -> http): signing_secret: signing secret set \"nope\" is not \
                    in the secrets file";
    let error = match Server::start(config.clone(), ServerOptions::default()).await {
        Ok(server) => {
            server.shutdown().await.unwrap();
            panic!("started with an unknown signing set")
        }
        Err(e) => e.to_string(),
    };
    assert!(error.contains(expected), "{error}");
    let error = match ProcessingHost::start(config, 1, None).await {
        Ok(host) => {
            host.shutdown().await.unwrap();
            panic!("a worker started with an unknown signing set")
        }
        Err(e) => e.to_string(),
    };
    assert!(error.contains(expected), "{error}");

    // Refused by the config's validation, before anything starts.
    for (route, message) in [
        (
            "[nats]\nurl = \"nats://127.0.0.1:4222\"\n[[route]]\nsink = \"nats\"\n\
             subject = \"wharf.signed\"\nsigning_secret = \"stripe\"\n"
                .to_owned(),
            "route 1 (* -> nats): signing_secret applies to http routes only",
        ),
        (
            http_route_toml(
                "http://127.0.0.1:9/events",
                "headers = { Idempotency-Key = \"mine\" }",
            ),
            "route 1 (stripe -> http): headers: \"Idempotency-Key\" is set by Wharf itself",
        ),
    ] {
        let written = TestApp::builder().append_toml(&route).write_config().await;
        let error = Config::load(&written.config_path).unwrap_err().to_string();
        assert!(error.contains(message), "{error}");
    }
}
