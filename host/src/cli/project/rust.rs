//! Rust projects: a standalone crate on the guest SDK, built for `wasm32-wasip2`.
//!
//! The SDK dependency is a path, found in this order: `--sdk PATH`, `WHARF_SDK`, the `sdk/`
//! beside the binary's `bin/` (a release tarball), the source tree the binary was built from.
//! The crate ships the adapters workspace's `Cargo.lock`, so its build resolves nothing afresh
//! and uses the versions the bundled adapters are tested with.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::manifest::Project;

/// The environment variable naming the SDK when `--sdk` does not.
pub const SDK_ENV: &str = "WHARF_SDK";
const TARGET: &str = "wasm32-wasip2";
/// The lockfile the bundled adapters build with; a new project starts from it.
const LOCKFILE: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../adapters/Cargo.lock"
));

/// `(path in the project, contents)` for a new Rust project on the SDK at `sdk`.
pub(super) fn template(name: &str, sdk: &Path) -> Vec<(&'static str, String)> {
    vec![
        (
            "Cargo.toml",
            CARGO_TOML
                .replace("{name}", name)
                // A TOML string, quoted and escaped whatever the path holds.
                .replace(
                    "\"{sdk}\"",
                    &toml::Value::String(sdk.display().to_string()).to_string(),
                ),
        ),
        ("Cargo.lock", LOCKFILE.to_owned()),
        ("src/lib.rs", crate::cli::scaffold::lib_rs(name)),
        (".gitignore", "/target\n/dist\n".to_owned()),
    ]
}

const CARGO_TOML: &str = r#"[package]
name = "{name}"
# Logged with every request the adapter serves: bump it with every change.
version = "0.1.0"
edition = "2024"
publish = false

[lib]
crate-type = ["cdylib"]

[dependencies]
# The SDK's version names the WIT it targets (0.2.x: wharf:adapter@0.2.0). A path here; a team
# may instead pin the Wharf repository: { git = "https://your.git.host/wharf.git", tag = "..." }
wharf-adapter-sdk = { path = "{sdk}" }

# A project of its own, even inside another workspace's folder.
[workspace]

[profile.release]
opt-level = "s"
lto = true
codegen-units = 1
strip = true
panic = "abort"
"#;

/// The SDK a new project depends on: the first of `flag`, `WHARF_SDK`, `<exe>/../../sdk` (a
/// release tarball's `bin/wharf` beside `sdk/`), the source tree this binary was built from.
/// A folder named by the flag or the variable must hold the SDK; the others are tried.
pub(super) fn sdk_path(flag: Option<&Path>) -> anyhow::Result<PathBuf> {
    let named = flag
        .map(|p| (p.to_path_buf(), "--sdk"))
        .or_else(|| std::env::var_os(SDK_ENV).map(|p| (PathBuf::from(p), SDK_ENV)));
    if let Some((path, from)) = named {
        anyhow::ensure!(
            is_sdk(&path),
            "{from} {}: not the wharf-adapter-sdk crate (a folder with Cargo.toml and \
             wit/adapter.wit: a release tarball's sdk/, or adapters/sdk in a Wharf checkout)",
            path.display()
        );
        return Ok(path.canonicalize()?);
    }
    let beside_binary = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.join("sdk")));
    let source_tree = Path::new(env!("CARGO_MANIFEST_DIR")).join("../adapters/sdk");
    beside_binary
        .into_iter()
        .chain([source_tree])
        .find(|p| is_sdk(p))
        .map(|p| Ok(p.canonicalize()?))
        .unwrap_or_else(|| {
            anyhow::bail!(
                "no wharf-adapter-sdk found: pass --sdk PATH (a release tarball's sdk/, or \
                 adapters/sdk in a Wharf checkout) or set {SDK_ENV}; or create the project \
                 with --sdk of any copy and point Cargo.toml at your pinned repository: \
                 wharf-adapter-sdk = {{ git = \"https://your.git.host/wharf.git\", tag = \"...\" }}"
            )
        })
}

fn is_sdk(dir: &Path) -> bool {
    dir.join("wit/adapter.wit").is_file()
        && std::fs::read_to_string(dir.join("Cargo.toml"))
            .is_ok_and(|t| t.contains("name = \"wharf-adapter-sdk\""))
}

/// `cargo build --release --target wasm32-wasip2`, then the component copied to `dist/`.
pub(super) fn build(project: &Project) -> anyhow::Result<()> {
    check_target(&project.dir)?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // Compiler messages as JSON on stdout (to find the artifact, wherever the target dir
    // is), rendered diagnostics on stderr for the author.
    let output = Command::new(&cargo)
        .args([
            "build",
            "--release",
            "--target",
            TARGET,
            "--message-format=json-render-diagnostics",
            "--manifest-path",
        ])
        .arg(project.dir.join("Cargo.toml"))
        .current_dir(&project.dir)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| anyhow::anyhow!("{cargo}: {e} (install Rust: https://rustup.rs)"))?;
    anyhow::ensure!(output.status.success(), "cargo build failed");
    let built = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact")
        .filter(|m| {
            m["target"]["kind"]
                .as_array()
                .is_some_and(|k| k.iter().any(|k| k == "cdylib"))
        })
        .flat_map(|m| {
            m["filenames"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|f| f.as_str().map(PathBuf::from))
                .collect::<Vec<_>>()
        })
        .find(|f| f.extension().is_some_and(|e| e == "wasm"))
        .ok_or_else(|| {
            anyhow::anyhow!(
                "cargo built no .wasm: is `crate-type = [\"cdylib\"]` in Cargo.toml's [lib]?"
            )
        })?;
    std::fs::create_dir_all(project.dir.join("dist"))?;
    std::fs::copy(&built, project.output())
        .map_err(|e| anyhow::anyhow!("{}: {e}", built.display()))?;
    Ok(())
}

/// With rustup at hand, a missing `wasm32-wasip2` target is named with its install command
/// before cargo fails on it less clearly.
fn check_target(dir: &Path) -> anyhow::Result<()> {
    let Ok(listed) = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .current_dir(dir)
        .output()
    else {
        return Ok(()); // No rustup: cargo says what it lacks.
    };
    let installed = String::from_utf8_lossy(&listed.stdout);
    anyhow::ensure!(
        !listed.status.success() || installed.lines().any(|l| l.trim() == TARGET),
        "the Rust target {TARGET} is not installed: run `rustup target add {TARGET}`"
    );
    Ok(())
}
