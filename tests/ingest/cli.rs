//! The `wharf` binary's commands, run as a user would.

use crate::support::{app::*, files::*, process::*};

#[tokio::test]
async fn migrate_creates_the_tables() {
    let written = TestApp::builder()
        .append_database_toml("migrate_on_start = false")
        .write_config()
        .await;
    let out = run_wharf(&["migrate", "--config", written.config_path.to_str().unwrap()]);
    assert_ran(&out, "");
    let db = sqlx::PgPool::connect(&written.database_url).await.unwrap();
    let tables: Vec<String> = sqlx::query_scalar(
        // Tables, not their day partitions.
        "SELECT relname::text FROM pg_class WHERE relkind IN ('r', 'p') AND NOT relispartition
           AND relnamespace = 'public'::regnamespace AND relname LIKE 'webhook%' ORDER BY 1",
    )
    .fetch_all(&db)
    .await
    .unwrap();
    assert_eq!(
        tables,
        ["webhook_inbox", "webhook_outbox", "webhook_payloads"]
    );
}

#[test]
fn adapter_check_prints_the_description() {
    let out = run_wharf(&[
        "adapter",
        "check",
        adapter_file("stripe.wasm").to_str().unwrap(),
    ]);
    assert_ran(&out, "");
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(info["name"], "stripe");
    assert_eq!(info["algorithms"], serde_json::json!(["hmac-sha256"]));
    assert_eq!(info["world"], "wharf:adapter@0.2.0");
    assert_eq!(info["tolerance_past_secs"], 300);

    let garbage = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(garbage.path(), b"\0asm not really").unwrap();
    let out = run_wharf(&["adapter", "check", garbage.path().to_str().unwrap()]);
    assert!(!out.status.success());
}

#[tokio::test]
async fn invalid_configs_stop_at_start_with_a_reason() {
    for (id, secret, message) in [
        ("x", "no-such-set", "no-such-set"),
        ("std", "stripe", "used twice"),
    ] {
        let builder = TestApp::builder().endpoint(id, "stripe", secret, "");
        builder
            .write_config()
            .await
            .assert_refused(&[message])
            .await;
    }
}

#[tokio::test]
async fn config_is_accepted_before_or_after_the_subcommand_and_from_the_environment() {
    let written = TestApp::builder()
        .append_database_toml("migrate_on_start = false")
        .write_config()
        .await;
    let config = written.config_path.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let migrated = run_wharf(&["migrate", "--config", config]);
    assert_ran(&migrated, "");
    for (args, env) in [
        (&["events", "list", "--config", config][..], &[][..]),
        (&["events", "--config", config, "list"], &[]),
        (&["--config", config, "events", "list"], &[]),
        (&["events", "list"], &[("WHARF_CONFIG", config)]),
    ] {
        let out = run_wharf_in(dir.path(), args, env);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            String::from_utf8_lossy(&out.stdout).starts_with("INBOX_ID\tSTATUS"),
            "{args:?}"
        );
    }
}
