//! The console's events search: filters by endpoint, event type (a glob), status, time range,
//! provider event id and object id; newest first, a page at a time by keyset on `inbox_id`
//! (a UUIDv7, so time-ordered and the partition key); how many matched in all, counted up to a
//! cap that a page always says it reached.
//!
//! Every filter goes by an index (migration `…_console.sql`): `(endpoint_id, inbox_id)`,
//! `(event_type text_pattern_ops, inbox_id)`, `(provider_event_id, inbox_id)`,
//! `(object_id, inbox_id)`, `(status, received_at)` and the primary key, and the time range
//! also bounds `inbox_id` so only the partitions of those days are read.

use serde::{Deserialize, Serialize};
use sqlx::{PgPool, Postgres, QueryBuilder};
use time::OffsetDateTime;
use uuid::Uuid;

use super::error::OperatorError;
use super::events::{STATUSES, Summary};
use super::shared::{check_limit, check_range, one_of, thousands};
use crate::support::ids;

/// Which events: every field set must hold. `since` is inclusive, `until` exclusive, both on
/// `received_at`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Search {
    pub endpoint: Option<String>,
    /// A glob over event types: `*` any run of characters, `?` one; every other character,
    /// `%` and `_` included, stands for itself.
    pub event_type: Option<String>,
    pub status: Option<String>,
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub since: Option<OffsetDateTime>,
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub until: Option<OffsetDateTime>,
    pub provider_event_id: Option<String>,
    pub object_id: Option<String>,
}

/// One page of a search, newest first.
#[derive(Debug, Clone, Serialize)]
pub struct SearchPage {
    pub events: Vec<Summary>,
    /// Every event the search matches (all pages, not only those past the cursor), counted up
    /// to `counted_up_to + 1`: above `counted_up_to` means "more than that".
    pub total: i64,
    pub counted_up_to: i64,
    pub limit: i64,
    /// The cursor of the next (older) page: the last event of this one, when there is more.
    pub next_before: Option<Uuid>,
}

impl SearchPage {
    /// True when the count stopped at its cap: there are more matches than `total` says.
    pub fn total_is_lower_bound(&self) -> bool {
        self.total > self.counted_up_to
    }

    /// `12,345 matching` or `more than 100,000 matching`.
    pub fn total_text(&self) -> String {
        if self.total_is_lower_bound() {
            format!("more than {} matching", thousands(self.counted_up_to))
        } else {
            format!("{} matching", thousands(self.total))
        }
    }
}

impl Search {
    /// The search with its status in the stored case and empty fields dropped (a form's empty
    /// inputs), or what is wrong with it.
    pub fn checked(mut self) -> Result<Self, OperatorError> {
        for field in [
            &mut self.endpoint,
            &mut self.event_type,
            &mut self.status,
            &mut self.provider_event_id,
            &mut self.object_id,
        ] {
            if field.as_deref().is_some_and(|v| v.trim().is_empty()) {
                *field = None;
            }
        }
        if let Some(status) = &self.status {
            self.status = Some(one_of("status", status, &STATUSES)?);
        }
        check_range(self.since, self.until)?;
        Ok(self)
    }

    /// ` WHERE ...` with only the conditions set, so each query is planned for what it
    /// filters; `before` continues after a page's last event.
    fn push_where(&self, q: &mut QueryBuilder<'_, Postgres>, before: Option<Uuid>) {
        q.push(" WHERE true");
        if let Some(endpoint) = &self.endpoint {
            q.push(" AND endpoint_id = ").push_bind(endpoint.clone());
        }
        if let Some(glob) = &self.event_type {
            match Glob::parse(glob) {
                Glob::Exact(t) => {
                    q.push(" AND event_type = ").push_bind(t);
                }
                Glob::Pattern {
                    like,
                    prefix,
                    prefix_end,
                } => {
                    // The literal prefix as a range of the pattern-ops index, which a generic
                    // plan can use (a LIKE on a parameter alone cannot).
                    if !prefix.is_empty() {
                        q.push(" AND event_type ~>=~ ").push_bind(prefix);
                        if let Some(end) = prefix_end {
                            q.push(" AND event_type ~<~ ").push_bind(end);
                        }
                    }
                    q.push(" AND event_type LIKE ").push_bind(like);
                }
            }
        }
        if let Some(status) = &self.status {
            q.push(" AND status = ").push_bind(status.clone());
        }
        if let Some(id) = &self.provider_event_id {
            q.push(" AND provider_event_id = ").push_bind(id.clone());
        }
        if let Some(id) = &self.object_id {
            q.push(" AND object_id = ").push_bind(id.clone());
        }
        // An inbox id is made from the received time's millisecond: these bounds hold every
        // match and let the executor skip the other days' partitions.
        if let Some(since) = self.since {
            q.push(" AND inbox_id >= ").push_bind(ids::floor_at(since));
            q.push(" AND received_at >= ").push_bind(since);
        }
        if let Some(until) = self.until {
            q.push(" AND inbox_id < ")
                .push_bind(ids::floor_at(until + time::Duration::milliseconds(1)));
            q.push(" AND received_at < ").push_bind(until);
        }
        if let Some(before) = before {
            q.push(" AND inbox_id < ").push_bind(before);
        }
    }
}

/// Where a page's count stops (then "more than 10,000 matching"): counting a filter that is
/// not an index's whole key (a type on an endpoint, a glob without a prefix) reads a row per
/// match, and 100,000 of them took 400-600 ms on ten million events
/// (docs/console-performance.md); 10,000 keeps every page under 100 ms.
pub const SEARCH_COUNTED: i64 = 10_000;

/// Up to `limit` events the search matches, older than `before` (a previous page's
/// `next_before`), newest first, and how many match in all up to `SEARCH_COUNTED + 1`.
pub async fn search(
    pool: &PgPool,
    search: &Search,
    before: Option<Uuid>,
    limit: i64,
) -> Result<SearchPage, OperatorError> {
    search_counting_up_to(pool, search, before, limit, SEARCH_COUNTED).await
}

/// [`search`] with the count stopping at `count_cap + 1` (a cheaper count, and tests).
pub async fn search_counting_up_to(
    pool: &PgPool,
    search: &Search,
    before: Option<Uuid>,
    limit: i64,
    count_cap: i64,
) -> Result<SearchPage, OperatorError> {
    check_limit(limit)?;
    let mut q = QueryBuilder::new(
        "SELECT inbox_id, status, endpoint_id, event_type, provider_event_id, attempt_count, \
         received_at, last_error FROM webhook_inbox",
    );
    search.push_where(&mut q, before);
    // One more than the page: whether there is a next page without trusting the count.
    q.push(" ORDER BY inbox_id DESC LIMIT ")
        .push_bind(limit + 1);
    let mut events: Vec<Summary> = q.build_query_as().fetch_all(pool).await?;
    let more = events.len() as i64 > limit;
    events.truncate(limit as usize);
    let mut c = QueryBuilder::new("SELECT count(*) FROM (SELECT 1 FROM webhook_inbox");
    search.push_where(&mut c, None);
    c.push(" LIMIT ")
        .push_bind(count_cap + 1)
        .push(") matching");
    let total: i64 = c.build_query_scalar().fetch_one(pool).await?;
    Ok(SearchPage {
        next_before: more.then(|| events.last().map(|e| e.inbox_id)).flatten(),
        events,
        total,
        counted_up_to: count_cap,
        limit,
    })
}

/// A glob as SQL: an exact type, or a LIKE pattern with its literal prefix.
#[derive(Debug, PartialEq, Eq)]
enum Glob {
    Exact(String),
    Pattern {
        /// `*` as `%`, `?` as `_`, and `\`, `%`, `_` escaped (LIKE's escape is `\`).
        like: String,
        /// The characters before the first wildcard.
        prefix: String,
        /// The smallest string above every string starting with `prefix` (byte order), when
        /// there is one.
        prefix_end: Option<String>,
    },
}

impl Glob {
    fn parse(glob: &str) -> Self {
        if !glob.contains(['*', '?']) {
            return Glob::Exact(glob.to_owned());
        }
        let mut like = String::with_capacity(glob.len() + 4);
        for c in glob.chars() {
            match c {
                '*' => like.push('%'),
                '?' => like.push('_'),
                '\\' | '%' | '_' => {
                    like.push('\\');
                    like.push(c);
                }
                c => like.push(c),
            }
        }
        let prefix: String = glob
            .chars()
            .take_while(|c| !matches!(c, '*' | '?'))
            .collect();
        let prefix_end = next_prefix(&prefix);
        Glob::Pattern {
            like,
            prefix,
            prefix_end,
        }
    }
}

/// `prefix` with its last character replaced by the next one: in UTF-8, byte order is code
/// point order, so every string starting with `prefix` sorts below it.
fn next_prefix(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let next = match last as u32 + 1 {
            0xD800 => Some('\u{E000}'),
            n => char::from_u32(n),
        };
        if let Some(next) = next {
            chars.push(next);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_become_escaped_like_patterns_with_a_prefix_range() {
        assert_eq!(
            Glob::parse("customer.created"),
            Glob::Exact("customer.created".into())
        );
        assert_eq!(
            Glob::parse("customer.*"),
            Glob::Pattern {
                like: "customer.%".into(),
                prefix: "customer.".into(),
                prefix_end: Some("customer/".into()),
            }
        );
        assert_eq!(
            Glob::parse("100%_off?\\*"),
            Glob::Pattern {
                like: "100\\%\\_off_\\\\%".into(),
                prefix: "100%_off".into(),
                prefix_end: Some("100%_ofg".into()),
            }
        );
        let Glob::Pattern {
            prefix, prefix_end, ..
        } = Glob::parse("*.created")
        else {
            panic!("a pattern");
        };
        assert_eq!(prefix, "");
        assert_eq!(prefix_end, None);
        assert_eq!(next_prefix("a\u{D7FF}"), Some("a\u{E000}".into()));
        assert_eq!(next_prefix("a\u{10FFFF}"), Some("b".into()));
    }

    #[test]
    fn empty_form_fields_are_no_filter() {
        let s = Search {
            endpoint: Some(String::new()),
            status: Some("failed".into()),
            ..Search::default()
        }
        .checked()
        .unwrap();
        assert_eq!(s.endpoint, None);
        assert_eq!(s.status.as_deref(), Some("FAILED"));
    }
}
