//! Standalone adapter projects, outside the repository: the SDK packaged and used alone, a
//! project made by `wharf adapter new --dir`, built, tested and run through its own CI script,
//! then shipped by `wharf adapter watch` into the folder `wharf dev --adapters` serves beside
//! the bundled adapters, on every change whose fixtures pass and never otherwise.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use hmac::Mac as _;

use crate::support::{app::*, files::*, process::*, signing::*};

/// The skeleton's placeholder secret, which its fixtures are signed with.
pub const SKELETON_SECRET: &str = "change-me-demo-secret";

/// The environment every project command runs with: the repository's guest build cache
/// (dependencies are not compiled again) and no network (the project's lockfile pins what the
/// cache holds).
pub fn build_env() -> Vec<(&'static str, String)> {
    vec![
        (
            "CARGO_TARGET_DIR",
            repo_root().join("adapters/target").display().to_string(),
        ),
        ("CARGO_NET_OFFLINE", "true".into()),
    ]
}

/// `wharf ARGS` in `dir` with [`build_env`]; its stdout, after asserting success.
pub fn wharf_ok(dir: &Path, args: &[&str]) -> String {
    let env = build_env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let output = run_wharf_in(dir, args, &env);
    assert!(
        output.status.success(),
        "wharf {args:?} in {}:\n{}{}",
        dir.display(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Headers of a request signed as the skeleton's scheme expects, now.
pub fn skeleton_headers(secret: &str, body: &[u8]) -> Vec<(String, String)> {
    let ts = now().to_string();
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("{ts}.").as_bytes());
    mac.update(body);
    let signature = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
    vec![
        ("x-webhook-timestamp".into(), ts),
        ("x-webhook-signature".into(), signature),
        ("content-type".into(), "application/json".into()),
    ]
}

/// `cargo package` of the SDK, unpacked into `into`: the crate as a registry would serve it.
fn packaged_sdk(into: &Path) -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let adapters = repo_root().join("adapters");
    // Its own target folder: `cargo package` rewrites the .crate, and the guest build cache
    // is shared with other tests.
    let out = into.join("package-target");
    let status = Command::new(&cargo)
        .args([
            "package",
            "-p",
            "wharf-adapter-sdk",
            "--allow-dirty",
            "--no-verify",
            "--offline",
        ])
        .env("CARGO_TARGET_DIR", &out)
        .current_dir(&adapters)
        .status()
        .unwrap();
    assert!(status.success(), "cargo package failed");
    let version = sdk_version();
    let file = out.join(format!("package/wharf-adapter-sdk-{version}.crate"));
    let status = Command::new("tar")
        .arg("xzf")
        .arg(&file)
        .arg("-C")
        .arg(into)
        .status()
        .unwrap();
    assert!(status.success(), "tar xzf {}", file.display());
    into.join(format!("wharf-adapter-sdk-{version}"))
}

fn sdk_version() -> String {
    let manifest = std::fs::read_to_string(repo_root().join("adapters/sdk/Cargo.toml")).unwrap();
    let table: toml::Table = manifest.parse().unwrap();
    table["package"]["version"].as_str().unwrap().to_owned()
}

#[test]
fn the_sdk_carries_a_copy_of_the_wit_it_targets_identical_to_the_hosts() {
    let root = repo_root();
    let host = std::fs::read(root.join("wit/adapter.wit")).unwrap();
    let sdk = std::fs::read(root.join("adapters/sdk/wit/adapter.wit")).unwrap();
    assert!(
        host == sdk,
        "adapters/sdk/wit/adapter.wit differs from wit/adapter.wit, the source of truth: \
         copy it (cp wit/adapter.wit adapters/sdk/wit/adapter.wit)"
    );
    // The version names the WIT package it targets: SDK 0.2.x builds wharf:adapter@0.2.0.
    let wit = String::from_utf8(host).unwrap();
    let package = wit
        .lines()
        .find_map(|l| l.strip_prefix("package wharf:adapter@"))
        .and_then(|l| l.strip_suffix(';'))
        .expect("a package line");
    let minor = |v: &str| v.split('.').take(2).collect::<Vec<_>>().join(".");
    assert_eq!(minor(&sdk_version()), minor(package));
}

#[test]
fn the_packaged_sdk_alone_builds_an_adapter_outside_the_repository() {
    let outside = tempfile::tempdir().unwrap();
    let sdk = packaged_sdk(outside.path());
    assert!(sdk.join("wit/adapter.wit").is_file());
    assert!(sdk.join("README.md").is_file());

    let project = outside.path().join("outside");
    let created = wharf_ok(
        outside.path(),
        &[
            "adapter",
            "new",
            "outside",
            "--dir",
            project.to_str().unwrap(),
            "--sdk",
            sdk.to_str().unwrap(),
        ],
    );
    assert!(created.contains("wharf adapter watch"), "{created}");
    let manifest = std::fs::read_to_string(project.join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains(&format!(
            "path = \"{}\"",
            sdk.canonicalize().unwrap().display()
        )),
        "{manifest}"
    );
    for file in [
        "README.md",
        "Cargo.lock",
        "wharf-adapter.toml",
        "fixtures/valid/body",
    ] {
        assert!(project.join(file).is_file(), "{file} missing");
    }
    let readme = std::fs::read_to_string(project.join("README.md")).unwrap();
    for command in [
        "wharf adapter build",
        "wharf adapter test",
        "wharf adapter watch",
    ] {
        assert!(readme.contains(command), "README lacks {command}");
    }

    let unbuilt = run_wharf_in(&project, &["adapter", "test"], &[]);
    let stderr = String::from_utf8_lossy(&unbuilt.stderr);
    assert!(
        !unbuilt.status.success() && stderr.contains("run `wharf adapter build` first"),
        "{stderr}"
    );
    let built = wharf_ok(&project, &["adapter", "build"]);
    assert!(built.contains("wharf:adapter@0.2.0"), "{built}");
    let tested = wharf_ok(&project, &["adapter", "test"]);
    assert!(tested.contains("4 passed, 0 failed"), "{tested}");
    let checked = wharf_ok(&project, &["adapter", "check", "dist/outside.wasm"]);
    assert!(checked.contains("\"name\": \"outside\""), "{checked}");

    // The CI script a team runs: build and fixtures, with `wharf` named by WHARF.
    let ci = project.join("ci.sh");
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&ci).unwrap().permissions().mode();
        assert!(mode & 0o111 != 0, "ci.sh is not executable");
    }
    let output = Command::new(&ci)
        .env("WHARF", env!("CARGO_BIN_EXE_wharf"))
        .envs(build_env())
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && text.contains("4 passed, 0 failed"),
        "ci.sh:\n{text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn a_new_project_without_an_sdk_at_hand_names_the_flag() {
    let outside = tempfile::tempdir().unwrap();
    let output = run_wharf_in(
        outside.path(),
        &[
            "adapter", "new", "nosdk", "--dir", "nosdk", "--sdk", "absent",
        ],
        &[],
    );
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--sdk absent: not the wharf-adapter-sdk crate"),
        "{stderr}"
    );
    let output = run_wharf_in(
        outside.path(),
        &["adapter", "new", "nosdk", "--dir", "nosdk"],
        &[("WHARF_SDK", "/nowhere")],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("WHARF_SDK /nowhere"), "{stderr}");
    assert!(!outside.path().join("nosdk").exists(), "nothing is written");
}

/// Polls until the endpoint answers `status` to freshly signed requests.
async fn wait_for_status(base: &str, endpoint: &str, body: &[u8], status: u16, what: &str) {
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let headers = skeleton_headers(SKELETON_SECRET, body);
        let mut request = client
            .post(format!("{base}/webhooks/{endpoint}"))
            .body(body.to_vec());
        for (k, v) in &headers {
            request = request.header(k, v);
        }
        let answer = request.send().await.unwrap();
        let got = answer.status().as_u16();
        if got == status {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: still {got}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn mtime(path: &Path) -> Option<std::time::SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

#[tokio::test]
async fn watch_ships_only_passing_builds_into_the_folder_wharf_dev_serves_beside_the_bundled_ones()
{
    let outside = tempfile::tempdir().unwrap();
    let project = outside.path().join("watched");
    wharf_ok(
        outside.path(),
        &[
            "adapter",
            "new",
            "watched",
            "--dir",
            project.to_str().unwrap(),
        ],
    );
    // The receiver: `wharf dev` on a config with a database, an endpoint for the new adapter
    // and one for a bundled one, serving `out/` beside its own folder.
    let out = outside.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let written = TestApp::builder()
        .add_secrets(format!(
            "[[watched]]\nversion = \"v1\"\nvalue = \"{SKELETON_SECRET}\"\n"
        ))
        .endpoint("watched", "watched", "watched", "")
        .write_config()
        .await;
    let dev = ServeProcess::start_in(
        outside.path(),
        &["dev", "--adapters", out.to_str().unwrap()],
        &written.config_path,
        None,
        &[],
    )
    .await;
    let merged = outside.path().join(".wharf-dev/adapters");
    assert!(
        merged.join("stripe.wasm").is_file(),
        "bundled adapters merged"
    );
    let body = br#"{"id":"evt_w1","type":"order.created","data":{"id":"ord_1"}}"#;
    wait_for_status(&dev.base, "watched", body, 503, "not served before a ship").await;

    // The watch loop: first cycle ships, and the dev receiver serves it.
    let env = build_env();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _watch = Kill(
        Command::new(env!("CARGO_BIN_EXE_wharf"))
            .args(["adapter", "watch", "--into"])
            .arg(&out)
            .current_dir(&project)
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .env("RUST_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for_status(
        &dev.base,
        "watched",
        body,
        200,
        "served after the first ship",
    )
    .await;
    assert!(out.join("watched.fixtures/valid/body").is_file());
    let shipped_at = mtime(&out.join("watched.wasm"));

    // A change whose fixtures fail is built and tested, and not shipped.
    let expected = project.join("fixtures/valid/expected.toml");
    let good = std::fs::read_to_string(&expected).unwrap();
    std::fs::write(&expected, good.replace("order.created", "order.deleted")).unwrap();
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(
        mtime(&out.join("watched.wasm")),
        shipped_at,
        "a failing build shipped"
    );

    // The next change that passes ships again.
    std::fs::write(&expected, &good).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while mtime(&out.join("watched.wasm")) == shipped_at {
        assert!(
            Instant::now() < deadline,
            "the passing change never shipped"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    wait_for_status(&dev.base, "watched", body, 200, "still served").await;
    dev.stop().await;
}
