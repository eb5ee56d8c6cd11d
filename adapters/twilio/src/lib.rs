//! Twilio: `X-Twilio-Signature: <base64>`, the HMAC-SHA1 under the account's Auth Token (its
//! UTF-8 text, so `raw`) of the webhook URL followed by the form parameters: every distinct
//! (name, value) percent-decoded, sorted by name then value, each name directly followed by
//! its value (`Part::SortedFormParams`, built by the host). The URL is the endpoint's
//! `public_url` plus the request's own query string, never the Host header (`Part::Url`); the
//! host also tries it with its port removed or the default port added, as Twilio's SDKs do.
//! Node's SDK additionally tries the URL re-serialised by a browser-style parser (`'` becomes
//! `%27`) and a legacy query re-encoding; the host does not, so a URL that differs from the
//! signed one only that way is refused (the fixture `vector-node-quote-reencoded`).
//!
//! JSON bodies (Event Streams, some products): Twilio appends `bodySHA256=<hex SHA-256 of the
//! body>` to the URL and signs the URL alone; the host checks the digest
//! (`body_sha256_param`). A JSON `Content-Type` without that parameter is refused.
//!
//! `X-Twilio-Webhooks-Signature-Settings: key=<id>,algorithm=HMAC_SHA256` (Webhook SharedKey
//! signing, public beta) switches to HMAC-SHA256 over the same bytes; the endpoint's secret
//! is then the SharedKey secret. Either algorithm needs the key, so the unsigned header cannot
//! weaken anything. Nothing time-based is signed: replay protection is dedup alone. An
//! endpoint without `public_url` is refused with 401 and a detail saying so.
//!
//! Events. Twilio sends no event id. Design decision, in this order:
//! - JSON bodies: the CloudEvents `id` (signed, unique per event), type `type`.
//! - `I-Twilio-Idempotency-Token` when present: Twilio keeps it across its own retries of one
//!   request, and it tells apart callbacks the fields below would merge (two `<Gather>`
//!   results of one call in the same status). It is unsigned: a captured request replayed
//!   with a fresh token is accepted again (as GitHub's delivery id).
//! - else the signed fields: `MessageSid:MessageStatus` (or `SmsStatus`), or
//!   `CallSid:CallStatus[:SequenceNumber]`; a redelivery keeps them.
//!
//! The type is `message.<status>` / `call.<status>` (`message` / `call` without a status,
//! `request` for neither), the object the `MessageSid` or `CallSid`.
//!
//! Acknowledgement: an empty TwiML `<Response></Response>` as `text/xml` for every request.
//! Voice and messaging webhooks read the answer as instructions (empty: do nothing more) and
//! log an error for a JSON body; status callbacks and Event Streams ignore it.

use wharf_adapter_sdk::*;

struct Twilio;
export!(Twilio);

const EMPTY_TWIML: &[u8] = b"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Response></Response>";
const BODY_DIGEST: &str = "bodySHA256";

/// Whether Twilio sent the body's digest in the URL: its JSON form.
fn json_form(req: &Request) -> bool {
    query_pairs(req).is_some_and(|pairs| pairs.iter().any(|(n, _)| n == BODY_DIGEST))
}

fn algorithm(req: &Request) -> Result<Algorithm, Rejection> {
    const SETTINGS: &str = "x-twilio-webhooks-signature-settings";
    if req.header_values(SETTINGS).is_empty() {
        return Ok(Algorithm::HmacSha1);
    }
    let settings = req
        .header(SETTINGS)
        .ok_or_else(|| invalid(format!("repeated {SETTINGS}")))?;
    let named = split_list(&settings, b',')
        .filter_map(|item| split_pair(item, b'='))
        .find(|(k, _)| *k == b"algorithm")
        .map(|(_, v)| v);
    match named {
        None | Some(b"HMAC_SHA1") => Ok(Algorithm::HmacSha1),
        Some(b"HMAC_SHA256") => Ok(Algorithm::HmacSha256),
        Some(_) => Err(invalid(format!("unknown algorithm in {SETTINGS}"))),
    }
}

impl Adapter for Twilio {
    fn describe() -> Description {
        Description::new(Algorithm::HmacSha1)
            .also(Algorithm::HmacSha256)
            .acknowledgement(Answer::new("text/xml", EMPTY_TWIML))
    }

    fn prepare(req: &Request) -> Result<Prepared, Rejection> {
        let header = signature_header(req, "x-twilio-signature")?;
        if req.url().is_none() {
            return Err(invalid(
                "endpoint has no public_url: Twilio signs the webhook URL",
            ));
        }
        let signature =
            base64_decode(header.trim_ascii()).or_invalid("x-twilio-signature is not base64")?;
        let algorithm = algorithm(req)?;
        if json_form(req) {
            let check = Check::new(algorithm, vec![Part::Url], vec![signature]);
            return Ok(check.body_sha256_param(BODY_DIGEST).into());
        }
        let content_type = req.header("content-type").unwrap_or_default();
        if content_type
            .to_ascii_lowercase()
            .starts_with(b"application/json")
        {
            return Err(invalid("JSON body without bodySHA256 in the URL"));
        }
        let message = vec![Part::Url, Part::SortedFormParams];
        Ok(Check::new(algorithm, message, vec![signature]).into())
    }

    fn parse(req: &Request) -> Result<Parsed, Rejection> {
        let token = req
            .header("i-twilio-idempotency-token")
            .and_then(utf8_nonempty);
        if json_form(req) {
            let [id, kind, time] = req.json(["id", "type", "time"])?;
            let id = id.str().filter(|id| !id.is_empty());
            let id = id.or(token.as_deref()).or_malformed("missing id")?;
            let time = time.str().and_then(parse_rfc3339);
            return Ok(event(id, kind.required_str()?).created_at(time).into());
        }
        let pairs = form_pairs(&req.body()).or_malformed("body is not a valid form")?;
        let get = |name: &str| form_value(&pairs, name).filter(|v| !v.is_empty());
        let (kind, sid, status, sequence) = if let Some(sid) = get("MessageSid") {
            let status = get("MessageStatus").or(get("SmsStatus"));
            ("message", Some(sid), status, None)
        } else if let Some(sid) = get("CallSid") {
            ("call", Some(sid), get("CallStatus"), get("SequenceNumber"))
        } else {
            ("request", None, None, None)
        };
        let event_type = match status {
            Some(status) => format!("{kind}.{status}"),
            None => kind.to_owned(),
        };
        let signed_id = sid.map(|sid| {
            [Some(sid), status, sequence]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(":")
        });
        let id = (token.or(signed_id))
            .or_malformed("no I-Twilio-Idempotency-Token and no MessageSid or CallSid")?;
        Ok(event(id, event_type).object(sid).into())
    }
}
