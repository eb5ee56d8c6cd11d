//! `wharf config check`: every problem `serve` would stop at, printed as `FILE:LINE: message`
//! with the line of the key it is about, without a database.

use std::path::{Path, PathBuf};

use crate::support::{files::*, process::*};

/// A payload key of these tests' own (the examples' is published, and refused).
const TEST_PAYLOAD_KEYS: &str =
    "current = \"test-1\"\n[keys]\ntest-1 = \"Y29uZmlnLWNoZWNrLXRlc3Qta2V5LTMyLWJ5dGVzISE=\"\n";

/// Nothing listens there: the check must not need the database.
const UNUSED_DATABASE: &str = "postgres://postgres@127.0.0.1:1/unused";

/// A config folder: `wharf.toml` (`config`, with `CACHE` replaced by the tests' adapter cache),
/// `secrets.toml` and `adapters/` with the stripe, github and standard-webhooks components.
fn folder(config: &str, secrets: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let adapters = dir.path().join("adapters");
    std::fs::create_dir(&adapters).unwrap();
    for name in ["stripe.wasm", "github.wasm", "standard-webhooks.wasm"] {
        std::fs::copy(adapter_file(name), adapters.join(name)).unwrap();
    }
    let cache = repo_root().join("target/wharf-test-cache");
    let mut config = config.replace("CACHE", &cache.display().to_string());
    // Last, so the line numbers the tests expect stay where they are.
    config.push_str("\n[payloads]\nkey_file = \"payload-keys.toml\"\n");
    std::fs::write(dir.path().join("payload-keys.toml"), TEST_PAYLOAD_KEYS).unwrap();
    std::fs::write(dir.path().join("wharf.toml"), config).unwrap();
    std::fs::write(dir.path().join("secrets.toml"), secrets).unwrap();
    let path = dir.path().join("wharf.toml");
    (dir, path)
}

/// Line numbers below count from here: keep it in step with the tests.
const CONFIG: &str = r#"[server]
listen = "127.0.0.1:0"
plain_http = true

[database]
url = "postgres://postgres@127.0.0.1:1/unused"
commit_timeout_ms = 1500

[adapters]
dir = "adapters"
cache_dir = "CACHE"

[secrets]
file = "secrets.toml"

[[endpoint]]
id = "stripe"
adapter = "stripe"
secret = "stripe"

[[endpoint]]
id = "svix"
adapter = "standard-webhooks"
secret = "svix"
"#;

const SECRETS: &str = r#"[[stripe]]
version = "2"
value = "whsec_stripe_current"

[[stripe]]
version = "1"
value = "whsec_stripe_previous"
expires_at = "2099-01-01T00:00:00Z"

[[svix]]
version = "1"
value = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
"#;

struct Checked {
    ok: bool,
    stdout: String,
    stderr: String,
}

fn check(config: &Path) -> Checked {
    let out = run_wharf(&["config", "check", "--config", config.to_str().unwrap()]);
    Checked {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `wharf config check` on `CONFIG` with each `(from, to)` replaced, beside `SECRETS`:
/// (the folder, the config's path, what the check printed).
fn check_edited(edits: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf, Checked) {
    let config = edits.iter().fold(CONFIG.to_owned(), |config, (from, to)| {
        config.replace(from, to)
    });
    let (dir, path) = folder(&config, SECRETS);
    let checked = check(&path);
    (dir, path, checked)
}

/// The examples hold Wharf's published demo values: the check names each one (never its
/// value) and `serve` refuses them, until they are replaced; then the check passes with its
/// summary.
#[tokio::test]
async fn the_example_config_is_refused_for_its_demo_values_until_they_are_replaced() {
    let dir = tempfile::tempdir().unwrap();
    copy_examples(dir.path());
    let env = [("WHARF_DATABASE_URL", UNUSED_DATABASE)];
    // As `serve` would load it: the examples name no database, the environment does. The
    // global `--config` goes before the subcommand too.
    for args in [
        &["config", "check", "--config", "examples/wharf.toml"][..],
        &["--config", "examples/wharf.toml", "config", "check"],
    ] {
        let out = run_wharf_in(dir.path(), args, &env);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success(), "{stdout}");
        for (set, version) in [
            ("stripe-demo", "2026-11"),
            ("stripe-demo", "2026-10"),
            ("github-demo", "1"),
            ("svix-demo", "1"),
            ("wharf-admin", "demo"),
        ] {
            assert!(
                stdout.contains(&format!(
                    "set {set:?} version {version:?} holds a value published"
                )),
                "{set} {version}: {stdout}"
            );
        }
        assert!(
            stdout.contains("payload key \"example-1\" is the demo key"),
            "{stdout}"
        );
        assert!(
            !stdout.contains("whsec_") && !stdout.contains("ZXhhbXBsZS1vbmx5"),
            "no value printed: {stdout}"
        );
    }
    // `serve` stops before it binds or touches the database.
    let out = run_wharf_in(
        dir.path(),
        &["serve", "--config", "examples/wharf.toml"],
        &env,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("holds a value published in Wharf's examples"),
        "{stderr}"
    );
    assert!(
        stderr.contains("`wharf config check` lists them"),
        "{stderr}"
    );

    // Replaced as the install steps say, the same config passes.
    let examples = dir.path().join("examples");
    let secrets = std::fs::read_to_string(examples.join("secrets.toml")).unwrap();
    let mut fresh = String::new();
    for (n, line) in secrets.lines().enumerate() {
        match line.strip_prefix("value = ") {
            // whsec_ and base64 fits every set's encoding (Svix's too) and the token rules.
            Some(_) => fresh.push_str(&format!(
                "value = \"whsec_{}\"\n",
                base64::Engine::encode(
                    &base64::engine::general_purpose::STANDARD,
                    format!("fresh-secret-of-this-host-{n:04}")
                )
            )),
            None => fresh.push_str(&format!("{line}\n")),
        }
    }
    std::fs::write(examples.join("secrets.toml"), fresh).unwrap();
    std::fs::write(examples.join("payload-keys.toml"), TEST_PAYLOAD_KEYS).unwrap();
    let out = run_wharf_in(
        dir.path(),
        &["config", "check", "--config", "examples/wharf.toml"],
        &env,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(
            "examples/wharf.toml: ok: 3 endpoints, 1 routes, 4 secret sets in examples/secrets.toml"
        ),
        "{stdout}"
    );
    // Without a database anywhere, `serve` would stop: so does the check, at `[database]`.
    let out = run_wharf_in(
        dir.path(),
        &["config", "check", "--config", "examples/wharf.toml"],
        &[],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success());
    let database = line_of(&dir.path().join("examples/wharf.toml"), "[database]");
    assert!(
        stdout.contains(&format!("examples/wharf.toml:{database}: no database url")),
        "{stdout}"
    );
}

/// The line (from 1) of the first line of `path` that starts with `start`.
fn line_of(path: &Path, start: &str) -> usize {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .position(|l| l.starts_with(start))
        .expect("the line is there")
        + 1
}

#[test]
fn every_syntax_error_is_reported_with_its_line() {
    let (_dir, path, checked) = check_edited(&[
        ("commit_timeout_ms = 1500", "commit_timeout_ms = = 1500"),
        ("file = \"secrets.toml\"", "file = secrets.toml"),
    ]);
    assert!(!checked.ok);
    let file = path.display().to_string();
    let lines: Vec<&str> = checked.stdout.lines().collect();
    for line in [7, 14] {
        let at = format!("{file}:{line}: ");
        assert!(
            lines.iter().any(|l| l.starts_with(&at)),
            "{at}\n{}",
            checked.stdout
        );
    }
    assert!(
        lines.iter().all(
            |l| l.starts_with(&format!("{file}:7: ")) || l.starts_with(&format!("{file}:14: "))
        ),
        "{}",
        checked.stdout
    );
    assert!(checked.stderr.contains(" problems"), "{}", checked.stderr);
}

#[test]
fn every_semantic_problem_is_reported_with_the_line_of_its_key() {
    let (_dir, path, checked) = check_edited(&[
        ("commit_timeout_ms = 1500", "commit_timeout_ms = 5000"),
        ("secret = \"svix\"", "secret = \"no-such-set\""),
    ]);
    assert!(!checked.ok, "{}", checked.stdout);
    let file = path.display().to_string();
    let expected = [
        format!("{file}:7: [database] commit_timeout_ms = 5000 is out of range: allowed 1..=1900"),
        format!("{file}:24: endpoint \"svix\": secret set \"no-such-set\" is not in "),
    ];
    for line in &expected {
        assert!(checked.stdout.contains(line), "{line}\n{}", checked.stdout);
    }
    assert!(checked.stderr.contains("2 problems"), "{}", checked.stderr);
}

#[test]
fn secrets_file_problems_are_reported_with_the_secrets_file_line_and_no_value() {
    // A version with both a value and a public key, and one without a version.
    let secrets = SECRETS
        .replace(
            "value = \"whsec_stripe_previous\"",
            "value = \"whsec_stripe_previous\"\npublic_key = \"whpk_also\"",
        )
        .replace("[[svix]]\nversion = \"1\"\n", "[[svix]]\nversion = \"\"\n");
    let (dir, path) = folder(CONFIG, &secrets);
    let checked = check(&path);
    assert!(!checked.ok);
    let file = dir.path().join("secrets.toml").display().to_string();
    for line in [
        format!(
            "{file}:5: set \"stripe\" version \"1\": give exactly one of `value` and `public_key`"
        ),
        format!("{file}:12: set \"svix\": every version needs a unique, non-empty `version`"),
    ] {
        assert!(checked.stdout.contains(&line), "{line}\n{}", checked.stdout);
    }

    // A value of the wrong type: the line, and not the value.
    let secrets = SECRETS.replace("value = \"whsec_stripe_previous\"", "value = 987654321");
    let (dir, path) = folder(CONFIG, &secrets);
    let checked = check(&path);
    assert!(!checked.ok);
    let file = dir.path().join("secrets.toml").display().to_string();
    assert!(
        checked.stdout.contains(&format!(
            "{file}:7: key `value`: invalid type: integer (value withheld)"
        )),
        "{}",
        checked.stdout
    );
    assert!(!checked.stdout.contains("987654321"), "{}", checked.stdout);
    assert!(!checked.stderr.contains("987654321"), "{}", checked.stderr);

    // A value the endpoint's adapter cannot decode (Standard Webhooks: `whsec_` base64): every
    // request would fail, so the check names the version's line, without the value.
    let secrets = SECRETS.replace(
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "whsec_not*base64*at*all",
    );
    let (dir, path) = folder(CONFIG, &secrets);
    let checked = check(&path);
    assert!(!checked.ok);
    let file = dir.path().join("secrets.toml").display().to_string();
    assert!(
        checked.stdout.contains(&format!(
            "{file}:12: secret set \"svix\" version \"1\" cannot be decoded"
        )),
        "{}",
        checked.stdout
    );
    assert!(!checked.stdout.contains("not*base64"), "{}", checked.stdout);
}

#[test]
fn adapter_problems_name_the_endpoint_line() {
    // github signs no timestamp: a tolerance is refused at start. An adapter that is not in
    // the folder is only a warning (the endpoint answers 503 until it arrives).
    let config = format!(
        "{CONFIG}\n[[endpoint]]\nid = \"gh\"\nadapter = \"github\"\nsecret = \"stripe\"\ntolerance_secs = 300\n\n[[endpoint]]\nid = \"later\"\nadapter = \"not-here-yet\"\nsecret = \"stripe\"\n"
    );
    let (_dir, path) = folder(&config, SECRETS);
    let checked = check(&path);
    let file = path.display().to_string();
    assert!(!checked.ok);
    assert!(
        checked
            .stdout
            .contains(&format!("{file}:30: endpoint \"gh\": tolerance_secs/future_tolerance_secs set, but adapter \"github\" signs no timestamp")),
        "{}",
        checked.stdout
    );
    assert!(
        checked.stdout.contains(&format!(
            "{file}:34: warning: endpoint \"later\": adapter \"not-here-yet\" is not loaded"
        )),
        "{}",
        checked.stdout
    );
    assert!(checked.stderr.contains("1 problem"), "{}", checked.stderr);
}

#[test]
fn an_admin_token_that_cannot_authenticate_is_reported_at_its_config_line() {
    let config = CONFIG.replace(
        "plain_http = true\n",
        "plain_http = true\nadmin_token_secret = \"admin\"\n",
    );
    let short = format!("{SECRETS}\n[[admin]]\nversion = \"1\"\nvalue = \"short-admin-token\"\n");
    let (_dir, path) = folder(&config, &short);
    let checked = check(&path);
    assert!(!checked.ok);
    let line = format!(
        "{}:4: [server] admin_token_secret: admin token secret set \"admin\" version \"1\": a \
         token is 32 to 1024 printable ASCII characters",
        path.display()
    );
    assert!(checked.stdout.contains(&line), "{line}\n{}", checked.stdout);
    assert!(
        !checked.stdout.contains("short-admin-token"),
        "{}",
        checked.stdout
    );

    let good = short.replace("short-admin-token", &"a".repeat(40));
    let (_dir, path) = folder(&config, &good);
    let checked = check(&path);
    assert!(checked.ok, "{}", checked.stdout);
}

/// A config error names the file, line and key, and never quotes the text: the line may hold
/// a database password or an `Authorization` header value. `serve` logs it the same way.
#[tokio::test]
async fn a_config_error_names_file_line_and_key_but_never_the_text() {
    // A syntax error on the line of the database URL.
    let (_dir, path, checked) = check_edited(&[(
        "url = \"postgres://postgres@127.0.0.1:1/unused\"",
        "url = postgres://postgres:db-pw-9k2@127.0.0.1:1/unused",
    )]);
    assert!(!checked.ok);
    let served = refused_to_serve(&path).await;
    for shown in [&checked.stdout, &checked.stderr, &served] {
        assert!(!shown.contains("db-pw-9k2"), "{shown}");
    }
    let at = format!("{}:6: key `url`: ", path.display());
    assert!(checked.stdout.contains(&at), "{at}\n{}", checked.stdout);
    assert!(served.contains(&at), "{at}\n{served}");

    // A value of the wrong type: a route's headers written as one string.
    let config = format!(
        "{CONFIG}\n[[route]]\nendpoint = \"stripe\"\nevents = [\"*\"]\nsink = \"http\"\n\
         url = \"http://127.0.0.1:9/x\"\nheaders = \"Authorization: Bearer hdr-pw-4j\"\n"
    );
    let (_dir, path) = folder(&config, SECRETS);
    let checked = check(&path);
    assert!(!checked.ok);
    let served = refused_to_serve(&path).await;
    for shown in [&checked.stdout, &checked.stderr, &served] {
        assert!(!shown.contains("hdr-pw-4j"), "{shown}");
    }
    let at = format!(
        "{}:{}: key `headers`: invalid type: string (value withheld), expected a map",
        path.display(),
        line_of(&path, "headers")
    );
    assert!(checked.stdout.contains(&at), "{at}\n{}", checked.stdout);
    assert!(served.contains(&at), "{at}\n{served}");
}

/// A self-signed certificate for localhost and its key, PEM.
fn self_signed() -> (String, String) {
    let rcgen::CertifiedKey { cert, signing_key } =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    (cert.pem(), signing_key.serialize_pem())
}

/// `[server.tls]` is loaded as `serve` loads it: a pair that does not load is a problem naming
/// the file (no line: the fault is in the PEM file, not the config).
#[test]
fn the_tls_pair_is_loaded_and_a_broken_one_is_reported() {
    let config = format!(
        "{}\n[server.tls]\ncert_file = \"cert.pem\"\nkey_file = \"key.pem\"\n",
        CONFIG.replace("plain_http = true\n", "")
    );
    let (dir, path) = folder(&config, SECRETS);
    let (cert, key) = self_signed();
    let (_, other_key) = self_signed();
    std::fs::write(dir.path().join("cert.pem"), &cert).unwrap();
    std::fs::write(dir.path().join("key.pem"), &key).unwrap();
    let checked = check(&path);
    assert!(checked.ok, "{}{}", checked.stdout, checked.stderr);

    // The key of another certificate.
    std::fs::write(dir.path().join("key.pem"), &other_key).unwrap();
    let checked = check(&path);
    assert!(!checked.ok);
    let key_file = dir.path().join("key.pem");
    let line = format!(
        "{}: [server.tls] key_file {} does not match the certificate in cert_file",
        path.display(),
        key_file.display()
    );
    assert!(checked.stdout.contains(&line), "{line}\n{}", checked.stdout);
    assert!(
        !checked.stdout.contains("PRIVATE KEY"),
        "{}",
        checked.stdout
    );

    // A certificate file that holds no certificate.
    std::fs::write(dir.path().join("key.pem"), &key).unwrap();
    std::fs::write(dir.path().join("cert.pem"), "not a certificate\n").unwrap();
    let checked = check(&path);
    assert!(!checked.ok);
    assert!(
        checked.stdout.contains(&format!(
            "{}: [server.tls] cert_file {}: no CERTIFICATE block",
            path.display(),
            dir.path().join("cert.pem").display()
        )),
        "{}",
        checked.stdout
    );
}

fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Key files open to group or others (and a compiled-adapter cache others may write) are
/// warned of, as ssh would refuse them: by the check, at the key naming the file, and by
/// `serve` at start. The check still passes.
#[tokio::test]
async fn key_files_open_to_group_or_others_are_warned_of() {
    let config = format!(
        "{}\n[server.tls]\ncert_file = \"cert.pem\"\nkey_file = \"key.pem\"\n",
        CONFIG.replace("plain_http = true\n", "")
    );
    let (dir, path) = folder(&config, SECRETS);
    let (cert, key) = self_signed();
    std::fs::write(dir.path().join("cert.pem"), &cert).unwrap();
    std::fs::write(dir.path().join("key.pem"), &key).unwrap();
    let keys = ["secrets.toml", "payload-keys.toml", "key.pem"];
    for (name, mode) in keys.iter().zip([0o600, 0o640, 0o600]) {
        chmod(&dir.path().join(name), mode);
    }
    let checked = check(&path);
    assert!(checked.ok, "{}{}", checked.stdout, checked.stderr);
    assert!(!checked.stdout.contains("warning"), "{}", checked.stdout);

    // The files' group is the test's own: only access for others is loose.
    for (name, mode) in keys.iter().zip([0o644, 0o606, 0o604]) {
        chmod(&dir.path().join(name), mode);
    }
    let checked = check(&path);
    assert!(checked.ok, "{}{}", checked.stdout, checked.stderr);
    let file = path.display();
    for (name, key, mode) in [
        ("secrets.toml", "file = \"secrets.toml\"", "0644"),
        (
            "payload-keys.toml",
            "key_file = \"payload-keys.toml\"",
            "0606",
        ),
        ("key.pem", "key_file = \"key.pem\"", "0604"),
    ] {
        let line = format!(
            "{file}:{}: warning: {} is readable or writable by group or others (mode {mode}); \
             chmod 600 it",
            line_of(&path, key),
            dir.path().join(name).display()
        );
        assert!(checked.stdout.contains(&line), "{line}\n{}", checked.stdout);
    }
    let served = refused_to_serve(&path).await;
    assert!(
        served.contains(&format!(
            "{} is readable or writable by group or others (mode 0644)",
            dir.path().join("secrets.toml").display()
        )),
        "{served}"
    );
}
