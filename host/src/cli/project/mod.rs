//! Standalone adapter projects: a folder anywhere (outside this repository too) holding
//! `wharf-adapter.toml`, the adapter's source in Rust, JavaScript or Python, `fixtures/`, a
//! README with the three commands, and a CI script; it builds to `dist/NAME.wasm`.
//!
//! - `manifest`: `wharf-adapter.toml`, what a project is (name, language, WIT version)
//! - `new`: `adapter new NAME --dir DIR`: what a new project holds
//! - `rust`, `js`, `python`: each language's template and build

mod js;
mod manifest;
mod new;
mod python;
mod rust;
mod toolchain;

use std::path::PathBuf;

pub use manifest::{Lang, Project};
pub use new::new_project;

/// Builds `project` into `project.output()` with its language's toolchain; `install`: fetch a
/// missing toolchain (JS, Python) instead of saying how to.
pub fn build(project: &Project, install: bool) -> anyhow::Result<PathBuf> {
    match project.lang {
        Lang::Rust => rust::build(project)?,
        Lang::Js => js::build(project, install)?,
        Lang::Python => python::build(project, install)?,
    }
    let output = project.output();
    anyhow::ensure!(
        output.is_file(),
        "the build finished without writing {}",
        output.display()
    );
    Ok(output)
}
