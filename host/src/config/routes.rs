//! `[[route]]`: which processed events go to which sink (an HTTP URL or a NATS subject), and
//! how those deliveries are signed and framed.

use std::collections::{BTreeMap, HashSet};

use serde::Deserialize;

use super::problems::{KeyPath, Place, Problems};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SinkKind {
    Http,
    Nats,
}

impl SinkKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SinkKind::Http => "http",
            SinkKind::Nats => "nats",
        }
    }
}

section! {
    #[derive(Debug, Clone)]
    pub struct RouteConfig as r {
        /// An endpoint id or `*`.
        pub endpoint: String = "*".into(),
        /// Globs over event types.
        pub events: Vec<String> = vec!["*".into()],
        pub sink: SinkKind,
        pub url: Option<String>,
        pub subject: Option<String>,
        /// Per attempt: the whole HTTP exchange, or the wait for the JetStream acknowledgement.
        pub timeout_ms: u64 = 10_000; 1..=300_000,
        pub max_attempts: u32 = 12; 1..=100,
        /// HTTP only: the secret set whose unexpired versions sign every delivery, the Standard
        /// Webhooks way (`webhook-id`, `webhook-timestamp`, `webhook-signature`).
        pub signing_secret: Option<String>,
        /// HTTP only: fixed headers added to every delivery (never one Wharf sets itself).
        pub headers: BTreeMap<String, String> = BTreeMap::new(),
    }
}

/// Headers Wharf sets on a delivery (or that frame the request), which a route's `headers`
/// may not replace; names starting with `wharf-` are reserved too.
pub const RESERVED_DELIVERY_HEADERS: [&str; 15] = [
    "content-type",
    "content-length",
    "host",
    "idempotency-key",
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
    "traceparent",
    "tracestate",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "upgrade",
];
/// Most `headers` one route may add, and the longest value.
pub const MAX_ROUTE_HEADERS: usize = 32;
pub const MAX_ROUTE_HEADER_VALUE: usize = 4096;

impl RouteConfig {
    /// The URL or subject: with the sink, what identifies a delivery of one event.
    pub fn target(&self) -> &str {
        match self.sink {
            SinkKind::Http => self.url.as_deref().unwrap_or_default(),
            SinkKind::Nats => self.subject.as_deref().unwrap_or_default(),
        }
    }

    pub fn matches(&self, endpoint_id: &str, event_type: &str) -> bool {
        (self.endpoint == "*" || self.endpoint == endpoint_id)
            && self.events.iter().any(|g| glob_match(g, event_type))
    }

    /// The `i`th route: an endpoint that exists (`ids`), events, a target its sink can reach
    /// (`nats`: a `[nats]` server is configured), signing and headers for HTTP only.
    fn problems(&self, i: usize, ids: &HashSet<&str>, nats: bool, p: &mut Problems) {
        let key = |k: &str| KeyPath::root("route").index(i).key(k);
        let name = format!(
            "route {} ({} -> {})",
            i + 1,
            self.endpoint,
            self.sink.as_str()
        );
        p.ensure(
            self.endpoint == "*" || ids.contains(self.endpoint.as_str()),
            key("endpoint"),
            || format!("{name}: no endpoint {:?}", self.endpoint),
        );
        p.ensure(!self.events.is_empty(), key("events"), || {
            format!("{name}: events is empty")
        });
        let at = Place::new(KeyPath::root("route").index(i), format!("{name}: "));
        self.knob_problems(p, &at);
        match self.sink {
            SinkKind::Http => {
                let url = self.url.as_deref().unwrap_or_default();
                p.ensure(
                    self.subject.is_none()
                        && (url.starts_with("http://") || url.starts_with("https://")),
                    key(if self.subject.is_some() {
                        "subject"
                    } else {
                        "url"
                    }),
                    || {
                        format!(
                            "{name}: an http route needs url = \"http(s)://...\" and no subject"
                        )
                    },
                );
            }
            SinkKind::Nats => {
                let subject = self.subject.as_deref().unwrap_or_default();
                p.ensure(
                    self.url.is_none() && crate::support::subjects::valid_subject(subject),
                    key(if self.url.is_some() { "url" } else { "subject" }),
                    || {
                        format!(
                            "{name}: a nats route needs a valid subject (no wildcards) and no url"
                        )
                    },
                );
                p.ensure(nats, key("sink"), || {
                    format!("{name}: a nats route needs a [nats] url")
                });
                p.ensure(self.signing_secret.is_none(), key("signing_secret"), || {
                    format!(
                        "{name}: signing_secret applies to http routes only (JetStream \
                         messages are not signed)"
                    )
                });
                p.ensure(self.headers.is_empty(), key("headers"), || {
                    format!("{name}: headers applies to http routes only")
                });
            }
        }
        if let Some(set) = &self.signing_secret {
            p.ensure(!set.is_empty(), key("signing_secret"), || {
                format!("{name}: signing_secret must name a secret set")
            });
        }
        let headers = validate_route_headers(&name, &self.headers).err();
        p.ensure(headers.is_none(), key("headers"), || {
            headers.map(|e| e.to_string()).unwrap_or_default()
        });
    }
}

/// Every route on its own, then the routes that share a target.
pub(super) fn problems(routes: &[RouteConfig], ids: &HashSet<&str>, nats: bool, p: &mut Problems) {
    for (i, r) in routes.iter().enumerate() {
        r.problems(i, ids, nats, p);
    }
    // A delivery is one row per (sink, target), whichever routes planned it, so the routes
    // sharing a target must sign and add headers alike.
    for (i, r) in routes.iter().enumerate() {
        if let Some(other) = routes[..i]
            .iter()
            .position(|o| o.sink == r.sink && o.target() == r.target())
        {
            let o = &routes[other];
            let key = KeyPath::root("route").index(i).key("signing_secret");
            p.ensure(
                o.signing_secret == r.signing_secret && o.headers == r.headers,
                key,
                || {
                    format!(
                        "routes {} and {} send to the same {} target {:?} but differ in \
                         signing_secret or headers: they share one delivery per event, so \
                         give them the same",
                        other + 1,
                        i + 1,
                        r.sink.as_str(),
                        crate::support::shown::safe_url(r.target())
                    )
                },
            );
        }
    }
}

/// A route's fixed `headers`: legal names and values, none Wharf sets itself, bounded.
fn validate_route_headers(route: &str, headers: &BTreeMap<String, String>) -> anyhow::Result<()> {
    anyhow::ensure!(
        headers.len() <= MAX_ROUTE_HEADERS,
        "{route}: headers has {} entries, at most {MAX_ROUTE_HEADERS} allowed",
        headers.len()
    );
    let mut seen = HashSet::new();
    for (name, value) in headers {
        let parsed = http::HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
            anyhow::anyhow!("{route}: headers: {name:?} is not a legal header name")
        })?;
        let lower = parsed.as_str();
        anyhow::ensure!(
            !RESERVED_DELIVERY_HEADERS.contains(&lower) && !lower.starts_with("wharf-"),
            "{route}: headers: {name:?} is set by Wharf itself and cannot be configured \
             (reserved: {}, wharf-*)",
            RESERVED_DELIVERY_HEADERS.join(", ")
        );
        // Names are case-insensitive: "X-Env" and "x-env" would be one header twice.
        anyhow::ensure!(
            seen.insert(lower.to_owned()),
            "{route}: headers: {name:?} is given twice (names are case-insensitive)"
        );
        // Visible ASCII, spaces and tabs only: no CR/LF or other control characters.
        anyhow::ensure!(
            value.len() <= MAX_ROUTE_HEADER_VALUE && http::HeaderValue::from_str(value).is_ok(),
            "{route}: headers: the value of {name:?} must be at most {MAX_ROUTE_HEADER_VALUE} \
             bytes of visible ASCII, spaces and tabs"
        );
    }
    Ok(())
}

/// Matches an event type against a glob in which `*` stands for any run of characters.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let Some((head, rest)) = pattern.split_once('*') else {
        return pattern == text;
    };
    let Some(mut remaining) = text.strip_prefix(head) else {
        return false;
    };
    let mut pieces: Vec<&str> = rest.split('*').collect();
    let tail = pieces.pop().unwrap_or_default();
    for piece in pieces {
        match remaining.find(piece) {
            Some(i) => remaining = &remaining[i + piece.len()..],
            None => return false,
        }
    }
    remaining.len() >= tail.len() && remaining.ends_with(tail)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::Config;
    use super::super::testing::payloads_table;
    use super::*;

    /// A valid config with one route (`route`: its keys) and a `[nats]` table.
    fn config_with_route(route: &str) -> anyhow::Result<Config> {
        let text = format!(
            "[server]\nplain_http = true\n[database]\nurl = \"postgres://x/y\"\n[adapters]\ndir = \"a\"\n\
             [secrets]\nfile = \"s.toml\"\n[nats]\nurl = \"nats://127.0.0.1:4222\"\n\
             [[endpoint]]\nid = \"e\"\nadapter = \"stripe\"\nsecret = \"e\"\n\
             [[route]]\n{route}\n{}",
            payloads_table()
        );
        let config = Config::parse(&text, Path::new("/"))?;
        config.validate()?;
        Ok(config)
    }

    #[test]
    fn route_headers_and_signing_are_checked_naming_the_problem() {
        const HTTP: &str = "sink = \"http\"\nurl = \"http://127.0.0.1:9/x\"\n";
        const NATS: &str = "sink = \"nats\"\nsubject = \"a.b\"\n";
        let ok = config_with_route(&format!(
            "{HTTP}signing_secret = \"down\"\nheaders = {{ \"X-Env\" = \"prod\", Authorization = \"Bearer a b\" }}"
        ))
        .unwrap();
        assert_eq!(ok.routes[0].signing_secret.as_deref(), Some("down"));
        assert_eq!(ok.routes[0].headers["X-Env"], "prod");
        for (route, message) in [
            (
                format!("{NATS}signing_secret = \"down\""),
                "route 1 (* -> nats): signing_secret applies to http routes only",
            ),
            (
                format!("{NATS}headers = {{ x-env = \"prod\" }}"),
                "route 1 (* -> nats): headers applies to http routes only",
            ),
            (
                format!("{HTTP}signing_secret = \"\""),
                "signing_secret must name a secret set",
            ),
            (
                format!("{HTTP}headers = {{ Webhook-Signature = \"v1,x\" }}"),
                "headers: \"Webhook-Signature\" is set by Wharf itself",
            ),
            (
                format!("{HTTP}headers = {{ Wharf-Event-Id = \"x\" }}"),
                "headers: \"Wharf-Event-Id\" is set by Wharf itself",
            ),
            (
                format!("{HTTP}headers = {{ Content-Length = \"1\" }}"),
                "headers: \"Content-Length\" is set by Wharf itself",
            ),
            (
                format!("{HTTP}headers = {{ \"X Env\" = \"prod\" }}"),
                "headers: \"X Env\" is not a legal header name",
            ),
            (
                format!("{HTTP}headers = {{ X-Env = \"prod\\r\\nInjected: 1\" }}"),
                "headers: the value of \"X-Env\" must be at most 4096 bytes of visible ASCII",
            ),
            (
                format!("{HTTP}headers = {{ X-Env = \"a\", x-env = \"b\" }}"),
                "is given twice (names are case-insensitive)",
            ),
            (
                format!("{HTTP}signing_secret = \"a\"\n[[route]]\n{HTTP}signing_secret = \"b\""),
                "routes 1 and 2 send to the same http target \"http://127.0.0.1:9/x\" but differ",
            ),
        ] {
            let error = config_with_route(&route).unwrap_err().to_string();
            assert!(error.contains(message), "{route}: {error}");
            assert!(
                !error.contains("Injected"),
                "a value is never quoted: {error}"
            );
        }
    }

    #[test]
    fn globs() {
        assert!(glob_match("*", "anything"));
        assert!(glob_match("payment_intent.*", "payment_intent.succeeded"));
        assert!(!glob_match("payment_intent.*", "charge.succeeded"));
        assert!(glob_match("a*b*c", "aXXbYYc"));
        assert!(!glob_match("a*b*c", "aXXcYYb"));
        assert!(glob_match("exact", "exact"));
        assert!(!glob_match("ab*ba", "aba"));
    }
}
