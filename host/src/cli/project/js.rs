//! JavaScript projects: componentize-js.

use super::manifest::Project;

pub(super) fn template(_name: &str) -> Vec<(&'static str, String)> {
    Vec::new()
}

pub(super) fn build(_project: &Project, _install: bool) -> anyhow::Result<()> {
    anyhow::bail!("JavaScript projects: not built yet")
}
