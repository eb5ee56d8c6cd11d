//! Adapters written in JavaScript and Python: `wharf adapter new --lang js|python`, then
//! `adapter build --install-toolchain` (the pinned componentize-js / componentize-py, installed
//! into the per-user cache the first time and reused after) and `adapter test`; and the two
//! real providers written that way (Lemon Squeezy in JS, Typeform in Python), built, tested
//! against their fixtures, then dropped into a running receiver and served after the hot reload.

use std::path::{Path, PathBuf};
use std::process::Command;

use hmac::Mac as _;
use sha2::Sha256;

use crate::support::{app::*, files::*, signing::*};

fn run(command: &mut Command) -> String {
    let out = command
        .env("RUST_LOG", "warn")
        .output()
        .expect("command runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{command:?} failed:\n{text}");
    text
}

/// `adapter build --install-toolchain` then `adapter test` in `dir`; the built component.
fn build_and_test(dir: &Path, name: &str) -> PathBuf {
    let wharf = env!("CARGO_BIN_EXE_wharf");
    let built = run(Command::new(wharf)
        .args(["adapter", "build", "--install-toolchain"])
        .current_dir(dir));
    assert!(built.contains(&format!("{name}.wasm")), "{built}");
    let tested = run(Command::new(wharf)
        .args(["adapter", "test"])
        .current_dir(dir));
    assert!(tested.contains("4 passed, 0 failed"), "{tested}");
    dir.join("dist").join(format!("{name}.wasm"))
}

fn new_project_builds_and_passes(lang: &str) {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("demo");
    let name = format!("demo-{lang}");
    run(Command::new(env!("CARGO_BIN_EXE_wharf"))
        .args(["adapter", "new", &name, "--dir"])
        .arg(&project)
        .args(["--lang", lang]));
    let built = build_and_test(&project, &name);
    let checked = run(Command::new(env!("CARGO_BIN_EXE_wharf"))
        .args(["adapter", "check"])
        .arg(&built));
    assert!(
        checked.contains(&format!("\"name\": \"{name}\"")),
        "{checked}"
    );
}

#[test]
fn a_new_js_project_builds_with_the_pinned_toolchain_and_passes_its_fixtures() {
    new_project_builds_and_passes("js");
}

#[test]
fn a_new_python_project_builds_with_the_pinned_toolchain_and_passes_its_fixtures() {
    new_project_builds_and_passes("python");
}

/// Copies a provider's project (its sources and fixtures, not a stale `dist/`) out of the
/// repository, builds and tests it there, then serves it from a running receiver after the
/// hot reload: a signed request is accepted, a forged one refused 401.
async fn provider_serves_after_a_hot_reload(
    rel: &str,
    name: &str,
    secret: &str,
    sign: impl Fn(&[u8], &[u8]) -> Vec<(&'static str, String)>,
    body: &[u8],
    event_type: &str,
) {
    let dir = tempfile::tempdir().unwrap();
    let source = repo_root().join(rel);
    for entry in std::fs::read_dir(&source).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap().to_str().unwrap().to_owned();
        if file == "dist" || file == "__pycache__" {
            continue;
        }
        if path.is_dir() {
            copy_tree(&path, &dir.path().join(&file));
        } else {
            std::fs::copy(&path, dir.path().join(&file)).unwrap();
        }
    }
    let built = build_and_test(dir.path(), name);

    let secrets = format!(
        "{}\n[[{name}]]\nversion = \"v1\"\nvalue = \"{secret}\"\n",
        default_secrets()
    );
    let app = TestApp::builder()
        .secrets_file(secrets)
        .add_endpoints(format!(
            "\n[[endpoint]]\nid = \"{name}\"\nadapter = \"{name}\"\nsecret = \"{name}\"\n"
        ))
        .start()
        .await;
    let adapters = app.config.adapters_dir();
    copy_tree(
        &dir.path().join("fixtures"),
        &adapters.join(format!("{name}.fixtures")),
    );
    install_atomically(
        &adapters.join(format!("{name}.wasm")),
        &std::fs::read(&built).unwrap(),
    );

    let signed = sign(secret.as_bytes(), body);
    let headers: Vec<(&str, &str)> = signed
        .iter()
        .map(|(k, v)| (*k, v.as_str()))
        .chain([("content-type", "application/json")])
        .collect();
    // A debug host compiles a 12-18 MB component in tens of seconds, after its fixtures pass.
    app.post_until_served(name, &headers, body, std::time::Duration::from_secs(240))
        .await;
    let stored: String =
        sqlx::query_scalar("SELECT event_type FROM webhook_inbox WHERE provider = $1")
            .bind(name)
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(stored, event_type);
    // A burst more than the pool's totals held before they were sized for componentize-py's 38
    // core instances a component (576 in all: 15 Python instances at once); every redelivery
    // is answered.
    let burst = (0..24).map(|_| app.post(name, &headers, body.to_vec()));
    for answer in futures::future::join_all(burst).await {
        assert_eq!(answer.status, 200, "{answer:?}");
    }

    let forged = sign(b"not-the-secret", body);
    let headers: Vec<(&str, &str)> = forged
        .iter()
        .map(|(k, v)| (*k, v.as_str()))
        .chain([("content-type", "application/json")])
        .collect();
    app.post(name, &headers, body.to_vec()).await.assert_is(
        401,
        "invalid_signature",
        "a forged signature",
    );
    // The signed body with one byte changed.
    let mut flipped = body.to_vec();
    let at = flipped.len() / 2;
    flipped[at] ^= 1;
    let headers: Vec<(&str, &str)> = signed
        .iter()
        .map(|(k, v)| (*k, v.as_str()))
        .chain([("content-type", "application/json")])
        .collect();
    app.post(name, &headers, flipped).await.assert_is(
        401,
        "invalid_signature",
        "a flipped body byte",
    );
}

fn hmac_sha256(key: &[u8], body: &[u8]) -> Vec<u8> {
    let mut mac = hmac::Hmac::<Sha256>::new_from_slice(key).unwrap();
    mac.update(body);
    mac.finalize().into_bytes().to_vec()
}

#[tokio::test]
async fn lemonsqueezy_in_js_builds_passes_its_fixtures_and_serves_after_a_hot_reload() {
    let body = br#"{"meta":{"event_name":"subscription_updated"},"data":{"type":"subscriptions","id":"77","attributes":{"status":"active","updated_at":"2026-01-02T03:04:05.000000Z"}}}"#;
    provider_serves_after_a_hot_reload(
        "adapters/js/lemonsqueezy",
        "lemonsqueezy",
        "ls-test-secret-abc",
        |key, body| vec![("x-signature", hex::encode(hmac_sha256(key, body)))],
        body,
        "subscription_updated",
    )
    .await;
}

#[tokio::test]
async fn typeform_in_python_builds_passes_its_fixtures_and_serves_after_a_hot_reload() {
    use base64::Engine as _;
    let body = br#"{"event_id":"01J0TESTTESTTESTTESTTESTTE","event_type":"form_response","form_response":{"form_id":"abc123","token":"t0k3n","answers":[]}}"#;
    provider_serves_after_a_hot_reload(
        "adapters/python/typeform",
        "typeform",
        "tf-test-secret-xyz",
        |key, body| {
            let mac = base64::engine::general_purpose::STANDARD.encode(hmac_sha256(key, body));
            vec![("typeform-signature", format!("sha256={mac}"))]
        },
        body,
        "form_response",
    )
    .await;
}

/// Without `--install-toolchain` nothing is downloaded: a missing toolchain stops the build
/// with the command that installs it.
#[test]
fn a_missing_toolchain_is_named_with_the_command_that_installs_it() {
    let cache = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (lang, command) in [
        ("js", "npm install --prefix"),
        ("python", "-m pip install componentize-py=="),
    ] {
        let project = dir.path().join(lang);
        run(Command::new(env!("CARGO_BIN_EXE_wharf"))
            .args(["adapter", "new", "demo", "--dir"])
            .arg(&project)
            .args(["--lang", lang]));
        let out = Command::new(env!("CARGO_BIN_EXE_wharf"))
            .args(["adapter", "build"])
            .current_dir(&project)
            .env("WHARF_TOOLCHAINS", cache.path())
            .env("RUST_LOG", "off")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{lang}: {stderr}");
        assert!(stderr.contains("--install-toolchain"), "{lang}: {stderr}");
        assert!(stderr.contains(command), "{lang}: {stderr}");
        assert!(
            stderr.contains(&cache.path().display().to_string()),
            "{lang}: {stderr}"
        );
        let installed = std::fs::read_dir(cache.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|name| name.starts_with("js-") || name.starts_with("py-"))
            .count();
        assert_eq!(installed, 0, "{lang}: nothing installed");
    }
}

/// The providers' helper modules are the templates' (`adapter new` writes them): a fix to one
/// reaches the other.
#[test]
fn the_providers_helpers_are_the_templates() {
    let root = repo_root();
    for (provider, template) in [
        ("adapters/js/lemonsqueezy/wharf.js", "templates/js/wharf.js"),
        (
            "adapters/python/typeform/wharf.py",
            "templates/python/wharf.py",
        ),
    ] {
        let template = root.join("host/src/cli/project").join(template);
        assert_eq!(
            std::fs::read_to_string(root.join(provider)).unwrap(),
            std::fs::read_to_string(&template).unwrap(),
            "{provider} differs from {}",
            template.display()
        );
    }
}
