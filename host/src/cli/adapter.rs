//! `wharf adapter check|test|status|new|build|watch|keygen|sign`: load and vet an adapter, run
//! its fixtures, ask a running receiver what became of its adapter files, scaffold a new one,
//! build a project and ship it into a receiver's folder on every change, sign one (`signing`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Subcommand;

use super::error::{CliError, SecretsFileError};
use super::project;
use super::scaffold;
use super::signing;
use crate::adapter::{FileStatus, Sandbox, SandboxLimits, WitVersion};
use crate::config::Config;

/// The admin API's bearer token for `wharf adapter status`, when the config is not at hand.
const ADMIN_TOKEN_ENV: &str = "WHARF_ADMIN_TOKEN";

#[derive(Subcommand)]
pub enum AdapterCommand {
    /// Load an adapter, validate it against the world and print its description as JSON
    /// (with its `sha256` and `signer`: a `FILE.sig` beside it is checked); when its fixtures
    /// ship beside it (`NAME.fixtures/`), run them too, as reload does.
    Check { file: PathBuf },
    /// Run an adapter's fixtures through the host's verification path, without a database.
    /// Prints a diff for each failing case and exits non-zero if any fails.
    ///
    /// TARGET is a project folder (its `dist/NAME.wasm` against its `fixtures/`; default: the
    /// current folder) or a `.wasm` file, whose fixtures are FIXTURES or `NAME.fixtures/`.
    Test {
        target: Option<PathBuf>,
        fixtures: Option<PathBuf>,
    },
    /// Show every adapter file a running receiver has seen (from its admin API, with the
    /// token of `[server] admin_token_secret` from the secrets file, or WHARF_ADMIN_TOKEN).
    Status {
        /// The admin listener, `host:port`; defaults to `admin_listen` in the config.
        #[arg(long, env = "WHARF_ADMIN_LISTEN")]
        admin: Option<String>,
    },
    /// Create a working adapter with passing fixtures: with --dir, a standalone project in
    /// that folder (absent or empty); without, a crate in this repository's `adapters/`
    /// workspace.
    New {
        name: String,
        /// The new project's folder; an adapters workspace (a Cargo.toml with `[workspace]`)
        /// gains a member crate instead.
        #[arg(long)]
        dir: Option<PathBuf>,
        /// The project's language.
        #[arg(long, value_enum, default_value = "rust")]
        lang: project::Lang,
        /// Rust: the wharf-adapter-sdk folder the project depends on (default: WHARF_SDK, else
        /// the `sdk/` of the release this binary came from, else its source tree's).
        #[arg(long)]
        sdk: Option<PathBuf>,
    },
    /// Build a project (default: the current folder) into `dist/NAME.wasm`.
    Build {
        dir: Option<PathBuf>,
        /// Install a missing JavaScript or Python toolchain instead of saying how.
        #[arg(long)]
        install_toolchain: bool,
    },
    /// Create a key pair for signing adapters: OUT.key (private, PKCS#8 PEM, mode 0600) and
    /// OUT.pub (the line to list in `[adapters] trusted_keys`). Never overwrites.
    Keygen {
        #[arg(long)]
        out: PathBuf,
    },
    /// Sign an adapter file: writes FILE.sig beside it (Ed25519 over the file's SHA-256).
    Sign {
        file: PathBuf,
        /// The private key, as `adapter keygen` wrote it.
        #[arg(long)]
        key: PathBuf,
    },
    /// On every change to a project's sources (default: the current folder): build, run its
    /// fixtures, and when they all pass copy `NAME.wasm` and `NAME.fixtures/` into a running
    /// receiver's adapters folder (fixtures first, each renamed into place), which hot-reloads it.
    Watch {
        dir: Option<PathBuf>,
        /// The receiver's adapters folder (`[adapters] dir`, or `wharf dev --adapters DIR`).
        #[arg(long)]
        into: PathBuf,
        /// Build, test and ship once, then exit (non-zero when any step fails).
        #[arg(long)]
        once: bool,
        /// Install a missing JavaScript or Python toolchain instead of saying how.
        #[arg(long)]
        install_toolchain: bool,
        /// Sign each shipped file with this key (`adapter keygen`), writing `NAME.wasm.sig`
        /// beside it, for a receiver with `[adapters] trusted_keys`.
        #[arg(long)]
        key: Option<PathBuf>,
    },
}

/// `config` finds the config file, for the one command that reads it (`status`).
pub async fn run(command: AdapterCommand, config: impl FnOnce() -> PathBuf) -> anyhow::Result<()> {
    match command {
        AdapterCommand::Check { file } => {
            // The signature first: a file changed after signing is refused for that.
            let signer = signing::signer_of(&file)?;
            let sandbox = Sandbox::new(SandboxLimits::default(), None)?;
            let adapter = sandbox
                .load(&file)
                .await
                .map_err(|e| anyhow::anyhow!("{}: {e:#}", file.display()))?;
            let adapter = Arc::new(adapter);
            // The description, and the WIT package the file targets beside those this host
            // serves (a file targeting another one is refused by the load above, saying so).
            let mut shown = serde_json::to_value(&adapter.info)?;
            shown["sha256"] = adapter.sha256.clone().into();
            shown["signer"] = signer.to_string().into();
            shown["wit"] = adapter.info.world.clone().into();
            shown["wit_served"] = true.into();
            shown["host_serves"] = WitVersion::served_packages().into();
            println!("{}", serde_json::to_string_pretty(&shown)?);
            eprintln!(
                "{}: targets {}: served by this host (it serves {})",
                file.display(),
                adapter.info.world,
                WitVersion::SERVED.join(", ")
            );
            // The same vetting as a hot reload: a file whose fixtures fail (or that breaks the
            // verification contract on one) would be refused there.
            let fixtures = crate::reload::fixtures_dir(&file);
            if fixtures.is_dir() {
                let report = crate::reload::run_dir(&adapter, &fixtures).await?;
                anyhow::ensure!(report.failed() == 0, "{}", report.summary());
            }
            Ok(())
        }
        AdapterCommand::Test { target, fixtures } => {
            let (file, fixtures) = test_target(target, fixtures)?;
            let sandbox = Sandbox::new(SandboxLimits::default(), None)?;
            let report = project::run_fixtures(&sandbox, &file, &fixtures).await?;
            anyhow::ensure!(report.failed() == 0, "{} fixtures failed", report.failed());
            Ok(())
        }
        AdapterCommand::Status { admin } => status(admin, config).await,
        AdapterCommand::New {
            name,
            dir,
            lang,
            sdk,
        } => {
            let workspace = dir.clone().unwrap_or_else(|| PathBuf::from("adapters"));
            if dir.is_none() || is_workspace(&workspace) {
                anyhow::ensure!(
                    lang == project::Lang::Rust,
                    "the adapters workspace holds Rust crates: give --dir for a {lang:?} project"
                );
                let created = scaffold::new_adapter(&workspace, &name)?;
                println!("created {}", created.display());
                print!("{}", scaffold::next_steps(&workspace, &name));
                return Ok(());
            }
            let dir = dir.expect("checked above");
            project::new_project(&dir, &name, lang, sdk.as_deref())?;
            println!("created {}", dir.display());
            print!("{}", project::next_steps(&dir));
            Ok(())
        }
        AdapterCommand::Build {
            dir,
            install_toolchain,
        } => {
            let project = project::Project::load(&dir.unwrap_or_else(|| PathBuf::from(".")))?;
            let built = project::build(&project, install_toolchain)?;
            println!("built {} (wharf:adapter@{})", built.display(), project.wit);
            Ok(())
        }
        AdapterCommand::Keygen { out } => {
            let (key, public_file, public) = signing::keygen(&out)?;
            println!(
                "wrote {} (secret: keep it out of the adapters folder and of version control)",
                key.display()
            );
            println!(
                "wrote {}: list it in [adapters] trusted_keys",
                public_file.display()
            );
            println!("{public}");
            Ok(())
        }
        AdapterCommand::Sign { file, key } => {
            let (sig, signature) = signing::sign(&file, &key)?;
            println!(
                "wrote {} (sha256 {}, signer {})",
                sig.display(),
                hex::encode(signature.sha256),
                signature.signer
            );
            Ok(())
        }
        AdapterCommand::Watch {
            dir,
            into,
            once,
            install_toolchain,
            key,
        } => {
            let project = project::Project::load(&dir.unwrap_or_else(|| PathBuf::from(".")))?;
            let options = project::Watch {
                into,
                once,
                install_toolchain,
                key,
            };
            project::watch(&project, &options).await
        }
    }
}

/// Whether `dir` is a Cargo workspace with members (the repository's `adapters/`), not a
/// project folder.
fn is_workspace(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("Cargo.toml"))
        .ok()
        .and_then(|t| t.parse::<toml::Table>().ok())
        .is_some_and(|t| t.get("workspace").and_then(|w| w.get("members")).is_some())
}

/// `adapter test`'s component and fixtures folder: a project's, or a file's.
fn test_target(
    target: Option<PathBuf>,
    fixtures: Option<PathBuf>,
) -> anyhow::Result<(PathBuf, PathBuf)> {
    let target = target.unwrap_or_else(|| PathBuf::from("."));
    if target.is_dir() {
        let project = project::Project::load(&target)?;
        let fixtures = fixtures.unwrap_or_else(|| project.fixtures());
        anyhow::ensure!(
            project.output().is_file(),
            "{} is not built yet: run `wharf adapter build` first",
            project.output().display()
        );
        return Ok((project.output(), fixtures));
    }
    let fixtures = fixtures.unwrap_or_else(|| crate::reload::fixtures_dir(&target));
    Ok((target, fixtures))
}

/// Every adapter file a running receiver has seen, one line each.
async fn status(admin: Option<String>, config: impl FnOnce() -> PathBuf) -> anyhow::Result<()> {
    // The bearer token: `WHARF_ADMIN_TOKEN` (never a flag, which `ps` would show), else the
    // newest of the set `[server] admin_token_secret` names, from the secrets file.
    let token = std::env::var(ADMIN_TOKEN_ENV)
        .ok()
        .filter(|t| !t.is_empty());
    // The config only for what the command line does not say.
    let loaded = match (&admin, &token) {
        (Some(_), Some(_)) => None,
        _ => Some(Config::load_unvalidated(&config())?),
    };
    let admin = match (admin, &loaded) {
        (Some(a), _) => a,
        (None, loaded) => loaded
            .as_ref()
            .and_then(|c| c.server.admin_listen)
            .ok_or_else(|| anyhow::anyhow!("no admin_listen in the config: use --admin"))?
            .to_string(),
    };
    let token = match (token, &loaded) {
        (Some(t), _) => t,
        (None, Some(c)) => admin_token(c)?,
        (None, None) => unreachable!("the config is loaded without a token"),
    };
    let files: Vec<FileStatus> = admin_get(&admin, "/admin/adapters", &token).await?;
    println!(
        "{:<28} {:<9} {:<20} {:<14} {:<12} {:<20} error",
        "file", "state", "adapter", "version", "sha256", "signer"
    );
    for f in files {
        println!(
            "{:<28} {:<9} {:<20} {:<14} {:<12} {:<20} {}",
            f.file,
            f.state,
            f.adapter.unwrap_or_default(),
            f.version.unwrap_or_default(),
            f.sha256.as_deref().map_or("", |h| &h[..h.len().min(12)]),
            // The key's first characters, enough to tell keys apart.
            f.signer.as_deref().map_or("", |k| &k[..k.len().min(20)]),
            // The first line: a fixture's whole diff is in the log and the JSON.
            f.last_error
                .as_deref()
                .and_then(|e| e.lines().next())
                .unwrap_or_default()
        );
    }
    Ok(())
}

/// The admin API's bearer token: the newest unexpired version of the set `[server]
/// admin_token_secret` names, from the config's secrets file.
fn admin_token(config: &Config) -> anyhow::Result<String> {
    let set = config.server.admin_token_secret.as_deref().ok_or_else(|| {
        anyhow::anyhow!(
            "no [server] admin_token_secret in the config: the admin API is off (see \
             docs/operations.md, \"Admin API\")"
        )
    })?;
    let file = &config.secrets.file;
    let unusable = |cause| CliError::SecretsFile {
        file: file.clone(),
        cause,
    };
    let text = std::fs::read_to_string(file).map_err(|e| unusable(SecretsFileError::Read(e)))?;
    let secrets =
        crate::ingest::Secrets::parse(&text).map_err(|e| unusable(SecretsFileError::Parse(e)))?;
    Ok(crate::http::client_token(
        &secrets,
        set,
        time::OffsetDateTime::now_utc(),
    )?)
}

/// The admin API's JSON at `path`; its error body's message when it refuses.
async fn admin_get<T: serde::de::DeserializeOwned>(
    addr: &str,
    path: &str,
    token: &str,
) -> anyhow::Result<T> {
    let base = addr.trim_start_matches("http://").trim_end_matches('/');
    let url = format!("http://{base}{path}");
    let response = reqwest::Client::new()
        .get(&url)
        .bearer_auth(token)
        .send()
        .await
        .map_err(|cause| CliError::AdminListener {
            base: base.to_owned(),
            cause,
        })?;
    let status = response.status();
    if !status.is_success() {
        let body: serde_json::Value = response.json().await.unwrap_or_default();
        anyhow::bail!(
            "admin listener {base}: {path} answered {status}: {}",
            body["message"].as_str().unwrap_or("(no message)")
        );
    }
    Ok(response.json().await?)
}
