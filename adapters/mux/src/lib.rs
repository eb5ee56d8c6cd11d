//! Mux: `Mux-Signature: t=<unix>,v1=<hex>[,v1=<hex>...]`, the HMAC-SHA256 of `t.body` under
//! the webhook's signing secret used as its UTF-8 text (`raw`). One matching `v1` is enough;
//! `v2` and other keys are ignored, as Mux's SDK does. `t` is signed: 300 s past and future.
//!
//! Events: id `id` (the event's UUID, kept on retries), type `type`, object `object.id` (the
//! asset, live stream, upload... the event is about; `data.id` when absent), created-at
//! `created_at` (RFC 3339). No ordering: Mux documents no order, and its ids are random.

use wharf_adapter_sdk::*;

struct Mux;
export!(Mux);

impl Adapter for Mux {
    fn describe() -> Description {
        Description::new(Algorithm::HmacSha256).tolerance(300, 300)
    }

    fn prepare(req: &Request) -> Result<Prepared, Rejection> {
        let header = signature_header(req, "mux-signature")?;
        let (mut t, mut signatures) = (None, Vec::new());
        for item in split_list(&header, b',') {
            match split_pair(item, b'=') {
                Some((b"t", _)) if t.is_some() => return Err(invalid("repeated t")),
                Some((b"t", value)) => t = Some(value),
                // An entry that is not hex can never match: skipped, as Mux's SDK does.
                Some((b"v1", value)) => signatures.extend(hex_decode(value)),
                _ => {}
            }
        }
        let t = t.or_invalid("missing t")?;
        let unix = parse_unix_timestamp(t).or_invalid("t is not an integer")?;
        if signatures.is_empty() {
            return Err(invalid("no usable v1 signature"));
        }
        Ok(hmac_sha256(pieces_then_body(&[t], b'.'), candidates(signatures)?).timestamped(unix))
    }

    fn parse(req: &Request) -> Result<Parsed, Rejection> {
        let [id, kind, object, data, created] =
            req.json(["id", "type", "object.id", "data.id", "created_at"])?;
        let created = (created.str())
            .map(|t| parse_rfc3339(t).or_malformed("created_at is not RFC 3339"))
            .transpose()?;
        Ok(event(id.required_str()?, kind.required_str()?)
            .object(object.str().or(data.str()))
            .created_at(created)
            .into())
    }
}
