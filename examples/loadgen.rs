//! A load generator for a running Wharf: signed Stripe-style events, each with its own id,
//! sent at a fixed concurrency; prints throughput and acknowledgement latency percentiles.
//!
//!   cargo run --release -p wharf --example loadgen -- --requests 20000 --concurrency 64
//!
//! Defaults match `examples/wharf.toml` and `examples/secrets.toml` (`cargo xtask dev`).
//! Only loopback targets are meant: it is a bounded benchmark, not a stress tool.

use std::time::{Duration, Instant};

use clap::Parser;
use hmac::{Hmac, Mac};

#[derive(Parser)]
struct Args {
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    url: String,
    #[arg(long, default_value = "stripe-demo")]
    endpoint: String,
    #[arg(long, default_value = "whsec_demo_stripe_current")]
    secret: String,
    #[arg(long, default_value_t = 10_000)]
    requests: usize,
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Approximate body size.
    #[arg(long, default_value_t = 10 * 1024)]
    body_bytes: usize,
}

fn signed(secret: &str, id: &str, body_bytes: usize) -> (String, String) {
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let padding = "x".repeat(body_bytes.saturating_sub(200));
    let body = format!(
        r#"{{"id":"{id}","object":"event","type":"payment_intent.succeeded","created":{now},"data":{{"object":{{"id":"pi_load","note":"{padding}"}}}}}}"#
    );
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).expect("any key length");
    mac.update(format!("{now}.{body}").as_bytes());
    (
        format!("t={now},v1={}", hex::encode(mac.finalize().into_bytes())),
        body,
    )
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let client = reqwest::Client::new();
    let run = uuid::Uuid::now_v7().simple().to_string();
    let target = format!("{}/webhooks/{}", args.url, args.endpoint);
    let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let started = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..args.concurrency {
        let (client, target, next, run, secret) = (
            client.clone(),
            target.clone(),
            next.clone(),
            run.clone(),
            args.secret.clone(),
        );
        let (total, body_bytes) = (args.requests, args.body_bytes);
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut failures = 0usize;
            loop {
                let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if n >= total {
                    break;
                }
                let (signature, body) = signed(&secret, &format!("evt_{run}_{n}"), body_bytes);
                let sent = Instant::now();
                let response = client
                    .post(&target)
                    .header("stripe-signature", signature)
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await;
                match response {
                    Ok(r) if r.status().is_success() => latencies.push(sent.elapsed()),
                    _ => failures += 1,
                }
            }
            (latencies, failures)
        }));
    }
    let mut latencies: Vec<Duration> = Vec::new();
    let mut failures = 0;
    for worker in workers {
        let (l, f) = worker.await.expect("worker");
        latencies.extend(l);
        failures += f;
    }
    let elapsed = started.elapsed();
    latencies.sort();
    let pct = |p: f64| {
        latencies
            .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
    };
    println!(
        "{} ok, {} failed in {:.2} s: {:.0} req/s; ack latency p50 {:?} p99 {:?} max {:?}",
        latencies.len(),
        failures,
        elapsed.as_secs_f64(),
        latencies.len() as f64 / elapsed.as_secs_f64(),
        pct(0.50).copied().unwrap_or_default(),
        pct(0.99).copied().unwrap_or_default(),
        latencies.last().copied().unwrap_or_default(),
    );
}
