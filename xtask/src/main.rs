//! Repository automation, run as `cargo xtask <command>` (alias in `.cargo/config.toml`).
//!
//! Only `std`: this crate must build before anything else is set up.

use std::env;
use std::ffi::{OsStr, OsString};
use std::fs;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::thread;
use std::time::{Duration, Instant};

mod chromium;
mod dist;

const USAGE: &str = "\
usage: cargo xtask <command> [args...]

commands:
  adapters        build every adapter component into adapters/dist/<name>.wasm, its fixtures
                  into adapters/dist/<name>.fixtures/ (test-only ones under adapters/dist/testing/)
  test [args...]  build the adapters, test the adapter SDK, make sure Postgres (and, best
                  effort, NATS) are running and Chromium with its driver installed (apt-get,
                  as root, when missing), then `cargo test --workspace [args...]`
  dev [args...]   build the adapters, make sure PostgreSQL is installed, then
                  `cargo run -p wharf -- dev [args...]`
  bench [args...] build the adapters and `wharf` (release; debug with --smoke), make sure
                  Postgres is running, then the end-to-end benchmark `wharf-bench run
                  [args...]` (--quick: short runs; --smoke: a few seconds against the debug
                  build, for CI); the report lands in bench/results/
  dist [--profile release|debug] [--binary PATH] [--out DIR]
                  build the adapters and `wharf` (release unless --profile debug; --binary
                  ships a built one as is), then the install tarball
                  wharf-<version>-<target>.tar.gz and its .sha256 in DIR (default
                  target/dist/): bin/, adapters/, etc/ (config, secrets, payload key: demo
                  values to replace), systemd/wharf.service, README.md
";

const WASM_TARGET: &str = "wasm32-wasip2";
const POSTGRES_ADDR: &str = "127.0.0.1:5432";
const NATS_ADDR: &str = "127.0.0.1:4222";
const DEFAULT_TEST_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

type Result<T = (), E = String> = std::result::Result<T, E>;

fn main() -> ExitCode {
    let mut args = env::args_os().skip(1);
    let command = args.next();
    let rest: Vec<OsString> = args.collect();
    let result = match command.as_deref().and_then(OsStr::to_str) {
        Some("adapters") if rest.is_empty() => adapters().map(|()| ExitCode::SUCCESS),
        Some("test") => test(&rest),
        Some("dev") => dev(&rest),
        Some("bench") => bench(&rest),
        Some("dist") => dist(&rest).map(|()| ExitCode::SUCCESS),
        Some("help" | "-h" | "--help") => {
            print!("{USAGE}");
            Ok(ExitCode::SUCCESS)
        }
        _ => Err(format!("unknown command or arguments\n\n{USAGE}")),
    };
    result.unwrap_or_else(|error| {
        eprintln!("xtask: error: {error}");
        ExitCode::FAILURE
    })
}

fn root() -> PathBuf {
    let xtask = Path::new(env!("CARGO_MANIFEST_DIR"));
    xtask
        .parent()
        .expect("xtask lives inside the repository")
        .to_path_buf()
}

/// The cargo that runs us (same toolchain), or `cargo` from `PATH`.
fn cargo() -> Command {
    Command::new(env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// Builds the guest workspace and copies each component into `adapters/dist/`.
fn adapters() -> Result {
    let root = root();
    let dir = root.join("adapters");
    let target_dir = dir.join("target");

    match run(Command::new("rustup")
        .args(["target", "add", WASM_TARGET])
        .current_dir(&root))
    {
        Err(Failure::NotFound(_)) => {
            warn(&format!(
                "rustup not found; assuming the {WASM_TARGET} target is installed"
            ));
        }
        other => other?,
    }
    // Run from adapters/ with its own target dir, so nothing meant for the host (a
    // CARGO_TARGET_DIR, a `.cargo/config.toml` next to the host) reaches the guest build.
    run(cargo()
        .args(["build", "--release", "--workspace", "--target", WASM_TARGET])
        .arg("--manifest-path")
        .arg(dir.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir)
        .current_dir(&dir))?;

    let built = target_dir.join(WASM_TARGET).join("release");
    let mut count = 0;
    for (group, dist) in [
        ("", dir.join("dist")),
        ("testing", dir.join("dist").join("testing")),
    ] {
        for name in adapter_crates(&dir.join(group))? {
            let artifact = built.join(format!("{}.wasm", name.replace('-', "_")));
            let bytes = fs::read(&artifact)
                .map_err(|e| format!("cannot read built component {}: {e}", artifact.display()))?;
            // Fixtures first: the host runs `<name>.fixtures/` before it swaps in a changed
            // `<name>.wasm`, so they must be in place when the component lands.
            let fixtures = dir.join(group).join(&name).join("fixtures");
            if fixtures.is_dir() {
                copy_fixtures(&fixtures, &dist.join(format!("{name}.fixtures")))?;
            }
            let dest = dist.join(format!("{name}.wasm"));
            let shown = dest
                .strip_prefix(&root)
                .unwrap_or(&dest)
                .display()
                .to_string();
            if fs::read(&dest).is_ok_and(|old| old == bytes) {
                println!("xtask: {shown} unchanged ({} bytes)", bytes.len());
            } else {
                write_atomically(&dest, &bytes)?;
                println!("xtask: wrote {shown} ({} bytes)", bytes.len());
            }
            count += 1;
        }
    }
    if count == 0 {
        return Err(format!("no adapter crates found under {}", dir.display()));
    }
    Ok(())
}

/// Adapter crates directly inside `dir`: subfolders whose `Cargo.toml` builds a `cdylib`.
/// By convention the folder name is the package name and the adapter's `describe().name`.
fn adapter_crates(dir: &Path) -> Result<Vec<String>> {
    let entries = fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    let mut names = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
            .path();
        let Ok(manifest) = fs::read_to_string(path.join("Cargo.toml")) else {
            continue;
        };
        if !manifest.contains("cdylib") {
            continue;
        }
        let name = path
            .file_name()
            .and_then(OsStr::to_str)
            .unwrap_or_default()
            .to_owned();
        let declared = format!("name = \"{name}\"");
        if !manifest.lines().any(|line| line.trim() == declared) {
            return Err(format!(
                "{}: the package must be named after its folder ({declared})",
                path.join("Cargo.toml").display()
            ));
        }
        names.push(name);
    }
    names.sort();
    Ok(names)
}

/// Replaces `dest` with a copy of the fixtures folder `src` (case folders of plain files).
fn copy_fixtures(src: &Path, dest: &Path) -> Result {
    let err = |p: &Path, e: std::io::Error| format!("fixtures {}: {e}", p.display());
    let parent = dest.parent().expect("destination has a parent");
    let temp = parent.join(format!(
        ".{}.tmp",
        dest.file_name()
            .and_then(OsStr::to_str)
            .unwrap_or("fixtures")
    ));
    let _ = fs::remove_dir_all(&temp);
    for case in fs::read_dir(src).map_err(|e| err(src, e))? {
        let case = case.map_err(|e| err(src, e))?.path();
        if !case.is_dir() {
            continue;
        }
        let to = temp.join(case.file_name().expect("entry has a name"));
        fs::create_dir_all(&to).map_err(|e| err(&to, e))?;
        for file in fs::read_dir(&case).map_err(|e| err(&case, e))? {
            let file = file.map_err(|e| err(&case, e))?.path();
            if file.is_file() {
                fs::copy(&file, to.join(file.file_name().expect("entry has a name")))
                    .map_err(|e| err(&file, e))?;
            }
        }
    }
    if dest.exists() {
        fs::remove_dir_all(dest).map_err(|e| err(dest, e))?;
    }
    fs::rename(&temp, dest).map_err(|e| err(dest, e))
}

/// Writes via a temporary file and a rename: the host hot-reloads `*.wasm` from the folder
/// and must never see a half-written component.
fn write_atomically(dest: &Path, bytes: &[u8]) -> Result {
    let parent = dest.parent().expect("destination has a parent");
    fs::create_dir_all(parent).map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    let file_name = dest
        .file_name()
        .and_then(OsStr::to_str)
        .expect("UTF-8 file name");
    let temp = parent.join(format!(".{file_name}.tmp"));
    fs::write(&temp, bytes).map_err(|e| format!("cannot write {}: {e}", temp.display()))?;
    fs::rename(&temp, dest).map_err(|e| format!("cannot move into {}: {e}", dest.display()))
}

fn test(args: &[OsString]) -> Result<ExitCode> {
    let root = root();
    adapters()?;
    let sdk_manifest = root.join("adapters").join("Cargo.toml");
    run(cargo()
        .args(["test", "-p", "wharf-adapter-sdk", "--manifest-path"])
        .arg(&sdk_manifest)
        .arg("--target-dir")
        .arg(root.join("adapters").join("target"))
        .current_dir(root.join("adapters")))?;

    let database_url = match env::var_os("WHARF_TEST_DATABASE_URL") {
        Some(url) => {
            println!("xtask: using WHARF_TEST_DATABASE_URL from the environment");
            url
        }
        None => {
            ensure_postgres()?;
            DEFAULT_TEST_DATABASE_URL.into()
        }
    };
    ensure_nats()?;
    chromium::ensure_chromium()?;

    let mut command = cargo();
    command
        .args(["test", "--workspace"])
        .args(args)
        .env("WHARF_TEST_DATABASE_URL", database_url)
        .current_dir(&root);
    exit_code_of(&mut command)
}

/// Runs a command and passes its exit code on.
fn exit_code_of(command: &mut Command) -> Result<ExitCode> {
    let shown = show(command);
    println!("xtask: $ {shown}");
    let status = command
        .status()
        .map_err(|e| format!("cannot run `{shown}`: {e}"))?;
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        None => {
            eprintln!("xtask: error: `{shown}` was killed ({status})");
            ExitCode::FAILURE
        }
    })
}

/// The end-to-end benchmark (bench/, docs/performance.md). Numbers come from release builds
/// of `wharf` and the generator, built in one cargo call so they share one feature
/// resolution. The smoke uses the debug binaries `cargo test --workspace` builds (CI builds
/// only those): asking for them the way the tests do is a no-op after the tests, where a plain
/// `cargo build -p wharf` would resolve features differently and rebuild half the tree.
fn bench(args: &[OsString]) -> Result<ExitCode> {
    let root = root();
    adapters()?;
    if env::var_os("WHARF_BENCH_DATABASE_URL").is_none() {
        ensure_postgres()?;
    }
    let smoke = args.iter().any(|a| a == "--smoke");
    let target = env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let profile = if smoke {
        run(cargo()
            .args(["test", "--workspace", "--no-run"])
            .current_dir(&root))?;
        "debug"
    } else {
        run(cargo()
            .args(["build", "--release", "-p", "wharf", "--bin", "wharf"])
            .args(["-p", "wharf-bench", "--bin", "wharf-bench"])
            .current_dir(&root))?;
        "release"
    };
    let bin = target.join(profile);
    let shown: Vec<String> = std::iter::once("cargo xtask bench".to_owned())
        .chain(args.iter().map(|a| a.to_string_lossy().into_owned()))
        .collect();
    let mut command = Command::new(bin.join("wharf-bench"));
    command.arg("run");
    if !args
        .iter()
        .any(|a| a.to_string_lossy().starts_with("--wharf"))
    {
        command.arg("--wharf").arg(bin.join("wharf"));
    }
    exit_code_of(
        command
            .args(args)
            .env("WHARF_BENCH_COMMAND", shown.join(" "))
            .current_dir(&root),
    )
}

/// The install tarball (`dist.rs`). The debug profile is for CI, which builds nothing else:
/// its binary is asked for the way the tests build it, as `bench --smoke` does.
fn dist(args: &[OsString]) -> Result {
    let root = root();
    let target = env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let mut profile = "release".to_owned();
    let mut binary = None;
    let mut out = target.join("dist");
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value\n\n{USAGE}"))
        };
        match arg.to_str() {
            Some("--profile") => profile = value("--profile")?.to_string_lossy().into_owned(),
            Some("--binary") => binary = Some(PathBuf::from(value("--binary")?)),
            Some("--out") => out = PathBuf::from(value("--out")?),
            _ => return Err(format!("dist: unknown argument {arg:?}\n\n{USAGE}")),
        }
    }
    if binary.is_none() && !matches!(profile.as_str(), "release" | "debug" | "dev") {
        return Err(format!(
            "dist: unknown profile {profile:?} (release or debug)"
        ));
    }
    adapters()?;
    let binary = match (binary, profile.as_str()) {
        (Some(binary), _) => binary,
        (None, "release") => {
            run(cargo()
                .args(["build", "--release", "-p", "wharf", "--bin", "wharf"])
                .current_dir(&root))?;
            target.join("release").join("wharf")
        }
        (None, "debug" | "dev") => {
            run(cargo()
                .args(["test", "--workspace", "--no-run"])
                .current_dir(&root))?;
            target.join("debug").join("wharf")
        }
        (None, other) => {
            return Err(format!(
                "dist: unknown profile {other:?} (release or debug)"
            ));
        }
    };
    let out = if out.is_relative() {
        env::current_dir()
            .map_err(|e| format!("cannot read the current folder: {e}"))?
            .join(out)
    } else {
        out
    };
    let built = dist::package(&dist::Package {
        root: &root,
        binary: &binary,
        target: &dist::host_target(),
        out: &out,
    })?;
    println!(
        "xtask: wrote {} and {}; installing: {}/README.md inside",
        built.tarball.display(),
        built.sha256_file.display(),
        built.top
    );
    if !built.unit_verified {
        warn("systemd-analyze is not installed here: systemd/wharf.service was not verified");
    }
    Ok(())
}

fn dev(args: &[OsString]) -> Result<ExitCode> {
    let root = root();
    adapters()?;
    let configured = ["WHARF_DATABASE_URL", "DATABASE_URL"]
        .iter()
        .any(|v| env::var_os(v).is_some());
    if !configured && find_initdb().is_none() {
        if is_root() {
            install_postgres()?;
        } else {
            warn("initdb not found and not root: install PostgreSQL or set WHARF_DATABASE_URL");
        }
    }
    let mut command = cargo();
    command
        .args(["run", "-p", "wharf", "--", "dev"])
        .args(args)
        .current_dir(&root);
    let shown = show(&command);
    println!("xtask: $ {shown}");
    // Cargo's `Compiling` lines are all a first build shows for minutes: say what comes after.
    println!(
        "xtask: the first build takes a few minutes; once serving, wharf dev prints the webhook \
         URLs, the console and the next commands"
    );
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt as _;
        let error = command.exec(); // Only returns on failure.
        Err(format!("cannot run `{shown}`: {error}"))
    }
    #[cfg(not(unix))]
    {
        let status = command
            .status()
            .map_err(|e| format!("cannot run `{shown}`: {e}"))?;
        Ok(if status.success() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        })
    }
}

fn ensure_postgres() -> Result {
    if answers(POSTGRES_ADDR) {
        return Ok(());
    }
    println!("xtask: Postgres is not answering on {POSTGRES_ADDR}; starting it");
    if find_program("pg_ctlcluster").is_none() {
        if let Some(initdb) = find_initdb() {
            return Err(format!(
                "Postgres is installed ({}) but not running on {POSTGRES_ADDR}, and there is no \
                 pg_ctlcluster to start it: start it yourself or set WHARF_TEST_DATABASE_URL",
                initdb.display()
            ));
        }
        install_postgres()?;
    }
    let mut versions: Vec<String> = fs::read_dir("/etc/postgresql")
        .map_err(|e| format!("cannot list /etc/postgresql: {e}"))?
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|v| Path::new("/etc/postgresql").join(v).join("main").is_dir())
        .collect();
    versions.sort();
    if versions.is_empty() {
        return Err("no `main` cluster in /etc/postgresql; create one with \
                    `pg_createcluster <version> main`"
            .into());
    }
    let mut failures = Vec::new();
    for version in &versions {
        // Keep going: another version's cluster may be the one on port 5432.
        if let Err(failure) = run(Command::new("pg_ctlcluster").args([
            "--skip-systemctl-redirect",
            version,
            "main",
            "start",
        ])) {
            failures.push(failure.to_string());
        }
    }
    if wait_for(POSTGRES_ADDR, Duration::from_secs(30)) {
        println!("xtask: Postgres is answering on {POSTGRES_ADDR}");
        return Ok(());
    }
    Err(format!(
        "Postgres did not answer on {POSTGRES_ADDR} within 30 s ({}); see /var/log/postgresql/",
        if failures.is_empty() {
            "every cluster started".into()
        } else {
            failures.join("; ")
        }
    ))
}

/// The processing tests publish to JetStream: start NATS when it does not answer.
fn ensure_nats() -> Result {
    if answers(NATS_ADDR) {
        return Ok(());
    }
    let server = Path::new("/usr/sbin/nats-server");
    if !server.exists() {
        return Err(format!(
            "NATS is not answering on {NATS_ADDR} and {} is missing: install nats-server \
             (Debian: apt-get install nats-server) or start one with JetStream (-js) there",
            server.display()
        ));
    }
    println!("xtask: NATS is not answering on {NATS_ADDR}; starting it");
    let _ = fs::create_dir_all("/var/lib/nats-server");
    run(Command::new("start-stop-daemon")
        .args(["--start", "--oknodo", "--background", "--exec"])
        .arg(server)
        .args([
            "--",
            "-a",
            "127.0.0.1",
            "-p",
            "4222",
            "-js",
            "-sd",
            "/var/lib/nats-server",
        ])
        .args(["-l", "/var/log/nats-server.log"]))?;
    if wait_for(NATS_ADDR, Duration::from_secs(10)) {
        println!("xtask: NATS is answering on {NATS_ADDR}");
        Ok(())
    } else {
        Err(format!(
            "NATS did not answer on {NATS_ADDR}; see /var/log/nats-server.log"
        ))
    }
}

fn install_postgres() -> Result {
    if !is_root() {
        return Err(
            "PostgreSQL is not installed: install it (apt-get install postgresql) or \
                    run as root so xtask can"
                .into(),
        );
    }
    println!("xtask: installing PostgreSQL with apt-get");
    run(Command::new("apt-get").arg("update"))?;
    run(Command::new("apt-get")
        .args(["install", "-y", "postgresql"])
        .env("DEBIAN_FRONTEND", "noninteractive"))?;
    Ok(())
}

fn answers(addr: &str) -> bool {
    let addr: SocketAddr = addr.parse().expect("valid socket address");
    TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_ok()
}

fn wait_for(addr: &str, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if answers(addr) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(250));
    }
}

fn find_program(name: &str) -> Option<PathBuf> {
    let path = env::var_os("PATH")?;
    env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
}

/// `initdb` from `PATH`, else the newest under `/usr/lib/postgresql/*/bin` (Debian layout).
fn find_initdb() -> Option<PathBuf> {
    find_program("initdb").or_else(|| {
        let mut found: Vec<PathBuf> = fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .filter_map(|entry| Some(entry.ok()?.path().join("bin").join("initdb")))
            .filter(|p| is_executable(p))
            .collect();
        found.sort_by_key(|p| {
            let version = p
                .iter()
                .nth_back(2)
                .and_then(OsStr::to_str)
                .unwrap_or_default();
            version.parse::<u32>().unwrap_or(0)
        });
        found.pop()
    })
}

fn is_executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        path.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        path.is_file()
    }
}

fn is_root() -> bool {
    fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status
            .lines()
            .find_map(|line| line.strip_prefix("Uid:"))
            .and_then(|uids| uids.split_whitespace().next())
            == Some("0")
    })
}

fn warn(message: &str) {
    eprintln!("xtask: warning: {message}");
}

enum Failure {
    NotFound(String),
    Other(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::NotFound(message) | Failure::Other(message) => f.write_str(message),
        }
    }
}

impl From<Failure> for String {
    fn from(failure: Failure) -> String {
        failure.to_string()
    }
}

/// Runs a command to completion; any failure to start or non-zero exit is an error.
fn run(command: &mut Command) -> Result<(), Failure> {
    let shown = show(command);
    println!("xtask: $ {shown}");
    match command.status() {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(Failure::Other(format!("`{shown}` failed ({status})"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Failure::NotFound(format!(
            "cannot run `{shown}`: program not found"
        ))),
        Err(e) => Err(Failure::Other(format!("cannot run `{shown}`: {e}"))),
    }
}

fn show(command: &Command) -> String {
    let program = Path::new(command.get_program());
    // Show `cargo`, not the toolchain's absolute path from $CARGO.
    let program = program.file_name().unwrap_or(program.as_os_str());
    std::iter::once(program)
        .chain(command.get_args())
        .map(|part| part.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ")
}
