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

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::ingest::Ingest;
use crate::metrics::Metrics;
use crate::wasm::{AdapterSet, LoadedAdapter, Sandbox};

/// Quiet time after the last event before a pass: an editor's save or a copy is several events.
const DEBOUNCE: Duration = Duration::from_millis(200);
/// Longest a stream of events may postpone a pass.
const MAX_DEBOUNCE: Duration = Duration::from_secs(2);
/// A pass even without events (network filesystems, some container mounts).
const POLL_INTERVAL: Duration = Duration::from_secs(5);
/// Longest error kept in the status table.
const MAX_ERROR_BYTES: usize = 1024;

/// What became of one file in the adapters folder; `/admin/adapters` lists these.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FileStatus {
    /// The file's name inside the adapters folder.
    pub file: String,
    /// `serving` (a version of this file serves), `refused` (nothing from it serves) or
    /// `removed`.
    pub state: String,
    pub adapter: Option<String>,
    /// The version serving from this file, if any.
    pub version: Option<String>,
    pub sha256: Option<String>,
    pub loaded_at: Option<String>,
    /// Fixtures that passed before the serving version was swapped in.
    pub fixtures_passed: Option<usize>,
    /// Why the last attempt failed; the serving version, if any, is the previous one.
    pub last_error: Option<String>,
    pub last_attempt_sha256: Option<String>,
    pub last_attempt_at: Option<String>,
}

enum Change {
    Loaded {
        file: String,
        adapter: Arc<LoadedAdapter>,
        fixtures_passed: Option<usize>,
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

/// Loads the adapters folder once, then keeps it in sync.
pub struct Reloader {
    sandbox: Arc<Sandbox>,
    dir: PathBuf,
}

impl Reloader {
    pub fn new(sandbox: Arc<Sandbox>, dir: PathBuf) -> Self {
        Self { sandbox, dir }
    }

    /// The first pass, at start: every valid file serves, every invalid one is reported.
    pub async fn initial(&self, metrics: &Metrics) -> anyhow::Result<AdapterSet> {
        anyhow::ensure!(
            self.dir.is_dir(),
            "adapters dir {} is not a folder",
            self.dir.display()
        );
        let mut set = AdapterSet::default();
        for change in self.changes(&set).await {
            report(&change, metrics);
            apply(&mut set, &change, &self.dir);
        }
        Ok(set)
    }

    /// One pass against the live set.
    pub async fn sync(&self, ingest: &Ingest) {
        let changes = self.changes(&ingest.adapters()).await;
        for change in &changes {
            report(change, ingest.metrics());
        }
        if !changes.is_empty() {
            ingest.update_adapters(|set| {
                for change in &changes {
                    apply(set, change, &self.dir);
                }
            });
        }
    }

    /// Watches the folder until cancelled: events (debounced) and a slow poll trigger a pass.
    pub fn watch(
        self,
        ingest: Arc<Ingest>,
        cancel: CancellationToken,
    ) -> anyhow::Result<tokio::task::JoinHandle<()>> {
        let mut watch = crate::watch::watch_folder(&self.dir)?;
        Ok(tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = cancel.cancelled() => break,
                    Some(()) = watch.changes.recv() => {
                        // Wait for a quiet spell (a copy or an editor's save is many events),
                        // but not forever if something keeps writing.
                        let give_up = tokio::time::Instant::now() + MAX_DEBOUNCE;
                        while tokio::time::Instant::now() < give_up
                            && let Ok(Some(())) = tokio::time::timeout(DEBOUNCE, watch.changes.recv()).await
                        {}
                    }
                    _ = tokio::time::sleep(POLL_INTERVAL) => {}
                }
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
            let sha256 = hex::encode(Sha256::digest(&bytes));
            let known = current.files().get(&file);
            if known.and_then(|s| s.last_attempt_sha256.as_deref()) == Some(sha256.as_str()) {
                continue; // Already serving, or already refused: same bytes, same verdict.
            }
            changes.push(match self.vet(bytes, &path, current).await {
                Ok((adapter, fixtures_passed)) => Change::Loaded {
                    file,
                    adapter,
                    fixtures_passed,
                },
                Err(e) => Change::Failed {
                    file,
                    sha256,
                    error: bounded(format!("{e:#}")),
                },
            });
        }
        for (file, status) in current.files() {
            if status.state != "removed" && !present.contains(file) {
                changes.push(Change::Removed { file: file.clone() });
            }
        }
        changes
    }

    /// Every check a file must pass before it may serve.
    async fn vet(
        &self,
        bytes: Vec<u8>,
        path: &Path,
        current: &AdapterSet,
    ) -> anyhow::Result<(Arc<LoadedAdapter>, Option<usize>)> {
        let adapter = Arc::new(self.sandbox.load_bytes(bytes, path).await?);
        if let Some(other) = current.get(&adapter.info.name)
            && other.path != path
        {
            anyhow::bail!(
                "adapter name {:?} is already served from {}",
                adapter.info.name,
                file_name(&other.path)
            );
        }
        let fixtures = fixtures_dir(path);
        let passed = if fixtures.is_dir() {
            let report = crate::fixtures::run_dir(&adapter, &fixtures).await?;
            anyhow::ensure!(report.failed() == 0, "{}", report.summary());
            Some(report.passed())
        } else {
            None
        };
        Ok((adapter, passed))
    }
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

fn report(change: &Change, metrics: &Metrics) {
    match change {
        Change::Loaded {
            file,
            adapter,
            fixtures_passed,
        } => {
            tracing::info!(adapter = %adapter.info.name, version = %adapter.info.version,
                file = %file, sha256 = %adapter.sha256, fixtures_passed = ?fixtures_passed,
                "adapter loaded");
            metrics.adapter_reload(&adapter.info.name, "loaded");
        }
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

fn apply(set: &mut AdapterSet, change: &Change, dir: &Path) {
    let serves_from = |set: &AdapterSet, name: &str, file: &str| {
        set.get(name).is_some_and(|a| a.path == dir.join(file))
    };
    match change {
        Change::Loaded {
            file,
            adapter,
            fixtures_passed,
        } => {
            // The file used to describe another name: that name is no longer served.
            if let Some(old) = set.files().get(file).and_then(|s| s.adapter.clone())
                && old != adapter.info.name
                && serves_from(set, &old, file)
            {
                set.remove(&old);
            }
            set.insert(Arc::clone(adapter));
            let now = now_rfc3339();
            set.set_file(FileStatus {
                file: file.clone(),
                state: "serving".into(),
                adapter: Some(adapter.info.name.clone()),
                version: Some(adapter.info.version.clone()),
                sha256: Some(adapter.sha256.clone()),
                loaded_at: Some(now.clone()),
                fixtures_passed: *fixtures_passed,
                last_error: None,
                last_attempt_sha256: Some(adapter.sha256.clone()),
                last_attempt_at: Some(now),
            });
        }
        Change::Failed {
            file,
            sha256,
            error,
        } => {
            let mut status = set.files().get(file).cloned().unwrap_or_default();
            let serving = status
                .adapter
                .as_deref()
                .is_some_and(|name| serves_from(set, name, file));
            if !serving {
                status.version = None;
                status.sha256 = None;
                status.loaded_at = None;
                status.fixtures_passed = None;
            }
            status.file = file.clone();
            status.state = if serving { "serving" } else { "refused" }.into();
            status.last_error = Some(error.clone());
            status.last_attempt_sha256 = Some(sha256.clone());
            status.last_attempt_at = Some(now_rfc3339());
            set.set_file(status);
        }
        Change::Removed { file } => {
            let mut status = set.files().get(file).cloned().unwrap_or_default();
            if let Some(name) = status.adapter.clone()
                && serves_from(set, &name, file)
            {
                set.remove(&name);
            }
            status.state = "removed".into();
            status.version = None;
            status.sha256 = None;
            status.last_error = None;
            status.last_attempt_sha256 = None;
            status.last_attempt_at = Some(now_rfc3339());
            set.set_file(status);
        }
    }
}
