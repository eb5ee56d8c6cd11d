//! Hundreds of concurrent copies of one event across two `wharf serve` processes sharing one
//! database: every answer 2xx, exactly one inbox row and one outbox row.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::common::*;

/// A `wharf serve` child process on port 0; killed on drop.
pub struct ServeProcess {
    _child: Child,
    pub base: String,
}

impl ServeProcess {
    pub async fn start(config: &std::path::Path) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_wharf"))
            .args(["serve", "--config"])
            .arg(config)
            .env_remove("WHARF_DATABASE_URL")
            .env_remove("DATABASE_URL")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("wharf binary");
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .expect("wharf serve starts within a minute")
            .unwrap()
            .expect("a line with the bound address");
        let started: serde_json::Value = serde_json::from_str(&line).expect("json line");
        let base = format!("http://{}", started["listening"].as_str().unwrap());
        Self {
            _child: child,
            base,
        }
    }
}

#[tokio::test]
async fn three_hundred_copies_across_two_processes_make_one_row() {
    let written = app().write().await;
    let db = sqlx::PgPool::connect(&written.database_url).await.unwrap();
    let first = ServeProcess::start(&written.config_path).await;
    let second = ServeProcess::start(&written.config_path).await;

    let (headers, body) = signed_stripe("evt_storm");
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let mut requests = Vec::new();
    for i in 0..300 {
        let base = if i % 2 == 0 {
            first.base.clone()
        } else {
            second.base.clone()
        };
        let (client, headers, body) = (client.clone(), headers.clone(), body.clone());
        requests.push(tokio::spawn(async move {
            post(&client, &base, "stripe", &refs(&headers), body.into_bytes()).await
        }));
    }
    let mut ids = std::collections::HashSet::new();
    let mut accepted = 0;
    for request in requests {
        let answer = request.await.unwrap();
        assert_eq!(answer.status, 200, "{answer:?}");
        accepted += usize::from(answer.code() == "accepted");
        ids.insert(answer.json["inbox_id"].as_str().unwrap().to_owned());
    }
    assert_eq!(accepted, 1, "exactly one copy is the accepted one");
    assert_eq!(ids.len(), 1, "every copy names the same inbox row");
    let count = |t: &'static str| {
        let db = db.clone();
        async move {
            sqlx::query_scalar::<_, i64>(&format!("SELECT count(*) FROM {t}"))
                .fetch_one(&db)
                .await
                .unwrap()
        }
    };
    assert_eq!(count("webhook_inbox").await, 1);
    assert_eq!(count("webhook_outbox").await, 1);
    assert_eq!(count("webhook_payloads").await, 1);
}
