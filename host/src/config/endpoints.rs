//! `[[endpoint]]`: one URL a provider sends to, its adapter, its secret sets and the settings
//! it overrides.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;

use super::problems::{KeyPath, Place, Problem, Problems};
use super::providers::RateLimit;
use super::retention::DEFAULT_REDELIVERY_WINDOW_DAYS;
use super::server::MAX_BODY_BYTES;
use super::worker::ProjectionDocument;

/// The widest replay window an endpoint may configure, either way.
pub const MAX_TOLERANCE_SECS: u64 = 3600;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UnsupportedTypes {
    #[default]
    Reject,
    Ignore,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointConfig {
    pub id: String,
    pub adapter: String,
    pub secret: String,
    pub public_url: Option<String>,
    pub tolerance_secs: Option<u64>,
    pub future_tolerance_secs: Option<u64>,
    pub max_body_bytes: Option<u64>,
    #[serde(default)]
    pub unsupported_types: UnsupportedTypes,
    pub rate_limit: Option<RateLimit>,
    /// Processing attempts before `FAILED` (default: `[worker] max_attempts`).
    pub max_attempts: Option<u32>,
    /// What the projection keeps of this endpoint's events (default: `[worker]
    /// projection_document`).
    pub projection_document: Option<ProjectionDocument>,
    /// Further secret sets a WIT 0.2 adapter's checks may name, by slot (Meta:
    /// `secrets = { verify-token = "meta-verify" }` beside `secret` for the app secret).
    #[serde(default)]
    pub secrets: BTreeMap<String, String>,
    /// Non-secret values the endpoint's adapter may read (`request.setting(name)`).
    #[serde(default)]
    pub settings: Arc<BTreeMap<String, String>>,
    /// Days a copy of an accepted event is answered `duplicate` (default: `[retention]
    /// redelivery_window_days`, filled in when the config is read).
    pub redelivery_window_days: Option<u32>,
}

impl EndpointConfig {
    pub fn redelivery_window_days(&self) -> u32 {
        self.redelivery_window_days
            .unwrap_or(DEFAULT_REDELIVERY_WINDOW_DAYS)
    }

    /// The secret set a check's `key` names: `secret` for none, else `secrets.<slot>`.
    pub fn secret_set(&self, slot: Option<&str>) -> Option<&str> {
        match slot {
            None => Some(&self.secret),
            Some(slot) => self.secrets.get(slot).map(String::as_str),
        }
    }

    /// The `i`th endpoint's own values within range: a value outside would silently weaken a
    /// promise (replay protection, bounded memory). `event_days`: `[retention]`'s, which the
    /// redelivery window may not outlast.
    pub(super) fn range_problems(&self, i: usize, event_days: u32, p: &mut Problems) {
        let at = Place::new(
            KeyPath::root("endpoint").index(i),
            format!("endpoint {:?}: ", self.id),
        );
        macro_rules! within {
            ($field:ident, $range:expr $(, $note:literal)?) => {
                p.knob(
                    &at,
                    stringify!($field),
                    concat!(stringify!($field) $(, " (", $note, ")")?),
                    &self.$field,
                    $range,
                )
            };
        }
        within!(tolerance_secs, 1..=MAX_TOLERANCE_SECS);
        within!(future_tolerance_secs, 0..=MAX_TOLERANCE_SECS);
        within!(max_body_bytes, 1..=MAX_BODY_BYTES);
        within!(
            redelivery_window_days,
            1..=event_days,
            "at most [retention] event_days"
        );
        within!(max_attempts, 1..=100);
        if let Some(limit) = &self.rate_limit {
            let key = KeyPath::root("endpoint").index(i).key("rate_limit");
            limit.problems(p, key, &format!("endpoint {:?}", self.id));
        }
    }
}

/// Ids that are URL-safe and unique, bounded `secrets` and `settings`. Returns the ids.
pub(super) fn problems<'a>(endpoints: &'a [EndpointConfig], p: &mut Problems) -> HashSet<&'a str> {
    let mut ids = HashSet::new();
    for (i, e) in endpoints.iter().enumerate() {
        let key = |k: &str| KeyPath::root("endpoint").index(i).key(k);
        let url_safe = !e.id.is_empty()
            && e.id.len() <= 128
            && e.id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
        p.ensure(url_safe, key("id"), || {
            format!("endpoint id {:?} must be 1-128 of [A-Za-z0-9._-]", e.id)
        });
        p.ensure(ids.insert(e.id.as_str()), key("id"), || {
            format!("endpoint id {:?} is used twice", e.id)
        });
        p.ensure(
            e.secrets.len() <= 8 && e.secrets.keys().all(|k| !k.is_empty() && k.len() <= 64),
            key("secrets"),
            || {
                format!(
                    "endpoint {:?}: at most 8 secrets slots, each named by 1-64 bytes",
                    e.id
                )
            },
        );
        // Settings reach the adapter; bounded so a typo cannot cost every request.
        p.ensure(
            e.settings.len() <= 64
                && e.settings
                    .iter()
                    .all(|(k, v)| !k.is_empty() && k.len() <= 64 && v.len() <= 4096),
            key("settings"),
            || {
                format!(
                    "endpoint {:?}: at most 64 settings, names of 1-64 bytes, values of at most 4096",
                    e.id
                )
            },
        );
    }
    ids
}

/// Endpoints naming a secret set that `sets` (the secrets file's, `file`) lacks.
pub(super) fn missing_secret_sets(
    endpoints: &[EndpointConfig],
    sets: &[&str],
    file: &Path,
) -> Vec<Problem> {
    let mut p = Problems::default();
    for (i, e) in endpoints.iter().enumerate() {
        let slots = std::iter::once(("secret".to_owned(), e.secret.as_str())).chain(
            e.secrets
                .iter()
                .map(|(slot, set)| (format!("secrets.{slot}"), set.as_str())),
        );
        for (key, set) in slots {
            let mut path = KeyPath::root("endpoint").index(i);
            for k in key.splitn(2, '.') {
                path = path.key(k);
            }
            p.ensure(sets.contains(&set), path, || {
                format!(
                    "endpoint {:?}: secret set {:?} is not in {}",
                    e.id,
                    set,
                    file.display()
                )
            });
        }
    }
    p.into_vec()
}

/// An endpoint that sets a freshness window although its adapter signs no timestamp: every
/// request would fail (no timestamp to check) while the operator believes replays are bounded.
pub fn tolerance_without_timestamp(
    endpoint: &EndpointConfig,
    adapter_signs_timestamp: bool,
) -> Option<String> {
    let sets = endpoint.tolerance_secs.is_some() || endpoint.future_tolerance_secs.is_some();
    (sets && !adapter_signs_timestamp).then(|| {
        format!(
            "endpoint {:?}: tolerance_secs/future_tolerance_secs set, but adapter {:?} signs no \
             timestamp; remove them (replay protection then rests on the event id)",
            endpoint.id, endpoint.adapter
        )
    })
}

#[cfg(test)]
mod tests {
    use super::super::testing::config_with;
    use super::*;

    #[test]
    fn a_tolerance_on_an_adapter_without_a_timestamp_is_named() {
        let config = config_with("endpoint", "tolerance_secs = 300\n").unwrap();
        let endpoint = &config.endpoints[0];
        assert!(tolerance_without_timestamp(endpoint, true).is_none());
        let message = tolerance_without_timestamp(endpoint, false).unwrap();
        assert!(message.contains("signs no timestamp"), "{message}");
        let plain = config_with("endpoint", "").unwrap();
        assert!(tolerance_without_timestamp(&plain.endpoints[0], false).is_none());
    }
}
