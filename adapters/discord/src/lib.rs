//! Discord: HTTP interactions and Webhook Events, one scheme for both.
//!
//! Signed message: the `X-Signature-Timestamp` value as sent (Unix seconds) immediately
//! followed by the raw body, no separator. `X-Signature-Ed25519` is the hex of the 64-byte
//! Ed25519 signature; the key is the application's Public Key from the developer portal,
//! configured as `public_key = "<64 hex chars>"`. One key per application signs both kinds.
//!
//! Discord documents no freshness window and its libraries check none; Wharf takes 900 s in
//! the past (Webhook Events are retried for up to 10 minutes and it is not documented whether
//! a retry is signed anew) and 300 s in the future (clock skew). Dedup covers replays inside it.
//!
//! After verification the body decides (interactions always carry `id` and `token`; Webhook
//! Events carry `event` and no id):
//! - an interaction PING (`"type":1`, no `event`) is answered 200 `{"type":1}`;
//! - a Webhook Events PING (`"type":0`) is answered 204 with an empty body;
//! - another interaction is the event `interaction.<name>` (`application_command`,
//!   `message_component`, `application_command_autocomplete`, `modal_submit`, else the type
//!   number), id the interaction `id` (a snowflake, whose time is its `created-at`);
//! - a Webhook Event is the event `event.type` (`ENTITLEMENT_CREATE`...). Its envelope has no id,
//!   so the id is `event.type:event.timestamp:<object>`, the object being `event.data.id` or
//!   else `event.data.user.id` (APPLICATION_AUTHORIZED): a retry of the same event has the same.
//!
//! Accepted requests are answered 202 with no body. That is what Discord expects of an
//! interaction answered later through its callback endpoint (within 3 s, by whoever consumes the
//! event); Webhook Events are documented with 204, and 202 is another 2xx.

use wharf_adapter_sdk::*;

struct Discord;
export!(Discord);

const SIGNATURE: &str = "x-signature-ed25519";
const TIMESTAMP: &str = "x-signature-timestamp";
const ED25519_SIGNATURE_BYTES: usize = 64;
/// Discord's epoch (2015-01-01T00:00:00Z) in Unix milliseconds: snowflakes count from it.
const DISCORD_EPOCH_MS: u64 = 1_420_070_400_000;

/// The Unix second a snowflake was made in (its top 42 bits are milliseconds since the epoch).
fn snowflake_unix(id: &str) -> Option<i64> {
    let id: u64 = id.parse().ok()?;
    i64::try_from(((id >> 22) + DISCORD_EPOCH_MS) / 1000).ok()
}

fn interaction_type(n: i64) -> String {
    let name = match n {
        2 => "application_command",
        3 => "message_component",
        4 => "application_command_autocomplete",
        5 => "modal_submit",
        n => return format!("interaction.{n}"),
    };
    format!("interaction.{name}")
}

impl Adapter for Discord {
    fn describe() -> Description {
        Description::new(Algorithm::Ed25519)
            .public_key_encoding(PublicKeyEncoding::Hex)
            .tolerance(900, 300)
            .acknowledgement(Answer::new("text/plain", Vec::new()).status(202))
    }

    fn prepare(req: &Request) -> Result<Prepared, Rejection> {
        let signature = signature_header(req, SIGNATURE)?;
        let timestamp = signature_header(req, TIMESTAMP)?;
        let unix = parse_unix_timestamp(&timestamp).or_invalid("timestamp is not an integer")?;
        let signature = hex_decode(&signature)
            .filter(|s| s.len() == ED25519_SIGNATURE_BYTES)
            .or_invalid("signature is not 64 bytes of hex")?;
        let message = vec![Part::Literal(timestamp), Part::RawBody];
        Ok(ed25519(message, vec![signature]).timestamped(unix))
    }

    fn parse(req: &Request) -> Result<Parsed, Rejection> {
        let [
            kind,
            interaction_id,
            event_type,
            timestamp,
            data_id,
            user_id,
        ] = req.json([
            "type",
            "id",
            "event.type",
            "event.timestamp",
            "event.data.id",
            "event.data.user.id",
        ])?;
        let kind = kind.i64().or_malformed("missing type")?;
        // Only a Webhook Event has `event`; its PING (type 0) has none.
        if event_type.value().is_some() || timestamp.value().is_some() {
            let event_type = event_type.required_str()?;
            let timestamp = timestamp.required_str()?;
            let object = data_id.str().or_else(|| user_id.str());
            let id = format!("{event_type}:{timestamp}:{}", object.unwrap_or(""));
            return Ok(event(id, event_type).object(object).into());
        }
        match kind {
            0 => Ok(Handshake::new("text/plain", Vec::new()).status(204).into()),
            1 => Ok(Handshake::literal("application/json", &b"{\"type\":1}"[..]).into()),
            n => {
                let id = interaction_id.required_str()?;
                Ok(event(id, interaction_type(n))
                    .created_at(snowflake_unix(id))
                    .into())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snowflakes_carry_their_time() {
        // The docs' example interaction id 786008729715212338 was made on 2020-12-08.
        assert_eq!(snowflake_unix("786008729715212338"), Some(1_607_469_484));
        assert_eq!(snowflake_unix("x"), None);
        assert_eq!(interaction_type(2), "interaction.application_command");
        assert_eq!(interaction_type(9), "interaction.9");
    }
}
