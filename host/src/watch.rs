//! Watching a folder for changes, shared by the secrets file and the adapters folder. The
//! folder rather than a file, so rename-over and editors' saves are seen. Callers debounce
//! and also poll, since a watcher can miss events (network filesystems, overflow).

use std::path::Path;

use tokio::sync::mpsc;

/// Keeps the watcher alive; `changes` yields when something in the folder changed (bursts
/// collapse into one pending signal).
pub struct FolderWatch {
    _watcher: notify::RecommendedWatcher,
    pub changes: mpsc::Receiver<()>,
}

pub fn watch_folder(dir: &Path) -> anyhow::Result<FolderWatch> {
    let (tx, changes) = mpsc::channel::<()>(1);
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        // inotify reports opens and reads too, including the callers' own reads of the
        // files: reacting to those would reload in a loop.
        if event.is_ok_and(|e| e.kind.is_access()) {
            return;
        }
        let _ = tx.try_send(());
    })?;
    notify::Watcher::watch(&mut watcher, dir, notify::RecursiveMode::NonRecursive)?;
    Ok(FolderWatch {
        _watcher: watcher,
        changes,
    })
}
