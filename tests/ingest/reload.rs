//! Hot reload under steady load: ten replacements of an adapter file, one of them broken and
//! one whose fixtures trap, while a few hundred signed requests per second arrive. No request
//! fails because of a swap, answers after each swap come from the new version (the request
//! log carries it), a request in flight across a swap finishes on the version it started
//! with, and neither the broken file nor the trapping one ever serves. Removing the
//! file unregisters the adapter (503) until it returns. Two files with one adapter name: the
//! first in name order serves, at start and on reload. Fixtures cannot read through symlinks.
//! Folder events alone apply a change promptly, whatever the poll interval.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sha2::Digest;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{app::*, files::*, http::*, process::*, signing::*};

const ENDPOINT: &str =
    "\n[[endpoint]]\nid = \"reload\"\nadapter = \"test-reload\"\nsecret = \"github\"\n";
/// The version string built into `test-reload`; a copy with other bytes in its place is
/// another version (same length, data segment only).
const BUILT_VERSION: &[u8; 10] = b"reload-v00";
const TARGET_RPS: u64 = 300;
const LOAD_WORKERS: u64 = 16;

enum Step {
    Good(&'static str),
    Broken,
    Traps(&'static str),
}

fn patched(version: &str) -> Vec<u8> {
    let mut bytes = std::fs::read(adapter_file("testing/test-reload.wasm")).unwrap();
    let at: Vec<usize> = bytes
        .windows(BUILT_VERSION.len())
        .enumerate()
        .filter(|(_, w)| w == BUILT_VERSION)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(at.len(), 1, "the version string must appear exactly once");
    assert_eq!(version.len(), BUILT_VERSION.len());
    bytes[at[0]..at[0] + BUILT_VERSION.len()].copy_from_slice(version.as_bytes());
    bytes
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(bytes))
}

async fn file_status(client: &reqwest::Client, admin: &str) -> Option<serde_json::Value> {
    let files: Vec<serde_json::Value> = client
        .get(format!("{admin}/admin/adapters"))
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    files.into_iter().find(|f| f["file"] == "test-reload.wasm")
}

/// Polls `/admin/adapters` until `done` holds for the file's status.
async fn wait_for(
    client: &reqwest::Client,
    admin: &str,
    what: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = file_status(client, admin).await
            && done(&status)
        {
            return status;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Sends one delivery, resent as a provider would after a 503 `storage_unavailable`: the
/// database's answer to a commit it could not make in time (a loaded CI host's disk stalls
/// now and then), not the reload's. Any other answer is returned as it came.
async fn send(client: &reqwest::Client, base: &str, delivery: &str) -> Answer {
    let body = format!("{{\"delivery\":\"{delivery}\"}}").into_bytes();
    let headers = signed_github_headers(&body, delivery);
    let mut tries = 0;
    loop {
        let answer = post(client, base, "reload", &refs(&headers), body.clone()).await;
        tries += 1;
        if (answer.status, answer.code()) != (503, "storage_unavailable") || tries == 3 {
            return answer;
        }
        eprintln!("{delivery}: 503 storage_unavailable, resent");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_swaps_under_load_never_fail_a_request_and_never_serve_a_bad_file() {
    let written = TestApp::builder()
        .with_admin()
        .add_adapter_for("testing/test-reload.wasm", ENDPOINT)
        .write_config()
        .await
        // The in-flight request below holds its body across a swap: not cut for its rate.
        .append_server_toml("body_grace_ms = 60000");
    let adapters = written.adapters_dir();
    copy_tree(
        &adapter_file("testing/test-reload.fixtures"),
        &adapters.join("test-reload.fixtures"),
    );
    let file = adapters.join("test-reload.wasm");
    let log = written.dir.path().join("wharf.log");
    let server = ServeProcess::start(&written.config_path, Some(&log)).await;
    let admin = server.admin.clone().expect("admin listener");
    let client = admin_client();
    wait_for(&client, &admin, "the first version", |s| {
        s["version"] == "reload-v00"
    })
    .await;

    // Steady load: every answer is recorded; every one must be a 200.
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let mut workers = Vec::new();
    for w in 0..LOAD_WORKERS {
        let (client, base, stop, sent) = (
            client.clone(),
            server.base.clone(),
            Arc::clone(&stop),
            Arc::clone(&sent),
        );
        workers.push(tokio::spawn(async move {
            let mut failures = Vec::new();
            let mut tick =
                tokio::time::interval(Duration::from_micros(1_000_000 * LOAD_WORKERS / TARGET_RPS));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                tick.tick().await;
                let answer = send(&client, &base, &format!("load-{w}-{n}")).await;
                sent.fetch_add(1, Ordering::Relaxed);
                if answer.status != 200 {
                    failures.push(format!("load-{w}-{n}: {answer:?}"));
                }
                n += 1;
            }
            failures
        }));
    }
    let started = Instant::now();
    tokio::time::sleep(Duration::from_millis(500)).await;

    let steps = [
        Step::Good("reload-v01"),
        Step::Good("reload-v02"),
        Step::Good("reload-v03"),
        Step::Broken,
        Step::Good("reload-v04"),
        Step::Good("reload-v05"),
        Step::Traps("reload-t06"),
        Step::Good("reload-v07"),
        Step::Good("reload-v08"),
        Step::Good("reload-v09"),
    ];
    // A request in flight across the first swap: admitted (its adapter chosen) on v00, its
    // body finished after v01 serves. It must finish on v00.
    let inflight_body = b"{\"delivery\":\"inflight\"}".to_vec();
    let mut inflight = tokio::net::TcpStream::connect(server.base.trim_start_matches("http://"))
        .await
        .unwrap();
    let mut head = format!(
        "POST /webhooks/reload HTTP/1.1\r\nhost: wharf\r\ncontent-length: {}\r\nconnection: close\r\n",
        inflight_body.len()
    );
    for (name, value) in signed_github_headers(&inflight_body, "inflight") {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    inflight.write_all(head.as_bytes()).await.unwrap();
    inflight.write_all(&inflight_body[..5]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;

    let mut serving = "reload-v00";
    // (delivery id, version that must have served it)
    let mut markers: Vec<(String, &str)> = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        match step {
            Step::Good(version) => {
                install_atomically(&file, &patched(version));
                wait_for(&client, &admin, version, |s| s["version"] == *version).await;
                if serving == "reload-v00" {
                    inflight.write_all(&inflight_body[5..]).await.unwrap();
                    let mut answer = Vec::new();
                    inflight.read_to_end(&mut answer).await.unwrap();
                    let answer = String::from_utf8_lossy(&answer);
                    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
                    markers.push(("inflight".into(), "reload-v00"));
                }
                serving = version;
            }
            Step::Broken | Step::Traps(_) => {
                let bytes = match step {
                    Step::Traps(version) => patched(version),
                    _ => b"\0asm\x0d\0\x01\0 not a component".to_vec(),
                };
                let sha = sha256(&bytes);
                install_atomically(&file, &bytes);
                let status = wait_for(&client, &admin, "the refusal", |s| {
                    s["last_attempt_sha256"] == sha.as_str()
                })
                .await;
                assert_eq!(status["version"], serving, "{status}");
                assert_eq!(status["state"], "serving", "{status}");
                assert!(status["last_error"].is_string(), "{status}");
            }
        }
        for k in 0..5 {
            let delivery = format!("mark-{i}-{k}");
            let answer = send(&client, &server.base, &delivery).await;
            assert_eq!(answer.status, 200, "{delivery} after step {i}: {answer:?}");
            markers.push((delivery, serving));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    stop.store(true, Ordering::Relaxed);
    let mut failures = Vec::new();
    for worker in workers {
        failures.extend(worker.await.unwrap());
    }
    let elapsed = started.elapsed().as_secs_f64();
    let total = sent.load(Ordering::Relaxed);
    let rate = total as f64 / elapsed;
    eprintln!("load: {total} requests in {elapsed:.1} s ({rate:.0}/s) across ten swaps");
    assert!(
        failures.is_empty(),
        "{} failed: {failures:?}",
        failures.len()
    );
    assert!(
        rate > 100.0,
        "the load was too light to mean much: {rate:.0}/s"
    );

    // Removing the file unregisters the adapter until it returns.
    std::fs::remove_file(&file).unwrap();
    wait_for(&client, &admin, "the removal", |s| s["state"] == "removed").await;
    let answer = send(&client, &server.base, "while-removed").await;
    answer.assert_is(503, "adapter_unavailable", "");
    install_atomically(&file, &patched("reload-v10"));
    wait_for(&client, &admin, "the return", |s| {
        s["version"] == "reload-v10"
    })
    .await;
    let answer = send(&client, &server.base, "after-return").await;
    assert_eq!(answer.status, 200, "{answer:?}");
    markers.push(("after-return".into(), "reload-v10"));

    let metrics = get_text(&client, &format!("{admin}/metrics")).await;
    for (result, count) in [("loaded", 10), ("failed", 2), ("removed", 1)] {
        let line = format!(
            "wharf_adapter_reloads_total{{adapter=\"test-reload\",result=\"{result}\"}} {count}"
        );
        assert!(metrics.contains(&line), "{line} not in\n{metrics}");
    }

    // What an operator sees.
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_wharf"))
        .args(["adapter", "status", "--admin", &admin, "--config"])
        .arg(&written.config_path)
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&status.stdout);
    assert!(status.status.success(), "{shown}");
    let row = shown
        .lines()
        .find(|l| l.starts_with("test-reload.wasm"))
        .unwrap_or_else(|| panic!("no row for the file:\n{shown}"));
    assert!(
        row.contains("serving") && row.contains("reload-v10"),
        "{row}"
    );

    assert!(server.stop().await.success());
    check_log(&log, &markers);
}

fn check_log(log: &Path, markers: &[(String, &str)]) {
    let text = std::fs::read_to_string(log).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let requests: Vec<&serde_json::Value> =
        lines.iter().filter(|l| l["message"] == "webhook").collect();
    for (delivery, version) in markers {
        let line = requests
            .iter()
            .find(|l| l["event_id"] == delivery.as_str())
            .unwrap_or_else(|| panic!("no request line for {delivery}"));
        assert_eq!(line["adapter_version"], *version, "{delivery}: {line}");
    }
    for line in &requests {
        let version = line["adapter_version"].as_str().unwrap_or_default();
        assert!(
            version.is_empty() || version.starts_with("reload-v"),
            "a refused version served: {line}"
        );
    }
    let refusals = lines
        .iter()
        .filter(|l| {
            l["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("adapter file refused"))
        })
        .count();
    assert_eq!(refusals, 2, "one log line per refused file");
    assert!(
        text.contains("this version traps"),
        "the trapping version's panic message is reported"
    );
}

#[tokio::test]
async fn a_file_refused_at_start_serves_once_fixed_and_a_second_file_cannot_take_a_name() {
    let written = TestApp::builder().with_admin().write_config().await;
    let adapters = written.adapters_dir();
    let github = adapters.join("github.wasm");
    std::fs::write(&github, b"not wasm at all").unwrap();
    let app = written.start().await;
    let client = admin_client();
    let status = |file: &'static str| {
        let (client, admin) = (client.clone(), app.admin.clone());
        async move {
            let files: Vec<serde_json::Value> = client
                .get(format!("{admin}/admin/adapters"))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            files.into_iter().find(|f| f["file"] == file)
        }
    };
    let wait = |file: &'static str, state: &'static str| {
        let status = &status;
        async move {
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                if let Some(s) = status(file).await
                    && s["state"] == state
                {
                    return s;
                }
                assert!(Instant::now() < deadline, "{file} never {state}");
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        }
    };

    // A second file describing `stripe`, later in name order, is refused; the first keeps
    // serving. (`stripe-copy.wasm` would sort first, `-` before `.`, and take the name.)
    install_atomically(
        &adapters.join("zz-stripe-copy.wasm"),
        &std::fs::read(adapter_file("stripe.wasm")).unwrap(),
    );
    let refused = wait("zz-stripe-copy.wasm", "refused").await;
    assert!(
        refused["last_error"]
            .as_str()
            .unwrap()
            .contains("adapter name \"stripe\" is already served by stripe.wasm"),
        "{refused}"
    );
    app.post_stripe("evt_after_copy").await.assert_status(200);

    // A file that was not a component at start is refused, and serves once it is fixed.
    let refused = wait("github.wasm", "refused").await;
    assert!(refused["version"].is_null(), "{refused}");
    let body = b"{}".to_vec();
    let answer = app.post_github(body.clone(), "gh-refused").await;
    answer.assert_is(
        503,
        "adapter_unavailable",
        "a refused file with no earlier version leaves the adapter unloaded",
    );
    install_atomically(
        &github,
        &std::fs::read(adapter_file("github.wasm")).unwrap(),
    );
    let serving = wait("github.wasm", "serving").await;
    assert!(serving["last_error"].is_null(), "{serving}");
    let answer = app.post_github(body, "gh-fixed").await;
    assert_eq!(answer.status, 200, "{answer:?}");
}

/// A restart with 20 adapters deserialises them from the compiled cache instead of compiling.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_with_twenty_adapters_loads_them_from_the_compiled_cache() {
    use wharf::adapter::{Sandbox, SandboxLimits};
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let mut files = Vec::new();
    for n in 0..20 {
        let file = dir.path().join(format!("a{n:02}.wasm"));
        std::fs::write(&file, patched(&format!("reload-v{n:02}"))).unwrap();
        files.push(file);
    }
    let load_all = || async {
        // A new sandbox, as after a restart: same configuration, so the same engine hash.
        let sandbox = Sandbox::new(SandboxLimits::default(), Some(cache.clone())).unwrap();
        let started = Instant::now();
        for file in &files {
            sandbox.load(file).await.unwrap();
        }
        started.elapsed()
    };
    let cold = load_all().await;
    let cached = std::fs::read_dir(&cache).unwrap().count();
    assert_eq!(cached, 20, "one compiled entry per distinct component");
    let warm = load_all().await;
    eprintln!("20 adapters: {cold:?} compiling, {warm:?} from the cache");
    assert!(warm * 3 < cold, "cold {cold:?}, warm {warm:?}");
}

/// Every file's status from `/admin/adapters`, by file name.
async fn statuses(client: &reqwest::Client, admin: &str) -> Vec<serde_json::Value> {
    client
        .get(format!("{admin}/admin/adapters"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Polls `/admin/adapters` until every `(file, state, version)` holds (version `None`: no
/// serving version), then returns the statuses.
async fn wait_for_states(
    client: &reqwest::Client,
    admin: &str,
    want: &[(&str, &str, Option<&str>)],
) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let all = statuses(client, admin).await;
        let holds = want.iter().all(|(file, state, version)| {
            all.iter().any(|s| {
                s["file"] == *file && s["state"] == *state && s["version"].as_str() == *version
            })
        });
        if holds {
            return all;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {want:?}; statuses: {all:#?}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

fn status_of<'a>(all: &'a [serde_json::Value], file: &str) -> &'a serde_json::Value {
    all.iter()
        .find(|s| s["file"] == file)
        .unwrap_or_else(|| panic!("no status for {file}: {all:#?}"))
}

/// `reload-vNN` serves (200); `reload-tNN` traps in `prepare` (503), which tells which file
/// answers. Neither has fixtures here, so the trapping one loads.
#[tokio::test]
async fn duplicate_names_serve_the_first_file_in_name_order_at_start_and_on_reload() {
    let written = TestApp::builder()
        .with_admin()
        .add_endpoints(ENDPOINT)
        .write_config()
        .await;
    let adapters = written.adapters_dir();
    std::fs::write(adapters.join("a-reload.wasm"), patched("reload-v01")).unwrap();
    std::fs::write(adapters.join("b-reload.wasm"), patched("reload-t02")).unwrap();
    let app = written.start().await;
    let client = admin_client();
    let answer = async |n: usize| send(&app.client, &app.base, &format!("dup-{n}")).await;

    // At start: the first in name order serves, the other is refused and says why.
    let all = wait_for_states(
        &client,
        &app.admin,
        &[
            ("a-reload.wasm", "serving", Some("reload-v01")),
            ("b-reload.wasm", "refused", None),
        ],
    )
    .await;
    let b = status_of(&all, "b-reload.wasm");
    assert_eq!(
        b["last_error"], "adapter name \"test-reload\" is already served by a-reload.wasm",
        "{b}"
    );
    assert_eq!(answer(1).await.status, 200, "a-reload.wasm answers");

    // A new file earlier in name order takes the name: the rule depends on the files
    // present, not on their arrival (a restart would decide the same).
    install_atomically(&adapters.join("0-reload.wasm"), &patched("reload-t03"));
    let all = wait_for_states(
        &client,
        &app.admin,
        &[
            ("0-reload.wasm", "serving", Some("reload-t03")),
            ("a-reload.wasm", "refused", None),
            ("b-reload.wasm", "refused", None),
        ],
    )
    .await;
    for file in ["a-reload.wasm", "b-reload.wasm"] {
        let s = status_of(&all, file);
        assert_eq!(
            s["last_error"], "adapter name \"test-reload\" is already served by 0-reload.wasm",
            "{s}"
        );
    }
    let trapped = answer(2).await;
    trapped.assert_is(
        503,
        "adapter_unavailable",
        "the trapping 0-reload.wasm answers",
    );

    // Each removal hands the name to the next file in name order, without re-vetting it.
    std::fs::remove_file(adapters.join("0-reload.wasm")).unwrap();
    wait_for_states(
        &client,
        &app.admin,
        &[
            ("0-reload.wasm", "removed", None),
            ("a-reload.wasm", "serving", Some("reload-v01")),
            ("b-reload.wasm", "refused", None),
        ],
    )
    .await;
    assert_eq!(answer(3).await.status, 200, "a-reload.wasm answers again");
    std::fs::remove_file(adapters.join("a-reload.wasm")).unwrap();
    let all = wait_for_states(
        &client,
        &app.admin,
        &[
            ("a-reload.wasm", "removed", None),
            ("b-reload.wasm", "serving", Some("reload-t02")),
        ],
    )
    .await;
    assert!(status_of(&all, "b-reload.wasm")["last_error"].is_null());
    assert_eq!(
        answer(4).await.status,
        503,
        "the trapping b-reload.wasm answers"
    );
}

/// Copies `test-reload.fixtures` (or another adapter's) beside `dest`, with the body of its
/// `flipped-body-byte` case replaced by a symlink to `target`. That case expects
/// `invalid_signature`, which any other body also gives: read through the link, it passes.
fn fixtures_with_linked_body(from: &str, dest: &Path, target: &Path) {
    copy_tree(&adapter_file(from), dest);
    let body = dest.join("flipped-body-byte/body");
    std::fs::remove_file(&body).unwrap();
    std::os::unix::fs::symlink(target, &body).unwrap();
}

#[tokio::test]
async fn a_fixture_read_through_a_symlink_refuses_its_adapter_and_leaks_nothing() {
    let written = TestApp::builder()
        .with_admin()
        .add_endpoints(ENDPOINT)
        .write_config()
        .await;
    let adapters = written.adapters_dir();
    let secrets = written.secrets_path.clone();
    // At start: stripe's fixtures point a body at the secrets file.
    fixtures_with_linked_body(
        "stripe.fixtures",
        &adapters.join("stripe.fixtures"),
        &secrets,
    );
    let app = written.start().await;
    let client = admin_client();
    let all = wait_for_states(&client, &app.admin, &[("stripe.wasm", "refused", None)]).await;
    let stripe = status_of(&all, "stripe.wasm");
    assert!(
        stripe["last_error"]
            .as_str()
            .unwrap()
            .contains("body: is a symlink"),
        "{stripe}"
    );
    let answer = app.post_stripe("evt_linked").await;
    answer.assert_is(503, "adapter_unavailable", "");

    // On reload: a new adapter whose fixtures do the same is refused too.
    fixtures_with_linked_body(
        "testing/test-reload.fixtures",
        &adapters.join("test-reload.fixtures"),
        &secrets,
    );
    install_atomically(&adapters.join("test-reload.wasm"), &patched("reload-v01"));
    let all = wait_for_states(
        &client,
        &app.admin,
        &[("test-reload.wasm", "refused", None)],
    )
    .await;
    let reload = status_of(&all, "test-reload.wasm");
    assert!(
        reload["last_error"]
            .as_str()
            .unwrap()
            .contains("body: is a symlink"),
        "{reload}"
    );
    let answer = send(&client, &app.base, "linked").await;
    answer.assert_is(503, "adapter_unavailable", "");

    // Nothing of the secrets file reaches what an operator or a log reader sees.
    let shown = get_text(&client, &format!("{}/admin/adapters", app.admin)).await;
    for secret in [
        TEST_ADMIN_TOKEN,
        STRIPE_SECRET,
        STRIPE_OLD_SECRET,
        GITHUB_SECRET,
        "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    ] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
}

/// With the poll far longer than the test waits, only folder events can apply a removal.
#[tokio::test]
async fn removing_an_adapter_file_takes_effect_promptly_without_the_poll() {
    let written = TestApp::builder().write_config().await;
    let server = ServeProcess::start_without_poll(&written.config_path).await;
    let client = reqwest::Client::new();
    let body = b"{}".to_vec();
    let github = async |delivery: &str| {
        post(
            &client,
            &server.base,
            "github",
            &refs(&signed_github_headers(&body, delivery)),
            body.clone(),
        )
        .await
    };
    assert_eq!(github("before").await.status, 200);
    std::fs::remove_file(written.dir.path().join("adapters/github.wasm")).unwrap();
    let removed = Instant::now();
    loop {
        let answer = github("after").await;
        if (answer.status, answer.code()) == (503, "adapter_unavailable") {
            break;
        }
        assert!(
            removed.elapsed() < Duration::from_millis(2500),
            "the removal took longer than 2.5 s: only the poll would apply it"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!("removal applied after {:?}", removed.elapsed());
}
