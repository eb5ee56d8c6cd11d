//! The loaded adapters by name and the status of every file in the adapters folder, swapped
//! together as one value.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::loaded::LoadedAdapter;

/// The loaded adapters by name. Cloned and swapped whole (`Ingest::update_adapters`), so a
/// request sees one consistent set and keeps its adapter after a swap.
/// The status of each file in the adapters folder travels with the set, so the two never
/// disagree.
#[derive(Default, Clone)]
pub struct AdapterSet {
    adapters: HashMap<String, Arc<LoadedAdapter>>,
    files: BTreeMap<String, FileStatus>,
}

impl AdapterSet {
    pub fn get(&self, name: &str) -> Option<&Arc<LoadedAdapter>> {
        self.adapters.get(name)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.adapters.keys().map(String::as_str)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<LoadedAdapter>> {
        self.adapters.values()
    }

    /// Adds or replaces the adapter of that name; returns the one it replaced.
    pub fn insert(&mut self, adapter: Arc<LoadedAdapter>) -> Option<Arc<LoadedAdapter>> {
        self.adapters.insert(adapter.info.name.clone(), adapter)
    }

    pub fn remove(&mut self, name: &str) -> Option<Arc<LoadedAdapter>> {
        self.adapters.remove(name)
    }

    /// Every file seen in the adapters folder, by file name.
    pub fn files(&self) -> &BTreeMap<String, FileStatus> {
        &self.files
    }

    pub fn set_file(&mut self, status: FileStatus) {
        self.files.insert(status.file.clone(), status);
    }
}

/// What became of one file in the adapters folder; `/admin/adapters` lists these.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FileStatus {
    /// The file's name inside the adapters folder.
    pub file: String,
    pub state: FileState,
    pub adapter: Option<String>,
    /// The version serving from this file, if any.
    pub version: Option<String>,
    /// The WIT package the serving version targets (`wharf:adapter@0.1.0` or `@0.2.0`).
    pub world: Option<String>,
    pub sha256: Option<String>,
    /// Who signed the serving version: its signer's key (`ed25519:...`), or `unsigned`.
    #[serde(default)]
    pub signer: Option<String>,
    pub loaded_at: Option<String>,
    /// Fixtures that passed before the serving version was swapped in.
    pub fixtures_passed: Option<usize>,
    /// Why the last attempt failed; the serving version, if any, is the previous one.
    pub last_error: Option<String>,
    pub last_attempt_sha256: Option<String>,
    pub last_attempt_at: Option<String>,
}

/// What a file in the adapters folder amounts to now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FileState {
    /// A version of this file serves.
    #[default]
    Serving,
    /// Nothing from it serves: it failed vetting, or an earlier file in name order serves its
    /// adapter name.
    Refused,
    Removed,
}

impl std::fmt::Display for FileState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FileState::Serving => "serving",
            FileState::Refused => "refused",
            FileState::Removed => "removed",
        })
    }
}
