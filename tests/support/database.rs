//! A fresh Postgres database for each test, and queries for assertions.

use sqlx::postgres::PgRow;
use sqlx::{Connection, FromRow, PgConnection, PgPool, Postgres, Transaction};
use tokio::sync::OnceCell;

/// The server that hosts every test's database.
pub fn admin_database_url() -> String {
    std::env::var("WHARF_TEST_DATABASE_URL")
        .or_else(|_| std::env::var("DATABASE_URL"))
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

fn database_url_for(name: &str) -> String {
    let admin = admin_database_url();
    let (base, _) = admin
        .rsplit_once('/')
        .expect("database url with a database name");
    format!("{base}/{name}")
}

static SWEPT: OnceCell<()> = OnceCell::const_new();

/// Creates an empty database for one test. The first call drops what earlier runs left.
pub async fn fresh_database() -> String {
    let mut admin = PgConnection::connect(&admin_database_url())
        .await
        .expect("Postgres must be running: see README (cargo xtask test starts it)");
    SWEPT
        .get_or_init(|| sweep_stale_databases(&mut admin))
        .await;
    let name = format!("wharf_test_{}", uuid::Uuid::now_v7().simple());
    sqlx::query(&format!("CREATE DATABASE \"{name}\""))
        .execute(&mut admin)
        .await
        .expect("create database");
    database_url_for(&name)
}

/// Drops test databases older than an hour: another test binary (or another checkout)
/// may be running now. The name carries a UUIDv7, so it carries its creation time.
async fn sweep_stale_databases(admin: &mut PgConnection) {
    let stale: Vec<String> =
        sqlx::query_scalar("SELECT datname FROM pg_database WHERE datname LIKE 'wharf\\_test\\_%'")
            .fetch_all(&mut *admin)
            .await
            .unwrap_or_default();
    let cutoff = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    for name in stale.into_iter().filter(|n| created_before(n, cutoff)) {
        let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
            .execute(&mut *admin)
            .await;
    }
}

fn created_before(name: &str, cutoff: std::time::SystemTime) -> bool {
    let Some(Ok(id)) = name.strip_prefix("wharf_test_").map(uuid::Uuid::parse_str) else {
        return false;
    };
    let Some(ts) = id.get_timestamp() else {
        return false;
    };
    let (secs, nanos) = ts.to_unix();
    std::time::UNIX_EPOCH + std::time::Duration::new(secs, nanos) < cutoff
}

/// Runs `sql` (no parameters): the rows it touched.
pub async fn execute(db: &PgPool, sql: &str) -> u64 {
    sqlx::query(sql)
        .execute(db)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .rows_affected()
}

/// What a row of a query can be read as.
pub trait Row: for<'r> FromRow<'r, PgRow> + Send + Unpin {}
impl<T: for<'r> FromRow<'r, PgRow> + Send + Unpin> Row for T {}

/// Every row `sql` selects (no parameters).
pub async fn all_rows<T: Row>(db: &PgPool, sql: &str) -> Vec<T> {
    sqlx::query_as(sql)
        .fetch_all(db)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// The first row `sql` selects (no parameters); there must be one.
pub async fn one_row<T: Row>(db: &PgPool, sql: &str) -> T {
    let mut rows = all_rows(db, sql).await;
    assert!(!rows.is_empty(), "no row: {sql}");
    rows.swap_remove(0)
}

/// A transaction that has run `sql` (a `LOCK TABLE ...`): what it holds is held until it
/// commits or drops.
pub async fn holding(db: &PgPool, sql: &str) -> Transaction<'static, Postgres> {
    let mut tx = db.begin().await.unwrap();
    sqlx::query(sql).execute(&mut *tx).await.unwrap();
    tx
}

/// The one number `sql` selects.
pub async fn scalar_i64(db: &PgPool, sql: &str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(db).await.unwrap()
}

/// Rows written and rows read (by index or sequential scans) in the tables whose names
/// match `tables` (a LIKE pattern, so every partition counts), as Postgres publishes them:
/// waits up to 20 s until `written` (inserts plus updates) is at least `written_at_least`,
/// since a connection publishes its statistics when it ends or is idle.
pub async fn table_activity(db: &PgPool, tables: &str, written_at_least: i64) -> TableActivity {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (written, index_read, seq_read): (i64, i64, i64) = sqlx::query_as(
            "SELECT coalesce(sum(n_tup_ins + n_tup_upd), 0)::bigint,
                    coalesce(sum(idx_tup_fetch), 0)::bigint,
                    coalesce(sum(seq_tup_read), 0)::bigint
             FROM pg_stat_user_tables WHERE relname LIKE $1",
        )
        .bind(tables)
        .fetch_one(db)
        .await
        .unwrap();
        if written >= written_at_least || std::time::Instant::now() > deadline {
            return TableActivity {
                written,
                index_read,
                seq_read,
            };
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

#[derive(Debug)]
pub struct TableActivity {
    pub written: i64,
    pub index_read: i64,
    pub seq_read: i64,
}
