//! Watching a folder for changes, shared by the secrets file and the adapters folder. The
//! folder rather than a file, so rename-over and editors' saves are seen. Callers debounce
//! and also poll, since a watcher can miss events (network filesystems, overflow).

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// How often a watched folder is re-read even without events; `WHARF_WATCH_POLL_MS`
/// overrides `default` (tests set it far beyond their waits to prove events alone suffice).
pub fn poll_interval(default: Duration) -> Duration {
    std::env::var("WHARF_WATCH_POLL_MS")
        .ok()
        .and_then(|ms| ms.parse::<u64>().ok())
        .filter(|&ms| ms > 0)
        .map_or(default, Duration::from_millis)
}

/// A live watch on one folder. The watcher and the receiver live and die together: callers
/// hold the whole value and wait with [`FolderWatch::changed`]. (Holding only the receiver
/// used to drop the watcher at once, an async block capturing just the field it used, so
/// only the poll ever triggered a pass.)
pub struct FolderWatch {
    watcher: Option<notify::RecommendedWatcher>,
    changes: mpsc::Receiver<()>,
}

impl FolderWatch {
    /// Resolves when something in the folder changed since the last call (bursts collapse
    /// into one pending signal). If the watcher itself died, never resolves: the poll is all
    /// that is left, and a receiver that kept answering `None` would spin.
    pub async fn changed(&mut self) {
        if self.watcher.is_some() && self.changes.recv().await.is_some() {
            return;
        }
        if self.watcher.take().is_some() {
            tracing::error!("folder watcher stopped; changes are seen only by the poll now");
        }
        std::future::pending::<()>().await
    }

    /// Forgets signals already pending (a pass is about to read everything anyway).
    pub fn clear(&mut self) {
        while self.changes.try_recv().is_ok() {}
    }
}

pub fn watch_folder(dir: &Path) -> anyhow::Result<FolderWatch> {
    let (tx, changes) = mpsc::channel::<()>(1);
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        // inotify reports opens and reads too, including the callers' own reads of the
        // files: reacting to those would reload in a loop. A close after writing is an
        // access too, but the writes before it were already reported as modifications.
        if event.is_ok_and(|e| e.kind.is_access()) {
            return;
        }
        // Full means a signal is already pending: this change will be seen by that pass.
        let _ = tx.try_send(());
    })?;
    notify::Watcher::watch(&mut watcher, dir, notify::RecursiveMode::NonRecursive)?;
    Ok(FolderWatch {
        watcher: Some(watcher),
        changes,
    })
}

/// Runs `pass` whenever something in `file`'s folder changes (so rename-over saves are seen),
/// and every `poll` (see [`poll_interval`]) as a fallback, until `cancel`: the loop of the
/// files that settle themselves (the secrets file, the config file).
pub fn on_file_changes<F, Fut>(
    file: &Path,
    poll: Duration,
    cancel: CancellationToken,
    mut pass: F,
) -> anyhow::Result<tokio::task::JoinHandle<()>>
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let dir = file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut watch = watch_folder(dir)?;
    let poll = poll_interval(poll);
    Ok(tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                () = watch.changed() => {}
                _ = tokio::time::sleep(poll) => {}
            }
            // The pass below reads every change signalled so far.
            watch.clear();
            pass().await;
        }
    }))
}
