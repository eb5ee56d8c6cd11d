//! The open-loop load generator: request `i` is sent at `start + i / rate` whether or not
//! earlier ones have been answered, over as many connections as that takes, and its latency
//! is measured from that scheduled time to the complete answer, so a stall in the receiver
//! (or in this generator) shows up in the numbers instead of slowing the offered load.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use hdrhistogram::Histogram;
use serde::Serialize;
use tokio::time::Instant;

use crate::events::{BodyContent, BodySizes, EventSource, Kind};
use crate::senders::{Job, Reply, Senders};

#[derive(Debug, Clone)]
pub struct LoadConfig {
    /// Base URL, e.g. `http://127.0.0.1:8080`.
    pub url: String,
    pub endpoint: String,
    pub secret: String,
    /// Requests per second.
    pub rate: f64,
    /// How many requests: `rate * duration` unless set.
    pub requests: u64,
    pub sizes: BodySizes,
    pub content: BodyContent,
    pub objects: u32,
    pub duplicate_share: f64,
    pub bad_signature_share: f64,
    /// Per request, from its send: past it the request counts as a transport error.
    pub timeout: Duration,
    /// A guard against running this machine out of sockets: past it requests are not sent
    /// (and counted as such).
    pub max_in_flight: usize,
    /// Connections open at once at most; past them requests wait in the generator (in their
    /// latency). Providers keep their connections to one receiver bounded.
    pub max_connections: usize,
    pub seed: u64,
}

impl LoadConfig {
    pub fn duration_secs(&self) -> f64 {
        self.requests as f64 / self.rate
    }
}

/// Latency percentiles in milliseconds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Percentiles {
    pub count: u64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
}

impl Percentiles {
    fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Self::default();
        }
        let ms = |us: u64| us as f64 / 1000.0;
        Self {
            count: h.len(),
            p50_ms: ms(h.value_at_quantile(0.50)),
            p95_ms: ms(h.value_at_quantile(0.95)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            p999_ms: ms(h.value_at_quantile(0.999)),
            max_ms: ms(h.max()),
            mean_ms: h.mean() / 1000.0,
        }
    }
}

/// One second of the run, by scheduled send time (latencies) or by answer time (`acked`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Second {
    pub t: u64,
    pub sent: u64,
    /// 2xx answers to requests sent in this second.
    pub ok: u64,
    /// 2xx answers that arrived in this second (goodput).
    pub acked: u64,
    /// 503 `overloaded` (shed) for requests sent in this second.
    pub shed: u64,
    /// Unexpected answers and transport errors, by status and code or by error.
    pub errors: BTreeMap<String, u64>,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    pub offered_rate: f64,
    pub planned: u64,
    pub sent: u64,
    /// Not sent: `max_in_flight` requests were already waiting.
    pub not_sent: u64,
    pub body_bytes_mean: f64,
    pub answered: u64,
    pub ok_2xx: u64,
    pub accepted: u64,
    pub duplicates: u64,
    /// 401 to a request signed with the wrong secret, as it should be.
    pub rejected_as_expected: u64,
    /// 503 `overloaded` + `Retry-After`: refused at once by admission control.
    pub shed: u64,
    /// Every other unexpected answer, by `"<status> <error code>"`.
    pub errors_by_status: BTreeMap<String, u64>,
    /// No answer: timeouts, refused or reset connections.
    pub transport_errors: BTreeMap<String, u64>,
    /// From the first scheduled send to the last answer.
    pub elapsed_s: f64,
    /// 2xx per second over `elapsed_s`.
    pub accepted_per_s: f64,
    /// Every answer (2xx, 401, 503, ...), from its scheduled send time.
    pub latency: Percentiles,
    /// 2xx answers only.
    pub latency_2xx: Percentiles,
    /// How late this generator sent requests after their scheduled time.
    pub send_lag: Percentiles,
    /// The most connections the generator had open at once.
    pub peak_connections: usize,
    pub timeline: Vec<Second>,
}

impl Summary {
    pub fn error_count(&self) -> u64 {
        self.errors_by_status.values().sum::<u64>()
            + self.transport_errors.values().sum::<u64>()
            + self.not_sent
    }

    /// p99 under the bound with nothing shed, refused or lost.
    pub fn sustainable(&self, p99_bound_ms: f64) -> bool {
        self.sent > 0
            && self.error_count() == 0
            && self.shed == 0
            && self.latency.p99_ms < p99_bound_ms
    }

    pub fn print_human(&self) {
        let l = &self.latency;
        println!(
            "offered {:.0}/s: {} sent ({} not sent), {} answered in {:.1} s; 2xx {} ({} accepted, {} duplicate) = {:.0}/s",
            self.offered_rate,
            self.sent,
            self.not_sent,
            self.answered,
            self.elapsed_s,
            self.ok_2xx,
            self.accepted,
            self.duplicates,
            self.accepted_per_s
        );
        println!(
            "  latency from scheduled send (all answers): p50 {:.1} ms, p95 {:.1}, p99 {:.1}, p99.9 {:.1}, max {:.1}; 2xx p99 {:.1} ms",
            l.p50_ms, l.p95_ms, l.p99_ms, l.p999_ms, l.max_ms, self.latency_2xx.p99_ms
        );
        println!(
            "  401 to bad signatures (expected) {}; shed (503 overloaded) {}; send lag p99 {:.1} ms, max {:.1} ms; mean body {:.1} KiB",
            self.rejected_as_expected,
            self.shed,
            self.send_lag.p99_ms,
            self.send_lag.max_ms,
            self.body_bytes_mean / 1024.0
        );
        for (what, n) in self.errors_by_status.iter().chain(&self.transport_errors) {
            println!("  error: {what}: {n}");
        }
    }
}

fn histogram(sigfig: u8) -> Histogram<u64> {
    // Microseconds, 1 µs to 10 minutes.
    Histogram::new_with_bounds(1, 600_000_000, sigfig).expect("valid bounds")
}

struct SecondRecorder {
    second: Second,
    hist: Histogram<u64>,
}

struct Recorder {
    summary: Summary,
    all: Histogram<u64>,
    ok: Histogram<u64>,
    lag: Histogram<u64>,
    seconds: Vec<SecondRecorder>,
    last_answer: Option<Instant>,
}

impl Recorder {
    fn second(&mut self, t: usize) -> &mut SecondRecorder {
        while self.seconds.len() <= t {
            let t = self.seconds.len() as u64;
            self.seconds.push(SecondRecorder {
                second: Second {
                    t,
                    ..Default::default()
                },
                // Two significant figures: 1% is enough for a plot, and keeps a long run small.
                hist: histogram(2),
            });
        }
        &mut self.seconds[t]
    }
}

enum Outcome {
    Answer { status: u16, code: Option<String> },
    Transport(String),
}

/// Runs the load and returns what happened; `quiet` leaves out the progress line.
pub async fn run(config: LoadConfig, quiet: bool) -> anyhow::Result<Summary> {
    let (addr, host) = resolve(&config.url).await?;
    let path = format!("/webhooks/{}", config.endpoint);
    let senders = Senders::new(addr, host, path, config.timeout, config.max_connections);
    let mut source = EventSource::new(
        &config.secret,
        config.sizes.clone(),
        config.content,
        config.objects,
        config.duplicate_share,
        config.bad_signature_share,
        config.seed,
    );
    let recorder = Arc::new(Mutex::new(Recorder {
        summary: Summary {
            offered_rate: config.rate,
            planned: config.requests,
            ..Default::default()
        },
        all: histogram(3),
        ok: histogram(3),
        lag: histogram(3),
        seconds: Vec::new(),
        last_answer: None,
    }));
    let in_flight = Arc::new(AtomicUsize::new(0));
    let mut body_bytes = 0u64;
    let start = Instant::now() + Duration::from_millis(20);
    let mut progress_at = 1u64;
    for i in 0..config.requests {
        // Built before its time, so building is not counted in its latency.
        let request = source.next_request();
        let at = start + Duration::from_secs_f64(i as f64 / config.rate);
        tokio::time::sleep_until(at).await;
        let second = (at - start).as_secs() as usize;
        if in_flight.load(Ordering::Relaxed) >= config.max_in_flight {
            let mut r = recorder.lock().expect("not poisoned");
            r.summary.not_sent += 1;
            *r.second(second)
                .second
                .errors
                .entry("not sent (in-flight cap)".into())
                .or_default() += 1;
            continue;
        }
        body_bytes += request.body.len() as u64;
        {
            let mut r = recorder.lock().expect("not poisoned");
            r.summary.sent += 1;
            let lag = at.elapsed().as_micros() as u64;
            r.lag.saturating_record(lag.max(1));
            r.second(second).second.sent += 1;
        }
        in_flight.fetch_add(1, Ordering::Relaxed);
        let (kind, answers, pending) = (request.kind, recorder.clone(), in_flight.clone());
        senders.submit(Job {
            signature: request.signature,
            body: request.body,
            done: Box::new(move |reply| {
                record(&answers, kind, start, at, reply);
                pending.fetch_sub(1, Ordering::Relaxed);
            }),
        });
        if !quiet && (at - start).as_secs() >= progress_at {
            progress_at += 5;
            let r = recorder.lock().expect("not poisoned");
            eprintln!(
                "  {:>3} s: sent {}, answered {}, 2xx {}, in flight {}",
                (at - start).as_secs(),
                r.summary.sent,
                r.summary.answered,
                r.summary.ok_2xx,
                in_flight.load(Ordering::Relaxed)
            );
        }
    }
    while in_flight.load(Ordering::Relaxed) > 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let peak_connections = senders.peak_connections();
    drop(senders);

    let mut r = Arc::try_unwrap(recorder)
        .map_err(|_| anyhow::anyhow!("requests still recording"))?
        .into_inner()
        .expect("not poisoned");
    let end = r.last_answer.unwrap_or_else(Instant::now).max(start);
    let mut summary = std::mem::take(&mut r.summary);
    summary.peak_connections = peak_connections;
    summary.elapsed_s = (end - start)
        .as_secs_f64()
        .max(config.duration_secs().min(1e9));
    summary.accepted_per_s = summary.ok_2xx as f64 / summary.elapsed_s.max(1e-9);
    summary.body_bytes_mean = body_bytes as f64 / summary.sent.max(1) as f64;
    summary.latency = Percentiles::of(&r.all);
    summary.latency_2xx = Percentiles::of(&r.ok);
    summary.send_lag = Percentiles::of(&r.lag);
    summary.timeline = r
        .seconds
        .into_iter()
        .map(|s| {
            let mut second = s.second;
            if !s.hist.is_empty() {
                second.p50_ms = s.hist.value_at_quantile(0.5) as f64 / 1000.0;
                second.p99_ms = s.hist.value_at_quantile(0.99) as f64 / 1000.0;
                second.max_ms = s.hist.max() as f64 / 1000.0;
            }
            second
        })
        .collect();
    Ok(summary)
}

/// The address and `Host` of a base URL such as `http://127.0.0.1:8080` (plain HTTP only).
async fn resolve(url: &str) -> anyhow::Result<(std::net::SocketAddr, String)> {
    let rest = url
        .strip_prefix("http://")
        .context("the generator speaks plain HTTP: the URL must start with http://")?;
    let authority = rest.split('/').next().unwrap_or(rest);
    let with_port = if authority
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        authority.to_owned()
    } else {
        format!("{authority}:80")
    };
    let addr = tokio::net::lookup_host(&with_port)
        .await?
        .next()
        .with_context(|| format!("{authority} resolves to no address"))?;
    Ok((addr, authority.to_owned()))
}

/// Counts one reply in the summary and its second.
fn record(recorder: &Mutex<Recorder>, kind: Kind, start: Instant, at: Instant, reply: Reply) {
    let outcome = match reply {
        Reply::Answer { status, body } => Outcome::Answer {
            status,
            code: answer_code(&body),
        },
        Reply::Transport(e) => Outcome::Transport(e),
    };
    let done = Instant::now();
    let latency = (done - at).as_micros() as u64;
    let mut guard = recorder.lock().expect("not poisoned");
    let r = &mut *guard;
    let sent_second = (at - start).as_secs() as usize;
    match outcome {
        Outcome::Transport(error) => {
            *r.summary.transport_errors.entry(error.clone()).or_default() += 1;
            *r.second(sent_second)
                .second
                .errors
                .entry(error)
                .or_default() += 1;
        }
        Outcome::Answer { status, code } => {
            r.summary.answered += 1;
            r.last_answer = Some(done);
            r.all.saturating_record(latency.max(1));
            r.second(sent_second).hist.saturating_record(latency.max(1));
            let code = code.unwrap_or_default();
            let success = (200..300).contains(&status);
            let expected = match kind {
                Kind::Fresh | Kind::Duplicate => success,
                Kind::BadSignature => status == 401,
            };
            if expected && success {
                r.summary.ok_2xx += 1;
                r.ok.saturating_record(latency.max(1));
                if code == "duplicate" {
                    r.summary.duplicates += 1;
                } else {
                    r.summary.accepted += 1;
                }
                r.second(sent_second).second.ok += 1;
                let answered_second = (done.max(start) - start).as_secs() as usize;
                r.second(answered_second).second.acked += 1;
            } else if expected {
                r.summary.rejected_as_expected += 1;
            } else if status == 503 && code == "overloaded" {
                r.summary.shed += 1;
                r.second(sent_second).second.shed += 1;
            } else {
                let key = if success {
                    format!("{status} {code} to a bad signature")
                } else {
                    format!("{status} {code}").trim_end().to_owned()
                };
                *r.summary.errors_by_status.entry(key.clone()).or_default() += 1;
                *r.second(sent_second).second.errors.entry(key).or_default() += 1;
            }
        }
    }
}

/// `status` of a 2xx answer (`accepted`, `duplicate`) or `error` of an error answer.
fn answer_code(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Answer {
        status: Option<String>,
        error: Option<String>,
    }
    let answer: Answer = serde_json::from_slice(body).ok()?;
    answer.error.or(answer.status)
}
