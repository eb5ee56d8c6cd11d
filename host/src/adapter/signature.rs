//! Detached adapter signatures: `FILE.wasm.sig` beside `FILE.wasm`, written by `wharf adapter
//! sign`. An Ed25519 signature over the 32 bytes of the file's SHA-256, by the key its
//! `signer` line names. With `[adapters] trusted_keys` set, a file loads only with a valid
//! signature by one of those keys; without, a `.sig` present is still checked and its signer
//! shown, and a file without one is "unsigned".
//!
//! The file is TOML, small and readable:
//!
//! ```text
//! # Wharf adapter signature: `wharf adapter sign`, see docs/operations.md
//! file = "stripe.wasm"
//! sha256 = "<64 hex digits: what was signed>"
//! signer = "ed25519:<base64 public key>"
//! signature = "<base64 of the 64-byte Ed25519 signature over the SHA-256's 32 bytes>"
//! ```
//!
//! `file` is informative (a renamed file keeps its signature); `sha256` names what was signed,
//! so a file changed after signing is refused as a hash mismatch rather than a bad signature.

use std::fmt;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::Signer as _;

use crate::support::adapter_key::{AdapterKey, AdapterKeyError};

/// A signature file is a few hundred bytes; more is not one.
const MAX_SIG_BYTES: u64 = 4096;

/// Who signed the file that loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signer {
    /// No `.sig` beside it (allowed only without `trusted_keys`).
    Unsigned,
    Key(AdapterKey),
}

impl fmt::Display for Signer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Signer::Unsigned => f.write_str("unsigned"),
            Signer::Key(k) => fmt::Display::fmt(k, f),
        }
    }
}

/// Why a file's signature does not let it load. Each message starts with the reason an
/// operator looks for: no signature, malformed, hash mismatch, bad signature, not trusted.
#[derive(Debug, thiserror::Error)]
pub enum SignatureError {
    #[error("no signature: {sig} is missing and [adapters] trusted_keys requires one", sig = .0.display())]
    Missing(PathBuf),
    #[error("signature unreadable: {}: {cause}", sig.display())]
    Unreadable { sig: PathBuf, cause: std::io::Error },
    #[error("malformed signature file: {0}")]
    Malformed(#[from] MalformedSignature),
    #[error(
        "hash mismatch: the file's sha256 is {actual}, its signature was made for {signed} (the file changed after signing)"
    )]
    HashMismatch { signed: String, actual: String },
    #[error("bad signature: it does not verify under its signer {signer}")]
    BadSignature { signer: String },
    #[error("signer not trusted: {signer} is not in [adapters] trusted_keys")]
    Untrusted { signer: String },
}

/// What is wrong with the text of a `.sig` file.
#[derive(Debug, thiserror::Error)]
pub enum MalformedSignature {
    #[error("larger than {MAX_SIG_BYTES} bytes")]
    TooLarge,
    #[error("{0}")]
    Toml(#[from] toml::de::Error),
    #[error("signer: {0}")]
    Signer(#[from] AdapterKeyError),
    #[error("sha256 is not 64 hex digits")]
    Sha256,
    #[error("signature is not the base64 of 64 bytes")]
    Signature,
}

/// A parsed `.sig` file.
pub struct SignatureFile {
    pub signer: AdapterKey,
    pub sha256: [u8; 32],
    pub signature: ed25519_dalek::Signature,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Text {
    #[allow(dead_code)]
    file: Option<String>,
    sha256: String,
    signer: String,
    signature: String,
}

impl SignatureFile {
    /// Signs `sha256` (a file's digest) with `key`.
    pub fn sign(key: &ed25519_dalek::SigningKey, sha256: [u8; 32]) -> Self {
        Self {
            signer: AdapterKey::new(key.verifying_key()),
            sha256,
            signature: key.sign(&sha256),
        }
    }

    pub fn parse(text: &str) -> Result<Self, MalformedSignature> {
        let t: Text = toml::from_str(text)?;
        let signer = AdapterKey::parse(&t.signer)?;
        let sha256 = hex::decode(&t.sha256)
            .ok()
            .and_then(|b| <[u8; 32]>::try_from(b).ok())
            .ok_or(MalformedSignature::Sha256)?;
        let signature = STANDARD
            .decode(&t.signature)
            .ok()
            .and_then(|b| <[u8; 64]>::try_from(b).ok())
            .map(|b| ed25519_dalek::Signature::from_bytes(&b))
            .ok_or(MalformedSignature::Signature)?;
        Ok(Self {
            signer,
            sha256,
            signature,
        })
    }

    /// The file's text; `file` is the signed file's name, for the reader.
    pub fn render(&self, file: &str) -> String {
        // In the documented order; only `file` needs TOML's quoting (hex and base64 do not).
        format!(
            "# Wharf adapter signature: `wharf adapter sign`, see docs/operations.md\n\
             file = {}\nsha256 = \"{}\"\nsigner = \"{}\"\nsignature = \"{}\"\n",
            toml::Value::String(file.to_owned()),
            hex::encode(self.sha256),
            self.signer,
            STANDARD.encode(self.signature.to_bytes()),
        )
    }
}

/// Where a component's signature is: `stripe.wasm` → `stripe.wasm.sig`.
pub fn sig_path(wasm: &Path) -> PathBuf {
    let mut name = wasm.as_os_str().to_owned();
    name.push(".sig");
    PathBuf::from(name)
}

/// The bytes of `wasm`'s `.sig`, if there is one (bounded: a larger file is read in part and
/// then refused as malformed).
pub fn read_sig(wasm: &Path) -> Result<Option<Vec<u8>>, SignatureError> {
    let sig = sig_path(wasm);
    let unreadable = |cause| SignatureError::Unreadable {
        sig: sig.clone(),
        cause,
    };
    let file = match std::fs::File::open(&sig) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(unreadable(e)),
    };
    let mut bytes = Vec::new();
    file.take(MAX_SIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(unreadable)?;
    Ok(Some(bytes))
}

/// Who signed a file with digest `sha256`, given its `.sig` bytes (none: no `.sig`), and
/// whether that lets it load under `trusted` (empty: any signer, or none).
pub fn verify(
    wasm: &Path,
    sig: Option<&[u8]>,
    sha256: &[u8; 32],
    trusted: &[AdapterKey],
) -> Result<Signer, SignatureError> {
    let Some(sig) = sig else {
        if trusted.is_empty() {
            return Ok(Signer::Unsigned);
        }
        return Err(SignatureError::Missing(sig_path(wasm)));
    };
    if sig.len() as u64 > MAX_SIG_BYTES {
        return Err(MalformedSignature::TooLarge.into());
    }
    let text = std::str::from_utf8(sig)
        .map_err(|_| MalformedSignature::Toml(serde::de::Error::custom("not UTF-8 text")))?;
    let parsed = SignatureFile::parse(text)?;
    if &parsed.sha256 != sha256 {
        return Err(SignatureError::HashMismatch {
            signed: hex::encode(parsed.sha256),
            actual: hex::encode(sha256),
        });
    }
    parsed
        .signer
        .verifying_key()
        .verify_strict(sha256, &parsed.signature)
        .map_err(|_| SignatureError::BadSignature {
            signer: parsed.signer.to_string(),
        })?;
    if !trusted.is_empty() && !trusted.contains(&parsed.signer) {
        return Err(SignatureError::Untrusted {
            signer: parsed.signer.to_string(),
        });
    }
    Ok(Signer::Key(parsed.signer))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(seed: u8) -> ed25519_dalek::SigningKey {
        ed25519_dalek::SigningKey::from_bytes(&[seed; 32])
    }

    fn public(seed: u8) -> AdapterKey {
        AdapterKey::new(key(seed).verifying_key())
    }

    const WASM: &str = "/x/stripe.wasm";

    fn check(
        sig: Option<&str>,
        digest: [u8; 32],
        trusted: &[AdapterKey],
    ) -> Result<Signer, SignatureError> {
        verify(Path::new(WASM), sig.map(str::as_bytes), &digest, trusted)
    }

    #[test]
    fn a_signature_round_trips_through_its_text() {
        let text = SignatureFile::sign(&key(1), [9; 32]).render("stripe.wasm");
        let parsed = SignatureFile::parse(&text).unwrap();
        assert_eq!(parsed.signer, public(1));
        assert_eq!(parsed.sha256, [9; 32]);
        assert!(text.contains("file = \"stripe.wasm\""), "{text}");
        assert_eq!(sig_path(Path::new(WASM)), Path::new("/x/stripe.wasm.sig"));
    }

    #[test]
    fn signed_by_a_trusted_key_loads_and_names_its_signer() {
        let text = SignatureFile::sign(&key(1), [9; 32]).render("stripe.wasm");
        let signer = check(Some(&text), [9; 32], &[public(2), public(1)]).unwrap();
        assert_eq!(signer, Signer::Key(public(1)));
        // Without trusted keys the signature is still checked, and shown.
        assert_eq!(
            check(Some(&text), [9; 32], &[]).unwrap().to_string(),
            public(1).to_string()
        );
        assert_eq!(check(None, [9; 32], &[]).unwrap().to_string(), "unsigned");
    }

    #[test]
    fn each_refusal_names_its_reason() {
        let trusted = [public(1)];
        let reason = |r: Result<Signer, SignatureError>| r.unwrap_err().to_string();
        assert!(
            reason(check(None, [9; 32], &trusted)).starts_with("no signature: /x/stripe.wasm.sig")
        );
        let untrusted = SignatureFile::sign(&key(3), [9; 32]).render("stripe.wasm");
        assert!(
            reason(check(Some(&untrusted), [9; 32], &trusted))
                .starts_with("signer not trusted: ed25519:")
        );
        let signed = SignatureFile::sign(&key(1), [9; 32]).render("stripe.wasm");
        assert!(reason(check(Some(&signed), [8; 32], &trusted)).starts_with("hash mismatch: "));
        // The right digest under a signature made for other bytes.
        let mut forged = SignatureFile::sign(&key(1), [7; 32]);
        forged.sha256 = [9; 32];
        let forged = forged.render("stripe.wasm");
        assert!(reason(check(Some(&forged), [9; 32], &trusted)).starts_with("bad signature: "));
        // A bad signature is refused without trusted keys too.
        assert!(reason(check(Some(&forged), [9; 32], &[])).starts_with("bad signature: "));
        for broken in [
            "nonsense",
            &signed.replace("ed25519:", "rsa:"),
            &signed.replace("sha256 = \"", "sha256 = \"zz"),
            &signed.replace("signature = \"", "signature = \"AAAA"),
        ] {
            assert!(
                reason(check(Some(broken), [9; 32], &trusted))
                    .starts_with("malformed signature file: "),
                "{broken}"
            );
        }
        let huge = "#".repeat(5000);
        assert!(reason(check(Some(&huge), [9; 32], &[])).contains("larger than 4096 bytes"));
    }
}
