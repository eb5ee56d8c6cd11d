//! A delivery target made safe to show outside the config: in `/metrics` labels (served
//! without a token), span attributes and log lines.
//!
//! A route's URL may carry a credential: user info (`https://user:pass@host/`), a query token
//! (`?token=…`) or a fragment. Only the sender sees the full URL; everything else shows the
//! scheme, host, port and path, as the sender's own parser reads them.

/// `target` without user info, query and fragment. A NATS subject (no `://`) is returned as it
/// is; a URL the sender cannot parse shows only its scheme, since where its credential ends is
/// unknown.
pub fn safe_url(target: &str) -> String {
    let Some((scheme, _)) = target.split_once("://") else {
        return target.to_owned();
    };
    match reqwest::Url::parse(target) {
        Ok(mut url) if url.has_host() => {
            // Neither can fail on a URL with a host.
            let _ = url.set_username("");
            let _ = url.set_password(None);
            url.set_query(None);
            url.set_fragment(None);
            url.into()
        }
        _ => format!("{}://[unparseable URL]", printable_scheme(scheme)),
    }
}

/// A scheme is letters, digits, `+`, `-` and `.`; anything else is not shown.
fn printable_scheme(scheme: &str) -> &str {
    let valid = !scheme.is_empty()
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b));
    if valid { scheme } else { "?" }
}

#[cfg(test)]
mod tests {
    use super::safe_url;

    #[test]
    fn credentials_are_stripped_and_the_rest_kept() {
        assert_eq!(
            safe_url("https://user:secret@hooks.example.com:8443/in/path?token=abc#frag"),
            "https://hooks.example.com:8443/in/path"
        );
        assert_eq!(safe_url("http://127.0.0.1:9/x?a=1"), "http://127.0.0.1:9/x");
        assert_eq!(safe_url("http://only@host/"), "http://host/");
        assert_eq!(
            safe_url("https://billing.internal/events"),
            "https://billing.internal/events"
        );
        // A subject is not a URL.
        assert_eq!(safe_url("wharf.deliveries.x"), "wharf.deliveries.x");
    }

    #[test]
    fn an_unparseable_url_shows_its_scheme_only() {
        // `/` in a password ends the authority: the sender cannot parse this URL either.
        assert_eq!(
            safe_url("http://user:pa/ss@host/"),
            "http://[unparseable URL]"
        );
        assert_eq!(safe_url("ht tp://secret"), "?://[unparseable URL]");
    }
}
