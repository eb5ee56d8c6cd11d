//! The console's queries: the events search narrows by each filter, escapes a glob's `%` and
//! `_`, pages by keyset with every event once (also among equal received times) and says when
//! its count stopped; the receivers' answer counts reach `ingest_stats`, add up across
//! flushes and show in the overview; retention deletes old counts.

use std::collections::HashSet;
use std::sync::Arc;

use sqlx::PgPool;
use time::OffsetDateTime;
use uuid::Uuid;
use wharf::config::RetentionConfig;
use wharf::operator::event_detail::detail;
use wharf::operator::event_search::{Search, search, search_counting_up_to};
use wharf::operator::lookup::named;
use wharf::operator::overview::overview;
use wharf::retention::Retention;
use wharf::support::ids;
use wharf::support::metrics::Metrics;

use crate::support::{app::*, database::*, http::*, signing::*};

/// A migrated database of its own, with no server.
async fn migrated() -> PgPool {
    let pool = PgPool::connect(&fresh_database().await).await.unwrap();
    wharf::ingest::MIGRATOR.run(&pool).await.unwrap();
    pool
}

struct Row<'a> {
    endpoint: &'a str,
    event_id: &'a str,
    event_type: &'a str,
    status: &'a str,
    object_id: Option<&'a str>,
    received_at: OffsetDateTime,
}

/// Inserts an inbox row as acceptance would (its id made from its received time).
async fn insert(db: &PgPool, r: Row<'_>) -> Uuid {
    let inbox_id = ids::id_at(r.received_at);
    sqlx::query(
        "INSERT INTO webhook_inbox (inbox_id, provider, endpoint_id, provider_event_id,
             event_type, object_id, received_at, raw_payload_ref, payload_hash,
             matched_secret_version, status)
         VALUES ($1, 'stripe', $2, $3, $4, $5, $6, $1, '\\x00', 'v1', $7)",
    )
    .bind(inbox_id)
    .bind(r.endpoint)
    .bind(r.event_id)
    .bind(r.event_type)
    .bind(r.object_id)
    .bind(r.received_at)
    .bind(r.status)
    .execute(db)
    .await
    .unwrap();
    inbox_id
}

fn ago(minutes: i64) -> OffsetDateTime {
    OffsetDateTime::now_utc() - time::Duration::minutes(minutes)
}

/// The provider event ids a search finds (one page of up to 1,000), newest first.
async fn found(db: &PgPool, s: Search) -> Vec<String> {
    let page = search(db, &s.checked().unwrap(), None, 1000).await.unwrap();
    assert_eq!(page.total, page.events.len() as i64, "the count agrees");
    page.events
        .into_iter()
        .map(|e| e.provider_event_id)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_filter_of_the_events_search_narrows_it() {
    let db = migrated().await;
    let rows = [
        (
            "a",
            "e1",
            "customer.created",
            "PROCESSED",
            Some("cus_1"),
            3000,
        ),
        ("a", "e2", "customer.updated", "FAILED", Some("cus_1"), 200),
        ("b", "e3", "invoice.paid", "PENDING", Some("in_1"), 100),
        ("b", "e4", "customer.deleted", "PROCESSED", None, 50),
        ("a", "e5", "invoice.paid", "PROCESSED", Some("in_2"), 10),
    ];
    for (endpoint, event_id, event_type, status, object_id, minutes) in rows {
        insert(
            &db,
            Row {
                endpoint,
                event_id,
                event_type,
                status,
                object_id,
                received_at: ago(minutes),
            },
        )
        .await;
    }
    let all = found(&db, Search::default()).await;
    assert_eq!(all, ["e5", "e4", "e3", "e2", "e1"], "newest first");
    let by = |f: fn(&mut Search)| {
        let mut s = Search::default();
        f(&mut s);
        s
    };
    assert_eq!(
        found(&db, by(|s| s.endpoint = Some("a".into()))).await,
        ["e5", "e2", "e1"]
    );
    assert_eq!(
        found(&db, by(|s| s.event_type = Some("customer.*".into()))).await,
        ["e4", "e2", "e1"]
    );
    assert_eq!(
        found(&db, by(|s| s.event_type = Some("invoice.paid".into()))).await,
        ["e5", "e3"]
    );
    assert_eq!(
        found(&db, by(|s| s.event_type = Some("*.created".into()))).await,
        ["e1"]
    );
    assert_eq!(
        found(&db, by(|s| s.status = Some("failed".into()))).await,
        ["e2"]
    );
    assert_eq!(
        found(&db, by(|s| s.provider_event_id = Some("e3".into()))).await,
        ["e3"]
    );
    assert_eq!(
        found(&db, by(|s| s.object_id = Some("cus_1".into()))).await,
        ["e2", "e1"]
    );
    // since inclusive, until exclusive, on the received time; e1 is two days back.
    let mut range = Search {
        since: Some(ago(201)),
        until: Some(ago(75)),
        ..Search::default()
    };
    assert_eq!(found(&db, range.clone()).await, ["e3", "e2"]);
    range.since = Some(ago(4000));
    range.endpoint = Some("a".into());
    assert_eq!(found(&db, range).await, ["e2", "e1"]);
    // Filters together, and one that matches nothing.
    let both = Search {
        endpoint: Some("b".into()),
        event_type: Some("customer.*".into()),
        ..Search::default()
    };
    assert_eq!(found(&db, both).await, ["e4"]);
    assert!(
        found(&db, by(|s| s.endpoint = Some("c".into())))
            .await
            .is_empty()
    );
    assert!(
        Search {
            status: Some("DONE".into()),
            ..Search::default()
        }
        .checked()
        .is_err()
    );

    // The event's page, and the lookup by provider event id.
    let e2 = named(&db, "e2", None).await.unwrap();
    assert_eq!(e2.len(), 1);
    let event = detail(&db, e2[0].inbox_id).await.unwrap().expect("found");
    assert_eq!(
        (
            event.provider.as_str(),
            event.matched_secret_version.as_str(),
            event.status.as_str()
        ),
        ("stripe", "v1", "FAILED")
    );
    assert!(!event.payload_stored, "no body was stored for this row");
    assert!(event.deliveries.is_empty() && event.processed_marker.is_none());
    assert!(detail(&db, Uuid::now_v7()).await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_glob_takes_percent_and_underscore_literally() {
    let db = migrated().await;
    let types = ["a%b.x", "a_b.x", "aXb.x", "ab.x", "a\\b.x"];
    for (i, t) in types.iter().enumerate() {
        insert(
            &db,
            Row {
                endpoint: "a",
                event_id: &format!("t{i}"),
                event_type: t,
                status: "PROCESSED",
                object_id: None,
                received_at: ago(10 - i as i64),
            },
        )
        .await;
    }
    let types_of = |glob: &'static str| {
        let db = db.clone();
        async move {
            let s = Search {
                event_type: Some(glob.into()),
                ..Search::default()
            };
            let mut ids = found(&db, s).await;
            ids.sort();
            ids
        }
    };
    assert_eq!(types_of("a%b.*").await, ["t0"]);
    assert_eq!(types_of("a_b.*").await, ["t1"]);
    assert_eq!(types_of("a%b.x").await, ["t0"], "exact, no wildcard");
    assert_eq!(types_of("a\\b.*").await, ["t4"], "a backslash is itself");
    assert_eq!(types_of("a?b.x").await, ["t0", "t1", "t2", "t4"]);
    assert_eq!(types_of("*.x").await, ["t0", "t1", "t2", "t3", "t4"]);
    assert_eq!(types_of("a*").await, ["t0", "t1", "t2", "t3", "t4"]);
    assert!(types_of("b*").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyset_pages_give_every_event_once_even_among_equal_received_times() {
    let db = migrated().await;
    let mut inserted = HashSet::new();
    // 23 events in 5 instants: up to 5 share a received time to the microsecond.
    for i in 0..23 {
        let at = ago(60) + time::Duration::seconds(i / 5);
        inserted.insert(
            insert(
                &db,
                Row {
                    endpoint: if i % 2 == 0 { "even" } else { "odd" },
                    event_id: &format!("k{i}"),
                    event_type: "page.test",
                    status: "PROCESSED",
                    object_id: None,
                    received_at: at,
                },
            )
            .await,
        );
    }
    for (filter, expected) in [
        (Search::default(), 23),
        (
            Search {
                endpoint: Some("even".into()),
                ..Search::default()
            },
            12,
        ),
    ] {
        let mut seen: Vec<Uuid> = Vec::new();
        let mut before = None;
        let mut pages = 0;
        loop {
            let page = search(&db, &filter, before, 4).await.unwrap();
            pages += 1;
            assert_eq!(page.total, expected, "the count is of every page");
            assert!(page.events.len() <= 4);
            seen.extend(page.events.iter().map(|e| e.inbox_id));
            match page.next_before {
                Some(next) => before = Some(next),
                None => break,
            }
            assert!(pages < 20, "paging ends");
        }
        assert_eq!(
            seen.len(),
            expected as usize,
            "no event twice, none left out"
        );
        let distinct: HashSet<Uuid> = seen.iter().copied().collect();
        assert_eq!(distinct.len(), seen.len());
        assert!(distinct.is_subset(&inserted));
        assert!(seen.windows(2).all(|w| w[0] > w[1]), "newest first");
        assert_eq!(pages, (expected as usize).div_ceil(4));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_count_past_its_cap_says_there_are_more() {
    let db = migrated().await;
    for i in 0..12 {
        insert(
            &db,
            Row {
                endpoint: "a",
                event_id: &format!("c{i}"),
                event_type: "count.test",
                status: "PROCESSED",
                object_id: None,
                received_at: ago(30 - i),
            },
        )
        .await;
    }
    let capped = search_counting_up_to(&db, &Search::default(), None, 5, 10)
        .await
        .unwrap();
    assert_eq!(capped.total, 11);
    assert!(capped.total_is_lower_bound());
    assert_eq!(capped.total_text(), "more than 10 matching");
    assert_eq!(capped.events.len(), 5);
    assert!(capped.next_before.is_some());
    let exact = search_counting_up_to(&db, &Search::default(), None, 5, 20)
        .await
        .unwrap();
    assert_eq!((exact.total, exact.total_is_lower_bound()), (12, false));
    assert_eq!(exact.total_text(), "12 matching");
    let page = search(&db, &Search::default(), None, 50).await.unwrap();
    assert_eq!(page.total_text(), "12 matching");
    assert_eq!(page.next_before, None);
}

/// Sums of `ingest_stats.count` by (endpoint, outcome).
async fn counted(db: &PgPool, endpoint: &str, outcome: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT coalesce(sum(count), 0)::int8 FROM ingest_stats
         WHERE endpoint_id = $1 AND outcome = $2",
    )
    .bind(endpoint)
    .bind(outcome)
    .fetch_one(db)
    .await
    .unwrap()
}

async fn post_badly_signed(app: &TestApp, id: &str) -> Answer {
    let body = stripe_event(id);
    let header = stripe_header("whsec_not_the_secret", now(), body.as_bytes());
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answer_counts_reach_the_stats_table_add_up_and_show_in_the_overview() {
    let app = TestApp::builder().start().await;
    let stats = Arc::clone(&app.server.as_ref().expect("running").stats);
    app.accept_stripe("evt_stats_1").await;
    app.accept_stripe("evt_stats_2").await;
    let copy = app.post_stripe("evt_stats_1").await;
    assert_eq!(
        (copy.status, copy.json["status"].as_str()),
        (200, Some("duplicate"))
    );
    post_badly_signed(&app, "evt_stats_3").await.assert_is(
        401,
        "invalid_signature",
        "wrong secret",
    );
    let (headers, body) = signed_stripe_event("evt_stats_4");
    app.post("no-such-endpoint-1", &refs(&headers), body)
        .await
        .assert_is(404, "unknown_endpoint", "unknown");
    stats.flush(&app.db).await.unwrap();
    assert_eq!(counted(&app.db, "stripe", "accepted").await, 2);
    assert_eq!(counted(&app.db, "stripe", "duplicate").await, 1);
    assert_eq!(counted(&app.db, "stripe", "invalid_signature").await, 1);
    assert_eq!(counted(&app.db, "(unknown)", "unknown_endpoint").await, 1);
    assert_eq!(
        scalar_i64(
            &app.db,
            "SELECT count(*) FROM ingest_stats WHERE endpoint_id LIKE 'no-such%'"
        )
        .await,
        0,
        "a path no endpoint serves is never a key"
    );

    // A second flush adds to the rows (as another receiver's would).
    app.accept_stripe("evt_stats_5").await;
    let (headers, body) = signed_stripe_event("evt_stats_6");
    app.post("no-such-endpoint-2", &refs(&headers), body)
        .await
        .assert_is(404, "unknown_endpoint", "unknown");
    stats.flush(&app.db).await.unwrap();
    assert_eq!(counted(&app.db, "stripe", "accepted").await, 3);
    assert_eq!(counted(&app.db, "(unknown)", "unknown_endpoint").await, 2);
    let buckets: i64 = scalar_i64(
        &app.db,
        "SELECT sum(b)::int8 FROM ingest_stats, unnest(latency_buckets) AS b
         WHERE endpoint_id = 'stripe' AND outcome = 'accepted'",
    )
    .await;
    assert_eq!(buckets, 3, "one latency bucket per answer");

    let o = overview(&app.db).await.unwrap();
    for window in [&o.last_hour, &o.last_day] {
        let stripe = window
            .iter()
            .find(|w| w.endpoint_id == "stripe")
            .expect("stripe in the window");
        assert_eq!(
            (stripe.events, stripe.accepted, stripe.duplicate),
            (3, 3, 1)
        );
        assert_eq!(stripe.rejected.get("invalid_signature"), Some(&1));
        let p50 = stripe.ack_p50_ms.expect("a median");
        assert!(p50 > 0.0 && p50 <= stripe.ack_p99_ms.unwrap());
        let unknown = window
            .iter()
            .find(|w| w.endpoint_id == "(unknown)")
            .expect("unknown paths in the window");
        assert_eq!(unknown.rejected_total(), 2);
    }
    let series_accepted: i64 = o.series.iter().map(|p| p.accepted).sum();
    let series_rejected: i64 = o.series.iter().map(|p| p.rejected).sum();
    assert_eq!((series_accepted, series_rejected), (3, 3));
    assert!((288..=289).contains(&o.series.len()));
    assert!(o.series.windows(2).all(|w| w[0].at < w[1].at));
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_deletes_stats_older_than_the_events_days() {
    let db = migrated().await;
    execute(
        &db,
        "INSERT INTO ingest_stats VALUES
             (date_trunc('minute', now()) - interval '40 days', 'a', 'accepted', 5,
              array_fill(0::int8, ARRAY[15])),
             (date_trunc('minute', now()) - interval '1 hour', 'a', 'accepted', 7,
              array_fill(0::int8, ARRAY[15]))",
    )
    .await;
    let pass = Retention::new(
        db.clone(),
        RetentionConfig {
            event_days: 30,
            payload_days: 30,
            ..RetentionConfig::default()
        },
        Arc::new(Metrics::default()),
    )
    .trusting_any_clock()
    .try_execute(OffsetDateTime::now_utc())
    .await
    .unwrap();
    assert_eq!(pass.stats_deleted, 1);
    assert_eq!(
        scalar_i64(&db, "SELECT sum(count)::int8 FROM ingest_stats").await,
        7
    );
}
