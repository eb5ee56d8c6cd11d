//! Rust projects: a standalone crate on the guest SDK, built for `wasm32-wasip2`.

use std::process::Command;

use super::manifest::Project;

/// `(path in the project, contents)` for a new Rust project.
pub(super) fn template(name: &str) -> Vec<(&'static str, String)> {
    vec![
        (
            "Cargo.toml",
            CARGO_TOML.replace("{name}", name).replace(
                "{sdk}",
                concat!(env!("CARGO_MANIFEST_DIR"), "/../adapters/sdk"),
            ),
        ),
        ("src/lib.rs", crate::cli::scaffold::lib_rs(name)),
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

pub(super) fn build(project: &Project) -> anyhow::Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(&cargo)
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
            "--manifest-path",
        ])
        .arg(project.dir.join("Cargo.toml"))
        .status()
        .map_err(|e| anyhow::anyhow!("{cargo}: {e} (install Rust: https://rustup.rs)"))?;
    anyhow::ensure!(status.success(), "cargo build failed");
    let built = project
        .dir
        .join("target/wasm32-wasip2/release")
        .join(format!("{}.wasm", project.name.replace('-', "_")));
    std::fs::create_dir_all(project.dir.join("dist"))?;
    std::fs::copy(&built, project.output())
        .map_err(|e| anyhow::anyhow!("{}: {e}", built.display()))?;
    Ok(())
}
