//! Stripe-style events, signed as Stripe signs them, with a realistic spread of body sizes.
//!
//! Bodies are built and signed on the fly (a minute of pre-built bodies at 3,000/s would be
//! about 2 GB). What fills a body past its envelope is a choice ([`BodyContent`]): invoice line
//! items as Stripe sends them, which compress about as well as Stripe's own published
//! examples, or one random string that does not compress at all, the worst case for the
//! bytes Postgres writes. `pgbench`'s payloads are sized to what Wharf stores for the same
//! content ([`BodyContent::stored_bytes`]), so neither side gets an unfair ride from
//! compression.

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

/// What fills a body past its envelope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BodyContent {
    /// Invoice line items, pretty-printed as Stripe sends events: random ids, amounts,
    /// timestamps and words in Stripe's field layout. lz4 compresses them 1.7 times at 2 KiB,
    /// 2.8 at 10 KiB and 4 at 500 KB; Stripe's published example objects
    /// (`openapi/fixtures3.json` of stripe/openapi, those over 2.5 KB wrapped in an event)
    /// compress 2.1 times compact and 2.7 pretty-printed.
    Json,
    /// One random alphanumeric string: no repeats for lz4 or TOAST to find; only zstd's entropy
    /// coding saves anything (it stores about 72%, 6 bits of every 8).
    Incompressible,
}

impl BodyContent {
    pub fn describe(self) -> &'static str {
        match self {
            BodyContent::Json => {
                "Stripe-style JSON (invoice line items, pretty-printed; lz4 ratio 1.7 at 2 KiB, 2.8 at 10 KiB)"
            }
            BodyContent::Incompressible => {
                "one random alphanumeric string (no repeats; zstd stores about 72% of it)"
            }
        }
    }

    /// What Wharf stores for a body of this content, on average over `sizes`: its zstd frame
    /// (level 1) when that is smaller, sealed (host/src/support/sealing.rs), for sizing
    /// `pgbench`'s payloads.
    pub fn stored_bytes(self, sizes: &BodySizes) -> usize {
        let mut source = EventSource::new("whsec_sizing", sizes.clone(), self, 100, 0.0, 0.0, 11);
        let n = 2_000;
        let total: usize = (0..n)
            .map(|_| {
                let body = source.next_request().body;
                zstd::bulk::compress(&body, 1)
                    .map_or(body.len(), |frame| frame.len())
                    .min(body.len())
            })
            .sum();
        total / n + SEAL_BYTES
    }
}

/// What sealing adds to a body: a format byte, the 24-byte nonce, a compression marker and the
/// 16-byte tag.
const SEAL_BYTES: usize = 1 + 24 + 1 + 16;

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
    content: BodyContent,
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
        content: BodyContent,
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
            content,
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
        let want = self.sizes.sample(&mut self.rng).min(MAX_BODY);
        Bytes::from(match self.content {
            BodyContent::Json => self.json_body(now, want),
            BodyContent::Incompressible => self.incompressible_body(now, want),
        })
    }

    /// The event's envelope and object, as `(event type, object id prefix, object number,
    /// amount)`.
    fn pick(&mut self) -> (&'static str, &'static str, u32, u32) {
        let (event_type, prefix) = TYPES[self.rng.usize(..TYPES.len())];
        (
            event_type,
            prefix,
            self.rng.u32(..self.objects),
            self.rng.u32(100..100_000),
        )
    }

    fn incompressible_body(&mut self, now: i64, want: usize) -> Vec<u8> {
        let (event_type, prefix, object, amount) = self.pick();
        let head = format!(
            r#"{{"id":"evt_{run}_{n}","object":"event","api_version":"2024-06-20","type":"{event_type}","created":{now},"livemode":false,"pending_webhooks":1,"data":{{"object":{{"id":"{prefix}_{object}","object":"{kind}","amount":{amount},"currency":"usd","status":"succeeded","description":""#,
            run = self.run,
            n = self.counter,
            kind = event_type.split('.').next().unwrap_or("object"),
        );
        let tail = r#""}}}"#;
        let fill = want.saturating_sub(head.len() + tail.len());
        let start = self.rng.usize(..=self.filler.len() - fill);
        let mut body = Vec::with_capacity(head.len() + fill + tail.len());
        body.extend_from_slice(head.as_bytes());
        body.extend_from_slice(&self.filler[start..start + fill]);
        body.extend_from_slice(tail.as_bytes());
        body
    }

    /// An event whose object carries invoice line items until the body is `want` bytes; a
    /// closing `description` of words takes up the last few hundred.
    fn json_body(&mut self, now: i64, want: usize) -> Vec<u8> {
        use std::fmt::Write;
        let (event_type, prefix, object, amount) = self.pick();
        let customer = self.random_id(14);
        let mut body = String::with_capacity(want + 2048);
        let _ = write!(
            body,
            "{{\n  \"id\": \"evt_{run}_{n}\",\n  \"object\": \"event\",\n  \"api_version\": \"2024-06-20\",\n  \"created\": {now},\n  \"data\": {{\n    \"object\": {{\n      \"id\": \"{prefix}_{object}\",\n      \"object\": \"{kind}\",\n      \"amount\": {amount},\n      \"currency\": \"usd\",\n      \"customer\": \"cus_{customer}\",\n      \"status\": \"succeeded\",\n      \"lines\": {{\n        \"object\": \"list\",\n        \"data\": [",
            run = self.run,
            n = self.counter,
            kind = event_type.split('.').next().unwrap_or("object"),
        );
        let tail = format!(
            "\"\n    }}\n  }},\n  \"livemode\": false,\n  \"pending_webhooks\": 1,\n  \"request\": {{\n    \"id\": \"req_{request}\",\n    \"idempotency_key\": \"{key}\"\n  }},\n  \"type\": \"{event_type}\"\n}}\n",
            request = self.random_id(14),
            key = self.random_id(32),
        );
        let close_list =
            "\n        ],\n        \"has_more\": false\n      },\n      \"description\": \"";
        let mut items = 0;
        // A line item is about 1.6 KB; stop while a whole one and the closing still fit.
        while body.len() + ITEM_BYTES_MAX + close_list.len() + tail.len() < want {
            if items > 0 {
                body.push(',');
            }
            self.line_item(&mut body, now);
            items += 1;
        }
        body.push_str(close_list);
        let fill = want.saturating_sub(body.len() + tail.len());
        self.words(&mut body, fill);
        body.push_str(&tail);
        body.into_bytes()
    }

    fn line_item(&mut self, out: &mut String, now: i64) {
        use std::fmt::Write;
        let unit = self.rng.u32(100..50_000);
        let quantity = self.rng.u32(1..20);
        let start = now - i64::from(self.rng.u32(0..2_592_000));
        let _ = write!(
            out,
            "\n          {{\n            \"id\": \"il_{id}\",\n            \"object\": \"line_item\",\n            \"amount\": {amount},\n            \"amount_excluding_tax\": {amount},\n            \"currency\": \"usd\",\n            \"description\": \"{quantity} × ",
            id = self.random_id(24),
            amount = u64::from(unit) * u64::from(quantity),
        );
        let words = self.rng.usize(4..16);
        self.words(out, words);
        let _ = write!(
            out,
            "\",\n            \"discount_amounts\": [],\n            \"discountable\": {discountable},\n            \"discounts\": [],\n            \"invoice\": \"in_{invoice}\",\n            \"invoice_item\": \"ii_{invoice_item}\",\n            \"livemode\": false,\n            \"metadata\": {{\n              \"order_id\": \"{order}\",\n              \"sku\": \"{sku}\",\n              \"external_id\": \"{external}\",\n              \"fulfillment\": \"{fulfillment}\"\n            }},\n            \"period\": {{\n              \"end\": {end},\n              \"start\": {start}\n            }},\n            \"price\": {{\n              \"id\": \"price_{price}\",\n              \"object\": \"price\",\n              \"active\": true,\n              \"billing_scheme\": \"per_unit\",\n              \"created\": {created},\n              \"currency\": \"usd\",\n              \"livemode\": false,\n              \"lookup_key\": \"{lookup}\",\n              \"metadata\": {{}},\n              \"nickname\": null,\n              \"product\": \"prod_{product}\",\n              \"recurring\": {{\n                \"interval\": \"month\",\n                \"interval_count\": 1,\n                \"usage_type\": \"licensed\"\n              }},\n              \"tax_behavior\": \"unspecified\",\n              \"type\": \"recurring\",\n              \"unit_amount\": {unit},\n              \"unit_amount_decimal\": \"{unit}\"\n            }},\n            \"proration\": false,\n            \"quantity\": {quantity},\n            \"subscription\": \"sub_{subscription}\",\n            \"tax_amounts\": [],\n            \"type\": \"subscription\"\n          }}",
            discountable = self.rng.bool(),
            invoice = self.random_id(24),
            invoice_item = self.random_id(24),
            lookup = self.random_id(24),
            order = self.rng.u64(1_000_000_000..10_000_000_000),
            sku = self.random_id(10),
            external = self.random_id(36),
            fulfillment = self.random_id(48),
            end = start + 2_592_000,
            created = start - i64::from(self.rng.u32(0..31_536_000)),
            price = self.random_id(24),
            product = self.random_id(14),
            subscription = self.random_id(24),
        );
    }

    /// Exactly `len` bytes of lower-case words and spaces (nothing JSON would escape).
    fn words(&mut self, out: &mut String, len: usize) {
        let end = out.len() + len;
        while out.len() < end {
            if out.len() + 1 < end && !out.ends_with(' ') && !out.ends_with('"') {
                out.push(' ');
            }
            let word = WORDS[self.rng.usize(..WORDS.len())];
            let room = end - out.len();
            out.push_str(&word[..word.len().min(room)]);
        }
    }

    fn random_id(&mut self, len: usize) -> String {
        (0..len).map(|_| self.rng.alphanumeric()).collect()
    }
}

/// The most one line item takes (its description is at most 16 words of 12 letters).
const ITEM_BYTES_MAX: usize = 1_650 + 16 * 13;

/// Words for descriptions: what invoices say.
const WORDS: [&str; 64] = [
    "annual",
    "monthly",
    "seat",
    "license",
    "premium",
    "standard",
    "basic",
    "enterprise",
    "support",
    "storage",
    "bandwidth",
    "overage",
    "usage",
    "credit",
    "refund",
    "shipping",
    "handling",
    "express",
    "delivery",
    "warehouse",
    "order",
    "subscription",
    "renewal",
    "upgrade",
    "downgrade",
    "proration",
    "discount",
    "coupon",
    "tax",
    "service",
    "consulting",
    "hours",
    "design",
    "review",
    "audit",
    "compliance",
    "training",
    "onboarding",
    "migration",
    "backup",
    "recovery",
    "monitoring",
    "alerting",
    "analytics",
    "reporting",
    "dashboard",
    "integration",
    "connector",
    "gateway",
    "payments",
    "invoice",
    "receipt",
    "account",
    "workspace",
    "project",
    "team",
    "member",
    "guest",
    "api",
    "requests",
    "events",
    "webhooks",
    "region",
    "europe",
];

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
    fn bodies_are_stripe_events_of_the_sampled_size_and_signatures_verify() {
        for content in [BodyContent::Json, BodyContent::Incompressible] {
            let mut source =
                EventSource::new("whsec_x", BodySizes::realistic(), content, 10, 0.0, 0.0, 1);
            for _ in 0..300 {
                let r = source.next_request();
                let v: serde_json::Value = serde_json::from_slice(&r.body).expect("JSON");
                assert!(v["id"].as_str().unwrap().starts_with("evt_"));
                assert_eq!(v["object"], "event");
                let object = v["data"]["object"]["id"].as_str().unwrap();
                assert!(object.split_once('_').is_some(), "{object}");
                assert!(
                    (2048..=MAX_BODY).contains(&r.body.len()),
                    "{content:?}: {}",
                    r.body.len()
                );
                let t: i64 = r.signature[2..r.signature.find(',').unwrap()]
                    .parse()
                    .unwrap();
                assert_eq!(r.signature, sign(b"whsec_x", t, &r.body));
            }
        }
    }

    #[test]
    fn each_body_is_exactly_the_size_asked() {
        for content in [BodyContent::Json, BodyContent::Incompressible] {
            for size in [2048, 4000, 10_240, 33_333, 300_001, MAX_BODY] {
                let mut source =
                    EventSource::new("whsec_x", BodySizes::Fixed(size), content, 10, 0.0, 0.0, 3);
                for _ in 0..5 {
                    let body = source.next_request().body;
                    assert_eq!(body.len(), size, "{content:?}");
                    serde_json::from_slice::<serde_json::Value>(&body).expect("JSON");
                }
            }
        }
    }

    /// The JSON bodies compress like Stripe's published examples where those exist (2.1
    /// compact, 2.7 pretty-printed, for objects of 2.5 to 4.5 KB), more as they grow into lists
    /// of line items, as real lists do: neither a free ride for TOAST nor the worst case.
    #[test]
    fn json_bodies_compress_like_stripes_examples_and_the_filler_does_not() {
        let ratio = |content: BodyContent, size: usize| {
            let mut source =
                EventSource::new("whsec_x", BodySizes::Fixed(size), content, 10, 0.0, 0.0, 5);
            let (mut raw, mut packed) = (0, 0);
            for _ in 0..50 {
                let body = source.next_request().body;
                raw += body.len();
                packed += lz4_flex::block::compress(&body).len();
            }
            raw as f64 / packed as f64
        };
        for (size, low, high) in [
            (2048, 1.5, 2.0),
            (6_000, 1.9, 2.7),
            (10_240, 2.4, 3.1),
            (40_000, 3.0, 4.0),
            (500_000, 3.5, 4.5),
        ] {
            let json = ratio(BodyContent::Json, size);
            assert!(
                (low..=high).contains(&json),
                "{size} bytes: lz4 ratio {json:.2}"
            );
            let filler = ratio(BodyContent::Incompressible, size);
            assert!(filler < 1.05, "{size} bytes: lz4 ratio {filler:.2}");
        }
        let mean = BodySizes::realistic().mean() as usize;
        let stored = BodyContent::Json.stored_bytes(&BodySizes::realistic());
        // zstd keeps about a quarter of these bodies (lz4 about a third).
        assert!(stored > mean / 6 && stored < mean / 3, "{stored} of {mean}");
        // 62 symbols: log2(62) / 8 = 0.74 of the bytes, which zstd's Huffman stage gets close to.
        let stored = BodyContent::Incompressible.stored_bytes(&BodySizes::realistic());
        assert!(
            stored > mean * 65 / 100 && stored < mean * 80 / 100,
            "{stored} of {mean}"
        );
    }

    #[test]
    fn duplicates_repeat_earlier_requests_byte_for_byte_and_bad_ones_do_not_verify() {
        let mut source = EventSource::new(
            "whsec_x",
            BodySizes::Fixed(4096),
            BodyContent::Json,
            10,
            0.3,
            0.2,
            2,
        );
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
