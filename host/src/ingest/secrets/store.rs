//! The live secrets: the file read once it has settled, swapped atomically on each change,
//! failing closed while it cannot be read or parsed.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use super::error::{ReadError, SecretsError, SecretsFileError};
use super::file::Secrets;
use super::keys::{KeyEncodings, KeySet, KeySource};

/// How often the file is re-read even without a change notification (network filesystems and
/// some container mounts do not deliver inotify events); `WHARF_WATCH_POLL_MS` overrides it.
const POLL_INTERVAL: Duration = Duration::from_secs(5);
/// How long a new text must stay unchanged before it is applied. A writer that pauses longer
/// than this mid-file is indistinguishable from one that finished: write a temporary file and
/// rename it over the secrets file instead (atomic).
pub const SECRETS_QUIET: Duration = Duration::from_millis(200);
/// At start, how many quiet spells to wait for a file that keeps changing before giving up.
const START_ATTEMPTS: u32 = 50;

/// One read of the file: its text, or why it could not be read.
type Read = Result<String, ReadError>;

fn read(path: &Path) -> Read {
    std::fs::read_to_string(path).map_err(|e| ReadError::Io(Arc::new(e)))
}

/// The live secrets, swapped atomically on reload.
pub struct SecretStore {
    path: PathBuf,
    current: ArcSwap<Result<Secrets, SecretsFileError>>,
    /// The read `current` was made from; a read equal to it changes nothing.
    applied: std::sync::Mutex<Read>,
}

impl SecretStore {
    /// Reads the file once it has settled; an unreadable file is an error at start-up (fail
    /// fast), and a 503 later (fail closed).
    pub fn open(path: &Path) -> anyhow::Result<Arc<Self>> {
        let mut seen = read(path);
        let mut attempts = 0;
        let text = loop {
            let text = seen.map_err(|e| anyhow::anyhow!("secrets file {}: {e}", path.display()))?;
            // Nothing serves yet, so blocking this thread for a quiet spell holds up nothing.
            std::thread::sleep(SECRETS_QUIET);
            seen = read(path);
            if seen.as_ref() == Ok(&text) {
                break text;
            }
            attempts += 1;
            anyhow::ensure!(
                attempts < START_ATTEMPTS,
                "secrets file {}: still changing after {} attempts to read it whole",
                path.display(),
                START_ATTEMPTS
            );
        };
        let secrets = Secrets::parse(&text)
            .map_err(|e| anyhow::anyhow!("secrets file {}: {e}", path.display()))?;
        Ok(Arc::new(Self {
            path: path.to_owned(),
            current: ArcSwap::from_pointee(Ok(secrets)),
            applied: std::sync::Mutex::new(Ok(text)),
        }))
    }

    pub fn current(&self) -> Arc<Result<Secrets, SecretsFileError>> {
        self.current.load_full()
    }

    fn is_applied(&self, read: &Read) -> bool {
        *self.applied.lock().expect("not poisoned") == *read
    }

    /// Applies a settled read. Logs set names and version counts, never values.
    fn apply(&self, read: Read) {
        let next = match &read {
            Ok(t) => Secrets::parse(t).map_err(SecretsFileError::from),
            Err(e) => Err(SecretsFileError::from(e.clone())),
        };
        *self.applied.lock().expect("not poisoned") = read;
        match &next {
            Ok(s) => {
                tracing::info!(file = %self.path.display(), sets = %s.summary(), "secrets reloaded");
            }
            Err(e) => tracing::error!(file = %self.path.display(), error = %e,
                "secrets file unreadable: failing closed until it is fixed"),
        }
        self.current.store(Arc::new(next));
    }

    /// Re-reads the file until two reads a quiet spell apart agree, then applies that text
    /// if it differs from the one serving. Returns early only when cancelled.
    async fn refresh(&self, cancel: &CancellationToken) {
        let path = self.path.clone();
        let read_now = || {
            let path = path.clone();
            async move {
                tokio::task::spawn_blocking(move || read(&path))
                    .await
                    .unwrap_or_else(|e| Err(ReadError::Task(Arc::new(e))))
            }
        };
        let mut seen = read_now().await;
        loop {
            if self.is_applied(&seen) {
                return;
            }
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(SECRETS_QUIET) => {}
            }
            let again = read_now().await;
            if again == seen {
                self.apply(again);
                return;
            }
            // Still being written: the old secrets keep serving until the text settles.
            tracing::debug!(file = %self.path.display(), "secrets file still changing");
            seen = again;
        }
    }

    /// Watches the file's folder (so rename-over saves are seen) and polls as a fallback.
    pub fn watch(
        self: &Arc<Self>,
        cancel: CancellationToken,
    ) -> anyhow::Result<tokio::task::JoinHandle<()>> {
        let this = Arc::clone(self);
        let stop = cancel.clone();
        crate::support::watch::on_file_changes(&self.path, POLL_INTERVAL, cancel, move || {
            let (this, stop) = (Arc::clone(&this), stop.clone());
            async move { this.refresh(&stop).await }
        })
    }
}

impl KeySource for SecretStore {
    fn keys(
        &self,
        set: &str,
        encodings: KeyEncodings,
        now: OffsetDateTime,
    ) -> Result<KeySet, SecretsError> {
        match &**self.current.load() {
            Ok(secrets) => secrets.keys(set, encodings, now),
            Err(e) => Err(SecretsError::FileUnreadable(e.clone())),
        }
    }
}
