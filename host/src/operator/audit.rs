//! The operators' audit trail (`operator_audit`): a row per payload read, purge and admin-API
//! replay, written before the action's result is shown. The log line beside it is for people
//! reading logs; the row is what a log filter cannot switch off.

use serde_json::Value;
use sqlx::PgPool;

use super::error::OperatorError;

/// Who acted: an operating-system account running the CLI, or an admin API client.
#[derive(Debug, Clone)]
pub enum Actor {
    /// The real uid of the process (the owner of `/proc/self`, which `$USER` cannot fake),
    /// with `$USER` beside it as a hint only.
    Process {
        uid: i64,
        user: String,
    },
    AdminApi {
        client: Option<std::net::IpAddr>,
    },
    /// A console session: its role and the token version it signed in with.
    Console {
        role: &'static str,
        version: String,
        client: Option<std::net::IpAddr>,
    },
}

impl Actor {
    /// This process's account.
    pub fn this_process() -> Self {
        use std::os::unix::fs::MetadataExt as _;
        let uid = std::fs::metadata("/proc/self").map_or(-1, |m| i64::from(m.uid()));
        Self::Process {
            uid,
            user: std::env::var("USER").unwrap_or_default(),
        }
    }

    fn text(&self) -> String {
        match self {
            Self::Process { uid, user } => format!("uid {uid} ({user})"),
            Self::AdminApi { client: Some(ip) } => format!("admin-api {ip}"),
            Self::AdminApi { client: None } => "admin-api".to_owned(),
            Self::Console {
                role,
                version,
                client,
            } => {
                let from = client.map(|ip| format!(" {ip}")).unwrap_or_default();
                format!("console {role} (token version {version}){from}")
            }
        }
    }
}

/// Writes one audit row; the caller shows or applies nothing when this fails.
pub async fn record(
    pool: &PgPool,
    action: &str,
    actor: &Actor,
    detail: Value,
) -> Result<(), OperatorError> {
    sqlx::query("INSERT INTO operator_audit (action, actor, detail) VALUES ($1, $2, $3)")
        .bind(action)
        .bind(actor.text())
        .bind(detail)
        .execute(pool)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actors_read_plainly() {
        let process = Actor::Process {
            uid: 1000,
            user: "alice".into(),
        };
        assert_eq!(process.text(), "uid 1000 (alice)");
        let api = Actor::AdminApi {
            client: Some("10.0.0.7".parse().unwrap()),
        };
        assert_eq!(api.text(), "admin-api 10.0.0.7");
        assert!(Actor::this_process().text().starts_with("uid "));
    }
}
