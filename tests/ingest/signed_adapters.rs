//! Signed adapters (issue 31): `wharf adapter keygen` and `sign` write a key pair and a
//! detached `.sig`; with `[adapters] trusted_keys` set the host loads only files signed by one
//! of those keys, at start and on every reload, and refuses the rest with the reason while the
//! version that served before keeps serving; `adapter check` and `/admin/adapters` show each
//! file's sha256 and signer.

use std::path::Path;
use std::time::{Duration, Instant};

use sha2::Digest;

use crate::support::{app::*, files::*, http::*, process::*, signing::*};

const ENDPOINT: &str =
    "\n[[endpoint]]\nid = \"reload\"\nadapter = \"test-reload\"\nsecret = \"github\"\n";
/// The version string built into `test-reload`, replaced in place to make other versions.
const BUILT_VERSION: &[u8; 10] = b"reload-v00";

fn patched(version: &str) -> Vec<u8> {
    let mut bytes = std::fs::read(adapter_file("testing/test-reload.wasm")).unwrap();
    let at = bytes
        .windows(BUILT_VERSION.len())
        .position(|w| w == BUILT_VERSION)
        .expect("the version string is in the file");
    bytes[at..at + BUILT_VERSION.len()].copy_from_slice(version.as_bytes());
    bytes
}

/// `wharf adapter keygen --out DIR/NAME`: the public key line.
fn keygen(dir: &Path, name: &str) -> String {
    let out = dir.join(name);
    let output = run_wharf(&["adapter", "keygen", "--out", out.to_str().unwrap()]);
    assert_ran(&output, "adapter keygen");
    let public = std::fs::read_to_string(dir.join(format!("{name}.pub"))).unwrap();
    assert_eq!(public.lines().count(), 1, "{public}");
    assert!(public.starts_with("ed25519:"), "{public}");
    public.trim().to_owned()
}

fn sign(file: &Path, key: &Path) {
    let output = run_wharf(&[
        "adapter",
        "sign",
        file.to_str().unwrap(),
        "--key",
        key.to_str().unwrap(),
    ]);
    assert_ran(&output, "adapter sign");
}

/// Sets `[adapters] trusted_keys` to the one key `trusted` in the config file.
fn require_signatures(config: &Path, trusted: &str) {
    let text = std::fs::read_to_string(config).unwrap();
    let text = text.replacen(
        "[adapters]\n",
        &format!("[adapters]\ntrusted_keys = [\"{trusted}\"]\n"),
        1,
    );
    std::fs::write(config, text).unwrap();
}

async fn file_status(app: &TestApp, file: &str) -> serde_json::Value {
    listed(app, file)
        .await
        .unwrap_or_else(|| panic!("{file} is listed"))
}

/// The file's entry in `/admin/adapters`, if the receiver has seen it.
async fn listed(app: &TestApp, file: &str) -> Option<serde_json::Value> {
    let answer = app.admin_get("/admin/adapters").await;
    answer.assert_status(200);
    let files: Vec<serde_json::Value> = serde_json::from_str(&answer.body).unwrap();
    files.into_iter().find(|f| f["file"] == file)
}

/// Polls `/admin/adapters` until `done` holds for the file's status.
async fn wait_for(
    app: &TestApp,
    file: &str,
    what: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status = listed(app, file).await.unwrap_or_default();
        if done(&status) {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {status}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn assert_served(app: &TestApp, delivery: &str) {
    let body = format!("{{\"delivery\":\"{delivery}\"}}").into_bytes();
    let headers = signed_github_headers(&body, delivery);
    let answer = post(&app.client, &app.base, "reload", &refs(&headers), body).await;
    answer.assert_accepted(delivery);
}

#[test]
fn keygen_writes_a_private_key_only_its_owner_reads_and_sign_writes_what_check_shows() {
    let dir = tempfile::tempdir().unwrap();
    let public = keygen(dir.path(), "team");
    let key = dir.path().join("team.key");
    let pem = std::fs::read_to_string(&key).unwrap();
    assert!(
        pem.starts_with("-----BEGIN PRIVATE KEY-----\n"),
        "PKCS#8 PEM"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&key).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }
    // Never overwritten.
    let again = run_wharf(&[
        "adapter",
        "keygen",
        "--out",
        dir.path().join("team").to_str().unwrap(),
    ]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists"));
    assert_eq!(std::fs::read_to_string(&key).unwrap(), pem);

    let wasm = dir.path().join("stripe.wasm");
    std::fs::copy(adapter_file("stripe.wasm"), &wasm).unwrap();
    let check = |what: &str| {
        let output = run_wharf(&["adapter", "check", wasm.to_str().unwrap()]);
        assert_ran(&output, what);
        serde_json::from_slice::<serde_json::Value>(&output.stdout).unwrap()
    };
    let sha256 = hex::encode(sha2::Sha256::digest(std::fs::read(&wasm).unwrap()));
    let unsigned = check("check unsigned");
    assert_eq!(unsigned["signer"], "unsigned");
    assert_eq!(unsigned["sha256"], sha256.as_str());

    sign(&wasm, &key);
    let sig = std::fs::read_to_string(dir.path().join("stripe.wasm.sig")).unwrap();
    assert!(sig.contains(&format!("sha256 = \"{sha256}\"")), "{sig}");
    assert!(sig.contains(&format!("signer = \"{public}\"")), "{sig}");
    let signed = check("check signed");
    assert_eq!(signed["signer"], public.as_str());
    assert_eq!(signed["sha256"], sha256.as_str());

    // A file changed after signing: check refuses it, naming why.
    let mut bytes = std::fs::read(&wasm).unwrap();
    bytes.push(0);
    std::fs::write(&wasm, &bytes).unwrap();
    let output = run_wharf(&["adapter", "check", wasm.to_str().unwrap()]);
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("hash mismatch"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_trusted_keys_only_files_signed_by_them_load_and_a_refused_file_leaves_the_old_one_serving()
 {
    let keys = tempfile::tempdir().unwrap();
    let trusted = keygen(keys.path(), "team");
    let team_key = keys.path().join("team.key");
    let other = keygen(keys.path(), "stranger");
    let stranger_key = keys.path().join("stranger.key");
    let written = TestApp::builder()
        .with_admin()
        .add_adapter_for("testing/test-reload.wasm", ENDPOINT)
        .write_config()
        .await;
    require_signatures(&written.config_path, &trusted);
    let adapters = written.adapters_dir();
    let file = adapters.join("test-reload.wasm");
    sign(&file, &team_key);
    let app = written.start().await;

    // At start: the signed file serves, the unsigned ones beside it are refused.
    let status = file_status(&app, "test-reload.wasm").await;
    assert_eq!(status["state"], "serving", "{status}");
    assert_eq!(status["version"], "reload-v00");
    assert_eq!(status["signer"], trusted.as_str());
    let sha256 = hex::encode(sha2::Sha256::digest(std::fs::read(&file).unwrap()));
    assert_eq!(status["sha256"], sha256.as_str());
    let stripe = file_status(&app, "stripe.wasm").await;
    assert_eq!(stripe["state"], "refused", "{stripe}");
    assert!(
        stripe["last_error"]
            .as_str()
            .unwrap()
            .starts_with("no signature: "),
        "{stripe}"
    );
    assert_served(&app, "signed-at-start").await;

    // An unsigned new version: refused, the signed one keeps serving.
    std::fs::remove_file(adapters.join("test-reload.wasm.sig")).unwrap();
    install_atomically(&file, &patched("reload-v01"));
    let status = wait_for(&app, "test-reload.wasm", "the unsigned file refused", |s| {
        s["last_error"]
            .as_str()
            .is_some_and(|e| e.starts_with("no signature: "))
    })
    .await;
    assert_eq!(status["state"], "serving", "{status}");
    assert_eq!(status["version"], "reload-v00");
    assert_served(&app, "after-unsigned").await;

    // Signed by a key not in trusted_keys: a new .sig alone is a change, and it is refused.
    sign(&file, &stranger_key);
    let status = wait_for(
        &app,
        "test-reload.wasm",
        "the stranger's file refused",
        |s| {
            s["last_error"]
                .as_str()
                .is_some_and(|e| e.starts_with("signer not trusted: ") && e.contains(&other))
        },
    )
    .await;
    assert_eq!(status["version"], "reload-v00");
    assert_eq!(status["signer"], trusted.as_str());
    assert_served(&app, "after-stranger").await;

    // Signed by the trusted key: it serves.
    sign(&file, &team_key);
    let status = wait_for(&app, "test-reload.wasm", "v01 serving", |s| {
        s["version"] == "reload-v01"
    })
    .await;
    assert_eq!(status["last_error"], serde_json::Value::Null);
    assert_eq!(status["signer"], trusted.as_str());
    assert_served(&app, "after-trusted").await;

    // Bytes changed after signing: a hash mismatch, refused; v01 keeps serving.
    install_atomically(&file, &patched("reload-v02"));
    let status = wait_for(&app, "test-reload.wasm", "the changed file refused", |s| {
        s["last_error"]
            .as_str()
            .is_some_and(|e| e.starts_with("hash mismatch: "))
    })
    .await;
    assert_eq!(status["version"], "reload-v01");
    assert_served(&app, "after-tampering").await;

    app.shutdown().await;
}

/// A JSON log line's field (`fields.NAME`, or at the top level).
fn field<'a>(line: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    match &line["fields"][name] {
        serde_json::Value::Null => &line[name],
        value => value,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_load_log_line_and_adapter_status_show_each_files_sha256_and_signer() {
    let keys = tempfile::tempdir().unwrap();
    let trusted = keygen(keys.path(), "team");
    let written = TestApp::builder().with_admin().write_config().await;
    require_signatures(&written.config_path, &trusted);
    let stripe = written.adapters_dir().join("stripe.wasm");
    sign(&stripe, &keys.path().join("team.key"));
    let sha256 = hex::encode(sha2::Sha256::digest(std::fs::read(&stripe).unwrap()));
    let log = written.dir.path().join("wharf.log");
    let server = ServeProcess::start(&written.config_path, Some(&log)).await;

    // The token from the config's secrets file; the listener's port from the process.
    let admin = server.admin.clone().expect("admin listener");
    let status = run_wharf(&[
        "adapter",
        "status",
        "--config",
        written.config_path.to_str().unwrap(),
        "--admin",
        &admin,
    ]);
    assert_ran(&status, "adapter status");
    let table = String::from_utf8(status.stdout).unwrap();
    assert!(table.lines().next().unwrap().contains("signer"), "{table}");
    let row = |file: &str| {
        table
            .lines()
            .find(|l| l.starts_with(file))
            .unwrap_or_else(|| panic!("{file} in {table}"))
            .to_owned()
    };
    assert!(row("stripe.wasm").contains("serving"), "{table}");
    assert!(row("stripe.wasm").contains(&sha256[..12]), "{table}");
    assert!(row("stripe.wasm").contains(&trusted[..20]), "{table}");
    assert!(row("github.wasm").contains("refused"), "{table}");
    assert!(row("github.wasm").contains("no signature"), "{table}");
    server.stop().await;

    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let loaded = lines
        .iter()
        .find(|l| field(l, "message") == "adapter loaded" && field(l, "file") == "stripe.wasm")
        .expect("stripe's load line");
    assert_eq!(field(loaded, "sha256"), sha256.as_str());
    assert_eq!(field(loaded, "signer"), trusted.as_str());
    let refused = lines
        .iter()
        .find(|l| field(l, "file") == "github.wasm" && field(l, "error").is_string())
        .expect("github's refusal line");
    assert!(
        field(refused, "error")
            .as_str()
            .unwrap()
            .starts_with("no signature: "),
        "{refused}"
    );
}

/// The author's loop against a receiver that requires signatures: `adapter watch --key` signs
/// what it ships, so a project built outside the repository is served with its signer shown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_with_a_key_ships_a_project_a_receiver_requiring_signatures_serves() {
    use crate::projects::{SKELETON_SECRET, skeleton_headers, wharf_ok};
    let outside = tempfile::tempdir().unwrap();
    let trusted = keygen(outside.path(), "team");
    let project = outside.path().join("signed");
    wharf_ok(
        outside.path(),
        &[
            "adapter",
            "new",
            "signed",
            "--dir",
            project.to_str().unwrap(),
        ],
    );
    let written = TestApp::builder()
        .with_admin()
        .add_secrets(format!(
            "[[signed]]\nversion = \"v1\"\nvalue = \"{SKELETON_SECRET}\"\n"
        ))
        .endpoint("signed", "signed", "signed", "")
        .write_config()
        .await;
    require_signatures(&written.config_path, &trusted);
    let adapters = written.adapters_dir();
    let app = written.start().await;

    let key = outside.path().join("team.key");
    wharf_ok(
        &project,
        &[
            "adapter",
            "watch",
            "--once",
            "--into",
            adapters.to_str().unwrap(),
            "--key",
            key.to_str().unwrap(),
        ],
    );
    assert!(adapters.join("signed.wasm.sig").is_file());
    let status = wait_for(&app, "signed.wasm", "the signed project serving", |s| {
        s["state"] == "serving"
    })
    .await;
    assert_eq!(status["signer"], trusted.as_str(), "{status}");
    let body = br#"{"id":"evt_s1","type":"order.created","data":{"id":"ord_1"}}"#.to_vec();
    let headers = skeleton_headers(SKELETON_SECRET, &body);
    let answer = post(&app.client, &app.base, "signed", &refs(&headers), body).await;
    answer.assert_accepted("a signed project's event");
    app.shutdown().await;
}
