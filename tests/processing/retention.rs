//! Retention: day partitions made ahead and dropped whole when expired, with an injected clock
//! deciding both the rows' days and the pass's now; a day with unfinished work is kept;
//! duplicates are found across days within the redelivery window; `wharf events purge`.

use std::sync::Arc;

use time::OffsetDateTime;
use wharf::config::RetentionConfig;
use wharf::retention::Retention;
use wharf::support::clock::FixedClock;
use wharf::support::metrics::Metrics;

use crate::support::process::wharf_events;
use crate::support::{app::*, database::*, http::*, signing::*, wait::*};

const DAY: i64 = 86_400;

/// Midnight (UTC) `days` after today's.
fn midnight_in(days: i64) -> i64 {
    let now = OffsetDateTime::now_utc().unix_timestamp();
    now - now.rem_euclid(DAY) + days * DAY
}

/// Posts a Stripe event signed at the app clock's time `t`.
async fn post_at(app: &TestApp, clock: &FixedClock, t: i64, id: &str) -> Answer {
    post_body_at(app, clock, t, stripe_event(id)).await
}

async fn post_body_at(app: &TestApp, clock: &FixedClock, t: i64, body: String) -> Answer {
    clock.set(t);
    let header = stripe_header(STRIPE_SECRET, t, body.as_bytes());
    app.post(
        "stripe",
        &[
            ("stripe-signature", header.as_str()),
            ("content-type", "application/json"),
        ],
        body,
    )
    .await
}

fn retention(app: &TestApp, payload_days: u32, event_days: u32) -> Retention {
    retention_counted(app, payload_days, event_days, Arc::new(Metrics::default()))
}

fn retention_counted(
    app: &TestApp,
    payload_days: u32,
    event_days: u32,
    metrics: Arc<Metrics>,
) -> Retention {
    Retention::new(
        app.db.clone(),
        RetentionConfig {
            payload_days,
            event_days,
            ..RetentionConfig::default()
        },
        metrics,
    )
    .trusting_any_clock()
}

/// How many rows of `table` belong to the given provider event ids.
async fn rows_of(db: &sqlx::PgPool, ids: &[&str]) -> (i64, i64) {
    let ids: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
    let events: i64 =
        sqlx::query_scalar("SELECT count(*) FROM webhook_inbox WHERE provider_event_id = ANY($1)")
            .bind(&ids)
            .fetch_one(db)
            .await
            .unwrap();
    let markers: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM processed_events WHERE provider_event_id = ANY($1)",
    )
    .bind(&ids)
    .fetch_one(db)
    .await
    .unwrap();
    (events, markers)
}

async fn payloads_of(db: &sqlx::PgPool, ids: &[&str]) -> i64 {
    let ids: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
    sqlx::query_scalar(
        "SELECT count(*) FROM webhook_payloads p JOIN webhook_inbox i
           ON i.raw_payload_ref = p.payload_ref WHERE i.provider_event_id = ANY($1)",
    )
    .bind(&ids)
    .fetch_one(db)
    .await
    .unwrap()
}

async fn partition_exists(db: &sqlx::PgPool, name: &str) -> bool {
    scalar_i64(
        db,
        &format!("SELECT count(*) FROM pg_class WHERE relname = '{name}'"),
    )
    .await
        == 1
}

/// The partitions of event tables a pass dropped, sorted (payload days expire sooner, and the
/// empty days made ahead by an earlier pass with them).
fn events_dropped(pass: &wharf::retention::Pass) -> Vec<String> {
    let mut dropped: Vec<String> = pass
        .dropped
        .iter()
        .filter(|t| !t.starts_with("webhook_payloads"))
        .cloned()
        .collect();
    dropped.sort();
    dropped
}

/// The event tables' partitions of one day (`legacy` or `p<date>`), sorted.
fn event_tables(day: &str) -> Vec<String> {
    [
        "deliveries",
        "delivery_attempts",
        "processed_events",
        "webhook_inbox",
        "webhook_outbox",
    ]
    .map(|t| format!("{t}_{day}"))
    .to_vec()
}

fn day_name(unix_midnight: i64) -> String {
    let d = OffsetDateTime::from_unix_timestamp(unix_midnight)
        .unwrap()
        .date();
    format!("p{:04}{:02}{:02}", d.year(), u8::from(d.month()), d.day())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_the_expired_days_are_dropped_and_a_day_with_work_left_is_kept() {
    let clock = FixedClock::new(OffsetDateTime::now_utc().unix_timestamp());
    let app = TestApp::builder().clock(clock.clone()).start().await;
    // The start's pass made tomorrow's partitions and the next ones; today's rows are in
    // the first partition, the one that held everything before partitioning.
    let (d1, d2, d3) = (midnight_in(1), midnight_in(2), midnight_in(3));
    for table in ["webhook_inbox", "webhook_payloads", "deliveries"] {
        assert!(partition_exists(&app.db, &format!("{table}_{}", day_name(d1))).await);
        assert!(partition_exists(&app.db, &format!("{table}_{}", day_name(d2))).await);
    }
    let now = OffsetDateTime::now_utc().unix_timestamp();
    for (t, id) in [
        (now, "evt_today"),
        (d1 + 3600, "evt_d1_a"),
        (d2 - 1, "evt_d1_b"),
        (d2, "evt_d2"),
    ] {
        assert_eq!(post_at(&app, &clock, t, id).await.status, 200, "{id}");
    }
    wait_until_converged(&app.db).await;
    let d1_inbox = format!("webhook_inbox_{}", day_name(d1));
    let in_d1: i64 = scalar_i64(&app.db, &format!("SELECT count(*) FROM {d1_inbox}")).await;
    assert_eq!(in_d1, 2, "each row in its clock's day");

    let at = |unix: i64| OffsetDateTime::from_unix_timestamp(unix).unwrap();
    // Payloads kept 10 days, events 30. Ten days after the end of day 1: its payloads (and
    // today's) go, its events stay.
    let pass = retention(&app, 10, 30)
        .try_execute(at(d2 + 10 * DAY + 60))
        .await
        .unwrap();
    let mut dropped = pass.dropped.clone();
    dropped.sort();
    assert_eq!(
        dropped,
        vec![
            "webhook_payloads_legacy".to_owned(),
            format!("webhook_payloads_{}", day_name(d1))
        ]
    );
    assert!(pass.kept.is_empty());
    assert!(
        pass.created
            .contains(&format!("webhook_inbox_{}", day_name(d2 + 13 * DAY))),
        "made ahead of the injected clock: {:?}",
        pass.created
    );
    assert_eq!(
        payloads_of(&app.db, &["evt_today", "evt_d1_a", "evt_d1_b"]).await,
        0
    );
    assert_eq!(payloads_of(&app.db, &["evt_d2"]).await, 1);
    assert_eq!(
        rows_of(&app.db, &["evt_today", "evt_d1_a", "evt_d1_b", "evt_d2"]).await,
        (4, 4)
    );

    // Day 1 has work left: one of its events is pending again (a replay, say).
    execute(&app.db, "UPDATE webhook_inbox SET status = 'PENDING', next_attempt_at = now() + interval '1 year' WHERE provider_event_id = 'evt_d1_b'").await;
    let metrics = Arc::new(Metrics::default());
    let pass = retention_counted(&app, 10, 30, Arc::clone(&metrics))
        .try_execute(at(d2 + 30 * DAY + 60))
        .await
        .unwrap();
    let text = metrics.render();
    for line in [
        "wharf_retention_partitions_kept{table=\"webhook_inbox\"} 1",
        "wharf_retention_partitions_kept{table=\"webhook_payloads\"} 0",
        "wharf_retention_partitions_dropped_total{table=\"webhook_inbox\"} 1",
        &format!(
            "wharf_retention_ready_until_timestamp_seconds {}",
            d2 + 34 * DAY
        ),
    ] {
        assert!(text.contains(line), "{line} in {text}");
    }
    assert_eq!(
        events_dropped(&pass),
        event_tables("legacy"),
        "today's day is finished and older than 30 days"
    );
    let mut kept = pass.kept.clone();
    kept.sort();
    assert_eq!(
        kept,
        event_tables(&day_name(d1)),
        "day 1 still holds a pending event"
    );
    assert_eq!(rows_of(&app.db, &["evt_today"]).await, (0, 0));
    assert_eq!(rows_of(&app.db, &["evt_d1_a", "evt_d1_b"]).await, (2, 2));

    // Finished (given up on): the day goes whole at the next pass; day 2 has not expired.
    execute(
        &app.db,
        "UPDATE webhook_inbox SET status = 'FAILED' WHERE provider_event_id = 'evt_d1_b'",
    )
    .await;
    let pass = retention(&app, 10, 30)
        .try_execute(at(d3 + 30 * DAY - 60))
        .await
        .unwrap();
    assert!(pass.kept.is_empty());
    assert_eq!(events_dropped(&pass), event_tables(&day_name(d1)),);
    assert!(!partition_exists(&app.db, &d1_inbox).await);
    assert_eq!(rows_of(&app.db, &["evt_d1_a", "evt_d1_b"]).await, (0, 0));
    assert_eq!(rows_of(&app.db, &["evt_d2"]).await, (1, 1));
    assert_eq!(
        payloads_of(&app.db, &["evt_d2"]).await,
        0,
        "its payload expired 10 days after its day"
    );

    // A pass run again at the same time changes nothing.
    let again = retention(&app, 10, 30)
        .try_execute(at(d3 + 30 * DAY - 60))
        .await
        .unwrap();
    assert!(
        again.created.is_empty() && again.dropped.is_empty(),
        "{again:?}"
    );
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_whose_clock_is_far_from_the_databases_drops_nothing() {
    let app = TestApp::builder().start().await;
    app.post_stripe("evt_skew").await.assert_status(200);
    wait_until_converged(&app.db).await;
    // Forty days ahead: by its clock today's day has expired, by the database's it has not.
    let ahead = OffsetDateTime::now_utc() + time::Duration::days(40);
    let pass = Retention::new(
        app.db.clone(),
        RetentionConfig::default(),
        Arc::new(Metrics::default()),
    )
    .try_execute(ahead)
    .await
    .unwrap();
    assert!(pass.clock_skewed, "{pass:?}");
    assert!(pass.dropped.is_empty(), "{:?}", pass.dropped);
    assert_eq!(rows_of(&app.db, &["evt_skew"]).await, (1, 1));
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_is_a_duplicate_across_midnight_and_new_after_the_redelivery_window() {
    let clock = FixedClock::new(OffsetDateTime::now_utc().unix_timestamp());
    let app = TestApp::builder()
        .clock(clock.clone())
        .append_toml("[retention]\nredelivery_window_days = 2\n")
        .start()
        .await;
    let d1 = midnight_in(1);
    let first = post_at(&app, &clock, d1 - 1, "evt_midnight").await;
    assert_eq!(first.json["status"], "accepted", "{:?}", first.json);
    // The next second is the next day's partition, whose own unique index has no such row.
    let copy = post_at(&app, &clock, d1 + 1, "evt_midnight").await;
    assert_eq!(copy.json["status"], "duplicate", "{:?}", copy.json);
    assert_eq!(copy.json["inbox_id"], first.json["inbox_id"]);

    // Two receivers whose clocks straddle midnight get copies of the same events at once:
    // each key's lock makes them take turns, so one row per event.
    let boundary = midnight_in(2);
    let late_clock = FixedClock::new(boundary);
    let other = TestApp::builder()
        .clock(late_clock.clone())
        .database_url(app.config.database_url.clone())
        .append_toml("[retention]\nredelivery_window_days = 2\n")
        .start()
        .await;
    let keys: Vec<String> = (0..20).map(|i| format!("evt_race_{i}")).collect();
    let sends = keys.iter().map(|id| {
        let (app, other, clock, late_clock) = (&app, &other, &clock, &late_clock);
        async move {
            let (a, b) = tokio::join!(
                post_at(app, clock, boundary - 1, id),
                post_at(other, late_clock, boundary, id),
            );
            let mut outcomes = [a.code().to_owned(), b.code().to_owned()];
            outcomes.sort();
            assert_eq!(outcomes, ["accepted", "duplicate"], "{id}");
            assert_eq!(a.json["inbox_id"], b.json["inbox_id"], "{id}");
        }
    });
    futures::future::join_all(sends).await;
    assert_eq!(
        scalar_i64(
            &app.db,
            "SELECT count(*) FROM webhook_inbox WHERE provider_event_id LIKE 'evt_race_%'"
        )
        .await,
        20
    );
    other.shutdown().await;

    // Past the window (2 days), a copy is a new event.
    let at = |unix: i64| OffsetDateTime::from_unix_timestamp(unix).unwrap();
    let later = d1 + 3 * DAY;
    retention(&app, 30, 30)
        .try_execute(at(later))
        .await
        .unwrap();
    let late = post_at(&app, &clock, later, "evt_midnight").await;
    assert_eq!(late.json["status"], "accepted", "{:?}", late.json);
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_deletes_finished_events_before_a_moment_and_skips_unfinished_ones() {
    let app = TestApp::builder().start().await;
    for id in ["evt_purge_1", "evt_purge_2", "evt_purge_3"] {
        app.post_stripe(id).await.assert_status(200);
    }
    wait_until_converged(&app.db).await;
    execute(&app.db, "UPDATE webhook_inbox SET status = 'PENDING', next_attempt_at = now() + interval '1 year' WHERE provider_event_id = 'evt_purge_3'").await;
    let before = OffsetDateTime::now_utc() + time::Duration::seconds(5);
    let before = before
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    let config = app.config.config_path.clone();
    let dry = wharf_events(&["purge", "--before", &before, "--dry-run"], &config);
    let dry: serde_json::Value = serde_json::from_str(&dry).unwrap();
    assert_eq!(dry["events"], 2, "{dry}");
    assert_eq!(dry["payloads"], 2);
    assert_eq!(dry["skipped_unfinished"], 1);
    assert_eq!(
        app.count("webhook_inbox").await,
        3,
        "a dry run deletes nothing"
    );

    let done = wharf_events(&["purge", "--before", &before, "--batch", "1"], &config);
    let done: serde_json::Value = serde_json::from_str(&done).unwrap();
    assert_eq!(done["events"], 2, "{done}");
    assert_eq!(done["dry_run"], false);
    assert_eq!(
        rows_of(&app.db, &["evt_purge_1", "evt_purge_2"]).await,
        (0, 0)
    );
    assert_eq!(app.count("webhook_payloads").await, 1);
    assert_eq!(app.count("webhook_outbox").await, 1);
    assert_eq!(
        payloads_of(&app.db, &["evt_purge_3"]).await,
        1,
        "the unfinished event keeps everything"
    );

    let all = wharf_events(
        &["purge", "--before", &before, "--include-unfinished"],
        &config,
    );
    let all: serde_json::Value = serde_json::from_str(&all).unwrap();
    assert_eq!(all["events"], 1, "{all}");
    assert_eq!(app.count("webhook_inbox").await, 0);
    assert_eq!(app.count("webhook_payloads").await, 0);
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_accepted_before_partitioning_is_processed_and_deduplicated_after_it() {
    use std::borrow::Cow;
    use wharf::ingest::MIGRATOR;

    // The schema as it was before the partitioning migration, with an event accepted on it.
    let url = fresh_database().await;
    let before = sqlx::migrate::Migrator {
        migrations: Cow::Owned(
            MIGRATOR
                .migrations
                .iter()
                .filter(|m| m.version < 20261202000002)
                .cloned()
                .collect(),
        ),
        ..sqlx::migrate::Migrator::DEFAULT
    };
    let db = sqlx::PgPool::connect(&url).await.unwrap();
    before.run(&db).await.unwrap();
    // Written as the release before it wrote them: plain rows, the body sealed for its row.
    let inbox_id = uuid::Uuid::now_v7();
    let payload_ref = uuid::Uuid::now_v7();
    let body = stripe_event("evt_before_upgrade");
    let sealed = test_payload_keys().seal(payload_ref, body.as_bytes());
    sqlx::query(
        "WITH ins AS (
             INSERT INTO webhook_inbox (inbox_id, provider, endpoint_id, provider_event_id,
                 event_type, object_id, raw_payload_ref, payload_hash, matched_secret_version)
             VALUES ($1, 'stripe', 'stripe', 'evt_before_upgrade', 'payment_intent.succeeded',
                 'pi_123', $2, sha256($4), '2026-11')
         ), notice AS (
             INSERT INTO webhook_outbox (outbox_id, inbox_id, topic)
             VALUES ($5, $1, 'stripe.payment_intent.succeeded')
         )
         INSERT INTO webhook_payloads (payload_ref, key_id, body) VALUES ($2, $3, $6)",
    )
    .bind(inbox_id)
    .bind(payload_ref)
    .bind(&sealed.key_id)
    .bind(body.as_bytes())
    .bind(uuid::Uuid::now_v7())
    .bind(&sealed.bytes)
    .execute(&db)
    .await
    .unwrap();
    assert_eq!(
        scalar_i64(
            &db,
            "SELECT count(*) FROM pg_class WHERE relname = 'webhook_inbox' AND relkind = 'r'"
        )
        .await,
        1,
        "a plain table before the upgrade"
    );

    // The new binary starts on it: migrations, partitions, then the event is processed (a
    // row from before links, read under the upgrade setting).
    let app = TestApp::builder()
        .database_url(url)
        .payloads_toml("upgrade_legacy_rows = true")
        .start()
        .await;
    assert_eq!(
        scalar_i64(
            &app.db,
            "SELECT count(*) FROM pg_class WHERE relname = 'webhook_inbox' AND relkind = 'p'"
        )
        .await,
        1,
        "partitioned after it"
    );
    wait_until_converged(&app.db).await;
    assert_eq!(rows_of(&app.db, &["evt_before_upgrade"]).await, (1, 1));
    let copy = app.post_stripe("evt_before_upgrade").await;
    assert_eq!(copy.code(), "duplicate");
    assert_eq!(copy.json["inbox_id"], inbox_id.to_string());
    assert_eq!(
        opened_payload(&app.db, {
            sqlx::query_scalar("SELECT raw_payload_ref FROM webhook_inbox WHERE inbox_id = $1")
                .bind(inbox_id)
                .fetch_one(&app.db)
                .await
                .unwrap()
        })
        .await,
        stripe_event("evt_before_upgrade").into_bytes()
    );
    app.shutdown().await;
}

/// A Stripe event carrying `hex_chars` of hex digits that do not repeat: compressed and
/// sealed, about half that many bytes are stored.
fn padded_stripe_event(id: &str, hex_chars: usize) -> String {
    let mut padding = String::with_capacity(hex_chars + 64);
    let mut i = 0u64;
    while padding.len() < hex_chars {
        padding.push_str(&hex::encode(hmac_sha256(id.as_bytes(), &i.to_be_bytes())));
        i += 1;
    }
    padding.truncate(hex_chars);
    format!(
        r#"{{"id":"{id}","object":"event","type":"payment_intent.succeeded","created":1764480000,"data":{{"object":{{"id":"pi_123","object":"payment_intent","amount":2000,"description":"{padding}"}}}}}}"#
    )
}

/// Out-of-line values in the TOAST table of one partition.
async fn toasted_values(db: &sqlx::PgPool, partition: &str) -> i64 {
    let toast: String =
        sqlx::query_scalar("SELECT reltoastrelid::regclass::text FROM pg_class WHERE relname = $1")
            .bind(partition)
            .fetch_one(db)
            .await
            .unwrap();
    scalar_i64(db, &format!("SELECT count(DISTINCT chunk_id) FROM {toast}")).await
}

/// A sealed payload under a heap page is stored in its row, not in the TOAST table (one
/// write and one read instead of two chunks and a TOAST index each), in the partition that
/// existed at migration and in the days the host makes ahead; a larger one still goes out of
/// line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payload_under_a_page_stays_in_its_row_on_every_day() {
    let clock = FixedClock::new(OffsetDateTime::now_utc().unix_timestamp());
    let app = TestApp::builder().clock(clock.clone()).start().await;
    let now = OffsetDateTime::now_utc().unix_timestamp();
    let d1 = midnight_in(1);
    for (t, id, hex_chars) in [
        (now, "evt_today_small", 7_000),
        (d1 + 3600, "evt_d1_small", 7_000),
        (d1 + 3600, "evt_d1_large", 40_000),
    ] {
        let answer = post_body_at(&app, &clock, t, padded_stripe_event(id, hex_chars)).await;
        assert_eq!(answer.status, 200, "{id}: {:?}", answer.json);
    }
    let stored: Vec<(String, i32)> = all_rows(
        &app.db,
        "SELECT i.provider_event_id, octet_length(p.body) FROM webhook_payloads p
           JOIN webhook_inbox i ON i.raw_payload_ref = p.payload_ref ORDER BY 1",
    )
    .await;
    let size = |id: &str| stored.iter().find(|(i, _)| i == id).map(|(_, n)| *n);
    // Past Postgres's default threshold (about 2 KB), under a page.
    for id in ["evt_d1_small", "evt_today_small"] {
        let n = size(id).expect(id);
        assert!((2_500..7_000).contains(&n), "{id} sealed to {n} bytes");
    }
    assert!(size("evt_d1_large").expect("large") > 9_000);
    assert_eq!(toasted_values(&app.db, "webhook_payloads_legacy").await, 0);
    let d1_payloads = format!("webhook_payloads_{}", day_name(d1));
    assert_eq!(
        toasted_values(&app.db, &d1_payloads).await,
        1,
        "only the payload over a page is out of line"
    );
    app.shutdown().await;
}
