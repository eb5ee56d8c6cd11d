//! Secret versions: current, previous, expired, rotation without restart, failing closed.

use std::time::Duration;

use crate::common::*;

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

#[tokio::test]
async fn current_and_previous_versions_are_accepted_and_recorded() {
    let app = app().spawn().await;
    let (header, body) = signed_with(STRIPE_SECRET, "evt_current");
    assert_eq!(
        app.post("stripe", &[("stripe-signature", &header)], body)
            .await
            .status,
        200
    );
    assert_eq!(matched_version(&app, "evt_current").await, "2026-11");
    let (header, body) = signed_with(STRIPE_OLD_SECRET, "evt_previous");
    assert_eq!(
        app.post("stripe", &[("stripe-signature", &header)], body)
            .await
            .status,
        200
    );
    assert_eq!(matched_version(&app, "evt_previous").await, "2026-10");
    let (header, body) = signed_with("whsec_never_configured", "evt_unknown");
    assert_eq!(
        app.post("stripe", &[("stripe-signature", &header)], body)
            .await
            .status,
        401
    );
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
    let app = app().secrets(secrets).spawn().await;
    let (header, body) = signed_with(STRIPE_OLD_SECRET, "evt_retired");
    let answer = app
        .post("stripe", &[("stripe-signature", &header)], body)
        .await;
    assert_eq!((answer.status, answer.code()), (401, "invalid_signature"));
    let (header, body) = signed_with(STRIPE_SECRET, "evt_new");
    assert_eq!(
        app.post("stripe", &[("stripe-signature", &header)], body)
            .await
            .status,
        200
    );

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
    assert_eq!((answer.status, answer.code()), (503, "secrets_unavailable"));
    assert!(answer.headers.contains_key("retry-after"));
    assert_eq!(app.count("webhook_inbox").await, 1);
}

#[tokio::test]
async fn rotation_by_editing_the_file_without_restart() {
    let app = app().spawn().await;
    let rotated = "whsec_rotated_2026_12";
    let (header, body) = signed_with(rotated, "evt_rotated");
    let answer = app
        .post("stripe", &[("stripe-signature", &header)], body.clone())
        .await;
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
    let accepted = eventually(async || {
        let (header, body) = signed_with(rotated, "evt_rotated");
        app.post("stripe", &[("stripe-signature", &header)], body)
            .await
            .status
            == 200
    })
    .await;
    assert!(accepted, "the rotated secret is trusted without a restart");
    assert_eq!(matched_version(&app, "evt_rotated").await, "2026-12");
    let (header, body) = signed_with(STRIPE_SECRET, "evt_previous_still_ok");
    assert_eq!(
        app.post("stripe", &[("stripe-signature", &header)], body)
            .await
            .status,
        200
    );

    // Remove the old version by writing the file in place: it stops verifying.
    let text = std::fs::read_to_string(file).unwrap();
    let cut = text.find("[[stripe]]\nversion = \"2026-11\"").unwrap();
    let end = text[cut..].find("[[github]]").map(|i| cut + i).unwrap();
    let text = format!("{}{}", &text[..cut], &text[end..]);
    std::fs::write(file, text).unwrap();
    let revoked = eventually(async || {
        let (header, body) = signed_with(STRIPE_SECRET, "evt_after_revocation");
        app.post("stripe", &[("stripe-signature", &header)], body)
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
    let app = app().spawn().await;
    let file = app.config.secrets_path.clone();
    let good = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, "[[stripe]\nthis is not toml").unwrap();
    let mut probe = 0;
    let closed = eventually(async || {
        probe += 1;
        let (header, body) = signed_with(STRIPE_SECRET, &format!("evt_probe_{probe}"));
        let answer = app
            .post("stripe", &[("stripe-signature", &header)], body)
            .await;
        answer.status == 503 && answer.code() == "secrets_unavailable"
    })
    .await;
    assert!(closed, "a broken secrets file must fail closed");
    // While the file is broken, nothing is accepted.
    let before = app.count("webhook_inbox").await;
    for i in 0..5 {
        let (header, body) = signed_with(STRIPE_SECRET, &format!("evt_closed_{i}"));
        let answer = app
            .post("stripe", &[("stripe-signature", &header)], body)
            .await;
        assert_eq!((answer.status, answer.code()), (503, "secrets_unavailable"));
    }
    assert_eq!(app.count("webhook_inbox").await, before);
    assert_eq!(
        app.readiness().await,
        503,
        "not ready while the secrets file is unreadable"
    );
    std::fs::write(&file, good).unwrap();
    let open = eventually(async || {
        let (header, body) = signed_with(STRIPE_SECRET, "evt_closed");
        app.post("stripe", &[("stripe-signature", &header)], body)
            .await
            .status
            == 200
    })
    .await;
    assert!(open, "fixing the file restores service without a restart");
    assert_eq!(app.readiness().await, 200);
}
