//! Rate limits: a bucket per client address taken before the body is read (no body read, no
//! adapter call) and spent by what does not verify, endpoint and provider token
//! buckets spent only by verified requests, 429
//! `rate_limited` with `Retry-After`, counted in the metrics, and refused at start when out of
//! range. Slow refills (a token every 10 s) keep the tests from depending on timing: a handful
//! of requests all fall within the window; where a token must come back the refill is 1 s, and
//! after sleeping `Retry-After` it is back for certain.

use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use wharf::config::Config;

use crate::support::signing::signed_stripe_event;
use crate::support::{app::*, http::*};

async fn post_github(app: &TestApp, delivery: &str) -> Answer {
    let body = format!("{{\"delivery\":\"{delivery}\"}}").into_bytes();
    app.post_github(body, delivery).await
}

fn retry_after(answer: &Answer) -> u64 {
    answer
        .headers
        .get("retry-after")
        .unwrap_or_else(|| panic!("no Retry-After: {answer:?}"))
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

fn assert_limited(answer: &Answer) {
    answer.assert_is(429, "rate_limited", "");
    assert!(answer.json["message"].is_string(), "{answer:?}");
    assert!(retry_after(answer) >= 1, "{answer:?}");
}

const LIMIT_0_5_BURST_2: &str = "rate_limit = { per_second = 0.5, burst = 2 }";
const LIMIT_0_1_BURST_1: &str = "rate_limit = { per_second = 0.1, burst = 1 }";

#[tokio::test]
async fn past_the_burst_429_rate_limited_with_retry_after_then_a_token_comes_back() {
    let app = TestApp::builder()
        .endpoint("stripe-limited", "stripe", "stripe", LIMIT_0_5_BURST_2)
        .start()
        .await;
    // A GET to an endpoint without GET handshakes is 405 and takes no token.
    assert_eq!(app.get("/webhooks/stripe-limited").await.status, 405);

    let (first, second, third) = tokio::join!(
        app.post_stripe_to("stripe-limited", "evt_rl_1"),
        app.post_stripe_to("stripe-limited", "evt_rl_2"),
        app.post_stripe_to("stripe-limited", "evt_rl_3"),
    );
    let mut answers = [first, second, third];
    answers.sort_by_key(|a| a.status);
    assert_eq!(answers[0].code(), "accepted", "{answers:?}");
    assert_eq!(answers[1].code(), "accepted", "{answers:?}");
    assert_limited(&answers[2]);
    let wait = retry_after(&answers[2]);
    // One token every 2 s: the next is at most 2 s away.
    assert!(wait <= 2, "{answers:?}");
    assert_eq!(app.count("webhook_inbox").await, 2);

    // Other endpoints are not limited by this one.
    app.post_stripe_to("stripe", "evt_free")
        .await
        .assert_accepted("evt_free");

    // Once Retry-After has passed, one more is taken.
    tokio::time::sleep(Duration::from_secs(wait)).await;
    app.post_stripe_to("stripe-limited", "evt_rl_4")
        .await
        .assert_accepted("evt_rl_4");
    assert_eq!(app.count("webhook_inbox").await, 4);

    app.assert_metrics(&[
        r#"wharf_requests_total{endpoint="stripe-limited",outcome="rate_limited"} 1"#,
        r#"wharf_rate_limited_total{endpoint="stripe-limited",scope="endpoint"} 1"#,
        r#"wharf_requests_total{endpoint="stripe-limited",outcome="accepted"} 3"#,
    ])
    .await;
}

/// One token every 10 s per client address, `burst` at once.
fn client_limit(burst: u32) -> String {
    format!("client_rate_per_second = 0.1\nclient_rate_burst = {burst}")
}

/// A Stripe request with a signature that does not verify: what anybody can send.
async fn post_unsigned(app: &TestApp, endpoint: &str, extra: &[(&str, &str)]) -> Answer {
    let mut headers = vec![
        ("stripe-signature", "t=1,v1=00"),
        ("content-type", "application/json"),
    ];
    headers.extend_from_slice(extra);
    app.post(endpoint, &headers, "{}").await
}

/// A freshly signed Stripe event sent as if through a proxy from `client`.
async fn post_stripe_from(app: &TestApp, endpoint: &str, id: &str, client: &str) -> Answer {
    let (mut headers, body) = signed_stripe_event(id);
    headers.push(("x-forwarded-for".into(), client.into()));
    app.post(endpoint, &refs(&headers), body).await
}

#[tokio::test]
async fn a_client_past_its_limit_is_answered_from_the_head_without_reading_the_body() {
    let app = TestApp::builder()
        .server_toml(&client_limit(1))
        .start()
        .await;
    // The address's one token goes to a request the adapter refuses (401), and is kept.
    let answer = app
        .post("github", &[("x-github-event", "push")], "{}")
        .await;
    assert_eq!(answer.code(), "invalid_signature", "{answer:?}");

    // 512 KiB declared, within the 1 MiB limit and the body budget, and never sent: unless the
    // answer comes from the head alone, it would wait 30 s for the body deadline.
    let mut stream = TcpStream::connect(app.addr).await.unwrap();
    let head = "POST /webhooks/github HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 524288\r\nx-hub-signature-256: sha256=00\r\nx-github-delivery: d\r\nx-github-event: push\r\n\r\n";
    let sent = Instant::now();
    stream.write_all(head.as_bytes()).await.unwrap();
    let (answer, closed) = read_until_closed(&mut stream, Duration::from_secs(10)).await;
    assert!(answer.starts_with("HTTP/1.1 429"), "{answer}");
    assert!(answer.contains(r#""error":"rate_limited""#), "{answer}");
    let lower = answer.to_ascii_lowercase();
    // The next token is 10 s after the first request's.
    assert!(lower.contains("retry-after: 10\r\n"), "{answer}");
    assert!(lower.contains("connection: close"), "{answer}");
    assert!(closed, "the connection stayed open after the 429");
    assert!(
        sent.elapsed() < Duration::from_secs(5),
        "answered after {:?}",
        sent.elapsed()
    );
    app.assert_metrics(&[
        r#"wharf_http_body_bytes_reserved 0"#,
        r#"wharf_requests_total{endpoint="github",outcome="rate_limited"} 1"#,
        r#"wharf_rate_limited_total{endpoint="github",scope="client"} 1"#,
    ])
    .await;
}

#[tokio::test]
async fn a_client_past_its_limit_never_reaches_the_adapter_post_or_get() {
    // `trap` makes every adapter call fail (503 adapter_unavailable): an answer other than
    // that means the adapter was not called.
    let app = TestApp::builder()
        .add_adapter("testing/test-misbehave.wasm")
        .endpoint("evil", "test-misbehave", "github", "")
        .server_toml(&client_limit(2))
        .start()
        .await;
    let post = || {
        app.post(
            "evil",
            &[
                ("x-misbehave", "trap"),
                ("content-type", "application/json"),
            ],
            "{}",
        )
    };
    // test-misbehave serves GET handshakes: a GET reaches its adapter, and is limited alike.
    let get = || app.get_with("/webhooks/evil", &[("x-misbehave", "trap")]);

    // The receiver's own 5xx spends nothing; what a stranger is refused (401) spends a token.
    post().await.assert_is(503, "adapter_unavailable", "post");
    get().await.assert_is(503, "adapter_unavailable", "get");
    for _ in 0..2 {
        app.post("evil", &[("content-type", "application/json")], "{}")
            .await
            .assert_is(401, "invalid_signature", "without x-misbehave");
    }
    // The address's burst is spent: neither method reaches the adapter now.
    for _ in 0..3 {
        assert_limited(&post().await);
        let answer = get().await;
        answer.assert_is(429, "rate_limited", "get");
        assert!(answer.headers.contains_key("retry-after"), "{answer:?}");
    }

    app.assert_metrics(&[
        r#"wharf_requests_total{endpoint="evil",outcome="adapter_unavailable"} 2"#,
        r#"wharf_requests_total{endpoint="evil",outcome="invalid_signature"} 2"#,
        r#"wharf_requests_total{endpoint="evil",outcome="rate_limited"} 6"#,
        r#"wharf_rate_limited_total{endpoint="evil",scope="client"} 6"#,
    ])
    .await;
}

#[tokio::test]
async fn unsigned_requests_spend_neither_endpoint_nor_provider_bucket_verified_ones_do() {
    let app = TestApp::builder()
        .endpoint(
            "stripe-a",
            "stripe",
            "stripe",
            "rate_limit = { per_second = 0.1, burst = 3 }",
        )
        .endpoint("stripe-b", "stripe", "stripe", "")
        .append_toml(
            "[[provider]]\nadapter = \"stripe\"\nrate_limit = { per_second = 0.1, burst = 4 }\n",
        )
        .start()
        .await;
    // More unsigned requests than either bucket holds: all 401, and nothing spent.
    for _ in 0..5 {
        post_unsigned(&app, "stripe-a", &[])
            .await
            .assert_is(401, "invalid_signature", "unsigned");
    }
    // The endpoint's three requests are all still allowed ...
    for id in ["evt_a1", "evt_a2", "evt_a3"] {
        app.post_stripe_to("stripe-a", id).await.assert_accepted(id);
    }
    // ... then a verified one past it is read whole, refused before the commit, with when to
    // come back.
    let refused = app.post_stripe_to("stripe-a", "evt_a4").await;
    assert_limited(&refused);
    assert!(retry_after(&refused) <= 10, "{refused:?}");
    // The sibling has the provider's fourth token, and no more.
    app.post_stripe_to("stripe-b", "evt_b1")
        .await
        .assert_accepted("evt_b1");
    assert_limited(&app.post_stripe_to("stripe-b", "evt_b2").await);
    assert_eq!(app.count("webhook_inbox").await, 4);
    app.assert_metrics(&[
        r#"wharf_requests_total{endpoint="stripe-a",outcome="invalid_signature"} 5"#,
        r#"wharf_requests_total{endpoint="stripe-a",outcome="accepted"} 3"#,
        r#"wharf_rate_limited_total{endpoint="stripe-a",scope="endpoint"} 1"#,
        r#"wharf_rate_limited_total{endpoint="stripe-b",scope="provider"} 1"#,
    ])
    .await;
}

#[tokio::test]
async fn a_flood_from_one_address_is_refused_while_another_address_is_served() {
    // The test client is the proxy; `X-Forwarded-For` names the client behind it.
    let app = TestApp::builder()
        .server_toml("trusted_proxies = [\"127.0.0.1\"]")
        .server_toml(&client_limit(3))
        .start()
        .await;
    let flooder = [("x-forwarded-for", "203.0.113.66")];
    let mut answers = Vec::new();
    for _ in 0..10 {
        answers.push(post_unsigned(&app, "stripe", &flooder).await);
    }
    for answer in &answers[..3] {
        answer.assert_is(401, "invalid_signature", "within the burst");
    }
    for answer in &answers[3..] {
        assert_limited(answer);
    }
    // Even a correctly signed request from the flooding address waits for its bucket ...
    assert_limited(&post_stripe_from(&app, "stripe", "evt_same", "203.0.113.66").await);
    // ... while another address is served: a request that verifies spends none of its
    // address's tokens, so more signed requests than the burst all pass.
    for i in 0..6 {
        let id = format!("evt_other_{i}");
        post_stripe_from(&app, "stripe", &id, "198.51.100.7")
            .await
            .assert_accepted(&id);
    }
    assert_eq!(app.count("webhook_inbox").await, 6);
    app.assert_metrics(&[
        r#"wharf_rate_limited_total{endpoint="stripe",scope="client"} 8"#,
        r#"wharf_requests_total{endpoint="stripe",outcome="invalid_signature"} 3"#,
        r#"wharf_requests_total{endpoint="stripe",outcome="accepted"} 6"#,
    ])
    .await;
}

#[tokio::test]
async fn the_provider_bucket_is_shared_by_its_endpoints_and_counted_by_scope() {
    let app = TestApp::builder()
        .endpoint("stripe-a", "stripe", "stripe", LIMIT_0_1_BURST_1)
        .endpoint("stripe-b", "stripe", "stripe", "")
        .append_toml(
            "[[provider]]\nadapter = \"stripe\"\nrate_limit = { per_second = 0.1, burst = 3 }\n",
        )
        .start()
        .await;
    // stripe-a takes its one token and one of the provider's three ...
    app.post_stripe_to("stripe-a", "evt_a1")
        .await
        .assert_accepted("evt_a1");
    // ... and is then refused by its own bucket, which takes nothing from the provider's.
    let refused = app.post_stripe_to("stripe-a", "evt_a2").await;
    assert_limited(&refused);
    // The provider's two remaining tokens go to stripe-b, then it is refused by the provider.
    for id in ["evt_b1", "evt_b2"] {
        app.post_stripe_to("stripe-b", id).await.assert_accepted(id);
    }
    let refused = app.post_stripe_to("stripe-b", "evt_b3").await;
    assert_limited(&refused);
    // Another adapter's endpoint is unaffected.
    for i in 0..5 {
        post_github(&app, &format!("gh-{i}"))
            .await
            .assert_accepted("github");
    }
    assert_eq!(app.count("webhook_inbox").await, 8);

    app.assert_metrics(&[
        r#"wharf_rate_limited_total{endpoint="stripe-a",scope="endpoint"} 1"#,
        r#"wharf_rate_limited_total{endpoint="stripe-a",scope="provider"} 0"#,
        r#"wharf_rate_limited_total{endpoint="stripe-b",scope="provider"} 1"#,
        r#"wharf_rate_limited_total{endpoint="stripe-b",scope="endpoint"} 0"#,
        r#"wharf_requests_total{endpoint="stripe-a",outcome="rate_limited"} 1"#,
        r#"wharf_requests_total{endpoint="stripe-b",outcome="rate_limited"} 1"#,
        r#"wharf_requests_total{endpoint="stripe-b",outcome="accepted"} 2"#,
        r#"wharf_requests_total{endpoint="github",outcome="accepted"} 5"#,
        r#"wharf_requests_total{endpoint="github",outcome="rate_limited"} 0"#,
    ])
    .await;
}

#[tokio::test]
async fn rate_limits_out_of_range_or_for_an_unused_adapter_refuse_start_naming_the_key() {
    for (toml, message) in [
        (
            "[[endpoint]]\nid = \"x\"\nadapter = \"stripe\"\nsecret = \"stripe\"\nrate_limit = { per_second = 0, burst = 10 }\n",
            "endpoint \"x\": rate_limit.per_second = 0 is out of range: allowed 0.001..=1000000",
        ),
        (
            "[[endpoint]]\nid = \"x\"\nadapter = \"stripe\"\nsecret = \"stripe\"\nrate_limit = { per_second = 10, burst = 0 }\n",
            "endpoint \"x\": rate_limit.burst = 0 is out of range: allowed 1..=1000000",
        ),
        (
            "[[endpoint]]\nid = \"x\"\nadapter = \"stripe\"\nsecret = \"stripe\"\nrate_limit = { per_second = 10 }\n",
            "missing field `burst`",
        ),
        (
            "[[provider]]\nadapter = \"stripe\"\nrate_limit = { per_second = 1000001, burst = 1 }\n",
            "provider \"stripe\": rate_limit.per_second = 1000001 is out of range: allowed 0.001..=1000000",
        ),
        (
            "[[provider]]\nadapter = \"stripe\"\nrate_limit = { per_second = nan, burst = 1 }\n",
            "provider \"stripe\": rate_limit.per_second = NaN is out of range",
        ),
        (
            "[[provider]]\nadapter = \"strpe\"\nrate_limit = { per_second = 10, burst = 10 }\n",
            "provider \"strpe\": no endpoint uses adapter \"strpe\"",
        ),
        (
            "[[provider]]\nadapter = \"stripe\"\nrate_limit = { per_second = 10, burst = 10 }\n[[provider]]\nadapter = \"stripe\"\nrate_limit = { per_second = 5, burst = 5 }\n",
            "provider \"stripe\" is configured twice",
        ),
    ] {
        let written = TestApp::builder().append_toml(toml).write_config().await;
        let error = format!("{:#}", Config::load(&written.config_path).unwrap_err());
        assert!(error.contains(message), "{toml}: {error}");
    }

    // And `wharf serve` exits with that message.
    let written = TestApp::builder()
        .append_toml(
            "[[provider]]\nadapter = \"github\"\nrate_limit = { per_second = 5, burst = 0 }\n",
        )
        .write_config()
        .await;
    written
        .assert_refused(&[
            "provider \"github\": rate_limit.burst = 0 is out of range: allowed 1..=1000000",
        ])
        .await;
}
