//! What the host enforces on connections, whatever clients do: header and body deadlines, the
//! idle keep-alive timeout, the connection cap and the body budget; the config ranges that
//! keep those promises; and the `/metrics` content type. Slow clients are raw TCP.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use wharf::config::Config;
use wharf::{Server, ServerOptions};

use crate::support::{app::*, http::*};

/// A GitHub request head declaring `len` body bytes (the signature is never checked: these
/// bodies never arrive whole).
fn head(len: usize) -> String {
    format!(
        "POST /webhooks/github HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {len}\r\nx-hub-signature-256: sha256=00\r\nx-github-delivery: d\r\nx-github-event: push\r\n\r\n"
    )
}

const SHED_ANSWERED: &str = "wharf_connections_shed_total{outcome=\"answered\"}";
const SHED_CLOSED: &str = "wharf_connections_shed_total{outcome=\"closed\"}";

/// A connection serving a request: its head is in, its 23-byte body only half (held past a
/// second only with a long `body_grace_ms`, or the minimum body rate cuts it).
async fn request_still_coming(app: &TestApp) -> TcpStream {
    let mut stream = TcpStream::connect(app.addr).await.unwrap();
    stream.write_all(head(23).as_bytes()).await.unwrap();
    stream.write_all(b"{\"zen\":").await.unwrap();
    stream
}

#[tokio::test]
async fn headers_that_never_finish_are_cut_after_the_header_timeout() {
    let app = TestApp::builder()
        .server_toml("header_timeout_ms = 500")
        .start()
        .await;

    // Stalled half-way through the head.
    let mut stalled = TcpStream::connect(app.addr).await.unwrap();
    stalled
        .write_all(b"POST /webhooks/github HTTP/1.1\r\nhost: x\r\n")
        .await
        .unwrap();
    let (answer, closed) = read_until_closed(&mut stalled, Duration::from_secs(15)).await;
    assert!(closed, "still open after 15 s; got {answer:?}");
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "{answer}"
    );

    // Trickled one byte every 100 ms: progress does not move the deadline.
    let mut trickle = TcpStream::connect(app.addr).await.unwrap();
    trickle
        .write_all(b"POST /webhooks/github HTTP/1.1\r\nx-long: ")
        .await
        .unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 1024];
    let closed = loop {
        if started.elapsed() > Duration::from_secs(15) {
            break false;
        }
        if trickle.write_all(b"a").await.is_err() {
            break true;
        }
        let read = tokio::time::timeout(Duration::from_millis(100), trickle.read(&mut buf));
        if let Ok(Ok(0) | Err(_)) = read.await {
            break true;
        }
    };
    assert!(closed, "a trickled head was still open after 15 s");
}

#[tokio::test]
async fn idle_keep_alive_connections_are_closed_after_the_idle_timeout() {
    let app = TestApp::builder()
        .server_toml("header_timeout_ms = 500")
        .start()
        .await;
    let mut stream = TcpStream::connect(app.addr).await.unwrap();
    stream
        .write_all(b"GET /nothing-here HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let answer = read_answer(&mut stream, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    assert!(!answer.to_ascii_lowercase().contains("connection: close"));
    // Kept alive after the answer, then closed once idle for the timeout.
    let idle_since = Instant::now();
    let (rest, closed) = read_until_closed(&mut stream, Duration::from_secs(15)).await;
    assert!(closed, "an idle connection stayed open 15 s");
    assert!(
        rest.is_empty() || rest.starts_with("HTTP/1.1 408"),
        "{rest}"
    );
    assert!(idle_since.elapsed() >= Duration::from_millis(400));
}

#[tokio::test]
async fn a_stalled_body_is_answered_408_and_closed_after_the_body_deadline() {
    let app = TestApp::builder()
        .server_toml("body_timeout_ms = 500")
        .start()
        .await;
    let mut stream = TcpStream::connect(app.addr).await.unwrap();
    stream.write_all(head(100).as_bytes()).await.unwrap();
    stream.write_all(&[b'a'; 10]).await.unwrap();
    let (answer, closed) = read_until_closed(&mut stream, Duration::from_secs(15)).await;
    assert!(closed, "still open after 15 s: {answer:?}");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains(r#""error":"body_timeout""#), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
    assert_eq!(app.count("webhook_inbox").await, 0);
    let metrics = app.metrics().await;
    let line = r#"wharf_requests_total{endpoint="github",outcome="body_timeout"} 1"#;
    assert!(metrics.lines().any(|l| l == line), "{metrics}");
}

/// When the budget is full and no upload may give way (none is past its grace period), a
/// request is refused from its head alone.
#[tokio::test]
async fn past_the_body_budget_requests_get_503_overloaded_before_their_body_is_read() {
    let mib = 1usize << 20;
    let held = mib - 1;
    let app = TestApp::builder()
        .write_config()
        .await
        .append_server_toml(&format!(
            "max_buffered_bytes = {}\nbody_timeout_ms = 120000\nbody_grace_ms = 120000",
            3 * held
        ))
        .start()
        .await;
    // Three uploads declare 1 MiB, send one byte less and stall: the budget is full.
    let mut stalled = Vec::new();
    for _ in 0..3 {
        let mut stream = TcpStream::connect(app.addr).await.unwrap();
        stream.write_all(head(mib).as_bytes()).await.unwrap();
        stream.write_all(&vec![b'a'; held]).await.unwrap();
        stalled.push(stream);
    }
    let full = format!("wharf_http_body_bytes_reserved {}", 3 * held);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !app.metrics().await.lines().any(|l| l == full) {
        assert!(Instant::now() < deadline, "the budget never filled");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The next request sends its head only: the answer cannot depend on its body.
    let mut next = TcpStream::connect(app.addr).await.unwrap();
    next.write_all(head(mib).as_bytes()).await.unwrap();
    let (answer, closed) = read_until_closed(&mut next, Duration::from_secs(10)).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains(r#""error":"overloaded""#), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("retry-after: 5"),
        "{answer}"
    );
    assert!(closed, "the connection was left open after the 503");

    // Once the stalled clients go away, requests are served again.
    drop(stalled);
    let body = b"{\"zen\":\"ok\"}".to_vec();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let answer = app.post_github(body.clone(), "after").await;
        if answer.status == 200 {
            break;
        }
        assert_eq!(answer.code(), "overloaded", "{answer:?}");
        assert!(Instant::now() < deadline, "still overloaded: {answer:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(app.count("webhook_inbox").await, 1);
}

/// At the cap, a connection kept alive and idle for a second is closed to make room for a new one
/// (otherwise idle keep-alive connections would hold every slot while new ones waited in the
/// kernel's backlog); a connection serving a request is never taken, and while every slot is
/// serving one a new connection is answered 503 `overloaded` at once instead of waiting.
#[tokio::test]
async fn at_the_connection_cap_an_idle_connection_makes_room_and_a_busy_one_does_not() {
    let app = TestApp::builder()
        .server_toml("max_connections = 2\nheader_timeout_ms = 60000\nbody_grace_ms = 60000")
        .start()
        .await;
    let request = b"GET /nothing-here HTTP/1.1\r\nhost: x\r\n\r\n";
    let mut idle = Vec::new();
    for _ in 0..2 {
        let mut stream = TcpStream::connect(app.addr).await.unwrap();
        stream.write_all(request).await.unwrap();
        let answer = read_answer(&mut stream, Duration::from_secs(5)).await;
        assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
        idle.push(stream);
    }
    // Both slots are held by connections between requests, idle for over a second: a third is
    // served all the same, long before the header timeout, and exactly one of the idle two was
    // closed for it.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let mut third = TcpStream::connect(app.addr).await.unwrap();
    third.write_all(request).await.unwrap();
    let answer = read_answer(&mut third, Duration::from_secs(10)).await;
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    let mut closed = 0;
    for stream in &mut idle {
        let mut buf = [0u8; 64];
        if let Ok(Ok(0)) = tokio::time::timeout(Duration::from_secs(1), stream.read(&mut buf)).await
        {
            closed += 1;
        }
    }
    assert_eq!(closed, 1, "idle connections closed");
    drop((idle, third));

    // Now both slots serve requests whose bodies are still coming: nothing is taken from them.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut busy = Vec::new();
    for _ in 0..2 {
        busy.push(request_still_coming(&app).await);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // A new connection is answered at once, 503 with Retry-After, and closed. Its 64 KiB body
    // was read and dropped, so the close is a FIN: the client reads the whole answer.
    let body = format!("{{\"zen\":\"{}\"}}", "a".repeat(64 << 10));
    let started = Instant::now();
    let mut shed = TcpStream::connect(app.addr).await.unwrap();
    shed.write_all(head(body.len()).as_bytes()).await.unwrap();
    shed.write_all(body.as_bytes()).await.unwrap();
    let (answer, closed) = read_until_closed(&mut shed, Duration::from_secs(5)).await;
    assert!(closed, "a shed connection stays open: {answer}");
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    let lower = answer.to_ascii_lowercase();
    assert!(lower.contains("retry-after: 5\r\n"), "{answer}");
    assert!(lower.contains("connection: close\r\n"), "{answer}");
    assert!(answer.contains("\"error\":\"overloaded\""), "{answer}");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    // One that sends nothing cannot hold on either: closed within the shed deadline.
    let mut silent = TcpStream::connect(app.addr).await.unwrap();
    let (answer, closed) = read_until_closed(&mut silent, Duration::from_secs(3)).await;
    assert!(closed, "a silent shed connection stays open: {answer}");
    for stream in &mut busy {
        let mut buf = [0u8; 64];
        let read = tokio::time::timeout(Duration::from_millis(100), stream.read(&mut buf)).await;
        assert!(read.is_err(), "a busy connection was touched: {read:?}");
    }
    // One request completes (its signature is wrong): a second later that connection is idle
    // enough to make room, and a new connection is served.
    busy[0].write_all(b"\"yes!!!!!!!!!!\"}").await.unwrap();
    let answer = read_answer(&mut busy[0], Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let mut served = TcpStream::connect(app.addr).await.unwrap();
    served.write_all(request).await.unwrap();
    let answer = read_answer(&mut served, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    assert_eq!(app.count("webhook_inbox").await, 0);
    let metrics = app.metrics().await;
    assert_eq!(metric(&metrics, SHED_ANSWERED), 2.0, "{metrics}");
}

/// Past the cap and the overflow slots (a quarter of the cap, at least 16), a connection waits
/// unread for a free one, at most a second, in one of as many places as the cap; past those it
/// is closed as soon as it is accepted: it learns at once, where one left in the kernel's
/// backlog would wait for a SYN retry. The shed ones are gone within their deadline.
#[tokio::test]
async fn past_the_overflow_slots_a_connection_waits_its_turn_or_is_closed_at_once() {
    let app = TestApp::builder()
        .server_toml("max_connections = 1\nheader_timeout_ms = 60000\nbody_grace_ms = 60000")
        .start()
        .await;
    // The one slot serves a request whose body is still coming.
    let mut busy = request_still_coming(&app).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Sixteen silent connections take the overflow slots for up to a second each.
    let started = Instant::now();
    let mut silent = Vec::new();
    for _ in 0..16 {
        silent.push(TcpStream::connect(app.addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let request = b"GET /nothing-here HTTP/1.1\r\nhost: x\r\n\r\n";
    // The one parking place: answered once a silent one's second is up.
    let mut parked = TcpStream::connect(app.addr).await.unwrap();
    parked.write_all(request).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    // No place left: closed at once, unanswered.
    let refused_at = Instant::now();
    let mut refused = TcpStream::connect(app.addr).await.unwrap();
    let _ = refused.write_all(request).await;
    let (answer, closed) = read_until_closed(&mut refused, Duration::from_secs(5)).await;
    assert!(closed && answer.is_empty(), "{closed} {answer:?}");
    assert!(
        refused_at.elapsed() < Duration::from_millis(500),
        "{:?}",
        refused_at.elapsed()
    );
    let (answer, closed) = read_until_closed(&mut parked, Duration::from_secs(5)).await;
    assert!(closed, "{answer}");
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("\"error\":\"overloaded\""), "{answer}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    for stream in &mut silent {
        let (_, closed) = read_until_closed(stream, Duration::from_secs(3)).await;
        assert!(closed, "a shed connection outlived its deadline");
    }
    let metrics = app.metrics().await;
    assert_eq!(metric(&metrics, SHED_ANSWERED), 17.0, "{metrics}");
    assert_eq!(metric(&metrics, SHED_CLOSED), 1.0, "{metrics}");
    // The busy request was never touched.
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_millis(100), busy.read(&mut buf)).await;
    assert!(read.is_err(), "the busy connection was touched: {read:?}");
}

/// The content type says what the body is: OpenMetrics (typed counters, `# EOF`).
#[tokio::test]
async fn metrics_are_served_as_openmetrics_on_both_admin_listeners() {
    let openmetrics = "application/openmetrics-text; version=1.0.0; charset=utf-8";
    let app = TestApp::builder().start().await;
    let answer = app.get_admin("/metrics").await;
    assert_eq!(answer.content_type.as_deref(), Some(openmetrics));
    assert!(answer.body.ends_with("# EOF\n"), "{}", answer.body);

    let config = Config::load(&app.config.config_path).unwrap();
    let worker = wharf::server::ProcessingHost::start(config, 0, Some(([127, 0, 0, 1], 0).into()))
        .await
        .unwrap();
    let url = format!("http://{}/metrics", worker.admin_addr.unwrap());
    let answer = get_url(&app.client, &url).await;
    assert_eq!(answer.content_type.as_deref(), Some(openmetrics));
    assert!(answer.body.ends_with("# EOF\n"));
    worker.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_config_value_out_of_range_stops_wharf_serve_naming_key_and_range() {
    let written = TestApp::builder()
        .append_database_toml("commit_timeout_ms = 5000")
        .write_config()
        .await;
    let message = "[database] commit_timeout_ms = 5000 is out of range: allowed 1..=1900";
    written.assert_refused(&[message]).await;
}

#[tokio::test]
async fn a_tolerance_on_an_adapter_that_signs_no_timestamp_is_refused_at_start() {
    let written = TestApp::builder()
        .endpoint("github-strict", "github", "github", "tolerance_secs = 300")
        .write_config()
        .await;
    let config = Config::load(&written.config_path).unwrap();
    let error = match Server::start(config, ServerOptions::default()).await {
        Ok(server) => {
            server.shutdown().await.unwrap();
            panic!("started with a tolerance on github")
        }
        Err(e) => e.to_string(),
    };
    assert!(
        error.contains("\"github-strict\"") && error.contains("signs no timestamp"),
        "{error}"
    );
}
