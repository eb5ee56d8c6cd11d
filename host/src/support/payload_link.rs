//! The link from an inbox row to its stored payload, authenticated. The payload's AEAD binds
//! a body to its own `payload_ref`, but not to the event that names it: without this, anyone
//! who can write the inbox could point an event's `raw_payload_ref` (or its span) at another
//! event's body, and the relay would send that body, signed, under this event's headers.
//!
//! At acceptance each inbox row gets a tag: HMAC-SHA256 over what a reader relies on (inbox
//! id, provider, endpoint, event id and type, payload ref, span, payload hash) under a key
//! derived (HKDF-SHA256) from the payload key that sealed its body, stored with the row with
//! that key's id. Every read of an event's bytes checks it first (`PayloadKeys::check_link`).
//! A subkey, not the payload key itself: one key, one purpose.

use hkdf::Hkdf;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use uuid::Uuid;
use zeroize::Zeroizing;

/// HKDF's `info`: what the derived key is for, and the format's version.
const LINK_INFO: &[u8] = b"wharf payload link v1";

/// What an inbox row says about its event and the payload it reads.
#[derive(Debug, Clone, Copy)]
pub struct Link<'a> {
    pub inbox_id: Uuid,
    pub provider: &'a str,
    pub endpoint_id: &'a str,
    pub event_id: &'a str,
    pub event_type: &'a str,
    pub payload_ref: Uuid,
    /// `payload_start`, `payload_end`; `None`: the whole body.
    pub span: Option<(i64, i64)>,
    /// The SHA-256 of the whole body, as stored in `payload_hash`.
    pub payload_hash: &'a [u8],
}

/// The tag stored with an inbox row: the id of the payload key it was made under, and the MAC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkTag {
    pub key_id: String,
    pub tag: Vec<u8>,
}

/// The subkey that tags links, derived from one payload key; never printed.
pub(super) struct LinkKey(Zeroizing<[u8; 32]>);

impl LinkKey {
    pub(super) fn derive(payload_key: &[u8; 32]) -> Self {
        let mut key = Zeroizing::new([0u8; 32]);
        Hkdf::<Sha256>::new(None, payload_key)
            .expand(LINK_INFO, key.as_mut())
            .expect("32 bytes is a valid HKDF-SHA256 output length");
        Self(key)
    }

    fn mac(&self, link: &Link<'_>) -> Hmac<Sha256> {
        let mut mac =
            <Hmac<Sha256> as Mac>::new_from_slice(self.0.as_ref()).expect("any key length");
        // Each field length-prefixed, so no two links encode alike.
        let mut field = |bytes: &[u8]| {
            mac.update(&(bytes.len() as u64).to_be_bytes());
            mac.update(bytes);
        };
        field(link.inbox_id.as_bytes());
        field(link.provider.as_bytes());
        field(link.endpoint_id.as_bytes());
        field(link.event_id.as_bytes());
        field(link.event_type.as_bytes());
        field(link.payload_ref.as_bytes());
        match link.span {
            None => field(b""),
            Some((start, end)) => {
                let mut span = [0u8; 16];
                span[..8].copy_from_slice(&start.to_be_bytes());
                span[8..].copy_from_slice(&end.to_be_bytes());
                field(&span);
            }
        }
        field(link.payload_hash);
        mac
    }

    pub(super) fn tag(&self, link: &Link<'_>) -> Vec<u8> {
        self.mac(link).finalize().into_bytes().to_vec()
    }

    /// Constant time.
    pub(super) fn verify(&self, link: &Link<'_>, tag: &[u8]) -> bool {
        self.mac(link).verify_slice(tag).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::super::sealing::{OpenError, PayloadKeys};
    use super::*;

    fn link(hash: &[u8]) -> Link<'_> {
        Link {
            inbox_id: Uuid::from_u128(1),
            provider: "stripe",
            endpoint_id: "stripe-live",
            event_id: "evt_1",
            event_type: "invoice.paid",
            payload_ref: Uuid::from_u128(2),
            span: Some((0, 10)),
            payload_hash: hash,
        }
    }

    #[test]
    fn a_link_verifies_only_as_tagged_under_its_own_key() {
        let keys = PayloadKeys::single("k1", [7; 32]);
        let hash = [3u8; 32];
        let tag = keys.link_tag(&link(&hash));
        assert_eq!(tag.key_id, "k1");
        assert_eq!(tag.tag.len(), 32);
        let stored = Some(&tag);
        assert_eq!(keys.check_link(&link(&hash), stored), Ok(()));

        let rejected = Err(OpenError::LinkRejected("k1".into()));
        let other_hash = [4u8; 32];
        let changed: [Link<'_>; 8] = [
            Link {
                inbox_id: Uuid::from_u128(9),
                ..link(&hash)
            },
            Link {
                provider: "github",
                ..link(&hash)
            },
            Link {
                endpoint_id: "stripe-test",
                ..link(&hash)
            },
            Link {
                event_id: "evt_2",
                ..link(&hash)
            },
            Link {
                event_type: "invoice.voided",
                ..link(&hash)
            },
            Link {
                payload_ref: Uuid::from_u128(3),
                ..link(&hash)
            },
            Link {
                span: None,
                ..link(&hash)
            },
            link(&other_hash),
        ];
        for changed in changed {
            assert_eq!(keys.check_link(&changed, stored), rejected, "{changed:?}");
        }
        // Field boundaries count: moving a byte from one field to the next changes the tag.
        let shifted = Link {
            provider: "stripes",
            endpoint_id: "tripe-live",
            ..link(&hash)
        };
        assert_eq!(keys.check_link(&shifted, stored), rejected);
        let with = |key_id: &str, tag: &[u8]| LinkTag {
            key_id: key_id.into(),
            tag: tag.to_vec(),
        };
        let mut flipped = tag.tag.clone();
        flipped[0] ^= 1;
        assert_eq!(
            keys.check_link(&link(&hash), Some(&with("k1", &flipped))),
            rejected
        );
        assert_eq!(
            keys.check_link(&link(&hash), Some(&with("k1", &tag.tag[..16]))),
            rejected
        );
        // Another key's tag, and a key this host lacks.
        let other = PayloadKeys::single("k1", [8; 32]);
        assert_eq!(other.check_link(&link(&hash), stored), rejected);
        assert_eq!(
            keys.check_link(&link(&hash), Some(&with("k9", &tag.tag))),
            Err(OpenError::UnknownKey("k9".into()))
        );
    }

    #[test]
    fn a_row_without_a_link_is_refused_unless_the_upgrade_setting_is_on() {
        let hash = [3u8; 32];
        let keys = PayloadKeys::single("k1", [7; 32]);
        assert_eq!(
            keys.check_link(&link(&hash), None),
            Err(OpenError::Unlinked)
        );
        assert_eq!(
            keys.open(Uuid::from_u128(2), None, b"plain"),
            Err(OpenError::Unsealed)
        );
        let upgrading = PayloadKeys::single("k1", [7; 32]).accepting_legacy_rows(true);
        assert_eq!(upgrading.check_link(&link(&hash), None), Ok(()));
        assert_eq!(
            upgrading.open(Uuid::from_u128(2), None, b"plain").unwrap(),
            b"plain"
        );
    }
}
