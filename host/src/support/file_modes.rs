//! Who else may read or write the files Wharf trusts: key files (the secrets file, the payload
//! key file, the TLS key) should be readable by the owner and the service's own group alone,
//! and the compiled-adapter cache, loaded as native code, writable by them alone. Like ssh,
//! Wharf says so; unlike ssh, it only warns.

use std::path::Path;

/// What a path holds, which decides the access that is too loose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trusted {
    /// A secret: no access for others (`mode & 0o007`), nor for a group other than the
    /// process's own (`mode & 0o070`; the install gives the service's group read access).
    KeyFile,
    /// Native code: no write for others (`mode & 0o002`), nor for a group other than the
    /// process's own (`mode & 0o020`).
    CodeFolder,
}

/// Why `path` is open to group or others, if it is; none when it is not, when it cannot be
/// read (reported where it is loaded), or off Unix.
pub fn loose_access(path: &Path, what: Trusted) -> Option<String> {
    let (mode, own_group) = mode_of(path)?;
    let (group_mask, other_mask, open, fix) = match what {
        Trusted::KeyFile => (0o070, 0o007, "readable or writable", "chmod 600"),
        Trusted::CodeFolder => (0o020, 0o002, "writable", "chmod go-w"),
    };
    let mask = if own_group {
        other_mask
    } else {
        group_mask | other_mask
    };
    (mode & mask != 0).then(|| {
        format!(
            "{} is {open} by group or others (mode {:04o}); {fix} it",
            path.display(),
            mode & 0o7777
        )
    })
}

/// The mode, and whether the file's group is the process's effective group (the owner of
/// `/proc/self`), on Unix.
#[cfg(unix)]
fn mode_of(path: &Path) -> Option<(u32, bool)> {
    use std::os::unix::fs::MetadataExt as _;
    let file = std::fs::metadata(path).ok()?;
    let own_group = std::fs::metadata("/proc/self").is_ok_and(|me| me.gid() == file.gid());
    Some((file.mode(), own_group))
}

#[cfg(not(unix))]
fn mode_of(_path: &Path) -> Option<(u32, bool)> {
    None
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn set(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn group_or_world_access_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("key.pem");
        std::fs::write(&key, "x").unwrap();
        set(&key, 0o600);
        assert_eq!(loose_access(&key, Trusted::KeyFile), None);
        // The file's group is this process's own (it made the file): group access is fine.
        set(&key, 0o640);
        assert_eq!(loose_access(&key, Trusted::KeyFile), None);
        set(&key, 0o604);
        let warning = loose_access(&key, Trusted::KeyFile).unwrap();
        assert!(warning.ends_with("(mode 0604); chmod 600 it"), "{warning}");
        set(dir.path(), 0o775);
        assert_eq!(loose_access(dir.path(), Trusted::CodeFolder), None);
        set(dir.path(), 0o757);
        assert!(loose_access(dir.path(), Trusted::CodeFolder).is_some());
        set(dir.path(), 0o700);
        assert_eq!(
            loose_access(&dir.path().join("gone"), Trusted::KeyFile),
            None
        );
    }
}
