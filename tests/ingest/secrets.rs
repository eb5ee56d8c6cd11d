//! Secret versions: current, previous, expired, rotation without restart, failing closed,
//! prompt application of an edit by folder events alone, never a half-written file.

use std::time::{Duration, Instant};

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::support::{app::*, files::*, http::*, process::*, signing::*};

async fn eventually(mut check: impl AsyncFnMut() -> bool) -> bool {
    for _ in 0..100 {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

async fn matched_version(app: &TestApp, event_id: &str) -> String {
    sqlx::query_scalar(
        "SELECT matched_secret_version FROM webhook_inbox WHERE provider_event_id = $1",
    )
    .bind(event_id)
    .fetch_one(&app.db)
    .await
    .unwrap()
}

fn signed_with(secret: &str, id: &str) -> (String, String) {
    let body = stripe_event(id);
    (stripe_header(secret, now(), body.as_bytes()), body)
}

/// POSTs a Stripe event `id` signed with `secret` to the app's `stripe` endpoint.
async fn send(app: &TestApp, secret: &str, id: &str) -> Answer {
    post_signed(&app.client, &app.base, secret, id).await
}

#[tokio::test]
async fn current_and_previous_versions_are_accepted_and_recorded() {
    let app = TestApp::builder().start().await;
    send(&app, STRIPE_SECRET, "evt_current")
        .await
        .assert_status(200);
    assert_eq!(matched_version(&app, "evt_current").await, "2026-11");
    send(&app, STRIPE_OLD_SECRET, "evt_previous")
        .await
        .assert_status(200);
    assert_eq!(matched_version(&app, "evt_previous").await, "2026-10");
    send(&app, "whsec_never_configured", "evt_unknown")
        .await
        .assert_status(401);
}

#[tokio::test]
async fn an_expired_version_is_rejected_and_a_wholly_expired_set_fails_closed() {
    let secrets = format!(
        r#"[[stripe]]
version = "new"
value = "{STRIPE_SECRET}"
[[stripe]]
version = "retired"
value = "{STRIPE_OLD_SECRET}"
expires_at = "2020-01-01T00:00:00Z"
[[std]]
version = "a"
value = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
expires_at = 2021-01-01T00:00:00Z
[[github]]
version = "gh"
value = "{GITHUB_SECRET}"
"#
    );
    let app = TestApp::builder().secrets_file(secrets).start().await;
    let answer = send(&app, STRIPE_OLD_SECRET, "evt_retired").await;
    answer.assert_is(401, "invalid_signature", "");
    send(&app, STRIPE_SECRET, "evt_new")
        .await
        .assert_status(200);

    let vector = &vectors("standard-webhooks.json")["vectors"][0];
    let headers: Vec<(String, String)> = vector["headers"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
        .collect();
    let answer = app
        .post("std", &refs(&headers), vector["body"].as_str().unwrap())
        .await;
    answer.assert_is(503, "secrets_unavailable", "");
    assert!(answer.headers.contains_key("retry-after"));
    assert_eq!(app.count("webhook_inbox").await, 1);
}

#[tokio::test]
async fn rotation_by_editing_the_file_without_restart() {
    let app = TestApp::builder().start().await;
    let rotated = "whsec_rotated_2026_12";
    let answer = send(&app, rotated, "evt_rotated").await;
    assert_eq!(answer.status, 401, "not yet trusted");

    // Rotate: the new secret first, the current one kept as previous. Written the way
    // editors and config tools do, to a temporary file renamed over the old one.
    let file = &app.config.secrets_path;
    let text = std::fs::read_to_string(file).unwrap().replacen(
        "[[stripe]]\nversion = \"2026-11\"",
        &format!("[[stripe]]\nversion = \"2026-12\"\nvalue = \"{rotated}\"\n[[stripe]]\nversion = \"2026-11\""),
        1,
    );
    let tmp = file.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, file).unwrap();
    let accepted =
        eventually(async || send(&app, rotated, "evt_rotated").await.status == 200).await;
    assert!(accepted, "the rotated secret is trusted without a restart");
    assert_eq!(matched_version(&app, "evt_rotated").await, "2026-12");
    send(&app, STRIPE_SECRET, "evt_previous_still_ok")
        .await
        .assert_status(200);

    // Remove the old version by writing the file in place: it stops verifying.
    let text = std::fs::read_to_string(file).unwrap();
    let cut = text.find("[[stripe]]\nversion = \"2026-11\"").unwrap();
    let end = text[cut..].find("[[github]]").map(|i| cut + i).unwrap();
    let text = format!("{}{}", &text[..cut], &text[end..]);
    std::fs::write(file, text).unwrap();
    let revoked = eventually(async || {
        send(&app, STRIPE_SECRET, "evt_after_revocation")
            .await
            .status
            == 401
    })
    .await;
    assert!(
        revoked,
        "a removed version stops verifying without a restart"
    );
}

#[tokio::test]
async fn an_unreadable_secrets_file_fails_closed_until_fixed() {
    let app = TestApp::builder().start().await;
    let file = app.config.secrets_path.clone();
    let good = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, "[[stripe]\nthis is not toml").unwrap();
    let mut probe = 0;
    let closed = eventually(async || {
        probe += 1;
        let answer = send(&app, STRIPE_SECRET, &format!("evt_probe_{probe}")).await;
        answer.status == 503 && answer.code() == "secrets_unavailable"
    })
    .await;
    assert!(closed, "a broken secrets file must fail closed");
    // While the file is broken, nothing is accepted.
    let before = app.count("webhook_inbox").await;
    for i in 0..5 {
        let answer = send(&app, STRIPE_SECRET, &format!("evt_closed_{i}")).await;
        answer.assert_is(503, "secrets_unavailable", "");
    }
    assert_eq!(app.count("webhook_inbox").await, before);
    assert_eq!(
        app.readiness().await,
        503,
        "not ready while the secrets file is unreadable"
    );
    std::fs::write(&file, good).unwrap();
    let open =
        eventually(async || send(&app, STRIPE_SECRET, "evt_closed").await.status == 200).await;
    assert!(open, "fixing the file restores service without a restart");
    assert_eq!(app.readiness().await, 200);
}

/// The default secrets with the previous Stripe version (`STRIPE_OLD_SECRET`) retired.
fn with_old_stripe_retired() -> String {
    let text = default_secrets();
    let retired = text.replace(
        "expires_at = \"2999-01-01T00:00:00Z\"",
        "expires_at = \"2020-01-01T00:00:00Z\"",
    );
    assert_ne!(text, retired);
    retired
}

/// POSTs a Stripe event `id` signed with `secret` to `stripe` at `base`.
async fn post_signed(client: &reqwest::Client, base: &str, secret: &str, id: &str) -> Answer {
    let (header, body) = signed_with(secret, id);
    post(
        client,
        base,
        "stripe",
        &[("stripe-signature", &header)],
        body,
    )
    .await
}

async fn stripe_status(client: &reqwest::Client, base: &str, secret: &str, id: &str) -> u16 {
    post_signed(client, base, secret, id).await.status
}

/// Polls until a request signed with `secret` answers `status`, for at most 2.5 s (the old
/// poll ran every 5 s; this one every ten minutes).
async fn promptly(client: &reqwest::Client, base: &str, secret: &str, status: u16, what: &str) {
    let started = Instant::now();
    let mut n = 0;
    loop {
        n += 1;
        if stripe_status(client, base, secret, &format!("evt_prompt_{what}_{n}")).await == status {
            eprintln!("{what}: applied after {:?}", started.elapsed());
            return;
        }
        assert!(
            started.elapsed() < Duration::from_millis(2500),
            "{what}: not applied within 2.5 s, so not by the folder event"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_secrets_edit_applies_promptly_in_place_and_by_rename_without_the_poll() {
    let written = TestApp::builder().write_config().await;
    let server = ServeProcess::start_without_poll(&written.config_path).await;
    let client = reqwest::Client::new();
    let file = written.secrets_path.clone();
    assert_eq!(
        stripe_status(&client, &server.base, STRIPE_OLD_SECRET, "evt_old_ok").await,
        200
    );

    // Emergency retirement, written in place.
    std::fs::write(&file, with_old_stripe_retired()).unwrap();
    promptly(
        &client,
        &server.base,
        STRIPE_OLD_SECRET,
        401,
        "in-place retirement",
    )
    .await;

    // Rotation, renamed over: the current version goes, a new one comes.
    let rotated = "whsec_rotated_by_rename";
    let text = with_old_stripe_retired().replace(STRIPE_SECRET, rotated);
    let tmp = file.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, &file).unwrap();
    promptly(
        &client,
        &server.base,
        STRIPE_SECRET,
        401,
        "rename-over retirement",
    )
    .await;
    assert_eq!(
        stripe_status(&client, &server.base, rotated, "evt_rotated_ok").await,
        200
    );
}

/// An in-place rewrite that lingers on a prefix which parses: the retired version without its
/// `expires_at` line, then comment lines appended every few milliseconds for longer than the
/// old 5 s poll, then the rest. Never settled, the prefix must never be trusted: a request
/// signed with the retired version never gets a 200. Once settled, the finished file applies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secrets_file_read_mid_write_is_never_trusted() {
    use std::io::Write as _;
    let final_text = with_old_stripe_retired();
    let written = TestApp::builder()
        .secrets_file(final_text.clone())
        .write_config()
        .await;
    let server = ServeProcess::start_without_poll(&written.config_path).await;
    let client = reqwest::Client::new();
    assert_eq!(
        stripe_status(&client, &server.base, STRIPE_OLD_SECRET, "evt_before").await,
        401
    );

    let cut = final_text.find("expires_at = \"2020").unwrap();
    let (prefix, rest) = (final_text[..cut].to_owned(), final_text[cut..].to_owned());
    assert!(
        wharf::ingest::Secrets::parse(&prefix).is_ok(),
        "the prefix must parse for the test to mean anything"
    );
    let path = written.secrets_path.clone();
    let writing = Arc::new(AtomicBool::new(true));
    let writer = {
        let writing = Arc::clone(&writing);
        std::thread::spawn(move || {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(&path)
                .unwrap();
            file.write_all(prefix.as_bytes()).unwrap();
            // The longest pause between two writes: past the quiet spell, the host may fairly
            // take the file as finished.
            let mut longest = Duration::ZERO;
            let mut last = Instant::now();
            let until = last + Duration::from_millis(6500);
            while Instant::now() < until {
                std::thread::sleep(Duration::from_millis(10));
                file.write_all(b"# still writing\n").unwrap();
                longest = longest.max(last.elapsed());
                last = Instant::now();
            }
            file.write_all(rest.as_bytes()).unwrap();
            writing.store(false, Ordering::SeqCst);
            longest
        })
    };
    let mut n = 0;
    let mut trusted = Vec::new();
    while writing.load(Ordering::SeqCst) {
        n += 1;
        let id = format!("evt_mid_write_{n}");
        if stripe_status(&client, &server.base, STRIPE_OLD_SECRET, &id).await == 200 {
            trusted.push(id);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let longest = writer.join().unwrap();
    if longest >= wharf::ingest::SECRETS_QUIET {
        eprintln!("the writer stalled {longest:?}: the box is too loaded for this test to judge");
        return;
    }
    assert!(
        trusted.is_empty(),
        "the retired version was trusted mid-write ({n} requests): {trusted:?}"
    );
    // Settled, the finished file applies (the current version verifies, the retired not).
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        stripe_status(&client, &server.base, STRIPE_SECRET, "evt_after").await,
        200
    );
    assert_eq!(
        stripe_status(&client, &server.base, STRIPE_OLD_SECRET, "evt_after_old").await,
        401
    );
}
