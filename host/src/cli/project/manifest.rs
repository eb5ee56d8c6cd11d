//! `wharf-adapter.toml`: what makes a folder an adapter project.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The file that marks a project's root.
pub const MANIFEST: &str = "wharf-adapter.toml";

/// The language a project is written in, which picks its build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    Rust,
    Js,
    Python,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestFile {
    /// The adapter's name, which endpoints name (`adapter = "NAME"`).
    name: String,
    lang: Lang,
    /// The WIT package version the source targets (`wharf:adapter@VERSION`).
    wit: String,
}

/// A project as read from its folder.
#[derive(Debug, Clone)]
pub struct Project {
    pub dir: PathBuf,
    pub name: String,
    pub lang: Lang,
    pub wit: String,
}

impl Project {
    /// Reads `DIR/wharf-adapter.toml`.
    pub fn load(dir: &Path) -> anyhow::Result<Self> {
        let file = dir.join(MANIFEST);
        let text = std::fs::read_to_string(&file).map_err(|e| {
            anyhow::anyhow!(
                "{}: {e} (an adapter project's folder holds {MANIFEST}; `wharf adapter new \
                 NAME --dir DIR` makes one)",
                file.display()
            )
        })?;
        let m: ManifestFile =
            toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
        Ok(Self {
            // Absolute: the builds run tools in other folders (node in the toolchain cache).
            dir: std::path::absolute(dir)?,
            name: m.name,
            lang: m.lang,
            wit: m.wit,
        })
    }

    /// The manifest's text for a new project.
    pub fn manifest_text(name: &str, lang: Lang, wit: &str) -> String {
        let body = toml::to_string(&ManifestFile {
            name: name.to_owned(),
            lang,
            wit: wit.to_owned(),
        })
        .expect("a plain table serializes");
        format!(
            "# An adapter project for Wharf: `wharf adapter build|test|watch` read this file.\n{body}"
        )
    }

    /// Where the build leaves the component.
    pub fn output(&self) -> PathBuf {
        self.dir.join("dist").join(format!("{}.wasm", self.name))
    }

    pub fn fixtures(&self) -> PathBuf {
        self.dir.join("fixtures")
    }
}
