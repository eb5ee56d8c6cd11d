//! `wharf adapter new NAME --dir DIR [--lang]`: a standalone project that builds, passes its
//! fixtures and says what to run next.

use std::path::Path;

use super::manifest::{Lang, Project};
use super::{js, python, rust};
use crate::cli::scaffold;

/// The WIT package version new projects target.
pub const WIT_VERSION: &str = "0.2.0";

/// Creates the project in `dir`, which must be absent or empty.
pub fn new_project(dir: &Path, name: &str, lang: Lang) -> anyhow::Result<()> {
    scaffold::validate_name(name)?;
    if dir.exists() {
        anyhow::ensure!(
            dir.read_dir()?.next().is_none(),
            "{} exists and is not empty",
            dir.display()
        );
    }
    let files = match lang {
        Lang::Rust => rust::template(name),
        Lang::Js => js::template(name),
        Lang::Python => python::template(name),
    };
    std::fs::create_dir_all(dir)?;
    for (path, text) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().expect("under dir"))?;
        std::fs::write(path, text)?;
    }
    std::fs::write(
        dir.join(super::manifest::MANIFEST),
        Project::manifest_text(name, lang, WIT_VERSION),
    )?;
    scaffold::write_fixtures(&dir.join("fixtures"))?;
    Ok(())
}
