//! `wharf adapter keygen|sign`: an Ed25519 key pair for signing adapter files, and a detached
//! signature (`FILE.sig`) made with it. The host checks these (`adapter::signature`) against
//! `[adapters] trusted_keys`.
//!
//! `NAME.key` is the private key as PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`, what
//! `openssl genpkey -algorithm ed25519` writes, so either tool's key serves the other), created
//! with mode 0600; `NAME.pub` is one line, the value to list in `trusted_keys`.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chacha20poly1305::aead::OsRng;
use chacha20poly1305::aead::rand_core::RngCore as _;
use ed25519_dalek::pkcs8::{DecodePrivateKey as _, EncodePrivateKey as _};
use sha2::{Digest as _, Sha256};
use zeroize::Zeroizing;

use crate::adapter::signature::{SignatureFile, Signer, read_sig, sig_path, verify};
use crate::support::adapter_key::AdapterKey;
use crate::support::file_modes::{Trusted, loose_access};

const PEM_LABEL: &str = "PRIVATE KEY";

/// What keygen and sign fail on.
#[derive(Debug, thiserror::Error)]
pub enum SigningError {
    #[error("{}: already exists; keygen never overwrites a key (choose another --out)", .0.display())]
    Exists(PathBuf),
    #[error("{}: {cause}", path.display())]
    Io {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("{}: not an Ed25519 private key in PKCS#8 PEM (as `wharf adapter keygen` writes)", .0.display())]
    NotAKey(PathBuf),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SigningError + '_ {
    move |cause| SigningError::Io {
        path: path.to_owned(),
        cause,
    }
}

/// `NAME` + `suffix`: `team` → `team.key` (never replacing an extension `NAME` has).
fn with_suffix(name: &Path, suffix: &str) -> PathBuf {
    let mut s = name.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// Writes `OUT.key` (mode 0600) and `OUT.pub`; returns their paths and the public key.
pub fn keygen(out: &Path) -> Result<(PathBuf, PathBuf, AdapterKey), SigningError> {
    let (key_path, pub_path) = (with_suffix(out, ".key"), with_suffix(out, ".pub"));
    for p in [&key_path, &pub_path] {
        if std::fs::symlink_metadata(p).is_ok() {
            return Err(SigningError::Exists(p.clone()));
        }
    }
    let mut seed = Zeroizing::new([0u8; 32]);
    OsRng.fill_bytes(seed.as_mut());
    let key = ed25519_dalek::SigningKey::from_bytes(&seed);
    // PKCS#8 v1 (the seed alone), as OpenSSL writes and reads it; ed25519-dalek's own
    // encoding is v2 (with the public key), which OpenSSL 3.0 does not read.
    let der = ed25519_dalek::pkcs8::KeypairBytes {
        secret_key: *seed,
        public_key: None,
    }
    .to_pkcs8_der()
    .map_err(|_| SigningError::NotAKey(key_path.clone()))?;
    let pem = Zeroizing::new(pem_encode(der.as_bytes()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&key_path).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => SigningError::Exists(key_path.clone()),
        _ => io(&key_path)(e),
    })?;
    file.write_all(pem.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(io(&key_path))?;
    let public = AdapterKey::new(key.verifying_key());
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    let mut file = options.open(&pub_path).map_err(io(&pub_path))?;
    writeln!(file, "{public}").map_err(io(&pub_path))?;
    Ok((key_path, pub_path, public))
}

/// Writes `FILE.sig`, signed with the key in `key_file`; returns its path and contents.
pub fn sign(file: &Path, key_file: &Path) -> Result<(PathBuf, SignatureFile), SigningError> {
    if let Some(warning) = loose_access(key_file, Trusted::KeyFile) {
        eprintln!("warning: {warning}");
    }
    let text = Zeroizing::new(std::fs::read_to_string(key_file).map_err(io(key_file))?);
    let der =
        Zeroizing::new(pem_decode(&text).ok_or_else(|| SigningError::NotAKey(key_file.into()))?);
    let key = ed25519_dalek::SigningKey::from_pkcs8_der(&der)
        .map_err(|_| SigningError::NotAKey(key_file.into()))?;
    let bytes = std::fs::read(file).map_err(io(file))?;
    let signature = SignatureFile::sign(&key, Sha256::digest(&bytes).into());
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let sig = sig_path(file);
    // Whole or not at all: a running receiver may read it at any moment.
    let tmp = with_suffix(&sig, ".tmp");
    std::fs::write(&tmp, signature.render(&name)).map_err(io(&tmp))?;
    std::fs::rename(&tmp, &sig).map_err(io(&sig))?;
    Ok((sig, signature))
}

/// Who signed `file`, its `.sig` (if any) checked against its bytes, as the host checks it
/// without `trusted_keys`: for `adapter check`.
pub fn signer_of(file: &Path) -> anyhow::Result<Signer> {
    let bytes = std::fs::read(file).map_err(io(file))?;
    let digest: [u8; 32] = Sha256::digest(&bytes).into();
    let sig = read_sig(file)?;
    Ok(verify(file, sig.as_deref(), &digest, &[])?)
}

fn pem_encode(der: &[u8]) -> String {
    let b64 = STANDARD.encode(der);
    let mut out = format!("-----BEGIN {PEM_LABEL}-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str(&format!("-----END {PEM_LABEL}-----\n"));
    out
}

fn pem_decode(text: &str) -> Option<Vec<u8>> {
    let body = text
        .trim()
        .strip_prefix(&format!("-----BEGIN {PEM_LABEL}-----"))?
        .strip_suffix(&format!("-----END {PEM_LABEL}-----"))?;
    let b64: String = body.split_whitespace().collect();
    STANDARD.decode(b64).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_key_signs_what_the_host_verifies() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("team");
        let (key, public_file, public) = keygen(&out).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&key).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert_eq!(
            std::fs::read_to_string(&public_file).unwrap(),
            format!("{public}\n")
        );
        assert!(matches!(keygen(&out), Err(SigningError::Exists(_))));
        let wasm = dir.path().join("a.wasm");
        std::fs::write(&wasm, b"\0asm").unwrap();
        let (sig, _) = sign(&wasm, &key).unwrap();
        let digest: [u8; 32] = Sha256::digest(b"\0asm").into();
        let bytes = std::fs::read(&sig).unwrap();
        let signer = verify(&wasm, Some(&bytes), &digest, std::slice::from_ref(&public));
        assert_eq!(signer.unwrap().to_string(), public.to_string());
        assert!(matches!(
            sign(&wasm, &public_file),
            Err(SigningError::NotAKey(_))
        ));
    }
}
