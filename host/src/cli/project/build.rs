//! `wharf adapter build`: a project into `dist/NAME.wasm`, with its language's toolchain.

use std::path::PathBuf;

use super::js;
use super::manifest::{Lang, Project};
use super::python;
use super::rust;

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
