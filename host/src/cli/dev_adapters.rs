//! `wharf dev --adapters DIR`: out-of-tree adapters served beside the bundled ones.
//!
//! The receiver watches one folder. `wharf dev` gives it `.wharf-dev/adapters/`, a merge kept
//! in step with the config's adapters folder and each `--adapters DIR` (later folders win a
//! name they share): every entry (`NAME.wasm`, `NAME.fixtures/`, any file beside them) is
//! copied in, staged and renamed into place, fixtures before components, whenever its source
//! changes, and removed when its source goes. So a build landing in DIR (`wharf adapter watch
//! --into DIR`, or a copy by hand) is hot-reloaded like a file in the configured folder.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::cli::install;

/// The merged folder, under `wharf dev`'s state folder.
pub const MERGED: &str = ".wharf-dev/adapters";
/// How often the sources are compared with what was copied.
const POLL: Duration = Duration::from_millis(300);

/// What an entry looked like when it was copied: its files' paths, sizes and times.
type Stamp = Vec<(PathBuf, u64, Option<SystemTime>)>;

/// Keeps `into` the merge of `sources`.
pub struct Merge {
    sources: Vec<PathBuf>,
    into: PathBuf,
    copied: BTreeMap<String, Stamp>,
}

impl Merge {
    /// Empties `into` (a leftover of an earlier run holds nothing of value) and merges once.
    pub fn start(sources: Vec<PathBuf>, into: &Path) -> anyhow::Result<Self> {
        for dir in &sources {
            anyhow::ensure!(dir.is_dir(), "--adapters {}: not a folder", dir.display());
        }
        if into.exists() {
            std::fs::remove_dir_all(into)?;
        }
        std::fs::create_dir_all(into)?;
        let mut merge = Self {
            sources,
            into: into.to_path_buf(),
            copied: BTreeMap::new(),
        };
        merge.pass()?;
        Ok(merge)
    }

    /// Polls the sources until the process ends; a failed pass is logged and retried. (A
    /// pass is a few `stat`s and, rarely, a copy: not worth a blocking thread.)
    pub fn spawn(mut self) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(POLL).await;
                if let Err(e) = self.pass() {
                    tracing::warn!(error = %format!("{e:#}"), "wharf dev: merging adapters folders");
                }
            }
        })
    }

    /// One comparison: what changed is copied (folders, then files), what went is removed.
    fn pass(&mut self) -> anyhow::Result<()> {
        // Entry name -> its source path; a later folder wins.
        let mut wanted: BTreeMap<String, PathBuf> = BTreeMap::new();
        for dir in &self.sources {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue; // Gone for a moment (a rebuild): its entries stay until it returns.
            };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if !name.starts_with('.') {
                    wanted.insert(name, entry.path());
                }
            }
        }
        let (folders, files): (Vec<_>, Vec<_>) = wanted.iter().partition(|(_, p)| p.is_dir());
        for (name, source) in folders.into_iter().chain(files) {
            let now = stamp(source);
            if self.copied.get(name) == Some(&now) {
                continue;
            }
            let dest = self.into.join(name);
            if source.is_dir() {
                install::replace_dir(source, &dest)?;
            } else {
                install::replace_file(source, &dest)?;
            }
            tracing::info!(file = %name, from = %source.display(), "wharf dev: adapters folder updated");
            self.copied.insert(name.clone(), now);
        }
        let gone: Vec<String> = self
            .copied
            .keys()
            .filter(|n| !wanted.contains_key(*n))
            .cloned()
            .collect();
        for name in gone {
            let dest = self.into.join(&name);
            if dest.is_dir() {
                std::fs::remove_dir_all(&dest)?;
            } else if dest.exists() {
                std::fs::remove_file(&dest)?;
            }
            self.copied.remove(&name);
        }
        Ok(())
    }
}

/// A file's size and time, or every file's under a folder.
fn stamp(path: &Path) -> Stamp {
    fn walk(path: &Path, out: &mut Stamp) {
        let Ok(meta) = std::fs::metadata(path) else {
            return;
        };
        if meta.is_dir() {
            let Ok(entries) = std::fs::read_dir(path) else {
                return;
            };
            for entry in entries.flatten() {
                walk(&entry.path(), out);
            }
        } else {
            out.push((path.to_path_buf(), meta.len(), meta.modified().ok()));
        }
    }
    let mut out = Vec::new();
    walk(path, &mut out);
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::Merge;

    fn write(path: &std::path::Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn a_later_folder_wins_a_shared_name_and_changes_and_removals_follow() {
        let root = tempfile::tempdir().unwrap();
        let (bundled, extra, merged) = (
            root.path().join("bundled"),
            root.path().join("extra"),
            root.path().join("merged"),
        );
        write(&bundled.join("a.wasm"), "bundled a");
        write(&bundled.join("b.wasm"), "bundled b");
        write(&extra.join("b.wasm"), "extra b");
        write(&extra.join("b.fixtures/valid/body"), "{}");
        write(&extra.join(".b.wasm.new"), "half written");
        write(&merged.join("stale.wasm"), "from an earlier run");
        let mut merge = Merge::start(vec![bundled.clone(), extra.clone()], &merged).unwrap();
        let read = |name: &str| std::fs::read_to_string(merged.join(name)).ok();
        assert_eq!(read("a.wasm").as_deref(), Some("bundled a"));
        assert_eq!(read("b.wasm").as_deref(), Some("extra b"));
        assert_eq!(read("b.fixtures/valid/body").as_deref(), Some("{}"));
        assert_eq!(read(".b.wasm.new"), None, "dot-names are in-flight copies");
        assert_eq!(read("stale.wasm"), None, "the merge starts empty");

        write(&extra.join("b.wasm"), "extra b, version 2");
        std::fs::remove_file(bundled.join("a.wasm")).unwrap();
        merge.pass().unwrap();
        assert_eq!(read("b.wasm").as_deref(), Some("extra b, version 2"));
        assert_eq!(read("a.wasm"), None);

        // The extra file goes: the bundled one of that name serves again.
        std::fs::remove_file(extra.join("b.wasm")).unwrap();
        merge.pass().unwrap();
        assert_eq!(read("b.wasm").as_deref(), Some("bundled b"));
    }
}
