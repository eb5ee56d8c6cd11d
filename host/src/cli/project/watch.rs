//! `wharf adapter watch [DIR] --into ADAPTERS_DIR`: on every change to a project's sources,
//! build it, run its fixtures, and only when they all pass ship the component and its
//! fixtures into a receiver's adapters folder, where the hot reload vets and serves it.
//!
//! The sources are polled (every file under the project but `target/`, `dist/`,
//! `node_modules/`, `__pycache__/` and dot-folders): polling works the same on every
//! filesystem, and a build is seconds where a poll is milliseconds. Shipping is atomic for the
//! reloader: the fixtures folder first (staged, then renamed into place), then the component
//! (written under a name that is not `*.wasm`, then renamed), so a reload never sees a new
//! component beside old fixtures, nor half a file.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::build::build;
use super::manifest::Project;
use crate::adapter::{Sandbox, SandboxLimits};
use crate::cli::install;
use crate::cli::signing;

/// How often the sources are compared.
const POLL: Duration = Duration::from_millis(500);
/// Folders that hold what builds produce or fetch, never sources.
const SKIPPED: &[&str] = &["target", "dist", "node_modules", "__pycache__"];

/// `adapter watch`'s options.
pub struct Watch {
    /// The receiver's adapters folder (`[adapters] dir`).
    pub into: PathBuf,
    /// One build, test and ship, then exit (non-zero if any step failed): for scripts.
    pub once: bool,
    /// Install a missing JavaScript or Python toolchain.
    pub install_toolchain: bool,
    /// Sign each shipped component with this key (`adapter keygen`), for a receiver that
    /// sets `[adapters] trusted_keys`.
    pub key: Option<PathBuf>,
}

/// Runs `project`'s loop until interrupted (or once).
pub async fn watch(project: &Project, options: &Watch) -> anyhow::Result<()> {
    anyhow::ensure!(
        options.into.is_dir(),
        "--into {}: not a folder (the receiver's [adapters] dir)",
        options.into.display()
    );
    let sandbox = Sandbox::new(SandboxLimits::default(), None)?;
    loop {
        let result = cycle(project, &sandbox, options).await;
        if options.once {
            return result;
        }
        if let Err(e) = result {
            eprintln!("wharf adapter watch: {e:#}");
        }
        println!("watching {} (Ctrl-C to stop)", project.dir.display());
        // The baseline is taken after the cycle: a build may touch its sources (cargo
        // prunes Cargo.lock), which is not a change of the author's.
        let baseline = fingerprint(&project.dir);
        while fingerprint(&project.dir) == baseline {
            tokio::time::sleep(POLL).await;
        }
    }
}

/// Build, test, ship.
async fn cycle(project: &Project, sandbox: &Arc<Sandbox>, options: &Watch) -> anyhow::Result<()> {
    let into = &options.into;
    let built = build(project, options.install_toolchain)?;
    let report = run_fixtures(sandbox, &built, &project.fixtures()).await?;
    anyhow::ensure!(
        report.failed() == 0,
        "{} fixtures failed: not shipped",
        report.failed()
    );
    ship(project, &built, into, options.key.as_deref())?;
    println!(
        "shipped {} into {}",
        built.display(),
        into.join(format!("{}.wasm", project.name)).display()
    );
    Ok(())
}

/// Loads `file` and runs the fixtures in `fixtures` (printing the report), as `adapter test`
/// does.
pub async fn run_fixtures(
    sandbox: &Arc<Sandbox>,
    file: &Path,
    fixtures: &Path,
) -> anyhow::Result<crate::reload::Report> {
    let adapter = Arc::new(sandbox.load(file).await?);
    println!(
        "{} {} ({})",
        adapter.info.name,
        adapter.info.version,
        fixtures.display()
    );
    let report = crate::reload::run_dir(&adapter, fixtures).await?;
    print!("{}", report.render());
    Ok(report)
}

/// Fixtures, then the component, each renamed into place.
fn ship(project: &Project, built: &Path, into: &Path, key: Option<&Path>) -> anyhow::Result<()> {
    let name = &project.name;
    install::replace_dir(&project.fixtures(), &into.join(format!("{name}.fixtures")))?;
    // The signature goes in before the component's rename, which is what the reloader acts
    // on; until then the old component is served (a `.sig` alone that does not match it is
    // refused, and the old file keeps serving).
    if let Some(key) = key {
        let (sig, _) = signing::sign(built, key)?;
        install::replace_file(&sig, &into.join(format!("{name}.wasm.sig")))?;
    }
    install::replace_file(built, &into.join(format!("{name}.wasm")))
}

/// Every source file's path, size and modification time, in a stable order.
fn fingerprint(dir: &Path) -> Vec<(PathBuf, u64, Option<SystemTime>)> {
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, u64, Option<SystemTime>)>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let path = entry.path();
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                if !name.starts_with('.') && !SKIPPED.contains(&name.as_ref()) {
                    walk(&path, out);
                }
            } else {
                out.push((path, meta.len(), meta.modified().ok()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, &mut out);
    out.sort();
    out
}
