//! Operator queries: what `wharf events|deliveries|payloads` and the admin API ask of the
//! database, each asked the same way from both, with one error type.
//!
//! - `audit`: the audit trail, a database row per payload read, purge and API replay
//! - `events`: list, show and replay accepted events
//! - `event_search`: the console's events search: filters, a glob over types, keyset pages
//! - `event_detail`: one event for the console's page, typed; lookup by provider event id
//! - `overview`: the console's overview: per endpoint and window, backlog, deliveries, series
//! - `lookup`: an event by its inbox id or its provider's id
//! - `deliveries`: list, show and replay deliveries to route targets, a page at a time
//! - `payloads`: re-encrypt stored payloads under the current key
//! - `shared`: what the queries share: limits, status lists, time ranges, counts for people
//! - `error`: `OperatorError`, a request that is wrong or a database that failed

pub mod audit;
pub mod deliveries;
mod error;
pub mod event_detail;
pub mod event_search;
pub mod events;
pub mod lookup;
pub mod overview;
pub mod payloads;
mod shared;

pub use error::OperatorError;
pub use shared::{
    DEFAULT_REPLAY_LIMIT, MAX_COUNTED, MAX_LIMIT, check_limit, matches_text, thousands,
};
