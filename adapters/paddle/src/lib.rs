//! Paddle Billing: `Paddle-Signature: ts=<unix>;h1=<hex>[;h1=<hex>...]`, the HMAC-SHA256 of
//! `ts:body` under the notification destination's secret key, the whole `pdl_ntfset_...`
//! string used as its UTF-8 text (`raw`). Several `h1` are sent while a secret is rotated; one
//! matching is enough. Unknown keys (`h2=`) are ignored, as Paddle's Node SDK does; a repeated
//! `ts` is refused. `ts` is signed: 300 s past and future (Paddle's SDKs allow 5 s; an
//! endpoint may narrow it with `tolerance_secs`).
//!
//! Events: id `event_id` (kept on retries and replays), type `event_type`, object `data.id`,
//! created-at and ordering from `occurred_at` (RFC 3339 with microseconds, truncated to the
//! second; ties go by event id, which Paddle writes as a time-ordered ULID).

use wharf_adapter_sdk::*;

struct Paddle;
export!(Paddle);

impl Adapter for Paddle {
    fn describe() -> Description {
        Description::new(Algorithm::HmacSha256)
            .tolerance(300, 300)
            .ordering(Ordering::CreatedAt)
    }

    fn prepare(req: &Request) -> Result<Prepared, Rejection> {
        let header = signature_header(req, "paddle-signature")?;
        let (mut ts, mut signatures) = (None, Vec::new());
        for item in split_list(&header, b';') {
            match split_pair(item, b'=') {
                Some((b"ts", _)) if ts.is_some() => return Err(invalid("repeated ts")),
                Some((b"ts", value)) => ts = Some(value),
                // An entry that is not hex can never match: skipped, as Paddle's SDKs do.
                Some((b"h1", value)) => signatures.extend(hex_decode(value)),
                _ => {}
            }
        }
        let ts = ts.or_invalid("missing ts")?;
        let unix = parse_unix_timestamp(ts).or_invalid("ts is not an integer")?;
        if signatures.is_empty() {
            return Err(invalid("no usable h1 signature"));
        }
        Ok(hmac_sha256(pieces_then_body(&[ts], b':'), candidates(signatures)?).timestamped(unix))
    }

    fn parse(req: &Request) -> Result<Parsed, Rejection> {
        let [id, kind, object, occurred] =
            req.json(["event_id", "event_type", "data.id", "occurred_at"])?;
        let occurred = (occurred.str())
            .map(|t| parse_rfc3339(t).or_malformed("occurred_at is not RFC 3339"))
            .transpose()?;
        Ok(event(id.required_str()?, kind.required_str()?)
            .object(object.str())
            .created(occurred)
            .into())
    }
}
