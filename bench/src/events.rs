//! Stripe-style events, signed as Stripe signs them, with a realistic spread of body sizes.
//!
//! Bodies are built and signed on the fly (a minute of pre-built bodies at 3,000/s would be
//! about 2 GB). The filler inside each body is a slice of one random buffer made at start, so
//! a body costs a copy and one HMAC pass; it is incompressible, like the `pgbench` payloads,
//! so neither side gets an unfair ride from Postgres' TOAST compression.

use bytes::Bytes;
use hmac::{Hmac, Mac};

/// The largest body the mix produces: one byte under the default `[server] max_body_bytes`
/// (1 MiB), so the tail is as heavy as the receiver accepts.
pub const MAX_BODY: usize = 1024 * 1024 - 1;

/// Body sizes: weighted uniform ranges, in bytes (inclusive).
#[derive(Debug, Clone)]
pub enum BodySizes {
    /// Every body this size.
    Fixed(usize),
    /// `(share, low, high)`; shares add up to 1.
    Mix(Vec<(f64, usize, usize)>),
}

impl BodySizes {
    /// The default mix, about 10 KiB on average with a tail to 1 MiB: 92.5% between 2 and 12
    /// KiB, 7.3% between 16 and 48 KiB, 0.2% between 256 KiB and 1 MiB. Mean 10.1 KiB.
    pub fn realistic() -> Self {
        BodySizes::Mix(vec![
            (0.925, 2 * 1024, 12 * 1024),
            (0.073, 16 * 1024, 48 * 1024),
            (0.002, 256 * 1024, MAX_BODY),
        ])
    }

    pub fn mean(&self) -> f64 {
        match self {
            BodySizes::Fixed(n) => *n as f64,
            BodySizes::Mix(parts) => parts
                .iter()
                .map(|(share, lo, hi)| share * (*lo + *hi) as f64 / 2.0)
                .sum(),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            BodySizes::Fixed(n) => format!("every body {n} bytes"),
            BodySizes::Mix(parts) => {
                let kib = |n: usize| {
                    if n >= MAX_BODY {
                        "1 MiB".to_owned()
                    } else {
                        format!("{} KiB", n / 1024)
                    }
                };
                let parts: Vec<String> = parts
                    .iter()
                    .map(|(share, lo, hi)| {
                        format!("{:.1}% {}–{}", share * 100.0, kib(*lo), kib(*hi))
                    })
                    .collect();
                format!(
                    "{} (uniform within each range; mean {:.1} KiB)",
                    parts.join(", "),
                    self.mean() / 1024.0
                )
            }
        }
    }

    pub fn sample(&self, rng: &mut fastrand::Rng) -> usize {
        match self {
            BodySizes::Fixed(n) => *n,
            BodySizes::Mix(parts) => {
                let mut x = rng.f64();
                for (share, lo, hi) in parts {
                    if x < *share {
                        return rng.usize(*lo..=*hi);
                    }
                    x -= share;
                }
                let (_, lo, hi) = parts.last().expect("a mix has parts");
                rng.usize(*lo..=*hi)
            }
        }
    }
}

/// Why a request was sent, and so which answer is right.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A new event: 2xx `accepted`.
    Fresh,
    /// An earlier request again, byte for byte: 2xx (`duplicate`, or `accepted` when the
    /// original had not been committed).
    Duplicate,
    /// Signed with the wrong secret: 401.
    BadSignature,
}

#[derive(Debug, Clone)]
pub struct SignedRequest {
    pub kind: Kind,
    pub signature: String,
    pub body: Bytes,
}

pub struct EventSource {
    rng: fastrand::Rng,
    run: String,
    secret: Vec<u8>,
    sizes: BodySizes,
    objects: u32,
    duplicate_share: f64,
    bad_signature_share: f64,
    filler: Vec<u8>,
    /// Recent fresh requests, resent as duplicates.
    recent: Vec<SignedRequest>,
    next_recent: usize,
    counter: u64,
}

const RECENT: usize = 4096;
const TYPES: [(&str, &str); 5] = [
    ("payment_intent.succeeded", "pi"),
    ("payment_intent.created", "pi"),
    ("charge.succeeded", "ch"),
    ("customer.updated", "cus"),
    ("invoice.paid", "in"),
];

impl EventSource {
    pub fn new(
        secret: &str,
        sizes: BodySizes,
        objects: u32,
        duplicate_share: f64,
        bad_signature_share: f64,
        seed: u64,
    ) -> Self {
        let mut rng = fastrand::Rng::with_seed(seed);
        let filler = (0..MAX_BODY).map(|_| rng.alphanumeric() as u8).collect();
        // Unique per run so a second run against the same database sends new events.
        let run = format!("{:x}{:04x}", unix_now(), rng.u16(..));
        Self {
            rng,
            run,
            secret: secret.as_bytes().to_vec(),
            sizes,
            objects: objects.max(1),
            duplicate_share,
            bad_signature_share,
            filler,
            recent: Vec::with_capacity(RECENT),
            next_recent: 0,
            counter: 0,
        }
    }

    pub fn next_request(&mut self) -> SignedRequest {
        let roll = self.rng.f64();
        if roll < self.duplicate_share && !self.recent.is_empty() {
            let mut again = self.recent[self.rng.usize(..self.recent.len())].clone();
            again.kind = Kind::Duplicate;
            return again;
        }
        let bad =
            roll >= self.duplicate_share && roll < self.duplicate_share + self.bad_signature_share;
        let now = unix_now();
        let body = self.body(now);
        let signature = if bad {
            sign(b"whsec_not_the_endpoint_secret", now, &body)
        } else {
            sign(&self.secret, now, &body)
        };
        let request = SignedRequest {
            kind: if bad { Kind::BadSignature } else { Kind::Fresh },
            signature,
            body,
        };
        if !bad {
            if self.recent.len() < RECENT {
                self.recent.push(request.clone());
            } else {
                self.recent[self.next_recent] = request.clone();
                self.next_recent = (self.next_recent + 1) % RECENT;
            }
        }
        request
    }

    fn body(&mut self, now: i64) -> Bytes {
        self.counter += 1;
        let (event_type, prefix) = TYPES[self.rng.usize(..TYPES.len())];
        let object = self.rng.u32(..self.objects);
        let amount = self.rng.u32(100..100_000);
        let head = format!(
            r#"{{"id":"evt_{run}_{n}","object":"event","api_version":"2024-06-20","type":"{event_type}","created":{now},"livemode":false,"pending_webhooks":1,"data":{{"object":{{"id":"{prefix}_{object}","object":"{kind}","amount":{amount},"currency":"usd","status":"succeeded","description":""#,
            run = self.run,
            n = self.counter,
            kind = event_type.split('.').next().unwrap_or("object"),
        );
        let tail = r#""}}}"#;
        let want = self.sizes.sample(&mut self.rng).min(MAX_BODY);
        let fill = want.saturating_sub(head.len() + tail.len());
        let start = self.rng.usize(..=self.filler.len() - fill);
        let mut body = Vec::with_capacity(head.len() + fill + tail.len());
        body.extend_from_slice(head.as_bytes());
        body.extend_from_slice(&self.filler[start..start + fill]);
        body.extend_from_slice(tail.as_bytes());
        Bytes::from(body)
    }
}

/// `Stripe-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "t.body">`.
pub fn sign(secret: &[u8], t: i64, body: &[u8]) -> String {
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret).expect("any key length");
    mac.update(t.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("t={t},v1={}", hex::encode(mac.finalize().into_bytes()))
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_realistic_mix_averages_about_ten_kib_with_a_tail_to_one_mib() {
        let sizes = BodySizes::realistic();
        let mut rng = fastrand::Rng::with_seed(7);
        let n = 400_000;
        let samples: Vec<usize> = (0..n).map(|_| sizes.sample(&mut rng)).collect();
        let mean = samples.iter().sum::<usize>() as f64 / n as f64;
        assert!(
            (sizes.mean() / 1024.0 - 10.1).abs() < 0.1,
            "{}",
            sizes.mean()
        );
        assert!(
            (mean / sizes.mean() - 1.0).abs() < 0.03,
            "sample mean {mean}"
        );
        assert!(samples.iter().all(|&s| (2048..=MAX_BODY).contains(&s)));
        assert!(samples.iter().any(|&s| s > 900 * 1024));
    }

    #[test]
    fn bodies_are_json_of_the_sampled_size_and_signatures_verify() {
        let mut source = EventSource::new("whsec_x", BodySizes::realistic(), 10, 0.0, 0.0, 1);
        for _ in 0..200 {
            let r = source.next_request();
            let v: serde_json::Value = serde_json::from_slice(&r.body).expect("JSON");
            assert!(v["id"].as_str().unwrap().starts_with("evt_"));
            assert!(r.body.len() >= 2048 && r.body.len() <= MAX_BODY);
            let t: i64 = r.signature[2..r.signature.find(',').unwrap()]
                .parse()
                .unwrap();
            assert_eq!(r.signature, sign(b"whsec_x", t, &r.body));
        }
    }

    #[test]
    fn duplicates_repeat_earlier_requests_byte_for_byte_and_bad_ones_do_not_verify() {
        let mut source = EventSource::new("whsec_x", BodySizes::Fixed(4096), 10, 0.3, 0.2, 2);
        let mut seen = std::collections::HashSet::new();
        let (mut dups, mut bad) = (0, 0);
        for _ in 0..2000 {
            let r = source.next_request();
            let t: i64 = r.signature[2..r.signature.find(',').unwrap()]
                .parse()
                .unwrap();
            match r.kind {
                Kind::Fresh => assert!(seen.insert(r.body.clone())),
                Kind::Duplicate => {
                    dups += 1;
                    assert!(seen.contains(&r.body));
                    assert_eq!(r.signature, sign(b"whsec_x", t, &r.body));
                }
                Kind::BadSignature => {
                    bad += 1;
                    assert_ne!(r.signature, sign(b"whsec_x", t, &r.body));
                }
            }
        }
        assert!((450..750).contains(&dups), "{dups}");
        assert!((300..500).contains(&bad), "{bad}");
    }
}
