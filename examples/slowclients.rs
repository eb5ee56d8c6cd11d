//! Slow clients against a running Wharf (docs/performance.md): N connections that each
//! declare a body of `--declare` bytes, send one byte less and stall. Reports what each got:
//! 503 `overloaded`, 408 `body_timeout`, another answer, closed without an answer, or nothing
//! yet when `--wait-secs` ends.
//!
//!   cargo run --release -p wharf --example slowclients -- --connections 2000
//!
//! Only loopback targets are meant: it is a bounded benchmark, not a stress tool.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use clap::Parser;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[derive(Parser)]
struct Args {
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: std::net::SocketAddr,
    #[arg(long, default_value = "github-demo")]
    endpoint: String,
    #[arg(long, default_value_t = 2000)]
    connections: usize,
    #[arg(long, default_value_t = 1 << 20)]
    declare: usize,
    /// How long each connection waits for an answer after sending what it sends.
    #[arg(long, default_value_t = 60)]
    wait_secs: u64,
}

async fn one(args: &Args, started: Instant) -> (&'static str, Duration) {
    let Ok(mut stream) = TcpStream::connect(args.addr).await else {
        return ("connect_failed", started.elapsed());
    };
    let head = format!(
        "POST /webhooks/{} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nx-hub-signature-256: sha256=00\r\nx-github-delivery: slow\r\nx-github-event: push\r\n\r\n",
        args.endpoint, args.declare
    );
    if stream.write_all(head.as_bytes()).await.is_err() {
        return ("closed_without_answer", started.elapsed());
    }
    // One byte less than declared; a server that answered already may cut this short.
    let body = vec![b'a'; args.declare.saturating_sub(1)];
    let _ = stream.write_all(&body).await;
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    let wait = tokio::time::timeout(Duration::from_secs(args.wait_secs), async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    answer.extend_from_slice(&buf[..n]);
                    if answer.ends_with(b"}") {
                        break;
                    }
                }
            }
        }
    })
    .await;
    let text = String::from_utf8_lossy(&answer);
    let outcome = if text.contains("\"overloaded\"") {
        "503_overloaded"
    } else if text.contains("\"body_timeout\"") {
        "408_body_timeout"
    } else if !text.is_empty() {
        "other_answer"
    } else if wait.is_err() {
        "no_answer_yet"
    } else {
        "closed_without_answer"
    };
    (outcome, started.elapsed())
}

#[tokio::main]
async fn main() {
    let args = std::sync::Arc::new(Args::parse());
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..args.connections {
        let args = std::sync::Arc::clone(&args);
        tasks.spawn(async move { one(&args, started).await });
    }
    // outcome -> (count, first, last) seconds after the start.
    let mut tally: BTreeMap<&str, (usize, f64, f64)> = BTreeMap::new();
    while let Some(result) = tasks.join_next().await {
        let (outcome, at) = result.expect("task");
        let at = at.as_secs_f64();
        let entry = tally.entry(outcome).or_insert((0, at, at));
        entry.0 += 1;
        entry.1 = entry.1.min(at);
        entry.2 = entry.2.max(at);
    }
    for (outcome, (count, first, last)) in tally {
        println!("{outcome}: {count} (answered {first:.1} s to {last:.1} s after the start)");
    }
}
