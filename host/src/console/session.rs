//! Console sessions, kept in this process: a random cookie value names one, and the session
//! remembers the role, the token version that signed in (and its digest), when it ends, and
//! the CSRF token its forms carry. A restart signs everyone out; several receivers behind one
//! name need sticky sessions or a sign-in each (`docs/console.md`).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chacha20poly1305::aead::OsRng;
use chacha20poly1305::aead::rand_core::RngCore as _;
use sha2::{Digest as _, Sha256};
use time::OffsetDateTime;

/// Sessions held at once: past it, expired ones go, then the one nearest its end.
const MAX_SESSIONS: usize = 10_000;

/// What a session may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Everything, payloads and replays included.
    Admin,
    /// Everything but payload bodies, and no state change but signing out.
    Viewer,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Admin => "admin",
            Self::Viewer => "viewer",
        }
    }
}

/// One signed-in browser.
#[derive(Debug, Clone)]
pub struct Session {
    pub role: Role,
    /// The token's version in its set (the audit trail names it).
    pub version: String,
    /// SHA-256 of the token: the session ends when no unexpired version of the set holds it.
    pub token_digest: [u8; 32],
    pub expires_at: OffsetDateTime,
    /// Every state-changing form carries it back.
    pub csrf: String,
}

pub struct Sessions {
    by_digest: Mutex<HashMap<[u8; 32], Session>>,
    lifetime: Duration,
}

impl Sessions {
    pub fn new(lifetime: Duration) -> Self {
        Self {
            by_digest: Mutex::default(),
            lifetime,
        }
    }

    pub fn lifetime(&self) -> Duration {
        self.lifetime
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<[u8; 32], Session>> {
        self.by_digest
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// A new session and the cookie value that names it (only its digest is kept).
    pub fn start(
        &self,
        role: Role,
        version: String,
        token_digest: [u8; 32],
        now: OffsetDateTime,
    ) -> (String, Session) {
        let cookie = random_text();
        let session = Session {
            role,
            version,
            token_digest,
            expires_at: now + self.lifetime,
            csrf: random_text(),
        };
        let mut sessions = self.lock();
        if sessions.len() >= MAX_SESSIONS {
            sessions.retain(|_, s| s.expires_at > now);
        }
        if sessions.len() >= MAX_SESSIONS
            && let Some(oldest) = sessions
                .iter()
                .min_by_key(|(_, s)| s.expires_at)
                .map(|(k, _)| *k)
        {
            sessions.remove(&oldest);
        }
        sessions.insert(digest(&cookie), session.clone());
        (cookie, session)
    }

    /// The live session a cookie names; an expired one is forgotten.
    pub fn get(&self, cookie: &str, now: OffsetDateTime) -> Option<Session> {
        let key = digest(cookie);
        let mut sessions = self.lock();
        let session = sessions.get(&key)?;
        if session.expires_at <= now {
            sessions.remove(&key);
            return None;
        }
        Some(session.clone())
    }

    pub fn end(&self, cookie: &str) {
        self.lock().remove(&digest(cookie));
    }
}

fn digest(cookie: &str) -> [u8; 32] {
    Sha256::digest(cookie.as_bytes()).into()
}

/// 32 bytes from the operating system's generator, URL-safe.
fn random_text() -> String {
    let mut bytes = [0u8; 32];
    OsRng.fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_ends_at_its_expiry_and_on_sign_out() {
        let sessions = Sessions::new(Duration::from_secs(60));
        let now = OffsetDateTime::from_unix_timestamp(1_700_000_000).unwrap();
        let (cookie, s) = sessions.start(Role::Viewer, "v1".into(), [7; 32], now);
        assert_ne!(cookie, s.csrf);
        assert!(
            sessions
                .get(&cookie, now + Duration::from_secs(59))
                .is_some()
        );
        assert!(sessions.get("not-a-session", now).is_none());
        assert!(
            sessions
                .get(&cookie, now + Duration::from_secs(60))
                .is_none()
        );
        let (cookie, _) = sessions.start(Role::Admin, "v1".into(), [7; 32], now);
        sessions.end(&cookie);
        assert!(sessions.get(&cookie, now).is_none());
    }
}
