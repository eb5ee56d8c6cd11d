//! Putting files into an adapters folder that a receiver watches: each one staged under a
//! name the reloader ignores (a dot-name, not `*.wasm`), then renamed into place, so a reload
//! never reads half a file. A component's fixtures go in before the component: only a
//! component's change triggers a vetting, which then reads the new fixtures.

use std::path::Path;

/// Replaces the folder `to` (absent or not) with a copy of `from`.
pub fn replace_dir(from: &Path, to: &Path) -> anyhow::Result<()> {
    let (staged, old) = (aside(to, "new"), aside(to, "old"));
    for leftover in [&staged, &old] {
        if leftover.exists() {
            std::fs::remove_dir_all(leftover)?;
        }
    }
    copy_tree(from, &staged)?;
    // A folder cannot be renamed over a non-empty one: the old one steps aside first.
    if to.exists() {
        std::fs::rename(to, &old)?;
    }
    std::fs::rename(&staged, to)?;
    if old.exists() {
        std::fs::remove_dir_all(&old)?;
    }
    Ok(())
}

/// Replaces the file `to` with a copy of `from`.
pub fn replace_file(from: &Path, to: &Path) -> anyhow::Result<()> {
    let staged = aside(to, "new");
    std::fs::copy(from, &staged).map_err(|e| anyhow::anyhow!("{}: {e}", from.display()))?;
    std::fs::rename(&staged, to)?;
    Ok(())
}

/// `.NAME.SUFFIX` beside `path`.
fn aside(path: &Path, suffix: &str) -> std::path::PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    path.with_file_name(format!(".{}.{suffix}", name.unwrap_or_default()))
}

fn copy_tree(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to)?;
    let entries =
        std::fs::read_dir(from).map_err(|e| anyhow::anyhow!("{}: {e}", from.display()))?;
    for entry in entries {
        let path = entry?.path();
        let dest = to.join(path.file_name().expect("an entry has a name"));
        if path.is_dir() {
            copy_tree(&path, &dest)?;
        } else {
            std::fs::copy(&path, &dest)?;
        }
    }
    Ok(())
}
