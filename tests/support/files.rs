//! The repository's files the tests read (built adapters, published vectors) and the file
//! operations they perform.

use std::path::{Path, PathBuf};

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repo root")
        .to_owned()
}

/// A built adapter component (or its fixtures folder); the suite needs
/// `cargo xtask adapters` first.
pub fn adapter_file(rel: &str) -> PathBuf {
    let path = repo_root().join("adapters/dist").join(rel);
    assert!(
        path.exists(),
        "{} missing: run `cargo xtask adapters` (or `cargo xtask test`)",
        path.display()
    );
    path
}

/// A published test-vector file from `tests/vectors/`, parsed.
pub fn vectors(name: &str) -> serde_json::Value {
    let text =
        std::fs::read_to_string(repo_root().join("tests/vectors").join(name)).expect("vector file");
    serde_json::from_str(&text).expect("vector json")
}

/// Copies a folder of folders of files (a fixtures folder).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let dest = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_tree(&path, &dest);
        } else {
            std::fs::copy(&path, &dest).unwrap();
        }
    }
}

/// Writes `bytes` to `dest` the way deploy tools should: a temporary file, then a rename.
pub fn install_atomically(dest: &Path, bytes: &[u8]) {
    let temp = dest.with_extension("tmp-upload");
    std::fs::write(&temp, bytes).unwrap();
    std::fs::rename(&temp, dest).unwrap();
}

/// The repository's `examples/` config and secrets, copied into `dir/examples/` with the two
/// paths that lead out of the checkout pointed back into it: the built adapters, and the
/// tests' compiled-adapter cache instead of `.wharf-dev/cache`. Returns the config's path.
pub fn copy_examples(dir: &Path) -> PathBuf {
    let examples = dir.join("examples");
    std::fs::create_dir_all(&examples).unwrap();
    let config = std::fs::read_to_string(repo_root().join("examples/wharf.toml")).unwrap();
    let adapters = repo_root().join("adapters/dist");
    let cache = repo_root().join("target/wharf-test-cache");
    let mut rewritten = config.clone();
    for (from, to) in [
        (
            "dir = \"../adapters/dist\"",
            format!("dir = {:?}", adapters.display().to_string()),
        ),
        (
            "cache_dir = \"../.wharf-dev/cache\"",
            format!("cache_dir = {:?}", cache.display().to_string()),
        ),
    ] {
        assert!(
            rewritten.contains(from),
            "examples/wharf.toml no longer has {from}"
        );
        rewritten = rewritten.replacen(from, &to, 1);
    }
    std::fs::write(examples.join("wharf.toml"), rewritten).unwrap();
    std::fs::copy(
        repo_root().join("examples/payload-keys.toml"),
        examples.join("payload-keys.toml"),
    )
    .unwrap();
    std::fs::copy(
        repo_root().join("examples/secrets.toml"),
        examples.join("secrets.toml"),
    )
    .unwrap();
    examples.join("wharf.toml")
}
