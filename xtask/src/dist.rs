//! `cargo xtask dist`: the release tarball, from a built `wharf` binary and the built adapters.
//!
//! Only `std` and the system's `tar` and `sha256sum`: the black-box test includes this file
//! (`tests/ingest/dist.rs`) and packages the debug binary the test run built, without cargo.
//!
//! ```text
//! wharf-<version>-<target>/
//!   bin/wharf
//!   adapters/<name>.wasm, adapters/<name>.fixtures/   (adapters/dist/, not testing/)
//!   sdk/                     adapters/sdk: the Rust guest SDK, which `bin/wharf adapter new
//!                            --dir` makes new projects depend on
//!   etc/wharf.toml           examples/wharf.toml, paths pointed into the prefix, admin API off
//!   etc/secrets.toml         examples/secrets.toml: demo secrets, to replace
//!   etc/payload-keys.toml    examples/payload-keys.toml: a public dev key, to replace
//!   etc/wharf.env            WHARF_DATABASE_URL for systemd's EnvironmentFile
//!   systemd/wharf.service    packaging/wharf.service
//!   var/cache/               compiled adapters (the only folder the service writes)
//!   README.md                packaging/README.md
//! ```

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

type Result<T = (), E = String> = std::result::Result<T, E>;

/// What to package and where to put it.
pub struct Package<'a> {
    /// The repository: `examples/`, `packaging/`, `adapters/dist/`.
    pub root: &'a Path,
    /// The `wharf` binary to ship; its `--version` names the tarball.
    pub binary: &'a Path,
    /// The target triple in the tarball's name.
    pub target: &'a str,
    /// Where the tarball and its `.sha256` land.
    pub out: &'a Path,
}

/// What `package` made.
pub struct Built {
    pub tarball: PathBuf,
    pub sha256_file: PathBuf,
    /// The folder at the top of the tarball: `wharf-<version>-<target>`.
    pub top: String,
    /// Whether `systemd-analyze verify` checked the unit (false: not installed here).
    pub unit_verified: bool,
}

/// The lines of `examples/wharf.toml` that lead out of the checkout or talk about `wharf dev`,
/// by how they start (after indentation), and what that start becomes in the tarball; relative
/// paths resolve against the config file's folder, `etc/`. Each must match exactly one line,
/// so an edit to the example cannot silently ship a config that does not work from the prefix.
const CONFIG_REWRITES: &[(&str, &str)] = &[
    ("dir = \"../adapters/dist\"", "dir = \"../adapters\""),
    (
        "cache_dir = \"../.wharf-dev/cache\"",
        "cache_dir = \"../var/cache\"",
    ),
    (
        "# url = \"postgres://postgres@127.0.0.1:5432/wharf\"   # unset: `wharf dev` starts its own, and",
        "# url = \"postgres://wharf@127.0.0.1:5432/wharf\"   # or WHARF_DATABASE_URL in wharf.env,",
    ),
    (
        "# commands run beside it use that one (.wharf-dev/database-url)",
        "# which systemd reads: keeps a password out of this file",
    ),
    // The example route sends to the sink only `wharf dev` runs: off in the tarball.
    ("[[route]]", "# [[route]]"),
    ("endpoint = \"*\"", "# endpoint = \"*\""),
    ("events = [\"*\"]", "# events = [\"*\"]"),
    ("sink = \"http\"", "# sink = \"http\""),
    (
        "url = \"http://127.0.0.1:8090/deliveries\"",
        "# url = \"http://127.0.0.1:8090/deliveries\"",
    ),
    // Off in the tarball: the shipped [[wharf-admin]] token is public, so enabling it as
    // shipped would serve /admin/* to anyone who has read the repository.
    (
        "admin_token_secret = \"wharf-admin\"",
        "# admin_token_secret = \"wharf-admin\"",
    ),
];

const CONFIG_HEADER: &str = "\
# Wharf's configuration as installed from the release tarball (README.md: \"What to edit\").
# The endpoints below are demos with public secrets: replace them with yours, and replace
# secrets.toml and payload-keys.toml. The admin API (/admin/*) is off: to serve it, put a
# token of your own (openssl rand -hex 32) as the [[wharf-admin]] set in secrets.toml in place
# of the demo one, then uncomment admin_token_secret below. Check with
#   bin/wharf config check --config etc/wharf.toml
# Relative paths are relative to this file. WHARF_DATABASE_URL, WHARF_LISTEN and
# WHARF_ADMIN_LISTEN override [database] url and the listen addresses.
";

const SECRETS_HEADER: &str = "\
# REPLACE BEFORE USE. These are the public demo secrets of Wharf's repository: anyone can sign
# a request that verifies under them, so `wharf serve` refuses to start while any is here. Put each endpoint's real signing secret here (the
# provider shows it when you register the webhook URL). The file is watched: edits apply
# without a restart. Readable by the service only (root:wharf, 0640).
#
";

const PAYLOAD_KEYS_HEADER: &str = "\
# DEV KEY -- REPLACE BEFORE USE. The key below is public (it is in Wharf's repository), so it
# protects nothing, and `wharf serve` refuses to start with it. Before the first real event, make a key with
#   bin/wharf payloads new-key --id 2026-12
# put the line it prints under [keys] in place of example-1, set current = \"2026-12\", and
# keep a copy outside the database's backups: without it, stored payloads cannot be read.
# docs/operations.md, \"Payload encryption\".
#
";

const ENV_FILE: &str = "\
# Environment for the systemd unit (EnvironmentFile=): read by systemd as root, so this file
# may stay root-only (0600). Keeps the database password out of wharf.toml.
# WHARF_DATABASE_URL=postgres://wharf:PASSWORD@127.0.0.1:5432/wharf
# WHARF_DATABASE_URL=postgres:///wharf?host=/var/run/postgresql
# WHARF_LISTEN=127.0.0.1:8080
# WHARF_ADMIN_LISTEN=127.0.0.1:8081
# RUST_LOG=info
";

/// Builds the tarball and its checksum file from already-built artifacts.
pub fn package(p: &Package) -> Result<Built> {
    let version = binary_version(p.binary)?;
    let top = format!("wharf-{version}-{}", p.target);
    fs::create_dir_all(p.out).map_err(|e| format!("cannot create {}: {e}", p.out.display()))?;
    let staging_parent = p.out.join(format!(".{top}.staging"));
    let _ = fs::remove_dir_all(&staging_parent);
    let staging = staging_parent.join(&top);

    let bin = staging.join("bin").join("wharf");
    mkdir(bin.parent().expect("bin/ has a parent"))?;
    copy(p.binary, &bin)?;
    set_mode(&bin, 0o755)?;

    let count = copy_adapters(
        &p.root.join("adapters").join("dist"),
        &staging.join("adapters"),
    )?;

    copy_sdk(&p.root.join("adapters").join("sdk"), &staging.join("sdk"))?;

    let examples = p.root.join("examples");
    let etc = staging.join("etc");
    mkdir(&etc)?;
    let config = rewrite_config(&read(&examples.join("wharf.toml"))?)?;
    write(&etc.join("wharf.toml"), &config, 0o644)?;
    let secrets = format!("{SECRETS_HEADER}{}", read(&examples.join("secrets.toml"))?);
    write(&etc.join("secrets.toml"), &secrets, 0o640)?;
    let keys = format!(
        "{PAYLOAD_KEYS_HEADER}{}",
        read(&examples.join("payload-keys.toml"))?
    );
    write(&etc.join("payload-keys.toml"), &keys, 0o640)?;
    write(&etc.join("wharf.env"), ENV_FILE, 0o600)?;

    let packaging = p.root.join("packaging");
    let unit = staging.join("systemd").join("wharf.service");
    mkdir(unit.parent().expect("systemd/ has a parent"))?;
    write(&unit, &read(&packaging.join("wharf.service"))?, 0o644)?;
    let unit_verified = verify_unit(&unit, &staging)?;
    write(
        &staging.join("README.md"),
        &read(&packaging.join("README.md"))?
            .replace("{version}", &version)
            .replace("{target}", p.target),
        0o644,
    )?;
    mkdir(&staging.join("var").join("cache"))?;

    let tarball = p.out.join(format!("{top}.tar.gz"));
    let _ = fs::remove_file(&tarball);
    // Owned by root in the archive whoever built it: `tar -x` as root must not hand the
    // files to the builder's uid.
    run(Command::new("tar")
        .args(["--owner=0", "--group=0", "--numeric-owner", "-czf"])
        .arg(&tarball)
        .arg("-C")
        .arg(&staging_parent)
        .arg(&top))?;
    fs::remove_dir_all(&staging_parent)
        .map_err(|e| format!("cannot remove {}: {e}", staging_parent.display()))?;

    let name = format!("{top}.tar.gz");
    let sum = sha256_line(p.out, &name)?;
    let sha256_file = p.out.join(format!("{name}.sha256"));
    fs::write(&sha256_file, sum)
        .map_err(|e| format!("cannot write {}: {e}", sha256_file.display()))?;
    println!("xtask: packaged {count} adapters");
    Ok(Built {
        tarball,
        sha256_file,
        top,
        unit_verified,
    })
}

/// The version `wharf --version` prints (`wharf 0.1.0`): it also proves the binary runs here.
fn binary_version(binary: &Path) -> Result<String> {
    let out = Command::new(binary)
        .arg("--version")
        .output()
        .map_err(|e| format!("cannot run {} --version: {e}", binary.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    match text.trim().strip_prefix("wharf ") {
        Some(v) if out.status.success() && !v.is_empty() && !v.contains(char::is_whitespace) => {
            Ok(v.to_owned())
        }
        _ => Err(format!(
            "{} --version printed {:?}, not `wharf <version>`",
            binary.display(),
            text.trim()
        )),
    }
}

/// The host's target triple from `rustc -vV`, else `<arch>-<os>`.
pub fn host_target() -> String {
    Command::new(std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into()))
        .arg("-vV")
        .output()
        .ok()
        .and_then(|out| {
            String::from_utf8(out.stdout)
                .ok()?
                .lines()
                .find_map(|l| l.strip_prefix("host: ").map(str::to_owned))
        })
        .unwrap_or_else(|| format!("{}-{}", std::env::consts::ARCH, std::env::consts::OS))
}

/// Copies `<name>.wasm` and `<name>.fixtures/` from `dist` (not its `testing/` folder: those
/// adapters misbehave on purpose). Returns how many components.
fn copy_adapters(dist: &Path, dest: &Path) -> Result<usize> {
    mkdir(dest)?;
    let mut count = 0;
    for entry in fs::read_dir(dist).map_err(|e| {
        format!(
            "cannot list {} ({e}): run `cargo xtask adapters`",
            dist.display()
        )
    })? {
        let path = entry
            .map_err(|e| format!("cannot list {}: {e}", dist.display()))?
            .path();
        let name = path.file_name().and_then(OsStr::to_str).unwrap_or_default();
        if name.starts_with('.') {
            continue; // a half-written file of `xtask adapters`
        }
        if path.is_file() && name.ends_with(".wasm") {
            copy(&path, &dest.join(name))?;
            count += 1;
        } else if path.is_dir() && name.ends_with(".fixtures") {
            copy_tree(&path, &dest.join(name))?;
        }
    }
    if count == 0 {
        return Err(format!(
            "no adapters in {}: run `cargo xtask adapters`",
            dist.display()
        ));
    }
    Ok(count)
}

/// The guest SDK's crate: its manifest (which inherits nothing from the adapters workspace, so
/// the copy builds alone), README, sources and the WIT it is generated from.
fn copy_sdk(sdk: &Path, dest: &Path) -> Result {
    mkdir(dest)?;
    for file in ["Cargo.toml", "README.md"] {
        copy(&sdk.join(file), &dest.join(file))?;
    }
    for folder in ["src", "wit"] {
        copy_tree(&sdk.join(folder), &dest.join(folder))?;
    }
    Ok(())
}

/// `examples/wharf.toml` with its header replaced and its paths pointed into the prefix.
fn rewrite_config(example: &str) -> Result<String> {
    // The example's header is its leading comment block; the tarball's says how to install.
    let lines: Vec<&str> = example.lines().skip_while(|l| l.starts_with('#')).collect();
    let mut config = String::from(CONFIG_HEADER);
    let mut found = vec![0; CONFIG_REWRITES.len()];
    for line in lines {
        let text = line.trim_start();
        let indent = &line[..line.len() - text.len()];
        match CONFIG_REWRITES
            .iter()
            .position(|(from, _)| text.starts_with(from))
        {
            Some(i) => {
                let (from, to) = CONFIG_REWRITES[i];
                found[i] += 1;
                // Pad to the old length so trailing comments stay in their column.
                let rest = &text[from.len()..];
                let line = format!("{indent}{to:<width$}{rest}", width = from.len());
                config.push_str(line.trim_end());
            }
            None => config.push_str(line),
        }
        config.push('\n');
    }
    for ((from, _), n) in CONFIG_REWRITES.iter().zip(found) {
        if n != 1 {
            return Err(format!(
                "examples/wharf.toml has {n} lines starting {from:?} (expected one): update \
                 CONFIG_REWRITES in xtask/src/dist.rs"
            ));
        }
    }
    Ok(config)
}

/// `systemd-analyze verify` on a copy of the unit whose paths point into the staging folder
/// (it refuses an ExecStart that does not exist). Any output is a failure: unknown keys are
/// only warned about. Returns false when `systemd-analyze` is not installed.
fn verify_unit(unit: &Path, staging: &Path) -> Result<bool> {
    let dir = staging
        .parent()
        .expect("staging has a parent")
        .join("verify");
    mkdir(&dir)?;
    let copy = dir.join("wharf.service");
    let prefix = staging
        .to_str()
        .ok_or_else(|| format!("{} is not UTF-8", staging.display()))?;
    fs::write(&copy, read(unit)?.replace("/opt/wharf", prefix))
        .map_err(|e| format!("cannot write {}: {e}", copy.display()))?;
    let out = match Command::new("systemd-analyze")
        .arg("verify")
        .arg(&copy)
        .output()
    {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(format!("cannot run systemd-analyze: {e}")),
    };
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() || !said.trim().is_empty() {
        return Err(format!(
            "systemd-analyze verify packaging/wharf.service ({}):\n{said}",
            out.status
        ));
    }
    println!("xtask: systemd-analyze verify: the unit is valid");
    Ok(true)
}

/// `<hex>  <name>\n` as `sha256sum` writes it (so `sha256sum -c` checks it), run in `dir`.
fn sha256_line(dir: &Path, name: &str) -> Result<String> {
    for (program, args) in [("sha256sum", &[][..]), ("shasum", &["-a", "256"][..])] {
        match Command::new(program)
            .args(args)
            .arg(name)
            .current_dir(dir)
            .output()
        {
            Ok(out) if out.status.success() => {
                return String::from_utf8(out.stdout)
                    .map_err(|_| format!("{program} printed non-UTF-8"));
            }
            Ok(out) => return Err(format!("{program} {name} failed ({})", out.status)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("cannot run {program}: {e}")),
        }
    }
    Err("neither sha256sum nor shasum is installed".into())
}

fn run(command: &mut Command) -> Result {
    let status = command
        .status()
        .map_err(|e| format!("cannot run {:?}: {e}", command.get_program()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{:?} failed ({status})", command.get_program()))
    }
}

fn copy_tree(from: &Path, to: &Path) -> Result {
    mkdir(to)?;
    for entry in fs::read_dir(from).map_err(|e| format!("cannot list {}: {e}", from.display()))? {
        let path = entry
            .map_err(|e| format!("cannot list {}: {e}", from.display()))?
            .path();
        let dest = to.join(path.file_name().expect("entry has a name"));
        if path.is_dir() {
            copy_tree(&path, &dest)?;
        } else {
            copy(&path, &dest)?;
        }
    }
    Ok(())
}

fn copy(from: &Path, to: &Path) -> Result {
    fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| format!("cannot copy {} to {}: {e}", from.display(), to.display()))
}

fn mkdir(dir: &Path) -> Result {
    fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))
}

fn read(path: &Path) -> Result<String> {
    fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

fn write(path: &Path, text: &str, mode: u32) -> Result {
    fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    set_mode(path, mode)
}

fn set_mode(path: &Path, mode: u32) -> Result {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        fs::set_permissions(path, fs::Permissions::from_mode(mode))
            .map_err(|e| format!("cannot chmod {}: {e}", path.display()))
    }
    #[cfg(not(unix))]
    {
        let _ = (path, mode);
        Ok(())
    }
}
