//! The host alone decides what "verified" means. A careless or hostile adapter
//! (`test-misbehave`) cannot make an unsigned body or an unsigned timestamp verify (nor digits
//! cut from a longer number, nor an item check that signs no body byte), cannot make the host
//! hash without bound or sign bytes it chose (a handshake's MAC), cannot put the request into
//! the log, and cannot hold a call by sleeping; and verified ids that could not be header values
//! or Postgres text are `malformed`.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::{app::*, database::*, http::*, process::*, signing::*};

const EVIL: &str = r#"
[[endpoint]]
id = "evil"
adapter = "test-misbehave"
secret = "github"
"#;

/// A request for `test-misbehave` in `mode`, whose `x-sig` is the MAC of `signed` under the
/// endpoint's secret and whose reported timestamp is `ts`.
fn misbehave_headers(mode: &str, ts: i64, signed: &[u8]) -> Vec<(String, String)> {
    vec![
        ("x-misbehave".into(), mode.into()),
        ("x-ts".into(), ts.to_string()),
        (
            "x-sig".into(),
            hex::encode(hmac_sha256(GITHUB_SECRET.as_bytes(), signed)),
        ),
        ("x-event-id".into(), format!("evt_{mode}")),
    ]
}

fn dotted(ts: i64, body: &[u8]) -> Vec<u8> {
    [format!("{ts}.").as_bytes(), body].concat()
}

/// The default app with `test-misbehave` and its endpoints.
fn evil() -> TestAppBuilder {
    TestApp::builder().add_adapter_for("testing/test-misbehave.wasm", EVIL)
}

async fn start_evil() -> TestApp {
    evil().start().await
}

/// POSTs `body` to the `test-misbehave` endpoint in `mode`, with the MAC of `signed`.
async fn misbehave(app: &TestApp, mode: &str, ts: i64, signed: &[u8], body: &[u8]) -> Answer {
    app.post(
        "evil",
        &refs(&misbehave_headers(mode, ts, signed)),
        body.to_vec(),
    )
    .await
}

#[tokio::test]
async fn checks_that_skip_the_body_or_the_timestamp_never_verify() {
    let app = start_evil().await;
    let ts = now();
    let body = br#"{"amount":1000000,"to":"attacker"}"#.to_vec();

    // The message is a literal with its valid MAC; the body is whatever the client sent.
    let literal = format!("{ts}.wharf").into_bytes();
    let answer = misbehave(&app, "literal-only", ts, &literal, &body).await;
    answer.assert_is(503, "adapter_unavailable", "");
    assert!(answer.headers.contains_key("retry-after"));

    // The body is signed, the reported timestamp is not: its freshness would prove nothing.
    let unsigned_ts = [b"wharf.".as_slice(), &body].concat();
    let answer = misbehave(&app, "ts-unsigned", ts, &unsigned_ts, &body).await;
    answer.assert_is(503, "adapter_unavailable", "");
    assert_eq!(app.count("webhook_inbox").await, 0);

    // The same adapter describing the request properly verifies: the refusals above are the
    // host's rules, not a broken signature.
    let answer = misbehave(&app, "ok", ts, &dotted(ts, &body), &body).await;
    answer.assert_accepted("");
    assert_eq!(app.count("webhook_inbox").await, 1);
    app.shutdown().await;
}

/// Each of these verified before: the MAC is right, but what it signs is another time, or no
/// byte of the body (an empty slice; a long literal cut into 8-byte separators), or one item
/// while the event stores both.
#[tokio::test]
async fn checks_that_sign_another_time_or_no_body_bytes_never_verify() {
    let app = start_evil().await;
    let ts = now();
    let body = br#"{"amount":1000000,"to":"attacker"}"#.to_vec();
    let refused = |answer: &Answer, what: &str| {
        answer.assert_is(503, "adapter_unavailable", what);
    };

    let longer = [format!("{ts}7.").as_bytes(), &body].concat();
    refused(
        &misbehave(&app, "ts-longer-run", ts, &longer, &body).await,
        "the timestamp's digits inside a longer number",
    );
    let wharf = format!("{ts}.wharf").into_bytes();
    refused(
        &misbehave(&app, "empty-slice", ts, &wharf, &body).await,
        "an item check whose only slice is empty",
    );
    let cut = [format!("{ts}.").as_bytes(), &[b'x'; 400], &body[..1]].concat();
    refused(
        &misbehave(&app, "long-separator", ts, &cut, &body).await,
        "a 400-byte literal in 8-byte parts and one body byte",
    );

    // Two items, each signed; the first event claims both.
    let (first, second) = (
        format!(r#"{{"ts":{ts}}}"#),
        format!(r#"{{"ts":{ts},"to":"attacker"}}"#),
    );
    let mut headers = misbehave_headers("span-beyond", ts, first.as_bytes());
    headers.push((
        "x-sig2".into(),
        hex::encode(hmac_sha256(GITHUB_SECRET.as_bytes(), second.as_bytes())),
    ));
    headers.push(("x-mid".into(), first.len().to_string()));
    let answer = app
        .post(
            "evil",
            &refs(&headers),
            format!("{first}{second}").into_bytes(),
        )
        .await;
    refused(&answer, "an event over another item's signed bytes");
    assert_eq!(app.count("webhook_inbox").await, 0);

    // Still serving what is signed properly.
    misbehave(&app, "ok", ts, &dotted(ts, &body), &body)
        .await
        .assert_accepted("");
    app.shutdown().await;
}

#[tokio::test]
async fn results_that_ask_for_unbounded_hashing_fail_fast() {
    let app = start_evil().await;
    let ts = now();
    let body = vec![b'a'; 100_000];
    // Two million `raw-body` parts (too much to lift), then a thousand (cheap to lift, 100 MB
    // to hash per key): both refused before any MAC, in far less than the minute they cost.
    for mode in ["parts", "rehash"] {
        let started = Instant::now();
        let answer = misbehave(&app, mode, ts, b"", &body).await;
        answer.assert_is(503, "adapter_unavailable", mode);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{mode} took {:?}",
            started.elapsed()
        );
    }
    // Still serving.
    let answer = misbehave(&app, "ok", ts, &dotted(ts, &body), &body).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    app.shutdown().await;
}

#[tokio::test]
async fn a_guest_that_sleeps_is_not_held_by_it() {
    let app = start_evil().await;
    let ts = now();
    let body = b"{}".to_vec();
    let started = Instant::now();
    // The guest sleeps 30 s in a WASI call; the host's clocks make every wait return at once.
    let answer = misbehave(&app, "sleep", ts, &dotted(ts, &body), &body).await;
    answer.assert_accepted("");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    app.shutdown().await;
}

#[tokio::test]
async fn ids_and_types_with_control_characters_are_malformed_after_verification() {
    let app = TestApp::builder().start().await;
    // JSON escapes: the adapter decodes them into CR, LF, NUL and ESC.
    for (n, (id, kind)) in [
        (r"evt_crlf\r\nInjected: 1", "payment_intent.succeeded"),
        ("evt_nul_type", r"payment_intent.succeeded\u0000"),
        (r"evt_\u001b[31m", "payment_intent.succeeded"),
    ]
    .into_iter()
    .enumerate()
    {
        let body = stripe_event(id).replace("payment_intent.succeeded", kind);
        let header = stripe_header(STRIPE_SECRET, now(), body.as_bytes());
        let answer = app
            .post(
                "stripe",
                &[
                    ("stripe-signature", &header),
                    ("content-type", "application/json"),
                ],
                body.into_bytes(),
            )
            .await;
        answer.assert_is(400, "malformed", n);
        // Signed wrongly, the same body is a 401: verification comes first.
        let body = stripe_event(id);
        let header = stripe_header("whsec_wrong", now(), body.as_bytes());
        let answer = app
            .post(
                "stripe",
                &[("stripe-signature", &header)],
                body.into_bytes(),
            )
            .await;
        assert_eq!(answer.status, 401, "{n}: {answer:?}");
    }
    assert_eq!(app.count("webhook_inbox").await, 0);
    app.shutdown().await;
}

#[tokio::test]
async fn an_adapter_that_echoes_the_request_puts_none_of_it_in_the_log() {
    let written = evil().write_config().await;
    let log = written.dir.path().join("wharf.log");
    let server = ServeProcess::start(&written.config_path, Some(&log)).await;
    let client = reqwest::Client::new();
    let card = "4242424242424242";
    let body = format!(
        "{{\"card\":\"{card}\",\"note\":\"line\\r\\nforged: yes\"}}\r\n{}",
        "x".repeat(4000)
    );
    let answer = post(
        &client,
        &server.base,
        "evil",
        &[("x-misbehave", "echo")],
        body.into_bytes(),
    )
    .await;
    assert_eq!(answer.code(), "invalid_signature", "{answer:?}");
    let exit = server.stop().await;
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(exit.success(), "{exit}; the log:\n{text}");
    assert!(
        !text.contains(card),
        "the card number reached the log:\n{text}"
    );
    let line: serde_json::Value = request_lines(&text)
        .into_iter()
        .next()
        .expect("a request line");
    let cause = line["cause"].as_str().unwrap();
    assert!(
        cause.len() <= 200,
        "the detail is bounded: {} bytes",
        cause.len()
    );
    assert!(!cause.chars().any(char::is_control), "{cause:?}");
    assert!(cause.contains("[withheld]"), "{cause:?}");
}

/// An adapter's rejection text reaches the log as a vocabulary of words found nowhere in the
/// request: not the query (where Meta's verify token travels), not a signature written as byte
/// values, not a header value glued to another word.
#[tokio::test]
async fn an_adapter_that_leaks_the_query_signature_bytes_or_a_glued_header_is_withheld() {
    let written = evil().write_config().await;
    let log = written.dir.path().join("wharf.log");
    let server = ServeProcess::start(&written.config_path, Some(&log)).await;
    let url = format!(
        "{}/webhooks/evil?hub.mode=subscribe&hub.verify_token=MetaVerifyTokenQuokka",
        server.base
    );
    let answer = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("x-misbehave", "leak")
        .header("x-sig", "SIGVALUE")
        .header("x-token", "SecretHeaderWombat")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 401);
    let exit = server.stop().await;
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(exit.success(), "{exit}; the log:\n{text}");
    // "SIGVALUE" as the bytes 83, 73, 71, ...
    for leaked in ["MetaVerifyTokenQuokka", "SecretHeaderWombat", "83, 73, 71"] {
        assert!(!text.contains(leaked), "{leaked} reached the log:\n{text}");
    }
    let line = request_lines(&text)
        .into_iter()
        .next()
        .expect("a request line");
    let cause = line["cause"].as_str().unwrap();
    assert!(cause.contains("got Bearer.[withheld]"), "{cause}");
}

/// A fixture that expects the adapter's contract breach to be "just" a 503 must still fail:
/// `wharf adapter test`, `wharf adapter check` and reload all refuse the file.
#[tokio::test]
async fn a_contract_breach_fails_fixtures_check_and_reload_whatever_the_fixture_expects() {
    let written = evil().with_admin().write_config().await;
    let adapters = written.adapters_dir();
    let case = adapters.join("test-misbehave.fixtures/literal-only");
    std::fs::create_dir_all(&case).unwrap();
    let ts = 1_764_480_000;
    let sig = hex::encode(hmac_sha256(
        b"fixture-secret",
        format!("{ts}.wharf").as_bytes(),
    ));
    std::fs::write(
        case.join("request.toml"),
        format!(
            "now = {ts}\nheaders = [[\"x-misbehave\", \"literal-only\"], [\"x-ts\", \"{ts}\"], [\"x-sig\", \"{sig}\"]]\n\n[[secret]]\nversion = \"1\"\nvalue = \"fixture-secret\"\n"
        ),
    )
    .unwrap();
    std::fs::write(case.join("body"), b"{\"unsigned\":true}").unwrap();
    std::fs::write(
        case.join("expected.toml"),
        "outcome = \"rejected\"\ncode = \"adapter_unavailable\"\n",
    )
    .unwrap();

    let wasm = adapters.join("test-misbehave.wasm");
    for args in [
        vec![
            "adapter",
            "test",
            wasm.to_str().unwrap(),
            case.parent().unwrap().to_str().unwrap(),
        ],
        vec!["adapter", "check", wasm.to_str().unwrap()],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_wharf"))
            .args(&args)
            .env("RUST_LOG", "warn")
            .output()
            .unwrap();
        let shown = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out.status.success(), "{args:?}:\n{shown}");
        assert!(
            shown.contains("does not cover the raw body"),
            "{args:?}:\n{shown}"
        );
    }

    let app = written.start().await;
    let files: Vec<serde_json::Value> =
        serde_json::from_value(app.admin_get("/admin/adapters").await.json).unwrap();
    let status = files
        .iter()
        .find(|f| f["file"] == "test-misbehave.wasm")
        .expect("status of the file");
    assert_eq!(status["state"], "refused", "{status}");
    assert!(
        status["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("does not cover the raw body")),
        "{status}"
    );
    app.shutdown().await;
}

/// WIT 0.2's forms are declared, and the host holds adapters to them: a slice-only check
/// (a batch item's form) needs every event to name it; only declared algorithms verify; a token
/// signs nothing; the URL comes from the endpoint's `public_url` or the check is refused.
#[tokio::test]
async fn wit_0_2_forms_are_held_to_their_declarations() {
    let app = evil()
        .endpoint(
            "evil-url",
            "test-misbehave",
            "github",
            "public_url = \"https://hooks.example.com/in\"",
        )
        .start()
        .await;
    let ts = now();
    let refused = |answer: &Answer, what: &str| {
        answer.assert_is(503, "adapter_unavailable", what);
    };

    // An item check over the whole body as one slice; the timestamp is inside that slice.
    let body = format!(r#"{{"ts":{ts},"n":1}}"#).into_bytes();
    let answer = misbehave(&app, "items", ts, &body, &body).await;
    refused(&answer, "an event that names no item check");
    let mut headers = misbehave_headers("items", ts, &body);
    headers.push(("x-signed-by".into(), "0".into()));
    let answer = app.post("evil", &refs(&headers), body.clone()).await;
    assert_eq!(answer.code(), "accepted", "{answer:?}");
    let (start, end): (Option<i64>, Option<i64>) = one_row(
        &app.db,
        "SELECT payload_start, payload_end FROM webhook_inbox",
    )
    .await;
    assert_eq!((start, end), (Some(0), Some(body.len() as i64)));
    // The same slice with another MAC does not verify.
    let answer = misbehave(&app, "items", ts, b"other", &body).await;
    assert_eq!(answer.status, 401, "{answer:?}");

    let signed = dotted(ts, &body);
    refused(
        &misbehave(&app, "undeclared", ts, &signed, &body).await,
        "an algorithm describe did not declare",
    );
    refused(
        &misbehave(&app, "token-message", ts, &signed, &body).await,
        "a token check that signs a message",
    );
    refused(
        &misbehave(&app, "url", ts, &signed, &body).await,
        "the URL signed for an endpoint without public_url",
    );

    // With a public_url, the URL signed is that URL (plus the query), never the Host header.
    let url = "https://hooks.example.com/in?x=1";
    let with_url = [format!("{ts}.{url}").as_bytes(), &body].concat();
    let answer = app
        .post(
            "evil-url?x=1",
            &refs(&misbehave_headers("url", ts, &with_url)),
            body.clone(),
        )
        .await;
    assert_eq!(answer.code(), "accepted", "{answer:?}");
    let forged = [
        format!("{ts}.http://{}/webhooks/evil-url?x=1", app.addr).as_bytes(),
        &body,
    ]
    .concat();
    let answer = app
        .post(
            "evil-url?x=1",
            &refs(&misbehave_headers("url", ts, &forged)),
            body.clone(),
        )
        .await;
    assert_eq!(answer.status, 401, "{answer:?}");
    assert_eq!(app.count("webhook_inbox").await, 2);
    app.shutdown().await;
}

/// A handshake was a signing oracle (issue 30, finding 1): an adapter answered with the MAC of
/// bytes it chose (the query), under the secret, after a check that signs the whole body or
/// only the timestamp's digits of it; the MAC of `<ts>.<forged body>` then verified the forged
/// body. A MAC answer is now computed only over a span or JSON string of a body that its check
/// signs whole, with a fresh signed timestamp; anything else is the adapter's contract breach.
#[tokio::test]
async fn a_handshake_is_no_signing_oracle() {
    let app = start_evil().await;
    let ts = now();
    let forged = b"amount=1000000&to=attacker".to_vec();
    // What mode `ok` verifies the forged body with: its signature is all an oracle must give.
    let wanted = String::from_utf8(dotted(ts, &forged)).unwrap();
    let oracle = hex::encode(hmac_sha256(GITHUB_SECRET.as_bytes(), wanted.as_bytes()));
    let with_query = format!("evil?{wanted}");
    // Whatever MAC an answer hands out, sent back as the forged body's signature.
    let forge = async |answer: &Answer| {
        let mac = answer.body.strip_prefix("mac=").unwrap_or_default();
        let mut headers = misbehave_headers("ok", ts, b"");
        headers[2].1 = mac.to_owned();
        app.post("evil", &refs(&headers), forged.clone()).await
    };

    // A check over `<ts>.<body>` (fresh, whole), answering with the MAC of the query.
    let body = br#"{"handshake":true}"#.to_vec();
    let headers = misbehave_headers("oracle-query", ts, &dotted(ts, &body));
    let answer = app.post(&with_query, &refs(&headers), body).await;
    answer.assert_is(503, "adapter_unavailable", "a MAC of the query");
    assert!(!answer.body.contains(&oracle), "{answer:?}");
    assert_eq!(forge(&answer).await.status, 401);

    // An item check that signs only the timestamp's digits of the body, the same answer.
    let body = format!("{ts}|anything at all").into_bytes();
    let mut headers = misbehave_headers("oracle-item", ts, ts.to_string().as_bytes());
    headers.push(("x-span".into(), format!("0-{}", ts.to_string().len())));
    let answer = app.post(&with_query, &refs(&headers), body).await;
    answer.assert_is(503, "adapter_unavailable", "a MAC after an item check");
    assert!(!answer.body.contains(&oracle), "{answer:?}");
    assert_eq!(forge(&answer).await.status, 401);
    assert_eq!(app.count("webhook_inbox").await, 0);

    // The one form left: the MAC of bytes of the signed, fresh body (Zoom's plainToken).
    let body = br#"{"challenge":"abc123"}"#.to_vec();
    let mut headers = misbehave_headers("ack", ts, &dotted(ts, &body));
    headers.push(("x-challenge".into(), "abc123".into()));
    let answer = app.post("evil", &refs(&headers), body.clone()).await;
    let expected = hex::encode(hmac_sha256(GITHUB_SECRET.as_bytes(), b"abc123"));
    assert_eq!(
        (answer.status, answer.body),
        (200, format!("mac={expected}"))
    );
    // The same adapter asking for bytes that are not in the body is refused.
    let mut headers = misbehave_headers("ack", ts, &dotted(ts, &body));
    headers.push(("x-challenge".into(), wanted.clone()));
    let answer = app.post("evil", &refs(&headers), body).await;
    answer.assert_is(503, "adapter_unavailable", "a MAC of a header");
    assert!(!answer.body.contains(&oracle), "{answer:?}");
    assert_eq!(app.count("webhook_inbox").await, 0);

    // What an oracle handed out was a working signature: the refusals above are what stops it.
    let handed_out = Answer {
        body: format!("mac={oracle}"),
        ..answer
    };
    forge(&handed_out)
        .await
        .assert_accepted("the forged body under the oracle's MAC");
    app.shutdown().await;
}

/// A file whose handshake asks for a MAC outside the rules is refused by `wharf adapter test`
/// (and so by `check` and reload, which run the same cases), even by a fixture expecting the
/// answer it used to give.
#[tokio::test]
async fn a_handshake_oracle_fails_its_fixtures() {
    let written = evil().write_config().await;
    let adapters = written.adapters_dir();
    let case = adapters.join("test-misbehave.fixtures/oracle-query");
    std::fs::create_dir_all(&case).unwrap();
    let ts = 1_764_480_000;
    let body = br#"{"handshake":true}"#;
    let sig = hex::encode(hmac_sha256(b"fixture-secret", &dotted(ts, body)));
    std::fs::write(
        case.join("request.toml"),
        format!(
            "now = {ts}\nquery = \"{ts}.forged\"\nheaders = [[\"x-misbehave\", \"oracle-query\"], [\"x-ts\", \"{ts}\"], [\"x-sig\", \"{sig}\"]]\n\n[[secret]]\nversion = \"1\"\nvalue = \"fixture-secret\"\n"
        ),
    )
    .unwrap();
    std::fs::write(case.join("body"), body).unwrap();
    let mac = hex::encode(hmac_sha256(
        b"fixture-secret",
        format!("{ts}.forged").as_bytes(),
    ));
    std::fs::write(
        case.join("expected.toml"),
        format!(
            "outcome = \"handshake\"\n\n[handshake]\nstatus = 200\ncontent_type = \"text/plain\"\nbody = \"mac={mac}\"\n"
        ),
    )
    .unwrap();
    let wasm = adapters.join("test-misbehave.wasm");
    let out = Command::new(env!("CARGO_BIN_EXE_wharf"))
        .args(["adapter", "test", wasm.to_str().unwrap()])
        .arg(case.parent().unwrap())
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let shown = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{shown}");
    assert!(
        shown.contains("no span or JSON string of the body"),
        "{shown}"
    );
}

/// GET reaches only adapters that serve it and is answered only with a handshake; a GET has no
/// body, so its handshake can carry no MAC.
#[tokio::test]
async fn get_is_a_verified_handshake_or_nothing() {
    let app = start_evil().await;
    let ts = now();
    let get = |endpoint: &str, headers: Vec<(String, String)>| {
        let mut request = app.client.get(format!("{}/webhooks/{endpoint}", app.base));
        for (k, v) in headers {
            request = request.header(k, v);
        }
        request.send()
    };
    let signed = dotted(ts, b"");

    let mut headers = misbehave_headers("ack-echo", ts, &signed);
    headers.push(("x-challenge".into(), "abc123".into()));
    let answer = get("evil", headers.clone()).await.unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.text().await.unwrap(), "ack=abc123");

    // A bad signature answers no challenge.
    let mut bad = misbehave_headers("ack-echo", ts, b"not what is signed");
    bad.push(("x-challenge".into(), "abc123".into()));
    let answer = get("evil", bad).await.unwrap();
    assert_eq!(answer.status(), 401);
    assert!(!answer.text().await.unwrap().contains("abc123"));

    // A MAC of a header is no part of an empty body: the host signs nothing for it.
    let mut mac = misbehave_headers("ack", ts, &signed);
    mac.push(("x-challenge".into(), "abc123".into()));
    let answer = get("evil", mac).await.unwrap();
    assert_eq!(answer.status(), 503);
    let expected = hex::encode(hmac_sha256(GITHUB_SECRET.as_bytes(), b"abc123"));
    assert!(!answer.text().await.unwrap().contains(&expected));

    let answer = get("evil", misbehave_headers("get-events", ts, &signed))
        .await
        .unwrap();
    assert_eq!(answer.status(), 503, "a GET never stores an event");
    // Endpoints whose adapter does not serve GET answer 405, as ever.
    let answer = get("stripe", vec![]).await.unwrap();
    assert_eq!(answer.status(), 405);
    assert_eq!(app.count("webhook_inbox").await, 0);
    app.shutdown().await;
}
