//! `[[provider]]` and rate limits: a token bucket per endpoint, or shared by every endpoint of
//! one adapter.

use std::collections::{BTreeSet, HashSet};

use serde::Deserialize;

use super::problems::{KeyPath, Problems};

/// A token bucket: `burst` requests at once, refilled at `per_second` (fractions allowed:
/// 0.5 is one every 2 s). Per process.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    pub per_second: f64,
    pub burst: u32,
}

/// The largest `per_second` and `burst`: far above what one receiver serves (about 2,000
/// requests/s), so anything larger could only be a typo.
pub const MAX_RATE_LIMIT: u32 = 1_000_000;
/// The smallest `per_second`: one token every 1,000 s.
pub const MIN_RATE_PER_SECOND: f64 = 0.001;

impl RateLimit {
    /// Both numbers within range; `owner` names the endpoint or provider in the message.
    pub(super) fn problems(&self, p: &mut Problems, key: KeyPath, owner: &str) {
        p.range(
            key.clone(),
            &format!("{owner}: rate_limit.per_second"),
            self.per_second,
            MIN_RATE_PER_SECOND..=f64::from(MAX_RATE_LIMIT),
        );
        p.range(
            key,
            &format!("{owner}: rate_limit.burst"),
            self.burst,
            1..=MAX_RATE_LIMIT,
        );
    }
}

/// What one provider's endpoints share: `[[provider]] adapter = "stripe"`, `rate_limit = {..}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// The adapter's name (from `describe`), as endpoints name it in `adapter`.
    pub adapter: String,
    pub rate_limit: RateLimit,
}

impl ProviderConfig {
    /// The `i`th provider's rate limit within range.
    pub(super) fn range_problems(&self, i: usize, p: &mut Problems) {
        let key = KeyPath::root("provider").index(i).key("rate_limit");
        let owner = format!("provider {:?}", self.adapter);
        self.rate_limit.problems(p, key, &owner);
    }
}

/// Each provider configured once, for an adapter some endpoint uses (`adapters`: the names
/// the endpoints use).
pub(super) fn problems(providers: &[ProviderConfig], adapters: &BTreeSet<&str>, p: &mut Problems) {
    let mut seen = HashSet::new();
    for (i, pr) in providers.iter().enumerate() {
        let key = KeyPath::root("provider").index(i).key("adapter");
        p.ensure(seen.insert(&pr.adapter), key.clone(), || {
            format!("provider {:?} is configured twice", pr.adapter)
        });
        // A name no endpoint uses is a typo that would leave the provider unlimited.
        p.ensure(adapters.contains(pr.adapter.as_str()), key, || {
            format!(
                "provider {:?}: no endpoint uses adapter {:?} (adapter names: {})",
                pr.adapter,
                pr.adapter,
                adapters.iter().copied().collect::<Vec<_>>().join(", ")
            )
        });
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::Config;
    use super::super::testing::payloads_table;

    #[test]
    fn providers_name_an_adapter_some_endpoint_uses_once_each() {
        let provider = |adapter: &str| {
            format!(
                "[[provider]]\nadapter = \"{adapter}\"\nrate_limit = {{ per_second = 5, burst = 10 }}\n"
            )
        };
        let parse = |extra: &str| {
            let text = format!(
                "[server]\nplain_http = true\n[database]\nurl = \"postgres://x/y\"\n[adapters]\ndir = \"a\"\n[secrets]\nfile = \"s\"\n\
                 [[endpoint]]\nid = \"e\"\nadapter = \"stripe\"\nsecret = \"e\"\n{extra}{}",
                payloads_table()
            );
            Config::parse(&text, Path::new("/")).and_then(|c| c.validate().map(|()| c))
        };
        let config = parse(&provider("stripe")).unwrap();
        assert_eq!(config.providers[0].adapter, "stripe");
        assert_eq!(config.providers[0].rate_limit.burst, 10);
        let error = parse(&provider("github")).unwrap_err().to_string();
        assert!(
            error.contains("provider \"github\": no endpoint uses adapter \"github\""),
            "{error}"
        );
        let twice = format!("{}{}", provider("stripe"), provider("stripe"));
        let error = parse(&twice).unwrap_err().to_string();
        assert!(error.contains("configured twice"), "{error}");
        let error = parse("[[provider]]\nadapter = \"stripe\"\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("missing field `rate_limit`"), "{error}");
    }
}
