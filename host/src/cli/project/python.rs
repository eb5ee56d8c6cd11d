//! Python projects: `app.py` (class `WitWorld`, the three exports) and `wharf.py` (helpers),
//! built into a component by componentize-py (CPython, pre-initialized) with `--stub-wasi`:
//! the WASI imports CPython would bring (sockets, files) are stubbed out, so the component
//! imports nothing the host refuses.

use std::process::Command;

use super::manifest::Project;
use super::toolchain::{self, Toolchain};

/// The module every Python project builds from.
const ENTRY: &str = "app";
const APP_PY: &str = include_str!("templates/python/app.py");
const WHARF_PY: &str = include_str!("templates/python/wharf.py");
const GITIGNORE: &str = "dist/\n__pycache__/\n";

/// `(path in the project, contents)` for a new Python project.
pub(super) fn template(name: &str) -> Vec<(&'static str, String)> {
    vec![
        ("app.py", APP_PY.replace("{name}", name)),
        ("wharf.py", WHARF_PY.to_owned()),
        (".gitignore", GITIGNORE.to_owned()),
    ]
}

pub(super) fn build(project: &Project, install: bool) -> anyhow::Result<()> {
    let source = project.dir.join(format!("{ENTRY}.py"));
    anyhow::ensure!(
        source.is_file(),
        "{} is missing: a Python project's `WitWorld` class lives there",
        source.display()
    );
    let wit = toolchain::wit_file(&project.wit)?;
    let dir = Toolchain::Python.ensure(install)?;
    std::fs::create_dir_all(project.dir.join("dist"))?;
    // The package has no `__main__`; its console script is what this line does, run with the
    // virtualenv's own Python (the scripts' first lines may name another folder).
    toolchain::run(
        Command::new(dir.join("bin/python"))
            .args([
                "-c",
                "import sys; from componentize_py import script; sys.exit(script())",
                "-d",
            ])
            .arg(&wit)
            .args([
                "-w",
                "adapter",
                "componentize",
                "--stub-wasi",
                ENTRY,
                "-p",
                ".",
                "-o",
            ])
            .arg(project.output())
            .current_dir(&project.dir),
    )
}
