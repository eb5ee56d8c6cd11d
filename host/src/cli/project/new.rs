//! `wharf adapter new NAME --dir DIR [--lang] [--sdk]`: a standalone project that builds,
//! passes its fixtures and says what to run next.

use std::path::Path;

use super::guide;
use super::js;
use super::manifest::{Lang, Project};
use super::python;
use super::rust;
use crate::cli::scaffold;

/// The WIT package version new projects target.
pub const WIT_VERSION: &str = "0.2.0";

/// Creates the project in `dir`, which must be absent or empty; `sdk`: the Rust SDK's folder
/// (`--sdk`), else found as `rust::sdk_path` says.
pub fn new_project(dir: &Path, name: &str, lang: Lang, sdk: Option<&Path>) -> anyhow::Result<()> {
    scaffold::validate_name(name)?;
    if dir.exists() {
        anyhow::ensure!(
            dir.read_dir()?.next().is_none(),
            "{} exists and is not empty",
            dir.display()
        );
    }
    let files = match lang {
        Lang::Rust => rust::template(name, &rust::sdk_path(sdk)?),
        Lang::Js => js::template(name),
        Lang::Python => python::template(name),
    };
    std::fs::create_dir_all(dir)?;
    let files = files
        .into_iter()
        .map(|(path, text)| (path, text, false))
        .chain(guide::files(name, lang));
    #[cfg_attr(not(unix), allow(unused_variables))]
    for (path, text, executable) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().expect("under dir"))?;
        std::fs::write(&path, text)?;
        #[cfg(unix)]
        if executable {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        }
    }
    std::fs::write(
        dir.join(super::manifest::MANIFEST),
        Project::manifest_text(name, lang, WIT_VERSION),
    )?;
    scaffold::write_fixtures(&dir.join("fixtures"))?;
    Ok(())
}

/// What to run next, as printed by `wharf adapter new --dir`.
pub fn next_steps(dir: &Path) -> String {
    let dir = dir.display();
    format!(
        "next:\n  cd {dir}\n  wharf adapter build    # dist/NAME.wasm\n  \
         wharf adapter test     # the fixtures\n  \
         wharf adapter watch --into ADAPTERS_DIR   # rebuild, test and ship on every change\n"
    )
}
