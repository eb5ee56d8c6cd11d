//! HTTPS for the public listener: the certificate chain and private key from PEM files
//! (`[server.tls]`), checked before they serve and swapped when the files change. New
//! handshakes get the new pair; open connections keep the session they made. A pair that does
//! not load (unreadable, not PEM, a key that does not match the certificate) is refused with an
//! error line and `wharf_tls_reloads_total{outcome="failed"}`, and the previous pair keeps
//! serving. At start, such a pair stops the process, naming the file.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use sha2::{Digest as _, Sha256};
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;
use x509_cert::der::Decode as _;

use crate::config::TlsConfig;
use crate::support::metrics::Metrics;
use crate::support::watch::{FolderWatch, poll_interval, watch_folder};

/// How often the files are re-read even without a change notification.
const POLL_INTERVAL: Duration = Duration::from_secs(5);
/// Both files must read the same twice this far apart before they are tried, so a pair
/// replaced one file after the other is taken once both are in place (as for secrets).
const QUIET: Duration = Duration::from_millis(200);
/// At start, how many quiet spells to wait for files that keep changing.
const START_ATTEMPTS: u32 = 50;

/// One read of both files: their bytes, or why they could not be read.
type Read = Result<(Vec<u8>, Vec<u8>), PairError>;

/// Why a pair cannot serve. Messages name the file and never quote the key; each quotes its
/// cause, so the cause is no `source` (a chain printed would say it twice).
#[derive(Debug, thiserror::Error)]
pub enum PairError {
    #[error("{file} {}: {cause}", path.display())]
    Unreadable {
        file: &'static str,
        path: PathBuf,
        cause: std::io::Error,
    },
    /// The blocking read did not finish (a panic, or shutdown).
    #[error("{0}")]
    ReadTask(tokio::task::JoinError),
    #[error("cert_file {}: not a PEM certificate chain ({cause})", cert_file.display())]
    NotPem {
        cert_file: PathBuf,
        cause: rustls::pki_types::pem::Error,
    },
    #[error(
        "cert_file {}: no CERTIFICATE block (the server certificate first, then intermediates)",
        cert_file.display()
    )]
    NoCertificate { cert_file: PathBuf },
    #[error("cert_file {}: the first certificate is not X.509 ({cause})", cert_file.display())]
    NotX509 {
        cert_file: PathBuf,
        cause: x509_cert::der::Error,
    },
    #[error(
        "key_file {}: no private key in it (PEM: PKCS#8, PKCS#1 or SEC1)",
        key_file.display()
    )]
    NoKey { key_file: PathBuf },
    #[error(
        "key_file {} does not match the certificate in cert_file {}",
        key_file.display(),
        cert_file.display()
    )]
    Mismatch {
        key_file: PathBuf,
        cert_file: PathBuf,
    },
    #[error("key_file {}: {cause}", key_file.display())]
    Key {
        key_file: PathBuf,
        cause: rustls::Error,
    },
}

/// Why the pair cannot serve at start: the process stops with this.
#[derive(Debug, thiserror::Error)]
pub enum TlsStartError {
    #[error("[server.tls] {0}")]
    Pair(PairError),
    #[error(
        "[server.tls] {} and {}: still changing after {START_ATTEMPTS} attempts to read them \
         whole",
        cert_file.display(),
        key_file.display()
    )]
    StillChanging {
        cert_file: PathBuf,
        key_file: PathBuf,
    },
}

/// The pair serving now, where it comes from, and the resolver rustls asks on each handshake.
pub struct CertStore {
    files: TlsConfig,
    provider: Arc<CryptoProvider>,
    current: ArcSwap<CertifiedKey>,
    /// Digest of the read last decided on, served or refused: the same bytes are not tried
    /// (nor counted as a failed reload) again on every poll.
    decided: Mutex<[u8; 32]>,
    metrics: Arc<Metrics>,
}

impl std::fmt::Debug for CertStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertStore")
            .field("cert_file", &self.files.cert_file)
            .field("key_file", &self.files.key_file)
            .finish_non_exhaustive()
    }
}

impl ResolvesServerCert for CertStore {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

impl CertStore {
    /// Loads the pair once both files read the same twice; a pair that does not load fails
    /// start with a message naming the file.
    pub async fn open(
        files: &TlsConfig,
        metrics: Arc<Metrics>,
    ) -> Result<Arc<Self>, TlsStartError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut seen = read(files);
        let mut attempts = 0;
        let pair = loop {
            let pair = seen.map_err(TlsStartError::Pair)?;
            tokio::time::sleep(QUIET).await;
            let again = read(files);
            if again.as_ref().is_ok_and(|again| *again == pair) {
                break pair;
            }
            seen = again;
            attempts += 1;
            if attempts >= START_ATTEMPTS {
                return Err(TlsStartError::StillChanging {
                    cert_file: files.cert_file.clone(),
                    key_file: files.key_file.clone(),
                });
            }
        };
        let loaded = load(files, &provider, &pair.0, &pair.1).map_err(TlsStartError::Pair)?;
        loaded.log("TLS certificate loaded");
        metrics.tls_cert_expiry(loaded.not_after);
        Ok(Arc::new(Self {
            files: files.clone(),
            provider,
            current: ArcSwap::from_pointee(loaded.key),
            decided: Mutex::new(digest(&Ok(pair))),
            metrics,
        }))
    }

    /// What the listener hands each accepted connection to: TLS 1.2 and 1.3 with the ring
    /// provider, HTTP/1.1 only (the listener speaks nothing else), certificates from `self`.
    pub fn acceptor(self: &Arc<Self>) -> anyhow::Result<tokio_rustls::TlsAcceptor> {
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::clone(&self.provider))
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(Arc::clone(self) as Arc<dyn ResolvesServerCert>);
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
    }

    /// Watches the files' folders (so rename-over and symlink swaps are seen) and polls as a
    /// fallback; each change is decided once both files have settled.
    pub fn watch(
        self: &Arc<Self>,
        cancel: CancellationToken,
    ) -> anyhow::Result<tokio::task::JoinHandle<()>> {
        let cert_dir = folder(&self.files.cert_file);
        let key_dir = folder(&self.files.key_file);
        let mut cert_watch = watch_folder(&cert_dir)?;
        let mut key_watch = (key_dir != cert_dir)
            .then(|| watch_folder(&key_dir))
            .transpose()?;
        let poll = poll_interval(POLL_INTERVAL);
        let this = Arc::clone(self);
        Ok(tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = cancel.cancelled() => break,
                    () = cert_watch.changed() => {}
                    () = changed(key_watch.as_mut()) => {}
                    _ = tokio::time::sleep(poll) => {}
                }
                cert_watch.clear();
                if let Some(w) = key_watch.as_mut() {
                    w.clear();
                }
                this.refresh(&cancel).await;
            }
        }))
    }

    /// Re-reads both files until two reads a quiet spell apart agree, then decides that read
    /// unless it was decided already. Returns early only when cancelled.
    async fn refresh(&self, cancel: &CancellationToken) {
        let read_now = || {
            let files = self.files.clone();
            async move {
                tokio::task::spawn_blocking(move || read(&files))
                    .await
                    .unwrap_or_else(|e| Err(PairError::ReadTask(e)))
            }
        };
        let mut seen = read_now().await;
        loop {
            if digest(&seen) == *self.decided.lock().expect("not poisoned") {
                return;
            }
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(QUIET) => {}
            }
            let again = read_now().await;
            if digest(&again) == digest(&seen) {
                self.decide(again);
                return;
            }
            seen = again;
        }
    }

    /// Serves a read that loads; refuses one that does not, keeping the pair serving.
    fn decide(&self, read: Read) {
        *self.decided.lock().expect("not poisoned") = digest(&read);
        let loaded = read
            .and_then(|(cert_pem, key_pem)| load(&self.files, &self.provider, &cert_pem, &key_pem));
        match loaded {
            Ok(loaded) => {
                loaded.log("TLS certificate reloaded: new handshakes get it");
                self.metrics.tls_cert_expiry(loaded.not_after);
                self.metrics.tls_reload("loaded");
                self.current.store(Arc::new(loaded.key));
            }
            Err(e) => {
                self.metrics.tls_reload("failed");
                tracing::error!(error = %e,
                    "TLS certificate and key refused: the previous pair keeps serving");
            }
        }
    }
}

/// A pair ready to serve.
struct Loaded {
    key: CertifiedKey,
    /// The end-entity certificate's notAfter, as a Unix time.
    not_after: i64,
    cert_file: PathBuf,
}

impl Loaded {
    fn log(&self, message: &str) {
        let not_after = OffsetDateTime::from_unix_timestamp(self.not_after)
            .ok()
            .and_then(|t| {
                t.format(&time::format_description::well_known::Rfc3339)
                    .ok()
            })
            .unwrap_or_default();
        let chain = self.key.cert.len();
        if self.not_after <= OffsetDateTime::now_utc().unix_timestamp() {
            tracing::warn!(cert_file = %self.cert_file.display(), not_after, chain,
                "{message}, but it has expired: clients will refuse it");
        } else {
            tracing::info!(cert_file = %self.cert_file.display(), not_after, chain, "{message}");
        }
    }
}

/// The chain and key parsed and checked against each other. Messages name the file and never
/// quote the key (PEM parse errors of the key file are not passed on: they can carry its text).
fn load(
    files: &TlsConfig,
    provider: &CryptoProvider,
    cert_pem: &[u8],
    key_pem: &[u8],
) -> Result<Loaded, PairError> {
    let cert_file = || files.cert_file.clone();
    let key_file = || files.key_file.clone();
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|cause| PairError::NotPem {
            cert_file: cert_file(),
            cause,
        })?;
    let Some(leaf) = chain.first() else {
        return Err(PairError::NoCertificate {
            cert_file: cert_file(),
        });
    };
    let not_after = x509_cert::Certificate::from_der(leaf.as_ref())
        .map_err(|cause| PairError::NotX509 {
            cert_file: cert_file(),
            cause,
        })?
        .tbs_certificate
        .validity
        .not_after
        .to_unix_duration()
        .as_secs();
    // The PEM error is not kept: it can carry the key file's text.
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|_| PairError::NoKey {
        key_file: key_file(),
    })?;
    let key = CertifiedKey::from_der(chain, key, provider).map_err(|e| match e {
        rustls::Error::InconsistentKeys(_) => PairError::Mismatch {
            key_file: key_file(),
            cert_file: cert_file(),
        },
        cause => PairError::Key {
            key_file: key_file(),
            cause,
        },
    })?;
    Ok(Loaded {
        key,
        not_after: i64::try_from(not_after).unwrap_or(i64::MAX),
        cert_file: files.cert_file.clone(),
    })
}

fn read(files: &TlsConfig) -> Read {
    let one = |path: &Path, file: &'static str| {
        std::fs::read(path).map_err(|cause| PairError::Unreadable {
            file,
            path: path.to_owned(),
            cause,
        })
    };
    Ok((
        one(&files.cert_file, "cert_file")?,
        one(&files.key_file, "key_file")?,
    ))
}

/// A digest standing for a read, so the key's bytes are not kept beyond loading them.
fn digest(read: &Read) -> [u8; 32] {
    let mut hash = Sha256::new();
    match read {
        Ok((cert, key)) => {
            hash.update(b"ok");
            hash.update((cert.len() as u64).to_be_bytes());
            hash.update(cert);
            hash.update(key);
        }
        Err(e) => {
            hash.update(b"err");
            hash.update(e.to_string().as_bytes());
        }
    }
    hash.finalize().into()
}

fn folder(file: &Path) -> PathBuf {
    file.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_owned()
}

async fn changed(watch: Option<&mut FolderWatch>) {
    match watch {
        Some(w) => w.changed().await,
        None => std::future::pending().await,
    }
}
