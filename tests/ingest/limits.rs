//! Body and header bounds, routing and media types, from raw bytes.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{app::*, http::*, signing::*};

/// A GitHub-signed body of exactly `len` bytes.
fn github_body(len: usize) -> Vec<u8> {
    vec![b'a'; len]
}

#[tokio::test]
async fn body_at_the_limit_is_accepted_one_byte_over_is_413() {
    let limit = 64 * 1024;
    let app = TestApp::builder()
        .max_body_bytes(limit as u64)
        .start()
        .await;
    let at = github_body(limit);
    let answer = app.post_github(at, "at-limit").await;
    answer.assert_accepted("");

    let over = github_body(limit + 1);
    let answer = app.post_github(over, "over-limit").await;
    answer.assert_is(413, "payload_too_large", "");

    // Chunked (no Content-Length): refused while streaming.
    let over = github_body(limit + 1);
    let headers = signed_github_headers(&over, "chunked");
    let stream = futures::stream::iter(
        over.chunks(4096)
            .map(|c| Ok::<_, std::io::Error>(c.to_vec()))
            .collect::<Vec<_>>(),
    );
    let mut request = app
        .client
        .post(format!("{}/webhooks/github", app.base))
        .body(reqwest::Body::wrap_stream(stream));
    for (k, v) in &headers {
        request = request.header(k, v);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status().as_u16(), 413);
    assert_eq!(app.count("webhook_inbox").await, 1);
}

/// Sends raw bytes and returns the status line and whatever answer arrives.
async fn raw_exchange(
    addr: std::net::SocketAddr,
    head: &str,
    body: &[u8],
    shutdown_write: bool,
) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    if shutdown_write {
        stream.shutdown().await.unwrap();
    }
    read_answer(&mut stream, Duration::from_secs(5)).await
}

#[tokio::test]
async fn a_50_mib_declaration_is_refused_before_the_body_is_sent() {
    let app = TestApp::builder().start().await;
    let head = format!(
        "POST /webhooks/github HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nx-hub-signature-256: sha256=00\r\n\r\n",
        50 << 20
    );
    // Nothing of the body is written: the answer must come from the header alone.
    let started = std::time::Instant::now();
    let answer = raw_exchange(app.addr, &head, b"", false).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("payload_too_large"), "{answer}");
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn a_50_mib_chunked_body_is_cut_off_while_streaming() {
    let app = TestApp::builder().start().await;
    let mut stream = TcpStream::connect(app.addr).await.unwrap();
    let head = "POST /webhooks/github HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\nx-hub-signature-256: sha256=00\r\n\r\n";
    stream.write_all(head.as_bytes()).await.unwrap();
    let chunk = vec![b'a'; 1 << 20];
    let mut sent = 0usize;
    let mut refused_early = false;
    let framed = [format!("{:x}\r\n", chunk.len()).as_bytes(), &chunk, b"\r\n"].concat();
    for _ in 0..50 {
        // A server that stopped reading without closing would block this write: time it out.
        match tokio::time::timeout(Duration::from_secs(10), stream.write_all(&framed)).await {
            Ok(Ok(())) => sent += chunk.len(),
            Ok(Err(_)) => {
                refused_early = true;
                break;
            }
            Err(_) => panic!("the server neither read nor closed after {sent} bytes"),
        }
    }
    let mut answer = vec![0u8; 1024];
    let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut answer))
        .await
        .ok()
        .and_then(|r| r.ok())
        .unwrap_or(0);
    let answer = String::from_utf8_lossy(&answer[..n]);
    // Either the server answered 413 and closed mid-stream, or its answer was waiting when the
    // client stopped: both mean the 50 MiB were never buffered.
    assert!(
        refused_early || answer.starts_with("HTTP/1.1 413"),
        "sent {sent} bytes, answer {answer:?}"
    );
    if !answer.is_empty() {
        assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    }
}

#[tokio::test]
async fn a_lying_content_length_never_gets_a_body_accepted() {
    let app = TestApp::builder().start().await;
    let body = b"Hello, World!";
    let sig = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
    let head = |len: usize| {
        format!(
            "POST /webhooks/github HTTP/1.1\r\nhost: x\r\ncontent-length: {len}\r\nx-hub-signature-256: {sig}\r\nx-github-delivery: d1\r\nx-github-event: push\r\nconnection: close\r\n\r\n"
        )
    };
    // Shorter than the body: only the declared bytes are the body, and they do not verify.
    let answer = raw_exchange(app.addr, &head(5), body, false).await;
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    // Longer than the body, then the client stops sending: the body is incomplete.
    let answer = raw_exchange(app.addr, &head(body.len() + 10), body, true).await;
    assert!(
        answer.starts_with("HTTP/1.1 400") && answer.contains("malformed"),
        "{answer}"
    );
    assert_eq!(app.count("webhook_inbox").await, 0);
    // The honest request is accepted.
    let answer = raw_exchange(app.addr, &head(body.len()), body, false).await;
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.contains("accepted"),
        "{answer}"
    );
}

#[tokio::test]
async fn too_many_or_too_large_headers_are_431() {
    let app = TestApp::builder().start().await;
    let body = b"{}".to_vec();
    let mut headers = signed_github_headers(&body, "many");
    for i in 0..70 {
        headers.push((format!("x-filler-{i}"), "y".into()));
    }
    let answer = app.post("github", &refs(&headers), body.clone()).await;
    answer.assert_is(431, "headers_too_large", "");
    let mut headers = signed_github_headers(&body, "large");
    headers.push(("x-large".into(), "z".repeat(20 * 1024)));
    let answer = app.post("github", &refs(&headers), body).await;
    assert_eq!(answer.status, 431);
}

#[tokio::test]
async fn routing_methods_and_media_types() {
    let app = TestApp::builder().start().await;
    assert_eq!(app.get_admin("/healthz").await.status, 200);
    assert_eq!(app.readiness().await, 200);
    let answer = app.post("nope", &[], "{}").await;
    answer.assert_is(404, "unknown_endpoint", "");
    assert_eq!(app.get("/webhooks/github").await.status, 405);
    let body = b"{}".to_vec();
    let mut headers = signed_github_headers(&body, "media");
    headers.push((
        "content-type".into(),
        "multipart/form-data; boundary=x".into(),
    ));
    let answer = app.post("github", &refs(&headers), body.clone()).await;
    answer.assert_is(415, "unsupported_media_type", "");
    let mut headers = signed_github_headers(&body, "media");
    headers.push((
        "content-type".into(),
        "application/vnd.github+json; charset=utf-8".into(),
    ));
    app.post("github", &refs(&headers), body)
        .await
        .assert_status(200);

    // Each request is counted by endpoint and outcome; unknown endpoints share one label.
    let metrics = app.metrics().await;
    for line in [
        r#"wharf_requests_total{endpoint="_unknown",outcome="unknown_endpoint"} 1"#,
        r#"wharf_requests_total{endpoint="github",outcome="unsupported_media_type"} 1"#,
        r#"wharf_requests_total{endpoint="github",outcome="accepted"} 1"#,
        r#"wharf_ack_seconds_count{endpoint="_unknown",outcome="unknown_endpoint"} 1"#,
        r#"wharf_ack_seconds_count{endpoint="github",outcome="unsupported_media_type"} 1"#,
        r#"wharf_ack_seconds_count{endpoint="github",outcome="accepted"} 1"#,
        "wharf_db_commit_seconds_count 1",
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "no {line:?} in\n{metrics}"
        );
    }
}
