//! Hot reload of the adapters folder.
//!
//! The folder is watched (not the files, so rename-over and editor saves are seen), events are
//! debounced, and a slow poll covers filesystems that deliver no events. Every pass compares
//! each `*.wasm` file's SHA-256 with what was last tried for it; a new or changed file is
//! compiled off the request path (a blocking thread, or the compiled cache), its imports are
//! checked against the allowlist, its exports type-checked against the world, `describe`
//! validated, and its own fixtures (`<stem>.fixtures/` beside it) run through the real
//! verification path. Only then is it swapped into the adapter set (read-copy-update), so a
//! request in flight finishes on the version it started with. A file that fails any step
//! leaves the previous version serving and is reported: a log line, the
//! `wharf_adapter_reloads_total{adapter,result}` metric, and `/admin/adapters`
//! (`wharf adapter status`). A removed file unregisters its adapter (503 `adapter_unavailable`
//! until it returns).
//!
//! With `[adapters] trusted_keys` set, a file must first carry a valid signature
//! (`FILE.wasm.sig`, see `adapter::signature`) by one of those keys, or it is refused as any
//! failing file is; without, a `.sig` present is still checked. A change to the `.sig` alone
//! is a change: the file is vetted again.
//!
//! Two files may describe the same adapter name. Which one serves depends only on the files
//! present, never on the order they arrived: among the files whose latest good version
//! describes a name, the first in file-name order serves it, and every other one is refused
//! ("adapter name X is already served by FILE") while keeping its vetted version, so it takes
//! over at once when the earlier file goes or changes its name.

use std::collections::{BTreeMap, HashMap};

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::adapter::signature::{self, Signer};
use crate::adapter::{AdapterSet, FileState, FileStatus, LoadedAdapter, Sandbox};
use crate::ingest::Ingest;
use crate::support::adapter_key::AdapterKey;
use crate::support::metrics::Metrics;

/// Quiet time after the last event before a pass: an editor's save or a copy is several events.
const DEBOUNCE: Duration = Duration::from_millis(200);
/// Longest a stream of events may postpone a pass.
const MAX_DEBOUNCE: Duration = Duration::from_secs(2);
/// A pass even without events (network filesystems, some container mounts);
/// `WHARF_WATCH_POLL_MS` overrides it.
const POLL_INTERVAL: Duration = Duration::from_secs(5);
/// Longest error kept in the status table.
const MAX_ERROR_BYTES: usize = 1024;

enum Change {
    Loaded {
        file: String,
        adapter: Arc<LoadedAdapter>,
        fixtures_passed: Option<usize>,
        signer: Signer,
    },
    Failed {
        file: String,
        sha256: String,
        error: String,
    },
    Removed {
        file: String,
    },
}

/// The last version of a file that passed every check, serving or not.
struct Vetted {
    adapter: Arc<LoadedAdapter>,
    fixtures_passed: Option<usize>,
    signer: Signer,
    loaded_at: String,
}

/// What the reloader remembers of a file present in the folder.
#[derive(Default)]
struct FileRecord {
    vetted: Option<Vetted>,
    /// Why the newest bytes were refused, if they were.
    refusal: Option<String>,
}

/// Loads the adapters folder once, then keeps it in sync.
pub struct Reloader {
    sandbox: Arc<Sandbox>,
    dir: PathBuf,
    /// By file name. Kept here rather than in the adapter set because a file refused for a
    /// duplicate name holds a good version that serves nothing (yet).
    records: std::sync::Mutex<BTreeMap<String, FileRecord>>,
    /// Signers whose files may load; empty: any.
    trusted_keys: Vec<AdapterKey>,
    /// By file name: the digest of the `.sig` beside it when it was last vetted (empty: none),
    /// so that a new signature alone brings the file to be vetted again.
    sig_seen: std::sync::Mutex<HashMap<String, String>>,
}

impl Reloader {
    pub fn new(sandbox: Arc<Sandbox>, dir: PathBuf) -> Self {
        Self {
            sandbox,
            dir,
            records: Default::default(),
            trusted_keys: Vec::new(),
            sig_seen: Default::default(),
        }
    }

    /// Loads only files signed by one of `keys` (`[adapters] trusted_keys`); none: any file.
    pub fn trusting(mut self, keys: Vec<AdapterKey>) -> Self {
        self.trusted_keys = keys;
        self
    }

    /// The first pass, at start: every valid file serves (the first in name order, for a
    /// name several files describe), every invalid one is reported.
    pub async fn initial(&self, metrics: &Metrics) -> anyhow::Result<AdapterSet> {
        anyhow::ensure!(
            self.dir.is_dir(),
            "adapters dir {} is not a folder",
            self.dir.display()
        );
        if !self.trusted_keys.is_empty() {
            let keys: Vec<String> = self.trusted_keys.iter().map(ToString::to_string).collect();
            tracing::info!(trusted_keys = %keys.join(", "),
                "adapter files load only when signed by one of trusted_keys");
        }
        let current = AdapterSet::default();
        let changes = self.changes(&current).await;
        Ok(self.settle(&current, &changes, metrics))
    }

    /// One pass against the live set. Only this reloader writes the set, one pass at a
    /// time, so the new set is built whole and swapped in.
    pub async fn sync(&self, ingest: &Ingest) {
        let current = ingest.adapters();
        let changes = self.changes(&current).await;
        if !changes.is_empty() {
            ingest.replace_adapters(self.settle(&current, &changes, ingest.metrics()));
        }
    }

    /// Watches the folder until cancelled: events (debounced) and a slow poll trigger a pass.
    pub fn watch(
        self,
        ingest: Arc<Ingest>,
        cancel: CancellationToken,
    ) -> anyhow::Result<tokio::task::JoinHandle<()>> {
        let mut watch = crate::support::watch::watch_folder(&self.dir)?;
        let poll = crate::support::watch::poll_interval(POLL_INTERVAL);
        Ok(tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = cancel.cancelled() => break,
                    () = watch.changed() => {
                        // Wait for a quiet spell (a copy or an editor's save is many events),
                        // but not forever if something keeps writing.
                        let give_up = tokio::time::Instant::now() + MAX_DEBOUNCE;
                        while tokio::time::Instant::now() < give_up
                            && tokio::time::timeout(DEBOUNCE, watch.changed()).await.is_ok()
                        {}
                    }
                    _ = tokio::time::sleep(poll) => {}
                }
                // The pass below reads everything signalled so far.
                watch.clear();
                tokio::select! {
                    _ = cancel.cancelled() => break,
                    _ = self.sync(&ingest) => {}
                }
            }
        }))
    }

    /// What differs between the folder and `current`, each new or changed file fully vetted.
    async fn changes(&self, current: &AdapterSet) -> Vec<Change> {
        let mut changes = Vec::new();
        let mut on_disk = Vec::new();
        match std::fs::read_dir(&self.dir) {
            Ok(entries) => {
                for entry in entries.flatten() {
                    let path = entry.path();
                    if path.extension().and_then(|e| e.to_str()) == Some("wasm") && path.is_file() {
                        on_disk.push(path);
                    }
                }
            }
            Err(e) => {
                tracing::error!(dir = %self.dir.display(), error = %e, "adapters dir unreadable");
                return changes;
            }
        }
        on_disk.sort();
        let mut present = Vec::new();
        for path in on_disk {
            let file = file_name(&path);
            present.push(file.clone());
            let Ok(bytes) = tokio::fs::read(&path).await else {
                continue; // Gone between listing and reading: the next pass sees it removed.
            };
            let digest: [u8; 32] = Sha256::digest(&bytes).into();
            let sha256 = hex::encode(digest);
            let sig = signature::read_sig(&path);
            let sig_digest = match &sig {
                Ok(Some(b)) => hex::encode(Sha256::digest(b)),
                Ok(None) => String::new(),
                Err(_) => "unreadable".to_owned(),
            };
            let known = current.files().get(&file);
            let sig_seen = self
                .sig_seen
                .lock()
                .expect("not poisoned")
                .get(&file)
                .cloned();
            if known.and_then(|s| s.last_attempt_sha256.as_deref()) == Some(sha256.as_str())
                && sig_seen.as_ref() == Some(&sig_digest)
            {
                continue; // Already vetted, good or bad: same bytes, same verdict.
            }
            self.sig_seen
                .lock()
                .expect("not poisoned")
                .insert(file.clone(), sig_digest);
            // The signature first: it is cheap, and an untrusted file is never compiled.
            let vetted = match sig.and_then(|sig| {
                signature::verify(&path, sig.as_deref(), &digest, &self.trusted_keys)
            }) {
                Ok(signer) => self
                    .vet(bytes, &path)
                    .await
                    .map(|(adapter, passed)| (adapter, passed, signer)),
                Err(e) => Err(e.into()),
            };
            changes.push(match vetted {
                Ok((adapter, fixtures_passed, signer)) => Change::Loaded {
                    file,
                    adapter,
                    fixtures_passed,
                    signer,
                },
                Err(e) => Change::Failed {
                    file,
                    sha256,
                    error: bounded(format!("{e:#}")),
                },
            });
        }
        for (file, status) in current.files() {
            if status.state != FileState::Removed && !present.contains(file) {
                self.sig_seen.lock().expect("not poisoned").remove(file);
                changes.push(Change::Removed { file: file.clone() });
            }
        }
        changes
    }

    /// Every check a file must pass before it may serve (a name another file holds is
    /// decided later, over the whole folder).
    async fn vet(
        &self,
        bytes: Vec<u8>,
        path: &Path,
    ) -> anyhow::Result<(Arc<LoadedAdapter>, Option<usize>)> {
        let adapter = Arc::new(self.sandbox.load_bytes(bytes, path).await?);
        let fixtures = fixtures_dir(path);
        // Present in any form (a symlink too, which `run_dir` refuses).
        let passed = if std::fs::symlink_metadata(&fixtures).is_ok() {
            let report = super::fixtures::run_dir(&adapter, &fixtures).await?;
            anyhow::ensure!(report.failed() == 0, "{}", report.summary());
            Some(report.passed())
        } else {
            None
        };
        Ok((adapter, passed))
    }

    /// Records `changes`, then decides the whole folder afresh: which file serves each name,
    /// and every file's status. Logs and counts what changed.
    fn settle(&self, current: &AdapterSet, changes: &[Change], metrics: &Metrics) -> AdapterSet {
        let mut records = self.records.lock().expect("not poisoned");
        let mut files = current.files().clone();
        let now = now_rfc3339();
        for change in changes {
            report(change, metrics);
            match change {
                Change::Loaded {
                    file,
                    adapter,
                    fixtures_passed,
                    signer,
                } => {
                    *records.entry(file.clone()).or_default() = FileRecord {
                        vetted: Some(Vetted {
                            adapter: Arc::clone(adapter),
                            fixtures_passed: *fixtures_passed,
                            signer: signer.clone(),
                            loaded_at: now.clone(),
                        }),
                        refusal: None,
                    };
                    let status = files.entry(file.clone()).or_default();
                    status.state = FileState::Refused; // Until decided below.
                    status.last_attempt_sha256 = Some(adapter.sha256.clone());
                    status.last_attempt_at = Some(now.clone());
                }
                Change::Failed {
                    file,
                    sha256,
                    error,
                } => {
                    records.entry(file.clone()).or_default().refusal = Some(error.clone());
                    let status = files.entry(file.clone()).or_default();
                    if status.state == FileState::Removed {
                        status.state = FileState::Refused; // Until decided below.
                    }
                    status.last_attempt_sha256 = Some(sha256.clone());
                    status.last_attempt_at = Some(now.clone());
                }
                Change::Removed { file } => {
                    records.remove(file);
                    let status = files.entry(file.clone()).or_default();
                    status.state = FileState::Removed;
                    status.version = None;
                    status.world = None;
                    status.sha256 = None;
                    status.signer = None;
                    status.last_error = None;
                    status.last_attempt_sha256 = None;
                    status.last_attempt_at = Some(now.clone());
                }
            }
        }

        let mut next = AdapterSet::default();
        // Adapter name → the file serving it: the first in file-name order (the map's order).
        let mut served_by: HashMap<String, String> = HashMap::new();
        for (file, status) in &mut files {
            status.file = file.clone();
            if status.state == FileState::Removed {
                continue;
            }
            let before = (
                status.state,
                status.sha256.clone(),
                status.last_error.clone(),
                status.signer.clone(),
            );
            let record = records.get(file);
            let refusal = record.and_then(|r| r.refusal.clone());
            let Some(vetted) = record.and_then(|r| r.vetted.as_ref()) else {
                // Nothing from this file ever passed: nothing serves from it.
                clear_serving(status);
                status.state = FileState::Refused;
                status.last_error = refusal;
                continue;
            };
            let adapter = &vetted.adapter;
            let name = adapter.info.name.clone();
            status.adapter = Some(name.clone());
            if let Some(winner) = served_by.get(&name) {
                clear_serving(status);
                status.state = FileState::Refused;
                let duplicate = format!("adapter name {name:?} is already served by {winner}");
                status.last_error = Some(match refusal {
                    Some(e) => bounded(format!("{duplicate}; its newest bytes were refused: {e}")),
                    None => duplicate.clone(),
                });
                // Once per takeover, not again when only its newest bytes change.
                let already = before.0 == FileState::Refused
                    && before
                        .2
                        .as_deref()
                        .is_some_and(|e| e.starts_with(&duplicate));
                if !already {
                    tracing::error!(file = %file, adapter = %name, served_by = %winner,
                        "adapter file refused: its adapter name is already served by another file");
                    metrics.adapter_reload(&name, "failed");
                }
                continue;
            }
            served_by.insert(name.clone(), file.clone());
            next.insert(Arc::clone(adapter));
            status.state = FileState::Serving;
            status.version = Some(adapter.info.version.clone());
            status.world = Some(adapter.info.world.clone());
            status.sha256 = Some(adapter.sha256.clone());
            status.signer = Some(vetted.signer.to_string());
            status.loaded_at = Some(vetted.loaded_at.clone());
            status.fixtures_passed = vetted.fixtures_passed;
            status.last_error = refusal;
            // Logged again when only the signer changed (the same bytes re-signed).
            if (before.0, before.1.as_ref(), before.3.as_ref())
                != (
                    FileState::Serving,
                    status.sha256.as_ref(),
                    status.signer.as_ref(),
                )
            {
                tracing::info!(adapter = %name, version = %adapter.info.version, file = %file,
                    sha256 = %adapter.sha256, signer = %vetted.signer,
                    fixtures_passed = ?vetted.fixtures_passed,
                    "adapter loaded");
                metrics.adapter_reload(&name, "loaded");
            }
        }
        for status in files.into_values() {
            next.set_file(status);
        }
        next
    }
}

fn clear_serving(status: &mut FileStatus) {
    status.version = None;
    status.world = None;
    status.sha256 = None;
    status.signer = None;
    status.loaded_at = None;
    status.fixtures_passed = None;
}

/// Fixtures shipped beside a component: `stripe.wasm` → `stripe.fixtures/`.
pub fn fixtures_dir(wasm: &Path) -> PathBuf {
    wasm.with_extension("fixtures")
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn bounded(mut s: String) -> String {
    if s.len() > MAX_ERROR_BYTES {
        let mut end = MAX_ERROR_BYTES;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push('…');
    }
    s
}

fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// Logs and counts a vetting verdict; a good version is reported once it is known whether it
/// serves (`settle`).
fn report(change: &Change, metrics: &Metrics) {
    match change {
        Change::Loaded { .. } => {}
        Change::Failed { file, error, .. } => {
            tracing::error!(file = %file, error = %error,
                "adapter file refused; the previous version, if any, keeps serving");
            metrics.adapter_reload(file.trim_end_matches(".wasm"), "failed");
        }
        Change::Removed { file } => {
            tracing::warn!(file = %file,
                "adapter file removed; its endpoints answer 503 adapter_unavailable");
            metrics.adapter_reload(file.trim_end_matches(".wasm"), "removed");
        }
    }
}
