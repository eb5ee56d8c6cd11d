//! Who else may read or write the files Wharf trusts: key files (the secrets file, the payload
//! key file, the TLS key) should be the owner's alone, and the compiled-adapter cache, loaded as
//! native code, writable by its owner alone. Like ssh, Wharf says so; unlike ssh, it only warns
//! (a container may run with a shared group on purpose).

use std::path::Path;

/// What a path holds, which decides the access that is too loose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trusted {
    /// A secret: no access for group or others (`mode & 0o077`).
    KeyFile,
    /// Native code: no write for group or others (`mode & 0o022`).
    CodeFolder,
}

/// Why `path` is open to group or others, if it is; none when it is not, when it cannot be
/// read (reported where it is loaded), or off Unix.
pub fn loose_access(path: &Path, what: Trusted) -> Option<String> {
    let mode = mode_of(path)?;
    let (mask, open, fix) = match what {
        Trusted::KeyFile => (0o077, "readable or writable", "chmod 600"),
        Trusted::CodeFolder => (0o022, "writable", "chmod go-w"),
    };
    (mode & mask != 0).then(|| {
        format!(
            "{} is {open} by group or others (mode {:04o}); {fix} it",
            path.display(),
            mode & 0o7777
        )
    })
}

#[cfg(unix)]
fn mode_of(path: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).ok().map(|m| m.permissions().mode())
}

#[cfg(not(unix))]
fn mode_of(_path: &Path) -> Option<u32> {
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
        set(&key, 0o640);
        let warning = loose_access(&key, Trusted::KeyFile).unwrap();
        assert!(warning.ends_with("(mode 0640); chmod 600 it"), "{warning}");
        set(dir.path(), 0o755);
        assert_eq!(loose_access(dir.path(), Trusted::CodeFolder), None);
        set(dir.path(), 0o777);
        assert!(loose_access(dir.path(), Trusted::CodeFolder).is_some());
        set(dir.path(), 0o700);
        assert_eq!(
            loose_access(&dir.path().join("gone"), Trusted::KeyFile),
            None
        );
    }
}
