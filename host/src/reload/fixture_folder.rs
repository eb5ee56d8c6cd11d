//! Reading a fixtures folder: its cases and their files.
//!
//! Whoever can drop files into the adapters folder must not be able to read anything else
//! through a fixture: a `body` symlinked to the secrets file would hand secret values to the
//! adapter, which could echo them into the diff, the status table and the logs. So the
//! fixtures folder, its case folders and their files must be plain folders and files, not
//! symlinks, and every file opened must lie under the fixtures folder. Sizes are capped
//! ([`MAX_BODY_BYTES`], [`MAX_TOML_BYTES`]); the diff is capped where it is made.

use std::io::Read as _;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

/// Largest `body`: twice the host's default body limit (1 MiB), so a fixture can hold any
/// body the host would accept by default, and then some.
pub const MAX_BODY_BYTES: u64 = 2 << 20;
/// Largest `request.toml` or `expected.toml`.
pub const MAX_TOML_BYTES: u64 = 64 << 10;

/// One entry of a fixtures folder that looks like a case.
pub(super) enum Case {
    /// A plain folder holding a `request.toml`.
    Folder(PathBuf),
    /// A symlink where a case folder would be: refused, never followed.
    Symlink(PathBuf),
}

impl Case {
    pub(super) fn path(&self) -> &Path {
        match self {
            Case::Folder(p) | Case::Symlink(p) => p,
        }
    }
}

/// The fixtures folder itself, resolved: it must exist and not be a symlink (the path leading
/// to it may pass through symlinks; what lies inside must not).
pub(super) fn fixtures_root(dir: &Path) -> anyhow::Result<PathBuf> {
    let meta = std::fs::symlink_metadata(dir)
        .map_err(|e| anyhow::anyhow!("fixtures folder {}: {e}", dir.display()))?;
    anyhow::ensure!(
        !meta.file_type().is_symlink(),
        "fixtures folder {} is a symlink; fixtures must be plain folders and files",
        dir.display()
    );
    anyhow::ensure!(
        meta.is_dir(),
        "fixtures folder {} is not a folder",
        dir.display()
    );
    std::fs::canonicalize(dir)
        .map_err(|e| anyhow::anyhow!("fixtures folder {}: {e}", dir.display()))
}

/// The case folders inside `dir` (folders holding a `request.toml`, and any symlink, which
/// is refused when run), sorted.
pub(super) fn cases(dir: &Path) -> anyhow::Result<Vec<Case>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)
        .map_err(|e| anyhow::anyhow!("fixtures folder {}: {e}", dir.display()))?
    {
        let entry = entry?;
        let path = entry.path();
        // The entry's own type: a symlink is not followed to see what it points at.
        let kind = entry.file_type()?;
        if kind.is_symlink() {
            found.push(Case::Symlink(path));
        } else if kind.is_dir() && std::fs::symlink_metadata(path.join("request.toml")).is_ok() {
            found.push(Case::Folder(path));
        }
    }
    found.sort_by(|a, b| a.path().cmp(b.path()));
    Ok(found)
}

/// Reads one file of a case: a plain file (never through a symlink) lying under `root`, of at
/// most `max` bytes. Errors name the file and the rule, never its content.
pub(super) fn read_fixture_file(
    root: &Path,
    case: &Path,
    file: &str,
    max: u64,
) -> anyhow::Result<Vec<u8>> {
    let path = case.join(file);
    let fail = |why: String| anyhow::anyhow!("{file}: {why}");
    let meta = std::fs::symlink_metadata(&path).map_err(|e| fail(e.to_string()))?;
    if meta.file_type().is_symlink() {
        return Err(fail("is a symlink; fixtures must be plain files".into()));
    }
    // O_NOFOLLOW: a symlink swapped in since the check above fails to open instead;
    // O_NONBLOCK: a FIFO named `body` cannot hang the reloader on open.
    let mut opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path)
        .map_err(|e| fail(e.to_string()))?;
    let meta = opened.metadata().map_err(|e| fail(e.to_string()))?;
    if !meta.is_file() {
        return Err(fail("is not a plain file".into()));
    }
    if meta.len() > max {
        return Err(fail(format!("larger than the {max}-byte limit")));
    }
    // The folders on the way may have been swapped for symlinks since they were listed: the
    // file opened must be the one at that path once resolved, inside the fixtures folder.
    let resolved = std::fs::canonicalize(&path).map_err(|e| fail(e.to_string()))?;
    let same =
        std::fs::metadata(&resolved).is_ok_and(|m| (m.dev(), m.ino()) == (meta.dev(), meta.ino()));
    if !resolved.starts_with(root) || !same {
        return Err(fail("lies outside the fixtures folder".into()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    (&mut opened)
        .take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| fail(e.to_string()))?;
    if bytes.len() as u64 > max {
        return Err(fail(format!("larger than the {max}-byte limit")));
    }
    Ok(bytes)
}
