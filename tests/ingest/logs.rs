//! The log: one line per request with what operators need, and never a secret, a signature
//! value or a body, on any path (accepted, duplicate, rejected, malformed, adapter failure).

use crate::support::{app::*, http::*, process::*, signing::*};

#[tokio::test]
async fn request_lines_carry_outcomes_and_never_secrets_signatures_or_bodies() {
    let written = TestApp::builder()
        .add_adapter("testing/test-misbehave.wasm")
        .endpoint("evil", "test-misbehave", "github", "")
        .write_config()
        .await;
    let log = written.dir.path().join("wharf.log");
    let server = ServeProcess::start(&written.config_path, Some(&log)).await;
    let client = reqwest::Client::new();
    let marker = "BODY-MARKER-7f3a";
    let mut signatures = Vec::new();
    let stripe = async |header: &str, body: Vec<u8>| {
        post(
            &client,
            &server.base,
            "stripe",
            &[("stripe-signature", header)],
            body,
        )
        .await
    };

    // Accepted, then duplicate.
    let body = stripe_event("evt_logged").replace("pi_123", marker);
    let header = stripe_header(STRIPE_SECRET, now(), body.as_bytes());
    signatures.push(header.clone());
    for expected in ["accepted", "duplicate"] {
        let answer = stripe(&header, body.clone().into_bytes()).await;
        assert_eq!(answer.code(), expected);
    }
    // Wrong signature.
    let forged = stripe_header("whsec_forged", now(), body.as_bytes());
    signatures.push(forged.clone());
    let answer = stripe(&forged, body.clone().into_bytes()).await;
    assert_eq!(answer.code(), "invalid_signature");
    // Verified but malformed.
    let bad = format!("not json {marker}");
    let header = stripe_header(STRIPE_SECRET, now(), bad.as_bytes());
    signatures.push(header.clone());
    let answer = stripe(&header, bad.into_bytes()).await;
    assert_eq!(answer.code(), "malformed");
    // GitHub, and an adapter that traps.
    let gh_body = format!("{{\"note\":\"{marker}\"}}").into_bytes();
    let gh = signed_github_headers(&gh_body, "gh-logged");
    signatures.push(gh[0].1.clone());
    assert_eq!(
        post(&client, &server.base, "github", &refs(&gh), gh_body.clone())
            .await
            .status,
        200
    );
    let answer = post(
        &client,
        &server.base,
        "evil",
        &[("x-misbehave", "trap")],
        gh_body,
    )
    .await;
    assert_eq!(answer.code(), "adapter_unavailable");

    assert!(server.stop().await.success(), "graceful exit on SIGTERM");
    let text = std::fs::read_to_string(&log).unwrap();
    let lines = request_lines(&text);
    let outcomes: Vec<&str> = lines
        .iter()
        .map(|l| l["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(
        outcomes,
        [
            "accepted",
            "duplicate",
            "invalid_signature",
            "malformed",
            "accepted",
            "adapter_unavailable"
        ]
    );
    assert_eq!(lines[0]["event_id"], "evt_logged");
    assert_eq!(lines[0]["secret_version"], "2026-11");
    assert_eq!(lines[0]["adapter"], "stripe");
    assert!(lines[0]["latency_us"].as_u64().is_some());
    assert_eq!(lines[1]["inbox_id"], lines[0]["inbox_id"]);
    // A guest's panic message reaches the log, with the adapter's name and version.
    assert_eq!(lines[5]["adapter"], "test-misbehave");
    assert_eq!(lines[5]["adapter_version"], "0.2.0");
    let cause = lines[5]["cause"].as_str().unwrap();
    assert!(
        cause.contains("test-misbehave: deliberate panic"),
        "{cause}"
    );
    assert!(cause.len() < 4096, "the captured stderr is bounded");

    for secret in [
        STRIPE_SECRET,
        STRIPE_OLD_SECRET,
        GITHUB_SECRET,
        "whsec_forged",
        marker,
    ] {
        assert!(!text.contains(secret), "the log contains {secret:?}");
    }
    for signature in &signatures {
        // The hex of every signature sent, and any 16-character piece of it.
        let hex = signature.rsplit(['=', ',']).next().unwrap();
        for piece in hex.as_bytes().chunks(16) {
            let piece = std::str::from_utf8(piece).unwrap();
            assert!(
                piece.len() < 16 || !text.contains(piece),
                "the log contains signature bytes {piece}"
            );
        }
    }
}

/// A database error's message can quote row values (here a trigger quotes the event id): the
/// request line keeps only its SQLSTATE, as processing's diagnostics do.
#[tokio::test]
async fn database_causes_in_request_lines_are_redacted() {
    let written = TestApp::builder().write_config().await;
    let log = written.dir.path().join("wharf.log");
    let server = ServeProcess::start(&written.config_path, Some(&log)).await;
    let db = sqlx::PgPool::connect(&written.database_url).await.unwrap();
    sqlx::raw_sql(
        "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN RAISE EXCEPTION 'refusing %', NEW.provider_event_id; END $$;
         CREATE TRIGGER refuse BEFORE INSERT ON webhook_inbox
           FOR EACH ROW EXECUTE FUNCTION refuse();",
    )
    .execute(&db)
    .await
    .unwrap();
    let marker = "evt_row_value_7c1d";
    let (headers, body) = signed_stripe_event(marker);
    let answer = post(
        &reqwest::Client::new(),
        &server.base,
        "stripe",
        &refs(&headers),
        body.into_bytes(),
    )
    .await;
    assert_eq!(answer.code(), "storage_unavailable", "{answer:?}");
    assert!(server.stop().await.success());
    let text = std::fs::read_to_string(&log).unwrap();
    let line: serde_json::Value = request_lines(&text)
        .into_iter()
        .next()
        .expect("a request line");
    assert_eq!(line["cause"], "database error P0001", "{line}");
    assert!(!text.contains("refusing"), "{text}");
}

/// The console's sign-ins, right and wrong, its reveal and sign-out are logged (with the
/// role and token version) and never with a token, a session cookie or the payload.
#[tokio::test]
async fn console_sign_ins_are_logged_without_tokens_cookies_or_payloads() {
    let written = TestApp::builder().with_viewer().write_config().await;
    let log = written.dir.path().join("wharf.log");
    let server = ServeProcess::start(&written.config_path, Some(&log)).await;
    let admin = server.admin.clone().expect("an admin listener");
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let marker = "CONSOLE-PAYLOAD-MARKER-91c2";
    let body = stripe_event("evt_console_logged").replace("pi_123", marker);
    let header = stripe_header(STRIPE_SECRET, now(), body.as_bytes());
    let answer = post(
        &client,
        &server.base,
        "stripe",
        &[("stripe-signature", &header)],
        body.into_bytes(),
    )
    .await;
    assert_eq!(answer.code(), "accepted");
    let inbox_id = answer.json["inbox_id"].as_str().unwrap().to_owned();
    let wrong = "wrong-console-token-4d1e0c9b8a7f6e5d4c3b2a19";
    let sign_in = async |token: &str| {
        client
            .post(format!("{admin}/console/signin"))
            .form(&[("token", token)])
            .send()
            .await
            .unwrap()
    };
    assert_eq!(sign_in(wrong).await.status(), 401);
    assert_eq!(sign_in(TEST_VIEWER_TOKEN).await.status(), 303);
    let signed = sign_in(TEST_ADMIN_TOKEN).await;
    let cookie = signed.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let page = client
        .get(format!("{admin}/console/events/{inbox_id}"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = page
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap();
    let revealed = client
        .post(format!("{admin}/console/events/{inbox_id}/reveal"))
        .header("cookie", &cookie)
        .form(&[("csrf", csrf)])
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(revealed.contains(marker), "the admin sees the payload");
    assert!(server.stop().await.success());
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("console sign-in refused: wrong token"),
        "{text}"
    );
    assert!(text.contains("console: signed in"), "{text}");
    assert!(text.contains("payload read in the console"), "{text}");
    let session = cookie.split('=').nth(1).unwrap();
    for secret in [
        wrong,
        TEST_ADMIN_TOKEN,
        TEST_VIEWER_TOKEN,
        session,
        csrf,
        marker,
    ] {
        assert!(!text.contains(secret), "the log contains {secret:?}");
    }
}
