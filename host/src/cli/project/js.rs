//! JavaScript projects: `adapter.js` (the three exports) and `wharf.js` (helpers), built into
//! a component by componentize-js (SpiderMonkey, pre-initialized by Wizer) with every WASI
//! feature disabled: the component imports nothing the host refuses.

use std::process::Command;

use super::manifest::Project;
use super::toolchain::{self, Toolchain};

/// The entry module every JavaScript project builds from.
const ENTRY: &str = "adapter.js";
const ADAPTER_JS: &str = include_str!("templates/js/adapter.js");
const WHARF_JS: &str = include_str!("templates/js/wharf.js");
const GITIGNORE: &str = "dist/\nnode_modules/\n";

/// The node script that calls componentize-js's API (its CLI could not read a WIT path):
/// `node build.mjs TOOLCHAIN SOURCE WIT OUTPUT`.
const BUILD_MJS: &str = r#"import { pathToFileURL } from 'node:url';
import { writeFile, mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
const [toolchain, sourcePath, witPath, out] = process.argv.slice(2);
const entry = `${toolchain}/node_modules/@bytecodealliance/componentize-js/src/componentize.js`;
const { componentize } = await import(pathToFileURL(entry));
const { component } = await componentize({
  sourcePath,
  witPath,
  worldName: 'adapter',
  // No stdio, clocks, randomness or HTTP: the host grants adapters none of them.
  disableFeatures: ['stdio', 'random', 'clocks', 'http', 'fetch-event'],
});
await mkdir(dirname(out), { recursive: true });
await writeFile(out, component);
"#;

/// `(path in the project, contents)` for a new JavaScript project.
pub(super) fn template(name: &str) -> Vec<(&'static str, String)> {
    vec![
        (ENTRY, ADAPTER_JS.replace("{name}", name)),
        ("wharf.js", WHARF_JS.to_owned()),
        (".gitignore", GITIGNORE.to_owned()),
    ]
}

pub(super) fn build(project: &Project, install: bool) -> anyhow::Result<()> {
    let source = project.dir.join(ENTRY);
    anyhow::ensure!(
        source.is_file(),
        "{} is missing: a JavaScript project's exports live there",
        source.display()
    );
    let wit = toolchain::wit_file(&project.wit)?;
    let dir = Toolchain::Js.ensure(install)?;
    let script = dir.join("wharf-build.mjs");
    if std::fs::read_to_string(&script).ok().as_deref() != Some(BUILD_MJS) {
        std::fs::write(&script, BUILD_MJS)?;
    }
    let node = std::env::var("WHARF_NODE").unwrap_or_else(|_| "node".into());
    toolchain::run(
        Command::new(&node)
            .arg(&script)
            .arg(&dir)
            .arg(&source)
            .arg(&wit)
            .arg(project.output())
            .current_dir(&project.dir),
    )
    .map_err(|e| {
        anyhow::anyhow!("{e} (componentize-js: see its output above; it needs Node 18 or later)")
    })
}
