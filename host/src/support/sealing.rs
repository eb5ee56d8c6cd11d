//! Payload encryption at rest. A raw body is compressed (zstd, when that makes it smaller),
//! then sealed with XChaCha20-Poly1305 under the current payload key. The 192-bit nonce is
//! random for every seal: at 2,000 bodies a second for a century the chance of a repeat stays
//! below 2^-100, so no counter has to survive restarts or be shared between hosts.
//!
//! The associated data binds a ciphertext to its row (`payload_ref`), to the key id stored
//! beside it and to the format: a ciphertext copied into another row, or relabelled with
//! another key id, does not open.
//!
//! Keys come from a key file or the environment, never from the database: `[payloads]
//! key_file` (TOML: `current = "<id>"` and `[keys] "<id>" = "<base64 of 32 bytes>"`) and
//! `WHARF_PAYLOAD_KEY=<id>:<base64>` (added, and made current). Every key listed opens; only
//! the current one seals.
//!
//! Each key also tags the links from inbox rows to payloads (`payload_link`). Rows from before
//! encryption (no key id, plaintext) or before links (no tag) are refused unless the key set
//! accepts legacy rows (`[payloads] upgrade_legacy_rows`, for the upgrade only): anyone who
//! can write the database could write such a row.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use base64::Engine as _;
use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use serde::Deserialize;
use uuid::Uuid;
use zeroize::Zeroizing;

use super::compression::{compress, decompress};
use super::payload_link::{Link, LinkKey, LinkTag};

/// The first byte of every sealed body: how the rest is laid out.
const FORMAT_V1: u8 = 1;
const NONCE_LEN: usize = 24;
/// Key ids go into the database beside each row; keep them short and printable.
const MAX_KEY_ID_BYTES: usize = 64;

/// The environment variable holding one more key, made current: `<id>:<base64 of 32 bytes>`.
pub const KEY_ENV: &str = "WHARF_PAYLOAD_KEY";

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("{0}")]
    Invalid(String),
    #[error("cannot read the payload key file {path}: {cause}")]
    Read { path: String, cause: std::io::Error },
}

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum OpenError {
    /// The key is not configured on this host (a rotation not yet rolled out here).
    #[error("payload key {0:?} is not configured on this host")]
    UnknownKey(String),
    /// Tampered with, corrupted, or moved from another row: never a wrong plaintext.
    #[error("the payload does not open under key {0:?} (corrupted, or not this row's)")]
    Rejected(String),
    /// A body stored before encryption, or written by hand: nothing says it was received.
    #[error(
        "the payload is stored unsealed (no key id): refused unless [payloads] \
         upgrade_legacy_rows is on"
    )]
    Unsealed,
    /// An inbox row without a link tag: from before links, or written by hand.
    #[error(
        "the event has no link tag to its payload: refused unless [payloads] \
         upgrade_legacy_rows is on"
    )]
    Unlinked,
    /// The row's fields, payload reference or span are not what was tagged at acceptance.
    #[error(
        "the event's link to its payload does not verify under key {0:?} (the row was \
         changed, or points at another event's payload)"
    )]
    LinkRejected(String),
}

/// One 256-bit key; its bytes never appear in `Debug` or a log line.
struct Key {
    cipher: XChaCha20Poly1305,
    link: LinkKey,
}

/// The payload keys of this host: which one seals, and every one that opens.
pub struct PayloadKeys {
    current: String,
    keys: BTreeMap<String, Key>,
    /// Rows without a key id or a link tag are read as they are (the upgrade setting).
    legacy_rows: bool,
}

impl fmt::Debug for PayloadKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PayloadKeys")
            .field("current", &self.current)
            .field("ids", &self.keys.keys().collect::<Vec<_>>())
            .field("legacy_rows", &self.legacy_rows)
            .finish()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFile {
    current: String,
    keys: BTreeMap<String, Zeroizing<String>>,
}

/// A sealed body as stored: the key id goes in its own column, the bytes in `body`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    pub key_id: String,
    pub bytes: Vec<u8>,
}

impl PayloadKeys {
    /// The keys from the file (when configured) and the environment value (when set). At
    /// least one key must result; the environment's is current when present.
    pub fn load(file: Option<&Path>, env: Option<&str>) -> Result<Self, KeyError> {
        let mut keys = BTreeMap::new();
        let mut current = None;
        if let Some(path) = file {
            let text =
                Zeroizing::new(
                    std::fs::read_to_string(path).map_err(|cause| KeyError::Read {
                        path: path.display().to_string(),
                        cause,
                    })?,
                );
            let parsed: KeyFile = toml::from_str(&text).map_err(|e| {
                // toml's message may quote the offending line, which may hold a key.
                let line = e.span().map(|s| text[..s.start].lines().count().max(1));
                KeyError::Invalid(format!(
                    "{}: not a payload key file{}",
                    path.display(),
                    line.map(|l| format!(" (line {l})")).unwrap_or_default()
                ))
            })?;
            for (id, value) in &parsed.keys {
                keys.insert(id.clone(), decode(id, value)?);
            }
            if !keys.contains_key(&parsed.current) {
                return Err(KeyError::Invalid(format!(
                    "{}: current = {:?} is not one of its [keys]",
                    path.display(),
                    parsed.current
                )));
            }
            current = Some(parsed.current);
        }
        if let Some(value) = env {
            let (id, key) = value.split_once(':').ok_or_else(|| {
                KeyError::Invalid(format!("{KEY_ENV} must be <id>:<base64 of 32 bytes>"))
            })?;
            keys.insert(id.to_owned(), decode(id, key)?);
            current = Some(id.to_owned());
        }
        let current = current.ok_or_else(|| {
            KeyError::Invalid(format!(
                "no payload key: set [payloads] key_file or {KEY_ENV} (payloads are encrypted \
                 at rest; `wharf payloads new-key` makes one)"
            ))
        })?;
        Ok(Self {
            current,
            keys,
            legacy_rows: false,
        })
    }

    /// One key, current (tests and the dev command).
    pub fn single(id: &str, key: [u8; 32]) -> Self {
        let mut keys = BTreeMap::new();
        keys.insert(id.to_owned(), Key::new(&key));
        Self {
            current: id.to_owned(),
            keys,
            legacy_rows: false,
        }
    }

    /// Whether rows stored before encryption or before links are read as they are (and
    /// sealed and linked by `wharf payloads reencrypt`); off unless the upgrade setting says.
    pub fn accepting_legacy_rows(mut self, on: bool) -> Self {
        self.legacy_rows = on;
        self
    }

    pub fn accepts_legacy_rows(&self) -> bool {
        self.legacy_rows
    }

    /// The tag binding an inbox row to its payload, under the current key.
    pub fn link_tag(&self, link: &Link<'_>) -> LinkTag {
        LinkTag {
            key_id: self.current.clone(),
            tag: self.keys[&self.current].link.tag(link),
        }
    }

    /// Checks an inbox row's link against the tag stored with it; `None` is a row from
    /// before links, accepted only with legacy rows.
    pub fn check_link(&self, link: &Link<'_>, stored: Option<&LinkTag>) -> Result<(), OpenError> {
        let Some(LinkTag { key_id, tag }) = stored else {
            return match self.legacy_rows {
                true => Ok(()),
                false => Err(OpenError::Unlinked),
            };
        };
        let key = self
            .keys
            .get(key_id)
            .ok_or_else(|| OpenError::UnknownKey(key_id.clone()))?;
        match key.link.verify(link, tag) {
            true => Ok(()),
            false => Err(OpenError::LinkRejected(key_id.clone())),
        }
    }

    pub fn current_id(&self) -> &str {
        &self.current
    }

    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.keys.keys().map(String::as_str)
    }

    /// Compresses when that helps, then seals under the current key for row `payload_ref`.
    pub fn seal(&self, payload_ref: Uuid, body: &[u8]) -> Sealed {
        self.seal_plaintext(payload_ref, &compress(body))
    }

    /// Seals a plaintext already laid out (kind byte first).
    fn seal_plaintext(&self, payload_ref: Uuid, plain: &[u8]) -> Sealed {
        let key = &self.keys[&self.current];
        let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
        let aad = associated_data(payload_ref, &self.current);
        let sealed = key
            .cipher
            .encrypt(
                &nonce,
                Payload {
                    msg: plain,
                    aad: &aad,
                },
            )
            .expect("XChaCha20-Poly1305 seals any length a body can have");
        let mut bytes = Vec::with_capacity(1 + NONCE_LEN + sealed.len());
        bytes.push(FORMAT_V1);
        bytes.extend_from_slice(&nonce);
        bytes.extend_from_slice(&sealed);
        Sealed {
            key_id: self.current.clone(),
            bytes,
        }
    }

    /// The body of row `payload_ref`, sealed under `key_id`; `None` as key id is a body stored
    /// before encryption, returned as it is only with legacy rows.
    pub fn open(
        &self,
        payload_ref: Uuid,
        key_id: Option<&str>,
        stored: &[u8],
    ) -> Result<Vec<u8>, OpenError> {
        let Some(key_id) = key_id else {
            return match self.legacy_rows {
                true => Ok(stored.to_vec()),
                false => Err(OpenError::Unsealed),
            };
        };
        let rejected = || OpenError::Rejected(key_id.to_owned());
        let key = self
            .keys
            .get(key_id)
            .ok_or_else(|| OpenError::UnknownKey(key_id.to_owned()))?;
        let (&format, rest) = stored.split_first().ok_or_else(rejected)?;
        if format != FORMAT_V1 || rest.len() < NONCE_LEN {
            return Err(rejected());
        }
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let aad = associated_data(payload_ref, key_id);
        let plain = Zeroizing::new(
            key.cipher
                .decrypt(
                    XNonce::from_slice(nonce),
                    Payload {
                        msg: sealed,
                        aad: &aad,
                    },
                )
                .map_err(|_| rejected())?,
        );
        decompress(&plain).ok_or_else(rejected)
    }
}

/// A new random key as a key file line and as the environment value.
pub fn new_key(id: &str) -> (String, String) {
    let key = XChaCha20Poly1305::generate_key(&mut OsRng);
    let b64 = base64::engine::general_purpose::STANDARD.encode(key);
    (format!("{id:?} = \"{b64}\""), format!("{id}:{b64}"))
}

impl Key {
    fn new(bytes: &[u8; 32]) -> Self {
        Self {
            cipher: XChaCha20Poly1305::new(bytes.into()),
            link: LinkKey::derive(bytes),
        }
    }
}

fn decode(id: &str, value: &str) -> Result<Key, KeyError> {
    if id.is_empty()
        || id.len() > MAX_KEY_ID_BYTES
        || !id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    {
        return Err(KeyError::Invalid(format!(
            "payload key id {id:?}: 1 to {MAX_KEY_ID_BYTES} letters, digits, '-', '_' or '.'"
        )));
    }
    let bytes = Zeroizing::new(
        base64::engine::general_purpose::STANDARD
            .decode(value.trim())
            .map_err(|_| KeyError::Invalid(format!("payload key {id:?} is not base64")))?,
    );
    let bytes: &[u8; 32] = bytes.as_slice().try_into().map_err(|_| {
        KeyError::Invalid(format!(
            "payload key {id:?} must be 32 bytes (base64 of 32 random bytes)"
        ))
    })?;
    Ok(Key::new(bytes))
}

fn associated_data(payload_ref: Uuid, key_id: &str) -> Vec<u8> {
    let mut aad = Vec::with_capacity(32 + key_id.len());
    aad.extend_from_slice(b"wharf-payload\x01");
    aad.extend_from_slice(payload_ref.as_bytes());
    aad.extend_from_slice(key_id.as_bytes());
    aad
}

#[cfg(test)]
mod tests {
    use super::super::compression::{LZ4, MAX_OPENED_BYTES, ZSTD};
    use super::*;

    fn keys() -> PayloadKeys {
        PayloadKeys::single("k1", [7; 32])
    }

    #[test]
    fn round_trips_compressible_and_incompressible_bodies() {
        let k = keys();
        let row = Uuid::now_v7();
        let json = br#"{"id":"evt_1","data":{"object":{"amount":100}}}"#.repeat(50);
        let noise: Vec<u8> = (0..4096u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for body in [&json[..], &noise[..], b""] {
            let sealed = k.seal(row, body);
            assert_eq!(sealed.key_id, "k1");
            assert_eq!(k.open(row, Some("k1"), &sealed.bytes).unwrap(), body);
        }
        assert!(
            k.seal(row, &json).bytes.len() < json.len() / 4,
            "compressed"
        );
    }

    #[test]
    fn bodies_sealed_with_lz4_before_zstd_still_open() {
        let k = keys();
        let row = Uuid::now_v7();
        let body = br#"{"id":"evt_1","type":"invoice.paid"}"#.repeat(40);
        let mut plain = vec![LZ4];
        plain.extend_from_slice(&lz4_flex::block::compress_prepend_size(&body));
        let sealed = k.seal_plaintext(row, &plain);
        assert_eq!(k.open(row, Some("k1"), &sealed.bytes).unwrap(), body);
        // And new seals are zstd, smaller than lz4 on JSON.
        let zstd = k.seal(row, &body);
        assert_eq!(compress(&body)[0], ZSTD);
        assert!(
            zstd.bytes.len() < sealed.bytes.len(),
            "{} against {}",
            zstd.bytes.len(),
            sealed.bytes.len()
        );
    }

    #[test]
    fn a_zstd_frame_must_state_its_size_within_bounds_and_hold_exactly_that() {
        let k = keys();
        let row = Uuid::now_v7();
        let opens = |frame: &[u8]| {
            let mut plain = vec![ZSTD];
            plain.extend_from_slice(frame);
            k.open(row, Some("k1"), &k.seal_plaintext(row, &plain).bytes)
        };
        let body = b"{\"a\":1}".repeat(100);
        let frame = zstd::bulk::compress(&body, 1).unwrap();
        assert_eq!(opens(&frame).unwrap(), body);
        let rejected = Err(OpenError::Rejected("k1".into()));
        // A frame that does not state its size (as a streaming encoder writes it).
        let mut unsized_frame = Vec::new();
        {
            let mut encoder = zstd::stream::Encoder::new(&mut unsized_frame, 1).unwrap();
            encoder.include_contentsize(false).unwrap();
            std::io::Write::write_all(&mut encoder, &body).unwrap();
            encoder.finish().unwrap();
        }
        assert_eq!(opens(&unsized_frame), rejected);
        // A frame that states more than any body may be (65 MiB of zeros packs into a few
        // kilobytes): refused before the output is allocated.
        let bomb = zstd::bulk::compress(&vec![0u8; MAX_OPENED_BYTES + (1 << 20)], 1).unwrap();
        assert!(bomb.len() < 64 << 10, "{}", bomb.len());
        assert_eq!(opens(&bomb), rejected);
        // Cut short, or with bytes after the frame.
        assert_eq!(opens(&frame[..frame.len() - 3]), rejected);
        let mut trailing = frame.clone();
        trailing.extend_from_slice(b"extra");
        assert_eq!(opens(&trailing), rejected);
        assert_eq!(opens(b""), rejected);
    }

    #[test]
    fn a_ciphertext_opens_only_in_its_own_row_under_its_own_key_id() {
        let both = PayloadKeys::load(
            None,
            Some(&format!(
                "k2:{}",
                base64::engine::general_purpose::STANDARD.encode([9u8; 32])
            )),
        )
        .unwrap();
        let k = keys();
        let row = Uuid::now_v7();
        let sealed = k.seal(row, b"secret body");
        assert_eq!(
            k.open(Uuid::now_v7(), Some("k1"), &sealed.bytes),
            Err(OpenError::Rejected("k1".into()))
        );
        assert_eq!(
            both.open(row, Some("k1"), &sealed.bytes),
            Err(OpenError::UnknownKey("k1".into()))
        );
        let mut flipped = sealed.bytes.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert!(k.open(row, Some("k1"), &flipped).is_err());
        assert!(k.open(row, Some("k1"), &[]).is_err());
        assert!(k.open(row, Some("k1"), &[FORMAT_V1, 1, 2]).is_err());
    }

    #[test]
    fn the_key_file_names_the_current_key_and_the_environment_overrides_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.toml");
        let b64 = |b: u8| base64::engine::general_purpose::STANDARD.encode([b; 32]);
        std::fs::write(
            &path,
            format!(
                "current = \"new\"\n[keys]\nold = \"{}\"\nnew = \"{}\"\n",
                b64(1),
                b64(2)
            ),
        )
        .unwrap();
        let file = PayloadKeys::load(Some(&path), None).unwrap();
        assert_eq!(file.current_id(), "new");
        let row = Uuid::now_v7();
        let sealed = file.seal(row, b"x");
        let env = PayloadKeys::load(Some(&path), Some(&format!("env:{}", b64(3)))).unwrap();
        assert_eq!(env.current_id(), "env");
        assert_eq!(env.open(row, Some("new"), &sealed.bytes).unwrap(), b"x");

        for bad in [
            "current = \"gone\"\n[keys]\nold = \"AAAA\"\n".to_owned(),
            format!("current = \"a\"\n[keys]\na = \"{}\"\n", "c2hvcnQ="),
            format!("current = \"a b\"\n[keys]\n\"a b\" = \"{}\"\n", b64(1)),
        ] {
            std::fs::write(&path, bad).unwrap();
            let e = PayloadKeys::load(Some(&path), None)
                .unwrap_err()
                .to_string();
            assert!(!e.contains("AAAA") && !e.contains("c2hvcnQ"), "{e}");
        }
        assert!(PayloadKeys::load(None, None).is_err());
        assert!(PayloadKeys::load(None, Some("no-colon")).is_err());
    }

    #[test]
    fn a_size_claim_past_the_largest_body_is_refused_before_allocating() {
        let k = keys();
        let row = Uuid::now_v7();
        let mut plain = vec![LZ4];
        plain.extend_from_slice(&u32::MAX.to_le_bytes());
        plain.extend_from_slice(b"\x00");
        let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
        let sealed = k.keys["k1"]
            .cipher
            .encrypt(
                &nonce,
                Payload {
                    msg: &plain,
                    aad: &associated_data(row, "k1"),
                },
            )
            .unwrap();
        let mut bytes = vec![FORMAT_V1];
        bytes.extend_from_slice(&nonce);
        bytes.extend_from_slice(&sealed);
        assert_eq!(
            k.open(row, Some("k1"), &bytes),
            Err(OpenError::Rejected("k1".into()))
        );
    }
}
