//! The first minutes of a new user (issue 32), each thing they tripped on held by a test:
//! `wharf dev` says where everything is once it serves, and nothing that reads like an
//! instruction before; the commands run beside it find its config as they find its database;
//! an error is said once, without colour codes in a file; an event is found by its provider's
//! id; a JSON payload shows as JSON; the example route delivers to the local sink `wharf dev`
//! starts; and the README's providers and world are what the built adapters report.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::{app::*, files::*, process::*};

/// A port nothing listens on now (bound, then released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `wharf dev` as a child process; SIGTERM (so its cluster stops too) when stopped or dropped.
struct Dev(Child);

impl Dev {
    fn stop(&mut self) -> std::process::ExitStatus {
        if let Ok(Some(status)) = self.0.try_wait() {
            return status;
        }
        Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "wharf dev stops within 30 s");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// Polls `check` every 200 ms for up to `secs`, then fails naming `what` and the last value.
fn until<T: std::fmt::Debug>(
    what: &str,
    secs: u64,
    mut check: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        match check() {
            Ok(v) => return v,
            Err(last) if Instant::now() > deadline => panic!("{what}: {last}"),
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

#[test]
fn beside_wharf_dev_a_new_user_finds_everything_it_says() {
    let dir = tempfile::tempdir().unwrap();
    // Run as root, `wharf dev` runs Postgres as the `postgres` user, who must reach the folder.
    let open = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755);
    std::fs::set_permissions(dir.path(), open).unwrap();
    let config = copy_examples(dir.path());
    // The example's addresses, moved to free ports in the config itself, so that the commands
    // run beside `wharf dev` (`adapter status`) read them where a user's would.
    let (listen, admin, sink) = (free_port(), free_port(), free_port());
    let mut toml = std::fs::read_to_string(&config).unwrap();
    for (from, to) in [
        ("127.0.0.1:8080", listen),
        ("127.0.0.1:8081", admin),
        ("http://127.0.0.1:8090/", sink),
    ] {
        assert!(toml.contains(from), "examples/wharf.toml has {from}");
        let to = match from.starts_with("http") {
            true => format!("http://127.0.0.1:{to}/"),
            false => format!("127.0.0.1:{to}"),
        };
        toml = toml.replace(from, &to);
    }
    std::fs::write(&config, toml).unwrap();
    let log = dir.path().join("dev.log");
    let mut dev = Dev(Command::new(env!("CARGO_BIN_EXE_wharf"))
        .arg("dev")
        .current_dir(dir.path())
        .env_remove("WHARF_DATABASE_URL")
        .env_remove("DATABASE_URL")
        .env_remove("WHARF_CONFIG")
        .env_remove("WHARF_LISTEN")
        .env_remove("WHARF_ADMIN_LISTEN")
        .env("WHARF_DEV_SINK_LISTEN", format!("127.0.0.1:{sink}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
        .spawn()
        .expect("wharf dev"));
    let read_log = || std::fs::read_to_string(&log).unwrap_or_default();
    let mut stdout = BufReader::new(dev.0.stdout.take().unwrap());
    let mut lines = Vec::new();
    for _ in 0..2 {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert!(!line.is_empty(), "wharf dev ended early: {}", read_log());
        lines.push(line);
    }
    // The machine-readable lines are kept: the database, then the addresses as JSON.
    assert!(lines[0].starts_with("wharf dev: database "), "{}", lines[0]);
    let started: serde_json::Value = serde_json::from_str(&lines[1]).expect("json line");
    assert_eq!(started["listening"], format!("127.0.0.1:{listen}"));
    assert_eq!(started["admin"], format!("127.0.0.1:{admin}"));

    // The ready banner, on stderr: each endpoint's URL, the admin listener, the console, the
    // sink and the next command; before it, nothing that reads like an instruction.
    let banner = until("the ready banner", 30, || {
        let log = read_log();
        match log.find("wharf dev is ready") {
            Some(at) if log[at..].contains("Ctrl-C") => Ok(log),
            _ => Err(log),
        }
    });
    for id in ["stripe-demo", "github-demo", "svix-demo"] {
        let url = format!("http://127.0.0.1:{listen}/webhooks/{id}");
        assert!(banner.contains(&url), "{url} in:\n{banner}");
    }
    for shown in [
        format!("Admin:    http://127.0.0.1:{admin}/"),
        format!("Console:  http://127.0.0.1:{admin}/console/"),
        format!("Sink:     http://127.0.0.1:{sink}/"),
        format!("WHARF_URL=http://127.0.0.1:{listen} examples/send.sh all"),
    ] {
        assert!(banner.contains(&shown), "{shown} in:\n{banner}");
    }
    assert!(
        !banner.contains("pg_ctl"),
        "initdb's advice is not shown:\n{banner}"
    );
    assert!(
        !banner.contains("Success"),
        "initdb's chatter is not shown:\n{banner}"
    );
    assert!(
        !banner.contains('\u{1b}'),
        "no colour codes in a file:\n{banner}"
    );
    let saved = dir.path().join(".wharf-dev/config-path");
    assert_eq!(
        std::fs::read_to_string(&saved).unwrap().trim(),
        config.canonicalize().unwrap().display().to_string()
    );

    // `examples/send.sh all`: three events accepted.
    let sent = Command::new(repo_root().join("examples/send.sh"))
        .arg("all")
        .env("WHARF_URL", format!("http://127.0.0.1:{listen}"))
        .output()
        .expect("send.sh runs");
    assert_ran(&sent, "send.sh");
    let sent = String::from_utf8(sent.stdout).unwrap();
    let inbox_ids: Vec<String> = sent
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| {
            assert_eq!(v["status"], "accepted", "{sent}");
            v["inbox_id"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(inbox_ids.len(), 3, "{sent}");
    let wharf = |args: &[&str]| run_wharf_in(dir.path(), args, &[]);

    // The example route delivers each one to the sink, which logs it once; `deliveries list`,
    // with no flags, shows them sent.
    let listed = until("three deliveries SENT", 60, || {
        let (out, err) = text(&wharf(&["deliveries", "list"]));
        let sent = out
            .lines()
            .filter(|l| l.split_whitespace().nth(2) == Some("SENT"));
        match sent.count() {
            3 => Ok(out),
            _ => Err(format!("{out}{err}")),
        }
    });
    let log = read_log();
    for id in &inbox_ids {
        assert!(listed.contains(id.as_str()), "{id} in:\n{listed}");
        let line = format!("wharf dev sink: POST /deliveries Idempotency-Key: {id} (");
        assert_eq!(log.matches(&line).count(), 1, "{line} once in:\n{log}");
    }

    // `events show` by the provider's id, with the payload: the dev config's keys open it,
    // found without --config (and said so), and the JSON body shows as indented JSON.
    let shown = wharf(&["events", "show", "evt_demo_1", "--payload"]);
    let (out, err) = text(&shown);
    assert!(shown.status.success(), "{err}");
    assert!(err.contains("the config `wharf dev` serves here"), "{err}");
    let event: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(event["inbox_id"], inbox_ids[0].as_str(), "{out}");
    assert_eq!(
        event["payload"]["json"]["data"]["object"]["id"], "pi_demo",
        "{out}"
    );
    assert!(
        out.contains("\n      \"id\": \"evt_demo_1\",\n"),
        "indented: {out}"
    );
    assert!(!out.contains("\\\"id\\\""), "not an escaped string: {out}");
    // The inbox id still names it.
    let by_inbox = wharf(&["events", "show", &inbox_ids[1]]);
    let (out, err) = text(&by_inbox);
    assert!(by_inbox.status.success(), "{err}");
    assert!(
        out.contains("\"provider_event_id\": \"demo-delivery-1\""),
        "{out}"
    );

    // `config check` and `adapter status`, no flags: the dev receiver's config, whose demo
    // values are what `wharf dev` serves.
    let checked = wharf(&["config", "check"]);
    let (out, err) = text(&checked);
    assert!(checked.status.success(), "{out}{err}");
    assert!(out.contains("ok: 3 endpoints, 1 routes"), "{out}");
    assert!(out.contains("served by `wharf dev` here"), "{out}");
    let status = wharf(&["adapter", "status"]);
    let (out, err) = text(&status);
    assert!(status.status.success(), "{err}");
    let stripe = out
        .lines()
        .find(|l| l.starts_with("stripe.wasm"))
        .unwrap_or_default();
    assert!(stripe.contains("serving"), "{out}");

    // An error is said once, as `wharf: …`, with no colour codes when stderr is a file.
    let failed = wharf(&["events", "show", "evt_nowhere"]);
    let (_, err) = text(&failed);
    assert!(!failed.status.success());
    let said: Vec<&str> = err.lines().filter(|l| l.contains("evt_nowhere")).collect();
    assert_eq!(said.len(), 1, "{err}");
    assert!(
        said[0].starts_with("wharf: no event \"evt_nowhere\""),
        "{err}"
    );
    assert!(
        !err.contains('\u{1b}') && !err.contains("wharf stopped"),
        "{err}"
    );

    // Ctrl-C: the config's file goes with the receiver, and commands no longer use it.
    assert!(dev.stop().success(), "{}", read_log());
    assert!(
        !saved.exists(),
        "the config-path file goes with the receiver"
    );
    let (_, err) = text(&wharf(&["config", "check"]));
    assert!(!err.contains("`wharf dev` serves"), "{err}");
}

/// One provider id accepted at two endpoints: `events show` and the admin API list both and
/// ask which; `--endpoint` (`?endpoint=`) or the inbox id picks one; an unknown id is not found.
#[tokio::test]
async fn a_provider_event_id_names_an_event_and_several_are_listed() {
    let app = TestApp::builder()
        .endpoint("shop-b", "stripe", "stripe", "")
        .with_admin()
        .start()
        .await;
    let a = app.accept_stripe("evt_twice").await;
    let answer = app.post_stripe_to("shop-b", "evt_twice").await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let b = answer.json["inbox_id"].as_str().unwrap().to_owned();
    let once = app.accept_stripe("evt_once").await;
    let config = app.config.config_path.to_str().unwrap();
    let show = |args: &[&str]| {
        let mut all = vec!["events", "--config", config, "show"];
        all.extend_from_slice(args);
        text(&run_wharf(&all))
    };

    let (out, err) = show(&["evt_once"]);
    let shown: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|_| panic!("{err}"));
    assert_eq!(shown["inbox_id"], once.to_string());
    let (out, err) = show(&["evt_twice"]);
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("\"evt_twice\" names 2 events"), "{err}");
    for (id, endpoint) in [(a.to_string(), "stripe"), (b.clone(), "shop-b")] {
        assert!(err.contains(&format!("{id}  endpoint {endpoint}")), "{err}");
    }
    assert!(err.contains("--endpoint"), "{err}");
    let (out, err) = show(&["evt_twice", "--endpoint", "shop-b"]);
    let shown: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|_| panic!("{err}"));
    assert_eq!(shown["inbox_id"], b.as_str());
    assert_eq!(shown["endpoint_id"], "shop-b");
    let (_, err) = show(&["evt_twice", "--endpoint", "nowhere"]);
    assert!(
        err.contains("no event \"evt_twice\" of endpoint \"nowhere\""),
        "{err}"
    );

    let listed = app.admin_get("/admin/events/evt_twice").await;
    assert_eq!(listed.status, 409, "{listed:?}");
    let ids: Vec<&str> = listed.json["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["inbox_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 2, "{listed:?}");
    assert!(
        ids.contains(&a.to_string().as_str()) && ids.contains(&b.as_str()),
        "{listed:?}"
    );
    let picked = app
        .admin_get("/admin/events/evt_twice?endpoint=stripe")
        .await;
    assert_eq!(picked.status, 200, "{picked:?}");
    assert_eq!(picked.json["inbox_id"], a.to_string());
    let by_inbox = app.admin_get(&format!("/admin/events/{b}")).await;
    assert_eq!(by_inbox.json["endpoint_id"], "shop-b", "{by_inbox:?}");
    assert_eq!(app.admin_get("/admin/events/evt_none").await.status, 404);
}

/// The README's "Providers" table and the adapter world it names are what `wharf adapter
/// check` reports for the built adapters: every adapter listed, no other, each tolerance right.
#[test]
fn the_readme_lists_the_providers_and_world_the_adapters_report() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let section = readme
        .split("\n## Providers\n")
        .nth(1)
        .expect("a Providers section")
        .split("\n## ")
        .next()
        .unwrap();
    // adapter name -> its tolerance cell.
    let table: BTreeMap<String, String> = section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .map(|row| {
            let cells: Vec<&str> = row.split(" | ").collect();
            let name = cells[0].trim_end_matches('`').to_owned();
            (name, cells[3].trim().to_owned())
        })
        .collect();
    let world = readme
        .split("`wit/` the adapter world `")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .expect("the README names the adapter world");

    let dist = repo_root().join("adapters/dist");
    let mut files: Vec<_> = std::fs::read_dir(&dist)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "wasm"))
        .collect();
    files.sort();
    // One `adapter check` per file, side by side: each compiles its component.
    let reports: Vec<serde_json::Value> = std::thread::scope(|scope| {
        let runs: Vec<_> = files
            .iter()
            .map(|file| scope.spawn(move || check(file)))
            .collect();
        runs.into_iter().map(|r| r.join().unwrap()).collect()
    });
    let names: Vec<&str> = reports
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        table.keys().map(String::as_str).collect::<Vec<_>>(),
        {
            let mut sorted = names.clone();
            sorted.sort();
            sorted
        },
        "the README's providers are the built adapters"
    );
    assert!(
        section.contains(&format!("each targeting\n`{world}`")),
        "{section}"
    );
    for report in &reports {
        let name = report["name"].as_str().unwrap();
        assert_eq!(report["wit"], world, "{name} targets the README's world");
        let newest = report["host_serves"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .clone();
        assert_eq!(
            newest, world,
            "the README's world is the newest this host serves"
        );
        let expected = match (
            report["tolerance_past_secs"].as_u64(),
            report["tolerance_future_secs"].as_u64(),
        ) {
            (None, None) => "none signed".to_owned(),
            (Some(past), Some(future)) => format!("{past} s past, {future} s future"),
            other => panic!("{name}: {other:?}"),
        };
        let cell = table[name].replace(" (25 h)", "");
        assert_eq!(cell, expected, "{name}'s tolerance in the README");
    }
    // The example config does not count the bundled adapters (it has fallen behind before).
    let example = std::fs::read_to_string(repo_root().join("examples/wharf.toml")).unwrap();
    assert!(
        example.contains("three of the bundled adapters"),
        "{example}"
    );
}

/// `wharf adapter check FILE`'s report.
fn check(file: &Path) -> serde_json::Value {
    let out = run_wharf(&["adapter", "check", file.to_str().unwrap()]);
    assert_ran(&out, &file.display().to_string());
    serde_json::from_slice(&out.stdout).expect("a JSON report")
}
