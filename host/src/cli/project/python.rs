//! Python projects: componentize-py.

use super::manifest::Project;

pub(super) fn template(_name: &str) -> Vec<(&'static str, String)> {
    Vec::new()
}

pub(super) fn build(_project: &Project, _install: bool) -> anyhow::Result<()> {
    anyhow::bail!("Python projects: not built yet")
}
