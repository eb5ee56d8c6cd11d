//! Test-only adapter for the host's sandbox limits and verification invariants. `prepare`
//! misbehaves as the request's `x-misbehave` header says. Never deploy it; `cargo xtask
//! adapters` puts it under `dist/testing/`.
//!
//! Limits: `spin` (loops forever), `hog` (allocates without bound), `trap` (panics),
//! `recurse` (recurses without bound), `bloat` (a 1 MiB result), `bloat100` (tries to return
//! 100 MiB), `sleep` (sleeps 30 s in a WASI call), `parts` (2,000,000 `raw-body` parts),
//! `rehash` (1,000 `raw-body` parts: small to lift, a lot to hash), `spin-on-large` (as `ok`
//! below 64 KiB of body, loops forever from there: work that grows with the request),
//! `candidates` (every comma-separated hex in `x-sig` a candidate, none bounded, as a careless
//! adapter passes a header through).
//!
//! Verification: the candidate signature is the hex in `x-sig`, the signed timestamp the
//! decimal in `x-ts`. `ok` signs `<ts>.<body>` as every real adapter should; `literal-only`
//! signs `<ts>.wharf` and not the body; `ts-unsigned` signs `wharf.<body>` and reports the
//! timestamp without signing it; `echo` rejects with the body as its detail; `leak` with the
//! query, `x-sig` as a list of byte values and `x-token` glued to `Bearer.`.
//!
//! WIT 0.2 contract: `items` signs the body as one slice (a batch item's form) with the MAC in
//! `x-sig`, and `parse` names that check only when `x-signed-by` is present; `undeclared`
//! names an algorithm `describe` does not declare (Ed25519); `token-message` is a token check
//! that signs a message; `url` signs the endpoint URL then the body (needs a `public_url`);
//! `get-events` answers a GET with an event instead of a handshake; `ack` answers a handshake
//! whose body is the HMAC-SHA256 hex of `x-challenge` under the verifying secret (answered only
//! when the challenge is in the signed body); `ack-echo` (GET) echoes `x-challenge` as is.
//!
//! Second round (each verified before the host tightened its rules): `ts-longer-run` signs
//! `<ts>7.<body>`, so the reported timestamp's digits sit inside a longer number;
//! `empty-slice` is an item check of `<ts>.wharf` in short literals and an empty body slice;
//! `long-separator` is an item check of `<ts>.` and 400 bytes of `x` in 8-byte literals, then
//! the body's first byte; `span-beyond` is two item checks, the body before and from `x-mid`
//! (MACs in `x-sig` and `x-sig2`), whose first event spans the whole body. Item modes' events
//! name their checks. An adapter's tolerance is read once, at `describe`, so no mode can
//! declare one: the host's bound on it is a unit test.
//!
//! Signing oracles (each answered before the host ruled on handshake MACs): `oracle-query`
//! signs `<ts>.<body>` and answers a handshake whose body is the HMAC-SHA256 hex of the raw
//! query string, bytes the adapter chose; `oracle-item` is an item check of the body's slice
//! `x-span` (`start-end`, the signed timestamp's digits) and answers the same. Either handed
//! out the MAC of any `<ts>.<forged body>`, which then verified in mode `ok`.
//!
//! `parse` returns one event whose id is `x-event-id` (default `evt_misbehave`); with
//! `x-count-calls` present, followed by `-calls-<n>`, where n counts the export calls this
//! instance has served (its own `prepare` and `parse` make 2 when each request has an instance
//! of its own).

use wharf_adapter_sdk::*;

use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

struct TestMisbehave;
export!(TestMisbehave);

/// Export calls served by this instance: state that would leak if an instance were reused.
static CALLS: AtomicU32 = AtomicU32::new(0);

/// Burns CPU forever; `black_box` keeps the optimiser from proving the loop useless.
fn spin() -> ! {
    let mut n = 0u64;
    loop {
        n = core::hint::black_box(n.wrapping_add(1));
    }
}

/// Keeps 1 MiB blocks alive and writes to every page until allocation fails (a trap).
fn hog() -> ! {
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    loop {
        let mut block = vec![0u8; 1 << 20];
        for page in block.chunks_mut(4096) {
            page[0] = 1;
        }
        hoard.push(core::hint::black_box(block));
    }
}

/// Recurses until the guest's stack overflows (a trap).
fn recurse(depth: u64) -> u64 {
    // An exit the optimiser cannot see through, so the recursion stays real.
    if core::hint::black_box(depth) == u64::MAX {
        return 0;
    }
    let frame = core::hint::black_box([depth; 16]);
    recurse(depth + 1).wrapping_add(frame[3])
}

/// One check over `message`, with the candidate from `x-sig` and the timestamp from `x-ts`.
fn signed(req: &Request, message: Vec<Part>) -> Prepared {
    let signature = req
        .header("x-sig")
        .and_then(|v| hex_decode(&v))
        .unwrap_or_else(|| vec![0; 32]);
    hmac_sha256(message, vec![signature]).timestamped(timestamp(req))
}

fn timestamp(req: &Request) -> i64 {
    req.header("x-ts")
        .and_then(|v| parse_unix_timestamp(&v))
        .unwrap_or(0)
}

/// `bytes` as literals of at most 8 bytes each (each one a "separator" by itself).
fn short_literals(bytes: &[u8]) -> Vec<Part> {
    bytes.chunks(8).map(|c| Part::Literal(c.to_vec())).collect()
}

/// Where `span-beyond` splits the body (`x-mid`, within the body).
fn mid(req: &Request) -> usize {
    let len = req.body_len() as usize;
    req.header("x-mid")
        .and_then(|v| std::str::from_utf8(&v).ok()?.parse().ok())
        .map_or(len / 2, |m: usize| m.min(len))
}

/// The body slice `x-span` names (`start-end`), or the whole body.
fn x_span(req: &Request) -> Span {
    let len = req.body_len() as usize;
    let parsed = req.header("x-span").and_then(|v| {
        let (a, b) = std::str::from_utf8(&v).ok()?.split_once('-')?;
        Some((a.parse().ok()?, b.parse().ok()?))
    });
    let (start, end) = parsed.unwrap_or((0, len));
    span(start, end)
}

impl Adapter for TestMisbehave {
    fn describe() -> Description {
        Description::new(Algorithm::HmacSha256)
            .also(Algorithm::Token)
            .tolerance(300, 300)
            .serves_get()
    }

    fn prepare(req: &Request) -> Result<Prepared, Rejection> {
        CALLS.fetch_add(1, Relaxed);
        let ts = timestamp(req).to_string().into_bytes();
        let mode = req.header("x-misbehave").unwrap_or_default();
        match mode.as_slice() {
            b"spin" => spin(),
            b"hog" => hog(),
            b"trap" => panic!("test-misbehave: deliberate panic"),
            b"recurse" => {
                recurse(0);
                unreachable!()
            }
            b"bloat" => Ok(signed(
                req,
                vec![Part::Literal(vec![b'x'; 1 << 20]), Part::RawBody],
            )),
            // Past the memory cap: the allocation fails inside the guest (a trap) before the
            // host ever sees a result.
            b"bloat100" => Ok(signed(
                req,
                vec![Part::Literal(vec![b'x'; 100 << 20]), Part::RawBody],
            )),
            b"sleep" => {
                std::thread::sleep(std::time::Duration::from_secs(30));
                Ok(signed(req, pieces_then_body(&[&ts], b'.')))
            }
            b"parts" => Ok(signed(req, vec![Part::RawBody; 2_000_000])),
            b"rehash" => Ok(signed(req, vec![Part::RawBody; 1_000])),
            // Work that grows with the request: out of CPU from 64 KiB of body on.
            b"spin-on-large" if req.body_len() >= 64 << 10 => spin(),
            b"spin-on-large" => Ok(signed(req, pieces_then_body(&[&ts], b'.'))),
            b"candidates" => {
                let list = req.header("x-sig").unwrap_or_default();
                let sigs = list.split(|&b| b == b',').filter_map(hex_decode).collect();
                let message = pieces_then_body(&[&ts], b'.');
                Ok(hmac_sha256(message, sigs).timestamped(timestamp(req)))
            }
            b"ok" => Ok(signed(req, pieces_then_body(&[&ts], b'.'))),
            b"literal-only" => Ok(signed(
                req,
                vec![Part::Literal([ts.as_slice(), b".wharf"].concat())],
            )),
            b"ts-unsigned" => Ok(signed(req, pieces_then_body(&[b"wharf"], b'.'))),
            b"echo" => Err(invalid(String::from_utf8_lossy(&req.body()))),
            b"leak" => {
                let sig = req.header("x-sig").unwrap_or_default();
                let token = req.header("x-token").unwrap_or_default();
                Err(invalid(format!(
                    "query {} sig {sig:?} got Bearer.{}",
                    req.query().unwrap_or_default(),
                    String::from_utf8_lossy(&token)
                )))
            }
            b"items" => {
                let len = req.body_len() as usize;
                Ok(signed(req, vec![Part::BodySpan(span(0, len))]))
            }
            b"undeclared" => {
                let mut p = signed(req, pieces_then_body(&[&ts], b'.'));
                p.checks[0].algorithm = Algorithm::Ed25519;
                Ok(p)
            }
            b"token-message" => {
                let mut p = token_check(vec![b"token".to_vec()]).timestamped(timestamp(req));
                p.checks[0].message = vec![Part::RawBody];
                Ok(p)
            }
            b"url" => Ok(signed(
                req,
                vec![
                    Part::Literal([ts.as_slice(), b"."].concat()),
                    Part::Url,
                    Part::RawBody,
                ],
            )),
            b"ts-longer-run" => Ok(signed(
                req,
                pieces_then_body(&[&[ts.as_slice(), b"7"].concat()], b'.'),
            )),
            b"empty-slice" => {
                let mut message = short_literals(&[ts.as_slice(), b".wharf"].concat());
                message.push(Part::BodySpan(span(0, 0)));
                Ok(signed(req, message))
            }
            b"long-separator" => {
                let mut message = short_literals(&[ts.as_slice(), b".", &[b'x'; 400]].concat());
                message.push(Part::BodySpan(span(0, 1)));
                Ok(signed(req, message))
            }
            b"span-beyond" => {
                let (mid, len) = (mid(req), req.body_len() as usize);
                let mut p = signed(req, vec![Part::BodySpan(span(0, mid))]);
                let second = req
                    .header("x-sig2")
                    .and_then(|v| hex_decode(&v))
                    .unwrap_or_else(|| vec![0; 32]);
                p.checks.push(hmac_sha256(
                    vec![Part::BodySpan(span(mid, len))],
                    vec![second],
                ));
                Ok(p)
            }
            b"oracle-item" => Ok(signed(req, vec![Part::BodySpan(x_span(req))])),
            // Also GET modes: with no body, a check over the (empty) body and the timestamp.
            b"get-events" | b"ack" | b"ack-echo" | b"oracle-query" => {
                Ok(signed(req, pieces_then_body(&[&ts], b'.')))
            }
            _ => Err(invalid("set x-misbehave")),
        }
    }

    fn parse(req: &Request) -> Result<Parsed, Rejection> {
        let calls = CALLS.fetch_add(1, Relaxed) + 1;
        let mut event_id = req
            .header("x-event-id")
            .and_then(utf8_nonempty)
            .unwrap_or_else(|| "evt_misbehave".into());
        if req.header("x-count-calls").is_some() {
            event_id = format!("{event_id}-calls-{calls}");
        }
        let mode = req.header("x-misbehave").unwrap_or_default();
        let challenge = || req.header("x-challenge").unwrap_or_default();
        let mac_of = |input: Vec<u8>| {
            let body = vec![
                AnswerPart::Literal(b"mac=".to_vec()),
                AnswerPart::HmacSha256Hex(input),
            ];
            Ok(Handshake::new("text/plain", body).into())
        };
        match mode.as_slice() {
            b"ack" => return mac_of(challenge()),
            b"oracle-query" | b"oracle-item" => {
                return mac_of(req.query().unwrap_or_default().into_bytes());
            }
            b"ack-echo" => {
                let body = vec![AnswerPart::Literal([b"ack=", &challenge()[..]].concat())];
                return Ok(Handshake::new("text/plain", body).into());
            }
            _ => {}
        }
        let len = req.body_len() as usize;
        match mode.as_slice() {
            b"empty-slice" | b"long-separator" => {
                return Ok(event(event_id, "misbehave.test")
                    .signed_by(0)
                    .span(span(0, len))
                    .into());
            }
            b"span-beyond" => {
                let events = vec![
                    event(format!("{event_id}-0"), "misbehave.test")
                        .signed_by(0)
                        .span(span(0, len)),
                    event(format!("{event_id}-1"), "misbehave.test")
                        .signed_by(1)
                        .span(span(mid(req), len)),
                ];
                return Ok(events.into());
            }
            _ => {}
        }
        let mut event = event(event_id, "misbehave.test");
        if mode == b"items" && req.header("x-signed-by").is_some() {
            event = event.signed_by(0).span(span(0, req.body_len() as usize));
        }
        Ok(event.into())
    }
}
