//! The host alone decides what "verified" means. A careless or hostile adapter
//! (`test-misbehave`) cannot make an unsigned body or an unsigned timestamp verify, cannot make
//! the host hash without bound, cannot put the request into the log, and cannot hold a call by
//! sleeping; and verified ids that could not be header values or Postgres text are `malformed`.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::{app::*, http::*, process::*, signing::*};

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

async fn start_evil() -> TestApp {
    TestApp::builder()
        .add_adapter("testing/test-misbehave.wasm")
        .add_endpoints(EVIL)
        .start()
        .await
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
    assert_eq!(
        (answer.status, answer.code()),
        (503, "adapter_unavailable"),
        "{answer:?}"
    );
    assert!(answer.headers.contains_key("retry-after"));

    // The body is signed, the reported timestamp is not: its freshness would prove nothing.
    let unsigned_ts = [b"wharf.".as_slice(), &body].concat();
    let answer = misbehave(&app, "ts-unsigned", ts, &unsigned_ts, &body).await;
    assert_eq!(
        (answer.status, answer.code()),
        (503, "adapter_unavailable"),
        "{answer:?}"
    );
    assert_eq!(app.count("webhook_inbox").await, 0);

    // The same adapter describing the request properly verifies: the refusals above are the
    // host's rules, not a broken signature.
    let answer = misbehave(&app, "ok", ts, &dotted(ts, &body), &body).await;
    assert_eq!(
        (answer.status, answer.code()),
        (200, "accepted"),
        "{answer:?}"
    );
    assert_eq!(app.count("webhook_inbox").await, 1);
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
        assert_eq!(
            (answer.status, answer.code()),
            (503, "adapter_unavailable"),
            "{mode}: {answer:?}"
        );
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
    assert_eq!(
        (answer.status, answer.code()),
        (200, "accepted"),
        "{answer:?}"
    );
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
        assert_eq!(
            (answer.status, answer.code()),
            (400, "malformed"),
            "{n}: {answer:?}"
        );
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
    let written = TestApp::builder()
        .add_adapter("testing/test-misbehave.wasm")
        .add_endpoints(EVIL)
        .write_config()
        .await;
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
    assert!(server.stop().await.success());

    let text = std::fs::read_to_string(&log).unwrap();
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

/// A fixture that expects the adapter's contract breach to be "just" a 503 must still fail:
/// `wharf adapter test`, `wharf adapter check` and reload all refuse the file.
#[tokio::test]
async fn a_contract_breach_fails_fixtures_check_and_reload_whatever_the_fixture_expects() {
    let written = TestApp::builder()
        .add_adapter("testing/test-misbehave.wasm")
        .add_endpoints(EVIL)
        .write_config()
        .await;
    let adapters = written.dir.path().join("adapters");
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
    let files: Vec<serde_json::Value> = app
        .client
        .get(format!("{}/admin/adapters", app.admin))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
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
