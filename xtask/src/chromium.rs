//! The console's browser tests drive Debian's `chromium` through its `chromedriver`: install
//! both when missing, as Postgres is, so `cargo xtask test` works on a fresh machine.

use std::path::Path;
use std::process::Command;

use super::{Result, is_root, run};

/// Where the tests look for them (tests/support/browser.rs).
const PROGRAMS: [&str; 2] = ["/usr/bin/chromium", "/usr/bin/chromedriver"];

/// Installs `chromium` and `chromium-driver` with apt-get (as root, quietly) unless both are
/// there.
pub fn ensure_chromium() -> Result {
    let missing: Vec<&str> = PROGRAMS
        .into_iter()
        .filter(|p| !Path::new(p).exists())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let missing = missing.join(", ");
    if !is_root() {
        return Err(format!(
            "{missing} missing: the console's browser tests need Debian's chromium and \
             chromium-driver (apt-get install chromium chromium-driver), or run as root so \
             xtask can install them"
        ));
    }
    println!(
        "xtask: {missing} missing; installing chromium and chromium-driver with apt-get \
         (headless Chromium for the console's browser tests)"
    );
    run(Command::new("apt-get").args(["update", "-qq"]))?;
    run(Command::new("apt-get")
        .args(["install", "-y", "-qq", "--no-install-recommends"])
        .args(["chromium", "chromium-driver"])
        .env("DEBIAN_FRONTEND", "noninteractive"))?;
    match PROGRAMS.into_iter().find(|p| !Path::new(p).exists()) {
        None => Ok(()),
        Some(program) => Err(format!(
            "apt-get installed chromium, but {program} is missing"
        )),
    }
}
