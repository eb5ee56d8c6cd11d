//! Adyen standard (payments) notifications: the body is
//! `{"live":..,"notificationItems":[{"NotificationRequestItem":{..}}, ..]}` and every item carries
//! its own signature, `additionalData.hmacSignature`, the standard base64 of the HMAC-SHA256,
//! under the hex key shown in the Customer Area (`hex`), of
//! `pspReference:originalReference:merchantAccountCode:merchantReference:amount.value:amount.currency:eventCode:success`.
//!
//! - Each field is signed as its JSON-decoded value, unescaped (a `:` inside a value is not
//!   escaped: Adyen's design). So that a message splits into fields one way only, a `:` is
//!   refused (401) in every signed field but `merchantReference`, and `amount.value` must be
//!   digits. Strings are `body-json-string` slices; `amount.value`, a JSON
//!   integer, is its text as a `body-span` (a JSON string such as `"0"` is signed decoded, as
//!   Adyen's Java library does); a JSON `true`/`false` is its text. A missing or null field is
//!   empty, except `pspReference` and `success`, which Adyen always sends: an item without
//!   either is refused (401). Nothing else (eventDate, reason, additionalData, `live`) is signed.
//! - One check per item, all must pass: one bad item fails the whole request (401), nothing
//!   stored. Each item is an event whose stored and delivered payload is the item object, id
//!   `pspReference:eventCode:success` (Adyen sends no event id; `success` is added so that an
//!   outcome reported again with the other value is not dropped as a duplicate), type
//!   `eventCode`, object `originalReference` when set (a refund's payment), else `pspReference`.
//!   Retries and Customer Area resends carry the same signed fields, hence the same id.
//! - No timestamp is signed: replay protection is dedup alone.
//! - Endpoint setting `merchant_account`: when set, an item for another `merchantAccountCode`
//!   is refused after verification with 422 (`unsupported_event_type`): it is authentic, just
//!   not meant for this endpoint (a company-level webhook pointed at a merchant-level one);
//!   401 would report a configuration mismatch as forgery.
//! - Acknowledgement: `[accepted]`, as Adyen's classic contract requires.
//! - Objects with repeated keys are refused (401 before verification), so what is signed is
//!   what is read and stored.
//! - Not supported: the `HmacSignature` header of platform/management webhooks (HMAC of the
//!   raw body). Those are other bodies (`type`, `data`) with no event id common to them; they
//!   belong in an adapter of their own.

use wharf_adapter_sdk::*;

struct Adyen;
export!(Adyen);

/// The host verifies at most 64 checks per request; JSON notifications carry one item.
const MAX_ITEMS: usize = 64;

/// The `NotificationRequestItem` objects of the body, each with its fields; `None` past
/// `MAX_ITEMS`, counted before any item is read (60,000 items would spend the CPU deadline).
fn items(body: &[u8]) -> Option<Vec<(Located<'_>, Members<'_>)>> {
    let root = Located::root(body)?.members()?;
    root.get("notificationItems")?
        .elements_at_most(MAX_ITEMS)?
        .into_iter()
        .map(|wrapper| {
            let item = wrapper.members()?.get("NotificationRequestItem")?;
            Some((item, item.members()?))
        })
        .collect()
}

/// How a signed field may be written. Adyen joins the fields with `:` unescaped, so two items
/// whose fields split differently (`a:b` + `c` against `a` + `b:c`) would sign the same
/// message: refusing `:` in every field but `merchantReference`, and anything but digits in
/// `amount.value`, leaves one way to split a message.
#[derive(Clone, Copy, PartialEq)]
enum Field {
    /// `merchantReference`: the merchant's free text, `:` allowed (the only such field).
    FreeText,
    /// Any other string field: no `:`.
    NoColon,
    /// `amount.value`: digits only, as a JSON integer or a JSON string.
    Digits,
}

/// The message part that signs `value` as Adyen does, `None` for an empty field, or `Err` for
/// a value Adyen never sends (an object, an array, a number with a fraction or a sign, a `:`
/// where the split needs none).
fn signed(value: Option<Located<'_>>, field: Field) -> Result<Option<Part>, Rejection> {
    let Some(v) = value.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    if v.is_string() {
        // A string that does not decode (a lone surrogate) goes to the host as it is: the
        // host refuses it as the request's fault (400 `malformed`), not the adapter's.
        let Some(text) = v.as_str() else {
            return Ok(Some(Part::BodyJsonString(v.span())));
        };
        let fits = match field {
            Field::FreeText => true,
            Field::NoColon => !text.contains(':'),
            Field::Digits => digits(&text),
        };
        if !fits {
            return Err(invalid(
                "a signed field could split the message another way",
            ));
        }
        return Ok(Some(Part::BodyJsonString(v.span())));
    }
    let plain = match field {
        Field::Digits => digits(v.text()),
        _ => matches!(v.text(), "true" | "false"),
    };
    if !plain {
        return Err(invalid("a signed field has an unexpected JSON type"));
    }
    Ok(Some(Part::BodySpan(v.span())))
}

fn item_check(fields: &Members<'_>) -> Result<Check, Rejection> {
    let amount = match fields.get("amount") {
        Some(a) if !a.is_null() => Some(a.members().or_invalid("amount")?),
        _ => None,
    };
    let from_amount = |key| amount.as_ref().and_then(|a| a.get(key));
    let values = [
        (fields.get("pspReference"), Field::NoColon),
        (fields.get("originalReference"), Field::NoColon),
        (fields.get("merchantAccountCode"), Field::NoColon),
        (fields.get("merchantReference"), Field::FreeText),
        (from_amount("value"), Field::Digits),
        (from_amount("currency"), Field::NoColon),
        (fields.get("eventCode"), Field::NoColon),
        (fields.get("success"), Field::NoColon),
    ];
    let mut message = Vec::with_capacity(2 * values.len());
    for (n, (value, field)) in values.into_iter().enumerate() {
        if n > 0 {
            message.push(Part::Literal(b":".to_vec()));
        }
        message.extend(signed(value, field)?);
    }
    // The host verifies item messages that start and end with signed body bytes; Adyen always
    // sends both ends, so an item without them is not Adyen's (401, not the adapter's fault).
    let signed_bytes =
        |p: Option<&Part>| matches!(p, Some(Part::BodyJsonString(_) | Part::BodySpan(_)));
    if !signed_bytes(message.first()) || !signed_bytes(message.last()) {
        return Err(invalid("pspReference and success are required"));
    }
    let signature = fields
        .object("additionalData")
        .and_then(|a| a.str("hmacSignature"))
        .and_then(|s| base64_decode(s.as_bytes()))
        .or_invalid("missing or undecodable additionalData.hmacSignature")?;
    Ok(hmac_sha256(message, vec![signature]))
}

impl Adapter for Adyen {
    fn describe() -> Description {
        Description::new(Algorithm::HmacSha256)
            .secret_encoding(SecretEncoding::Hex)
            .acknowledgement(Answer::new("text/plain", "[accepted]"))
    }

    fn prepare(req: &Request) -> Result<Prepared, Rejection> {
        let body = req.body();
        let items = items(&body).or_invalid("not a notification of at most 64 items")?;
        if items.is_empty() {
            return Err(invalid("no items"));
        }
        let mut checks = Vec::with_capacity(items.len());
        for (_, fields) in &items {
            // The id is made of signed fields: without them nothing would identify the event.
            if fields.str("pspReference").is_none_or(|s| s.is_empty())
                || fields.str("eventCode").is_none_or(|s| s.is_empty())
            {
                return Err(invalid("item without pspReference or eventCode"));
            }
            checks.push(item_check(fields)?);
        }
        Ok(Prepared::new(checks))
    }

    fn parse(req: &Request) -> Result<Parsed, Rejection> {
        let body = req.body();
        let items = items(&body).or_malformed("not a notification with items")?;
        let expected = req.setting("merchant_account");
        let mut events = Vec::with_capacity(items.len());
        for (i, (item, fields)) in items.iter().enumerate() {
            let text = |key| fields.str(key).unwrap_or_default();
            let (psp, code, merchant) = (
                text("pspReference"),
                text("eventCode"),
                text("merchantAccountCode"),
            );
            if expected.as_ref().is_some_and(|m| *m != merchant) {
                return Err(unsupported("item for another merchant account"));
            }
            // `success` is signed as its text, string or boolean alike.
            let success = match fields.get("success") {
                Some(s) if s.is_string() => text("success"),
                Some(s) if !s.is_null() => s.text().to_owned(),
                _ => String::new(),
            };
            let original = fields.str("originalReference").filter(|s| !s.is_empty());
            let object = original.as_deref().unwrap_or(&psp);
            events.push(
                event(format!("{psp}:{code}:{success}"), code.as_str())
                    .object(object)
                    .span(item.span())
                    .signed_by(i),
            );
        }
        Ok(events.into())
    }
}
