//! The release tarball installed and serving. `cargo xtask dist` builds `wharf` and calls
//! `xtask/src/dist.rs`; this test calls the same file (included below, so no cargo runs
//! inside the test run) on the debug binary the run built, checks the checksum, unpacks the
//! tarball into a temporary prefix the way the README says, and starts the installed binary
//! from `/` with nothing changed but what the docs say to set: the database URL and the
//! listen addresses, through the documented `WHARF_*` overrides. A Stripe event signed with
//! the shipped demo secret is accepted and stored; a forged one is refused.

use std::path::Path;
use std::process::Command;

use crate::support::{
    database::fresh_database, files::repo_root, http::post, process::ServeProcess, signing::*,
};

#[path = "../../xtask/src/dist.rs"]
mod package;

fn run(command: &mut Command) -> String {
    let out = command.output().expect("command runs");
    assert!(
        out.status.success(),
        "{command:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn the_release_tarball_installs_into_a_prefix_and_serves_signed_requests() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let built = package::package(&package::Package {
        root: &repo_root(),
        binary: Path::new(env!("CARGO_BIN_EXE_wharf")),
        target: &package::host_target(),
        out: &out,
    })
    .expect("the tarball is built");
    assert!(built.top.starts_with("wharf-"), "{}", built.top);
    assert_eq!(
        built.unit_verified,
        Command::new("systemd-analyze")
            .arg("--version")
            .output()
            .is_ok(),
        "the unit is verified wherever systemd-analyze is installed"
    );

    // The checksum file checks, as the README's first step does.
    run(Command::new("sha256sum")
        .arg("-c")
        .arg(built.sha256_file.file_name().unwrap())
        .current_dir(&out));
    // Owned by root in the archive, whoever built it.
    let listing = run(Command::new("tar")
        .args(["--numeric-owner", "-tvzf"])
        .arg(&built.tarball));
    assert!(listing.lines().all(|l| l.contains(" 0/0 ")), "{listing}");

    let prefix = dir.path().join("opt-wharf");
    std::fs::create_dir_all(&prefix).unwrap();
    run(Command::new("tar")
        .arg("-xzf")
        .arg(&built.tarball)
        .arg("-C")
        .arg(&prefix)
        .arg("--strip-components=1"));

    // The layout: the bundled adapters with their fixtures, none of the test-only ones.
    let bin = prefix.join("bin/wharf");
    assert!(bin.is_file());
    let adapters = prefix.join("adapters");
    for name in ["stripe", "github", "standard-webhooks"] {
        assert!(adapters.join(format!("{name}.wasm")).is_file(), "{name}");
        assert!(adapters.join(format!("{name}.fixtures")).is_dir(), "{name}");
    }
    let shipped: Vec<String> = std::fs::read_dir(&adapters)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !shipped
            .iter()
            .any(|n| n == "testing" || n.starts_with("test-")),
        "{shipped:?}"
    );
    let keys = std::fs::read_to_string(prefix.join("etc/payload-keys.toml")).unwrap();
    assert!(
        keys.starts_with("# DEV KEY -- REPLACE BEFORE USE"),
        "{keys}"
    );
    let unit = std::fs::read_to_string(prefix.join("systemd/wharf.service")).unwrap();
    for line in [
        "ProtectSystem=strict",
        "NoNewPrivileges=yes",
        "CapabilityBoundingSet=\n",
        "SystemCallFilter=@system-service",
        "ReadWritePaths=/opt/wharf/var",
    ] {
        assert!(unit.contains(line), "the unit has {line:?}");
    }
    assert!(prefix.join("var/cache").is_dir());
    assert!(prefix.join("README.md").is_file());
    // The SDK beside bin/ is what the installed binary's new projects depend on.
    assert!(prefix.join("sdk/wit/adapter.wit").is_file());
    let project = dir.path().join("from-tarball");
    run(Command::new(&bin)
        .args(["adapter", "new", "from-tarball", "--dir"])
        .arg(&project)
        .env_remove("WHARF_SDK")
        .current_dir("/"));
    let manifest = std::fs::read_to_string(project.join("Cargo.toml")).unwrap();
    let sdk = prefix.join("sdk").canonicalize().unwrap();
    assert!(
        manifest.contains(&format!("path = \"{}\"", sdk.display())),
        "{manifest}"
    );

    let config = prefix.join("etc/wharf.toml");
    let database = fresh_database().await;
    let env = [
        ("WHARF_DATABASE_URL", database.as_str()),
        ("WHARF_LISTEN", "127.0.0.1:0"),
        ("WHARF_ADMIN_LISTEN", "127.0.0.1:0"),
    ];
    // As shipped, the demo secrets and payload key are public: `config check` names them and
    // `serve` refuses to start.
    let check = Command::new(&bin)
        .args(["config", "check", "--config"])
        .arg(&config)
        .current_dir("/")
        .envs(env)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(!check.status.success(), "{report}");
    assert!(report.contains("holds a value published"), "{report}");
    assert!(report.contains("is the demo key"), "{report}");
    let refused = Command::new(&bin)
        .args(["serve", "--config"])
        .arg(&config)
        .current_dir("/")
        .envs(env)
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("published in Wharf's examples"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );

    // The install steps: a secret of this host for every set, a payload key of its own.
    let secrets_path = prefix.join("etc/secrets.toml");
    let shipped = std::fs::read_to_string(&secrets_path).unwrap();
    let mut replaced = String::new();
    for (n, line) in shipped.lines().enumerate() {
        match line.strip_prefix("value = ") {
            // whsec_ and base64 fits every set's encoding (Svix's too) and the token rules.
            Some(_) => replaced.push_str(&format!(
                "value = \"whsec_{}\"\n",
                base64::Engine::encode(
                    &base64::engine::general_purpose::STANDARD,
                    format!("{n:03}{}", uuid::Uuid::now_v7().simple())
                )
            )),
            None => replaced.push_str(&format!("{line}\n")),
        }
    }
    std::fs::write(&secrets_path, replaced).unwrap();
    let new_key = run(Command::new(&bin).args(["payloads", "new-key", "--id", "2026-12"]));
    let key_line = new_key
        .lines()
        .find(|l| l.starts_with("\"2026-12\" = "))
        .expect("a [keys] line");
    std::fs::write(
        prefix.join("etc/payload-keys.toml"),
        format!("current = \"2026-12\"\n[keys]\n{key_line}\n"),
    )
    .unwrap();
    run(Command::new(&bin)
        .args(["config", "check", "--config"])
        .arg(&config)
        .current_dir("/")
        .envs(env));

    let log = dir.path().join("serve.log");
    let server = ServeProcess::start_installed(&bin, &config, Some(&log), &env).await;
    let client = reqwest::Client::new();
    let ready = client
        .get(format!(
            "{}/readyz",
            server.admin.as_deref().expect("admin")
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);

    // The admin API is off as shipped: the installed config names no token set, so /admin/*
    // is 404 even with a token of the set.
    let installed = std::fs::read_to_string(&config).unwrap();
    assert!(
        !installed
            .lines()
            .any(|l| l.trim_start().starts_with("admin_token_secret")),
        "{installed}"
    );
    let secrets: toml::Table =
        toml::from_str(&std::fs::read_to_string(&secrets_path).unwrap()).unwrap();
    let demo_token = secrets["wharf-admin"][0]["value"].as_str().unwrap();
    let admin = client
        .get(format!(
            "{}/admin/events",
            server.admin.as_deref().expect("admin")
        ))
        .bearer_auth(demo_token)
        .send()
        .await
        .unwrap();
    assert_eq!(admin.status(), 404);

    // The host's own secret, read from the installed secrets file.
    let secret = secrets["stripe-demo"][0]["value"].as_str().unwrap();

    let body = stripe_event("evt_dist_1");
    let signed = stripe_header(secret, now(), body.as_bytes());
    let headers = [
        ("stripe-signature", signed.as_str()),
        ("content-type", "application/json"),
    ];
    let answer = post(
        &client,
        &server.base,
        "stripe-demo",
        &headers,
        body.clone().into_bytes(),
    )
    .await;
    assert!(
        (200..300).contains(&answer.status),
        "{answer:?}\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );

    let db = sqlx::PgPool::connect(&database).await.unwrap();
    let stored: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM webhook_inbox
         WHERE endpoint_id = 'stripe-demo' AND provider_event_id = 'evt_dist_1'",
    )
    .fetch_one(&db)
    .await
    .unwrap();
    assert_eq!(stored, 1);

    // The same event under a secret the installation does not have: refused, nothing stored.
    let body = stripe_event("evt_dist_forged");
    let forged = stripe_header("whsec_not_the_shipped_one", now(), body.as_bytes());
    let answer = post(
        &client,
        &server.base,
        "stripe-demo",
        &[
            ("stripe-signature", forged.as_str()),
            ("content-type", "application/json"),
        ],
        body.into_bytes(),
    )
    .await;
    assert_eq!(answer.status, 401, "{answer:?}");
    assert_eq!(answer.code(), "invalid_signature");
    let forged_rows: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM webhook_inbox WHERE provider_event_id = 'evt_dist_forged'",
    )
    .fetch_one(&db)
    .await
    .unwrap();
    assert_eq!(forged_rows, 0);

    // The compiled adapters are cached under var/, the one folder the unit makes writable.
    assert!(
        std::fs::read_dir(prefix.join("var/cache"))
            .unwrap()
            .next()
            .is_some(),
        "compiled adapters cached under var/cache"
    );
    assert!(server.stop().await.success());
}
