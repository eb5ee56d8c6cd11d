//! Times the console's queries on a generated data set (`examples/bench-console.sh`): each
//! function the pages call, `RUNS` times, p50 and max; then each once more with Postgres's
//! `auto_explain` on, printing the plans (ANALYZE, BUFFERS) of the statements it ran.
//!
//!   cargo run -q -p wharf --example console_bench -- postgres://…/wharf_console_bench [RUNS]

use std::time::{Duration, Instant};

use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use time::OffsetDateTime;
use uuid::Uuid;
use wharf::operator::deliveries::{self, Filter};
use wharf::operator::event_detail;
use wharf::operator::event_search::{Search, search};
use wharf::operator::lookup;
use wharf::operator::overview::overview;

const PAGE: i64 = 50;

/// One console query, by name.
#[derive(Clone)]
enum Query {
    Events(Search, Option<Uuid>),
    Detail(Uuid),
    ByEventId(String),
    Overview,
    Deliveries(Filter),
}

async fn run(pool: &PgPool, q: &Query) -> usize {
    match q {
        Query::Events(s, before) => search(pool, s, *before, PAGE).await.unwrap().events.len(),
        Query::Detail(id) => event_detail::detail(pool, *id)
            .await
            .unwrap()
            .map_or(0, |d| 1 + d.deliveries.len()),
        Query::ByEventId(id) => lookup::named(pool, id, None).await.unwrap().len(),
        Query::Overview => {
            let o = overview(pool).await.unwrap();
            o.last_day.len() + o.deliveries.len()
        }
        Query::Deliveries(f) => deliveries::list(pool, f, None, PAGE)
            .await
            .unwrap()
            .deliveries
            .len(),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let url = args.next().expect("a database URL");
    let runs: usize = args.next().map_or(7, |r| r.parse().expect("RUNS"));
    let options: PgConnectOptions = url.parse()?;
    // As the admin listener's pool: a statement timeout, the server's default plan caching.
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .connect_with(options.clone().options([("statement_timeout", "10000")]))
        .await?;

    // Values to look for, picked from the data as an operator would paste them.
    let mid: (Uuid, String, Option<String>) = sqlx::query_as(
        "SELECT inbox_id, provider_event_id, object_id FROM webhook_inbox
         WHERE inbox_id >= wharf_uuid_floor(now() - interval '15 days') AND object_id IS NOT NULL
         ORDER BY inbox_id LIMIT 1",
    )
    .fetch_one(&pool)
    .await?;
    let with_delivery: Uuid = sqlx::query_scalar(
        "SELECT inbox_id FROM deliveries WHERE inbox_id >= wharf_uuid_floor(now() - interval '3 days')
         ORDER BY inbox_id LIMIT 1",
    )
    .fetch_one(&pool)
    .await?;
    let deep: Uuid = sqlx::query_scalar("SELECT wharf_uuid_floor(now() - interval '20 days')")
        .fetch_one(&pool)
        .await?;
    let now = OffsetDateTime::now_utc();
    let s = |f: fn(&mut Search)| {
        let mut s = Search::default();
        f(&mut s);
        s
    };
    let queries: Vec<(&str, Query)> = vec![
        ("events: first page", Query::Events(Search::default(), None)),
        (
            "events: endpoint slack (5 %)",
            Query::Events(s(|s| s.endpoint = Some("slack".into())), None),
        ),
        (
            "events: type customer.* (glob)",
            Query::Events(s(|s| s.event_type = Some("customer.*".into())), None),
        ),
        (
            "events: type *.paid (no prefix)",
            Query::Events(s(|s| s.event_type = Some("*.paid".into())), None),
        ),
        (
            "events: type invoice.paid on stripe-live",
            Query::Events(
                s(|s| {
                    s.endpoint = Some("stripe-live".into());
                    s.event_type = Some("invoice.paid".into());
                }),
                None,
            ),
        ),
        (
            "events: status FAILED",
            Query::Events(s(|s| s.status = Some("FAILED".into())), None),
        ),
        (
            "events: provider event id",
            Query::Events(
                Search {
                    provider_event_id: Some(mid.1.clone()),
                    ..Search::default()
                },
                None,
            ),
        ),
        (
            "events: object id",
            Query::Events(
                Search {
                    object_id: mid.2.clone(),
                    ..Search::default()
                },
                None,
            ),
        ),
        (
            "events: one hour 10 days ago",
            Query::Events(
                Search {
                    since: Some(now - time::Duration::days(10)),
                    until: Some(now - time::Duration::days(10) + time::Duration::HOUR),
                    ..Search::default()
                },
                None,
            ),
        ),
        (
            "events: github, 3 days, FAILED",
            Query::Events(
                Search {
                    endpoint: Some("github".into()),
                    status: Some("FAILED".into()),
                    since: Some(now - time::Duration::days(3)),
                    ..Search::default()
                },
                None,
            ),
        ),
        (
            "events: deep page (20 days back)",
            Query::Events(Search::default(), Some(deep)),
        ),
        (
            "events: deep page, endpoint github",
            Query::Events(s(|s| s.endpoint = Some("github".into())), Some(deep)),
        ),
        ("event page (detail)", Query::Detail(with_delivery)),
        (
            "lookup by provider event id",
            Query::ByEventId(mid.1.clone()),
        ),
        ("overview", Query::Overview),
        (
            "deliveries: target, FAILED",
            Query::Deliveries(Filter {
                target: Some("http://billing.internal/stripe".into()),
                status: Some("FAILED".into()),
                ..Filter::default()
            }),
        ),
        (
            "deliveries: target (all)",
            Query::Deliveries(Filter {
                target: Some("http://crm.internal/hooks".into()),
                ..Filter::default()
            }),
        ),
        (
            "deliveries: status PENDING",
            Query::Deliveries(Filter {
                status: Some("PENDING".into()),
                ..Filter::default()
            }),
        ),
    ];

    println!("| query | rows | p50 ms | max ms |");
    println!("|---|---:|---:|---:|");
    for (name, q) in &queries {
        let mut times = Vec::with_capacity(runs);
        let mut rows = 0;
        for _ in 0..runs {
            let started = Instant::now();
            rows = run(&pool, q).await;
            times.push(started.elapsed());
        }
        times.sort();
        println!(
            "| {name} | {rows} | {:.1} | {:.1} |",
            ms(times[times.len() / 2]),
            ms(*times.last().expect("runs"))
        );
    }

    // The plans: auto_explain sends each statement's plan back as a notice, printed by the
    // subscriber below.
    tracing_subscriber::fmt()
        .with_env_filter("sqlx::postgres::notice=info")
        .without_time()
        .with_target(false)
        .with_level(false)
        .init();
    let explained = PgPoolOptions::new()
        .max_connections(1)
        .after_connect(|conn, _| {
            Box::pin(async move {
                for sql in [
                    "LOAD 'auto_explain'",
                    "SET auto_explain.log_min_duration = 0",
                    "SET auto_explain.log_analyze = on",
                    "SET auto_explain.log_buffers = on",
                    "SET auto_explain.log_timing = off",
                    "SET auto_explain.log_level = notice",
                ] {
                    sqlx::query(sql).execute(&mut *conn).await?;
                }
                Ok(())
            })
        })
        .connect_with(options)
        .await?;
    for (name, q) in &queries {
        println!("\n### {name}\n");
        run(&explained, q).await;
    }
    Ok(())
}
