//! `wharf deliveries list|show|replay` and the admin API, against real Postgres and real HTTP
//! receivers: filters by status, target, endpoint and time range; pages that say what they
//! leave out; a replayed delivery sent again with the same Idempotency-Key; dry runs that
//! change nothing; the admin API behind its bearer token, and absent without one.

use std::time::Duration;

use serde_json::{Value, json};
use wharf::config::Config;
use wharf::server::ProcessingHost;

use crate::support::{app::*, database::*, http::*, receiver::*, signing::*, wait::*};

/// `wharf deliveries --config CONFIG <args>`: (stdout, stderr), asserting success.
fn deliveries(config: &std::path::Path, args: &[&str]) -> (String, String) {
    let mut all = vec![
        "deliveries",
        "--config",
        config.to_str().expect("UTF-8 path"),
    ];
    all.extend_from_slice(args);
    let output = crate::support::process::run_wharf(&all);
    let (stdout, stderr) = (
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    );
    assert!(
        output.status.success(),
        "wharf deliveries {args:?}: {stderr}"
    );
    (stdout, stderr)
}

/// The JSON lines of `list --json`.
fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// A route of every endpoint's events to `url` (`extra`: more keys).
fn route(endpoint: &str, url: &str, extra: &str) -> String {
    format!(
        "[[route]]\nendpoint = \"{endpoint}\"\nevents = [\"*\"]\nsink = \"http\"\nurl = \"{url}\"\n{extra}\n"
    )
}

async fn post_stripe(app: &TestApp, id: &str) -> String {
    let answer = app.post_stripe(id).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.json["inbox_id"].as_str().unwrap().to_owned()
}

async fn count(app: &TestApp, sql: &str) -> i64 {
    scalar_i64(&app.db, sql).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_filter_by_status_target_endpoint_and_time_and_say_what_a_limit_leaves_out() {
    let ok = Receiver::start(Behaviour::ok()).await;
    let down = Receiver::start(always(500, Duration::ZERO)).await;
    let app = TestApp::builder()
        .workers(2)
        .append_toml(&route("*", &ok.url, ""))
        .append_toml(&route("stripe", &down.url, "max_attempts = 1"))
        .start()
        .await;
    for id in ["evt_list_1", "evt_list_2", "evt_list_3"] {
        post_stripe(&app, id).await;
    }
    let body = br#"{"action":"opened"}"#;
    let headers = signed_github_headers(body, "list-github-1");
    app.post("github", &refs(&headers), body.to_vec())
        .await
        .assert_status(200);
    // stripe x (ok, down) and github x ok: 4 sent, 3 failed.
    app.wait_count("deliveries", "status = 'SENT'", 4).await;
    app.wait_count("deliveries", "status = 'FAILED'", 3).await;
    let config = app.config.config_path.clone();

    let failed = json_lines(&deliveries(&config, &["list", "--status", "failed", "--json"]).0);
    assert_eq!(failed.len(), 3);
    for d in &failed {
        assert_eq!(d["status"], "FAILED");
        assert_eq!(d["target"], down.url.as_str());
        assert_eq!(d["endpoint_id"], "stripe");
        assert_eq!(d["attempt_count"], 1);
        assert_eq!(d["last_error"], "answered HTTP 500", "{d}");
        assert!(d["sent_at"].is_null());
    }
    let github = json_lines(
        &deliveries(
            &config,
            &[
                "list",
                "--target",
                &ok.url,
                "--endpoint",
                "github",
                "--json",
            ],
        )
        .0,
    );
    assert_eq!(github.len(), 1);
    assert_eq!(github[0]["status"], "SENT");
    assert!(github[0]["sent_at"].is_string());
    let stripe = json_lines(&deliveries(&config, &["list", "--endpoint", "stripe", "--json"]).0);
    assert_eq!(stripe.len(), 6);
    let sent_http = json_lines(
        &deliveries(
            &config,
            &["list", "--sink", "http", "--status", "SENT", "--json"],
        )
        .0,
    );
    assert_eq!(sent_http.len(), 4);

    // A time range on created_at: one delivery moved into 2026-01-01, found by [since, until).
    let moved = failed[0]["delivery_id"].as_str().unwrap().to_owned();
    sqlx::query(
        "UPDATE deliveries SET created_at = '2026-01-01T12:00:00Z' WHERE delivery_id = $1::uuid",
    )
    .bind(&moved)
    .execute(&app.db)
    .await
    .unwrap();
    let ranged = json_lines(
        &deliveries(
            &config,
            &[
                "list",
                "--since",
                "2026-01-01T00:00:00Z",
                "--until",
                "2026-01-02T00:00:00Z",
                "--json",
            ],
        )
        .0,
    );
    assert_eq!(ranged.len(), 1);
    assert_eq!(ranged[0]["delivery_id"], moved.as_str());
    let until_excludes = json_lines(
        &deliveries(
            &config,
            &["list", "--until", "2026-01-01T12:00:00Z", "--json"],
        )
        .0,
    );
    assert!(until_excludes.is_empty(), "until is exclusive");
    let since_after = json_lines(
        &deliveries(
            &config,
            &["list", "--since", "2026-01-02T00:00:00Z", "--json"],
        )
        .0,
    );
    assert_eq!(since_after.len(), 6);

    // No silent cap: a page smaller than the matches says so and names the next cursor; the
    // pages together hold every delivery once, oldest first.
    let (text, _) = deliveries(&config, &["list", "--limit", "3"]);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("DELIVERY_ID\tINBOX_ID\tSTATUS"),
        "{text}"
    );
    assert_eq!(lines.len(), 1 + 3 + 1, "{text}");
    assert!(
        lines[4].starts_with("showing 3 of 7 matching (--limit 3); next page: --after "),
        "{text}"
    );
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    let mut notes = Vec::new();
    loop {
        let mut args = vec!["list", "--limit", "3", "--json"];
        if let Some(a) = &after {
            args.extend(["--after", a.as_str()]);
        }
        let (out, err) = deliveries(&config, &args);
        let page = json_lines(&out);
        seen.extend(
            page.iter()
                .map(|d| d["delivery_id"].as_str().unwrap().to_owned()),
        );
        match err.lines().find(|l| l.starts_with("showing")) {
            Some(note) => {
                notes.push(note.to_owned());
                after = Some(note.rsplit(' ').next().unwrap().to_owned());
                assert_eq!(after.as_deref(), seen.last().map(String::as_str));
            }
            None => break,
        }
    }
    assert_eq!(seen.len(), 7);
    let mut distinct = seen.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 7, "no delivery twice");
    assert_eq!(seen[0], moved, "oldest first (the moved one is oldest)");
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(notes[1].starts_with("showing 3 of 4 matching"), "{notes:?}");
    // Exactly the limit: nothing left out, nothing said.
    let (all, _) = deliveries(&config, &["list", "--limit", "7"]);
    assert!(!all.contains("showing"), "{all}");

    // One delivery in full, with its event and no payload.
    let shown: Value = serde_json::from_str(&deliveries(&config, &["show", &moved]).0).unwrap();
    assert_eq!(shown["delivery_id"], moved.as_str());
    assert_eq!(shown["status"], "FAILED");
    assert_eq!(shown["max_attempts"], 1);
    assert_eq!(shown["event"]["endpoint_id"], "stripe");
    assert!(
        shown["event"]["provider_event_id"]
            .as_str()
            .unwrap()
            .starts_with("evt_list_")
    );
    assert!(!shown.to_string().contains("amount"), "no payload: {shown}");
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_delivery_is_sent_again_with_the_same_idempotency_key() {
    let receiver = Receiver::start(Behaviour::fails_once()).await;
    let app = TestApp::builder()
        .workers(2)
        .append_toml(&route("stripe", &receiver.url, "max_attempts = 1"))
        .start()
        .await;
    let inbox_id = post_stripe(&app, "evt_replay_delivery").await;
    app.wait_count("deliveries", "status = 'FAILED'", 1).await;
    let config = app.config.config_path.clone();
    let delivery_id: String = sqlx::query_scalar("SELECT delivery_id::text FROM deliveries")
        .fetch_one(&app.db)
        .await
        .unwrap();

    // A dry run says what it would requeue and changes nothing.
    let (text, _) = deliveries(&config, &["replay", "--status", "failed", "--dry-run"]);
    assert!(
        text.contains(&format!("would requeue\t{delivery_id}\tFAILED")),
        "{text}"
    );
    assert!(
        text.contains("dry run: would requeue 1 of 1 selected; nothing changed"),
        "{text}"
    );
    let dry: Value = serde_json::from_str(
        &deliveries(
            &config,
            &["replay", "--status", "failed", "--dry-run", "--json"],
        )
        .0,
    )
    .unwrap();
    assert_eq!(dry["dry_run"], true);
    assert_eq!(dry["requeued"].as_array().unwrap().len(), 1);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (status, attempts): (String, i32) =
        one_row(&app.db, "SELECT status, attempt_count FROM deliveries").await;
    assert_eq!((status.as_str(), attempts), ("FAILED", 1));
    assert_eq!(receiver.received().len(), 1);

    // The replay: due now, fresh attempts, sent again with the same key.
    let (text, _) = deliveries(
        &config,
        &["replay", "--status", "failed", "--target", &receiver.url],
    );
    assert!(text.contains("requeued 1 of 1 selected"), "{text}");
    app.wait_count("deliveries", "status = 'SENT'", 1).await;
    let received = receiver.received();
    assert_eq!(received.len(), 2);
    assert_eq!(received[0].idempotency_key, inbox_id);
    assert_eq!(received[1].idempotency_key, inbox_id);
    assert_eq!(received[0].body, received[1].body);
    let (attempts, error): (i32, Option<String>) =
        one_row(&app.db, "SELECT attempt_count, last_error FROM deliveries").await;
    assert_eq!((attempts, error), (1, None), "attempts counted afresh");

    // A sent delivery is sent again only when asked.
    let report: Value =
        serde_json::from_str(&deliveries(&config, &["replay", &delivery_id, "--json"]).0).unwrap();
    assert_eq!(report["requeued"], json!([]));
    assert_eq!(report["skipped_sent"], json!([delivery_id]));
    let (text, _) = deliveries(&config, &["replay", &delivery_id]);
    assert!(
        text.contains("1 already SENT (--resend to send again)"),
        "{text}"
    );
    let unknown = "00000000-0000-4000-8000-000000000001".to_owned();
    let (text, _) = deliveries(&config, &["replay", &delivery_id, &unknown, "--resend"]);
    assert!(
        text.contains("requeued 1 of 2 selected; 1 not found"),
        "{text}"
    );
    eventually("the resent delivery arrives", || async {
        receiver.received().len() == 3
    })
    .await;
    assert_eq!(receiver.received()[2].idempotency_key, inbox_id);
    wait_until_converged(&app.db).await;
    app.shutdown().await;
}

/// GET `path` on `base` with `token` (none: no Authorization header).
async fn get(base: &str, path: &str, token: Option<&str>) -> reqwest::Response {
    let mut request = reqwest::Client::new().get(format!("{base}{path}"));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    request.send().await.unwrap()
}

async fn post_json(base: &str, path: &str, token: Option<&str>, body: Value) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .json(&body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    request.send().await.unwrap()
}

/// A 401 with `WWW-Authenticate: Bearer ...` and a JSON `unauthorized` body.
async fn assert_refused(response: reqwest::Response) {
    assert_eq!(response.status(), 401);
    let challenge = response
        .headers()
        .get("www-authenticate")
        .expect("a challenge")
        .to_str()
        .unwrap()
        .to_owned();
    assert!(challenge.starts_with("Bearer"), "{challenge}");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"], "unauthorized", "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_api_answers_only_with_the_token() {
    let receiver = Receiver::start(Behaviour::fails_once()).await;
    let app = TestApp::builder()
        .with_admin()
        .workers(2)
        .append_toml(&route("stripe", &receiver.url, "max_attempts = 1"))
        .start()
        .await;
    let inbox_id = post_stripe(&app, "evt_admin_api").await;
    app.wait_count("deliveries", "status = 'FAILED'", 1).await;
    let admin = app.admin.clone();
    let token = Some(TEST_ADMIN_TOKEN);
    let wrong = "test-admin-token-0123456789abcdef012345678X";

    // Refused without the token or with a wrong one; nothing changed by a refused replay.
    for path in [
        "/admin/deliveries",
        "/admin/events",
        "/admin/adapters",
        &format!("/admin/events/{inbox_id}"),
    ] {
        assert_refused(get(&admin, path, None).await).await;
        assert_refused(get(&admin, path, Some(wrong)).await).await;
        assert_refused(get(&admin, path, Some("short")).await).await;
    }
    let basic = reqwest::Client::new()
        .get(format!("{admin}/admin/deliveries"))
        .basic_auth("admin", Some(TEST_ADMIN_TOKEN))
        .send()
        .await
        .unwrap();
    assert_refused(basic).await;
    let replay = json!({"status": "FAILED"});
    assert_refused(post_json(&admin, "/admin/deliveries/replay", None, replay.clone()).await).await;
    assert_refused(
        post_json(
            &admin,
            "/admin/deliveries/replay",
            Some(wrong),
            replay.clone(),
        )
        .await,
    )
    .await;
    assert_eq!(
        count(
            &app,
            "SELECT count(*) FROM deliveries WHERE status = 'FAILED'"
        )
        .await,
        1
    );
    // Health, readiness and metrics stay open.
    for path in ["/healthz", "/readyz", "/metrics"] {
        assert_eq!(get(&admin, path, None).await.status(), 200, "{path}");
    }

    // With the token: the same queries as the commands.
    let listed: Value = get(&admin, "/admin/deliveries?status=failed", token)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(listed["total"], 1, "{listed}");
    assert_eq!(listed["truncated"], false);
    let delivery = &listed["deliveries"][0];
    assert_eq!(delivery["target"], receiver.url.as_str());
    assert_eq!(delivery["inbox_id"], inbox_id.as_str());
    let delivery_id = delivery["delivery_id"].as_str().unwrap().to_owned();
    let filtered: Value = get(
        &admin,
        &format!(
            "/admin/deliveries?endpoint=github&since={}",
            "2026-01-01T00:00:00Z"
        ),
        token,
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(filtered["total"], 0, "{filtered}");
    for bad in [
        "/admin/deliveries?limit=0",
        "/admin/deliveries?stauts=FAILED",
        "/admin/deliveries?status=DONE",
        "/admin/deliveries?since=yesterday",
        "/admin/deliveries/not-a-uuid",
        "/admin/events?status=GONE",
    ] {
        let response = get(&admin, bad, token).await;
        assert_eq!(response.status(), 400, "{bad}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"], "bad_request", "{bad}: {body}");
    }
    let shown: Value = get(&admin, &format!("/admin/deliveries/{delivery_id}"), token)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(shown["status"], "FAILED");
    assert_eq!(shown["event"]["provider_event_id"], "evt_admin_api");
    let missing = get(
        &admin,
        "/admin/deliveries/00000000-0000-4000-8000-000000000001",
        token,
    )
    .await;
    assert_eq!(missing.status(), 404);
    assert_eq!(missing.json::<Value>().await.unwrap()["error"], "not_found");
    let adapters: Vec<Value> = get(&admin, "/admin/adapters", token)
        .await
        .json()
        .await
        .unwrap();
    assert!(adapters.iter().any(|f| f["file"] == "stripe.wasm"));

    // Events: listed with their total, shown without the payload.
    let events: Value = get(&admin, "/admin/events?status=PROCESSED&limit=5", token)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(events["total"], 1, "{events}");
    assert_eq!(events["events"][0]["inbox_id"], inbox_id.as_str());
    let event: Value = get(&admin, &format!("/admin/events/{inbox_id}"), token)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(event["status"], "PROCESSED");
    assert!(event.get("payload").is_none(), "{event}");
    assert!(!event.to_string().contains("amount"), "{event}");

    // Replays: a dry run changes nothing; then the delivery is sent again with its key.
    let dry: Value = post_json(
        &admin,
        "/admin/events/replay",
        token,
        json!({"ids": [inbox_id], "dry_run": true, "resend": true}),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(
        (dry["events"].as_u64(), dry["deliveries"].as_u64()),
        (Some(1), Some(1))
    );
    let dry: Value = post_json(
        &admin,
        "/admin/deliveries/replay",
        token,
        json!({"status": "FAILED", "dry_run": true}),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(
        dry["requeued"][0]["delivery_id"],
        delivery_id.as_str(),
        "{dry}"
    );
    assert_eq!(dry["dry_run"], true);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        count(
            &app,
            "SELECT count(*) FROM deliveries WHERE status = 'FAILED'"
        )
        .await,
        1
    );
    assert_eq!(
        count(
            &app,
            "SELECT count(*) FROM webhook_inbox WHERE status = 'PROCESSED'"
        )
        .await,
        1
    );
    let empty = post_json(&admin, "/admin/deliveries/replay", token, json!({})).await;
    assert_eq!(empty.status(), 400, "a replay must select something");
    let done: Value = post_json(
        &admin,
        "/admin/deliveries/replay",
        token,
        json!({"status": "FAILED", "target": receiver.url}),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(done["requeued"].as_array().unwrap().len(), 1, "{done}");
    wait_until_converged(&app.db).await;
    let received = receiver.received();
    assert_eq!(received.len(), 2);
    assert!(received.iter().all(|r| r.idempotency_key == inbox_id));

    // `wharf worker`'s admin listener: the same API behind the same token, no adapters.
    let config = Config::load(&app.config.config_path).unwrap();
    let worker = ProcessingHost::start(config, 0, Some("127.0.0.1:0".parse().unwrap()))
        .await
        .unwrap();
    let worker_admin = format!("http://{}", worker.admin_addr.unwrap());
    assert_refused(get(&worker_admin, "/admin/deliveries", None).await).await;
    let listed: Value = get(&worker_admin, "/admin/deliveries?status=SENT", token)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(listed["total"], 1, "{listed}");
    assert_eq!(
        get(&worker_admin, "/admin/adapters", token).await.status(),
        404
    );
    assert_eq!(get(&worker_admin, "/healthz", None).await.status(), 200);
    worker.shutdown().await.unwrap();
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_the_admin_listeners_serve_only_health_readiness_and_metrics() {
    let app = TestApp::builder().workers(0).start().await;
    let config = Config::load(&app.config.config_path).unwrap();
    let worker = ProcessingHost::start(config, 0, Some("127.0.0.1:0".parse().unwrap()))
        .await
        .unwrap();
    let worker_admin = format!("http://{}", worker.admin_addr.unwrap());
    for base in [app.admin.as_str(), worker_admin.as_str()] {
        for path in ["/healthz", "/readyz", "/metrics"] {
            assert_eq!(get(base, path, None).await.status(), 200, "{base}{path}");
        }
        for path in [
            "/admin/adapters",
            "/admin/deliveries",
            "/admin/events",
            "/admin/anything",
        ] {
            // Whatever token is sent: there is no API to open.
            let response = get(base, path, Some(TEST_ADMIN_TOKEN)).await;
            assert_eq!(response.status(), 404, "{base}{path}");
            let body: Value = response.json().await.unwrap();
            assert_eq!(body["error"], "not_found");
        }
        let replay = post_json(
            base,
            "/admin/deliveries/replay",
            None,
            json!({"status": "FAILED"}),
        )
        .await;
        assert_eq!(replay.status(), 404);
    }
    worker.shutdown().await.unwrap();
    app.shutdown().await;
}

#[tokio::test]
async fn a_token_set_that_cannot_authenticate_stops_the_start() {
    for (secrets_extra, expected) in [
        (
            "[[wharf-admin]]\nversion = \"1\"\nvalue = \"too-short\"\n",
            "32 to 1024 printable ASCII characters",
        ),
        (
            "[[wharf-admin]]\nversion = \"1\"\nvalue = \"test-admin-token-0123456789abcdef0123456789\"\nexpires_at = \"2020-01-01T00:00:00Z\"\n",
            "every version of admin token secret set \"wharf-admin\" has expired",
        ),
        ("", "\"wharf-admin\" is not in the secrets file"),
    ] {
        let written = TestApp::builder()
            .secrets_file(default_secrets() + "\n" + secrets_extra)
            .write_config()
            .await
            .append_server_toml("admin_token_secret = \"wharf-admin\"");
        let config = Config::load(&written.config_path).unwrap();
        let error = match wharf::Server::start(config, wharf::ServerOptions::default()).await {
            Ok(_) => panic!("started with {secrets_extra:?}"),
            Err(e) => format!("{e:#}"),
        };
        assert!(error.contains("admin_token_secret"), "{error}");
        assert!(error.contains(expected), "{error}");
        assert!(
            !error.contains("too-short"),
            "no token in the message: {error}"
        );
    }
}

#[tokio::test]
async fn each_attempt_that_fails_is_kept_with_its_status_code_and_a_sent_one_adds_no_row() {
    let receiver = Receiver::start(Behaviour::fails_once()).await;
    let app = TestApp::builder()
        .workers(2)
        .append_toml(&route("stripe", &receiver.url, "max_attempts = 1"))
        .start()
        .await;
    post_stripe(&app, "evt_attempt_history").await;
    app.wait_count("deliveries", "status = 'FAILED'", 1).await;
    let (code, attempt, outcome, diagnostic): (Option<i16>, i32, String, Option<String>) = one_row(
        &app.db,
        "SELECT status_code, attempt, outcome, diagnostic FROM delivery_attempts",
    )
    .await;
    assert_eq!(
        (code, attempt, outcome.as_str(), diagnostic.as_deref()),
        (Some(500), 1, "failed", Some("answered HTTP 500"))
    );
    let config = app.config.config_path.clone();
    deliveries(&config, &["replay", "--status", "failed"]);
    app.wait_count("deliveries", "status = 'SENT'", 1).await;
    let (last, error): (Option<i16>, Option<String>) = one_row(
        &app.db,
        "SELECT last_status_code, last_error FROM deliveries",
    )
    .await;
    assert_eq!((last, error), (Some(200), None));
    assert_eq!(
        app.count("delivery_attempts").await,
        1,
        "a success adds no row"
    );
    let delivery_id: String = sqlx::query_scalar("SELECT delivery_id::text FROM deliveries")
        .fetch_one(&app.db)
        .await
        .unwrap();
    let shown: Value =
        serde_json::from_str(&deliveries(&config, &["show", &delivery_id]).0).unwrap();
    assert_eq!(shown["last_status_code"], 200, "{shown}");
    assert_eq!(shown["failed_attempts"][0]["status_code"], 500, "{shown}");
    assert_eq!(shown["failed_attempts"][0]["outcome"], "failed", "{shown}");
    app.shutdown().await;
}
