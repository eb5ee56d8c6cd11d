//! Database errors as processing and retention report them: redacted, since the server's message can quote
//! row values. `.redacted()?` turns a sqlx result into one that `?` carries into anyhow.

use super::rows::redact_db;

/// A database error that shows only its redacted form (`redact_db`), whether displayed or
/// debug-printed; it has no source, so no error chain reaches the server's message.
#[derive(thiserror::Error)]
#[error("{}", redact_db(.0))]
pub struct DbError(sqlx::Error);

impl std::fmt::Debug for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("DbError").field(&redact_db(&self.0)).finish()
    }
}

/// `.redacted()` on a sqlx result.
pub trait Redacted<T> {
    fn redacted(self) -> Result<T, DbError>;
}

impl<T> Redacted<T> for Result<T, sqlx::Error> {
    fn redacted(self) -> Result<T, DbError> {
        self.map_err(DbError)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_redacted_message_reaches_anyhow() {
        let failed: Result<(), _> = Err(sqlx::Error::Protocol("row value 'secret'".into()));
        let e = anyhow::Error::from(failed.redacted().unwrap_err());
        for shown in [format!("{e}"), format!("{e:#}"), format!("{e:?}")] {
            assert!(shown.starts_with("database error: protocol"), "{shown}");
            assert!(!shown.contains("secret"), "{shown}");
        }
    }
}
