//! The JavaScript and Python toolchains (componentize-js, componentize-py), pinned here and
//! kept in a per-user cache: `${WHARF_TOOLCHAINS:-${XDG_CACHE_HOME:-$HOME/.cache}/wharf/toolchains}`.
//! A build checks the cache; a missing toolchain is named with the command that installs it,
//! or installed when asked (`adapter build --install-toolchain`). Also the WIT the binary
//! carries, written beside them, so a project outside this repository needs nothing else.

use std::path::{Path, PathBuf};
use std::process::Command;

/// componentize-js from npm (brings jco); needs Node 18 or later.
pub(super) const COMPONENTIZE_JS: &str = "0.23.0";
/// componentize-py from PyPI, in a virtualenv of its own; needs Python 3.10 or later.
pub(super) const COMPONENTIZE_PY: &str = "0.25.1";

/// The WIT world every project builds against: the one this binary serves.
const ADAPTER_WIT: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../wit/adapter.wit"));
/// Written into an installed toolchain's folder once it is complete.
const MARKER: &str = ".wharf-installed";

/// The two toolchains a build may need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Toolchain {
    Js,
    Python,
}

/// Where toolchains are cached.
pub fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("WHARF_TOOLCHAINS").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    cache.join("wharf").join("toolchains")
}

impl Toolchain {
    fn folder(self) -> String {
        match self {
            Self::Js => format!("js-{COMPONENTIZE_JS}"),
            Self::Python => format!("py-{COMPONENTIZE_PY}"),
        }
    }

    /// The toolchain's folder in the cache.
    pub(super) fn dir(self) -> PathBuf {
        cache_root().join(self.folder())
    }

    fn is_installed(self) -> bool {
        self.dir().join(MARKER).is_file()
    }

    /// The commands that install it by hand, for the error that says it is missing.
    fn install_commands(self) -> String {
        let dir = self.dir();
        let dir = dir.display();
        match self {
            Self::Js => format!(
                "npm install --prefix {dir} @bytecodealliance/componentize-js@{COMPONENTIZE_JS} \
                 && touch {dir}/{MARKER}"
            ),
            Self::Python => format!(
                "python3 -m venv {dir} && {dir}/bin/python -m pip install \
                 componentize-py=={COMPONENTIZE_PY} && touch {dir}/{MARKER}"
            ),
        }
    }

    /// The toolchain's folder, installing it first when missing and `install` is set.
    pub(super) fn ensure(self, install: bool) -> anyhow::Result<PathBuf> {
        if self.is_installed() {
            return Ok(self.dir());
        }
        anyhow::ensure!(
            install,
            "{} is not installed in {}: run `wharf adapter build --install-toolchain`, or \
             install it yourself:\n  {}",
            self.name(),
            cache_root().display(),
            self.install_commands()
        );
        self.install()?;
        Ok(self.dir())
    }

    fn name(self) -> String {
        match self {
            Self::Js => format!("componentize-js {COMPONENTIZE_JS}"),
            Self::Python => format!("componentize-py {COMPONENTIZE_PY}"),
        }
    }

    /// Installs into a fresh folder beside the final one, then renames it into place: a build
    /// interrupted half-way, or two builds installing at once, never leave a broken toolchain.
    fn install(self) -> anyhow::Result<()> {
        let root = cache_root();
        std::fs::create_dir_all(&root)?;
        let staging = root.join(format!(".{}.{}.partial", self.folder(), std::process::id()));
        let _ = std::fs::remove_dir_all(&staging);
        eprintln!("installing {} into {}", self.name(), self.dir().display());
        let result = self.install_into(&staging);
        if let Err(e) = result {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(e);
        }
        std::fs::write(staging.join(MARKER), self.name())?;
        if std::fs::rename(&staging, self.dir()).is_err() {
            // Another build finished first (the folder exists): keep theirs.
            let _ = std::fs::remove_dir_all(&staging);
            anyhow::ensure!(
                self.is_installed(),
                "{} exists but holds no finished install: remove it and build again",
                self.dir().display()
            );
        }
        Ok(())
    }

    fn install_into(self, dir: &Path) -> anyhow::Result<()> {
        match self {
            Self::Js => run(Command::new("npm")
                .args(["install", "--no-audit", "--no-fund", "--prefix"])
                .arg(dir)
                .arg(format!(
                    "@bytecodealliance/componentize-js@{COMPONENTIZE_JS}"
                ))),
            Self::Python => {
                run(Command::new(python()).args(["-m", "venv"]).arg(dir))?;
                // `python -m pip`, never the venv's scripts: their first line names the
                // staging folder, which is renamed afterwards.
                run(Command::new(dir.join("bin/python"))
                    .args([
                        "-m",
                        "pip",
                        "install",
                        "--quiet",
                        "--disable-pip-version-check",
                    ])
                    .arg(format!("componentize-py=={COMPONENTIZE_PY}")))
            }
        }
    }
}

/// The Python the virtualenv is made from: `WHARF_PYTHON`, else `python3`.
fn python() -> String {
    std::env::var("WHARF_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Runs a toolchain command, its output shown to the user.
pub(super) fn run(command: &mut Command) -> anyhow::Result<()> {
    let program = command.get_program().to_string_lossy().into_owned();
    let status = command
        .status()
        .map_err(|e| anyhow::anyhow!("{program}: {e}"))?;
    anyhow::ensure!(status.success(), "{program} failed ({status})");
    Ok(())
}

/// The WIT this binary serves, written into the cache (`wit-VERSION/adapter.wit`) for the
/// toolchains to read; rewritten when it differs.
pub(super) fn wit_file(version: &str) -> anyhow::Result<PathBuf> {
    let dir = cache_root().join(format!("wit-{version}"));
    let file = dir.join("adapter.wit");
    if std::fs::read_to_string(&file).ok().as_deref() != Some(ADAPTER_WIT) {
        std::fs::create_dir_all(&dir)?;
        let tmp = dir.join(format!(".adapter.wit.{}", std::process::id()));
        std::fs::write(&tmp, ADAPTER_WIT)?;
        std::fs::rename(&tmp, &file)?;
    }
    Ok(file)
}
