//! The one error of the operator queries. A request that is wrong is the caller's to fix
//! (a 400 through the admin API, the message through the command line); a database that
//! failed is not.

use uuid::Uuid;

#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    /// A value not in its list (`status`, `sink`), whatever its case.
    #[error("{field} must be one of {}", .allowed.join(", "))]
    NotOneOf {
        field: &'static str,
        allowed: &'static [&'static str],
    },
    #[error("limit must be 1..={max}")]
    Limit { max: i64 },
    #[error("since must be before until")]
    EmptyRange,
    /// A page cursor that names no delivery.
    #[error("after: no delivery {0} (it names the last delivery of the previous page)")]
    UnknownCursor(Uuid),
    #[error(
        "name delivery ids, or select with a filter (status, target, sink, endpoint, since, \
         until)"
    )]
    NothingSelected,
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

impl OperatorError {
    /// True when the request is at fault, not the database.
    pub fn is_invalid(&self) -> bool {
        !matches!(self, Self::Database(_))
    }
}
